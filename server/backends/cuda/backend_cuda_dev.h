/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_dev.h - the CUDA backend's devices, sessions (stream,
 * kernel context, per-job state), host memory and error mapping.
 *
 * Sessions: opened on the least busy device (or the one asked for) with a
 * stream of the mapped priority; destroyed only when closing, with nothing
 * in flight, no doorbell armed and no loop callback walking them
 * (cuda_sess_maybe_destroy). Errors: a sticky CUDA error marks the backend lost
 * (cuda_mark_lost), which fails everything in flight.
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_DEV_H
#define GPUQ_SERVER_BACKEND_CUDA_DEV_H

#include "backend_cuda_defs.h"

/* A session's level as an index 0 .. CUDA_LEVELS - 1 (clamped). */
static inline int cuda_level_index(int level)
{
    int l = level - GPUQ_PRIO_LOW;
    return l < 0 ? 0 : l >= CUDA_LEVELS ? CUDA_LEVELS - 1 : l;
}

/* x's stop gate: the int after its flag (cuda_stop; gpuq_cuda_ctx_set_gate). */
static inline int *cuda_jobx_gate(const cuda_jobx *x)
{
    return x->h_flag + 1;
}

/* The input gate's word (a gated job, backend_cuda_gate.c): how many of
 * its units of input are announced; the device waits on it. */
static inline unsigned *cuda_jobx_ready(const cuda_jobx *x)
{
    return (unsigned *)(x->h_flag + 2);
}

/* Jobs in flight on s's own stream or, for a lane, in its batches. */
static inline int cuda_sess_busy(const cuda_sess *s)
{
    return s->head != NULL || s->bhead != NULL;
}

int cuda_sticky(cudaError_t e);
void cuda_mark_lost(backend_cuda *b, const char *what, cudaError_t e);
/* Map a CUDA error of a submit step to a job status (logged); sticky ones
 * lose the device. */
int cuda_status_of(backend_cuda *b, cudaError_t e, const char *what);
/* A kernel launch's code as a job status; a sticky one loses the device. */
int cuda_status_of_kcode(backend_cuda *b, gpuq_job *job, int k);
void cuda_set_msg(char *dst, size_t cap, int status, const char *detail);
int cuda_use_device(backend_cuda *b, int dev);
/* Stream-ordered allocation from s's device pool on stream st (bounded by
 * the device memory limit when one is set; *p NULL for len 0), and the
 * same on s's compute stream. */
cudaError_t cuda_dev_alloc_on(backend_cuda *b, cuda_sess *s, cudaStream_t st, void **p, size_t len);
cudaError_t cuda_dev_alloc(backend_cuda *b, cuda_sess *s, void **p, size_t len);
uint64_t cuda_env_u64(const char *name);

/* May job (of s) run its kernels on its host arrays (zero-copy)? */
int cuda_zero_copy_ok(const backend_cuda *b, const cuda_sess *s, const gpuq_job *job);
void cuda_jobx_free(backend_cuda *b, cuda_jobx *x);
/* The backend's slab of pinned error flags: 0 or -1 (no memory). */
int cuda_flags_init(backend_cuda *b);
void cuda_flags_fini(backend_cuda *b);
/* A jobx from the session's free list, or a new one. Returns 0 or a
 * GPUQ_E_* status. */
int cuda_jobx_get(backend_cuda *b, cuda_sess *s, int timing, cuda_jobx **out);
void cuda_jobx_put(cuda_sess *s, cuda_jobx *x);

int cuda_session_open(backend *bb, int priority, int device, void **bsess,
                      backend_session_info *info);
void cuda_session_close(backend *bb, void *bsess);
void cuda_sess_destroy(backend_cuda *b, cuda_sess *s);
/* A batch object back on lane's free list (its state zero again). */
void cuda_batch_put(cuda_sess *lane, cuda_batch *bt);
/* Free a batch object of lane (backend_cuda_batch.c): its state on the
 * lane's stream, its event. */
void cuda_batch_free(cuda_sess *lane, cuda_batch *bt);
/* The lanes' idle phase (b->flush_cb) runs after this loop turn; 0, or
 * -1 when it cannot start (logged). */
int cuda_flush_soon(backend_cuda *b);
/* lane has waiting jobs: the idle phase visits it. */
void cuda_lane_list(backend_cuda *b, cuda_sess *lane);
/* A row batch of lane ended (its jobs completed or sent back): the
 * lane's waiting row jobs may go in the next idle phase. */
void cuda_row_kick(backend_cuda *b, cuda_sess *lane);
/* Send the jobs from first (linked by job->next, each still counted as
 * submitted, its jobx taken) back through submit, to run alone. */
void cuda_row_alone(backend_cuda *b, gpuq_job *first);
void cuda_sess_maybe_destroy(backend_cuda *b, cuda_sess *s);
void cuda_reap_sessions(backend_cuda *b);

/* Host memory: made on the pinning thread (planes/pinner.c), which
 * cuda_host_thread_init prepares; each call is counted when made on the
 * loop while sessions are served (backend_note_pin). */
int cuda_host_thread_init(backend *bb, char *why, size_t cap);
void *cuda_host_alloc(backend *bb, size_t len);
void cuda_host_free(backend *bb, void *p);
/* Pin an arena's mapping for DMA (cudaHostRegister) and unpin it. */
int cuda_host_register(backend *bb, void *p, size_t len, char *why, size_t cap);
void cuda_host_unregister(backend *bb, void *p);
int cuda_ndevices(backend *bb);
void cuda_device_info(backend *bb, int i, backend_device *out);
uint64_t cuda_inflight(backend *bb);
/* The device's default pool, or with a limit a pool of its own. */
cudaError_t cuda_dev_pool_create(cuda_dev *d, uint64_t limit);
cudaError_t cuda_dev_pool_reuse_local(cuda_dev *d);

#endif
