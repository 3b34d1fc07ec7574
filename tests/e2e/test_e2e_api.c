/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_api.c - libgpuq's public API: the generic request builder and the
 * result accessors.
 *
 * Against a real gpuqd: every op through gpuq_req_* gives byte for byte what
 * its convenience call gives (the convenience results are checked against
 * references in test_e2e_ops), with the result's dtype/shape/bytes; bad
 * requests are refused locally with the server's code, nothing is sent (the
 * next request gets the next id) and the connection serves on; builder and
 * gpuq_request requests pipeline in one queue in order.
 * Against a fake server on a socketpair-like Unix socket: a reply with two
 * outputs ("dtype_b"/"shape_b") is split into both buffers, and one that does
 * not fit or does not add up is dropped with the stream kept in step.
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
#include "mpwrite.h"

static gpuq_conn *c;

static void api_setup(void)
{
    e2e_setup();
    c = e2e_connect("api", GPUQ_PRIO_NORMAL);
}

static void api_teardown(void)
{
    gpuq_close(c);
    e2e_teardown();
}

/* Call r blocking into res, asserting success. */
static void call_ok(gpuq_req *r, gpuq_result *res)
{
    int rc = gpuq_call_req(c, r, res);
    ck_assert_msg(rc == 0, "call: %d %s", rc, gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_result_status(res), 0);
}

static void check_out0(const gpuq_result *res, gpuq_dtype dt, unsigned ndim, uint64_t d0,
                       uint64_t d1, size_t bytes)
{
    ck_assert_uint_eq(gpuq_result_outputs(res), 1);
    ck_assert_int_eq(gpuq_result_dtype(res, 0), dt);
    ck_assert_uint_eq(gpuq_result_ndim(res, 0), ndim);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 0), d0);
    ck_assert_uint_eq(gpuq_result_dim(res, 0, 1), d1);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), bytes);
    ck_assert_uint_eq(gpuq_result_bytes(res, 1), 0);
}

START_TEST(builder_matches_convenience)
{
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    /* normalize: 2-D rows, flat, 1-D; values with mixed signs */
    const double x[2][3] = {{1.5, -2.0, 3.25}, {-4.0, 5.0, 0.5}};
    double want[6], got[6];
    const uint64_t s23[2] = {2, 3}, s6[1] = {6};
    for (int flat = 0; flat < 2; flat++) {
        ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, flat, x, 2, 3, want), 0);
        gpuq_req *r = gpuq_req_new("normalize");
        gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, s23, x, sizeof x);
        gpuq_req_set_str(r, "method", "l2");
        gpuq_req_set_bool(r, "flat", flat);
        gpuq_req_set_output(r, 0, got, sizeof got);
        call_ok(r, res);
        ck_assert_mem_eq(got, want, sizeof got);
        check_out0(res, GPUQ_DT_F64, 2, 2, 3, sizeof got);
        gpuq_req_free(r);
    }
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 6, want), 0);
    /* an independent check of the 1-D call: sum of x is 4.25 */
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(want[i], (&x[0][0])[i] / 4.25, 1e-15);
    gpuq_req *r = gpuq_req_new("normalize");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, s6, x, sizeof x);
    gpuq_req_set_output(r, 0, got, sizeof got);
    gpuq_req_set_timing(r, true);
    call_ok(r, res);
    ck_assert_mem_eq(got, want, sizeof got);
    check_out0(res, GPUQ_DT_F64, 1, 6, 0, sizeof got);
    double us;
    ck_assert_int_eq(gpuq_result_timing(res, GPUQ_TIMING_TOTAL, &us), 0);
    ck_assert(us >= 0);
    gpuq_req_free(r);

    /* haversine to a point and pairwise, f32 */
    const float pts[3][2] = {{48.85f, 2.35f}, {-33.9f, 151.2f}, {0.0f, -179.5f}};
    const float pts2[3][2] = {{40.7f, -74.0f}, {35.7f, 139.7f}, {-1.0f, 179.9f}};
    float fw[3], fg[3];
    const uint64_t s32[2] = {3, 2};
    ck_assert_int_eq(gpuq_haversine_to(c, GPUQ_DT_F32, pts, 3, 30, 101, 6371.0088, fw), 0);
    r = gpuq_req_new("haversine");
    gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, s32, pts, sizeof pts);
    gpuq_req_set_f64s(r, "to", (const double[]){30, 101}, 2);
    gpuq_req_set_output(r, 0, fg, sizeof fg);
    call_ok(r, res);
    ck_assert_mem_eq(fg, fw, sizeof fg);
    check_out0(res, GPUQ_DT_F32, 1, 3, 0, sizeof fg);
    gpuq_req_free(r);
    ck_assert_int_eq(gpuq_haversine_pair(c, GPUQ_DT_F32, pts, pts2, 3, 1000.0, fw), 0);
    r = gpuq_req_new("haversine");
    gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, s32, pts, sizeof pts);
    gpuq_req_set_input(r, 1, GPUQ_DT_F32, 2, s32, pts2, sizeof pts2);
    gpuq_req_set_f64(r, "radius", 1000.0);
    gpuq_req_set_output(r, 0, fg, sizeof fg);
    call_ok(r, res);
    ck_assert_mem_eq(fg, fw, sizeof fg);
    gpuq_req_free(r);

    /* grid */
    double gw[4 * 5], gg[4 * 5];
    ck_assert_int_eq(gpuq_grid(c, GPUQ_DT_F64, -60, 75, 4, -170, 165, 5, 12, -40, 6371.0088, gw),
                     0);
    r = gpuq_req_new("grid");
    gpuq_req_set_dtype(r, GPUQ_DT_F64);
    gpuq_req_set_range(r, "lat", -60, 75, 4);
    gpuq_req_set_range(r, "lon", -170, 165, 5);
    gpuq_req_set_f64s(r, "to", (const double[]){12, -40}, 2);
    gpuq_req_set_f64(r, "radius", 6371.0088);
    gpuq_req_set_output(r, 0, gg, sizeof gg);
    call_ok(r, res);
    ck_assert_mem_eq(gg, gw, sizeof gg);
    check_out0(res, GPUQ_DT_F64, 2, 4, 5, sizeof gg);
    gpuq_req_free(r);

    /* pairwise, every metric */
    const char *metrics[] = {"euclidean", "sqeuclidean", "cosine", "manhattan"};
    for (int m = 0; m < 4; m++) {
        double pw[2 * 2], pg[2 * 2];
        const double a[2][3] = {{1, -2, 3}, {0.5, 4, -1}}, b[2][3] = {{2, 2, -2}, {-1, 0.25, 3}};
        ck_assert_int_eq(gpuq_pairwise(c, GPUQ_DT_F64, (gpuq_metric)m, a, b, 2, 2, 3, pw), 0);
        r = gpuq_req_new("pairwise");
        gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, s23, a, sizeof a);
        gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, s23, b, sizeof b);
        gpuq_req_set_str(r, "metric", metrics[m]);
        gpuq_req_set_output(r, 0, pg, sizeof pg);
        call_ok(r, res);
        ck_assert_mem_eq(pg, pw, sizeof pg);
        check_out0(res, GPUQ_DT_F64, 2, 2, 2, sizeof pg);
        gpuq_req_free(r);
    }

    /* ping, status (info), metrics (a document kept in the result) */
    r = gpuq_req_new("ping");
    call_ok(r, res);
    ck_assert_uint_eq(gpuq_result_outputs(res), 0);
    gpuq_req_free(r);
    const uint8_t *info, *doc;
    size_t len;
    r = gpuq_req_new("status");
    call_ok(r, res);
    ck_assert_int_eq(gpuq_result_info(res, &info, &len), 0);
    ck_assert_uint_gt(len, 0);
    gpuq_req_free(r);
    r = gpuq_req_new("metrics");
    call_ok(r, res);
    ck_assert_int_eq(gpuq_result_payload(res, &doc, &len), 0);
    ck_assert_ptr_nonnull(strstr((const char *)doc, "gpuq_requests_total"));
    gpuq_req_free(r);
    char *text;
    ck_assert_int_eq(gpuq_metrics(c, &text, &len), 0);
    ck_assert_ptr_nonnull(strstr(text, "gpuq_requests_total"));
    free(text);
    gpuq_result_free(res);
}
END_TEST

/* A refusal: code, nothing sent, connection still serving. */
static void expect_refused(gpuq_req *r, int code, const char *what)
{
    gpuq_result *res = gpuq_result_new();
    uint64_t before, after;
    gpuq_req *p = gpuq_req_new("ping");
    ck_assert_int_eq(gpuq_call_req(c, p, res), 0);
    before = gpuq_result_id(res);
    int rc = gpuq_call_req(c, r, res);
    ck_assert_msg(rc == code, "%s: got %d (%s), want %d", what, rc, gpuq_errmsg(c), code);
    ck_assert_int_eq(gpuq_result_status(res), code);
    ck_assert_msg(strstr(gpuq_errmsg(c), gpuq_errname(code)) == gpuq_errmsg(c), "%s: message %s",
                  what, gpuq_errmsg(c));
    ck_assert_uint_eq(gpuq_pending(c), 0);
    ck_assert_int_eq(gpuq_call_req(c, p, res), 0); /* still serves */
    after = gpuq_result_id(res);
    ck_assert_msg(after == before + 1, "%s: the refused request used an id", what);
    gpuq_req_free(p);
    gpuq_result_free(res);
    gpuq_req_free(r);
}

START_TEST(builder_refusals)
{
    double x[4] = {1, 2, 3, 4}, y[4];
    const uint64_t s4[1] = {4}, s22[2] = {2, 2}, s23[2] = {2, 3};
    gpuq_req *r;

    expect_refused(gpuq_req_new("frobnicate"), GPUQ_E_UNKNOWN_OP, "unknown op");
    r = gpuq_req_new("ping");
    gpuq_req_set_u64(r, "bogus", 1);
    expect_refused(r, GPUQ_E_BAD_HEADER, "unknown key");
    r = gpuq_req_new("haversine");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, s22, x, sizeof x);
    gpuq_req_set_str(r, "radius", "far");
    gpuq_req_set_output(r, 0, y, sizeof y);
    expect_refused(r, GPUQ_E_BAD_HEADER, "wrong type");
    r = gpuq_req_new("ping");
    gpuq_req_set_u64(r, "id", 99);
    expect_refused(r, GPUQ_E_BAD_HEADER, "id set by hand (duplicate)");
    r = gpuq_req_new("normalize");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, s4, x, sizeof x);
    expect_refused(r, GPUQ_E_BAD_ARGUMENT, "missing output buffer");
    r = gpuq_req_new("normalize");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, s4, x, sizeof x);
    gpuq_req_set_output(r, 0, y, sizeof y - 1);
    expect_refused(r, GPUQ_E_TOO_LARGE, "output buffer too small");
    r = gpuq_req_new("normalize");
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, s23, x, sizeof x),
                     GPUQ_E_SIZE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(gpuq_req_errmsg(r), "shape implies 48"));
    gpuq_req_set_output(r, 0, y, sizeof y);
    expect_refused(r, GPUQ_E_SIZE_MISMATCH, "input size not matching its shape");
    r = gpuq_req_new("haversine"); /* [2, 2] is fine, [4, 1] is not lat/lon */
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, (const uint64_t[]){4, 1}, x, sizeof x);
    gpuq_req_set_f64s(r, "to", (const double[]){1, 2}, 2);
    gpuq_req_set_output(r, 0, y, sizeof y);
    expect_refused(r, GPUQ_E_BAD_SHAPE, "haversine shape");
    r = gpuq_req_new("pairwise");
    gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, s22, x, sizeof x);
    gpuq_req_set_str(r, "metric", "cosine");
    expect_refused(r, GPUQ_E_BAD_SHAPE, "B without A");
    r = gpuq_req_new("pairwise");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, s22, x, sizeof x);
    ck_assert_int_eq(gpuq_req_set_input(r, 1, GPUQ_DT_F32, 2, s22, x, 16), GPUQ_E_BAD_DTYPE);
    expect_refused(r, GPUQ_E_BAD_DTYPE, "inputs of two dtypes");
    e2e_assert_serves();
}
END_TEST

/* Builder and gpuq_request requests in one pipeline: replies in order. */
START_TEST(pipeline_mixed)
{
    double x[3] = {1, 2, 5}, y[4][3];
    const uint64_t s3[1] = {3};
    gpuq_req *r = gpuq_req_new("normalize");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, s3, x, sizeof x);
    uint64_t ids[4];
    for (int i = 0; i < 4; i++) {
        if (i % 2 == 0) {
            gpuq_req_set_output(r, 0, y[i], sizeof y[i]); /* a reused request */
            ck_assert_int_eq(gpuq_submit_req(c, r, &ids[i]), 0);
        } else {
            gpuq_request q = e2e_norm_req(3);
            ck_assert_int_eq(gpuq_submit(c, &q, x, sizeof x, NULL, 0, y[i], sizeof y[i], &ids[i]),
                             0);
        }
    }
    ck_assert_uint_eq(gpuq_pending(c), 4);
    gpuq_result *res = gpuq_result_new();
    for (int i = 0; i < 4; i++) {
        if (i % 2 == 0) {
            ck_assert_int_eq(gpuq_wait_req(c, res), 0);
            ck_assert_uint_eq(gpuq_result_id(res), ids[i]);
        } else {
            gpuq_reply rep;
            ck_assert_int_eq(gpuq_wait(c, &rep), 0);
            ck_assert_uint_eq(rep.id, ids[i]);
        }
        ck_assert_uint_eq(ids[i], ids[0] + (uint64_t)i);
        for (int k = 0; k < 3; k++)
            ck_assert_double_eq_tol(y[i][k], x[k] / 8.0, 1e-15);
    }
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_BAD_ARGUMENT); /* nothing outstanding */
    gpuq_result_free(res);
    gpuq_req_free(r);
}
END_TEST

/* ---- a fake server for replies gpuqd does not send yet ---- */

enum fake_reply { FAKE_TWO_OUTPUTS, FAKE_BAD_TOTAL, FAKE_PING_OK };

typedef struct fake {
    int lfd;
    const enum fake_reply *script;
    int n;
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

/* Read one request frame, return its id. */
static uint64_t read_request(int fd)
{
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix p;
    read_exact(fd, pre, sizeof pre);
    ck_assert_int_eq(gpuq_prefix_decode(pre, sizeof pre, &p), 0);
    uint8_t *h = malloc(p.header_len + p.payload_len + 1);
    read_exact(fd, h, p.header_len + p.payload_len);
    gpuq_request req;
    char msg[200];
    ck_assert_int_eq(gpuq_request_decode(h, p.header_len, &req, msg, sizeof msg), 0);
    free(h);
    return req.id;
}

static void send_frame(int fd, const uint8_t *hdr, size_t hlen, const void *payload, size_t plen)
{
    gpuq_prefix p = {GPUQ_PROTO_VERSION, GPUQ_KIND_REPLY, 0, (uint32_t)hlen, plen};
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&p, pre);
    write_exact(fd, pre, sizeof pre);
    write_exact(fd, hdr, hlen);
    if (plen)
        write_exact(fd, payload, plen);
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    /* hello */
    uint64_t id = read_request(fd);
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
    uint8_t *info, *buf;
    size_t ilen, blen;
    ck_assert_int_eq(gpuq_mpw_take(w, &info, &ilen), 0);
    gpuq_reply rep = {.id = id, .info = info, .info_len = ilen};
    ck_assert_int_eq(gpuq_reply_frame(&rep, 0, &buf, &blen), 0);
    write_exact(fd, buf, blen);
    free(buf);
    free(info);
    for (int k = 0; k < f->n; k++) {
        id = read_request(fd);
        double d[6] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5};
        int64_t ix[6] = {2, 0, 1, -7, 1LL << 40, 5};
        uint8_t payload[96];
        memcpy(payload, d, 48);
        memcpy(payload + 48, ix, 48);
        if (f->script[k] == FAKE_PING_OK) {
            gpuq_mpw_map(w, 2);
        } else {
            gpuq_mpw_map(w, 6);
            gpuq_mpw_str(w, "dtype");
            gpuq_mpw_str(w, "f64");
            gpuq_mpw_str(w, "shape");
            gpuq_mpw_array(w, 2);
            gpuq_mpw_uint(w, 2);
            gpuq_mpw_uint(w, 3);
            gpuq_mpw_str(w, "dtype_b");
            gpuq_mpw_str(w, "i64");
            gpuq_mpw_str(w, "shape_b");
            gpuq_mpw_array(w, 2);
            gpuq_mpw_uint(w, 2);
            gpuq_mpw_uint(w, 3);
        }
        gpuq_mpw_str(w, "id");
        gpuq_mpw_uint(w, id);
        gpuq_mpw_str(w, "status");
        gpuq_mpw_str(w, "ok");
        ck_assert_int_eq(gpuq_mpw_take(w, &buf, &blen), 0);
        size_t plen = f->script[k] == FAKE_PING_OK ? 0 : f->script[k] == FAKE_BAD_TOTAL ? 88 : 96;
        send_frame(fd, buf, blen, payload, plen);
        free(buf);
    }
    gpuq_mpw_free(w);
    close(fd);
    return NULL;
}

/* A pairwise 2 x 3 request (valid locally) with both outputs. */
static gpuq_req *two_output_req(double *d, size_t dcap, int64_t *ix, size_t icap)
{
    static const double a[2] = {1, 2}, b[3] = {3, 4, 5};
    gpuq_req *r = gpuq_req_new("pairwise");
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, (const uint64_t[]){2, 1}, a, sizeof a);
    gpuq_req_set_input(r, 1, GPUQ_DT_F64, 2, (const uint64_t[]){3, 1}, b, sizeof b);
    gpuq_req_set_str(r, "metric", "euclidean");
    gpuq_req_set_output(r, 0, d, dcap);
    gpuq_req_set_output(r, 1, ix, icap);
    return r;
}

START_TEST(reply_with_two_outputs)
{
    static const enum fake_reply script[] = {FAKE_TWO_OUTPUTS, FAKE_TWO_OUTPUTS, FAKE_PING_OK,
                                             FAKE_BAD_TOTAL, FAKE_PING_OK};
    char dir[64], path[100];
    tu_tmpdir(dir, sizeof dir);
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/fake.sock", dir), (int)sizeof path);
    fake f = {.script = script, .n = 5};
    f.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    ck_assert_int_eq(bind(f.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(f.lfd, 1), 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fake_main, &f), 0);

    gpuq_connect_opts o = {path, "api", GPUQ_PRIO_NORMAL, -1};
    gpuq_conn *fc = NULL;
    ck_assert_int_eq(gpuq_connect(&o, &fc), 0);
    gpuq_result *res = gpuq_result_new();
    double d[6] = {0};
    int64_t ix[6] = {0};
    /* 1: both outputs, split by the reply's shapes */
    gpuq_req *r = two_output_req(d, sizeof d, ix, sizeof ix);
    ck_assert_msg(gpuq_call_req(fc, r, res) == 0, "%s", gpuq_errmsg(fc));
    ck_assert_uint_eq(gpuq_result_outputs(res), 2);
    ck_assert_int_eq(gpuq_result_dtype(res, 1), GPUQ_DT_I64);
    ck_assert_uint_eq(gpuq_result_ndim(res, 1), 2);
    ck_assert_uint_eq(gpuq_result_dim(res, 1, 0), 2);
    ck_assert_uint_eq(gpuq_result_dim(res, 1, 1), 3);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 48);
    ck_assert_uint_eq(gpuq_result_bytes(res, 1), 48);
    ck_assert_double_eq(d[5], 5.5);
    ck_assert_int_eq(ix[0], 2);
    ck_assert_int_eq(ix[3], -7);
    ck_assert_int_eq(ix[4], 1LL << 40);
    gpuq_req_free(r);
    /* 2: output 1's buffer one element short: dropped, then 3: a ping is
     * answered (the stream stayed in step) */
    memset(ix, 0, sizeof ix);
    r = two_output_req(d, sizeof d, ix, sizeof ix - 8);
    ck_assert_int_eq(gpuq_call_req(fc, r, res), GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(gpuq_result_status(res), GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(ix[0], 0);
    ck_assert_int_eq(gpuq_ping(fc), 0);
    gpuq_req_free(r);
    /* 4: a payload that does not add up to the shapes, then 5: a ping */
    r = two_output_req(d, sizeof d, ix, sizeof ix);
    ck_assert_int_eq(gpuq_call_req(fc, r, res), GPUQ_E_SIZE_MISMATCH);
    ck_assert_int_eq(gpuq_ping(fc), 0);
    gpuq_req_free(r);
    gpuq_result_free(res);
    gpuq_close(fc);
    pthread_join(th, NULL);
    close(f.lfd);
    tu_rmtree(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_api");
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, api_setup, api_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, builder_matches_convenience);
    tcase_add_test(tc, builder_refusals);
    tcase_add_test(tc, pipeline_mixed);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("fake_server");
    tcase_set_timeout(tf, 30);
    tcase_add_test(tf, reply_with_two_outputs);
    suite_add_tcase(s, tf);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
