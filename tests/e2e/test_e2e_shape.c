/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_shape.c - normalize along any axis, kNN with k beyond 1024, and
 * error messages in the user's words, through a real gpuqd (CPU backend;
 * the _cuda twin on a GPU).
 *
 *  - normalize "axis" 0 and -2 of a 2-D array against numpy's column
 *    normalize (ref_ops.py on the transpose: what scikit-learn's
 *    normalize(axis=0) computes), every method, f32 and f64, a shape that
 *    matches no block; the same bytes as the rows of the transpose sent as
 *    rows (the documented bit-for-bit rule); axis 1 and -1 the bytes of no
 *    axis; a 1-D array's axis 0 and -1 its one row;
 *  - a zero column and a zero row named by their index, verbatim; on_zero
 *    "zero" and "nan" along columns;
 *  - bad axes (2, -3, 1 on 1-D, a string, a float, with flat), each
 *    answered verbatim and followed by a ping on the same connection;
 *  - kNN with k = 1025, 2000 and n on small integers (every distance exact,
 *    many exact ties) with NaN rows in y: indices and distances equal a
 *    float64 reference sorted by (distance, index), NaN last, exactly; a k
 *    whose result passes max_output is refused by name;
 *  - messages: d mismatch ("y has d=4, x has d=3"), k > n, a cosine zero
 *    vector named by its row of x or y;
 *  - gpuqctl normalize --axis and distance knn --k 1500 against libgpuq's
 *    bytes, and their errors on stderr.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "npy.h"

static const char *const methods[] = {"sum", "l1", "l2", "minmax", "zscore"};

static void *xmalloc(size_t n)
{
    void *p = malloc(n + 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* x (doubles) as dt in a new buffer, x rounded to dt in place. */
static void *as_dt(gpuq_dtype dt, double *x, size_t n)
{
    void *b = xmalloc(n * gpuq_dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_DT_F32) {
            ((float *)b)[i] = (float)x[i];
            x[i] = ((float *)b)[i];
        } else {
            ((double *)b)[i] = x[i];
        }
    }
    return b;
}

static double at(gpuq_dtype dt, const void *p, size_t i)
{
    return dt == GPUQ_DT_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* t[c][r] = v[r][c] of an r x c array of element size es. */
static void transpose(const void *v, void *t, size_t rows, size_t cols, size_t es)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            memcpy((char *)t + (j * rows + i) * es, (const char *)v + (i * cols + j) * es, es);
}

/* A normalize request of a rows x cols (ndim 1 or 2) with axis (unless
 * axis_set is 0); returns the status, the message in msg. */
static int norm_call(gpuq_conn *c, gpuq_dtype dt, const char *method, unsigned ndim,
                     const uint64_t *shape, const void *in, void *out, int axis_set, int64_t axis,
                     const char *on_zero, char *msg, size_t cap)
{
    size_t n = ndim == 1 ? shape[0] : shape[0] * shape[1], bytes = n * gpuq_dtype_size(dt);
    gpuq_req *r = gpuq_req_new("normalize");
    gpuq_result *res = gpuq_result_new();
    ck_assert(r && res);
    ck_assert_int_eq(gpuq_req_set_str(r, "method", method), 0);
    if (axis_set)
        ck_assert_int_eq(gpuq_req_set_i64(r, "axis", axis), 0);
    if (on_zero)
        ck_assert_int_eq(gpuq_req_set_str(r, "on_zero", on_zero), 0);
    ck_assert_int_eq(gpuq_req_set_input(r, 0, dt, ndim, shape, in, bytes), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, out, bytes), 0);
    int rc = gpuq_call_req(c, r, res);
    if (msg)
        snprintf(msg, cap, "%s", rc ? gpuq_errmsg(c) : "");
    gpuq_result_free(res);
    gpuq_req_free(r);
    return rc;
}

/* Values of row/column kinds: mixed signs, away from a zero sum (sum
 * method), a shape of no block size. */
static void norm_fill(double *x, size_t n, int positive)
{
    tu_rand_fill_f64(x, n, positive ? 0.25 : -7.0, 11.0);
}

START_TEST(norm_columns)
{
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    const size_t rows = 37, cols = 19, n = rows * cols;
    for (int f32 = 0; f32 < 2; f32++) {
        gpuq_dtype dt = f32 ? GPUQ_DT_F32 : GPUQ_DT_F64;
        size_t es = gpuq_dtype_size(dt);
        for (size_t mi = 0; mi < 5; mi++) {
            double *x = xmalloc(n * 8), *xt = xmalloc(n * 8), *ref = xmalloc(n * 8);
            norm_fill(x, n, mi == 0);
            void *in = as_dt(dt, x, n), *in_t = xmalloc(n * es);
            void *out = xmalloc(n * es), *out2 = xmalloc(n * es), *rows_t = xmalloc(n * es);
            void *back = xmalloc(n * es);
            transpose(in, in_t, rows, cols, es);
            transpose(x, xt, rows, cols, 8);
            const uint64_t shape[2] = {rows, cols}, shape_t[2] = {cols, rows};
            char msg[256];
            ck_assert_msg(
                norm_call(c, dt, methods[mi], 2, shape, in, out, 1, 0, NULL, msg, sizeof msg) == 0,
                "%s: %s", methods[mi], msg);
            /* numpy on the columns: ref_ops.py's rows of the transpose */
            char rs[24], cs[24];
            snprintf(rs, sizeof rs, "%zu", cols);
            snprintf(cs, sizeof cs, "%zu", rows);
            const char *args[] = {"normalize", methods[mi], rs, cs, e2e_write_f64("xt.f64", xt, n),
                                  NULL};
            e2e_ref(ref, n, args);
            /* minmax and zscore give values of order 1 that may lie next
             * to 0 (a shift cancels): their error is measured against 1
             * (ulps of the column's scale), the scalings' against |w| */
            const double floor_w = mi >= 3 ? 1.0 : 1e-3;
            double worst = 0.0;
            for (size_t i = 0; i < rows; i++)
                for (size_t j = 0; j < cols; j++) {
                    double g = at(dt, out, i * cols + j), w = ref[j * rows + i];
                    double e = fabs(g - w) / fmax(fabs(w), floor_w);
                    worst = e > worst ? e : worst;
                }
            ck_assert_msg(worst < (f32 ? 2e-6 : 1e-13), "%s %s: column error %g", methods[mi],
                          f32 ? "f32" : "f64", worst);
            /* bit for bit the rows of A.T, transposed back */
            ck_assert_int_eq(
                norm_call(c, dt, methods[mi], 2, shape_t, in_t, rows_t, 0, 0, NULL, NULL, 0), 0);
            transpose(rows_t, back, cols, rows, es);
            ck_assert_msg(memcmp(back, out, n * es) == 0, "%s: axis 0 is not the rows of A.T",
                          methods[mi]);
            /* -2 is 0; 1 and -1 are the rows */
            ck_assert_int_eq(
                norm_call(c, dt, methods[mi], 2, shape, in, out2, 1, -2, NULL, NULL, 0), 0);
            ck_assert(memcmp(out2, out, n * es) == 0);
            ck_assert_int_eq(norm_call(c, dt, methods[mi], 2, shape, in, out, 0, 0, NULL, NULL, 0),
                             0);
            for (int64_t ax = -1; ax <= 1; ax += 2) {
                ck_assert_int_eq(
                    norm_call(c, dt, methods[mi], 2, shape, in, out2, 1, ax, NULL, NULL, 0), 0);
                ck_assert_msg(memcmp(out2, out, n * es) == 0, "axis %lld is not the rows",
                              (long long)ax);
            }
            free(x), free(xt), free(ref), free(in), free(in_t), free(out), free(out2);
            free(rows_t), free(back);
        }
    }
    /* libgpuq's call: the same bytes as the builder's axis 0 */
    double a[6] = {1, 2, 3, 4, 5, 6}, o[6],
           want[6] = {1. / 5, 2. / 7, 3. / 9, 4. / 5, 5. / 7, 6. / 9};
    ck_assert_int_eq(gpuq_normalize_axis(c, GPUQ_DT_F64, GPUQ_NORM_SUM, 0, a, 2, 3, o), 0);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(o[i], want[i], 1e-15);
    ck_assert_int_eq(gpuq_normalize_axis(c, GPUQ_DT_F64, GPUQ_NORM_SUM, 2, a, 2, 3, o),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_ge(gpuq_ping(c), 0);
    gpuq_close(c);
}
END_TEST

START_TEST(norm_1d_axis)
{
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    double v[5] = {3, -4, 1, 0.5, 2}, o1[5], o2[5];
    const uint64_t n = 5;
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_L2, v, 5, o1), 0);
    for (int64_t ax = -1; ax <= 0; ax++) {
        ck_assert_int_eq(norm_call(c, GPUQ_DT_F64, "l2", 1, &n, v, o2, 1, ax, NULL, NULL, 0), 0);
        ck_assert(memcmp(o1, o2, sizeof o1) == 0);
    }
    char msg[256];
    ck_assert_int_eq(norm_call(c, GPUQ_DT_F64, "l2", 1, &n, v, o2, 1, 1, NULL, msg, sizeof msg),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_str_eq(msg, "bad_argument: axis=1 is out of range for a 1-D array (0 or -1)");
    ck_assert_int_ge(gpuq_ping(c), 0);
    gpuq_close(c);
}
END_TEST

START_TEST(norm_zero_named)
{
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    enum { R = 20, C = 6 };
    double a[R * C], o[R * C];
    const uint64_t shape[2] = {R, C};
    char msg[256];
    for (int i = 0; i < R * C; i++)
        a[i] = 1.0 + (i % 7);
    for (int i = 0; i < R; i++)
        a[i * C + 4] = 0.0; /* column 4 all zeros */
    ck_assert_int_eq(norm_call(c, GPUQ_DT_F64, "l2", 2, shape, a, o, 1, 0, NULL, msg, sizeof msg),
                     GPUQ_E_ZERO_NORM);
    ck_assert_str_eq(msg, "zero_norm: column 4 has zero l2 norm");
    ck_assert_int_ge(gpuq_ping(c), 0);
    ck_assert_int_eq(norm_call(c, GPUQ_DT_F64, "l2", 2, shape, a, o, 1, 0, "zero", NULL, 0), 0);
    for (int i = 0; i < R; i++) {
        ck_assert(o[i * C + 4] == 0.0);
        ck_assert(o[i * C + 3] > 0.0);
    }
    ck_assert_int_eq(norm_call(c, GPUQ_DT_F64, "l2", 2, shape, a, o, 1, 0, "nan", NULL, 0), 0);
    for (int i = 0; i < R; i++) {
        ck_assert(isnan(o[i * C + 4]));
        ck_assert(!isnan(o[i * C + 5]));
    }
    /* a constant column under minmax */
    for (int i = 0; i < R; i++)
        a[i * C + 4] = 1.0 + i, a[i * C + 2] = 3.5;
    ck_assert_int_eq(
        norm_call(c, GPUQ_DT_F64, "minmax", 2, shape, a, o, 1, -2, NULL, msg, sizeof msg),
        GPUQ_E_ZERO_NORM);
    ck_assert_str_eq(msg, "zero_norm: column 2 is constant (minmax)");
    /* a zero row along the rows */
    for (int i = 0; i < R * C; i++)
        a[i] = 1.0 + (i % 5);
    for (int j = 0; j < C; j++)
        a[12 * C + j] = 0.0;
    ck_assert_int_eq(norm_call(c, GPUQ_DT_F64, "l1", 2, shape, a, o, 0, 0, NULL, msg, sizeof msg),
                     GPUQ_E_ZERO_NORM);
    ck_assert_str_eq(msg, "zero_norm: row 12 has zero l1 norm");
    ck_assert_int_ge(gpuq_ping(c), 0);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

START_TEST(norm_bad_axis)
{
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    double a[6] = {1, 2, 3, 4, 5, 6}, o[6];
    const uint64_t shape[2] = {2, 3};
    char msg[256];
    static const int64_t bad[] = {2, -3, 1000, INT64_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(
            norm_call(c, GPUQ_DT_F64, "sum", 2, shape, a, o, 1, bad[i], NULL, msg, sizeof msg),
            GPUQ_E_BAD_ARGUMENT);
        char want[128];
        snprintf(want, sizeof want,
                 "bad_argument: axis=%lld is out of range for a 2-D array (0, 1, -1 or -2)",
                 (long long)bad[i]);
        ck_assert_str_eq(msg, want);
        ck_assert_int_ge(gpuq_ping(c), 0);
    }
    /* not an integer: a string, a float */
    for (int kind = 0; kind < 2; kind++) {
        gpuq_req *r = gpuq_req_new("normalize");
        gpuq_result *res = gpuq_result_new();
        ck_assert(r && res);
        if (kind == 0)
            ck_assert_int_eq(gpuq_req_set_str(r, "axis", "0"), 0);
        else
            ck_assert_int_eq(gpuq_req_set_f64(r, "axis", 0.5), 0);
        ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, shape, a, sizeof a), 0);
        ck_assert_int_eq(gpuq_req_set_output(r, 0, o, sizeof o), 0);
        ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_HEADER);
        ck_assert_str_eq(gpuq_errmsg(c), "bad_header: \"axis\" must be an int");
        gpuq_result_free(res);
        gpuq_req_free(r);
        ck_assert_int_ge(gpuq_ping(c), 0);
    }
    /* with flat */
    gpuq_req *r = gpuq_req_new("normalize");
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_req_set_i64(r, "axis", 0), 0);
    ck_assert_int_eq(gpuq_req_set_bool(r, "flat", true), 0);
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, shape, a, sizeof a), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, o, sizeof o), 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_ARGUMENT);
    ck_assert_str_eq(gpuq_errmsg(c),
                     "bad_argument: normalize takes \"axis\" or \"flat\", not both");
    gpuq_result_free(res);
    gpuq_req_free(r);
    ck_assert_int_ge(gpuq_ping(c), 0);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* ------------------------------------------------------------------ knn */

/* The reference of one query: (distance, index), NaN last. */
typedef struct ent {
    double d;
    int64_t i;
} ent;

static int ent_cmp(const void *pa, const void *pb)
{
    const ent *a = pa, *b = pb;
    int na = isnan(a->d), nb = isnan(b->d);
    if (na != nb)
        return na - nb;
    if (!na && a->d != b->d)
        return a->d < b->d ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* metric 0 euclidean, 1 sqeuclidean, 3 manhattan of rows of doubles,
 * rounded to dt as the daemon returns it. */
static double ref_dist(int metric, const double *x, const double *y, size_t d, gpuq_dtype dt)
{
    double s = 0.0;
    for (size_t k = 0; k < d; k++) {
        double t = x[k] - y[k];
        s += metric == GPUQ_METRIC_MANHATTAN ? fabs(t) : t * t;
    }
    if (metric == GPUQ_METRIC_EUCLIDEAN)
        s = sqrt(s);
    return dt == GPUQ_DT_F32 ? (double)(float)s : s;
}

/* x [m, d], y [n, d] of small integers (many exact ties), rows of NaN in y. */
static void knn_fill(double *x, size_t m, double *y, size_t n, size_t d)
{
    for (size_t i = 0; i < m * d; i++)
        x[i] = (double)(rand() % 5 - 2);
    for (size_t i = 0; i < n * d; i++)
        y[i] = (double)(rand() % 7 - 3);
    const size_t nan_rows[] = {0, 5, n / 2, n - 1};
    for (size_t r = 0; r < 4; r++)
        y[nan_rows[r] * d + (r % d)] = NAN;
}

START_TEST(knn_big_k)
{
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    const size_t m = 3, n = 2600, d = 3;
    const uint64_t ks[] = {1025, 2000, n};
    const int metrics[] = {GPUQ_METRIC_SQEUCLIDEAN, GPUQ_METRIC_MANHATTAN, GPUQ_METRIC_EUCLIDEAN};
    double *x = xmalloc(m * d * 8), *y = xmalloc(n * d * 8);
    srand((unsigned)tu_seed());
    knn_fill(x, m, y, n, d);
    ent *ref = xmalloc(n * sizeof *ref);
    for (int f32 = 0; f32 < 2; f32++) {
        gpuq_dtype dt = f32 ? GPUQ_DT_F32 : GPUQ_DT_F64;
        void *xd = as_dt(dt, x, m * d), *yd = as_dt(dt, y, n * d);
        void *dist = xmalloc(m * n * 8);
        int64_t *idx = xmalloc(m * n * 8);
        for (size_t mi = 0; mi < 3; mi++)
            for (size_t ki = 0; ki < 3; ki++) {
                uint64_t k = ks[ki];
                int rc = gpuq_knn(c, dt, metrics[mi], xd, yd, m, n, d, k, dist, idx);
                ck_assert_msg(rc == 0, "k=%llu: %s", (unsigned long long)k, gpuq_errmsg(c));
                for (size_t q = 0; q < m; q++) {
                    for (size_t j = 0; j < n; j++)
                        ref[j] =
                            (ent){ref_dist(metrics[mi], x + q * d, y + j * d, d, dt), (int64_t)j};
                    qsort(ref, n, sizeof *ref, ent_cmp);
                    for (size_t t = 0; t < k; t++) {
                        double g = at(dt, dist, q * k + t);
                        ck_assert_msg(idx[q * k + t] == ref[t].i &&
                                          (g == ref[t].d || (isnan(g) && isnan(ref[t].d))),
                                      "metric %d k=%llu row %zu place %zu: (%g, %lld), want "
                                      "(%g, %lld)",
                                      metrics[mi], (unsigned long long)k, q, t, g,
                                      (long long)idx[q * k + t], ref[t].d, (long long)ref[t].i);
                    }
                }
            }
        free(xd), free(yd), free(dist), free(idx);
    }
    free(ref), free(x), free(y);
    gpuq_close(c);
}
END_TEST

/* k's bound is max_output: [m, k] distances and indices. */
START_TEST(knn_k_max_output)
{
    const char *const extra[] = {"--max-output", "64K", NULL};
    e2e_restart(extra);
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    const size_t m = 2, n = 4000, d = 2;
    double *x = xmalloc(m * d * 8), *y = xmalloc(n * d * 8), *dist = xmalloc(m * n * 8);
    int64_t *idx = xmalloc(m * n * 8);
    knn_fill(x, m, y, n, d);
    ck_assert_int_eq(
        gpuq_knn(c, GPUQ_DT_F64, GPUQ_METRIC_EUCLIDEAN, x, y, m, n, d, 4000, dist, idx),
        GPUQ_E_TOO_LARGE);
    ck_assert_str_eq(gpuq_errmsg(c), "too_large: output needs 128000 bytes, over max_output 65536");
    ck_assert_int_ge(gpuq_ping(c), 0);
    ck_assert_int_eq(
        gpuq_knn(c, GPUQ_DT_F64, GPUQ_METRIC_EUCLIDEAN, x, y, m, n, d, 2048, dist, idx), 0);
    free(x), free(y), free(dist), free(idx);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

START_TEST(messages)
{
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    double x[3 * 700] = {0}, y[700 * 5], out[3 * 700];
    int64_t idx[3 * 700];
    for (size_t i = 0; i < 700 * 5; i++)
        y[i] = 1.0 + (double)(i % 11);
    for (size_t i = 0; i < 3 * 700; i++)
        x[i] = 0.5 + (double)(i % 3);
    /* x [3, 3] against y [4, 4], pairwise and knn */
    for (int op = 0; op < 2; op++) {
        const uint64_t sx[2] = {3, 3}, sy[2] = {4, 4};
        gpuq_req *r = gpuq_req_new(op ? "knn" : "pairwise");
        gpuq_result *res = gpuq_result_new();
        ck_assert_int_eq(gpuq_req_set_str(r, "metric", "euclidean"), 0);
        if (op)
            ck_assert_int_eq(gpuq_req_set_u64(r, "k", 2), 0);
        ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, sx, x, 9 * 8), 0);
        ck_assert_int_eq(gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, sy, y, 16 * 8), 0);
        ck_assert_int_eq(gpuq_req_set_output(r, 0, out, sizeof out), 0);
        if (op)
            ck_assert_int_eq(gpuq_req_set_output(r, 1, idx, sizeof idx), 0);
        ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_SHAPE);
        ck_assert_str_eq(gpuq_errmsg(c), "bad_shape: y has d=4, x has d=3");
        gpuq_result_free(res);
        gpuq_req_free(r);
        ck_assert_int_ge(gpuq_ping(c), 0);
    }
    ck_assert_int_eq(gpuq_knn(c, GPUQ_DT_F64, GPUQ_METRIC_EUCLIDEAN, x, y, 3, 8, 5, 9, out, idx),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_str_eq(gpuq_errmsg(c), "bad_argument: k=9 is more than the n=8 rows of y");
    ck_assert_int_ge(gpuq_ping(c), 0);
    /* the cosine zero vector, by its row */
    static const char why[] =
        " is a zero vector (cosine distance needs a nonzero norm; on_zero \"zero\" or \"nan\" "
        "accepts it)";
    char want[256];
    for (size_t j = 0; j < 5; j++)
        y[637 * 5 + j] = 0.0;
    ck_assert_int_eq(gpuq_knn(c, GPUQ_DT_F64, GPUQ_METRIC_COSINE, x, y, 3, 700, 5, 4, out, idx),
                     GPUQ_E_ZERO_NORM);
    snprintf(want, sizeof want, "zero_norm: y row 637%s", why);
    ck_assert_str_eq(gpuq_errmsg(c), want);
    ck_assert_int_eq(gpuq_pairwise(c, GPUQ_DT_F64, GPUQ_METRIC_COSINE, x, y, 3, 700, 5, out),
                     GPUQ_E_ZERO_NORM);
    ck_assert_str_eq(gpuq_errmsg(c), want);
    for (size_t j = 0; j < 5; j++)
        x[1 * 5 + j] = 0.0;
    ck_assert_int_eq(gpuq_knn(c, GPUQ_DT_F64, GPUQ_METRIC_COSINE, x, y, 3, 700, 5, 4, out, idx),
                     GPUQ_E_ZERO_NORM);
    snprintf(want, sizeof want, "zero_norm: x row 1%s", why);
    ck_assert_str_eq(gpuq_errmsg(c), want);
    ck_assert_int_ge(gpuq_ping(c), 0);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* ---------------------------------------------------------------- gpuqctl */

static tu_output ctl(const char *const *args)
{
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, NULL};
    return tu_capture(pre, args, e2e_d.dir, "ctl");
}
#define CTL(...) ctl((const char *const[]){__VA_ARGS__, NULL})

static void *read_npy(const char *path, size_t bytes)
{
    npy_array a;
    char err[256];
    ck_assert_msg(npy_read(path, &a, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(a.nbytes, bytes);
    void *d = a.data;
    a.data = NULL;
    npy_free(&a);
    return d;
}

START_TEST(ctl_axis_and_k)
{
    gpuq_conn *c = e2e_connect("shape", GPUQ_PRIO_NORMAL);
    enum { R = 9, C = 5 };
    double a[R * C], o[R * C], e[256];
    const uint64_t shape[2] = {R, C};
    tu_rand_fill_f64(a, R * C, -3.0, 5.0);
    ck_assert_int_eq(npy_write(e2e_dpath("a.npy"), GPUQ_DT_F64, 2, shape, a, (char *)e, sizeof e),
                     0);
    tu_output r = CTL("normalize", "--method", "l2", "--axis", "0", e2e_dpath("a.npy"), "-o",
                      e2e_dpath("o.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    ck_assert_int_eq(gpuq_normalize_axis(c, GPUQ_DT_F64, GPUQ_NORM_L2, 0, a, R, C, o), 0);
    double *got = read_npy(e2e_dpath("o.npy"), sizeof o);
    ck_assert(memcmp(got, o, sizeof o) == 0);
    free(got);
    r = CTL("normalize", "--axis", "2", e2e_dpath("a.npy"), "-o", e2e_dpath("o2.npy"));
    ck_assert_int_ne(r.rc, 0);
    ck_assert_msg(strstr(r.err, "axis=2 is out of range for a 2-D array (0, 1, -1 or -2)"), "%s",
                  r.err);
    tu_output_free(&r);
    r = CTL("normalize", "--axis", "x", e2e_dpath("a.npy"), "-o", e2e_dpath("o2.npy"));
    ck_assert_int_eq(r.rc, 2);
    ck_assert_msg(strstr(r.err, "bad --axis 'x' (an integer: 0, 1, -1 or -2)"), "%s", r.err);
    tu_output_free(&r);
    r = CTL("normalize", "--axis", "0", "--flat", e2e_dpath("a.npy"), "-o", e2e_dpath("o2.npy"));
    ck_assert_int_eq(r.rc, 2);
    ck_assert_msg(strstr(r.err, "--axis and --flat do not go together"), "%s", r.err);
    tu_output_free(&r);
    /* knn --k past 1024, and a d mismatch in the user's words */
    const size_t n = 1600, d = 2;
    double *x = xmalloc(4 * d * 8), *y = xmalloc(n * d * 8), *dist = xmalloc(4 * n * 8);
    int64_t *idx = xmalloc(4 * n * 8);
    knn_fill(x, 4, y, n, d);
    const uint64_t sx[2] = {4, d}, sy[2] = {n, d}, sb[2] = {n, 1};
    ck_assert_int_eq(npy_write(e2e_dpath("x.npy"), GPUQ_DT_F64, 2, sx, x, (char *)e, sizeof e), 0);
    ck_assert_int_eq(npy_write(e2e_dpath("y.npy"), GPUQ_DT_F64, 2, sy, y, (char *)e, sizeof e), 0);
    ck_assert_int_eq(npy_write(e2e_dpath("b.npy"), GPUQ_DT_F64, 2, sb, y, (char *)e, sizeof e), 0);
    r = CTL("distance", "knn", "--k", "1500", "--metric", "sqeuclidean", e2e_dpath("x.npy"),
            e2e_dpath("y.npy"), "-o", e2e_dpath("d.npy"), "-i", e2e_dpath("i.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    ck_assert_int_eq(
        gpuq_knn(c, GPUQ_DT_F64, GPUQ_METRIC_SQEUCLIDEAN, x, y, 4, n, d, 1500, dist, idx), 0);
    void *gd = read_npy(e2e_dpath("d.npy"), 4 * 1500 * 8),
         *gi = read_npy(e2e_dpath("i.npy"), 4 * 1500 * 8);
    for (size_t i = 0; i < 4 * 1500; i++) /* npy_read gives int64 files as float64 */
        ck_assert_msg(((double *)gi)[i] == (double)idx[i], "index %zu: gpuqctl %g, libgpuq %lld", i,
                      ((double *)gi)[i], (long long)idx[i]);
    for (size_t i = 0; i < 4 * 1500; i++) {
        double g = ((double *)gd)[i];
        ck_assert_msg(g == dist[i] || (isnan(g) && isnan(dist[i])), "distance %zu: %g, want %g", i,
                      g, dist[i]);
    }
    free(gd), free(gi);
    r = CTL("distance", "knn", "--k", "3", e2e_dpath("x.npy"), e2e_dpath("b.npy"), "-o",
            e2e_dpath("d.npy"), "-i", e2e_dpath("i.npy"));
    ck_assert_int_ne(r.rc, 0);
    ck_assert_msg(strstr(r.err, "y has d=1, x has d=2"), "%s", r.err);
    tu_output_free(&r);
    free(x), free(y), free(dist), free(idx);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_shape");
    TCase *t = tcase_create("shape");
    tcase_add_checked_fixture(t, e2e_setup, e2e_teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, norm_columns);
    tcase_add_test(t, norm_1d_axis);
    tcase_add_test(t, norm_zero_named);
    tcase_add_test(t, norm_bad_axis);
    tcase_add_test(t, knn_big_k);
    tcase_add_test(t, knn_k_max_output);
    tcase_add_test(t, messages);
    tcase_add_test(t, ctl_axis_and_k);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    return tu_run_suite(suite());
}
