/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_dev.c - see backend_cuda_dev.h. */
#include "backend_cuda_dev.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "errors.h"
#include "gpuq_kernels.h"
#include "log.h"
#include "backend_run.h"

/* ---- small helpers ---- */

int cuda_sticky(cudaError_t e)
{
    return gpuq_cuda_error_code(e) == GPUQ_K_E_STICKY;
}

void cuda_mark_lost(backend_cuda *b, const char *what, cudaError_t e)
{
    if (b->base.lost)
        return;
    b->base.lost = 1;
    snprintf(b->base.lost_reason, sizeof b->base.lost_reason, "%s: %s", what,
             cudaGetErrorString(e));
    log_error("cuda: device lost: %s", b->base.lost_reason);
}

/* Map a CUDA error of a submit step to a job status; sticky ones lose the device. */
int cuda_status_of(backend_cuda *b, cudaError_t e, const char *what)
{
    int k = gpuq_cuda_error_code(e);
    log_error("cuda: %s: %s", what, cudaGetErrorString(e));
    if (k == GPUQ_K_E_STICKY) {
        cuda_mark_lost(b, what, e);
        return GPUQ_E_DEVICE_LOST;
    }
    return k == GPUQ_K_E_NOMEM ? GPUQ_E_NO_MEMORY : GPUQ_E_DEVICE;
}

/* A kernel launch's code as a job status (backend_map_kernel_error's table);
 * a sticky one also loses the device. */
int cuda_status_of_kcode(backend_cuda *b, gpuq_job *job, int k)
{
    if (k == GPUQ_K_E_STICKY)
        cuda_mark_lost(b, "kernel launch", cudaErrorLaunchFailure);
    return backend_map_kernel_error(job, k);
}

void cuda_set_msg(char *dst, size_t cap, int status, const char *detail)
{
    snprintf(dst, cap, "%.50s%s%.100s", gpuq_strerror(status), detail ? ": " : "",
             detail ? detail : "");
}

int cuda_use_device(backend_cuda *b, int dev)
{
    if (b->cur_dev == dev)
        return 0;
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess)
        return cuda_status_of(b, e, "cudaSetDevice");
    b->cur_dev = dev;
    return 0;
}

uint64_t cuda_env_u64(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : 0;
}

/* ---- pinned error flags and stop gates ----
 * Every job's flag is copied into pinned host memory, and its stop gate is
 * the int after it (cuda_jobx_gate), which the loop sets and the kernels read
 * (cuda_stop). A cudaFreeHost waits
 * for the whole device, so flags are never freed while gpuqd runs: they
 * come from one slab allocated with the backend, and go back to it when a
 * session ends (a session that closes would otherwise stall the loop until
 * every other session's work is done). */

int cuda_flags_init(backend_cuda *b)
{
    b->flag_next = malloc(CUDA_FLAG_SLOTS * sizeof *b->flag_next);
    if (!b->flag_next)
        return -1;
    cudaError_t e =
        cudaHostAlloc((void **)&b->flag_slab, CUDA_FLAG_SLOTS * CUDA_FLAG_INTS * sizeof(int),
                      cudaHostAllocPortable);
    if (e != cudaSuccess) {
        free(b->flag_next);
        b->flag_next = NULL;
        b->flag_slab = NULL;
        return -1;
    }
    for (uint32_t i = 0; i < CUDA_FLAG_SLOTS; i++)
        b->flag_next[i] = i + 1;
    b->flag_head = 0;
    return 0;
}

void cuda_flags_fini(backend_cuda *b)
{
    if (b->flag_slab && cudaFreeHost(b->flag_slab) != cudaSuccess)
        log_error("cuda: cudaFreeHost(flags) failed");
    free(b->flag_next);
    b->flag_slab = NULL;
    b->flag_next = NULL;
}

/* Zero-copy: may job's kernels work on its host arrays themselves? Its
 * input + output bytes are at most zc_bytes, the device reaches pinned and
 * registered host memory at the host's pointers, and the arrays lie as the
 * device buffers would (B right after A, output 1 right after output 0).
 * Such a job needs no copy engine: a small high-priority request then never
 * waits behind another session's bulk copies, and costs two CUDA calls
 * fewer. A job with no input (grid) qualifies at any size: its kernel
 * writes each output value once, in order, so its stores stream to host
 * memory at about the copy engine's rate (8 MB: 158 us against a 148 us
 * copy on an H200) while the kernel's own time hides under them, where a
 * kernel and then a download add up. */
int cuda_zero_copy_ok(const backend_cuda *b, const cuda_sess *s, const gpuq_job *job)
{
    const gpuq_sizes *sz = job->sz;
    if (b->zc_bytes == 0 || !s->dev->host_ptr_ok ||
        (sz->payload != 0 && sz->payload + sz->output > b->zc_bytes))
        return 0;
    if (sz->nin > 1 && (const char *)job->h_in[0] + sz->in_bytes[0] != job->h_in[1])
        return 0;
    if (sz->nout > 1 && (char *)job->h_out[0] + sz->out[0].bytes != job->h_out[1])
        return 0;
    /* Kernels load and store whole elements: a host array off its element
     * size would fault the device, where a copy does not care. gpuqd's own
     * arrays never are (staging is aligned, arena offsets are checked: see
     * PROTOCOL.md 3.4); this keeps it so for any caller. */
    uintptr_t es = gpuq_dtype_size(job->req->dtype), ix = 8; /* out[1]: knn's int64 */
    if (es == 0)
        es = 1;
    for (uint32_t k = 0; k < sz->nin && k < GPUQ_MAX_INPUTS; k++)
        if ((uintptr_t)job->h_in[k] % es != 0)
            return 0;
    for (uint32_t k = 0; k < sz->nout && k < GPUQ_MAX_OUTPUTS; k++)
        if ((uintptr_t)job->h_out[k] % (k ? ix : es) != 0)
            return 0;
    return 1;
}

/* ---- per-job state ---- */

void cuda_jobx_free(backend_cuda *b, cuda_jobx *x)
{
    /* x->d_small was freed on its session's stream (cuda_sess_destroy) */
    if (x->done)
        cudaEventDestroy(x->done);
    if (x->has_timing_events)
        for (int i = 0; i < 4; i++)
            cudaEventDestroy(x->t[i]);
    if (x->h_flag && x->flag_own) {
        backend_note_pin(&b->base);
        if (cudaFreeHost(x->h_flag) != cudaSuccess)
            log_error("cuda: cudaFreeHost(flag) failed");
    } else if (x->h_flag) {
        uint32_t i = (uint32_t)(x->h_flag - b->flag_slab) / CUDA_FLAG_INTS;
        b->flag_next[i] = b->flag_head;
        b->flag_head = i;
    }
    free(x);
}

/* A jobx from the session's free list, or a new one (rare: only while the
 * session's in-flight depth grows). Returns 0 or a GPUQ_E_* status. */
int cuda_jobx_get(backend_cuda *b, cuda_sess *s, int timing, cuda_jobx **out)
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
            cuda_jobx_free(b, x);
            return cuda_status_of(b, e, "cudaEventCreate");
        }
        if (b->flag_slab && b->flag_head < CUDA_FLAG_SLOTS) {
            x->h_flag = &b->flag_slab[CUDA_FLAG_INTS * b->flag_head];
            b->flag_head = b->flag_next[b->flag_head];
        } else {
            /* beyond the slab (CUDA_FLAG_SLOTS jobs at once): on the loop,
             * and counted as such */
            backend_note_pin(&b->base);
            e = cudaHostAlloc((void **)&x->h_flag, CUDA_FLAG_INTS * sizeof(int),
                              cudaHostAllocPortable);
            if (e != cudaSuccess) {
                x->h_flag = NULL;
                cuda_jobx_free(b, x);
                return cuda_status_of(b, e, "cudaHostAlloc(flag)");
            }
            x->flag_own = 1;
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
            return cuda_status_of(b, e, "cudaEventCreate(timing)");
        }
        x->has_timing_events = 1;
    }
    x->timing = timing;
    x->status = 0;
    x->message[0] = '\0';
    *x->h_flag = 0;
    /* no kernel reads it: the job that used x last has completed */
    __atomic_store_n(cuda_jobx_gate(x), 0, __ATOMIC_RELAXED);
    __atomic_store_n(cuda_jobx_ready(x), 0u, __ATOMIC_RELAXED);
    x->gate_n = 0;
    *out = x;
    return 0;
}

void cuda_jobx_put(cuda_sess *s, cuda_jobx *x)
{
    x->next_free = s->free_x;
    s->free_x = x;
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

/* The session's copy streams, of the compute stream's priority, and the
 * pipeline's events (backend_cuda_pipe.c). Destroyed idle, errors only
 * logged (after a sticky error every call fails). */
static void sess_pipe_fini(cuda_sess *s)
{
    cudaEvent_t ev[3] = {s->ev_in, s->ev_comp, s->ev_out};
    for (int k = 0; k < 3; k++)
        if (ev[k] && cudaEventDestroy(ev[k]) != cudaSuccess)
            log_error("cuda: cudaEventDestroy(pipeline) failed");
    if (s->copy_in && cudaStreamDestroy(s->copy_in) != cudaSuccess)
        log_error("cuda: cudaStreamDestroy(copy in) failed");
    if (s->copy_out && cudaStreamDestroy(s->copy_out) != cudaSuccess)
        log_error("cuda: cudaStreamDestroy(copy out) failed");
    s->copy_in = s->copy_out = NULL;
    s->ev_in = s->ev_comp = s->ev_out = NULL;
}

static int sess_pipe_init(backend_cuda *b, cuda_sess *s, int prio)
{
    cudaEvent_t *ev[3] = {&s->ev_in, &s->ev_comp, &s->ev_out};
    cudaError_t e;
    int rc;
    s->copy_in = s->copy_out = NULL;
    for (int k = 0; k < 3; k++)
        *ev[k] = NULL;
    e = cudaStreamCreateWithPriority(&s->copy_in, cudaStreamNonBlocking, prio);
    if (e != cudaSuccess) {
        s->copy_in = NULL;
        rc = cuda_status_of(b, e, "cudaStreamCreateWithPriority(copy in)");
        goto err;
    }
    e = cudaStreamCreateWithPriority(&s->copy_out, cudaStreamNonBlocking, prio);
    if (e != cudaSuccess) {
        s->copy_out = NULL;
        rc = cuda_status_of(b, e, "cudaStreamCreateWithPriority(copy out)");
        goto err;
    }
    for (int i = 0; i < 3; i++) {
        e = cudaEventCreateWithFlags(ev[i], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            *ev[i] = NULL;
            rc = cuda_status_of(b, e, "cudaEventCreateWithFlags(pipeline)");
            goto err;
        }
    }
    return 0;

err:
    sess_pipe_fini(s);
    return rc;
}

int cuda_session_open(backend *bb, int priority, int device, void **bsess,
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
    int rc = cuda_use_device(b, d->index);
    if (rc)
        return rc;
    cuda_sess *s = calloc(1, sizeof *s);
    if (!s)
        return GPUQ_E_NO_MEMORY;
    s->b = b;
    s->dev = d;
    s->level = priority;
    int prio = map_priority(d, priority);
    cudaError_t e = cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, prio);
    if (e != cudaSuccess) {
        rc = cuda_status_of(b, e, "cudaStreamCreateWithPriority");
        goto err_after_alloc;
    }
    int k = gpuq_cuda_ctx_create(s->stream, &s->kctx);
    if (k != GPUQ_K_OK) {
        /* Context creation fails only for memory or the device itself. */
        if (k == GPUQ_K_E_STICKY)
            cuda_mark_lost(b, "gpuq_cuda_ctx_create", cudaErrorLaunchFailure);
        rc = k == GPUQ_K_E_STICKY  ? GPUQ_E_DEVICE_LOST
             : k == GPUQ_K_E_NOMEM ? GPUQ_E_NO_MEMORY
                                   : GPUQ_E_DEVICE;
        goto err_after_stream;
    }
    if ((rc = sess_pipe_init(b, s, prio)) != 0)
        goto err_after_ctx;
    s->next = b->sessions;
    if (b->sessions)
        b->sessions->prev = s;
    b->sessions = s;
    d->sessions++;
    info->priority_granted = prio;
    info->device = d->index;
    *bsess = s;
    return 0;

err_after_ctx:
    gpuq_cuda_ctx_destroy(s->kctx);
err_after_stream:
    cudaStreamDestroy(s->stream);
err_after_alloc:
    free(s);
    return rc;
}

void cuda_batch_put(cuda_sess *lane, cuda_batch *bt)
{
    bt->jobs = NULL;
    bt->n = 0;
    bt->next = lane->bfree;
    lane->bfree = bt;
}

void cuda_batch_free(cuda_sess *lane, cuda_batch *bt)
{
    /* Errors are ignored: after a sticky error every call fails. */
    if (bt->d_state && cudaFreeAsync(bt->d_state, lane->stream) != cudaSuccess)
        (void)cudaGetLastError();
    if (bt->done)
        cudaEventDestroy(bt->done);
    free(bt);
}

/* A lane's batch objects (it is idle: all on its free list) and its place
 * on the device. */
static void lane_fini(cuda_sess *lane)
{
    while (lane->bfree) {
        cuda_batch *bt = lane->bfree;
        lane->bfree = bt->next;
        cuda_batch_free(lane, bt);
    }
    for (int l = 0; l < CUDA_LEVELS; l++)
        if (lane->dev->lane[l] == lane)
            lane->dev->lane[l] = NULL;
}

void cuda_sess_destroy(backend_cuda *b, cuda_sess *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        b->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    if (!s->lane)
        s->dev->sessions--;
    /* Errors are ignored here: after a sticky error every call fails. */
    if (cuda_use_device(b, s->dev->index) == 0 || b->base.lost) {
        /* the kept small buffers go back to the pool (nothing runs: the
         * session is idle) */
        for (cuda_jobx *x = s->free_x; x; x = x->next_free)
            if (x->d_small && cudaFreeAsync(x->d_small, s->stream) != cudaSuccess)
                (void)cudaGetLastError();
        if (s->lane)
            lane_fini(s);
        sess_pipe_fini(s);
        gpuq_cuda_ctx_destroy(s->kctx);
        cudaStreamDestroy(s->stream);
    }
    while (s->free_x) {
        cuda_jobx *x = s->free_x;
        s->free_x = x->next_free;
        cuda_jobx_free(b, x);
    }
    free(s);
}

void cuda_sess_maybe_destroy(backend_cuda *b, cuda_sess *s)
{
    if (s->closing && !s->armed && !cuda_sess_busy(s) && s->nflight == 0 && b->walking == 0)
        cuda_sess_destroy(b, s);
}

void cuda_reap_sessions(backend_cuda *b)
{
    cuda_sess *s = b->sessions;
    while (s) {
        cuda_sess *next = s->next;
        cuda_sess_maybe_destroy(b, s);
        s = next;
    }
}

void cuda_session_close(backend *bb, void *bsess)
{
    backend_cuda *b = (backend_cuda *)bb;
    cuda_sess *s = bsess;
    if (!s || s->closing)
        return;
    s->closing = 1;
    /* Deferred while a doorbell is armed (it holds s) or a callback walks. */
    cuda_sess_maybe_destroy(b, s);
}

/* ---- host memory, devices, lifetime ---- */

/* The pinning thread (planes/pinner.c): the first device made current
 * there; page-locked memory is portable, so one context serves every
 * device's sessions. cudaSetDevice directly, not cuda_use_device: cur_dev is
 * the loop thread's. */
int cuda_host_thread_init(backend *bb, char *why, size_t cap)
{
    backend_cuda *b = (backend_cuda *)bb;
    if (b->ndev < 1) {
        snprintf(why, cap, "no CUDA device");
        return GPUQ_E_DEVICE;
    }
    cudaError_t e = cudaSetDevice(b->devs[0].index);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, cap, "cudaSetDevice(%d): %s", b->devs[0].index, cudaGetErrorString(e));
        return GPUQ_E_DEVICE;
    }
    return 0;
}

void *cuda_host_alloc(backend *bb, size_t len)
{
    backend_note_pin(bb);
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, len ? len : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        log_error("cuda: cudaHostAlloc(%zu): %s", len, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

int cuda_host_register(backend *bb, void *p, size_t len, char *why, size_t cap)
{
    backend_note_pin(bb);
    /* Portable: every device's sessions copy from it. */
    cudaError_t e = cudaHostRegister(p, len, cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: keep it from failing the next launch check */
        snprintf(why, cap, "cudaHostRegister(%zu bytes): %s", len, cudaGetErrorString(e));
        log_error("cuda: %s", why);
        return GPUQ_E_NO_MEMORY;
    }
    return 0;
}

void cuda_host_unregister(backend *bb, void *p)
{
    backend_note_pin(bb);
    cudaError_t e = cudaHostUnregister(p);
    if (e != cudaSuccess)
        log_error("cuda: cudaHostUnregister: %s", cudaGetErrorString(e));
}

void cuda_host_free(backend *bb, void *p)
{
    if (p) {
        backend_note_pin(bb);
        cudaError_t e = cudaFreeHost(p);
        if (e != cudaSuccess)
            log_error("cuda: cudaFreeHost: %s", cudaGetErrorString(e));
    }
}

int cuda_ndevices(backend *bb)
{
    return ((backend_cuda *)bb)->ndev;
}

void cuda_device_info(backend *bb, int i, backend_device *out)
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

uint64_t cuda_inflight(backend *bb)
{
    return ((backend_cuda *)bb)->inflight;
}

/* Reuse without cross-stream waits (dev_alloc in backend_cuda.c):
 * GPUQ_CUDA_POOL_CROSS_STREAM=1 keeps the pool's default instead. */
cudaError_t cuda_dev_pool_reuse_local(cuda_dev *d)
{
    d->reuse_local = 0;
    if (cuda_env_u64("GPUQ_CUDA_POOL_CROSS_STREAM"))
        return cudaSuccess;
    int off = 0;
    cudaError_t e =
        cudaMemPoolSetAttribute(d->pool, cudaMemPoolReuseAllowInternalDependencies, &off);
    if (e == cudaSuccess)
        d->reuse_local = 1;
    return e;
}

/* The device's default pool, or with a limit a pool of its own whose
 * maxSize makes allocations beyond it fail (cudaErrorMemoryAllocation),
 * made the device's current pool. */
cudaError_t cuda_dev_pool_create(cuda_dev *d, uint64_t limit)
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

/* Stream-ordered allocation from the session's device pool (bounded by
 * the device memory limit when one is set). The pool reuses only memory
 * freed on the same stream or whose free has completed (reuse_local): a
 * session's allocation never waits for another session's stream, which
 * would chain the sessions' jobs one after the other. Only when that finds
 * nothing (the pool at its limit) does one allocation fall back to the
 * pool's default, reuse behind a wait. */
cudaError_t cuda_dev_alloc_on(backend_cuda *b, cuda_sess *s, cudaStream_t st, void **p, size_t len)
{
    *p = NULL;
    if (len == 0)
        return cudaSuccess;
    b->allocs++;
    if (b->inject_oom && b->allocs == b->inject_oom)
        return cudaErrorMemoryAllocation;
    cudaError_t e = cudaMallocFromPoolAsync(p, len, s->dev->pool, st);
    if (e == cudaErrorMemoryAllocation && s->dev->reuse_local) {
        /* Nothing reusable without waiting: this once, let the pool reuse
         * memory another stream freed by making this stream wait for it. */
        (void)cudaGetLastError();
        int on = 1, off = 0;
        e = cudaMemPoolSetAttribute(s->dev->pool, cudaMemPoolReuseAllowInternalDependencies, &on);
        if (e == cudaSuccess) {
            e = cudaMallocFromPoolAsync(p, len, s->dev->pool, st);
            cudaError_t e2 = cudaMemPoolSetAttribute(
                s->dev->pool, cudaMemPoolReuseAllowInternalDependencies, &off);
            if (e2 != cudaSuccess) {
                log_error("cuda: cudaMemPoolSetAttribute(internal dependencies off): %s",
                          cudaGetErrorString(e2));
                s->dev->reuse_local = 0; /* left on: the pool's default */
            }
        }
    }
    if (e == cudaErrorMemoryAllocation)
        (void)cudaGetLastError(); /* not sticky: keep it from failing the next launch check */
    return e;
}

/* The same on the session's compute stream. */
cudaError_t cuda_dev_alloc(backend_cuda *b, cuda_sess *s, void **p, size_t len)
{
    return cuda_dev_alloc_on(b, s, s->stream, p, len);
}

/* ---- the lanes' idle phase and row batches (backend_cuda_batch.c) ---- */

int cuda_flush_soon(backend_cuda *b)
{
    if (b->flush_on)
        return 0;
    int rc = uv_idle_start(&b->flush, b->flush_cb);
    if (rc != 0) {
        log_error("cuda: uv_idle_start(flush): %s", uv_strerror(rc));
        return -1;
    }
    b->flush_on = 1;
    return 0;
}

void cuda_lane_list(backend_cuda *b, cuda_sess *lane)
{
    if (!lane->pend_listed) {
        lane->pend_next = b->pend_lanes;
        b->pend_lanes = lane;
        lane->pend_listed = 1;
    }
}

void cuda_row_kick(backend_cuda *b, cuda_sess *lane)
{
    if (lane->rpend_head && cuda_flush_soon(b) == 0)
        cuda_lane_list(b, lane);
}

void cuda_row_alone(backend_cuda *b, gpuq_job *first)
{
    for (gpuq_job *j = first, *next; j; j = next) {
        next = j->next;
        j->next = NULL;
        cuda_sess *s = j->bsess;
        /* undo what submit counted: it counts the job again */
        s->nflight--;
        s->dev->in_flight--;
        s->dev->bytes -= j->sz->payload + j->sz->output;
        b->inflight--;
        b->submits--;
        if (j->bpriv)
            cuda_jobx_put(s, j->bpriv);
        j->bpriv = NULL;
        j->row_alone = 1;
        b->base.ops->submit(&b->base, j); /* it completes through its session */
    }
}
