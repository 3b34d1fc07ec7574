/* SPDX-License-Identifier: Apache-2.0 */
/* test_knn_ref.c - gpuq_cpu_knn against scipy: argsort(cdist(X, Y),
 * kind='stable')[:, :k] and the distances in that order (ref_ops.py knn).
 *
 * Every metric, float32 and float64, sizes that match no block (n = 1, 7,
 * 1000, 4099; k = 1, k = n, k = 1000 = n; d = 1, 5, 65), on mixed signs over
 * 1e-3..1e3, on 1e4 + noise (cosine distances of 1e-9: near-ties
 * everywhere in float32) and on U(-1, 1) with a NaN in a row of x and of y.
 * Every case plants exact ties: x row 0 equals y rows 0, n/2 and n-1, which
 * must come out first and in that index order. A result must be a valid
 * top-k under the reference (tests/knn_check.h): sorted by (distance,
 * index), NaN last, each distance that of its index, the t-th distance the
 * reference's t-th within tolerance, indices the reference's except near
 * ties. Then hand-computed results, the cosine zero vector with and without
 * zero_ok, bad arguments and the scratch bound of the CUDA plan.
 *
 * References come from one ref_ops.py batch run by the case's unchecked
 * fixture (refbatch.h), as in test_cpu_ref.
 */
#include "gpuq_kernels.h"
#include "knn_check.h"
#include "numtol.h"
#include "refbatch.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const metric_names[] = {"euclidean", "sqeuclidean", "cosine", "manhattan"};
static const int dts[] = {GPUQ_K_F32, GPUQ_K_F64};

static const struct {
    uint64_t m, n, d, k;
} shapes[] = {{3, 1, 1, 1},    {4, 7, 1, 7},      {5, 7, 65, 3},
              {3, 1000, 5, 1}, {2, 4099, 65, 10}, {2, 1000, 3, 1000}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* input kinds: numtol.h's mixed and offset, and U(-1, 1) with NaNs */
enum { KIND_MIXED, KIND_OFFSET, KIND_NAN, N_KINDS };
static const char *const kind_names[] = {"mixed", "offset", "uniform+NaN"};

#define N_CASES (4 * 2 * N_SHAPES * N_KINDS)

static size_t dt_size(int dt)
{
    return dt == GPUQ_K_F32 ? sizeof(float) : sizeof(double);
}

static double *dalloc(size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* x (n values) as dt, malloc'd; x rounded to dt in place */
static void *to_dtype(int dt, double *x, size_t n)
{
    void *buf = malloc(n * dt_size(dt) + 1);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_K_F32) {
            ((float *)buf)[i] = (float)x[i];
            x[i] = ((float *)buf)[i];
        } else {
            ((double *)buf)[i] = x[i];
        }
    }
    return buf;
}

static double out_at(int dt, const void *out, size_t i)
{
    return dt == GPUQ_K_F32 ? (double)((const float *)out)[i] : ((const double *)out)[i];
}

/* the planted duplicate rows of y: 0, n/2, n-1 (n >= 3) */
static uint64_t nan_row(uint64_t n)
{
    return n / 3;
}

static void fill_case(int kind, double *x, uint64_t m, double *y, uint64_t n, uint64_t d)
{
    nt_pw_fill(kind == KIND_OFFSET  ? NT_PW_OFFSET
               : kind == KIND_MIXED ? NT_PW_MIXED
                                    : NT_PW_UNIFORM,
               x, m, y, n, d);
    for (uint64_t c = 0; c < d; c++) {
        x[c] = y[c];
        if (n >= 3) {
            y[(n / 2) * d + c] = y[c];
            y[(n - 1) * d + c] = y[c];
        }
    }
    if (kind == KIND_NAN) {
        if (m > 1)
            x[1 * d + d / 2] = NAN;
        if (n >= 7)
            y[nan_row(n) * d + (d > 1 ? 1 : 0)] = NAN;
    }
}

static rb_batch *refs;
static struct {
    double *x, *y; /* rounded to the dtype */
    int job;
} cases[N_CASES];

static void decode(int i, int *metric, int *dt, int *shape, int *kind)
{
    *metric = i % 4;
    *dt = dts[(i / 4) % 2];
    *shape = (i / 8) % (int)N_SHAPES;
    *kind = i / (8 * (int)N_SHAPES);
}

static void cases_prepare(void)
{
    refs = rb_new();
    for (int i = 0; i < (int)N_CASES; i++) {
        int metric, dt, sh, kind;
        decode(i, &metric, &dt, &sh, &kind);
        uint64_t m = shapes[sh].m, n = shapes[sh].n, d = shapes[sh].d, k = shapes[sh].k;
        double *x = dalloc(m * d), *y = dalloc(n * d);
        fill_case(kind, x, m, y, n, d);
        free(to_dtype(dt, x, m * d));
        free(to_dtype(dt, y, n * d));
        char ms[32], ns[32], ds[32], ks[32];
        snprintf(ms, sizeof ms, "%llu", (unsigned long long)m);
        snprintf(ns, sizeof ns, "%llu", (unsigned long long)n);
        snprintf(ds, sizeof ds, "%llu", (unsigned long long)d);
        snprintf(ks, sizeof ks, "%llu", (unsigned long long)k);
        const char *args[] = {"knn", metric_names[metric], ms, ns, ds, ks, "@0", "@1", NULL};
        cases[i].x = x;
        cases[i].y = y;
        cases[i].job = rb_add(refs, args, x, m * d, y, n * d, m * n + 2 * m * k);
    }
    rb_run(refs);
}

static void cases_release(void)
{
    for (int i = 0; i < (int)N_CASES; i++)
        free(cases[i].x), free(cases[i].y);
    rb_free(refs);
    refs = NULL;
}

START_TEST(knn_vs_scipy)
{
    int metric, dt, sh, kind;
    decode(_i, &metric, &dt, &sh, &kind);
    uint64_t m = shapes[sh].m, n = shapes[sh].n, d = shapes[sh].d, k = shapes[sh].k;
    double *x = dalloc(m * d), *y = dalloc(n * d);
    memcpy(x, cases[_i].x, m * d * sizeof *x);
    memcpy(y, cases[_i].y, n * d * sizeof *y);
    void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
    void *dist = malloc(m * k * dt_size(dt));
    int64_t *idx = malloc(m * k * sizeof *idx);
    ck_assert(dist && idx);
    ck_assert_int_eq(gpuq_cpu_knn(dt, metric, 2.0, 0, xi, yi, m, n, d, k, dist, idx), GPUQ_K_OK);

    const double *ref = rb_get(refs, cases[_i].job);
    const double *full = ref, *ref_if = ref + m * n, *ref_d = ref_if + m * k;
    double *got_d = dalloc(k);
    int64_t *ref_i = malloc(k * sizeof *ref_i);
    unsigned char *seen = calloc(n, 1);
    ck_assert(ref_i && seen);
    kc_params p = {dt, metric, 1, 2, n, d, k};
    for (uint64_t i = 0; i < m; i++) {
        for (uint64_t t = 0; t < k; t++) {
            got_d[t] = out_at(dt, dist, i * k + t);
            ref_i[t] = (int64_t)ref_if[i * k + t];
        }
        char why[256];
        int bad = kc_check_row(&p, got_d, idx + i * k, full + i * n, ref_i, ref_d + i * k, seen,
                               why, sizeof why);
        ck_assert_msg(!bad, "knn %s %s of %s, m=%llu n=%llu d=%llu k=%llu, row %llu: %s",
                      metric_names[metric], dt == GPUQ_K_F32 ? "f32" : "f64", kind_names[kind],
                      (unsigned long long)m, (unsigned long long)n, (unsigned long long)d,
                      (unsigned long long)k, (unsigned long long)i, why);
    }
    /* the planted exact ties: y rows 0, n/2, n-1 equal x row 0 (under
     * cosine with d = 1 every row of the same sign ties with them), and any
     * random row that rounds to the same values (kc_planted_ties) */
    if (n >= 3 && k >= 3 && !(metric == GPUQ_K_COSINE && d == 1)) {
        int64_t want[3];
        ck_assert_int_eq(kc_planted_ties(xi, yi, n, d * dt_size(dt), want), 3);
        ck_assert_msg(idx[0] == want[0] && idx[1] == want[1] && idx[2] == want[2],
                      "row 0 starts %lld %lld %lld, want the ties %lld %lld %lld",
                      (long long)idx[0], (long long)idx[1], (long long)idx[2], (long long)want[0],
                      (long long)want[1], (long long)want[2]);
        ck_assert(out_at(dt, dist, 0) == out_at(dt, dist, 1) &&
                  out_at(dt, dist, 1) == out_at(dt, dist, 2));
    }
    /* NaN: the x row gives all-NaN distances, indices 0..k-1; the y row last */
    if (kind == KIND_NAN && m > 1)
        for (uint64_t t = 0; t < k; t++)
            ck_assert(isnan(out_at(dt, dist, k + t)) && idx[k + t] == (int64_t)t);
    if (kind == KIND_NAN && n >= 7 && k == n)
        ck_assert(idx[k - 1] == (int64_t)nan_row(n) && isnan(out_at(dt, dist, k - 1)));
    free(x), free(y), free(xi), free(yi), free(dist), free(idx), free(got_d), free(ref_i),
        free(seen);
}
END_TEST

/* By hand: 1-D points, ties, NaN, both dtypes. */
START_TEST(knn_hand)
{
    const double y[] = {3.0, 1.0, NAN, -1.0, 1.0, 0.5};
    const double x[] = {0.0, 1.0};
    /* |x - y| for x = 0: 3 1 NaN 1 1 0.5 -> 5(0.5) 1(1) 3(1) 4(1) 0(3) 2(NaN)
     *             x = 1: 2 0 NaN 2 0 0.5 -> 1(0) 4(0) 5(0.5) 0(2) 3(2) 2(NaN) */
    const int64_t want_i[] = {5, 1, 3, 4, 0, 2, 1, 4, 5, 0, 3, 2};
    const double want_d[] = {0.5, 1, 1, 1, 3, NAN, 0, 0, 0.5, 2, 2, NAN};
    for (int m = GPUQ_K_EUCLIDEAN; m <= GPUQ_K_MANHATTAN; m++) {
        if (m == GPUQ_K_COSINE)
            continue;
        for (int di = 0; di < 2; di++) {
            int dt = dts[di];
            float xf[2], yf[6];
            for (int i = 0; i < 6; i++)
                yf[i] = (float)y[i];
            xf[0] = 0.0f, xf[1] = 1.0f;
            double dd[12];
            float df[12];
            int64_t idx[12];
            ck_assert_int_eq(gpuq_cpu_knn(dt, m, 2.0, 0, dt == GPUQ_K_F32 ? (void *)xf : (void *)x,
                                          dt == GPUQ_K_F32 ? (void *)yf : (void *)y, 2, 6, 1, 6,
                                          dt == GPUQ_K_F32 ? (void *)df : (void *)dd, idx),
                             GPUQ_K_OK);
            for (int t = 0; t < 12; t++) {
                double g = dt == GPUQ_K_F32 ? (double)df[t] : dd[t];
                double w = m == GPUQ_K_SQEUCLIDEAN ? want_d[t] * want_d[t] : want_d[t];
                ck_assert_msg(idx[t] == want_i[t], "metric %d dt %d position %d: index %lld", m, dt,
                              t, (long long)idx[t]);
                ck_assert(isnan(w) ? isnan(g) : g == w);
            }
            /* k < n: the first k of the same lists */
            ck_assert_int_eq(gpuq_cpu_knn(dt, m, 2.0, 0, dt == GPUQ_K_F32 ? (void *)xf : (void *)x,
                                          dt == GPUQ_K_F32 ? (void *)yf : (void *)y, 2, 6, 1, 2,
                                          dt == GPUQ_K_F32 ? (void *)df : (void *)dd, idx),
                             GPUQ_K_OK);
            ck_assert(idx[0] == 5 && idx[1] == 1 && idx[2] == 1 && idx[3] == 4);
        }
    }
}
END_TEST

START_TEST(knn_zero_vector)
{
    /* x row 1 is zero; y row 2 is zero */
    const double x[] = {1, 2, 3, 0, 0, 0};
    const double y[] = {3, 2, 1, 1, 2, 3, 0, 0, 0, -1, -2, -3};
    double d[8];
    int64_t idx[8];
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 0, x, y, 2, 4, 3, 4, d, idx),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 0, x, y, 1, 4, 3, 4, d, idx),
                     GPUQ_K_E_ZERO); /* y's zero row alone */
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 1, x, y, 2, 4, 3, 4, d, idx),
                     GPUQ_K_OK);
    /* row 0: y1 (0), y0 (1 - 10/14), y2 (zero: 1.0), y3 (2) */
    ck_assert(idx[0] == 1 && idx[1] == 0 && idx[2] == 2 && idx[3] == 3);
    ck_assert(fabs(d[0]) < 1e-15 && fabs(d[1] - (1.0 - 10.0 / 14.0)) < 1e-15 && d[2] == 1.0 &&
              fabs(d[3] - 2.0) < 1e-15);
    /* row 1 (zero): 1.0 everywhere, so by index */
    for (int t = 0; t < 4; t++)
        ck_assert(idx[4 + t] == t && d[4 + t] == 1.0);
    const float xf[] = {0, 0, 0}, yf[] = {1, 0, 0, 0, 1, 0};
    float df[2];
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F32, GPUQ_K_COSINE, 2.0, 0, xf, yf, 1, 2, 3, 2, df, idx),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F32, GPUQ_K_COSINE, 2.0, 1, xf, yf, 1, 2, 3, 2, df, idx),
                     GPUQ_K_OK);
    ck_assert(idx[0] == 0 && idx[1] == 1 && df[0] == 1.0f && df[1] == 1.0f);
    /* euclidean does not mind */
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, y, 2, 4, 3, 1, d, idx),
                     GPUQ_K_OK);
    ck_assert(idx[0] == 1 && d[0] == 0.0 && idx[1] == 2 && d[1] == 0.0);
}
END_TEST

START_TEST(knn_bad_args)
{
    double x[4] = {1, 2, 3, 4}, d[4];
    int64_t idx[4];
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 2, 2, d, idx),
                     GPUQ_K_OK);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 2, 0, d, idx),
                     GPUQ_K_E_ARG); /* k = 0 */
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 2, 3, d, idx),
                     GPUQ_K_E_ARG); /* k > n */
    ck_assert_int_eq(gpuq_cpu_knn(0, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 2, 1, d, idx),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_knn(3, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 2, 1, d, idx),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, -1, 2.0, 0, x, x, 2, 2, 2, 1, d, idx), GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_METRIC_COUNT, 2.0, 0, x, x, 2, 2, 2, 1, d, idx),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 0, 2, 2, 1, d, idx),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 0, 2, 1, d, idx),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 0, 1, d, idx),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, NULL, x, 2, 2, 2, 1, d, idx),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 2, 1, d, NULL),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, UINT64_MAX / 2, 2, 4, 1, d, idx),
        GPUQ_K_E_ARG); /* m * d wraps */
    /* k above GPUQ_KNN_K_LIMIT, n large enough: refused before any work */
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 1,
                                  GPUQ_KNN_K_LIMIT + 1, 1, GPUQ_KNN_K_LIMIT + 1, d, idx),
                     GPUQ_K_E_ARG);
    /* k above GPUQ_KNN_K_MAX (the CUDA select's): valid; ties by index,
     * NaN last against a float64 sort by (distance, index) */
    uint64_t n = 3 * GPUQ_KNN_K_MAX + 7;
    double *y = calloc(n, sizeof *y), *dd = malloc(n * sizeof *dd);
    int64_t *ii = malloc(n * sizeof *ii);
    ck_assert(y && dd && ii);
    for (uint64_t j = 0; j < n; j++) /* distances |x - y| of 0 .. 4, NaN at j % 97 == 3 */
        y[j] = j % 97 == 3 ? NAN : x[0] + (double)((j * 7) % 5);
    for (uint64_t k = GPUQ_KNN_K_MAX + 1; k <= n; k += n - GPUQ_KNN_K_MAX - 1) {
        ck_assert_int_eq(
            gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, y, 1, n, 1, k, dd, ii),
            GPUQ_K_OK);
        uint64_t t = 0; /* the reference: each distance 0 .. 4 by index, then the NaNs */
        for (int dist = 0; dist <= 5; dist++)
            for (uint64_t j = 0; j < n && t < k; j++) {
                int isn = j % 97 == 3;
                if (dist == 5 ? !isn : (isn || (int)((j * 7) % 5) != dist))
                    continue;
                ck_assert_msg(ii[t] == (int64_t)j, "k=%llu place %llu: %lld, want %llu",
                              (unsigned long long)k, (unsigned long long)t, (long long)ii[t],
                              (unsigned long long)j);
                ck_assert(dist == 5 ? isnan(dd[t]) : dd[t] == (double)dist);
                t++;
            }
        ck_assert_uint_eq(t, k);
    }
    free(y), free(dd), free(ii);
}
END_TEST

/* The CUDA plan's scratch: bounded whatever m and n (plain C, no GPU). */
START_TEST(knn_scratch_bound)
{
    const uint64_t bound = (uint64_t)128 << 20;
    uint64_t b = gpuq_cuda_knn_scratch_bytes(GPUQ_K_F32, 4096, 1000000, 64, 10);
    ck_assert(b > 0 && b <= bound);
    ck_assert(gpuq_cuda_knn_scratch_bytes(GPUQ_K_F64, 1000000, 1000000000, 64, 1024) <= bound);
    ck_assert(gpuq_cuda_knn_scratch_bytes(GPUQ_K_F64, 1, 1000000000, 3, 1) <= bound);
    ck_assert_uint_eq(gpuq_cuda_knn_scratch_bytes(GPUQ_K_F64, 2, 3, 1, 1), 2 * 3 * 8);
    ck_assert_uint_eq(gpuq_cuda_knn_scratch_bytes(GPUQ_K_F64, 2, 3, 1, 4), 0); /* k > n */
    ck_assert_uint_eq(gpuq_cuda_knn_scratch_bytes(7, 2, 3, 1, 1), 0);
}
END_TEST

static Suite *knn_suite(void)
{
    Suite *s = suite_create("knn_ref");
    TCase *tc = tcase_create("vs_scipy");
    tcase_add_unchecked_fixture(tc, cases_prepare, cases_release);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, knn_vs_scipy, 0, (int)N_CASES);
    suite_add_tcase(s, tc);
    tc = tcase_create("hand");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, knn_hand);
    tcase_add_test(tc, knn_zero_vector);
    tcase_add_test(tc, knn_bad_args);
    tcase_add_test(tc, knn_scratch_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tu_seed();
    return tu_run_suite(knn_suite());
}
