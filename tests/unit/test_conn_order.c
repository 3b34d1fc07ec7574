/* SPDX-License-Identifier: Apache-2.0 */
/* test_conn_order.c - libgpuq matches each reply to the oldest outstanding
 * request (client/lib/conn.c, wait_head), against a fake gpuqd in a thread
 * that answers out of order or with a wrong id when a test says so.
 *
 * Replies come in request order (PROTOCOL.md 2), so a reply whose id is not
 * the queue head's is a broken stream: libgpuq must return GPUQ_E_PROTOCOL
 * for the head, leave the head's output buffers and result as they were
 * (no other request's bytes handed over as this one's), and refuse every
 * later call. The wrong ids tried: the next request's (its reply first),
 * one never sent, one already answered, and 0 on a success. An error
 * with id 0 is the server failing the stream as a whole, and keeps its own
 * code. Each case is checked through the builder API (gpuq_submit_req,
 * gpuq_wait_req) and the blocking calls (gpuq_call, gpuq_call_req).
 *
 * The fake answers hello, then reads the number of requests the test
 * names, recording their ids, and then sends the test's replies: each
 * carries a chosen id and a payload of the request's size filled with one
 * byte, so where those bytes land shows which reply went where.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "gpuq_internal.h"
#include "mpwrite.h"
#include "testutil.h"

#define N 4                         /* elements of every request's 1-D f64 array */
#define NBYTES (N * sizeof(double)) /* of its result */
#define MAX_REQ 4

/* One reply the fake sends: the id of request `of` (the order the fake read
 * them in), or `id` itself when of < 0; a result (status 0: NBYTES of
 * `fill`) or an error status. */
typedef struct fake_reply {
    int of;
    uint64_t id;
    int status;
    uint8_t fill;
} fake_reply;

typedef struct fake {
    char dir[256], path[320];
    int lfd, fd;
    int nreq; /* requests to read before answering */
    fake_reply plan[MAX_REQ];
    int nplan;
    uint64_t ids[MAX_REQ]; /* of the requests read; the test reads them after a wait */
    pthread_t thread;
} fake;

static fake F;

/* A reply frame with rep's header and payload_len bytes of fill. */
static void send_reply(const gpuq_reply *rep, uint64_t payload_len, uint8_t fill)
{
    uint8_t *buf, pl[NBYTES];
    size_t len;
    if (gpuq_reply_frame(rep, payload_len, &buf, &len) != 0 || payload_len > sizeof pl)
        abort();
    tu_send_all(F.fd, buf, len);
    free(buf);
    memset(pl, fill, sizeof pl);
    tu_send_all(F.fd, pl, (size_t)payload_len);
}

/* hello's info: the default limits, no arenas (so nothing is staged). */
static uint8_t *hello_info(size_t *len)
{
    gpuq_limits lim;
    gpuq_limits_default(&lim);
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *out = NULL;
    if (!w)
        abort();
    gpuq_mpw_map(w, 4);
    gpuq_mpw_str(w, "version");
    gpuq_mpw_uint(w, GPUQ_PROTO_VERSION);
    gpuq_mpw_str(w, "server");
    gpuq_mpw_str(w, "fake");
    gpuq_mpw_str(w, "arenas");
    gpuq_mpw_bool(w, false);
    gpuq_mpw_str(w, "limits");
    gpuq_limits_encode(&lim, w);
    if (gpuq_mpw_take(w, &out, len) != 0)
        abort();
    gpuq_mpw_free(w);
    return out;
}

/* Read one request frame (its payload dropped) and decode its header.
 * -1 at EOF or on a frame the fake cannot read. */
static int read_req(gpuq_request *req)
{
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix p;
    if (tu_recv_all(F.fd, pre, sizeof pre) || gpuq_prefix_decode(pre, sizeof pre, &p))
        return -1;
    uint8_t *hdr = malloc(p.header_len);
    uint8_t *pl = malloc(p.payload_len ? p.payload_len : 1);
    char msg[256];
    int rc = -1;
    if (hdr && pl && !tu_recv_all(F.fd, hdr, p.header_len) &&
        !tu_recv_all(F.fd, pl, p.payload_len) &&
        gpuq_request_decode(hdr, p.header_len, req, msg, sizeof msg) == 0)
        rc = 0;
    free(hdr);
    free(pl);
    return rc;
}

static void *fake_main(void *arg)
{
    (void)arg;
    F.fd = accept(F.lfd, NULL, NULL);
    if (F.fd < 0)
        return NULL;
    gpuq_request req;
    if (read_req(&req) != 0 || req.op != GPUQ_OP_HELLO)
        goto out;
    gpuq_reply hello = {.id = req.id};
    uint8_t *info = hello_info(&hello.info_len);
    hello.info = info;
    send_reply(&hello, 0, 0);
    free(info);
    for (int k = 0; k < F.nreq; k++) {
        if (read_req(&req) != 0)
            goto out;
        F.ids[k] = req.id;
    }
    for (int k = 0; k < F.nplan; k++) {
        const fake_reply *pr = &F.plan[k];
        gpuq_reply rep = {.id = pr->of >= 0 ? F.ids[pr->of] : pr->id, .status = pr->status};
        if (pr->status) {
            snprintf(rep.message, sizeof rep.message, "the fake says %s", gpuq_errname(pr->status));
            send_reply(&rep, 0, 0);
        } else {
            rep.dtype = GPUQ_DT_F64;
            rep.ndim = 1;
            rep.shape[0] = N;
            send_reply(&rep, NBYTES, pr->fill);
        }
    }
    while (read_req(&req) == 0) { /* until the client hangs up */
    }
out:
    close(F.fd);
    return NULL;
}

/* Start the fake: it reads nreq requests after the hello, then sends the
 * nplan replies of plan. */
static void fake_start(int nreq, const fake_reply *plan, int nplan)
{
    memset(&F, 0, sizeof F);
    ck_assert_int_le(nreq, MAX_REQ);
    ck_assert_int_le(nplan, MAX_REQ);
    F.nreq = nreq;
    memcpy(F.plan, plan, (size_t)nplan * sizeof *plan);
    F.nplan = nplan;
    tu_tmpdir(F.dir, sizeof F.dir);
    snprintf(F.path, sizeof F.path, "%s/fake.sock", F.dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(F.path), sizeof sa.sun_path);
    memcpy(sa.sun_path, F.path, strlen(F.path) + 1);
    F.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(F.lfd, 0);
    ck_assert_int_eq(bind(F.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(F.lfd, 4), 0);
    ck_assert_int_eq(pthread_create(&F.thread, NULL, fake_main, NULL), 0);
}

static gpuq_conn *fake_connect(void)
{
    gpuq_connect_opts o = {.socket_path = F.path, .client_name = "test", .device = -1};
    gpuq_conn *c = NULL;
    int rc = gpuq_connect(&o, &c);
    ck_assert_msg(rc == 0, "connect: %s", c ? gpuq_errmsg(c) : "no memory");
    return c;
}

static void fake_stop(gpuq_conn *c)
{
    gpuq_close(c);
    ck_assert_int_eq(pthread_join(F.thread, NULL), 0);
    close(F.lfd);
    tu_rmtree(F.dir);
}

/* ---- helpers ---- */

static const double IN[N] = {1, 2, 3, 4};

/* A normalize request of IN with its output into out. */
static gpuq_req *norm_req(uint8_t *out)
{
    static const uint64_t shape[1] = {N};
    gpuq_req *r = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, shape, IN, sizeof IN), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, out, NBYTES), 0);
    return r;
}

/* Every byte of buf[n] is b. */
static void all_bytes(const uint8_t *buf, size_t n, uint8_t b, const char *what)
{
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(buf[k] == b, "%s: byte %zu is 0x%02x, not 0x%02x", what, k, buf[k], b);
}

/* The wait whose reply was not its own: the protocol error, the head's id,
 * no outputs, and the connection broken with a message that says so. */
static void assert_refused(gpuq_conn *c, int rc, const gpuq_result *res, uint64_t id)
{
    ck_assert_msg(rc == GPUQ_E_PROTOCOL, "wait: %d (%s), not protocol: %s", rc, gpuq_errname(rc),
                  gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_result_status(res), GPUQ_E_PROTOCOL);
    ck_assert_uint_eq(gpuq_result_id(res), id);
    ck_assert_uint_eq(gpuq_result_outputs(res), 0);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 0);
    ck_assert_msg(strstr(gpuq_errmsg(c), "out of order"), "%s", gpuq_errmsg(c));
}

/* ---- in order: the fake speaks the protocol ---- */

START_TEST(in_order_replies_delivered)
{
    const fake_reply plan[] = {{0, 0, 0, 0xa1}, {1, 0, 0, 0xa2}};
    fake_start(2, plan, 2);
    gpuq_conn *c = fake_connect();
    uint8_t out[2][NBYTES];
    memset(out, 0x11, sizeof out);
    gpuq_req *r0 = norm_req(out[0]), *r1 = norm_req(out[1]);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    uint64_t id0, id1;
    ck_assert_int_eq(gpuq_submit_req(c, r0, &id0), 0);
    ck_assert_int_eq(gpuq_submit_req(c, r1, &id1), 0);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), id0);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), NBYTES);
    all_bytes(out[0], NBYTES, 0xa1, "first result");
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), id1);
    all_bytes(out[1], NBYTES, 0xa2, "second result");
    ck_assert_uint_eq(F.ids[0], id0);
    ck_assert_uint_eq(F.ids[1], id1);
    gpuq_result_free(res);
    gpuq_req_free(r0);
    gpuq_req_free(r1);
    fake_stop(c);
}
END_TEST

/* ---- pipelined: the head's reply is not its own ---- */

enum { WRONG_NEXT, WRONG_NEVER_SENT, WRONG_ANSWERED, WRONG_ZERO_OK, WRONG_COUNT };
static const char *const wrong_name[WRONG_COUNT] = {"the next request's reply first",
                                                    "an id never sent", "an id already answered",
                                                    "id 0 on a success"};

START_TEST(wrong_reply_pipelined)
{
    /* two requests; which reply the wrong one is, and which wait meets it */
    fake_reply plan[2];
    int bad_wait = 0; /* the wait that meets the wrong reply */
    switch (_i) {
    case WRONG_NEXT: /* out of order: the second's reply, then the first's */
        plan[0] = (fake_reply){1, 0, 0, 0xb2};
        plan[1] = (fake_reply){0, 0, 0, 0xb1};
        break;
    case WRONG_NEVER_SENT:
        plan[0] = (fake_reply){-1, 1000, 0, 0xb1};
        plan[1] = (fake_reply){1, 0, 0, 0xb2};
        break;
    case WRONG_ANSWERED: /* the first is answered, then again in the second's place */
        plan[0] = (fake_reply){0, 0, 0, 0xa1};
        plan[1] = (fake_reply){0, 0, 0, 0xb2};
        bad_wait = 1;
        break;
    default: /* WRONG_ZERO_OK: a result with id 0 */
        plan[0] = (fake_reply){-1, 0, 0, 0xb1};
        plan[1] = (fake_reply){1, 0, 0, 0xb2};
        break;
    }
    fake_start(2, plan, 2);
    gpuq_conn *c = fake_connect();
    uint8_t out[2][NBYTES];
    memset(out[0], 0x11, NBYTES);
    memset(out[1], 0x22, NBYTES);
    gpuq_req *r[2] = {norm_req(out[0]), norm_req(out[1])};
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    uint64_t id[2];
    ck_assert_int_eq(gpuq_submit_req(c, r[0], &id[0]), 0);
    ck_assert_int_eq(gpuq_submit_req(c, r[1], &id[1]), 0);
    if (bad_wait == 1) { /* the first reply is right */
        ck_assert_int_eq(gpuq_wait_req(c, res), 0);
        ck_assert_uint_eq(gpuq_result_id(res), id[0]);
        all_bytes(out[0], NBYTES, 0xa1, "the first, answered");
    }
    int rc = gpuq_wait_req(c, res);
    assert_refused(c, rc, res, id[bad_wait]);
    /* the wrong reply's bytes are in no caller's buffer */
    all_bytes(out[bad_wait], NBYTES, bad_wait ? 0x22 : 0x11, wrong_name[_i]);
    if (bad_wait == 0)
        all_bytes(out[1], NBYTES, 0x22, wrong_name[_i]);
    /* broken for good: the other request's wait and a new submit */
    if (bad_wait == 0) {
        ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_PROTOCOL);
        all_bytes(out[1], NBYTES, 0x22, "after the break");
    }
    uint64_t id2;
    ck_assert_int_eq(gpuq_submit_req(c, r[0], &id2), GPUQ_E_PROTOCOL);
    ck_assert_int_eq(gpuq_ping(c), GPUQ_E_PROTOCOL);
    gpuq_result_free(res);
    gpuq_req_free(r[0]);
    gpuq_req_free(r[1]);
    fake_stop(c);
}
END_TEST

/* ---- blocking calls ---- */

/* gpuq_call (gpuqctl's path, the in-tree request) answered with an id never
 * sent: the call fails, its buffer untouched, *rep names its own id. */
START_TEST(wrong_id_blocking_call)
{
    const fake_reply plan[] = {{-1, 7777, 0, 0xb1}};
    fake_start(1, plan, 1);
    gpuq_conn *c = fake_connect();
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_NORMALIZE;
    q.dtype = GPUQ_DT_F64;
    q.ndim_a = 1;
    q.shape_a[0] = N;
    uint8_t out[NBYTES];
    memset(out, 0x11, sizeof out);
    gpuq_reply rep;
    int rc = gpuq_call(c, &q, IN, sizeof IN, NULL, 0, out, sizeof out, &rep);
    ck_assert_msg(rc == GPUQ_E_PROTOCOL, "call: %d: %s", rc, gpuq_errmsg(c));
    all_bytes(out, sizeof out, 0x11, "gpuq_call's buffer");
    ck_assert_uint_eq(rep.id, F.ids[0]);
    ck_assert_int_eq(rep.status, GPUQ_E_PROTOCOL);
    ck_assert_msg(strstr(gpuq_errmsg(c), "id 7777"), "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_call(c, &q, IN, sizeof IN, NULL, 0, out, sizeof out, &rep),
                     GPUQ_E_PROTOCOL);
    fake_stop(c);
}
END_TEST

/* gpuq_call_req, the public blocking call, the same. */
START_TEST(wrong_id_blocking_call_req)
{
    const fake_reply plan[] = {{-1, 7777, 0, 0xb1}};
    fake_start(1, plan, 1);
    gpuq_conn *c = fake_connect();
    uint8_t out[NBYTES];
    memset(out, 0x11, sizeof out);
    gpuq_req *r = norm_req(out);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    int rc = gpuq_call_req(c, r, res);
    assert_refused(c, rc, res, F.ids[0]);
    all_bytes(out, sizeof out, 0x11, "gpuq_call_req's buffer");
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_PROTOCOL);
    gpuq_result_free(res);
    gpuq_req_free(r);
    fake_stop(c);
}
END_TEST

/* ---- id 0 with an error: the stream's own failure, not a wrong id ---- */

START_TEST(stream_error_keeps_its_code)
{
    const fake_reply plan[] = {{-1, 0, GPUQ_E_BUSY, 0}};
    fake_start(1, plan, 1);
    gpuq_conn *c = fake_connect();
    uint8_t out[NBYTES];
    memset(out, 0x11, sizeof out);
    gpuq_req *r = norm_req(out);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    uint64_t id;
    ck_assert_int_eq(gpuq_submit_req(c, r, &id), 0);
    int rc = gpuq_wait_req(c, res);
    ck_assert_msg(rc == GPUQ_E_BUSY, "wait: %d: %s", rc, gpuq_errmsg(c));
    ck_assert_msg(strstr(gpuq_errmsg(c), "the fake says busy"), "%s", gpuq_errmsg(c));
    all_bytes(out, sizeof out, 0x11, "the buffer");
    ck_assert_int_eq(gpuq_pending(c), 0);
    gpuq_result_free(res);
    gpuq_req_free(r);
    fake_stop(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("conn_order");
    TCase *tc = tcase_create("conn_order");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, in_order_replies_delivered);
    tcase_add_loop_test(tc, wrong_reply_pipelined, 0, WRONG_COUNT);
    tcase_add_test(tc, wrong_id_blocking_call);
    tcase_add_test(tc, wrong_id_blocking_call_req);
    tcase_add_test(tc, stream_error_keeps_its_code);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
