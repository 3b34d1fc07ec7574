/* SPDX-License-Identifier: Apache-2.0 */
/* test_request.c - the request module (server/request/request.c) on a real server
 * with the fake backend (tests/fuzz/fake_backend.h), driven one loop turn at
 * a time from this thread: clients are plain blocking sockets whose small
 * frames fit the socket buffer, the loop runs with UV_RUN_NOWAIT.
 *
 * - A request waiting for staging is retried on the loop turn after the
 *   staging was released, never from inside request_free, and then served.
 * - The in-flight counts go back to zero when a client disconnects in the
 *   middle of a request: while its payload is read, and while its job is in
 *   the backend (then only once the job completed).
 * Teardown: shutdown, no session, request, staging byte, backend session or
 * host byte left, server_run's uv_loop_close succeeds.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "fake_backend.h"
#include "frame.h"
#include "header.h"
#include "log.h"
#include "request.h"
#include "server.h"
#include "session.h"
#include "testutil.h"

static char g_dir[64], g_sock[100];
static uv_loop_t g_loop;
static server g_srv;
static backend *g_b;
static fake_stats g_fst;
static config g_cfg;

static void pump(int n)
{
    for (int i = 0; i < n; i++)
        (void)uv_run(&g_loop, UV_RUN_NOWAIT);
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    log_set_level(0); /* quiet */
    tu_tmpdir(g_dir, sizeof g_dir);
    snprintf(g_sock, sizeof g_sock, "%s/s", g_dir);
    char *argv[] = {"test_request", NULL};
    ck_assert_int_eq(config_load(&g_cfg, 1, argv), 0);
    snprintf(g_cfg.socket, sizeof g_cfg.socket, "%s", g_sock);
    snprintf(g_cfg.device, sizeof g_cfg.device, "cpu");
    g_cfg.socket_mode = 0600;
    g_cfg.drain_timeout_s = 0;
    g_cfg.hello_timeout_s = g_cfg.frame_timeout_s = g_cfg.idle_timeout_s = 0;
    g_cfg.staging_release_s = 86400;
    g_cfg.staging_headroom = 0;
    g_cfg.lim.total_staging = 8192;
    g_cfg.lim.session_staging = 8192;
    g_cfg.lim.max_inflight = 4;
    memset(&g_fst, 0, sizeof g_fst);
    ck_assert_int_eq(uv_loop_init(&g_loop), 0);
    g_b = fake_backend_create(&g_loop, request_complete, &g_fst);
    ck_assert_ptr_nonnull(g_b);
    ck_assert_int_eq(server_init_with_backend(&g_srv, &g_loop, &g_cfg, g_b), 0);
    ck_assert_int_eq(uv_signal_stop(&g_srv.sigint), 0);
    ck_assert_int_eq(uv_signal_stop(&g_srv.sigterm), 0);
    ck_assert_int_eq(uv_signal_stop(&g_srv.sighup), 0);
}

static void teardown(void)
{
    server_shutdown(&g_srv, 0);
    for (int i = 0; i < 200 && !(g_srv.finishing && !g_srv.sessions); i++) {
        fake_backend_finish_all(g_b, 0);
        pump(1);
    }
    ck_assert_msg(g_srv.finishing, "the server did not finish draining");
    ck_assert_ptr_null(g_srv.sessions);
    ck_assert_uint_eq(g_srv.live, 0);
    ck_assert_uint_eq(g_srv.inflight, 0);
    ck_assert_int_eq(server_run(&g_srv), 0); /* asserts uv_loop_close() == 0 */
    ck_assert(g_fst.destroyed && g_fst.closed);
    ck_assert_uint_eq(g_fst.host_bytes, 0);
    ck_assert_int_eq(g_fst.sessions, 0);
    ck_assert_uint_eq(g_fst.submitted, g_fst.completed);
    tu_rmtree(g_dir);
}

/* A connected client; the server's session for it (the newest). */
static int client_connect(session **out)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", g_sock);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    session *before = g_srv.sessions;
    for (int i = 0; i < 100 && g_srv.sessions == before; i++)
        pump(1);
    ck_assert_ptr_ne(g_srv.sessions, before);
    *out = g_srv.sessions;
    return fd;
}

static void write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        ck_assert_msg(w > 0, "write: %s", strerror(errno));
        b += w;
        n -= (size_t)w;
    }
}

/* The prefix and header of r with payload_len plen. */
static void send_head(int fd, const gpuq_request *r, uint64_t plen)
{
    uint8_t *hdr;
    size_t hlen;
    ck_assert_int_eq(gpuq_request_encode(r, &hdr, &hlen), 0);
    gpuq_prefix pre = {GPUQ_PROTO_VERSION, GPUQ_KIND_REQUEST, 0, (uint32_t)hlen, plen};
    uint8_t pbuf[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&pre, pbuf);
    write_all(fd, pbuf, sizeof pbuf);
    write_all(fd, hdr, hlen);
    free(hdr);
}

static void send_hello(int fd)
{
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_HELLO;
    r.id = 1;
    r.version = GPUQ_PROTO_VERSION;
    snprintf(r.client, sizeof r.client, "test_request");
    send_head(fd, &r, 0);
}

/* normalize of rows x 4 float64 (payload rows * 32 bytes). */
static void normalize_req(gpuq_request *r, uint64_t id, uint64_t rows)
{
    gpuq_request_init(r);
    r->op = GPUQ_OP_NORMALIZE;
    r->id = id;
    r->dtype = GPUQ_DT_F64;
    r->ndim_a = 2;
    r->shape_a[0] = rows;
    r->shape_a[1] = 4;
}

/* Read one reply frame (pumping the loop while it is not all there); its
 * payload is checked for length and dropped. */
static void read_reply(int fd, gpuq_reply *rep, uint64_t want_payload)
{
    static uint8_t buf[1 << 16];
    size_t have = 0, need = GPUQ_PREFIX_SIZE;
    gpuq_prefix pre;
    bool got_prefix = false;
    for (int i = 0; i < 2000; i++) {
        ssize_t n = recv(fd, buf + have, need - have, MSG_DONTWAIT);
        if (n > 0)
            have += (size_t)n;
        else
            ck_assert_msg(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
                          "the server closed the connection");
        if (have == need && !got_prefix) {
            ck_assert_int_eq(gpuq_prefix_decode(buf, have, &pre), 0);
            ck_assert_uint_eq(pre.payload_len, want_payload);
            need += pre.header_len + pre.payload_len;
            ck_assert_uint_le(need, sizeof buf);
            got_prefix = true;
        }
        if (have == need && got_prefix) {
            char msg[160];
            ck_assert_int_eq(
                gpuq_reply_decode(buf + GPUQ_PREFIX_SIZE, pre.header_len, rep, msg, sizeof msg), 0);
            return;
        }
        if (n <= 0)
            pump(1);
    }
    ck_abort_msg("no reply (a hang)");
}

static void hello(int fd)
{
    send_hello(fd);
    gpuq_reply rep;
    read_reply(fd, &rep, 0);
    ck_assert_int_eq(rep.status, 0);
}

/* A session waiting for staging gets it on the loop turn after another
 * request's slot was freed, not inside request_free (which must never
 * submit or reserve: it runs inside write callbacks and closes). */
START_TEST(test_retry_after_release_is_deferred)
{
    session *sa, *sb;
    int fa = client_connect(&sa);
    int fb = client_connect(&sb);
    hello(fa);
    hello(fb);
    /* A request of session A holds all the staging there is. */
    request *hold = request_new(sa);
    ck_assert_ptr_nonnull(hold);
    ck_assert_int_eq(staging_reserve(&g_srv.st, 8192, &sa->staging_used, UINT64_MAX, &hold->slot),
                     0);
    /* B's normalize (4096 bytes of staging) must wait. */
    gpuq_request r;
    normalize_req(&r, 7, 32);
    uint8_t payload[32 * 4 * 8];
    for (size_t i = 0; i < sizeof payload / 8; i++)
        ((double *)payload)[i] = (double)i - 3.5;
    send_head(fb, &r, sizeof payload);
    write_all(fb, payload, sizeof payload);
    for (int i = 0; i < 50 && !session_waiting(sb); i++)
        pump(1);
    ck_assert_msg(session_waiting(sb), "B does not wait for staging");
    ck_assert_uint_eq(sb->inflight, 1);
    ck_assert(!g_srv.retry_pending);

    request_free(hold);
    /* Released, and only scheduled: B still waits, nothing was reserved. */
    ck_assert_uint_eq(g_srv.st.in_use, 0);
    ck_assert_msg(session_waiting(sb), "request_free retried B itself");
    ck_assert(g_srv.retry_pending);
    ck_assert_uint_eq(g_fst.submitted, 0);

    pump(1); /* the retry turn */
    ck_assert_msg(!session_waiting(sb), "B still waits after the retry turn");
    ck_assert(!g_srv.retry_pending);
    ck_assert_uint_eq(g_srv.st.in_use, 4096);
    for (int i = 0; i < 50 && fake_backend_queued(g_b) == 0; i++)
        pump(1);
    ck_assert_uint_eq(fake_backend_queued(g_b), 1);
    ck_assert_int_eq(fake_backend_finish(g_b, 0, 0), 0);
    gpuq_reply rep;
    read_reply(fb, &rep, sizeof payload);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.id, 7);
    ck_assert_uint_eq(g_srv.inflight, 0);
    for (int i = 0; i < 50 && g_srv.st.in_use; i++)
        pump(1);
    ck_assert_uint_eq(g_srv.st.in_use, 0);
    close(fa);
    close(fb);
}
END_TEST

/* Wait until nothing of any session is left. */
static void pump_until_no_session(void)
{
    for (int i = 0; i < 200 && g_srv.sessions; i++)
        pump(1);
    ck_assert_ptr_null(g_srv.sessions);
}

/* Disconnect while the payload is half read: the request is dropped at
 * once, in-flight counts and staging back to zero. */
START_TEST(test_disconnect_mid_payload)
{
    session *s;
    int fd = client_connect(&s);
    hello(fd);
    gpuq_request r;
    normalize_req(&r, 9, 32);
    uint8_t half[512];
    memset(half, 0, sizeof half);
    send_head(fd, &r, 1024);
    write_all(fd, half, sizeof half);
    for (int i = 0; i < 50 && s->have < sizeof half; i++)
        pump(1);
    ck_assert_uint_eq(s->inflight, 1);
    ck_assert_uint_eq(g_srv.inflight, 1);
    ck_assert_uint_eq(g_srv.live, 1);
    ck_assert_uint_gt(g_srv.st.in_use, 0);
    close(fd);
    pump_until_no_session();
    ck_assert_uint_eq(g_srv.inflight, 0);
    ck_assert_uint_eq(g_srv.live, 0);
    ck_assert_uint_eq(g_srv.st.in_use, 0);
    ck_assert_uint_eq(g_fst.submitted, 0);
}
END_TEST

/* Disconnect while the job is in the backend: the request lives (and
 * counts) until its completion, then is dropped unwritten. */
START_TEST(test_disconnect_in_backend)
{
    session *s;
    int fd = client_connect(&s);
    hello(fd);
    gpuq_request r;
    normalize_req(&r, 11, 32);
    uint8_t payload[1024];
    memset(payload, 0, sizeof payload);
    payload[8] = 0x40; /* not all zero */
    send_head(fd, &r, sizeof payload);
    write_all(fd, payload, sizeof payload);
    for (int i = 0; i < 50 && fake_backend_queued(g_b) == 0; i++)
        pump(1);
    ck_assert_uint_eq(fake_backend_queued(g_b), 1);
    close(fd);
    for (int i = 0; i < 20; i++)
        pump(1);
    /* closed: the request no longer counts in flight (abandoned: its job
     * told to stop), but the job holds the request, its staging and the
     * session until it completes */
    ck_assert_ptr_nonnull(g_srv.sessions);
    ck_assert_uint_eq(g_srv.nsessions, 0);
    ck_assert_uint_eq(g_srv.inflight, 0);
    ck_assert_uint_eq(g_srv.live, 1);
    ck_assert_uint_gt(g_srv.st.in_use, 0);
    ck_assert_int_eq(fake_backend_finish(g_b, 0, 0), 0);
    pump_until_no_session();
    ck_assert_uint_eq(g_srv.inflight, 0);
    ck_assert_uint_eq(g_srv.live, 0);
    ck_assert_uint_eq(g_srv.st.in_use, 0);
    ck_assert_uint_eq(g_fst.completed, 1);
}
END_TEST

static Suite *request_suite(void)
{
    Suite *su = suite_create("request");
    TCase *tc = tcase_create("life");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_retry_after_release_is_deferred);
    tcase_add_test(tc, test_disconnect_mid_payload);
    tcase_add_test(tc, test_disconnect_in_backend);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(request_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
