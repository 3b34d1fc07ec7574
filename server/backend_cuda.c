/* backend_cuda.c - the CUDA backend of gpuqd: sessions on streams, submit,
 * and the completion path back to the loop.
 *
 * Happy path: submit() (loop thread) enqueues on the session's stream
 * H2D copy, errflag reset, kernel(s), D2H copy of result and errflag into
 * pinned memory, cudaFreeAsync of the device buffers, and records the job's
 * completion event; the job joins the session's FIFO of in-flight jobs.
 * If no doorbell is armed on that stream, a cudaLaunchHostFunc doorbell is
 * enqueued behind it and the session is marked armed.
 *
 * Completion (coalesced doorbells): the doorbell runs on a CUDA driver
 * thread, makes no CUDA call, pushes the session onto the wake list (mutex)
 * and calls uv_async_send. The loop pops woken sessions, clears armed, and
 * completes, in FIFO order, every job whose event query says cudaSuccess;
 * if jobs remain it arms a new doorbell. Because a host function runs after
 * all earlier work of its stream, every job submitted before the arming is
 * done when the doorbell rings; later jobs get the next doorbell. A 100 ms
 * poll timer, running only while jobs are in flight, is the safety net for a
 * doorbell that never rings (a sticky error can stop host functions).
 *
 * Adaptive spin (GPUQ_CUDA_SPIN_US, default 50): for that long after the
 * last submit or completion, a uv_idle handle queries the head events of
 * busy sessions on every loop iteration and no doorbell is armed; small jobs
 * then complete without a host function's round trip (about 35 us on an
 * H100), and a steady stream of requests needs no host function at all.
 * When the window closes with jobs left, doorbells are armed and the loop
 * sleeps again. The spin costs one busy CPU core only while work arrives.
 *
 * Failures: submit() always returns 0 and reports every failure through the
 * completion path, never synchronously: a job that failed before anything
 * was enqueued goes to an immediate list drained by the same uv_async; one
 * that failed after work was enqueued waits in the FIFO behind its event
 * (its staging memory may still be read by the device). A sticky error
 * (cudaEventQuery, a launch, ...) sets b->lost and fails every in-flight job
 * of every session with GPUQ_E_DEVICE_LOST.
 *
 * Lifetimes: a session is destroyed only when it is closing, has no job in
 * flight, no doorbell armed and is not being walked by a loop callback.
 */
#include "backend_cuda.h"
#include "backend_run.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "errors.h"
#include "gpuq_kernels.h"
#include "log.h"
#include "op_backend.h"

#define CUDA_POLL_MS 100
#define CUDA_SPIN_US_DEFAULT 50

typedef struct cuda_dev {
    int index;
    char name[256];
    uint64_t total_mem;
    int prio_least, prio_greatest;  /* cudaDeviceGetStreamPriorityRange */
    cudaMemPool_t pool;
    int own_pool;                   /* created (with a size limit), destroyed by us */
    int sessions;
    uint64_t in_flight;
    uint64_t bytes;                 /* input + output bytes submitted */
} cuda_dev;

/* Per-job CUDA state, reused through a per-session free list. */
typedef struct cuda_jobx {
    struct cuda_jobx *next_free;
    cudaEvent_t done;               /* completion, cudaEventDisableTiming */
    cudaEvent_t t[4];               /* start, after H2D, after kernel, after D2H */
    int has_timing_events;
    int *h_flag;                    /* pinned copy of the ctx errflag */
    int timing;                     /* this job recorded t[] */
    int status;                     /* preset failure, 0 if none */
    char message[160];
} cuda_jobx;

typedef struct cuda_sess {
    struct backend_cuda *b;
    cuda_dev *dev;
    cudaStream_t stream;
    gpuq_cuda_ctx *kctx;
    gpuq_job *head, *tail;          /* in-flight FIFO (job->next) */
    uint64_t nflight;
    int armed;                      /* a doorbell is enqueued and has not been handled */
    int closing;
    struct cuda_sess *wake_next;    /* wake list link (under b->mu) */
    struct cuda_sess *prev, *next;  /* all sessions of the backend */
    cuda_jobx *free_x;
} cuda_sess;

typedef struct backend_cuda {
    backend base;
    int ndev;
    cuda_dev *devs;
    int cur_dev;
    uv_async_t async;
    uv_timer_t timer;
    uv_idle_t spin;                 /* polls events for spin_ns after activity */
    int handles_open;
    int timer_on, spin_on;
    uint64_t spin_ns, spin_until;   /* spin_ns 0: doorbells only */
    pthread_mutex_t mu;
    cuda_sess *wake_head;           /* under mu: sessions whose doorbell rang */
    gpuq_job *imm_head, *imm_tail;  /* loop only: jobs to complete without waiting */
    cuda_sess *sessions;
    uint64_t inflight;
    int walking;                    /* >0 while a loop callback walks sessions */
    uint64_t submits, allocs;
    uint64_t inject_sticky, inject_oom;
} backend_cuda;

static void sess_maybe_destroy(backend_cuda *b, cuda_sess *s);
static void reap_sessions(backend_cuda *b);

/* ---- small helpers ---- */

static int cuda_sticky(cudaError_t e)
{
    return gpuq_cuda_error_code(e) == GPUQ_K_E_STICKY;
}

static void mark_lost(backend_cuda *b, const char *what, cudaError_t e)
{
    if (b->base.lost)
        return;
    b->base.lost = 1;
    snprintf(b->base.lost_reason, sizeof b->base.lost_reason, "%s: %s", what,
             cudaGetErrorString(e));
    fprintf(stderr, "gpuqd cuda: device lost: %s\n", b->base.lost_reason);
}

/* Map a CUDA error of a submit step to a job status; sticky ones lose the device. */
static int status_of_cuda(backend_cuda *b, cudaError_t e, const char *what)
{
    int k = gpuq_cuda_error_code(e);
    fprintf(stderr, "gpuqd cuda: %s: %s\n", what, cudaGetErrorString(e));
    if (k == GPUQ_K_E_STICKY) {
        mark_lost(b, what, e);
        return GPUQ_E_DEVICE_LOST;
    }
    return k == GPUQ_K_E_NOMEM ? GPUQ_E_NO_MEMORY : GPUQ_E_DEVICE;
}

/* A kernel launch's code as a job status (backend_map_kernel_error's table);
 * a sticky one also loses the device. */
static int status_of_kcode(backend_cuda *b, gpuq_job *job, int k)
{
    if (k == GPUQ_K_E_STICKY)
        mark_lost(b, "kernel launch", cudaErrorLaunchFailure);
    return backend_map_kernel_error(job, k);
}

static void set_msg(char *dst, size_t cap, int status, const char *detail)
{
    snprintf(dst, cap, "%.50s%s%.100s", gpuq_strerror(status), detail ? ": " : "", detail ? detail : "");
}

static int use_device(backend_cuda *b, int dev)
{
    if (b->cur_dev == dev)
        return 0;
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess)
        return status_of_cuda(b, e, "cudaSetDevice");
    b->cur_dev = dev;
    return 0;
}

static uint64_t env_u64(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : 0;
}

/* ---- per-job state ---- */

static void jobx_free(cuda_jobx *x)
{
    if (x->done)
        cudaEventDestroy(x->done);
    if (x->has_timing_events)
        for (int i = 0; i < 4; i++)
            cudaEventDestroy(x->t[i]);
    if (x->h_flag)
        cudaFreeHost(x->h_flag);
    free(x);
}

/* A jobx from the session's free list, or a new one (rare: only while the
 * session's in-flight depth grows). Returns 0 or a GPUQ_E_* status. */
static int jobx_get(backend_cuda *b, cuda_sess *s, int timing, cuda_jobx **out)
{
    cuda_jobx *x = s->free_x;
    cudaError_t e;
    if (x) {
        s->free_x = x->next_free;
    } else {
        x = calloc(1, sizeof *x);
        if (!x)
            return GPUQ_E_NO_MEMORY;
        e = cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            x->done = NULL;
            jobx_free(x);
            return status_of_cuda(b, e, "cudaEventCreate");
        }
        e = cudaHostAlloc((void **)&x->h_flag, sizeof(int), cudaHostAllocPortable);
        if (e != cudaSuccess) {
            x->h_flag = NULL;
            jobx_free(x);
            return status_of_cuda(b, e, "cudaHostAlloc(flag)");
        }
    }
    if (timing && !x->has_timing_events) {
        int i;
        for (i = 0; i < 4; i++) {
            e = cudaEventCreate(&x->t[i]);
            if (e != cudaSuccess)
                break;
        }
        if (i < 4) {
            while (i-- > 0)
                cudaEventDestroy(x->t[i]);
            x->next_free = s->free_x;
            s->free_x = x;
            return status_of_cuda(b, e, "cudaEventCreate(timing)");
        }
        x->has_timing_events = 1;
    }
    x->timing = timing;
    x->status = 0;
    x->message[0] = '\0';
    *x->h_flag = 0;
    *out = x;
    return 0;
}

static void jobx_put(cuda_sess *s, cuda_jobx *x)
{
    x->next_free = s->free_x;
    s->free_x = x;
}

/* ---- completion ---- */

static void timer_start_if_needed(backend_cuda *b);

/* Finish one job (loop thread): status, timing, bookkeeping, callback. */
static void finish_job(backend_cuda *b, cuda_sess *s, gpuq_job *job, int lost)
{
    cuda_jobx *x = job->bpriv;
    if (lost) {
        job->status = GPUQ_E_DEVICE_LOST;
        set_msg(job->message, sizeof job->message, job->status, b->base.lost_reason);
    } else if (!x) {
        /* failed before a jobx existed: submit preset job->status/message */
    } else if (x->status) {
        job->status = x->status;
        snprintf(job->message, sizeof job->message, "%s", x->message);
    } else {
        /* The kernels' device flag holds a GPUQ_K_E_* code negated (0: fine);
         * the CPU backend maps the same codes through the same table. */
        job->status = backend_map_kernel_error(job, -*x->h_flag);
    }
    if (job->status == 0 && x && x->timing) {
        float ms[3] = {0, 0, 0};
        for (int i = 0; i < 3; i++)
            if (cudaEventElapsedTime(&ms[i], x->t[i], x->t[i + 1]) != cudaSuccess)
                ms[i] = 0;
        float all = 0;
        if (cudaEventElapsedTime(&all, x->t[0], x->t[3]) != cudaSuccess)
            all = 0;
        job->timing.h2d_us = ms[0] * 1000.0;
        job->timing.kernel_us = ms[1] * 1000.0;
        job->timing.d2h_us = ms[2] * 1000.0;
        /* Host time from submit to now, less the device time: waiting in the
         * stream plus completion latency. */
        double host_us = (double)(uv_hrtime() - job->submit_ns) / 1000.0;
        double q = host_us - all * 1000.0;
        job->timing.queue_us = q > 0 ? q : 0;
    }
    if (x)
        jobx_put(s, x);
    job->bpriv = NULL;
    job->next = NULL;
    s->nflight--;
    s->dev->in_flight--;
    b->inflight--;
    b->base.complete(job);
}

static void fail_all(backend_cuda *b)
{
    for (cuda_sess *s = b->sessions; s; s = s->next) {
        while (s->head) {
            gpuq_job *job = s->head;
            s->head = job->next;
            if (!s->head)
                s->tail = NULL;
            finish_job(b, s, job, 1);
        }
    }
}

static void arm_doorbell(backend_cuda *b, cuda_sess *s);

/* Complete the session's finished jobs in FIFO order; re-arm if some remain
 * (unless the spin is polling them). */
static void drain_session(backend_cuda *b, cuda_sess *s)
{
    while (s->head && !b->base.lost) {
        gpuq_job *job = s->head;
        cuda_jobx *x = job->bpriv;
        cudaError_t e = x ? cudaEventQuery(x->done) : cudaSuccess;
        if (e == cudaErrorNotReady)
            break;
        if (e != cudaSuccess) {
            if (cuda_sticky(e)) {
                mark_lost(b, "cudaEventQuery", e);
                break;
            }
            /* A non-sticky error reported for this job only. */
            if (x && !x->status) {
                x->status = GPUQ_E_DEVICE;
                set_msg(x->message, sizeof x->message, x->status, cudaGetErrorString(e));
            }
        }
        s->head = job->next;
        if (!s->head)
            s->tail = NULL;
        finish_job(b, s, job, 0);
    }
    if (b->base.lost)
        fail_all(b);
    else if (s->head && !s->armed && !b->spin_on)
        arm_doorbell(b, s);
}

static void doorbell(void *arg)
{
    /* CUDA driver thread: no CUDA call here. */
    cuda_sess *s = arg;
    backend_cuda *b = s->b;
    pthread_mutex_lock(&b->mu);
    s->wake_next = b->wake_head;
    b->wake_head = s;
    pthread_mutex_unlock(&b->mu);
    uv_async_send(&b->async);
}

static void arm_doorbell(backend_cuda *b, cuda_sess *s)
{
    if (b->base.lost || use_device(b, s->dev->index) != 0)
        return;
    cudaError_t e = cudaLaunchHostFunc(s->stream, doorbell, s);
    if (e == cudaSuccess) {
        s->armed = 1;
        return;
    }
    /* Not armed: the poll timer still drains this session. */
    fprintf(stderr, "gpuqd cuda: cudaLaunchHostFunc: %s\n", cudaGetErrorString(e));
    if (cuda_sticky(e))
        mark_lost(b, "cudaLaunchHostFunc", e);
}

static void on_async(uv_async_t *h)
{
    backend_cuda *b = h->data;
    b->walking++;
    /* Jobs that failed before reaching the device. */
    while (b->imm_head) {
        gpuq_job *job = b->imm_head;
        b->imm_head = job->next;
        if (!b->imm_head)
            b->imm_tail = NULL;
        finish_job(b, job->bsess, job, 0);
    }
    pthread_mutex_lock(&b->mu);
    cuda_sess *w = b->wake_head;
    b->wake_head = NULL;
    pthread_mutex_unlock(&b->mu);
    while (w) {
        cuda_sess *s = w;
        w = s->wake_next;
        s->wake_next = NULL;
        s->armed = 0;
        drain_session(b, s);
    }
    if (b->base.lost)
        fail_all(b);
    b->walking--;
    reap_sessions(b);
    timer_start_if_needed(b);
}

/* Complete what is finished on every busy session. */
static void drain_all(backend_cuda *b)
{
    b->walking++;
    for (cuda_sess *s = b->sessions; s && !b->base.lost; s = s->next)
        if (s->head)
            drain_session(b, s);
    if (b->base.lost)
        fail_all(b);
    b->walking--;
    reap_sessions(b);
}

static void on_timer(uv_timer_t *t)
{
    backend_cuda *b = t->data;
    drain_all(b);
    if (b->inflight == 0 && b->timer_on) {
        uv_timer_stop(&b->timer);
        b->timer_on = 0;
    }
}

/* The adaptive spin: while jobs are in flight and something happened in
 * the last spin_ns (a submit or a completion), every loop iteration queries
 * the head event of each busy session instead of waiting for a doorbell, so
 * small jobs complete without a host function's round trip. When the window
 * closes with jobs left, doorbells are armed for them and the loop sleeps. */
static void on_spin(uv_idle_t *h)
{
    backend_cuda *b = h->data;
    uint64_t now = uv_hrtime();
    uint64_t before = b->inflight;
    drain_all(b);
    if (b->inflight < before)
        b->spin_until = now + b->spin_ns;
    if (b->inflight > 0 && now < b->spin_until && !b->base.lost)
        return;
    uv_idle_stop(&b->spin);
    b->spin_on = 0;
    for (cuda_sess *s = b->sessions; s; s = s->next)
        if (s->head && !s->armed)
            arm_doorbell(b, s);
}

/* A job was submitted: keep (or start) spinning. */
static void spin_kick(backend_cuda *b)
{
    b->spin_until = uv_hrtime() + b->spin_ns;
    if (b->spin_on)
        return;
    int rc = uv_idle_start(&b->spin, on_spin);
    if (rc == 0)
        b->spin_on = 1;
    else
        fprintf(stderr, "gpuqd cuda: uv_idle_start: %s\n", uv_strerror(rc));
}

static void timer_start_if_needed(backend_cuda *b)
{
    if (b->handles_open && b->inflight > 0 && !b->timer_on) {
        if (uv_timer_start(&b->timer, on_timer, CUDA_POLL_MS, CUDA_POLL_MS) == 0)
            b->timer_on = 1;
    }
}

/* ---- sessions ---- */

/* A level onto the device's stream priorities [greatest, least] (CUDA: a
 * lower number is more urgent): low is the least urgent, high the most,
 * normal the middle rounded toward least urgent (range [-5, 0]: -2; a range
 * of two values [-1, 0]: 0, as low). Only levels get here (the header
 * decoder refuses other values); anything else would be a bug and gets the
 * least urgent priority. */
static int map_priority(const cuda_dev *d, int priority)
{
    int least = d->prio_least, greatest = d->prio_greatest; /* greatest <= least */
    switch (priority) {
    case GPUQ_PRIO_HIGH:
        return greatest;
    case GPUQ_PRIO_NORMAL:
        return least - (least - greatest) / 2;
    case GPUQ_PRIO_LOW:
    default:
        return least;
    }
}

static int cuda_session_open(backend *bb, int priority, int device, void **bsess,
                             backend_session_info *info)
{
    backend_cuda *b = (backend_cuda *)bb;
    cuda_dev *d = NULL;
    *bsess = NULL;
    if (b->base.lost)
        return GPUQ_E_DEVICE_LOST;
    if (device >= 0) {
        if (device >= b->ndev)
            return GPUQ_E_BAD_ARGUMENT;
        d = &b->devs[device];
    } else {
        d = &b->devs[0];
        for (int i = 1; i < b->ndev; i++)
            if (b->devs[i].sessions < d->sessions)
                d = &b->devs[i];
    }
    int rc = use_device(b, d->index);
    if (rc)
        return rc;
    cuda_sess *s = calloc(1, sizeof *s);
    if (!s)
        return GPUQ_E_NO_MEMORY;
    s->b = b;
    s->dev = d;
    int prio = map_priority(d, priority);
    cudaError_t e = cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, prio);
    if (e != cudaSuccess) {
        rc = status_of_cuda(b, e, "cudaStreamCreateWithPriority");
        goto err_after_alloc;
    }
    int k = gpuq_cuda_ctx_create(s->stream, &s->kctx);
    if (k != GPUQ_K_OK) {
        /* Context creation fails only for memory or the device itself. */
        if (k == GPUQ_K_E_STICKY)
            mark_lost(b, "gpuq_cuda_ctx_create", cudaErrorLaunchFailure);
        rc = k == GPUQ_K_E_STICKY ? GPUQ_E_DEVICE_LOST
             : k == GPUQ_K_E_NOMEM ? GPUQ_E_NO_MEMORY
                                    : GPUQ_E_DEVICE;
        goto err_after_stream;
    }
    s->next = b->sessions;
    if (b->sessions)
        b->sessions->prev = s;
    b->sessions = s;
    d->sessions++;
    info->priority_granted = prio;
    info->device = d->index;
    *bsess = s;
    return 0;

err_after_stream:
    cudaStreamDestroy(s->stream);
err_after_alloc:
    free(s);
    return rc;
}

static void sess_destroy(backend_cuda *b, cuda_sess *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        b->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->dev->sessions--;
    /* Errors are ignored here: after a sticky error every call fails. */
    if (use_device(b, s->dev->index) == 0 || b->base.lost) {
        gpuq_cuda_ctx_destroy(s->kctx);
        cudaStreamDestroy(s->stream);
    }
    while (s->free_x) {
        cuda_jobx *x = s->free_x;
        s->free_x = x->next_free;
        jobx_free(x);
    }
    free(s);
}

static void sess_maybe_destroy(backend_cuda *b, cuda_sess *s)
{
    if (s->closing && !s->armed && !s->head && s->nflight == 0 && b->walking == 0)
        sess_destroy(b, s);
}

static void reap_sessions(backend_cuda *b)
{
    cuda_sess *s = b->sessions;
    while (s) {
        cuda_sess *next = s->next;
        sess_maybe_destroy(b, s);
        s = next;
    }
}

static void cuda_session_close(backend *bb, void *bsess)
{
    backend_cuda *b = (backend_cuda *)bb;
    cuda_sess *s = bsess;
    if (!s || s->closing)
        return;
    s->closing = 1;
    /* Deferred while a doorbell is armed (it holds s) or a callback walks. */
    sess_maybe_destroy(b, s);
}

/* ---- submit ---- */

/* Stream-ordered allocation from the session's device pool (bounded by
 * the device memory limit when one is set). */
static cudaError_t dev_alloc(backend_cuda *b, cuda_sess *s, void **p, size_t len)
{
    *p = NULL;
    if (len == 0)
        return cudaSuccess;
    b->allocs++;
    if (b->inject_oom && b->allocs == b->inject_oom)
        return cudaErrorMemoryAllocation;
    cudaError_t e = cudaMallocFromPoolAsync(p, len, s->dev->pool, s->stream);
    if (e == cudaErrorMemoryAllocation)
        (void)cudaGetLastError(); /* not sticky: keep it from failing the next launch check */
    return e;
}

/* Enqueue the op's kernel(s) (its backend def, ops/op_backend.h); returns
 * a GPUQ_K_* code. Outputs packed in d_out, out[1] after out[0]. */
static int launch_op(cuda_sess *s, const gpuq_job *job, const void *d_in, void *d_out,
                     void *d_scratch)
{
    const op_backend_def *ob = op_backend_of(job->req->op);
    if (!ob || !ob->launch_cuda)
        return GPUQ_K_E_ARG;
    op_bufs d = op_bufs_make(job->req, job->sz, d_in, d_out, d_scratch);
    return ob->launch_cuda(s->kctx, job->req, job->sz, &d);
}

static void complete_later(backend_cuda *b, gpuq_job *job)
{
    job->next = NULL;
    if (b->imm_tail)
        b->imm_tail->next = job;
    else
        b->imm_head = job;
    b->imm_tail = job;
    uv_async_send(&b->async);
}

static int cuda_submit(backend *bb, gpuq_job *job)
{
    backend_cuda *b = (backend_cuda *)bb;
    cuda_sess *s = job->bsess;
    cuda_jobx *x = NULL;
    void *d_in = NULL, *d_out = NULL, *d_scratch = NULL;
    int status = 0, enqueued = 0;
    char detail[120] = "";
    cudaError_t e;

    job->status = 0;
    job->message[0] = '\0';
    job->bpriv = NULL;
    job->next = NULL;
    memset(&job->timing, 0, sizeof job->timing);
    s->nflight++;
    s->dev->in_flight++;
    s->dev->bytes += job->sz->payload + job->sz->output;
    b->inflight++;
    b->submits++;

    if (b->base.lost) {
        status = GPUQ_E_DEVICE_LOST;
        snprintf(detail, sizeof detail, "%.100s", b->base.lost_reason);
        goto fail_now;
    }
    if ((status = use_device(b, s->dev->index)) != 0)
        goto fail_now;
    if ((status = jobx_get(b, s, job->req->timing, &x)) != 0)
        goto fail_now;
    job->bpriv = x;

#define STEP(call, what)                                                                        \
    do {                                                                                        \
        e = (call);                                                                             \
        if (e != cudaSuccess) {                                                                 \
            status = status_of_cuda(b, e, what);                                                \
            snprintf(detail, sizeof detail, "%s: %s", what, cudaGetErrorString(e));             \
            goto fail_enqueued;                                                                 \
        }                                                                                       \
        enqueued = 1;                                                                           \
    } while (0)

    if (x->timing)
        STEP(cudaEventRecord(x->t[0], s->stream), "cudaEventRecord");
    STEP(dev_alloc(b, s, &d_in, job->sz->payload), "cudaMallocFromPoolAsync(input)");
    STEP(dev_alloc(b, s, &d_out, job->sz->output), "cudaMallocFromPoolAsync(output)");
    STEP(dev_alloc(b, s, &d_scratch, job->sz->scratch), "cudaMallocFromPoolAsync(scratch)");
    if (job->sz->payload)
        STEP(cudaMemcpyAsync(d_in, job->h_in, job->sz->payload, cudaMemcpyHostToDevice, s->stream),
             "cudaMemcpyAsync(H2D)");
    if (x->timing)
        STEP(cudaEventRecord(x->t[1], s->stream), "cudaEventRecord");
    STEP(cudaMemsetAsync(gpuq_cuda_ctx_errflag(s->kctx), 0, sizeof(int), s->stream),
         "cudaMemsetAsync(errflag)");
    if (b->inject_sticky && b->submits == b->inject_sticky) {
        int k = gpuq_cuda_test_fault(s->stream);
        if (k != GPUQ_K_OK) {
            status = status_of_kcode(b, job, k);
            goto fail_enqueued;
        }
    }
    if (job->sz->output) {
        int k = launch_op(s, job, d_in, d_out, d_scratch);
        if (k != GPUQ_K_OK) {
            status = status_of_kcode(b, job, k);
            snprintf(detail, sizeof detail, "kernel launch failed");
            goto fail_enqueued;
        }
    }
    if (x->timing)
        STEP(cudaEventRecord(x->t[2], s->stream), "cudaEventRecord");
    if (job->sz->output)
        STEP(cudaMemcpyAsync(job->h_out, d_out, job->sz->output, cudaMemcpyDeviceToHost,
                             s->stream),
             "cudaMemcpyAsync(D2H)");
    STEP(cudaMemcpyAsync(x->h_flag, gpuq_cuda_ctx_errflag(s->kctx), sizeof(int),
                         cudaMemcpyDeviceToHost, s->stream),
         "cudaMemcpyAsync(errflag)");
    if (x->timing)
        STEP(cudaEventRecord(x->t[3], s->stream), "cudaEventRecord");

fail_enqueued:
    /* Free the buffers in stream order (after the work that uses them). */
    if (d_in && cudaFreeAsync(d_in, s->stream) != cudaSuccess)
        fprintf(stderr, "gpuqd cuda: cudaFreeAsync(input) failed\n");
    if (d_out && cudaFreeAsync(d_out, s->stream) != cudaSuccess)
        fprintf(stderr, "gpuqd cuda: cudaFreeAsync(output) failed\n");
    if (d_scratch && cudaFreeAsync(d_scratch, s->stream) != cudaSuccess)
        fprintf(stderr, "gpuqd cuda: cudaFreeAsync(scratch) failed\n");
#undef STEP
    if (status) {
        x->status = status;
        set_msg(x->message, sizeof x->message, status, detail[0] ? detail : NULL);
    }
    if (b->base.lost) {
        status = GPUQ_E_DEVICE_LOST;
        goto fail_now;
    }
    if (!enqueued && status)
        goto fail_now;
    e = cudaEventRecord(x->done, s->stream);
    if (e != cudaSuccess) {
        int st = status_of_cuda(b, e, "cudaEventRecord(done)");
        if (st == GPUQ_E_DEVICE_LOST) {
            status = st;
            goto fail_now;
        }
        /* The event is unusable: wait for the stream's work the slow way so
         * that the staging memory is no longer read once we complete. */
        cudaStreamSynchronize(s->stream);
        if (!x->status) {
            x->status = st;
            set_msg(x->message, sizeof x->message, st, "cudaEventRecord");
        }
        complete_later(b, job);
        return 0;
    }
    if (s->tail)
        s->tail->next = job;
    else
        s->head = job;
    s->tail = job;
    if (b->spin_ns)
        spin_kick(b);
    if (!s->armed && !b->spin_on)
        arm_doorbell(b, s);
    timer_start_if_needed(b);
    return 0;

fail_now:
    if (x) {
        if (!x->status || status == GPUQ_E_DEVICE_LOST) {
            x->status = status;
            set_msg(x->message, sizeof x->message, status, detail[0] ? detail : NULL);
        }
    } else {
        job->status = status;
        set_msg(job->message, sizeof job->message, status, detail[0] ? detail : NULL);
    }
    complete_later(b, job);
    return 0;
}

/* ---- host memory, devices, lifetime ---- */

static void *cuda_host_alloc(backend *bb, size_t len)
{
    (void)bb;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, len ? len : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        fprintf(stderr, "gpuqd cuda: cudaHostAlloc(%zu): %s\n", len, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void cuda_host_free(backend *bb, void *p)
{
    (void)bb;
    if (p) {
        cudaError_t e = cudaFreeHost(p);
        if (e != cudaSuccess)
            fprintf(stderr, "gpuqd cuda: cudaFreeHost: %s\n", cudaGetErrorString(e));
    }
}

static int cuda_ndevices(backend *bb) { return ((backend_cuda *)bb)->ndev; }

static void cuda_device_info(backend *bb, int i, backend_device *out)
{
    backend_cuda *b = (backend_cuda *)bb;
    cuda_dev *d = &b->devs[i];
    uint64_t used = 0;
    if (!b->base.lost &&
        cudaMemPoolGetAttribute(d->pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess)
        used = 0;
    memset(out, 0, sizeof *out);
    out->index = d->index;
    snprintf(out->name, sizeof out->name, "%s", d->name);
    out->total_memory = d->total_mem;
    out->memory_in_use = used;
    out->sessions = (uint32_t)d->sessions;
    out->in_flight = d->in_flight;
    out->bytes = d->bytes;
}

static uint64_t cuda_inflight(backend *bb)
{
    return ((backend_cuda *)bb)->inflight;
}

static void on_handle_closed(uv_handle_t *h)
{
    backend_cuda *b = h->data;
    if (--b->handles_open == 0) {
        pthread_mutex_destroy(&b->mu);
        for (int i = 0; i < b->ndev; i++) {
            if (b->devs[i].own_pool && !b->base.lost) {
                cudaError_t e = cudaMemPoolDestroy(b->devs[i].pool);
                if (e != cudaSuccess)
                    fprintf(stderr, "gpuqd cuda: cudaMemPoolDestroy: %s\n", cudaGetErrorString(e));
            }
        }
        free(b->devs);
        free(b);
    }
}

static void cuda_destroy(backend *bb)
{
    backend_cuda *b = (backend_cuda *)bb;
    /* Sessions the server did not close: nothing is in flight, drop them. */
    while (b->sessions) {
        cuda_sess *s = b->sessions;
        if (s->armed && !b->base.lost) {
            /* A doorbell still references s: let it run before freeing. */
            cudaStreamSynchronize(s->stream);
            s->armed = 0;
        }
        sess_destroy(b, s);
    }
    if (b->timer_on)
        uv_timer_stop(&b->timer);
    b->timer_on = 0;
    if (b->spin_on)
        uv_idle_stop(&b->spin);
    b->spin_on = 0;
    uv_close((uv_handle_t *)&b->async, on_handle_closed);
    uv_close((uv_handle_t *)&b->timer, on_handle_closed);
    uv_close((uv_handle_t *)&b->spin, on_handle_closed);
}

static const backend_ops cuda_ops = {
    .name = "cuda",
    .session_open = cuda_session_open,
    .session_close = cuda_session_close,
    .submit = cuda_submit,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .ndevices = cuda_ndevices,
    .device_info = cuda_device_info,
    .inflight = cuda_inflight,
    .destroy = cuda_destroy,
};

/* The device's default pool, or with a limit a pool of its own whose
 * maxSize makes allocations beyond it fail (cudaErrorMemoryAllocation),
 * made the device's current pool. */
static cudaError_t dev_pool_create(cuda_dev *d, uint64_t limit)
{
    if (limit == 0)
        return cudaDeviceGetDefaultMemPool(&d->pool, d->index);
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = d->index;
    props.maxSize = (size_t)limit;
    cudaError_t e = cudaMemPoolCreate(&d->pool, &props);
    if (e != cudaSuccess)
        return e;
    d->own_pool = 1;
    /* The kernels' scratch (cudaMallocAsync) then comes from it too. */
    return cudaDeviceSetMemPool(d->index, d->pool);
}

backend *backend_cuda_create(uv_loop_t *loop, backend_complete_fn done, uint64_t mem_limit,
                             char *why, size_t cap)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        snprintf(why, cap, "no CUDA device: %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        return NULL;
    }
    backend_cuda *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    b->devs = calloc((size_t)n, sizeof *b->devs);
    if (!b->devs) {
        snprintf(why, cap, "out of memory");
        goto err_after_alloc;
    }
    b->ndev = n;
    b->cur_dev = -1;
    uint64_t threshold = env_u64("GPUQ_CUDA_POOL_RELEASE_THRESHOLD");
    if (threshold == 0)
        threshold = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        cuda_dev *d = &b->devs[i];
        struct cudaDeviceProp prop;
        d->index = i;
        if ((e = cudaSetDevice(i)) != cudaSuccess ||
            (e = cudaGetDeviceProperties(&prop, i)) != cudaSuccess ||
            (e = cudaDeviceGetStreamPriorityRange(&d->prio_least, &d->prio_greatest)) !=
                cudaSuccess ||
            (e = dev_pool_create(d, mem_limit)) != cudaSuccess ||
            (e = cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &threshold)) !=
                cudaSuccess) {
            snprintf(why, cap, "CUDA device %d: %s", i, cudaGetErrorString(e));
            goto err_after_devs;
        }
        snprintf(d->name, sizeof d->name, "%s", prop.name);
        d->total_mem = (uint64_t)prop.totalGlobalMem;
    }
    b->cur_dev = n - 1;
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        snprintf(why, cap, "pthread_mutex_init failed");
        goto err_after_devs;
    }
    if (uv_async_init(loop, &b->async, on_async) != 0) {
        snprintf(why, cap, "uv_async_init failed");
        goto err_after_mutex;
    }
    b->async.data = b;
    b->handles_open = 1;
    if (uv_timer_init(loop, &b->timer) != 0) {
        snprintf(why, cap, "uv_timer_init failed");
        /* The async handle's memory is freed in its close callback. */
        uv_close((uv_handle_t *)&b->async, on_handle_closed);
        return NULL;
    }
    b->timer.data = b;
    b->handles_open = 2;
    if (uv_idle_init(loop, &b->spin) != 0) {
        snprintf(why, cap, "uv_idle_init failed");
        uv_close((uv_handle_t *)&b->async, on_handle_closed);
        uv_close((uv_handle_t *)&b->timer, on_handle_closed);
        return NULL;
    }
    b->spin.data = b;
    b->handles_open = 3;
    /* GPUQ_CUDA_SPIN_US: the adaptive spin window (0 turns it off). */
    const char *spin = getenv("GPUQ_CUDA_SPIN_US");
    b->spin_ns = (spin && *spin ? env_u64("GPUQ_CUDA_SPIN_US") : CUDA_SPIN_US_DEFAULT) * 1000;
    b->base.ops = &cuda_ops;
    b->base.loop = loop;
    b->base.complete = done;
    b->inject_sticky = env_u64("GPUQ_TEST_INJECT_STICKY");
    b->inject_oom = env_u64("GPUQ_TEST_INJECT_OOM");
    /* Load cuBLAS now, on the loop thread, so that the log says once at
     * startup which pairwise route float64 takes. */
    char blas[512];
    if (gpuq_cuda_gemm_status(blas, sizeof blas))
        log_info("cuBLAS: loaded from %s", blas);
    else
        log_info("cuBLAS not available (%s): float64 pairwise uses the tiled kernel", blas);
    return &b->base;

err_after_mutex:
    pthread_mutex_destroy(&b->mu);
err_after_devs:
    for (int i = 0; i < n; i++)
        if (b->devs[i].own_pool)
            cudaMemPoolDestroy(b->devs[i].pool);
    free(b->devs);
err_after_alloc:
    free(b);
    return NULL;
}
