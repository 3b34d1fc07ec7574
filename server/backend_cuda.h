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
 *   GPUQ_CUDA_CHUNK_BYTES             a job of more input + output bytes
 *                                     goes in chunks of about that many,
 *                                     pipelined (default 4 MiB; 0: never)
 *   GPUQ_TEST_INJECT_PIPE=N           the N-th submitted job, if chunked,
 *                                     fails at its middle chunk (device
 *                                     error; backend_cuda_pipe.c)
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_H
#define GPUQ_SERVER_BACKEND_CUDA_H

#include "backend.h"

#endif
