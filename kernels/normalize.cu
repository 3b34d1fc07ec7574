/* normalize.cu - row-wise normalize on the GPU: out = (a - shift) / scale.
 *
 * Statistics accumulate in double (the CPU reference's formulas, see
 * cpu_ref.c): sum, l1 = Σ|a|, l2 = sqrt(Σa²), minmax (min, max; NaN if the row
 * holds a NaN), zscore (two passes: mean, then Σ(a-mean)², population std).
 *
 * Three shapes of launch:
 *  - cols <= 128: a warp per row (cub::WarpReduce), reduce and scale fused;
 *  - cols < 2^17: a block per row (cub::BlockReduce), reduce and scale fused;
 *  - longer rows (a flat 10^8 array): a grid-wide two-stage reduction, B
 *    blocks per row write partials into ctx scratch, a finalize kernel turns
 *    them into (shift, scale) per row, then an elementwise scale kernel.
 * A zero scale sets the ctx flag to ZERO (2) unless zero_ok; that row's
 * output is zeros either way. A NaN scale is not zero: the row becomes NaN.
 */
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <math.h>

#include "cuda_check.h"

namespace {

struct Acc {
    double s, mn, mx;
};

__device__ __forceinline__ double nan_min(double a, double b)
{
    return (a < b || a != a) ? a : b;
}
__device__ __forceinline__ double nan_max(double a, double b)
{
    return (a > b || a != a) ? a : b;
}

struct AccOp {
    __device__ __forceinline__ Acc operator()(const Acc &a, const Acc &b) const
    {
        Acc r;
        r.s = a.s + b.s;
        r.mn = nan_min(a.mn, b.mn);
        r.mx = nan_max(a.mx, b.mx);
        return r;
    }
};

enum { M_SUM = 0, M_ABS, M_SQ, M_MINMAX, M_SQDEV };

__device__ __forceinline__ Acc acc_identity()
{
    Acc a;
    a.s = 0.0;
    a.mn = INFINITY;
    a.mx = -INFINITY;
    return a;
}

/* Accumulate p[lo + t*stride ...] below hi in the given mode. */
template <int MODE, typename T>
__device__ Acc acc_range(const T *p, uint64_t lo, uint64_t hi, uint64_t stride, double mean)
{
    Acc a = acc_identity();
    for (uint64_t j = lo; j < hi; j += stride) {
        double v = (double)p[j];
        if (MODE == M_SUM) {
            a.s += v;
        } else if (MODE == M_ABS) {
            a.s += fabs(v);
        } else if (MODE == M_SQ) {
            a.s += v * v;
        } else if (MODE == M_MINMAX) {
            a.mn = nan_min(a.mn, v);
            a.mx = nan_max(a.mx, v);
        } else {
            double d = v - mean;
            a.s += d * d;
        }
    }
    return a;
}

template <typename T>
__device__ Acc acc_method(int mode, const T *p, uint64_t lo, uint64_t hi, uint64_t stride,
                          double mean)
{
    switch (mode) {
    case M_SUM:
        return acc_range<M_SUM>(p, lo, hi, stride, mean);
    case M_ABS:
        return acc_range<M_ABS>(p, lo, hi, stride, mean);
    case M_SQ:
        return acc_range<M_SQ>(p, lo, hi, stride, mean);
    case M_MINMAX:
        return acc_range<M_MINMAX>(p, lo, hi, stride, mean);
    default:
        return acc_range<M_SQDEV>(p, lo, hi, stride, mean);
    }
}

/* First-pass mode of a method (zscore's first pass is the sum). */
__host__ __device__ __forceinline__ int first_mode(int method)
{
    switch (method) {
    case GPUQ_K_SUM:
        return M_SUM;
    case GPUQ_K_L1:
        return M_ABS;
    case GPUQ_K_L2:
        return M_SQ;
    case GPUQ_K_MINMAX:
        return M_MINMAX;
    default:
        return M_SUM;
    }
}

/* (shift, scale) from the first-pass result (non-zscore). */
__device__ __forceinline__ void affine(int method, const Acc &a, double *shift, double *scale)
{
    *shift = 0.0;
    switch (method) {
    case GPUQ_K_SUM:
    case GPUQ_K_L1:
        *scale = a.s;
        break;
    case GPUQ_K_L2:
        *scale = sqrt(a.s);
        break;
    default: /* minmax */
        *shift = a.mn;
        *scale = a.mx - a.mn;
        break;
    }
}

template <typename T>
__device__ void scale_range(const T *in, T *out, uint64_t lo, uint64_t hi, uint64_t stride,
                            double shift, double scale)
{
    if (scale == 0.0) {
        for (uint64_t j = lo; j < hi; j += stride)
            out[j] = (T)0;
    } else {
        for (uint64_t j = lo; j < hi; j += stride)
            out[j] = (T)(((double)in[j] - shift) / scale);
    }
}

/* One row with a group of threads; red(Acc) returns the group's reduction
 * in every thread of the group. */
template <typename T, typename Red>
__device__ void norm_row(const T *in, T *out, uint64_t cols, int method, int zero_ok, int *flag,
                         unsigned t, unsigned nt, Red &red)
{
    double shift, scale;
    Acc a = red(acc_method(first_mode(method), in, t, cols, nt, 0.0));
    if (method == GPUQ_K_ZSCORE) {
        double mean = a.s / (double)cols;
        Acc b = red(acc_method(M_SQDEV, in, t, cols, nt, mean));
        shift = mean;
        scale = sqrt(b.s / (double)cols);
    } else {
        affine(method, a, &shift, &scale);
    }
    if (scale == 0.0 && !zero_ok && t == 0)
        gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
    scale_range(in, out, t, cols, nt, shift, scale);
}

template <int BLOCK>
struct BlockRed {
    typedef cub::BlockReduce<Acc, BLOCK> R;
    typename R::TempStorage *tmp;
    Acc *bcast;
    __device__ Acc operator()(const Acc &v)
    {
        Acc r = R(*tmp).Reduce(v, AccOp());
        if (threadIdx.x == 0)
            *bcast = r;
        __syncthreads();
        r = *bcast;
        __syncthreads(); /* tmp and bcast are reused by the next call */
        return r;
    }
};

struct WarpRed {
    typedef cub::WarpReduce<Acc> R;
    typename R::TempStorage *tmp;
    __device__ Acc operator()(const Acc &v)
    {
        Acc r = R(*tmp).Reduce(v, AccOp());
        r.s = __shfl_sync(0xffffffffu, r.s, 0);
        r.mn = __shfl_sync(0xffffffffu, r.mn, 0);
        r.mx = __shfl_sync(0xffffffffu, r.mx, 0);
        __syncwarp();
        return r;
    }
};

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    norm_block_kernel(const T *in, T *out, uint64_t rows, uint64_t cols, int method, int zero_ok,
                      int *flag)
{
    __shared__ typename BlockRed<BLOCK>::R::TempStorage tmp;
    __shared__ Acc bcast;
    BlockRed<BLOCK> red;
    red.tmp = &tmp;
    red.bcast = &bcast;
    for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x)
        norm_row(in + r * cols, out + r * cols, cols, method, zero_ok, flag, threadIdx.x, BLOCK,
                 red);
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    norm_warp_kernel(const T *in, T *out, uint64_t rows, uint64_t cols, int method, int zero_ok,
                     int *flag)
{
    constexpr int WARPS = BLOCK / 32;
    __shared__ typename WarpRed::R::TempStorage tmp[WARPS];
    unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    WarpRed red;
    red.tmp = &tmp[w];
    /* The loop bound is uniform within a warp, as the shuffles need. */
    for (uint64_t r = (uint64_t)blockIdx.x * WARPS + w; r < rows; r += (uint64_t)gridDim.x * WARPS)
        norm_row(in + r * cols, out + r * cols, cols, method, zero_ok, flag, lane, 32, red);
}

/* ---- long rows: partials, finalize, scale ---- */

constexpr int BIG_BLOCK = 256;

/* Block b of row r reduces its chunk of the row into part[r * bpr + b].
 * params[r].x is the row mean (M_SQDEV pass only). */
template <typename T>
__global__ void __launch_bounds__(BIG_BLOCK)
    norm_partial_kernel(const T *in, uint64_t rows, uint64_t cols, unsigned bpr, int mode,
                        const double2 *params, Acc *part)
{
    typedef cub::BlockReduce<Acc, BIG_BLOCK> R;
    __shared__ typename R::TempStorage tmp;
    uint64_t chunk = (cols + bpr - 1) / bpr;
    uint64_t lo = (uint64_t)blockIdx.x * chunk;
    uint64_t hi = lo + chunk < cols ? lo + chunk : cols;
    for (uint64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        double mean = mode == M_SQDEV ? params[r].x : 0.0;
        Acc a = acc_method(mode, in + r * cols, lo + threadIdx.x, hi, BIG_BLOCK, mean);
        Acc s = R(tmp).Reduce(a, AccOp());
        if (threadIdx.x == 0)
            part[r * bpr + blockIdx.x] = s;
        __syncthreads();
    }
}

/* A block per row reduces its bpr partials. stage 0 (zscore's first pass):
 * params[r].x = mean. stage 1: params[r] = (shift, scale) and the flag. */
__global__ void __launch_bounds__(BIG_BLOCK)
    norm_finalize_kernel(const Acc *part, uint64_t rows, uint64_t cols, unsigned bpr, int method,
                         int stage, int zero_ok, double2 *params, int *flag)
{
    typedef cub::BlockReduce<Acc, BIG_BLOCK> R;
    __shared__ typename R::TempStorage tmp;
    for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        Acc a = acc_identity();
        AccOp op;
        for (unsigned b = threadIdx.x; b < bpr; b += BIG_BLOCK)
            a = op(a, part[r * bpr + b]);
        Acc s = R(tmp).Reduce(a, op);
        if (threadIdx.x == 0) {
            double shift, scale;
            if (method == GPUQ_K_ZSCORE && stage == 0) {
                params[r].x = s.s / (double)cols;
            } else {
                if (method == GPUQ_K_ZSCORE) {
                    shift = params[r].x;
                    scale = sqrt(s.s / (double)cols);
                } else {
                    affine(method, s, &shift, &scale);
                }
                params[r] = make_double2(shift, scale);
                if (scale == 0.0 && !zero_ok)
                    gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
            }
        }
        __syncthreads();
    }
}

template <typename T>
__global__ void norm_scale_kernel(const T *in, T *out, uint64_t rows, uint64_t cols,
                                  const double2 *params)
{
    for (uint64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        double2 p = params[r];
        uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        scale_range(in + r * cols, out + r * cols, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                    cols, stride, p.x, p.y);
    }
}

constexpr uint64_t BIG_COLS = 1u << 17;

template <typename T>
int normalize_t(gpuq_cuda_ctx *ctx, int method, int zero_ok, const T *in, T *out, uint64_t rows,
                uint64_t cols)
{
    cudaStream_t s = ctx->stream;
    int *flag = ctx->d_flag;
    if (cols <= 128) {
        const int B = 256;
        norm_warp_kernel<T, B><<<gpuq_grid_for(rows, B / 32), B, 0, s>>>(in, out, rows, cols,
                                                                          method, zero_ok, flag);
        GPUQ_LAUNCH_CHECK(ctx);
        return GPUQ_K_OK;
    }
    if (cols < BIG_COLS) {
        const int B = 256;
        norm_block_kernel<T, B><<<gpuq_grid_for(rows, 1), B, 0, s>>>(in, out, rows, cols, method,
                                                                      zero_ok, flag);
        GPUQ_LAUNCH_CHECK(ctx);
        return GPUQ_K_OK;
    }
    /* Long rows: about 16 elements per thread per block, at most 2048 blocks
     * per row and 2^20 partials in all (rows * cols is bounded by memory). */
    uint64_t bpr64 = (cols + BIG_BLOCK * 16 - 1) / (BIG_BLOCK * 16);
    if (bpr64 > 2048)
        bpr64 = 2048;
    uint64_t cap = ((uint64_t)1 << 20) / rows;
    if (bpr64 > cap)
        bpr64 = cap;
    if (bpr64 == 0)
        bpr64 = 1;
    unsigned bpr = (unsigned)bpr64;
    size_t part_bytes = (size_t)rows * bpr * sizeof(Acc);
    part_bytes = (part_bytes + 255) & ~(size_t)255;
    void *scratch = NULL;
    int rc = gpuq_cuda_scratch(ctx, part_bytes + (size_t)rows * sizeof(double2), &scratch);
    if (rc != GPUQ_K_OK)
        return rc;
    Acc *part = (Acc *)scratch;
    double2 *params = (double2 *)((char *)scratch + part_bytes);
    unsigned gy = (unsigned)(rows < 65535 ? rows : 65535);
    dim3 pgrid(bpr, gy);
    unsigned fgrid = gpuq_grid_for(rows, 1);

    if (method == GPUQ_K_ZSCORE) {
        norm_partial_kernel<T><<<pgrid, BIG_BLOCK, 0, s>>>(in, rows, cols, bpr, M_SUM, params, part);
        GPUQ_LAUNCH_CHECK(ctx);
        norm_finalize_kernel<<<fgrid, BIG_BLOCK, 0, s>>>(part, rows, cols, bpr, method, 0, zero_ok,
                                                         params, flag);
        GPUQ_LAUNCH_CHECK(ctx);
        norm_partial_kernel<T><<<pgrid, BIG_BLOCK, 0, s>>>(in, rows, cols, bpr, M_SQDEV, params,
                                                           part);
        GPUQ_LAUNCH_CHECK(ctx);
    } else {
        norm_partial_kernel<T><<<pgrid, BIG_BLOCK, 0, s>>>(in, rows, cols, bpr, first_mode(method),
                                                           params, part);
        GPUQ_LAUNCH_CHECK(ctx);
    }
    norm_finalize_kernel<<<fgrid, BIG_BLOCK, 0, s>>>(part, rows, cols, bpr, method, 1, zero_ok,
                                                     params, flag);
    GPUQ_LAUNCH_CHECK(ctx);
    dim3 sgrid(gpuq_grid_for(cols, 256 * 4) < 4096 ? gpuq_grid_for(cols, 256 * 4) : 4096, gy);
    norm_scale_kernel<T><<<sgrid, 256, 0, s>>>(in, out, rows, cols, params);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

} /* namespace */

extern "C" int gpuq_cuda_normalize(gpuq_cuda_ctx *ctx, int dt, int method, int zero_ok,
                                   const void *d_in, void *d_out, uint64_t rows, uint64_t cols)
{
    if (!ctx || !d_in || !d_out || rows == 0 || cols == 0 || method < GPUQ_K_SUM ||
        method > GPUQ_K_ZSCORE || rows > UINT64_MAX / cols)
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        return normalize_t<float>(ctx, method, zero_ok, (const float *)d_in, (float *)d_out, rows,
                                  cols);
    if (dt == GPUQ_K_F64)
        return normalize_t<double>(ctx, method, zero_ok, (const double *)d_in, (double *)d_out,
                                   rows, cols);
    return GPUQ_K_E_ARG;
}
