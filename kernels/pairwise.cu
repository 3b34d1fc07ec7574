/* SPDX-License-Identifier: Apache-2.0 */
/* pairwise.cu - pairwise distances x[m][d] vs y[n][d] -> out[m][n] on the GPU.
 *
 * Two routes:
 *  - a register-tiled direct kernel (pair_tile_kernel) for every metric and
 *    dtype: each block computes BM x BN = 128 x 64 outputs with 256 threads,
 *    8 x 4 per thread; x and y pass through shared memory in chunks of KC
 *    coordinates (16 for float sums, 8 for double sums), transposed on the
 *    way in ([k][row]) so that the inner loop reads each thread's 8 x
 *    values and 4 y values as 16-byte vectors (broadcast along a warp for
 *    x, consecutive for y: no bank conflicts). Two shared buffers and a
 *    register prefetch: chunk c+1 is read from global memory while chunk c
 *    is summed, one barrier per chunk. Blocks stride over the tiles when
 *    there are more than a grid holds;
 *  - for float64 cosine with d >= 32: cuBLAS DGEMM for the dot products x.y
 *    (row norms by a kernel, the Gram matrix written straight into out,
 *    then an epilogue kernel takes 1 - x.y / (|x| |y|)).
 *
 * Numerics of the tiled kernel (the direct formulas: no norm expansion, so
 * no cancellation between ||x||^2 + ||y||^2 and 2 x.y):
 *  - float32 euclidean, sqeuclidean, manhattan sum in float: (a-b)^2 by one
 *    FMA per coordinate, |a-b| by one add. Every term is >= 0, so a float
 *    sum of s terms is within s*2^-24 relative; a float partial covers at
 *    most F32_SPAN = 64 coordinates and the partials of longer rows are
 *    added in double (d > 64: the LONG kernels). With the rounding of a-b,
 *    of the partials' sum and of the result: within (64+5)*2^-24 = 4.1e-6
 *    relative for any d (euclidean about half). Float's range is narrower
 *    than the double sums of the other routes, so a squared distance whose
 *    float sum lands below 2^-100 (zero included: some squares may have
 *    underflowed) or overflowed to +inf is summed again directly in double
 *    for that element (rare: duplicate rows, differences beyond about 1e19
 *    or below about 1e-30);
 *  - cosine (both dtypes) and every float64 metric sum in double, as the
 *    CPU reference does: a float32 cosine distance near 0 (nearly parallel
 *    rows) would lose all its digits to a float dot product. float32 input
 *    is converted as it enters shared memory; products of two floats are
 *    exact in double. The row norms are summed in the same kernel by the
 *    threads that stage each row.
 * Why euclidean and sqeuclidean never take the GEMM route, in either dtype
 * (issue 30): the expansion ||x||^2 + ||y||^2 - 2 x.y cancels. Its error is
 * about d u (||x||^2 + ||y||^2) absolute whatever the distance, so rows far
 * from the origin and close to each other lose most digits: 1e4 + N(0,1)
 * rows of d = 64 gave up to 3e-7 relative per element in float64 (SGEMM,
 * summing in float, would lose them all), and identical rows gave no 0.
 * Centring both sets on a common row first removes the offset only when
 * every row shares it: two far-apart clusters with small distances inside
 * each still cancel, and a zero distance still need not come out 0. The
 * direct sum has no cancellation: every term is >= 0, so it is within
 * (d + 2) u relative per element for any input whose squared differences
 * do not underflow (~sqrt(d) u in practice), a zero distance is exactly 0,
 * and it is what the CPU backend computes.
 * It costs speed: DGEMM runs on the FP64 tensor cores, the tiled kernel on
 * the FP64 units (a subtraction and an FMA per coordinate). Cosine keeps
 * the GEMM route: 1 - x.y / (|x| |y|) divides the dot product by the
 * norms, so a GEMM's dot product (within d u |x| |y|) is as good as the
 * direct one, and the tiled kernel computes the same formula.
 * cuBLAS is loaded at run time (cublas_dl.h): when it is not available
 * (no toolkit libraries, GPUQ_NO_CUBLAS=1) or a test turned GEMM off on the
 * ctx, float64 cosine takes the tiled kernel for every d.
 * Chebyshev (max |a - b|) and minkowski (sum of |a - b|^p, then the root:
 * metric_math.h, the CPU reference's terms) sum in double for both dtypes,
 * as cosine: chebyshev is then bit for bit the CPU reference's value, and
 * minkowski within gpuq_kernels.h's bound (pow's terms in double; its sums
 * run in another order than the CPU's lanes).
 * Cosine with a zero vector sets the flag ZERO when zero_ok (the on_zero
 * mode) is 0, else gives 1.0 (GPUQ_K_ON_ZERO_ZERO) or NaN (_NAN).
 * NaN and Inf propagate as in the CPU reference.
 *
 * Row ranges: rows [r0, r0 + nr) of the result are gpuq_cuda_pairwise on
 * x + r0*d, m = nr, out + r0*n. Every element of the tiled route depends
 * only on its two rows (coordinates summed in order, partials split at the
 * same coordinates, norms summed in the same order whatever the row's place
 * in a tile), so a range gives the same bits as the full call. The tiled
 * route allocates nothing and synchronizes nothing: one launch on the ctx's
 * stream. (The cosine GEMM route takes ctx scratch for the norms, grown
 * only when a call needs more, and cuBLAS may pick another algorithm for
 * another m.)
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "cublas_dl.h"
#include "cuda_check.h"
#include "metric_math.h"

namespace
{

constexpr int BM = 128;       /* block tile: rows of x */
constexpr int BN = 64;        /* block tile: rows of y */
constexpr int TM = 8;         /* per thread: rows of x */
constexpr int TN = 4;         /* per thread: rows of y */
constexpr int NTHREADS = 256; /* 16 x 16: ty picks the x rows, tx the y rows */
constexpr int F32_SPAN = 64;  /* float32: coordinates per float partial sum */
constexpr unsigned MAX_GRID = 1u << 30;

static_assert((BM / TM) * (BN / TN) == NTHREADS, "one micro-tile per thread");
static_assert(BM / TM == 16 && BN / TN == 16, "tid = 16 ty + tx");

/* Per sum type C: KC coordinates per shared chunk, VB elements per 16-byte
 * shared read (and the row padding, which keeps rows 16-byte aligned). */
template <typename C> struct chunk_of;
template <> struct chunk_of<float> {
    static constexpr int KC = 16, VB = 4;
};
template <> struct chunk_of<double> {
    static constexpr int KC = 8, VB = 2;
};

static_assert(F32_SPAN % chunk_of<float>::KC == 0, "partials end on chunk ends");

template <typename T, int N> struct alignas(sizeof(T) * N) vec_t {
    T v[N];
};

template <typename C, bool NORMS> struct pw_smem {
    C xs[2][chunk_of<C>::KC][BM + chunk_of<C>::VB];
    C ys[2][chunk_of<C>::KC][BN + chunk_of<C>::VB];
    double nx[NORMS ? BM : 1], ny[NORMS ? BN : 1]; /* cosine: row norms, prepared */
};

/* One tile's rows of x (ROWS = BM) or y (BN) from global memory into
 * registers, then transposed into shared memory. Thread tid holds E
 * coordinates of row tid / TPR: vectors of V at ((tid % TPR) + g TPR) V, so
 * that the TPR threads of a row read it contiguously. */
template <typename T, typename C, int ROWS> struct stager {
    static constexpr int KC = chunk_of<C>::KC;
    static constexpr int E = ROWS * KC / NTHREADS;
    static constexpr int TPR = KC / E;
    static constexpr int V = (int)(16 / sizeof(T)) < E ? (int)(16 / sizeof(T)) : E;
    static constexpr int NV = E / V;
    static_assert(E * NTHREADS == ROWS * KC && NV * V == E && 32 % TPR == 0, "stager shape");

    T r[E];
    double nrm; /* cosine: this thread's part of its row's sum of squares */

    /* Coordinates [k0, k0 + KC) of rows row0.. (zeros past m or d: they add
     * nothing to any metric's sums). vec: d is a multiple of 16 / sizeof(T)
     * and base 16-byte aligned, so a vector is wholly inside or outside. */
    __device__ __forceinline__ void load(const T *__restrict__ base, uint64_t rows, uint64_t d,
                                         uint64_t row0, uint64_t k0, int vec, unsigned tid)
    {
        const uint64_t row = row0 + tid / TPR;
        const bool in = row < rows;
        const T *p = base + (in ? row * d : 0);
#pragma unroll
        for (int g = 0; g < NV; g++) {
            const uint64_t k = k0 + (uint64_t)(((int)(tid % TPR) + g * TPR) * V);
            if (vec) {
                vec_t<T, V> w;
                if (in && k < d) {
                    w = *reinterpret_cast<const vec_t<T, V> *>(p + k);
                } else {
#pragma unroll
                    for (int e = 0; e < V; e++)
                        w.v[e] = T(0);
                }
#pragma unroll
                for (int e = 0; e < V; e++)
                    r[g * V + e] = w.v[e];
            } else {
#pragma unroll
                for (int e = 0; e < V; e++)
                    r[g * V + e] = (in && k + e < d) ? p[k + e] : T(0);
            }
        }
    }

    template <bool NORMS>
    __device__ __forceinline__ void store(C (*s)[ROWS + chunk_of<C>::VB], unsigned tid)
    {
#pragma unroll
        for (int g = 0; g < NV; g++)
#pragma unroll
            for (int e = 0; e < V; e++) {
                const C v = (C)r[g * V + e];
                s[((int)(tid % TPR) + g * TPR) * V + e][tid / TPR] = v;
                if (NORMS)
                    nrm = fma((double)v, (double)v, nrm);
            }
    }

    /* The row's norm, summed over its TPR threads (same order for every
     * row); valid in every thread of the group. */
    __device__ __forceinline__ double row_norm() const
    {
        double s = nrm;
#pragma unroll
        for (int o = TPR / 2; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        return s;
    }
};

/* One coordinate of one output (pw: minkowski's p). */
template <typename C, int METRIC>
__device__ __forceinline__ void pw_term(C &acc, C a, C b, double pw)
{
    if (METRIC == GPUQ_K_COSINE) {
        acc = fma(a, b, acc);
    } else if (METRIC == GPUQ_K_CHEBYSHEV) {
        acc = mm_max(acc, fabs(a - b));
    } else if (METRIC == GPUQ_K_MINKOWSKI) {
        acc += mm_term(fabs(a - b), pw);
    } else if (METRIC == GPUQ_K_MANHATTAN) {
        acc += fabs(a - b);
    } else {
        const C t = a - b;
        acc = fma(t, t, acc);
    }
}

/* Σ (x_k - y_k)² of two float32 rows in double, in order: the fallback for
 * a float sum that left float's comfortable range. */
__device__ __noinline__ double pw_direct_sq(const float *__restrict__ x,
                                            const float *__restrict__ y, uint64_t d)
{
    double s = 0.0;
    for (uint64_t k = 0; k < d; k++) {
        const double t = (double)x[k] - (double)y[k];
        s = fma(t, t, s);
    }
    return s;
}

/* A float32 euclidean/sqeuclidean/manhattan distance from its float sum v
 * (rows xr, yr for the fallback). */
template <int METRIC>
__device__ __forceinline__ float pw_finish_f32(float v, const float *xr, const float *yr,
                                               uint64_t d)
{
    if (METRIC == GPUQ_K_MANHATTAN)
        return v;
    /* NaN fails both tests and stays NaN. */
    if (v < 0x1p-100f || v == INFINITY) {
        const double s = pw_direct_sq(xr, yr, d);
        return METRIC == GPUQ_K_EUCLIDEAN ? (float)sqrt(s) : (float)s;
    }
    return METRIC == GPUQ_K_EUCLIDEAN ? sqrtf(v) : v;
}

/* C: the sum type (float only for float32 euclidean/sqeuclidean/manhattan).
 * LONG (C = float, d > F32_SPAN): float partials of F32_SPAN coordinates
 * added into double sums. */
template <typename T, typename C, int METRIC, bool LONG>
__global__ void __launch_bounds__(NTHREADS)
    pair_tile_kernel(const T *__restrict__ x, const T *__restrict__ y, uint64_t m, uint64_t n,
                     uint64_t d, double pw, int zero_ok, int vec, int ovec, T *__restrict__ out,
                     int *flag, const int *gate)
{
    constexpr int KC = chunk_of<C>::KC, VB = chunk_of<C>::VB;
    constexpr int NG = TN / VB; /* a thread's y rows: NG groups of VB */
    constexpr int GS = BN / NG; /* group g starts at g GS + tx VB */
    constexpr bool NORMS = METRIC == GPUQ_K_COSINE;
    static_assert(std::is_same<C, double>::value || std::is_same<T, float>::value,
                  "float sums only for float32");
    static_assert(!LONG || std::is_same<C, float>::value, "LONG splits float sums");
    typedef vec_t<C, VB> cvec;

    __shared__ pw_smem<C, NORMS> sm;
    __shared__ int stop; /* the gate as thread 0 read it for this tile */
    const unsigned tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const uint64_t tiles_n = n / BN + (n % BN != 0);
    const uint64_t tiles = (m / BM + (m % BM != 0)) * tiles_n;
    const uint64_t nchunks = d / KC + (d % KC != 0);

    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint64_t row0 = tile / tiles_n * BM, col0 = tile % tiles_n * BN;
        stager<T, C, BM> sx;
        stager<T, C, BN> sy;
        sx.nrm = 0.0;
        sy.nrm = 0.0;
        C acc[TM][TN];
        double sum[LONG ? TM : 1][LONG ? TN : 1];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) {
                acc[i][j] = C(0);
                if (LONG)
                    sum[LONG ? i : 0][LONG ? j : 0] = 0.0;
            }

        sx.load(x, m, d, row0, 0, vec, tid);
        sy.load(y, n, d, col0, 0, vec, tid);
        sx.template store<NORMS>(sm.xs[0], tid);
        sy.template store<NORMS>(sm.ys[0], tid);
        /* The gate (gpuq_cuda_ctx_set_gate, gpuq_gate_check): thread 0
         * asks while the first chunk's loads are in flight, the block
         * decides after the barrier (every thread reads the same value:
         * the next store is after this tile's later barriers). */
        if (tid == 0)
            stop = gpuq_gate_check(gate, flag, tile);
        __syncthreads();
        if (stop)
            return;
        for (uint64_t c = 0; c < nchunks; c++) {
            const int s = (int)(c & 1);
            const bool more = c + 1 < nchunks;
            if (more) { /* in flight while chunk c is summed */
                sx.load(x, m, d, row0, (c + 1) * KC, vec, tid);
                sy.load(y, n, d, col0, (c + 1) * KC, vec, tid);
            }
#pragma unroll
            for (int k = 0; k < KC; k++) {
                C a[TM], b[TN];
#pragma unroll
                for (int v = 0; v < TM / VB; v++) {
                    const cvec w = *reinterpret_cast<const cvec *>(&sm.xs[s][k][ty * TM + v * VB]);
#pragma unroll
                    for (int e = 0; e < VB; e++)
                        a[v * VB + e] = w.v[e];
                }
#pragma unroll
                for (int g = 0; g < NG; g++) {
                    const cvec w = *reinterpret_cast<const cvec *>(&sm.ys[s][k][g * GS + tx * VB]);
#pragma unroll
                    for (int e = 0; e < VB; e++)
                        b[g * VB + e] = w.v[e];
                }
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++)
                        pw_term<C, METRIC>(acc[i][j], a[i], b[j], pw);
            }
            if (LONG && (c + 1) % (F32_SPAN / KC) == 0) {
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++) {
                        sum[LONG ? i : 0][LONG ? j : 0] += (double)acc[i][j];
                        acc[i][j] = C(0);
                    }
            }
            if (more) {
                sx.template store<NORMS>(sm.xs[s ^ 1], tid);
                sy.template store<NORMS>(sm.ys[s ^ 1], tid);
            }
            __syncthreads();
        }

        if (NORMS) {
            /* float32 output: reciprocals (two multiplies per element
             * instead of a division; +inf marks a zero row); float64: the
             * norms, for the CPU reference's own formula. */
            const double nxs = sqrt(sx.row_norm()), nys = sqrt(sy.row_norm());
            const bool f32 = std::is_same<T, float>::value;
            if (tid % stager<T, C, BM>::TPR == 0)
                sm.nx[NORMS ? tid / stager<T, C, BM>::TPR : 0] = f32 ? 1.0 / nxs : nxs;
            if (tid % stager<T, C, BN>::TPR == 0)
                sm.ny[NORMS ? tid / stager<T, C, BN>::TPR : 0] = f32 ? 1.0 / nys : nys;
            __syncthreads();
        }

#pragma unroll
        for (int i = 0; i < TM; i++) {
            const uint64_t gi = row0 + (uint64_t)(ty * TM + i);
            if (gi >= m)
                break;
#pragma unroll
            for (int g = 0; g < NG; g++) {
                const int lj = g * GS + (int)tx * VB;
                const uint64_t gj = col0 + (uint64_t)lj;
                if (gj >= n)
                    continue;
                vec_t<T, VB> r;
#pragma unroll
                for (int e = 0; e < VB; e++) {
                    const C a = acc[i][g * VB + e];
                    T v = T(0);
                    if (gj + e >= n) { /* a padding row of y: nothing to read or flag */
                    } else if constexpr (NORMS) {
                        const double px = sm.nx[ty * TM + i], py = sm.ny[lj + e];
                        if (std::is_same<T, float>::value ? (px == INFINITY || py == INFINITY)
                                                          : (px == 0.0 || py == 0.0)) {
                            if (!zero_ok)
                                gpuq_set_flag(flag, GPUQ_FLAG_ZERO);
                            v = zero_ok == GPUQ_K_ON_ZERO_NAN ? T(NAN) : T(1);
                        } else if (std::is_same<T, float>::value) {
                            v = (T)(1.0 - (double)a * px * py);
                        } else {
                            v = (T)(1.0 - (double)a / (px * py));
                        }
                    } else if constexpr (std::is_same<C, float>::value) {
                        float f = a;
                        if (LONG)
                            f = (float)(sum[LONG ? i : 0][LONG ? g * VB + e : 0] + (double)a);
                        v = pw_finish_f32<METRIC>(f, (const float *)x + gi * d,
                                                  (const float *)y + (gj + e) * d, d);
                    } else if (METRIC == GPUQ_K_MINKOWSKI) {
                        v = (T)mm_root((double)a, pw);
                    } else {
                        v = METRIC == GPUQ_K_EUCLIDEAN ? (T)sqrt((double)a) : (T)a;
                    }
                    r.v[e] = v;
                }
                T *o = out + gi * n + gj;
                if (ovec) {
                    *reinterpret_cast<vec_t<T, VB> *>(o) = r;
                } else {
#pragma unroll
                    for (int e = 0; e < VB; e++)
                        if (gj + e < n)
                            o[e] = r.v[e];
                }
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

/* out holds the Gram matrix x.y; turn it into distances in place. Only
 * cosine comes here (f64_gemm_metric); the squared metrics' branch stays so
 * that the route rule alone decides, and restoring the old rule (the
 * mutation cuda-pairwise-f64-gemm-squared) gives the old numbers for the
 * accuracy tests to catch. */
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
                r = zero_ok == GPUQ_K_ON_ZERO_NAN ? NAN : 1.0;
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

template <typename T, typename C, int METRIC, bool LONG>
int launch_tile(gpuq_cuda_ctx *ctx, const T *x, const T *y, uint64_t m, uint64_t n, uint64_t d,
                int zero_ok, T *out, double pw = 0.0)
{
    constexpr unsigned VB = chunk_of<C>::VB;
    const uint64_t tiles = (m / BM + (m % BM != 0)) * (n / BN + (n % BN != 0));
    const unsigned grid = (unsigned)(tiles < MAX_GRID ? tiles : MAX_GRID);
    /* 16-byte loads need every row 16-byte aligned (a row range of odd d
     * is not); 16-byte stores of VB results need n a multiple of VB. */
    const int vec = d % (16 / sizeof(T)) == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)y % 16 == 0;
    const int ovec = n % VB == 0 && (uintptr_t)out % (VB * sizeof(T)) == 0;
    pair_tile_kernel<T, C, METRIC, LONG><<<grid, NTHREADS, 0, ctx->stream>>>(
        x, y, m, n, d, pw, zero_ok, vec, ovec, out, ctx->d_flag, ctx->gate);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

/* float32: float sums (split every F32_SPAN coordinates when d is longer),
 * cosine in double. */
template <int METRIC>
int tile_f32_float(gpuq_cuda_ctx *ctx, const float *x, const float *y, uint64_t m, uint64_t n,
                   uint64_t d, int zero_ok, float *out)
{
    if (d > F32_SPAN)
        return launch_tile<float, float, METRIC, true>(ctx, x, y, m, n, d, zero_ok, out);
    return launch_tile<float, float, METRIC, false>(ctx, x, y, m, n, d, zero_ok, out);
}

/* Chebyshev and minkowski sum in double in both dtypes (as cosine): the
 * max is then exactly the CPU reference's, and pow's terms keep double's
 * digits. */
int tile_f32(gpuq_cuda_ctx *ctx, int metric, double pw, int zero_ok, const float *x, const float *y,
             uint64_t m, uint64_t n, uint64_t d, float *out)
{
    switch (metric) {
    case GPUQ_K_CHEBYSHEV:
        return launch_tile<float, double, GPUQ_K_CHEBYSHEV, false>(ctx, x, y, m, n, d, zero_ok,
                                                                   out);
    case GPUQ_K_MINKOWSKI:
        return launch_tile<float, double, GPUQ_K_MINKOWSKI, false>(ctx, x, y, m, n, d, zero_ok, out,
                                                                   pw);
    case GPUQ_K_EUCLIDEAN:
        return tile_f32_float<GPUQ_K_EUCLIDEAN>(ctx, x, y, m, n, d, zero_ok, out);
    case GPUQ_K_SQEUCLIDEAN:
        return tile_f32_float<GPUQ_K_SQEUCLIDEAN>(ctx, x, y, m, n, d, zero_ok, out);
    case GPUQ_K_COSINE:
        return launch_tile<float, double, GPUQ_K_COSINE, false>(ctx, x, y, m, n, d, zero_ok, out);
    case GPUQ_K_MANHATTAN:
        return tile_f32_float<GPUQ_K_MANHATTAN>(ctx, x, y, m, n, d, zero_ok, out);
    default:
        return GPUQ_K_E_ARG;
    }
}

int tile_f64(gpuq_cuda_ctx *ctx, int metric, double pw, int zero_ok, const double *x,
             const double *y, uint64_t m, uint64_t n, uint64_t d, double *out)
{
    switch (metric) {
    case GPUQ_K_CHEBYSHEV:
        return launch_tile<double, double, GPUQ_K_CHEBYSHEV, false>(ctx, x, y, m, n, d, zero_ok,
                                                                    out);
    case GPUQ_K_MINKOWSKI:
        return launch_tile<double, double, GPUQ_K_MINKOWSKI, false>(ctx, x, y, m, n, d, zero_ok,
                                                                    out, pw);
    case GPUQ_K_EUCLIDEAN:
        return launch_tile<double, double, GPUQ_K_EUCLIDEAN, false>(ctx, x, y, m, n, d, zero_ok,
                                                                    out);
    case GPUQ_K_SQEUCLIDEAN:
        return launch_tile<double, double, GPUQ_K_SQEUCLIDEAN, false>(ctx, x, y, m, n, d, zero_ok,
                                                                      out);
    case GPUQ_K_COSINE:
        return launch_tile<double, double, GPUQ_K_COSINE, false>(ctx, x, y, m, n, d, zero_ok, out);
    case GPUQ_K_MANHATTAN:
        return launch_tile<double, double, GPUQ_K_MANHATTAN, false>(ctx, x, y, m, n, d, zero_ok,
                                                                    out);
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

/* Whether a float64 metric may take the GEMM route: cosine only, as the
 * top of this file says why (the squared metrics cancel there). */
bool f64_gemm_metric(int metric)
{
    return metric == GPUQ_K_COSINE;
}

} /* namespace */

extern "C" int gpuq_cuda_pairwise(gpuq_cuda_ctx *ctx, int dt, int metric, double p, int zero_ok,
                                  const void *d_x, const void *d_y, uint64_t m, uint64_t n,
                                  uint64_t d, void *d_out)
{
    if (!ctx || !d_x || !d_y || !d_out || m == 0 || n == 0 || d == 0 ||
        !gpuq_metric_args_ok(metric, p, zero_ok) || m > UINT64_MAX / n || m > UINT64_MAX / d ||
        n > UINT64_MAX / d)
        return GPUQ_K_E_ARG;
    metric = gpuq_metric_resolve(metric, p);
    if (dt == GPUQ_K_F32)
        return tile_f32(ctx, metric, p, zero_ok, (const float *)d_x, (const float *)d_y, m, n, d,
                        (float *)d_out);
    if (dt != GPUQ_K_F64)
        return GPUQ_K_E_ARG;
    const gpuq_cublas_api *blas;
    if (d >= 32 && f64_gemm_metric(metric) && m <= INT_MAX && n <= INT_MAX && d <= INT_MAX &&
        !ctx->no_gemm && (blas = gpuq_cublas()) != NULL)
        return gemm_f64(blas, ctx, metric, zero_ok, (const double *)d_x, (const double *)d_y, m, n,
                        d, (double *)d_out);
    return tile_f64(ctx, metric, p, zero_ok, (const double *)d_x, (const double *)d_y, m, n, d,
                    (double *)d_out);
}
