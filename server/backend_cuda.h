/* backend_cuda.h - the CUDA backend of gpuqd (see backend_cuda.c).
 *
 * backend_cuda_create is declared in backend.h with the other backends; this
 * header only names the environment knobs the backend reads:
 *   GPUQ_CUDA_POOL_RELEASE_THRESHOLD  bytes the device memory pool keeps
 *                                     (default: all, UINT64_MAX)
 *   GPUQ_TEST_INJECT_STICKY=N         the N-th submitted job launches a
 *                                     faulting kernel (device_lost tests)
 *   GPUQ_TEST_INJECT_OOM=N            the N-th device allocation fails with
 *                                     no_memory
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_H
#define GPUQ_SERVER_BACKEND_CUDA_H

#include "backend.h"

#endif
