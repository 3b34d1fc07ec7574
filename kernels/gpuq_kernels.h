/* SPDX-License-Identifier: Apache-2.0 */
/* gpuq_kernels.h - the ops of gpuq behind a C API: CPU references and CUDA.
 *
 * Knows nothing of sockets, the protocol or libuv. Arrays are C-order,
 * little-endian float32 (dt = GPUQ_K_F32) or float64 (GPUQ_K_F64); results
 * accumulate in double (one exception: gpuq_cuda_pairwise's float32
 * euclidean, sqeuclidean and manhattan sum in float, within 1e-5 relative:
 * pairwise.cu). CPU functions (gpuq_cpu_*) are the reference the GPU
 * is tested against; CUDA functions (gpuq_cuda_*) take device pointers and a
 * stream, enqueue work and return without synchronizing.
 *
 * Data-dependent errors: a zero sum/norm, a constant row (minmax, zscore), a
 * zero vector under cosine -> GPUQ_K_E_ZERO when on_zero (the parameter
 * zero_ok of the normalize calls) is GPUQ_K_ON_ZERO_ERROR (0). With
 * GPUQ_K_ON_ZERO_ZERO (1) that row's output is all zeros and a cosine
 * distance involving a zero vector is 1.0; with GPUQ_K_ON_ZERO_NAN (2) both
 * are NaN (every value of the row, as scipy's cdist gives NaN for cosine;
 * numpy's x / 0 would give +-inf for a nonzero value of a zero-sum row);
 * a normalize result whose magnitude exceeds the dtype's largest finite
 * value, from a row of finite values -> GPUQ_K_E_OVERFLOW (zero_ok does not
 * change that); |lat| > 90 or a non-finite coordinate -> GPUQ_K_E_RANGE.
 * NaN/Inf values elsewhere propagate per IEEE 754 and are not errors (a row
 * whose norm is NaN yields NaNs).
 *
 * normalize's numerics (CPU and CUDA alike, see norm_math.h): compensated
 * sums, float64 input binned like LAPACK's dnrm2 so that no sum overflows or
 * underflows, zscore by the corrected two-pass algorithm with the mean kept
 * to twice double precision. A result that double and the dtype can hold
 * comes out to within a few units in the last place of the exact one.
 */
#ifndef GPUQ_KERNELS_H
#define GPUQ_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gpuq_kernel_enums.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GPUQ_K_OK = 0,
    GPUQ_K_E_ARG = -1,      /* bad dtype/method/size */
    GPUQ_K_E_ZERO = -2,     /* zero norm / constant row / zero vector */
    GPUQ_K_E_RANGE = -3,    /* latitude out of [-90, 90] or non-finite coordinate */
    GPUQ_K_E_NOMEM = -4,    /* allocation failed */
    GPUQ_K_E_CUDA = -5,     /* a CUDA error for this call; context still usable */
    GPUQ_K_E_STICKY = -6,   /* sticky CUDA error: context is lost */
    GPUQ_K_E_OVERFLOW = -7, /* normalize: a result out of the dtype's range */
    GPUQ_K_E_STOPPED = -8   /* the ctx's gate was set: kernels ended early (set_gate) */
};

/* ---- CPU references (synchronous, thread-safe, no allocation) ---- */

/* Normalize rows x cols (a 1-D array or flat: rows = 1). */
int gpuq_cpu_normalize(int dt, int method, int zero_ok, const void *in, void *out, uint64_t rows,
                       uint64_t cols);
/* The row at which gpuq_cpu_normalize with zero_ok = 0 stops: returns its
 * GPUQ_K_E_ZERO or GPUQ_K_E_OVERFLOW with *row set, or GPUQ_K_OK when every
 * row is fine (GPUQ_K_E_ARG as gpuq_cpu_normalize). Writes no output; for
 * error messages, after a backend reported the error. */
int gpuq_cpu_normalize_find(int dt, int method, const void *in, uint64_t rows, uint64_t cols,
                            uint64_t *row);
/* One long row of n values (1-D or flat) normalized in pieces, so that
 * several threads share it: piece p is values [p * piece, min(n, (p + 1) *
 * piece)). gpuq_cpu_normalize_flat_reduce on every piece of pass 0 (any
 * order, any thread, each once), then gpuq_cpu_normalize_flat_finish (one
 * thread; it merges the pieces in order, so the bits depend on piece and
 * not on the threads); when it sets *more (zscore's second pass), reduce
 * every piece again with pass 1 and finish with pass 1. Then
 * gpuq_cpu_normalize_flat_scale on any ranges (each value once). scratch
 * holds gpuq_cpu_normalize_flat_scratch_bytes(n, piece) bytes (malloc's
 * alignment; 0: bad sizes). finish returns GPUQ_K_E_ZERO for a zero row
 * unless zero_ok; scale GPUQ_K_E_OVERFLOW as gpuq_cpu_normalize. Results
 * agree with gpuq_cpu_normalize's to within its documented error (minmax
 * exactly): the same rules, the sums merged in another order. */
uint64_t gpuq_cpu_normalize_flat_scratch_bytes(uint64_t n, uint64_t piece);
int gpuq_cpu_normalize_flat_reduce(int dt, int method, int pass, const void *in, uint64_t n,
                                   uint64_t piece, uint64_t p, void *scratch);
int gpuq_cpu_normalize_flat_finish(int dt, int method, int zero_ok, int pass, uint64_t n,
                                   uint64_t piece, void *scratch, int *more);
int gpuq_cpu_normalize_flat_scale(int dt, const void *in, void *out, uint64_t n, uint64_t v0,
                                  uint64_t nv, const void *scratch);
/* Haversine from pts[n][2] (lat, lon degrees) to (lat, lon): out[n]. */
int gpuq_cpu_haversine_to(int dt, const void *pts, uint64_t n, double lat, double lon,
                          double radius, void *out);
/* Haversine between a[i] and b[i]: out[n]. */
int gpuq_cpu_haversine_pair(int dt, const void *a, const void *b, uint64_t n, double radius,
                            void *out);
/* Grid: lat_i = linspace(lat0, lat1, nlat), lon_j = linspace(lon0, lon1, nlon)
 * (inclusive ends, numpy.linspace formula lo + i*(hi-lo)/(n-1); n == 1 gives lo);
 * out[nlat][nlon] = distance((lat_i, lon_j), (lat, lon)). */
int gpuq_cpu_grid(int dt, double lat0, double lat1, uint64_t nlat, double lon0, double lon1,
                  uint64_t nlon, double lat, double lon, double radius, void *out);
/* Whether metric, its parameter p and the on_zero mode are valid: a
 * GPUQ_K_* metric, on_zero a GPUQ_K_ON_ZERO_* mode, and for minkowski
 * p > 0, scipy's range (NaN is not; +inf is, and means chebyshev, as in
 * scipy). p is read by minkowski alone. */
static inline int gpuq_metric_args_ok(int metric, double p, int on_zero)
{
    return metric >= GPUQ_K_EUCLIDEAN && metric < GPUQ_K_METRIC_COUNT && on_zero >= 0 &&
           on_zero < GPUQ_K_ON_ZERO_COUNT && (metric != GPUQ_K_MINKOWSKI || p > 0.0);
}
/* minkowski with p = +inf is chebyshev; every other metric is itself. */
static inline int gpuq_metric_resolve(int metric, double p)
{
    return metric == GPUQ_K_MINKOWSKI && p > 1.7976931348623157e308 ? GPUQ_K_CHEBYSHEV : metric;
}
/* Pairwise x[m][d] vs y[n][d] -> out[m][n] (scipy cdist definitions;
 * minkowski with exponent p, see gpuq_metric_args_ok). Minkowski sums
 * |x_k - y_k|^p (pow) in double and takes the p-th root by metric_math.h's
 * mm_root: within ((d + 2) / p + 7) u relative of the exact value (u =
 * 2^-53: the difference's rounding raised to p, p u, each pow within 2 u,
 * the d - 1 adds of terms >= 0, all divided by p in the root, which adds
 * 6 + 1 / p units), then the rounding to the dtype, while the sum and the
 * result stay inside double's normal range (a term or sum that overflows
 * gives +inf, terms below about 1e-308 underflow toward 0, as scipy's do;
 * scipy's own root, pow(s, 1 / p), adds up to |ln s| / p units more). p = 1
 * gives manhattan's sums exactly and p = 2 euclidean's (t itself, t * t,
 * sqrt). Chebyshev is exact (then rounded to the dtype); a NaN coordinate
 * makes it NaN (numpy's max(abs(x - y)); scipy's cdist loop skips NaN
 * coordinates). GPUQ_K_E_ARG on bad arguments. */
int gpuq_cpu_pairwise(int dt, int metric, double p, int on_zero, const void *x, const void *y,
                      uint64_t m, uint64_t n, uint64_t d, void *out);

/* ---- kNN (knn_ref.c, knn_plan.c, knn.cu) ----
 * For each row of x[m][d], the k nearest rows of y[n][d] under a pairwise
 * metric (the same distances, rounded to the dtype, as gpuq_cpu_pairwise,
 * and its on_zero rule; a NaN of on_zero "nan" sorts as any NaN: last):
 * out_dist[m][k] (dtype dt) and out_idx[m][k],
 * nearest first. The order is by (distance as returned, index): exactly
 * equal distances come out lower index first, NaN distances last (among
 * themselves by index). 1 <= k <= min(n, GPUQ_KNN_K_LIMIT), else
 * GPUQ_K_E_ARG. gpuq_cpu_knn allocates O(k + 1024) per call (GPUQ_K_E_NOMEM
 * when that fails); a cosine zero vector with on_zero 0 -> GPUQ_K_E_ZERO.
 * GPUQ_KNN_K_MAX is the largest k of the CUDA select kernel (shared-memory
 * lists); a larger k takes the sort path (knn_plan.h), same results. */
#define GPUQ_KNN_K_MAX 1024
#define GPUQ_KNN_K_LIMIT ((uint64_t)1 << 29)
int gpuq_cpu_knn(int dt, int metric, double p, int on_zero, const void *x, const void *y,
                 uint64_t m, uint64_t n, uint64_t d, uint64_t k, void *out_dist, int64_t *out_idx);
/* Device scratch bytes gpuq_cuda_knn needs for these sizes (the caller
 * allocates it from its pool, so it counts against the device memory
 * limit); 0 when the sizes are invalid. At most 128 MiB whatever m and n
 * for k <= GPUQ_KNN_K_MAX; for a larger k about 128 MiB + 1 MiB, more only
 * when one query row's lists need it (k of about 3M and more: 32 bytes per
 * entry of k + max(k, 65536)) (knn_plan.h). Plain C: callable without CUDA. */
uint64_t gpuq_cuda_knn_scratch_bytes(int dt, uint64_t m, uint64_t n, uint64_t d, uint64_t k);

/* One request of a batched normalize (gpuq_cuda_normalize_batch). Plain C,
 * so that a scheduler can plan batches without CUDA. */
typedef struct gpuq_norm_item {
    const void *in;          /* rows * cols values of dt, aligned to dt, device-addressable:
                                device memory, or pinned / registered host memory at its host
                                pointer (zero-copy); may be out (in place) */
    void *out;               /* the same, rows * cols values; no overlap with other items' */
    int *flag;               /* the item's error flag is STORED here when its blocks end: 0, or
                                the positive code gpuq_cuda_ctx_errflag's flag would hold
                                (-GPUQ_K_E_ZERO, -GPUQ_K_E_OVERFLOW); device-addressable,
                                typically pinned host memory */
    uint64_t rows, cols;     /* rows >= 1, 1 <= cols < GPUQ_NORM_BATCH_MAX_COLS */
    int dt, method, zero_ok; /* as gpuq_cuda_normalize's (zero_ok: a GPUQ_K_ON_ZERO_* mode) */
} gpuq_norm_item;
#define GPUQ_NORM_BATCH_MAX 128 /* items per launch */
#define GPUQ_NORM_BATCH_MAX_COLS (1u << 17)

/* ---- CUDA (only when built with CUDA; GPUQ_HAVE_CUDA defined) ---- */
#ifdef GPUQ_HAVE_CUDA
#include <cuda_runtime_api.h>

/* Where the kernels' error lines go (a failed CUDA or cuBLAS call, with its
 * file:line): level is a syslog priority (GPUQ_K_LOG_*), line has no
 * newline. The host program sets it once at start-up (gpuqd: its logger);
 * without one the lines are dropped. Not thread-safe to change while
 * kernels are launched. */
enum { GPUQ_K_LOG_ERROR = 3, GPUQ_K_LOG_WARN = 4 };
typedef void (*gpuq_kernels_log_fn)(int level, const char *line);
void gpuq_kernels_set_log(gpuq_kernels_log_fn fn);

/* Per-stream scratch the kernels need (error flag, partial sums, cuBLAS
 * handle). Created once per session, destroyed after its last completion. */
typedef struct gpuq_cuda_ctx gpuq_cuda_ctx;
int gpuq_cuda_ctx_create(cudaStream_t stream, gpuq_cuda_ctx **out);
void gpuq_cuda_ctx_destroy(gpuq_cuda_ctx *ctx);
/* The stream ctx was created on (borrowed), for an op that enqueues a copy
 * after its kernels. */
cudaStream_t gpuq_cuda_ctx_stream(gpuq_cuda_ctx *ctx);
/* Copy bytes device to device on ctx's stream (put and get of resident
 * arrays). Returns a GPUQ_K_* code. */
int gpuq_cuda_copy(gpuq_cuda_ctx *ctx, void *d_dst, const void *d_src, size_t bytes);
/* One piece of a gathered or scattered copy (gpuq_cuda_copy_items): bytes
 * from src to dst, both device-addressable (device memory, or pinned /
 * registered host memory at its host pointer), any alignment, no overlap. */
typedef struct gpuq_copy_item {
    const void *src;
    void *dst;
    uint64_t bytes;
} gpuq_copy_item;
#define GPUQ_COPY_ITEMS_MAX 128 /* items per call: they travel as the kernel's argument */
/* Enqueue items[0..n) (1 <= n <= GPUQ_COPY_ITEMS_MAX) as one kernel launch
 * on ctx's stream, a block per item: the pieces of a cross-session row
 * batch, gathered from and scattered to the requests' host arrays without
 * a copy call each. Returns GPUQ_K_OK, GPUQ_K_E_ARG (n out of range, a
 * NULL pointer with bytes), or the launch error. */
int gpuq_cuda_copy_items(gpuq_cuda_ctx *ctx, const gpuq_copy_item *items, unsigned n);
/* Device flag the kernels set on data errors (GPUQ_K_E_ZERO/RANGE/OVERFLOW
 * as a positive int); the caller copies it back with the result and resets
 * it. */
int *gpuq_cuda_ctx_errflag(gpuq_cuda_ctx *ctx);
/* Enqueue on ctx's stream a one-thread kernel that stores the device error
 * flag into h_flag, pinned host memory the device reaches at that pointer
 * (unified addressing): the flag's copy without a copy engine, so that a
 * zero-copy job never queues behind other streams' copies. Returns a
 * GPUQ_K_* code. */
int gpuq_cuda_ctx_flag_to_host(gpuq_cuda_ctx *ctx, int *h_flag);
/* Enqueue a one-thread kernel that clears the device error flag (the reset
 * without cudaMemsetAsync, for the same reason). Returns a GPUQ_K_* code. */
int gpuq_cuda_ctx_flag_reset(gpuq_cuda_ctx *ctx);
/* The stop gate of the launches that follow on ctx (NULL: none, the
 * default): an int in pinned host memory the device reaches at that
 * pointer, which the host sets to nonzero once their work is no longer
 * wanted. The long kernels (pairwise's tiled route, kNN's distance tiles
 * and its top-k merge, the test sleep) check at the start of each tile
 * (block): one tile in 256 reads the gate with a system-scope load, and on
 * finding it set writes -GPUQ_K_E_STOPPED into the ctx's error flag
 * (unless a data error came first), which every later tile reads from
 * device memory; so they end within about 256 tiles of the store, without
 * writing the rest of their output. What they skipped is garbage: the
 * caller discards the result. The flag must be clear when the work starts
 * (reset per job, as for data errors). Not stopped: copies, cuBLAS
 * (float64 cosine's GEMM) and the kernels that move bytes at memory speed
 * (normalize, haversine, grid), which take less time than the job's
 * copies. The gate is an argument of each launch, so setting another (or
 * NULL) later does not touch launches already made. */
void gpuq_cuda_ctx_set_gate(gpuq_cuda_ctx *ctx, const int *gate);

int gpuq_cuda_normalize(gpuq_cuda_ctx *ctx, int dt, int method, int zero_ok, const void *d_in,
                        void *d_out, uint64_t rows, uint64_t cols);
int gpuq_cuda_haversine_to(gpuq_cuda_ctx *ctx, int dt, const void *d_pts, uint64_t n, double lat,
                           double lon, double radius, void *d_out);
int gpuq_cuda_haversine_pair(gpuq_cuda_ctx *ctx, int dt, const void *d_a, const void *d_b,
                             uint64_t n, double radius, void *d_out);
int gpuq_cuda_grid(gpuq_cuda_ctx *ctx, int dt, double lat0, double lat1, uint64_t nlat, double lon0,
                   double lon1, uint64_t nlon, double lat, double lon, double radius, void *d_out);
/* Rows [r0, r0 + nr) of a pairwise result: d_x + r0*d elements, m = nr,
 * d_out + r0*n elements. Outside float64 cosine's GEMM route (d >= 32,
 * cuBLAS) a range gives the same bits as the full call, allocates nothing
 * and only launches on ctx's stream (pairwise.cu). Euclidean and
 * sqeuclidean sum (x - y)^2 directly in both dtypes (never the GEMM
 * expansion, which cancels): float64 within (d + 2) u relative per
 * element, identical rows exactly 0. Chebyshev and minkowski sum in double
 * in both dtypes (chebyshev: bit for bit gpuq_cpu_pairwise's; minkowski:
 * within gpuq_cpu_pairwise's bound of the exact value, CUDA's pow being
 * within 2 units of the last place). */
int gpuq_cuda_pairwise(gpuq_cuda_ctx *ctx, int dt, int metric, double p, int on_zero,
                       const void *d_x, const void *d_y, uint64_t m, uint64_t n, uint64_t d,
                       void *d_out);

/* Rows [row0, row0 + nrows) of gpuq_cuda_grid's nlat x nlon output into
 * d_out (nrows * nlon values: d_out is row row0's start). Latitude i is
 * computed over the whole grid (linspace over nlat), so every value is bit
 * for bit the one gpuq_cuda_grid writes; for the pipelined path, which
 * downloads one range while the next is computed. */
int gpuq_cuda_grid_rows(gpuq_cuda_ctx *ctx, int dt, double lat0, double lat1, uint64_t nlat,
                        uint64_t row0, uint64_t nrows, double lon0, double lon1, uint64_t nlon,
                        double lat, double lon, double radius, void *d_out);

/* Flat normalize (one reduction over all n values: a 1-D array, or
 * "flat") in pieces, so that the reduction overlaps the upload: piece p is
 * values [p * piece, min(n, (p + 1) * piece)). In stream order on ctx:
 * gpuq_cuda_normalize_flat_reduce for every piece (any order, each once,
 * as each lands), then gpuq_cuda_normalize_flat_finish (it reads all of
 * d_in again for zscore's second pass), then gpuq_cuda_normalize_flat_scale
 * on any ranges (each value once). d_scratch holds
 * gpuq_cuda_normalize_flat_scratch_bytes(dt, n, piece) bytes (16-byte
 * aligned), the same for every call of one run. The partial sums merge as
 * gpuq_cuda_normalize's do (compensated, exact TwoSum), grouped by piece:
 * results agree with gpuq_cuda_normalize's to within its documented error
 * (sum, l1, l2, zscore; minmax exactly), and the flags are the same. 0 from
 * the size query, GPUQ_K_E_ARG from the calls, on bad sizes. */
uint64_t gpuq_cuda_normalize_flat_scratch_bytes(int dt, uint64_t n, uint64_t piece);
int gpuq_cuda_normalize_flat_reduce(gpuq_cuda_ctx *ctx, int dt, int method, const void *d_in,
                                    uint64_t n, uint64_t piece, uint64_t p, void *d_scratch);
int gpuq_cuda_normalize_flat_finish(gpuq_cuda_ctx *ctx, int dt, int method, int zero_ok,
                                    const void *d_in, uint64_t n, uint64_t piece, void *d_scratch);
int gpuq_cuda_normalize_flat_scale(gpuq_cuda_ctx *ctx, int dt, const void *d_in, void *d_out,
                                   uint64_t n, uint64_t lo, uint64_t cnt, const void *d_scratch);

/* Device bytes of the state one gpuq_cuda_normalize_batch launch needs
 * (per-item flag and block counter; 4-byte aligned). */
uint64_t gpuq_cuda_normalize_batch_state_bytes(void);
/* Enqueue items[0..n) as ONE kernel launch on ctx's stream (the small
 * normalizes of several requests, sessions even). Each item's output is bit
 * for bit what gpuq_cuda_normalize(ctx, dt, method, zero_ok, in, out, rows,
 * cols) writes, and the int stored at its flag the value that call would
 * leave in the ctx flag (starting from 0): one bad item fails alone. Item
 * i's flag is stored once all of item i's blocks are done, in stream order
 * before whatever is enqueued after this call. d_state:
 * gpuq_cuda_normalize_batch_state_bytes() device bytes, zero before its
 * first launch; every launch that runs to completion leaves it zero again,
 * so it is reused launch after launch without a memset; launches that may
 * run at the same time need distinct states (one cut short by an error
 * may leave it non-zero: zero it before reuse). Does not touch ctx's own flag. Returns GPUQ_K_OK,
 * or GPUQ_K_E_ARG before anything is enqueued (n == 0 or > GPUQ_NORM_BATCH_MAX, a NULL ctx, items
 * or d_state, a misaligned d_state, a bad item: NULL or misaligned pointers, dt or method out of
 * range, rows or cols 0, cols >= GPUQ_NORM_BATCH_MAX_COLS, rows * cols overflow, more blocks in all
 * than a launch holds: 2^31 - 1, a block per row above 128 columns, one per 8 rows up to 128), or
 * the launch error as the other calls return it. */
int gpuq_cuda_normalize_batch(gpuq_cuda_ctx *ctx, const gpuq_norm_item *items, unsigned n,
                              void *d_state);

/* cuBLAS (float64 cosine pairwise with d >= 32 as a DGEMM) is loaded at run
 * time, on the first call of this function or of a pairwise that could use it.
 * Returns 1 when it is available, with the path it was loaded from in why;
 * 0 when not, with the reason in why (float64 cosine then uses the tiled
 * kernel). GPUQ_NO_CUBLAS=1 in the environment, read once at that first
 * call, keeps it unloaded (an ops and test switch). why may be NULL. The
 * answer never changes afterwards. */
int gpuq_cuda_gemm_status(char *why, size_t cap);
/* Test hook: use_gemm = 0 makes float64 cosine pairwise on ctx take the
 * tiled kernel even when cuBLAS is available; 1 (the default) lets it use
 * GEMM. */
void gpuq_cuda_ctx_use_gemm(gpuq_cuda_ctx *ctx, int use_gemm);

/* Map a CUDA error to GPUQ_K_E_NOMEM (allocation), GPUQ_K_E_STICKY (the
 * context is lost: illegal address, launch failure, ...) or GPUQ_K_E_CUDA. */
int gpuq_cuda_error_code(cudaError_t e);
/* Test hook: enqueue a kernel that writes to an illegal address, so that the
 * context becomes unusable (device_lost tests). Returns a GPUQ_K_* code. */
int gpuq_cuda_test_fault(cudaStream_t stream);
/* Test hook: enqueue a one-thread kernel that waits ms milliseconds of the
 * GPU's clock (gpuqd's GPUQ_TEST_SLOW_MS: slow jobs for the scheduler's
 * tests), or less: it ends within about 10 us of *gate becoming nonzero
 * (gate: as gpuq_cuda_ctx_set_gate's; NULL: none). Sets no flag. Returns a
 * GPUQ_K_* code. */
int gpuq_cuda_test_sleep(cudaStream_t stream, unsigned ms, const int *gate);

/* out[cols][rows] = in[rows][cols] (dtype dt, device memory, not the same
 * buffer) on ctx's stream (transpose.cu): bits moved, nothing computed. */
int gpuq_cuda_transpose(gpuq_cuda_ctx *ctx, int dt, const void *d_in, void *d_out, uint64_t rows,
                        uint64_t cols);

/* kNN as gpuq_cpu_knn, on ctx's stream: d_scratch holds at least
 * gpuq_cuda_knn_scratch_bytes(dt, m, n, d, k) bytes, aligned as cudaMalloc
 * aligns (16 bytes at least, else GPUQ_K_E_ARG), and must not be reused
 * before the stream has finished this call. A cosine zero vector with
 * on_zero 0 sets the flag (GPUQ_K_E_ZERO); the outputs are then to be
 * discarded. */
int gpuq_cuda_knn(gpuq_cuda_ctx *ctx, int dt, int metric, double p, int on_zero, const void *d_x,
                  const void *d_y, uint64_t m, uint64_t n, uint64_t d, uint64_t k, void *d_scratch,
                  void *d_dist, int64_t *d_idx);
#endif

#ifdef __cplusplus
}
#endif
#endif
