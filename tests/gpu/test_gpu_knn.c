/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_knn.c - gpuq_cuda_knn against gpuq_cpu_knn.
 *
 * The CPU reference is itself checked against scipy (test_knn_ref); here
 * the GPU result must be a valid top-k under the CPU's distances and list
 * (tests/knn_check.h: sorted by (distance, index), NaN last, each distance
 * that of its index, the t-th the CPU's t-th within tolerance, indices the
 * CPU's except near-ties). Cases: every metric, float32 and float64, the
 * unit suite's awkward sizes (n = 1, 7, 1000, 4099; k = 1, k = n; d = 1,
 * 65) on mixed signs, 1e4 + noise and NaN rows, the planted exact ties
 * (x row 0 = y rows 0, n/2, n-1, which must come first in that order);
 * then sizes that force several query chunks and y blocks of the plan
 * (knn_plan.h: m = 2 chunks + 5, n = 3 blocks + 17) with k = 1 and
 * k = GPUQ_KNN_K_MAX; the cosine zero-vector flag with and without
 * zero_ok; bad arguments; the scratch bound for m = 4096, n = 1e6.
 * Outputs are poisoned with NaN (indices with -1) on the test's stream
 * before each call. No GPU: exit 77 unless GPUQ_REQUIRE_GPU=1.
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
#include "knn_check.h"
#include "knn_plan.h"
#include "numtol.h"
#include "testutil.h"

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;

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

static double at(int dt, const void *a, size_t i)
{
    return dt == GPUQ_K_F32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    return d;
}

/* bytes of all-ones on the test's stream: NaN distances, index -1 */
static void *dev_poisoned(size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemsetAsync(d, 0xff, bytes, g_stream));
    return d;
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

/* Run gpuq_cuda_knn on host x/y (dt); results into h_dist/h_idx. Returns
 * the error flag. */
static int gpu_knn(int dt, int metric, int zero_ok, const void *x, const void *y, uint64_t m,
                   uint64_t n, uint64_t d, uint64_t k, void *h_dist, int64_t *h_idx)
{
    uint64_t sb = gpuq_cuda_knn_scratch_bytes(dt, m, n, d, k);
    ck_assert(sb > 0 && sb <= GPUQ_KNN_TILE_BYTES);
    void *d_x = dev_copy(x, m * d * esz(dt)), *d_y = dev_copy(y, n * d * esz(dt));
    void *d_s = NULL;
    CK(cudaMalloc(&d_s, sb));
    void *d_dist = dev_poisoned(m * k * esz(dt));
    int64_t *d_idx = dev_poisoned(m * k * sizeof(int64_t));
    reset_flag();
    ck_assert_int_eq(
        gpuq_cuda_knn(g_ctx, dt, metric, 2.0, zero_ok, d_x, d_y, m, n, d, k, d_s, d_dist, d_idx),
        GPUQ_K_OK);
    int flag = read_flag();
    CK(cudaMemcpy(h_dist, d_dist, m * k * esz(dt), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_idx, d_idx, m * k * sizeof(int64_t), cudaMemcpyDeviceToHost));
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
    CK(cudaFree(d_s));
    CK(cudaFree(d_dist));
    CK(cudaFree(d_idx));
    return flag;
}

/* GPU against CPU on x/y (dt), row by row (the CPU's full distance row
 * computed per row, so that large n needs O(n) memory). */
static void check_case(int dt, int metric, const void *x, const void *y, uint64_t m, uint64_t n,
                       uint64_t d, uint64_t k, const char *what)
{
    void *g_dist = malloc(m * k * esz(dt)), *c_dist = malloc(m * k * esz(dt));
    int64_t *g_idx = malloc(m * k * sizeof(int64_t)), *c_idx = malloc(m * k * sizeof(int64_t));
    void *row = malloc(n * esz(dt));
    double *full = dalloc(n), *gd = dalloc(k), *cd = dalloc(k);
    unsigned char *seen = calloc(n, 1);
    ck_assert(g_dist && c_dist && g_idx && c_idx && row && seen);
    ck_assert_int_eq(gpu_knn(dt, metric, 0, x, y, m, n, d, k, g_dist, g_idx), 0);
    ck_assert_int_eq(gpuq_cpu_knn(dt, metric, 2.0, 0, x, y, m, n, d, k, c_dist, c_idx), GPUQ_K_OK);
    kc_params p = {dt, metric, 2, 1, n, d, k};
    for (uint64_t i = 0; i < m; i++) {
        ck_assert_int_eq(gpuq_cpu_pairwise(dt, metric, 2.0, 0, (const char *)x + i * d * esz(dt), y,
                                           1, n, d, row),
                         GPUQ_K_OK);
        for (uint64_t j = 0; j < n; j++)
            full[j] = at(dt, row, j);
        for (uint64_t t = 0; t < k; t++) {
            gd[t] = at(dt, g_dist, i * k + t);
            cd[t] = at(dt, c_dist, i * k + t);
        }
        char why[256];
        int bad =
            kc_check_row(&p, gd, g_idx + i * k, full, c_idx + i * k, cd, seen, why, sizeof why);
        ck_assert_msg(!bad, "%s (%s, metric %d, m=%llu n=%llu d=%llu k=%llu) row %llu: %s", what,
                      dt == GPUQ_K_F32 ? "f32" : "f64", metric, (unsigned long long)m,
                      (unsigned long long)n, (unsigned long long)d, (unsigned long long)k,
                      (unsigned long long)i, why);
    }
    free(g_dist), free(c_dist), free(g_idx), free(c_idx), free(row), free(full), free(gd), free(cd),
        free(seen);
}

static const struct {
    uint64_t m, n, d, k;
} SHAPES[] = {{3, 1, 1, 1},      {4, 7, 1, 7},       {5, 7, 65, 3},   {3, 1000, 5, 1},
              {2, 4099, 65, 10}, {2, 1000, 3, 1000}, {70, 130, 17, 5}};
#define N_SHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* x[m][d], y[n][d] of a kind (0 mixed, 1 offset, 2 U(-1,1) with NaNs),
 * with the planted ties; as dt (the doubles rounded in place). */
static void make_case(int kind, double *x, uint64_t m, double *y, uint64_t n, uint64_t d)
{
    nt_pw_fill(kind == 0 ? NT_PW_MIXED : kind == 1 ? NT_PW_OFFSET : NT_PW_UNIFORM, x, m, y, n, d);
    for (uint64_t c = 0; c < d; c++) {
        x[c] = y[c];
        if (n >= 3) {
            y[(n / 2) * d + c] = y[c];
            y[(n - 1) * d + c] = y[c];
        }
    }
    if (kind == 2) {
        if (m > 1)
            x[d + d / 2] = NAN;
        if (n >= 7)
            y[(n / 3) * d + (d > 1 ? 1 : 0)] = NAN;
    }
}

/* _i: metric x dtype */
START_TEST(test_knn_small)
{
    int metric = _i % 4, dt = _i / 4 ? GPUQ_K_F64 : GPUQ_K_F32;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int kind = 0; kind < 3; kind++) {
            uint64_t m = SHAPES[s].m, n = SHAPES[s].n, d = SHAPES[s].d, k = SHAPES[s].k;
            double *hx = dalloc(m * d), *hy = dalloc(n * d);
            make_case(kind, hx, m, hy, n, d);
            void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
            check_case(dt, metric, x, y, m, n, d, k, kind == 2 ? "NaN rows" : "small");
            if (n >= 3 && k >= 3 && !(metric == GPUQ_K_COSINE && d == 1)) {
                void *gdist = malloc(m * k * esz(dt));
                int64_t *gi = malloc(m * k * sizeof *gi);
                ck_assert(gdist && gi);
                ck_assert_int_eq(gpu_knn(dt, metric, 0, x, y, m, n, d, k, gdist, gi), 0);
                int64_t want[3];
                ck_assert_int_eq(kc_planted_ties(x, y, n, d * esz(dt), want), 3);
                ck_assert_msg(gi[0] == want[0] && gi[1] == want[1] && gi[2] == want[2],
                              "planted ties: %lld %lld %lld, want %lld %lld %lld", (long long)gi[0],
                              (long long)gi[1], (long long)gi[2], (long long)want[0],
                              (long long)want[1], (long long)want[2]);
                free(gdist), free(gi);
            }
            free(hx), free(hy), free(x), free(y);
        }
}
END_TEST

/* _i: dtype x (k = 1, 10, GPUQ_KNN_K_MAX): several query chunks and y
 * blocks, the last ones partial; duplicates of x rows spread over the
 * blocks, so that exact ties straddle block boundaries. */
START_TEST(test_knn_blocks)
{
    int dt = _i / 3 ? GPUQ_K_F64 : GPUQ_K_F32;
    const uint64_t ks[3] = {1, 10, GPUQ_KNN_K_MAX};
    uint64_t k = ks[_i % 3], d = 8;
    /* Under compute-sanitizer (bench/gpu_run.sh sets GPUQ_SANITIZER_SMALL)
     * k = 10 alone still crosses query chunks and y blocks; the wide
     * k = 1 and k = GPUQ_KNN_K_MAX cases (1.5M rows of y) run plain. */
    if (getenv("GPUQ_SANITIZER_SMALL") && k != 10)
        return;
    /* k = 10: two query chunks and a partial third; else 67 rows (one
     * chunk, wide blocks) keep the CPU reference quick */
    uint64_t m = k == 10 ? 2 * GPUQ_KNN_MB_MAX + 5 : 67;
    gpuq_knn_plan plan = gpuq_knn_plan_for(dt, m, (uint64_t)1 << 40); /* nb for this m */
    uint64_t n = 3 * plan.nb + 17;
    plan = gpuq_knn_plan_for(dt, m, n);
    ck_assert_uint_gt(n, 3 * plan.nb);
    ck_assert_uint_ge(plan.nb, GPUQ_KNN_K_MAX);
    ck_assert_uint_le(plan.tile_bytes, GPUQ_KNN_TILE_BYTES);
    double *hx = dalloc(m * d), *hy = dalloc(n * d);
    tu_rand_fill_f64(hx, m * d, -1.0, 1.0);
    tu_rand_fill_f64(hy, n * d, -1.0, 1.0);
    /* x row i also sits in y at rows i, nb - 1 + i, 2 nb + i and n - 1 - i */
    for (uint64_t i = 0; i < 4 && i < m; i++)
        for (uint64_t c = 0; c < d; c++) {
            double v = hx[i * d + c];
            hy[i * d + c] = v;
            hy[(plan.nb - 1 + i) * d + c] = v;
            hy[(2 * plan.nb + i) * d + c] = v;
            hy[(n - 1 - i) * d + c] = v;
        }
    void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
    for (int metric = 0; metric < 4; metric++)
        check_case(dt, metric, x, y, m, n, d, k, "blocks");
    free(hx), free(hy), free(x), free(y);
}
END_TEST

START_TEST(test_knn_zero)
{
    for (int k = 0; k < 2; k++) {
        int dt = k ? GPUQ_K_F64 : GPUQ_K_F32;
        uint64_t m = 5, n = 9, d = 6, kk = 4;
        double *hx = dalloc(m * d), *hy = dalloc(n * d);
        tu_rand_fill_f64(hx, m * d, -1.0, 1.0);
        tu_rand_fill_f64(hy, n * d, -1.0, 1.0);
        memset(hx + 2 * d, 0, d * sizeof *hx); /* x row 2 zero */
        memset(hy + 4 * d, 0, d * sizeof *hy); /* y row 4 zero */
        void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
        void *gd = malloc(m * kk * esz(dt)), *cd = malloc(m * kk * esz(dt));
        int64_t *gi = malloc(m * kk * 8), *ci = malloc(m * kk * 8);
        ck_assert(gd && cd && gi && ci);
        ck_assert_int_eq(gpu_knn(dt, GPUQ_K_COSINE, 0, x, y, m, n, d, kk, gd, gi), -GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpu_knn(dt, GPUQ_K_COSINE, 1, x, y, m, n, d, kk, gd, gi), 0);
        ck_assert_int_eq(gpuq_cpu_knn(dt, GPUQ_K_COSINE, 2.0, 1, x, y, m, n, d, kk, cd, ci), 0);
        for (uint64_t t = 0; t < m * kk; t++) {
            double g = at(dt, gd, t), c = at(dt, cd, t);
            ck_assert_msg(fabs(g - c) <= 1e-6 * (dt == GPUQ_K_F64 ? 1e-8 : 1.0),
                          "cosine zero_ok position %llu: %.17g vs CPU %.17g", (unsigned long long)t,
                          g, c);
        }
        for (uint64_t t = 0; t < kk; t++) /* the zero row: 1.0 everywhere, by index */
            ck_assert(gi[2 * kk + t] == (int64_t)t && at(dt, gd, 2 * kk + t) == 1.0);
        free(hx), free(hy), free(x), free(y), free(gd), free(cd), free(gi), free(ci);
    }
}
END_TEST

/* _i: metric x dtype. A query row's answer does not depend on the rows
 * that share its run (the contract of gpuqd's row batches, backend.h):
 * 70 rows at once (the 64 x 64 distance kernel) against each row alone,
 * rows 3 at a time, 8 at a time (the few-row kernel, R = 1, 4, 8) and 13
 * at a time (R = 16), 32 (R = 32; the last 6 rows R = 8) and 40 (the
 * 64 x 64 kernel; the last 30 R = 32), bit for bit, NaN rows and planted
 * ties included; d = 65 and 128 (a partial shared-memory chunk, and none). */
START_TEST(test_knn_rows_independent)
{
    int metric = _i % 4, dt = _i / 4 ? GPUQ_K_F64 : GPUQ_K_F32;
    const uint64_t m = 70, n = 5000, k = 10, groups[6] = {1, 3, 8, 13, 32, 40};
    for (uint64_t d = 65; d <= 128; d += 63) {
        double *hx = dalloc(m * d), *hy = dalloc(n * d);
        make_case(2, hx, m, hy, n, d);
        void *x = to_dt(dt, hx, m * d), *y = to_dt(dt, hy, n * d);
        size_t db = m * k * esz(dt), ib = m * k * sizeof(int64_t);
        char *all_d = malloc(db), *part_d = malloc(db);
        int64_t *all_i = malloc(ib), *part_i = malloc(ib);
        ck_assert(all_d && part_d && all_i && part_i);
        int fa = gpu_knn(dt, metric, 1, x, y, m, n, d, k, all_d, all_i);
        for (int g = 0; g < 6; g++) {
            for (uint64_t r0 = 0; r0 < m; r0 += groups[g]) {
                uint64_t nr = m - r0 < groups[g] ? m - r0 : groups[g];
                int f = gpu_knn(dt, metric, 1, (const char *)x + r0 * d * esz(dt), y, nr, n, d, k,
                                part_d + r0 * k * esz(dt), part_i + r0 * k);
                ck_assert_int_eq(f, fa);
            }
            for (uint64_t r = 0; r < m; r++)
                ck_assert_msg(
                    !memcmp(all_d + r * k * esz(dt), part_d + r * k * esz(dt), k * esz(dt)) &&
                        !memcmp(all_i + r * k, part_i + r * k, k * sizeof(int64_t)),
                    "metric %d %s d=%llu: row %llu in runs of %llu differs from the "
                    "70-row run",
                    metric, dt == GPUQ_K_F32 ? "f32" : "f64", (unsigned long long)d,
                    (unsigned long long)r, (unsigned long long)groups[g]);
        }
        free(hx), free(hy), free(x), free(y), free(all_d), free(part_d), free(all_i), free(part_i);
    }
}
END_TEST

START_TEST(test_knn_bad_args)
{
    void *d_s = NULL;
    CK(cudaMalloc(&d_s, 4096));
    char *p = d_s;
    ck_assert_int_eq(
        gpuq_cuda_knn(g_ctx, GPUQ_K_F32, 0, 2.0, 0, p, p, 2, 2, 2, 0, p, p, (int64_t *)p),
        GPUQ_K_E_ARG); /* k = 0 */
    ck_assert_int_eq(
        gpuq_cuda_knn(g_ctx, GPUQ_K_F32, 0, 2.0, 0, p, p, 2, 2, 2, 3, p, p, (int64_t *)p),
        GPUQ_K_E_ARG); /* k > n */
    /* k past GPUQ_KNN_K_LIMIT (1024 < k <= n is valid: test_gpu_shape) */
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, GPUQ_K_F32, 0, 2.0, 0, p, p, 2, GPUQ_KNN_K_LIMIT + 2, 2,
                                   GPUQ_KNN_K_LIMIT + 1, p, p, (int64_t *)p),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, 9, 0, 2.0, 0, p, p, 2, 2, 2, 1, p, p, (int64_t *)p),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, GPUQ_K_F32, GPUQ_K_METRIC_COUNT, 2.0, 0, p, p, 2, 2, 2, 1,
                                   p, p, (int64_t *)p),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cuda_knn(g_ctx, GPUQ_K_F32, 0, 2.0, 0, p, p, 2, 2, 2, 1, p + 4, p, (int64_t *)p),
        GPUQ_K_E_ARG); /* misaligned scratch */
    ck_assert_int_eq(
        gpuq_cuda_knn(g_ctx, GPUQ_K_F32, 0, 2.0, 0, p, p, 2, 2, 2, 1, NULL, p, (int64_t *)p),
        GPUQ_K_E_ARG);
    CK(cudaFree(d_s));
    /* the benchmark's size in bounded scratch */
    uint64_t b = gpuq_cuda_knn_scratch_bytes(GPUQ_K_F32, 4096, 1000000, 64, 10);
    ck_assert(b > 0 && b <= GPUQ_KNN_TILE_BYTES);
}
END_TEST

static Suite *knn_suite(void)
{
    Suite *s = suite_create("gpu_knn");
    TCase *tc = tcase_create("knn");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_knn_small, 0, 8);
    tcase_add_loop_test(tc, test_knn_blocks, 0, 6);
    tcase_add_test(tc, test_knn_zero);
    tcase_add_loop_test(tc, test_knn_rows_independent, 0, 8);
    tcase_add_test(tc, test_knn_bad_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int no_dev = gpu_test_no_device("test_gpu_knn");
    if (no_dev >= 0)
        return no_dev;
    printf("test_gpu_knn: seed %llu\n", (unsigned long long)tu_seed());
    setenv("CK_FORK", "no", 1); /* CUDA state does not survive fork */
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK) {
        fprintf(stderr, "test_gpu_knn: cannot create stream/ctx\n");
        return EXIT_FAILURE;
    }
    int failed = gpu_test_run(knn_suite());
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
