/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_kernels.c - gpuq_cuda_* against the CPU references (gpuq_cpu_*).
 *
 * Fresh random inputs every run (seed printed by testutil), outputs poisoned
 * with NaN before each call, compared element by element (a norm over the
 * array dilutes one bad element by sqrt(N)) under bounds derived from the
 * double accumulation both sides promise (tests/numtol.h; test_cpu_ref
 * holds the CPU to the same bounds against exact results): normalize on
 * mixed signs (so that l1 is not sum), pairwise on U(-1, 1), mixed signs
 * over 1e-3..1e3, 1e4 + noise and 1e-6..1e6, haversine and grid over the
 * sphere and a few km apart at negative latitudes and longitudes. Error
 * flags: zero norm, zero vector (cosine), bad latitude, normalize overflow.
 * No GPU: exit 77 (ctest: Skipped) unless GPUQ_REQUIRE_GPU=1 (then a
 * failure).
 *
 * normalize numerics, per element on every launch shape: inputs that plain
 * sums get wrong against the CPU reference, rows beyond double's and
 * float's range against their exact results, and the zscore of
 * 1000 + N(0,1) against ref_ops.py's exact reference (python and numpy, as
 * the end-to-end suites need them too).
 *
 * float64 cosine pairwise runs on both routes, GEMM (cuBLAS, loaded at run
 * time) and tiled (gpuq_cuda_ctx_use_gemm(ctx, 0)); the other metrics are
 * tiled on both. GPUQ_REQUIRE_GPU=1 also requires cuBLAS to load; under
 * GPUQ_NO_CUBLAS=1 (ctest runs the pairwise case again that way) it must
 * report itself off and both routes are tiled.
 *
 * Issue 30 item 7: euclidean and sqeuclidean pairwise and kNN on 1e4 +
 * N(0,1) rows, some of y copies of rows of x (pw_offset.h), with GEMM
 * allowed on the ctx: every element within 1e-12 relative (float64; 1e-5
 * float32) of the direct sum in long double, identical rows exactly 0; the
 * GEMM expansion (3e-7 relative there) fails it.
 */
#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"
#include "gpuq_kernels.h"
#include "numtol.h"
#include "pw_offset.h"
#include "testutil.h"

_Static_assert(NT_F32 == GPUQ_K_F32 && NT_F64 == GPUQ_K_F64 && NT_EUCLIDEAN == GPUQ_K_EUCLIDEAN &&
                   NT_SQEUCLIDEAN == GPUQ_K_SQEUCLIDEAN && NT_COSINE == GPUQ_K_COSINE &&
                   NT_MANHATTAN == GPUQ_K_MANHATTAN,
               "numtol.h numbers dtypes and metrics as gpuq_kernels.h");

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;

/* GPUQ_NO_CUBLAS as the loader reads it: set, and neither "" nor "0". */
static int no_cublas_env(void)
{
    const char *v = getenv("GPUQ_NO_CUBLAS");
    return v && *v && strcmp(v, "0") != 0;
}

static size_t esz(int dt)
{
    return dt == GPUQ_K_F32 ? 4 : 8;
}

/* Random values in [lo, hi) in dtype dt (malloc'd): float for F32, else double
 * (as esz() sizes it, so that the compiler sees no path that writes doubles
 * into the float array). */
static void *rand_array(int dt, size_t n, double lo, double hi)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    ck_assert_ptr_nonnull(d);
    tu_rand_fill_f64(d, n, lo, hi);
    if (dt != GPUQ_K_F32)
        return d;
    float *f = malloc((n ? n : 1) * sizeof *f);
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    free(d);
    return f;
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes)
        CK_UPLOAD(d, h, bytes);
    /* cudaMemcpy from pageable memory may return before the DMA lands, and
     * the legacy stream it runs on does not order g_stream (non-blocking):
     * finish it before a kernel on g_stream reads d. */
    CK(cudaDeviceSynchronize());
    return d;
}

static void *dev_out(size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes));
    CK_MEMSET(d, 0xff, bytes); /* all-ones bytes: NaN in f32 and f64 */
    /* cudaMemset is asynchronous and on the legacy stream: without this it
     * could land after the kernel on g_stream wrote the result (seen as NaN
     * results when other processes kept the GPU busy) */
    CK(cudaDeviceSynchronize());
    return d;
}

static void *host_out(int dt, size_t n)
{
    void *h = malloc(n * esz(dt));
    ck_assert_ptr_nonnull(h);
    memset(h, 0xff, n * esz(dt));
    return h;
}

static void reset_flag(void)
{
    CK(cudaMemsetAsync(gpuq_cuda_ctx_errflag(g_ctx), 0, sizeof(int), g_stream));
}

static int read_flag(void)
{
    int f = -1;
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(&f, gpuq_cuda_ctx_errflag(g_ctx), sizeof f, cudaMemcpyDeviceToHost));
    return f;
}

/* x as a new array of dt; x is rounded to dt in place. */
static void *to_dt(int dt, double *x, size_t n)
{
    void *b = malloc(n * esz(dt) + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_K_F32) {
            ((float *)b)[i] = (float)x[i];
            x[i] = ((float *)b)[i];
        } else {
            ((double *)b)[i] = x[i];
        }
    }
    return b;
}

static double *as_f64(int dt, const void *a, size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++)
        d[i] = dt == GPUQ_K_F32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
    return d;
}

static double *dalloc(size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* d_out (n values of dt) on the host as float64 (malloc'd), after the
 * stream's work. */
static double *fetch(int dt, void *d_out, size_t n)
{
    void *h = host_out(dt, n);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(h, d_out, n * esz(dt), cudaMemcpyDeviceToHost));
    double *d = as_f64(dt, h, n);
    free(h);
    return d;
}

/* Per element: got[n] against ref[n] under tol[n] (numtol.h). */
static void check_tol(int dt, const double *got, const double *ref, const double *tol, size_t n,
                      const char *what)
{
    size_t w = 0;
    double r = nt_worst(got, ref, tol, n, &w);
    ck_assert_msg(r <= 1.0,
                  "%s (%s): element %zu is %.17g, CPU %.17g: error %.3g is %.3g times the bound "
                  "%.3g",
                  what, dt == GPUQ_K_F32 ? "f32" : "f64", w, got[w], ref[w], fabs(got[w] - ref[w]),
                  r, tol[w]);
}

/* Per-element bounds of the CPU reference against the exact result (see
 * test_cpu_ref: a few ulps in float64, the final rounding in float32). The
 * GPU must stay within them of the exact result, so within twice of the
 * CPU's. */
#define ELEM_TOL64 2e-15
#define ELEM_TOL32 6.0e-8

static void check_elems(int dt, const double *got, const double *ref, size_t n, double tol,
                        const char *what)
{
    size_t w = 0;
    double err = tu_elem_err_f64(got, ref, n, &w);
    ck_assert_msg(err <= tol, "%s (%s): element %zu is %.17g, reference %.17g: rel err %g > %g",
                  what, dt == GPUQ_K_F32 ? "f32" : "f64", w, got[w], ref[w], err, tol);
}

static const int DTS[2] = {GPUQ_K_F32, GPUQ_K_F64};

/* ---- normalize ---- */

/* Per element, GPU against CPU: both within ELEM_TOL of the exact result. */
static void check_normalize_elems(int dt, void *d_out, const void *cpu, size_t n, const char *what)
{
    double *got = fetch(dt, d_out, n), *ref = as_f64(dt, cpu, n);
    check_elems(dt, got, ref, n, dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64, what);
    free(got);
    free(ref);
}

static void check_normalize(int dt, int method, uint64_t rows, uint64_t cols)
{
    size_t n = (size_t)(rows * cols);
    /* Signs mixed: l1's sum of |a| differs from sum's (a one-column row
     * that is negative gives -1 under l1, 1 under sum); zero_ok covers
     * 1-wide rows under minmax/zscore (constant rows). */
    void *in = rand_array(dt, n, -1.5, 1.5);
    void *ref = host_out(dt, n);
    ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 1, in, ref, rows, cols), 0);
    void *d_in = dev_copy(in, n * esz(dt)), *d_out = dev_out(n * esz(dt));
    reset_flag();
    ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, dt, method, 1, d_in, d_out, rows, cols), 0);
    char what[128];
    snprintf(what, sizeof what, "normalize method=%d of U(-1.5, 1.5) %llux%llu", method,
             (unsigned long long)rows, (unsigned long long)cols);
    check_normalize_elems(dt, d_out, ref, n, what);
    ck_assert_int_eq(read_flag(), 0);
    CK(cudaFree(d_in));
    CK(cudaFree(d_out));
    free(in);
    free(ref);
}

static const uint64_t SHAPES[][2] = {
    {1, 1},
    {1, 31},
    {1, 1023},
    {1, (1u << 20) + 3},
    {31, 1},
    {1023, 1},
    {(1u << 20) + 3, 1},
    {31, 1023},
    {1023, 31},
    {3, (1u << 17) + 5},
    {129, 200},
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

START_TEST(test_normalize)
{
    int dt = DTS[_i / 5], method = _i % 5;
    for (size_t s = 0; s < NSHAPES; s++)
        check_normalize(dt, method, SHAPES[s][0], SHAPES[s][1]);
}
END_TEST

START_TEST(test_normalize_1e8)
{
    /* compute-sanitizer runs these suites ~100x slower: bench/gpu_run.sh sets
     * GPUQ_SANITIZER_SMALL there, and the plain run covers 10^8. */
    if (getenv("GPUQ_SANITIZER_SMALL"))
        return;
    check_normalize(GPUQ_K_F32, GPUQ_K_SUM, 1, 100000000u);
}
END_TEST

START_TEST(test_normalize_zero)
{
    for (int d = 0; d < 2; d++) {
        int dt = DTS[d];
        uint64_t rows = 4, cols = 1000; /* row 2 all zeros (sum, l1, l2) / constant */
        void *in = rand_array(dt, rows * cols, -1.5, 1.5);
        for (uint64_t j = 0; j < cols; j++) {
            if (dt == GPUQ_K_F32)
                ((float *)in)[2 * cols + j] = 0.0f;
            else
                ((double *)in)[2 * cols + j] = 0.0;
        }
        void *d_in = dev_copy(in, rows * cols * esz(dt)), *d_out = dev_out(rows * cols * esz(dt));
        for (int method = 0; method < 5; method++) {
            reset_flag();
            ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, dt, method, 0, d_in, d_out, rows, cols), 0);
            ck_assert_int_eq(read_flag(), -GPUQ_K_E_ZERO);
            reset_flag();
            ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, dt, method, 1, d_in, d_out, rows, cols), 0);
            ck_assert_int_eq(read_flag(), 0);
            void *ref = host_out(dt, rows * cols);
            ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 1, in, ref, rows, cols), 0);
            check_normalize_elems(dt, d_out, ref, rows * cols, "zero_ok");
            free(ref);
        }
        /* A long zero row takes the multi-block path. */
        uint64_t big = (1u << 18) + 1;
        void *d_z = dev_out(big * esz(dt)), *d_o = dev_out(big * esz(dt));
        CK(cudaMemsetAsync(d_z, 0, big * esz(dt), g_stream)); /* ordered before the kernel */
        reset_flag();
        ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, dt, GPUQ_K_L2, 0, d_z, d_o, 1, big), 0);
        ck_assert_int_eq(read_flag(), -GPUQ_K_E_ZERO);
        CK(cudaFree(d_z));
        CK(cudaFree(d_o));
        CK(cudaFree(d_in));
        CK(cudaFree(d_out));
        free(in);
    }
}
END_TEST

/* ---- normalize numerics ---- */

/* GPU normalize of h_in (rows x cols of dt); returns the flag, *out the
 * result as float64 (malloc'd). */
static int gpu_normalize(int dt, int method, int zero_ok, const void *h_in, uint64_t rows,
                         uint64_t cols, double **out)
{
    size_t n = (size_t)(rows * cols);
    void *d_in = dev_copy(h_in, n * esz(dt)), *d_out = dev_out(n * esz(dt));
    reset_flag();
    ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, dt, method, zero_ok, d_in, d_out, rows, cols), 0);
    int flag = read_flag();
    void *h = host_out(dt, n);
    CK(cudaMemcpy(h, d_out, n * esz(dt), cudaMemcpyDeviceToHost));
    *out = as_f64(dt, h, n);
    free(h);
    CK(cudaFree(d_in));
    CK(cudaFree(d_out));
    return flag;
}

/* Every launch shape: warp per row, block per row, multi-block (>= 2^17). */
static const uint64_t NUM_SHAPES[][2] = {
    {1, 100}, {5, 128}, {1, 4097}, {7, 129}, {3, 4097}, {1, (1u << 17) + 5}, {2, (1u << 17) + 3},
};
#define N_NUM_SHAPES (sizeof NUM_SHAPES / sizeof NUM_SHAPES[0])

/* _i: method x dtype. Inputs plain sums get wrong (testutil's kinds: large
 * offsets, mixed signs, 1e-300..1e308, cancellation), per element against
 * the CPU reference, and the same flag. */
START_TEST(test_normalize_hard)
{
    int method = _i % 5, dt = DTS[_i / 5];
    for (size_t s = 0; s < N_NUM_SHAPES; s++) {
        uint64_t rows = NUM_SHAPES[s][0], cols = NUM_SHAPES[s][1];
        size_t n = (size_t)(rows * cols);
        if (getenv("GPUQ_SANITIZER_SMALL") && n > (1u << 18))
            continue; /* compute-sanitizer: one multi-block shape is enough */
        for (int kind = 0; kind < TU_NORM_KINDS; kind++) {
            double *x = malloc(n * sizeof *x), *got = NULL;
            ck_assert_ptr_nonnull(x);
            tu_norm_fill(kind, dt == GPUQ_K_F32, x, rows, cols);
            void *in = to_dt(dt, x, n), *cpu = host_out(dt, n);
            int rc = gpuq_cpu_normalize(dt, method, 0, in, cpu, rows, cols);
            int flag = gpu_normalize(dt, method, 0, in, rows, cols, &got);
            char what[128];
            snprintf(what, sizeof what, "normalize method=%d of %s, %llux%llu", method,
                     tu_norm_kind_names[kind], (unsigned long long)rows, (unsigned long long)cols);
            ck_assert_msg(flag == -rc, "%s: flag %d, CPU %d", what, flag, rc);
            if (rc == GPUQ_K_OK) {
                double *ref = as_f64(dt, cpu, n);
                check_elems(dt, got, ref, n, dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64,
                            what);
                free(ref);
            }
            free(x), free(in), free(cpu), free(got);
        }
    }
}
END_TEST

/* Run tests/ref/ref_ops.py with args (NULL-terminated; OUT appended) and
 * read n float64 values into out. */
static void py_ref(double *out, size_t n, const char *const *args)
{
    char dir[256], path[320];
    const char *argv[16];
    size_t k = 0, len = 0;
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ref.out", dir);
    for (; args[k] && k < 14; k++)
        argv[k] = args[k];
    argv[k++] = path;
    argv[k] = NULL;
    ck_assert_msg(tu_python("ref/ref_ops.py", argv) == 0, "ref_ops.py %s failed", args[0]);
    double *r = tu_read_file(path, &len);
    ck_assert_msg(r && len == n * sizeof(double), "ref_ops.py %s: %zu bytes", args[0], len);
    memcpy(out, r, len);
    free(r);
    tu_rmtree(dir);
}

/* The case on every launch shape: zscore of 1000 + N(0,1), numpy
 * default_rng(0), per element against the exact result (ref_ops.py
 * normalize_exact), elements next to the mean included. */
START_TEST(test_normalize_zscore_offset)
{
    const uint64_t ns[] = {100, 4097, (1u << 17) + 5};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        uint64_t n = ns[k];
        char ncols[32], dir[256], xpath[320];
        snprintf(ncols, sizeof ncols, "%llu", (unsigned long long)n);
        double *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref), *got = NULL;
        const char *gen[] = {"randn_offset", ncols, "0", "1000", NULL};
        py_ref(x, n, gen);
        for (int d = 1; d >= 0; d--) { /* f64 first: to_dt rounds x to f32 in place */
            int dt = DTS[d];
            void *in = to_dt(dt, x, n);
            ck_assert_int_eq(gpu_normalize(dt, GPUQ_K_ZSCORE, 0, in, 1, n, &got), 0);
            tu_tmpdir(dir, sizeof dir);
            snprintf(xpath, sizeof xpath, "%s/x", dir);
            ck_assert_int_eq(tu_write_file(xpath, x, n * sizeof *x), 0);
            const char *args[] = {"normalize_exact", "zscore", "1", ncols, xpath, NULL};
            py_ref(ref, n, args);
            tu_rmtree(dir);
            check_elems(dt, got, ref, n, dt == GPUQ_K_F32 ? ELEM_TOL32 : ELEM_TOL64,
                        "zscore of 1000 + N(0,1)");
            free(in), free(got);
        }
        free(x), free(ref);
    }
}
END_TEST

/* testutil's rows that leave double's or float's range, each value repeated
 * to fill a row of every launch shape: each copy's result is the short
 * row's over the repeat count (sum, l1), its square root (l2), or the same
 * (minmax, zscore). */
START_TEST(test_normalize_extremes)
{
    const tu_norm_case *c = &tu_norm_extremes[_i];
    const uint64_t widths[] = {100, 4097, (1u << 17) + 5};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        uint64_t rep = widths[w] / (uint64_t)c->n, cols = rep * (uint64_t)c->n;
        double *x = malloc(cols * sizeof *x), *got = NULL;
        for (uint64_t j = 0; j < cols; j++)
            x[j] = c->x[j % (uint64_t)c->n];
        void *in = to_dt(c->dt, x, cols);
        int flag = gpu_normalize(c->dt, c->method, 0, in, 1, cols, &got);
        ck_assert_msg(flag == 0, "case %d, %llu cols: flag %d", _i, (unsigned long long)cols, flag);
        double k = c->method == GPUQ_K_SUM || c->method == GPUQ_K_L1 ? (double)rep
                   : c->method == GPUQ_K_L2                          ? sqrt((double)rep)
                                                                     : 1.0;
        double tol = c->dt == GPUQ_K_F32 ? 0x1p-23 : 0x1p-50;
        for (uint64_t j = 0; j < cols; j++) {
            double want = c->want[j % (uint64_t)c->n] / k;
            if (c->dt == GPUQ_K_F32)
                want = tu_round_f32(want);
            ck_assert_msg(fabs(got[j] - want) <= tol * fabs(want) ||
                              fabs(got[j] - want) < 0x1p-1060,
                          "case %d, %llu cols [%llu] = %.17g, want %.17g", _i,
                          (unsigned long long)cols, (unsigned long long)j, got[j], want);
        }
        free(x), free(in), free(got);
    }
}
END_TEST

/* A sum whose result overflows the dtype, from finite input, sets the
 * OVERFLOW flag (zero_ok or not) on every launch shape; the bounded
 * methods on the same rows do not. Rows holding Inf or NaN propagate by
 * IEEE rules, no flag, the same values as the CPU. */
START_TEST(test_normalize_overflow)
{
    const uint64_t widths[] = {100, 4097, (1u << 17) + 5};
    for (int d = 0; d < 2; d++) {
        int dt = DTS[d];
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
            uint64_t cols = widths[w];
            double *x = calloc(2 * cols, sizeof *x), *got = NULL;
            for (uint64_t j = 0; j < cols; j++) /* row 0: fine for every method */
                x[j] = 1.0 + (double)(j % 97);
            x[cols] = dt == GPUQ_K_F32 ? 1e38 : 1e300; /* row 1: sum 1e-30 / 1e-300 */
            x[cols + 1] = -x[cols];
            x[cols + 2] = dt == GPUQ_K_F32 ? 1e-30 : 1e-300;
            void *in = to_dt(dt, x, 2 * cols), *cpu = host_out(dt, 2 * cols);
            for (int zero_ok = 0; zero_ok < 2; zero_ok++) {
                ck_assert_int_eq(gpu_normalize(dt, GPUQ_K_SUM, zero_ok, in, 2, cols, &got),
                                 -GPUQ_K_E_OVERFLOW);
                free(got);
            }
            for (int m = GPUQ_K_L1; m <= GPUQ_K_ZSCORE; m++) {
                int flag = gpu_normalize(dt, m, 0, in, 2, cols, &got);
                ck_assert_msg(flag == 0, "%s method %d, %llu cols: flag %d",
                              dt == GPUQ_K_F32 ? "f32" : "f64", m, (unsigned long long)cols, flag);
                ck_assert_int_eq(gpuq_cpu_normalize(dt, m, 0, in, cpu, 2, cols), GPUQ_K_OK);
                double *ref = as_f64(dt, cpu, 2 * cols);
                check_elems(dt, got, ref, 2 * cols,
                            dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64, "bounded method");
                free(ref), free(got);
            }
            /* row 1 now holds an Inf, then a NaN: no flag, as the CPU */
            const double bad[2] = {INFINITY, NAN};
            for (int b = 0; b < 2; b++) {
                x[cols + 1] = bad[b];
                free(in);
                in = to_dt(dt, x, 2 * cols);
                for (int m = GPUQ_K_SUM; m <= GPUQ_K_ZSCORE; m++) {
                    ck_assert_int_eq(gpu_normalize(dt, m, 0, in, 2, cols, &got), 0);
                    ck_assert_int_eq(gpuq_cpu_normalize(dt, m, 0, in, cpu, 2, cols), GPUQ_K_OK);
                    double *ref = as_f64(dt, cpu, 2 * cols);
                    check_elems(dt, got, ref, 2 * cols,
                                dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64,
                                b ? "row with NaN" : "row with Inf");
                    free(ref), free(got);
                }
            }
            free(x), free(in), free(cpu);
        }
    }
}
END_TEST

/* ---- haversine ---- */

static void *rand_points(int dt, size_t n)
{
    double *p = dalloc(2 * n);
    nt_points_global(p, n);
    void *r = to_dt(dt, p, 2 * n);
    free(p);
    return r;
}

/* Per element, GPU against CPU (both in double, each rounded to dt). */
static void check_hav(int dt, void *d_out, const void *cpu, size_t n, double radius,
                      const char *what)
{
    double *got = fetch(dt, d_out, n), *ref = as_f64(dt, cpu, n), *tol = dalloc(n);
    for (size_t k = 0; k < n; k++)
        tol[k] = nt_tol(dt, 2, 2, ref[k], nt_haversine_acc(ref[k], radius));
    check_tol(dt, got, ref, tol, n, what);
    free(got), free(ref), free(tol);
}

static const uint64_t NS[] = {1, 31, 1023, (1u << 20) + 3};

/* _i: dtype x kind. Kind 0: from the whole sphere to (30, 101), pairs over
 * it; kind 1: points around (NT_NEAR_LAT, NT_NEAR_LON) to it, pairs a few km
 * apart at negative latitudes and longitudes (numtol.h), where an angle
 * kept in float is off by far more than the bound. */
START_TEST(test_haversine)
{
    int dt = DTS[_i % 2], near = _i / 2;
    double lat = near ? NT_NEAR_LAT : 30.0, lon = near ? NT_NEAR_LON : 101.0;
    for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) {
        size_t n = NS[k];
        double *pt = dalloc(2 * n), *pa = dalloc(2 * n), *pb = dalloc(2 * n);
        if (near) {
            nt_points_near(pt, n);
            nt_pairs_near(pa, pb, n);
        } else {
            nt_points_global(pt, n);
            nt_points_global(pa, n);
            nt_points_global(pb, n);
        }
        void *t = to_dt(dt, pt, 2 * n), *a = to_dt(dt, pa, 2 * n), *b = to_dt(dt, pb, 2 * n);
        void *ref = host_out(dt, n);
        void *d_t = dev_copy(t, 2 * n * esz(dt)), *d_a = dev_copy(a, 2 * n * esz(dt));
        void *d_b = dev_copy(b, 2 * n * esz(dt)), *d_out = dev_out(n * esz(dt));
        ck_assert_int_eq(gpuq_cpu_haversine_to(dt, t, n, lat, lon, 6371.0088, ref), 0);
        reset_flag();
        ck_assert_int_eq(gpuq_cuda_haversine_to(g_ctx, dt, d_t, n, lat, lon, 6371.0088, d_out), 0);
        check_hav(dt, d_out, ref, n, 6371.0088,
                  near ? "haversine_to, points around (-33.875, -70.625)" : "haversine_to, global");
        ck_assert_int_eq(read_flag(), 0);
        CK(cudaMemsetAsync(d_out, 0xff, n * esz(dt), g_stream)); /* ordered before the kernel */
        ck_assert_int_eq(gpuq_cpu_haversine_pair(dt, a, b, n, 1.0, ref), 0);
        ck_assert_int_eq(gpuq_cuda_haversine_pair(g_ctx, dt, d_a, d_b, n, 1.0, d_out), 0);
        check_hav(dt, d_out, ref, n, 1.0,
                  near ? "haversine_pair, pairs a few km apart" : "haversine_pair, global");
        ck_assert_int_eq(read_flag(), 0);
        CK(cudaFree(d_t));
        CK(cudaFree(d_a));
        CK(cudaFree(d_b));
        CK(cudaFree(d_out));
        free(pt), free(pa), free(pb);
        free(t), free(a), free(b), free(ref);
    }
}
END_TEST

START_TEST(test_haversine_range)
{
    for (int d = 0; d < 2; d++) {
        int dt = DTS[d];
        const double bad[3][2] = {{91.0, 0.0}, {-90.5, 10.0}, {10.0, NAN}};
        for (int k = 0; k < 3; k++) {
            size_t n = 100;
            void *a = rand_points(dt, n);
            if (dt == GPUQ_K_F32) {
                ((float *)a)[2 * 50] = (float)bad[k][0];
                ((float *)a)[2 * 50 + 1] = (float)bad[k][1];
            } else {
                ((double *)a)[2 * 50] = bad[k][0];
                ((double *)a)[2 * 50 + 1] = bad[k][1];
            }
            void *d_a = dev_copy(a, 2 * n * esz(dt)), *d_out = dev_out(n * esz(dt));
            reset_flag();
            ck_assert_int_eq(gpuq_cuda_haversine_to(g_ctx, dt, d_a, n, 0.0, 0.0, 1.0, d_out), 0);
            ck_assert_int_eq(read_flag(), -GPUQ_K_E_RANGE);
            reset_flag();
            ck_assert_int_eq(gpuq_cuda_haversine_pair(g_ctx, dt, d_a, d_a, n, 1.0, d_out), 0);
            ck_assert_int_eq(read_flag(), -GPUQ_K_E_RANGE);
            CK(cudaFree(d_a));
            CK(cudaFree(d_out));
            free(a);
        }
        void *d_out = dev_out(16);
        ck_assert_int_eq(
            gpuq_cuda_grid(g_ctx, dt, -95.0, 0.0, 2, 0.0, 1.0, 1, 0.0, 0.0, 1.0, d_out),
            GPUQ_K_E_RANGE);
        CK(cudaFree(d_out));
    }
}
END_TEST

/* Every shape over two boxes: most of the world to (30, 101), and a box of
 * negative latitudes and longitudes around (NT_NEAR_LAT, NT_NEAR_LON), its
 * target (distances from 0 to ~20 km). */
START_TEST(test_grid)
{
    int dt = DTS[_i];
    const uint64_t g[][2] = {{1, 1}, {31, 33}, {1023, 1025}, {1, 1023}, {1023, 1}, {33, 33}};
    const struct {
        double lat0, lat1, lon0, lon1, lat, lon;
    } box[2] = {{-60.0, 75.5, -170.0, 179.0, 30.0, 101.0},
                {-34.0, -33.75, -70.75, -70.5, NT_NEAR_LAT, NT_NEAR_LON}};
    for (int bx = 0; bx < 2; bx++)
        for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
            uint64_t nlat = g[k][0], nlon = g[k][1];
            size_t n = nlat * nlon;
            void *ref = host_out(dt, n), *d_out = dev_out(n * esz(dt));
            ck_assert_int_eq(gpuq_cpu_grid(dt, box[bx].lat0, box[bx].lat1, nlat, box[bx].lon0,
                                           box[bx].lon1, nlon, box[bx].lat, box[bx].lon, 6371.0088,
                                           ref),
                             0);
            reset_flag();
            ck_assert_int_eq(gpuq_cuda_grid(g_ctx, dt, box[bx].lat0, box[bx].lat1, nlat,
                                            box[bx].lon0, box[bx].lon1, nlon, box[bx].lat,
                                            box[bx].lon, 6371.0088, d_out),
                             0);
            char what[96];
            snprintf(what, sizeof what, "grid %llux%llu %s", (unsigned long long)nlat,
                     (unsigned long long)nlon, bx ? "around (-33.875, -70.625)" : "of the world");
            check_hav(dt, d_out, ref, n, 6371.0088, what);
            ck_assert_int_eq(read_flag(), 0);
            CK(cudaFree(d_out));
            free(ref);
        }
}
END_TEST

/* ---- pairwise ---- */

static const uint64_t PW[][3] = {
    {1, 1, 1},       {31, 17, 3},    {64, 65, 31},           {100, 90, 32},
    {257, 129, 200}, {1023, 31, 64}, {(1u << 20) + 3, 2, 3}, {5, 1023, 1},
};

START_TEST(test_cublas_status)
{
    char why[512] = "";
    int ok = gpuq_cuda_gemm_status(why, sizeof why);
    printf("test_gpu_kernels: cuBLAS %s: %s\n", ok ? "loaded from" : "not available", why);
    ck_assert_int_gt((int)strlen(why), 0);
    int off = no_cublas_env();
    if (off) {
        ck_assert_int_eq(ok, 0);
        ck_assert_ptr_nonnull(strstr(why, "GPUQ_NO_CUBLAS"));
    } else if (gpu_required()) {
        ck_assert_msg(ok == 1, "GPUQ_REQUIRE_GPU=1 but cuBLAS is not available: %s", why);
    }
    /* Decided once: flipping the switch afterwards changes nothing. */
    setenv("GPUQ_NO_CUBLAS", off ? "0" : "1", 1);
    ck_assert_int_eq(gpuq_cuda_gemm_status(NULL, 0), ok);
    if (off)
        setenv("GPUQ_NO_CUBLAS", "1", 1);
    else
        unsetenv("GPUQ_NO_CUBLAS");
}
END_TEST

/* Row sums of squares of v[rows][d] (dt), for the GEMM route's bound. */
static double *row_sq(int dt, const void *v, uint64_t rows, uint64_t d)
{
    double *s = dalloc(rows);
    for (uint64_t i = 0; i < rows; i++) {
        s[i] = 0.0;
        for (uint64_t k = 0; k < d; k++) {
            double a = dt == GPUQ_K_F32 ? (double)((const float *)v)[i * d + k]
                                        : ((const double *)v)[i * d + k];
            s[i] += a * a;
        }
    }
    return s;
}

/* Whether float64 pairwise takes the GEMM route (pairwise.cu's rule: cosine
 * only, d >= 32) with GEMM allowed on the ctx. */
static int takes_gemm(int dt, int metric, uint64_t d)
{
    return dt == GPUQ_K_F64 && d >= 32 && metric == GPUQ_K_COSINE &&
           gpuq_cuda_gemm_status(NULL, 0) == 1;
}

/* Per element, GPU against CPU: the CPU sums directly in double (its bound,
 * numtol.h), the GPU too on the tiled route but for float32 euclidean,
 * sqeuclidean and manhattan, which sum in float (nt_pairwise_f32_acc); on
 * the GEMM route the GPU's error is the route's own bound, which grows
 * with the rows' norms. */
static void check_pairwise(int dt, int metric, int gemm, void *d_out, const void *cpu,
                           const void *x, const void *y, uint64_t m, uint64_t n, uint64_t d,
                           const char *what)
{
    size_t mn = (size_t)(m * n);
    double *got = fetch(dt, d_out, mn), *ref = as_f64(dt, cpu, mn), *tol = dalloc(mn);
    double *nx = gemm ? row_sq(dt, x, m, d) : NULL, *ny = gemm ? row_sq(dt, y, n, d) : NULL;
    for (size_t e = 0; e < mn; e++) {
        double acc = nt_pairwise_acc(metric, d, ref[e]);
        acc += gemm               ? nt_pairwise_gemm_acc(metric, d, ref[e], nx[e / n], ny[e % n])
               : dt == GPUQ_K_F32 ? nt_pairwise_f32_acc(metric, d, ref[e])
                                  : acc;
        tol[e] = nt_tol(dt, 2, 1, ref[e], acc);
    }
    check_tol(dt, got, ref, tol, mn, what);
    free(got), free(ref), free(tol), free(nx), free(ny);
}

/* _i 0..7: f32 and f64, each metric, default route (GEMM for f64 with
 * d >= 32 when cuBLAS is loaded); _i 8..11: f64, each metric, tiled only.
 * Every shape on each of numtol.h's kinds: U(-1, 1), mixed signs over
 * 1e-3..1e3, 1e4 + noise (cosine distances of 1e-9, a zero distance),
 * 1e-6..1e6. */
START_TEST(test_pairwise)
{
    int gemm = _i < 8;
    int dt = gemm ? DTS[_i / 4] : GPUQ_K_F64, metric = _i % 4;
    gpuq_cuda_ctx_use_gemm(g_ctx, gemm);
    for (size_t k = 0; k < sizeof PW / sizeof PW[0]; k++)
        for (int kind = 0; kind < NT_PW_KINDS; kind++) {
            uint64_t m = PW[k][0], n = PW[k][1], d = PW[k][2];
            double *hx = dalloc(m * d), *hy = dalloc(n * d);
            nt_pw_fill(kind, hx, m, hy, n, d);
            void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
            free(hx), free(hy);
            void *ref = host_out(dt, m * n);
            ck_assert_int_eq(gpuq_cpu_pairwise(dt, metric, 2.0, 0, x, y, m, n, d, ref), 0);
            void *d_x = dev_copy(x, m * d * esz(dt)), *d_y = dev_copy(y, n * d * esz(dt));
            void *d_out = dev_out(m * n * esz(dt));
            reset_flag();
            ck_assert_int_eq(
                gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, 0, d_x, d_y, m, n, d, d_out), 0);
            int route = gemm && takes_gemm(dt, metric, d);
            char what[128];
            snprintf(what, sizeof what, "pairwise%s metric=%d of %s, %llux%llux%llu",
                     gemm ? (route ? " (GEMM)" : "") : " (tiled only)", metric,
                     nt_pw_kind_name(kind), (unsigned long long)m, (unsigned long long)n,
                     (unsigned long long)d);
            check_pairwise(dt, metric, route, d_out, ref, x, y, m, n, d, what);
            ck_assert_int_eq(read_flag(), 0);
            CK(cudaFree(d_x));
            CK(cudaFree(d_y));
            CK(cudaFree(d_out));
            free(x);
            free(y);
            free(ref);
        }
}
END_TEST

/* _i 0: default routes; 1: tiled only. */
START_TEST(test_pairwise_zero)
{
    gpuq_cuda_ctx_use_gemm(g_ctx, _i == 0);
    for (int k = 0; k < 2; k++) {
        int dt = DTS[k];
        const uint64_t ds[2] = {8, 64}; /* tiled and (f64) GEMM routes */
        for (int j = 0; j < 2; j++) {
            uint64_t m = 5, n = 7, d = ds[j];
            void *x = rand_array(dt, m * d, -1.0, 1.0), *y = rand_array(dt, n * d, -1.0, 1.0);
            memset((char *)x + 2 * d * esz(dt), 0, d * esz(dt)); /* row 2 of x is zero */
            void *d_x = dev_copy(x, m * d * esz(dt)), *d_y = dev_copy(y, n * d * esz(dt));
            void *d_out = dev_out(m * n * esz(dt));
            reset_flag();
            ck_assert_int_eq(
                gpuq_cuda_pairwise(g_ctx, dt, GPUQ_K_COSINE, 2.0, 0, d_x, d_y, m, n, d, d_out), 0);
            ck_assert_int_eq(read_flag(), -GPUQ_K_E_ZERO);
            reset_flag();
            ck_assert_int_eq(
                gpuq_cuda_pairwise(g_ctx, dt, GPUQ_K_COSINE, 2.0, 1, d_x, d_y, m, n, d, d_out), 0);
            ck_assert_int_eq(read_flag(), 0);
            void *ref = host_out(dt, m * n);
            ck_assert_int_eq(gpuq_cpu_pairwise(dt, GPUQ_K_COSINE, 2.0, 1, x, y, m, n, d, ref), 0);
            check_pairwise(dt, GPUQ_K_COSINE, _i == 0 && takes_gemm(dt, GPUQ_K_COSINE, d), d_out,
                           ref, x, y, m, n, d, "cosine zero_ok");
            CK(cudaFree(d_x));
            CK(cudaFree(d_y));
            CK(cudaFree(d_out));
            free(x);
            free(y);
            free(ref);
        }
    }
}
END_TEST

/* ---- 1e4 + N(0,1) (issue 30 item 7) ---- */

/* The shape, d just past the old GEMM threshold (a partial chunk),
 * several tiles each way (neither a multiple of 128 nor of 64), and a long
 * row. */
static const uint64_t PO_SHAPES[][3] = {
    {257, 129, 64}, {129, 65, 33}, {2051, 1029, 64}, {300, 200, 1000}};
#define N_PO_SHAPES (sizeof PO_SHAPES / sizeof PO_SHAPES[0])

/* Inputs of one case: x and y as doubles rounded to dt, and on the device. */
typedef struct po_case {
    uint64_t m, n, d;
    double *x, *y;
    void *d_x, *d_y;
} po_case;

static void po_case_make(po_case *c, int dt, const uint64_t *shape)
{
    c->m = shape[0], c->n = shape[1], c->d = shape[2];
    c->x = dalloc(c->m * c->d), c->y = dalloc(c->n * c->d);
    ck_assert_uint_gt(po_fill(c->x, c->m, c->y, c->n, c->d), 0);
    void *x = to_dt(dt, c->x, c->m * c->d), *y = to_dt(dt, c->y, c->n * c->d);
    c->d_x = dev_copy(x, c->m * c->d * esz(dt));
    c->d_y = dev_copy(y, c->n * c->d * esz(dt));
    free(x), free(y);
}

static void po_case_free(po_case *c)
{
    CK(cudaFree(c->d_x));
    CK(cudaFree(c->d_y));
    free(c->x), free(c->y);
}

/* _i enumerates dtype x (euclidean, sqeuclidean) x shape. GEMM allowed on
 * the ctx (the route a daemon takes); then the same rows launched in two
 * ranges (x + r0 d, m = nr, out + r0 n, r0 odd) give the same bits. */
START_TEST(test_pairwise_offset)
{
    int dt = DTS[_i % 2], sq = (_i / 2) % 2;
    int metric = sq ? GPUQ_K_SQEUCLIDEAN : GPUQ_K_EUCLIDEAN;
    if (getenv("GPUQ_SANITIZER_SMALL") && _i / 4 > 0)
        return; /* under compute-sanitizer the first (smallest) shape does */
    po_case c;
    po_case_make(&c, dt, PO_SHAPES[_i / 4]);
    uint64_t m = c.m, n = c.n, d = c.d;
    size_t es = esz(dt);
    gpuq_cuda_ctx_use_gemm(g_ctx, 1);
    void *d_out = dev_out(m * n * es);
    reset_flag();
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, 0, c.d_x, c.d_y, m, n, d, d_out),
                     0);
    ck_assert_int_eq(read_flag(), 0);
    double *got = fetch(dt, d_out, m * n);
    char msg[512];
    size_t zeros = 0;
    int bad = po_check_pairwise(sq, dt == GPUQ_K_F64 ? PO_REL : PO_REL32, c.x, c.y, m, n, d, got,
                                &zeros, msg, sizeof msg);
    ck_assert_msg(!bad, "pairwise %s %s of 1e4 + N(0,1), %llux%llux%llu: %s",
                  dt == GPUQ_K_F32 ? "f32" : "f64", sq ? "sqeuclidean" : "euclidean",
                  (unsigned long long)m, (unsigned long long)n, (unsigned long long)d, msg);
    ck_assert_uint_gt(zeros, 0);

    uint64_t r0 = (m / 2) | 1; /* odd: rows of odd d start unaligned */
    void *d_rows = dev_out(m * n * es);
    reset_flag();
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, 0, c.d_x, c.d_y, r0, n, d, d_rows),
                     0);
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, 0,
                                        (const char *)c.d_x + r0 * d * es, c.d_y, m - r0, n, d,
                                        (char *)d_rows + r0 * n * es),
                     0);
    ck_assert_int_eq(read_flag(), 0);
    double *rows = fetch(dt, d_rows, m * n);
    ck_assert_msg(memcmp(got, rows, m * n * sizeof *got) == 0,
                  "pairwise in row ranges [0, %llu) and [%llu, %llu) differs from the whole",
                  (unsigned long long)r0, (unsigned long long)r0, (unsigned long long)m);
    CK(cudaFree(d_out));
    CK(cudaFree(d_rows));
    free(got), free(rows);
    po_case_free(&c);
}
END_TEST

/* _i enumerates dtype x (euclidean, sqeuclidean) x the first three shapes:
 * kNN, k = 7 (pw_offset.h's rules; a copied row first at exactly 0). */
START_TEST(test_knn_offset)
{
    int dt = DTS[_i % 2], sq = (_i / 2) % 2;
    int metric = sq ? GPUQ_K_SQEUCLIDEAN : GPUQ_K_EUCLIDEAN;
    if (getenv("GPUQ_SANITIZER_SMALL") && _i / 4 > 0)
        return; /* under compute-sanitizer the first (smallest) shape does */
    po_case c;
    po_case_make(&c, dt, PO_SHAPES[_i / 4]);
    uint64_t m = c.m, n = c.n, d = c.d, k = 7;
    size_t es = esz(dt);
    uint64_t sb = gpuq_cuda_knn_scratch_bytes(dt, m, n, d, k);
    ck_assert_uint_gt(sb, 0);
    void *d_scratch = NULL, *d_dist = dev_out(m * k * es), *d_idx = dev_out(m * k * 8);
    CK(cudaMalloc(&d_scratch, sb));
    reset_flag();
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, dt, metric, 2.0, 0, c.d_x, c.d_y, m, n, d, k, d_scratch,
                                   d_dist, (int64_t *)d_idx),
                     0);
    ck_assert_int_eq(read_flag(), 0);
    double *dist = fetch(dt, d_dist, m * k);
    int64_t *idx = malloc(m * k * sizeof *idx);
    ck_assert_ptr_nonnull(idx);
    CK(cudaMemcpy(idx, d_idx, m * k * sizeof *idx, cudaMemcpyDeviceToHost));
    char msg[512];
    int bad = po_check_knn(sq, dt == GPUQ_K_F64 ? PO_REL : PO_REL32, c.x, c.y, m, n, d, k, dist,
                           idx, msg, sizeof msg);
    ck_assert_msg(!bad, "knn %s %s of 1e4 + N(0,1), %llux%llux%llu: %s",
                  dt == GPUQ_K_F32 ? "f32" : "f64", sq ? "sqeuclidean" : "euclidean",
                  (unsigned long long)m, (unsigned long long)n, (unsigned long long)d, msg);
    CK(cudaFree(d_scratch));
    CK(cudaFree(d_dist));
    CK(cudaFree(d_idx));
    free(dist), free(idx);
    po_case_free(&c);
}
END_TEST

START_TEST(test_bad_args)
{
    int dummy_dev = 0;
    ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, 7, 0, 0, &dummy_dev, &dummy_dev, 1, 1),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, GPUQ_K_F32, 9, 0, &dummy_dev, &dummy_dev, 1, 1),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, GPUQ_K_F32, 9, 2.0, 0, &dummy_dev, &dummy_dev, 1, 1,
                                        1, &dummy_dev),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_error_code(cudaErrorMemoryAllocation), GPUQ_K_E_NOMEM);
    ck_assert_int_eq(gpuq_cuda_error_code(cudaErrorIllegalAddress), GPUQ_K_E_STICKY);
}
END_TEST

static Suite *gpu_suite(void)
{
    Suite *s = suite_create("gpu_kernels");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_normalize, 0, 10);
    tcase_add_test(tc, test_normalize_1e8);
    tcase_add_test(tc, test_normalize_zero);
    tcase_add_loop_test(tc, test_normalize_hard, 0, 10);
    tcase_add_test(tc, test_normalize_zscore_offset);
    tcase_add_loop_test(tc, test_normalize_extremes, 0, (int)tu_norm_n_extremes);
    tcase_add_test(tc, test_normalize_overflow);
    tcase_add_loop_test(tc, test_haversine, 0, 4);
    tcase_add_test(tc, test_haversine_range);
    tcase_add_loop_test(tc, test_grid, 0, 2);
    tcase_add_test(tc, test_bad_args);
    suite_add_tcase(s, tc);
    /* A case of its own: ctest runs it again with GPUQ_NO_CUBLAS=1. */
    tc = tcase_create("pairwise");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cublas_status);
    tcase_add_loop_test(tc, test_pairwise, 0, 12);
    tcase_add_loop_test(tc, test_pairwise_zero, 0, 2);
    tcase_add_loop_test(tc, test_pairwise_offset, 0, (int)(4 * N_PO_SHAPES));
    tcase_add_loop_test(tc, test_knn_offset, 0, 12);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int no_dev = gpu_test_no_device("test_gpu_kernels");
    if (no_dev >= 0)
        return no_dev;
    printf("test_gpu_kernels: seed %llu\n", (unsigned long long)tu_seed());
    /* One stream and ctx for the whole run; CK_FORK=no keeps them valid in
     * the tests (CUDA state does not survive fork). */
    setenv("CK_FORK", "no", 1);
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK) {
        fprintf(stderr, "test_gpu_kernels: cannot create stream/ctx\n");
        return EXIT_FAILURE;
    }
    int failed = gpu_test_run(gpu_suite());
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
