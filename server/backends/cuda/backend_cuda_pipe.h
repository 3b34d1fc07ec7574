/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_pipe.h - pipelined, chunked CUDA jobs: the upload of chunk
 * k+1, the op on chunk k and the download of chunk k-1 at once, on the
 * session's two copy streams and its compute stream (see
 * backend_cuda_pipe.c for how they are ordered and how a failure is
 * joined; backend_cuda_dev.c creates the streams and events with the
 * session). Loop thread only.
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_PIPE_H
#define GPUQ_SERVER_BACKEND_CUDA_PIPE_H

#include "backend_cuda_defs.h"
#include "op_backend.h"

/* How one job runs in chunks: the op's split; chunk k is rows
 * [start[k], start[k + 1]); chunk: the most rows of any chunk (every
 * chunk's but the last when the op's chunks are even: two-phase ops and
 * fixed_chunks), and the device scratch bytes of the split run. */
typedef struct cuda_plan {
    op_split sp;
    uint64_t chunk, nchunks;
    uint64_t start[CUDA_PIPE_MAX_CHUNKS + 1];
    uint64_t scratch;
    uint64_t head; /* two-phase: the rows of the first download piece */
} cuda_plan;

/* 1 with *pl filled when job runs in chunks: pipelining is on
 * (b->chunk_bytes), the job's input + output bytes exceed it, the op
 * splits (op_backend_def.cuda_split) into at least two chunks; else 0. */
int cuda_pipe_plan(const backend_cuda *b, const gpuq_job *job, cuda_plan *pl);

/* Enqueue job's transfers and op in chunks as pl says, after the caller
 * enqueued the device allocations (d_out and d_scratch of pl->scratch bytes
 * and the errflag reset on the compute stream; d_in, when the job has
 * input, on the session's copy_in stream, which nothing orders after the
 * compute stream's earlier work); records the job's
 * timing events t[1] and t[2] when it has them. Returns 0 or a GPUQ_E_*
 * status with a line in detail. Either way, on return everything this job
 * put on the copy streams is ordered before whatever the caller enqueues
 * next on the compute stream (or, where even that failed, has finished):
 * the caller's frees, errflag copy and completion event stay on the
 * compute stream and cannot overtake a copy. */
int cuda_pipe_run(backend_cuda *b, cuda_sess *s, gpuq_job *job, const cuda_plan *pl, void *d_in,
                  void *d_out, void *d_scratch, char *detail, size_t cap);

#endif
