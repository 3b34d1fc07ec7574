/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_done.h - the CUDA backend's completion path: doorbells,
 * the completion async, the poll timer and the adaptive spin (see
 * backend_cuda.c's comment). Loop thread only, except doorbell(), which runs
 * on a CUDA driver thread and makes no CUDA call.
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_DONE_H
#define GPUQ_SERVER_BACKEND_CUDA_DONE_H

#include "backend_cuda_defs.h"

/* Finish one job: status, timing, bookkeeping, the server's callback. */
void cuda_finish_job(backend_cuda *b, cuda_sess *s, gpuq_job *job, int lost);
void cuda_fail_all(backend_cuda *b);
void cuda_drain_session(backend_cuda *b, cuda_sess *s);
void cuda_arm_doorbell(backend_cuda *b, cuda_sess *s);
void cuda_drain_all(backend_cuda *b);
/* Handle callbacks (b->async, b->timer, b->spin). */
void cuda_on_async(uv_async_t *h);
void cuda_on_timer(uv_timer_t *t);
void cuda_on_spin(uv_idle_t *h);
/* A job was submitted: keep (or start) spinning. */
void cuda_spin_kick(backend_cuda *b);
/* A job of session s was enqueued: predict its end from est_bytes (input
 * + output, or the larger of the two for a pipelined one-phase job: both
 * directions at once) and plan the spin around it. */
void cuda_wake_plan(backend_cuda *b, cuda_sess *s, gpuq_job *job, uint64_t est_bytes);
/* The bytes a job's guess counts (cuda_wake_plan): its input and output,
 * those of resident arrays scaled down (CUDA_EST_DEVICE_SCALE). */
uint64_t cuda_est_bytes(const gpuq_job *job);
/* A batch launched now that moves est_bytes: spin from now until its guess
 * plus the tail (nothing when the predictive spin is off). */
void cuda_spin_for(backend_cuda *b, uint64_t est_bytes);
void cuda_on_wake(uv_timer_t *t);
void cuda_timer_start_if_needed(backend_cuda *b);
/* Complete job on the next async turn (it never reached the device). */
void cuda_complete_later(backend_cuda *b, gpuq_job *job);

#endif
