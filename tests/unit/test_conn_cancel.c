/* SPDX-License-Identifier: Apache-2.0 */
/* test_conn_cancel.c - libgpuq's deadlines, cancel and interruptible waits
 * (client/lib/conn.c, client/lib/req.c) against a fake gpuqd in a thread, so that
 * every frame libgpuq sends can be read back exactly and every reply is
 * the test's to time.
 *
 * The fake answers hello (with the max_inflight a test asks for), control
 * ops with an empty ok, and a compute request with a deadline_ms under
 * FAKE_SHORT_MS with deadline_exceeded, else with a result of the input's size filled with
 * FAKE_BYTE. In hold mode it answers compute requests only when the test
 * releases them (a byte on a pipe) or a cancel names one: the held ones
 * are then answered in order (the named one cancelled) and the cancel's
 * reply follows with its counts, as gpuqd does. Each request's header is
 * decoded with proto's gpuq_request_decode, and its "deadline_ms" keys are
 * counted in the raw msgpack (a duplicate key would be bad_header).
 *
 * The e2e side (a real gpuqd, slow CPU jobs) is tests/e2e/test_e2e_cancel.c.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "gpuq_internal.h"
#include "mpread.h"
#include "mpwrite.h"
#include "req.h"
#include "testutil.h"

#define FAKE_BYTE 0x5a
#define FAKE_MAX_SEEN 64
#define FAKE_MAX_HELD 16
#define FAKE_SHORT_MS 1000 /* a deadline under this is answered deadline_exceeded */

/* One request the fake read. */
typedef struct seen_req {
    gpuq_op op;
    uint64_t id;
    uint64_t deadline_ms;
    int deadline_keys; /* "deadline_ms" keys in the header map */
    bool has_request;
    uint64_t request;
} seen_req;

typedef struct held_req {
    uint64_t id;
    gpuq_dtype dtype;
    uint64_t n; /* elements of the 1-D result */
} held_req;

typedef struct fake {
    char dir[256], path[320];
    int lfd, fd;
    int release[2]; /* the test writes a byte: answer the held requests */
    uint32_t max_inflight;
    bool hold;
    bool stall; /* after the hello, read nothing more */
    bool hello_done;
    pthread_t thread;
    pthread_mutex_t mu;
    seen_req seen[FAKE_MAX_SEEN];
    int nseen;
    held_req held[FAKE_MAX_HELD];
    int nheld;
} fake;

static fake F;

/* A reply frame: rep's header, then payload_len bytes of FAKE_BYTE. */
static void send_reply(const gpuq_reply *rep, uint64_t payload_len)
{
    uint8_t *buf;
    size_t len;
    if (gpuq_reply_frame(rep, payload_len, &buf, &len) != 0)
        abort();
    tu_send_all(F.fd, buf, len);
    free(buf);
    if (payload_len) {
        uint8_t *pl = malloc(payload_len);
        if (!pl)
            abort();
        memset(pl, FAKE_BYTE, payload_len);
        tu_send_all(F.fd, pl, payload_len);
        free(pl);
    }
}

static void send_status(uint64_t id, int status, const uint8_t *info, size_t info_len)
{
    gpuq_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.id = id;
    rep.status = status;
    if (status)
        snprintf(rep.message, sizeof rep.message, "the fake says %s", gpuq_errname(status));
    rep.info = info;
    rep.info_len = info_len;
    send_reply(&rep, 0);
}

static void send_result(const held_req *h)
{
    gpuq_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.id = h->id;
    rep.dtype = h->dtype;
    rep.ndim = 1;
    rep.shape[0] = h->n;
    send_reply(&rep, h->n * gpuq_dtype_size(h->dtype));
}

/* A msgpack map built by fn into a malloc'd buffer. */
static uint8_t *info_map(void (*fn)(gpuq_mpw *, const void *), const void *arg, size_t *len)
{
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *out = NULL;
    if (!w)
        abort();
    fn(w, arg);
    if (gpuq_mpw_take(w, &out, len) != 0)
        abort();
    gpuq_mpw_free(w);
    return out;
}

static void hello_info(gpuq_mpw *w, const void *arg)
{
    (void)arg;
    gpuq_limits lim;
    gpuq_limits_default(&lim);
    if (F.max_inflight)
        lim.max_inflight = F.max_inflight;
    gpuq_mpw_map(w, 4);
    gpuq_mpw_str(w, "version");
    gpuq_mpw_uint(w, GPUQ_PROTO_VERSION);
    gpuq_mpw_str(w, "server");
    gpuq_mpw_str(w, "fake");
    gpuq_mpw_str(w, "arenas");
    gpuq_mpw_bool(w, false);
    gpuq_mpw_str(w, "limits");
    gpuq_limits_encode(&lim, w);
}

static void cancel_info(gpuq_mpw *w, const void *arg)
{
    const uint64_t *dropped = arg;
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "dropped");
    gpuq_mpw_uint(w, *dropped);
    gpuq_mpw_str(w, "running");
    gpuq_mpw_uint(w, 0);
}

/* "deadline_ms" keys of the map in hdr. */
static int deadline_keys(const uint8_t *hdr, size_t len)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, hdr, len);
    uint32_t n;
    int k = 0;
    if (gpuq_mpr_map(&r, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *s;
        uint32_t sl;
        if (gpuq_mpr_str(&r, &s, &sl) || gpuq_mpr_skip(&r))
            return -1;
        k += sl == 11 && memcmp(s, "deadline_ms", 11) == 0;
    }
    return k;
}

/* Answer every held request in order, the one with id cancel (0: none)
 * cancelled; returns how many were cancelled. */
static uint64_t answer_held(uint64_t cancel)
{
    held_req held[FAKE_MAX_HELD];
    pthread_mutex_lock(&F.mu);
    int n = F.nheld;
    memcpy(held, F.held, sizeof held);
    F.nheld = 0;
    pthread_mutex_unlock(&F.mu);
    uint64_t dropped = 0;
    for (int i = 0; i < n; i++) {
        if (cancel && held[i].id == cancel) {
            send_status(held[i].id, GPUQ_E_CANCELLED, NULL, 0);
            dropped++;
        } else {
            send_result(&held[i]);
        }
    }
    return dropped;
}

/* One request frame: read, recorded, answered (or held). -1 at EOF. */
static int serve_frame(void)
{
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix p;
    if (tu_recv_all(F.fd, pre, sizeof pre) || gpuq_prefix_decode(pre, sizeof pre, &p))
        return -1;
    uint8_t *hdr = malloc(p.header_len);
    uint8_t *pl = malloc(p.payload_len ? p.payload_len : 1);
    if (!hdr || !pl)
        abort();
    gpuq_request req;
    char msg[256];
    int rc = -1;
    if (tu_recv_all(F.fd, hdr, p.header_len) || tu_recv_all(F.fd, pl, p.payload_len))
        goto out;
    rc = 0;
    if (gpuq_request_decode(hdr, p.header_len, &req, msg, sizeof msg) != 0) {
        send_status(0, GPUQ_E_BAD_HEADER, NULL, 0);
        goto out;
    }
    pthread_mutex_lock(&F.mu);
    if (req.op != GPUQ_OP_HELLO && F.nseen < FAKE_MAX_SEEN)
        F.seen[F.nseen++] = (seen_req){.op = req.op,
                                       .id = req.id,
                                       .deadline_ms = req.deadline_ms,
                                       .deadline_keys = deadline_keys(hdr, p.header_len),
                                       .has_request = req.has_request,
                                       .request = req.request};
    pthread_mutex_unlock(&F.mu);
    size_t ilen;
    uint8_t *info;
    if (req.op == GPUQ_OP_HELLO) {
        info = info_map(hello_info, NULL, &ilen);
        send_status(req.id, 0, info, ilen);
        free(info);
        F.hello_done = true;
    } else if (req.op == GPUQ_OP_CANCEL) {
        uint64_t dropped = answer_held(req.request);
        info = info_map(cancel_info, &dropped, &ilen);
        send_status(req.id, 0, info, ilen);
        free(info);
    } else if (!gpuq_op_is_compute(req.op)) {
        send_status(req.id, 0, NULL, 0);
    } else if (req.deadline_ms && req.deadline_ms < FAKE_SHORT_MS) {
        send_status(req.id, GPUQ_E_DEADLINE_EXCEEDED, NULL, 0);
    } else {
        held_req h = {req.id, req.dtype, req.shape_a[0]};
        pthread_mutex_lock(&F.mu);
        bool held = F.hold && F.nheld < FAKE_MAX_HELD;
        if (held)
            F.held[F.nheld++] = h;
        pthread_mutex_unlock(&F.mu);
        if (!held)
            send_result(&h);
    }
out:
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
    for (;;) {
        bool stalled = F.stall && F.hello_done;
        struct pollfd pf[2] = {{.fd = F.fd, .events = stalled ? 0 : POLLIN},
                               {.fd = F.release[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents) {
            char b;
            if (read(F.release[0], &b, 1) != 1)
                break;
            answer_held(0);
            continue;
        }
        if (stalled && pf[0].revents) /* the client is gone */
            break;
        if (pf[0].revents && serve_frame() != 0)
            break;
    }
    close(F.fd);
    return NULL;
}

static void fake_start(uint32_t max_inflight, bool hold)
{
    memset(&F, 0, sizeof F);
    F.max_inflight = max_inflight;
    F.hold = hold;
    pthread_mutex_init(&F.mu, NULL);
    tu_tmpdir(F.dir, sizeof F.dir);
    snprintf(F.path, sizeof F.path, "%s/fake.sock", F.dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(F.path), sizeof sa.sun_path);
    memcpy(sa.sun_path, F.path, strlen(F.path) + 1);
    F.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(F.lfd, 0);
    ck_assert_int_eq(bind(F.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(F.lfd, 4), 0);
    ck_assert_int_eq(pipe2(F.release, O_CLOEXEC), 0);
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

/* Close c, let the fake see the end, clean up. */
static void fake_stop(gpuq_conn *c)
{
    gpuq_close(c);
    ck_assert_int_eq(pthread_join(F.thread, NULL), 0);
    close(F.lfd);
    close(F.release[0]);
    close(F.release[1]);
    tu_rmtree(F.dir);
}

/* Answer the held requests, once the fake holds one (it may not have read
 * the request yet). */
static void fake_release(void)
{
    double end = tu_now_s() + 5;
    for (;;) {
        pthread_mutex_lock(&F.mu);
        int n = F.nheld;
        pthread_mutex_unlock(&F.mu);
        if (n > 0)
            break;
        ck_assert_msg(tu_now_s() < end, "the fake holds no request to release");
        tu_sleep_s(0.002);
    }
    ck_assert_int_eq(write(F.release[1], "r", 1), 1);
}

static int fake_nseen(void)
{
    pthread_mutex_lock(&F.mu);
    int n = F.nseen;
    pthread_mutex_unlock(&F.mu);
    return n;
}

/* Wait (at most 5 s) until the fake has read n requests. */
static void wait_seen(int n)
{
    double end = tu_now_s() + 5;
    while (fake_nseen() < n) {
        ck_assert_msg(tu_now_s() < end, "the fake read %d requests, not %d", fake_nseen(), n);
        tu_sleep_s(0.002);
    }
}

/* The last request the fake read (it has always read the request whose
 * reply the test has: it reads before it answers; after an interrupted
 * wait, wait_seen first). */
static seen_req last_seen(void)
{
    pthread_mutex_lock(&F.mu);
    ck_assert_int_gt(F.nseen, 0);
    seen_req s = F.seen[F.nseen - 1];
    pthread_mutex_unlock(&F.mu);
    return s;
}

static void assert_last(gpuq_op op, int keys, uint64_t deadline)
{
    seen_req s = last_seen();
    ck_assert_int_eq(s.op, op);
    ck_assert_int_eq(s.deadline_keys, keys);
    ck_assert_uint_eq(s.deadline_ms, deadline);
}

/* A builder normalize (sum) of in[4] into out[4]. */
static gpuq_req *norm_req(const double *in, double *out)
{
    const uint64_t shape[1] = {4};
    gpuq_req *r = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, shape, in, 4 * sizeof(double)), 0);
    ck_assert_int_eq(gpuq_req_set_str(r, "method", "sum"), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, out, 4 * sizeof(double)), 0);
    return r;
}

static bool all_fake(const double *out, size_t n)
{
    uint8_t want[sizeof(double)];
    memset(want, FAKE_BYTE, sizeof want);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&out[i], want, sizeof want) != 0)
            return false;
    return true;
}

/* ---- deadline_ms on the wire ---- */

START_TEST(deadline_on_the_wire_exactly_when_set)
{
    fake_start(0, false);
    gpuq_conn *c = fake_connect();
    const double in[4] = {1, 2, 3, 4};
    double out[4];
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);

    /* not set: no key */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, 4, out), 0);
    assert_last(GPUQ_OP_NORMALIZE, 0, 0);
    ck_assert(all_fake(out, 4));

    /* set: on every compute request, once; never on a control request */
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 250), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, 4, out),
                     GPUQ_E_DEADLINE_EXCEEDED);
    assert_last(GPUQ_OP_NORMALIZE, 1, 250);
    ck_assert_msg(strstr(gpuq_errmsg(c), "deadline_exceeded: "), "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_ping(c), 0);
    assert_last(GPUQ_OP_PING, 0, 0);
    gpuq_req *r = norm_req(in, out);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_DEADLINE_EXCEEDED);
    assert_last(GPUQ_OP_NORMALIZE, 1, 250);
    uint64_t id = 0;
    ck_assert_int_eq(gpuq_submit_req(c, r, &id), 0);
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_DEADLINE_EXCEEDED);
    ck_assert_uint_eq(gpuq_result_id(res), id);
    assert_last(GPUQ_OP_NORMALIZE, 1, 250);
    /* the same builder request, sent again after the deadline went off */
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 0), 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), 0);
    assert_last(GPUQ_OP_NORMALIZE, 0, 0);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 250), 0);
    gpuq_req_free(r);

    /* a builder request's own "deadline_ms" stands, 0 included: one key */
    r = norm_req(in, out);
    ck_assert_int_eq(gpuq_req_set_u64(r, "deadline_ms", 7), 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_DEADLINE_EXCEEDED);
    assert_last(GPUQ_OP_NORMALIZE, 1, 7);
    gpuq_req_free(r);
    r = norm_req(in, out);
    ck_assert_int_eq(gpuq_req_set_u64(r, "deadline_ms", 0), 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), 0);
    assert_last(GPUQ_OP_NORMALIZE, 1, 0);
    gpuq_req_free(r);

    /* the in-tree request struct (gpuqctl's): the connection's unless it
     * has its own, and the caller's struct is left as it came */
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_NORMALIZE;
    q.dtype = GPUQ_DT_F64;
    q.ndim_a = 1;
    q.shape_a[0] = 4;
    gpuq_reply rep;
    ck_assert_int_eq(gpuq_call(c, &q, in, sizeof in, NULL, 0, out, sizeof out, &rep),
                     GPUQ_E_DEADLINE_EXCEEDED);
    assert_last(GPUQ_OP_NORMALIZE, 1, 250);
    ck_assert_uint_eq(q.deadline_ms, 0);
    q.deadline_ms = 9;
    ck_assert_int_eq(gpuq_call(c, &q, in, sizeof in, NULL, 0, out, sizeof out, &rep),
                     GPUQ_E_DEADLINE_EXCEEDED);
    assert_last(GPUQ_OP_NORMALIZE, 1, 9);
    ck_assert_uint_eq(q.deadline_ms, 9);

    /* off again */
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 0), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, 4, out), 0);
    assert_last(GPUQ_OP_NORMALIZE, 0, 0);
    gpuq_result_free(res);
    fake_stop(c);
}
END_TEST

START_TEST(deadline_over_a_day_refused)
{
    fake_start(0, false);
    gpuq_conn *c = fake_connect();
    const double in[4] = {1, 2, 3, 4};
    double out[4];
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 100), 0);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, GPUQ_MAX_DEADLINE_MS + 1), GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(gpuq_errmsg(c), "deadline"), "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_set_deadline_ms(c, UINT64_MAX), GPUQ_E_BAD_ARGUMENT);
    /* refused: the deadline before it stands */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, 4, out),
                     GPUQ_E_DEADLINE_EXCEEDED);
    assert_last(GPUQ_OP_NORMALIZE, 1, 100);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, GPUQ_MAX_DEADLINE_MS), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, 4, out), 0);
    assert_last(GPUQ_OP_NORMALIZE, 1, GPUQ_MAX_DEADLINE_MS);
    /* a builder request's own value over a day: refused before sending */
    int n = fake_nseen();
    gpuq_req *r = norm_req(in, out);
    ck_assert_int_eq(gpuq_req_set_u64(r, "deadline_ms", GPUQ_MAX_DEADLINE_MS + 1), 0);
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_pending(c), 0);
    ck_assert_int_eq(gpuq_ping(c), 0); /* the connection is fine */
    ck_assert_int_eq(fake_nseen(), n + 1);
    assert_last(GPUQ_OP_PING, 0, 0);
    gpuq_result_free(res);
    gpuq_req_free(r);
    fake_stop(c);
}
END_TEST

/* ---- cancel ---- */

START_TEST(cancel_a_queued_request)
{
    fake_start(2, true);
    gpuq_conn *c = fake_connect();
    ck_assert_uint_eq(gpuq_info(c)->limits.max_inflight, 2);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 5000), 0); /* a cancel never carries it */
    const double in[4] = {1, 2, 3, 4};
    double out_a[4], out_b[4];
    gpuq_req *ra = norm_req(in, out_a), *rb = norm_req(in, out_b);
    gpuq_result *res = gpuq_result_new();
    uint64_t a, b, cid, dropped = 99, running = 99;
    /* max_inflight compute requests outstanding: no third, but a cancel */
    ck_assert_int_eq(gpuq_submit_req(c, ra, &a), 0);
    ck_assert_int_eq(gpuq_submit_req(c, rb, &b), 0);
    ck_assert_int_eq(gpuq_submit_req(c, ra, NULL), GPUQ_E_BUSY);
    ck_assert_int_eq(gpuq_submit_cancel(c, a, &cid), 0);
    ck_assert_uint_gt(cid, b);
    ck_assert_int_eq(gpuq_pending(c), 3);
    /* replies in request order: a cancelled, b's result, then the cancel's */
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_CANCELLED);
    ck_assert_uint_eq(gpuq_result_id(res), a);
    ck_assert_int_eq(gpuq_result_status(res), GPUQ_E_CANCELLED);
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), b);
    ck_assert(all_fake(out_b, 4));
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), cid);
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), 0);
    ck_assert_uint_eq(dropped, 1);
    ck_assert_uint_eq(running, 0);
    ck_assert_int_eq(gpuq_result_cancel_counts(res, NULL, NULL), 0);
    ck_assert_int_eq(gpuq_pending(c), 0);
    seen_req s = last_seen();
    ck_assert_int_eq(s.op, GPUQ_OP_CANCEL);
    ck_assert_uint_eq(s.id, cid);
    ck_assert(s.has_request);
    ck_assert_uint_eq(s.request, a);
    ck_assert_int_eq(s.deadline_keys, 0);
    /* an id that matches nothing: not an error, nothing counted */
    ck_assert_int_eq(gpuq_submit_cancel(c, 12345, NULL), 0);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), 0);
    ck_assert_uint_eq(dropped, 0);
    gpuq_result_free(res);
    gpuq_req_free(ra);
    gpuq_req_free(rb);
    fake_stop(c);
}
END_TEST

/* A result holding a reply with info written by fn (req.h's struct). */
static void set_info(gpuq_result *res, void (*fn)(gpuq_mpw *))
{
    gpuq_mpw *w = gpuq_mpw_new();
    ck_assert_ptr_nonnull(w);
    fn(w);
    result_reset(res);
    ck_assert_int_eq(gpuq_mpw_take(w, &res->info, &res->info_len), 0);
    gpuq_mpw_free(w);
}

static void info_both(gpuq_mpw *w)
{
    gpuq_mpw_map(w, 3);
    gpuq_mpw_str(w, "running");
    gpuq_mpw_uint(w, 2);
    gpuq_mpw_str(w, "later");
    gpuq_mpw_array(w, 1);
    gpuq_mpw_str(w, "x");
    gpuq_mpw_str(w, "dropped");
    gpuq_mpw_uint(w, 3);
}

static void info_no_running(gpuq_mpw *w)
{
    gpuq_mpw_map(w, 1);
    gpuq_mpw_str(w, "dropped");
    gpuq_mpw_uint(w, 1);
}

static void info_bad_type(gpuq_mpw *w)
{
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "dropped");
    gpuq_mpw_str(w, "1");
    gpuq_mpw_str(w, "running");
    gpuq_mpw_uint(w, 0);
}

static void info_not_map(gpuq_mpw *w)
{
    gpuq_mpw_array(w, 2);
    gpuq_mpw_uint(w, 1);
    gpuq_mpw_uint(w, 0);
}

/* gpuq_result_cancel_counts reads both counts by name, whatever else the
 * map holds, and refuses a reply without them. */
START_TEST(cancel_counts_decoded)
{
    gpuq_result *res = gpuq_result_new();
    uint64_t d = 0, r = 0;
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &d, &r), GPUQ_E_BAD_ARGUMENT); /* no info */
    set_info(res, info_both);
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &d, &r), 0);
    ck_assert_uint_eq(d, 3);
    ck_assert_uint_eq(r, 2);
    res->status = GPUQ_E_CANCELLED; /* an error reply's info is no cancel's */
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &d, &r), GPUQ_E_BAD_ARGUMENT);
    void (*bad[])(gpuq_mpw *) = {info_no_running, info_bad_type, info_not_map};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        set_info(res, bad[k]);
        d = r = 77;
        ck_assert_int_eq(gpuq_result_cancel_counts(res, &d, &r), GPUQ_E_BAD_ARGUMENT);
        ck_assert_uint_eq(d, 77); /* untouched */
        ck_assert_uint_eq(r, 77);
    }
    gpuq_result_free(res);
}
END_TEST

/* ---- interrupting a wait ---- */

static int alarm_fd = -1;

static void on_alarm(int sig)
{
    (void)sig;
    int e = errno;
    if (write(alarm_fd, "a", 1) < 0) { /* async-signal-safe; nothing to do on failure */
    }
    errno = e;
}

static void drain(int fd)
{
    char b[16];
    ck_assert_int_gt(read(fd, b, sizeof b), 0);
}

/* A thread that writes a byte to fd once the fake has read nseen requests
 * (or, with nseen 0, after delay_s): an interrupt that comes while a call
 * waits for its reply (or sends). */
typedef struct interrupter {
    pthread_t t;
    int fd, nseen;
    double delay_s;
} interrupter;

static void *interrupter_main(void *arg)
{
    interrupter *it = arg;
    if (it->nseen)
        while (fake_nseen() < it->nseen)
            tu_sleep_s(0.002);
    tu_sleep_s(it->delay_s);
    if (write(it->fd, "t", 1) != 1)
        abort();
    return NULL;
}

static void interrupt_later(interrupter *it, int fd, int nseen, double delay_s)
{
    *it = (interrupter){.fd = fd, .nseen = nseen, .delay_s = delay_s};
    ck_assert_int_eq(pthread_create(&it->t, NULL, interrupter_main, it), 0);
}

static void interrupter_join(interrupter *it)
{
    ck_assert_int_eq(pthread_join(it->t, NULL), 0);
}

START_TEST(interrupt_a_wait)
{
    fake_start(0, true);
    gpuq_conn *c = fake_connect();
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, -2), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, p[0]), 0);
    const double in[4] = {1, 2, 3, 4};
    double out[4];
    gpuq_req *r = norm_req(in, out);
    gpuq_result *res = gpuq_result_new();
    uint64_t a;

    /* no reply yet, the fd readable: interrupted, the request outstanding,
     * and so while the fd stays readable */
    ck_assert_int_eq(gpuq_submit_req(c, r, &a), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_INTERRUPTED);
    ck_assert_uint_eq(gpuq_result_id(res), a);
    ck_assert_int_eq(gpuq_result_status(res), GPUQ_E_INTERRUPTED);
    ck_assert_int_eq(gpuq_pending(c), 1);
    ck_assert_msg(strstr(gpuq_errmsg(c), "interrupted"), "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_INTERRUPTED);
    ck_assert_int_eq(gpuq_pending(c), 1);
    /* drained: the next wait reads the reply, in step */
    drain(p[0]);
    fake_release();
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), a);
    ck_assert(all_fake(out, 4));
    ck_assert_int_eq(gpuq_pending(c), 0);

    /* the reply already there and the fd readable: the interrupt wins */
    ck_assert_int_eq(gpuq_submit_req(c, r, &a), 0);
    fake_release();
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    tu_sleep_s(0.1); /* the fake has answered */
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_INTERRUPTED);
    drain(p[0]);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), a);

    /* a signal handler that writes to the fd, while the wait blocks (no
     * SA_RESTART: poll sees EINTR and looks again) */
    alarm_fd = p[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
    ck_assert_int_eq(gpuq_submit_req(c, r, &a), 0);
    struct itimerval it = {.it_value = {0, 150000}};
    double t0 = tu_now_s();
    ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_INTERRUPTED);
    ck_assert_double_ge(tu_now_s() - t0, 0.1);
    ck_assert_uint_eq(gpuq_result_id(res), a);
    drain(p[0]);
    fake_release();
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);

    /* off: a wait blocks for its reply whatever the fd says */
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, -1), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(gpuq_submit_req(c, r, &a), 0);
    fake_release();
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), a);

    gpuq_result_free(res);
    gpuq_req_free(r);
    fake_stop(c);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(interrupt_a_blocking_call)
{
    fake_start(0, true);
    gpuq_conn *c = fake_connect();
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, p[0]), 0);
    const double in[4] = {1, 2, 3, 4};
    double out[4] = {-1, -1, -1, -1};
    gpuq_result *res = gpuq_result_new();
    interrupter it;

    /* a convenience call: returns with its request outstanding, given up:
     * its reply is read later and the caller's buffer is never written */
    interrupt_later(&it, p[1], 1, 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, 4, out),
                     GPUQ_E_INTERRUPTED);
    interrupter_join(&it);
    ck_assert_int_eq(gpuq_pending(c), 1);
    wait_seen(1);
    uint64_t a = last_seen().id;
    ck_assert_int_eq(gpuq_ping(c), GPUQ_E_BUSY); /* a blocking call needs none outstanding */
    drain(p[0]);
    fake_release();
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), a);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq(out[i], -1);

    /* gpuq_call_req: the result names the request, which can be cancelled */
    gpuq_req *r = norm_req(in, out);
    interrupt_later(&it, p[1], 2, 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_INTERRUPTED);
    interrupter_join(&it);
    ck_assert_int_eq(gpuq_result_status(res), GPUQ_E_INTERRUPTED);
    uint64_t b = gpuq_result_id(res);
    wait_seen(2); /* the normalize before, this one */
    ck_assert_uint_eq(b, last_seen().id);
    drain(p[0]);
    uint64_t cid, dropped = 0;
    ck_assert_int_eq(gpuq_submit_cancel(c, b, &cid), 0);
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_CANCELLED);
    ck_assert_uint_eq(gpuq_result_id(res), b);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), cid);
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, NULL), 0);
    ck_assert_uint_eq(dropped, 1);
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq(out[i], -1);
    /* in step: a blocking call works again, results written */
    ck_assert_int_eq(gpuq_ping(c), 0);

    /* the in-tree gpuq_call: its reply names the request */
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_NORMALIZE;
    q.dtype = GPUQ_DT_F64;
    q.ndim_a = 1;
    q.shape_a[0] = 4;
    gpuq_reply rep;
    interrupt_later(&it, p[1], 5, 0);
    ck_assert_int_eq(gpuq_call(c, &q, in, sizeof in, NULL, 0, out, sizeof out, &rep),
                     GPUQ_E_INTERRUPTED);
    interrupter_join(&it);
    wait_seen(5); /* ... a cancel and a ping since */
    ck_assert_uint_eq(rep.id, last_seen().id);
    ck_assert_int_eq(rep.status, GPUQ_E_INTERRUPTED);
    drain(p[0]);
    fake_release();
    ck_assert_int_eq(gpuq_wait(c, &rep), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq(out[i], -1);

    gpuq_req_free(r);
    gpuq_result_free(res);
    fake_stop(c);
    close(p[0]);
    close(p[1]);
}
END_TEST

/* A send polls the interrupt fd too: readable before the first byte, the
 * request is not sent and the connection goes on; readable while a large
 * request is blocked half sent (the fake reads nothing), the send stops and
 * the connection, whose stream now ends mid-frame, is broken. */
START_TEST(interrupt_a_send)
{
    fake_start(0, false);
    gpuq_conn *c = fake_connect();
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, p[0]), 0);
    const double in[4] = {1, 2, 3, 4};
    double out[4];
    gpuq_req *r = norm_req(in, out);
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    uint64_t id = 0;
    ck_assert_int_eq(gpuq_submit_req(c, r, &id), GPUQ_E_INTERRUPTED);
    ck_assert_msg(strstr(gpuq_errmsg(c), "was not sent"), "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_pending(c), 0);
    ck_assert_int_eq(gpuq_ping(c), GPUQ_E_INTERRUPTED); /* a blocking call is a send too */
    drain(p[0]);
    ck_assert_int_eq(fake_nseen(), 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), 0); /* in step */
    assert_last(GPUQ_OP_NORMALIZE, 0, 0);
    fake_stop(c);

    fake_start(0, false);
    F.stall = true;
    c = fake_connect();
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, p[0]), 0);
    enum { BIG = 4 << 20 }; /* elements: 32 MiB, far more than the socket buffers */
    double *big = calloc(BIG, sizeof *big), *bout = malloc(BIG * sizeof *bout);
    ck_assert(big && bout);
    const uint64_t shape[1] = {BIG};
    gpuq_req *rb = gpuq_req_new("normalize");
    gpuq_req_set_input(rb, 0, GPUQ_DT_F64, 1, shape, big, BIG * sizeof *big);
    gpuq_req_set_output(rb, 0, bout, BIG * sizeof *bout);
    interrupter it;
    interrupt_later(&it, p[1], 0, 0.2);
    double t0 = tu_now_s();
    ck_assert_int_eq(gpuq_submit_req(c, rb, NULL), GPUQ_E_INTERRUPTED);
    ck_assert_double_ge(tu_now_s() - t0, 0.15);
    interrupter_join(&it);
    ck_assert_msg(strstr(gpuq_errmsg(c), "cannot go on"), "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_pending(c), 0);
    drain(p[0]);
    ck_assert_int_eq(gpuq_submit_req(c, r, NULL), GPUQ_E_INTERRUPTED); /* broken for good */
    gpuq_req_free(rb);
    free(big);
    free(bout);
    gpuq_req_free(r);
    gpuq_result_free(res);
    fake_stop(c);
    close(p[0]);
    close(p[1]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("conn_cancel");
    TCase *tc = tcase_create("conn_cancel");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, deadline_on_the_wire_exactly_when_set);
    tcase_add_test(tc, deadline_over_a_day_refused);
    tcase_add_test(tc, cancel_a_queued_request);
    tcase_add_test(tc, cancel_counts_decoded);
    tcase_add_test(tc, interrupt_a_wait);
    tcase_add_test(tc, interrupt_a_blocking_call);
    tcase_add_test(tc, interrupt_a_send);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
