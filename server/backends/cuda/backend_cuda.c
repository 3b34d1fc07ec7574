/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda.c - the CUDA backend of gpuqd: sessions on streams, submit,
 * and the completion path back to the loop.
 *
 * Happy path: submit() (loop thread) enqueues on the session's stream
 * H2D copy, errflag reset, kernel(s), D2H copy of result and errflag into
 * pinned memory, cudaFreeAsync of the device buffers, and records the job's
 * completion event; the job joins the session's FIFO of in-flight jobs.
 * A small job (GPUQ_CUDA_SMALL_BYTES) needs no allocation or free: its
 * buffers are carved from one its per-job state keeps between jobs. A
 * zero-copy job (GPUQ_CUDA_ZERO_COPY_BYTES: small, its host arrays
 * addressable by the device) skips the copies: its kernels read and write
 * the staging slot or arena directly, and one-thread kernels reset the
 * error flag and store it into pinned memory, so it uses no copy engine
 * and never queues behind another session's bulk transfers.
 * A large job whose op splits into rows runs its copies and kernels in
 * chunks instead, overlapped on two copy streams of the session and joined
 * back onto its stream before the same tail (backend_cuda_pipe.c).
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
 * Predictive spin (GPUQ_CUDA_EST_GBPS, GPUQ_CUDA_WAKE_TAIL_US): a doorbell
 * can take 150 to 300 us to wake the loop (measured on the H100 machine,
 * a virtual machine), a tenth of a 64 MiB job. A job longer than the spin
 * window gets a guess of its device time from its bytes; a timer wakes the
 * loop shortly before the guess and the spin covers its end
 * (cuda_wake_plan in backend_cuda_done.c). The loop sleeps during the
 * transfer and spins only around its end. Jobs in flight at the same
 * level or above share the copy engines with it, so its spin runs on past
 * the guess by theirs (GPUQ_CUDA_WAKE_QUEUE=0: not).
 *
 * Failures: submit() always returns 0 and reports every failure through the
 * completion path, never synchronously: a job that failed before anything
 * was enqueued goes to an immediate list drained by the same uv_async; one
 * that failed after work was enqueued waits in the FIFO behind its event
 * (its staging memory may still be read by the device). A sticky error
 * (cudaEventQuery, a launch, ...) sets b->lost and fails every in-flight job
 * of every session with GPUQ_E_DEVICE_LOST.
 *
 * Files: this one submits, creates and destroys; backend_cuda_dev.c holds
 * devices, sessions, per-job state and host memory; backend_cuda_done.c the
 * completion path; backend_cuda_pipe.c the chunked jobs.
 *
 * Lifetimes: a session is destroyed only when it is closing, has no job in
 * flight, no doorbell armed and is not being walked by a loop callback.
 */
#include "backend_cuda.h"
#include "backend_cuda_batch.h"
#include "backend_cuda_dev.h"
#include "backend_cuda_done.h"
#include "backend_cuda_gate.h"
#include "backend_cuda_pipe.h"
#include "backend_cuda_res.h"
#include "backend_run.h"

#include <dlfcn.h>
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

/* The kernels' log lines (gpuq_kernels_set_log) into gpuqd's logger. */
static void kernels_log(int level, const char *line)
{
    log_tagged(level, NULL, "%s", line);
}

/* ---- submit ---- */

static uint64_t align256(uint64_t n)
{
    return (n + 255) & ~(uint64_t)255;
}

/* A small job's device buffers: input, output (unless zero-copy: zc) and
 * scratch carved from the buffer x keeps (allocated from the pool on first
 * use, on s's stream, and freed when the session ends). 1 when the job uses
 * it, 0 when it is not small or the buffer cannot be had (the caller
 * allocates per job). */
static int small_bufs(backend_cuda *b, cuda_sess *s, cuda_jobx *x, const gpuq_job *job, int zc,
                      uint64_t scratch, void **d_in, void **d_out, void **d_scratch)
{
    uint64_t out_at = zc ? 0 : align256(job->sz->payload);
    uint64_t scr_at = zc ? 0 : out_at + align256(job->sz->output);
    if (b->small_bytes == 0 || scr_at + scratch > b->small_bytes)
        return 0;
    if (!x->d_small && cuda_dev_alloc(b, s, &x->d_small, b->small_bytes) != cudaSuccess) {
        x->d_small = NULL;
        return 0; /* the pool is full: this job allocates (and fails) the usual way */
    }
    char *base = x->d_small;
    if (!zc) {
        *d_in = job->sz->payload ? base : NULL;
        *d_out = job->sz->output ? base + out_at : NULL;
    }
    *d_scratch = scratch ? base + scr_at : NULL;
    b->small_jobs++;
    return 1;
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

/* How many of the n host arrays p[0..n) (len[k] bytes each) lie back to
 * back from p[0], so that one copy moves them (at least 1). */
static uint32_t copy_run(uint32_t n, const void *const *p, const uint64_t *len)
{
    uint32_t k = 1;
    while (k < n && (const char *)p[k - 1] + len[k - 1] == (const char *)p[k])
        k++;
    return k;
}

static int cuda_submit(backend *bb, gpuq_job *job)
{
    backend_cuda *b = (backend_cuda *)bb;
    cuda_sess *s = job->bsess;
    cuda_jobx *x = NULL;
    cuda_plan plan;
    void *d_in = NULL, *d_out = NULL, *d_scratch = NULL;
    int status = 0, enqueued = 0, chunked = 0, small = 0, zc = 0;
    uint64_t est_bytes = 0; /* what the guess of its end counts (cuda_wake_plan) */
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
    if ((status = cuda_use_device(b, s->dev->index)) != 0)
        goto fail_now;
    if ((status = cuda_jobx_get(b, s, job->req->timing, &x)) != 0)
        goto fail_now;
    job->bpriv = x;
    /* Zero-copy (kernels on the host arrays): a job with no input at any
     * size, else one that is not chunked (cuda_zero_copy_ok: small,
     * addressable, aligned). */
    /* A job that reads or keeps a resident array runs whole, alone, with
     * its own buffers (cuda_resident_run). */
    int res = backend_job_resident(job);
    int zc_ok = !res && cuda_zero_copy_ok(b, s, job);
    chunked = !res && !(zc_ok && job->sz->payload == 0) && cuda_pipe_plan(b, job, &plan);
    zc = zc_ok && !chunked;
    est_bytes = cuda_est_bytes(job);
    if (chunked && !plan.sp.two_phase) /* up and down at once (cuda_wake_plan) */
        est_bytes = job->sz->payload > job->sz->output ? job->sz->payload : job->sz->output;
    if (!chunked && !res && cuda_batch_take(b, s, job))
        return 0; /* launched with others in the idle phase (backend_cuda_batch.c) */
    if (res && cuda_row_take(b, s, job))
        return 0; /* a row batch, in the idle phase (backend_cuda_batch.c) */
    if (job->req->gate &&
        (status = cuda_gate_setup(b, job, x, chunked ? &plan : NULL, detail, sizeof detail)) != 0)
        goto fail_now;
    /* The stop gate of this job's launches (cuda_stop), unset again at
     * fail_enqueued, which every path after this one passes. */
    const int *gate = s->dev->host_ptr_ok ? cuda_jobx_gate(x) : NULL;
    gpuq_cuda_ctx_set_gate(s->kctx,
                           job->sz->payload + job->sz->output > CUDA_GATE_BYTES ? gate : NULL);

#define STEP(call, what)                                                                           \
    do {                                                                                           \
        e = (call);                                                                                \
        if (e != cudaSuccess) {                                                                    \
            status = cuda_status_of(b, e, what);                                                   \
            snprintf(detail, sizeof detail, "%s: %s", what, cudaGetErrorString(e));                \
            goto fail_enqueued;                                                                    \
        }                                                                                          \
        enqueued = 1;                                                                              \
    } while (0)
/* The same for a kernels-library call (a GPUQ_K_* code). */
#define KSTEP(call, what)                                                                          \
    do {                                                                                           \
        int k_ = (call);                                                                           \
        if (k_ != GPUQ_K_OK) {                                                                     \
            status = cuda_status_of_kcode(b, job, k_);                                             \
            snprintf(detail, sizeof detail, "%s", what);                                           \
            goto fail_enqueued;                                                                    \
        }                                                                                          \
        enqueued = 1;                                                                              \
    } while (0)

    /* a chunked job with input starts on the copy stream (below) */
    int up_first = chunked && job->sz->payload != 0;
    if (x->timing && !up_first)
        STEP(cudaEventRecord(x->t[0], s->stream), "cudaEventRecord");
    if (b->slow_ms) /* test hook: a slow job, as the CPU backend's */
        KSTEP(gpuq_cuda_test_sleep(s->stream, (unsigned)b->slow_ms, gate),
              "slow-job kernel launch failed");
    uint64_t scratch = chunked ? plan.scratch : op_scratch_bytes(job->req, job->sz);
    if (zc) { /* kernels on the host arrays */
        d_in = (void *)job->h_in[0];
        d_out = job->h_out[0];
        b->zero_copy_jobs++;
    }
    if (res) {
        status = cuda_resident_run(b, s, job, scratch, &d_in, &d_out, &d_scratch, &enqueued, detail,
                                   sizeof detail);
        if (status)
            goto fail_enqueued;
        goto tail;
    }
    small = !chunked && small_bufs(b, s, x, job, zc, scratch, &d_in, &d_out, &d_scratch);
    if (!small) {
        if (!zc && !up_first)
            STEP(cuda_dev_alloc(b, s, &d_in, job->sz->payload), "cudaMallocFromPoolAsync(input)");
        if (!zc)
            STEP(cuda_dev_alloc(b, s, &d_out, job->sz->output), "cudaMallocFromPoolAsync(output)");
        STEP(cuda_dev_alloc(b, s, &d_scratch, scratch), "cudaMallocFromPoolAsync(scratch)");
    }
    if (chunked) {
        /* In chunks on the copy streams and this one (backend_cuda_pipe.c);
         * joined back onto this stream on return, failed or not. */
        STEP(cudaMemsetAsync(gpuq_cuda_ctx_errflag(s->kctx), 0, sizeof(int), s->stream),
             "cudaMemsetAsync(errflag)");
        /* The input's buffer comes in stream order on the upload stream,
         * which waits for nothing on this one: the uploads start while this
         * stream still runs the session's earlier jobs (their downloads).
         * It is freed on this stream after the join, like the others. */
        if (up_first) {
            STEP(cuda_dev_alloc_on(b, s, s->copy_in, &d_in, job->sz->payload),
                 "cudaMallocFromPoolAsync(input)");
            if (x->timing)
                STEP(cudaEventRecord(x->t[0], s->copy_in), "cudaEventRecord");
        }
        status = cuda_pipe_run(b, s, job, &plan, d_in, d_out, d_scratch, detail, sizeof detail);
        if (status)
            goto fail_enqueued;
        goto tail;
    }
    if (job->req->gate && (status = cuda_gate_wait(b, s->stream, x, 1, detail, sizeof detail)) != 0)
        goto fail_enqueued; /* the input's copies (or zero-copy kernels) wait for all of it */
    for (uint32_t k = 0; k < job->sz->nin && !zc;) { /* A then B; one copy when adjacent */
        uint32_t n =
            copy_run(job->sz->nin - k, (const void *const *)&job->h_in[k], &job->sz->in_bytes[k]);
        size_t len = 0, at = 0;
        for (uint32_t j = 0; j < k + n; j++)
            *(j < k ? &at : &len) += job->sz->in_bytes[j];
        if (len)
            STEP(cudaMemcpyAsync((char *)d_in + at, job->h_in[k], len, cudaMemcpyHostToDevice,
                                 s->stream),
                 "cudaMemcpyAsync(H2D)");
        k += n;
    }
    if (x->timing)
        STEP(cudaEventRecord(x->t[1], s->stream), "cudaEventRecord");
    if (zc) /* no copy engine at all: the flag's reset is a kernel too */
        KSTEP(gpuq_cuda_ctx_flag_reset(s->kctx), "errflag kernel launch failed");
    else
        STEP(cudaMemsetAsync(gpuq_cuda_ctx_errflag(s->kctx), 0, sizeof(int), s->stream),
             "cudaMemsetAsync(errflag)");
    if (b->inject_sticky && b->submits == b->inject_sticky)
        KSTEP(gpuq_cuda_test_fault(s->stream), "");
    if (job->sz->output)
        KSTEP(launch_op(s, job, d_in, d_out, d_scratch), "kernel launch failed");
    if (x->timing)
        STEP(cudaEventRecord(x->t[2], s->stream), "cudaEventRecord");
    for (uint32_t k = 0; k < job->sz->nout && !zc;) { /* outputs packed in d_out */
        uint64_t ob[GPUQ_MAX_OUTPUTS] = {job->sz->out[0].bytes, job->sz->out[1].bytes};
        uint32_t n = copy_run(job->sz->nout - k, (const void *const *)&job->h_out[k], &ob[k]);
        size_t len = 0, at = 0;
        for (uint32_t j = 0; j < k + n; j++)
            *(j < k ? &at : &len) += ob[j];
        if (len)
            STEP(cudaMemcpyAsync(job->h_out[k], (const char *)d_out + at, len,
                                 cudaMemcpyDeviceToHost, s->stream),
                 "cudaMemcpyAsync(D2H)");
        k += n;
    }
tail:
    if (zc) /* the flag too without a copy engine */
        KSTEP(gpuq_cuda_ctx_flag_to_host(s->kctx, x->h_flag), "errflag kernel launch failed");
    else
        STEP(cudaMemcpyAsync(x->h_flag, gpuq_cuda_ctx_errflag(s->kctx), sizeof(int),
                             cudaMemcpyDeviceToHost, s->stream),
             "cudaMemcpyAsync(errflag)");
    if (x->timing)
        STEP(cudaEventRecord(x->t[3], s->stream), "cudaEventRecord");

fail_enqueued:
    gpuq_cuda_ctx_set_gate(s->kctx, NULL);
    /* Free the buffers in stream order (after the work that uses them); a
     * small job's stay with x, reused only once this job completed. */
    if (small)
        d_in = d_out = d_scratch = NULL;
    if (zc) /* host memory, not the pool's */
        d_in = d_out = NULL;
    if (d_in && cudaFreeAsync(d_in, s->stream) != cudaSuccess)
        log_error("cuda: cudaFreeAsync(input) failed");
    if (d_out && cudaFreeAsync(d_out, s->stream) != cudaSuccess)
        log_error("cuda: cudaFreeAsync(output) failed");
    if (d_scratch && cudaFreeAsync(d_scratch, s->stream) != cudaSuccess)
        log_error("cuda: cudaFreeAsync(scratch) failed");
#undef STEP
#undef KSTEP
    if (status) {
        x->status = status;
        cuda_set_msg(x->message, sizeof x->message, status, detail[0] ? detail : NULL);
    }
    if (b->base.lost) {
        status = GPUQ_E_DEVICE_LOST;
        goto fail_now;
    }
    if (!enqueued && status)
        goto fail_now;
    e = cudaEventRecord(x->done, s->stream);
    if (e != cudaSuccess) {
        int st = cuda_status_of(b, e, "cudaEventRecord(done)");
        if (st == GPUQ_E_DEVICE_LOST) {
            status = st;
            goto fail_now;
        }
        /* The event is unusable: wait for the stream's work the slow way so
         * that the staging memory is no longer read once we complete. */
        cudaStreamSynchronize(s->stream);
        if (!x->status) {
            x->status = st;
            cuda_set_msg(x->message, sizeof x->message, st, "cudaEventRecord");
        }
        cuda_complete_later(b, job);
        return 0;
    }
    if (s->tail)
        s->tail->next = job;
    else
        s->head = job;
    s->tail = job;
    if (b->spin_ns)
        cuda_spin_kick(b);
    cuda_wake_plan(b, s, job, est_bytes);
    if (!s->armed && !b->spin_on)
        cuda_arm_doorbell(b, s);
    cuda_timer_start_if_needed(b);
    return 0;

fail_now:
    if (x) {
        if (!x->status || status == GPUQ_E_DEVICE_LOST) {
            x->status = status;
            cuda_set_msg(x->message, sizeof x->message, status, detail[0] ? detail : NULL);
        }
    } else {
        job->status = status;
        cuda_set_msg(job->message, sizeof job->message, status, detail[0] ? detail : NULL);
    }
    cuda_complete_later(b, job);
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    backend_cuda *b = h->data;
    if (--b->handles_open == 0) {
        pthread_mutex_destroy(&b->mu);
        if (!b->base.lost)
            cuda_flags_fini(b);
        for (int i = 0; i < b->ndev; i++) {
            if (b->devs[i].own_pool && !b->base.lost) {
                cudaError_t e = cudaMemPoolDestroy(b->devs[i].pool);
                if (e != cudaSuccess)
                    log_error("cuda: cudaMemPoolDestroy: %s", cudaGetErrorString(e));
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
        cuda_sess_destroy(b, s);
    }
    if (b->timer_on)
        uv_timer_stop(&b->timer);
    b->timer_on = 0;
    if (b->spin_on)
        uv_idle_stop(&b->spin);
    b->spin_on = 0;
    if (b->wake_on)
        uv_timer_stop(&b->wake);
    b->wake_on = 0;
    if (b->flush_on)
        uv_idle_stop(&b->flush);
    b->flush_on = 0;
    uv_close((uv_handle_t *)&b->async, on_handle_closed);
    uv_close((uv_handle_t *)&b->timer, on_handle_closed);
    uv_close((uv_handle_t *)&b->spin, on_handle_closed);
    uv_close((uv_handle_t *)&b->wake, on_handle_closed);
    uv_close((uv_handle_t *)&b->flush, on_handle_closed);
}

/* The job was abandoned (job->stop is set): its gate tells the kernels it
 * gave one (cuda_submit) to end at their next tile. The device reads the
 * store within a load or two; the job still completes as usual, with the
 * flag GPUQ_K_E_STOPPED when a kernel saw it. */
static void cuda_stop(backend *bb, gpuq_job *job)
{
    (void)bb;
    cuda_jobx *x = job->bpriv;
    if (x && x->h_flag) {
        __atomic_store_n(cuda_jobx_gate(x), 1, __ATOMIC_RELAXED);
        cuda_gate_release(x); /* its uploads need no announcement now */
    }
}

static const backend_ops cuda_ops = {
    .name = "cuda",
    .session_open = cuda_session_open,
    .session_close = cuda_session_close,
    .submit = cuda_submit,
    .stop = cuda_stop,
    .gate = cuda_gate,
    .host_thread_init = cuda_host_thread_init,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .res_free = cuda_res_free,
    .res_alloc = cuda_res_alloc,
    .res_copy = cuda_res_copy,
    .ndevices = cuda_ndevices,
    .device_info = cuda_device_info,
    .inflight = cuda_inflight,
    .destroy = cuda_destroy,
};

/* The driver first: without libcuda.so.1 the runtime only says
 * "CUDA driver version is insufficient for CUDA runtime version"
 * (cudaErrorInsufficientDriver), which reads as if a driver were there. The
 * handle stays open: the runtime loads the same library next, and
 * unloading a driver library is not something it expects. */
int backend_cuda_probe(char *why, size_t cap)
{
    static void *libcuda;
    if (!libcuda && !(libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))) {
        const char *err = dlerror();
        if (!err || strstr(err, "No such file"))
            snprintf(why, cap, "no NVIDIA driver (libcuda.so.1 not found)");
        else
            snprintf(why, cap, "no NVIDIA driver (libcuda.so.1 cannot be loaded: %s)", err);
        return BACKEND_CUDA_NO_DRIVER;
    }
    int n = 0, drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver) {
        if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0) {
            snprintf(why, cap,
                     "no NVIDIA driver (libcuda.so.1 loads, but CUDA finds no driver: "
                     "cudaErrorInsufficientDriver)");
            return BACKEND_CUDA_NO_DRIVER;
        }
        if (cudaRuntimeGetVersion(&rt) != cudaSuccess)
            rt = 0;
        snprintf(why, cap,
                 "NVIDIA driver too old: it supports CUDA %d.%d, gpuqd needs %d.%d "
                 "(cudaErrorInsufficientDriver)",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        return BACKEND_CUDA_NO_DEVICE;
    }
    if (e != cudaSuccess) {
        snprintf(why, cap, "no CUDA device: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return BACKEND_CUDA_NO_DEVICE;
    }
    if (n <= 0) {
        snprintf(why, cap, "no CUDA device: the device count is 0");
        return BACKEND_CUDA_NO_DEVICE;
    }
    return BACKEND_CUDA_OK;
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
    uint64_t threshold = cuda_env_u64("GPUQ_CUDA_POOL_RELEASE_THRESHOLD");
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
            (e = cuda_dev_pool_create(d, mem_limit)) != cudaSuccess ||
            (e = cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &threshold)) !=
                cudaSuccess ||
            (e = cuda_dev_pool_reuse_local(d)) != cudaSuccess) {
            snprintf(why, cap, "CUDA device %d: %s", i, cudaGetErrorString(e));
            goto err_after_devs;
        }
        snprintf(d->name, sizeof d->name, "%s", prop.name);
        /* Zero-copy jobs need the device to reach pinned (cudaHostAlloc:
         * unified addressing) and registered (arenas) host memory at the
         * host's own pointers. */
        int uva = 0, hostptr = 0;
        if (cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, i) != cudaSuccess ||
            cudaDeviceGetAttribute(&hostptr, cudaDevAttrCanUseHostPointerForRegisteredMem, i) !=
                cudaSuccess)
            uva = hostptr = 0;
        d->host_ptr_ok = uva && hostptr;
        d->total_mem = (uint64_t)prop.totalGlobalMem;
    }
    b->cur_dev = n - 1;
    if (cuda_flags_init(b) != 0) /* then each job's flag is its own allocation */
        log_warn("cuda: no pinned slab for error flags; allocating them one by one");
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        snprintf(why, cap, "pthread_mutex_init failed");
        goto err_after_devs;
    }
    if (uv_async_init(loop, &b->async, cuda_on_async) != 0) {
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
    if (uv_timer_init(loop, &b->wake) != 0) {
        snprintf(why, cap, "uv_timer_init failed");
        uv_close((uv_handle_t *)&b->async, on_handle_closed);
        uv_close((uv_handle_t *)&b->timer, on_handle_closed);
        uv_close((uv_handle_t *)&b->spin, on_handle_closed);
        return NULL;
    }
    b->wake.data = b;
    b->handles_open = 4;
    b->base.loop = loop; /* the batch flush's idle handle is on it */
    if (cuda_batch_init(b) != 0) {
        snprintf(why, cap, "uv_idle_init failed");
        uv_close((uv_handle_t *)&b->async, on_handle_closed);
        uv_close((uv_handle_t *)&b->timer, on_handle_closed);
        uv_close((uv_handle_t *)&b->spin, on_handle_closed);
        uv_close((uv_handle_t *)&b->wake, on_handle_closed);
        return NULL;
    }
    b->handles_open = 5;
    /* GPUQ_CUDA_EST_GBPS, GPUQ_CUDA_WAKE_TAIL_US: the predictive spin
     * (cuda_wake_plan; a tail of 0 turns it off). */
    const char *est = getenv("GPUQ_CUDA_EST_GBPS"), *tail = getenv("GPUQ_CUDA_WAKE_TAIL_US");
    b->est_gbps = est && *est ? cuda_env_u64("GPUQ_CUDA_EST_GBPS") : CUDA_EST_GBPS;
    b->wake_lead_ns = (uint64_t)CUDA_WAKE_LEAD_US * 1000;
    b->wake_tail_ns =
        (tail && *tail ? cuda_env_u64("GPUQ_CUDA_WAKE_TAIL_US") : CUDA_WAKE_TAIL_US) * 1000;
    const char *wq = getenv("GPUQ_CUDA_WAKE_QUEUE");
    b->wake_queue = !(wq && !strcmp(wq, "0"));
    /* GPUQ_CUDA_SPIN_US: the adaptive spin window (0 turns it off). */
    const char *spin = getenv("GPUQ_CUDA_SPIN_US");
    b->spin_ns = (spin && *spin ? cuda_env_u64("GPUQ_CUDA_SPIN_US") : CUDA_SPIN_US_DEFAULT) * 1000;
    b->base.ops = &cuda_ops;
    b->base.complete = done;
    cuda_gate_init(b);
    b->inject_sticky = cuda_env_u64("GPUQ_TEST_INJECT_STICKY");
    b->inject_oom = cuda_env_u64("GPUQ_TEST_INJECT_OOM");
    b->slow_ms = cuda_env_u64("GPUQ_TEST_SLOW_MS");
    b->inject_pipe = cuda_env_u64("GPUQ_TEST_INJECT_PIPE");
    /* GPUQ_CUDA_CHUNK_BYTES: pipelining's chunk size and threshold (0: off). */
    const char *chunk = getenv("GPUQ_CUDA_CHUNK_BYTES");
    b->chunk_bytes =
        chunk && *chunk ? cuda_env_u64("GPUQ_CUDA_CHUNK_BYTES") : CUDA_CHUNK_BYTES_DEFAULT;
    /* GPUQ_CUDA_ZERO_COPY_BYTES: zero-copy jobs up to that size (0: off). */
    const char *zcb = getenv("GPUQ_CUDA_ZERO_COPY_BYTES");
    b->zc_bytes =
        zcb && *zcb ? cuda_env_u64("GPUQ_CUDA_ZERO_COPY_BYTES") : CUDA_ZERO_COPY_BYTES_DEFAULT;
    /* GPUQ_CUDA_SMALL_BYTES: the kept buffer of small jobs (0: off). */
    const char *small = getenv("GPUQ_CUDA_SMALL_BYTES");
    b->small_bytes =
        small && *small ? cuda_env_u64("GPUQ_CUDA_SMALL_BYTES") : CUDA_SMALL_BYTES_DEFAULT;
    gpuq_kernels_set_log(kernels_log);
    return &b->base;

err_after_mutex:
    pthread_mutex_destroy(&b->mu);
err_after_devs:
    cuda_flags_fini(b);
    for (int i = 0; i < n; i++)
        if (b->devs[i].own_pool)
            cudaMemPoolDestroy(b->devs[i].pool);
    free(b->devs);
err_after_alloc:
    free(b);
    return NULL;
}

void backend_cuda_load_blas(void)
{
    char blas[512];
    if (gpuq_cuda_gemm_status(blas, sizeof blas))
        log_info("cuBLAS: loaded from %s", blas);
    else
        log_info("cuBLAS not available (%s): float64 cosine pairwise uses the tiled kernel", blas);
}
