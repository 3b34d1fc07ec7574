/* test_e2e_cuda.c - what only the CUDA backend has: stream priorities per
 * session, device out-of-memory on one request, and a sticky device error
 * (every in-flight request answered, then a non-zero exit). Faults are
 * injected through gpuqd's test-only hooks GPUQ_TEST_INJECT_OOM=N and
 * GPUQ_TEST_INJECT_STICKY=N. No GPU: skipped, unless GPUQ_REQUIRE_GPU=1. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"

static void start_cuda(const char *env, const char *val)
{
    if (env)
        setenv(env, val, 1);
    tu_daemon_start(&e2e_d, "cuda", NULL);
    if (env)
        unsetenv(env);
}

static gpuq_request norm_req(uint64_t n)
{
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_NORMALIZE;
    r.dtype = GPUQ_DT_F64;
    r.ndim_a = 1;
    r.shape_a[0] = n;
    return r;
}

START_TEST(priorities_per_session)
{
    start_cuda(NULL, NULL);
    gpuq_conn *lo = e2e_connect("lo", GPUQ_PRIO_LOW);
    gpuq_conn *no = e2e_connect("no", GPUQ_PRIO_NORMAL);
    gpuq_conn *hi = e2e_connect("hi", GPUQ_PRIO_HIGH);
    ck_assert_str_eq(gpuq_info(hi)->backend, "cuda");
    int plo = gpuq_info(lo)->stream_priority, pno = gpuq_info(no)->stream_priority,
        phi = gpuq_info(hi)->stream_priority;
    /* CUDA: lower numbers are higher priority; the H100 range is [-5, 0]. */
    ck_assert_int_lt(phi, pno);
    ck_assert_int_lt(pno, plo);
    ck_assert_int_eq(plo, 0);
    /* Work in flight at once on all three streams. */
    enum { N = 16, LEN = 65536 };
    static double x[LEN], y[3][N][LEN];
    for (int j = 0; j < LEN; j++)
        x[j] = j + 1;
    gpuq_conn *cs[3] = {lo, no, hi};
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 3; k++) {
            gpuq_request r = norm_req(LEN);
            r.method = GPUQ_NORM_L1;
            uint64_t id;
            ck_assert_int_eq(gpuq_submit(cs[k], &r, x, sizeof x, NULL, 0, y[k][i], sizeof y[k][i],
                                         &id),
                             0);
        }
    double s = (double)LEN * (LEN + 1) / 2;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 3; k++) {
            gpuq_reply rep;
            ck_assert_int_eq(gpuq_wait(cs[k], &rep), 0);
            ck_assert_double_eq_tol(y[k][i][LEN - 1], LEN / s, 1e-15);
        }
    char js[16384];
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "sessions"), 4);
    gpuq_close(lo), gpuq_close(no), gpuq_close(hi);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}
END_TEST

START_TEST(out_of_memory_fails_one_request)
{
    start_cuda("GPUQ_TEST_INJECT_OOM", "2");
    gpuq_conn *c = e2e_connect("oom", GPUQ_PRIO_NORMAL);
    double x[64], y[64];
    for (int j = 0; j < 64; j++)
        x[j] = j + 1;
    int rcs[4];
    for (int i = 0; i < 4; i++)
        rcs[i] = gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, x, 1, 64, 1, y);
    int oom = 0, ok = 0;
    for (int i = 0; i < 4; i++) {
        oom += rcs[i] == GPUQ_E_NO_MEMORY;
        ok += rcs[i] == 0;
    }
    ck_assert_int_eq(oom, 1);
    ck_assert_int_eq(ok, 3);
    gpuq_close(c);
    e2e_assert_serves();
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}
END_TEST

START_TEST(sticky_error_answers_all_then_exits)
{
    start_cuda("GPUQ_TEST_INJECT_STICKY", "3");
    gpuq_conn *c = e2e_connect("sticky", GPUQ_PRIO_NORMAL);
    enum { N = 6 };
    static double x[4096], y[N][4096];
    for (int j = 0; j < 4096; j++)
        x[j] = 1;
    for (int i = 0; i < N; i++) {
        gpuq_request r = norm_req(4096);
        uint64_t id;
        ck_assert_int_eq(gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[i], sizeof y[i], &id), 0);
    }
    int lost = 0, answered = 0;
    for (int i = 0; i < N; i++) {
        gpuq_reply rep;
        int rc = gpuq_wait(c, &rep);
        if (rc == GPUQ_E_CLOSED || rc == GPUQ_E_IO)
            break;
        answered++;
        lost += rc == GPUQ_E_DEVICE_LOST;
    }
    gpuq_close(c);
    /* Every accepted request got an answer, at least the faulting one is
     * device_lost, and the daemon exits non-zero by itself (exit 3). */
    ck_assert_int_eq(answered, N);
    ck_assert_int_ge(lost, 1);
    int st = 0;
    for (int i = 0; i < 1500 && waitpid(e2e_d.pid, &st, WNOHANG) == 0; i++)
        usleep(20000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "gpuqd status %d", st);
    e2e_d.pid = 0;
    tu_daemon_stop(&e2e_d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, priorities_per_session);
    tcase_add_test(tc, out_of_memory_fails_one_request);
    tcase_add_test(tc, sticky_error_answers_all_then_exits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setenv("GPUQ_TEST_DEVICE", "cuda", 1);
    if (e2e_skip_without_gpu())
        return EXIT_SUCCESS;
    return tu_run_suite(suite());
}
