/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_res.h - resident arrays on the CUDA backend.
 *
 * A job with resident arrays (gpuq_job's res_in, keep) runs whole on its
 * session's stream, never zero-copy, chunked or batched: its other inputs
 * go up into a buffer of their own, the kernels read the arrays in place
 * and write kept outputs into memory allocated from the device's pool for
 * them (the server's from the job's completion on), its other outputs come
 * down. That memory is freed with cuda_res_free once the host saw the last
 * job that used it complete.
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_RES_H
#define GPUQ_SERVER_BACKEND_CUDA_RES_H

#include "backend_cuda_defs.h"

/* Enqueue job (with resident arrays) on s's stream, after its start event
 * and before the common tail (the error flag's copy, the end event): up,
 * kernels, down. *d_in, *d_out and *d_scratch get its own buffers, freed
 * by the caller in stream order; *enqueued is set (the job then completes
 * behind its event). Returns 0 or a GPUQ_E_* code with detail. */
int cuda_resident_run(backend_cuda *b, cuda_sess *s, gpuq_job *job, uint64_t scratch, void **d_in,
                      void **d_out, void **d_scratch, int *enqueued, char *detail, size_t cap);

/* backend_ops.res_free: free a kept output's memory on device. */
void cuda_res_free(backend *b, int device, void *p);
/* backend_ops.res_alloc and res_copy (persisted arrays). */
int cuda_res_alloc(backend *b, int device, uint64_t bytes, void **p, char *why, size_t cap);
int cuda_res_copy(backend *b, int device, void *dst, const void *src, size_t bytes, char *why,
                  size_t cap);

#endif
