/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_ctx.cu - the per-session kernel context: error flag, scratch, cuBLAS
 * handle (through the run-time loaded API of cublas_dl.h).
 *
 * Created once per session (cudaMalloc of the flag is fine there), used only
 * from the loop thread, destroyed after the session's last completion.
 * Scratch grows with cudaMallocAsync/cudaFreeAsync on the session's stream,
 * so nothing on the request path synchronizes the device. Also the CUDA
 * error mapping and the fault-injection kernel used by device_lost tests.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cublas_dl.h"
#include "cuda_check.h"

static gpuq_kernels_log_fn g_log; /* NULL: lines are dropped */

extern "C" void gpuq_kernels_set_log(gpuq_kernels_log_fn fn)
{
    g_log = fn;
}

void gpuq_kernels_logf(int level, const char *fmt, ...)
{
    if (!g_log)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    g_log(level, line);
}

extern "C" int gpuq_cuda_error_code(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return GPUQ_K_OK;
    case cudaErrorMemoryAllocation:
        return GPUQ_K_E_NOMEM;
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
        return GPUQ_K_E_STICKY;
    default:
        return GPUQ_K_E_CUDA;
    }
}

int gpuq_cuda_fail(gpuq_cuda_ctx *ctx, cudaError_t e, const char *what, const char *file, int line)
{
    int code = gpuq_cuda_error_code(e);
    (void)ctx;
    gpuq_kernels_logf(GPUQ_K_LOG_ERROR, "cuda: %s:%d: %s: %s (%s)", file, line, what,
                      cudaGetErrorString(e), cudaGetErrorName(e));
    return code;
}

int gpuq_cublas_fail(gpuq_cuda_ctx *ctx, cublasStatus_t st, const char *what, const char *file,
                     int line)
{
    int code;
    if (st == CUBLAS_STATUS_ALLOC_FAILED) {
        code = GPUQ_K_E_NOMEM;
    } else {
        /* An execution failure may hide a sticky context error. */
        cudaError_t e = cudaPeekAtLastError();
        code = e != cudaSuccess ? gpuq_cuda_error_code(e) : GPUQ_K_E_CUDA;
        if (code == GPUQ_K_OK || code == GPUQ_K_E_NOMEM)
            code = GPUQ_K_E_CUDA;
    }
    const gpuq_cublas_api *api = gpuq_cublas();
    (void)ctx;
    if (api)
        gpuq_kernels_logf(GPUQ_K_LOG_ERROR, "cublas: %s:%d: %s: %s", file, line, what,
                          api->status_string(st));
    else
        gpuq_kernels_logf(GPUQ_K_LOG_ERROR, "cublas: %s:%d: %s: status %d", file, line, what,
                          (int)st);
    return code;
}

extern "C" int gpuq_cuda_ctx_create(cudaStream_t stream, gpuq_cuda_ctx **out)
{
    *out = NULL;
    gpuq_cuda_ctx *ctx = (gpuq_cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx)
        return GPUQ_K_E_NOMEM;
    ctx->stream = stream;
    /* Stream-ordered, allocated and freed: cudaFree waits for the whole
     * device, which would stall gpuqd's loop behind every other session's
     * work whenever one ends. */
    cudaError_t e = cudaMallocAsync((void **)&ctx->d_flag, sizeof(int), stream);
    if (e != cudaSuccess) {
        int code = gpuq_cuda_fail(ctx, e, "cudaMallocAsync(errflag)", __FILE__, __LINE__);
        free(ctx);
        return code;
    }
    e = cudaMemsetAsync(ctx->d_flag, 0, sizeof(int), stream);
    if (e != cudaSuccess) {
        int code = gpuq_cuda_fail(ctx, e, "cudaMemsetAsync(errflag)", __FILE__, __LINE__);
        cudaFreeAsync(ctx->d_flag, stream);
        free(ctx);
        return code;
    }
    *out = ctx;
    return GPUQ_K_OK;
}

extern "C" void gpuq_cuda_ctx_destroy(gpuq_cuda_ctx *ctx)
{
    if (!ctx)
        return;
    /* Errors are only logged: after a sticky error these calls fail too. */
    if (ctx->blas) {
        /* A handle exists only if cuBLAS was loaded, and it stays loaded. */
        const gpuq_cublas_api *api = gpuq_cublas();
        cublasStatus_t st = api->destroy(ctx->blas);
        if (st != CUBLAS_STATUS_SUCCESS)
            gpuq_kernels_logf(GPUQ_K_LOG_WARN, "cublas: cublasDestroy: %s", api->status_string(st));
    }
    if (ctx->d_scratch) {
        cudaError_t e = cudaFreeAsync(ctx->d_scratch, ctx->stream);
        if (e != cudaSuccess)
            gpuq_cuda_fail(ctx, e, "cudaFreeAsync(scratch)", __FILE__, __LINE__);
    }
    if (ctx->d_flag) {
        cudaError_t e = cudaFreeAsync(ctx->d_flag, ctx->stream);
        if (e != cudaSuccess)
            gpuq_cuda_fail(ctx, e, "cudaFreeAsync(errflag)", __FILE__, __LINE__);
    }
    free(ctx);
}

extern "C" cudaStream_t gpuq_cuda_ctx_stream(gpuq_cuda_ctx *ctx)
{
    return ctx->stream;
}

extern "C" int gpuq_cuda_copy(gpuq_cuda_ctx *ctx, void *d_dst, const void *d_src, size_t bytes)
{
    if (bytes == 0)
        return GPUQ_K_OK;
    GPUQ_CUDA_CHECK(ctx,
                    cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return GPUQ_K_OK;
}

struct copy_items_arg {
    gpuq_copy_item it[GPUQ_COPY_ITEMS_MAX];
};
static_assert(sizeof(copy_items_arg) <= 4000, "gpuq_cuda_copy_items' argument exceeds 4 KiB");

/* Block i copies item i: 16 bytes at a time when both ends and the length
 * allow it, else 4, else 1. */
__global__ void gpuq_copy_items_kernel(copy_items_arg a)
{
    const gpuq_copy_item it = a.it[blockIdx.x];
    const uintptr_t al = (uintptr_t)it.src | (uintptr_t)it.dst | (uintptr_t)it.bytes;
    if (al % 16 == 0) {
        const uint4 *s = (const uint4 *)it.src;
        uint4 *d = (uint4 *)it.dst;
        for (uint64_t i = threadIdx.x; i < it.bytes / 16; i += blockDim.x)
            d[i] = s[i];
    } else if (al % 4 == 0) {
        const uint32_t *s = (const uint32_t *)it.src;
        uint32_t *d = (uint32_t *)it.dst;
        for (uint64_t i = threadIdx.x; i < it.bytes / 4; i += blockDim.x)
            d[i] = s[i];
    } else {
        const unsigned char *s = (const unsigned char *)it.src;
        unsigned char *d = (unsigned char *)it.dst;
        for (uint64_t i = threadIdx.x; i < it.bytes; i += blockDim.x)
            d[i] = s[i];
    }
}

extern "C" int gpuq_cuda_copy_items(gpuq_cuda_ctx *ctx, const gpuq_copy_item *items, unsigned n)
{
    if (!ctx || !items || n == 0 || n > GPUQ_COPY_ITEMS_MAX)
        return GPUQ_K_E_ARG;
    copy_items_arg a;
    for (unsigned i = 0; i < n; i++) {
        if (items[i].bytes && (!items[i].src || !items[i].dst))
            return GPUQ_K_E_ARG;
        a.it[i] = items[i];
    }
    gpuq_copy_items_kernel<<<n, 256, 0, ctx->stream>>>(a);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

extern "C" int *gpuq_cuda_ctx_errflag(gpuq_cuda_ctx *ctx)
{
    return ctx ? ctx->d_flag : NULL;
}

__global__ void gpuq_flag_to_host_kernel(const int *d_flag, volatile int *h_flag)
{
    *h_flag = *(volatile const int *)d_flag;
    __threadfence_system();
}

extern "C" int gpuq_cuda_ctx_flag_to_host(gpuq_cuda_ctx *ctx, int *h_flag)
{
    gpuq_flag_to_host_kernel<<<1, 1, 0, ctx->stream>>>(ctx->d_flag, h_flag);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

__global__ void gpuq_flag_reset_kernel(int *d_flag)
{
    *d_flag = 0;
}

extern "C" int gpuq_cuda_ctx_flag_reset(gpuq_cuda_ctx *ctx)
{
    gpuq_flag_reset_kernel<<<1, 1, 0, ctx->stream>>>(ctx->d_flag);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

extern "C" void gpuq_cuda_ctx_use_gemm(gpuq_cuda_ctx *ctx, int use_gemm)
{
    if (ctx)
        ctx->no_gemm = !use_gemm;
}

extern "C" void gpuq_cuda_ctx_set_gate(gpuq_cuda_ctx *ctx, const int *gate)
{
    if (ctx)
        ctx->gate = gate;
}

int gpuq_cuda_scratch(gpuq_cuda_ctx *ctx, size_t bytes, void **out)
{
    if (bytes == 0)
        bytes = 1;
    if (bytes > ctx->scratch_cap) {
        size_t cap = ctx->scratch_cap ? ctx->scratch_cap : 4096;
        while (cap < bytes)
            cap = cap > SIZE_MAX / 2 ? bytes : cap * 2;
        if (ctx->d_scratch) {
            void *old = ctx->d_scratch;
            ctx->d_scratch = NULL;
            ctx->scratch_cap = 0;
            GPUQ_CUDA_CHECK(ctx, cudaFreeAsync(old, ctx->stream));
        }
        void *p = NULL;
        GPUQ_CUDA_CHECK(ctx, cudaMallocAsync(&p, cap, ctx->stream));
        ctx->d_scratch = p;
        ctx->scratch_cap = cap;
    }
    *out = ctx->d_scratch;
    return GPUQ_K_OK;
}

int gpuq_cuda_blas(gpuq_cuda_ctx *ctx, cublasHandle_t *out)
{
    if (!ctx->blas) {
        const gpuq_cublas_api *api = gpuq_cublas();
        if (!api)
            return GPUQ_K_E_CUDA;
        cublasHandle_t h = NULL;
        GPUQ_CUBLAS_CHECK(ctx, api->create(&h));
        cublasStatus_t st = api->set_stream(h, ctx->stream);
        if (st == CUBLAS_STATUS_SUCCESS)
            st = api->set_math_mode(h, CUBLAS_DEFAULT_MATH); /* no TF32 */
        if (st == CUBLAS_STATUS_SUCCESS)
            st = api->set_pointer_mode(h, CUBLAS_POINTER_MODE_HOST);
        if (st != CUBLAS_STATUS_SUCCESS) {
            api->destroy(h);
            return gpuq_cublas_fail(ctx, st, "cublas handle setup", __FILE__, __LINE__);
        }
        ctx->blas = h;
    }
    *out = ctx->blas;
    return GPUQ_K_OK;
}

__global__ void gpuq_fault_kernel(int *bad)
{
    /* An address no allocation covers: the launch ends with
     * cudaErrorIllegalAddress and the context is lost. */
    *(volatile int *)bad = 1;
}

extern "C" int gpuq_cuda_test_fault(cudaStream_t stream)
{
    gpuq_fault_kernel<<<1, 1, 0, stream>>>((int *)(uintptr_t)0x8);
    GPUQ_LAUNCH_CHECK(NULL);
    return GPUQ_K_OK;
}

/* One thread that waits ns nanoseconds of the GPU's global timer, or until
 * the gate is set. */
__global__ void gpuq_sleep_kernel(unsigned long long ns, const int *gate)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        if (gate && gpuq_gate_load(gate))
            return;
        __nanosleep(10000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

extern "C" int gpuq_cuda_test_sleep(cudaStream_t stream, unsigned ms, const int *gate)
{
    gpuq_sleep_kernel<<<1, 1, 0, stream>>>((unsigned long long)ms * 1000000ull, gate);
    GPUQ_LAUNCH_CHECK(NULL);
    return GPUQ_K_OK;
}
