/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_progress.c - the progress line (ctl_progress.h).
 *
 * Happy path: ctl_progress_start decides whether to show anything
 * (GPUQ_PROGRESS, isatty(2)), notes the socket's byte counts and the time,
 * and starts a thread that sleeps on a condition variable until
 * CTL_PROGRESS_DELAY_MS have passed, then draws the line (the phase: the
 * op's, and in flight the socket's byte counts and gpuqd's started notice,
 * which ctl_progress_started notes on the op's thread) every
 * CTL_PROGRESS_PERIOD_MS until ctl_progress_stop wakes it, joins it and
 * erases (terminal) or ends (elsewhere) the line. Each draw is one write(2)
 * of the whole line, so a line is never torn by another writer's bytes.
 *
 * Failures: no memory or no thread means no progress line, nothing else.
 */
#include "ctl_progress.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

struct ctl_progress {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;         /* under mu */
    _Atomic int phase; /* ctl_phase */
    bool tty;          /* stderr is a terminal: erase with \r ESC[K */
    uint64_t in_bytes, out_bytes;
    bool shm;
    uint64_t sent0, received0; /* gpuq_io_counts at the start */
    struct timespec t0;        /* CLOCK_MONOTONIC */
    /* gpuqd said the request started (ctl_progress_started): since when
     * (ns after t0, 0: not yet) and the bytes received by then */
    _Atomic uint64_t run_ns, run_received;
};

/* A line is on stderr now; and whether it is a terminal's (for the signal
 * handler, which has no ctl_progress to read). */
static volatile sig_atomic_t line_shown, line_tty;

static void end_line(bool tty)
{
    if (tty)
        ctl_write_stderr("\r\033[K", 4);
    else
        ctl_write_stderr("\n", 1);
}

void ctl_progress_end_line_signal(void)
{
    if (line_shown) {
        line_shown = 0;
        end_line(line_tty);
    }
}

bool ctl_progress_wanted(void)
{
    const char *e = getenv("GPUQ_PROGRESS");
    if (e && strcmp(e, "1") == 0)
        return true;
    if (e && strcmp(e, "0") == 0)
        return false;
    return isatty(STDERR_FILENO);
}

static double since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static uint64_t at_most(uint64_t v, uint64_t cap)
{
    return v < cap ? v : cap;
}

static uint64_t since_ns(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ns = (int64_t)(now.tv_sec - t0->tv_sec) * 1000000000 + (now.tv_nsec - t0->tv_nsec);
    return ns > 0 ? (uint64_t)ns : 1;
}

/* Where a request in flight is: sending its arrays (the bytes left),
 * queued in gpuqd, running (since gpuqd's started notice), receiving the
 * results (the bytes left). In shared memory the arrays do not cross the
 * socket: queued until it runs, running until the reply. */
static int call_phase(ctl_progress *p, char *line, size_t cap)
{
    char a[32], b[32];
    uint64_t sent, received;
    gpuq_io_counts(&sent, &received);
    sent -= p->sent0;
    received -= p->received0;
    uint64_t run = atomic_load_explicit(&p->run_ns, memory_order_acquire);
    uint64_t run_rx = atomic_load_explicit(&p->run_received, memory_order_relaxed);
    const char *via = p->shm ? "shared memory" : "socket";
    if (!p->shm && p->in_bytes && sent < p->in_bytes && !run)
        return snprintf(line, cap, "sending, %s of %s left (%s)",
                        ctl_fmt_bytes((double)(p->in_bytes - sent), a, sizeof a),
                        ctl_fmt_bytes((double)p->in_bytes, b, sizeof b), via);
    if (!run)
        return snprintf(line, cap, "queued (%s)", via);
    uint64_t got = received > run_rx ? received - run_rx : 0; /* the reply's bytes so far */
    if (!p->shm && p->out_bytes && got > 0)
        return snprintf(
            line, cap, "receiving, %s of %s left (%s)",
            ctl_fmt_bytes((double)(p->out_bytes - at_most(got, p->out_bytes)), a, sizeof a),
            ctl_fmt_bytes((double)p->out_bytes, b, sizeof b), via);
    return snprintf(line, cap, "running for %.1f s (%s)", (double)(since_ns(&p->t0) - run) / 1e9,
                    via);
}

static void draw(ctl_progress *p)
{
    char line[256];
    int n = snprintf(line, sizeof line, "\rgpuqctl: %.1f s, ", since(&p->t0));
    int ph = atomic_load_explicit(&p->phase, memory_order_relaxed);
    if (ph == CTL_PHASE_READ) {
        n += snprintf(line + n, sizeof line - (size_t)n, "reading the inputs");
    } else if (ph == CTL_PHASE_WRITE) {
        n += snprintf(line + n, sizeof line - (size_t)n, "writing the results");
    } else {
        n += call_phase(p, line + n, sizeof line - (size_t)n);
    }
    if (p->tty && (size_t)n < sizeof line - 4)
        n += snprintf(line + n, sizeof line - (size_t)n, "\033[K"); /* what a longer line left */
    if (n > 0 && (size_t)n < sizeof line) {
        line_tty = p->tty;
        line_shown = 1;
        ctl_write_stderr(line, (size_t)n);
    }
}

static void add_ms(struct timespec *t, long ms)
{
    t->tv_sec += ms / 1000;
    t->tv_nsec += (ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

static void *progress_main(void *arg)
{
    ctl_progress *p = arg;
    struct timespec next = p->t0;
    add_ms(&next, CTL_PROGRESS_DELAY_MS);
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        int rc = pthread_cond_timedwait(&p->cv, &p->mu, &next);
        if (p->stop)
            break;
        if (rc == ETIMEDOUT) {
            draw(p);
            add_ms(&next, CTL_PROGRESS_PERIOD_MS);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ctl_progress *ctl_progress_start(uint64_t in_bytes, uint64_t out_bytes, bool shm)
{
    if (!ctl_progress_wanted())
        return NULL;
    ctl_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->tty = isatty(STDERR_FILENO);
    p->in_bytes = in_bytes;
    p->out_bytes = out_bytes;
    p->shm = shm;
    atomic_init(&p->phase, CTL_PHASE_READ);
    atomic_init(&p->run_ns, 0);
    atomic_init(&p->run_received, 0);
    gpuq_io_counts(&p->sent0, &p->received0);
    clock_gettime(CLOCK_MONOTONIC, &p->t0);
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        goto err_after_alloc;
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        goto err_after_alloc;
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        goto err_after_cond;
    /* the thread starts with the signals gpuqctl handles blocked: they go
     * to the op's thread (ctl_xfer.c's handler) */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &block, &old) != 0)
        goto err_after_mutex;
    rc = pthread_create(&p->thread, NULL, progress_main, p);
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        goto err_after_mutex;
    return p;

err_after_mutex:
    pthread_mutex_destroy(&p->mu);
err_after_cond:
    pthread_cond_destroy(&p->cv);
err_after_alloc:
    free(p);
    return NULL;
}

void ctl_progress_phase(ctl_progress *p, ctl_phase ph)
{
    if (p)
        atomic_store_explicit(&p->phase, (int)ph, memory_order_relaxed);
}

void ctl_progress_started(void *user, uint64_t id)
{
    (void)id; /* gpuqctl has one request in flight */
    ctl_progress *p = user;
    if (!p)
        return;
    uint64_t sent, received;
    gpuq_io_counts(&sent, &received);
    atomic_store_explicit(&p->run_received, received - p->received0, memory_order_relaxed);
    atomic_store_explicit(&p->run_ns, since_ns(&p->t0), memory_order_release);
}

void ctl_progress_stop(ctl_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    if (line_shown) {
        line_shown = 0;
        end_line(p->tty);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
