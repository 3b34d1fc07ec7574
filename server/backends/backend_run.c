/* SPDX-License-Identifier: Apache-2.0 */
/* backend_run.c - one job on the CPU reference kernels.
 *
 * The op's backend def (ops/<op>.c, op_backend_of) runs it on the job's
 * host pointers (staging slot or arena). Kernel codes become wire codes with a message; the op may
 * word the message itself (normalize names the failing row, found again by the CPU reference's
 * rules on the error path only).
 */
#include "backend_run.h"

#include <stdio.h>

#include "errors.h"
#include "gpuq_kernels.h"
#include "op_backend.h"

int backend_map_kernel_error(gpuq_job *job, int kcode)
{
    const gpuq_request *r = job->req;
    const op_backend_def *ob = op_backend_of(r->op);
    char *m = job->message;
    size_t cap = sizeof job->message;
    int own = kcode != GPUQ_K_OK && ob && ob->kernel_message &&
              ob->kernel_message(r, job->sz, job->h_in[0], kcode, m, cap);
    switch (kcode) {
    case GPUQ_K_OK:
        return 0;
    case GPUQ_K_E_ZERO:
        if (!own)
            snprintf(m, cap, "zero norm or zero vector");
        return GPUQ_E_ZERO_NORM;
    case GPUQ_K_E_OVERFLOW:
        if (!own)
            snprintf(m, cap, "a result is too large for %s", gpuq_dtype_name(r->dtype));
        return GPUQ_E_OUT_OF_RANGE;
    case GPUQ_K_E_RANGE:
        if (!own)
            snprintf(m, cap, "latitude outside [-90, 90] or non-finite coordinate");
        return GPUQ_E_OUT_OF_RANGE;
    case GPUQ_K_E_STOPPED:
        snprintf(m, cap, "stopped on the device: no longer wanted");
        return GPUQ_E_CANCELLED;
    case GPUQ_K_E_ARG:
        snprintf(m, cap, "invalid argument for the kernel");
        return GPUQ_E_BAD_ARGUMENT;
    case GPUQ_K_E_NOMEM:
        snprintf(m, cap, "out of memory");
        return GPUQ_E_NO_MEMORY;
    case GPUQ_K_E_CUDA:
        snprintf(m, cap, "CUDA error");
        return GPUQ_E_DEVICE;
    case GPUQ_K_E_STICKY:
        snprintf(m, cap, "device lost");
        return GPUQ_E_DEVICE_LOST;
    default:
        snprintf(m, cap, "kernel returned %d", kcode);
        return GPUQ_E_INTERNAL;
    }
}

/* Blocks a long CPU job runs in: a job stops within about 1/BACKEND_CPU_BLOCKS
 * of its time once it is no longer wanted, at a cost of as many calls (the
 * ops' row kernels set nothing up per call that matters at this count). */
#define BACKEND_CPU_BLOCKS 64

void backend_run_cpu(gpuq_job *job)
{
    const op_backend_def *ob = op_backend_of(job->req->op);
    if (!ob || !ob->run_cpu) {
        job->status = GPUQ_E_UNKNOWN_OP;
        snprintf(job->message, sizeof job->message, "op not runnable on a backend");
        return;
    }
    op_bufs h = {.a = job->h_in[0],
                 .b = job->sz->nin > 1 ? job->h_in[1] : NULL,
                 .out = {job->h_out[0], job->sz->nout > 1 ? job->h_out[1] : NULL}};
    op_split sp;
    if (!ob->run_cpu_rows || !op_cuda_split(job->req, job->sz, &sp) || sp.two_phase) {
        job->status = backend_map_kernel_error(job, ob->run_cpu(job->req, job->sz, &h));
        return;
    }
    uint64_t block = (sp.rows + BACKEND_CPU_BLOCKS - 1) / BACKEND_CPU_BLOCKS;
    for (op_rows rw = {.r0 = 0, .chunk = block}; rw.r0 < sp.rows; rw.r0 += rw.nr) {
        if (__atomic_load_n(&job->stop, __ATOMIC_RELAXED)) {
            job->status = GPUQ_E_CANCELLED;
            snprintf(job->message, sizeof job->message, "stopped after %llu of %llu rows",
                     (unsigned long long)rw.r0, (unsigned long long)sp.rows);
            return;
        }
        rw.nr = sp.rows - rw.r0 < block ? sp.rows - rw.r0 : block;
        int kc = ob->run_cpu_rows(job->req, job->sz, &h, &rw);
        if (kc != GPUQ_K_OK) {
            job->status = backend_map_kernel_error(job, kc);
            return;
        }
    }
    job->status = 0;
}

int backend_batchable(const backend *b, const gpuq_job *job)
{
    const op_backend_def *ob = op_backend_of(job->req->op);
    return b->batch_max > 0 && ob && ob->batchable && !job->req->timing && !job->req->gate &&
           job->sz->payload + job->sz->output <= b->batch_bytes;
}

void backend_count_batch(backend *b, unsigned n)
{
    if (n >= 2) {
        b->batches++;
        b->batched += n;
    }
}
