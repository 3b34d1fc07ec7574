/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_lib_resident.c - libgpuq's resident arrays (PROTOCOL.md 3.5):
 * gpuq_put, gpuq_get, gpuq_list(_json), gpuq_remove and the builder's
 * gpuq_req_set_input_resident / _output_resident / _access.
 *
 * Against a real gpuqd: put then get gives the same bytes (socket, shm and
 * auto; into a buffer and kept in the result), a buffer too small is
 * too_large with the stream in step; list says what was put (owner,
 * access, dtype, shape, bytes, device, users; sorted; more than 64 of
 * them), list_json is its JSON; remove then get is not_found; a knn with a
 * resident base (or queries, or both) equals the one with both carried,
 * bit for bit, and both pass the kNN check against a double reference
 * computed here; a normalize whose output is kept, then a pairwise against
 * it, equals the carried result and the reference; kept knn indices read
 * back equal the carried ones; bad names are bad_argument before anything
 * is sent (the connection then serves a ping); gpuqd's own refusals
 * (bad_shape, bad_dtype, an output named as an input) come through.
 * Against a fake server on a Unix socket (no gpuqd): the headers libgpuq
 * sends ("in": [nil, "base"] with no "shape_b", put's "name" and "access",
 * get's "name", a kept output's "out": [nil, "idx"]) and how it reads the
 * replies (by the reply's shapes; a kept output's bytes absent; list as
 * info "arrays" or as a document).
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "e2e_util.h"
#include "frame.h"
#include "knn_check.h"
#include "mpread.h"
#include "mpwrite.h"

static gpuq_conn *c;

static void res_setup(void)
{
    e2e_setup();
    c = e2e_connect("resident", GPUQ_PRIO_NORMAL);
}

static void res_teardown(void)
{
    gpuq_close(c);
    e2e_teardown();
}

#define OK(call) ck_assert_msg((call) == 0, "%s: %s", #call, gpuq_errmsg(c))

static double *rand_f64(size_t n, double lo, double hi)
{
    double *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_rand_fill_f64(x, n, lo, hi);
    return x;
}

static float *to_f32(const double *x, size_t n)
{
    float *f = malloc(n * sizeof *f);
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    return f;
}

/* ---- list documents ---- */

typedef struct row {
    char name[GPUQ_RES_NAME_MAX + 1];
    char access[16], dtype[8];
    uint64_t owner, bytes, users;
    int64_t device;
    uint32_t ndim;
    uint64_t shape[2];
} row;

/* The maps of a gpuq_list document into rows[cap]; their number. Every
 * key PROTOCOL.md 3.5 names must be there. */
static int read_rows(const uint8_t *doc, size_t len, row *rows, int cap)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    int n = 0;
    while (gpuq_mpr_left(&r) > 0) {
        uint32_t nk;
        ck_assert_int_eq(gpuq_mpr_map(&r, &nk), 0);
        row tmp, *w = n < cap ? &rows[n] : &tmp;
        memset(w, 0, sizeof *w);
        unsigned seen = 0;
        for (uint32_t i = 0; i < nk; i++) {
            const char *k, *s;
            uint32_t kl, sl;
            ck_assert_int_eq(gpuq_mpr_str(&r, &k, &kl), 0);
#define KEY(x) (kl == strlen(x) && memcmp(k, x, kl) == 0)
            if (KEY("name") || KEY("access") || KEY("dtype")) {
                ck_assert_int_eq(gpuq_mpr_str(&r, &s, &sl), 0);
                char *dst = KEY("name") ? w->name : KEY("access") ? w->access : w->dtype;
                size_t dcap = KEY("name") ? sizeof w->name : 16;
                ck_assert_uint_lt(sl, dcap);
                memcpy(dst, s, sl);
                dst[sl] = '\0';
                seen |= KEY("name") ? 1u : KEY("access") ? 2u : 4u;
            } else if (KEY("owner")) {
                ck_assert_int_eq(gpuq_mpr_uint(&r, &w->owner), 0);
                seen |= 8u;
            } else if (KEY("bytes")) {
                ck_assert_int_eq(gpuq_mpr_uint(&r, &w->bytes), 0);
                seen |= 16u;
            } else if (KEY("users")) {
                ck_assert_int_eq(gpuq_mpr_uint(&r, &w->users), 0);
                seen |= 32u;
            } else if (KEY("device")) {
                ck_assert_int_eq(gpuq_mpr_int(&r, &w->device), 0);
                seen |= 64u;
            } else if (KEY("shape")) {
                ck_assert_int_eq(gpuq_mpr_array(&r, &w->ndim), 0);
                ck_assert(w->ndim >= 1 && w->ndim <= 2);
                for (uint32_t d = 0; d < w->ndim; d++)
                    ck_assert_int_eq(gpuq_mpr_uint(&r, &w->shape[d]), 0);
                seen |= 128u;
            } else {
                ck_assert_int_eq(gpuq_mpr_skip(&r), 0);
            }
#undef KEY
        }
        ck_assert_msg(seen == 255u, "list entry %d lacks keys (seen %#x)", n, seen);
        n++;
    }
    return n;
}

/* The rows of a fresh gpuq_list into rows[cap]; their number (= count). */
static int list_rows(row *rows, int cap)
{
    uint8_t *doc = NULL;
    size_t len = 0;
    uint32_t count = 12345;
    OK(gpuq_list(c, &doc, &len, &count));
    ck_assert_ptr_nonnull(doc);
    int n = read_rows(doc, len, rows, cap);
    ck_assert_int_eq(n, (int)count);
    free(doc);
    return n;
}

/* ---- against gpuqd ---- */

static const gpuq_transport transports[3] = {GPUQ_TRANSPORT_SOCKET, GPUQ_TRANSPORT_AUTO,
                                             GPUQ_TRANSPORT_SHM};

START_TEST(put_get_roundtrip)
{
    OK(gpuq_set_transport(c, transports[_i]));
    /* f32 [37, 13], and f64 1-D over GPUQ_SHM_MIN_BYTES (auto stages it) */
    const uint64_t s2[2] = {37, 13}, s1[1] = {200003};
    double *xd = rand_f64(37 * 13, -7, 11);
    float *x32 = to_f32(xd, 37 * 13);
    double *x64 = rand_f64(s1[0], -1e6, 1e6);
    x64[5] = -0.0;
    x64[6] = 1e-310; /* subnormal: the bytes, not the values, must survive */
    OK(gpuq_put(c, "a32", GPUQ_DT_F32, 2, s2, x32, GPUQ_ACCESS_PRIVATE));
    OK(gpuq_put(c, "a64", GPUQ_DT_F64, 1, s1, x64, GPUQ_ACCESS_ALL));

    gpuq_result *res = gpuq_result_new();
    size_t b32 = 37 * 13 * sizeof(float), b64 = s1[0] * sizeof(double);
    uint8_t *got = e2e_out_buf(b64);
    /* into an exact buffer */
    OK(gpuq_get(c, "a32", got, b32, res));
    ck_assert_mem_eq(got, x32, b32);
    ck_assert_int_eq(gpuq_result_dtype(res, 0), GPUQ_DT_F32);
    ck_assert_uint_eq(gpuq_result_ndim(res, 0), 2);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), 37);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 1), 13);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), b32);
    /* into a larger one: only the array's bytes are written */
    memset(got, 0x3c, b64);
    OK(gpuq_get(c, "a32", got, b64, res));
    ck_assert_mem_eq(got, x32, b32);
    ck_assert_uint_eq(got[b32], 0x3c);
    OK(gpuq_get(c, "a64", got, b64, res));
    ck_assert_mem_eq(got, x64, b64);
    ck_assert_uint_eq(gpuq_result_ndim(res, 0), 1);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), s1[0]);
    e2e_guard_intact(got, b64, "get a64");
    /* kept in the result */
    const uint8_t *data;
    size_t len;
    OK(gpuq_get(c, "a64", NULL, 0, res));
    gpuq_result_payload(res, &data, &len);
    ck_assert_uint_eq(len, b64);
    ck_assert_mem_eq(data, x64, b64);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), b64);
    /* one element short: too_large, nothing written, in step */
    memset(got, 0x3c, b32);
    ck_assert_int_eq(gpuq_get(c, "a32", got, b32 - 4, res), GPUQ_E_TOO_LARGE);
    ck_assert_uint_eq(got[0], 0x3c);
    ck_assert_int_eq(gpuq_get(c, "a32", NULL, 0, NULL), GPUQ_E_BAD_ARGUMENT);
    OK(gpuq_ping(c));
    OK(gpuq_get(c, "a32", got, b32, NULL));
    ck_assert_mem_eq(got, x32, b32);
    ck_assert_uint_eq(gpuq_pending(c), 0);
    gpuq_result_free(res);
    free(got);
    free(xd);
    free(x32);
    free(x64);
}
END_TEST

START_TEST(list_and_json)
{
    row rows[8];
    ck_assert_int_eq(list_rows(rows, 8), 0);
    char js[4096];
    OK(gpuq_list_json(c, js, sizeof js));
    ck_assert_str_eq(js, "[]");
    const double b[6] = {1, 2, 3, 4, 5, 6};
    const float a[5] = {1, 2, 3, 4, 5};
    OK(gpuq_put(c, "b", GPUQ_DT_F64, 2, (const uint64_t[]){2, 3}, b, GPUQ_ACCESS_PRIVATE));
    OK(gpuq_put(c, "a", GPUQ_DT_F32, 1, (const uint64_t[]){5}, a, GPUQ_ACCESS_ALL));
    ck_assert_int_eq(list_rows(rows, 8), 2);
    /* sorted by name */
    ck_assert_str_eq(rows[0].name, "a");
    ck_assert_str_eq(rows[1].name, "b");
    int dev = gpuq_info(c)->device;
    for (int k = 0; k < 2; k++) {
        ck_assert_uint_eq(rows[k].owner, (uint64_t)getuid());
        ck_assert_uint_eq(rows[k].users, 0);
        ck_assert_int_eq(rows[k].device, dev < 0 ? -1 : dev);
    }
    ck_assert_str_eq(rows[0].access, "all");
    ck_assert_str_eq(rows[0].dtype, "f32");
    ck_assert_uint_eq(rows[0].ndim, 1);
    ck_assert_uint_eq(rows[0].shape[0], 5);
    ck_assert_uint_eq(rows[0].bytes, sizeof a);
    ck_assert_str_eq(rows[1].access, "private");
    ck_assert_str_eq(rows[1].dtype, "f64");
    ck_assert_uint_eq(rows[1].ndim, 2);
    ck_assert_uint_eq(rows[1].shape[0], 2);
    ck_assert_uint_eq(rows[1].shape[1], 3);
    ck_assert_uint_eq(rows[1].bytes, sizeof b);
    /* the JSON form: one array, both objects, in order */
    OK(gpuq_list_json(c, js, sizeof js));
    size_t jl = strlen(js);
    ck_assert_msg(js[0] == '[' && js[jl - 1] == ']', "%s", js);
    const char *pa = strstr(js, "\"name\":\"a\""), *pb = strstr(js, "\"name\":\"b\"");
    ck_assert_msg(pa && pb && pa < pb, "%s", js);
    ck_assert_msg(strstr(js, "\"shape\":[2,3]") && strstr(js, "\"access\":\"all\""), "%s", js);
    /* too small a buffer: too_large, buf "", the connection in step */
    char small[24];
    ck_assert_int_eq(gpuq_list_json(c, small, sizeof small), GPUQ_E_TOO_LARGE);
    ck_assert_str_eq(small, "");
    OK(gpuq_ping(c));
    /* another connection lists the same arrays: they are gpuqd's, not c's */
    gpuq_conn *c2 = e2e_connect("resident2", GPUQ_PRIO_NORMAL);
    gpuq_close(c);
    c = c2;
    ck_assert_int_eq(list_rows(rows, 8), 2);
}
END_TEST

START_TEST(list_many)
{
    /* more arrays than a header's array may hold (GPUQ_HDR_MAX_ENTRIES) */
    enum { N = 70 };
    const double v[3] = {1, 2, 3};
    char name[16];
    for (int k = N - 1; k >= 0; k--) { /* stored in reverse: list sorts */
        snprintf(name, sizeof name, "arr%03d", k);
        OK(gpuq_put(c, name, GPUQ_DT_F64, 1, (const uint64_t[]){3}, v, GPUQ_ACCESS_PRIVATE));
    }
    row rows[N];
    ck_assert_int_eq(list_rows(rows, N), N);
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof name, "arr%03d", k);
        ck_assert_str_eq(rows[k].name, name);
    }
    OK(gpuq_ping(c));
}
END_TEST

START_TEST(remove_then_not_found)
{
    const double v[4] = {1, -2, 3, -4};
    OK(gpuq_put(c, "gone", GPUQ_DT_F64, 1, (const uint64_t[]){4}, v, GPUQ_ACCESS_PRIVATE));
    OK(gpuq_remove(c, "gone"));
    double got[4];
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_get(c, "gone", got, sizeof got, res), GPUQ_E_NOT_FOUND);
    ck_assert_int_eq(gpuq_result_status(res), GPUQ_E_NOT_FOUND);
    ck_assert_msg(strncmp(gpuq_errmsg(c), "not_found: ", 11) == 0, "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_remove(c, "gone"), GPUQ_E_NOT_FOUND);
    ck_assert_int_eq(gpuq_remove(c, "never"), GPUQ_E_NOT_FOUND);
    /* as an op's input too */
    gpuq_req *r = gpuq_req_new("normalize");
    OK(gpuq_req_set_input_resident(r, 0, "gone"));
    gpuq_req_set_output(r, 0, got, sizeof got);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_NOT_FOUND);
    gpuq_req_free(r);
    row rows[4];
    ck_assert_int_eq(list_rows(rows, 4), 0);
    OK(gpuq_ping(c));
    /* a later put of the name makes a new array */
    OK(gpuq_put(c, "gone", GPUQ_DT_F64, 1, (const uint64_t[]){2}, v, GPUQ_ACCESS_PRIVATE));
    OK(gpuq_get(c, "gone", got, sizeof got, res));
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 16);
    ck_assert_mem_eq(got, v, 16);
    gpuq_result_free(res);
}
END_TEST

START_TEST(replace_keeps_one)
{
    const double v[4] = {1, 2, 3, 4}, w[6] = {6, 5, 4, 3, 2, 1};
    OK(gpuq_put(c, "r", GPUQ_DT_F64, 1, (const uint64_t[]){4}, v, GPUQ_ACCESS_PRIVATE));
    OK(gpuq_put(c, "r", GPUQ_DT_F64, 2, (const uint64_t[]){3, 2}, w, GPUQ_ACCESS_PRIVATE));
    double got[6];
    gpuq_result *res = gpuq_result_new();
    OK(gpuq_get(c, "r", got, sizeof got, res));
    ck_assert_mem_eq(got, w, sizeof w);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), 3);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 1), 2);
    row rows[4];
    ck_assert_int_eq(list_rows(rows, 4), 1);
    ck_assert_uint_eq(rows[0].bytes, sizeof w);
    gpuq_result_free(res);
}
END_TEST

/* Reference distances of x[m, d] to y[n, d] in double (euclidean or
 * cosine), full[i * n + j]; and each row's top k by (distance, index). */
static void ref_knn(const double *x, const double *y, uint64_t m, uint64_t n, uint64_t d,
                    int cosine, uint64_t k, double *full, int64_t *ri, double *rd)
{
    for (uint64_t i = 0; i < m; i++) {
        for (uint64_t j = 0; j < n; j++) {
            double s = 0, xx = 0, yy = 0, xy = 0;
            for (uint64_t t = 0; t < d; t++) {
                double a = x[i * d + t], b = y[j * d + t];
                s += (a - b) * (a - b);
                xx += a * a, yy += b * b, xy += a * b;
            }
            full[i * n + j] = cosine ? 1.0 - xy / (sqrt(xx) * sqrt(yy)) : sqrt(s);
        }
        for (uint64_t t = 0; t < k; t++) { /* selection: k is small */
            int64_t best = -1;
            for (uint64_t j = 0; j < n; j++) {
                bool taken = false;
                for (uint64_t u = 0; u < t; u++)
                    taken = taken || ri[i * k + u] == (int64_t)j;
                if (!taken &&
                    (best < 0 || kc_before(full[i * n + j], (int64_t)j, full[i * n + best], best)))
                    best = (int64_t)j;
            }
            ri[i * k + t] = best;
            rd[i * k + t] = full[i * n + best];
        }
    }
}

/* Every row of a knn result passes the kNN check against the reference. */
static void knn_valid(const double *gd, const int64_t *gi, const double *full, const int64_t *ri,
                      const double *rd, uint64_t m, uint64_t n, uint64_t d, uint64_t k, int cosine,
                      const char *what)
{
    kc_params p = {NT_F64, cosine ? NT_COSINE : NT_EUCLIDEAN, 1, 2, n, d, k};
    unsigned char *seen = calloc(n, 1);
    char why[256];
    for (uint64_t i = 0; i < m; i++)
        ck_assert_msg(!kc_check_row(&p, gd + i * k, gi + i * k, full + i * n, ri + i * k,
                                    rd + i * k, seen, why, sizeof why),
                      "%s row %llu: %s", what, (unsigned long long)i, why);
    free(seen);
}

START_TEST(knn_resident_equals_carried)
{
    const int cosine = _i;
    const uint64_t m = 23, n = 61, d = 9, k = 5;
    double *x = rand_f64(m * d, -3, 5), *y = rand_f64(n * d, -3, 5);
    memcpy(y + 17 * d, x + 2 * d, d * sizeof *x); /* a tie at distance 0 */
    const gpuq_metric metric = cosine ? GPUQ_METRIC_COSINE : GPUQ_METRIC_EUCLIDEAN;
    double *d1 = calloc(m * k, 8), *d2 = calloc(m * k, 8), *full = malloc(m * n * 8);
    int64_t *i1 = calloc(m * k, 8), *i2 = calloc(m * k, 8), *ri = malloc(m * k * 8);
    double *rd = malloc(m * k * 8);
    OK(gpuq_knn(c, GPUQ_DT_F64, metric, x, y, m, n, d, k, d1, i1));
    ref_knn(x, y, m, n, d, cosine, k, full, ri, rd);
    knn_valid(d1, i1, full, ri, rd, m, n, d, k, cosine, "carried");

    const uint64_t xs[2] = {m, d}, ys[2] = {n, d};
    OK(gpuq_put(c, "base", GPUQ_DT_F64, 2, ys, y, GPUQ_ACCESS_PRIVATE));
    OK(gpuq_put(c, "queries", GPUQ_DT_F64, 2, xs, x, GPUQ_ACCESS_PRIVATE));
    gpuq_result *res = gpuq_result_new();
    /* 0: the base resident; 1: the queries; 2: both (no dtype sent) */
    for (int form = 0; form < 3; form++) {
        memset(d2, 0, m * k * 8);
        memset(i2, 0, m * k * 8);
        gpuq_req *r = gpuq_req_new("knn");
        if (form == 1 || form == 2)
            OK(gpuq_req_set_input_resident(r, 0, "queries"));
        else
            OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, xs, x, m * d * 8));
        if (form == 0 || form == 2)
            OK(gpuq_req_set_input_resident(r, 1, "base"));
        else
            OK(gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, ys, y, n * d * 8));
        gpuq_req_set_str(r, "metric", gpuq_metric_name(metric));
        gpuq_req_set_u64(r, "k", k);
        gpuq_req_set_output(r, 0, d2, m * k * 8);
        gpuq_req_set_output(r, 1, i2, m * k * 8);
        ck_assert_msg(gpuq_call_req(c, r, res) == 0, "form %d: %s", form, gpuq_errmsg(c));
        ck_assert_mem_eq(d2, d1, m * k * 8);
        ck_assert_mem_eq(i2, i1, m * k * 8);
        ck_assert_uint_eq(gpuq_result_outputs(res), 2);
        ck_assert_int_eq(gpuq_result_dtype(res, 1), GPUQ_DT_I64);
        ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), m);
        ck_assert_uint_eq(gpuq_result_dim(res, 0, 1), k);
        ck_assert_uint_eq(gpuq_result_bytes(res, 0), m * k * 8);
        ck_assert_uint_eq(gpuq_result_bytes(res, 1), m * k * 8);
        gpuq_req_free(r);
    }
    /* the indices kept as "nn": the distances come back, the indices do not */
    memset(d2, 0, m * k * 8);
    gpuq_req *r = gpuq_req_new("knn");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, xs, x, m * d * 8));
    OK(gpuq_req_set_input_resident(r, 1, "base"));
    gpuq_req_set_str(r, "metric", gpuq_metric_name(metric));
    gpuq_req_set_u64(r, "k", k);
    gpuq_req_set_output(r, 0, d2, m * k * 8);
    OK(gpuq_req_set_output_resident(r, 1, "nn"));
    OK(gpuq_call_req(c, r, res));
    ck_assert_mem_eq(d2, d1, m * k * 8);
    ck_assert_uint_eq(gpuq_result_bytes(res, 1), 0);
    ck_assert_int_eq(gpuq_result_dtype(res, 1), GPUQ_DT_I64);
    ck_assert_uint_eq(gpuq_result_dim(res, 1, 0), m);
    ck_assert_uint_eq(gpuq_result_dim(res, 1, 1), k);
    gpuq_req_free(r);
    OK(gpuq_get(c, "nn", i2, m * k * 8, res));
    ck_assert_int_eq(gpuq_result_dtype(res, 0), GPUQ_DT_I64);
    ck_assert_mem_eq(i2, i1, m * k * 8);
    gpuq_result_free(res);
    free(x), free(y), free(d1), free(d2), free(i1), free(i2), free(full), free(ri), free(rd);
}
END_TEST

START_TEST(normalize_kept_then_pairwise)
{
    const uint64_t rows = 17, cols = 6, q = 11;
    double *x = rand_f64(rows * cols, -4, 9), *qx = rand_f64(q * cols, -4, 9);
    double ref[17 * 6], got[17 * 6], carried[17 * 6];
    for (uint64_t i = 0; i < rows; i++) {
        double s = 0;
        for (uint64_t j = 0; j < cols; j++)
            s += x[i * cols + j] * x[i * cols + j];
        for (uint64_t j = 0; j < cols; j++)
            ref[i * cols + j] = x[i * cols + j] / sqrt(s);
    }
    OK(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, false, x, rows, cols, carried));
    /* the same normalize, its output kept as "unit" */
    const uint64_t xs[2] = {rows, cols}, qs[2] = {q, cols};
    gpuq_req *r = gpuq_req_new("normalize");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, xs, x, rows * cols * 8));
    gpuq_req_set_str(r, "method", "l2");
    OK(gpuq_req_set_output_resident(r, 0, "unit"));
    OK(gpuq_req_set_access(r, GPUQ_ACCESS_ALL));
    gpuq_result *res = gpuq_result_new();
    OK(gpuq_call_req(c, r, res));
    ck_assert_uint_eq(gpuq_result_outputs(res), 1);
    ck_assert_int_eq(gpuq_result_dtype(res, 0), GPUQ_DT_F64);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), rows);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 1), cols);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 0);
    gpuq_req_free(r);
    OK(gpuq_get(c, "unit", got, sizeof got, res));
    ck_assert_mem_eq(got, carried, sizeof got);
    size_t worst;
    double e = tu_elem_err_f64(got, ref, rows * cols, &worst);
    ck_assert_msg(e <= 8 * NT_U, "unit[%zu] %.17g, reference %.17g", worst, got[worst], ref[worst]);
    row lr[2];
    ck_assert_int_eq(list_rows(lr, 2), 1);
    ck_assert_str_eq(lr[0].access, "all");
    /* a pairwise against it equals one against the carried result */
    double *d1 = malloc(q * rows * 8), *d2 = malloc(q * rows * 8), dref[11 * 17];
    OK(gpuq_pairwise(c, GPUQ_DT_F64, GPUQ_METRIC_EUCLIDEAN, qx, carried, q, rows, cols, d1));
    r = gpuq_req_new("pairwise");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, qs, qx, q * cols * 8));
    OK(gpuq_req_set_input_resident(r, 1, "unit"));
    gpuq_req_set_str(r, "metric", "euclidean");
    gpuq_req_set_output(r, 0, d2, q * rows * 8);
    OK(gpuq_call_req(c, r, res));
    ck_assert_mem_eq(d2, d1, q * rows * 8);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), q);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 1), rows);
    gpuq_req_free(r);
    for (uint64_t i = 0; i < q; i++)
        for (uint64_t j = 0; j < rows; j++) {
            double s = 0;
            for (uint64_t t = 0; t < cols; t++) {
                double dd = qx[i * cols + t] - ref[j * cols + t];
                s += dd * dd;
            }
            dref[i * rows + j] = sqrt(s);
        }
    e = tu_elem_err_f64(d2, dref, q * rows, &worst);
    ck_assert_msg(e <= 1e-13, "d[%zu] %.17g, reference %.17g", worst, d2[worst], dref[worst]);
    /* no buffer for a carried output of a resident-input request: kept in
     * the result, its size the reply's */
    r = gpuq_req_new("pairwise");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, qs, qx, q * cols * 8));
    OK(gpuq_req_set_input_resident(r, 1, "unit"));
    gpuq_req_set_str(r, "metric", "euclidean");
    OK(gpuq_call_req(c, r, res));
    const uint8_t *data;
    size_t len;
    gpuq_result_payload(res, &data, &len);
    ck_assert_uint_eq(len, q * rows * 8);
    ck_assert_mem_eq(data, d1, len);
    /* too small a buffer: too_large, in step */
    gpuq_req_set_output(r, 0, d2, q * rows * 8 - 8);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_TOO_LARGE);
    OK(gpuq_ping(c));
    gpuq_req_free(r);
    gpuq_result_free(res);
    free(x), free(qx), free(d1), free(d2);
}
END_TEST

START_TEST(resident_with_staged_queries)
{
    /* shm: the carried queries staged (1 MiB), the base resident; the
     * result by socket (its size is gpuqd's), equal to the carried one's */
    OK(gpuq_set_transport(c, GPUQ_TRANSPORT_SHM));
    const uint64_t m = 4096, n = 96, d = 64, k = 3;
    double *xd = rand_f64(m * d, -1, 1), *yd = rand_f64(n * d, -1, 1);
    float *x = to_f32(xd, m * d), *y = to_f32(yd, n * d);
    float *d1 = malloc(m * k * 4), *d2 = malloc(m * k * 4);
    int64_t *i1 = malloc(m * k * 8), *i2 = malloc(m * k * 8);
    OK(gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_SQEUCLIDEAN, x, y, m, n, d, k, d1, i1));
    const uint64_t xs[2] = {m, d}, ys[2] = {n, d};
    OK(gpuq_put(c, "b32", GPUQ_DT_F32, 2, ys, y, GPUQ_ACCESS_PRIVATE));
    gpuq_req *r = gpuq_req_new("knn");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, xs, x, m * d * 4));
    OK(gpuq_req_set_input_resident(r, 1, "b32"));
    gpuq_req_set_str(r, "metric", "sqeuclidean");
    gpuq_req_set_u64(r, "k", k);
    gpuq_req_set_output(r, 0, d2, m * k * 4);
    gpuq_req_set_output(r, 1, i2, m * k * 8);
    gpuq_result *res = gpuq_result_new();
    OK(gpuq_call_req(c, r, res));
    ck_assert_mem_eq(d2, d1, m * k * 4);
    ck_assert_mem_eq(i2, i1, m * k * 8);
    /* a dtype that is not the array's: gpuqd's bad_dtype, in step */
    gpuq_req_free(r);
    r = gpuq_req_new("knn");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, xs, xd, m * d * 8));
    OK(gpuq_req_set_input_resident(r, 1, "b32"));
    gpuq_req_set_str(r, "metric", "sqeuclidean");
    gpuq_req_set_u64(r, "k", k);
    gpuq_req_set_output(r, 0, d2, m * k * 4);
    gpuq_req_set_output(r, 1, i2, m * k * 8);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_DTYPE);
    OK(gpuq_ping(c));
    gpuq_req_free(r);
    gpuq_result_free(res);
    free(xd), free(yd), free(x), free(y), free(d1), free(d2), free(i1), free(i2);
}
END_TEST

START_TEST(gpuqd_refusals)
{
    const double y[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, x[4] = {1, 2, 3, 4};
    OK(gpuq_put(c, "y43", GPUQ_DT_F64, 2, (const uint64_t[]){4, 3}, y, GPUQ_ACCESS_PRIVATE));
    double out[16];
    gpuq_result *res = gpuq_result_new();
    /* d = 2 against the array's 3: bad_shape */
    gpuq_req *r = gpuq_req_new("pairwise");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, (const uint64_t[]){2, 2}, x, sizeof x));
    OK(gpuq_req_set_input_resident(r, 1, "y43"));
    gpuq_req_set_str(r, "metric", "euclidean");
    gpuq_req_set_output(r, 0, out, sizeof out);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_SHAPE);
    OK(gpuq_ping(c));
    gpuq_req_free(r);
    /* an output kept under the name of an input: bad_argument */
    r = gpuq_req_new("normalize");
    OK(gpuq_req_set_input_resident(r, 0, "y43"));
    OK(gpuq_req_set_output_resident(r, 0, "y43"));
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_ARGUMENT);
    OK(gpuq_ping(c));
    gpuq_req_free(r);
    /* a resident output beyond the op's outputs: refused here */
    r = gpuq_req_new("normalize");
    OK(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, (const uint64_t[]){4}, x, sizeof x));
    gpuq_req_set_output(r, 0, out, sizeof out);
    OK(gpuq_req_set_output_resident(r, 1, "second"));
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(gpuq_errmsg(c), "output 1"), "%s", gpuq_errmsg(c));
    gpuq_req_free(r);
    /* the array is unchanged by all of it */
    OK(gpuq_get(c, "y43", out, sizeof out, res));
    ck_assert_mem_eq(out, y, sizeof y);
    gpuq_result_free(res);
}
END_TEST

/* Names that are no names (PROTOCOL.md 3.5), with a word of each reason. */
static const struct {
    const char *name;
    const char *why;
} bad_names[] = {
    {"", "empty"},
    {"a/b", "/"},
    {"/", "/"},
    {"tab\there", "control"},
    {"nl\n", "control"},
    {"del\x7f", "control"},
    {"c1\xc2\x85x", "control"},
    {"\xff\xfe", "UTF-8"},
    {"cut\xc3", "UTF-8"},
    {"over\xe2\x82", "UTF-8"},
};
#define NBAD (sizeof bad_names / sizeof bad_names[0])

START_TEST(bad_names_refused)
{
    char longname[GPUQ_RES_NAME_MAX + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0'; /* 129 bytes */
    const double v[2] = {1, 2};
    double out[2];
    gpuq_result *res = gpuq_result_new();
    for (size_t k = 0; k <= NBAD + 1; k++) {
        const char *nm = k < NBAD ? bad_names[k].name : k == NBAD ? longname : NULL;
        const char *why = k < NBAD ? bad_names[k].why : k == NBAD ? "129 bytes" : "NULL";
        int rcs[5];
        rcs[0] = gpuq_put(c, nm, GPUQ_DT_F64, 1, (const uint64_t[]){2}, v, GPUQ_ACCESS_PRIVATE);
        ck_assert_msg(strstr(gpuq_errmsg(c), why), "put %zu: %s", k, gpuq_errmsg(c));
        rcs[1] = gpuq_get(c, nm, out, sizeof out, res);
        rcs[2] = gpuq_remove(c, nm);
        gpuq_req *r = gpuq_req_new("normalize");
        ck_assert_int_eq(gpuq_req_set_input_resident(r, 0, nm), GPUQ_E_BAD_ARGUMENT);
        ck_assert_msg(strstr(gpuq_req_errmsg(r), why) && strstr(gpuq_req_errmsg(r), "input 0"),
                      "%zu: %s", k, gpuq_req_errmsg(r));
        gpuq_req_set_output(r, 0, out, sizeof out);
        rcs[3] = gpuq_call_req(c, r, res);
        ck_assert_msg(strstr(gpuq_errmsg(c), why), "call %zu: %s", k, gpuq_errmsg(c));
        gpuq_req_free(r);
        r = gpuq_req_new("normalize");
        gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, (const uint64_t[]){2}, v, sizeof v);
        ck_assert_int_eq(gpuq_req_set_output_resident(r, 0, nm), GPUQ_E_BAD_ARGUMENT);
        rcs[4] = gpuq_call_req(c, r, res);
        gpuq_req_free(r);
        for (int j = 0; j < 5; j++)
            ck_assert_msg(rcs[j] == GPUQ_E_BAD_ARGUMENT, "name %zu, call %d: %d", k, j, rcs[j]);
        ck_assert_uint_eq(gpuq_pending(c), 0);
        OK(gpuq_ping(c));
    }
    /* a name the builder's generic setter carries: the decoder refuses it */
    gpuq_req *r = gpuq_req_new("remove");
    gpuq_req_set_str(r, "name", "x/y");
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_ARGUMENT);
    gpuq_req_free(r);
    OK(gpuq_ping(c));
    /* nothing was stored by any of it */
    row rows[4];
    ck_assert_int_eq(list_rows(rows, 4), 0);
    /* the edges that are names: 128 bytes, UTF-8 beyond ASCII, spaces, '@' */
    longname[GPUQ_RES_NAME_MAX] = '\0';
    const char *good[] = {longname, "na\xc3\xafve-\xce\xb2", "with space", "@at", "x"};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        OK(gpuq_put(c, good[k], GPUQ_DT_F64, 1, (const uint64_t[]){2}, v, GPUQ_ACCESS_PRIVATE));
        OK(gpuq_get(c, good[k], out, sizeof out, res));
        ck_assert_mem_eq(out, v, sizeof v);
    }
    row five[8];
    ck_assert_int_eq(list_rows(five, 8), 5);
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++)
        OK(gpuq_remove(c, good[k]));
    gpuq_result_free(res);
}
END_TEST

/* ---- against a fake server: what libgpuq sends and how it reads ---- */

typedef struct fake {
    int lfd;
    int steps; /* requests answered */
} fake;

static void read_exact(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        ck_assert_int_gt(k, 0);
        got += (size_t)k;
    }
}

static void write_exact(int fd, const void *buf, size_t n)
{
    ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
}

/* One request: decoded into *req, its payload (malloc'd) and length. */
static void *read_req(int fd, gpuq_request *req, uint64_t *plen)
{
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix p;
    read_exact(fd, pre, sizeof pre);
    ck_assert_int_eq(gpuq_prefix_decode(pre, sizeof pre, &p), 0);
    uint8_t *h = malloc(p.header_len);
    uint8_t *body = malloc(p.payload_len + 1);
    read_exact(fd, h, p.header_len);
    read_exact(fd, body, p.payload_len);
    char msg[200];
    ck_assert_msg(gpuq_request_decode(h, p.header_len, req, msg, sizeof msg) == 0, "%s", msg);
    free(h);
    *plen = p.payload_len;
    return body;
}

static void send_reply(int fd, gpuq_mpw *w, const void *payload, size_t plen)
{
    uint8_t *hdr;
    size_t hlen;
    ck_assert_int_eq(gpuq_mpw_take(w, &hdr, &hlen), 0);
    gpuq_prefix p = {GPUQ_PROTO_VERSION, GPUQ_KIND_REPLY, 0, (uint32_t)hlen, plen};
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&p, pre);
    write_exact(fd, pre, sizeof pre);
    write_exact(fd, hdr, hlen);
    if (plen)
        write_exact(fd, payload, plen);
    free(hdr);
}

static void put_shape(gpuq_mpw *w, const char *dk, const char *dt, const char *sk, uint64_t a,
                      uint64_t b)
{
    gpuq_mpw_str(w, dk);
    gpuq_mpw_str(w, dt);
    gpuq_mpw_str(w, sk);
    gpuq_mpw_array(w, 2);
    gpuq_mpw_uint(w, a);
    gpuq_mpw_uint(w, b);
}

static void put_ok(gpuq_mpw *w, uint64_t id)
{
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, id);
    gpuq_mpw_str(w, "status");
    gpuq_mpw_str(w, "ok");
}

/* One array's map of a list, name and shape [n]. */
static void list_entry(gpuq_mpw *w, const char *name, uint64_t n)
{
    gpuq_mpw_map(w, 8);
    gpuq_mpw_str(w, "name");
    gpuq_mpw_str(w, name);
    gpuq_mpw_str(w, "owner");
    gpuq_mpw_uint(w, 1000);
    gpuq_mpw_str(w, "access");
    gpuq_mpw_str(w, "private");
    gpuq_mpw_str(w, "dtype");
    gpuq_mpw_str(w, "f64");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 1);
    gpuq_mpw_uint(w, n);
    gpuq_mpw_str(w, "bytes");
    gpuq_mpw_uint(w, n * 8);
    gpuq_mpw_str(w, "device");
    gpuq_mpw_int(w, -1);
    gpuq_mpw_str(w, "users");
    gpuq_mpw_uint(w, 0);
}

static const double fake_d[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
static const int64_t fake_i[8] = {3, 1, 4, 1, 5, 9, 2, 6};

static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    gpuq_request req;
    uint64_t plen;
    free(read_req(fd, &req, &plen)); /* hello */
    gpuq_limits lim;
    gpuq_limits_default(&lim);
    gpuq_mpw *w = gpuq_mpw_new();
    gpuq_mpw_map(w, 3);
    gpuq_mpw_str(w, "version");
    gpuq_mpw_uint(w, GPUQ_PROTO_VERSION);
    gpuq_mpw_str(w, "backend");
    gpuq_mpw_str(w, "fake");
    gpuq_mpw_str(w, "limits");
    gpuq_limits_encode(&lim, w);
    uint8_t *info, *frame;
    size_t ilen, flen;
    ck_assert_int_eq(gpuq_mpw_take(w, &info, &ilen), 0);
    gpuq_reply hello = {.id = req.id, .info = info, .info_len = ilen};
    ck_assert_int_eq(gpuq_reply_frame(&hello, 0, &frame, &flen), 0);
    write_exact(fd, frame, flen);
    free(frame);
    free(info);
    for (;;) {
        void *body;
        ssize_t peek;
        uint8_t one;
        if ((peek = recv(fd, &one, 1, MSG_PEEK)) <= 0)
            break; /* the client closed */
        body = read_req(fd, &req, &plen);
        const char *op = gpuq_op_name(req.op);
        f->steps++;
        if (!strcmp(op, "ping")) {
            gpuq_mpw_map(w, 2);
            put_ok(w, req.id);
            send_reply(fd, w, NULL, 0);
        } else if (!strcmp(op, "knn") && gpuq_request_out_kind(&req, 1) == GPUQ_REF_NAME) {
            /* the indices kept: "out": [nil, "idx"], both inputs carried */
            ck_assert_uint_eq(req.nout_ref, 2);
            ck_assert_int_eq(gpuq_request_out_kind(&req, 0), GPUQ_REF_WIRE);
            ck_assert_str_eq(req.out_name[1], "idx");
            ck_assert_uint_eq(req.nin_ref, 0);
            ck_assert_uint_eq(plen, (2 * 3 + 5 * 3) * 8);
            gpuq_mpw_map(w, 6);
            put_ok(w, req.id);
            put_shape(w, "dtype", "f64", "shape", 2, 1);
            put_shape(w, "dtype_b", "i64", "shape_b", 2, 1);
            send_reply(fd, w, fake_d, 16); /* the distances alone */
        } else if (!strcmp(op, "knn")) {
            /* the base resident: "in": [nil, "base"], no "shape_b" */
            ck_assert_uint_eq(req.nin_ref, 2);
            ck_assert_int_eq(gpuq_request_in_kind(&req, 0), GPUQ_REF_WIRE);
            ck_assert_int_eq(gpuq_request_in_kind(&req, 1), GPUQ_REF_NAME);
            ck_assert_str_eq(req.in_name[1], "base");
            ck_assert_uint_eq(req.ndim_a, 2);
            ck_assert_uint_eq(req.ndim_b, 0);
            ck_assert_int_eq(req.dtype, GPUQ_DT_F64);
            ck_assert_uint_eq(req.nout_ref, 0);
            ck_assert_uint_eq(plen, req.shape_a[0] * req.shape_a[1] * 8);
            ck_assert_double_eq(((const double *)body)[0], 1.0);
            gpuq_mpw_map(w, 6);
            put_ok(w, req.id);
            put_shape(w, "dtype", "f64", "shape", req.shape_a[0], 2);
            put_shape(w, "dtype_b", "i64", "shape_b", req.shape_a[0], 2);
            uint8_t pay[128];
            memcpy(pay, fake_d, 64);
            memcpy(pay + 64, fake_i, 64);
            send_reply(fd, w, pay, 128);
        } else if (!strcmp(op, "normalize")) {
            /* all resident: "in": ["x"], "out": ["y"], nothing carried */
            ck_assert_uint_eq(req.nin_ref, 1);
            ck_assert_str_eq(req.in_name[0], "x");
            ck_assert_uint_eq(req.nout_ref, 1);
            ck_assert_int_eq(gpuq_request_out_kind(&req, 0), GPUQ_REF_NAME);
            ck_assert_str_eq(req.out_name[0], "y");
            ck_assert_uint_eq(req.ndim_a, 0);
            ck_assert_uint_eq(plen, 0);
            ck_assert(req.has_access && req.access == GPUQ_ACCESS_ALL);
            gpuq_mpw_map(w, 4);
            put_ok(w, req.id);
            put_shape(w, "dtype", "f64", "shape", 3, 5);
            send_reply(fd, w, NULL, 0);
        } else if (!strcmp(op, "get")) {
            /* "name" (the decoder's in = [name]), the bytes by the reply */
            ck_assert_str_eq(req.name, "g");
            ck_assert_int_eq(gpuq_request_in_kind(&req, 0), GPUQ_REF_NAME);
            ck_assert_uint_eq(plen, 0);
            gpuq_mpw_map(w, 4);
            put_ok(w, req.id);
            put_shape(w, "dtype", "f64", "shape", 4, 2);
            send_reply(fd, w, fake_d, 64);
        } else if (!strcmp(op, "put")) {
            ck_assert_str_eq(req.name, "p");
            ck_assert_int_eq(gpuq_request_out_kind(&req, 0), GPUQ_REF_NAME);
            ck_assert_uint_eq(req.nin_ref, 0);
            ck_assert_uint_eq(req.ndim_a, 2);
            ck_assert(req.has_access && req.access == GPUQ_ACCESS_PRIVATE);
            ck_assert_uint_eq(plen, 32);
            ck_assert_mem_eq(body, fake_d, 32);
            gpuq_mpw_map(w, 3);
            put_ok(w, req.id);
            gpuq_mpw_str(w, "info");
            gpuq_mpw_map(w, 1);
            gpuq_mpw_str(w, "replaced");
            gpuq_mpw_bool(w, false);
            send_reply(fd, w, NULL, 0);
        } else if (!strcmp(op, "remove")) {
            ck_assert_str_eq(req.name, "p");
            gpuq_mpw_map(w, 2);
            put_ok(w, req.id);
            send_reply(fd, w, NULL, 0);
        } else if (!strcmp(op, "list") && f->steps < 20) {
            /* info "arrays" (PROTOCOL.md 3.5 as written) */
            gpuq_mpw_map(w, 3);
            put_ok(w, req.id);
            gpuq_mpw_str(w, "info");
            gpuq_mpw_map(w, 1);
            gpuq_mpw_str(w, "arrays");
            gpuq_mpw_array(w, 2);
            list_entry(w, "a", 3);
            list_entry(w, "b", 7);
            send_reply(fd, w, NULL, 0);
        } else if (!strcmp(op, "list")) {
            /* or a stream of maps in the payload, as sessions sends its
             * sessions (PROTOCOL.md 3.5 now): three, then none, then a
             * count that is not the payload's */
            int form = f->steps - 21;
            gpuq_mpw_map(w, 3);
            put_ok(w, req.id);
            gpuq_mpw_str(w, "info");
            gpuq_mpw_map(w, 2);
            gpuq_mpw_str(w, "format");
            gpuq_mpw_str(w, "msgpack-stream");
            gpuq_mpw_str(w, "count");
            gpuq_mpw_uint(w, form == 1 ? 0 : 3);
            gpuq_mpw *d = gpuq_mpw_new();
            if (form != 1) {
                list_entry(d, "a", 3);
                list_entry(d, "b", 7);
            }
            if (form == 0)
                list_entry(d, "c", 1);
            uint8_t *doc = NULL;
            size_t dlen = 0;
            if (form != 1)
                ck_assert_int_eq(gpuq_mpw_take(d, &doc, &dlen), 0);
            gpuq_mpw_free(d);
            send_reply(fd, w, doc, dlen);
            free(doc);
        } else {
            ck_abort_msg("fake: unexpected op %s", op);
        }
        free(body);
    }
    gpuq_mpw_free(w);
    close(fd);
    return NULL;
}

START_TEST(fake_wire)
{
    char dir[64], path[100];
    tu_tmpdir(dir, sizeof dir);
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/fake.sock", dir), (int)sizeof path);
    fake f = {0};
    f.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    ck_assert_int_eq(bind(f.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(f.lfd, 1), 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fake_main, &f), 0);
    gpuq_connect_opts o = {path, "resident", GPUQ_PRIO_NORMAL, -1};
    gpuq_conn *fc = NULL;
    ck_assert_int_eq(gpuq_connect(&o, &fc), 0);
    gpuq_result *res = gpuq_result_new();

    /* knn of 4 queries against "base": the reply's shapes size the outputs */
    const double q[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    double dist[8] = {0};
    int64_t idx[8] = {0};
    gpuq_req *r = gpuq_req_new("knn");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, (const uint64_t[]){4, 3}, q, sizeof q);
    ck_assert_int_eq(gpuq_req_set_input_resident(r, 1, "base"), 0);
    gpuq_req_set_str(r, "metric", "euclidean");
    gpuq_req_set_u64(r, "k", 2);
    gpuq_req_set_output(r, 0, dist, sizeof dist);
    gpuq_req_set_output(r, 1, idx, sizeof idx);
    ck_assert_msg(gpuq_call_req(fc, r, res) == 0, "%s", gpuq_errmsg(fc));
    ck_assert_mem_eq(dist, fake_d, 64);
    ck_assert_mem_eq(idx, fake_i, 64);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 64);
    ck_assert_uint_eq(gpuq_result_bytes(res, 1), 64);
    /* the same with output 1 one element short: too_large, then in step */
    memset(idx, 0, sizeof idx);
    gpuq_req_set_output(r, 1, idx, sizeof idx - 8);
    ck_assert_int_eq(gpuq_call_req(fc, r, res), GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(idx[0], 0);
    ck_assert_int_eq(gpuq_ping(fc), 0);
    gpuq_req_free(r);

    /* everything resident: the reply's shape, no bytes */
    r = gpuq_req_new("normalize");
    ck_assert_int_eq(gpuq_req_set_input_resident(r, 0, "x"), 0);
    ck_assert_int_eq(gpuq_req_set_output_resident(r, 0, "y"), 0);
    ck_assert_int_eq(gpuq_req_set_access(r, GPUQ_ACCESS_ALL), 0);
    ck_assert_msg(gpuq_call_req(fc, r, res) == 0, "%s", gpuq_errmsg(fc));
    ck_assert_uint_eq(gpuq_result_outputs(res), 1);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), 3);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 1), 5);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 0);
    gpuq_req_free(r);

    /* the indices kept: the distances alone come back */
    const double qa[6] = {1, 2, 3, 4, 5, 6}, yb[15] = {0};
    memset(dist, 0, sizeof dist);
    r = gpuq_req_new("knn");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, (const uint64_t[]){2, 3}, qa, sizeof qa);
    gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, (const uint64_t[]){5, 3}, yb, sizeof yb);
    gpuq_req_set_str(r, "metric", "euclidean");
    gpuq_req_set_u64(r, "k", 1);
    gpuq_req_set_output(r, 0, dist, 16);
    ck_assert_int_eq(gpuq_req_set_output_resident(r, 1, "idx"), 0);
    ck_assert_msg(gpuq_call_req(fc, r, res) == 0, "%s", gpuq_errmsg(fc));
    ck_assert_mem_eq(dist, fake_d, 16);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 16);
    ck_assert_uint_eq(gpuq_result_bytes(res, 1), 0);
    ck_assert_int_eq(gpuq_result_dtype(res, 1), GPUQ_DT_I64);
    gpuq_req_free(r);

    /* get: into a buffer, kept in the result, too small */
    double g[8] = {0};
    ck_assert_int_eq(gpuq_get(fc, "g", g, sizeof g, res), 0);
    ck_assert_mem_eq(g, fake_d, 64);
    ck_assert_int_eq(gpuq_get(fc, "g", NULL, 0, res), 0);
    const uint8_t *data;
    size_t len;
    gpuq_result_payload(res, &data, &len);
    ck_assert_uint_eq(len, 64);
    ck_assert_mem_eq(data, fake_d, 64);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 64);
    ck_assert_int_eq(gpuq_get(fc, "g", g, 63, res), GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(gpuq_ping(fc), 0);

    /* put and remove */
    ck_assert_int_eq(
        gpuq_put(fc, "p", GPUQ_DT_F64, 2, (const uint64_t[]){2, 2}, fake_d, GPUQ_ACCESS_PRIVATE),
        0);
    ck_assert_int_eq(gpuq_remove(fc, "p"), 0);

    /* list: info "arrays", then a document; the same stream of maps */
    uint8_t *doc;
    uint32_t count;
    ck_assert_msg(gpuq_list(fc, &doc, &len, &count) == 0, "%s", gpuq_errmsg(fc));
    ck_assert_uint_eq(count, 2);
    row rows[4];
    ck_assert_int_eq(read_rows(doc, len, rows, 4), 2);
    ck_assert_str_eq(rows[1].name, "b");
    ck_assert_uint_eq(rows[1].shape[0], 7);
    ck_assert_int_eq(rows[1].device, -1);
    free(doc);
    while (f.steps < 20) /* the fake's later lists are documents */
        ck_assert_int_eq(gpuq_ping(fc), 0);
    ck_assert_int_eq(gpuq_list(fc, &doc, &len, &count), 0);
    ck_assert_uint_eq(count, 3);
    ck_assert_int_eq(read_rows(doc, len, rows, 4), 3);
    ck_assert_str_eq(rows[2].name, "c");
    free(doc);
    ck_assert_int_eq(gpuq_list(fc, &doc, &len, &count), 0); /* none */
    ck_assert_uint_eq(count, 0);
    ck_assert_uint_eq(len, 0);
    ck_assert_ptr_nonnull(doc);
    free(doc);
    /* two maps where info's count says 3: protocol, the connection in step */
    ck_assert_int_eq(gpuq_list(fc, &doc, &len, &count), GPUQ_E_PROTOCOL);
    ck_assert_ptr_null(doc);
    ck_assert_int_eq(gpuq_ping(fc), 0);

    gpuq_result_free(res);
    gpuq_close(fc);
    pthread_join(th, NULL);
    close(f.lfd);
    tu_rmtree(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_lib_resident");
    TCase *tc = tcase_create("resident");
    tcase_add_checked_fixture(tc, res_setup, res_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, put_get_roundtrip, 0, 3);
    tcase_add_test(tc, list_and_json);
    tcase_add_test(tc, list_many);
    tcase_add_test(tc, remove_then_not_found);
    tcase_add_test(tc, replace_keeps_one);
    tcase_add_loop_test(tc, knn_resident_equals_carried, 0, 2);
    tcase_add_test(tc, normalize_kept_then_pairwise);
    tcase_add_test(tc, resident_with_staged_queries);
    tcase_add_test(tc, gpuqd_refusals);
    tcase_add_test(tc, bad_names_refused);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("fake_server");
    tcase_set_timeout(tf, 30);
    tcase_add_test(tf, fake_wire);
    suite_add_tcase(s, tf);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
