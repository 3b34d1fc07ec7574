/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_client.h - one client of gpuqctl bench (ctl_bench_client.c):
 * a session of its own, its output buffers and requests (in an arena of the
 * session under shm), and the thread that keeps --depth requests in flight
 * until the run's window ends, checking and timing every reply. A client
 * is one of the measured ones, or a streamer (bulk: the background load of
 * --bulk, its own plan, not counted in run->running); a measured client may
 * ping instead (--op ping: gpuq_ping, one at a time, no plan).
 *
 * A client is set up on the main thread (bench_client_setup, after
 * ctl_connect gave it c), runs on its own (bench_client_main), and is read
 * by the main thread only after the join, but for its live_* and hist
 * counters (atomics, for the live line).
 */
#ifndef GPUQ_CLIENT_CTL_BENCH_CLIENT_H
#define GPUQ_CLIENT_CTL_BENCH_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctl_bench_op.h"
#include "ctl_bench_stats.h"

#define BENCH_HIST_BUCKETS 400
#define BENCH_NS 1000000000LL

/* ---- the run, shared by the clients ---- */

typedef struct bench_run {
    int64_t ws_ns;         /* the measured window starts (after the warm-up) */
    _Atomic int64_t we_ns; /* and ends: ws + duration, or when stopped */
    atomic_bool stop;      /* submit no more */
    atomic_int running;    /* measured clients not yet finished (streamers not counted) */
} bench_run;

typedef struct bench_slot {
    gpuq_req *req; /* owned */
    void *out[2];  /* heap (owned) or the client's arena */
    int64_t t_sub;
} bench_slot;

typedef struct bench_client {
    bench_run *run;         /* borrowed */
    const bench_plan *plan; /* borrowed; NULL for a pinging client */
    gpuq_conn *c;           /* owned */
    bool bulk;              /* a streamer: not counted in run->running */
    bool shm;               /* its arrays in an arena of c (owned by c) */
    unsigned depth;
    bench_slot *slots; /* owned, depth of them */
    gpuq_result *res;  /* owned */
    pthread_t thread;
    bool started;
    /* what it measured, read after the join */
    bench_samples lat; /* in-window successes' latencies (us) */
    uint64_t replies;  /* every reply read: one in 64 is scanned whole */
    uint64_t errors;
    int first_code;
    int64_t first_ns;
    char first[512];
    /* for the live line, read while it runs */
    _Atomic uint64_t live_ok, live_err;
    _Atomic uint64_t hist[BENCH_HIST_BUCKETS];
} bench_client;

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);
/* The live line's histogram: the bucket of a latency (us, ~5 % wide) and
 * a bucket's middle value. */
int bench_hist_bucket(double us);
double bench_hist_value(int b);

/* cl->run, cl->plan, cl->c, cl->depth (and cl->bulk) set: its buffers
 * and requests (none without a plan: it pings); the arrays
 * in an arena of cl->c under shm (auto: when gpuqd offers arenas and they
 * come to GPUQ_SHM_MIN_BYTES), else the heap (inputs: the plan's, shared).
 * Latencies stored up to cap_max, then a reservoir seeded by seed. 0, or an
 * error code with why[cap] set. bench_client_free frees what it made,
 * whether it succeeded or not, and closes cl->c. */
int bench_client_setup(bench_client *cl, int transport, size_t cap_max, uint64_t seed, char *why,
                       size_t cap);
void bench_client_free(bench_client *cl);
/* One request of cl's first slot, submitted and read on the calling
 * thread before any client runs (--input: the first reply, the reference
 * of the others, and the one error an input the op refuses gives). 0, or
 * the reply's error code with gpuqd's message in why. The reply is in
 * cl->res and the slot's outputs. */
int bench_client_probe(bench_client *cl, char *why, size_t cap);
/* Forget what cl measured (latencies, errors, live counters), between two
 * runs of the same clients (--baseline); its buffers and session stay. */
void bench_client_reset(bench_client *cl);
/* The client's thread (pthread_create's start routine, arg a
 * bench_client): submit and read until the window ends or run->stop, then
 * read what is outstanding; decrements run->running at the end (a
 * measured client). Without a plan: gpuq_ping round trips, one at a time;
 * a failed ping is an error and ends the client. */
void *bench_client_main(void *arg);

#endif
