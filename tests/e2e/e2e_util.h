/* SPDX-License-Identifier: Apache-2.0 */
/* e2e_util.h - helpers for the end-to-end suites: a daemon per test case,
 * raw frames, and reference results from tests/ref/ref_ops.py. */
#ifndef GPUQ_E2E_UTIL_H
#define GPUQ_E2E_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuq_internal.h"
#include "testutil.h"

extern tu_daemon e2e_d;
/* Fixture: start/stop a daemon on the test device ($GPUQ_TEST_DEVICE). */
void e2e_setup(void);
void e2e_teardown(void);
/* Same with extra daemon flags. */
void e2e_start(const char *const *extra);
/* Stop the fixture's daemon and start one with extra flags. */
void e2e_restart(const char *const *extra);
/* Connect to e2e_d with a name and priority; aborts on failure. */
gpuq_conn *e2e_connect(const char *name, int priority);
/* A plain socket to e2e_d, no hello. */
int e2e_raw_socket(void);
/* A raw socket that has done its hello (client name given); reply headers
 * are read into hbuf[cap]. */
int e2e_hello_socket(const char *client, uint8_t *hbuf, size_t cap);
/* A float64 1-D normalize (method sum) request of n elements. */
gpuq_request e2e_norm_req(uint64_t n);
/* Send a frame: prefix + header bytes + payload (payload_len may differ from
 * plen to lie about sizes; only plen bytes are sent). */
void e2e_send_frame(int fd, const void *hdr, uint32_t hlen, uint64_t payload_len,
                    const void *payload, size_t plen);
/* Send a request encoded from req. */
void e2e_send_req(int fd, const gpuq_request *req, const void *payload, size_t plen);
/* Append to *buf (realloc'd, *len bytes so far; the caller frees it) the
 * frame e2e_send_req would send for req and payload[plen]: several
 * requests then go to the daemon in one write. */
void e2e_append_req(uint8_t **buf, size_t *len, const gpuq_request *req, const void *payload,
                    size_t plen);
/* What a read from the daemon came to, other than a reply (0). A close and
 * a hang are different outcomes and read differently. */
enum {
    E2E_CLOSED = -1,    /* EOF or ECONNRESET: the daemon closed the connection */
    E2E_TIMED_OUT = -2, /* nothing within the socket's receive timeout: still open */
};
/* Read one reply frame; the payload is discarded. Returns 0, E2E_CLOSED or
 * E2E_TIMED_OUT (raw sockets wait 60 s; any other recv error fails the
 * test). Asserts that every string in the header is UTF-8 (msgpack-c +
 * iconv). */
int e2e_read_reply(int fd, gpuq_reply *rep, uint8_t *hdrbuf, size_t hdrcap);
/* The same, the payload read into data[cap] (asserted to fit), its length
 * into *len. */
int e2e_read_reply_data(int fd, gpuq_reply *rep, uint8_t *hdrbuf, size_t hdrcap, void *data,
                        size_t cap, size_t *len);
/* The same as e2e_read_reply, waiting at most `seconds` for each recv (the
 * socket's own receive timeout is put back afterwards). */
int e2e_read_reply_within(int fd, gpuq_reply *rep, uint8_t *hdrbuf, size_t hdrcap, double seconds);
/* The daemon closed fd: recv sees EOF or a reset within `seconds`. Fails
 * the test if bytes arrive instead, or if nothing happens in time (a hang is
 * told apart from a close, by assertion, well before a test case's timeout). */
void e2e_expect_closed(int fd, double seconds);
/* Called right after reading a final reply: the daemon closes fd at once,
 * within E2E_PROMPT_CLOSE_S. gpuqd closes such a connection when the
 * reply's write completes; the sweep's linger (a backstop, at least 1 s)
 * would close it too, later, so a close that only comes from the linger
 * fails here, and one left open fails by assertion within 5 s. */
#define E2E_PROMPT_CLOSE_S 0.9
void e2e_expect_closed_promptly(int fd);
/* A final error reply, then the close: within 5 s a reply with `code` and
 * `id` arrives (a hang fails as such, not as a close), then
 * e2e_expect_closed_promptly. Returns the reply's message (static buffer).
 * fd is not closed here. */
const char *e2e_expect_error_then_close(int fd, int code, uint64_t id);
/* Check the daemon still serves: a fresh connection pings. */
void e2e_assert_serves(void);
/* Status JSON of a fresh connection into buf. */
void e2e_status(char *buf, size_t cap);
/* A status key's value (e2e_json_int of a fresh status; -1: absent). */
long long e2e_status_int(const char *key);
/* Wait up to timeout_s for status key to be want (fails the test if not). */
void e2e_wait_status(const char *key, long long want, double timeout_s);
/* path exists (lstat: a dangling link does too). */
bool e2e_exists(const char *path);
/* No ".*.gpuqctl-*.tmp" (gpuqctl's output in progress) is left in the
 * daemon's test directory. */
void e2e_no_temp_files(void);
/* The exit status of child pid (128 + signal when killed) within
 * timeout_s; fails the test (after killing it) when it runs longer. */
int e2e_wait_exit(pid_t pid, double timeout_s);
/* Restart the fixture's daemon with extra flags and every job taking ms
 * first (the backends' GPUQ_TEST_SLOW_MS hook). */
void e2e_restart_slow(int ms, const char *const *extra);
/* Integer value of "key": N in a JSON text: among the outermost object's
 * keys, else the first at any depth; -1 if absent. */
long long e2e_json_int(const char *json, const char *key);
/* Reference via python: op args... writes float64 into out (n values). */
void e2e_ref(double *out, size_t n, const char *const *args);
/* Write n doubles to dir/name, return the path (static buffer per call slot). */
const char *e2e_write_f64(const char *name, const double *x, size_t n);

/* Exits 77 (SKIP_RETURN_CODE: ctest reports the test skipped) when the suite
 * targets the CUDA backend, no GPU is present (/dev/nvidiactl) and
 * GPUQ_REQUIRE_GPU is not 1, after saying why; else returns. Call it first in
 * main, before Check forks. */
void e2e_skip_without_gpu(void);

/* Staged-call helpers (test_e2e_stage, test_e2e_gate_stage): a connection
 * with transport t; a malloc'ed buffer of bytes of random f32 (f32) or f64
 * values in [-7, 11); an output buffer of bytes (0x3c) with
 * E2E_GUARD_BYTES of 0xa5 after it, and the check that those are intact. */
#define E2E_GUARD_BYTES 64
gpuq_conn *e2e_conn_with(const char *name, gpuq_transport t);
void *e2e_rand_buf(size_t bytes, int f32);
void *e2e_out_buf(size_t bytes);
/* dir/name for the running daemon's test dir, in one of 16 buffers used in
 * turn (a call's result lasts 15 more calls). */
const char *e2e_dpath(const char *name);
void e2e_guard_intact(const void *buf, size_t bytes, const char *what);

#endif
