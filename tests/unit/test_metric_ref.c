/* SPDX-License-Identifier: Apache-2.0 */
/* test_metric_ref.c - the chebyshev and minkowski metrics and cosine's
 * on_zero "nan" on the CPU reference (gpuq_cpu_pairwise, gpuq_cpu_knn),
 * against scipy's cdist and an exact reference (ref_ops.py pairwise_exact:
 * 80-digit decimals), and metric_math.h's root against long double.
 *
 * Pairwise: chebyshev and minkowski with p = 1, 1.5, 3, 0.5 and inf
 * (scipy's p = inf is chebyshev), float32 and float64, numtol.h's four
 * input kinds (uniform, mixed signs over 1e-3..1e3, 1e4 + noise, 1e-6..1e6),
 * d = 5 and 100: each element within nt_pairwise_acc_p's bound of the
 * exact value, and of scipy's (which adds its own pow(s, 1/p) rounding:
 * up to |ln s| / p units). kNN: the same metrics, a valid top-k under
 * scipy's distances (knn_check.h). p = 1, 2 and inf give manhattan's,
 * euclidean's and chebyshev's bits. Bad p (0, negative, NaN) and on_zero
 * modes are GPUQ_K_E_ARG. on_zero "nan": NaN distances, sorted last.
 */
#include "gpuq_kernels.h"
#include "knn_check.h"
#include "metric_math.h"
#include "numtol.h"
#include "refbatch.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(NT_CHEBYSHEV == GPUQ_K_CHEBYSHEV && NT_MINKOWSKI == GPUQ_K_MINKOWSKI,
               "numtol.h numbers the metrics as gpuq_kernels.h");

static const int dts[] = {GPUQ_K_F32, GPUQ_K_F64};

/* Metric variants: chebyshev, then minkowski with mk_p[v - 1]. */
static const double mk_p[] = {1.0, 1.5, 3.0, 0.5, INFINITY};
static const char *const mk_scipy[] = {"chebyshev",   "minkowski:1",   "minkowski:1.5",
                                       "minkowski:3", "minkowski:0.5", "minkowski:inf"};
static const char *const mk_exact[] = {"chebyshev",   "minkowski:1",   "minkowski:1.5",
                                       "minkowski:3", "minkowski:0.5", "chebyshev"};
#define N_VARIANTS 6
#define MK_M 9
#define MK_N 7
static const uint64_t mk_dims[] = {5, 100};
#define N_DIMS 2
#define N_MK (N_VARIANTS * 2 * NT_PW_KINDS * N_DIMS)

static int variant_metric(int v, double *p)
{
    *p = v == 0 ? 2.0 : mk_p[v - 1];
    return v == 0 ? GPUQ_K_CHEBYSHEV : GPUQ_K_MINKOWSKI;
}

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
    void *o = malloc(n * dt_size(dt) + 1);
    ck_assert_ptr_nonnull(o);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_K_F32)
            x[i] = ((float *)o)[i] = (float)x[i];
        else
            ((double *)o)[i] = x[i];
    }
    return o;
}

static double out_at(int dt, const void *out, size_t i)
{
    return dt == GPUQ_K_F32 ? (double)((const float *)out)[i] : ((const double *)out)[i];
}

/* _i enumerates variant x dtype x kind x d. */
static void decode(int i, int *v, int *dt, int *kind, uint64_t *d)
{
    *v = i % N_VARIANTS;
    *dt = dts[(i / N_VARIANTS) % 2];
    *kind = (i / (2 * N_VARIANTS)) % NT_PW_KINDS;
    *d = mk_dims[i / (2 * N_VARIANTS * NT_PW_KINDS)];
}

static rb_batch *refs;
static struct {
    double *x, *y; /* rounded to the dtype; owned by the variant 0 case */
    int scipy, exact, knn;
} mk_case[N_MK];

static void mk_prepare(void)
{
    refs = rb_new();
    for (int i = 0; i < (int)N_MK; i += N_VARIANTS) {
        int v, dt, kind;
        uint64_t d, m = MK_M, n = MK_N;
        decode(i, &v, &dt, &kind, &d);
        double *x = dalloc(m * d), *y = dalloc(n * d);
        nt_pw_fill(kind, x, m, y, n, d);
        free(to_dtype(dt, x, m * d));
        free(to_dtype(dt, y, n * d));
        char ms[32], ns[32], ds[32];
        snprintf(ms, sizeof ms, "%d", MK_M);
        snprintf(ns, sizeof ns, "%d", MK_N);
        snprintf(ds, sizeof ds, "%llu", (unsigned long long)d);
        for (v = 0; v < N_VARIANTS; v++) {
            const char *args[] = {"pairwise", mk_scipy[v], ms, ns, ds, "@0", "@1", NULL};
            mk_case[i + v].x = x;
            mk_case[i + v].y = y;
            mk_case[i + v].scipy = rb_add(refs, args, x, m * d, y, n * d, m * n);
            const char *kargs[] = {"knn", mk_scipy[v], ms, ns, ds, "4", "@0", "@1", NULL};
            mk_case[i + v].knn = rb_add(refs, kargs, x, m * d, y, n * d, m * n + 2 * m * 4);
            args[0] = "pairwise_exact";
            args[1] = mk_exact[v];
            mk_case[i + v].exact = rb_add(refs, args, x, m * d, y, n * d, m * n);
        }
    }
    rb_run(refs);
}

static void mk_release(void)
{
    for (int i = 0; i < (int)N_MK; i += N_VARIANTS)
        free(mk_case[i].x), free(mk_case[i].y);
    memset(mk_case, 0, sizeof mk_case);
    rb_free(refs);
    refs = NULL;
}

/* Every element of got (m x n) within tol of ref, tol per element from
 * nt_pairwise_acc_p (nacc times it) plus extra units of |ref|. */
static void check_all(int dt, int metric, double p, uint64_t d, const double *got,
                      const double *ref, int nacc, double extra_u, const char *what)
{
    for (size_t k = 0; k < (size_t)MK_M * MK_N; k++) {
        double tol = nt_tol(dt, 1, nacc, ref[k], nt_pairwise_acc_p(metric, p, d, ref[k])) +
                     extra_u * NT_U * fabs(ref[k]);
        if (!(fabs(got[k] - ref[k]) <= tol))
            ck_abort_msg("%s: element %zu is %.17g, reference %.17g (error %.3g, bound %.3g)", what,
                         k, got[k], ref[k], fabs(got[k] - ref[k]), tol);
    }
}

START_TEST(pairwise_vs_ref)
{
    int v, dt, kind;
    uint64_t d, m = MK_M, n = MK_N;
    decode(_i, &v, &dt, &kind, &d);
    double p;
    int metric = variant_metric(v, &p);
    double *x = dalloc(m * d), *y = dalloc(n * d), *got = dalloc(m * n);
    memcpy(x, mk_case[_i].x, m * d * sizeof *x);
    memcpy(y, mk_case[_i].y, n * d * sizeof *y);
    void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
    void *out = malloc(m * n * dt_size(dt));
    ck_assert_int_eq(gpuq_cpu_pairwise(dt, metric, p, 0, xi, yi, m, n, d, out), GPUQ_K_OK);
    for (size_t k = 0; k < m * n; k++)
        got[k] = out_at(dt, out, k);
    char what[128];
    snprintf(what, sizeof what, "%s of %s, %s, d=%llu, vs exact", mk_scipy[v],
             nt_pw_kind_name(kind), dt == GPUQ_K_F32 ? "f32" : "f64", (unsigned long long)d);
    check_all(dt, metric, p, d, got, rb_get(refs, mk_case[_i].exact), 1, 0.0, what);
    /* scipy's root pow(s, 1/p): up to |ln s| / p = |ln dist| more units */
    const double *sp = rb_get(refs, mk_case[_i].scipy);
    double worst_ln = 0.0;
    for (size_t k = 0; k < m * n; k++)
        worst_ln = fmax(worst_ln, sp[k] > 0.0 ? fabs(log(sp[k])) : 0.0);
    snprintf(what, sizeof what, "%s of %s, %s, d=%llu, vs scipy", mk_scipy[v],
             nt_pw_kind_name(kind), dt == GPUQ_K_F32 ? "f32" : "f64", (unsigned long long)d);
    check_all(dt, metric, p, d, got, sp, 2, worst_ln + 2.0, what);
    free(x), free(y), free(got), free(xi), free(yi), free(out);
}
END_TEST

START_TEST(knn_vs_scipy)
{
    int v, dt, kind;
    uint64_t d, m = MK_M, n = MK_N, k = 4;
    decode(_i, &v, &dt, &kind, &d);
    double p;
    int metric = variant_metric(v, &p);
    double *x = dalloc(m * d), *y = dalloc(n * d), *got_d = dalloc(k);
    memcpy(x, mk_case[_i].x, m * d * sizeof *x);
    memcpy(y, mk_case[_i].y, n * d * sizeof *y);
    void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
    void *dist = malloc(m * k * dt_size(dt));
    int64_t *idx = malloc(m * k * sizeof *idx), ref_i[4];
    unsigned char *seen = calloc(n, 1);
    ck_assert(dist && idx && seen);
    ck_assert_int_eq(gpuq_cpu_knn(dt, metric, p, 0, xi, yi, m, n, d, k, dist, idx), GPUQ_K_OK);
    const double *ref = rb_get(refs, mk_case[_i].knn);
    const double *full = ref, *ref_if = ref + m * n, *ref_d = ref_if + m * k;
    kc_minkowski_p = p;
    /* nacc 4: scipy's root adds up to |ln dist| (< 30 here) units */
    kc_params kp = {dt, metric, 1, 4, n, d, k};
    for (uint64_t i = 0; i < m; i++) {
        for (uint64_t t = 0; t < k; t++) {
            got_d[t] = out_at(dt, dist, i * k + t);
            ref_i[t] = (int64_t)ref_if[i * k + t];
        }
        char why[256];
        int bad = kc_check_row(&kp, got_d, idx + i * k, full + i * n, ref_i, ref_d + i * k, seen,
                               why, sizeof why);
        ck_assert_msg(!bad, "knn %s of %s, %s, d=%llu, row %llu: %s", mk_scipy[v],
                      nt_pw_kind_name(kind), dt == GPUQ_K_F32 ? "f32" : "f64",
                      (unsigned long long)d, (unsigned long long)i, why);
    }
    free(x), free(y), free(got_d), free(xi), free(yi), free(dist), free(idx), free(seen);
}
END_TEST

/* p = 1, 2 and inf are manhattan's, euclidean's and chebyshev's bits. */
START_TEST(minkowski_special_p)
{
    uint64_t m = 5, n = 6, d = 37;
    double *x = dalloc(m * d), *y = dalloc(n * d);
    nt_pw_fill(NT_PW_MIXED, x, m, y, n, d);
    for (int t = 0; t < 2; t++) {
        int dt = dts[t];
        void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
        size_t bytes = m * n * dt_size(dt);
        void *a = malloc(bytes), *b = malloc(bytes);
        static const int same[3] = {GPUQ_K_MANHATTAN, GPUQ_K_EUCLIDEAN, GPUQ_K_CHEBYSHEV};
        static const double ps[3] = {1.0, 2.0, INFINITY};
        for (int s = 0; s < 3; s++) {
            ck_assert_int_eq(gpuq_cpu_pairwise(dt, GPUQ_K_MINKOWSKI, ps[s], 0, xi, yi, m, n, d, a),
                             GPUQ_K_OK);
            ck_assert_int_eq(gpuq_cpu_pairwise(dt, same[s], 2.0, 0, xi, yi, m, n, d, b), GPUQ_K_OK);
            ck_assert_msg(memcmp(a, b, bytes) == 0, "minkowski p=%g differs from metric %d", ps[s],
                          same[s]);
        }
        free(xi), free(yi), free(a), free(b);
    }
    free(x), free(y);
}
END_TEST

/* By hand: chebyshev and minkowski of small integers, NaN and inf. */
START_TEST(metric_hand)
{
    const double x[4] = {0, 0, 1, 2}, y[4] = {3, 4, 0, 0};
    double o[4];
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_CHEBYSHEV, 2.0, 0, x, y, 2, 2, 2, o),
                     GPUQ_K_OK);
    ck_assert(o[0] == 4.0 && o[1] == 0.0 && o[2] == 2.0 && o[3] == 2.0);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_MINKOWSKI, 3.0, 0, x, y, 2, 2, 2, o),
                     GPUQ_K_OK);
    ck_assert(fabs(o[0] - cbrt(91.0)) <= 8 * NT_U * o[0] && o[1] == 0.0);
    ck_assert(fabs(o[2] - cbrt(16.0)) <= 8 * NT_U * o[2] &&
              fabs(o[3] - cbrt(9.0)) <= 8 * NT_U * o[3]);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_MINKOWSKI, 0.5, 0, x, y, 2, 2, 2, o),
                     GPUQ_K_OK);
    ck_assert(fabs(o[0] - pow(sqrt(3.0) + 2.0, 2.0)) <= 8 * NT_U * o[0]);
    /* NaN propagates (numpy's max(abs(x - y)); scipy's cdist skips it), inf is inf */
    const double xn[3] = {NAN, 0, 5}, yn[3] = {1, 5, 1}, xi[3] = {INFINITY, 0, 0};
    for (int metric = GPUQ_K_CHEBYSHEV; metric <= GPUQ_K_MINKOWSKI; metric++) {
        ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, metric, 1.5, 0, xn, yn, 1, 1, 3, o),
                         GPUQ_K_OK);
        ck_assert(isnan(o[0]));
        ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, metric, 1.5, 0, xi, yn, 1, 1, 3, o),
                         GPUQ_K_OK);
        ck_assert(o[0] == INFINITY);
    }
}
END_TEST

/* mm_root within (6 + 1/p) units of long double's powl over 2^-1000 ..
 * 2^1000 (powl: 64-bit significand, ~2^-63 relative). */
START_TEST(root_accuracy)
{
    static const double ps[] = {0.5, 1.5, 3.0, 0.1, 7.3, 1.0000001, 0.002, 40.0};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        double p = ps[i], worst = 0.0;
        for (int e = -1000; e <= 1000; e += 7) {
            double f;
            tu_rand_fill_f64(&f, 1, 0.5, 1.0);
            double s = ldexp(f, e), r = mm_root(s, p);
            long double ex = powl((long double)s, 1.0L / (long double)p);
            if (ex > 1e300L || ex < 1e-300L)
                continue;
            double err = (double)(fabsl((long double)r - ex) / ex) / NT_U;
            worst = fmax(worst, err);
        }
        ck_assert_msg(worst <= 6.0 + 1.0 / p, "mm_root p=%g: %.3g units", p, worst);
    }
    ck_assert(mm_root(0.0, 1.5) == 0.0 && mm_root(INFINITY, 3.0) == INFINITY);
    ck_assert(isnan(mm_root(NAN, 0.5)));
    ck_assert(mm_root(0x1p1000, 0.1) == INFINITY && mm_root(0x1p-1000, 0.1) == 0.0);
}
END_TEST

/* on_zero "nan": a zero vector's cosine distances are NaN, sorted last by
 * kNN; the other modes as before (1.0; GPUQ_K_E_ZERO). */
START_TEST(cosine_on_zero_nan)
{
    const double x[6] = {1, 2, 3, 0, 0, 0}, y[9] = {3, 2, 1, 0, 0, 0, 1, 1, -1};
    double o[6], dd[6];
    int64_t ii[6];
    ck_assert_int_eq(
        gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_NAN, x, y, 2, 3, 3, o),
        GPUQ_K_OK);
    ck_assert(fabs(o[0] - (1.0 - 10.0 / 14.0)) < 1e-15 && isnan(o[1]) && fabs(o[2] - 1.0) < 1e-15);
    ck_assert(isnan(o[3]) && isnan(o[4]) && isnan(o[5]));
    const float xf[6] = {1, 2, 3, 0, 0, 0}, yf[9] = {3, 2, 1, 0, 0, 0, 1, 1, -1};
    float of[6];
    ck_assert_int_eq(
        gpuq_cpu_pairwise(GPUQ_K_F32, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_NAN, xf, yf, 2, 3, 3, of),
        GPUQ_K_OK);
    ck_assert(isnan(of[1]) && isnan(of[3]) && !isnan(of[0]) && !isnan(of[2]));
    ck_assert_int_eq(
        gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_ZERO, x, y, 2, 3, 3, o),
        GPUQ_K_OK);
    ck_assert(o[1] == 1.0 && o[3] == 1.0);
    ck_assert_int_eq(
        gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_NAN, x, y, 2, 3, 3, 3, dd, ii),
        GPUQ_K_OK);
    ck_assert(ii[0] == 0 && ii[1] == 2 && ii[2] == 1 && isnan(dd[2]) && !isnan(dd[1]));
    ck_assert(ii[3] == 0 && ii[4] == 1 && ii[5] == 2 && isnan(dd[3]) && isnan(dd[5]));
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, GPUQ_K_ON_ZERO_ERROR, x, y, 2, 3,
                                  3, 3, dd, ii),
                     GPUQ_K_E_ZERO);
}
END_TEST

START_TEST(bad_p_and_mode)
{
    const double x[4] = {1, 2, 3, 4};
    double o[4], dd[2];
    int64_t ii[2];
    static const double bad[] = {0.0, -0.0, -1.0, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(
            gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_MINKOWSKI, bad[i], 0, x, x, 2, 2, 2, o),
            GPUQ_K_E_ARG);
        ck_assert_int_eq(
            gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_MINKOWSKI, bad[i], 0, x, x, 2, 2, 2, 1, dd, ii),
            GPUQ_K_E_ARG);
        /* p is minkowski's alone: the kernels ignore it for the others */
        ck_assert_int_eq(
            gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_CHEBYSHEV, bad[i], 0, x, x, 2, 2, 2, o),
            GPUQ_K_OK);
    }
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_MINKOWSKI, 1e-300, 0, x, x, 2, 2, 2, o),
                     GPUQ_K_OK);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 3, x, x, 2, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, -1, x, x, 2, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_knn(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 3, x, x, 2, 2, 2, 1, dd, ii),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_METRIC_COUNT, 2.0, 0, x, x, 2, 2, 2, o),
                     GPUQ_K_E_ARG);
}
END_TEST

static Suite *metric_suite(void)
{
    Suite *s = suite_create("metric_ref");
    TCase *tc = tcase_create("vs_reference");
    tcase_add_unchecked_fixture(tc, mk_prepare, mk_release);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, pairwise_vs_ref, 0, (int)N_MK);
    tcase_add_loop_test(tc, knn_vs_scipy, 0, (int)N_MK);
    suite_add_tcase(s, tc);

    tc = tcase_create("hand");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, minkowski_special_p);
    tcase_add_test(tc, metric_hand);
    tcase_add_test(tc, root_accuracy);
    tcase_add_test(tc, cosine_on_zero_nan);
    tcase_add_test(tc, bad_p_and_mode);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tu_seed();
    return tu_run_suite(metric_suite());
}
