/* SPDX-License-Identifier: Apache-2.0 */
/* copy_pool.c - the process's copy threads (see copy_pool.h).
 *
 * Why: one thread moves 7.5 GB/s into a shared mapping, eight about 80, so
 * a blocking call's staging copies of tens of MiB cost milliseconds on one
 * thread and a fraction of one on eight.
 *
 * Happy path: the first copy of COPY_POOL_MIN bytes or more starts the
 * workers (signals blocked in them, so the application's handlers run on
 * its own threads) and registers the fork handlers. Each copy then
 * publishes its segments under the pool's mutex as a new job, wakes the
 * workers, and takes chunks itself: a shared counter hands out chunk
 * numbers, so a worker that wakes late finds fewer chunks left, or none,
 * and nobody waits on it. When the counter runs out, the caller closes the
 * job (no worker may join it any more) and waits for the workers still
 * copying one of its chunks; the chunks are then all copied.
 *
 * Failure: a pool that cannot start (pthread_atfork or the first
 * pthread_create fails) is off for the process and every copy is a plain
 * memcpy; fewer threads than asked, when later creates fail, is fine. A
 * copy that finds the pool busy with another thread's copy does its own
 * by memcpy. A mutex or condition call that fails in the middle of a job
 * means the pool's state is broken: abort.
 *
 * Fork: the prepare handler takes the mutex (never held across a copy),
 * so the child gets the pool's state at rest; the child's handler forgets
 * the parent's workers and leaves a pool to be started anew.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "copy_pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { POOL_NEW, POOL_UP, POOL_OFF };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers: a job was opened, or stop */
    pthread_cond_t idle; /* the caller: the last worker left its job */
    int state;
    bool atfork;    /* the fork handlers are registered (they survive fork) */
    bool fork_held; /* the prepare handler holds mu */
    unsigned nworkers;
    pthread_t tid[COPY_POOL_MAX_THREADS];
    bool stop;       /* workers leave (the library is unloaded) */
    bool busy;       /* a caller owns the job */
    bool open;       /* workers may join the job */
    uint64_t gen;    /* the job's number */
    unsigned inside; /* workers in the job */
    copy_seg seg[COPY_POOL_MAX_SEGS];
    size_t seg_chunks[COPY_POOL_MAX_SEGS];
    unsigned nseg;
    size_t nchunks;
    size_t next;            /* the next chunk to take (atomic) */
    uint64_t worker_chunks; /* atomic */
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
};

static void memcpy_all(const copy_seg *segs, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (segs[k].len)
            memcpy(segs[k].dst, segs[k].src, segs[k].len);
}

static void must(int rc)
{
    if (rc)
        abort(); /* a lock or condition of the pool failed: its state is broken */
}

/* Take chunks of the current job until none is left; returns how many. */
static uint64_t take_chunks(void)
{
    uint64_t done = 0;
    for (;;) {
        size_t k = __atomic_fetch_add(&pool.next, 1, __ATOMIC_RELAXED);
        if (k >= pool.nchunks)
            return done;
        unsigned s = 0;
        while (k >= pool.seg_chunks[s])
            k -= pool.seg_chunks[s++];
        const copy_seg *g = &pool.seg[s];
        size_t off = k * COPY_POOL_CHUNK;
        size_t len = g->len - off < COPY_POOL_CHUNK ? g->len - off : COPY_POOL_CHUNK;
        memcpy((uint8_t *)g->dst + off, (const uint8_t *)g->src + off, len);
        done++;
    }
}

static void *worker(void *arg)
{
    (void)arg;
    uint64_t seen = 0;
    must(pthread_mutex_lock(&pool.mu));
    for (;;) {
        while (!pool.stop && !(pool.open && pool.gen != seen))
            must(pthread_cond_wait(&pool.wake, &pool.mu));
        if (pool.stop)
            break;
        seen = pool.gen;
        pool.inside++;
        must(pthread_mutex_unlock(&pool.mu));
        uint64_t done = take_chunks();
        if (done)
            __atomic_fetch_add(&pool.worker_chunks, done, __ATOMIC_RELAXED);
        must(pthread_mutex_lock(&pool.mu));
        if (--pool.inside == 0)
            must(pthread_cond_signal(&pool.idle));
    }
    must(pthread_mutex_unlock(&pool.mu));
    return NULL;
}

static void fork_prepare(void)
{
    pool.fork_held = pthread_mutex_lock(&pool.mu) == 0;
}

static void fork_parent(void)
{
    if (pool.fork_held && pthread_mutex_unlock(&pool.mu) == 0)
        pool.fork_held = false;
}

/* The child has none of the parent's workers and no job: a pool to start
 * anew (with fresh locks: the parent's are held or have waiters that do
 * not exist here). */
static void fork_child(void)
{
    int state = pool.state == POOL_UP ? POOL_NEW : pool.state;
    if (pthread_mutex_init(&pool.mu, NULL) || pthread_cond_init(&pool.wake, NULL) ||
        pthread_cond_init(&pool.idle, NULL))
        state = POOL_OFF; /* copy_pool_run then copies alone (or, no lock: memcpy) */
    pool.state = state;
    pool.fork_held = false;
    pool.nworkers = 0;
    pool.stop = pool.busy = pool.open = false;
    pool.inside = 0;
}

/* Threads that copy, the caller counted: GPUQ_COPY_THREADS, else
 * min(8, usable CPUs / 2), at least 1. */
static unsigned copy_threads(void)
{
    const char *env = getenv("GPUQ_COPY_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1 && v <= (long)COPY_POOL_MAX_THREADS)
            return (unsigned)v;
    }
    long cpus = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cpus = CPU_COUNT(&set);
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long n = cpus / 2 < 8 ? cpus / 2 : 8;
    return n < 1 ? 1u : (unsigned)n;
}

/* With mu held and state POOL_NEW: start the workers, or turn the pool off. */
static void pool_start(void)
{
    pool.state = POOL_OFF;
    if (!pool.atfork) {
        if (pthread_atfork(fork_prepare, fork_parent, fork_child))
            return; /* no threads that a child could inherit half-way */
        pool.atfork = true;
    }
    unsigned want = copy_threads() - 1;
    sigset_t all, old;
    if (want == 0 || sigfillset(&all) || pthread_sigmask(SIG_SETMASK, &all, &old))
        return;
    pool.stop = false;
    while (pool.nworkers < want &&
           pthread_create(&pool.tid[pool.nworkers], NULL, worker, NULL) == 0)
        pool.nworkers++;
    if (pthread_sigmask(SIG_SETMASK, &old, NULL))
        abort(); /* the caller's own mask, which it set itself, cannot be restored */
    if (pool.nworkers)
        pool.state = POOL_UP;
}

void copy_pool_run(const copy_seg *segs, unsigned n)
{
    size_t total = 0;
    for (unsigned k = 0; k < n; k++)
        total += segs[k].len;
    if (total < COPY_POOL_MIN || n > COPY_POOL_MAX_SEGS || pthread_mutex_lock(&pool.mu)) {
        memcpy_all(segs, n);
        return;
    }
    if (pool.state == POOL_NEW)
        pool_start();
    if (pool.state != POOL_UP || pool.busy) {
        must(pthread_mutex_unlock(&pool.mu));
        memcpy_all(segs, n);
        return;
    }
    pool.nseg = n;
    pool.nchunks = 0;
    for (unsigned k = 0; k < n; k++) {
        pool.seg[k] = segs[k];
        pool.seg_chunks[k] = (segs[k].len + COPY_POOL_CHUNK - 1) / COPY_POOL_CHUNK;
        pool.nchunks += pool.seg_chunks[k];
    }
    pool.next = 0;
    pool.busy = pool.open = true;
    pool.gen++;
    /* as many workers as there are chunks besides the caller's first */
    if (pool.nchunks - 1 >= pool.nworkers) {
        must(pthread_cond_broadcast(&pool.wake));
    } else {
        for (size_t k = 1; k < pool.nchunks; k++)
            must(pthread_cond_signal(&pool.wake));
    }
    must(pthread_mutex_unlock(&pool.mu));
    take_chunks();
    must(pthread_mutex_lock(&pool.mu));
    pool.open = false;
    while (pool.inside)
        must(pthread_cond_wait(&pool.idle, &pool.mu));
    pool.busy = false;
    must(pthread_mutex_unlock(&pool.mu));
}

unsigned copy_pool_workers(void)
{
    must(pthread_mutex_lock(&pool.mu));
    unsigned n = pool.state == POOL_UP ? pool.nworkers : 0;
    must(pthread_mutex_unlock(&pool.mu));
    return n;
}

uint64_t copy_pool_worker_chunks(void)
{
    return __atomic_load_n(&pool.worker_chunks, __ATOMIC_RELAXED);
}

/* libgpuq.so unloaded (dlclose) or the process exiting: no worker may run
 * on in code that is gone. Each finishes the chunk it holds first. */
__attribute__((destructor)) static void copy_pool_fini(void)
{
    if (pthread_mutex_lock(&pool.mu))
        return;
    unsigned n = pool.state == POOL_UP ? pool.nworkers : 0;
    pool.state = POOL_OFF;
    pool.stop = true;
    bool ok = pthread_cond_broadcast(&pool.wake) == 0;
    ok = pthread_mutex_unlock(&pool.mu) == 0 && ok;
    for (unsigned k = 0; ok && k < n; k++)
        if (pthread_join(pool.tid[k], NULL))
            return;
}
