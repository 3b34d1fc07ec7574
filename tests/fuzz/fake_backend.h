/* SPDX-License-Identifier: Apache-2.0 */
/* fake_backend.h - a deterministic backend for driving gpuqd's request path
 * in one thread (the session fuzzer): no CUDA, no thread pool.
 *
 * Happy path: submit checks the job (its backend session is open, its input
 * and output lie inside memory this backend handed out, no other unfinished
 * job overlaps them) and queues it. The caller decides when and how each
 * queued job ends (fake_backend_finish: status 0 or an error); a finished
 * job is completed ON THE LOOP THREAD at the next loop iteration, through a
 * uv_async (as the CUDA backend's completion queue is). A job that ends with
 * status 0 gets fake_fill_output() as its output, so a reply payload
 * can be checked against the request's input without running the op.
 *
 * Failure injection: the next submit, host_alloc or session_open fails on
 * request; a "lost device" sets b->lost. Every breach of the backend
 * contract by the server (a session closed while it has jobs, a job on a
 * closed session, staging that overlaps another job's, memory freed that was
 * not allocated here, destroy with jobs in flight) aborts.
 *
 * Accounting lives in a fake_stats the caller owns, so it can be read after
 * the server destroyed the backend: host bytes, sessions and jobs must all be
 * back to zero at the end.
 */
#ifndef GPUQ_TESTS_FAKE_BACKEND_H
#define GPUQ_TESTS_FAKE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct fake_stats {
    uint64_t host_bytes; /* host_alloc'd and not yet freed */
    uint64_t host_allocs, host_frees;
    int64_t sessions; /* backend sessions open */
    uint64_t opened;  /* session_open calls that succeeded */
    uint64_t submitted, completed;
    bool destroyed; /* destroy was called */
    bool closed;    /* ...and its uv_async close callback ran */
} fake_stats;

enum { FAKE_FAIL_SUBMIT, FAKE_FAIL_ALLOC, FAKE_FAIL_OPEN, FAKE_FAIL_COUNT };

/* A backend on loop that completes through done; st (borrowed) must outlive
 * it. NULL on allocation failure. */
backend *fake_backend_create(uv_loop_t *loop, backend_complete_fn done, fake_stats *st);
/* Jobs submitted and not yet finished (not counting finished ones waiting
 * for the loop). */
size_t fake_backend_queued(backend *b);
/* Finish queued job idx (modulo the number queued, in submit order) with
 * status (0 or a GPUQ_E_* code). Returns 0, or -1 when none is queued. */
int fake_backend_finish(backend *b, size_t idx, int status);
/* Finish every queued job with status. */
void fake_backend_finish_all(backend *b, int status);
/* On: every job is finished with status 0 as it is submitted. */
void fake_backend_set_auto(backend *b, bool on);
/* The next call of the given kind (FAKE_FAIL_*) fails. */
void fake_backend_fail_next(backend *b, int what);
/* A sticky device error: sets b->lost (the server fails what completes
 * from then on with device_lost and drains). */
void fake_backend_lose(backend *b, const char *reason);

/* FNV-1a over n bytes, continuing from h (start with FAKE_HASH_INIT). */
#define FAKE_HASH_INIT 0xcbf29ce484222325ull
uint64_t fake_hash(uint64_t h, const void *p, size_t n);
/* The n output bytes of a job that succeeded, from its request id and the
 * hash of its input bytes. */
void fake_fill_output(uint64_t id, uint64_t in_hash, uint8_t *out, uint64_t n);

#endif
