/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_metric.c - chebyshev, minkowski and cosine's on_zero "nan" on
 * the CUDA kernels (gpuq_cuda_pairwise, gpuq_cuda_knn) against the CPU
 * reference (gpuq_cpu_pairwise, gpuq_cpu_knn; test_metric_ref checks that
 * one against scipy and the exact values).
 *
 *  - pairwise, chebyshev and minkowski p = 1, 1.5, 3, 0.5, inf, float32
 *    and float64, on shapes that match no tile (1 x 1 x 1, 129 x 65 x 17,
 *    130 x 67 x 100) and mixed signs over 1e-3..1e3: chebyshev (and p =
 *    inf) bit for bit the CPU's; minkowski within twice the bound of
 *    gpuq_kernels.h (each is within it of the exact value; the sums run in
 *    other orders), plus both roundings to the dtype;
 *  - a row range launch gives the full launch's bits;
 *  - kNN, the same metrics, both kernels (the skinny one for m <= 32 and
 *    the tiled one), a valid top-k under the CPU's float64 distances
 *    (knn_check.h);
 *  - on_zero "nan": cosine NaN for a zero vector, on the tiled kernel, the
 *    float64 GEMM route (d >= 32) and kNN (sorted last), no flag; bad p
 *    (0, negative, NaN) is GPUQ_K_E_ARG.
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
#include "knn_check.h"
#include "numtol.h"
#include "testutil.h"

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;

static const int DTS[2] = {GPUQ_K_F32, GPUQ_K_F64};
/* variant 0: chebyshev; then minkowski with PS[v - 1] */
static const double PS[5] = {1.0, 1.5, 3.0, 0.5, INFINITY};
#define N_VARIANTS 6

static int variant(int v, double *p)
{
    *p = v == 0 ? 2.0 : PS[v - 1];
    return v == 0 ? GPUQ_K_CHEBYSHEV : GPUQ_K_MINKOWSKI;
}

static size_t esz(int dt)
{
    return dt == GPUQ_K_F32 ? 4 : 8;
}

static void *to_dt(int dt, double *x, size_t n)
{
    void *b = malloc(n * esz(dt) + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_K_F32)
            x[i] = ((float *)b)[i] = (float)x[i];
        else
            ((double *)b)[i] = x[i];
    }
    return b;
}

static double at(int dt, const void *a, size_t i)
{
    return dt == GPUQ_K_F32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes + 1));
    CK_UPLOAD(d, h, bytes);
    CK(cudaDeviceSynchronize());
    return d;
}

static void *fetch(const void *d, size_t bytes)
{
    void *h = malloc(bytes + 1);
    ck_assert_ptr_nonnull(h);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static int read_flag(void)
{
    int f = -1;
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(&f, gpuq_cuda_ctx_errflag(g_ctx), sizeof f, cudaMemcpyDeviceToHost));
    return f;
}

static void reset_flag(void)
{
    CK(cudaMemsetAsync(gpuq_cuda_ctx_errflag(g_ctx), 0, sizeof(int), g_stream));
}

/* gpuq_cuda_pairwise of host x, y into a host buffer (malloc'd), rows
 * [r0, r0 + nr) launched on their own when nr < m. */
static void *gpu_pw(int dt, int metric, double p, int on_zero, const void *x, const void *y,
                    uint64_t m, uint64_t n, uint64_t d, uint64_t nr)
{
    size_t es = esz(dt);
    char *d_x = dev_copy(x, m * d * es), *d_y = dev_copy(y, n * d * es), *d_o = NULL;
    CK(cudaMalloc((void **)&d_o, m * n * es + 1));
    CK(cudaMemsetAsync(d_o, 0xff, m * n * es, g_stream));
    reset_flag();
    for (uint64_t r0 = 0; r0 < m; r0 += nr) {
        uint64_t c = m - r0 < nr ? m - r0 : nr;
        ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, metric, p, on_zero, d_x + r0 * d * es, d_y,
                                            c, n, d, d_o + r0 * n * es),
                         GPUQ_K_OK);
    }
    void *h = fetch(d_o, m * n * es);
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
    CK(cudaFree(d_o));
    return h;
}

static const uint64_t SHAPES[3][3] = {{1, 1, 1}, {129, 65, 17}, {130, 67, 100}};

/* _i: dtype x variant x shape. */
START_TEST(pairwise_vs_cpu)
{
    int dt = DTS[_i % 2], v = (_i / 2) % N_VARIANTS, s = _i / (2 * N_VARIANTS);
    uint64_t m = SHAPES[s][0], n = SHAPES[s][1], d = SHAPES[s][2];
    double p;
    int metric = variant(v, &p);
    double *x = malloc(m * d * sizeof *x), *y = malloc(n * d * sizeof *y);
    ck_assert(x && y);
    nt_pw_fill(NT_PW_MIXED, x, m, y, n, d);
    void *xi = to_dt(dt, x, m * d), *yi = to_dt(dt, y, n * d);
    void *cpu = malloc(m * n * esz(dt));
    ck_assert_int_eq(gpuq_cpu_pairwise(dt, metric, p, 0, xi, yi, m, n, d, cpu), GPUQ_K_OK);
    void *gpu = gpu_pw(dt, metric, p, 0, xi, yi, m, n, d, m);
    ck_assert_int_eq(read_flag(), 0);
    int exact = metric == GPUQ_K_CHEBYSHEV || isinf(p);
    for (size_t e = 0; e < m * n; e++) {
        double g = at(dt, gpu, e), c = at(dt, cpu, e);
        double tol = exact ? 0.0 : nt_tol(dt, 2, 2, c, nt_pairwise_acc_p(NT_MINKOWSKI, p, d, c));
        ck_assert_msg(fabs(g - c) <= tol,
                      "%s p=%g %s %llux%llux%llu element %zu: gpu %.17g cpu %.17g",
                      metric == GPUQ_K_CHEBYSHEV ? "chebyshev" : "minkowski", p,
                      dt == GPUQ_K_F32 ? "f32" : "f64", (unsigned long long)m,
                      (unsigned long long)n, (unsigned long long)d, e, g, c);
    }
    /* rows in ranges of 7: the same bits */
    void *ranged = gpu_pw(dt, metric, p, 0, xi, yi, m, n, d, 7);
    ck_assert(memcmp(ranged, gpu, m * n * esz(dt)) == 0);
    free(x), free(y), free(xi), free(yi), free(cpu), free(gpu), free(ranged);
}
END_TEST

/* _i: dtype x variant x {skinny m = 5, tiled m = 70}. */
START_TEST(knn_vs_cpu)
{
    int dt = DTS[_i % 2], v = (_i / 2) % N_VARIANTS, tiled = _i / (2 * N_VARIANTS);
    uint64_t m = tiled ? 70 : 5, n = 1500, d = 13, k = 9;
    double p;
    int metric = variant(v, &p);
    double *x = malloc(m * d * sizeof *x), *y = malloc(n * d * sizeof *y);
    ck_assert(x && y);
    nt_pw_fill(NT_PW_MIXED, x, m, y, n, d);
    void *xi = to_dt(dt, x, m * d), *yi = to_dt(dt, y, n * d);
    size_t es = esz(dt);
    uint64_t sb = gpuq_cuda_knn_scratch_bytes(dt, m, n, d, k);
    ck_assert_uint_gt(sb, 0);
    void *d_x = dev_copy(xi, m * d * es), *d_y = dev_copy(yi, n * d * es), *d_s, *d_dist, *d_idx;
    CK(cudaMalloc(&d_s, sb));
    CK(cudaMalloc(&d_dist, m * k * es));
    CK(cudaMalloc(&d_idx, m * k * 8));
    reset_flag();
    ck_assert_int_eq(
        gpuq_cuda_knn(g_ctx, dt, metric, p, 0, d_x, d_y, m, n, d, k, d_s, d_dist, (int64_t *)d_idx),
        GPUQ_K_OK);
    void *dist = fetch(d_dist, m * k * es);
    int64_t *idx = fetch(d_idx, m * k * 8);
    ck_assert_int_eq(read_flag(), 0);
    void *rd = malloc(m * k * es);
    int64_t *ri = malloc(m * k * sizeof *ri);
    double *full = malloc(n * sizeof *full), *gd = malloc(k * sizeof *gd),
           *rdd = malloc(k * sizeof *rdd);
    unsigned char *seen = calloc(n, 1);
    ck_assert(rd && ri && full && gd && rdd && seen);
    ck_assert_int_eq(gpuq_cpu_knn(dt, metric, p, 0, xi, yi, m, n, d, k, rd, ri), GPUQ_K_OK);
    kc_minkowski_p = p;
    kc_params kp = {dt, metric, 2, 2, n, d, k};
    for (uint64_t i = 0; i < m; i++) {
        ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, metric, p, 0, x + i * d, y, 1, n, d, full),
                         GPUQ_K_OK);
        for (uint64_t t = 0; t < k; t++) {
            gd[t] = at(dt, dist, i * k + t);
            rdd[t] = at(dt, rd, i * k + t);
        }
        char why[256];
        int bad = kc_check_row(&kp, gd, idx + i * k, full, ri + i * k, rdd, seen, why, sizeof why);
        ck_assert_msg(!bad, "knn variant %d %s m=%llu row %llu: %s", v,
                      dt == GPUQ_K_F32 ? "f32" : "f64", (unsigned long long)m,
                      (unsigned long long)i, why);
    }
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
    CK(cudaFree(d_s));
    CK(cudaFree(d_dist));
    CK(cudaFree(d_idx));
    free(x), free(y), free(xi), free(yi), free(dist), free(idx), free(rd), free(ri), free(full),
        free(gd), free(rdd), free(seen);
}
END_TEST

/* _i: dtype x {d = 3, d = 40 (float64: the GEMM route)}. */
START_TEST(cosine_on_zero_nan)
{
    int dt = DTS[_i % 2];
    uint64_t m = 70, n = 66, d = _i / 2 ? 40 : 3;
    double *x = malloc(m * d * sizeof *x), *y = malloc(n * d * sizeof *y);
    ck_assert(x && y);
    nt_pw_fill(NT_PW_UNIFORM, x, m, y, n, d);
    memset(x + 64 * d, 0, d * sizeof *x); /* x row 64 and y row 65 are zero vectors */
    memset(y + 65 * d, 0, d * sizeof *y);
    void *xi = to_dt(dt, x, m * d), *yi = to_dt(dt, y, n * d);
    void *cpu = malloc(m * n * esz(dt));
    ck_assert_int_eq(
        gpuq_cpu_pairwise(dt, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_NAN, xi, yi, m, n, d, cpu),
        GPUQ_K_OK);
    void *gpu = gpu_pw(dt, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_NAN, xi, yi, m, n, d, m);
    ck_assert_int_eq(read_flag(), 0);
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t j = 0; j < n; j++) {
            double g = at(dt, gpu, i * n + j), c = at(dt, cpu, i * n + j);
            int zero = i == 64 || j == 65;
            ck_assert_msg(zero ? isnan(g) && isnan(c) : fabs(g - c) <= 1e-5,
                          "(%llu, %llu): gpu %g cpu %g", (unsigned long long)i,
                          (unsigned long long)j, g, c);
        }
    /* kNN of x rows 63..64 (the skinny kernel): y row 65 last, x row 64 all NaN */
    uint64_t k = n, mq = 2;
    size_t es = esz(dt);
    uint64_t sb = gpuq_cuda_knn_scratch_bytes(dt, mq, n, d, k);
    void *d_x = dev_copy((const char *)xi + 63 * d * es, mq * d * es),
         *d_y = dev_copy(yi, n * d * es);
    void *d_s, *d_dist, *d_idx;
    CK(cudaMalloc(&d_s, sb));
    CK(cudaMalloc(&d_dist, mq * k * es));
    CK(cudaMalloc(&d_idx, mq * k * 8));
    reset_flag();
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, dt, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_NAN, d_x, d_y, mq,
                                   n, d, k, d_s, d_dist, (int64_t *)d_idx),
                     GPUQ_K_OK);
    void *dist = fetch(d_dist, mq * k * es);
    int64_t *idx = fetch(d_idx, mq * k * 8);
    ck_assert_int_eq(read_flag(), 0);
    ck_assert(idx[k - 1] == 65 && isnan(at(dt, dist, k - 1)) && !isnan(at(dt, dist, k - 2)));
    for (uint64_t t = 0; t < k; t++)
        ck_assert(idx[k + t] == (int64_t)t && isnan(at(dt, dist, k + t)));
    /* bad p and on_zero */
    ck_assert_int_eq(
        gpuq_cuda_pairwise(g_ctx, dt, GPUQ_K_MINKOWSKI, 0.0, 0, d_y, d_y, 2, 2, 2, d_s),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cuda_pairwise(g_ctx, dt, GPUQ_K_MINKOWSKI, NAN, 0, d_y, d_y, 2, 2, 2, d_s),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, GPUQ_K_COSINE, 2.0, 3, d_y, d_y, 2, 2, 2, d_s),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, dt, GPUQ_K_MINKOWSKI, -1.0, 0, d_x, d_y, mq, n, d, 1, d_s,
                                   d_dist, (int64_t *)d_idx),
                     GPUQ_K_E_ARG);
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
    CK(cudaFree(d_s));
    CK(cudaFree(d_dist));
    CK(cudaFree(d_idx));
    free(x), free(y), free(xi), free(yi), free(cpu), free(gpu), free(dist), free(idx);
}
END_TEST

static Suite *metric_suite(void)
{
    Suite *s = suite_create("gpu_metric");
    TCase *tc = tcase_create("metric");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, pairwise_vs_cpu, 0, 2 * N_VARIANTS * 3);
    tcase_add_loop_test(tc, knn_vs_cpu, 0, 2 * N_VARIANTS * 2);
    tcase_add_loop_test(tc, cosine_on_zero_nan, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int no_dev = gpu_test_no_device("test_gpu_metric");
    if (no_dev >= 0)
        return no_dev;
    printf("test_gpu_metric: seed %llu\n", (unsigned long long)tu_seed());
    setenv("CK_FORK", "no", 1); /* CUDA state does not survive fork */
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK) {
        fprintf(stderr, "test_gpu_metric: cannot create stream/ctx\n");
        return EXIT_FAILURE;
    }
    int failed = gpu_test_run(metric_suite());
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
