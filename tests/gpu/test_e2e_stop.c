/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_stop.c - a running request's work stops on the CUDA backend
 * (issue 30, item 6; PROTOCOL.md section 2): cancelled, past its deadline
 * or left by its client, a kNN of a few hundred milliseconds of kernels is
 * answered at once and its kernels end at their next tile, so that the
 * connection's next request is answered long before the kNN would have
 * ended, and status counts it `stopped` (gpuqd counts a request there only
 * when its job ended early: the kernels saw the stop).
 *
 * The kNN's size is found first: float32, 32768 x 32768 rows, d doubled
 * from 256 until its kernel time (the reply's timing) is at least 300 ms
 * (d 2048 at most: 512 MiB of payload). Bounds are fractions of that time
 * measured in the same run. No GPU: skipped (exit 77), unless
 * GPUQ_REQUIRE_GPU=1. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"

/* stdout unbuffered: a failing case's child exits without flushing it */
__attribute__((constructor)) static void unbuffered(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
}

#define M 32768
#define K 4
#define TINY 1024

static float *g_x;
static uint64_t g_d;
static double g_kernel_s; /* the kNN's kernel time */
static float *g_dist;
static int64_t *g_idx;

static gpuq_req *knn_req(bool timing)
{
    const uint64_t shape[2] = {M, g_d};
    gpuq_req *r = gpuq_req_new("knn");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, shape, g_x, M * g_d * 4), 0);
    ck_assert_int_eq(gpuq_req_set_input(r, 1, GPUQ_DT_F32, 2, shape, g_x, M * g_d * 4), 0);
    ck_assert_int_eq(gpuq_req_set_str(r, "metric", "euclidean"), 0);
    ck_assert_int_eq(gpuq_req_set_u64(r, "k", K), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, g_dist, M * K * 4), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 1, g_idx, M * K * 8), 0);
    ck_assert_int_eq(gpuq_req_set_timing(r, timing), 0);
    return r;
}

/* A tiny normalize on c answers correctly; returns how long it took. It
 * asks for timing, which keeps it out of batches: it runs on the session's
 * own stream, behind what is left of the stopped kNN (a batch would run on
 * its level's lane and wait for nothing). */
static double tiny(gpuq_conn *c)
{
    static float in[TINY], out[TINY];
    for (int i = 0; i < TINY; i++)
        in[i] = (float)(i + 1);
    const uint64_t shape[1] = {TINY};
    gpuq_req *r = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F32, 1, shape, in, sizeof in), 0);
    ck_assert_int_eq(gpuq_req_set_str(r, "method", "sum"), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, out, sizeof out), 0);
    ck_assert_int_eq(gpuq_req_set_timing(r, true), 0);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    double t0 = tu_now_s();
    ck_assert_msg(gpuq_call_req(c, r, res) == 0, "%s", gpuq_errmsg(c));
    double t = tu_now_s() - t0;
    gpuq_result_free(res);
    gpuq_req_free(r);
    const double sum = TINY * (TINY + 1) / 2.0;
    for (int i = 0; i < TINY; i++)
        ck_assert_double_eq_tol(out[i], (i + 1) / sum, 1e-6 * (i + 1) / sum);
    return t;
}

static long long stopped_now(void)
{
    long long v = e2e_status_int("stopped");
    ck_assert_msg(v >= 0, "status has no \"stopped\"");
    return v;
}

/* One kNN on c with timing: *kernel its kernels' time, *before the time
 * from the call until they started (the payload, its upload). */
static void knn_timed(gpuq_conn *c, gpuq_result *res, double *before, double *kernel)
{
    gpuq_req *r = knn_req(true);
    double t0 = tu_now_s(), st[2] = {0, 0};
    ck_assert_msg(gpuq_call_req(c, r, res) == 0, "%s", gpuq_errmsg(c));
    double wall = tu_now_s() - t0;
    ck_assert_int_eq(gpuq_result_timing(res, GPUQ_TIMING_KERNEL, &st[0]), 0);
    ck_assert_int_eq(gpuq_result_timing(res, GPUQ_TIMING_D2H, &st[1]), 0);
    gpuq_req_free(r);
    *kernel = st[0] / 1e6;
    *before = wall - (st[0] + st[1]) / 1e6;
}

/* gpuqd on CUDA, and the kNN's size and times. */
static void setup(void)
{
    tu_daemon_start(&e2e_d, "cuda", NULL);
    g_x = malloc((size_t)M * 2048 * sizeof *g_x);
    g_dist = malloc((size_t)M * K * sizeof *g_dist);
    g_idx = malloc((size_t)M * K * sizeof *g_idx);
    ck_assert(g_x && g_dist && g_idx);
    for (size_t i = 0; i < (size_t)M * 2048; i++)
        g_x[i] = (float)((i * 2654435761u) % 1000u) / 1000.0f;
    gpuq_conn *c = e2e_connect("size", GPUQ_PRIO_NORMAL);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    for (g_d = 256;; g_d *= 2) {
        double before = 0;
        knn_timed(c, res, &before, &g_kernel_s);
        printf("test_e2e_stop: knn %d x %d x %llu: kernels %.0f ms, starting %.0f ms after the "
               "call\n",
               M, M, (unsigned long long)g_d, g_kernel_s * 1e3, before * 1e3);
        if (g_kernel_s >= 0.3 || g_d >= 2048)
            break;
    }
    ck_assert_msg(g_kernel_s >= 0.15, "the kNN's kernels take only %.0f ms", g_kernel_s * 1e3);
    gpuq_result_free(res);
    gpuq_close(c);
}

static void teardown(void)
{
    free(g_x), free(g_dist), free(g_idx);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}

/* Cancel it a quarter of its kernel time after it was sent: answered
 * cancelled, the cancel says it was running, the next request on the
 * connection answered within half the kernel time, and it stopped. */
START_TEST(cancel_stops_knn)
{
    long long s0 = stopped_now();
    gpuq_conn *c = e2e_connect("cancel", GPUQ_PRIO_NORMAL);
    gpuq_req *r = knn_req(false);
    uint64_t id, cid;
    ck_assert_int_eq(gpuq_submit_req(c, r, &id), 0); /* returns once the payload is sent */
    usleep((useconds_t)(g_kernel_s / 4 * 1e6));
    ck_assert_int_eq(gpuq_submit_cancel(c, id, &cid), 0);
    double t0 = tu_now_s();
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_CANCELLED);
    ck_assert_uint_eq(gpuq_result_id(res), id);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    uint64_t dropped = 9, running = 9;
    ck_assert_int_eq(gpuq_result_cancel_counts(res, &dropped, &running), 0);
    ck_assert_uint_eq(running, 1);
    double next = tiny(c), since = tu_now_s() - t0;
    printf("test_e2e_stop: after the cancel the next request took %.1f ms\n", next * 1e3);
    ck_assert_msg(since < g_kernel_s / 2, "answered %.0f ms after the cancel (kernels: %.0f ms)",
                  since * 1e3, g_kernel_s * 1e3);
    e2e_wait_status("stopped", s0 + 1, 10);
    gpuq_result_free(res);
    gpuq_req_free(r);
    gpuq_close(c);
}
END_TEST

/* A deadline a third of the kernel time after the kernels start: answered
 * deadline_exceeded, the next request soon after, and it stopped. The
 * inputs are in a shared-memory arena, so that no payload crosses the
 * socket: the kernels start a stable few milliseconds after the call (over
 * the socket the payload's time varied by more than a third of the
 * kernels'). */
START_TEST(deadline_stops_knn)
{
    long long s0 = stopped_now(), e0 = e2e_status_int("expired");
    gpuq_conn *c = e2e_connect("deadline", GPUQ_PRIO_NORMAL);
    gpuq_arena *a = NULL;
    ck_assert_msg(gpuq_arena_open(c, M * g_d * 4, &a) == 0, "arena: %s", gpuq_errmsg(c));
    float *ax = gpuq_arena_alloc(a, M * g_d * 4);
    ck_assert_ptr_nonnull(ax);
    memcpy(ax, g_x, M * g_d * 4);
    float *keep = g_x;
    g_x = ax; /* knn_req's inputs: by reference */
    gpuq_result *res = gpuq_result_new();
    double before = 0, kernel = 0; /* when its kernels start, and how long they take */
    knn_timed(c, res, &before, &kernel);
    gpuq_req *r = knn_req(false);
    g_x = keep;
    uint64_t ms = (uint64_t)((before + kernel / 3) * 1e3) + 1;
    printf("test_e2e_stop: the kernels start %.0f ms after the call and take %.0f ms: "
           "deadline %llu ms\n",
           before * 1e3, kernel * 1e3, (unsigned long long)ms);
    ck_assert_int_eq(gpuq_req_set_u64(r, "deadline_ms", ms), 0);
    ck_assert_int_eq(gpuq_call_req(c, r, res), GPUQ_E_DEADLINE_EXCEEDED);
    double t0 = tu_now_s();
    double next = tiny(c), since = tu_now_s() - t0;
    printf("test_e2e_stop: after the deadline the next request took %.1f ms\n", next * 1e3);
    ck_assert_msg(since < kernel / 2, "answered %.0f ms after the deadline (kernels: %.0f ms)",
                  since * 1e3, kernel * 1e3);
    e2e_wait_status("stopped", s0 + 1, 10);
    ck_assert_int_eq(e2e_status_int("expired"), e0 + 1);
    gpuq_result_free(res);
    gpuq_req_free(r);
    gpuq_close(c);
}
END_TEST

/* Its client leaves a quarter of the kernel time after sending it: the job
 * ends (stopped) within half the kernel time of the close. */
START_TEST(disconnect_stops_knn)
{
    long long s0 = stopped_now();
    gpuq_conn *c = e2e_connect("leaves", GPUQ_PRIO_NORMAL);
    gpuq_req *r = knn_req(false);
    uint64_t id;
    ck_assert_int_eq(gpuq_submit_req(c, r, &id), 0);
    usleep((useconds_t)(g_kernel_s / 4 * 1e6));
    double t0 = tu_now_s();
    gpuq_close(c);
    e2e_wait_status("stopped", s0 + 1, 10); /* polls every 20 ms */
    double t = tu_now_s() - t0;
    ck_assert_msg(t < g_kernel_s / 2, "stopped %.0f ms after the close (kernels: %.0f ms)", t * 1e3,
                  g_kernel_s * 1e3);
    gpuq_req_free(r);
    gpuq_conn *o = e2e_connect("after", GPUQ_PRIO_NORMAL);
    tiny(o);
    gpuq_close(o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_stop");
    TCase *tc = tcase_create("stop");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, cancel_stops_knn);
    tcase_add_test(tc, deadline_stops_knn);
    tcase_add_test(tc, disconnect_stops_knn);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setenv("GPUQ_TEST_DEVICE", "cuda", 1);
    e2e_skip_without_gpu(); /* no GPU: exits 77 (ctest: Skipped) */
    return tu_run_suite(suite());
}
