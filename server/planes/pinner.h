/* SPDX-License-Identifier: Apache-2.0 */
/* pinner.h - the pinning thread: host memory pinned and unpinned off the
 * loop (issue 28).
 *
 * cudaHostAlloc and cudaHostRegister take milliseconds per GiB, and
 * cudaFreeHost / cudaHostUnregister wait for the whole device: on the loop
 * they would stall every session for as long. The pinner is one thread of
 * gpuqd's own with a job queue: the loop hands it a job (pinner_submit), the
 * thread runs the backend's host memory op, and the job comes back to the
 * loop through a uv_async_t, where its done callback runs.
 *
 * Why a thread of its own and not libuv's thread pool: the CPU backend's
 * jobs fill the pool (backend.h: slots is its size), so a pin would wait
 * behind a long CPU job, and a cudaFreeHost that waits for the device would
 * hold one of the pool's threads meanwhile. One thread also keeps the host
 * memory calls in order and makes the device current once
 * (backend host_thread_init).
 *
 * Order: allocations and registrations (a client waits for them) run before
 * frees, unregistrations and unmaps (nobody waits; a free may wait for the
 * device); each kind in the order submitted.
 *
 * Happy path: pinner_init (thread started, the backend's host_thread_init
 * run on it and checked) -> pinner_submit (loop) -> the op on the thread ->
 * done(job) on the loop -> pinner_close at shutdown: what is queued still
 * runs, the thread is joined, the last done callbacks run on the loop.
 *
 * Failure: a backend without host_thread_init (the tests' fakes) gets no
 * thread: pinner_on() is false and the planes pin on the loop as before.
 * An init that fails (mutex, async, thread, the device) returns a GPUQ_E_*
 * code with why; the daemon does not start. A pin that fails is the job's
 * status and why, for its done callback to turn into an error reply.
 */
#ifndef GPUQ_SERVER_PINNER_H
#define GPUQ_SERVER_PINNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "backend.h"

enum pin_kind {
    PIN_ALLOC,    /* ptr = host_alloc(len) */
    PIN_FREE,     /* host_free(ptr) */
    PIN_REGISTER, /* host_register(ptr, len) */
    PIN_RELEASE,  /* host_unregister(ptr) if registered, then munmap(ptr, len) */
};

typedef struct pin_job pin_job;
struct pin_job {
    enum pin_kind kind;
    void *ptr;
    size_t len;
    bool registered; /* PIN_RELEASE */
    int status;      /* set by the thread: 0 or a GPUQ_E_* code */
    char why[160];   /* one line when status != 0 */
    /* On the loop once the job ran; owns the job from then on (NULL: the
     * pinner frees nothing, the owner keeps the job). */
    void (*done)(pin_job *j);
    pin_job *next;
};

typedef struct pinner {
    backend *b;    /* borrowed */
    bool on;       /* a thread runs the jobs */
    bool async_on; /* async initialised (closed by pinner_close) */
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    uv_async_t async;
    /* under mu: */
    pin_job *urgent, *urgent_tail; /* alloc, register */
    pin_job *lazy, *lazy_tail;     /* free, release */
    pin_job *done, *done_tail;     /* ran, done not yet called */
    bool stop;
    bool init_done;
    int init_rc;
    char init_why[160];
    /* loop thread only */
    uint64_t pending; /* submitted, done not yet called */
    uint64_t jobs;    /* jobs run */
} pinner;

/* Start p's thread for b on loop (p is zeroed here). A backend without
 * host_thread_init: 0 with pinner_on(p) false. Returns 0 or a GPUQ_E_* code
 * with why (nothing left behind). */
int pinner_init(pinner *p, uv_loop_t *loop, backend *b, char *why, size_t cap);
/* Does a thread run p's jobs? False before init, without one, after close. */
bool pinner_on(const pinner *p);
/* Queue j (borrowed until its done ran; p must be on). Loop thread. */
void pinner_submit(pinner *p, pin_job *j);
/* Give host memory of b's host_alloc back: on p's thread when it is on
 * (a job of its own; out of memory for it: at once, logged), else at once. */
void pinner_free_host(pinner *p, backend *b, void *ptr);
/* Shutdown (idempotent): what is queued runs, the thread is joined, the
 * last done callbacks run here (pinner_on is false in them: whatever they
 * release is released at once), the async is closed. Loop thread. */
void pinner_close(pinner *p);

#endif
