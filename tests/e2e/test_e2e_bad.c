/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_bad.c - every bad input named by the issue gets its error reply
 * (exact code) and the daemon keeps serving, on the same connection where the
 * protocol allows it and on a fresh one always. Strings that are not UTF-8
 * are refused, and nothing the daemon sends is anything but UTF-8. */
#include <check.h>
#include <grp.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "req_args.h"
#include "e2e_util.h"
#include "frame.h"
#include "mpread.h"
#include "mpwrite.h"

static uint8_t hbuf[65536];

/* A raw connection that has done hello. */

/* Send req with payload, expect an error reply with code, then a ping on the
 * same connection still works. */
static void expect_error(int fd, gpuq_request *req, const void *payload, size_t plen, int code)
{
    e2e_send_req(fd, req, payload, plen);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == code, "op %s: got %s (%s), want %s", gpuq_op_name(req->op),
                  gpuq_errname(rep.status), rep.message, gpuq_errname(code));
    ck_assert_uint_eq(rep.id, req->id);
    ck_assert_msg(rep.message[0] != '\0', "error reply without a message");
    gpuq_request p;
    gpuq_request_init(&p);
    p.op = GPUQ_OP_PING;
    p.id = req->id + 1000;
    e2e_send_req(fd, &p, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.id, p.id);
}

static gpuq_request norm_req(uint64_t id, gpuq_dtype dt, uint64_t n)
{
    gpuq_request r;
    gpuq_request_init(&r);
    r.id = id;
    r.op = GPUQ_OP_NORMALIZE;
    r.dtype = dt;
    r.ndim_a = 1;
    r.shape_a[0] = n;
    return r;
}

START_TEST(msgpack_huge_array_header)
{
    int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    /* msgpack-c issue 1013: an array32 claiming 2^32-1 elements. */
    const uint8_t evil[] = {0xdd, 0xff, 0x00, 0x00, 0x00};
    e2e_send_frame(fd, evil, sizeof evil, 0, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
    const uint8_t evil2[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xdd, 0xff, 0xff, 0xff, 0xff};
    e2e_send_frame(fd, evil2, sizeof evil2, 0, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
    gpuq_request p = norm_req(5, GPUQ_DT_F64, 2);
    p.op = GPUQ_OP_PING;
    p.dtype = GPUQ_DT_NONE;
    p.ndim_a = 0;
    e2e_send_req(fd, &p, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* A broken prefix: one error reply (id 0), then the connection closes at
 * once. A connection still open fails by assertion within 5 s, not by the
 * test case's timeout. The stream cannot be trusted, so the server reads
 * nothing after the prefix: in every other case a valid ping follows it
 * and is never answered (a byte where the close should be fails the test).
 * The close follows the reply at once (the write callback), well inside
 * the 1 s that the sweep's linger, a backstop, would take. */
START_TEST(bad_prefix_closes_after_error)
{
    struct {
        const char *what;
        int code;
        int byte; /* the prefix byte changed, -1: all junk */
        uint8_t val;
    } cases[] = {
        {"junk", GPUQ_E_PROTOCOL, -1, 0},       {"magic", GPUQ_E_PROTOCOL, 3, 'X'},
        {"version", GPUQ_E_VERSION, 4, 2},      {"kind 0", GPUQ_E_PROTOCOL, 5, 0},
        {"kind 3", GPUQ_E_PROTOCOL, 5, 3},      {"flags", GPUQ_E_PROTOCOL, 6, 1},
        {"flags hi", GPUQ_E_PROTOCOL, 7, 0x80},
    };
    gpuq_request ping;
    gpuq_request_init(&ping);
    ping.op = GPUQ_OP_PING;
    ping.id = 77;
    uint8_t *ph = NULL;
    size_t phl = 0;
    ck_assert_int_eq(gpuq_request_encode(&ping, &ph, &phl), 0);
    ck_assert_uint_le(phl, 64);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
        uint8_t buf[2 * GPUQ_PREFIX_SIZE + 64];
        gpuq_prefix p = {
            .version = GPUQ_PROTO_VERSION, .kind = GPUQ_KIND_REQUEST, .header_len = (uint32_t)phl};
        /* the broken prefix, then (odd cases) a whole valid ping frame */
        gpuq_prefix_encode(&p, buf);
        if (cases[i].byte < 0)
            memcpy(buf, "XXXXjunkjunkjunkjunk", GPUQ_PREFIX_SIZE);
        else
            buf[cases[i].byte] = cases[i].val;
        size_t len = GPUQ_PREFIX_SIZE;
        if (i % 2 == 1) {
            gpuq_prefix_encode(&p, buf + GPUQ_PREFIX_SIZE);
            memcpy(buf + 2 * GPUQ_PREFIX_SIZE, ph, phl);
            len += GPUQ_PREFIX_SIZE + phl;
        }
        ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
        gpuq_reply rep;
        int rc = e2e_read_reply_within(fd, &rep, hbuf, sizeof hbuf, 5);
        ck_assert_msg(rc == 0, "%s: no error reply (%s)", cases[i].what,
                      rc == E2E_CLOSED ? "closed" : "still open after 5 s");
        ck_assert_msg(rep.status == cases[i].code, "%s: got %s (%s), want %s", cases[i].what,
                      gpuq_errname(rep.status), rep.message, gpuq_errname(cases[i].code));
        ck_assert_uint_eq(rep.id, 0);
        e2e_expect_closed_promptly(fd);
        close(fd);
    }
    free(ph);
    e2e_assert_serves();
}
END_TEST

START_TEST(request_before_hello)
{
    int fd = e2e_raw_socket();
    gpuq_request r = norm_req(9, GPUQ_DT_F64, 2);
    double x[2] = {1, 2};
    e2e_send_req(fd, &r, x, sizeof x);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_NO_HELLO);
    close(fd);
    e2e_assert_serves();
}
END_TEST

START_TEST(wrong_version)
{
    int fd = e2e_raw_socket();
    gpuq_request h;
    gpuq_request_init(&h);
    h.op = GPUQ_OP_HELLO;
    h.id = 1;
    h.version = 99;
    e2e_send_req(fd, &h, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_VERSION);
    close(fd);
    e2e_assert_serves();
}
END_TEST

START_TEST(bad_arguments)
{
    int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8};

    gpuq_request r = norm_req(10, GPUQ_DT_F64, 0); /* empty array */
    expect_error(fd, &r, NULL, 0, GPUQ_E_EMPTY);

    r = norm_req(11, GPUQ_DT_NONE, 4); /* no dtype */
    expect_error(fd, &r, x, 32, GPUQ_E_BAD_DTYPE);

    r = norm_req(12, GPUQ_DT_F64, 4); /* payload shorter than the shape says */
    expect_error(fd, &r, x, 24, GPUQ_E_SIZE_MISMATCH);

    r = norm_req(13, GPUQ_DT_F64, 4);
    rq_set_method(&r, (gpuq_norm_method)77); /* unknown method: encoded as an unknown name */
    uint8_t *h = NULL;
    size_t hl = 0;
    rq_set_method(&r, GPUQ_NORM_SUM);
    ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
    /* Rewrite the method name "sum" into "bad" in the encoded header. */
    uint8_t *p = memmem(h, hl, "\xa3sum", 4);
    ck_assert_ptr_nonnull(p);
    memcpy(p + 1, "bad", 3);
    e2e_send_frame(fd, h, (uint32_t)hl, 32, x, 32);
    free(h);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_ARGUMENT);

    /* haversine: wrong shape (n, 3) */
    gpuq_request hv;
    gpuq_request_init(&hv);
    hv.id = 14;
    hv.op = GPUQ_OP_HAVERSINE;
    hv.dtype = GPUQ_DT_F64;
    hv.ndim_a = 2;
    hv.shape_a[0] = 2;
    hv.shape_a[1] = 3;
    rq_set_has_to(&hv, true);
    rq_set_to_lat(&hv, 10);
    rq_set_to_lon(&hv, 10);
    expect_error(fd, &hv, x, 48, GPUQ_E_BAD_SHAPE);

    /* haversine: |lat| > 90 in the payload */
    hv.id = 15;
    hv.shape_a[1] = 2;
    double pts[4] = {10, 20, 90.5, 0};
    expect_error(fd, &hv, pts, sizeof pts, GPUQ_E_OUT_OF_RANGE);

    /* haversine: a non-finite coordinate anywhere in the payload (A or B,
     * latitude or longitude, f32 or f64) is out_of_range, never a NaN result */
    const double bad_vals[] = {NAN, INFINITY, -INFINITY};
    for (int dt = 0; dt < 2; dt++) {
        for (int v = 0; v < 3; v++) {
            for (int pos = 0; pos < 8; pos++) {
                gpuq_request h2 = hv;
                h2.id = 100 + (uint64_t)(dt * 100 + v * 10 + pos);
                h2.dtype = dt ? GPUQ_DT_F64 : GPUQ_DT_F32;
                rq_set_has_to(&h2, pos < 4);
                if (!rq_has_to(&h2)) { /* pairs: A then B */
                    h2.ndim_b = 2;
                    h2.shape_b[0] = 2;
                    h2.shape_b[1] = 2;
                }
                double c[8] = {10, 20, -30, 40, 50, -60, 70, 80};
                c[pos] = bad_vals[v];
                size_t ncoord = rq_has_to(&h2) ? 4 : 8;
                float cf[8];
                for (size_t i = 0; i < ncoord; i++)
                    cf[i] = (float)c[i];
                size_t es = dt ? sizeof(double) : sizeof(float);
                expect_error(fd, &h2, dt ? (void *)c : (void *)cf, ncoord * es,
                             GPUQ_E_OUT_OF_RANGE);
            }
        }
    }

    /* haversine: |lat| > 90 in --to */
    hv.id = 16;
    rq_set_to_lat(&hv, -91);
    double ok[4] = {10, 20, 30, 40};
    expect_error(fd, &hv, ok, sizeof ok, GPUQ_E_OUT_OF_RANGE);

    /* pairwise: d mismatch */
    gpuq_request pw;
    gpuq_request_init(&pw);
    pw.id = 17;
    pw.op = GPUQ_OP_PAIRWISE;
    pw.dtype = GPUQ_DT_F64;
    rq_set_metric(&pw, GPUQ_METRIC_EUCLIDEAN);
    pw.ndim_a = 2;
    pw.shape_a[0] = 2;
    pw.shape_a[1] = 2;
    pw.ndim_b = 2;
    pw.shape_b[0] = 1;
    pw.shape_b[1] = 3;
    expect_error(fd, &pw, x, 56, GPUQ_E_BAD_SHAPE);

    /* pairwise: cosine with a zero vector */
    pw.id = 18;
    rq_set_metric(&pw, GPUQ_METRIC_COSINE);
    pw.shape_b[0] = 2;
    pw.shape_b[1] = 2;
    double zx[8] = {1, 2, 0, 0, 3, 4, 5, 6};
    expect_error(fd, &pw, zx, sizeof zx, GPUQ_E_ZERO_NORM);

    /* grid: latitude range beyond 90 */
    gpuq_request g;
    gpuq_request_init(&g);
    g.id = 19;
    g.op = GPUQ_OP_GRID;
    g.dtype = GPUQ_DT_F64;
    rq_set_lat_start(&g, -100);
    rq_set_lat_stop(&g, 10);
    rq_set_lat_n(&g, 5);
    rq_set_lon_start(&g, 0);
    rq_set_lon_stop(&g, 10);
    rq_set_lon_n(&g, 5);
    rq_set_has_to(&g, true);
    rq_set_to_lat(&g, 30);
    rq_set_to_lon(&g, 101);
    expect_error(fd, &g, NULL, 0, GPUQ_E_OUT_OF_RANGE);

    /* shape overflow: 2^62 x 8 elements */
    gpuq_request big = norm_req(20, GPUQ_DT_F64, 0);
    big.ndim_a = 2;
    big.shape_a[0] = 1ull << 62;
    big.shape_a[1] = 8;
    expect_error(fd, &big, NULL, 0, GPUQ_E_BAD_SHAPE);

    /* unknown op name */
    gpuq_request u;
    gpuq_request_init(&u);
    u.op = GPUQ_OP_PING;
    u.id = 21;
    ck_assert_int_eq(gpuq_request_encode(&u, &h, &hl), 0);
    p = memmem(h, hl, "\xa4ping", 5);
    ck_assert_ptr_nonnull(p);
    memcpy(p + 1, "pong", 4);
    e2e_send_frame(fd, h, (uint32_t)hl, 0, NULL, 0);
    free(h);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_UNKNOWN_OP);
    ck_assert_uint_eq(rep.id, 21);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* Limits: a small configured daemon; each breach is an error reply. */
/* Expect one error reply with code (and id) that says the connection
 * closes, then the close (not a hang). */
static void expect_error_close(int fd, int code, uint64_t id)
{
    const char *m = e2e_expect_error_then_close(fd, code, id);
    ck_assert_msg(strstr(m, "closing") || code == GPUQ_E_PROTOCOL,
                  "the message says the connection closes: %s", m);
    close(fd);
}

START_TEST(limits)
{
    const char *extra[] = {"--max-header", "512", "--max-payload", "4096", "--max-output",
                           "8192",         NULL};
    e2e_restart(extra);
    /* header over max_header: 600 bytes of a msgpack string; the server does
     * not read 600 bytes to throw them away: it answers and closes */
    int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    uint8_t hdr[600];
    memset(hdr, 'a', sizeof hdr);
    hdr[0] = 0xda; /* str16 */
    hdr[1] = 0x02;
    hdr[2] = 0x55;
    e2e_send_frame(fd, hdr, sizeof hdr, 16, "0123456789abcdef", 16);
    expect_error_close(fd, GPUQ_E_TOO_LARGE, 0);
    /* exactly max_header is still read */
    fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    gpuq_request p;
    gpuq_request_init(&p);
    p.op = GPUQ_OP_PING;
    p.id = 7;
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_request_encode(&p, &h, &hl), 0);
    uint8_t big[512];
    memset(big, 0, sizeof big); /* the map, then padding the decoder refuses: bad_header */
    memcpy(big, h, hl);
    free(h);
    e2e_send_frame(fd, big, sizeof big, 0, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
    /* payload over max_payload (8 KiB > 4 KiB): refused with its id once the
     * header is read, then closed instead of skipping the payload */
    gpuq_request r = norm_req(30, GPUQ_DT_F64, 1024);
    void *zeros = calloc(1, 8192);
    e2e_send_req(fd, &r, zeros, 8192);
    expect_error_close(fd, GPUQ_E_TOO_LARGE, 30);
    /* exactly max_payload is accepted */
    fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    r = norm_req(32, GPUQ_DT_F64, 512);
    ((double *)zeros)[0] = 1.0;
    e2e_send_req(fd, &r, zeros, 4096);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == 0, "%s", rep.message);
    ck_assert_uint_eq(rep.id, 32);
    /* output over max_output: a grid needs no payload; the session goes on */
    gpuq_request g;
    gpuq_request_init(&g);
    g.id = 31;
    g.op = GPUQ_OP_GRID;
    g.dtype = GPUQ_DT_F64;
    rq_set_lat_start(&g, -10), rq_set_lat_stop(&g, 10), rq_set_lat_n(&g, 100);
    rq_set_lon_start(&g, -10), rq_set_lon_stop(&g, 10), rq_set_lon_n(&g, 100);
    rq_set_has_to(&g, true);
    expect_error(fd, &g, NULL, 0, GPUQ_E_TOO_LARGE);
    free(zeros);
    close(fd);
    /* header_len + payload_len overflowing 64 bits: too_large, closed */
    fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    e2e_send_frame(fd, "\x80", 1, UINT64_MAX, NULL, 0);
    expect_error_close(fd, GPUQ_E_TOO_LARGE, 0);
    e2e_assert_serves();
}
END_TEST

/* max_payload at the byte, on a daemon started with 4000 (not a power of
 * two): a payload of exactly 4000 bytes is served with the right result
 * (f64 and f32); 3999 declared for 4000 implied is size_mismatch; a header
 * implying 4008 bytes with 4000 declared is too_large and the session goes
 * on; 4001 or 4008 declared is too_large under the request's id, then the
 * connection closes (PROTOCOL.md section 2). The daemon serves after. */
START_TEST(payload_at_the_limit)
{
    const char *extra[] = {"--max-payload", "4000", NULL};
    e2e_restart(extra);
    int fd = e2e_hello_socket("limit", hbuf, sizeof hbuf);
    static double x[502], y[502];
    static float xf[1001], yf[1001];
    for (int i = 0; i < 502; i++)
        x[i] = (double)(i % 7) - 2.0; /* sum of 500: 71 x (-2..4 = 7) + (-2, -1, 0) = 494 */
    for (int i = 0; i < 1001; i++)
        xf[i] = (float)(i % 5); /* sum of 1000: 200 x 10 = 2000 */
    gpuq_reply rep;
    size_t len = 0;
    /* exactly the limit: served */
    gpuq_request r = norm_req(50, GPUQ_DT_F64, 500);
    e2e_send_req(fd, &r, x, 4000);
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, y, sizeof y, &len), 0);
    ck_assert_msg(rep.status == 0, "4000 bytes at max_payload 4000: %s (%s)",
                  gpuq_errname(rep.status), rep.message);
    ck_assert_uint_eq(rep.id, 50);
    ck_assert_uint_eq(len, 4000);
    for (int i = 0; i < 500; i++)
        ck_assert_msg(fabs(y[i] - x[i] / 494.0) <= 2e-15 * fabs(x[i] / 494.0),
                      "element %d: %.17g, want %.17g", i, y[i], x[i] / 494.0);
    r = norm_req(51, GPUQ_DT_F32, 1000);
    e2e_send_req(fd, &r, xf, 4000);
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, yf, sizeof yf, &len), 0);
    ck_assert_msg(rep.status == 0, "%s", rep.message);
    ck_assert_uint_eq(rep.id, 51);
    ck_assert_uint_eq(len, 4000);
    for (int i = 0; i < 1000; i++)
        ck_assert(yf[i] == (float)(xf[i] / 2000.0)); /* exact in binary: k/2000 rounded once */
    /* a byte short of what the header implies: size_mismatch, goes on */
    r = norm_req(52, GPUQ_DT_F64, 500);
    expect_error(fd, &r, x, 3999, GPUQ_E_SIZE_MISMATCH);
    /* the header implies one element over (4008), 4000 declared: too_large
     * (step 3), the payload skipped, the session goes on */
    r = norm_req(53, GPUQ_DT_F64, 501);
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
    e2e_send_frame(fd, h, (uint32_t)hl, 4000, x, 4000);
    free(h);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_TOO_LARGE);
    ck_assert_uint_eq(rep.id, 53);
    ck_assert_ptr_nonnull(strstr(rep.message, "input needs 4008 bytes, over max_payload 4000"));
    r = norm_req(54, GPUQ_DT_F64, 500);
    e2e_send_req(fd, &r, x, 4000);
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, y, sizeof y, &len), 0);
    ck_assert_msg(rep.status == 0, "%s", rep.message);
    ck_assert_uint_eq(rep.id, 54);
    ck_assert(fabs(y[3] - 1.0 / 494.0) <= 2e-15 / 494.0);
    /* one byte over declared: too_large under its id, then closed */
    r = norm_req(55, GPUQ_DT_F64, 500);
    ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
    e2e_send_frame(fd, h, (uint32_t)hl, 4001, x, 4001);
    free(h);
    expect_error_close(fd, GPUQ_E_TOO_LARGE, 55);
    /* one element over (f64 501, f32 1001): the same */
    fd = e2e_hello_socket("limit", hbuf, sizeof hbuf);
    r = norm_req(56, GPUQ_DT_F64, 501);
    e2e_send_req(fd, &r, x, 4008);
    expect_error_close(fd, GPUQ_E_TOO_LARGE, 56);
    fd = e2e_hello_socket("limit", hbuf, sizeof hbuf);
    r = norm_req(57, GPUQ_DT_F32, 1001);
    e2e_send_req(fd, &r, xf, 4004);
    expect_error_close(fd, GPUQ_E_TOO_LARGE, 57);
    /* libgpuq, which knows the limit from the hello: the same boundary */
    gpuq_conn *c = e2e_connect("limit-lib", GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(gpuq_info(c)->limits.max_payload, 4000);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 500, y), 0);
    ck_assert(fabs(y[3] - 1.0 / 494.0) <= 2e-15 / 494.0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 501, y), GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(gpuq_ping(c), 0);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* The staging one request takes, as PROTOCOL.md spells it: the size class
 * of align64(payload) + result. With session_staging 16 KiB, a 1024-element
 * f64 normalize takes exactly 16384 bytes and runs; 1025 elements take
 * 8256 + 8200 = 16456, class 20480: too_large, and the session goes on. */
START_TEST(staging_per_request)
{
    const char *extra[] = {"--session-staging", "16K", NULL};
    e2e_restart(extra);
    int fd = e2e_hello_socket("staging", hbuf, sizeof hbuf);
    double *x = calloc(1025, sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i < 1025; i++)
        x[i] = (double)(i % 5) - 1.5;
    gpuq_request r = norm_req(40, GPUQ_DT_F64, 1024);
    e2e_send_req(fd, &r, x, 1024 * sizeof *x);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == 0, "%s: %s", gpuq_errname(rep.status), rep.message);
    r = norm_req(41, GPUQ_DT_F64, 1025);
    e2e_send_req(fd, &r, x, 1025 * sizeof *x);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_TOO_LARGE);
    ck_assert_uint_eq(rep.id, 41);
    ck_assert_msg(strstr(rep.message, "16456 bytes of staging (20480 after rounding)"), "%s",
                  rep.message);
    /* and the same request fits again at 1024 */
    r = norm_req(42, GPUQ_DT_F64, 1024);
    e2e_send_req(fd, &r, x, 1024 * sizeof *x);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    free(x);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* What PROTOCOL.md promises for odd but well-formed frames. */
START_TEST(protocol_corners)
{
    /* a reply frame (kind 2) from a client: protocol, closed */
    int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    gpuq_prefix pk = {.version = GPUQ_PROTO_VERSION, .kind = GPUQ_KIND_REPLY, .header_len = 1};
    uint8_t pre[GPUQ_PREFIX_SIZE + 1];
    gpuq_prefix_encode(&pk, pre);
    pre[GPUQ_PREFIX_SIZE] = 0x80;
    ck_assert_int_eq(write(fd, pre, sizeof pre), (ssize_t)sizeof pre);
    expect_error_close(fd, GPUQ_E_PROTOCOL, 0);

    /* hello without "version": version error that says what is missing */
    fd = e2e_raw_socket();
    const uint8_t nover[] = {0x82, 0xa2, 'o', 'p',  0xa5, 'h', 'e',
                             'l',  'l',  'o', 0xa2, 'i',  'd', 0x05};
    e2e_send_frame(fd, nover, sizeof nover, 0, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_VERSION);
    ck_assert_uint_eq(rep.id, 5);
    ck_assert_ptr_nonnull(strstr(rep.message, "needs \"version\""));
    /* the connection stays usable: a proper hello works */
    gpuq_request h;
    gpuq_request_init(&h);
    h.op = GPUQ_OP_HELLO;
    h.id = 6;
    h.version = GPUQ_PROTO_VERSION;
    e2e_send_req(fd, &h, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    /* a second hello: bad_argument, and the session goes on */
    h.id = 7;
    h.priority = GPUQ_PRIO_LOW;
    expect_error(fd, &h, NULL, 0, GPUQ_E_BAD_ARGUMENT);
    close(fd);

    /* a device that does not exist (the CPU backend has one; a GPU host here
     * has fewer than 77): bad_argument naming it */
    fd = e2e_raw_socket();
    h.id = 8;
    h.device = 77;
    e2e_send_req(fd, &h, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(rep.message, "device 77 does not exist"));
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* A header refused for a key that comes before "id" is answered with the
 * request's id all the same (issue 30, item 9: it was 0), and the
 * connection goes on: each header below has "id" last. */
START_TEST(bad_key_before_id)
{
    static const uint8_t not_utf8[] = {0xa3, 'f', 0xff, '4'}; /* str "f\xff4" */
    static const struct {
        const char *what, *op, *key, *val; /* val NULL: a rank-3 shape, or raw bytes */
        int code;
    } cases[] = {
        {"method", "normalize", "method", "max", GPUQ_E_BAD_ARGUMENT},
        {"dtype", "normalize", "dtype", "f16", GPUQ_E_BAD_DTYPE},
        {"on_zero", "pairwise", "on_zero", "NaN", GPUQ_E_BAD_ARGUMENT},
        {"shape", "normalize", "shape", NULL, GPUQ_E_BAD_SHAPE},
        {"unknown key", "normalize", "bogus", "x", GPUQ_E_BAD_HEADER},
        {"dtype not UTF-8", "normalize", "dtype", NULL, GPUQ_E_BAD_HEADER},
    };
    int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t id = 4000 + i;
        gpuq_mpw *w = gpuq_mpw_new();
        ck_assert_ptr_nonnull(w);
        gpuq_mpw_map(w, 3);
        gpuq_mpw_str(w, "op");
        gpuq_mpw_str(w, cases[i].op);
        gpuq_mpw_str(w, cases[i].key);
        if (cases[i].val) {
            gpuq_mpw_str(w, cases[i].val);
        } else if (!strcmp(cases[i].key, "shape")) {
            gpuq_mpw_array(w, 3);
            for (int k = 0; k < 3; k++)
                gpuq_mpw_uint(w, 2);
        } else {
            gpuq_mpw_raw(w, not_utf8, sizeof not_utf8);
        }
        gpuq_mpw_str(w, "id");
        gpuq_mpw_uint(w, id);
        uint8_t *b;
        size_t len;
        ck_assert_int_eq(gpuq_mpw_take(w, &b, &len), 0);
        gpuq_mpw_free(w);
        e2e_send_frame(fd, b, (uint32_t)len, 0, NULL, 0);
        free(b);
        gpuq_reply rep;
        ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
        ck_assert_msg(rep.status == cases[i].code, "%s: got %s (%s), want %s", cases[i].what,
                      gpuq_errname(rep.status), rep.message, gpuq_errname(cases[i].code));
        ck_assert_msg(rep.id == id, "%s: reply id %llu, want %llu (%s)", cases[i].what,
                      (unsigned long long)rep.id, (unsigned long long)id, rep.message);
        /* the same connection still serves */
        gpuq_request p;
        gpuq_request_init(&p);
        p.op = GPUQ_OP_PING;
        p.id = id + 1000;
        e2e_send_req(fd, &p, NULL, 0);
        ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
        ck_assert_int_eq(rep.status, 0);
        ck_assert_uint_eq(rep.id, p.id);
    }
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* ---- on_zero ---- */

/* Send a normalize (or, with metric, a pairwise of shape [rows, cols] x
 * [rows, cols]) whose header is written by hand, so that on_zero can be
 * sent as any string, "error" included (libgpuq sends only "zero"); NULL
 * leaves the key out. */
static void send_zero_req(int fd, uint64_t id, const char *dtype, const char *method,
                          const char *metric, uint64_t rows, uint64_t cols, const char *on_zero,
                          const void *payload, size_t plen)
{
    gpuq_mpw *w = gpuq_mpw_new();
    ck_assert_ptr_nonnull(w);
    gpuq_mpw_map(w, 5 + (on_zero ? 1 : 0) + (metric ? 1 : 0));
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, id);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, metric ? "pairwise" : "normalize");
    gpuq_mpw_str(w, "dtype");
    gpuq_mpw_str(w, dtype);
    for (int k = 0; k < (metric ? 2 : 1); k++) {
        gpuq_mpw_str(w, k ? "shape_b" : "shape");
        gpuq_mpw_array(w, 2);
        gpuq_mpw_uint(w, rows);
        gpuq_mpw_uint(w, cols);
    }
    gpuq_mpw_str(w, metric ? "metric" : "method");
    gpuq_mpw_str(w, metric ? metric : method);
    if (on_zero) {
        gpuq_mpw_str(w, "on_zero");
        gpuq_mpw_str(w, on_zero);
    }
    uint8_t *b;
    size_t len;
    ck_assert_int_eq(gpuq_mpw_take(w, &b, &len), 0);
    gpuq_mpw_free(w);
    e2e_send_frame(fd, b, (uint32_t)len, plen, payload, plen);
    free(b);
}

enum { OZ_ROWS = 4, OZ_COLS = 5 };

/* Row 0 and 3 plain, row 1 all zeros (a zero denominator for every
 * method), row 2 constant (zero for minmax and zscore only). */
static const double oz_in[OZ_ROWS][OZ_COLS] = {
    {1, 2, 5, -3, 7}, {0, 0, 0, 0, 0}, {3, 3, 3, 3, 3}, {0.5, -1.25, 4, 2, -0.75}};

/* Every on_zero value PROTOCOL.md defines, for every method and dtype,
 * on a daemon: "zero" gives all zeros for the rows with a zero denominator
 * and the exact result (within 2e-15, or the float64 result rounded once to
 * float32) elsewhere; "error" and the default are zero_norm naming row 1;
 * anything else is bad_argument. The session goes on after each. */
START_TEST(on_zero_normalize)
{
    static const char *const methods[] = {"sum", "l1", "l2", "minmax", "zscore"};
    int fd = e2e_hello_socket("on_zero", hbuf, sizeof hbuf);
    const char *in = e2e_write_f64("oz.in", &oz_in[0][0], OZ_ROWS * OZ_COLS);
    uint64_t id = 100;
    for (int m = 0; m < 5; m++) {
        double want[OZ_ROWS][OZ_COLS];
        const char *args[] = {"normalize_exact", methods[m], "4", "5", in, NULL};
        e2e_ref(&want[0][0], OZ_ROWS * OZ_COLS, args);
        bool constant = m >= 3; /* minmax, zscore: row 2 has no spread */
        for (int i = 0; i < OZ_ROWS; i++)
            for (int j = 0; j < OZ_COLS; j++) {
                bool zero_row = i == 1 || (i == 2 && constant);
                ck_assert_msg(zero_row == (bool)isnan(want[i][j]), "reference %s row %d",
                              methods[m], i);
                if (zero_row)
                    want[i][j] = 0; /* what on_zero "zero" promises */
            }
        for (int f64 = 0; f64 < 2; f64++) {
            float xf[OZ_ROWS * OZ_COLS];
            for (int k = 0; k < OZ_ROWS * OZ_COLS; k++)
                xf[k] = (float)(&oz_in[0][0])[k];
            const void *x = f64 ? (const void *)oz_in : (const void *)xf;
            size_t plen = (f64 ? sizeof(double) : sizeof(float)) * OZ_ROWS * OZ_COLS;
            const char *dt = f64 ? "f64" : "f32";
            /* "zero": a result, zeros where the denominator is zero */
            send_zero_req(fd, ++id, dt, methods[m], NULL, OZ_ROWS, OZ_COLS, "zero", x, plen);
            gpuq_reply rep;
            double y[OZ_ROWS * OZ_COLS];
            size_t ylen = 0;
            ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, y, sizeof y, &ylen),
                             0);
            ck_assert_msg(rep.status == 0, "%s %s on_zero zero: %s (%s)", methods[m], dt,
                          gpuq_errname(rep.status), rep.message);
            ck_assert_uint_eq(rep.id, id);
            ck_assert_uint_eq(ylen, plen);
            ck_assert_int_eq(rep.ndim, 2);
            ck_assert_uint_eq(rep.shape[0], OZ_ROWS);
            ck_assert_uint_eq(rep.shape[1], OZ_COLS);
            for (int k = 0; k < OZ_ROWS * OZ_COLS; k++) {
                double w = (&want[0][0])[k];
                double got = f64 ? y[k] : (double)((const float *)y)[k];
                double tol = f64 ? 2e-15 * fabs(w) : 6e-8 * fabs(w);
                ck_assert_msg(fabs(got - w) <= tol,
                              "%s %s on_zero zero: element %d (row %d) %.17g, want %.17g",
                              methods[m], dt, k, k / OZ_COLS, got, w);
            }
            /* "error", and on_zero left out: zero_norm for row 1 */
            for (int dflt = 0; dflt < 2; dflt++) {
                send_zero_req(fd, ++id, dt, methods[m], NULL, OZ_ROWS, OZ_COLS,
                              dflt ? NULL : "error", x, plen);
                ck_assert_int_eq(
                    e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, y, sizeof y, &ylen), 0);
                ck_assert_msg(rep.status == GPUQ_E_ZERO_NORM, "%s %s on_zero %s: %s (%s)",
                              methods[m], dt, dflt ? "left out" : "error", gpuq_errname(rep.status),
                              rep.message);
                ck_assert_uint_eq(rep.id, id);
                ck_assert_uint_eq(ylen, 0);
                char want_msg[64];
                if (constant)
                    snprintf(want_msg, sizeof want_msg, "row 1 is constant (%s)", methods[m]);
                else
                    snprintf(want_msg, sizeof want_msg, "row 1 has zero %s norm", methods[m]);
                ck_assert_str_eq(rep.message, want_msg);
            }
        }
    }
    /* a value PROTOCOL.md does not define: bad_argument, the payload skipped */
    static const char *const bad[] = {"NaN", "Zero", "", "zeros", "ignore"};
    for (int b = 0; b < 5; b++) {
        send_zero_req(fd, ++id, "f64", "sum", NULL, OZ_ROWS, OZ_COLS, bad[b], oz_in, sizeof oz_in);
        gpuq_reply rep;
        ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
        ck_assert_msg(rep.status == GPUQ_E_BAD_ARGUMENT, "on_zero \"%s\": %s (%s)", bad[b],
                      gpuq_errname(rep.status), rep.message);
        ck_assert_uint_eq(rep.id, id);
        ck_assert_ptr_nonnull(strstr(rep.message, "on_zero"));
    }
    /* the same connection still computes */
    double x[3] = {1, 0, 3}, y[3];
    size_t ylen = 0;
    send_zero_req(fd, ++id, "f64", "sum", NULL, 1, 3, "zero", x, sizeof x);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, y, sizeof y, &ylen), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert(y[0] == 0.25 && y[1] == 0 && y[2] == 0.75);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* pairwise cosine with a zero vector: on_zero "zero" gives 1.0 for its
 * pairs, "error" and the default zero_norm; the session goes on. */
START_TEST(on_zero_pairwise_cosine)
{
    int fd = e2e_hello_socket("on_zero", hbuf, sizeof hbuf);
    /* A = [[3, 4], [0, 0]], B = [[3, 4], [0, 2]] */
    const double ab[8] = {3, 4, 0, 0, 3, 4, 0, 2};
    /* 1 - (a.b)/(|a||b|): [[0, 1 - 8/10], [1, 1]] */
    const double want[4] = {0, 1 - 8.0 / 10.0, 1, 1};
    for (int f64 = 0; f64 < 2; f64++) {
        float abf[8];
        for (int k = 0; k < 8; k++)
            abf[k] = (float)ab[k];
        const void *x = f64 ? (const void *)ab : (const void *)abf;
        size_t plen = (f64 ? sizeof(double) : sizeof(float)) * 8;
        const char *dt = f64 ? "f64" : "f32";
        send_zero_req(fd, 10 + (uint64_t)f64, dt, NULL, "cosine", 2, 2, "zero", x, plen);
        gpuq_reply rep;
        double y[4];
        size_t ylen = 0;
        ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, y, sizeof y, &ylen), 0);
        ck_assert_msg(rep.status == 0, "cosine %s on_zero zero: %s (%s)", dt,
                      gpuq_errname(rep.status), rep.message);
        ck_assert_uint_eq(rep.id, 10 + (uint64_t)f64);
        ck_assert_uint_eq(ylen, plen / 2);
        for (int k = 0; k < 4; k++) {
            double got = f64 ? y[k] : (double)((const float *)y)[k];
            ck_assert_msg(fabs(got - want[k]) <= (f64 ? 1e-15 : 1e-7),
                          "cosine %s pair %d: %.17g, want %.17g", dt, k, got, want[k]);
        }
        for (int dflt = 0; dflt < 2; dflt++) {
            uint64_t id = 20 + (uint64_t)(f64 * 2 + dflt);
            send_zero_req(fd, id, dt, NULL, "cosine", 2, 2, dflt ? NULL : "error", x, plen);
            ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
            ck_assert_int_eq(rep.status, GPUQ_E_ZERO_NORM);
            ck_assert_uint_eq(rep.id, id);
        }
    }
    /* manhattan ignores on_zero: a zero vector is just a point */
    send_zero_req(fd, 30, "f64", NULL, "manhattan", 2, 2, "error", ab, sizeof ab);
    gpuq_reply rep;
    double y[4];
    size_t ylen = 0;
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, y, sizeof y, &ylen), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert(y[0] == 0 && y[1] == 5 && y[2] == 7 && y[3] == 2);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* A peer that hangs up in the middle of a payload. */
START_TEST(hangup_mid_payload)
{
    for (int i = 0; i < 20; i++) {
        int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
        gpuq_request r = norm_req(40, GPUQ_DT_F64, 1000);
        double x[100] = {1};
        uint8_t *h = NULL;
        size_t hl = 0;
        ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
        e2e_send_frame(fd, h, (uint32_t)hl, 8000, x, sizeof x);
        free(h);
        close(fd);
    }
    e2e_assert_serves();
    char js[8192];
    usleep(200000);
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "sessions"), 1); /* the status connection itself */
    ck_assert_int_eq(e2e_json_int(js, "staging_bytes"), 0);
}
END_TEST

/* ---- UTF-8 ---- */

/* A msgpack str8 of n raw bytes (gpuq's writer would escape bytes that are
 * not UTF-8). */
static void raw_str(gpuq_mpw *w, const char *s, size_t n)
{
    uint8_t h[2] = {0xd9, (uint8_t)n};
    ck_assert_uint_lt(n, 256);
    gpuq_mpw_raw(w, h, 2);
    gpuq_mpw_raw(w, s, n);
}

/* Send the header {"id": id, "op": op} or {"id": id, "op": op, key: val},
 * op, key and val as raw bytes. */
static void send_raw(int fd, uint64_t id, const char *op, size_t oplen, const char *key,
                     const char *val, size_t vlen)
{
    gpuq_mpw *w = gpuq_mpw_new();
    ck_assert_ptr_nonnull(w);
    bool hello = oplen == 5 && !memcmp(op, "hello", 5);
    gpuq_mpw_map(w, (key ? 3 : 2) + (hello ? 1 : 0));
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, id);
    gpuq_mpw_str(w, "op");
    raw_str(w, op, oplen);
    if (hello) {
        gpuq_mpw_str(w, "version");
        gpuq_mpw_uint(w, GPUQ_PROTO_VERSION);
    }
    if (key) {
        raw_str(w, key, strlen(key));
        raw_str(w, val, vlen);
    }
    uint8_t *b;
    size_t len;
    ck_assert_int_eq(gpuq_mpw_take(w, &b, &len), 0);
    gpuq_mpw_free(w);
    e2e_send_frame(fd, b, (uint32_t)len, 0, NULL, 0);
    free(b);
}

/* Walk the sessions document with gpuq's reader and collect client names. */
static int session_clients(const uint8_t *doc, size_t len, char names[][80], int cap)
{
    gpuq_mpr r;
    int n = 0;
    gpuq_mpr_init(&r, doc, len);
    while (gpuq_mpr_left(&r) > 0 && n < cap) {
        uint32_t m;
        ck_assert_int_eq(gpuq_mpr_map(&r, &m), 0);
        names[n][0] = '\0';
        for (uint32_t i = 0; i < m; i++) {
            const char *k, *v;
            uint32_t kl, vl;
            ck_assert_int_eq(gpuq_mpr_str(&r, &k, &kl), 0);
            if (kl == 6 && !memcmp(k, "client", 6)) {
                ck_assert_int_eq(gpuq_mpr_str(&r, &v, &vl), 0);
                snprintf(names[n], 80, "%.*s", (int)vl, v);
            } else {
                ck_assert_int_eq(gpuq_mpr_skip(&r), 0);
            }
        }
        n++;
    }
    return n;
}

static bool has_name(char names[][80], int n, const char *want)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], want))
            return true;
    return false;
}

/* Client names and op names that are not UTF-8, and long multi-byte echoes:
 * bad_header or a UTF-8 message, every reply header UTF-8 (e2e_read_reply
 * checks it with msgpack-c and iconv), and afterwards an admin's sessions
 * document, on another connection, decodes with only UTF-8 strings in it. */
START_TEST(utf8_on_the_wire)
{
    /* a daemon where this process is an admin */
    e2e_teardown();
    static char group[64];
    const char *extra[3] = {NULL, NULL, NULL};
    if (getuid() != 0) {
        struct group *g = getgrgid(getgid());
        ck_assert_ptr_nonnull(g);
        snprintf(group, sizeof group, "%s", g->gr_name);
        extra[0] = "--admin-group";
        extra[1] = group;
    }
    e2e_start(extra);
    gpuq_reply rep;

    /* hellos whose client name is not UTF-8: refused, the connection stays */
    static const char *const bad_names[] = {"caf\xe9", "a\xed\xa0\x80", "\xc0\xaf",
                                            "x\xf4\x90\x80\x80", "half \xe2\x82"};
    int raw[5];
    for (int i = 0; i < 5; i++) {
        raw[i] = e2e_raw_socket();
        send_raw(raw[i], 1, "hello", 5, "client", bad_names[i], strlen(bad_names[i]));
        ck_assert_int_eq(e2e_read_reply(raw[i], &rep, hbuf, sizeof hbuf), 0);
        ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
        ck_assert_uint_eq(rep.id, 1);
        ck_assert_str_eq(rep.message, "\"client\" is not valid UTF-8");
    }
    /* one of them may still say hello properly */
    send_raw(raw[0], 2, "hello", 5, "client", "caf\xc3\xa9", 5);
    ck_assert_int_eq(e2e_read_reply(raw[0], &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);

    /* unknown ops: 'x' + 35 x 'é' (71 bytes: the 64-byte cut falls inside
     * a character) and the 70 bytes of 'é' */
    int fd = e2e_hello_socket("utf8", hbuf, sizeof hbuf);
    for (int lead = 0; lead < 2; lead++) {
        char op[80];
        size_t len = 0;
        if (lead)
            op[len++] = 'x';
        for (int k = 0; k < 35; k++, len += 2)
            memcpy(op + len, "\xc3\xa9", 2);
        send_raw(fd, 10 + (uint64_t)lead, op, len, NULL, NULL, 0);
        ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
        ck_assert_int_eq(rep.status, GPUQ_E_UNKNOWN_OP);
        ck_assert_uint_eq(rep.id, 10 + (uint64_t)lead);
        char want[128];
        snprintf(want, sizeof want, "unknown op \"%.*s\"", lead ? 63 : 64, op);
        ck_assert_str_eq(rep.message, want);
    }
    /* an op name that is not UTF-8: bad_header, not unknown_op */
    send_raw(fd, 12, "p\xefng", 4, NULL, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
    ck_assert_str_eq(rep.message, "\"op\" is not valid UTF-8");
    /* a key that is not UTF-8 */
    send_raw(fd, 13, "ping", 4, "bo\xefgus", "x", 1);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
    ck_assert_uint_eq(rep.id, 13);
    ck_assert_str_eq(rep.message, "header key 2 is not a valid UTF-8 string");
    send_raw(fd, 14, "ping", 4, NULL, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);

    /* libgpuq: a long multi-byte name is cut on a character boundary (63
     * bytes here), one that is not UTF-8 is refused before it is sent */
    char longname[100] = "x";
    for (int k = 0; k < 40; k++)
        strcat(longname, "\xc3\xa9");
    gpuq_conn *named = e2e_connect(longname, GPUQ_PRIO_NORMAL);
    gpuq_connect_opts o = {.socket_path = e2e_d.socket, .client_name = "caf\xe9", .device = -1};
    gpuq_conn *bad = NULL;
    ck_assert_int_eq(gpuq_connect(&o, &bad), GPUQ_E_BAD_ARGUMENT);
    gpuq_close(bad);

    /* an admin's sessions document on another connection */
    gpuq_conn *adm = e2e_connect("admin \xe2\x82\xac", GPUQ_PRIO_NORMAL);
    ck_assert(gpuq_info(adm)->admin);
    uint8_t *doc = NULL;
    size_t dlen = 0;
    uint32_t count = 0;
    ck_assert_int_eq(gpuq_sessions(adm, &doc, &dlen, &count), 0);
    ck_assert_uint_eq(count, 8); /* 5 raw, fd, named, adm */
    /* 24 strings per session: its keys and its str values */
    ck_assert_int_eq(tu_msgpack_strings_utf8(doc, dlen), (long)count * 24);
    char names[16][80];
    ck_assert_int_eq(session_clients(doc, dlen, names, 16), (int)count);
    ck_assert(has_name(names, count, "caf\xc3\xa9"));
    ck_assert(has_name(names, count, "utf8"));
    ck_assert(has_name(names, count, "admin \xe2\x82\xac"));
    ck_assert(has_name(names, count, "")); /* the refused ones */
    longname[63] = '\0';
    ck_assert(has_name(names, count, longname));
    free(doc);

    gpuq_close(adm);
    gpuq_close(named);
    close(fd);
    for (int i = 0; i < 5; i++)
        close(raw[i]);
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_bad");
    TCase *tc = tcase_create("bad");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, msgpack_huge_array_header);
    tcase_add_test(tc, bad_prefix_closes_after_error);
    tcase_add_test(tc, request_before_hello);
    tcase_add_test(tc, wrong_version);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, payload_at_the_limit);
    tcase_add_test(tc, protocol_corners);
    tcase_add_test(tc, bad_key_before_id);
    tcase_add_test(tc, staging_per_request);
    tcase_add_test(tc, hangup_mid_payload);
    tcase_add_test(tc, on_zero_normalize);
    tcase_add_test(tc, on_zero_pairwise_cosine);
    tcase_add_test(tc, utf8_on_the_wire);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
