/* backend_cpu.c - the CPU backend: libuv's thread pool runs backend_run_cpu.
 *
 * submit queues a uv_work_t; the work runs the CPU reference on a pool thread
 * (sleeping GPUQ_TEST_SLOW_MS first, a test hook that times as kernel time);
 * after_work runs on the
 * loop thread and calls b->complete. Staging memory is plain aligned malloc.
 */
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
} cpu_backend;

typedef struct cpu_work {
    uv_work_t w;
    gpuq_job *job;
    cpu_backend *cb;
    uint64_t start_ns, end_ns;
} cpu_work;

static void cpu_work_cb(uv_work_t *w)
{
    cpu_work *cw = w->data;
    cw->start_ns = uv_hrtime(); /* the slow hook stands for a slow kernel: it counts as one */
    if (cw->cb->slow_ms > 0) {
        struct timespec ts = {cw->cb->slow_ms / 1000, (long)(cw->cb->slow_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    backend_run_cpu(cw->job);
    cw->end_ns = uv_hrtime();
}

static void cpu_after_work(uv_work_t *w, int status)
{
    cpu_work *cw = w->data;
    gpuq_job *job = cw->job;
    cpu_backend *cb = cw->cb;
    if (status < 0) {
        job->status = GPUQ_E_SHUTTING_DOWN;
        snprintf(job->message, sizeof job->message, "cancelled: %s", uv_strerror(status));
    } else if (job->req->timing) {
        memset(&job->timing, 0, sizeof job->timing);
        job->timing.queue_us = (double)(cw->start_ns - job->submit_ns) / 1e3;
        job->timing.kernel_us = (double)(cw->end_ns - cw->start_ns) / 1e3;
    }
    cb->inflight--;
    free(cw);
    cb->b.complete(job);
}

static int cpu_submit(backend *b, gpuq_job *job)
{
    cpu_backend *cb = (cpu_backend *)b;
    cpu_work *cw = calloc(1, sizeof *cw);
    if (!cw)
        return GPUQ_E_NO_MEMORY;
    cw->job = job;
    cw->cb = cb;
    cw->w.data = cw;
    int rc = uv_queue_work(b->loop, &cw->w, cpu_work_cb, cpu_after_work);
    if (rc < 0) {
        log_error("cpu: uv_queue_work: %s", uv_strerror(rc));
        free(cw);
        return GPUQ_E_INTERNAL;
    }
    cb->inflight++;
    cb->bytes += job->sz->payload + job->sz->output;
    return 0;
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

static void *cpu_host_alloc(backend *b, size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len ? len : 1))
        return NULL;
    return p;
}

static void cpu_host_free(backend *b, void *p)
{
    free(p);
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

static void cpu_destroy(backend *b)
{
    free(b);
}

static const backend_ops cpu_ops = {
    .name = "cpu",
    .session_open = cpu_session_open,
    .session_close = cpu_session_close,
    .submit = cpu_submit,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
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
    cb->b.ops = &cpu_ops;
    cb->b.loop = loop;
    cb->b.complete = done;
    const char *slow = getenv("GPUQ_TEST_SLOW_MS");
    if (slow && *slow)
        cb->slow_ms = atoi(slow);
    return &cb->b;
}
