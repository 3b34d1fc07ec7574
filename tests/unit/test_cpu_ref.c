/* SPDX-License-Identifier: Apache-2.0 */
/* test_cpu_ref.c - the CPU reference ops against numpy/scipy and exact results.
 *
 * Every comparison is per element (tests/numtol.h: a whole-array norm
 * dilutes one bad element by sqrt(N)), with a bound derived from the
 * accumulation in double that gpuq_kernels.h promises, on fresh random
 * input (seed printed by testutil; TU_SEED repeats it), in float32 and
 * float64 (the reference sees the values rounded to float32 when float32
 * is tested):
 *  - normalize, every method, mixed signs, against numpy, and against
 *    ref_ops.py normalize_exact (exact rational arithmetic, one final
 *    rounding) on inputs that plain sums get wrong: large offsets,
 *    cancellation, magnitudes from 1e-300 to 1e300, the zscore of
 *    1000 + N(0,1); rows whose sums or squares leave double's or float's
 *    range; results too large for the dtype (GPUQ_K_E_OVERFLOW);
 *  - pairwise, every metric, against scipy cdist and against ref_ops.py
 *    pairwise_exact, on U(-1, 1), mixed signs over 1e-3..1e3, 1e4 + noise
 *    (cosine distances of 1e-9) and 1e-6..1e6;
 *  - pairwise (euclidean, sqeuclidean) and kNN on issue 30's 1e4 + N(0,1)
 *    rows with copies among them, against the direct sum in long double
 *    (pw_offset.h): 1e-12 relative per element in float64, exact zeros;
 *  - haversine and grid against numpy: the whole sphere, and points and
 *    pairs a few km apart at negative latitudes and longitudes (across the
 *    antimeridian too), where an angle kept in float shows at once.
 * The float32 bounds are the final rounding plus the double accumulation,
 * so an accumulator kept in float (or in the input type) fails them.
 * Then hand-computed values, and the error contract: GPUQ_K_E_ZERO, zero_ok,
 * GPUQ_K_E_RANGE, GPUQ_K_E_ARG, NaN propagation.
 *
 * Speed: python and numpy/scipy start-up cost ~0.5 s a call, so each test
 * case (tcase) builds all its inputs in an unchecked fixture (run once, in
 * the parent process, before the case's tests fork) and gets every
 * reference from one ref_ops.py batch (refbatch.h); the tests then run the
 * ops and compare. Hot loops assert once, not per element: each ck_assert
 * is a write(2) to Check's pipe.
 */
#include "gpuq_kernels.h"
#include "norm_math.h"
#include "numtol.h"
#include "pw_offset.h"
#include "refbatch.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const method_names[] = {"sum", "l1", "l2", "minmax", "zscore"};
static const char *const metric_names[] = {"euclidean", "sqeuclidean", "cosine", "manhattan"};
static const int dts[] = {GPUQ_K_F32, GPUQ_K_F64};

_Static_assert(NT_F32 == GPUQ_K_F32 && NT_F64 == GPUQ_K_F64 && NT_EUCLIDEAN == GPUQ_K_EUCLIDEAN &&
                   NT_SQEUCLIDEAN == GPUQ_K_SQEUCLIDEAN && NT_COSINE == GPUQ_K_COSINE &&
                   NT_MANHATTAN == GPUQ_K_MANHATTAN,
               "numtol.h numbers dtypes and metrics as gpuq_kernels.h");

#define R_EARTH 6371.0088
#define PI 3.14159265358979323846

/* ---- helpers ---- */

static const char *dt_name(int dt)
{
    return dt == GPUQ_K_F32 ? "f32" : "f64";
}

static size_t dt_size(int dt)
{
    return dt == GPUQ_K_F32 ? sizeof(float) : sizeof(double);
}

/* Round x to dt in place (so the reference sees what the op sees), and
 * return a malloc'd copy in dt. */
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

/* out (n values of dt) as float64, malloc'd. */
static double *as_f64(int dt, const void *out, size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++)
        d[i] = out_at(dt, out, i);
    return d;
}

static double *dalloc(size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    return d;
}

static void u64s(char *buf, uint64_t v)
{
    snprintf(buf, 32, "%llu", (unsigned long long)v);
}

/* Per element: out (n values of dt) against ref under tol (numtol.h). */
static void check_tol(int dt, const void *out, const double *ref, const double *tol, size_t n,
                      const char *what)
{
    double *got = as_f64(dt, out, n);
    size_t w = 0;
    double r = nt_worst(got, ref, tol, n, &w);
    ck_assert_msg(r <= 1.0,
                  "%s (%s): element %zu is %.17g, reference %.17g: error %.3g is %.3g times the "
                  "bound %.3g",
                  what, dt_name(dt), w, got[w], ref[w], fabs(got[w] - ref[w]), r, tol[w]);
    free(got);
}

/* The references of the running test case: filled by its unchecked
 * fixture (refbatch.h), read by its tests. */
static rb_batch *refs;

static int refs_add(const char *const *args, const double *in0, size_t n0, const double *in1,
                    size_t n1, size_t n)
{
    return rb_add(refs, args, in0, n0, in1, n1, n);
}

static const double *refs_get(int job)
{
    return rb_get(refs, job);
}

/* ---- normalize vs numpy ---- */

static const struct {
    uint64_t rows, cols;
} norm_shapes[] = {{1, 1}, {1, 31}, {1, 1023}, {5, 7}, {64, 1}};
#define N_SHAPES (sizeof norm_shapes / sizeof norm_shapes[0])
#define N_NORM_NUMPY (10 * N_SHAPES)

/* _i enumerates method x dtype x shape; inputs U(-10, 10), signs mixed. */
static struct {
    double *x; /* rounded to the dtype */
    int job;   /* -1: no reference (a constant row's error) */
} norm_numpy[N_NORM_NUMPY];

static int norm_numpy_no_ref(int method, uint64_t cols)
{
    return cols == 1 && (method == GPUQ_K_MINMAX || method == GPUQ_K_ZSCORE);
}

static void norm_numpy_prepare(void)
{
    for (int i = 0; i < (int)N_NORM_NUMPY; i++) {
        int method = i % 5, dt = dts[(i / 5) % 2];
        uint64_t rows = norm_shapes[i / 10].rows, cols = norm_shapes[i / 10].cols;
        size_t n = rows * cols;
        double *x = dalloc(n);
        tu_rand_fill_f64(x, n, -10.0, 10.0);
        free(to_dtype(dt, x, n));
        norm_numpy[i].x = x;
        norm_numpy[i].job = -1;
        if (norm_numpy_no_ref(method, cols))
            continue;
        char r[32], c[32];
        u64s(r, rows), u64s(c, cols);
        const char *args[] = {"normalize", method_names[method], r, c, "@0", NULL};
        norm_numpy[i].job = refs_add(args, x, n, NULL, 0, n);
    }
}

/* numpy's own error on a row a[cols] (its sums in double, any order, no
 * compensation), for element value ref: sum is off by cols*u*sum|a|, i.e.
 * relative to the result by that over |sum a| (the row's condition); l1
 * and l2 by cols*u relative; minmax by a few roundings; zscore's mean by
 * cols*u*max|a| absolute, which the division by the spread magnifies. */
static double numpy_norm_err(int method, const double *a, uint64_t cols, double ref)
{
    double s = 0, s1 = 0, mx = 0, n = (double)cols, u = NT_U;
    for (uint64_t j = 0; j < cols; j++) {
        s += a[j];
        s1 += fabs(a[j]);
        mx = fmax(mx, fabs(a[j]));
    }
    switch (method) {
    case GPUQ_K_SUM:
        return (n + 4) * u * (s1 / fabs(s)) * fabs(ref);
    case GPUQ_K_L1:
    case GPUQ_K_L2:
        return (n + 4) * u * fabs(ref);
    case GPUQ_K_MINMAX:
        return 8 * u * fabs(ref);
    default: {
        double m = s / n, v = 0;
        for (uint64_t j = 0; j < cols; j++)
            v += (a[j] - m) * (a[j] - m);
        return (n + 4) * u * (mx / sqrt(v / n) + fabs(ref));
    }
    }
}

START_TEST(normalize_vs_numpy)
{
    int method = _i % 5, dt = dts[(_i / 5) % 2];
    uint64_t rows = norm_shapes[_i / 10].rows, cols = norm_shapes[_i / 10].cols;
    size_t n = rows * cols;
    const double *x = norm_numpy[_i].x;
    double *xr = dalloc(n);
    memcpy(xr, x, n * sizeof *x);
    void *in = to_dtype(dt, xr, n), *out = malloc(n * dt_size(dt));
    int rc = gpuq_cpu_normalize(dt, method, 0, in, out, rows, cols);
    if (norm_numpy_no_ref(method, cols)) {
        /* one-value rows are constant: no spread to divide by */
        ck_assert_int_eq(rc, GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 1, in, out, rows, cols), GPUQ_K_OK);
        for (size_t i = 0; i < n; i++)
            ck_assert(out_at(dt, out, i) == 0.0);
    } else {
        ck_assert_int_eq(rc, GPUQ_K_OK);
        const double *ref = refs_get(norm_numpy[_i].job);
        double *tol = dalloc(n);
        /* ours: within a few ulps of exact (normalize_vs_exact); numpy's own
         * error on top */
        for (size_t i = 0; i < n; i++)
            tol[i] = nt_tol(dt, 1, 1, ref[i],
                            16 * NT_U * fabs(ref[i]) +
                                numpy_norm_err(method, x + (i / cols) * cols, cols, ref[i]));
        char what[96];
        snprintf(what, sizeof what, "%s of U(-10, 10) %llux%llu vs numpy", method_names[method],
                 (unsigned long long)rows, (unsigned long long)cols);
        check_tol(dt, out, ref, tol, n, what);
        free(tol);
    }
    free(xr), free(in), free(out);
}
END_TEST

/* ---- pairwise vs scipy cdist and the exact result ---- */

#define PW_M 13
#define PW_N 11
static const uint64_t pw_dims[] = {5, 100};
#define N_PW_DIMS (sizeof pw_dims / sizeof pw_dims[0])
#define N_PW (4 * 2 * NT_PW_KINDS * N_PW_DIMS)

/* _i enumerates metric x dtype x kind x d. */
static struct {
    double *x, *y; /* rounded to the dtype; shared by the four metrics */
    int scipy, exact;
} pw_case[N_PW];

static void pw_prepare(void)
{
    for (int i = 0; i < (int)N_PW; i += 4) {
        int dt = dts[(i / 4) % 2], kind = (i / 8) % NT_PW_KINDS;
        uint64_t m = PW_M, n = PW_N, d = pw_dims[i / (8 * NT_PW_KINDS)];
        double *x = dalloc(m * d), *y = dalloc(n * d);
        nt_pw_fill(kind, x, m, y, n, d);
        free(to_dtype(dt, x, m * d));
        free(to_dtype(dt, y, n * d));
        char ms[32], ns[32], ds[32];
        u64s(ms, m), u64s(ns, n), u64s(ds, d);
        for (int metric = 0; metric < 4; metric++) {
            const char *args[] = {"pairwise", metric_names[metric], ms, ns, ds, "@0", "@1", NULL};
            pw_case[i + metric].x = x;
            pw_case[i + metric].y = y;
            pw_case[i + metric].scipy = refs_add(args, x, m * d, y, n * d, m * n);
            args[0] = "pairwise_exact";
            pw_case[i + metric].exact = refs_add(args, x, m * d, y, n * d, m * n);
        }
    }
}

START_TEST(pairwise_vs_ref)
{
    int metric = _i % 4, dt = dts[(_i / 4) % 2], kind = (_i / 8) % NT_PW_KINDS;
    uint64_t m = PW_M, n = PW_N, d = pw_dims[_i / (8 * NT_PW_KINDS)];
    double *x = dalloc(m * d), *y = dalloc(n * d), *tol = dalloc(m * n);
    memcpy(x, pw_case[_i].x, m * d * sizeof *x);
    memcpy(y, pw_case[_i].y, n * d * sizeof *y);
    void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
    void *out = malloc(m * n * dt_size(dt));
    ck_assert_int_eq(gpuq_cpu_pairwise(dt, metric, 2.0, 0, xi, yi, m, n, d, out), GPUQ_K_OK);
    const double *ref = refs_get(pw_case[_i].exact);
    char what[128];
    for (size_t k = 0; k < m * n; k++)
        tol[k] = nt_tol(dt, 1, 1, ref[k], nt_pairwise_acc(metric, d, ref[k]));
    snprintf(what, sizeof what, "%s of %s, d=%llu, vs exact", metric_names[metric],
             nt_pw_kind_name(kind), (unsigned long long)d);
    check_tol(dt, out, ref, tol, m * n, what);
    ref = refs_get(pw_case[_i].scipy);
    for (size_t k = 0; k < m * n; k++)
        tol[k] = nt_tol(dt, 1, 2, ref[k], nt_pairwise_acc(metric, d, ref[k]));
    snprintf(what, sizeof what, "%s of %s, d=%llu, vs scipy", metric_names[metric],
             nt_pw_kind_name(kind), (unsigned long long)d);
    check_tol(dt, out, ref, tol, m * n, what);
    free(x), free(y), free(tol), free(xi), free(yi), free(out);
}
END_TEST

/* ---- pairwise and kNN on 1e4 + N(0,1) (issue 30 item 7) ---- */

/* Shapes: the issue's, one with odd d, one with a few 64-row tiles. */
static const uint64_t po_shapes[][3] = {{257, 129, 64}, {130, 67, 203}, {1031, 517, 64}};
#define N_PO_SHAPES (sizeof po_shapes / sizeof po_shapes[0])

/* _i enumerates dtype x (euclidean, sqeuclidean) x shape: every element
 * within PO_REL (float64) or PO_REL32 (float32) of the long double direct
 * sum, identical rows exactly 0 (pw_offset.h), the bar the CUDA backend
 * is held to on the same data (test_gpu_kernels). */
START_TEST(pairwise_offset_normal)
{
    int dt = dts[_i % 2], sq = (_i / 2) % 2;
    const uint64_t *sh = po_shapes[_i / 4];
    uint64_t m = sh[0], n = sh[1], d = sh[2];
    double *x = dalloc(m * d), *y = dalloc(n * d);
    ck_assert_uint_gt(po_fill(x, m, y, n, d), 0);
    void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
    void *out = malloc(m * n * dt_size(dt));
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(gpuq_cpu_pairwise(dt, sq ? GPUQ_K_SQEUCLIDEAN : GPUQ_K_EUCLIDEAN, 2.0, 0, xi,
                                       yi, m, n, d, out),
                     GPUQ_K_OK);
    double *got = as_f64(dt, out, m * n);
    char msg[512];
    size_t zeros = 0;
    int bad = po_check_pairwise(sq, dt == GPUQ_K_F64 ? PO_REL : PO_REL32, x, y, m, n, d, got,
                                &zeros, msg, sizeof msg);
    ck_assert_msg(!bad, "%s %s %llux%llux%llu: %s", dt_name(dt), metric_names[sq],
                  (unsigned long long)m, (unsigned long long)n, (unsigned long long)d, msg);
    ck_assert_uint_gt(zeros, 0);
    free(x), free(y), free(xi), free(yi), free(out), free(got);
}
END_TEST

/* _i enumerates dtype x (euclidean, sqeuclidean): kNN's distances and
 * indices on the shape, k = 7 (pw_offset.h's rules). */
START_TEST(knn_offset_normal)
{
    int dt = dts[_i % 2], sq = (_i / 2) % 2;
    uint64_t m = 257, n = 129, d = 64, k = 7;
    double *x = dalloc(m * d), *y = dalloc(n * d);
    po_fill(x, m, y, n, d);
    void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
    void *dist = malloc(m * k * dt_size(dt));
    int64_t *idx = malloc(m * k * sizeof *idx);
    ck_assert(dist && idx);
    ck_assert_int_eq(gpuq_cpu_knn(dt, sq ? GPUQ_K_SQEUCLIDEAN : GPUQ_K_EUCLIDEAN, 2.0, 0, xi, yi, m,
                                  n, d, k, dist, idx),
                     GPUQ_K_OK);
    double *got = as_f64(dt, dist, m * k);
    char msg[512];
    int bad = po_check_knn(sq, dt == GPUQ_K_F64 ? PO_REL : PO_REL32, x, y, m, n, d, k, got, idx,
                           msg, sizeof msg);
    ck_assert_msg(!bad, "knn %s %s: %s", dt_name(dt), metric_names[sq], msg);
    free(x), free(y), free(xi), free(yi), free(dist), free(idx), free(got);
}
END_TEST

/* ---- haversine and grid vs numpy ---- */

#define HAV_N 1000
#define HAV_KINDS 2 /* global, near */

/* _i enumerates dtype x kind: to (30, 101) from the whole sphere and pairs
 * over it, or to (NT_NEAR_LAT, NT_NEAR_LON) from points around it and pairs
 * a few km apart (numtol.h). */
static struct {
    double *a, *b; /* rounded to the dtype */
    double lat, lon;
    int to, pair;
} hav_case[2 * HAV_KINDS];

static void hav_prepare(void)
{
    for (int i = 0; i < 2 * HAV_KINDS; i++) {
        int dt = dts[i % 2], near = i / 2;
        double *a = dalloc(2 * HAV_N), *b = dalloc(2 * HAV_N);
        double lat = near ? NT_NEAR_LAT : 30.0, lon = near ? NT_NEAR_LON : 101.0;
        if (near) {
            nt_points_near(a, HAV_N);
            nt_pairs_near(b, b + HAV_N, HAV_N / 2);
        } else {
            nt_points_global(a, HAV_N);
            nt_points_global(b, HAV_N);
        }
        free(to_dtype(dt, a, 2 * HAV_N));
        free(to_dtype(dt, b, 2 * HAV_N));
        char ns[32], hn[32], las[32], los[32];
        u64s(ns, HAV_N), u64s(hn, near ? HAV_N / 2 : HAV_N);
        snprintf(las, sizeof las, "%.17g", lat);
        snprintf(los, sizeof los, "%.17g", lon);
        const char *to[] = {"haversine_to", ns, las, los, "6371.0088", "@0", NULL};
        hav_case[i].a = a;
        hav_case[i].b = b;
        hav_case[i].lat = lat;
        hav_case[i].lon = lon;
        hav_case[i].to = refs_add(to, a, 2 * HAV_N, NULL, 0, HAV_N);
        const char *pair[] = {"haversine_pair", hn, "1000.0", "@0", "@1", NULL};
        size_t np = near ? HAV_N / 2 : HAV_N;
        hav_case[i].pair = refs_add(pair, near ? b : a, 2 * np, near ? b + 2 * np : b, 2 * np, np);
    }
}

static void hav_check(int dt, const void *out, const double *ref, size_t n, double radius,
                      const char *what)
{
    double *tol = dalloc(n);
    for (size_t k = 0; k < n; k++)
        tol[k] = nt_tol(dt, 1, 2, ref[k], nt_haversine_acc(ref[k], radius));
    check_tol(dt, out, ref, tol, n, what);
    free(tol);
}

START_TEST(haversine_vs_numpy)
{
    int dt = dts[_i % 2], near = _i / 2;
    const size_t n = HAV_N, np = near ? HAV_N / 2 : HAV_N;
    double *a = dalloc(2 * n), *b = dalloc(2 * n);
    memcpy(a, hav_case[_i].a, 2 * n * sizeof *a);
    memcpy(b, hav_case[_i].b, 2 * n * sizeof *b);
    void *ai = to_dtype(dt, a, 2 * n), *bi = to_dtype(dt, b, 2 * n), *out = malloc(n * 8);
    ck_assert_int_eq(
        gpuq_cpu_haversine_to(dt, ai, n, hav_case[_i].lat, hav_case[_i].lon, R_EARTH, out),
        GPUQ_K_OK);
    hav_check(dt, out, refs_get(hav_case[_i].to), n, R_EARTH,
              near ? "haversine_to, points around (-33.875, -70.625)" : "haversine_to, global");
    /* pairs: near ones are b's two halves, global ones a against b */
    const void *pa = near ? bi : ai;
    const void *pb = near ? (const char *)bi + 2 * np * dt_size(dt) : bi;
    ck_assert_int_eq(gpuq_cpu_haversine_pair(dt, pa, pb, np, 1000.0, out), GPUQ_K_OK);
    hav_check(dt, out, refs_get(hav_case[_i].pair), np, 1000.0,
              near ? "haversine_pair, pairs a few km apart" : "haversine_pair, global");
    free(a), free(b), free(ai), free(bi), free(out);
}
END_TEST

/* Grids per dtype: the whole world, descending, one column, one row, and a
 * box of negative latitudes and longitudes around (NT_NEAR_LAT,
 * NT_NEAR_LON) holding that point itself (linspace point 16 of 33); float64
 * also the 1000 x 1000 default grid. */
static const struct {
    const char *lat0, *lat1, *nlat, *lon0, *lon1, *nlon, *lat, *lon;
} grids[] = {
    {"-60", "75", "101", "-170", "165", "203", "30", "101"},
    {"80", "-80", "7", "10", "10", "1", "30", "101"},
    {"12.5", "40", "1", "-180", "180", "33", "30", "101"},
    {"-34", "-33.75", "33", "-70.75", "-70.5", "33", "-33.875", "-70.625"},
    {"-33.75", "-34", "33", "-70.5", "-70.75", "33", "-33.875", "-70.625"},
    {"-90", "90", "1000", "-180", "180", "1000", "30", "101"},
};
#define N_GRIDS (sizeof grids / sizeof grids[0])

static int grid_job[N_GRIDS]; /* the reference does not depend on the dtype */

static void grid_prepare(void)
{
    for (size_t g = 0; g < N_GRIDS; g++) {
        size_t n = strtoull(grids[g].nlat, NULL, 10) * strtoull(grids[g].nlon, NULL, 10);
        const char *args[] = {"grid",        grids[g].lat0, grids[g].lat1, grids[g].nlat,
                              grids[g].lon0, grids[g].lon1, grids[g].nlon, grids[g].lat,
                              grids[g].lon,  "6371.0088",   NULL};
        grid_job[g] = refs_add(args, NULL, 0, NULL, 0, n);
    }
}

START_TEST(grid_vs_numpy)
{
    int dt = dts[_i];
    for (size_t g = 0; g < N_GRIDS; g++) {
        uint64_t nlat = strtoull(grids[g].nlat, NULL, 10), nlon = strtoull(grids[g].nlon, NULL, 10);
        if (nlat * nlon > 100000 && dt == GPUQ_K_F32)
            continue; /* the default grid: float64 only */
        size_t n = nlat * nlon;
        void *out = malloc(n * dt_size(dt));
        int rc = gpuq_cpu_grid(dt, atof(grids[g].lat0), atof(grids[g].lat1), nlat,
                               atof(grids[g].lon0), atof(grids[g].lon1), nlon, atof(grids[g].lat),
                               atof(grids[g].lon), R_EARTH, out);
        ck_assert_int_eq(rc, GPUQ_K_OK);
        char what[160];
        snprintf(what, sizeof what, "grid lat %s..%s (%s) lon %s..%s (%s) to (%s, %s)",
                 grids[g].lat0, grids[g].lat1, grids[g].nlat, grids[g].lon0, grids[g].lon1,
                 grids[g].nlon, grids[g].lat, grids[g].lon);
        hav_check(dt, out, refs_get(grid_job[g]), n, R_EARTH, what);
        free(out);
    }
}
END_TEST

/* The unchecked fixture of case "vs_reference": every input and one batch. */
static void vs_reference_prepare(void)
{
    refs = rb_new();
    norm_numpy_prepare();
    pw_prepare();
    hav_prepare();
    grid_prepare();
    rb_run(refs);
}

static void vs_reference_release(void)
{
    for (size_t i = 0; i < N_NORM_NUMPY; i++)
        free(norm_numpy[i].x);
    for (size_t i = 0; i < N_PW; i += 4)
        free(pw_case[i].x), free(pw_case[i].y);
    for (size_t i = 0; i < 2 * HAV_KINDS; i++)
        free(hav_case[i].a), free(hav_case[i].b);
    memset(norm_numpy, 0, sizeof norm_numpy);
    memset(pw_case, 0, sizeof pw_case);
    memset(hav_case, 0, sizeof hav_case);
    rb_free(refs);
    refs = NULL;
}

/* ---- normalize numerics: per element against the exact reference ---- */

/* Per-element tolerances against ref_ops.py normalize_exact (the exact
 * result rounded once): float64 a few units in the last place (2^-53 =
 * 1.1e-16), float32 the final rounding to float (up to 2^-24) and no more. */
#define ELEM_TOL64 2e-15
#define ELEM_TOL32 6.0e-8

static void check_elems(int dt, const void *out, const double *ref, size_t n, double tol32,
                        double tol64, const char *what)
{
    size_t w = 0;
    double err =
        dt == GPUQ_K_F32 ? tu_elem_err_f32(out, ref, n, &w) : tu_elem_err_f64(out, ref, n, &w);
    double tol = dt == GPUQ_K_F32 ? tol32 : tol64;
    ck_assert_msg(err <= tol, "%s (%s): element %zu is %.17g, exact %.17g: rel err %g > %g", what,
                  dt_name(dt), w, out_at(dt, out, w), ref[w], err, tol);
}

static const struct {
    uint64_t rows, cols;
} exact_shapes[] = {{1, 1031}, {7, 129}};
#define N_EXACT (10 * TU_NORM_KINDS * 2)

/* _i enumerates method x dtype x kind x shape. */
static struct {
    double *x; /* rounded to the dtype; shared by the five methods */
    int job;
} exact_case[N_EXACT];

static void exact_prepare(void)
{
    for (int i = 0; i < (int)N_EXACT; i += 5) {
        int dt = dts[(i / 5) % 2], kind = (i / 10) % TU_NORM_KINDS;
        uint64_t rows = exact_shapes[i / (10 * TU_NORM_KINDS)].rows;
        uint64_t cols = exact_shapes[i / (10 * TU_NORM_KINDS)].cols;
        size_t n = rows * cols;
        double *x = dalloc(n);
        tu_norm_fill(kind, dt == GPUQ_K_F32, x, rows, cols);
        free(to_dtype(dt, x, n));
        char r[32], c[32];
        u64s(r, rows), u64s(c, cols);
        for (int method = 0; method < 5; method++) {
            const char *args[] = {"normalize_exact", method_names[method], r, c, "@0", NULL};
            exact_case[i + method].x = x;
            exact_case[i + method].job = refs_add(args, x, n, NULL, 0, n);
        }
    }
}

START_TEST(normalize_vs_exact)
{
    int method = _i % 5, dt = dts[(_i / 5) % 2], kind = (_i / 10) % TU_NORM_KINDS;
    uint64_t rows = exact_shapes[_i / (10 * TU_NORM_KINDS)].rows;
    uint64_t cols = exact_shapes[_i / (10 * TU_NORM_KINDS)].cols;
    size_t n = rows * cols;
    double *x = dalloc(n);
    memcpy(x, exact_case[_i].x, n * sizeof *x);
    void *in = to_dtype(dt, x, n), *out = malloc(n * dt_size(dt));
    ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, in, out, rows, cols), GPUQ_K_OK);
    char what[96];
    snprintf(what, sizeof what, "%s of %s %llux%llu", method_names[method],
             tu_norm_kind_names[kind], (unsigned long long)rows, (unsigned long long)cols);
    check_elems(dt, out, refs_get(exact_case[_i].job), n, ELEM_TOL32, ELEM_TOL64, what);
    free(x), free(in), free(out);
}
END_TEST

/* The case: zscore of 1000 + N(0,1), 4097 values of numpy's
 * default_rng(0). Plain sums leave the mean ~3e-12 off relative to the
 * spread; here every element must be within ELEM_TOL64 (1e-13 asked),
 * including those next to the mean. Flat, and (float64) as row 0 of three
 * rows whose other rows are the same values scaled by 2^-1000 and -1e250. */
#define ZS_N 4097
static double *zs_x[2]; /* f32 (flat), f64 (3 rows) */
static int zs_flat[2], zs_rows;

static void zscore_prepare(void)
{
    const char *gen[] = {"randn_offset", "4097", "0", "1000", NULL};
    int j = refs_add(gen, NULL, 0, NULL, 0, ZS_N);
    rb_run(refs);
    for (int k = 0; k < 2; k++) {
        double *x = dalloc(3 * ZS_N);
        memcpy(x, refs_get(j), ZS_N * sizeof *x);
        for (uint64_t i = 0; i < ZS_N; i++) {
            x[ZS_N + i] = ldexp(x[i], -1000);
            x[2 * ZS_N + i] = x[i] * -1e250;
        }
        free(to_dtype(dts[k], x, k ? 3 * ZS_N : ZS_N));
        zs_x[k] = x;
        const char *flat[] = {"normalize_exact", "zscore", "1", "4097", "@0", NULL};
        zs_flat[k] = refs_add(flat, x, ZS_N, NULL, 0, ZS_N);
    }
    const char *rows[] = {"normalize_exact", "zscore", "3", "4097", "@0", NULL};
    zs_rows = refs_add(rows, zs_x[1], 3 * ZS_N, NULL, 0, 3 * ZS_N);
}

START_TEST(zscore_offset_normal)
{
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        uint64_t rows = dt == GPUQ_K_F64 ? 3 : 1; /* f32 cannot hold the other rows */
        double *x = dalloc(rows * ZS_N);
        memcpy(x, zs_x[k], rows * ZS_N * sizeof *x);
        void *in = to_dtype(dt, x, rows * ZS_N), *out = malloc(rows * ZS_N * dt_size(dt));
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 0, in, out, 1, ZS_N), GPUQ_K_OK);
        check_elems(dt, out, refs_get(zs_flat[k]), ZS_N, ELEM_TOL32, ELEM_TOL64,
                    "zscore 1000 + N(0,1) flat");
        if (rows > 1) {
            ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 0, in, out, rows, ZS_N),
                             GPUQ_K_OK);
            check_elems(dt, out, refs_get(zs_rows), rows * ZS_N, ELEM_TOL32, ELEM_TOL64,
                        "zscore 1000 + N(0,1) rows");
        }
        free(x), free(in), free(out);
    }
}
END_TEST

/* The unchecked fixture of case "numerics": the randn values first (one
 * batch), then every exact reference (another). */
static void numerics_prepare(void)
{
    refs = rb_new();
    zscore_prepare();
    exact_prepare();
    rb_run(refs);
}

static void numerics_release(void)
{
    for (size_t i = 0; i < N_EXACT; i += 5)
        free(exact_case[i].x);
    memset(exact_case, 0, sizeof exact_case);
    free(zs_x[0]), free(zs_x[1]);
    zs_x[0] = zs_x[1] = NULL;
    rb_free(refs);
    refs = NULL;
}

/* Rows whose sums or squares leave double's (or float's) range, with the
 * results known exactly (testutil's table); each must come out within one
 * rounding (l2: the square root's too). */
START_TEST(normalize_extremes)
{
    int dt = tu_norm_extremes[_i].dt, method = tu_norm_extremes[_i].method;
    uint64_t n = (uint64_t)tu_norm_extremes[_i].n;
    const double *want = tu_norm_extremes[_i].want;
    double x[4];
    memcpy(x, tu_norm_extremes[_i].x, sizeof x);
    double tol = dt == GPUQ_K_F32 ? 0x1p-24 : 0x1p-52;
    void *in = to_dtype(dt, x, n), *out = malloc(n * 8);
    int rc = gpuq_cpu_normalize(dt, method, 0, in, out, 1, n);
    ck_assert_msg(rc == GPUQ_K_OK, "case %d, %s of %g.. (%s): rc %d", _i, method_names[method],
                  x[0], dt == GPUQ_K_F32 ? "f32" : "f64", rc);
    for (uint64_t j = 0; j < n; j++) {
        double v = out_at(dt, out, j);
        ck_assert_msg(fabs(v - want[j]) <= tol * fabs(want[j]),
                      "case %d, %s of %g.. (%s) [%llu] = %.17g, want %.17g", _i,
                      method_names[method], x[0], dt == GPUQ_K_F32 ? "f32" : "f64",
                      (unsigned long long)j, v, want[j]);
    }
    free(in), free(out);
}
END_TEST

/* A result that the dtype cannot hold, from finite input, is an error
 * (zero_ok or not), found in the right row; underflow is not an error. */
START_TEST(normalize_overflow)
{
    double x64[6] = {1, 2, 3, 1e300, -1e300, 1e-300}, o[6];
    float x32[6] = {1, 2, 3, 1e38f, -1e38f, 1e-30f}, o32[6];
    uint64_t row = 99;
    for (int zero_ok = 0; zero_ok < 2; zero_ok++) {
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, zero_ok, x64, o, 2, 3),
                         GPUQ_K_E_OVERFLOW);
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, zero_ok, x32, o32, 2, 3),
                         GPUQ_K_E_OVERFLOW);
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, zero_ok, x64 + 3, o, 1, 3),
                         GPUQ_K_E_OVERFLOW);
    }
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, GPUQ_K_SUM, x64, 2, 3, &row),
                     GPUQ_K_E_OVERFLOW);
    ck_assert_int_eq(row, 1);
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F32, GPUQ_K_SUM, x32, 2, 3, &row),
                     GPUQ_K_E_OVERFLOW);
    ck_assert_int_eq(row, 1);
    /* the other methods are bounded: the same rows are fine */
    for (int m = GPUQ_K_L1; m <= GPUQ_K_ZSCORE; m++) {
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, m, 0, x64, o, 2, 3), GPUQ_K_OK);
        ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F32, m, x32, 2, 3, &row), GPUQ_K_OK);
    }
    /* float32: 1e38 / 1e-30 overflows float; as float64 input it is fine */
    double x32as64[3] = {1e38, -1e38, 1e-30};
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x32as64, o, 1, 3), GPUQ_K_OK);
    ck_assert(fabs(o[0] - 1e68) <= 1e-15 * 1e68);
    /* underflow rounds to zero: 1e-300 / 1e300 */
    double u[2] = {1e-300, 1e300};
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, u, o, 1, 2), GPUQ_K_OK);
    ck_assert(o[0] == 0.0 && o[1] == 1.0);
    /* find: a zero row, its index; no failing row */
    double z[6] = {1, 2, 3, 0, 0, 0};
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, GPUQ_K_L2, z, 2, 3, &row), GPUQ_K_E_ZERO);
    ck_assert_int_eq(row, 1);
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, GPUQ_K_L2, z, 1, 3, &row), GPUQ_K_OK);
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, 7, z, 1, 3, &row), GPUQ_K_E_ARG);
}
END_TEST

/* ---- normalize.cu's merge orders, replayed on the host ---- */

/* The CPU reference adds a row into one accumulator; normalize.cu merges
 * partial ones: each of nt threads sums elements t, t + nt, ...; a warp
 * merges by xor butterfly (shuffling only the fields the pass uses), a
 * block merges its warps in order, and long rows merge per-block partials
 * in a finalize block. This replays those orders with the same norm_math.h
 * functions, so that a wrong merge shows without a GPU, and checks that
 * every lane of a butterfly ends with the same bits. */

/* Merge of nt (a multiple of 32) thread accumulators as BlockRed does. */
static nm_acc emu_block_merge(nm_acc *acc, unsigned nt, int np, int mm)
{
    nm_acc prev[32];
    for (unsigned w = 0; w < nt / 32; w++) {
        nm_acc *lane = acc + 32 * w;
        for (unsigned off = 16; off > 0; off >>= 1) {
            memcpy(prev, lane, sizeof prev);
            for (unsigned l = 0; l < 32; l++) {
                nm_acc o = prev[l]; /* __shfl_xor_sync of the fields in use */
                for (int i = 0; i < np; i++)
                    o.p[i] = prev[l ^ off].p[i];
                if (mm) {
                    o.mn = prev[l ^ off].mn;
                    o.mx = prev[l ^ off].mx;
                }
                nm_acc_merge(&lane[l], &o, np, mm);
            }
        }
        /* one assertion, not one per lane: each ck_assert is a write(2) to
         * Check's pipe, and these loops run millions of times */
        unsigned bad = 0;
        for (unsigned l = 1; l < 32; l++)
            for (int i = 0; i < np; i++)
                if (lane[l].p[i].s != lane[0].p[i].s || lane[l].p[i].c != lane[0].p[i].c)
                    bad = bad ? bad : l;
        ck_assert_msg(bad == 0, "butterfly lanes 0 and %u differ", bad);
    }
    nm_acc r = acc[0];
    for (unsigned w = 1; w < nt / 32; w++)
        nm_acc_merge(&r, &acc[32 * w], np, mm);
    return r;
}

/* A group of nt threads over x[lo, hi) in a pass mode. */
static nm_acc emu_group(int mode, int bins, const double *x, uint64_t lo, uint64_t hi, unsigned nt,
                        double c, double m0)
{
    nm_acc *acc = malloc(nt * sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    for (unsigned t = 0; t < nt; t++) {
        nm_acc_init(&acc[t]);
        for (uint64_t j = lo + t; j < hi; j += nt)
            nm_acc_add(&acc[t], mode, bins, x[j], c, m0);
    }
    nm_acc r = emu_block_merge(acc, nt, nm_mode_pairs(mode, bins), nm_mode_minmax(mode));
    free(acc);
    return r;
}

/* One pass over a row as launched: nt = 32 (warp), 256 (block), or bpr
 * blocks of 256 whose partials a 256-thread finalize merges. */
static nm_acc emu_pass(int mode, int bins, const double *x, uint64_t cols, unsigned nt,
                       unsigned bpr, double c, double m0)
{
    if (bpr == 0)
        return emu_group(mode, bins, x, 0, cols, nt, c, m0);
    int np = nm_mode_pairs(mode, bins), mm = nm_mode_minmax(mode);
    uint64_t chunk = (cols + bpr - 1) / bpr;
    nm_acc *part = malloc(bpr * sizeof *part), fin[256];
    ck_assert_ptr_nonnull(part);
    for (unsigned b = 0; b < bpr; b++) {
        uint64_t lo = b * chunk, hi = lo + chunk < cols ? lo + chunk : cols;
        part[b] = emu_group(mode, bins, x, lo, hi, 256, c, m0);
    }
    for (unsigned t = 0; t < 256; t++) {
        nm_acc_init(&fin[t]);
        for (unsigned b = t; b < bpr; b += 256)
            nm_acc_merge(&fin[t], &part[b], np, mm);
    }
    free(part);
    return emu_block_merge(fin, 256, np, mm);
}

/* normalize of one row the GPU's way (x as double; bins for float64);
 * returns the GPU's flag as a kernel code. */
static int emu_normalize(int dt, int method, const double *x, double *out, uint64_t cols,
                         unsigned nt, unsigned bpr)
{
    int bins = dt == GPUQ_K_F64, mode = nm_first_mode(method);
    nm_acc a = emu_pass(mode, bins, x, cols, nt, bpr, 1.0, 0.0);
    nm_affine f;
    if (method == GPUQ_K_ZSCORE) {
        if (!nm_zscore_stage0(&a, cols, &f)) {
            nm_acc b = emu_pass(NM_ZS2, bins, x, cols, nt, bpr, f.pre, f.sh);
            nm_zscore_stage1(&b, cols, &f);
        }
    } else {
        f = nm_finish(method, &a);
    }
    if (f.den == 0.0)
        return GPUQ_K_E_ZERO;
    for (uint64_t j = 0; j < cols; j++) {
        double v = nm_apply(&f, x[j]);
        out[j] = dt == GPUQ_K_F32 ? tu_round_f32(v) : v;
        if (f.check && isinf(out[j]))
            return GPUQ_K_E_OVERFLOW;
    }
    return GPUQ_K_OK;
}

static const struct {
    uint64_t cols;
    unsigned nt, bpr; /* the launch normalize.cu picks for cols */
} emu_shapes[] = {{100, 32, 0}, {4097, 256, 0}, {(1u << 17) + 5, 256, 33}};

/* _i enumerates method x dtype x kind x shape: the replay against the CPU
 * reference, per element (both within ELEM_TOL of exact, see
 * normalize_vs_exact), and the same error code. */
START_TEST(normalize_merge_orders)
{
    int method = _i % 5, dt = dts[(_i / 5) % 2], kind = (_i / 10) % TU_NORM_KINDS;
    uint64_t cols = emu_shapes[_i / (10 * TU_NORM_KINDS)].cols;
    unsigned nt = emu_shapes[_i / (10 * TU_NORM_KINDS)].nt,
             bpr = emu_shapes[_i / (10 * TU_NORM_KINDS)].bpr;
    double *x = malloc(cols * sizeof *x), *emu = malloc(cols * sizeof *emu);
    tu_norm_fill(kind, dt == GPUQ_K_F32, x, 1, cols);
    void *in = to_dtype(dt, x, cols), *out = malloc(cols * dt_size(dt));
    int rc = gpuq_cpu_normalize(dt, method, 0, in, out, 1, cols);
    ck_assert_int_eq(emu_normalize(dt, method, x, emu, cols, nt, bpr), rc);
    if (rc == GPUQ_K_OK) {
        char what[96];
        snprintf(what, sizeof what, "replay: %s of %s, %llu cols", method_names[method],
                 tu_norm_kind_names[kind], (unsigned long long)cols);
        double *cpu = malloc(cols * sizeof *cpu);
        for (uint64_t j = 0; j < cols; j++)
            cpu[j] = out_at(dt, out, j);
        size_t w = 0;
        double err = tu_elem_err_f64(emu, cpu, cols, &w);
        double tol = dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64;
        ck_assert_msg(err <= tol, "%s (%s): element %zu is %.17g, CPU %.17g: rel err %g > %g", what,
                      dt == GPUQ_K_F32 ? "f32" : "f64", w, emu[w], cpu[w], err, tol);
        free(cpu);
    }
    free(x), free(emu), free(in), free(out);
}
END_TEST

/* The extreme rows, replayed: spread over a long row (each value repeated)
 * the result of each copy is the short row's divided by the repeat count
 * (sum, l1), its square root (l2), or unchanged (minmax, zscore). */
START_TEST(normalize_merge_extremes)
{
    int dt = tu_norm_extremes[_i].dt, method = tu_norm_extremes[_i].method,
        n = tu_norm_extremes[_i].n;
    for (size_t s = 0; s < sizeof emu_shapes / sizeof emu_shapes[0]; s++) {
        uint64_t rep = emu_shapes[s].cols / (uint64_t)n, cols = rep * (uint64_t)n;
        double *x = malloc(cols * sizeof *x), *emu = malloc(cols * sizeof *emu);
        for (uint64_t j = 0; j < cols; j++)
            x[j] = dt == GPUQ_K_F32 ? tu_round_f32(tu_norm_extremes[_i].x[j % (uint64_t)n])
                                    : tu_norm_extremes[_i].x[j % (uint64_t)n];
        int rc = emu_normalize(dt, method, x, emu, cols, emu_shapes[s].nt,
                               emu_shapes[s].bpr ? emu_shapes[s].bpr : 0);
        ck_assert_msg(rc == GPUQ_K_OK, "case %d, %llu cols: rc %d", _i, (unsigned long long)cols,
                      rc);
        double k = method == GPUQ_K_SUM || method == GPUQ_K_L1 ? (double)rep
                   : method == GPUQ_K_L2                       ? sqrt((double)rep)
                                                               : 1.0;
        double tol = dt == GPUQ_K_F32 ? 0x1p-23 : 0x1p-50;
        uint64_t j = 0;
        double want = 0.0;
        for (; j < cols; j++) { /* the first bad element, then one assertion */
            want = tu_norm_extremes[_i].want[j % (uint64_t)n] / k;
            if (dt == GPUQ_K_F32)
                want = tu_round_f32(want);
            if (!(fabs(emu[j] - want) <= tol * fabs(want) || fabs(emu[j] - want) < 0x1p-1060))
                break;
        }
        ck_assert_msg(j == cols, "case %d, %llu cols [%llu] = %.17g, want %.17g", _i,
                      (unsigned long long)cols, (unsigned long long)j, j < cols ? emu[j] : 0.0,
                      want);
        free(x), free(emu);
    }
}
END_TEST

/* ---- hand-computed values ---- */

START_TEST(haversine_hand)
{
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        double d64[4];
        float d32[4];
        void *out = dt == GPUQ_K_F32 ? (void *)d32 : (void *)d64;
        double tol = dt == GPUQ_K_F32 ? 1e-6 : 1e-12;
        double p64[8] = {0, 0, 90, 0, -90, 45, 0, 180};
        float p32[8] = {0, 0, 90, 0, -90, 45, 0, 180};
        const void *p = dt == GPUQ_K_F32 ? (const void *)p32 : (const void *)p64;
        /* to (0, 90): a quarter of the equator; a pole is a quarter meridian away;
         * (0, 180) is antipodal */
        ck_assert_int_eq(gpuq_cpu_haversine_to(dt, p, 4, 0.0, 90.0, R_EARTH, out), GPUQ_K_OK);
        double want[4] = {R_EARTH * PI / 2, R_EARTH * PI / 2, R_EARTH * PI / 2, R_EARTH * PI / 2};
        for (int i = 0; i < 4; i++)
            ck_assert_msg(fabs(out_at(dt, out, i) - want[i]) <= tol * want[i], "to[%d] = %.17g", i,
                          out_at(dt, out, i));
        /* pair: (0,0)-(-90,45) and (90,0)-(0,180) are quarter circles; R = 2 */
        ck_assert_int_eq(
            gpuq_cpu_haversine_pair(dt, p, (const char *)p + 4 * dt_size(dt), 2, 2.0, out),
            GPUQ_K_OK);
        ck_assert(fabs(out_at(dt, out, 0) - PI) <= tol * PI);
        ck_assert(fabs(out_at(dt, out, 1) - PI) <= tol * PI);
        /* antipodes: asin(min(1, sqrt(a))) stays finite */
        ck_assert_int_eq(
            gpuq_cpu_haversine_to(dt, (const char *)p + 6 * dt_size(dt), 1, 0.0, 0.0, 1.0, out),
            GPUQ_K_OK);
        ck_assert(fabs(out_at(dt, out, 0) - PI) <= tol * PI);
    }
    /* grid ends are exactly the linspace stops */
    double g[3];
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, -90, 90, 3, 0, 0, 1, 0, 0, 1.0, g), GPUQ_K_OK);
    ck_assert(fabs(g[0] - PI / 2) < 1e-15 && g[1] == 0.0 && fabs(g[2] - PI / 2) < 1e-15);
}
END_TEST

START_TEST(normalize_hand)
{
    double x[4] = {1, 2, 3, 4}, o[4];
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, 1, 4), GPUQ_K_OK);
    ck_assert(o[0] == 0.1 && o[3] == 0.4);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_MINMAX, 0, x, o, 1, 4), GPUQ_K_OK);
    ck_assert(o[0] == 0.0 && fabs(o[1] - 1.0 / 3) < 1e-16 && o[3] == 1.0);
    /* zscore of 1..4: mean 2.5, population std sqrt(1.25) */
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_ZSCORE, 0, x, o, 1, 4), GPUQ_K_OK);
    ck_assert(fabs(o[0] + 1.5 / sqrt(1.25)) < 1e-15);
    double y[2] = {3, -4};
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_L2, 0, y, o, 1, 2), GPUQ_K_OK);
    ck_assert(o[0] == 0.6 && o[1] == -0.8);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_L1, 0, y, o, 1, 2), GPUQ_K_OK);
    ck_assert(fabs(o[0] - 3.0 / 7) < 1e-16 && fabs(o[1] + 4.0 / 7) < 1e-16);
}
END_TEST

/* ---- errors ---- */

START_TEST(normalize_zero)
{
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        /* row 0 fine; row 1: Σa = 0, Σ|a| > 0; row 2: all zero; row 3: constant */
        double x[12] = {1, 2, 3, -1, 2, -1, 0, 0, 0, 5, 5, 5};
        void *in = to_dtype(dt, x, 12), *out = malloc(12 * 8);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_L1, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_L2, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_MINMAX, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        /* l1 on rows 0-1 and row 3 is fine */
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_L1, 0, in, out, 2, 3), GPUQ_K_OK);
        /* zero_ok: the bad row is zeros, the rest normalized */
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 1, in, out, 4, 3), GPUQ_K_OK);
        ck_assert(fabs(out_at(dt, out, 0) - 1.0 / 6) < 1e-7);
        for (int i = 3; i < 9; i++)
            ck_assert(out_at(dt, out, i) == 0.0);
        ck_assert(fabs(out_at(dt, out, 9) - 1.0 / 3) < 1e-7);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 1, in, out, 4, 3), GPUQ_K_OK);
        for (int i = 6; i < 12; i++)
            ck_assert(out_at(dt, out, i) == 0.0);
        ck_assert(fabs(out_at(dt, out, 0) + sqrt(1.5)) < 1e-6);
        free(in), free(out);
    }
}
END_TEST

START_TEST(normalize_nan)
{
    /* A NaN in a row makes every denominator NaN (not zero): the row is NaN,
     * the call succeeds, other rows are unaffected. */
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        for (int method = GPUQ_K_SUM; method <= GPUQ_K_ZSCORE; method++) {
            double x[6] = {1, NAN, 3, 1, 2, 4};
            void *in = to_dtype(dt, x, 6), *out = malloc(6 * 8);
            ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, in, out, 2, 3), GPUQ_K_OK);
            for (int i = 0; i < 3; i++)
                ck_assert_msg(isnan(out_at(dt, out, i)), "%s [%d]", method_names[method], i);
            for (int i = 3; i < 6; i++)
                ck_assert(isfinite(out_at(dt, out, i)));
            free(in), free(out);
        }
    }
}
END_TEST

/* Inf is not an error either: the denominator becomes +-Inf or NaN by IEEE
 * rules and the row follows (finite / Inf = 0, Inf / Inf = NaN), as numpy. */
START_TEST(normalize_inf)
{
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        double x[6] = {1, INFINITY, 2, 1, 2, 4};
        void *in = to_dtype(dt, x, 6), *out = malloc(6 * 8);
        const double want[5][3] = {
            {0, NAN, 0},     /* sum: 1 / Inf, Inf / Inf */
            {0, NAN, 0},     /* l1 */
            {0, NAN, 0},     /* l2 */
            {0, NAN, 0},     /* minmax: (1 - 1) / Inf, (Inf - 1) / Inf, (2 - 1) / Inf */
            {NAN, NAN, NAN}, /* zscore: mean Inf */
        };
        for (int method = GPUQ_K_SUM; method <= GPUQ_K_ZSCORE; method++) {
            ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, in, out, 2, 3), GPUQ_K_OK);
            for (int i = 0; i < 3; i++) {
                double v = out_at(dt, out, i), w = want[method][i];
                ck_assert_msg(isnan(w) ? isnan(v) : v == w, "%s [%d] = %g", method_names[method], i,
                              v);
            }
            for (int i = 3; i < 6; i++)
                ck_assert(isfinite(out_at(dt, out, i)));
        }
        /* +Inf and -Inf: sum is NaN, the whole row NaN */
        double y[2] = {INFINITY, -INFINITY};
        void *yin = to_dtype(dt, y, 2);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 0, yin, out, 1, 2), GPUQ_K_OK);
        ck_assert(isnan(out_at(dt, out, 0)) && isnan(out_at(dt, out, 1)));
        free(in), free(yin), free(out);
    }
}
END_TEST

START_TEST(pairwise_zero_vector)
{
    double x[6] = {1, 2, 3, 0, 0, 0}, y[6] = {3, 2, 1, 1, 1, -1}, o[4];
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 0, x, y, 2, 2, 3, o),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 0, y, x, 2, 2, 3, o),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 1, x, y, 2, 2, 3, o),
                     GPUQ_K_OK);
    ck_assert(fabs(o[0] - (1.0 - 10.0 / 14.0)) < 1e-15);
    ck_assert(fabs(o[1] - 1.0) < 1e-15); /* orthogonal */
    ck_assert(o[2] == 1.0 && o[3] == 1.0);
    /* other metrics have no trouble with a zero vector */
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, x, y, 2, 2, 3, o),
                     GPUQ_K_OK);
    ck_assert(fabs(o[3] - sqrt(3.0)) < 1e-15);
    float xf[6] = {1, 2, 3, 0, 0, 0}, yf[6] = {3, 2, 1, 1, 1, -1}, of[4];
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F32, GPUQ_K_COSINE, 2.0, 0, xf, yf, 2, 2, 3, of),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F32, GPUQ_K_COSINE, 2.0, 1, xf, yf, 2, 2, 3, of),
                     GPUQ_K_OK);
    ck_assert(of[2] == 1.0f && of[3] == 1.0f);
}
END_TEST

START_TEST(haversine_range)
{
    double p[4] = {10, 20, 90.0001, 0}, o[2];
    float pf[4] = {10, 20, 90.0001f, 0}, of[2];
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 2, 0, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F32, pf, 2, 0, 0, 1, of), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, 90.0001, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, -90.0001, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, NAN, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, 0, INFINITY, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, 90, 0, 1, o), GPUQ_K_OK);
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, p, p + 2, 1, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, p + 2, p, 1, 1, o), GPUQ_K_E_RANGE);
    double q[2] = {NAN, 0}, r[2] = {0, NAN};
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, q, 1, 0, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, r, 1, 0, 0, 1, o), GPUQ_K_E_RANGE);
    float qf[2] = {NAN, 0};
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F32, pf, qf, 1, 1, of), GPUQ_K_E_RANGE);
    double g[4];
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, -90.5, 0, 2, 0, 1, 2, 0, 0, 1, g), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 91, 2, 0, 1, 2, 0, 0, 1, g), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, NAN, 2, 0, 0, 1, g), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, 1, 2, 95, 0, 1, g), GPUQ_K_E_RANGE);
}
END_TEST

START_TEST(bad_args)
{
    double x[4] = {1, 2, 3, 4}, o[4];
    for (int dt = -1; dt <= 4; dt++) {
        if (dt == GPUQ_K_F32 || dt == GPUQ_K_F64)
            continue;
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 0, x, o, 1, 4), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_haversine_to(dt, x, 2, 0, 0, 1, o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_haversine_pair(dt, x, x, 2, 1, o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_grid(dt, 0, 1, 2, 0, 1, 2, 0, 0, 1, o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_pairwise(dt, GPUQ_K_EUCLIDEAN, 2.0, 0, x, x, 2, 2, 2, o),
                         GPUQ_K_E_ARG);
    }
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, -1, 0, x, o, 1, 4), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, 5, 0, x, o, 1, 4), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, 0, 4), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, 1, 0), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, NULL, o, 1, 4), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, UINT64_MAX, 3),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, -1, 2.0, 0, x, x, 2, 2, 2, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_METRIC_COUNT, 2.0, 0, x, x, 2, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 0, x, x, 0, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 0, x, x, 2, 0, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 2.0, 0, x, x, 2, 2, 0, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, x, 0, 0, 0, 1, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, x, x, 0, 1, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 0, 0, 1, 2, 0, 0, 1, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, 1, 0, 0, 0, 1, o), GPUQ_K_E_ARG);
    const double radii[] = {0.0, -1.0, NAN, INFINITY};
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, x, 2, 0, 0, radii[k], o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, x, x, 2, radii[k], o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, 1, 2, 0, 0, radii[k], o),
                         GPUQ_K_E_ARG);
    }
}
END_TEST

static Suite *cpu_ref_suite(void)
{
    Suite *s = suite_create("cpu_ref");
    TCase *tc = tcase_create("vs_reference");
    tcase_add_unchecked_fixture(tc, vs_reference_prepare, vs_reference_release);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, normalize_vs_numpy, 0, (int)N_NORM_NUMPY);
    tcase_add_loop_test(tc, pairwise_vs_ref, 0, (int)N_PW);
    tcase_add_loop_test(tc, haversine_vs_numpy, 0, 2 * HAV_KINDS);
    tcase_add_loop_test(tc, grid_vs_numpy, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("numerics");
    tcase_add_unchecked_fixture(tc, numerics_prepare, numerics_release);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, normalize_vs_exact, 0, (int)N_EXACT);
    tcase_add_test(tc, zscore_offset_normal);
    tcase_add_loop_test(tc, normalize_extremes, 0, (int)tu_norm_n_extremes);
    tcase_add_test(tc, normalize_overflow);
    tcase_add_loop_test(tc, normalize_merge_orders, 0, (int)(10 * TU_NORM_KINDS * 3));
    tcase_add_loop_test(tc, normalize_merge_extremes, 0, (int)tu_norm_n_extremes);
    suite_add_tcase(s, tc);

    tc = tcase_create("offset");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, pairwise_offset_normal, 0, (int)(4 * N_PO_SHAPES));
    tcase_add_loop_test(tc, knn_offset_normal, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("hand");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, haversine_hand);
    tcase_add_test(tc, normalize_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, normalize_zero);
    tcase_add_test(tc, normalize_nan);
    tcase_add_test(tc, normalize_inf);
    tcase_add_test(tc, pairwise_zero_vector);
    tcase_add_test(tc, haversine_range);
    tcase_add_test(tc, bad_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tu_seed(); /* print the seed once, before any fork */
    return tu_run_suite(cpu_ref_suite());
}
