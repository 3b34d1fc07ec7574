/* SPDX-License-Identifier: Apache-2.0 */
/* test_sockpath.c - client/lib/sockpath.c: the sockets libgpuq tries, from the
 * environment ($GPUQ_SOCKET alone; else the per-user path when
 * XDG_RUNTIME_DIR is set, then /run/gpuq/gpuqd.sock), gpuq_default_socket
 * as the first of them, the diagnosis of each way a connect fails (missing
 * directory, missing file, stale socket, a file that is no socket,
 * permission), and the one-line message that names every path tried. No
 * daemon: the sockets here are bound and closed, or never made. */
#include "sockpath.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gpuq.h"
#include "testutil.h"

static char tdir[128];

static void setup(void)
{
    tu_tmpdir(tdir, sizeof tdir);
    unsetenv("GPUQ_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("GPUQ_TEST_SYSTEM_SOCKET_DIR");
}

static void teardown(void)
{
    tu_rmtree(tdir);
}

/* The candidates and gpuq_default_socket agree on the first. */
static void expect(unsigned n, const char *p0, const char *p1, bool from_env)
{
    sockpath_list l;
    ck_assert_int_eq(sockpath_candidates(&l), 0);
    ck_assert_uint_eq(l.n, n);
    ck_assert_int_eq(l.from_env, from_env);
    ck_assert_str_eq(l.path[0], p0);
    if (n > 1)
        ck_assert_str_eq(l.path[1], p1);
    char buf[256];
    ck_assert_int_eq(gpuq_default_socket(buf, sizeof buf), 0);
    ck_assert_str_eq(buf, p0);
}

START_TEST(candidates_from_env)
{
    /* nothing set: the system path only, the real one */
    expect(1, "/run/gpuq/gpuqd.sock", NULL, false);
    /* an empty XDG_RUNTIME_DIR counts as unset */
    setenv("XDG_RUNTIME_DIR", "", 1);
    expect(1, "/run/gpuq/gpuqd.sock", NULL, false);
    /* a login: the per-user path, then the system path */
    setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
    expect(2, "/run/user/1000/gpuq/gpuqd.sock", "/run/gpuq/gpuqd.sock", false);
    /* an empty GPUQ_SOCKET counts as unset */
    setenv("GPUQ_SOCKET", "", 1);
    expect(2, "/run/user/1000/gpuq/gpuqd.sock", "/run/gpuq/gpuqd.sock", false);
    /* GPUQ_SOCKET: it alone, whatever else is set */
    setenv("GPUQ_SOCKET", "/tmp/mine.sock", 1);
    expect(1, "/tmp/mine.sock", NULL, true);
    setenv("GPUQ_TEST_SYSTEM_SOCKET_DIR", "/elsewhere", 1);
    expect(1, "/tmp/mine.sock", NULL, true);
    /* the test hook stands for /run/gpuq */
    unsetenv("GPUQ_SOCKET");
    expect(2, "/run/user/1000/gpuq/gpuqd.sock", "/elsewhere/gpuqd.sock", false);
    unsetenv("XDG_RUNTIME_DIR");
    expect(1, "/elsewhere/gpuqd.sock", NULL, false);
}
END_TEST

START_TEST(candidates_too_long)
{
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[0] = '/';
    big[sizeof big - 1] = '\0';
    setenv("XDG_RUNTIME_DIR", big, 1);
    sockpath_list l;
    ck_assert_int_eq(sockpath_candidates(&l), GPUQ_E_TOO_LARGE);
    char buf[256];
    ck_assert_int_eq(gpuq_default_socket(buf, sizeof buf), GPUQ_E_TOO_LARGE);
    unsetenv("XDG_RUNTIME_DIR");
    ck_assert_int_eq(gpuq_default_socket(buf, 8), GPUQ_E_TOO_LARGE); /* the caller's buffer */
    /* one that fits SOCKPATH_LEN but not sun_path: tried, and said so */
    big[200] = '\0';
    ck_assert_int_eq(sockpath_single(&l, big), 0);
    int fd = -1;
    unsigned used;
    char err[1024];
    ck_assert_int_eq(sockpath_connect(&l, &fd, &used, err, sizeof err), GPUQ_E_IO);
    ck_assert_msg(strstr(err, "path too long for a Unix socket (at most 107 bytes)"), "%s", err);
}
END_TEST

/* Bind a socket at path and close it: a stale socket file. */
static void make_stale(const char *path)
{
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(s, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    close(s);
}

START_TEST(diagnose_each)
{
    char path[400], buf[300];
    bool absent;
    /* no directory */
    snprintf(path, sizeof path, "%s/nodir/gpuqd.sock", tdir);
    sockpath_diagnose(path, ENOENT, &absent, buf, sizeof buf);
    char want[400];
    snprintf(want, sizeof want, "directory %s/nodir does not exist", tdir);
    ck_assert_str_eq(buf, want);
    ck_assert(absent);
    /* a directory, no socket */
    snprintf(path, sizeof path, "%s/gpuqd.sock", tdir);
    sockpath_diagnose(path, ENOENT, &absent, buf, sizeof buf);
    ck_assert_str_eq(buf, "no such file");
    ck_assert(absent);
    /* a bare name: its directory is "." (which exists) */
    sockpath_diagnose("gpuqd.sock", ENOENT, &absent, buf, sizeof buf);
    ck_assert_str_eq(buf, "no such file");
    /* refused: a stale socket, or a file that is no socket */
    make_stale(path);
    sockpath_diagnose(path, ECONNREFUSED, &absent, buf, sizeof buf);
    ck_assert_str_eq(buf, "stale socket (no gpuqd listens; remove it or restart gpuqd)");
    ck_assert(!absent);
    snprintf(path, sizeof path, "%s/plain", tdir);
    ck_assert_int_eq(tu_write_file(path, "x", 1), 0);
    sockpath_diagnose(path, ECONNREFUSED, &absent, buf, sizeof buf);
    ck_assert_str_eq(buf, "not a socket");
    /* permission */
    sockpath_diagnose(path, EACCES, &absent, buf, sizeof buf);
    ck_assert_str_eq(buf, "permission denied: join group gpuq (`sudo usermod -aG gpuq $USER`, "
                          "then log in again)");
    ck_assert(!absent);
    /* anything else: strerror */
    sockpath_diagnose(path, EMFILE, &absent, buf, sizeof buf);
    ck_assert_str_eq(buf, strerror(EMFILE));
}
END_TEST

/* The message of sockpath_connect over the environment's candidates. */
static int connect_env(char *err, size_t cap)
{
    sockpath_list l;
    ck_assert_int_eq(sockpath_candidates(&l), 0);
    int fd = -1;
    unsigned used = 99;
    int rc = sockpath_connect(&l, &fd, &used, err, cap);
    if (rc == 0)
        close(fd);
    return rc;
}

START_TEST(message_names_every_path)
{
    char xdg[160], sys[160], err[1024], want[2048];
    snprintf(xdg, sizeof xdg, "%s/xdg", tdir);
    snprintf(sys, sizeof sys, "%s/sys", tdir);
    ck_assert_int_eq(mkdir(xdg, 0700), 0);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    setenv("GPUQ_TEST_SYSTEM_SOCKET_DIR", sys, 1);
    /* nothing anywhere: both directories missing, and how to start gpuqd */
    ck_assert_int_eq(connect_env(err, sizeof err), GPUQ_E_IO);
    snprintf(want, sizeof want,
             "cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does not exist; "
             "%s/gpuqd.sock: directory %s does not exist; is gpuqd running? `systemctl start "
             "gpuqd.socket` or `gpuqd`",
             xdg, xdg, sys, sys);
    ck_assert_str_eq(err, want);
    /* the system directory, no socket in it */
    ck_assert_int_eq(mkdir(sys, 0755), 0);
    ck_assert_int_eq(connect_env(err, sizeof err), GPUQ_E_IO);
    snprintf(want, sizeof want,
             "cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does not exist; "
             "%s/gpuqd.sock: no such file; is gpuqd running? `systemctl start gpuqd.socket` or "
             "`gpuqd`",
             xdg, xdg, sys);
    ck_assert_str_eq(err, want);
    /* a stale system socket: said so, and no "is gpuqd running?" */
    char sock[200];
    snprintf(sock, sizeof sock, "%s/gpuqd.sock", sys);
    make_stale(sock);
    ck_assert_int_eq(connect_env(err, sizeof err), GPUQ_E_IO);
    snprintf(want, sizeof want,
             "cannot connect to gpuqd: %s/gpuq/gpuqd.sock: directory %s/gpuq does not exist; "
             "%s/gpuqd.sock: stale socket (no gpuqd listens; remove it or restart gpuqd)",
             xdg, xdg, sys);
    ck_assert_str_eq(err, want);
    /* GPUQ_SOCKET: only it, and the message says why the others were not tried */
    char mine[200];
    snprintf(mine, sizeof mine, "%s/mine.sock", tdir);
    setenv("GPUQ_SOCKET", mine, 1);
    ck_assert_int_eq(connect_env(err, sizeof err), GPUQ_E_IO);
    snprintf(want, sizeof want,
             "cannot connect to gpuqd at $GPUQ_SOCKET (the only path tried while it is set): "
             "%s: no such file; is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`",
             mine);
    ck_assert_str_eq(err, want);
    /* a small buffer: cut, still a string */
    char tiny[40];
    ck_assert_int_eq(connect_env(tiny, sizeof tiny), GPUQ_E_IO);
    ck_assert_uint_eq(strlen(tiny), sizeof tiny - 1);
}
END_TEST

/* The first that accepts is kept: a listening per-user socket wins over the
 * system path, and a missing per-user socket falls through to it. */
START_TEST(first_that_accepts)
{
    char xdg[160], sys[160], path[200];
    snprintf(xdg, sizeof xdg, "%s/xdg", tdir);
    snprintf(sys, sizeof sys, "%s/sys", tdir);
    ck_assert_int_eq(mkdir(xdg, 0700), 0);
    ck_assert_int_eq(mkdir(sys, 0755), 0);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    setenv("GPUQ_TEST_SYSTEM_SOCKET_DIR", sys, 1);
    snprintf(path, sizeof path, "%s/gpuqd.sock", sys);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(s, 4), 0);
    sockpath_list l;
    ck_assert_int_eq(sockpath_candidates(&l), 0);
    int fd = -1;
    unsigned used = 99;
    char err[1024] = "junk";
    ck_assert_int_eq(sockpath_connect(&l, &fd, &used, err, sizeof err), 0);
    ck_assert_uint_eq(used, 1);
    ck_assert_str_eq(err, "");
    close(fd);
    close(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sockpath");
    TCase *tc = tcase_create("sockpath");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, candidates_from_env);
    tcase_add_test(tc, candidates_too_long);
    tcase_add_test(tc, diagnose_each);
    tcase_add_test(tc, message_names_every_path);
    tcase_add_test(tc, first_that_accepts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
