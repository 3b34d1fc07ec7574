/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_socket.c - finding gpuqd's socket, and who may use it.
 *
 * Client side (libgpuq and gpuqctl, GPUQ_SOCKET unset, XDG_RUNTIME_DIR a
 * directory with no gpuqd): the connect falls through to the system path
 * (here a temp dir standing for /run/gpuq through the test hook
 * GPUQ_TEST_SYSTEM_SOCKET_DIR, proto/socket_path.h); when nothing answers,
 * the message names every path with its diagnosis (missing directory,
 * missing socket, stale socket, permission denied) and gpuqctl exits 3,
 * while a gpuqd that answers and refuses is exit 1.
 *
 * Daemon side: --socket-group gives the socket and the directory gpuqd
 * makes for it (mode 0750) to a group; a member (a child that drops to
 * nobody with the group as a supplementary group) connects, a non-member is
 * refused with "permission denied"; an unknown group is a config error; a
 * reload that changes it warns that it needs a restart. The parts that
 * drop privileges need root (CI runs as root); without root the EACCES
 * diagnosis is made with a directory of mode 000 instead.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"

#define HINT "is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`"
#define STALE "stale socket (no gpuqd listens; remove it or restart gpuqd)"
#define DENIED                                                                                     \
    "permission denied: join group gpuq (`sudo usermod -aG gpuq $USER`, then log in again)"

static char tdir[128]; /* mode 0755: nobody may pass through it */
static char xdg[160];  /* $XDG_RUNTIME_DIR: exists, no gpuq/ in it */
static char sys[160];  /* stands for /run/gpuq (GPUQ_TEST_SYSTEM_SOCKET_DIR) */
static char syssock[200];
static tu_daemon d; /* started here, with the environment's socket */

static void setup(void)
{
    tu_tmpdir(tdir, sizeof tdir);
    ck_assert_int_eq(chmod(tdir, 0755), 0);
    snprintf(xdg, sizeof xdg, "%s/xdg", tdir);
    snprintf(sys, sizeof sys, "%s/sys", tdir);
    snprintf(syssock, sizeof syssock, "%s/gpuqd.sock", sys);
    ck_assert_int_eq(mkdir(xdg, 0700), 0);
    unsetenv("GPUQ_SOCKET");
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    setenv("GPUQ_TEST_SYSTEM_SOCKET_DIR", sys, 1);
    memset(&d, 0, sizeof d);
}

static void teardown(void)
{
    if (d.pid > 0)
        ck_assert_int_eq(tu_daemon_stop(&d), 0); /* removes d.dir */
    chmod(sys, 0755);
    tu_rmtree(tdir);
}

static int can_connect(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* Start gpuqd (CPU) with this process's environment and extra flags, and
 * wait for wait_path to accept; no --socket unless extra gives one, so the
 * daemon resolves its path as it would for a user. d.dir holds its log. */
static void start_daemon(const char *const *extra, const char *wait_path)
{
    tu_tmpdir(d.dir, sizeof d.dir);
    snprintf(d.log, sizeof d.log, "%s/gpuqd.log", d.dir);
    snprintf(d.socket, sizeof d.socket, "%s", wait_path);
    const char *argv[32] = {GPUQD_PATH, "--device", "cpu", "--log-level", "debug"};
    size_t n = 5;
    for (size_t i = 0; extra && extra[i] && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(d.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    d.pid = pid;
    double deadline = tu_now_s() + 60;
    while (!can_connect(wait_path)) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            d.pid = 0;
            size_t len = 0;
            char *log = tu_read_file(d.log, &len);
            ck_abort_msg("gpuqd exited during start-up:\n%s", log ? log : "");
        }
        ck_assert_msg(tu_now_s() < deadline, "gpuqd did not listen on %s", wait_path);
        usleep(20000);
    }
}

/* gpuq_connect with the default sockets: its code, message, unreachable. */
static int lib_connect(char *msg, size_t cap, bool *unreachable)
{
    gpuq_connect_opts o = {.client_name = "socket-test", .device = -1};
    gpuq_conn *c = NULL;
    int rc = gpuq_connect(&o, &c);
    ck_assert_ptr_nonnull(c);
    snprintf(msg, cap, "%s", gpuq_errmsg(c));
    *unreachable = gpuq_unreachable(c);
    if (rc == 0)
        ck_assert_int_eq(gpuq_ping(c), 0);
    gpuq_close(c);
    return rc;
}

/* gpuqctl ARGS...: exit status, stderr (one line, newline dropped) in err. */
static int ctl(char *err, size_t cap, const char *const *args)
{
    char out_path[300], err_path[300];
    snprintf(out_path, sizeof out_path, "%s/ctl.out", tdir);
    snprintf(err_path, sizeof err_path, "%s/ctl.err", tdir);
    const char *argv[16] = {GPUQCTL_PATH};
    size_t n = 1;
    for (size_t i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int st = tu_run(argv, out_path, err_path);
    size_t len = 0;
    char *text = tu_read_file(err_path, &len);
    ck_assert_ptr_nonnull(text);
    snprintf(err, cap, "%s", text);
    err[strcspn(err, "\n")] = '\0';
    free(text);
    return st;
}

START_TEST(falls_through_to_system_path)
{
    /* the daemon as the packaged one would be, on the system path */
    unsetenv("XDG_RUNTIME_DIR");
    start_daemon(NULL, syssock);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    char msg[1024];
    bool unreachable = true;
    ck_assert_int_eq(lib_connect(msg, sizeof msg, &unreachable), 0);
    ck_assert(!unreachable);
    char err[1024];
    const char *ping[] = {"ping", NULL};
    ck_assert_int_eq(ctl(err, sizeof err, ping), 0);
    /* a per-user gpuqd, when there is one, comes first (told apart by its
     * max_inflight) */
    tu_daemon sysd = d;
    memset(&d, 0, sizeof d);
    char usersock[200];
    snprintf(usersock, sizeof usersock, "%s/gpuq/gpuqd.sock", xdg);
    const char *extra[] = {"--max-inflight", "7", NULL};
    start_daemon(extra, usersock);
    struct stat sb;
    ck_assert_int_eq(stat(xdg, &sb), 0);
    ck_assert_int_eq(stat(usersock, &sb), 0);
    gpuq_connect_opts o = {.client_name = "socket-test", .device = -1};
    gpuq_conn *c = NULL;
    ck_assert_int_eq(gpuq_connect(&o, &c), 0);
    ck_assert_uint_eq(gpuq_info(c)->limits.max_inflight, 7);
    gpuq_close(c);
    ck_assert_int_eq(tu_daemon_stop(&d), 0);
    d = sysd;
    /* with it gone (its socket removed at exit), the system gpuqd again */
    ck_assert_int_eq(lib_connect(msg, sizeof msg, &unreachable), 0);
}
END_TEST

START_TEST(nothing_there)
{
    char msg[1024], want[1024], err[1024];
    bool unreachable = false;
    ck_assert_int_eq(lib_connect(msg, sizeof msg, &unreachable), GPUQ_E_IO);
    ck_assert(unreachable);
    snprintf(want, sizeof want,
             "cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does not exist; "
             "%s: directory %s does not exist; " HINT,
             xdg, xdg, syssock, sys);
    ck_assert_str_eq(msg, want);
    const char *ping[] = {"ping", NULL};
    ck_assert_int_eq(ctl(err, sizeof err, ping), 3);
    char line[1100];
    snprintf(line, sizeof line, "gpuqctl: io: %s", want);
    ck_assert_str_eq(err, line);
    /* the directory, no socket */
    ck_assert_int_eq(mkdir(sys, 0755), 0);
    ck_assert_int_eq(ctl(err, sizeof err, ping), 3);
    snprintf(want, sizeof want,
             "gpuqctl: io: cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does "
             "not exist; %s: no such file; " HINT,
             xdg, xdg, syssock);
    ck_assert_str_eq(err, want);
    /* every command that connects says the same */
    const char *status[] = {"status", NULL};
    ck_assert_int_eq(ctl(err, sizeof err, status), 3);
    ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(stale_socket)
{
    ck_assert_int_eq(mkdir(sys, 0755), 0);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, syssock, strlen(syssock) + 1);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    close(s);
    char err[1024], want[1024];
    const char *ping[] = {"ping", NULL};
    ck_assert_int_eq(ctl(err, sizeof err, ping), 3);
    snprintf(want, sizeof want,
             "gpuqctl: io: cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does "
             "not exist; %s: " STALE,
             xdg, xdg, syssock);
    ck_assert_str_eq(err, want);
    /* --socket: that path alone, diagnosed the same way */
    const char *named[] = {"--socket", syssock, "ping", NULL};
    ck_assert_int_eq(ctl(err, sizeof err, named), 3);
    snprintf(want, sizeof want, "gpuqctl: io: cannot connect to gpuqd: %s: " STALE, syssock);
    ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(gpuq_socket_alone)
{
    unsetenv("XDG_RUNTIME_DIR");
    start_daemon(NULL, syssock);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    char mine[200], err[1024], want[1024];
    snprintf(mine, sizeof mine, "%s/mine.sock", tdir);
    setenv("GPUQ_SOCKET", mine, 1);
    const char *ping[] = {"ping", NULL};
    ck_assert_int_eq(ctl(err, sizeof err, ping), 3); /* the system gpuqd is not tried */
    snprintf(want, sizeof want,
             "gpuqctl: io: cannot connect to gpuqd at $GPUQ_SOCKET (the only path tried while "
             "it is set): %s: no such file; " HINT,
             mine);
    ck_assert_str_eq(err, want);
    setenv("GPUQ_SOCKET", syssock, 1);
    ck_assert_int_eq(ctl(err, sizeof err, ping), 0);
}
END_TEST

/* A gpuqd that answers and refuses is not "unreachable": exit 1. */
START_TEST(refused_is_not_unreachable)
{
    const char *extra[] = {"--max-sessions", "1", NULL};
    unsetenv("XDG_RUNTIME_DIR");
    start_daemon(extra, syssock);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    gpuq_connect_opts o = {.socket_path = syssock, .client_name = "holder", .device = -1};
    gpuq_conn *hold = NULL;
    /* start_daemon's probe may still hold the one session for a moment */
    double deadline = tu_now_s() + 10;
    int rc;
    while ((rc = gpuq_connect(&o, &hold)) == GPUQ_E_BUSY && tu_now_s() < deadline) {
        gpuq_close(hold);
        usleep(20000);
    }
    ck_assert_int_eq(rc, 0);
    char msg[1024], err[1024];
    bool unreachable = true;
    ck_assert_int_eq(lib_connect(msg, sizeof msg, &unreachable), GPUQ_E_BUSY);
    ck_assert(!unreachable);
    const char *ping[] = {"ping", NULL};
    ck_assert_int_eq(ctl(err, sizeof err, ping), 1);
    ck_assert_msg(strncmp(err, "gpuqctl: busy: ", 15) == 0, "%s", err);
    gpuq_close(hold);
}
END_TEST

/* In a child: drop to nobody with primary group gid and, when extra is
 * not (gid_t)-1, that supplementary group; then gpuq_connect with the
 * default sockets. The child's exit status: 0 connected and pinged, 3
 * unreachable (its message on the pipe), 1 another failure, 9 could not
 * drop. Without root the child does not drop (the caller arranges the
 * denial with a mode-000 directory). */
static int connect_as_nobody(gid_t extra, char *msg, size_t cap)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        if (geteuid() == 0) {
            struct passwd *pw = getpwnam("nobody");
            uid_t uid = pw ? pw->pw_uid : 65534;
            gid_t gid = pw ? pw->pw_gid : 65534;
            if (setgroups(extra == (gid_t)-1 ? 0 : 1, &extra) < 0 || setgid(gid) < 0 ||
                setuid(uid) < 0)
                _exit(9);
        }
        char m[1024];
        bool unreachable;
        int rc = lib_connect(m, sizeof m, &unreachable);
        ssize_t w = write(p[1], m, strlen(m));
        (void)w;
        _exit(rc == 0 ? 0 : unreachable ? 3 : 1);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(p[0], msg + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    msg[got] = '\0';
    close(p[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_msg(WEXITSTATUS(st) != 9, "could not drop to nobody");
    return WEXITSTATUS(st);
}

/* A socket in a directory of mode 0700 owned by root: others get "permission
 * denied" (not "does not exist"), with both paths named. */
START_TEST(permission_denied)
{
    unsetenv("XDG_RUNTIME_DIR");
    start_daemon(NULL, syssock);
    /* the XDG dir too must be one nobody may look into, as a login's is */
    ck_assert_int_eq(chmod(xdg, 0755), 0);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    ck_assert_int_eq(chmod(sys, geteuid() == 0 ? 0700 : 0000), 0);
    char msg[1024], want[1024];
    ck_assert_int_eq(connect_as_nobody((gid_t)-1, msg, sizeof msg), 3);
    snprintf(want, sizeof want,
             "cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does not exist; "
             "%s: " DENIED,
             xdg, xdg, syssock);
    ck_assert_str_eq(msg, want);
    ck_assert_int_eq(chmod(sys, 0750), 0);
}
END_TEST

/* A group that exists and is not nobody's own: the socket group. */
static gid_t pick_group(char *name, size_t cap)
{
    struct passwd *pw = getpwnam("nobody");
    gid_t nobody_gid = pw ? pw->pw_gid : 65534;
    static const char *const names[] = {"daemon", "users", "adm", "bin", "sys", "staff"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct group *g = getgrnam(names[i]);
        if (g && g->gr_gid != 0 && g->gr_gid != nobody_gid) {
            snprintf(name, cap, "%s", names[i]);
            return g->gr_gid;
        }
    }
    ck_abort_msg("no group to use in /etc/group");
    return 0;
}

START_TEST(socket_group)
{
    if (geteuid() != 0) {
        printf("socket_group: not root: chown to another group needs root; skipped\n");
        return;
    }
    char group[64];
    gid_t gid = pick_group(group, sizeof group);
    unsetenv("XDG_RUNTIME_DIR");
    /* a directory left by an earlier gpuqd without the group: taken over */
    ck_assert_int_eq(mkdir(sys, 0700), 0);
    const char *extra[] = {"--socket-group", group, NULL};
    start_daemon(extra, syssock);
    struct stat sd, ss;
    ck_assert_int_eq(stat(sys, &sd), 0);
    ck_assert_int_eq(stat(syssock, &ss), 0);
    ck_assert_uint_eq(sd.st_gid, gid);
    ck_assert_uint_eq(sd.st_mode & 07777, 0750);
    ck_assert_uint_eq(ss.st_gid, gid);
    ck_assert_uint_eq(ss.st_mode & 0777, 0660);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    ck_assert_int_eq(chmod(xdg, 0755), 0);
    char msg[1024], want[1024];
    /* a member (supplementary group) connects; a non-member is refused */
    ck_assert_msg(connect_as_nobody(gid, msg, sizeof msg) == 0, "member refused: %s", msg);
    ck_assert_int_eq(connect_as_nobody((gid_t)-1, msg, sizeof msg), 3);
    snprintf(want, sizeof want,
             "cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does not exist; "
             "%s: " DENIED,
             xdg, xdg, syssock);
    ck_assert_str_eq(msg, want);
    size_t len = 0;
    char *log = tu_read_file(d.log, &len);
    char line[300];
    snprintf(line, sizeof line, "listening on %s (mode 0660, group %s)", syssock, group);
    ck_assert_msg(strstr(log, line), "%s", log);
    free(log);
}
END_TEST

/* --socket PATH with a group: the socket gets it, the directory (the
 * user's) is left as it is; --socket-mode is kept. */
START_TEST(socket_group_named_path)
{
    if (geteuid() != 0) {
        printf("socket_group_named_path: not root; skipped\n");
        return;
    }
    char group[64], sock[200];
    gid_t gid = pick_group(group, sizeof group);
    ck_assert_int_eq(mkdir(sys, 0711), 0);
    snprintf(sock, sizeof sock, "%s/named.sock", sys);
    const char *extra[] = {"--socket", sock, "--socket-group", group, "--socket-mode",
                           "0600",     NULL};
    start_daemon(extra, sock);
    struct stat sd, ss;
    ck_assert_int_eq(stat(sys, &sd), 0);
    ck_assert_int_eq(stat(sock, &ss), 0);
    ck_assert_uint_eq(sd.st_gid, 0);
    ck_assert_uint_eq(sd.st_mode & 07777, 0711);
    ck_assert_uint_eq(ss.st_gid, gid);
    ck_assert_uint_eq(ss.st_mode & 0777, 0600);
}
END_TEST

START_TEST(socket_group_unknown)
{
    char out[300], err[300];
    snprintf(out, sizeof out, "%s/out", tdir);
    snprintf(err, sizeof err, "%s/err", tdir);
    const char *argv[] = {GPUQD_PATH, "--device", "cpu", "--socket-group", "no-such-group-x", NULL};
    ck_assert_int_eq(tu_run(argv, out, err), 2);
    size_t len = 0;
    char *text = tu_read_file(err, &len);
    ck_assert_msg(strncmp(text, "gpuqd: --socket-group: unknown group 'no-such-group-x'\n", 55) ==
                      0,
                  "%s", text);
    free(text);
    ck_assert_int_ne(access(sys, F_OK), 0); /* nothing made */
    /* the file's key, with its line */
    char conf[300];
    snprintf(conf, sizeof conf, "%s/gpuqd.conf", tdir);
    const char *text_conf = "[server]\nsocket_mode = 0660\nsocket_group = no-such-group-x\n";
    ck_assert_int_eq(tu_write_file(conf, text_conf, strlen(text_conf)), 0);
    const char *check[] = {GPUQD_PATH, "--check-config", conf, NULL};
    ck_assert_int_eq(tu_run(check, out, err), 2);
    text = tu_read_file(err, &len);
    char want[400];
    snprintf(want, sizeof want,
             "gpuqd: %s:3: [server] socket_group: unknown group 'no-such-group-x'\n", conf);
    ck_assert_str_eq(text, want);
    free(text);
    /* a known one is printed back by --check-config */
    const char *ok_conf = "[server]\nsocket_group = root\n";
    ck_assert_int_eq(tu_write_file(conf, ok_conf, strlen(ok_conf)), 0);
    ck_assert_int_eq(tu_run(check, out, err), 0);
    text = tu_read_file(out, &len);
    ck_assert_msg(strstr(text, "\nsocket_group = root\n"), "%s", text);
    free(text);
}
END_TEST

/* SIGHUP with another socket_group: a warning, the socket unchanged. */
START_TEST(socket_group_reload_needs_restart)
{
    if (geteuid() != 0) {
        printf("socket_group_reload_needs_restart: not root; skipped\n");
        return;
    }
    char group[64], conf[300], text[200];
    gid_t gid = pick_group(group, sizeof group);
    snprintf(conf, sizeof conf, "%s/gpuqd.conf", tdir);
    snprintf(text, sizeof text, "[server]\nsocket_group = %s\n", group);
    ck_assert_int_eq(tu_write_file(conf, text, strlen(text)), 0);
    unsetenv("XDG_RUNTIME_DIR");
    const char *extra[] = {"--config", conf, NULL};
    start_daemon(extra, syssock);
    snprintf(text, sizeof text, "[server]\nsocket_group = root\n");
    ck_assert_int_eq(tu_write_file(conf, text, strlen(text)), 0);
    ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
    char want[200];
    snprintf(want, sizeof want, "reload: socket_group %s -> root needs a restart; ignored", group);
    double deadline = tu_now_s() + 20;
    for (;;) {
        size_t len = 0;
        char *log = tu_read_file(d.log, &len);
        bool found = log && strstr(log, want);
        free(log);
        if (found)
            break;
        ck_assert_msg(tu_now_s() < deadline, "'%s' not logged", want);
        usleep(20000);
    }
    struct stat ss;
    ck_assert_int_eq(stat(syssock, &ss), 0);
    ck_assert_uint_eq(ss.st_gid, gid);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_socket");
    TCase *tc = tcase_create("finding the socket");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, falls_through_to_system_path);
    tcase_add_test(tc, nothing_there);
    tcase_add_test(tc, stale_socket);
    tcase_add_test(tc, gpuq_socket_alone);
    tcase_add_test(tc, refused_is_not_unreachable);
    tcase_add_test(tc, permission_denied);
    suite_add_tcase(s, tc);
    tc = tcase_create("socket group");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, socket_group);
    tcase_add_test(tc, socket_group_named_path);
    tcase_add_test(tc, socket_group_unknown);
    tcase_add_test(tc, socket_group_reload_needs_restart);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
