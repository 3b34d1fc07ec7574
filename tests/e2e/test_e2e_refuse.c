/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_refuse.c - a refusal a client can read: a connection over
 * --max-sessions gets busy (never "closed"), through libgpuq and gpuqctl,
 * and the daemon serves again once a session is freed; during a shutdown a
 * client sees shutting_down where the server answers it.
 *
 * gpuqd refuses a connection over the limit with a busy reply and closes it,
 * without reading the client's hello. Usually the hello is written before
 * that close. When it is not, the client's write fails (EPIPE) although the
 * reply is already readable: libgpuq must read it. The race is made certain
 * here: this executable defines sendmsg (libgpuq is linked statically, so
 * its sends come here), and while hold_sends is set a send first waits for
 * the server's hang-up on that socket.
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"

#define MAX_SESSIONS 2
#define BUSY_MSG "busy: 2 sessions open (the limit)"

static volatile int hold_sends; /* a send waits for the peer's hang-up first */
static int held_epipe;          /* held sends that failed with EPIPE/ECONNRESET */

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
    if (!real_sendmsg)
        real_sendmsg = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
    if (!real_sendmsg) {
        errno = ENOSYS;
        return -1;
    }
    if (!hold_sends)
        return real_sendmsg(fd, msg, flags);
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    (void)poll(&p, 1, 10000); /* gpuqd writes busy, then closes */
    ssize_t n = real_sendmsg(fd, msg, flags);
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
        held_epipe++;
    return n;
}

/* gpuq_connect to e2e_d as name; *c as gpuq_connect leaves it. */
static int try_connect(const char *name, gpuq_conn **c)
{
    gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                           .client_name = name,
                           .priority = GPUQ_PRIO_NORMAL,
                           .device = -1};
    return gpuq_connect(&o, c);
}

static void refuse_setup(void)
{
    const char *extra[] = {"--max-sessions", "2", NULL};
    e2e_start(extra);
}

/* A connection over the limit: busy with the server's message, whether the
 * hello went out before the server closed (plain) or after (held). */
static void expect_busy(bool held, int round)
{
    gpuq_conn *c = NULL;
    int before = held_epipe;
    hold_sends = held;
    int rc = try_connect("extra", &c);
    hold_sends = 0;
    ck_assert_ptr_nonnull(c);
    ck_assert_msg(rc == GPUQ_E_BUSY, "round %d (%s): %s (%s)", round, held ? "held" : "plain",
                  gpuq_errname(rc), gpuq_errmsg(c));
    ck_assert_str_eq(gpuq_errmsg(c), BUSY_MSG);
    if (held) /* the race was really run: the hello's send failed */
        ck_assert_int_eq(held_epipe, before + 1);
    gpuq_close(c);
}

/* gpuqctl CMD: exit status 1 and exactly the one line of the busy reply. */
static void ctl_expect_busy(const char *cmd)
{
    char err[320];
    snprintf(err, sizeof err, "%s/ctl.err", e2e_d.dir);
    const char *argv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, cmd, NULL};
    int rc = tu_run(argv, NULL, err);
    size_t len = 0;
    char *text = tu_read_file(err, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(rc == 1, "gpuqctl %s: exit %d, stderr '%s'", cmd, rc, text);
    ck_assert_str_eq(text, "gpuqctl: " BUSY_MSG "\n");
    free(text);
}

START_TEST(over_limit_sees_busy)
{
    gpuq_conn *a = e2e_connect("a", GPUQ_PRIO_NORMAL);
    gpuq_conn *b = e2e_connect("b", GPUQ_PRIO_NORMAL);
    for (int i = 0; i < 200; i++)
        expect_busy(i % 2 == 1, i);
    ctl_expect_busy("ping");
    ctl_expect_busy("status");
    /* on the wire: one busy reply (id 0) that the client need not ask for,
     * then the close (told apart from a hang) */
    for (int i = 0; i < 3; i++) {
        int fd = e2e_raw_socket();
        const char *m = e2e_expect_error_then_close(fd, GPUQ_E_BUSY, 0);
        ck_assert_str_eq(m, "2 sessions open (the limit)");
        close(fd);
    }
    /* the two sessions were not disturbed */
    ck_assert_int_eq(gpuq_ping(a), 0);
    ck_assert_int_eq(gpuq_ping(b), 0);
    /* one freed: a new connection gets in (once gpuqd has seen the close;
     * until then it may still be busy, never anything else) */
    gpuq_close(a);
    gpuq_conn *c = NULL;
    int rc = GPUQ_E_BUSY;
    for (int i = 0; i < 200 && rc == GPUQ_E_BUSY; i++) {
        gpuq_close(c);
        c = NULL;
        rc = try_connect("after", &c);
        if (rc == GPUQ_E_BUSY) {
            ck_assert_str_eq(gpuq_errmsg(c), BUSY_MSG);
            usleep(10000);
        }
    }
    ck_assert_msg(rc == 0, "connect after a close: %s", c ? gpuq_errmsg(c) : "?");
    double x[3] = {1, 2, 5}, y[3];
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 3, y), 0);
    ck_assert(y[0] == 0.125 && y[1] == 0.25 && y[2] == 0.625);
    char js[8192];
    ck_assert_int_eq(gpuq_status_json(c, js, sizeof js), 0);
    ck_assert_int_eq(e2e_json_int(js, "sessions"), 2);
    /* full again: still busy, then all closed and the daemon serves */
    expect_busy(true, -1);
    gpuq_close(b);
    gpuq_close(c);
    for (int i = 0; i < 200; i++) {
        gpuq_conn *p = NULL;
        rc = try_connect("probe", &p);
        gpuq_close(p);
        if (rc == 0)
            break;
        ck_assert_int_eq(rc, GPUQ_E_BUSY);
        usleep(10000);
    }
    e2e_assert_serves();
}
END_TEST

/* SIGTERM while a request is accepted but not done (its payload only half
 * sent): gpuqd drains. A session's new request, and the hello of a
 * connection accepted before the signal, are answered shutting_down; a new
 * connection cannot be made; the accepted request is answered; exit 0. */
START_TEST(shutdown_answers_shutting_down)
{
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    e2e_start(NULL); /* three sessions here: no --max-sessions 2 */
    gpuq_conn *b = e2e_connect("b", GPUQ_PRIO_NORMAL);
    static uint8_t hbuf[65536];
    int a = e2e_hello_socket("a", hbuf, sizeof hbuf);
    gpuq_request r = e2e_norm_req(4);
    r.id = 7;
    double x[4] = {1, 1, 1, 5};
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
    e2e_send_frame(a, h, (uint32_t)hl, sizeof x, x, sizeof x / 2);
    free(h);
    int cfd = e2e_raw_socket(); /* accepted before the signal, no hello yet */
    char js[8192];
    for (int i = 0; i < 500; i++) {
        ck_assert_int_eq(gpuq_status_json(b, js, sizeof js), 0);
        if (e2e_json_int(js, "in_flight") == 1 && e2e_json_int(js, "sessions") == 3)
            break;
        usleep(10000);
    }
    ck_assert_int_eq(e2e_json_int(js, "in_flight"), 1);
    ck_assert_int_eq(e2e_json_int(js, "sessions"), 3);
    tu_daemon_kill(&e2e_d, SIGTERM);
    for (int i = 0; i < 500; i++) {
        ck_assert_int_eq(gpuq_status_json(b, js, sizeof js), 0);
        if (!strstr(js, "\"serving\""))
            break;
        usleep(10000);
    }
    ck_assert_msg(strstr(js, "\"shutting_down\"") || strstr(js, "\"draining\""), "%s", js);
    /* b's next request: shutting_down, the connection still usable */
    ck_assert_int_eq(gpuq_ping(b), GPUQ_E_SHUTTING_DOWN);
    ck_assert_str_eq(gpuq_errmsg(b), "shutting_down: gpuqd is shutting down");
    ck_assert_int_eq(gpuq_status_json(b, js, sizeof js), 0);
    /* c's hello: shutting_down */
    gpuq_request hello;
    gpuq_request_init(&hello);
    hello.op = GPUQ_OP_HELLO;
    hello.id = 1;
    hello.version = GPUQ_PROTO_VERSION;
    e2e_send_req(cfd, &hello, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(cfd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_SHUTTING_DOWN);
    ck_assert_uint_eq(rep.id, 1);
    /* no new connection: the listener is closed and the socket file gone */
    gpuq_conn *late = NULL;
    ck_assert_int_eq(try_connect("late", &late), GPUQ_E_IO);
    ck_assert_msg(strstr(gpuq_errmsg(late), "cannot connect") != NULL, "%s", gpuq_errmsg(late));
    gpuq_close(late);
    /* the accepted request is answered once its payload is complete */
    const uint8_t *rest = (const uint8_t *)x + sizeof x / 2;
    ck_assert_int_eq(send(a, rest, sizeof x / 2, MSG_NOSIGNAL), (ssize_t)(sizeof x / 2));
    ck_assert_int_eq(e2e_read_reply(a, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.id, 7);
    /* every request answered: the server closes every connection itself
     * (checked before its exit would close them anyway) */
    e2e_expect_closed(a, 5);
    e2e_expect_closed(cfd, 5);
    ck_assert_int_eq(tu_daemon_wait_exit(&e2e_d, 30), 0);
    close(a);
    close(cfd);
    gpuq_close(b);
    refuse_setup(); /* for the fixture's teardown */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_refuse");
    TCase *tc = tcase_create("refuse");
    tcase_add_checked_fixture(tc, refuse_setup, e2e_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, over_limit_sees_busy);
    tcase_add_test(tc, shutdown_answers_shutting_down);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
