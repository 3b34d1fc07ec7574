/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_systemd.c - gpuqd under the systemd protocols, without systemd
 * as PID 1: socket activation through systemd-socket-activate, readiness
 * and watchdog through a NOTIFY_SOCKET the test binds, and the errors for a
 * passed fd that is not a listening Unix stream socket. CPU backend only.
 *
 * Every child gets PR_SET_PDEATHSIG(SIGKILL): a failed assertion ends the
 * test process, and with it any gpuqd it started. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuq_internal.h"
#include "sdnotify.h"
#include "testutil.h"

#ifndef GPUQD_PATH
#error "GPUQD_PATH is needed"
#endif

/* One test's temp directory and gpuqd (the teardown kills what is left). */
static char t_dir[256];
static char t_sock[300], t_log[300], t_notify[300];
static pid_t t_pid;

static void setup(void)
{
    tu_tmpdir(t_dir, sizeof t_dir);
    snprintf(t_sock, sizeof t_sock, "%s/s.sock", t_dir);
    snprintf(t_log, sizeof t_log, "%s/gpuqd.log", t_dir);
    snprintf(t_notify, sizeof t_notify, "%s/notify", t_dir);
    t_pid = 0;
}

static void teardown(void)
{
    if (t_pid > 0) {
        kill(t_pid, SIGKILL);
        waitpid(t_pid, NULL, 0);
        t_pid = 0;
    }
    tu_rmtree(t_dir);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The log of the current gpuqd, NUL-terminated (static buffer). */
static const char *log_text(void)
{
    static char buf[65536];
    buf[0] = '\0';
    FILE *f = fopen(t_log, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* Wait until the log contains needle; 1 when it does before the deadline. */
static int wait_log(const char *needle, int timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    do {
        if (strstr(log_text(), needle))
            return 1;
        if (t_pid > 0 && waitpid(t_pid, NULL, WNOHANG) == t_pid) {
            t_pid = 0;
            return strstr(log_text(), needle) != NULL;
        }
        usleep(10000);
    } while (now_ms() < end);
    return 0;
}

/* Wait for t_pid to exit; returns its exit status, 128+signal, or -1 when
 * it is still running at the deadline. */
static int wait_exit(int timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(t_pid, &st, WNOHANG);
        if (r == t_pid) {
            t_pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        ck_assert_msg(r == 0, "waitpid: %s", strerror(errno));
        if (now_ms() >= end)
            return -1;
        usleep(10000);
    }
}

/* gpuqd under ASan/UBSan: a report in its log fails the test even when the
 * exit status is the expected one. */
static void assert_no_sanitizer_report(void)
{
    ck_assert_msg(!strstr(log_text(), "Sanitizer") && !strstr(log_text(), "runtime error:"),
                  "sanitizer report in the gpuqd log:\n%s", log_text());
}

/* In a child: output to t_log, die with the test process. */
static void child_common(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(t_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
}

/* sa = AF_UNIX dir/name (name may be NULL); 0, or -1 when too long. */
static int unix_addr(struct sockaddr_un *sa, const char *dir, const char *name)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    char path[600];
    int n = snprintf(path, sizeof path, "%s%s%s", dir, name ? "/" : "", name ? name : "");
    if (n < 0 || (size_t)n >= sizeof sa->sun_path)
        return -1;
    memcpy(sa->sun_path, path, (size_t)n + 1);
    return 0;
}

static int can_connect(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa;
    ck_assert_int_eq(unix_addr(&sa, path, NULL), 0);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

static gpuq_conn *connect_to(const char *path)
{
    gpuq_connect_opts o = {.socket_path = path,
                           .client_name = "systemd-test",
                           .priority = GPUQ_PRIO_NORMAL,
                           .device = -1};
    gpuq_conn *c = NULL;
    int rc = gpuq_connect(&o, &c);
    ck_assert_msg(rc == 0, "connect: %s; gpuqd log:\n%s", c ? gpuq_errmsg(c) : gpuq_strerror(rc),
                  log_text());
    return c;
}

/* A row-wise l2 normalize through c, checked against the exact answer. */
static void check_normalize(gpuq_conn *c)
{
    const double x[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
    double y[2][4];
    int rc = gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, false, x, 2, 4, y);
    ck_assert_msg(rc == 0, "normalize: %s", gpuq_errmsg(c));
    for (int r = 0; r < 2; r++) {
        double n = 0;
        for (int j = 0; j < 4; j++)
            n += x[r][j] * x[r][j];
        for (int j = 0; j < 4; j++)
            ck_assert_double_eq_tol(y[r][j], x[r][j] / sqrt(n), 1e-15);
    }
}

/* (a) systemd-socket-activate binds the socket, and on the first connection
 * execs gpuqd in place (same pid) with LISTEN_FDS=1 and the socket as fd 3. */
START_TEST(socket_activation)
{
#ifndef SYSTEMD_SOCKET_ACTIVATE
    ck_abort_msg(
        "systemd-socket-activate was not found when configuring (apt-get install systemd)");
#else
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_common();
        /* --socket names the same path: gpuqd must use the passed fd, not
         * bind (the path would be taken, and must not be unlinked). */
        execl(SYSTEMD_SOCKET_ACTIVATE, SYSTEMD_SOCKET_ACTIVATE, "-l", t_sock, GPUQD_PATH,
              "--device", "cpu", "--socket", t_sock, "--log-level", "debug", (char *)NULL);
        _exit(127);
    }
    t_pid = pid;
    /* Its "Listening on PATH as 3." comes after bind and listen. */
    ck_assert_msg(wait_log("Listening on", 30000), "systemd-socket-activate did not listen:\n%s",
                  log_text());
    ck_assert_ptr_eq(strstr(log_text(), "<6>gpuqd"), NULL); /* waits for a connection */

    gpuq_conn *c = connect_to(t_sock);
    ck_assert_str_eq(gpuq_info(c)->backend, "cpu");
    check_normalize(c);
    gpuq_close(c);

    char want[400];
    snprintf(want, sizeof want, "using the socket passed by systemd: fd 3, %s\n", t_sock);
    ck_assert_msg(strstr(log_text(), want), "no '%s' in the log:\n%s", want, log_text());
    ck_assert_msg(!strstr(log_text(), "listening on"), "gpuqd bound a socket itself:\n%s",
                  log_text());

    kill(t_pid, SIGTERM);
    int rc = wait_exit(30000);
    ck_assert_msg(rc == 0, "exit %d; log:\n%s", rc, log_text());
    assert_no_sanitizer_report();
    ck_assert_msg(strstr(log_text(), "draining: 0 requests in flight"), "%s", log_text());
    /* The socket is systemd's: gpuqd leaves the file alone. */
    ck_assert_int_eq(access(t_sock, F_OK), 0);
#endif
}
END_TEST

/* LISTEN_FDS for another process (LISTEN_PID not ours) is not for gpuqd: it
 * binds its own socket, and fd 3 (a file here) is left alone. */
START_TEST(listen_pid_other_binds_itself)
{
    char file[300];
    snprintf(file, sizeof file, "%s/not-a-socket", t_dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_common();
        int fd = open(file, O_RDWR | O_CREAT, 0600);
        if (fd < 0 || dup2(fd, 3) < 0)
            _exit(125);
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_PID", "1", 1);
        execl(GPUQD_PATH, GPUQD_PATH, "--device", "cpu", "--socket", t_sock, "--log-level", "debug",
              (char *)NULL);
        _exit(127);
    }
    t_pid = pid;
    char want[400];
    snprintf(want, sizeof want, "listening on %s\n", t_sock);
    ck_assert_msg(wait_log(want, 30000), "gpuqd did not bind %s:\n%s", t_sock, log_text());
    gpuq_conn *c = connect_to(t_sock);
    check_normalize(c);
    gpuq_close(c);
    ck_assert_ptr_eq(strstr(log_text(), "passed by systemd"), NULL);
    kill(t_pid, SIGTERM);
    ck_assert_int_eq(wait_exit(30000), 0);
    assert_no_sanitizer_report();
    ck_assert_int_ne(access(t_sock, F_OK), 0); /* its own socket: removed */
}
END_TEST

/* A datagram socket at t_notify, as systemd's notification socket. */
static int notify_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa;
    ck_assert_int_eq(unix_addr(&sa, t_notify, NULL), 0);
    ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind: %s", strerror(errno));
    return fd;
}

/* One datagram into buf (NUL-terminated); 0 on timeout. */
static int recv_msg(int fd, char *buf, size_t cap, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        ck_assert_int_ge(r, 0);
        if (r == 0)
            return 0;
        ssize_t n = recv(fd, buf, cap - 1, 0);
        ck_assert_int_gt(n, 0);
        buf[n] = '\0';
        return 1;
    }
}

/* Start gpuqd with NOTIFY_SOCKET=t_notify and WATCHDOG_USEC=200000;
 * WATCHDOG_PID is the child's own pid, or watchdog_pid when non-zero. */
static void start_notified(pid_t watchdog_pid)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_common();
        char wpid[32];
        snprintf(wpid, sizeof wpid, "%d", (int)(watchdog_pid ? watchdog_pid : getpid()));
        setenv("NOTIFY_SOCKET", t_notify, 1);
        setenv("WATCHDOG_USEC", "200000", 1);
        setenv("WATCHDOG_PID", wpid, 1);
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        execl(GPUQD_PATH, GPUQD_PATH, "--device", "cpu", "--socket", t_sock, "--log-level", "debug",
              (char *)NULL);
        _exit(127);
    }
    t_pid = pid;
}

/* Wait for a datagram starting with prefix; counts WATCHDOG=1 seen on the
 * way into *pings (may be NULL). Returns 1 and the message in buf. */
static int wait_msg(int fd, const char *prefix, char *buf, size_t cap, int timeout_ms, int *pings)
{
    int64_t end = now_ms() + timeout_ms;
    while (recv_msg(fd, buf, cap, end)) {
        if (pings && !strcmp(buf, "WATCHDOG=1"))
            (*pings)++;
        if (!strncmp(buf, prefix, strlen(prefix)))
            return 1;
    }
    return 0;
}

/* (b) READY=1 once the socket accepts, WATCHDOG=1 at half the interval, a
 * STATUS= refresh, and STOPPING=1 on SIGTERM before exit 0. */
START_TEST(readiness_watchdog_stopping)
{
    int nfd = notify_socket();
    start_notified(0);
    char msg[512];
    int pings = 0;
    ck_assert_msg(wait_msg(nfd, "READY=1", msg, sizeof msg, 30000, &pings), "no READY=1; log:\n%s",
                  log_text());
    ck_assert_str_eq(msg, "READY=1\nSTATUS=serving: backend cpu, 0 sessions, 0 in flight");
    ck_assert(can_connect(t_sock)); /* ready means connections are accepted */
    ck_assert_msg(strstr(log_text(), "WATCHDOG=1 every 100 ms"), "%s", log_text());

    /* 200 ms watchdog: a ping every 100 ms; 3 well within 5 s. */
    int64_t end = now_ms() + 5000;
    while (pings < 3 && recv_msg(nfd, msg, sizeof msg, end))
        if (!strcmp(msg, "WATCHDOG=1"))
            pings++;
    ck_assert_msg(pings >= 3, "%d WATCHDOG=1 in 5 s", pings);

    /* The STATUS= refresh (every SDNOTIFY_REFRESH_MS, 5 s) shows a session. */
    gpuq_conn *c = connect_to(t_sock);
    const char *one = "STATUS=serving: backend cpu, 1 sessions, 0 in flight";
    int seen = 0;
    end = now_ms() + 3 * SDNOTIFY_REFRESH_MS;
    while (!seen && recv_msg(nfd, msg, sizeof msg, end))
        seen = !strcmp(msg, one);
    ck_assert_msg(seen, "no '%s' within %d ms", one, 3 * SDNOTIFY_REFRESH_MS);
    check_normalize(c);

    kill(t_pid, SIGTERM);
    ck_assert_msg(wait_msg(nfd, "STOPPING=1", msg, sizeof msg, 30000, NULL),
                  "no STOPPING=1; log:\n%s", log_text());
    ck_assert_str_eq(msg, "STOPPING=1\nSTATUS=draining: 0 in flight");
    gpuq_close(c);
    int rc = wait_exit(30000);
    ck_assert_msg(rc == 0, "exit %d; log:\n%s", rc, log_text());
    assert_no_sanitizer_report();
    /* Nothing but pings after STOPPING=1: it is sent once. */
    while (recv_msg(nfd, msg, sizeof msg, now_ms() + 1))
        ck_assert_msg(!strcmp(msg, "WATCHDOG=1") || !strncmp(msg, "STATUS=", 7),
                      "after STOPPING=1: '%s'", msg);
    close(nfd);
}
END_TEST

/* WATCHDOG_PID names another process: the watchdog is not gpuqd's, so no
 * pings (readiness still goes out). */
START_TEST(watchdog_other_pid)
{
    int nfd = notify_socket();
    start_notified(1);
    char msg[512];
    int pings = 0;
    ck_assert_msg(wait_msg(nfd, "READY=1", msg, sizeof msg, 30000, &pings), "no READY=1:\n%s",
                  log_text());
    /* Ten watchdog intervals with nothing but silence. */
    int64_t end = now_ms() + 1000;
    while (recv_msg(nfd, msg, sizeof msg, end))
        ck_assert_msg(strcmp(msg, "WATCHDOG=1") != 0, "WATCHDOG=1 with WATCHDOG_PID=1");
    ck_assert_int_eq(pings, 0);
    ck_assert_ptr_eq(strstr(log_text(), "systemd watchdog"), NULL);
    kill(t_pid, SIGTERM);
    ck_assert_int_eq(wait_exit(30000), 0);
    assert_no_sanitizer_report();
    close(nfd);
}
END_TEST

/* (c) What systemd could pass but gpuqd cannot serve on. */
enum bad_fd { BAD_FILE, BAD_UNIX_DGRAM, BAD_UNIX_NOT_LISTENING, BAD_UDP, BAD_TWO_FDS, BAD_COUNT };
static const char *const bad_fd_names[BAD_COUNT] = {
    "regular file", "unix dgram", "unix stream, not listening", "udp", "two listening sockets"};

/* A listening Unix stream socket at dir/name. */
static int listening_unix(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa;
    if (fd < 0 || unix_addr(&sa, t_dir, name) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 8) < 0)
        return -1;
    return fd;
}

/* In the child: put the bad fd(s) at 3 (and 4); returns LISTEN_FDS. */
static int make_bad_fds(enum bad_fd kind)
{
    int fd = -1, fd2 = -1;
    switch (kind) {
    case BAD_FILE: {
        char file[300];
        snprintf(file, sizeof file, "%s/not-a-socket", t_dir);
        fd = open(file, O_RDWR | O_CREAT, 0600);
        break;
    }
    case BAD_UNIX_DGRAM: {
        fd = socket(AF_UNIX, SOCK_DGRAM, 0);
        struct sockaddr_un sa;
        if (fd >= 0 &&
            (unix_addr(&sa, t_dir, "dgram") < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0))
            fd = -1;
        break;
    }
    case BAD_UNIX_NOT_LISTENING:
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        break;
    case BAD_UDP: {
        fd = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof sin) < 0)
            fd = -1;
        break;
    }
    case BAD_TWO_FDS:
        fd = listening_unix("one.sock");
        fd2 = listening_unix("two.sock");
        if (fd2 < 0 || dup2(fd2, 4) < 0)
            _exit(125);
        break;
    default:
        _exit(125);
    }
    if (fd < 0 || dup2(fd, 3) < 0)
        _exit(125);
    return kind == BAD_TWO_FDS ? 2 : 1;
}

START_TEST(bad_passed_fd)
{
    enum bad_fd kind = (enum bad_fd)_i;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child_common();
        int n = make_bad_fds(kind);
        char nfds[8], lpid[32];
        snprintf(nfds, sizeof nfds, "%d", n);
        snprintf(lpid, sizeof lpid, "%d", (int)getpid()); /* exec keeps the pid */
        setenv("LISTEN_FDS", nfds, 1);
        setenv("LISTEN_PID", lpid, 1);
        execl(GPUQD_PATH, GPUQD_PATH, "--device", "cpu", "--socket", t_sock, (char *)NULL);
        _exit(127);
    }
    t_pid = pid;
    int rc = wait_exit(30000);
    ck_assert_msg(rc == 1, "%s: exit %d, want 1; log:\n%s", bad_fd_names[kind], rc, log_text());
    assert_no_sanitizer_report();
    const char *want = kind == BAD_TWO_FDS
                           ? "<3>gpuqd: systemd passed 2 sockets; gpuqd expects exactly one"
                           : "<3>gpuqd: fd 3 passed by systemd is not a listening Unix stream "
                             "socket";
    ck_assert_msg(strstr(log_text(), want), "%s: no '%s' in the log:\n%s", bad_fd_names[kind], want,
                  log_text());
    /* No fallback to a socket of its own. */
    ck_assert_int_ne(access(t_sock, F_OK), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_systemd");
    TCase *tc = tcase_create("activation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, socket_activation);
    tcase_add_test(tc, listen_pid_other_binds_itself);
    tcase_add_loop_test(tc, bad_passed_fd, 0, BAD_COUNT);
    suite_add_tcase(s, tc);
    tc = tcase_create("notify");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, readiness_watchdog_stopping);
    tcase_add_test(tc, watchdog_other_pid);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
