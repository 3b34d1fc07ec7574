/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_sched.c - gpuqd's scheduler (CPU and CUDA backends): priority order
 * of queued work, the bulk window, deadlines (queued, running, waiting for
 * staging, bad values), cancel by id (queued, running, unknown id, missing
 * key) and a disconnect that drops queued work at once.
 *
 * Slow jobs come from the backends' GPUQ_TEST_SLOW_MS hook (each job first
 * sleeps that long: on a pool thread, or in a kernel on the session's
 * stream); --device-window 1 makes the others
 * wait in the queue. Each job is a float64 normalize of N values: 16 KiB of
 * input + output, so one staging slot of 16 KiB (PROTOCOL.md section 2). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"
#include "mpread.h"

enum { N = 1024, NJOBS = 16 };
#define JOB_BYTES ((long long)(2 * N * sizeof(double)))

static double x[N];
static double y[NJOBS][N];

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool is_cpu(void)
{
    return strcmp(tu_test_device(), "cpu") == 0;
}

/* A daemon whose jobs take slow_ms each, with extra flags. One job runs
 * first, alone: on CUDA a kernel's first launch loads it (lazy loading),
 * which waits for the work on the device, so the cases start with every
 * kernel they use loaded. */
static void start_slow(int slow_ms, const char *const *extra)
{
    char v[16];
    snprintf(v, sizeof v, "%d", slow_ms);
    setenv("GPUQ_TEST_SLOW_MS", v, 1);
    e2e_start(extra);
    unsetenv("GPUQ_TEST_SLOW_MS");
    gpuq_conn *c = e2e_connect("warm-up", GPUQ_PRIO_LOW); /* no level above low active */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, N, y[0]), 0);
    gpuq_close(c);
}

static void setup(void)
{
    for (int i = 0; i < N; i++)
        x[i] = i + 1;
}

/* Submit job k (a normalize into y[k]) with timing and a deadline (0:
 * none); returns its id. */
static uint64_t submit_job(gpuq_conn *c, int k, uint64_t deadline_ms)
{
    gpuq_request r = e2e_norm_req(N);
    r.timing = true;
    r.deadline_ms = deadline_ms;
    memset(y[k], 0, sizeof y[k]);
    uint64_t id;
    ck_assert_int_eq(gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[k], sizeof y[k], &id), 0);
    return id;
}

/* Wait for the oldest reply; *rep gets it. Returns its status. */
static int wait_job(gpuq_conn *c, gpuq_reply *rep)
{
    memset(rep, 0, sizeof *rep);
    return gpuq_wait(c, rep);
}

/* y[k] is the normalize of x (sum 1, first value 1 / sum). */
static void check_result(int k)
{
    double sum = (double)N * (N + 1) / 2;
    ck_assert_msg(y[k][0] > 0.999999 / sum && y[k][0] < 1.000001 / sum, "y[%d][0] = %g", k,
                  y[k][0]);
}

/* Submit a cancel of target (builder API: its reply info comes back). */
static gpuq_req *submit_cancel(gpuq_conn *c, uint64_t target)
{
    gpuq_req *q = gpuq_req_new("cancel");
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(gpuq_req_set_u64(q, "request", target), 0);
    uint64_t id;
    ck_assert_int_eq(gpuq_submit_req(c, q, &id), 0);
    return q;
}

/* Wait for a cancel's reply: status 0 and its counts. */
static void wait_cancel(gpuq_conn *c, gpuq_req *q, long long dropped, long long running)
{
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    const uint8_t *info;
    size_t len;
    ck_assert_int_eq(gpuq_result_info(res, &info, &len), 0);
    gpuq_mpr r;
    gpuq_mpr_init(&r, info, len);
    char js[256];
    ck_assert_int_eq(gpuq_mpr_to_json(&r, js, sizeof js), 0);
    ck_assert_msg(e2e_json_int(js, "dropped") == dropped && e2e_json_int(js, "running") == running,
                  "cancel info %s; expected dropped %lld, running %lld", js, dropped, running);
    gpuq_result_free(res);
    gpuq_req_free(q);
}

/* Queued work goes by priority, then arrival: a high-priority request sent
 * after three low ones runs second (right after the one that was running),
 * so it waits less than the second low one. */
START_TEST(priority_order)
{
    const char *extra[] = {"--device-window", "1", NULL};
    start_slow(200, extra);
    gpuq_conn *lo = e2e_connect("low", GPUQ_PRIO_LOW);
    gpuq_conn *hi = e2e_connect("high", GPUQ_PRIO_HIGH);
    for (int k = 0; k < 3; k++)
        submit_job(lo, k, 0);
    usleep(60000); /* the first runs, two wait */
    submit_job(hi, 3, 0);
    usleep(30000);
    ck_assert_int_eq(e2e_status_int("queued"), 3);
    gpuq_reply h, l[3];
    ck_assert_int_eq(wait_job(hi, &h), 0);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(wait_job(lo, &l[k]), 0);
    for (int k = 0; k < 4; k++)
        check_result(k);
    /* high waited for the one running (~140 ms); low #2 for it and high
     * (~400 ms); in arrival order high would have waited ~540 ms */
    ck_assert_msg(h.timing.queue_us < l[1].timing.queue_us,
                  "high waited %.0f us, the second low one %.0f us", h.timing.queue_us,
                  l[1].timing.queue_us);
    ck_assert_msg(h.timing.queue_us < 350e3, "high waited %.0f us", h.timing.queue_us);
    ck_assert_int_eq(e2e_status_int("queued"), 0);
    gpuq_close(lo);
    gpuq_close(hi);
}
END_TEST

/* Three low requests (of three sessions) run side by side while no higher
 * level is about; within priority_hold of a high request, bulk_window (1
 * byte: one at a time) holds them back. */
START_TEST(bulk_window_holds_lower)
{
    const char *extra[] = {"--bulk-window", "1", "--priority-hold", "30", NULL};
    start_slow(150, extra);
    gpuq_conn *lo[3];
    for (int k = 0; k < 3; k++)
        lo[k] = e2e_connect("low", GPUQ_PRIO_LOW);
    gpuq_conn *hi = e2e_connect("high", GPUQ_PRIO_HIGH);
    gpuq_reply rep[3];
    for (int k = 0; k < 3; k++)
        submit_job(lo[k], k, 0);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(wait_job(lo[k], &rep[k]), 0);
    for (int k = 0; k < 3; k++)
        ck_assert_msg(rep[k].timing.queue_us < 100e3, "alone, low #%d waited %.0f us", k,
                      rep[k].timing.queue_us);
    submit_job(hi, 3, 0);
    ck_assert_int_eq(wait_job(hi, &rep[0]), 0);
    for (int k = 0; k < 3; k++)
        submit_job(lo[k], k, 0);
    double most = 0;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(wait_job(lo[k], &rep[k]), 0);
        most = rep[k].timing.queue_us > most ? rep[k].timing.queue_us : most;
    }
    for (int k = 0; k < 4; k++)
        check_result(k);
    /* one at a time: the last one waits for two (~300 ms) */
    ck_assert_msg(most > 250e3, "with high active, the low ones waited at most %.0f us", most);
    for (int k = 0; k < 3; k++)
        gpuq_close(lo[k]);
    gpuq_close(hi);
}
END_TEST

/* A queued request whose deadline passes is dropped (it never runs) and
 * answered deadline_exceeded right after the reply before it. */
START_TEST(deadline_queued_dropped)
{
    const char *extra[] = {"--device-window", "1", NULL};
    start_slow(300, extra);
    gpuq_conn *c = e2e_connect("dl", GPUQ_PRIO_NORMAL);
    double t0 = now_ms();
    submit_job(c, 0, 0);
    submit_job(c, 1, 50);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(0);
    ck_assert_int_eq(wait_job(c, &rep), GPUQ_E_DEADLINE_EXCEEDED);
    double dt = now_ms() - t0;
    ck_assert_msg(dt < 520, "the expired request's reply came after %.0f ms (did it run?)", dt);
    ck_assert_msg(strstr(rep.message, "50 ms") != NULL, "message: %s", rep.message);
    ck_assert_int_eq(e2e_status_int("expired"), 1);
    ck_assert_int_eq(e2e_status_int("bytes"), 2 * JOB_BYTES); /* the warm-up and one job ran */
    /* the session goes on */
    submit_job(c, 2, 0);
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(2);
    gpuq_close(c);
}
END_TEST

/* A request that runs past its deadline: answered deadline_exceeded at the
 * deadline, not when the work ends (PROTOCOL.md section 2); its work stops
 * at once on both backends (its staging back long before the job's 600
 * ms); the connection serves on. */
START_TEST(deadline_running)
{
    start_slow(600, NULL);
    gpuq_conn *c = e2e_connect("dl", GPUQ_PRIO_NORMAL);
    double t0 = now_ms();
    submit_job(c, 0, 50);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(c, &rep), GPUQ_E_DEADLINE_EXCEEDED);
    double dt = now_ms() - t0;
    ck_assert_msg(dt >= 49 && dt < 300, "a 50 ms deadline answered after %.0f ms", dt);
    ck_assert_msg(strstr(rep.message, "while it ran") != NULL, "message: %s", rep.message);
    ck_assert_msg(y[0][0] == 0, "an expired request's result was written");
    ck_assert_int_eq(e2e_status_int("expired"), 1);
    ck_assert_int_eq(e2e_status_int("in_flight"), 0);
    /* stopped at its next slice (CUDA: the sleep kernel reads its gate):
     * staging back at once */
    e2e_wait_status("staging_bytes", 0, 10);
    ck_assert_msg(now_ms() - t0 < 450, "the expired job ran on for %.0f ms", now_ms() - t0);
    submit_job(c, 1, 5000); /* a deadline that is met */
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(1);
    gpuq_close(c);
}
END_TEST

/* A request that waits for staging past its deadline is answered, its
 * payload read and discarded, and the next request is served. */
START_TEST(deadline_waiting_for_staging)
{
    const char *extra[] = {"--session-staging", "24K", NULL};
    start_slow(300, extra);
    gpuq_conn *c = e2e_connect("dl", GPUQ_PRIO_NORMAL);
    submit_job(c, 0, 0);
    submit_job(c, 1, 50); /* 16 KiB more than the session may hold: waits */
    submit_job(c, 2, 0);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(0);
    ck_assert_int_eq(wait_job(c, &rep), GPUQ_E_DEADLINE_EXCEEDED);
    ck_assert_msg(strstr(rep.message, "staging") != NULL, "message: %s", rep.message);
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(2);
    ck_assert_int_eq(e2e_status_int("expired"), 1);
    ck_assert_int_eq(e2e_status_int("bytes"), 3 * JOB_BYTES); /* the warm-up, #0 and #2 */
    gpuq_close(c);
}
END_TEST

/* deadline_ms over a day is bad_argument; on a control op it is ignored. */
START_TEST(deadline_bad)
{
    e2e_start(NULL);
    gpuq_conn *c = e2e_connect("dl", GPUQ_PRIO_NORMAL);
    gpuq_request r = e2e_norm_req(N);
    r.deadline_ms = 86400001;
    gpuq_reply rep;
    ck_assert_int_eq(gpuq_call(c, &r, x, sizeof x, NULL, 0, y[0], sizeof y[0], &rep),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(rep.message, "deadline_ms") != NULL, "message: %s", rep.message);
    gpuq_request p;
    gpuq_request_init(&p);
    p.op = GPUQ_OP_PING;
    p.deadline_ms = 1;
    ck_assert_int_eq(gpuq_call(c, &p, NULL, 0, NULL, 0, NULL, 0, &rep), 0);
    r.deadline_ms = 86400000;
    ck_assert_int_eq(gpuq_call(c, &r, x, sizeof x, NULL, 0, y[0], sizeof y[0], &rep), 0);
    check_result(0);
    gpuq_close(c);
}
END_TEST

/* cancel of a queued request: dropped (never runs), answered cancelled, its
 * staging back at once; the cancel's reply counts it. */
START_TEST(cancel_queued)
{
    const char *extra[] = {"--device-window", "1", NULL};
    start_slow(600, extra);
    gpuq_conn *c = e2e_connect("cx", GPUQ_PRIO_NORMAL);
    submit_job(c, 0, 0);
    uint64_t id1 = submit_job(c, 1, 0);
    usleep(80000);
    ck_assert_int_eq(e2e_status_int("staging_bytes"), 2 * JOB_BYTES);
    gpuq_req *q = submit_cancel(c, id1);
    usleep(80000);
    ck_assert_int_eq(e2e_status_int("staging_bytes"), JOB_BYTES); /* while the first still runs */
    ck_assert_int_eq(e2e_status_int("queued"), 0);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(0);
    ck_assert_int_eq(wait_job(c, &rep), GPUQ_E_CANCELLED);
    wait_cancel(c, q, 1, 0);
    ck_assert_int_eq(e2e_status_int("cancelled"), 1);
    ck_assert_int_eq(e2e_status_int("bytes"), 2 * JOB_BYTES); /* the warm-up and #0 */
    gpuq_close(c);
}
END_TEST

/* cancel of a running request: answered cancelled at once (no result), not
 * when the work ends; on the CPU the work stops at once. */
START_TEST(cancel_running)
{
    start_slow(800, NULL);
    gpuq_conn *c = e2e_connect("cx", GPUQ_PRIO_NORMAL);
    uint64_t id0 = submit_job(c, 0, 0);
    usleep(60000);
    double t0 = now_ms();
    gpuq_req *q = submit_cancel(c, id0);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(c, &rep), GPUQ_E_CANCELLED);
    double dt = now_ms() - t0;
    ck_assert_msg(dt < 300, "the cancelled request was answered after %.0f ms", dt);
    ck_assert_msg(y[0][0] == 0, "a cancelled request's result was written");
    wait_cancel(c, q, 0, 1);
    e2e_wait_status("staging_bytes", 0, 10); /* stopped at once, as above */
    ck_assert_msg(now_ms() - t0 < 500, "the cancelled job ran on for %.0f ms", now_ms() - t0);
    ck_assert_int_eq(e2e_status_int("cancelled"), 1);
    submit_job(c, 1, 0);
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(1);
    gpuq_close(c);
}
END_TEST

/* cancel of an id that matches nothing is not an error; without "request"
 * it is bad_argument. The connection serves on. */
START_TEST(cancel_unknown_and_missing)
{
    e2e_start(NULL);
    gpuq_conn *c = e2e_connect("cx", GPUQ_PRIO_NORMAL);
    gpuq_req *q = submit_cancel(c, 999);
    wait_cancel(c, q, 0, 0);
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_CANCEL;
    gpuq_reply rep;
    ck_assert_int_eq(gpuq_call(c, &r, NULL, 0, NULL, 0, NULL, 0, &rep), GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(rep.message, "request") != NULL, "message: %s", rep.message);
    submit_job(c, 0, 0);
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(0);
    ck_assert_int_eq(e2e_status_int("cancelled"), 0);
    gpuq_close(c);
}
END_TEST

/* A client that leaves with six requests in flight: the five queued ones
 * are dropped at once (staging back), the running one stopped at once
 * (both backends); none of the dropped ones runs. */
START_TEST(disconnect_drops_queued)
{
    const char *extra[] = {"--device-window", "1", NULL};
    start_slow(400, extra);
    gpuq_conn *c = e2e_connect("gone", GPUQ_PRIO_NORMAL);
    for (int k = 0; k < 6; k++)
        submit_job(c, k, 0);
    usleep(80000);
    ck_assert_int_eq(e2e_status_int("queued"), 5);
    gpuq_close(c);
    usleep(80000);
    char js[16384];
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "queued"), 0);
    ck_assert_int_eq(e2e_json_int(js, "cancelled"), 6);
    /* the running one stopped too (CUDA: the slow hook's kernel reads its
     * stop gate), its staging released */
    ck_assert_int_eq(e2e_json_int(js, "staging_bytes"), 0);
    usleep(450000);
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "in_flight"), 0);
    ck_assert_int_eq(e2e_json_int(js, "staging_bytes"), 0);
    ck_assert_int_eq(e2e_json_int(js, "bytes"), 2 * JOB_BYTES); /* the warm-up and #0 */
    e2e_assert_serves();
}
END_TEST

/* ---- the CPU backend with the default device_window (issue 30): it runs
 * as many jobs as its thread pool has threads (UV_THREADPOOL_SIZE, 4 here)
 * and the rest wait in the scheduler's queue, where priority, cancel,
 * deadlines and a disconnect reach them. Before, every job went to libuv's
 * FIFO pool at once. */

static void start_pool(int slow_ms)
{
    setenv("UV_THREADPOOL_SIZE", "4", 1);
    start_slow(slow_ms, NULL);
    unsetenv("UV_THREADPOOL_SIZE");
}

/* 12 low-priority jobs of 300 ms: 4 run, 8 wait in the queue; a
 * high-priority one sent then runs as soon as a thread is free (about
 * 300 ms later), not after the 12 (1.2 s). */
START_TEST(cpu_pool_priority)
{
    if (!is_cpu()) {
        e2e_start(NULL); /* for the teardown */
        return;          /* CUDA: device_window alone (covered above) */
    }
    start_pool(300);
    gpuq_conn *lo = e2e_connect("lo", GPUQ_PRIO_LOW), *hi = e2e_connect("hi", GPUQ_PRIO_HIGH);
    for (int k = 0; k < 12; k++)
        submit_job(lo, k, 0);
    e2e_wait_status("queued", 8, 5);
    double t0 = now_ms();
    submit_job(hi, 12, 0);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(hi, &rep), 0);
    double dt = now_ms() - t0;
    check_result(12);
    ck_assert_msg(dt < 750, "the high-priority job waited %.0f ms behind low ones", dt);
    for (int k = 0; k < 12; k++) {
        ck_assert_int_eq(wait_job(lo, &rep), 0);
        check_result(k);
    }
    gpuq_close(lo);
    gpuq_close(hi);
}
END_TEST

/* Cancelling the last of 8 jobs finds it queued (dropped, never run), and a
 * 100 ms deadline of another session's job is kept. */
START_TEST(cpu_pool_cancel_and_deadline)
{
    if (!is_cpu()) {
        e2e_start(NULL); /* for the teardown */
        return;
    }
    start_pool(400);
    gpuq_conn *c = e2e_connect("cx", GPUQ_PRIO_NORMAL), *d = e2e_connect("dl", GPUQ_PRIO_NORMAL);
    uint64_t ids[8];
    for (int k = 0; k < 8; k++)
        ids[k] = submit_job(c, k, 0);
    e2e_wait_status("queued", 4, 5);
    double t0 = now_ms();
    submit_job(d, 8, 100);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(d, &rep), GPUQ_E_DEADLINE_EXCEEDED);
    double dt = now_ms() - t0;
    ck_assert_msg(dt >= 99 && dt < 300, "a 100 ms deadline answered after %.0f ms", dt);
    gpuq_req *q = submit_cancel(c, ids[7]);
    for (int k = 0; k < 7; k++) {
        ck_assert_int_eq(wait_job(c, &rep), 0);
        check_result(k);
    }
    ck_assert_int_eq(wait_job(c, &rep), GPUQ_E_CANCELLED);
    ck_assert_msg(strstr(rep.message, "before it ran") != NULL, "message: %s", rep.message);
    wait_cancel(c, q, 1, 0);
    ck_assert_int_eq(e2e_status_int("bytes"), 8 * JOB_BYTES); /* the warm-up and #0..#6 */
    gpuq_close(c);
    gpuq_close(d);
}
END_TEST

/* A client that leaves with 16 jobs of 1 s in flight: its 4 running jobs
 * stop and its 12 queued ones are dropped, so another client's job runs
 * at once instead of after 4 s, and all staging is back. */
START_TEST(cpu_pool_disconnect)
{
    if (!is_cpu()) {
        e2e_start(NULL); /* for the teardown */
        return;
    }
    start_pool(1000);
    gpuq_conn *gone = e2e_connect("gone", GPUQ_PRIO_NORMAL);
    for (int k = 0; k < 16; k++)
        submit_job(gone, k, 0);
    e2e_wait_status("queued", 12, 5);
    gpuq_close(gone);
    gpuq_conn *c = e2e_connect("next", GPUQ_PRIO_NORMAL);
    double t0 = now_ms();
    submit_job(c, 0, 0);
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(c, &rep), 0);
    double dt = now_ms() - t0;
    check_result(0);
    /* its own 1 s, not the 4 s of the leaver's work */
    ck_assert_msg(dt < 1700, "the next client's job took %.0f ms", dt);
    e2e_wait_status("staging_bytes", 0, 5);
    ck_assert_int_eq(e2e_status_int("cancelled"), 16);
    /* the warm-up, the 4 that ran (stopped) and c's: none of the 12 ran */
    ck_assert_int_eq(e2e_status_int("bytes"), 6 * JOB_BYTES);
    gpuq_close(c);
}
END_TEST

/* Sessions that open and close while a long job runs are served at once:
 * no CUDA call on those paths waits for the device (cudaFree and
 * cudaFreeHost would, stalling every session until the job ended). */
START_TEST(open_close_while_busy)
{
    start_slow(1500, NULL);
    gpuq_conn *c = e2e_connect("busy", GPUQ_PRIO_NORMAL);
    submit_job(c, 0, 0);
    usleep(100000);
    for (int i = 0; i < 3; i++) {
        double t0 = now_ms();
        ck_assert_int_ge(e2e_status_int("sessions"), 2); /* a session opened and closed */
        double dt = now_ms() - t0;
        ck_assert_msg(dt < 400, "a status round trip took %.0f ms beside a running job", dt);
    }
    gpuq_reply rep;
    ck_assert_int_eq(wait_job(c, &rep), 0);
    check_result(0);
    gpuq_close(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_sched");
    TCase *tc = tcase_create("sched");
    tcase_add_checked_fixture(tc, setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, priority_order);
    tcase_add_test(tc, bulk_window_holds_lower);
    tcase_add_test(tc, deadline_queued_dropped);
    tcase_add_test(tc, deadline_running);
    tcase_add_test(tc, deadline_waiting_for_staging);
    tcase_add_test(tc, deadline_bad);
    tcase_add_test(tc, cancel_queued);
    tcase_add_test(tc, cancel_running);
    tcase_add_test(tc, cancel_unknown_and_missing);
    tcase_add_test(tc, disconnect_drops_queued);
    tcase_add_test(tc, open_close_while_busy);
    tcase_add_test(tc, cpu_pool_priority);
    tcase_add_test(tc, cpu_pool_cancel_and_deadline);
    tcase_add_test(tc, cpu_pool_disconnect);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* the CUDA run: exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
