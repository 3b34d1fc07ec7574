/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_config.c - gpuqd started with --config FILE: the hello reply shows
 * the file's limits and the daemon enforces them; SIGHUP applies a changed
 * file, and a broken one changes nothing and is logged with its line;
 * `gpuqd --config FILE --reload PID` (the unit's ExecReload=) checks the file
 * and sends that SIGHUP, or fails with FILE:LINE and sends nothing;
 * --check-config prints the settings (exit 0) or FILE:LINE (exit 2). CPU
 * backend. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"

static uint8_t hbuf[65536];
static char cdir[256];
static char conf[320];

static void write_conf(const char *text)
{
    /* write then rename, as an editor or a package manager would */
    char tmp[340];
    snprintf(tmp, sizeof tmp, "%s.tmp", conf);
    ck_assert_int_eq(tu_write_file(tmp, text, strlen(text)), 0);
    ck_assert_int_eq(rename(tmp, conf), 0);
}

static void setup(void)
{
    tu_tmpdir(cdir, sizeof cdir);
    snprintf(conf, sizeof conf, "%s/gpuqd.conf", cdir);
    memset(&e2e_d, 0, sizeof e2e_d);
}

static void teardown(void)
{
    if (e2e_d.pid > 0)
        e2e_teardown();
    tu_rmtree(cdir);
}

static void start_with_conf(void)
{
    const char *extra[] = {"--config", conf, NULL};
    e2e_start(extra);
}

static unsigned hello_max_inflight(void)
{
    gpuq_conn *c = e2e_connect("conf", GPUQ_PRIO_NORMAL);
    unsigned v = gpuq_info(c)->limits.max_inflight;
    gpuq_close(c);
    return v;
}

/* Poll until a new connection's hello shows max_inflight == want. */
static void wait_max_inflight(unsigned want)
{
    double deadline = tu_now_s() + 20;
    unsigned got;
    while ((got = hello_max_inflight()) != want && tu_now_s() < deadline)
        usleep(20000);
    ck_assert_msg(got == want, "max_inflight %u after SIGHUP, want %u", got, want);
}

/* Poll until the daemon's log contains needle; returns the log (malloc'd). */
static char *wait_log(const char *needle)
{
    double deadline = tu_now_s() + 20;
    for (;;) {
        size_t len = 0;
        char *log = tu_read_file(e2e_d.log, &len);
        ck_assert_ptr_nonnull(log);
        char *z = realloc(log, len + 1);
        ck_assert_ptr_nonnull(z);
        z[len] = '\0';
        if (strstr(z, needle))
            return z;
        ck_assert_msg(tu_now_s() < deadline, "'%s' not in the log:\n%s", needle, z);
        free(z);
        usleep(20000);
    }
}

/* A raw connection after hello: the client library would refuse an
 * over-size payload itself, the daemon must too. */

START_TEST(file_limits_and_sighup)
{
    write_conf("[limits]\nmax_inflight = 7\nmax_payload = 1M\n[server]\nsocket_mode = 0600\n");
    start_with_conf();
    struct stat sb;
    ck_assert_int_eq(stat(e2e_d.socket, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 0777, 0600);

    gpuq_conn *c = e2e_connect("conf", GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(gpuq_info(c)->limits.max_inflight, 7);
    ck_assert_uint_eq(gpuq_info(c)->limits.max_payload, 1u << 20);
    gpuq_close(c);

    /* 1 MiB + 8 bytes of payload: too large, and the connection closes */
    enum { N = (1 << 17) + 1 };
    double *x = calloc(N, sizeof *x);
    ck_assert_ptr_nonnull(x);
    int fd = e2e_hello_socket("conf-raw", hbuf, sizeof hbuf);
    gpuq_request r;
    gpuq_request_init(&r);
    r.id = 2;
    r.op = GPUQ_OP_NORMALIZE;
    r.dtype = GPUQ_DT_F64;
    r.ndim_a = 1;
    r.shape_a[0] = N;
    e2e_send_req(fd, &r, x, N * sizeof *x);
    free(x);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == GPUQ_E_TOO_LARGE, "got %s (%s)", gpuq_errname(rep.status),
                  rep.message);
    ck_assert_uint_eq(rep.id, 2);
    e2e_expect_closed(fd, 10); /* over max_payload: closed, not skipped */
    close(fd);
    e2e_assert_serves();

    /* a changed file and SIGHUP: new sessions see the new limit */
    write_conf("[limits]\nmax_inflight = 9\nmax_payload = 1M\n[server]\nsocket_mode = 0600\n");
    tu_daemon_kill(&e2e_d, SIGHUP);
    wait_max_inflight(9);
    free(wait_log("reload: 1 settings changed"));
    char *log = wait_log("reload: max_inflight 7 -> 9");
    free(log);

    /* a broken file: logged with its line, nothing changes */
    write_conf("[limits]\nmax_inflight = 3\nmax_payload = lots\n");
    tu_daemon_kill(&e2e_d, SIGHUP);
    char want[400];
    snprintf(want, sizeof want, "reload failed: %s:3: [limits] max_payload", conf);
    log = wait_log(want);
    ck_assert_msg(strstr(log, "keeping the old settings") != NULL, "%s", log);
    free(log);
    e2e_assert_serves();
    ck_assert_uint_eq(hello_max_inflight(), 9);
    c = e2e_connect("conf", GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(gpuq_info(c)->limits.max_payload, 1u << 20);
    gpuq_close(c);
}
END_TEST

/* A setting that needs a restart is warned about and not applied. */
START_TEST(sighup_restart_only)
{
    write_conf("[server]\nsocket_mode = 0600\n[limits]\nmax_sessions = 20\n");
    start_with_conf();
    write_conf("[server]\nsocket_mode = 0666\n[limits]\nmax_sessions = 30\n");
    tu_daemon_kill(&e2e_d, SIGHUP);
    char *log = wait_log("reload: 1 settings changed");
    ck_assert_msg(strstr(log, "reload: socket_mode 0600 -> 0666 needs a restart; ignored"), "%s",
                  log);
    ck_assert_msg(strstr(log, "reload: max_sessions 20 -> 30"), "%s", log);
    free(log);
    gpuq_conn *c = e2e_connect("conf", GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(gpuq_info(c)->limits.max_sessions, 30);
    gpuq_close(c);
    struct stat sb;
    ck_assert_int_eq(stat(e2e_d.socket, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 0777, 0600);
}
END_TEST

/* A file's text (malloc'd; tu_read_file adds the NUL). */
static char *slurp(const char *p)
{
    size_t len = 0;
    char *text = tu_read_file(p, &len);
    ck_assert_ptr_nonnull(text);
    return text;
}

/* gpuqd --config FILE --reload PID: what `systemctl reload gpuqd` runs. */
START_TEST(reload_flag)
{
    char out[340], err[340], pid[32];
    snprintf(out, sizeof out, "%s/out", cdir);
    snprintf(err, sizeof err, "%s/err", cdir);
    write_conf("[limits]\nmax_inflight = 7\n");
    start_with_conf();
    ck_assert_uint_eq(hello_max_inflight(), 7);
    snprintf(pid, sizeof pid, "%ld", (long)e2e_d.pid);
    const char *argv[] = {GPUQD_PATH, "--config", conf, "--reload", pid, NULL};

    /* a good file: exit 0, and the daemon applies it */
    write_conf("[limits]\nmax_inflight = 9\n");
    ck_assert_int_eq(tu_run(argv, out, err), 0);
    char *text = slurp(err);
    ck_assert_msg(strstr(text, "--reload: sent SIGHUP to pid") != NULL, "%s", text);
    free(text);
    wait_max_inflight(9);
    free(wait_log("reload: max_inflight 7 -> 9"));

    /* a broken file: exit 2 with FILE:LINE, and no signal reaches the
     * daemon (its log never says "reload failed") */
    write_conf("[limits]\nmax_inflight = 3\nmax_payload = lots\n");
    ck_assert_int_eq(tu_run(argv, out, err), 2);
    text = slurp(err);
    char want[400];
    snprintf(want, sizeof want, "gpuqd: %s:3: [limits] max_payload", conf);
    ck_assert_msg(strstr(text, want) != NULL, "%s", text);
    free(text);
    /* a later good reload shows the broken one was never seen */
    write_conf("[limits]\nmax_inflight = 5\n");
    ck_assert_int_eq(tu_run(argv, out, err), 0);
    wait_max_inflight(5);
    text = wait_log("reload: max_inflight 9 -> 5");
    ck_assert_msg(strstr(text, "reload failed") == NULL, "%s", text);
    free(text);

    /* not a process id: usage error, nothing sent; 0 and negative ids would
     * signal process groups */
    static const char *const bad[] = {"0", "-1", "x", "", "12x", "99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a[] = {GPUQD_PATH, "--reload", bad[i], NULL};
        ck_assert_int_eq(tu_run(a, out, err), 2);
        text = slurp(err);
        ck_assert_msg(strstr(text, "is not a process id") != NULL, "'%s': %s", bad[i], text);
        free(text);
    }
    const char *both[] = {GPUQD_PATH, "--check-config", conf, "--reload", pid, NULL};
    ck_assert_int_eq(tu_run(both, out, err), 2);
    /* a process that is gone: exit 1 with the reason */
    e2e_teardown();
    ck_assert_int_eq(tu_run(argv, out, err), 1);
    text = slurp(err);
    ck_assert_msg(strstr(text, "No such process") != NULL, "%s", text);
    free(text);
}
END_TEST

START_TEST(check_config_cli)
{
    char out[340], err[340];
    snprintf(out, sizeof out, "%s/out", cdir);
    snprintf(err, sizeof err, "%s/err", cdir);
    write_conf("[limits]\nmax_inflight = 7\n\n[user root]\nmax_priority = low\n");
    const char *argv[] = {GPUQD_PATH, "--check-config", conf, "--max-payload", "2M", NULL};
    ck_assert_int_eq(tu_run(argv, out, err), 0);
    size_t len = 0;
    char *text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(text);
    char *z = realloc(text, len + 1);
    ck_assert_ptr_nonnull(z);
    z[len] = '\0';
    ck_assert_msg(strstr(z, "\nmax_inflight = 7\n") && strstr(z, "\nmax_payload = 2097152\n") &&
                      strstr(z, "\n[user root]\nmax_priority = low\n") &&
                      strstr(z, "\n[limits]\n") && strstr(z, "\n[policy]\n"),
                  "%s", z);
    free(z);

    write_conf("[limits]\nmax_inflight = 7\n\n[limtis]\n");
    ck_assert_int_eq(tu_run(argv, out, err), 2);
    text = tu_read_file(err, &len);
    ck_assert_ptr_nonnull(text);
    z = realloc(text, len + 1);
    ck_assert_ptr_nonnull(z);
    z[len] = '\0';
    char want[400];
    snprintf(want, sizeof want, "gpuqd: %s:4: unknown section [limtis]", conf);
    ck_assert_msg(strstr(z, want) != NULL, "%s", z);
    free(z);
    ck_assert_int_eq(tu_run(argv, out, NULL), 2);
    text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, 0); /* nothing on stdout */
    free(text);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, file_limits_and_sighup);
    tcase_add_test(tc, sighup_restart_only);
    tcase_add_test(tc, reload_flag);
    tcase_add_test(tc, check_config_cli);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
