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
 * Chunks are copied with streaming (non-temporal) stores on x86-64: the
 * destination is not read soon (the daemon's DMA reads the arena; the
 * caller reads its result much later), so its lines are not first read
 * into the cache; each thread fences its stores before it reports its
 * chunks done (GPUQ_COPY_NT=0: memcpy).
 *
 * Spin: a worker that copied waits for the next job by polling for
 * GPUQ_COPY_SPIN_US (COPY_POOL_SPIN_US by default; 0: never) after the
 * job ended, or until the copy a blocking call expects (copy_pool_expect,
 * when it is due within COPY_POOL_EXPECT_MAX_US), then sleeps on the
 * condition. A blocking call's copy out
 * follows its copy in by the request's device time (a quarter of a
 * millisecond for 4 MiB each way), and a worker woken from sleep on a
 * virtual machine's idle CPU starts late enough to leave its chunks to
 * the others (4 MiB each way took 500 us with eight threads asleep, about
 * what one thread takes).
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
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define COPY_HAVE_NT 1
#endif

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
    bool stop;           /* workers leave (the library is unloaded); atomic */
    bool busy;           /* a caller owns the job */
    bool open;           /* workers may join the job */
    uint64_t gen;        /* the job's number; written under mu, atomic (spinners read it) */
    bool nt;             /* streaming stores (GPUQ_COPY_NT) */
    uint64_t spin_ns;    /* GPUQ_COPY_SPIN_US */
    uint64_t spin_until; /* workers poll until then (CLOCK_MONOTONIC ns); atomic */
    unsigned inside;     /* workers in the job */
    unsigned want;    /* workers the job takes: one per COPY_POOL_PER_THREAD bytes past the first */
    unsigned joined;  /* workers that joined it */
    unsigned polling; /* workers polling for the next job (they need no signal) */
    copy_seg seg[COPY_POOL_MAX_SEGS];
    size_t seg_chunks[COPY_POOL_MAX_SEGS];
    unsigned nseg;
    size_t nchunks;
    size_t next;            /* the next chunk to take (atomic) */
    uint64_t worker_chunks; /* atomic */
    uint64_t expects;       /* copy_pool_expect calls that took effect (under mu) */
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* memcpy of one chunk, with streaming stores where the pool uses them:
 * the destination's first bytes up to a 16-byte boundary and its last
 * partial 64 bytes by memcpy, the rest 64 bytes at a time. */
static void copy_chunk(uint8_t *d, const uint8_t *s, size_t n)
{
#ifdef COPY_HAVE_NT
    if (pool.nt && n >= 4096) {
        size_t head = (16 - ((uintptr_t)d & 15)) & 15;
        memcpy(d, s, head);
        d += head, s += head, n -= head;
        size_t body = n & ~(size_t)63;
        for (size_t i = 0; i < body; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
            _mm_stream_si128((__m128i *)(d + i), a);
            _mm_stream_si128((__m128i *)(d + i + 16), b);
            _mm_stream_si128((__m128i *)(d + i + 32), c);
            _mm_stream_si128((__m128i *)(d + i + 48), e);
        }
        memcpy(d + body, s + body, n - body);
        return;
    }
#endif
    memcpy(d, s, n);
}

/* This thread's streaming stores are visible before what it publishes next. */
static void copy_fence(void)
{
#ifdef COPY_HAVE_NT
    if (pool.nt)
        _mm_sfence();
#endif
}

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
        copy_chunk((uint8_t *)g->dst + off, (const uint8_t *)g->src + off, len);
        done++;
    }
}

/* With mu held: a job ended, so the workers poll for the next one until
 * spin_ns from now (set by each thread of the job as it leaves: a worker
 * that leaves last must not find the caller's older window). */
static void spin_from_now(void)
{
    if (pool.spin_ns)
        __atomic_store_n(&pool.spin_until, mono_ns() + pool.spin_ns, __ATOMIC_RELAXED);
}

/* Poll until a job after job gen is published, the pool stops, or the
 * spin window (until) ends. Without mu. */
static void spin_wait(uint64_t gen, uint64_t until)
{
    for (unsigned i = 1;; i++) {
        if (__atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE) != gen ||
            __atomic_load_n(&pool.stop, __ATOMIC_RELAXED))
            return;
#ifdef COPY_HAVE_NT
        _mm_pause();
#endif
        if ((i & 63) == 0 && mono_ns() >= until)
            return;
    }
}

static void *worker(void *arg)
{
    (void)arg;
    uint64_t seen = 0;
    bool copied = false; /* in the last job it saw: it polls for the next */
    must(pthread_mutex_lock(&pool.mu));
    for (;;) {
        while (!pool.stop && !(pool.open && pool.gen != seen)) {
            if (pool.gen != seen) { /* a job it missed (closed already): needed no more */
                seen = pool.gen;
                copied = false;
            }
            uint64_t until = __atomic_load_n(&pool.spin_until, __ATOMIC_RELAXED), gen = pool.gen;
            if (copied && until && mono_ns() < until) {
                pool.polling++;
                must(pthread_mutex_unlock(&pool.mu));
                spin_wait(gen, until);
                must(pthread_mutex_lock(&pool.mu));
                pool.polling--;
                continue; /* a job, the stop, a window moved on, or sleep */
            }
            must(pthread_cond_wait(&pool.wake, &pool.mu));
        }
        if (pool.stop)
            break;
        seen = pool.gen;
        copied = pool.joined < pool.want;
        if (!copied)
            continue; /* the job has the threads its size calls for */
        pool.joined++;
        pool.inside++;
        must(pthread_mutex_unlock(&pool.mu));
        uint64_t done = take_chunks();
        copy_fence();
        if (done)
            __atomic_fetch_add(&pool.worker_chunks, done, __ATOMIC_RELAXED);
        must(pthread_mutex_lock(&pool.mu));
        spin_from_now();
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
    pool.inside = pool.polling = 0;
}

/* Threads that copy, the caller counted: GPUQ_COPY_THREADS, else
 * min(16, usable CPUs - 2), at least 1. */
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
    long n = cpus - 2 < 16 ? cpus - 2 : 16;
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
    const char *nt = getenv("GPUQ_COPY_NT"), *spin = getenv("GPUQ_COPY_SPIN_US");
    pool.nt = !(nt && strcmp(nt, "0") == 0);
    pool.spin_ns = (uint64_t)COPY_POOL_SPIN_US * 1000u;
    if (spin && *spin) {
        char *end;
        long v = strtol(spin, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 1000000)
            pool.spin_ns = (uint64_t)v * 1000u;
    }
    while (pool.nworkers < want &&
           pthread_create(&pool.tid[pool.nworkers], NULL, worker, NULL) == 0)
        pool.nworkers++;
    if (pthread_sigmask(SIG_SETMASK, &old, NULL))
        abort(); /* the caller's own mask, which it set itself, cannot be restored */
    if (pool.nworkers)
        pool.state = POOL_UP;
}

void copy_pool_expect(size_t bytes, uint64_t ns)
{
    if (bytes < COPY_POOL_MIN || ns > (uint64_t)COPY_POOL_EXPECT_MAX_US * 1000u ||
        pthread_mutex_lock(&pool.mu))
        return;
    /* after copy_pool_run returned: every worker of that job has set its
     * window already (spin_from_now), so this one is not cut short */
    uint64_t until = mono_ns() + ns;
    if (pool.state == POOL_UP && pool.spin_ns) {
        pool.expects++;
        if (__atomic_load_n(&pool.spin_until, __ATOMIC_RELAXED) < until)
            __atomic_store_n(&pool.spin_until, until, __ATOMIC_RELAXED);
    }
    must(pthread_mutex_unlock(&pool.mu));
}

unsigned copy_pool_share(size_t total, unsigned nworkers)
{
    size_t per = (total + COPY_POOL_PER_THREAD - 1) / COPY_POOL_PER_THREAD;
    return per < 1 ? 0 : per - 1 < nworkers ? (unsigned)(per - 1) : nworkers;
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
    pool.want = copy_pool_share(total, pool.nworkers);
    pool.joined = 0;
    pool.busy = pool.open = true;
    __atomic_add_fetch(&pool.gen, 1, __ATOMIC_RELEASE);
    /* the workers it takes: those polling join without a signal; if more
     * are needed, every sleeper is woken at once after the unlock (one
     * call, where a signal each would hold up this thread's own copying;
     * those beyond the job's share find it full and sleep again) */
    bool wake = pool.want > pool.polling;
    must(pthread_mutex_unlock(&pool.mu));
    if (wake)
        must(pthread_cond_broadcast(&pool.wake));
    take_chunks();
    copy_fence();
    must(pthread_mutex_lock(&pool.mu));
    pool.open = false;
    while (pool.inside)
        must(pthread_cond_wait(&pool.idle, &pool.mu));
    pool.busy = false;
    spin_from_now();
    must(pthread_mutex_unlock(&pool.mu));
}

unsigned copy_pool_workers(void)
{
    must(pthread_mutex_lock(&pool.mu));
    unsigned n = pool.state == POOL_UP ? pool.nworkers : 0;
    must(pthread_mutex_unlock(&pool.mu));
    return n;
}

uint64_t copy_pool_poll_left_ns(void)
{
    uint64_t until = __atomic_load_n(&pool.spin_until, __ATOMIC_RELAXED), now = mono_ns();
    return until > now ? until - now : 0;
}

uint64_t copy_pool_expects(void)
{
    must(pthread_mutex_lock(&pool.mu));
    uint64_t n = pool.expects;
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
    __atomic_store_n(&pool.stop, true, __ATOMIC_RELAXED);
    bool ok = pthread_cond_broadcast(&pool.wake) == 0;
    ok = pthread_mutex_unlock(&pool.mu) == 0 && ok;
    for (unsigned k = 0; ok && k < n; k++)
        if (pthread_join(pool.tid[k], NULL))
            return;
}
