/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_cancel.c - deadlines and cancellation end to end: libgpuq's
 * gpuq_set_deadline_ms and gpuq_submit_cancel, gpuqctl's --deadline (ops
 * and bench), and gpuqctl's cancel on Ctrl-C, against a real gpuqd.
 *
 * Work that is still running or queued when the deadline or the cancel
 * comes is the CPU backend's GPUQ_TEST_SLOW_MS (each job sleeps that
 * long), so the cases return early on CUDA. A queued request needs a
 * device that takes one job at a time: gpuqd's device_window 1.
 *
 * What is checked is what gpuqd says (PROTOCOL.md section 2): a late
 * request is answered deadline_exceeded and the connection serves on; a
 * cancelled one is answered cancelled, before the cancel's own reply, whose
 * counts say whether it was dropped or running; status counts them
 * (expired, cancelled, the requests map's cancel). The wire format and the
 * library's side alone are tests/unit/test_conn_cancel.c.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"
#include "npy.h"

#define SLOW_MS 1500 /* one CPU job */
#define N 4096       /* elements of a normalize */

static bool is_cpu(void)
{
    return strcmp(tu_test_device(), "cpu") == 0;
}

/* A status counter that this gpuqd must have (0 or more). */
static long long counter(const char *key)
{
    long long v = e2e_status_int(key);
    ck_assert_msg(v >= 0, "status has no \"%s\"", key);
    return v;
}

static void fill(double *x, size_t n)
{
    tu_rand_fill_f64(x, n, 0.5, 10);
}

/* out is in normalized by its sum (method sum), to a few ulps. */
static void assert_sum_normalized(const double *in, const double *out, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += in[i];
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(out[i] - in[i] / s) <= 1e-12 * fabs(in[i] / s), "out[%zu] %.17g", i,
                      out[i]);
}

/* ---- gpuqctl ---- */

static void make_npy(const char *name, uint64_t rows, uint64_t cols)
{
    double *x = malloc(rows * cols * sizeof *x);
    ck_assert_ptr_nonnull(x);
    fill(x, rows * cols);
    const uint64_t shape[2] = {rows, cols};
    char err[512];
    ck_assert_msg(npy_write(e2e_dpath(name), GPUQ_DT_F64, 2, shape, x, err, sizeof err) == 0, "%s",
                  err);
    free(x);
}

/* gpuqctl --socket S args..., stdout and stderr into files (NULL:
 * /dev/null), SIGINT at its default; its pid. */
static pid_t spawn(const char *const *args, const char *out, const char *err)
{
    const char *argv[40];
    int n = 0;
    argv[n++] = GPUQCTL_PATH;
    argv[n++] = "--socket";
    argv[n++] = e2e_d.socket;
    for (int i = 0; args[i]; i++) {
        ck_assert_int_lt(n, 38);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fi = open("/dev/null", O_RDONLY);
        int fo = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : open("/dev/null", O_WRONLY);
        int fe = err ? open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644) : open("/dev/null", O_WRONLY);
        if (fi < 0 || fo < 0 || fe < 0 || dup2(fi, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        unsetenv("GPUQ_PROGRESS");
        signal(SIGINT, SIG_DFL);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static char *slurp(const char *path)
{
    size_t l = 0;
    char *s = tu_read_file(path, &l);
    ck_assert_msg(s != NULL, "cannot read %s", path);
    return s;
}

/* ---- libgpuq ---- */

/* A request still running when its deadline passes is answered
 * deadline_exceeded at the deadline and its job stops early; the
 * connection serves on, and status counts it expired and stopped. */
START_TEST(deadline_exceeded_then_serves_on)
{
    if (!is_cpu())
        return; /* GPUQ_TEST_SLOW_MS is the CPU backend's */
    e2e_restart_slow(SLOW_MS, NULL);
    long long expired0 = counter("expired"), stopped0 = counter("stopped");
    gpuq_conn *c = e2e_connect("deadline", GPUQ_PRIO_NORMAL);
    static double in[N], out[N];
    fill(in, N);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 200), 0);
    double t0 = tu_now_s();
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, N, out),
                     GPUQ_E_DEADLINE_EXCEEDED);
    ck_assert_msg(tu_now_s() - t0 < 5, "answered after %.1f s", tu_now_s() - t0);
    ck_assert_msg(strncmp(gpuq_errmsg(c), "deadline_exceeded: ", 19) == 0, "%s", gpuq_errmsg(c));
    e2e_wait_status("expired", expired0 + 1, 10);
    e2e_wait_status("stopped", stopped0 + 1, 10);
    /* the same connection: a deadline that the job meets, then none */
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 20000), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, N, out), 0);
    assert_sum_normalized(in, out, N);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 0), 0);
    memset(out, 0, sizeof out);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, in, N, out), 0);
    assert_sum_normalized(in, out, N);
    ck_assert_int_eq(counter("expired"), expired0 + 1);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* With one job at a time on the device, a second request waits in the
 * queue: a cancel drops it at once (it never runs), it is answered
 * cancelled after the first's reply, and the cancel's reply says 1
 * dropped, 0 running. */
START_TEST(cancel_a_queued_request)
{
    if (!is_cpu())
        return;
    const char *const window[] = {"--device-window", "1", NULL};
    e2e_restart_slow(SLOW_MS, window);
    long long cancelled0 = counter("cancelled");
    gpuq_conn *c = e2e_connect("cancel", GPUQ_PRIO_NORMAL);
    static double in[N], out_a[N], out_b[N];
    fill(in, N);
    const uint64_t shape[1] = {N};
    gpuq_req *ra = gpuq_req_new("normalize"), *rb = gpuq_req_new("normalize");
    ck_assert(ra && rb);
    gpuq_req_set_input(ra, 0, GPUQ_DT_F64, 1, shape, in, sizeof in);
    gpuq_req_set_str(ra, "method", "sum");
    gpuq_req_set_output(ra, 0, out_a, sizeof out_a);
    gpuq_req_set_input(rb, 0, GPUQ_DT_F64, 1, shape, in, sizeof in);
    gpuq_req_set_str(rb, "method", "sum");
    gpuq_req_set_output(rb, 0, out_b, sizeof out_b);
    uint64_t a, b, cid;
    double t0 = tu_now_s();
    ck_assert_int_eq(gpuq_submit_req(c, ra, &a), 0);
    ck_assert_int_eq(gpuq_submit_req(c, rb, &b), 0);
    e2e_wait_status("queued", 1, 5); /* b waits behind a */
    ck_assert_int_eq(gpuq_submit_cancel(c, b, &cid), 0);
    e2e_wait_status("queued", 0, 5); /* dropped at once, while a still runs */
    ck_assert_msg(tu_now_s() - t0 < SLOW_MS / 1000.0, "dropped only after a's job");
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), a);
    assert_sum_normalized(in, out_a, N);
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_CANCELLED);
    ck_assert_uint_eq(gpuq_result_id(res), b);
    ck_assert_msg(strncmp(gpuq_errmsg(c), "cancelled: ", 11) == 0, "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), cid);
    uint64_t dropped = 9, running = 9;
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), 0);
    ck_assert_uint_eq(dropped, 1);
    ck_assert_uint_eq(running, 0);
    ck_assert_msg(tu_now_s() - t0 < 2.0 * SLOW_MS / 1000.0, "b ran after all");
    ck_assert_int_eq(counter("cancelled"), cancelled0 + 1);
    /* the connection serves on */
    ck_assert_int_eq(gpuq_call_req(c, rb, res), 0);
    assert_sum_normalized(in, out_b, N);
    gpuq_result_free(res);
    gpuq_req_free(ra);
    gpuq_req_free(rb);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* A running request: a cancel answers it cancelled at once (no result), the
 * cancel says 0 dropped, 1 running, and its job stops early (the slow
 * hook between two of its slices): status counts it stopped. The CUDA
 * backend's kernels: tests/gpu/test_e2e_stop.c. */
START_TEST(cancel_a_running_request)
{
    if (!is_cpu())
        return;
    e2e_restart_slow(SLOW_MS, NULL);
    long long cancelled0 = counter("cancelled"), stopped0 = counter("stopped");
    gpuq_conn *c = e2e_connect("cancel", GPUQ_PRIO_NORMAL);
    static double in[N], out[N];
    fill(in, N);
    for (size_t i = 0; i < N; i++)
        out[i] = -1;
    const uint64_t shape[1] = {N};
    gpuq_req *r = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(r);
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, shape, in, sizeof in);
    gpuq_req_set_str(r, "method", "sum");
    gpuq_req_set_output(r, 0, out, sizeof out);
    uint64_t a, cid;
    ck_assert_int_eq(gpuq_submit_req(c, r, &a), 0);
    e2e_wait_status("in_flight", 1, 5);
    ck_assert_int_eq(gpuq_submit_cancel(c, a, &cid), 0);
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_CANCELLED);
    ck_assert_uint_eq(gpuq_result_id(res), a);
    ck_assert_uint_eq(gpuq_result_bytes(res, 0), 0);
    ck_assert_double_eq(out[0], -1); /* no result */
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_uint_eq(gpuq_result_id(res), cid);
    uint64_t dropped = 9, running = 9;
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), 0);
    ck_assert_uint_eq(dropped, 0);
    ck_assert_uint_eq(running, 1);
    ck_assert_int_eq(counter("cancelled"), cancelled0 + 1);
    e2e_wait_status("stopped", stopped0 + 1, SLOW_MS / 1000.0 / 2);
    /* a cancel naming nothing outstanding: no error, nothing counted */
    ck_assert_int_eq(gpuq_submit_cancel(c, a, &cid), 0);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), 0);
    ck_assert_uint_eq(dropped + running, 0);
    ck_assert_int_eq(counter("cancelled"), cancelled0 + 1);
    gpuq_result_free(res);
    gpuq_req_free(r);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* ---- gpuqctl ---- */

/* --deadline: a late op is one line "gpuqctl: deadline_exceeded: ..." and
 * exit status 1, no output file; a deadline it meets changes nothing. */
START_TEST(ctl_deadline)
{
    if (!is_cpu())
        return;
    e2e_restart_slow(SLOW_MS, NULL);
    make_npy("x.npy", 64, 64);
    const char *err = e2e_dpath("err.txt"), *y = e2e_dpath("y.npy");
    const char *late[] = {"--deadline", "200", "normalize", e2e_dpath("x.npy"), "-o", y, NULL};
    ck_assert_int_eq(e2e_wait_exit(spawn(late, NULL, err), 30), 1);
    char *e = slurp(err);
    ck_assert_msg(strncmp(e, "gpuqctl: deadline_exceeded: ", 28) == 0, "stderr: %s", e);
    const char *nl = strchr(e, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: %s", e);
    free(e);
    ck_assert(!e2e_exists(y));
    e2e_no_temp_files();
    /* after the command, with =, a deadline met */
    const char *met[] = {"normalize", e2e_dpath("x.npy"), "-o", y, "--deadline=20000", NULL};
    ck_assert_int_eq(e2e_wait_exit(spawn(met, NULL, err), 30), 0);
    ck_assert(e2e_exists(y));
    e2e_assert_serves();
}
END_TEST

/* bench --deadline: requests answered deadline_exceeded are errors, the
 * first named; exit status 1. */
START_TEST(ctl_bench_deadline)
{
    if (!is_cpu())
        return;
    e2e_restart_slow(400, NULL);
    const char *out = e2e_dpath("out.json"), *err = e2e_dpath("err.txt");
    const char *args[] = {"--json",   "bench", "--deadline", "100", "--duration", "0.6",
                          "--warmup", "0",     "--depth",    "2",   NULL};
    ck_assert_int_eq(e2e_wait_exit(spawn(args, out, err), 60), 1);
    char *js = slurp(out), *e = slurp(err);
    ck_assert_msg(strstr(js, "\"deadline_ms\":100,"), "%s", js);
    ck_assert_msg(strstr(js, "\"first_error\":\"deadline_exceeded: "), "%s", js);
    ck_assert_msg(!strstr(js, "\"errors\":0,"), "%s", js);
    ck_assert_msg(strncmp(e, "gpuqctl: deadline_exceeded: ", 28) == 0, "stderr: %s", e);
    free(js);
    free(e);
}
END_TEST

/* Ctrl-C while gpuqd runs the op: gpuqctl sends a cancel for its request
 * (status: the requests map's cancel), exits 130 at once with its one
 * line, leaves no file, and gpuqd counts the request cancelled. */
START_TEST(ctl_sigint_cancels)
{
    if (!is_cpu())
        return;
    e2e_restart_slow(2500, NULL);
    make_npy("x.npy", 64, 64);
    const char *err = e2e_dpath("err.txt"), *y = e2e_dpath("y.npy");
    for (int t = 0; t < 2; t++) {
        long long sent0 = counter("cancel"), cancelled0 = counter("cancelled");
        const char *args[] = {
            "--transport", t ? "shm" : "socket", "normalize", e2e_dpath("x.npy"), "-o", y, NULL};
        pid_t pid = spawn(args, NULL, err);
        e2e_wait_status("in_flight", 1, 10); /* the job is on the backend */
        double t0 = tu_now_s();
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        ck_assert_int_eq(e2e_wait_exit(pid, 10), 130);
        ck_assert_msg(tu_now_s() - t0 < 1.0, "took %.2f s to stop", tu_now_s() - t0);
        char *e = slurp(err);
        ck_assert_str_eq(e, "gpuqctl: interrupted\n");
        free(e);
        ck_assert(!e2e_exists(y));
        e2e_no_temp_files();
        e2e_wait_status("cancel", sent0 + 1, 5); /* gpuqctl's cancel reached gpuqd */
        e2e_wait_status("cancelled", cancelled0 + 1, 10);
        e2e_wait_status("in_flight", 0, 10);
        ck_assert_int_eq(counter("cancelled"), cancelled0 + 1); /* counted once */
    }
    e2e_assert_serves();
}
END_TEST

/* Ctrl-C while gpuqctl's request is still being sent and gpuqd does not
 * read it (it waits for staging that another session holds): gpuqctl stops
 * sending and exits 130 at once; nothing of it runs. */
START_TEST(ctl_sigint_while_sending)
{
    if (!is_cpu())
        return;
    const char *const staging[] = {"--total-staging", "1M", "--staging-headroom", "0", NULL};
    e2e_restart_slow(3000, staging);
    /* another session holds all the staging for 3 s: two jobs of 512 KiB */
    enum { HALF = 32768 };
    static double in[HALF], out[2][HALF];
    fill(in, HALF);
    const uint64_t shape[1] = {HALF};
    gpuq_conn *hog = e2e_connect("hog", GPUQ_PRIO_NORMAL);
    gpuq_req *r[2];
    for (int k = 0; k < 2; k++) {
        r[k] = gpuq_req_new("normalize");
        ck_assert_ptr_nonnull(r[k]);
        gpuq_req_set_input(r[k], 0, GPUQ_DT_F64, 1, shape, in, sizeof in);
        gpuq_req_set_output(r[k], 0, out[k], sizeof out[k]);
        ck_assert_int_eq(gpuq_submit_req(hog, r[k], NULL), 0);
    }
    e2e_wait_status("in_flight", 2, 5);
    long long norm0 = counter("normalize");
    /* 512 KiB by socket: more than the socket buffers hold */
    make_npy("big.npy", 64, 1024);
    const char *err = e2e_dpath("err.txt"), *y = e2e_dpath("y.npy");
    const char *args[] = {"--transport", "socket", "normalize", e2e_dpath("big.npy"),
                          "-o",          y,        NULL};
    pid_t pid = spawn(args, NULL, err);
    e2e_wait_status("normalize", norm0 + 1, 5); /* its header is read; its payload waits */
    tu_sleep_s(0.3);
    ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0); /* still sending */
    double t0 = tu_now_s();
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    ck_assert_int_eq(e2e_wait_exit(pid, 10), 130);
    ck_assert_msg(tu_now_s() - t0 < 1.0, "took %.2f s to stop", tu_now_s() - t0);
    char *e = slurp(err);
    ck_assert_str_eq(e, "gpuqctl: interrupted\n");
    free(e);
    ck_assert(!e2e_exists(y));
    e2e_no_temp_files();
    gpuq_result *res = gpuq_result_new();
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(gpuq_wait_req(hog, res), 0);
        gpuq_req_free(r[k]);
    }
    gpuq_result_free(res);
    gpuq_close(hog);
    e2e_wait_status("in_flight", 0, 10);
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_cancel");
    TCase *tc = tcase_create("cancel");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, deadline_exceeded_then_serves_on);
    tcase_add_test(tc, cancel_a_queued_request);
    tcase_add_test(tc, cancel_a_running_request);
    tcase_add_test(tc, ctl_deadline);
    tcase_add_test(tc, ctl_bench_deadline);
    tcase_add_test(tc, ctl_sigint_cancels);
    tcase_add_test(tc, ctl_sigint_while_sending);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
