/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_res.c - resident arrays on the CUDA backend (PROTOCOL.md
 * 3.5): a job that reads arrays kept in device memory, or keeps its
 * outputs there, and the free of such memory. See backend_cuda_res.h.
 */
#include "backend_cuda_res.h"
#include "backend_cuda_dev.h"

#include <stdio.h>

#include <cuda_runtime_api.h>

#include "errors.h"
#include "gpuq_kernels.h"
#include "log.h"
#include "op_backend.h"

/* A job with resident arrays (PROTOCOL.md 3.5), on s's stream: its other
 * inputs go up packed into *d_in, its kept outputs into memory of their
 * own (job->res_out, the server's from completion on), its other outputs
 * packed in *d_out come down; the kernels run on the resident arrays in
 * place. *d_in, *d_out and *d_scratch are freed by the caller in stream
 * order, as a whole job's. Sets *enqueued once work is on the stream.
 * Returns 0 or a GPUQ_E_* code with detail. */
/* put and get (op_backend_def.identity): one copy from A (resident, or
 * host memory: staging or an arena) to the output (kept, or host memory),
 * in either direction by unified addressing; the error flag is reset as
 * for any job (the tail copies it back). */
static int identity_run(backend_cuda *b, cuda_sess *s, gpuq_job *job, char *detail, size_t cap)
{
    const gpuq_sizes *sz = job->sz;
    cuda_jobx *x = job->bpriv;
    cudaError_t e;
    const char *what;
    if (job->keep[0] && !job->res_out[0] &&
        (e = cuda_dev_alloc(b, s, &job->res_out[0], sz->out[0].bytes)) != cudaSuccess) {
        job->res_out[0] = NULL;
        what = "cudaMallocFromPoolAsync(kept output)";
        goto fail;
    }
    const void *src = job->res_in[0] ? job->res_in[0] : job->h_in[0];
    void *dst = job->keep[0] ? job->res_out[0] : job->h_out[0];
    if ((e = cudaMemsetAsync(gpuq_cuda_ctx_errflag(s->kctx), 0, sizeof(int), s->stream)) !=
        cudaSuccess) {
        what = "cudaMemsetAsync(errflag)";
        goto fail;
    }
    if ((e = cudaMemcpyAsync(dst, src, sz->out[0].bytes, cudaMemcpyDefault, s->stream)) !=
        cudaSuccess) {
        what = "cudaMemcpyAsync(resident copy)";
        goto fail;
    }
    /* the copy is the whole job: it times as the upload (PROTOCOL.md 4) */
    for (int t = 1; t <= 2 && x->timing; t++)
        if ((e = cudaEventRecord(x->t[t], s->stream)) != cudaSuccess) {
            what = "cudaEventRecord";
            goto fail;
        }
    return 0;
fail:
    snprintf(detail, cap, "%s: %s", what, cudaGetErrorString(e));
    return cuda_status_of(b, e, what);
}

int cuda_resident_run(backend_cuda *b, cuda_sess *s, gpuq_job *job, uint64_t scratch, void **d_in,
                      void **d_out, void **d_scratch, int *enqueued, char *detail, size_t cap)
{
    const gpuq_sizes *sz = job->sz;
    cuda_jobx *x = job->bpriv;
    uint64_t in_bytes = 0, out_bytes = 0;
    cudaError_t e = cudaSuccess;
    const char *what = NULL;
    /* from here on the job completes behind its event, so that no free of
     * a kept output (res_free, on another stream) precedes its allocation */
    *enqueued = 1;
    const op_backend_def *ob = op_backend_of(job->req->op);
    if (ob && ob->identity && sz->nin == 1 && sz->nout == 1)
        return identity_run(b, s, job, detail, cap);
    for (uint32_t k = 0; k < sz->nin; k++)
        in_bytes += job->res_in[k] ? 0 : sz->in_bytes[k];
    for (uint32_t k = 0; k < sz->nout; k++)
        out_bytes += job->keep[k] ? 0 : sz->out[k].bytes;
    if ((e = cuda_dev_alloc(b, s, d_in, in_bytes)) != cudaSuccess) {
        what = "cudaMallocFromPoolAsync(input)";
        goto fail;
    }
    if ((e = cuda_dev_alloc(b, s, d_out, out_bytes)) != cudaSuccess) {
        what = "cudaMallocFromPoolAsync(output)";
        goto fail;
    }
    if ((e = cuda_dev_alloc(b, s, d_scratch, scratch)) != cudaSuccess) {
        what = "cudaMallocFromPoolAsync(scratch)";
        goto fail;
    }
    for (uint32_t k = 0; k < sz->nout; k++) {
        if (job->keep[k] && !job->res_out[k] &&
            (e = cuda_dev_alloc(b, s, &job->res_out[k], sz->out[k].bytes)) != cudaSuccess) {
            job->res_out[k] = NULL;
            what = "cudaMallocFromPoolAsync(kept output)";
            goto fail;
        }
    }
    const void *in[GPUQ_MAX_INPUTS] = {NULL, NULL};
    void *out[GPUQ_MAX_OUTPUTS] = {NULL, NULL};
    uint64_t at = 0;
    for (uint32_t k = 0; k < sz->nin; k++) {
        if (job->res_in[k]) {
            in[k] = job->res_in[k];
            continue;
        }
        in[k] = (char *)*d_in + at;
        if (sz->in_bytes[k] &&
            (e = cudaMemcpyAsync((char *)*d_in + at, job->h_in[k], sz->in_bytes[k],
                                 cudaMemcpyHostToDevice, s->stream)) != cudaSuccess) {
            what = "cudaMemcpyAsync(H2D)";
            goto fail;
        }
        at += sz->in_bytes[k];
    }
    at = 0;
    for (uint32_t k = 0; k < sz->nout; k++) {
        out[k] = job->keep[k] ? job->res_out[k] : (char *)*d_out + at;
        at += job->keep[k] ? 0 : sz->out[k].bytes;
    }
    if (x->timing && (e = cudaEventRecord(x->t[1], s->stream)) != cudaSuccess) {
        what = "cudaEventRecord";
        goto fail;
    }
    if ((e = cudaMemsetAsync(gpuq_cuda_ctx_errflag(s->kctx), 0, sizeof(int), s->stream)) !=
        cudaSuccess) {
        what = "cudaMemsetAsync(errflag)";
        goto fail;
    }
    op_bufs d = {.a = in[0],
                 .b = sz->nin > 1 ? in[1] : NULL,
                 .out = {out[0], out[1]},
                 .scratch = *d_scratch};
    int kc = ob && ob->launch_cuda ? ob->launch_cuda(s->kctx, job->req, sz, &d) : GPUQ_K_E_ARG;
    if (kc != GPUQ_K_OK) {
        snprintf(detail, cap, "kernel launch failed");
        return cuda_status_of_kcode(b, job, kc);
    }
    if (x->timing && (e = cudaEventRecord(x->t[2], s->stream)) != cudaSuccess) {
        what = "cudaEventRecord";
        goto fail;
    }
    for (uint32_t k = 0; k < sz->nout; k++) {
        if (job->keep[k] || !sz->out[k].bytes)
            continue;
        if ((e = cudaMemcpyAsync(job->h_out[k], out[k], sz->out[k].bytes, cudaMemcpyDeviceToHost,
                                 s->stream)) != cudaSuccess) {
            what = "cudaMemcpyAsync(D2H)";
            goto fail;
        }
    }
    return 0;
fail:
    snprintf(detail, cap, "%s: %s", what, cudaGetErrorString(e));
    return cuda_status_of(b, e, what);
}

/* A kept output's memory (cuda_resident_run's, from the pool) once the
 * host saw every job that used it complete: freed in stream order on the
 * loop thread's per-thread stream, which waits for no session. */
int cuda_res_alloc(backend *bb, int device, uint64_t bytes, void **p, char *why, size_t cap)
{
    backend_cuda *b = (backend_cuda *)bb;
    *p = NULL;
    if (device < 0 || device >= b->ndev) {
        snprintf(why, cap, "no device %d", device);
        return GPUQ_E_BAD_ARGUMENT;
    }
    int rc = cuda_use_device(b, device);
    if (rc)
        return rc;
    cudaError_t e =
        cudaMallocFromPoolAsync(p, bytes ? bytes : 1, b->devs[device].pool, cudaStreamPerThread);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamPerThread);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, cap, "cudaMallocFromPoolAsync: %s", cudaGetErrorString(e));
        *p = NULL;
        return GPUQ_E_NO_MEMORY;
    }
    return 0;
}

/* Synchronous, on the calling thread's per-thread stream (the store's
 * thread: its own device setting, no session's stream waited for). */
int cuda_res_copy(backend *bb, int device, void *dst, const void *src, size_t bytes, char *why,
                  size_t cap)
{
    (void)bb;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamPerThread);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cudaMemcpyAsync: %s", cudaGetErrorString(e));
        return GPUQ_E_DEVICE;
    }
    return 0;
}

void cuda_res_free(backend *bb, int device, void *p)
{
    backend_cuda *b = (backend_cuda *)bb;
    if (!p || b->base.lost) /* a lost context took its memory with it */
        return;
    if (cuda_use_device(b, device) != 0)
        return;
    cudaError_t e = cudaFreeAsync(p, cudaStreamPerThread);
    if (e != cudaSuccess)
        log_error("cuda: cudaFreeAsync(resident array): %s", cudaGetErrorString(e));
}
