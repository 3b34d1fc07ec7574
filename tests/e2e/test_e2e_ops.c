/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_ops.c - every op, method and dtype through a real gpuqd and libgpuq,
 * element by element against references from tests/ref/ref_ops.py (exact
 * rational results where the op sums, numpy where it does not), on fresh
 * random input with mixed signs, large offsets and wide dynamic ranges:
 *  - normalize, every method, U(-10, 10) row-wise and flat, and (case
 *    "numerics") inputs plain sums get wrong, the zscore of 1000 + N(0,1),
 *    rows beyond double's and float's range, results too large for the
 *    dtype (out_of_range);
 *  - pairwise, every metric, on U(-1, 1), mixed signs over 1e-3..1e3,
 *    1e4 + noise and 1e-6..1e6 (tests/numtol.h), against the exact result;
 *  - haversine and grid over the whole sphere and a few km apart at negative
 *    latitudes and longitudes, against numpy.
 * The bounds (numtol.h) follow from the double accumulation gpuq promises,
 * per element, for either backend; on the CUDA backend float64 pairwise
 * with d >= 32 may take the GEMM route, and float32 pairwise sums in float
 * (but cosine), each with its own bound (numtol.h) there. All
 * references of a test come from one python process (refbatch.h). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "req_args.h"
#include "e2e_util.h"
#include "numtol.h"
#include "refbatch.h"

_Static_assert(NT_F32 == GPUQ_DT_F32 && NT_F64 == GPUQ_DT_F64 &&
                   NT_EUCLIDEAN == GPUQ_METRIC_EUCLIDEAN &&
                   NT_SQEUCLIDEAN == GPUQ_METRIC_SQEUCLIDEAN && NT_COSINE == GPUQ_METRIC_COSINE &&
                   NT_MANHATTAN == GPUQ_METRIC_MANHATTAN,
               "numtol.h numbers dtypes and metrics as the wire");

static const char *const norm_names[] = {"sum", "l1", "l2", "minmax", "zscore"};
/* ref_ops.py's names; gpuq_pairwise's minkowski is p = 2 (no "p" sent) */
static const char *const metric_names[] = {"euclidean", "sqeuclidean", "cosine",
                                           "manhattan", "chebyshev",   "minkowski:2"};

#define R_EARTH 6371.0088

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
            x[i] = tu_round_f32(x[i]);
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

/* out (n values of dt) as float64; frees out. */
static double *take_f64(gpuq_dtype dt, void *out, size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++)
        d[i] = dt == GPUQ_DT_F32 ? (double)((float *)out)[i] : ((double *)out)[i];
    free(out);
    return d;
}

static double *dalloc(size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* Per element: got[n] (the daemon's result as float64) against ref under
 * tol (numtol.h). */
static void check_tol(gpuq_dtype dt, const double *got, const double *ref, const double *tol,
                      size_t n, const char *what)
{
    size_t w = 0;
    double r = nt_worst(got, ref, tol, n, &w);
    ck_assert_msg(r <= 1.0,
                  "%s (%s): element %zu is %.17g, reference %.17g: error %.3g is %.3g times the "
                  "bound %.3g",
                  what, gpuq_dtype_name(dt), w, got[w], ref[w], fabs(got[w] - ref[w]), r, tol[w]);
}

/* ---- normalize vs exact: within a few ulps (float64) or the rounding to
 * float (float32) of ref_ops.py normalize_exact, which is exact but for one
 * final rounding ---- */

#define ELEM_TOL64 2e-15
#define ELEM_TOL32 6.0e-8

static void check_exact(gpuq_dtype dt, const double *got, const double *ref, size_t n,
                        const char *what)
{
    /* relative to max(|ref|, the dtype's smallest normal), as testutil's
     * tu_elem_err_* */
    double t = dt == GPUQ_DT_F32 ? ELEM_TOL32 : ELEM_TOL64, *tol = dalloc(n);
    for (size_t i = 0; i < n; i++)
        tol[i] = t * fmax(fabs(ref[i]), dt == GPUQ_DT_F32 ? 0x1p-126 : 0x1p-1022);
    size_t w = 0;
    double r = nt_worst(got, ref, tol, n, &w);
    free(tol);
    ck_assert_msg(r <= 1.0, "%s (%s): element %zu is %.17g, exact %.17g: rel err %g > %g", what,
                  gpuq_dtype_name(dt), w, got[w], ref[w], r * t, t);
}

/* One normalize request whose result waits for the batch's reference. */
typedef struct norm_run {
    gpuq_dtype dt;
    int method;
    uint64_t rows, cols; /* as the reference sees them (flat: 1 x n) */
    double *got;
    int job;
    char what[64];
} norm_run;

/* Normalize x (rows x cols, rounded to dt already) through the daemon, keep
 * the result in r and queue its exact reference in b. */
static void norm_request(gpuq_conn *c, rb_batch *b, norm_run *r, gpuq_dtype dt, int method,
                         const double *x, uint64_t rows, uint64_t cols, int ndim, bool flat,
                         const char *what)
{
    size_t n = rows * cols;
    void *in = as_dtype(dt, x, n), *out = alloc_out(dt, n);
    int rc = ndim == 1 ? gpuq_normalize_1d(c, dt, method, in, rows * cols, out)
                       : gpuq_normalize(c, dt, method, flat, in, rows, cols, out);
    ck_assert_msg(rc == 0, "normalize %s %s: %s", norm_names[method], what, gpuq_errmsg(c));
    free(in);
    r->dt = dt;
    r->method = method;
    r->rows = flat ? 1 : rows;
    r->cols = flat ? n : cols;
    r->got = take_f64(dt, out, n);
    snprintf(r->what, sizeof r->what, "%s%s", what, flat ? " (flat)" : "");
    char rs[32], cs[32];
    snprintf(rs, sizeof rs, "%llu", (unsigned long long)r->rows);
    snprintf(cs, sizeof cs, "%llu", (unsigned long long)r->cols);
    const char *args[] = {"normalize_exact", norm_names[method], rs, cs, "@0", NULL};
    r->job = rb_add(b, args, x, n, NULL, 0, n);
}

/* After rb_run: compare and free every run. */
static void norm_check_all(rb_batch *b, norm_run *r, int count)
{
    for (int k = 0; k < count; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s of %s", norm_names[r[k].method], r[k].what);
        check_exact(r[k].dt, r[k].got, rb_get(b, r[k].job), r[k].rows * r[k].cols, what);
        free(r[k].got);
    }
}

/* Every method and dtype on U(-10, 10) (signs mixed: l1 is not sum, a
 * negative one-column row is -1 under l1 and 1 under sum), 1-D, 2-D,
 * flat, one-column rows. */
START_TEST(normalize_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_NORMAL);
    rb_batch *b = rb_new();
    static const struct {
        uint64_t rows, cols;
        int ndim;
        bool flat;
    } shapes[] = {{1, 1023, 1, false}, {17, 31, 2, false}, {6, 9, 2, true}, {64, 1, 2, false}};
    norm_run run[2 * GPUQ_NORM_COUNT * 4];
    int count = 0;
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (int m = 0; m < GPUQ_NORM_COUNT; m++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                uint64_t rows = shapes[s].rows, cols = shapes[s].cols;
                if (cols == 1 && (m == GPUQ_NORM_MINMAX || m == GPUQ_NORM_ZSCORE))
                    continue; /* constant rows: zero_norm (zero_and_nan) */
                double *x = dalloc(rows * cols);
                tu_rand_fill_f64(x, rows * cols, -10.0, 10.0);
                round_to(dt, x, rows * cols);
                char what[48];
                snprintf(what, sizeof what, "U(-10, 10) %llux%llu", (unsigned long long)rows,
                         (unsigned long long)cols);
                norm_request(c, b, &run[count++], dt, m, x, rows, cols, shapes[s].ndim,
                             shapes[s].flat, what);
                free(x);
            }
    rb_run(b);
    norm_check_all(b, run, count);
    rb_free(b);
    gpuq_close(c);
}
END_TEST

/* ---- pairwise vs the exact result ---- */

/* Row sums of squares (for the GEMM route's bound). */
static double *row_sq(const double *x, uint64_t rows, uint64_t d)
{
    double *s = dalloc(rows);
    for (uint64_t i = 0; i < rows; i++) {
        s[i] = 0.0;
        for (uint64_t k = 0; k < d; k++)
            s[i] += x[i * d + k] * x[i * d + k];
    }
    return s;
}

/* Every metric and dtype on numtol.h's kinds, d = 7 (tiled on CUDA) and
 * 100 (float64 euclidean/sqeuclidean may take the GEMM route on CUDA). */
START_TEST(pairwise_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_HIGH);
    int cuda = strcmp(gpuq_info(c)->backend, "cuda") == 0;
    rb_batch *b = rb_new();
    const uint64_t m = 13, n = 11, dims[] = {7, 100};
    enum { RUNS = 2 * NT_PW_KINDS * 2 * GPUQ_METRIC_COUNT };
    struct {
        double *got, *nx, *ny;
        int job, dt, kind, metric;
        uint64_t d;
    } run[RUNS];
    int count = 0;
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (int kind = 0; kind < NT_PW_KINDS; kind++)
            for (int k = 0; k < 2; k++) {
                uint64_t d = dims[k];
                double *x = dalloc(m * d), *y = dalloc(n * d);
                nt_pw_fill(kind, x, m, y, n, d);
                round_to(dt, x, m * d);
                round_to(dt, y, n * d);
                void *xi = as_dtype(dt, x, m * d), *yi = as_dtype(dt, y, n * d);
                char ms[16], ns[16], ds[16];
                snprintf(ms, sizeof ms, "%llu", (unsigned long long)m);
                snprintf(ns, sizeof ns, "%llu", (unsigned long long)n);
                snprintf(ds, sizeof ds, "%llu", (unsigned long long)d);
                for (int mt = 0; mt < GPUQ_METRIC_COUNT; mt++) {
                    void *out = alloc_out(dt, m * n);
                    int rc = gpuq_pairwise(c, dt, mt, xi, yi, m, n, d, out);
                    ck_assert_msg(rc == 0, "pairwise %s of %s: %s", metric_names[mt],
                                  nt_pw_kind_name(kind), gpuq_errmsg(c));
                    const char *args[] = {
                        "pairwise_exact", metric_names[mt], ms, ns, ds, "@0", "@1", NULL};
                    run[count].got = take_f64(dt, out, m * n);
                    run[count].nx = row_sq(x, m, d);
                    run[count].ny = row_sq(y, n, d);
                    run[count].job = rb_add(b, args, x, m * d, y, n * d, m * n);
                    run[count].dt = dt;
                    run[count].kind = kind;
                    run[count].metric = mt;
                    run[count].d = d;
                    count++;
                }
                free(x), free(y), free(xi), free(yi);
            }
    rb_run(b);
    double *tol = dalloc(m * n);
    for (int k = 0; k < count; k++) {
        const double *ref = rb_get(b, run[k].job);
        int mt = run[k].metric, dt = run[k].dt;
        int gemm = cuda && dt == GPUQ_DT_F64 && run[k].d >= 32;
        for (uint64_t e = 0; e < m * n; e++) {
            double acc = gemm ? nt_pairwise_gemm_acc(mt, run[k].d, ref[e], run[k].nx[e / n],
                                                     run[k].ny[e % n])
                         : cuda && dt == GPUQ_DT_F32 && mt <= GPUQ_METRIC_MANHATTAN
                             ? nt_pairwise_f32_acc(mt, run[k].d, ref[e])
                             : nt_pairwise_acc_p(mt, 2.0, run[k].d, ref[e]);
            tol[e] = nt_tol(dt, 1, 1, ref[e], acc);
        }
        char what[96];
        snprintf(what, sizeof what, "%s of %s, d=%llu%s", metric_names[mt],
                 nt_pw_kind_name(run[k].kind), (unsigned long long)run[k].d,
                 gemm ? " (GEMM bound)" : "");
        check_tol(dt, run[k].got, ref, tol, m * n, what);
        free(run[k].got), free(run[k].nx), free(run[k].ny);
    }
    free(tol);
    rb_free(b);
    gpuq_close(c);
}
END_TEST

/* ---- haversine and grid vs numpy ---- */

static void hav_check(gpuq_dtype dt, const double *got, const double *ref, size_t n, double radius,
                      const char *what)
{
    double *tol = dalloc(n);
    for (size_t k = 0; k < n; k++)
        tol[k] = nt_tol(dt, 1, 2, ref[k], nt_haversine_acc(ref[k], radius));
    check_tol(dt, got, ref, tol, n, what);
    free(tol);
}

/* To one point and between pairs: over the whole sphere, and (numtol.h)
 * around (-33.875, -70.625) and a few km apart, across the antimeridian too. */
START_TEST(haversine_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_LOW);
    rb_batch *b = rb_new();
    const size_t n = 1031;
    struct {
        double *to, *pair;
        int jto, jpair, dt, near;
    } run[4];
    for (int k = 0; k < 4; k++) {
        int dt = k % 2 ? GPUQ_DT_F64 : GPUQ_DT_F32, near = k / 2;
        double *a = dalloc(2 * n), *p = dalloc(4 * n);
        double lat = near ? NT_NEAR_LAT : 30.0, lon = near ? NT_NEAR_LON : 101.0;
        if (near) {
            nt_points_near(a, n);
            nt_pairs_near(p, p + 2 * n, n);
        } else {
            nt_points_global(a, n);
            nt_points_global(p, 2 * n);
        }
        round_to(dt, a, 2 * n);
        round_to(dt, p, 4 * n);
        void *ai = as_dtype(dt, a, 2 * n), *pi = as_dtype(dt, p, 4 * n);
        void *out = alloc_out(dt, n);
        ck_assert_msg(gpuq_haversine_to(c, dt, ai, n, lat, lon, R_EARTH, out) == 0, "%s",
                      gpuq_errmsg(c));
        run[k].to = take_f64(dt, out, n);
        out = alloc_out(dt, n);
        ck_assert_msg(gpuq_haversine_pair(c, dt, pi, (char *)pi + 2 * n * gpuq_dtype_size(dt), n,
                                          1000.0, out) == 0,
                      "%s", gpuq_errmsg(c));
        run[k].pair = take_f64(dt, out, n);
        char ns[16], las[32], los[32];
        snprintf(ns, sizeof ns, "%zu", n);
        snprintf(las, sizeof las, "%.17g", lat);
        snprintf(los, sizeof los, "%.17g", lon);
        const char *to[] = {"haversine_to", ns, las, los, "6371.0088", "@0", NULL};
        run[k].jto = rb_add(b, to, a, 2 * n, NULL, 0, n);
        const char *pair[] = {"haversine_pair", ns, "1000.0", "@0", "@1", NULL};
        run[k].jpair = rb_add(b, pair, p, 2 * n, p + 2 * n, 2 * n, n);
        run[k].dt = dt;
        run[k].near = near;
        free(a), free(p), free(ai), free(pi);
    }
    rb_run(b);
    for (int k = 0; k < 4; k++) {
        hav_check(run[k].dt, run[k].to, rb_get(b, run[k].jto), n, R_EARTH,
                  run[k].near ? "haversine_to, points around (-33.875, -70.625)"
                              : "haversine_to, global");
        hav_check(run[k].dt, run[k].pair, rb_get(b, run[k].jpair), n, 1000.0,
                  run[k].near ? "haversine_pair, pairs a few km apart" : "haversine_pair, global");
        free(run[k].to), free(run[k].pair);
    }
    rb_free(b);
    /* A hand-computed case: a quarter of the equator. */
    double p[2] = {0, 0}, d;
    ck_assert_int_eq(gpuq_haversine_to(c, GPUQ_DT_F64, p, 1, 0, 90, R_EARTH, &d), 0);
    ck_assert_double_eq_tol(d, R_EARTH * M_PI / 2, 1e-9);
    gpuq_close(c);
}
END_TEST

/* The world, a box of negative latitudes and longitudes holding its target
 * (-33.875, -70.625) as point 16 of 33 both ways, and (float64) the issue's
 * default 1000 x 1000 grid. */
START_TEST(grid_all)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_NORMAL);
    rb_batch *b = rb_new();
    static const struct {
        const char *lat0, *lat1, *nlat, *lon0, *lon1, *nlon, *lat, *lon;
        int f64_only;
    } g[] = {
        {"-60", "75", "101", "-170", "165", "203", "30", "101", 0},
        {"-34", "-33.75", "33", "-70.75", "-70.5", "33", "-33.875", "-70.625", 0},
        {"-90", "90", "1000", "-180", "180", "1000", "30", "101", 1},
    };
    enum { NG = sizeof g / sizeof g[0] };
    double *got[2][NG] = {{NULL}};
    int job[NG];
    for (int k = 0; k < NG; k++) {
        uint64_t nlat = strtoull(g[k].nlat, NULL, 10), nlon = strtoull(g[k].nlon, NULL, 10);
        for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++) {
            if (g[k].f64_only && dt == GPUQ_DT_F32)
                continue;
            void *out = alloc_out(dt, nlat * nlon);
            ck_assert_msg(gpuq_grid(c, dt, atof(g[k].lat0), atof(g[k].lat1), nlat, atof(g[k].lon0),
                                    atof(g[k].lon1), nlon, atof(g[k].lat), atof(g[k].lon), R_EARTH,
                                    out) == 0,
                          "grid: %s", gpuq_errmsg(c));
            got[dt - 1][k] = take_f64(dt, out, nlat * nlon);
        }
        const char *args[] = {"grid",    g[k].lat0, g[k].lat1, g[k].nlat,   g[k].lon0, g[k].lon1,
                              g[k].nlon, g[k].lat,  g[k].lon,  "6371.0088", NULL};
        job[k] = rb_add(b, args, NULL, 0, NULL, 0, nlat * nlon);
    }
    rb_run(b);
    for (int k = 0; k < NG; k++)
        for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++) {
            if (!got[dt - 1][k])
                continue;
            char what[128];
            snprintf(what, sizeof what, "grid lat %s..%s lon %s..%s to (%s, %s)", g[k].lat0,
                     g[k].lat1, g[k].lon0, g[k].lon1, g[k].lat, g[k].lon);
            hav_check(dt, got[dt - 1][k], rb_get(b, job[k]),
                      strtoull(g[k].nlat, NULL, 10) * strtoull(g[k].nlon, NULL, 10), R_EARTH, what);
            free(got[dt - 1][k]);
        }
    rb_free(b);
    gpuq_close(c);
}
END_TEST

/* Normalize of a zero row is an error by default; NaN propagates. */
START_TEST(zero_and_nan)
{
    gpuq_conn *c = e2e_connect("ops", GPUQ_PRIO_NORMAL);
    double z[4] = {0, 0, 0, 0}, o[4];
    for (int m = 0; m < GPUQ_NORM_COUNT; m++) {
        int rc = gpuq_normalize_1d(c, GPUQ_DT_F64, m, z, 4, o);
        ck_assert_int_eq(rc, GPUQ_E_ZERO_NORM);
    }
    double nn[3] = {1, NAN, 2};
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_L2, nn, 3, o), 0);
    ck_assert(isnan(o[0]) && isnan(o[1]) && isnan(o[2]));
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* ---- normalize numerics, per element against the exact result ---- */

/* The case: zscore of 1000 + N(0,1), 4097 values of numpy's
 * default_rng(0), flat; as three rows (the others scaled by 2^-1000 and
 * -1e250, float64); and over 2^17 + 5 values (the CUDA backend's
 * multi-block path). Then inputs that plain sums get wrong, each method
 * and dtype, row-wise and flat. */
START_TEST(normalize_numerics)
{
    gpuq_conn *c = e2e_connect("numerics", GPUQ_PRIO_NORMAL);
    rb_batch *b = rb_new();
    const uint64_t ns[2] = {4097, (1u << 17) + 5};
    int gen[2];
    for (int k = 0; k < 2; k++) {
        char nc[32];
        snprintf(nc, sizeof nc, "%llu", (unsigned long long)ns[k]);
        const char *args[] = {"randn_offset", nc, "0", "1000", NULL};
        gen[k] = rb_add(b, args, NULL, 0, NULL, 0, ns[k]);
    }
    rb_run(b);
    norm_run run[4 + 2 * GPUQ_NORM_COUNT * TU_NORM_KINDS * 2];
    int count = 0;
    for (int k = 0; k < 2; k++) {
        uint64_t n = ns[k];
        double *x = dalloc(3 * n);
        memcpy(x, rb_get(b, gen[k]), n * sizeof *x);
        for (uint64_t j = 0; j < n; j++) {
            x[n + j] = ldexp(x[j], -1000);
            x[2 * n + j] = x[j] * -1e250;
        }
        for (int dt = GPUQ_DT_F64; dt >= GPUQ_DT_F32; dt--) { /* f64 first: round_to */
            uint64_t rows = dt == GPUQ_DT_F64 && k == 0 ? 3 : 1;
            round_to(dt, x, rows * n);
            norm_request(c, b, &run[count++], dt, GPUQ_NORM_ZSCORE, x, rows, n, rows > 1 ? 2 : 1,
                         false, "1000 + N(0,1)");
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
                for (int flat = 0; flat < 2; flat++)
                    norm_request(c, b, &run[count++], dt, m, x, rows, cols, 2, flat,
                                 tu_norm_kind_names[kind]);
            }
    rb_run(b);
    norm_check_all(b, run, count);
    rb_free(b);
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
        int rc = gpuq_normalize_1d(c, e->dt, e->method, in, (uint64_t)e->n, out);
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
            rq_set_method(&r, GPUQ_NORM_SUM);
            rq_set_zero_ok(&r, zero_ok);
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
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, false, x64, 2, 3, o), 0);
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
    e2e_skip_without_gpu(); /* the CUDA variant without a GPU: exits 77 (Skipped) */
    return tu_run_suite(suite());
}
