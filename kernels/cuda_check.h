/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_check.h - error checking shared by the .cu files of gpuq_kernels.
 *
 * GPUQ_CUDA_CHECK(ctx, call) logs a failed CUDA call through the host's log
 * hook (gpuq_kernels_set_log) and returns the GPUQ_K_E_* code from the
 * enclosing function; it never exits (NCCL's checks.h habit). Every kernel
 * launch is followed by GPUQ_LAUNCH_CHECK(ctx).
 *
 * Also the private layout of gpuq_cuda_ctx and the helpers the kernels use
 * for scratch memory and the lazily created cuBLAS handle (cuBLAS itself is
 * loaded at run time: cublas_dl.h). C++ only.
 */
#ifndef GPUQ_CUDA_CHECK_H
#define GPUQ_CUDA_CHECK_H

#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuq_kernels.h"

struct gpuq_cuda_ctx {
    cudaStream_t stream; /* borrowed: the session's stream */
    int *d_flag;         /* device error flag (cudaMalloc at creation) */
    void *d_scratch;     /* stream-ordered scratch, grown on demand */
    size_t scratch_cap;
    cublasHandle_t blas; /* created on first GEMM, bound to stream */
    int no_gemm;         /* test hook: float64 cosine pairwise stays tiled */
    const int *gate;     /* the next launches' stop gate (gpuq_cuda_ctx_set_gate) */
};

/* One line to the host's log hook (gpuq_kernels.h); dropped without one. */
void gpuq_kernels_logf(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Log and map a failed CUDA call (ctx may be NULL). */
int gpuq_cuda_fail(gpuq_cuda_ctx *ctx, cudaError_t e, const char *what, const char *file, int line);
/* Log and map a failed cuBLAS call. */
int gpuq_cublas_fail(gpuq_cuda_ctx *ctx, cublasStatus_t st, const char *what, const char *file,
                     int line);
/* Scratch of at least bytes on ctx's stream (stream-ordered, so the old
 * buffer is freed after earlier work that used it). */
int gpuq_cuda_scratch(gpuq_cuda_ctx *ctx, size_t bytes, void **out);
/* The cuBLAS handle of ctx, created on first use (default math: no TF32).
 * Only for callers that found gpuq_cublas() non-NULL. */
int gpuq_cuda_blas(gpuq_cuda_ctx *ctx, cublasHandle_t *out);

#define GPUQ_CUDA_CHECK(ctx, call)                                                                 \
    do {                                                                                           \
        cudaError_t gq_e_ = (call);                                                                \
        if (gq_e_ != cudaSuccess)                                                                  \
            return gpuq_cuda_fail((ctx), gq_e_, #call, __FILE__, __LINE__);                        \
    } while (0)

#define GPUQ_LAUNCH_CHECK(ctx) GPUQ_CUDA_CHECK(ctx, cudaGetLastError())

#define GPUQ_CUBLAS_CHECK(ctx, call)                                                               \
    do {                                                                                           \
        cublasStatus_t gq_s_ = (call);                                                             \
        if (gq_s_ != CUBLAS_STATUS_SUCCESS)                                                        \
            return gpuq_cublas_fail((ctx), gq_s_, #call, __FILE__, __LINE__);                      \
    } while (0)

/* Grid size for a grid-stride loop over n items with block threads. */
static inline unsigned gpuq_grid_for(uint64_t n, unsigned block)
{
    uint64_t g = (n + block - 1) / block;
    const uint64_t cap = 65535u * 32u;
    if (g == 0)
        g = 1;
    return (unsigned)(g < cap ? g : cap);
}

#ifdef __CUDACC__
/* Keep the first data error of a launch: 0 -> v, never overwritten. */
__device__ __forceinline__ void gpuq_set_flag(int *flag, int v)
{
    atomicCAS(flag, 0, v);
}
#define GPUQ_FLAG_ZERO 2     /* -GPUQ_K_E_ZERO */
#define GPUQ_FLAG_RANGE 3    /* -GPUQ_K_E_RANGE */
#define GPUQ_FLAG_OVERFLOW 7 /* -GPUQ_K_E_OVERFLOW */
#define GPUQ_FLAG_STOPPED 8  /* -GPUQ_K_E_STOPPED */
/* A stop gate's value (gpuq_cuda_ctx_set_gate; gate not NULL): a
 * system-scope load, so a store by the host is seen within a load or two. */
__device__ __forceinline__ int gpuq_gate_load(const int *gate)
{
    int v;
    asm volatile("ld.relaxed.sys.b32 %0, [%1];" : "=r"(v) : "l"(gate) : "memory");
    return v;
}
/* One block (or tile) in GPUQ_GATE_SAMPLE reads the gate in host memory. A
 * read over PCIe costs about a microsecond, and reads of one address from
 * every block queue behind each other: a kNN of 32768 x 32768 whose every
 * block read the gate took 341 ms instead of 19 (H200). */
#define GPUQ_GATE_SAMPLE 256
/* Should this block (n: its index, or its tile's) stop? Thread 0 only. The
 * job's error flag is the gate's copy in device memory (read from L2): a
 * block that found the gate set sets the flag to GPUQ_FLAG_STOPPED, and
 * every block after it stops on that; one in GPUQ_GATE_SAMPLE reads the
 * gate itself. No gate: never. */
__device__ __forceinline__ int gpuq_gate_check(const int *gate, int *flag, unsigned long long n)
{
    if (!gate)
        return 0;
    if (*(volatile int *)flag == GPUQ_FLAG_STOPPED)
        return 1;
    if (n % GPUQ_GATE_SAMPLE != 0 || !gpuq_gate_load(gate))
        return 0;
    gpuq_set_flag(flag, GPUQ_FLAG_STOPPED);
    return 1;
}
#endif

#endif
