/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_gate.h - gated CUDA jobs (PROTOCOL.md 3.4): uploads that
 * wait on the device for the client's announcements (backend_cuda_gate.c).
 * Loop thread only. */
#ifndef GPUQ_SERVER_BACKEND_CUDA_GATE_H
#define GPUQ_SERVER_BACKEND_CUDA_GATE_H

#include "backend_cuda_defs.h"
#include "backend_cuda_pipe.h"

/* Find the driver's stream wait; sets b->base.gate_ok when it is there. */
void cuda_gate_init(backend_cuda *b);

/* job (gated) is about to be enqueued with x: its units of input (pl: its
 * chunks when it runs in chunks with one input, each a unit; else one
 * unit, all of it), the device's address of its word, and the word set to
 * what job->gate_ready covers. 0 or a GPUQ_E_* status with a line in
 * detail. */
int cuda_gate_setup(backend_cuda *b, gpuq_job *job, cuda_jobx *x, const cuda_plan *pl, char *detail,
                    size_t cap);

/* Enqueue on st a wait until x's unit `unit` (1-based; 1 of 1: all the
 * input) is announced. 0 for a job that is not gated. */
int cuda_gate_wait(backend_cuda *b, cudaStream_t st, const cuda_jobx *x, uint32_t unit,
                   char *detail, size_t cap);

/* The backend op (backend.h: gate): job->gate_ready grew. */
void cuda_gate(backend *bb, gpuq_job *job);

/* x's job was told to stop: every wait of it may pass. */
void cuda_gate_release(cuda_jobx *x);

#endif
