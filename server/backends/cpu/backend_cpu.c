/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cpu.c - the CPU backend: libuv's thread pool runs backend_run_cpu.
 *
 * submit queues a uv_work_t; the work runs the CPU reference on a pool thread
 * (sleeping GPUQ_TEST_SLOW_MS first, a test hook that times as kernel time
 * and stops, as the kernels do between blocks of rows, once the job is no
 * longer wanted; GPUQ_TEST_HOST_ALLOC_FAIL_BYTES=N, another, makes host
 * allocations of at least N bytes fail);
 * after_work runs on the loop thread and calls b->complete. Staging memory is
 * plain aligned malloc.
 *
 * Batching (backend.h): a batchable job waits on the pending list until the
 * loop's idle phase (an idle handle, started while the list is not empty),
 * where the pending jobs go to the pool batch_max at a time, each batch one
 * work item that runs its jobs one after the other: a small job costs the
 * pool's hand-off and the wake-up of the loop once per batch instead of once
 * per job. Results are the same as alone (the same code runs each job).
 *
 * Row batches (backend.h, backend_row_batchable: knn and pairwise queries
 * against one resident array, from any sessions): such a job waits on the
 * row list; in the idle phase each kind (backend_row_same) with no row
 * batch in the pool goes as one work item of at most batch_max jobs,
 * which runs them as one job of their rows (backend_run_row_batch). The
 * rest of a kind wait for its running batch to end, and then go together.
 *
 * The pool runs what it is given in order, with no notion of priority,
 * cancel or deadline; so the backend says how many jobs that are not
 * batchable it runs at once (b.slots: the pool's threads) and the
 * scheduler keeps the rest in its own queue, where those apply. A running
 * job stops between two blocks of rows once it is no longer wanted
 * (job->stop, backend_run_cpu).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "errors.h"
#include "log.h"

typedef struct cpu_backend {
    backend b;
    uint64_t inflight;
    uint64_t sessions;
    uint64_t bytes;
    int slow_ms;
    uint64_t fail_bytes; /* test hook: host allocations of at least this many fail */
    uv_idle_t flush;     /* runs the pending batchable jobs (flush_on) */
    int flush_on;
    gpuq_job *pend_head, *pend_tail; /* batchable jobs not yet given to the pool */
    uint32_t npend;
    gpuq_job *rpend_head, *rpend_tail; /* row-batchable jobs not yet given to the pool */
    struct cpu_work *rflight;          /* row batches in the pool (cpu_work.rnext) */
} cpu_backend;

/* One work item: n jobs run one after the other. */
typedef struct cpu_work {
    uv_work_t w;
    cpu_backend *cb;
    uint32_t n;
    int row;                /* a row batch (backend_run_row_batch) */
    struct cpu_work *rnext; /* cb->rflight */
    struct cpu_run {
        gpuq_job *job;
        uint64_t start_ns, end_ns;
    } run[];
} cpu_work;

static int cpu_flush_soon(cpu_backend *cb);

/* The slow hook stands for a slow kernel run in blocks: it sleeps ms in
 * slices of CPU_SLOW_SLICE_MS and, like backend_run_cpu, stops between two
 * once the job is no longer wanted. Returns false when it stopped. */
#define CPU_SLOW_SLICE_MS 10
static bool cpu_slow(int ms, gpuq_job *job)
{
    for (int done = 0; done < ms; done += CPU_SLOW_SLICE_MS) {
        if (__atomic_load_n(&job->stop, __ATOMIC_RELAXED)) {
            job->status = GPUQ_E_CANCELLED;
            snprintf(job->message, sizeof job->message, "stopped before it ran");
            return false;
        }
        int slice = ms - done < CPU_SLOW_SLICE_MS ? ms - done : CPU_SLOW_SLICE_MS;
        struct timespec ts = {0, (long)slice * 1000000L};
        nanosleep(&ts, NULL);
    }
    return true;
}

static void cpu_work_cb(uv_work_t *w)
{
    cpu_work *cw = w->data;
    if (cw->row) { /* one run: the slow hook once, for the batch */
        gpuq_job *jobs[BACKEND_ROW_BATCH_MAX];
        uint64_t t0 = uv_hrtime();
        for (uint32_t i = 0; i < cw->n; i++)
            jobs[i] = cw->run[i].job;
        if (cw->cb->slow_ms <= 0 || cpu_slow(cw->cb->slow_ms, jobs[0]))
            backend_run_row_batch(jobs, cw->n);
        else /* the first is no longer wanted: the others run as they would */
            backend_run_row_batch(jobs + 1, cw->n - 1);
        for (uint32_t i = 0; i < cw->n; i++) {
            cw->run[i].start_ns = t0;
            cw->run[i].end_ns = uv_hrtime();
        }
        return;
    }
    for (uint32_t i = 0; i < cw->n; i++) {
        struct cpu_run *r = &cw->run[i];
        r->start_ns = uv_hrtime(); /* the slow hook counts as kernel time */
        if (cw->cb->slow_ms <= 0 || cpu_slow(cw->cb->slow_ms, r->job))
            backend_run_cpu(r->job);
        r->end_ns = uv_hrtime();
    }
}

static void cpu_after_work(uv_work_t *w, int status)
{
    cpu_work *cw = w->data;
    cpu_backend *cb = cw->cb;
    for (uint32_t i = 0; i < cw->n; i++) {
        gpuq_job *job = cw->run[i].job;
        if (status < 0) {
            job->status = GPUQ_E_SHUTTING_DOWN;
            snprintf(job->message, sizeof job->message, "cancelled: %s", uv_strerror(status));
        } else if (job->req->timing) {
            memset(&job->timing, 0, sizeof job->timing);
            job->timing.queue_us = (double)(cw->run[i].start_ns - job->submit_ns) / 1e3;
            job->timing.kernel_us = (double)(cw->run[i].end_ns - cw->run[i].start_ns) / 1e3;
        }
    }
    if (cw->row) { /* the kind's next jobs may go now */
        cpu_work **pp = &cb->rflight;
        while (*pp && *pp != cw)
            pp = &(*pp)->rnext;
        if (*pp)
            *pp = cw->rnext;
        if (cb->rpend_head)
            cpu_flush_soon(cb);
    }
    /* Completing may submit more work or let the server destroy the
     * backend (its memory goes only in a close callback, later). */
    for (uint32_t i = 0; i < cw->n; i++) {
        cb->inflight--;
        cb->b.complete(cw->run[i].job);
    }
    free(cw);
}

/* Give n jobs (linked by job->next from first) to the pool as one work
 * item (a row batch: row). 0, or a GPUQ_E_* code with nothing queued. */
static int cpu_queue(cpu_backend *cb, gpuq_job *first, uint32_t n, int row)
{
    cpu_work *cw = calloc(1, sizeof *cw + (size_t)n * sizeof cw->run[0]);
    if (!cw)
        return GPUQ_E_NO_MEMORY;
    cw->cb = cb;
    cw->n = n;
    cw->row = row;
    cw->w.data = cw;
    gpuq_job *j = first;
    for (uint32_t i = 0; i < n; i++, j = j->next)
        cw->run[i].job = j;
    int rc = uv_queue_work(cb->b.loop, &cw->w, cpu_work_cb, cpu_after_work);
    if (rc < 0) {
        log_error("cpu: uv_queue_work: %s", uv_strerror(rc));
        free(cw);
        return GPUQ_E_INTERNAL;
    }
    if (row) {
        cw->rnext = cb->rflight;
        cb->rflight = cw;
    }
    return 0;
}

/* Fail the n jobs from first (linked by job->next): st, why. On the loop,
 * outside any submit. */
static void cpu_fail_jobs(cpu_backend *cb, gpuq_job *first, int st, const char *why)
{
    for (gpuq_job *j = first, *next; j; j = next) {
        next = j->next;
        j->next = NULL;
        j->status = st;
        snprintf(j->message, sizeof j->message, "%s", why);
        cb->inflight--;
        cb->b.complete(j);
    }
}

/* Is a row batch of job's kind in the pool? */
static bool cpu_row_running(const cpu_backend *cb, const gpuq_job *job)
{
    for (const cpu_work *w = cb->rflight; w; w = w->rnext)
        if (backend_row_same(w->run[0].job, job))
            return true;
    return false;
}

/* The idle phase's row batches: each kind with none in the pool goes, at
 * most batch_max (and BACKEND_ROW_BATCH_MAX) jobs in arrival order. */
static void cpu_flush_rows(cpu_backend *cb)
{
    uint32_t max =
        cb->b.batch_max < BACKEND_ROW_BATCH_MAX ? cb->b.batch_max : BACKEND_ROW_BATCH_MAX;
    if (max == 0)
        max = 1;
    gpuq_job *keep_head = NULL, **keep_tail = &keep_head;
    while (cb->rpend_head) {
        gpuq_job *first = cb->rpend_head;
        cb->rpend_head = first->next;
        first->next = NULL;
        if (cpu_row_running(cb, first)) { /* waits for that one to end */
            *keep_tail = first;
            keep_tail = &first->next;
            continue;
        }
        /* its kind's others, in order, after it */
        gpuq_job *last = first, **pp = &cb->rpend_head;
        uint32_t n = 1;
        while (*pp && n < max) {
            gpuq_job *j = *pp;
            if (!backend_row_same(first, j)) {
                pp = &j->next;
                continue;
            }
            *pp = j->next;
            j->next = NULL;
            last->next = j;
            last = j;
            n++;
        }
        int st = cpu_queue(cb, first, n, 1);
        if (st == 0)
            backend_count_batch(&cb->b, n);
        else
            cpu_fail_jobs(cb, first, st, "could not queue the batch");
    }
    cb->rpend_head = keep_head;
    cb->rpend_tail = NULL;
    for (gpuq_job *j = keep_head; j; j = j->next)
        cb->rpend_tail = j;
}

/* The idle phase: the pending jobs go to the pool, batch_max at a time. A
 * batch that cannot be queued fails its jobs (completed here, on the loop,
 * outside any submit). */
static void cpu_on_flush(uv_idle_t *h)
{
    cpu_backend *cb = h->data;
    int rc = uv_idle_stop(&cb->flush);
    if (rc < 0)
        log_error("cpu: uv_idle_stop: %s", uv_strerror(rc));
    cb->flush_on = 0;
    cpu_flush_rows(cb);
    while (cb->pend_head) {
        uint32_t max = cb->b.batch_max ? cb->b.batch_max : 1, n = 0;
        gpuq_job *first = cb->pend_head, *last = first;
        for (gpuq_job *j = first; j && n < max; j = j->next) {
            last = j;
            n++;
        }
        cb->pend_head = last->next;
        if (!cb->pend_head)
            cb->pend_tail = NULL;
        cb->npend -= n;
        last->next = NULL;
        int st = cpu_queue(cb, first, n, 0);
        if (st == 0) {
            backend_count_batch(&cb->b, n);
            continue;
        }
        cpu_fail_jobs(cb, first, st, "could not queue the batch");
    }
}

/* Run the idle phase (cpu_on_flush) after this loop turn; 0, or -1 when
 * the idle handle cannot start. */
static int cpu_flush_soon(cpu_backend *cb)
{
    if (cb->flush_on)
        return 0;
    int rc = uv_idle_start(&cb->flush, cpu_on_flush);
    if (rc < 0) {
        log_error("cpu: uv_idle_start: %s", uv_strerror(rc));
        return -1;
    }
    cb->flush_on = 1;
    return 0;
}

static int cpu_submit(backend *b, gpuq_job *job)
{
    cpu_backend *cb = (cpu_backend *)b;
    job->next = NULL;
    if (backend_row_batchable(b, job) && cpu_flush_soon(cb) == 0) {
        if (cb->rpend_tail)
            cb->rpend_tail->next = job;
        else
            cb->rpend_head = job;
        cb->rpend_tail = job;
        cb->inflight++;
        cb->bytes += job->sz->payload + job->sz->output;
        return 0;
    }
    if (backend_batchable(b, job)) {
        if (cpu_flush_soon(cb) != 0)
            goto alone;
        if (cb->pend_tail)
            cb->pend_tail->next = job;
        else
            cb->pend_head = job;
        cb->pend_tail = job;
        cb->npend++;
        cb->inflight++;
        cb->bytes += job->sz->payload + job->sz->output;
        return 0;
    }
alone:;
    int rc = cpu_queue(cb, job, 1, 0);
    if (rc)
        return rc;
    cb->inflight++;
    cb->bytes += job->sz->payload + job->sz->output;
    return 0;
}

/* libuv's thread pool size, read as libuv reads it (UV_THREADPOOL_SIZE,
 * default 4, at least 1, at most 1024). */
static uint32_t cpu_pool_threads(void)
{
    const char *v = getenv("UV_THREADPOOL_SIZE");
    long n = v && *v ? strtol(v, NULL, 10) : 4;
    return n < 1 ? 1 : n > 1024 ? 1024 : (uint32_t)n;
}

static int cpu_session_open(backend *b, int priority, int device, void **bsess,
                            backend_session_info *info)
{
    cpu_backend *cb = (cpu_backend *)b;
    if (device != -1 && device != 0)
        return GPUQ_E_BAD_ARGUMENT; /* one device: -1 (any) or 0 name it */
    cb->sessions++;
    *bsess = cb;    /* no per-session state on the CPU */
    (void)priority; /* one thread pool: every level runs alike */
    info->priority_granted = 0;
    info->device = -1;
    return 0;
}

static void cpu_session_close(backend *b, void *bsess)
{
    ((cpu_backend *)b)->sessions--;
}

/* The pinning thread needs nothing: staging memory is plain memory here,
 * allocated there all the same (the same path as CUDA's, testable without a
 * GPU), and counted when allocated on the loop (backend_note_pin). */
static int cpu_host_thread_init(backend *b, char *why, size_t cap)
{
    (void)b;
    (void)why;
    (void)cap;
    return 0;
}

static void *cpu_host_alloc(backend *b, size_t len)
{
    backend_note_pin(b);
    uint64_t fail = ((cpu_backend *)b)->fail_bytes;
    if (fail && len >= fail)
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 4096, len ? len : 1))
        return NULL;
    return p;
}

static void cpu_host_free(backend *b, void *p)
{
    if (p)
        backend_note_pin(b);
    free(p);
}

/* Kept outputs are posix_memalign'd by backend_run_cpu. */
static void cpu_res_free(backend *b, int device, void *p)
{
    (void)b;
    (void)device;
    free(p);
}

static int cpu_res_alloc(backend *b, int device, uint64_t bytes, void **p, char *why, size_t cap)
{
    (void)b;
    (void)device;
    if (posix_memalign(p, 64, bytes ? (size_t)bytes : 1) != 0) {
        *p = NULL;
        snprintf(why, cap, "out of host memory");
        return GPUQ_E_NO_MEMORY;
    }
    return 0;
}

static int cpu_res_copy(backend *b, int device, void *dst, const void *src, size_t bytes, char *why,
                        size_t cap)
{
    (void)b;
    (void)device;
    (void)why;
    (void)cap;
    memcpy(dst, src, bytes);
    return 0;
}

static int cpu_ndevices(backend *b)
{
    return 1;
}

static void cpu_device_info(backend *b, int i, backend_device *out)
{
    cpu_backend *cb = (cpu_backend *)b;
    memset(out, 0, sizeof *out);
    out->index = -1;
    snprintf(out->name, sizeof out->name, "cpu");
    out->sessions = (uint32_t)cb->sessions;
    out->in_flight = cb->inflight;
    out->bytes = cb->bytes;
}

static uint64_t cpu_inflight(backend *b)
{
    return ((cpu_backend *)b)->inflight;
}

static void cpu_on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void cpu_destroy(backend *b)
{
    /* Nothing is in flight, so nothing is pending; the handle's memory is
     * the backend's: freed once it is closed. */
    cpu_backend *cb = (cpu_backend *)b;
    uv_close((uv_handle_t *)&cb->flush, cpu_on_closed);
}

static const backend_ops cpu_ops = {
    .name = "cpu",
    .session_open = cpu_session_open,
    .session_close = cpu_session_close,
    .submit = cpu_submit,
    .host_thread_init = cpu_host_thread_init,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .res_free = cpu_res_free,
    .res_alloc = cpu_res_alloc,
    .res_copy = cpu_res_copy,
    .ndevices = cpu_ndevices,
    .device_info = cpu_device_info,
    .inflight = cpu_inflight,
    .destroy = cpu_destroy,
};

backend *backend_cpu_create(uv_loop_t *loop, backend_complete_fn done, char *why, size_t cap)
{
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    int rc = uv_idle_init(loop, &cb->flush);
    if (rc < 0) {
        snprintf(why, cap, "uv_idle_init: %s", uv_strerror(rc));
        free(cb);
        return NULL;
    }
    cb->flush.data = cb;
    cb->b.ops = &cpu_ops;
    cb->b.loop = loop;
    cb->b.complete = done;
    cb->b.slots = cpu_pool_threads();
    const char *slow = getenv("GPUQ_TEST_SLOW_MS");
    if (slow && *slow)
        cb->slow_ms = atoi(slow);
    const char *fail = getenv("GPUQ_TEST_HOST_ALLOC_FAIL_BYTES");
    if (fail && *fail)
        cb->fail_bytes = strtoull(fail, NULL, 10);
    return &cb->b;
}
