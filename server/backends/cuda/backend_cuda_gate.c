/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_gate.c - gated CUDA jobs (see backend_cuda_gate.h).
 *
 * Why: a client that copies its plain arrays into the arena while the
 * daemon already uploads what it copied saves the copy's time, or the
 * upload's, whichever is shorter (PROTOCOL.md 3.4). The loop must not
 * block and must not enqueue the uploads late (each ready request would
 * then cost a round of CUDA calls on the loop), so every upload of a gated
 * job is enqueued at submit as usual, each behind a stream wait
 * (cuStreamWaitValue32, GEQ) on a word in pinned host memory: the job's
 * slot of the error-flag slab (cuda_jobx_ready). A ready request stores
 * the number of units now covered into the word (cuda_gate); the device
 * sees the store and lets the waiting upload go.
 *
 * Units: a job that runs in chunks (backend_cuda_pipe.c) with one input
 * has one unit per chunk (chunk k's rows of A); any other gated job one
 * unit, its whole input (pairwise and knn upload B whole first; a job that
 * is not chunked uploads at once).
 *
 * Release: a gated job that is abandoned (cancel, deadline, its session
 * closing, frame_timeout) is told to stop (cuda_stop); its word then gets
 * CUDA_GATE_RELEASE, past every unit, so its waits pass, its copies and
 * kernels run on whatever the arena holds (the stop gate ends the long
 * kernels early) and it completes as usual, its result unused. Nothing
 * else ever waits on a client.
 *
 * Failure: no cuStreamWaitValue32 in the driver: gate_ok stays 0 and the
 * server holds a gated request until its input is all in (request.c);
 * a failed wait enqueue fails the job like any other CUDA call.
 */
#include "backend_cuda_gate.h"

#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "backend_cuda_dev.h"
#include "errors.h"
#include "log.h"

typedef CUresult (*wait_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

void cuda_gate_init(backend_cuda *b)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) {
        log_warn("cuda: no cuStreamWaitValue32 (%s): gated requests wait for all their input",
                 e != cudaSuccess ? cudaGetErrorString(e) : "not in this driver");
        return;
    }
    b->wait_value32 = fn;
    b->base.gate_ok = 1;
}

/* The units x's first `bytes` input bytes cover. */
static uint32_t gate_units(const cuda_jobx *x, uint64_t bytes)
{
    uint32_t k = 0;
    while (k < x->gate_n && x->gate_end[k] <= bytes)
        k++;
    return k;
}

int cuda_gate_setup(backend_cuda *b, gpuq_job *job, cuda_jobx *x, const cuda_plan *pl, char *detail,
                    size_t cap)
{
    const op_split *sp = pl ? &pl->sp : NULL;
    if (pl && job->sz->nin == 1 && sp->a_row && pl->nchunks <= CUDA_PIPE_MAX_CHUNKS) {
        x->gate_n = (uint32_t)pl->nchunks;
        for (uint64_t k = 0; k < pl->nchunks; k++)
            x->gate_end[k] = pl->start[k + 1] * sp->a_row;
    } else {
        x->gate_n = 1;
        x->gate_end[0] = job->sz->payload;
    }
    unsigned *w = cuda_jobx_ready(x);
    void *dp = w;
    /* the kernels read the stop gate beside it at its host address where
     * the device reaches pinned memory there (host_ptr_ok) */
    if (!((const cuda_sess *)job->bsess)->dev->host_ptr_ok) {
        cudaError_t e = cudaHostGetDevicePointer(&dp, w, 0);
        if (e != cudaSuccess) {
            snprintf(detail, cap, "cudaHostGetDevicePointer(gate): %s", cudaGetErrorString(e));
            return cuda_status_of(b, e, "cudaHostGetDevicePointer(gate)");
        }
    }
    x->d_ready = (uint64_t)(uintptr_t)dp;
    __atomic_store_n(w, gate_units(x, job->gate_ready), __ATOMIC_RELEASE);
    return 0;
}

int cuda_gate_wait(backend_cuda *b, cudaStream_t st, const cuda_jobx *x, uint32_t unit,
                   char *detail, size_t cap)
{
    if (!x->gate_n)
        return 0;
    wait_value32_fn wait = (wait_value32_fn)b->wait_value32;
    CUresult r = wait((CUstream)st, (CUdeviceptr)x->d_ready, unit, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS)
        return 0;
    snprintf(detail, cap, "cuStreamWaitValue32(gate): CUresult %d", (int)r);
    /* the runtime's view of the same failure (sticky ones lose the device) */
    cudaError_t e = cudaPeekAtLastError();
    return cuda_status_of(b, e != cudaSuccess ? e : cudaErrorUnknown, "cuStreamWaitValue32(gate)");
}

void cuda_gate(backend *bb, gpuq_job *job)
{
    (void)bb;
    cuda_jobx *x = job->bpriv;
    if (!x || !x->gate_n || job->stop)
        return;
    __atomic_store_n(cuda_jobx_ready(x), gate_units(x, job->gate_ready), __ATOMIC_RELEASE);
}

void cuda_gate_release(cuda_jobx *x)
{
    if (x->gate_n)
        __atomic_store_n(cuda_jobx_ready(x), CUDA_GATE_RELEASE, __ATOMIC_RELEASE);
}
