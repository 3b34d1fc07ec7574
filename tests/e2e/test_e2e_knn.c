/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_knn.c - the knn op through a real gpuqd: libgpuq's gpuq_knn and
 * the generic builder (two outputs), against scipy (ref_ops.py knn:
 * argsort(cdist, kind='stable')[:, :k]), and every bad input.
 *
 *  - every metric, f32 and f64, on numtol.h's kinds, with sizes that match
 *    no block: k = 1, k = n, n = 1000 and 4099, d = 1, 5, 17, 65, and odd
 *    m*k (the int64 indices then start 4 bytes off an 8-byte boundary in
 *    the packed f32 output); X row 0 equals Y rows 0, n/2 and n-1, which
 *    must come first in that order (ties by the lower index). A row passes
 *    when it is a valid top-k under the reference (tests/knn_check.h):
 *    near-ties in float rounding may reorder;
 *  - the builder: two outputs, their dtypes, shapes and bytes, a result
 *    computed by hand, the same bytes as gpuq_knn;
 *  - bad inputs, each answered with its error and followed by a ping on
 *    the same connection (and a fresh connection at the end): k = 0,
 *    k > n, no k, no metric, d mismatch, rank-1 shape, dtype i64,
 *    another op's key, a payload of the wrong size, and the cosine zero
 *    vector (zero_norm; with on_zero "zero" its distances are 1).
 * References of a test come from one python process (refbatch.h).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "knn_check.h"
#include "mpwrite.h"
#include "numtol.h"
#include "refbatch.h"

static const char *const metric_names[] = {"euclidean", "sqeuclidean", "cosine",
                                           "manhattan", "chebyshev",   "minkowski"};

static const struct {
    uint64_t m, n, d, k;
    int kind;
} shapes[] = {{3, 1, 4, 1, NT_PW_UNIFORM},     {5, 7, 3, 7, NT_PW_MIXED},
              {7, 1000, 5, 3, NT_PW_OFFSET},   {2, 4099, 17, 10, NT_PW_MIXED},
              {9, 1000, 65, 1, NT_PW_UNIFORM}, {3, 1000, 1, 999, NT_PW_WIDE}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static uint8_t hbuf[4096];

static double *dalloc(size_t n)
{
    double *d = malloc(n * sizeof *d + 1);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* x as dt in a new buffer; x rounded to dt in place (the reference sees
 * what the daemon saw). */
static void *to_dtype(gpuq_dtype dt, double *x, size_t n)
{
    void *b = malloc(n * gpuq_dtype_size(dt) + 1);
    ck_assert_ptr_nonnull(b);
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

static void fill(int kind, double *x, uint64_t m, double *y, uint64_t n, uint64_t d)
{
    nt_pw_fill(kind, x, m, y, n, d);
    for (uint64_t c = 0; c < d; c++) { /* planted exact ties */
        x[c] = y[c];
        if (n >= 3)
            y[(n / 2) * d + c] = y[(n - 1) * d + c] = y[c];
    }
}

/* One result against its reference job (m*n full distances, m*k indices as
 * float64, m*k distances). */
static void check_result(gpuq_dtype dt, int metric, uint64_t m, uint64_t n, uint64_t d, uint64_t k,
                         const void *dist, const int64_t *idx, const double *ref, const char *what)
{
    const double *full = ref, *ref_if = ref + m * n, *ref_d = ref_if + m * k;
    double *got_d = dalloc(k);
    int64_t *ref_i = malloc(k * sizeof *ref_i);
    unsigned char *seen = calloc(n, 1);
    ck_assert(ref_i && seen);
    kc_params p = {(int)dt, metric, 1, 2, n, d, k};
    for (uint64_t i = 0; i < m; i++) {
        for (uint64_t t = 0; t < k; t++) {
            got_d[t] = at(dt, dist, i * k + t);
            ref_i[t] = (int64_t)ref_if[i * k + t];
        }
        char why[256];
        int bad = kc_check_row(&p, got_d, idx + i * k, full + i * n, ref_i, ref_d + i * k, seen,
                               why, sizeof why);
        ck_assert_msg(!bad, "%s, row %llu: %s", what, (unsigned long long)i, why);
    }
    /* the planted ties (under cosine with d = 1 every row of one sign ties) */
    if (n >= 3 && k >= 3 && !(metric == GPUQ_METRIC_COSINE && d == 1)) {
        ck_assert_msg(idx[0] == 0 && idx[1] == (int64_t)(n / 2) && idx[2] == (int64_t)(n - 1),
                      "%s: row 0 starts %lld %lld %lld, want the ties 0 %llu %llu", what,
                      (long long)idx[0], (long long)idx[1], (long long)idx[2],
                      (unsigned long long)(n / 2), (unsigned long long)(n - 1));
        ck_assert(at(dt, dist, 0) == at(dt, dist, 1) && at(dt, dist, 1) == at(dt, dist, 2));
    }
    free(got_d), free(ref_i), free(seen);
}

/* Every metric, dtype and shape through gpuq_knn. */
START_TEST(knn_all)
{
    gpuq_conn *c = e2e_connect("knn", GPUQ_PRIO_HIGH);
    rb_batch *b = rb_new();
    enum { RUNS = 2 * N_SHAPES * GPUQ_METRIC_COUNT };
    struct {
        void *dist;
        int64_t *idx;
        int job, dt, metric, sh;
    } run[RUNS];
    int count = 0;
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (int sh = 0; sh < (int)N_SHAPES; sh++) {
            uint64_t m = shapes[sh].m, n = shapes[sh].n, d = shapes[sh].d, k = shapes[sh].k;
            double *x = dalloc(m * d), *y = dalloc(n * d);
            fill(shapes[sh].kind, x, m, y, n, d);
            void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
            char ms[24], ns[24], ds[24], ks[24];
            snprintf(ms, sizeof ms, "%llu", (unsigned long long)m);
            snprintf(ns, sizeof ns, "%llu", (unsigned long long)n);
            snprintf(ds, sizeof ds, "%llu", (unsigned long long)d);
            snprintf(ks, sizeof ks, "%llu", (unsigned long long)k);
            for (int mt = 0; mt < GPUQ_METRIC_COUNT; mt++) {
                void *dist = malloc(m * k * gpuq_dtype_size(dt));
                int64_t *idx = malloc(m * k * sizeof *idx);
                ck_assert(dist && idx);
                memset(idx, 0xff, m * k * sizeof *idx); /* poison: -1 fails the check */
                int rc = gpuq_knn(c, dt, mt, xi, yi, m, n, d, k, dist, idx);
                ck_assert_msg(rc == 0, "knn %s m=%llu n=%llu: %s", metric_names[mt],
                              (unsigned long long)m, (unsigned long long)n, gpuq_errmsg(c));
                const char *args[] = {"knn", metric_names[mt], ms, ns, ds, ks, "@0", "@1", NULL};
                run[count].job = rb_add(b, args, x, m * d, y, n * d, m * n + 2 * m * k);
                run[count].dist = dist;
                run[count].idx = idx;
                run[count].dt = dt;
                run[count].metric = mt;
                run[count].sh = sh;
                count++;
            }
            free(x), free(y), free(xi), free(yi);
        }
    rb_run(b);
    for (int r = 0; r < count; r++) {
        int sh = run[r].sh;
        char what[160];
        snprintf(what, sizeof what, "knn %s %s of %s, m=%llu n=%llu d=%llu k=%llu",
                 metric_names[run[r].metric], run[r].dt == GPUQ_DT_F32 ? "f32" : "f64",
                 nt_pw_kind_name(shapes[sh].kind), (unsigned long long)shapes[sh].m,
                 (unsigned long long)shapes[sh].n, (unsigned long long)shapes[sh].d,
                 (unsigned long long)shapes[sh].k);
        check_result(run[r].dt, run[r].metric, shapes[sh].m, shapes[sh].n, shapes[sh].d,
                     shapes[sh].k, run[r].dist, run[r].idx, rb_get(b, run[r].job), what);
        free(run[r].dist), free(run[r].idx);
    }
    rb_free(b);
    gpuq_close(c);
}
END_TEST

/* The generic builder: two outputs, by hand. Y = 3 1 NaN -1 1 0.5 (1-D),
 * X = 0, 1, 2 (m*k = 9, odd): |x - y| for x = 0 is 3 1 NaN 1 1 0.5, so
 * k = 3 gives 5 (0.5), 1 (1), 3 (1); x = 1: 1 (0), 4 (0), 5 (0.5); x = 2
 * (1 1 NaN 3 1 1.5): 0, 1, 4, all at 1. */
START_TEST(knn_builder)
{
    gpuq_conn *c = e2e_connect("knn-builder", GPUQ_PRIO_NORMAL);
    const float y[6] = {3, 1, NAN, -1, 1, 0.5f}, x[3] = {0, 1, 2};
    const int64_t want_i[9] = {5, 1, 3, 1, 4, 5, 0, 1, 4};
    const float want_d[9] = {0.5f, 1, 1, 0, 0, 0.5f, 1, 1, 1};
    const uint64_t xs[2] = {3, 1}, ys[2] = {6, 1};
    gpuq_req *r = gpuq_req_new("knn");
    ck_assert_ptr_nonnull(r);
    float dist[9];
    int64_t idx[9];
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, xs, x, sizeof x), 0);
    ck_assert_int_eq(gpuq_req_set_input(r, 1, GPUQ_DT_F32, 2, ys, y, sizeof y), 0);
    ck_assert_int_eq(gpuq_req_set_str(r, "metric", "manhattan"), 0);
    ck_assert_int_eq(gpuq_req_set_u64(r, "k", 3), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, dist, sizeof dist), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 1, idx, sizeof idx), 0);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    int rc = gpuq_call_req(c, r, res);
    ck_assert_msg(rc == 0, "knn builder: %s", gpuq_errmsg(c));
    ck_assert_uint_eq(gpuq_result_outputs(res), 2);
    ck_assert_int_eq(gpuq_result_dtype(res, 0), GPUQ_DT_F32);
    ck_assert_int_eq(gpuq_result_dtype(res, 1), GPUQ_DT_I64);
    for (unsigned o = 0; o < 2; o++) {
        ck_assert_uint_eq(gpuq_result_ndim(res, o), 2);
        ck_assert_uint_eq(gpuq_result_dim(res, o, 0), 3);
        ck_assert_uint_eq(gpuq_result_dim(res, o, 1), 3);
    }
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), sizeof dist);
    ck_assert_uint_eq(gpuq_result_bytes(res, 1), sizeof idx);
    for (int t = 0; t < 9; t++)
        ck_assert_msg(idx[t] == want_i[t] && dist[t] == want_d[t],
                      "position %d: (%g, %lld), want (%g, %lld)", t, (double)dist[t],
                      (long long)idx[t], (double)want_d[t], (long long)want_i[t]);
    /* gpuq_knn: the same bytes; k = n = 6 puts the NaN (index 2) last */
    float dist2[18];
    int64_t idx2[18];
    ck_assert_int_eq(gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_MANHATTAN, x, y, 3, 6, 1, 3, dist2, idx2),
                     0);
    ck_assert(memcmp(dist2, dist, sizeof dist) == 0 && memcmp(idx2, idx, sizeof idx) == 0);
    ck_assert_int_eq(gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_MANHATTAN, x, y, 3, 6, 1, 6, dist2, idx2),
                     0);
    for (int i = 0; i < 3; i++)
        ck_assert(idx2[i * 6 + 5] == 2 && isnan(dist2[i * 6 + 5]));
    /* an output buffer too small for the indices: refused before sending */
    ck_assert_int_eq(gpuq_req_set_output(r, 1, idx, sizeof idx - 8), 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(gpuq_ping(c), 0);
    /* libgpuq refuses k > n and k = 0 as the daemon would; the session goes on */
    ck_assert_int_eq(gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, x, y, 3, 6, 1, 7, dist2, idx2),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gpuq_errmsg(c), "k=7"));
    ck_assert_int_eq(gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, x, y, 3, 6, 1, 0, dist2, idx2),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_ping(c), 0);
    gpuq_result_free(res);
    gpuq_req_free(r);
    gpuq_close(c);
}
END_TEST

/* ---- bad inputs on a raw socket ---- */

/* A knn header written by hand: dtype (NULL: none), shapes (ndim 0: none),
 * metric, k (0: none), on_zero (NULL: none), one extra string key. */
typedef struct knn_hdr {
    uint64_t id;
    const char *dtype;
    uint32_t nda, ndb;
    uint64_t a[2], b[2];
    const char *metric;
    uint64_t k;
    bool has_k;
    const char *on_zero;
    const char *extra_key, *extra_val;
} knn_hdr;

static void send_knn(int fd, const knn_hdr *h, const void *payload, size_t declared, size_t plen)
{
    gpuq_mpw *w = gpuq_mpw_new();
    ck_assert_ptr_nonnull(w);
    gpuq_mpw_map(w, 2 + !!h->dtype + !!h->nda + !!h->ndb + !!h->metric + h->has_k + !!h->on_zero +
                        !!h->extra_key);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, h->id);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, "knn");
    if (h->dtype) {
        gpuq_mpw_str(w, "dtype");
        gpuq_mpw_str(w, h->dtype);
    }
    for (int s = 0; s < 2; s++) {
        uint32_t nd = s ? h->ndb : h->nda;
        if (!nd)
            continue;
        gpuq_mpw_str(w, s ? "shape_b" : "shape");
        gpuq_mpw_array(w, nd);
        for (uint32_t i = 0; i < nd; i++)
            gpuq_mpw_uint(w, s ? h->b[i] : h->a[i]);
    }
    if (h->metric) {
        gpuq_mpw_str(w, "metric");
        gpuq_mpw_str(w, h->metric);
    }
    if (h->has_k) {
        gpuq_mpw_str(w, "k");
        gpuq_mpw_uint(w, h->k);
    }
    if (h->on_zero) {
        gpuq_mpw_str(w, "on_zero");
        gpuq_mpw_str(w, h->on_zero);
    }
    if (h->extra_key) {
        gpuq_mpw_str(w, h->extra_key);
        gpuq_mpw_str(w, h->extra_val);
    }
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(gpuq_mpw_take(w, &buf, &len), 0);
    gpuq_mpw_free(w);
    e2e_send_frame(fd, buf, (uint32_t)len, declared, payload, plen);
    free(buf);
}

/* A valid f64 request: X [2, 2], Y [3, 2], euclidean, k = 2. */
static knn_hdr good_hdr(uint64_t id)
{
    knn_hdr h = {.id = id,
                 .dtype = "f64",
                 .nda = 2,
                 .ndb = 2,
                 .a = {2, 2},
                 .b = {3, 2},
                 .metric = "euclidean",
                 .k = 2,
                 .has_k = true};
    return h;
}

/* Send h with a payload of the size its shapes imply (zeros unless given),
 * expect the error code whose message contains want (NULL: any), then a
 * ping answered on the same connection. */
static void expect_knn_error(int fd, const knn_hdr *h, const void *payload, int code,
                             const char *want)
{
    size_t esize = 8;
    uint64_t elems = (h->nda ? h->a[0] * (h->nda > 1 ? h->a[1] : 1) : 0) +
                     (h->ndb ? h->b[0] * (h->ndb > 1 ? h->b[1] : 1) : 0);
    size_t plen = (size_t)elems * esize;
    void *zeros = calloc(plen + 1, 1);
    ck_assert_ptr_nonnull(zeros);
    send_knn(fd, h, payload ? payload : zeros, plen, plen);
    free(zeros);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == code, "knn id %llu: got %s (%s), want %s",
                  (unsigned long long)h->id, gpuq_errname(rep.status), rep.message,
                  gpuq_errname(code));
    ck_assert_uint_eq(rep.id, h->id);
    ck_assert_msg(!want || strstr(rep.message, want), "knn id %llu: message '%s' lacks '%s'",
                  (unsigned long long)h->id, rep.message, want);
    gpuq_request p;
    gpuq_request_init(&p);
    p.op = GPUQ_OP_PING;
    p.id = h->id + 1000;
    e2e_send_req(fd, &p, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.id, p.id);
}

START_TEST(knn_bad)
{
    int fd = e2e_hello_socket("knn-bad", hbuf, sizeof hbuf);
    knn_hdr h;

    h = good_hdr(1), h.k = 0;
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_ARGUMENT, "k=0");
    h = good_hdr(2), h.k = 4; /* n = 3 */
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_ARGUMENT, "k=4 is more than the n=3");
    /* (id 3: k past 1024 is valid; its bound, max_output, is test_e2e_shape's) */
    h = good_hdr(4), h.has_k = false;
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_ARGUMENT, "\"k\"");
    h = good_hdr(5), h.metric = NULL;
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_ARGUMENT, "\"metric\"");
    h = good_hdr(6), h.b[1] = 3;
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_SHAPE, "d=3");
    h = good_hdr(7), h.nda = 1, h.a[0] = 4;
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_SHAPE, "[m, d]");
    h = good_hdr(8), h.ndb = 1, h.b[0] = 6;
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_SHAPE, "[n, d]");
    h = good_hdr(9), h.dtype = "i64";
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_DTYPE, NULL);
    h = good_hdr(10), h.extra_key = "method", h.extra_val = "l2";
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_ARGUMENT, "method");
    h = good_hdr(11), h.metric = "mahalanobis";
    expect_knn_error(fd, &h, NULL, GPUQ_E_BAD_ARGUMENT, NULL);
    h = good_hdr(12), h.a[0] = 0;
    expect_knn_error(fd, &h, NULL, GPUQ_E_EMPTY, NULL);

    /* a payload shorter than the shapes say */
    h = good_hdr(13);
    double pay[10] = {0};
    send_knn(fd, &h, pay, 72, 72);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_SIZE_MISMATCH);
    ck_assert_uint_eq(rep.id, 13);

    /* cosine with a zero vector in X: zero_norm; with on_zero "zero" the
     * zero row's distances are 1 (indices 0, 1: ties by index) */
    const double zx[10] = {0, 0, 3, 4, 3, 4, 0, 2, -6, -8};
    h = good_hdr(14), h.metric = "cosine";
    expect_knn_error(fd, &h, zx, GPUQ_E_ZERO_NORM, "zero vector");
    h = good_hdr(15), h.metric = "cosine", h.on_zero = "error";
    expect_knn_error(fd, &h, zx, GPUQ_E_ZERO_NORM, NULL);
    h = good_hdr(16), h.metric = "cosine", h.on_zero = "zero";
    send_knn(fd, &h, zx, sizeof zx, sizeof zx);
    uint8_t out[64];
    size_t olen = 0;
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, out, sizeof out, &olen), 0);
    ck_assert_msg(rep.status == 0, "on_zero zero: %s", rep.message);
    ck_assert_uint_eq(olen, 4 * 8 + 4 * 8);
    ck_assert_int_eq(rep.dtype_b, GPUQ_DT_I64);
    ck_assert(rep.ndim_b == 2 && rep.shape_b[0] == 2 && rep.shape_b[1] == 2);
    double od[4];
    int64_t oi[4];
    memcpy(od, out, sizeof od);
    memcpy(oi, out + sizeof od, sizeof oi);
    /* row 0 (zero): 1, 1 at 0, 1; row 1 (3, 4): 0 at 0, then (0, 2): 1 - 8/10 */
    ck_assert(od[0] == 1 && od[1] == 1 && oi[0] == 0 && oi[1] == 1);
    ck_assert(od[2] == 0 && oi[2] == 0 && fabs(od[3] - 0.2) < 1e-15 && oi[3] == 1);
    close(fd);
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_knn");
    TCase *tc = tcase_create("knn");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, knn_all);
    tcase_add_test(tc, knn_builder);
    tcase_add_test(tc, knn_bad);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* the CUDA variant without a GPU: exits 77 (Skipped) */
    return tu_run_suite(suite());
}
