/* SPDX-License-Identifier: Apache-2.0 */
/* knn.cu - k nearest rows of y for each row of x on the GPU, in bounded
 * memory (the FAISS flat-index scheme: distance tiles, running top-k).
 *
 * Happy path, per chunk of mb query rows and block of nb rows of y
 * (knn_plan.h; the tile is at most 128 MiB of scratch whatever m and n):
 *  1. knn_dist_kernel writes the mb x nb tile of distances, each computed
 *     in double with pairwise's formulas (k in order, as gpuq_cpu_pairwise
 *     sums; the direct sums, never the GEMM expansion, which cancels:
 *     pairwise.cu says why, and a wrong distance is a wrong index here)
 *     and rounded to the dtype: 64 x 64 outputs per block of 256
 *     threads, 4 x 4 per thread, d in chunks of 16 through shared memory;
 *  2. knn_select_kernel, a block per query row, merges the tile's row into
 *     that row's running top-k, kept in the outputs d_dist/d_idx between
 *     blocks (the first block starts empty). Entries are (key, index), key
 *     the distance's bits made monotonic (NaN above +inf, -0 as +0), so
 *     that one integer comparison is the kNN order of gpuq_kernels.h. A
 *     candidate enters a shared buffer only if it beats the current k-th
 *     entry (a threshold that only tightens); when the buffer could
 *     overflow, and at the end of the row, a bitonic sort of the running
 *     entries plus the buffer (padded to a power of two) yields the new
 *     top-k. Exact: every candidate is compared, none is dropped by an
 *     approximation, ties go to the lower index.
 * k <= GPUQ_KNN_K_MAX keeps the sort buffer (2 x 1024 entries of 16 bytes)
 * in the default 48 KiB of shared memory; a larger k replaces step 2 by
 * knn_sort.cu's per-row sort of the running list and the tile's row.
 * Fails: GPUQ_K_E_ARG on bad sizes or misaligned scratch; CUDA errors of a
 * launch as cuda_check.h maps them. A cosine zero vector sets the flag
 * ZERO when zero_ok (the on_zero mode) is 0, else its distance is 1.0
 * (GPUQ_K_ON_ZERO_ZERO) or NaN (_NAN: sorted last, as every NaN). Chebyshev
 * and minkowski use metric_math.h's terms and root (pw: minkowski's p), as
 * the CPU reference does. Nothing synchronizes.
 */
#include <stdint.h>
#include <stdlib.h>

#include "cuda_check.h"
#include "knn_plan.h"
#include "metric_math.h"
#include "knn_sort.h" /* knn_key, knn_unkey; the select for k > GPUQ_KNN_K_MAX */

namespace
{

constexpr int DT_TILE = 64; /* distance tile: rows and columns per block */
constexpr int DT_K = 16;    /* d per shared-memory chunk */
constexpr int SEL_THREADS = 256;
constexpr uint64_t KEY_NONE = GPUQ_KNN_KEY_NONE;

template <typename T, int METRIC>
__global__ void __launch_bounds__(256)
    knn_dist_kernel(const T *x, const T *y, uint64_t rows, uint64_t cols, uint64_t d, double pw,
                    int zero_ok, T *tile, int *flag, const int *gate)
{
    __shared__ double xs[DT_K][DT_TILE + 1];
    __shared__ double ys[DT_K][DT_TILE + 1];
    __shared__ int stop; /* the gate as thread 0 read it */
    const unsigned tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const uint64_t r0 = (uint64_t)blockIdx.y * DT_TILE, c0 = (uint64_t)blockIdx.x * DT_TILE;
    double acc[4][4], nx[4], ny[4];
#pragma unroll
    for (int a = 0; a < 4; a++) {
        nx[a] = ny[a] = 0.0;
#pragma unroll
        for (int b = 0; b < 4; b++)
            acc[a][b] = 0.0;
    }
    for (uint64_t k0 = 0; k0 < d; k0 += DT_K) {
        for (unsigned e = tid; e < DT_TILE * DT_K; e += 256) {
            unsigned r = e / DT_K, kk = e % DT_K;
            uint64_t k = k0 + kk;
            /* zero padding adds nothing to any metric's sums */
            xs[kk][r] = (r0 + r < rows && k < d) ? (double)x[(r0 + r) * d + k] : 0.0;
            ys[kk][r] = (c0 + r < cols && k < d) ? (double)y[(c0 + r) * d + k] : 0.0;
        }
        /* The gate (gpuq_cuda_ctx_set_gate, gpuq_gate_check), asked by
         * thread 0 while the first chunk's loads are in flight; the block
         * decides after the first barrier (stop is written once). */
        if (k0 == 0 && tid == 0)
            stop = gpuq_gate_check(gate, flag, (uint64_t)blockIdx.y * gridDim.x + blockIdx.x);
        __syncthreads();
        if (stop)
            return;
#pragma unroll
        for (int kk = 0; kk < DT_K; kk++) {
            double a[4], b[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                a[q] = xs[kk][ty + 16 * q];
                b[q] = ys[kk][tx + 16 * q];
            }
            if (METRIC == GPUQ_K_COSINE) {
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    nx[q] += a[q] * a[q];
                    ny[q] += b[q] * b[q];
                }
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    if (METRIC == GPUQ_K_EUCLIDEAN || METRIC == GPUQ_K_SQEUCLIDEAN) {
                        double t = a[i] - b[j];
                        acc[i][j] += t * t;
                    } else if (METRIC == GPUQ_K_MANHATTAN) {
                        acc[i][j] += fabs(a[i] - b[j]);
                    } else if (METRIC == GPUQ_K_CHEBYSHEV) {
                        acc[i][j] = mm_max(acc[i][j], fabs(a[i] - b[j]));
                    } else if (METRIC == GPUQ_K_MINKOWSKI) {
                        acc[i][j] += mm_term(fabs(a[i] - b[j]), pw);
                    } else {
                        acc[i][j] += a[i] * b[j];
                    }
                }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint64_t r = r0 + ty + 16 * i, c = c0 + tx + 16 * j;
            if (r >= rows || c >= cols)
                continue;
            double v = acc[i][j];
            if (METRIC == GPUQ_K_EUCLIDEAN) {
                v = sqrt(v);
            } else if (METRIC == GPUQ_K_MINKOWSKI) {
                v = mm_root(v, pw);
            } else if (METRIC == GPUQ_K_COSINE) {
                if (nx[i] == 0.0 || ny[j] == 0.0) {
                    if (!zero_ok)
                        gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
                    v = zero_ok == GPUQ_K_ON_ZERO_NAN ? NAN : 1.0;
                } else {
                    v = 1.0 - v / (sqrt(nx[i]) * sqrt(ny[j]));
                }
            }
            tile[r * cols + c] = (T)v;
        }
}

/* Few query rows (at most SK_ROWS_MAX in a tile, skinny_rows_max): R rows
 * per block (the rows' next power of two: 1, 2, 4 .. 32), 32 accumulators
 * at most in registers, and
 * one column (a row of y) per thread, SK_COLS columns per block, d in
 * chunks of SK_K through shared memory (y transposed on the way in, so
 * that each thread reads its own column; x broadcast). Each distance is
 * the same sum as knn_dist_kernel's, term by term in the same order with
 * the same operations (the zero padding there adds exact zeros), so a
 * query row's distances, and so its neighbours, do not depend on how many
 * rows share its tile: a row batch (server/backends/backend.h) gets bit
 * for bit what the row alone gets. The 64 x 64 kernel computes 64 rows
 * per block whatever m is: for one query, 63 of them padding. */
constexpr int SK_COLS = 256;
constexpr int SK_K = 16;
/* 32: at 64 rows the 64 x 64 kernel was faster (H200, 1M x 128 f32:
 * 2.67 ms against 3.09; at 32 rows 1.44 ms against 2.17) */
constexpr uint64_t SK_ROWS_MAX = 32;

template <typename T, int METRIC, int R>
__global__ void __launch_bounds__(SK_COLS)
    knn_dist_skinny(const T *x, const T *y, uint64_t rows, uint64_t cols, uint64_t d, double pw,
                    int zero_ok, T *tile, int *flag, const int *gate)
{
    __shared__ T ys[SK_K][SK_COLS + 1];
    /* x's chunk, row pairs adjacent: one 16-byte broadcast load feeds two rows */
    __shared__ __align__(16) double xs[SK_K][R < 2 ? 2 : R];
    __shared__ double nxs[R]; /* cosine: x's squared norms */
    __shared__ int stop;
    const unsigned tid = threadIdx.x;
    const uint64_t r0 = (uint64_t)blockIdx.y * R, c0 = (uint64_t)blockIdx.x * SK_COLS;
    const uint64_t c = c0 + tid;
    /* rows of y start 16-byte aligned */
    const bool vec = (uintptr_t)y % 16 == 0 && (d * sizeof(T)) % 16 == 0;
    if (METRIC == GPUQ_K_COSINE && tid < R) {
        /* the same sum, in the same order, as the 64 x 64 kernel's nx */
        double nx = 0.0;
        if (r0 + tid < rows)
            for (uint64_t k = 0; k < d; k++) {
                const double a = (double)x[(r0 + tid) * d + k];
                nx += a * a;
            }
        nxs[tid] = nx;
    }
    double acc[R], ny = 0.0;
#pragma unroll
    for (int i = 0; i < R; i++)
        acc[i] = 0.0;
    for (uint64_t k0 = 0; k0 < d; k0 += SK_K) {
        const unsigned kn = d - k0 < (uint64_t)SK_K ? (unsigned)(d - k0) : (unsigned)SK_K;
        if (vec && kn == SK_K && c0 + SK_COLS <= cols) {
            /* a whole chunk of 16-byte aligned rows: 16-byte loads */
            constexpr unsigned V = 16 / sizeof(T), NV = SK_K / V;
            for (unsigned e = tid; e < SK_COLS * NV; e += SK_COLS) {
                unsigned col = e / NV, kv = (e % NV) * V;
                const uint4 w = *(const uint4 *)(y + (c0 + col) * d + k0 + kv);
                const T *t = (const T *)&w;
#pragma unroll
                for (unsigned j = 0; j < V; j++)
                    ys[kv + j][col] = t[j];
            }
        } else {
            for (unsigned e = tid; e < SK_COLS * SK_K; e += SK_COLS) {
                unsigned col = e / SK_K, kk = e % SK_K;
                ys[kk][col] = (c0 + col < cols && kk < kn) ? y[(c0 + col) * d + k0 + kk] : (T)0;
            }
        }
        for (unsigned e = tid; e < SK_K * R; e += SK_COLS) {
            unsigned r = e / SK_K, kk = e % SK_K;
            xs[kk][r] = (r0 + r < rows && kk < kn) ? (double)x[(r0 + r) * d + k0 + kk] : 0.0;
        }
        if (k0 == 0 && tid == 0)
            stop = gpuq_gate_check(gate, flag, (uint64_t)blockIdx.y * gridDim.x + blockIdx.x);
        __syncthreads();
        if (stop)
            return;
        for (unsigned kk = 0; kk < kn; kk++) {
            const double b = (double)ys[kk][tid];
            if (METRIC == GPUQ_K_COSINE)
                ny += b * b;
#pragma unroll
            for (int i = 0; i < R; i++) {
                const double a = xs[kk][i];
                if (METRIC == GPUQ_K_EUCLIDEAN || METRIC == GPUQ_K_SQEUCLIDEAN) {
                    double t = a - b;
                    acc[i] += t * t;
                } else if (METRIC == GPUQ_K_MANHATTAN) {
                    acc[i] += fabs(a - b);
                } else if (METRIC == GPUQ_K_CHEBYSHEV) {
                    acc[i] = mm_max(acc[i], fabs(a - b));
                } else if (METRIC == GPUQ_K_MINKOWSKI) {
                    acc[i] += mm_term(fabs(a - b), pw);
                } else {
                    acc[i] += a * b;
                }
            }
        }
        __syncthreads();
    }
    if (c >= cols)
        return;
#pragma unroll
    for (int i = 0; i < R; i++) {
        uint64_t r = r0 + i;
        if (r >= rows)
            break;
        double v = acc[i];
        if (METRIC == GPUQ_K_EUCLIDEAN) {
            v = sqrt(v);
        } else if (METRIC == GPUQ_K_MINKOWSKI) {
            v = mm_root(v, pw);
        } else if (METRIC == GPUQ_K_COSINE) {
            const double nx = nxs[i];
            if (nx == 0.0 || ny == 0.0) {
                if (!zero_ok)
                    gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
                v = zero_ok == GPUQ_K_ON_ZERO_NAN ? NAN : 1.0;
            } else {
                v = 1.0 - v / (sqrt(nx) * sqrt(ny));
            }
        }
        tile[r * cols + c] = (T)v;
    }
}

__device__ __forceinline__ bool ent_less(uint64_t ka, int64_t ia, uint64_t kb, int64_t ib)
{
    return ka < kb || (ka == kb && ia < ib);
}

/* Ascending bitonic sort of key/id[0..q), q a power of two; every thread
 * of the block calls it; ends synchronized. */
__device__ void bitonic_sort(uint64_t *key, int64_t *id, unsigned q)
{
    for (unsigned size = 2; size <= q; size <<= 1)
        for (unsigned stride = size >> 1; stride > 0; stride >>= 1) {
            for (unsigned t = threadIdx.x; t < q / 2; t += blockDim.x) {
                unsigned lo = 2 * t - (t & (stride - 1)), hi = lo + stride;
                bool up = (lo & size) == 0;
                if (ent_less(key[hi], id[hi], key[lo], id[lo]) == up) {
                    uint64_t tk = key[lo];
                    int64_t ti = id[lo];
                    key[lo] = key[hi];
                    id[lo] = id[hi];
                    key[hi] = tk;
                    id[hi] = ti;
                }
            }
            __syncthreads();
        }
}

/* Merge tile[rows][cols] (columns are y rows j0..j0+cols-1, or the
 * indices tidx[rows][cols] gives) into the running top-k of each row in
 * dist/idx ([rows][k]; ignored when first). With segs > 1 each row is
 * selected in segs segments of seg columns, one virtual row v = row * segs
 * + s each, into dist/idx[v][k], started empty and always written (the
 * partial lists a second call merges, tidx then their indices). Shared
 * memory: p entries, the first kpad the running list, the rest the
 * candidate buffer (p - kpad >= 2 * blockDim.x). */
template <typename T>
__global__ void __launch_bounds__(SEL_THREADS)
    knn_select_kernel(const T *tile, const int64_t *tidx, uint64_t rows, uint64_t cols,
                      uint64_t segs, uint64_t seg, uint64_t j0, uint64_t k, unsigned kpad,
                      unsigned p, int first, T *dist, int64_t *idx, int *flag, const int *gate)
{
    extern __shared__ uint64_t sel_smem[];
    uint64_t *key = sel_smem;
    int64_t *id = (int64_t *)(sel_smem + p);
    __shared__ unsigned cnt;
    __shared__ int stop; /* the gate as thread 0 read it for this row */
    const unsigned nt = blockDim.x;
    const bool split = segs > 1;
    for (uint64_t v = blockIdx.x; v < rows * segs; v += gridDim.x) {
        const uint64_t row = v / segs, c_lo = (v % segs) * seg;
        const uint64_t ncols = cols - c_lo < seg ? cols - c_lo : seg;
        T *drow = dist + v * k;
        int64_t *irow = idx + v * k;
        for (unsigned t = threadIdx.x; t < kpad; t += nt) {
            if (!first && t < k) {
                key[t] = knn_key((double)drow[t]);
                id[t] = irow[t];
            } else {
                key[t] = KEY_NONE;
                id[t] = INT64_MAX;
            }
        }
        if (threadIdx.x == 0) { /* the gate, as in knn_dist_kernel */
            cnt = 0;
            stop = gpuq_gate_check(gate, flag, row);
        }
        __syncthreads();
        if (stop)
            return;
        uint64_t tk = key[k - 1]; /* the entry to beat */
        int64_t ti = id[k - 1];
        bool dirty = split; /* a partial list is written whatever it holds */
        /* Until the first sort the entry to beat is the empty slot and every
         * candidate enters: sort as soon as the buffer can fill the list (a
         * sort of at most kpad + 2 * nt entries), not when it is full (of
         * p), so that the threshold is a real distance from the first
         * chunks on. H200, 32 rows x 786k columns: 283 us a tile before. */
        bool sorted = false;
        const T *trow = tile + row * cols + c_lo;
        const int64_t *irow_in = tidx ? tidx + row * cols + c_lo : NULL;
        for (uint64_t c0 = 0; c0 < ncols; c0 += nt) {
            uint64_t c = c0 + threadIdx.x;
            if (c < ncols) {
                uint64_t kc = knn_key((double)trow[c]);
                int64_t ic = irow_in ? irow_in[c] : (int64_t)(j0 + c_lo + c);
                if (ent_less(kc, ic, tk, ti)) {
                    unsigned pos = atomicAdd(&cnt, 1u);
                    key[kpad + pos] = kc;
                    id[kpad + pos] = ic;
                }
            }
            __syncthreads();
            unsigned nc = cnt;
            __syncthreads(); /* every thread has read cnt before it changes */
            bool last = c0 + nt >= ncols;
            /* before a chunk cnt <= p - kpad - nt, so its appends fit */
            if (nc > p - kpad - nt || (last && nc > 0) || (!sorted && nc >= k)) {
                sorted = true;
                unsigned q = kpad;
                while (q < kpad + nc)
                    q <<= 1;
                for (unsigned t = kpad + nc + threadIdx.x; t < q; t += nt) {
                    key[t] = KEY_NONE;
                    id[t] = INT64_MAX;
                }
                __syncthreads();
                bitonic_sort(key, id, q);
                tk = key[k - 1];
                ti = id[k - 1];
                dirty = true;
                if (threadIdx.x == 0)
                    cnt = 0;
                __syncthreads();
            }
        }
        if (dirty) {
            for (unsigned t = threadIdx.x; t < k; t += nt) {
                /* an empty slot (a segment shorter than k) stays the
                 * largest entry: NaN with the largest index */
                drow[t] = (T)knn_unkey(key[t]);
                irow[t] = id[t];
            }
        }
        __syncthreads(); /* the next row reuses the shared entries */
    }
}

/* The most rows of a tile that take the skinny kernel: SK_ROWS_MAX, or
 * GPUQ_KNN_FEW_ROWS (0 .. SK_ROWS_MAX) from the environment, read once: a
 * benchmark's switch (bench/gpu_run.sh times both kernels on one shape).
 * Either kernel gives the same bits. */
uint64_t skinny_rows_max(void)
{
    static int once = -1;
    if (once < 0) {
        const char *v = getenv("GPUQ_KNN_FEW_ROWS");
        long n = v && *v ? strtol(v, NULL, 10) : (long)SK_ROWS_MAX;
        once = n < 0 ? 0 : n > (long)SK_ROWS_MAX ? (int)SK_ROWS_MAX : (int)n;
    }
    return (uint64_t)once;
}

template <typename T, int METRIC, int R>
int launch_skinny(gpuq_cuda_ctx *ctx, const T *x, const T *y, uint64_t rows, uint64_t cols,
                  uint64_t d, double pw, int zero_ok, T *tile)
{
    dim3 grid((unsigned)((cols + SK_COLS - 1) / SK_COLS), (unsigned)((rows + R - 1) / R));
    knn_dist_skinny<T, METRIC, R><<<grid, SK_COLS, 0, ctx->stream>>>(
        x, y, rows, cols, d, pw, zero_ok, tile, ctx->d_flag, ctx->gate);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

template <typename T, int METRIC>
int launch_dist(gpuq_cuda_ctx *ctx, const T *x, const T *y, uint64_t rows, uint64_t cols,
                uint64_t d, double pw, int zero_ok, T *tile)
{
    /* few rows: the skinny kernel, R the rows' next power of two */
    if (rows <= skinny_rows_max() && (cols + SK_COLS - 1) / SK_COLS <= 0x7fffffffu) {
        if (rows == 1)
            return launch_skinny<T, METRIC, 1>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
        if (rows == 2)
            return launch_skinny<T, METRIC, 2>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
        if (rows <= 4)
            return launch_skinny<T, METRIC, 4>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
        if (rows <= 8)
            return launch_skinny<T, METRIC, 8>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
        if (rows <= 16)
            return launch_skinny<T, METRIC, 16>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
        return launch_skinny<T, METRIC, 32>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
    }
    dim3 grid((unsigned)((cols + DT_TILE - 1) / DT_TILE),
              (unsigned)((rows + DT_TILE - 1) / DT_TILE));
    dim3 block(16, 16);
    knn_dist_kernel<T, METRIC><<<grid, block, 0, ctx->stream>>>(x, y, rows, cols, d, pw, zero_ok,
                                                                tile, ctx->d_flag, ctx->gate);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

template <typename T>
int dist_tile(gpuq_cuda_ctx *ctx, int metric, const T *x, const T *y, uint64_t rows, uint64_t cols,
              uint64_t d, double pw, int zero_ok, T *tile)
{
    switch (metric) {
    case GPUQ_K_EUCLIDEAN:
        return launch_dist<T, GPUQ_K_EUCLIDEAN>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
    case GPUQ_K_SQEUCLIDEAN:
        return launch_dist<T, GPUQ_K_SQEUCLIDEAN>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
    case GPUQ_K_COSINE:
        return launch_dist<T, GPUQ_K_COSINE>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
    case GPUQ_K_MANHATTAN:
        return launch_dist<T, GPUQ_K_MANHATTAN>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
    case GPUQ_K_CHEBYSHEV:
        return launch_dist<T, GPUQ_K_CHEBYSHEV>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
    case GPUQ_K_MINKOWSKI:
        return launch_dist<T, GPUQ_K_MINKOWSKI>(ctx, x, y, rows, cols, d, pw, zero_ok, tile);
    default:
        return GPUQ_K_E_ARG;
    }
}

/* k > GPUQ_KNN_K_MAX: the same distance tiles, merged by knn_sort.cu's
 * per-row sort (knn_plan.h's sort path) instead of the select kernel. */
template <typename T>
int knn_big_typed(gpuq_cuda_ctx *ctx, int dt, int metric, double pw, int zero_ok, const T *x,
                  const T *y, uint64_t m, uint64_t n, uint64_t d, uint64_t k, void *scratch,
                  T *dist, int64_t *idx)
{
    gpuq_knn_big_plan plan = gpuq_knn_big_plan_for(dt, m, n, k);
    T *tile = (T *)((char *)scratch + plan.tile_off);
    for (uint64_t i0 = 0; i0 < m; i0 += plan.mb) {
        uint64_t rows = m - i0 < plan.mb ? m - i0 : plan.mb;
        for (uint64_t j0 = 0; j0 < n; j0 += plan.nb) {
            uint64_t cols = n - j0 < plan.nb ? n - j0 : plan.nb;
            int rc =
                dist_tile<T>(ctx, metric, x + i0 * d, y + j0 * d, rows, cols, d, pw, zero_ok, tile);
            if (rc == GPUQ_K_OK)
                rc = gpuq_knn_sort_merge(ctx, dt, &plan, scratch, rows, cols, j0, k, j0 == 0,
                                         dist + i0 * k, idx + i0 * k);
            if (rc != GPUQ_K_OK)
                return rc;
        }
    }
    return GPUQ_K_OK;
}

template <typename T>
int knn_typed(gpuq_cuda_ctx *ctx, int dt, int metric, double pw, int zero_ok, const T *x,
              const T *y, uint64_t m, uint64_t n, uint64_t d, uint64_t k, T *tile, T *dist,
              int64_t *idx)
{
    if (k > GPUQ_KNN_K_MAX)
        return knn_big_typed<T>(ctx, dt, metric, pw, zero_ok, x, y, m, n, d, k, tile, dist, idx);
    gpuq_knn_plan plan = gpuq_knn_plan_for(dt, m, n);
    unsigned kpad = 32;
    while (kpad < k)
        kpad <<= 1;
    unsigned p = kpad < 512 ? 1024 : 2 * kpad; /* buffer >= 2 * SEL_THREADS */
    size_t smem = (size_t)p * (sizeof(uint64_t) + sizeof(int64_t));
    /* a split tile's partial lists, after the tile (gpuq_cuda_knn_scratch_bytes) */
    uint64_t seg_nb, segs_nb = gpuq_knn_segs(&plan, plan.nb, &seg_nb);
    T *part_d = (T *)((char *)tile + ((plan.tile_bytes + 15) & ~(uint64_t)15));
    int64_t *part_i =
        (int64_t *)((char *)part_d + ((plan.mb * segs_nb * k * sizeof(T) + 15) & ~(uint64_t)15));
    for (uint64_t i0 = 0; i0 < m; i0 += plan.mb) {
        uint64_t rows = m - i0 < plan.mb ? m - i0 : plan.mb;
        for (uint64_t j0 = 0; j0 < n; j0 += plan.nb) {
            uint64_t cols = n - j0 < plan.nb ? n - j0 : plan.nb;
            int rc =
                dist_tile<T>(ctx, metric, x + i0 * d, y + j0 * d, rows, cols, d, pw, zero_ok, tile);
            if (rc != GPUQ_K_OK)
                return rc;
            uint64_t seg, segs = gpuq_knn_segs(&plan, cols, &seg);
            if (segs <= 1 || segs > segs_nb) { /* (a smaller tile never has more) */
                knn_select_kernel<T><<<(unsigned)rows, SEL_THREADS, smem, ctx->stream>>>(
                    tile, NULL, rows, cols, 1, cols, j0, k, kpad, p, j0 == 0, dist + i0 * k,
                    idx + i0 * k, ctx->d_flag, ctx->gate);
                GPUQ_LAUNCH_CHECK(ctx);
                continue;
            }
            /* each segment's top-k, then the row's from those (the same
             * entries: a total order's top-k of the union of top-ks) */
            knn_select_kernel<T><<<(unsigned)(rows * segs), SEL_THREADS, smem, ctx->stream>>>(
                tile, NULL, rows, cols, segs, seg, j0, k, kpad, p, 1, part_d, part_i, ctx->d_flag,
                ctx->gate);
            GPUQ_LAUNCH_CHECK(ctx);
            knn_select_kernel<T><<<(unsigned)rows, SEL_THREADS, smem, ctx->stream>>>(
                part_d, part_i, rows, segs * k, 1, segs * k, 0, k, kpad, p, j0 == 0, dist + i0 * k,
                idx + i0 * k, ctx->d_flag, ctx->gate);
            GPUQ_LAUNCH_CHECK(ctx);
        }
    }
    return GPUQ_K_OK;
}

} /* namespace */

extern "C" int gpuq_cuda_knn(gpuq_cuda_ctx *ctx, int dt, int metric, double p, int zero_ok,
                             const void *d_x, const void *d_y, uint64_t m, uint64_t n, uint64_t d,
                             uint64_t k, void *d_scratch, void *d_dist, int64_t *d_idx)
{
    if (!ctx || !d_x || !d_y || !d_scratch || !d_dist || !d_idx || (uintptr_t)d_scratch % 16 != 0 ||
        !gpuq_knn_args_ok(dt, metric, m, n, d, k) || !gpuq_metric_args_ok(metric, p, zero_ok))
        return GPUQ_K_E_ARG;
    metric = gpuq_metric_resolve(metric, p);
    if (dt == GPUQ_K_F32)
        return knn_typed<float>(ctx, dt, metric, p, zero_ok, (const float *)d_x, (const float *)d_y,
                                m, n, d, k, (float *)d_scratch, (float *)d_dist, d_idx);
    return knn_typed<double>(ctx, dt, metric, p, zero_ok, (const double *)d_x, (const double *)d_y,
                             m, n, d, k, (double *)d_scratch, (double *)d_dist, d_idx);
}
