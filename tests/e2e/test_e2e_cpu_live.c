/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_cpu_live.c - large CPU jobs do not stall other sessions (liveness).
 *
 * The CPU backend runs a large job's rows on every usable CPU
 * (server/backends/backend_run.c), and as many large jobs at once as
 * libuv's pool has threads (4 by default), so with four large pairwise
 * jobs running every core is busy. gpuqd's loop thread runs no kernel: a
 * ping from another session, answered on the loop, still comes back. Each
 * of the pings sent while the jobs run must come back within PING_BOUND_S,
 * a generous bound (a liveness check on a shared machine, not a timing of
 * speed), at least MIN_PINGS of them while every job still runs, and the
 * jobs' results are checked at a few entries against a long double sum.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq.h"

enum { JOBS = 4, TM = 2000, MIN_PINGS = 3 };

/* The jobs' row length: 512 per 2 CPUs (at most 8192), so that a job runs
 * about as long on a 16-core machine as on CI's 2 cores (the tiled AVX2
 * kernel finished all four within the first 0.2 s on 16 cores at 512). */
static size_t td = 512;

static size_t row_len(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    size_t len = 512 * (size_t)(n > 2 ? n / 2 : 1);
    return len < 8192 ? len : 8192;
}
#define PING_BOUND_S 3.0

typedef struct big_call {
    const float *x;
    float *d;
    int rc;
    int done; /* atomic: the call returned */
} big_call;

static void *big_pairwise(void *arg)
{
    big_call *b = arg;
    gpuq_conn *c = e2e_connect("live-big", GPUQ_PRIO_NORMAL);
    b->rc = gpuq_pairwise(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, b->x, b->x, TM, TM, td, b->d);
    gpuq_close(c);
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int all_running(const big_call *b)
{
    for (int i = 0; i < JOBS; i++)
        if (__atomic_load_n(&b[i].done, __ATOMIC_ACQUIRE))
            return 0;
    return 1;
}

START_TEST(ping_while_cores_are_busy)
{
    gpuq_conn *p = e2e_connect("live-ping", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_ping(p), 0);
    td = row_len();
    const float *x = e2e_rand_buf((size_t)TM * td * 4, 1);
    big_call b[JOBS];
    pthread_t t[JOBS];
    for (int i = 0; i < JOBS; i++) {
        b[i] = (big_call){.x = x, .d = malloc((size_t)TM * TM * 4)};
        ck_assert_ptr_nonnull(b[i].d);
        ck_assert_int_eq(pthread_create(&t[i], NULL, big_pairwise, &b[i]), 0);
    }
    tu_sleep_s(0.2); /* the jobs' uploads land and their threads start */
    int during = 0, sent = 0;
    double worst = 0;
    while (all_running(b) && sent < 10000) {
        double t0 = tu_now_s();
        ck_assert_msg(gpuq_ping(p) == 0, "ping: %s", gpuq_errmsg(p));
        double dt = tu_now_s() - t0;
        worst = dt > worst ? dt : worst;
        sent++;
        during += all_running(b);
        tu_sleep_s(0.02);
    }
    for (int i = 0; i < JOBS; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(b[i].rc == 0, "job %d: %d", i, b[i].rc);
    }
    ck_assert_msg(worst <= PING_BOUND_S, "a ping took %.3f s while the jobs ran", worst);
    ck_assert_msg(during >= MIN_PINGS, "%d pings answered while all %d jobs ran (want %d)", during,
                  JOBS, MIN_PINGS);
    /* the jobs computed distances: a few entries of each */
    static const size_t at[][2] = {{0, 0}, {TM - 1, 3}, {700, 701}, {1, TM - 1}};
    for (int i = 0; i < JOBS; i++)
        for (size_t q = 0; q < sizeof at / sizeof at[0]; q++) {
            size_t r = at[q][0], c = at[q][1];
            long double s = 0;
            for (size_t k = 0; k < td; k++) {
                long double v = (long double)x[r * td + k] - x[c * td + k];
                s += v * v;
            }
            double want = (double)sqrtl(s), got = b[i].d[r * TM + c];
            ck_assert_msg(fabs(got - want) <= 1e-6 * want, "job %d: d(%zu, %zu) = %.9g, want %.9g",
                          i, r, c, got, want);
        }
    for (int i = 0; i < JOBS; i++)
        free(b[i].d);
    free((void *)x);
    ck_assert_int_eq(gpuq_ping(p), 0);
    gpuq_close(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("e2e_cpu_live");
    TCase *tc = tcase_create("cpu_live");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, ping_while_cores_are_busy);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
