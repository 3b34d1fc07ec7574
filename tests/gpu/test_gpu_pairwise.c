/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_pairwise.c - the tiled pairwise kernel (kernels/pairwise.cu) on
 * every edge of its tiles, against the float64 CPU reference.
 *
 * The kernel computes 128 x 64 outputs per block, in shared-memory chunks of
 * 16 (float sums) or 8 (double sums) coordinates, float32 partial sums of at
 * most 64 coordinates. m, n in {1, 7, 127, 128, 129, 300} and d in {1, 3,
 * 64, 65, 1000} put each boundary on every side of it (one row, a partial
 * tile, a full one, one past it, several; one coordinate, a partial chunk,
 * exactly one float span, one past it, many spans), for every metric,
 * float32 and float64 (GEMM off on the ctx, so float64 is tiled as well),
 * the inputs taking numtol.h's kinds in turn (U(-1, 1), mixed signs over
 * 1e-3..1e3, 1e4 + noise, 1e-6..1e6). Bounds per element (numtol.h):
 * float32 euclidean, sqeuclidean and manhattan nt_pairwise_f32_acc, at most
 * 4.2e-6 relative with both roundings, inside the route's 1e-5 promise;
 * cosine and float64 the double sum's nt_pairwise_acc, below 1e-12
 * relative for d <= 1000 (cosine: absolute, as the formula allows). The
 * error flag must stay clear: the zero rows that pad a partial tile are not
 * zero vectors.
 * Then:
 *  - row ranges: rows [r0, r0 + nr) launched as x + r0 d, m = nr, out + r0 n
 *    give exactly the full launch's bits, and so do misaligned copies of x,
 *    y and out (the kernel's scalar loads and stores);
 *  - the float span: a row [1, e, e, ...] against zeros, e^2 (e for
 *    manhattan) below half an ulp of 1, so that a float sum of more than 64
 *    terms drops every one of them (1.5e-5 relative) while 64-term partials
 *    keep all but the first span's;
 *  - float's range: differences beyond 1e19 (their squares overflow float)
 *    and below 1e-19 (theirs underflow), duplicate rows (distance 0);
 *  - NaN and Inf propagate as in the CPU reference;
 *  - cosine zero vectors on tile edges: the flag without zero_ok, 1.0 with.
 * Outputs are poisoned with NaN on the test's stream before each launch.
 * No GPU: exit 77 (ctest: Skipped) unless GPUQ_REQUIRE_GPU=1.
 */
#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"
#include "gpuq_kernels.h"
#include "numtol.h"
#include "testutil.h"

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;

static const int DTS[2] = {GPUQ_K_F32, GPUQ_K_F64};
static const char *const METRIC_NAMES[4] = {"euclidean", "sqeuclidean", "cosine", "manhattan"};

static size_t esz(int dt)
{
    return dt == GPUQ_K_F32 ? 4 : 8;
}

static double *dalloc(size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    return d;
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
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = dt == GPUQ_K_F32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
    return d;
}

/* A device copy of h (bytes) at byte offset off of a fresh allocation
 * (*base: what to free). */
static void *dev_copy_at(const void *h, size_t bytes, size_t off, void **base)
{
    char *d = NULL;
    CK(cudaMalloc((void **)&d, bytes + off + 1));
    CK_UPLOAD(d + off, h, bytes);
    /* cudaMemcpy from pageable memory may return before the DMA lands, and
     * the legacy stream does not order g_stream (non-blocking). */
    CK(cudaDeviceSynchronize());
    *base = d;
    return d + off;
}

static void poison(void *d_out, size_t bytes)
{
    CK(cudaMemsetAsync(d_out, 0xff, bytes, g_stream)); /* NaN in f32 and f64, before the kernel */
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

/* bytes of d_out on the host (malloc'd), after the stream's work. */
static void *fetch_raw(const void *d_out, size_t bytes)
{
    void *h = malloc(bytes + 1);
    ck_assert_ptr_nonnull(h);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(h, d_out, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/* The GPU result of x[m][d] vs y[n][d] (host arrays of dt) as float64
 * (malloc'd); *flag the error flag after it. */
static double *gpu_pairwise(int dt, int metric, int zero_ok, const void *x, const void *y,
                            uint64_t m, uint64_t n, uint64_t d, int *flag)
{
    void *bx, *by, *bo;
    void *d_x = dev_copy_at(x, m * d * esz(dt), 0, &bx);
    void *d_y = dev_copy_at(y, n * d * esz(dt), 0, &by);
    CK(cudaMalloc(&bo, m * n * esz(dt)));
    poison(bo, m * n * esz(dt));
    reset_flag();
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, zero_ok, d_x, d_y, m, n, d, bo), 0);
    *flag = read_flag();
    void *h = fetch_raw(bo, m * n * esz(dt));
    double *got = as_f64(dt, h, m * n);
    free(h);
    CK(cudaFree(bx));
    CK(cudaFree(by));
    CK(cudaFree(bo));
    return got;
}

/* The bound of one element of the tiled route against the CPU reference
 * (both rounded to dt): the GPU's sum (float for float32 but cosine) plus
 * the CPU's double sum. */
static double pw_tol(int dt, int metric, uint64_t d, double ref)
{
    double cpu = nt_pairwise_acc(metric, d, ref);
    double gpu = dt == GPUQ_K_F32 ? nt_pairwise_f32_acc(metric, d, ref) : cpu;
    return nt_tol(dt, 2, 1, ref, gpu + cpu);
}

/* GPU against CPU (zero_ok as given; the CPU must succeed), per element. */
static void check_vs_cpu(int dt, int metric, int zero_ok, const void *x, const void *y, uint64_t m,
                         uint64_t n, uint64_t d, int want_flag, const char *what)
{
    size_t mn = (size_t)(m * n);
    void *cpu = malloc(mn * esz(dt) + 1);
    ck_assert_ptr_nonnull(cpu);
    ck_assert_int_eq(gpuq_cpu_pairwise(dt, metric, 2.0, 1, x, y, m, n, d, cpu), GPUQ_K_OK);
    int flag = -1;
    double *got = gpu_pairwise(dt, metric, zero_ok, x, y, m, n, d, &flag);
    double *ref = as_f64(dt, cpu, mn), *tol = dalloc(mn);
    for (size_t e = 0; e < mn; e++)
        tol[e] = pw_tol(dt, metric, d, ref[e]);
    size_t w = 0;
    double r = nt_worst(got, ref, tol, mn, &w);
    ck_assert_msg(r <= 1.0,
                  "%s: %s %s %llux%llux%llu: element [%zu][%zu] is %.17g, CPU %.17g: error %.3g "
                  "is %.3g times the bound %.3g",
                  what, dt == GPUQ_K_F32 ? "f32" : "f64", METRIC_NAMES[metric],
                  (unsigned long long)m, (unsigned long long)n, (unsigned long long)d, w / n, w % n,
                  got[w], ref[w], fabs(got[w] - ref[w]), r, tol[w]);
    ck_assert_msg(flag == want_flag, "%s: %s %s %llux%llux%llu: flag %d, want %d", what,
                  dt == GPUQ_K_F32 ? "f32" : "f64", METRIC_NAMES[metric], (unsigned long long)m,
                  (unsigned long long)n, (unsigned long long)d, flag, want_flag);
    free(cpu), free(got), free(ref), free(tol);
}

/* ---- every tile edge ---- */

static const uint64_t EDGE_MN[] = {1, 7, 127, 128, 129, 300};
static const uint64_t EDGE_D[] = {1, 3, 64, 65, 1000};
#define N_EDGE_MN (sizeof EDGE_MN / sizeof EDGE_MN[0])
#define N_EDGE_D (sizeof EDGE_D / sizeof EDGE_D[0])

/* _i: dtype x metric. */
START_TEST(test_pw_edges)
{
    int dt = DTS[_i / 4], metric = _i % 4, count = 0;
    gpuq_cuda_ctx_use_gemm(g_ctx, 0);
    /* The promise the bounds stand for: 1e-5 relative (float32), 1e-12
     * (float64, d <= 1000), both roundings to the dtype included. */
    if (metric != GPUQ_K_COSINE)
        ck_assert(nt_tol(dt, 2, 0, 1.0, 0.0) + (dt == GPUQ_K_F32
                                                    ? nt_pairwise_f32_acc(metric, 1000, 1.0)
                                                    : nt_pairwise_acc(metric, 1000, 1.0)) <=
                  (dt == GPUQ_K_F32 ? 1e-5 : 1e-12));
    for (size_t a = 0; a < N_EDGE_MN; a++)
        for (size_t b = 0; b < N_EDGE_MN; b++)
            for (size_t c = 0; c < N_EDGE_D; c++) {
                uint64_t m = EDGE_MN[a], n = EDGE_MN[b], d = EDGE_D[c];
                int kind = count++ % NT_PW_KINDS;
                double *hx = dalloc(m * d), *hy = dalloc(n * d);
                nt_pw_fill(kind, hx, m, hy, n, d);
                void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
                char what[64];
                snprintf(what, sizeof what, "tile edges, %s inputs", nt_pw_kind_name(kind));
                check_vs_cpu(dt, metric, 0, x, y, m, n, d, 0, what);
                free(hx), free(hy), free(x), free(y);
            }
    gpuq_cuda_ctx_use_gemm(g_ctx, 1);
}
END_TEST

/* ---- row ranges and misaligned arrays: the same bits ---- */

static const uint64_t ROW_SHAPES[][3] = {
    {300, 129, 65}, {257, 64, 3}, {300, 7, 1000}, {129, 300, 64}, {131, 65, 1},
};
static const uint64_t ROW_SPLITS[] = {1, 7, 128, 129};

/* _i: dtype x metric. The full launch, then the same rows in ranges of nr
 * (back to back on the stream, no synchronization between them), then the
 * full launch again on copies of x, y and out one element off 16-byte
 * alignment: every byte equal. */
START_TEST(test_pw_rows)
{
    int dt = DTS[_i / 4], metric = _i % 4;
    size_t es = esz(dt);
    gpuq_cuda_ctx_use_gemm(g_ctx, 0);
    for (size_t s = 0; s < sizeof ROW_SHAPES / sizeof ROW_SHAPES[0]; s++) {
        uint64_t m = ROW_SHAPES[s][0], n = ROW_SHAPES[s][1], d = ROW_SHAPES[s][2];
        size_t ob = m * n * es;
        double *hx = dalloc(m * d), *hy = dalloc(n * d);
        nt_pw_fill((int)(s % NT_PW_KINDS), hx, m, hy, n, d);
        void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
        void *bx, *by, *bx1, *by1, *bo1;
        char *d_x = dev_copy_at(x, m * d * es, 0, &bx), *d_y = dev_copy_at(y, n * d * es, 0, &by);
        char *d_x1 = dev_copy_at(x, m * d * es, es, &bx1);
        char *d_y1 = dev_copy_at(y, n * d * es, es, &by1);
        char *d_out = NULL;
        CK(cudaMalloc((void **)&d_out, ob));
        CK(cudaMalloc(&bo1, ob + es));
        char *d_out1 = (char *)bo1 + es;
        reset_flag();
        poison(d_out, ob);
        ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, 0, d_x, d_y, m, n, d, d_out),
                         0);
        void *full = fetch_raw(d_out, ob);
        for (size_t k = 0; k < sizeof ROW_SPLITS / sizeof ROW_SPLITS[0]; k++) {
            uint64_t nr = ROW_SPLITS[k];
            poison(d_out, ob);
            for (uint64_t r0 = 0; r0 < m; r0 += nr) {
                uint64_t rows = m - r0 < nr ? m - r0 : nr;
                ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, 0, d_x + r0 * d * es,
                                                    d_y, rows, n, d, d_out + r0 * n * es),
                                 0);
            }
            void *part = fetch_raw(d_out, ob);
            ck_assert_msg(memcmp(part, full, ob) == 0,
                          "%s %s %llux%llux%llu: rows in ranges of %llu differ from the full "
                          "launch",
                          dt == GPUQ_K_F32 ? "f32" : "f64", METRIC_NAMES[metric],
                          (unsigned long long)m, (unsigned long long)n, (unsigned long long)d,
                          (unsigned long long)nr);
            free(part);
        }
        poison(d_out1, ob);
        ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, 2.0, 0, d_x1, d_y1, m, n, d, d_out1),
                         0);
        void *mis = fetch_raw(d_out1, ob);
        ck_assert_msg(memcmp(mis, full, ob) == 0,
                      "%s %s %llux%llux%llu: misaligned x, y, out differ from the aligned launch",
                      dt == GPUQ_K_F32 ? "f32" : "f64", METRIC_NAMES[metric], (unsigned long long)m,
                      (unsigned long long)n, (unsigned long long)d);
        ck_assert_int_eq(read_flag(), 0);
        /* and the full result is right */
        check_vs_cpu(dt, metric, 0, x, y, m, n, d, 0, "row-range shape");
        CK(cudaFree(bx));
        CK(cudaFree(by));
        CK(cudaFree(bx1));
        CK(cudaFree(by1));
        CK(cudaFree(d_out));
        CK(cudaFree(bo1));
        free(hx), free(hy), free(x), free(y), free(full), free(mis);
    }
    gpuq_cuda_ctx_use_gemm(g_ctx, 1);
}
END_TEST

/* ---- float32 partial sums: at most 64 terms each ---- */

/* _i: euclidean, sqeuclidean, manhattan (0, 1, 3). x rows [1, e, ..., e],
 * [e, ..., e, 1] and U(-1, 1), y rows zeros and U(-1, 1), d = 1000 and 65;
 * e^2 (manhattan: e) is 2^-26, below half an ulp of 1. */
START_TEST(test_pw_span)
{
    static const int metrics[3] = {GPUQ_K_EUCLIDEAN, GPUQ_K_SQEUCLIDEAN, GPUQ_K_MANHATTAN};
    int metric = metrics[_i];
    double e = metric == GPUQ_K_MANHATTAN ? 0x1p-26 : 0x1p-13;
    const uint64_t ds[2] = {1000, 65};
    for (int k = 0; k < 2; k++) {
        uint64_t m = 3, n = 2, d = ds[k];
        double *hx = dalloc(m * d), *hy = dalloc(n * d);
        tu_rand_fill_f64(hx, m * d, -1.0, 1.0);
        tu_rand_fill_f64(hy, n * d, -1.0, 1.0);
        for (uint64_t j = 0; j < d; j++) {
            hx[j] = j == 0 ? 1.0 : e;
            hx[d + j] = j == d - 1 ? 1.0 : e;
            hy[j] = 0.0;
        }
        void *x = to_dt(GPUQ_K_F32, hx, m * d), *y = to_dt(GPUQ_K_F32, hy, n * d);
        check_vs_cpu(GPUQ_K_F32, metric, 0, x, y, m, n, d, 0, "terms below half an ulp of 1");
        free(hx), free(hy), free(x), free(y);
    }
}
END_TEST

/* ---- float's range, duplicates ---- */

/* _i: dtype x metric. x rows scaled by 1e20, 1e-25, 1e-19, a copy of y's
 * row 0, and 1; y rows by 1, 1e20, 1e-25, 1e-19 (so every pairing of
 * scales meets), d = 10 and 70 (one float partial, then two). */
START_TEST(test_pw_range)
{
    int dt = DTS[_i / 4], metric = _i % 4;
    const double xs[5] = {1e20, 1e-25, 1e-19, 0.0, 1.0}, ys[4] = {1.0, 1e20, 1e-25, 1e-19};
    const uint64_t ds[2] = {10, 70};
    gpuq_cuda_ctx_use_gemm(g_ctx, 0);
    for (int k = 0; k < 2; k++) {
        uint64_t m = 5, n = 4, d = ds[k];
        double *hx = dalloc(m * d), *hy = dalloc(n * d);
        tu_rand_fill_f64(hx, m * d, -1.0, 1.0);
        tu_rand_fill_f64(hy, n * d, -1.0, 1.0);
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < d; j++)
                hx[i * d + j] *= xs[i];
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < d; j++)
                hy[i * d + j] *= ys[i];
        memcpy(hx + 3 * d, hy, d * sizeof *hx); /* a duplicate: distance 0 */
        void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
        check_vs_cpu(dt, metric, 0, x, y, m, n, d, 0, "rows at 1e20, 1e-25, 1e-19, a duplicate");
        free(hx), free(hy), free(x), free(y);
    }
    gpuq_cuda_ctx_use_gemm(g_ctx, 1);
}
END_TEST

/* _i: dtype x metric. A NaN in x row 129's last coordinate (the last
 * chunk), +Inf in y row 65's first, -Inf in y row 3's last; 130 x 70 rows
 * (partial tiles), d = 65 and 1000. */
START_TEST(test_pw_nan)
{
    int dt = DTS[_i / 4], metric = _i % 4;
    const uint64_t ds[2] = {65, 1000};
    gpuq_cuda_ctx_use_gemm(g_ctx, 0);
    for (int k = 0; k < 2; k++) {
        uint64_t m = 130, n = 70, d = ds[k];
        double *hx = dalloc(m * d), *hy = dalloc(n * d);
        nt_pw_fill(NT_PW_MIXED, hx, m, hy, n, d);
        hx[129 * d + d - 1] = NAN;
        hy[65 * d] = INFINITY;
        hy[3 * d + d - 1] = -INFINITY;
        void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
        check_vs_cpu(dt, metric, 0, x, y, m, n, d, 0, "NaN and Inf rows");
        free(hx), free(hy), free(x), free(y);
    }
    gpuq_cuda_ctx_use_gemm(g_ctx, 1);
}
END_TEST

/* ---- cosine zero vectors ---- */

/* _i: dtype. Zero rows of x at 0, 127, 128, 299 and of y at 63, 64, 128,
 * 300 x 129 x 65: the flag without zero_ok; with it no flag and 1.0 for
 * those pairs (the CPU's zero_ok result). */
START_TEST(test_pw_zero)
{
    int dt = DTS[_i];
    const uint64_t zx[] = {0, 127, 128, 299}, zy[] = {63, 64, 128};
    uint64_t m = 300, n = 129, d = 65;
    gpuq_cuda_ctx_use_gemm(g_ctx, 0);
    for (int z = 0; z < 2; z++) {
        double *hx = dalloc(m * d), *hy = dalloc(n * d);
        nt_pw_fill(NT_PW_UNIFORM, hx, m, hy, n, d);
        for (size_t k = 0; k < sizeof zx / sizeof zx[0]; k++)
            if (z == 0 || k == 3) /* the second round: only x row 299 */
                memset(hx + zx[k] * d, 0, d * sizeof *hx);
        for (size_t k = 0; k < sizeof zy / sizeof zy[0]; k++)
            if (z == 0)
                memset(hy + zy[k] * d, 0, d * sizeof *hy);
        void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
        int flag = -1;
        double *got = gpu_pairwise(dt, GPUQ_K_COSINE, 0, x, y, m, n, d, &flag);
        ck_assert_int_eq(flag, -GPUQ_K_E_ZERO);
        free(got);
        check_vs_cpu(dt, GPUQ_K_COSINE, 1, x, y, m, n, d, 0, "zero vectors, zero_ok");
        free(hx), free(hy), free(x), free(y);
    }
    gpuq_cuda_ctx_use_gemm(g_ctx, 1);
}
END_TEST

static Suite *pairwise_suite(void)
{
    Suite *s = suite_create("gpu_pairwise");
    TCase *tc = tcase_create("pairwise");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_pw_edges, 0, 8);
    tcase_add_loop_test(tc, test_pw_rows, 0, 8);
    tcase_add_loop_test(tc, test_pw_span, 0, 3);
    tcase_add_loop_test(tc, test_pw_range, 0, 8);
    tcase_add_loop_test(tc, test_pw_nan, 0, 8);
    tcase_add_loop_test(tc, test_pw_zero, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int no_dev = gpu_test_no_device("test_gpu_pairwise");
    if (no_dev >= 0)
        return no_dev;
    printf("test_gpu_pairwise: seed %llu\n", (unsigned long long)tu_seed());
    setenv("CK_FORK", "no", 1); /* CUDA state does not survive fork */
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK) {
        fprintf(stderr, "test_gpu_pairwise: cannot create stream/ctx\n");
        return EXIT_FAILURE;
    }
    int failed = gpu_test_run(pairwise_suite());
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
