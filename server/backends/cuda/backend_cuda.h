/* SPDX-License-Identifier: Apache-2.0 */
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
 *   GPUQ_TEST_SLOW_MS=N               each job first runs a kernel that
 *                                     waits N ms (as the CPU backend's
 *                                     hook: slow jobs for the tests)
 *   GPUQ_CUDA_CHUNK_BYTES             a job of more input + output bytes
 *                                     goes in chunks of about that many
 *                                     each way, pipelined, the end chunks
 *                                     smaller (default 8 MiB; 0: never)
 *   GPUQ_CUDA_SMALL_BYTES             a job whose input, output and scratch
 *                                     fit in that many bytes runs in a
 *                                     device buffer its per-job state keeps
 *                                     (no pool allocation or free per job;
 *                                     default 64 KiB; 0: never)
 *   GPUQ_CUDA_ZERO_COPY_BYTES         a job of at most that many input +
 *                                     output bytes, whose host arrays the
 *                                     device can address, runs its kernels
 *                                     on them: no copies (default 64 KiB;
 *                                     a job with no input, at any size;
 *                                     0: never)
 *   GPUQ_CUDA_SPIN_US                 the adaptive spin window after each
 *                                     submit and completion (default 50;
 *                                     0: doorbells only)
 *   GPUQ_CUDA_EST_GBPS                the predictive spin's guess of a
 *                                     job's copy rate (default 60)
 *   GPUQ_CUDA_WAKE_TAIL_US            how long past that guess it spins
 *                                     (default 2000; 0: no predictive spin)
 *   GPUQ_CUDA_WAKE_QUEUE=0            that spin ignores the jobs in flight
 *                                     ahead of a job (by default it runs
 *                                     on past its guess by their guesses)
 *   GPUQ_CUDA_POOL_CROSS_STREAM=1     the device pool may make one stream
 *                                     wait for another to reuse memory
 *   GPUQ_TEST_INJECT_PIPE=N           the N-th submitted job, if chunked,
 *                                     fails at its middle chunk (device
 *                                     error; backend_cuda_pipe.c)
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_H
#define GPUQ_SERVER_BACKEND_CUDA_H

#include "backend.h"

#endif
