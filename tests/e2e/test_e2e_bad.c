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

START_TEST(bad_prefix_closes_after_error)
{
    int fd = e2e_hello_socket("bad", hbuf, sizeof hbuf);
    const uint8_t junk[GPUQ_PREFIX_SIZE] = "XXXXjunkjunkjunkjunk";
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_PROTOCOL);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), -1); /* closed */
    close(fd);
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
    r.method = (gpuq_norm_method)77; /* unknown method: encoded as an unknown name */
    uint8_t *h = NULL;
    size_t hl = 0;
    r.method = GPUQ_NORM_SUM;
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
    hv.has_to = true;
    hv.to_lat = 10;
    hv.to_lon = 10;
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
                h2.has_to = pos < 4;
                if (!h2.has_to) { /* pairs: A then B */
                    h2.ndim_b = 2;
                    h2.shape_b[0] = 2;
                    h2.shape_b[1] = 2;
                }
                double c[8] = {10, 20, -30, 40, 50, -60, 70, 80};
                c[pos] = bad_vals[v];
                size_t ncoord = h2.has_to ? 4 : 8;
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
    hv.to_lat = -91;
    double ok[4] = {10, 20, 30, 40};
    expect_error(fd, &hv, ok, sizeof ok, GPUQ_E_OUT_OF_RANGE);

    /* pairwise: d mismatch */
    gpuq_request pw;
    gpuq_request_init(&pw);
    pw.id = 17;
    pw.op = GPUQ_OP_PAIRWISE;
    pw.dtype = GPUQ_DT_F64;
    pw.metric = GPUQ_METRIC_EUCLIDEAN;
    pw.ndim_a = 2;
    pw.shape_a[0] = 2;
    pw.shape_a[1] = 2;
    pw.ndim_b = 2;
    pw.shape_b[0] = 1;
    pw.shape_b[1] = 3;
    expect_error(fd, &pw, x, 56, GPUQ_E_BAD_SHAPE);

    /* pairwise: cosine with a zero vector */
    pw.id = 18;
    pw.metric = GPUQ_METRIC_COSINE;
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
    g.lat_start = -100;
    g.lat_stop = 10;
    g.lat_n = 5;
    g.lon_start = 0;
    g.lon_stop = 10;
    g.lon_n = 5;
    g.has_to = true;
    g.to_lat = 30;
    g.to_lon = 101;
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
/* Send a frame, expect one error reply with code (and id), then the close. */
static void expect_error_close(int fd, int code, uint64_t id)
{
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == code, "got %s (%s), want %s", gpuq_errname(rep.status), rep.message,
                  gpuq_errname(code));
    ck_assert_uint_eq(rep.id, id);
    ck_assert_msg(strstr(rep.message, "closing") || code == GPUQ_E_PROTOCOL,
                  "the message says the connection closes: %s", rep.message);
    e2e_expect_closed(fd, 10);
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
    g.lat_start = -10, g.lat_stop = 10, g.lat_n = 100;
    g.lon_start = -10, g.lon_stop = 10, g.lon_n = 100;
    g.has_to = true;
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
    /* 16 keys per session, client and priority are str values */
    ck_assert_int_eq(tu_msgpack_strings_utf8(doc, dlen), (long)count * 18);
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
    tcase_add_test(tc, protocol_corners);
    tcase_add_test(tc, staging_per_request);
    tcase_add_test(tc, hangup_mid_payload);
    tcase_add_test(tc, utf8_on_the_wire);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (e2e_skip_without_gpu())
        return EXIT_SUCCESS;
    return tu_run_suite(suite());
}
