/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_pin.c - staging grown and given back off the loop, arenas pinned
 * off it (issue 28), from a client's side.
 *
 * Several connections at once send normalize requests whose sizes need new
 * staging (chunks and stand-alone slots of several classes) while the
 * others' requests run: every reply is right, and status's loop_pins (pin
 * and unpin calls made on the loop thread) stays 0. Staging is then given
 * back after staging_release_after (freed on the pinning thread) and grown
 * again. Arenas (libgpuq's staging arena: open, grown by close and reopen,
 * close) carry requests with correct results. On the CPU backend an
 * allocation failure is injected (GPUQ_TEST_HOST_ALLOC_FAIL_BYTES): the
 * waiting request gets no_memory with the reason, and later requests work.
 *
 * The same suite runs on the CUDA backend as test_e2e_pin_cuda (labels gpu
 * and e2e: tests/e2e/CMakeLists.txt makes a _cuda test of every suite),
 * where loop_pins counts cudaHostAlloc,
 * cudaFreeHost, cudaHostRegister and cudaHostUnregister; there it is
 * skipped without a GPU (exit 77) unless GPUQ_REQUIRE_GPU=1.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"

#define CLIENTS 4
#define ROUNDS 10

/* Element counts of float64 1-D normalizes: input + output are 16 bytes an
 * element, so 4 KiB classes, 1 MiB chunked ones, and stand-alone slots of
 * 4.8 MiB and 11.2 MiB. */
static const uint64_t SIZES[] = {100, 65000, 300007, 700001, 3001};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define MAXN 1200000

typedef struct worker {
    gpuq_conn *c;
    int idx;
    int calls, bad;
    char why[200];
} worker;

static void fill(double *x, uint64_t n, int salt)
{
    for (uint64_t i = 0; i < n; i++)
        x[i] = (double)((i * 7 + (uint64_t)salt) % 97) + 1.0;
}

/* out is x normalized by its sum. */
static int check_sum(const double *x, const double *out, uint64_t n)
{
    double s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += x[i];
    for (uint64_t i = 0; i < n; i++)
        if (fabs(out[i] - x[i] / s) > 1e-12 * (x[i] / s) + 1e-300)
            return -1;
    return 0;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    double *x = malloc(MAXN * sizeof *x), *out = malloc(MAXN * sizeof *out);
    if (!x || !out) {
        snprintf(w->why, sizeof w->why, "out of memory");
        w->bad++;
        goto done;
    }
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t n = SIZES[(size_t)(r + w->idx) % NSIZES];
        fill(x, n, w->idx * 31 + r);
        memset(out, 0, n * sizeof *out);
        int rc = gpuq_normalize_1d(w->c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, n, out);
        w->calls++;
        if (rc != 0) {
            snprintf(w->why, sizeof w->why, "client %d round %d (n %llu): %s: %s", w->idx, r,
                     (unsigned long long)n, gpuq_strerror(rc), gpuq_errmsg(w->c));
            w->bad++;
        } else if (check_sum(x, out, n) != 0) {
            snprintf(w->why, sizeof w->why, "client %d round %d (n %llu): wrong result", w->idx, r,
                     (unsigned long long)n);
            w->bad++;
        }
    }
done:
    free(x);
    free(out);
    return NULL;
}

/* CLIENTS connections at once, each ROUNDS requests; shm: through
 * libgpuq's staging arena instead of the socket. */
static void burst(bool shm)
{
    worker w[CLIENTS];
    pthread_t th[CLIENTS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < CLIENTS; i++) {
        w[i].idx = i;
        w[i].c = e2e_connect(shm ? "pin-shm" : "pin-sock", GPUQ_PRIO_NORMAL);
        ck_assert_int_eq(
            gpuq_set_transport(w[i].c, shm ? GPUQ_TRANSPORT_SHM : GPUQ_TRANSPORT_SOCKET), 0);
    }
    for (int i = 0; i < CLIENTS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < CLIENTS; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < CLIENTS; i++) {
        gpuq_close(w[i].c);
        ck_assert_int_eq(w[i].calls, ROUNDS);
        ck_assert_msg(w[i].bad == 0, "%d bad replies: %s", w[i].bad, w[i].why);
    }
}

static bool on_cuda(void)
{
    const char *d = getenv("GPUQ_TEST_DEVICE");
    return d && strcmp(d, "cuda") == 0;
}

/* Requests needing new staging while others run (each job 5 ms), then
 * staging given back when idle and grown again: all right, nothing pinned
 * on the loop. */
START_TEST(grow_while_serving)
{
    const char *extra[] = {"--staging-keep", "0", "--staging-release-after", "0.3", NULL};
    e2e_restart_slow(on_cuda() ? 0 : 5, extra);
    burst(false);
    ck_assert_int_gt(e2e_status_int("staging_capacity"), 0);
    ck_assert_int_eq(e2e_status_int("loop_pins"), 0);
    /* given back (on the pinning thread) once idle */
    e2e_wait_status("staging_capacity", 0, 10);
    ck_assert_int_gt(e2e_status_int("staging_released"), 0);
    burst(false); /* and grown again */
    e2e_wait_status("staging_bytes", 0, 5);
    ck_assert_int_eq(e2e_status_int("loop_pins"), 0);
    e2e_assert_serves();
}
END_TEST

/* libgpuq's staging arenas: opened, grown (closed and reopened larger),
 * closed with the connection; pinned off the loop on CUDA. */
START_TEST(arenas_open_close)
{
    burst(true);
    e2e_wait_status("arenas", 0, 5);
    e2e_wait_status("arena_bytes", 0, 5);
    ck_assert_int_eq(e2e_status_int("loop_pins"), 0);
    gpuq_conn *c = e2e_connect("pin-arena", GPUQ_PRIO_NORMAL);
    for (int k = 0; k < 8; k++) {
        gpuq_arena *a = NULL;
        ck_assert_int_eq(gpuq_arena_open(c, (uint64_t)(k + 1) << 20, &a), 0);
        memset(gpuq_arena_base(a), 0x5a, (size_t)gpuq_arena_size(a));
        if (k % 2 == 0)
            ck_assert_int_eq(gpuq_arena_close(a), 0);
    }
    gpuq_close(c); /* the odd ones go with the session */
    e2e_wait_status("arenas", 0, 5);
    ck_assert_int_eq(e2e_status_int("loop_pins"), 0);
    e2e_assert_serves();
}
END_TEST

/* A failed grow (the CPU backend's test hook: host allocations over 16 MiB,
 * the chunk size, fail): the waiting request (a 20 MiB stand-alone slot)
 * gets no_memory with the reason; smaller requests are served on, and the
 * next large one tries again (and fails again). */
START_TEST(grow_fails)
{
    if (on_cuda())
        return; /* the hook is the CPU backend's */
    e2e_teardown();
    setenv("GPUQ_TEST_HOST_ALLOC_FAIL_BYTES", "16777217", 1);
    e2e_start(NULL);
    unsetenv("GPUQ_TEST_HOST_ALLOC_FAIL_BYTES");
    gpuq_conn *c = e2e_connect("pin-fail", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_set_transport(c, GPUQ_TRANSPORT_SOCKET), 0);
    double *x = malloc(MAXN * sizeof *x), *out = malloc(MAXN * sizeof *out);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(out);
    for (int round = 0; round < 2; round++) {
        fill(x, MAXN, round);
        int rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, MAXN, out);
        ck_assert_int_eq(rc, GPUQ_E_NO_MEMORY);
        ck_assert_msg(strstr(gpuq_errmsg(c), "staging") &&
                          strstr(gpuq_errmsg(c), "could not allocate"),
                      "message: %s", gpuq_errmsg(c));
        fill(x, 65000, round);
        ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 65000, out), 0);
        ck_assert_int_eq(check_sum(x, out, 65000), 0);
    }
    gpuq_close(c);
    free(x);
    free(out);
    ck_assert_int_eq(e2e_status_int("loop_pins"), 0);
    e2e_assert_serves();
}
END_TEST

int main(void)
{
    e2e_skip_without_gpu();
    Suite *s = suite_create("e2e_pin");
    TCase *tc = tcase_create("pin");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, grow_while_serving);
    tcase_add_test(tc, arenas_open_close);
    tcase_add_test(tc, grow_fails);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
