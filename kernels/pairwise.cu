/* pairwise.cu - pairwise distances x[m][d] vs y[n][d] -> out[m][n] on the GPU.
 *
 * Two routes:
 *  - a tiled shared-memory kernel (16x16 output tiles, d in chunks of 16)
 *    accumulating in double, for every metric and dtype;
 *  - for float64 with d >= 32 and euclidean/sqeuclidean/cosine: cuBLAS DGEMM
 *    on ||x||^2 + ||y||^2 - 2 x.y (row norms by a kernel, the Gram matrix
 *    written straight into out, then an epilogue kernel combines, clamps at
 *    zero and takes the square root / the cosine).
 * Why float32 never takes the GEMM route: SGEMM accumulates in float, and the
 * identity cancels badly when distances are small relative to the norms, so
 * float32 euclidean could miss the 1e-5 relative target; the tiled kernel
 * accumulates in double instead (H100's FP64 rate makes that affordable).
 * The float64 GEMM route keeps ~1e-16 * ||x||^2 absolute error per element,
 * well inside 1e-12 relative over the matrix.
 * cuBLAS is loaded at run time (cublas_dl.h): when it is not available
 * (no toolkit libraries, GPUQ_NO_CUBLAS=1) or a test turned GEMM off on the
 * ctx, float64 takes the tiled kernel for every d.
 * Cosine with a zero vector sets the flag ZERO unless zero_ok (then 1.0).
 */
#include <limits.h>
#include <math.h>

#include "cublas_dl.h"
#include "cuda_check.h"

namespace
{

constexpr int TILE = 16;

template <typename T, int METRIC>
__global__ void __launch_bounds__(TILE *TILE)
    pair_tiled_kernel(const T *x, const T *y, uint64_t m, uint64_t n, uint64_t d, int zero_ok,
                      T *out, int *flag)
{
    __shared__ double xs[TILE][TILE + 1];
    __shared__ double ys[TILE][TILE + 1];
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
    uint64_t mt = (m + TILE - 1) / TILE, nt = (n + TILE - 1) / TILE;
    for (uint64_t bi = blockIdx.y; bi < mt; bi += gridDim.y) {
        for (uint64_t bj = blockIdx.x; bj < nt; bj += gridDim.x) {
            uint64_t i = bi * TILE + ty, j = bj * TILE + tx;
            uint64_t xi = bi * TILE + ty, yj = bj * TILE + ty; /* rows loaded by this thread */
            double acc = 0.0, nx = 0.0, ny = 0.0;
            for (uint64_t k0 = 0; k0 < d; k0 += TILE) {
                uint64_t k = k0 + tx;
                xs[ty][tx] = (xi < m && k < d) ? (double)x[xi * d + k] : 0.0;
                ys[ty][tx] = (yj < n && k < d) ? (double)y[yj * d + k] : 0.0;
                __syncthreads();
#pragma unroll
                for (int kk = 0; kk < TILE; kk++) {
                    double a = xs[ty][kk], b = ys[tx][kk];
                    if (METRIC == GPUQ_K_EUCLIDEAN || METRIC == GPUQ_K_SQEUCLIDEAN) {
                        double t = a - b;
                        acc += t * t;
                    } else if (METRIC == GPUQ_K_MANHATTAN) {
                        acc += fabs(a - b);
                    } else {
                        acc += a * b;
                        nx += a * a;
                        ny += b * b;
                    }
                }
                __syncthreads();
            }
            if (i < m && j < n) {
                double r;
                if (METRIC == GPUQ_K_EUCLIDEAN) {
                    r = sqrt(acc);
                } else if (METRIC == GPUQ_K_COSINE) {
                    if (nx == 0.0 || ny == 0.0) {
                        if (!zero_ok)
                            gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
                        r = 1.0;
                    } else {
                        r = 1.0 - acc / (sqrt(nx) * sqrt(ny));
                    }
                } else {
                    r = acc;
                }
                out[i * n + j] = (T)r;
            }
        }
    }
}

/* Σ v² per row, a warp per row. */
__global__ void rownorm_kernel(const double *v, uint64_t rows, uint64_t d, double *nrm)
{
    unsigned lane = threadIdx.x % 32;
    uint64_t w = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    uint64_t nw = (uint64_t)gridDim.x * blockDim.x / 32;
    for (uint64_t r = w; r < rows; r += nw) {
        double s = 0.0;
        for (uint64_t k = lane; k < d; k += 32) {
            double a = v[r * d + k];
            s += a * a;
        }
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_down_sync(0xffffffffu, s, o);
        if (lane == 0)
            nrm[r] = s;
    }
}

/* out holds the Gram matrix x.y; turn it into distances in place. */
__global__ void gemm_epilogue_kernel(double *out, const double *nx, const double *ny, uint64_t m,
                                     uint64_t n, int metric, int zero_ok, int *flag)
{
    uint64_t total = m * n;
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = k / n, j = k % n;
        double g = out[k], a = nx[i], b = ny[j], r;
        if (metric == GPUQ_K_COSINE) {
            if (a == 0.0 || b == 0.0) {
                if (!zero_ok)
                    gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
                r = 1.0;
            } else {
                r = 1.0 - g / (sqrt(a) * sqrt(b));
            }
        } else {
            r = fmax(a + b - 2.0 * g, 0.0);
            if (r != r) /* keep NaN inputs NaN (fmax would drop them) */
                r = a + b - 2.0 * g;
            if (metric == GPUQ_K_EUCLIDEAN)
                r = sqrt(r);
        }
        out[k] = r;
    }
}

template <typename T, int METRIC>
int launch_tiled(gpuq_cuda_ctx *ctx, const T *x, const T *y, uint64_t m, uint64_t n, uint64_t d,
                 int zero_ok, T *out)
{
    uint64_t mt = (m + TILE - 1) / TILE, nt = (n + TILE - 1) / TILE;
    dim3 grid((unsigned)(nt < 1u << 30 ? nt : 1u << 30), (unsigned)(mt < 65535 ? mt : 65535));
    dim3 block(TILE, TILE);
    pair_tiled_kernel<T, METRIC>
        <<<grid, block, 0, ctx->stream>>>(x, y, m, n, d, zero_ok, out, ctx->d_flag);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

template <typename T>
int tiled(gpuq_cuda_ctx *ctx, int metric, int zero_ok, const T *x, const T *y, uint64_t m,
          uint64_t n, uint64_t d, T *out)
{
    switch (metric) {
    case GPUQ_K_EUCLIDEAN:
        return launch_tiled<T, GPUQ_K_EUCLIDEAN>(ctx, x, y, m, n, d, zero_ok, out);
    case GPUQ_K_SQEUCLIDEAN:
        return launch_tiled<T, GPUQ_K_SQEUCLIDEAN>(ctx, x, y, m, n, d, zero_ok, out);
    case GPUQ_K_COSINE:
        return launch_tiled<T, GPUQ_K_COSINE>(ctx, x, y, m, n, d, zero_ok, out);
    case GPUQ_K_MANHATTAN:
        return launch_tiled<T, GPUQ_K_MANHATTAN>(ctx, x, y, m, n, d, zero_ok, out);
    default:
        return GPUQ_K_E_ARG;
    }
}

int gemm_f64(const gpuq_cublas_api *blas, gpuq_cuda_ctx *ctx, int metric, int zero_ok,
             const double *x, const double *y, uint64_t m, uint64_t n, uint64_t d, double *out)
{
    cublasHandle_t h;
    int rc = gpuq_cuda_blas(ctx, &h);
    if (rc != GPUQ_K_OK)
        return rc;
    void *scratch = NULL;
    rc = gpuq_cuda_scratch(ctx, (size_t)(m + n) * sizeof(double), &scratch);
    if (rc != GPUQ_K_OK)
        return rc;
    double *nx = (double *)scratch, *ny = nx + m;
    rownorm_kernel<<<gpuq_grid_for(m, 8), 256, 0, ctx->stream>>>(x, m, d, nx);
    GPUQ_LAUNCH_CHECK(ctx);
    rownorm_kernel<<<gpuq_grid_for(n, 8), 256, 0, ctx->stream>>>(y, n, d, ny);
    GPUQ_LAUNCH_CHECK(ctx);
    /* Row-major out[m][n] = X Y^T is column-major C (n x m, ldc n) = Y^T' X'
     * where the row-major inputs read as column-major d x n and d x m. */
    const double alpha = 1.0, beta = 0.0;
    GPUQ_CUBLAS_CHECK(ctx, blas->dgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)d, &alpha,
                                       y, (int)d, x, (int)d, &beta, out, (int)n));
    GPUQ_LAUNCH_CHECK(ctx);
    gemm_epilogue_kernel<<<gpuq_grid_for(m * n, 256), 256, 0, ctx->stream>>>(
        out, nx, ny, m, n, metric, zero_ok, ctx->d_flag);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

} /* namespace */

extern "C" int gpuq_cuda_pairwise(gpuq_cuda_ctx *ctx, int dt, int metric, int zero_ok,
                                  const void *d_x, const void *d_y, uint64_t m, uint64_t n,
                                  uint64_t d, void *d_out)
{
    if (!ctx || !d_x || !d_y || !d_out || m == 0 || n == 0 || d == 0 || metric < GPUQ_K_EUCLIDEAN ||
        metric > GPUQ_K_MANHATTAN || m > UINT64_MAX / n || m > UINT64_MAX / d || n > UINT64_MAX / d)
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        return tiled<float>(ctx, metric, zero_ok, (const float *)d_x, (const float *)d_y, m, n, d,
                            (float *)d_out);
    if (dt != GPUQ_K_F64)
        return GPUQ_K_E_ARG;
    const gpuq_cublas_api *blas;
    if (d >= 32 && metric != GPUQ_K_MANHATTAN && m <= INT_MAX && n <= INT_MAX && d <= INT_MAX &&
        !ctx->no_gemm && (blas = gpuq_cublas()) != NULL)
        return gemm_f64(blas, ctx, metric, zero_ok, (const double *)d_x, (const double *)d_y, m, n,
                        d, (double *)d_out);
    return tiled<double>(ctx, metric, zero_ok, (const double *)d_x, (const double *)d_y, m, n, d,
                         (double *)d_out);
}
