/* test_e2e_ops.c - every op, method and dtype through a real gpuqd and libgpuq,
 * against numpy/scipy references (tests/ref/ref_ops.py), on fresh random input.
 * normalize's numerics (case "numerics") element by element against the
 * exact reference: the zscore of 1000 + N(0,1), inputs plain sums get wrong,
 * rows beyond double's and float's range, and results too large for the
 * dtype (out_of_range). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"

static const char *const norm_names[] = {"sum", "l1", "l2", "minmax", "zscore"};
static const char *const metric_names[] = {"euclidean", "sqeuclidean", "cosine", "manhattan"};

/* Run through the daemon in dt, compare the result with ref (float64). */
static void check_result(gpuq_dtype dt, const void *out, const double *ref, size_t n,
                         double tol32, double tol64, const char *what)
{
    double err = dt == GPUQ_DT_F32 ? tu_rel_err_f32(out, ref, n) : tu_rel_err_f64(out, ref, n);
    double tol = dt == GPUQ_DT_F32 ? tol32 : tol64;
    ck_assert_msg(err <= tol, "%s (%s, n=%zu): rel err %g > %g", what, gpuq_dtype_name(dt), n,
                  err, tol);
}

/* Convert x (float64) into dt in a new buffer. */
static void *as_dtype(gpuq_dtype dt, const double *x, size_t n)
{
    size_t es = gpuq_dtype_size(dt);
    void *b = malloc(n * es + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_DT_F32)
            ((float *)b)[i] = (float)x[i];
        else
            ((double *)b)[i] = x[i];
    }
    return b;
}

/* The reference sees exactly the values the daemon saw (f32-rounded for f32). */
static void round_to(gpuq_dtype dt, double *x, size_t n)
{
    if (dt == GPUQ_DT_F32)
        for (size_t i = 0; i < n; i++)
            x[i] = (double)(float)x[i];
}

static void *alloc_out(gpuq_dtype dt, size_t n)
{
    void *o = malloc(n * gpuq_dtype_size(dt) + 1);
    ck_assert_ptr_nonnull(o);
    for (size_t i = 0; i < n; i++) { /* poison: every element must be written */
        if (dt == GPUQ_DT_F32)
            ((float *)o)[i] = NAN;
        else
            ((double *)o)[i] = NAN;
    }
    return o;
}

static void run_normalize(gpuq_conn *c, gpuq_dtype dt, int method, uint64_t rows, uint64_t cols,
                          int ndim, bool flat)
{
    size_t n = rows * cols;
    double *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref);
    tu_rand_fill_f64(x, n, 0.5, 10.0);
    round_to(dt, x, n);
    void *in = as_dtype(dt, x, n), *out = alloc_out(dt, n);
    int rc = gpuq_normalize(c, dt, method, flat, in, rows, cols, ndim, out);
    ck_assert_msg(rc == 0, "normalize %s: %s", norm_names[method], gpuq_errmsg(c));
    char r[32], co[32];
    snprintf(r, sizeof r, "%llu", (unsigned long long)(flat ? 1 : rows));
    snprintf(co, sizeof co, "%llu", (unsigned long long)(flat ? n : cols));
    const char *args[] = {"normalize", norm_names[method], r, co, e2e_write_f64("x", x, n), NULL};
    e2e_ref(ref, n, args);
    check_result(dt, out, ref, n, 1e-6, 1e-12, norm_names[method]);
    free(x), free(ref), free(in), free(out);
}

START_TEST(normalize_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_NORMAL);
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (int m = 0; m < GPUQ_NORM_COUNT; m++) {
            run_normalize(c, dt, m, 1, 1023, 1, false);
            run_normalize(c, dt, m, 17, 31, 2, false);
            run_normalize(c, dt, m, 6, 9, 2, true);
            if (m == GPUQ_NORM_SUM || m == GPUQ_NORM_L1 || m == GPUQ_NORM_L2)
                run_normalize(c, dt, m, 64, 1, 2, false); /* one-column rows */
        }
    gpuq_close(c);
}
END_TEST

START_TEST(pairwise_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_HIGH);
    const uint64_t dims[] = {3, 64};
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (int mt = 0; mt < GPUQ_METRIC_COUNT; mt++)
            for (int k = 0; k < 2; k++) {
                uint64_t m = 37, n = 53, d = dims[k];
                double *x = malloc(m * d * 8), *y = malloc(n * d * 8), *ref = malloc(m * n * 8);
                tu_rand_fill_f64(x, m * d, -2, 2);
                tu_rand_fill_f64(y, n * d, -2, 2);
                round_to(dt, x, m * d);
                round_to(dt, y, n * d);
                void *xi = as_dtype(dt, x, m * d), *yi = as_dtype(dt, y, n * d);
                void *out = alloc_out(dt, m * n);
                int rc = gpuq_pairwise(c, dt, mt, xi, yi, m, n, d, out);
                ck_assert_msg(rc == 0, "pairwise: %s", gpuq_errmsg(c));
                char ms[16], ns[16], ds[16];
                snprintf(ms, sizeof ms, "%llu", (unsigned long long)m);
                snprintf(ns, sizeof ns, "%llu", (unsigned long long)n);
                snprintf(ds, sizeof ds, "%llu", (unsigned long long)d);
                const char *args[] = {"pairwise", metric_names[mt], ms, ns, ds,
                                      e2e_write_f64("x", x, m * d), e2e_write_f64("y", y, n * d),
                                      NULL};
                e2e_ref(ref, m * n, args);
                check_result(dt, out, ref, m * n, 1e-5, 1e-12, metric_names[mt]);
                free(x), free(y), free(ref), free(xi), free(yi), free(out);
            }
    gpuq_close(c);
}
END_TEST

static void rand_points(double *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tu_rand_fill_f64(&p[2 * i], 1, -90, 90);
        tu_rand_fill_f64(&p[2 * i + 1], 1, -180, 180);
    }
}

START_TEST(haversine_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_LOW);
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++) {
        size_t n = 1031;
        double *a = malloc(n * 16), *b = malloc(n * 16), *ref = malloc(n * 8);
        rand_points(a, n);
        rand_points(b, n);
        round_to(dt, a, 2 * n);
        round_to(dt, b, 2 * n);
        void *ai = as_dtype(dt, a, 2 * n), *bi = as_dtype(dt, b, 2 * n), *out = alloc_out(dt, n);
        ck_assert_msg(gpuq_haversine_to(c, dt, ai, n, 30, 101, 6371.0088, out) == 0, "%s",
                      gpuq_errmsg(c));
        char ns[16];
        snprintf(ns, sizeof ns, "%zu", n);
        const char *args[] = {"haversine_to", ns, "30", "101", "6371.0088",
                              e2e_write_f64("a", a, 2 * n), NULL};
        e2e_ref(ref, n, args);
        check_result(dt, out, ref, n, 1e-6, 1e-9, "haversine_to");
        ck_assert_msg(gpuq_haversine_pair(c, dt, ai, bi, n, 1000.0, out) == 0, "%s",
                      gpuq_errmsg(c));
        const char *args2[] = {"haversine_pair", ns, "1000.0", e2e_write_f64("a", a, 2 * n),
                               e2e_write_f64("b", b, 2 * n), NULL};
        e2e_ref(ref, n, args2);
        check_result(dt, out, ref, n, 1e-6, 1e-9, "haversine_pair");
        free(a), free(b), free(ref), free(ai), free(bi), free(out);
    }
    /* A hand-computed case: a quarter of the equator. */
    double p[2] = {0, 0}, d;
    ck_assert_int_eq(gpuq_haversine_to(c, GPUQ_DT_F64, p, 1, 0, 90, 6371.0088, &d), 0);
    ck_assert_double_eq_tol(d, 6371.0088 * M_PI / 2, 1e-9);
    gpuq_close(c);
}
END_TEST

START_TEST(grid_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_NORMAL);
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++) {
        uint64_t nlat = 101, nlon = 203;
        void *out = alloc_out(dt, nlat * nlon);
        double *ref = malloc(nlat * nlon * 8);
        ck_assert_msg(gpuq_grid(c, dt, -60, 75, nlat, -170, 165, nlon, 30, 101, 6371.0088, out) ==
                          0,
                      "%s", gpuq_errmsg(c));
        const char *args[] = {"grid", "-60", "75", "101", "-170", "165", "203", "30", "101",
                              "6371.0088", NULL};
        e2e_ref(ref, nlat * nlon, args);
        check_result(dt, out, ref, nlat * nlon, 1e-6, 1e-9, "grid");
        free(out), free(ref);
    }
    /* The default grid of the issue: 1000 x 1000 to (30, 101), float64. */
    double *big = alloc_out(GPUQ_DT_F64, 1000 * 1000), *ref = malloc(8000000);
    ck_assert_int_eq(gpuq_grid(c, GPUQ_DT_F64, -90, 90, 1000, -180, 180, 1000, 30, 101,
                               6371.0088, big),
                     0);
    const char *args[] = {"grid", "-90", "90", "1000", "-180", "180", "1000", "30", "101",
                          "6371.0088", NULL};
    e2e_ref(ref, 1000 * 1000, args);
    check_result(GPUQ_DT_F64, big, ref, 1000 * 1000, 0, 1e-9, "grid default");
    free(big), free(ref);
    gpuq_close(c);
}
END_TEST

/* Normalize of a zero row is an error by default; NaN propagates. */
START_TEST(zero_and_nan)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_NORMAL);
    double z[4] = {0, 0, 0, 0}, o[4];
    for (int m = 0; m < GPUQ_NORM_COUNT; m++) {
        int rc = gpuq_normalize(c, GPUQ_DT_F64, m, false, z, 1, 4, 1, o);
        ck_assert_int_eq(rc, GPUQ_E_ZERO_NORM);
    }
    double nn[3] = {1, NAN, 2};
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, false, nn, 1, 3, 1, o), 0);
    ck_assert(isnan(o[0]) && isnan(o[1]) && isnan(o[2]));
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* ---- normalize numerics, per element against the exact result ---- */

/* ref_ops.py normalize_exact is exact but for one final rounding; the
 * daemon must be within a few ulps (float64) or the rounding to float
 * (float32) of it. */
#define ELEM_TOL64 2e-15
#define ELEM_TOL32 6.0e-8

static void check_exact(gpuq_dtype dt, const void *out, const double *x, int method, uint64_t rows,
                        uint64_t cols, const char *what)
{
    size_t n = rows * cols, w = 0;
    double *ref = malloc(n * sizeof *ref);
    char r[32], c[32];
    snprintf(r, sizeof r, "%llu", (unsigned long long)rows);
    snprintf(c, sizeof c, "%llu", (unsigned long long)cols);
    const char *args[] = {
        "normalize_exact", norm_names[method], r, c, e2e_write_f64("x", x, n), NULL};
    e2e_ref(ref, n, args);
    double err =
        dt == GPUQ_DT_F32 ? tu_elem_err_f32(out, ref, n, &w) : tu_elem_err_f64(out, ref, n, &w);
    double tol = dt == GPUQ_DT_F32 ? ELEM_TOL32 : ELEM_TOL64;
    double got = dt == GPUQ_DT_F32 ? (double)((const float *)out)[w] : ((const double *)out)[w];
    ck_assert_msg(err <= tol, "%s %s (%s): element %zu is %.17g, exact %.17g: rel err %g > %g",
                  norm_names[method], what, gpuq_dtype_name(dt), w, got, ref[w], err, tol);
    free(ref);
}

/* The case: zscore of 1000 + N(0,1), 4097 values of numpy's
 * default_rng(0), flat; as three rows (the others scaled by 2^-1000 and
 * -1e250, float64); and over 2^17 + 5 values (the CUDA backend's
 * multi-block path). Then inputs that plain sums get wrong, each method
 * and dtype, row-wise and flat. */
START_TEST(normalize_numerics)
{
    gpuq_conn *c = e2e_connect("numerics", GPUQ_PRIO_NORMAL);
    const uint64_t ns[2] = {4097, (1u << 17) + 5};
    for (int k = 0; k < 2; k++) {
        uint64_t n = ns[k];
        char nc[32];
        snprintf(nc, sizeof nc, "%llu", (unsigned long long)n);
        double *x = malloc(3 * n * sizeof *x);
        const char *gen[] = {"randn_offset", nc, "0", "1000", NULL};
        e2e_ref(x, n, gen);
        for (uint64_t j = 0; j < n; j++) {
            x[n + j] = ldexp(x[j], -1000);
            x[2 * n + j] = x[j] * -1e250;
        }
        for (int dt = GPUQ_DT_F64; dt >= GPUQ_DT_F32; dt--) { /* f64 first: round_to */
            uint64_t rows = dt == GPUQ_DT_F64 && k == 0 ? 3 : 1;
            round_to(dt, x, rows * n);
            void *in = as_dtype(dt, x, rows * n), *out = alloc_out(dt, rows * n);
            int rc =
                gpuq_normalize(c, dt, GPUQ_NORM_ZSCORE, false, in, rows, n, rows > 1 ? 2 : 1, out);
            ck_assert_msg(rc == 0, "zscore: %s", gpuq_errmsg(c));
            check_exact(dt, out, x, GPUQ_NORM_ZSCORE, rows, n, "of 1000 + N(0,1)");
            free(in), free(out);
        }
        free(x);
    }
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (int m = 0; m < GPUQ_NORM_COUNT; m++)
            for (int kind = 0; kind < TU_NORM_KINDS; kind++) {
                const uint64_t rows = 7, cols = 129;
                double x[7 * 129];
                tu_norm_fill(kind, dt == GPUQ_DT_F32, x, rows, cols);
                round_to(dt, x, rows * cols);
                void *in = as_dtype(dt, x, rows * cols), *out = alloc_out(dt, rows * cols);
                for (int flat = 0; flat < 2; flat++) {
                    int rc = gpuq_normalize(c, dt, m, flat, in, rows, cols, 2, out);
                    ck_assert_msg(rc == 0, "%s of %s: %s", norm_names[m], tu_norm_kind_names[kind],
                                  gpuq_errmsg(c));
                    char what[64];
                    snprintf(what, sizeof what, "of %s%s", tu_norm_kind_names[kind],
                             flat ? " (flat)" : "");
                    check_exact(dt, out, x, m, flat ? 1 : rows, flat ? rows * cols : cols, what);
                }
                free(in), free(out);
            }
    gpuq_close(c);
}
END_TEST

/* Rows whose sums or squares leave double's or float's range (testutil's
 * table): results exact to a rounding, not errors. */
START_TEST(normalize_extremes)
{
    gpuq_conn *c = e2e_connect("numerics", GPUQ_PRIO_NORMAL);
    for (size_t k = 0; k < tu_norm_n_extremes; k++) {
        const tu_norm_case *e = &tu_norm_extremes[k];
        void *in = as_dtype(e->dt, e->x, (size_t)e->n), *out = alloc_out(e->dt, (size_t)e->n);
        int rc = gpuq_normalize(c, e->dt, e->method, false, in, 1, (uint64_t)e->n, 1, out);
        ck_assert_msg(rc == 0, "case %zu: %s", k, gpuq_errmsg(c));
        double tol = e->dt == GPUQ_DT_F32 ? 0x1p-24 : 0x1p-52;
        for (int j = 0; j < e->n; j++) {
            double v = e->dt == GPUQ_DT_F32 ? (double)((float *)out)[j] : ((double *)out)[j];
            ck_assert_msg(fabs(v - e->want[j]) <= tol * fabs(e->want[j]),
                          "case %zu, %s [%d] = %.17g, want %.17g", k, norm_names[e->method], j, v,
                          e->want[j]);
        }
        free(in), free(out);
    }
    gpuq_close(c);
}
END_TEST

/* A result too large for the dtype (from finite input) is out_of_range,
 * naming the row, with on_zero "zero" too; the daemon goes on serving. */
START_TEST(normalize_overflow)
{
    gpuq_conn *c = e2e_connect("numerics", GPUQ_PRIO_NORMAL);
    const double x64[6] = {1, 2, 3, 1e300, -1e300, 1e-300};
    const float x32[6] = {1, 2, 3, 1e38f, -1e38f, 1e-30f};
    double o[6];
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (int zero_ok = 0; zero_ok < 2; zero_ok++) {
            gpuq_request r;
            gpuq_request_init(&r);
            r.op = GPUQ_OP_NORMALIZE;
            r.dtype = dt;
            r.ndim_a = 2;
            r.shape_a[0] = 2;
            r.shape_a[1] = 3;
            r.method = GPUQ_NORM_SUM;
            r.zero_ok = zero_ok;
            const void *in = dt == GPUQ_DT_F32 ? (const void *)x32 : (const void *)x64;
            size_t bytes = 6 * gpuq_dtype_size(dt);
            uint64_t id;
            ck_assert_int_eq(gpuq_submit(c, &r, in, bytes, NULL, 0, o, sizeof o, &id), 0);
            gpuq_reply rep;
            ck_assert_int_eq(gpuq_wait(c, &rep), GPUQ_E_OUT_OF_RANGE);
            ck_assert_int_eq(rep.status, GPUQ_E_OUT_OF_RANGE);
            ck_assert_uint_eq(rep.id, id);
            ck_assert_msg(strstr(rep.message, "row 1") && strstr(rep.message, "too large"),
                          "message: %s", rep.message);
        }
    /* the same rows under l2 are fine */
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, false, x64, 2, 3, 2, o), 0);
    ck_assert(fabs(o[3] - M_SQRT1_2) <= 0x1p-52);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* A request that asks for timing gets queue/H2D/kernel/D2H/total microseconds;
 * one that does not, gets none. */
START_TEST(timing_when_asked)
{
    gpuq_conn *c = e2e_connect("timing", GPUQ_PRIO_NORMAL);
    static double x[1 << 16], y[1 << 16];
    for (int j = 0; j < (1 << 16); j++)
        x[j] = j + 1;
    for (int ask = 0; ask < 2; ask++) {
        gpuq_request r;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_NORMALIZE;
        r.dtype = GPUQ_DT_F64;
        r.ndim_a = 1;
        r.shape_a[0] = 1 << 16;
        r.timing = ask;
        uint64_t id;
        ck_assert_int_eq(gpuq_submit(c, &r, x, sizeof x, NULL, 0, y, sizeof y, &id), 0);
        gpuq_reply rep;
        ck_assert_int_eq(gpuq_wait(c, &rep), 0);
        ck_assert_int_eq(rep.has_timing, ask);
        if (!ask)
            continue;
        const gpuq_timing *t = &rep.timing;
        ck_assert(t->queue_us >= 0 && t->h2d_us >= 0 && t->kernel_us >= 0 && t->d2h_us >= 0);
        ck_assert(t->kernel_us > 0);
        ck_assert(t->total_us >= t->kernel_us);
        if (strcmp(gpuq_info(c)->backend, "cuda") == 0)
            ck_assert(t->h2d_us > 0 && t->d2h_us > 0); /* 512 KiB each way */
    }
    gpuq_close(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_ops");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, normalize_all);
    tcase_add_test(tc, pairwise_all);
    tcase_add_test(tc, haversine_all);
    tcase_add_test(tc, grid_all);
    tcase_add_test(tc, zero_and_nan);
    tcase_add_test(tc, timing_when_asked);
    suite_add_tcase(s, tc);

    tc = tcase_create("numerics");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, normalize_numerics);
    tcase_add_test(tc, normalize_extremes);
    tcase_add_test(tc, normalize_overflow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (e2e_skip_without_gpu())
        return EXIT_SUCCESS;
    return tu_run_suite(suite());
}
