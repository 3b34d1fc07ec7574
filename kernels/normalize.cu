/* SPDX-License-Identifier: Apache-2.0 */
/* normalize.cu - row-wise normalize on the GPU: out = ((a*pre - sh) - sl) / den.
 *
 * The numerics are norm_math.h's, the CPU reference's own: every thread keeps
 * compensated (Neumaier) partial sums in double, binned for float64 input so
 * that nothing overflows or underflows; warps, blocks and the multi-block
 * path merge them by exact TwoSum; zscore is the corrected two-pass (mean,
 * then sums of d and d^2 of the scaled deviations). The reductions shuffle
 * only the fields the pass uses (nm_mode_pairs), so float32 sum/l1/l2 move
 * one pair per step; the extra flops are hidden behind memory traffic.
 *
 * Three shapes of launch:
 *  - cols <= 128: a warp per row (xor butterfly), reduce and scale fused;
 *  - cols < 2^17: a block per row (butterfly, then the warps' results),
 *    reduce and scale fused;
 *  - longer rows (a flat 10^8 array): B blocks per row write partial
 *    accumulators into ctx scratch, a finalize kernel merges them into the
 *    row's nm_affine (zscore: partials and finalize twice), then an
 *    elementwise scale kernel.
 * And a batch (gpuq_cuda_normalize_batch): many small requests, each with
 * one of the first two shapes, in one launch.
 * Flags: a zero denominator sets ZERO unless zero_ok (the on_zero mode;
 * that row's output is zeros, or NaN for GPUQ_K_ON_ZERO_NAN, its
 * denominator then NaN); an output too large for the dtype from a row of finite

 * values sets OVERFLOW. A row holding NaN or Inf follows IEEE (NaN and Inf
 * propagate; no flag).
 */
#include <math.h>

#include "cuda_check.h"
#include "norm_math.h"

namespace
{

constexpr unsigned FULL_MASK = 0xffffffffu;

/* Accumulate p[lo + k*stride] below hi in pass MODE (c, m0: zscore pass 2). */
template <int MODE, typename T>
__device__ nm_acc acc_range(const T *p, uint64_t lo, uint64_t hi, uint64_t stride, double c,
                            double m0)
{
    nm_acc a;
    nm_acc_init(&a);
    const int bins = sizeof(T) == sizeof(double);
    for (uint64_t j = lo; j < hi; j += stride)
        nm_acc_add(&a, MODE, bins, (double)p[j], c, m0);
    return a;
}

template <typename T>
__device__ nm_acc acc_mode(int mode, const T *p, uint64_t lo, uint64_t hi, uint64_t stride,
                           double c, double m0)
{
    switch (mode) {
    case NM_SUM:
        return acc_range<NM_SUM>(p, lo, hi, stride, c, m0);
    case NM_ABS:
        return acc_range<NM_ABS>(p, lo, hi, stride, c, m0);
    case NM_SQ:
        return acc_range<NM_SQ>(p, lo, hi, stride, c, m0);
    case NM_MINMAX:
        return acc_range<NM_MINMAX>(p, lo, hi, stride, c, m0);
    case NM_ZS1:
        return acc_range<NM_ZS1>(p, lo, hi, stride, c, m0);
    default:
        return acc_range<NM_ZS2>(p, lo, hi, stride, c, m0);
    }
}

/* Every lane gets the merge of the warp's 32 accumulators. Merges are
 * symmetric (norm_math.h), so all lanes hold the same values. np, mm:
 * the fields in use; uniform across the warp. */
__device__ nm_acc warp_allreduce(nm_acc a, int np, int mm)
{
    for (int off = 16; off > 0; off >>= 1) {
        nm_acc o = a;
#pragma unroll
        for (int i = 0; i < 3; i++) {
            if (i < np) {
                o.p[i].s = __shfl_xor_sync(FULL_MASK, a.p[i].s, off);
                o.p[i].c = __shfl_xor_sync(FULL_MASK, a.p[i].c, off);
            }
        }
        if (mm) {
            o.mn = __shfl_xor_sync(FULL_MASK, a.mn, off);
            o.mx = __shfl_xor_sync(FULL_MASK, a.mx, off);
        }
        nm_acc_merge(&a, &o, np, mm);
    }
    return a;
}

/* Block-wide: every thread gets the same merge (warps in a fixed order). */
template <int BLOCK> struct BlockRed {
    nm_acc *warps; /* shared, BLOCK / 32 */
    __device__ nm_acc operator()(nm_acc v, int np, int mm)
    {
        v = warp_allreduce(v, np, mm);
        if (threadIdx.x % 32 == 0)
            warps[threadIdx.x / 32] = v;
        __syncthreads();
        nm_acc r = warps[0];
        for (int w = 1; w < BLOCK / 32; w++)
            nm_acc_merge(&r, &warps[w], np, mm);
        __syncthreads(); /* warps is reused by the next call */
        return r;
    }
};

struct WarpRed {
    __device__ nm_acc operator()(nm_acc v, int np, int mm)
    {
        return warp_allreduce(v, np, mm);
    }
};

/* Write one row's results; den == 0 writes zeros. */
template <typename T>
__device__ void scale_range(const T *in, T *out, uint64_t lo, uint64_t hi, uint64_t stride,
                            const nm_affine &f, int *flag)
{
    if (f.den == 0.0) {
        for (uint64_t j = lo; j < hi; j += stride)
            out[j] = (T)0;
        return;
    }
    bool inf = false;
    for (uint64_t j = lo; j < hi; j += stride) {
        T v = (T)nm_apply(&f, (double)in[j]);
        inf |= isinf((double)v);
        out[j] = v;
    }
    if (inf && f.check)
        gpuq_set_flag(flag, GPUQ_FLAG_OVERFLOW);
}

/* One row with a group of nt threads (t: this one); red(acc, np, mm) returns
 * the group's merge in every thread, so the branches below are uniform. */
template <typename T, typename Red>
__device__ void norm_row(const T *in, T *out, uint64_t cols, int method, int zero_ok, int *flag,
                         unsigned t, unsigned nt, Red &red)
{
    const int bins = sizeof(T) == sizeof(double);
    int mode = nm_first_mode(method);
    nm_acc a = red(acc_mode(mode, in, t, cols, nt, 1.0, 0.0), nm_mode_pairs(mode, bins),
                   nm_mode_minmax(mode));
    nm_affine f;
    if (method == GPUQ_K_ZSCORE) {
        if (!nm_zscore_stage0(&a, cols, &f)) {
            nm_acc b = red(acc_range<NM_ZS2>(in, t, cols, nt, f.pre, f.sh),
                           nm_mode_pairs(NM_ZS2, bins), 0);
            nm_zscore_stage1(&b, cols, &f);
        }
    } else {
        f = nm_finish(method, &a);
    }
    if (f.den == 0.0 && !zero_ok && t == 0)
        gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
    if (f.den == 0.0 && zero_ok == GPUQ_K_ON_ZERO_NAN)
        f.den = NAN; /* on_zero "nan": every value of the row NaN */
    scale_range(in, out, t, cols, nt, f, flag);
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    norm_block_kernel(const T *in, T *out, uint64_t rows, uint64_t cols, int method, int zero_ok,
                      int *flag)
{
    __shared__ nm_acc warps[BLOCK / 32];
    BlockRed<BLOCK> red;
    red.warps = warps;
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
    unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    WarpRed red;
    /* The loop bound is uniform within a warp, as the shuffles need. */
    for (uint64_t r = (uint64_t)blockIdx.x * WARPS + w; r < rows; r += (uint64_t)gridDim.x * WARPS)
        norm_row(in + r * cols, out + r * cols, cols, method, zero_ok, flag, lane, 32, red);
}

/* ---- long rows: partials, finalize, scale ---- */

constexpr int BIG_BLOCK = 256;

/* Block b of row r reduces its chunk of the row in pass mode into
 * part[r * bpr + b]. NM_ZS2 reads c and m0 from params[r] (stage 0). */
template <typename T>
__global__ void __launch_bounds__(BIG_BLOCK)
    norm_partial_kernel(const T *in, uint64_t rows, uint64_t cols, unsigned bpr, int mode,
                        const nm_affine *params, nm_acc *part)
{
    __shared__ nm_acc warps[BIG_BLOCK / 32];
    BlockRed<BIG_BLOCK> red;
    red.warps = warps;
    const int bins = sizeof(T) == sizeof(double);
    int np = nm_mode_pairs(mode, bins), mm = nm_mode_minmax(mode);
    uint64_t chunk = (cols + bpr - 1) / bpr;
    uint64_t lo = (uint64_t)blockIdx.x * chunk;
    uint64_t hi = lo + chunk < cols ? lo + chunk : cols;
    for (uint64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        double c = 1.0, m0 = 0.0;
        if (mode == NM_ZS2) {
            c = params[r].pre;
            m0 = params[r].sh;
        }
        nm_acc a =
            red(acc_mode(mode, in + r * cols, lo + threadIdx.x, hi, BIG_BLOCK, c, m0), np, mm);
        if (threadIdx.x == 0)
            part[r * bpr + blockIdx.x] = a;
    }
}

/* A block per row merges its bpr partials of pass mode into params[r]:
 * NM_ZS1 -> zscore stage 0, NM_ZS2 -> stage 1 (rows stage 0 finished are
 * left alone), else the method's finish. Sets the ZERO flag for a finished
 * zero row unless zero_ok. */
__global__ void __launch_bounds__(BIG_BLOCK)
    norm_finalize_kernel(const nm_acc *part, uint64_t rows, uint64_t cols, unsigned bpr, int method,
                         int mode, int bins, int zero_ok, nm_affine *params, int *flag)
{
    __shared__ nm_acc warps[BIG_BLOCK / 32];
    BlockRed<BIG_BLOCK> red;
    red.warps = warps;
    int np = nm_mode_pairs(mode, bins), mm = nm_mode_minmax(mode);
    for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        nm_acc a;
        nm_acc_init(&a);
        for (unsigned b = threadIdx.x; b < bpr; b += BIG_BLOCK)
            nm_acc_merge(&a, &part[r * bpr + b], np, mm);
        a = red(a, np, mm);
        if (threadIdx.x == 0) {
            nm_affine f;
            if (mode == NM_ZS1) {
                nm_zscore_stage0(&a, cols, &f);
            } else if (mode == NM_ZS2) {
                f = params[r];
                if (!f.done)
                    nm_zscore_stage1(&a, cols, &f);
            } else {
                f = nm_finish(method, &a);
            }
            if (f.done && f.den == 0.0 && !zero_ok)
                gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
            if (f.done && f.den == 0.0 && zero_ok == GPUQ_K_ON_ZERO_NAN)
                f.den = NAN; /* on_zero "nan": scale_range gives NaN */
            params[r] = f;
        }
    }
}

template <typename T>
__global__ void norm_scale_kernel(const T *in, T *out, uint64_t rows, uint64_t cols,
                                  const nm_affine *params, int *flag)
{
    for (uint64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        nm_affine f = params[r];
        uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
        scale_range(in + r * cols, out + r * cols, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                    cols, stride, f, flag);
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
        norm_warp_kernel<T, B>
            <<<gpuq_grid_for(rows, B / 32), B, 0, s>>>(in, out, rows, cols, method, zero_ok, flag);
        GPUQ_LAUNCH_CHECK(ctx);
        return GPUQ_K_OK;
    }
    if (cols < BIG_COLS) {
        const int B = 256;
        norm_block_kernel<T, B>
            <<<gpuq_grid_for(rows, 1), B, 0, s>>>(in, out, rows, cols, method, zero_ok, flag);
        GPUQ_LAUNCH_CHECK(ctx);
        return GPUQ_K_OK;
    }
    /* Long rows: about 16 elements per thread per block, at most 2048 blocks
     * per row and 2^18 partials (16 MiB) in all. */
    uint64_t bpr64 = (cols + BIG_BLOCK * 16 - 1) / (BIG_BLOCK * 16);
    if (bpr64 > 2048)
        bpr64 = 2048;
    uint64_t cap = ((uint64_t)1 << 18) / rows;
    if (bpr64 > cap)
        bpr64 = cap;
    if (bpr64 == 0)
        bpr64 = 1;
    unsigned bpr = (unsigned)bpr64;
    size_t part_bytes = (size_t)rows * bpr * sizeof(nm_acc);
    part_bytes = (part_bytes + 255) & ~(size_t)255;
    void *scratch = NULL;
    int rc = gpuq_cuda_scratch(ctx, part_bytes + (size_t)rows * sizeof(nm_affine), &scratch);
    if (rc != GPUQ_K_OK)
        return rc;
    nm_acc *part = (nm_acc *)scratch;
    nm_affine *params = (nm_affine *)((char *)scratch + part_bytes);
    const int bins = sizeof(T) == sizeof(double);
    unsigned gy = (unsigned)(rows < 65535 ? rows : 65535);
    dim3 pgrid(bpr, gy);
    unsigned fgrid = gpuq_grid_for(rows, 1);

    int mode = nm_first_mode(method);
    norm_partial_kernel<T><<<pgrid, BIG_BLOCK, 0, s>>>(in, rows, cols, bpr, mode, params, part);
    GPUQ_LAUNCH_CHECK(ctx);
    norm_finalize_kernel<<<fgrid, BIG_BLOCK, 0, s>>>(part, rows, cols, bpr, method, mode, bins,
                                                     zero_ok, params, flag);
    GPUQ_LAUNCH_CHECK(ctx);
    if (method == GPUQ_K_ZSCORE) {
        norm_partial_kernel<T>
            <<<pgrid, BIG_BLOCK, 0, s>>>(in, rows, cols, bpr, NM_ZS2, params, part);
        GPUQ_LAUNCH_CHECK(ctx);
        norm_finalize_kernel<<<fgrid, BIG_BLOCK, 0, s>>>(part, rows, cols, bpr, method, NM_ZS2,
                                                         bins, zero_ok, params, flag);
        GPUQ_LAUNCH_CHECK(ctx);
    }
    dim3 sgrid(gpuq_grid_for(cols, 256 * 4) < 4096 ? gpuq_grid_for(cols, 256 * 4) : 4096, gy);
    norm_scale_kernel<T><<<sgrid, 256, 0, s>>>(in, out, rows, cols, params, flag);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

/* ---- flat normalize in pieces (gpuq_kernels.h; the pipelined path) ----
 * Scratch: the nm_affine of the whole array (256 bytes), then bpp partials
 * per piece, piece p's at p * bpp. Each piece is reduced by the long-row
 * kernels above as a row of its own; the finalize merges every piece's
 * partials (zscore: pass 2 runs once over the whole array, landed by then,
 * into the same slots). */

constexpr uint64_t FLAT_HEAD = 256;
constexpr uint64_t FLAT_MAX_PARTS = (uint64_t)1 << 22;

struct flat_geo {
    uint64_t pieces; /* ceil(n / piece) */
    unsigned bpp;    /* blocks (partials) per piece */
    unsigned parts;  /* pieces * bpp */
};

/* The geometry of (n, piece); false on bad sizes. About 16 values per
 * thread, as the long-row path, at most 2048 partials per piece. */
__host__ bool flat_geometry(uint64_t n, uint64_t piece, flat_geo *g)
{
    if (n == 0 || piece == 0)
        return false;
    g->pieces = n / piece + (n % piece != 0);
    uint64_t bpp = (piece < n ? piece : n) / (BIG_BLOCK * 16) + 1;
    if (bpp > 2048)
        bpp = 2048;
    if (g->pieces > FLAT_MAX_PARTS / bpp)
        return false;
    g->bpp = (unsigned)bpp;
    g->parts = (unsigned)(g->pieces * bpp);
    return true;
}

template <typename T>
int flat_reduce_t(gpuq_cuda_ctx *ctx, int method, const T *in, uint64_t n, uint64_t piece,
                  uint64_t p, void *scratch)
{
    flat_geo g;
    if (!flat_geometry(n, piece, &g) || p >= g.pieces)
        return GPUQ_K_E_ARG;
    uint64_t lo = p * piece, cnt = n - lo < piece ? n - lo : piece;
    const nm_affine *params = (const nm_affine *)scratch;
    nm_acc *part = (nm_acc *)((char *)scratch + FLAT_HEAD) + p * g.bpp;
    norm_partial_kernel<T><<<dim3(g.bpp, 1), BIG_BLOCK, 0, ctx->stream>>>(
        in + lo, 1, cnt, g.bpp, nm_first_mode(method), params, part);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

template <typename T>
int flat_finish_t(gpuq_cuda_ctx *ctx, int method, int zero_ok, const T *in, uint64_t n,
                  uint64_t piece, void *scratch)
{
    flat_geo g;
    if (!flat_geometry(n, piece, &g))
        return GPUQ_K_E_ARG;
    cudaStream_t s = ctx->stream;
    nm_affine *params = (nm_affine *)scratch;
    nm_acc *part = (nm_acc *)((char *)scratch + FLAT_HEAD);
    const int bins = sizeof(T) == sizeof(double);
    norm_finalize_kernel<<<1, BIG_BLOCK, 0, s>>>(part, 1, n, g.parts, method, nm_first_mode(method),
                                                 bins, zero_ok, params, ctx->d_flag);
    GPUQ_LAUNCH_CHECK(ctx);
    if (method == GPUQ_K_ZSCORE) {
        norm_partial_kernel<T>
            <<<dim3(g.parts, 1), BIG_BLOCK, 0, s>>>(in, 1, n, g.parts, NM_ZS2, params, part);
        GPUQ_LAUNCH_CHECK(ctx);
        norm_finalize_kernel<<<1, BIG_BLOCK, 0, s>>>(part, 1, n, g.parts, method, NM_ZS2, bins,
                                                     zero_ok, params, ctx->d_flag);
        GPUQ_LAUNCH_CHECK(ctx);
    }
    return GPUQ_K_OK;
}

template <typename T>
int flat_scale_t(gpuq_cuda_ctx *ctx, const T *in, T *out, uint64_t lo, uint64_t cnt,
                 const void *scratch)
{
    unsigned gx = gpuq_grid_for(cnt, 256 * 4);
    norm_scale_kernel<T><<<dim3(gx < 4096 ? gx : 4096, 1), 256, 0, ctx->stream>>>(
        in + lo, out + lo, 1, cnt, (const nm_affine *)scratch, ctx->d_flag);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

bool flat_args_ok(gpuq_cuda_ctx *ctx, int dt, const void *d_in, const void *d_scratch)
{
    return ctx && d_in && d_scratch && (uintptr_t)d_scratch % 16 == 0 &&
           (dt == GPUQ_K_F32 || dt == GPUQ_K_F64);
}

/* ---- batched small normalizes (gpuq_cuda_normalize_batch) ----
 * One launch for up to GPUQ_NORM_BATCH_MAX items, each with the row shape
 * gpuq_cuda_normalize gives it (cols <= 128: a warp per row, 8 rows a
 * block; else a block per row) and the same norm_row with the same
 * reducers, so every value is the same bits. The descriptors travel in the
 * kernel's parameters (no copy, read through the constant cache); block b
 * finds its item by binary search over the items' first blocks. A block's
 * rows set errors in shared memory; an item of one block stores that to
 * item.flag itself (the common case: a row of up to 64 KiB), else each
 * block adds it to the item's slot of the state and the item's last block
 * to finish (fence and counter) moves the slot's value to item.flag,
 * leaving slot and counter zero: the state needs no reset between
 * launches. */

constexpr int BATCH_BLOCK = 256;
constexpr unsigned BATCH_WARPS = BATCH_BLOCK / 32;
constexpr uint64_t BATCH_MAX_GRID = 0x7fffffffu; /* gridDim.x's limit */
static_assert(GPUQ_NORM_BATCH_MAX_COLS == BIG_COLS,
              "a batch item's rows are those gpuq_cuda_normalize gives one block at most");

struct batch_state {
    int flag[GPUQ_NORM_BATCH_MAX];       /* first error of item i's rows */
    unsigned count[GPUQ_NORM_BATCH_MAX]; /* item i's blocks done (wraps to 0) */
};

/* One item as the kernel sees it (48 bytes). */
struct batch_item {
    const void *in;
    void *out;
    int *flag; /* where the item's flag is stored */
    uint64_t rows;
    uint32_t cols;   /* < 2^17 */
    uint32_t blocks; /* the item's blocks: [first, first + blocks) */
    uint8_t dt, method, zero_ok, warp;
};

/* Capacity CAP: the smallest that fits is launched, so that a small batch
 * does not copy 128 descriptors' worth of parameters (about 6.6 KB). */
template <unsigned CAP> struct batch_params {
    batch_state *state;
    unsigned n;
    unsigned first[CAP + 1]; /* first[i]: item i's first block; first[n]: the grid */
    batch_item item[CAP];
};

/* Block lb (within its item) of an item of dtype T: the rows
 * norm_warp_kernel<T, 256> or norm_block_kernel<T, 256> gives that block. */
template <typename T>
__device__ __forceinline__ void batch_rows(const batch_item &it, uint64_t lb, int *flag,
                                           nm_acc *warps)
{
    const T *in = (const T *)it.in;
    T *out = (T *)it.out;
    uint64_t cols = it.cols;
    if (it.warp) {
        uint64_t r = lb * BATCH_WARPS + threadIdx.x / 32;
        WarpRed red;
        if (r < it.rows) /* uniform within the warp, as the shuffles need */
            norm_row(in + r * cols, out + r * cols, cols, it.method, it.zero_ok, flag,
                     threadIdx.x % 32, 32, red);
    } else {
        BlockRed<BATCH_BLOCK> red;
        red.warps = warps;
        norm_row(in + lb * cols, out + lb * cols, cols, it.method, it.zero_ok, flag, threadIdx.x,
                 BATCH_BLOCK, red);
    }
}

/* A release/acquire fence at device scope: what the last-block pattern
 * needs (__threadfence() is fence.sc, a stronger and slower one). */
__device__ __forceinline__ void fence_acq_rel_gpu()
{
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

template <unsigned CAP>
__global__ void __launch_bounds__(BATCH_BLOCK)
    norm_batch_kernel(const __grid_constant__ batch_params<CAP> p)
{
    __shared__ nm_acc warps[BATCH_WARPS];
    __shared__ int blk_flag; /* the first error of this block's rows */
    /* The item i with first[i] <= b < first[i + 1] (first[] increases
     * strictly: every item has a block). Uniform across the block. */
    const unsigned b = blockIdx.x;
    unsigned lo = 0, hi = p.n;
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (p.first[mid] <= b)
            lo = mid;
        else
            hi = mid;
    }
    const batch_item &it = p.item[lo];
    if (threadIdx.x == 0)
        blk_flag = 0;
    __syncthreads();
    uint64_t lb = b - p.first[lo];
    if (it.dt == GPUQ_K_F32)
        batch_rows<float>(it, lb, &blk_flag, warps);
    else
        batch_rows<double>(it, lb, &blk_flag, warps);
    __syncthreads(); /* every row done, blk_flag final */
    if (threadIdx.x != 0)
        return;
    int v = blk_flag;
    if (it.blocks == 1) { /* the item's only block: nothing to merge */
        *(volatile int *)it.flag = v;
        return;
    }
    /* The last-block pattern: each block adds its error (first wins), then
     * counts itself, with a release fence between; the block that
     * completes the count (atomicInc wraps it to 0 there) acquires, takes
     * the merged flag, clears it and hands it on. Only thread 0 of each
     * block touches the state. */
    batch_state *st = p.state;
    if (v != 0)
        gpuq_set_flag(&st->flag[lo], v);
    fence_acq_rel_gpu();
    unsigned last = it.blocks - 1;
    if (atomicInc(&st->count[lo], last) == last) {
        fence_acq_rel_gpu();
        *(volatile int *)it.flag = atomicExch(&st->flag[lo], 0);
    }
}

/* Checks item q; false on a bad one. *blocks: its blocks in the launch. */
bool batch_item_ok(const gpuq_norm_item *q, uint64_t *blocks)
{
    if (!q->in || !q->out || !q->flag || (uintptr_t)q->flag % alignof(int) != 0)
        return false;
    if (q->dt != GPUQ_K_F32 && q->dt != GPUQ_K_F64)
        return false;
    if (q->method < GPUQ_K_SUM || q->method > GPUQ_K_ZSCORE)
        return false;
    if (q->rows == 0 || q->cols == 0 || q->cols >= GPUQ_NORM_BATCH_MAX_COLS ||
        q->rows > UINT64_MAX / q->cols)
        return false;
    size_t es = q->dt == GPUQ_K_F32 ? sizeof(float) : sizeof(double);
    if ((uintptr_t)q->in % es != 0 || (uintptr_t)q->out % es != 0)
        return false;
    *blocks = q->cols <= 128 ? q->rows / BATCH_WARPS + (q->rows % BATCH_WARPS != 0) : q->rows;
    return true;
}

template <unsigned CAP>
int batch_launch(gpuq_cuda_ctx *ctx, const gpuq_norm_item *items, unsigned n, batch_state *st)
{
    batch_params<CAP> p;
    p.state = st;
    p.n = n;
    uint64_t total = 0;
    for (unsigned i = 0; i < n; i++) {
        const gpuq_norm_item *q = &items[i];
        uint64_t blocks = 0;
        if (!batch_item_ok(q, &blocks) || blocks > BATCH_MAX_GRID - total)
            return GPUQ_K_E_ARG;
        batch_item *it = &p.item[i];
        it->in = q->in;
        it->out = q->out;
        it->flag = q->flag;
        it->rows = q->rows;
        it->cols = (uint32_t)q->cols;
        it->blocks = (uint32_t)blocks;
        it->dt = (uint8_t)q->dt;
        it->method = (uint8_t)q->method;
        it->zero_ok = (uint8_t)q->zero_ok;
        it->warp = q->cols <= 128;
        p.first[i] = (unsigned)total;
        total += blocks;
    }
    p.first[n] = (unsigned)total;
    norm_batch_kernel<CAP><<<(unsigned)total, BATCH_BLOCK, 0, ctx->stream>>>(p);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

} /* namespace */

extern "C" uint64_t gpuq_cuda_normalize_flat_scratch_bytes(int dt, uint64_t n, uint64_t piece)
{
    flat_geo g;
    if ((dt != GPUQ_K_F32 && dt != GPUQ_K_F64) || !flat_geometry(n, piece, &g))
        return 0;
    return FLAT_HEAD + (uint64_t)g.parts * sizeof(nm_acc);
}

extern "C" int gpuq_cuda_normalize_flat_reduce(gpuq_cuda_ctx *ctx, int dt, int method,
                                               const void *d_in, uint64_t n, uint64_t piece,
                                               uint64_t p, void *d_scratch)
{
    if (!flat_args_ok(ctx, dt, d_in, d_scratch) || method < GPUQ_K_SUM || method > GPUQ_K_ZSCORE)
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        return flat_reduce_t<float>(ctx, method, (const float *)d_in, n, piece, p, d_scratch);
    return flat_reduce_t<double>(ctx, method, (const double *)d_in, n, piece, p, d_scratch);
}

extern "C" int gpuq_cuda_normalize_flat_finish(gpuq_cuda_ctx *ctx, int dt, int method, int zero_ok,
                                               const void *d_in, uint64_t n, uint64_t piece,
                                               void *d_scratch)
{
    if (!flat_args_ok(ctx, dt, d_in, d_scratch) || method < GPUQ_K_SUM || method > GPUQ_K_ZSCORE)
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        return flat_finish_t<float>(ctx, method, zero_ok, (const float *)d_in, n, piece, d_scratch);
    return flat_finish_t<double>(ctx, method, zero_ok, (const double *)d_in, n, piece, d_scratch);
}

extern "C" int gpuq_cuda_normalize_flat_scale(gpuq_cuda_ctx *ctx, int dt, const void *d_in,
                                              void *d_out, uint64_t n, uint64_t lo, uint64_t cnt,
                                              const void *d_scratch)
{
    if (!flat_args_ok(ctx, dt, d_in, d_scratch) || !d_out || cnt == 0 || lo >= n || cnt > n - lo)
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        return flat_scale_t<float>(ctx, (const float *)d_in, (float *)d_out, lo, cnt, d_scratch);
    return flat_scale_t<double>(ctx, (const double *)d_in, (double *)d_out, lo, cnt, d_scratch);
}

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

extern "C" uint64_t gpuq_cuda_normalize_batch_state_bytes(void)
{
    return sizeof(batch_state);
}

extern "C" int gpuq_cuda_normalize_batch(gpuq_cuda_ctx *ctx, const gpuq_norm_item *items,
                                         unsigned n, void *d_state)
{
    if (!ctx || !items || !d_state || (uintptr_t)d_state % alignof(batch_state) != 0 || n == 0 ||
        n > GPUQ_NORM_BATCH_MAX)
        return GPUQ_K_E_ARG;
    batch_state *st = (batch_state *)d_state;
    if (n <= 8)
        return batch_launch<8>(ctx, items, n, st);
    if (n <= 32)
        return batch_launch<32>(ctx, items, n, st);
    return batch_launch<GPUQ_NORM_BATCH_MAX>(ctx, items, n, st);
}
