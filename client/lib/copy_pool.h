/* SPDX-License-Identifier: Apache-2.0 */
/* copy_pool.h - memcpy spread over a few threads, for the staging copies
 * (stage.c) into and out of a connection's arena.
 *
 * One pool per process, started on the first copy that is large enough:
 * the copy is cut into chunks of COPY_POOL_CHUNK bytes that the caller and
 * the pool's threads take in turn, and the call returns when every chunk
 * is done. A copy of less than COPY_POOL_MIN bytes, a copy while another
 * thread's copy has the pool, and any copy in a process whose pool could
 * not start are one memcpy per segment on the caller's thread. The result
 * is memcpy's, byte for byte.
 *
 * Threads that copy (the caller counted): min(16, usable CPUs - 2), at
 * least 1 (two CPUs are left to gpuqd's loop and I/O threads, which serve
 * the call); the environment's GPUQ_COPY_THREADS (1..64) at the pool's
 * start overrides it (1: never a thread). One copy takes at most one
 * thread per COPY_POOL_PER_THREAD bytes. Chunks are copied with streaming
 * stores on x86-64 (GPUQ_COPY_NT=0: memcpy), and the workers poll for the
 * next job for COPY_POOL_SPIN_US after one ended (GPUQ_COPY_SPIN_US; both
 * read at the pool's start), or until the copy a blocking call expects
 * (copy_pool_expect). A child after fork starts a pool of
 * its own when it first needs one; it never waits on its parent's threads.
 */
#ifndef GPUQ_CLIENT_COPY_POOL_H
#define GPUQ_CLIENT_COPY_POOL_H

#include <stddef.h>
#include <stdint.h>

#define COPY_POOL_CHUNK ((size_t)256 << 10) /* bytes a thread takes at a time */
#define COPY_POOL_MIN ((size_t)1 << 20)     /* below: one memcpy on the caller's thread */
/* A copy takes one thread per this many bytes (the caller's first counted):
 * a 4 MiB copy waits for eight threads' wake-ups and polls, not sixteen. */
#define COPY_POOL_PER_THREAD ((size_t)512 << 10)
#define COPY_POOL_MAX_SEGS 4u /* segments of one copy (more: memcpy) */
#define COPY_POOL_MAX_THREADS 64u
/* How long a worker polls for the next job after one ended (microseconds;
 * GPUQ_COPY_SPIN_US, 0..1000000, overrides it at the pool's start; 0:
 * workers sleep at once). */
#define COPY_POOL_SPIN_US 300

/* One memcpy: len bytes from src to dst (borrowed; they must not overlap). */
typedef struct copy_seg {
    void *dst;
    const void *src;
    size_t len;
} copy_seg;

/* Copy every segment of segs[n] (borrowed for the call), as memcpy would,
 * on up to the pool's threads when they come to COPY_POOL_MIN bytes or
 * more. Returns when all bytes are copied; never fails (the fallback is
 * memcpy on this thread). Safe from several threads at once. */
void copy_pool_run(const copy_seg *segs, unsigned n);

/* Polling that a blocking call's copy out may have (copy_pool_expect), at
 * most: a longer wait is slept through (the copy then wakes the workers). */
#define COPY_POOL_EXPECT_MAX_US 2000

/* A copy of `bytes` is expected within `ns` from now (a blocking call's
 * copy out, once gpuqd has answered): the workers that poll after the last
 * copy poll on until then instead of going to sleep, so that copy does not
 * wait for threads woken from sleep (on a VM's idle CPUs they start late
 * enough to leave their chunks to the others). Nothing when bytes is under
 * COPY_POOL_MIN (that copy is one memcpy), ns over COPY_POOL_EXPECT_MAX_US,
 * the spin is off (GPUQ_COPY_SPIN_US=0) or the pool is not up. */
void copy_pool_expect(size_t bytes, uint64_t ns);

/* The workers (of nworkers) a copy of total bytes takes beside its caller:
 * one per COPY_POOL_PER_THREAD bytes past the caller's share. */
unsigned copy_pool_share(size_t total, unsigned nworkers);

/* For tests. The pool's worker threads alive in this process (0 before the
 * first large copy, after fork until the child's first, or when threads
 * could not start); threads that copy = workers + 1. */
unsigned copy_pool_workers(void);
/* How long workers that copied last poll on from now (0: the window is over). */
uint64_t copy_pool_poll_left_ns(void);
/* copy_pool_expect calls that took effect in this process so far. */
uint64_t copy_pool_expects(void);
/* Chunks the workers (not callers) have copied in this process so far. */
uint64_t copy_pool_worker_chunks(void);

#endif
