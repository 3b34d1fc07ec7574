/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_spin.c - the predictive spin of libgpuq's reply wait, end to end.
 *
 * A request with its arrays in an arena both ways (no payload on the
 * socket) and of at least 1 MiB gets a spin window from its send: the wait
 * sleeps to shortly before the guessed end (bytes at 60 GB/s), polls the
 * socket without sleeping until 2 ms past it, then blocks as before
 * (gpuq.h, gpuq_set_wait_spin). What a user can see of it, and what is
 * checked here against a real gpuqd (CPU backend; CUDA too where built;
 * jobs slowed with the backends' GPUQ_TEST_SLOW_MS hook where the wait
 * must outlast the window):
 *   - the spin is bounded: a 200 ms wait costs the waiting thread a few
 *     milliseconds of CPU, not 200;
 *   - it spins at all, and only when on and at 1 MiB or more: over slowed
 *     calls the thread's CPU time with the spin on (builder or in-tree
 *     gpuq_call) is many times that with it off, whether off came from
 *     gpuq_set_wait_spin or from GPUQ_WAIT_SPIN=0 at connect (and the
 *     setter turns an environment's off back on), or with requests under
 *     1 MiB;
 *   - results stay right, blocking and pipelined, at normal speed;
 *   - the interrupt fd ends the spin at once (pipelined: the wait returns
 *     long before the window would end), and a blocking call is interrupted
 *     after the window as without it.
 * CPU time is CLOCK_THREAD_CPUTIME_ID of the calling thread: user and
 * system time of its polls, none of the daemon's.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq.h"

#define N_SMALL (1u << 20)  /* floats: 4 MiB each way, a window of ~2.1 ms */
#define N_LARGE (16u << 20) /* floats: 64 MiB each way, a window of ~4.2 ms */

static double cpu_s(void)
{
    struct timespec ts;
    ck_assert_int_eq(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts), 0);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One normalize (l2, shape [n]) with input x and output y in arena a. */
typedef struct job {
    gpuq_arena *a;
    float *x, *y;
    double *ref; /* y as it should be, in double */
    uint64_t n;
} job;

static void job_open(job *j, gpuq_conn *c, uint64_t n, unsigned seed)
{
    memset(j, 0, sizeof *j);
    j->n = n;
    ck_assert_int_eq(gpuq_arena_open(c, 2 * n * sizeof(float) + 4096, &j->a), 0);
    j->x = gpuq_arena_alloc(j->a, n * sizeof(float));
    j->y = gpuq_arena_alloc(j->a, n * sizeof(float));
    j->ref = malloc(n * sizeof *j->ref);
    ck_assert(j->x && j->y && j->ref);
    srand(seed);
    double ss = 0;
    for (uint64_t i = 0; i < n; i++) { /* both signs, magnitudes over 4 decades */
        double v = (rand() / (double)RAND_MAX - 0.5) * pow(10, (int)(rand() % 4) - 2);
        j->x[i] = (float)v;
        ss += (double)j->x[i] * j->x[i];
    }
    double norm = sqrt(ss);
    for (uint64_t i = 0; i < n; i++)
        j->ref[i] = j->x[i] / norm;
}

static void job_close(job *j)
{
    free(j->ref);
    j->ref = NULL;
}

static void job_poison(job *j)
{
    memset(j->y, 0xff, j->n * sizeof(float)); /* NaNs: a result not written fails */
}

static void job_check(const job *j, const char *what)
{
    size_t worst = 0;
    double err = tu_elem_err_f32(j->y, j->ref, j->n, &worst);
    ck_assert_msg(err < 1e-5, "%s: y[%zu] = %.9g, want %.9g (relative error %.3g)", what, worst,
                  j->y[worst], j->ref[worst], err);
}

/* The blocking call (the caller poisons y first, outside its timing). */
static int job_call(gpuq_conn *c, job *j)
{
    return gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_L2, j->x, j->n, j->y);
}

/* The same through the in-tree API, as gpuqctl sends arrays it built in
 * its staging arena: gpuq_call with a gpuq_request that names both. */
static int job_call_refs(gpuq_conn *c, job *j)
{
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_NORMALIZE;
    q.dtype = GPUQ_DT_F32;
    q.ndim_a = 1;
    q.shape_a[0] = j->n;
    ck_assert_int_eq(gpuq_request_set_enum(&q, "method", "l2"), 0);
    uint64_t id = gpuq_arena_id(j->a), len = j->n * sizeof(float);
    const uint8_t *base = gpuq_arena_base(j->a);
    q.nin_ref = q.nout_ref = 1;
    q.in_ref[0] = (gpuq_ref){id, (uint64_t)((const uint8_t *)j->x - base), len};
    q.out_ref[0] = (gpuq_ref){id, (uint64_t)((const uint8_t *)j->y - base), len};
    return gpuq_call(c, &q, NULL, 0, NULL, 0, NULL, 0, NULL);
}

/* A builder request for j: pipelined, by reference both ways. */
static gpuq_req *job_req(job *j)
{
    gpuq_req *r = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(r);
    const uint64_t shape[1] = {j->n};
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F32, 1, shape, j->x, j->n * sizeof(float)),
                     0);
    ck_assert_int_eq(gpuq_req_set_str(r, "method", "l2"), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, j->y, j->n * sizeof(float)), 0);
    return r;
}

/* The spin is bounded: a blocking call by reference whose job takes 200 ms
 * costs its thread the window (~2.1 ms) of CPU, not the wait. A spin that
 * ran until the reply came would cost ~200 ms (less only by the share of a
 * core the thread gets). */
START_TEST(spin_is_bounded)
{
    e2e_restart_slow(200, NULL);
    gpuq_conn *c = e2e_connect("spin", GPUQ_PRIO_NORMAL);
    job j;
    job_open(&j, c, N_SMALL, 11);
    job_poison(&j);
    double w0 = tu_now_s(), c0 = cpu_s();
    ck_assert_int_eq(job_call(c, &j), 0);
    double cpu = cpu_s() - c0, wall = tu_now_s() - w0;
    job_check(&j, "slowed call");
    ck_assert_msg(wall >= 0.19, "the job took %.3f s: not slowed", wall);
    ck_assert_msg(cpu < 0.030, "the wait cost %.1f ms of CPU in %.1f ms", cpu * 1e3, wall * 1e3);
    job_close(&j);
    gpuq_close(c);
}
END_TEST

/* Back to back at normal speed, blocking and pipelined (4 in flight, each
 * its own output; only the oldest spins, in its own window): every result
 * is right and lands where it belongs. */
START_TEST(fast_back_to_back)
{
    gpuq_conn *c = e2e_connect("spin", GPUQ_PRIO_NORMAL);
    enum { DEPTH = 4, CALLS = 50, PIPELINED = 24 };
    job j[DEPTH];
    for (unsigned k = 0; k < DEPTH; k++)
        job_open(&j[k], c, N_SMALL, 20 + k);
    for (unsigned i = 0; i < CALLS; i++) {
        job_poison(&j[i % DEPTH]);
        ck_assert_msg(job_call(c, &j[i % DEPTH]) == 0, "call %u: %s", i, gpuq_errmsg(c));
        job_check(&j[i % DEPTH], "blocking call");
    }
    gpuq_req *r[DEPTH];
    for (unsigned k = 0; k < DEPTH; k++)
        r[k] = job_req(&j[k]);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    for (unsigned i = 0; i < PIPELINED + DEPTH - 1; i++) {
        if (i >= DEPTH - 1) { /* the oldest of DEPTH in flight */
            unsigned k = (i - (DEPTH - 1)) % DEPTH;
            ck_assert_msg(gpuq_wait_req(c, res) == 0, "wait: %s", gpuq_errmsg(c));
            ck_assert_uint_eq(gpuq_result_bytes(res, 0), j[k].n * sizeof(float));
            job_check(&j[k], "pipelined");
        }
        if (i < PIPELINED) {
            job_poison(&j[i % DEPTH]);
            ck_assert_msg(gpuq_submit_req(c, r[i % DEPTH], NULL) == 0, "submit: %s",
                          gpuq_errmsg(c));
        }
    }
    ck_assert_uint_eq(gpuq_pending(c), 0);
    gpuq_result_free(res);
    for (unsigned k = 0; k < DEPTH; k++) {
        gpuq_req_free(r[k]);
        job_close(&j[k]);
    }
    gpuq_close(c);
}
END_TEST

/* On and off, seen by the waiting thread's CPU time over slowed calls
 * (40 ms each: the window of ~2.1 ms is spent whole). Six connections
 * take turns, so that each sees the same load: the default (on);
 * gpuq_set_wait_spin(c, false); GPUQ_WAIT_SPIN=0 at connect; that
 * environment with gpuq_set_wait_spin(c, true) after; the default through
 * gpuq_call (in-tree API, refs named by the caller); and the default with
 * requests under 1 MiB (512 KiB both ways: no window). The three that spin
 * cost several times what each of the three that do not costs. */
START_TEST(on_and_off)
{
    ck_assert_int_eq(gpuq_set_wait_spin(NULL, true), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_set_wait_spin(NULL, false), GPUQ_E_BAD_ARGUMENT);
    e2e_restart_slow(40, NULL);
    enum { ON, OFF_SET, OFF_ENV, ON_SET, ON_CALL, UNDER, NCONN, ROUNDS = 10 };
    static const char *const names[NCONN] = {
        "on (default)",           "off (gpuq_set_wait_spin)",
        "off (GPUQ_WAIT_SPIN=0)", "on (GPUQ_WAIT_SPIN=0, then gpuq_set_wait_spin)",
        "on (gpuq_call)",         "on, under 1 MiB"};
    gpuq_conn *c[NCONN];
    job j[NCONN];
    double cpu[NCONN][ROUNDS], med[NCONN];
    for (unsigned k = 0; k < NCONN; k++) {
        if (k == OFF_ENV || k == ON_SET)
            ck_assert_int_eq(setenv("GPUQ_WAIT_SPIN", "0", 1), 0);
        c[k] = e2e_connect("spin", GPUQ_PRIO_NORMAL);
        ck_assert_int_eq(unsetenv("GPUQ_WAIT_SPIN"), 0);
        job_open(&j[k], c[k], k == UNDER ? (64u << 10) : N_SMALL, 40 + k);
    }
    ck_assert_int_eq(gpuq_set_wait_spin(c[OFF_SET], false), 0);
    ck_assert_int_eq(gpuq_set_wait_spin(c[ON_SET], true), 0);
    for (unsigned round = 0; round < ROUNDS; round++) {
        for (unsigned k = 0; k < NCONN; k++) {
            job_poison(&j[k]);
            double c0 = cpu_s();
            int rc = k == ON_CALL ? job_call_refs(c[k], &j[k]) : job_call(c[k], &j[k]);
            ck_assert_msg(rc == 0, "%s: %s", names[k], gpuq_errmsg(c[k]));
            cpu[k][round] = cpu_s() - c0;
            job_check(&j[k], names[k]);
        }
    }
    /* medians: a call that a busy machine slowed (or preempted in its
     * spin) moves neither side */
    char msg[512];
    int len = snprintf(msg, sizeof msg, "median CPU ms of %d calls:", ROUNDS);
    for (unsigned k = 0; k < NCONN; k++) {
        qsort(cpu[k], ROUNDS, sizeof cpu[k][0], cmp_double);
        med[k] = (cpu[k][ROUNDS / 2 - 1] + cpu[k][ROUNDS / 2]) / 2;
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s %s %.3f", k ? "," : "", names[k],
                        med[k] * 1e3);
    }
    printf("%s\n", msg);
    /* each spins ~2.1 ms a call; the others cost ~0.1-0.2 ms */
    const unsigned spins[3] = {ON, ON_SET, ON_CALL}, rests[3] = {OFF_SET, OFF_ENV, UNDER};
    for (unsigned a = 0; a < 3; a++) {
        ck_assert_msg(med[spins[a]] > 0.0005, "%s spun too little: %s", names[spins[a]], msg);
        for (unsigned b = 0; b < 3; b++)
            ck_assert_msg(med[spins[a]] > 4 * med[rests[b]], "%s vs %s: %s", names[spins[a]],
                          names[rests[b]], msg);
    }
    for (unsigned k = 0; k < NCONN; k++) {
        job_close(&j[k]);
        gpuq_close(c[k]);
    }
}
END_TEST

static void drain(int fd)
{
    char b[16];
    ck_assert_int_gt(read(fd, b, sizeof b), 0);
}

/* An interrupt fd that is readable when the wait starts ends it at once,
 * in the window's sleep (the first ~1.9 ms of a 128 MiB request) and its
 * spin alike: a spin that did not watch the interrupt fd would return only
 * at the window's end (~4.2 ms after the send). The fastest of five tries
 * (scheduling on a busy machine may delay any one) must come well before.
 * The request is still outstanding, and a later wait reads its result. */
START_TEST(interrupt_ends_the_spin)
{
    e2e_restart_slow(300, NULL);
    gpuq_conn *c = e2e_connect("spin", GPUQ_PRIO_NORMAL);
    job j;
    job_open(&j, c, N_LARGE, 60);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, p[0]), 0);
    gpuq_req *r = job_req(&j);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    double fastest = 1e9;
    for (int t = 0; t < 5; t++) {
        job_poison(&j);
        uint64_t id;
        ck_assert_msg(gpuq_submit_req(c, r, &id) == 0, "submit: %s", gpuq_errmsg(c));
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        double t0 = tu_now_s();
        ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_INTERRUPTED);
        double dt = tu_now_s() - t0;
        fastest = dt < fastest ? dt : fastest;
        ck_assert_uint_eq(gpuq_result_id(res), id);
        ck_assert_uint_eq(gpuq_pending(c), 1);
        drain(p[0]);
        ck_assert_msg(gpuq_wait_req(c, res) == 0, "wait: %s", gpuq_errmsg(c));
        job_check(&j, "after the interrupt");
    }
    ck_assert_msg(fastest < 0.001, "an interrupted wait took %.3f ms at best", fastest * 1e3);
    gpuq_result_free(res);
    gpuq_req_free(r);
    close(p[0]);
    close(p[1]);
    job_close(&j);
    gpuq_close(c);
}
END_TEST

/* A blocking call by reference, interrupted 50 ms into a 2 s job (after its
 * window, in the blocking wait): GPUQ_E_INTERRUPTED long before the job
 * ends, as without the spin; the request is given up and outstanding, its
 * reply read by the next wait, and the connection serves on. */
START_TEST(interrupt_blocking_call)
{
    e2e_restart_slow(2000, NULL);
    gpuq_conn *c = e2e_connect("spin", GPUQ_PRIO_NORMAL);
    job j;
    job_open(&j, c, N_SMALL, 70);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, p[0]), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        _exit(write(p[1], "x", 1) == 1 ? 0 : 1);
    }
    job_poison(&j);
    double t0 = tu_now_s();
    ck_assert_int_eq(job_call(c, &j), GPUQ_E_INTERRUPTED);
    double dt = tu_now_s() - t0;
    ck_assert_msg(dt < 1.0, "interrupted after %.3f s (the job takes 2)", dt);
    ck_assert_int_eq(e2e_wait_exit(pid, 5), 0);
    ck_assert_uint_eq(gpuq_pending(c), 1);
    drain(p[0]);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    ck_assert_msg(gpuq_wait_req(c, res) == 0, "wait: %s", gpuq_errmsg(c));
    gpuq_result_free(res);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, -1), 0);
    job_poison(&j);
    ck_assert_int_eq(job_call(c, &j), 0);
    job_check(&j, "after the interrupted call");
    close(p[0]);
    close(p[1]);
    job_close(&j);
    gpuq_close(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_spin");
    TCase *tc = tcase_create("spin");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, spin_is_bounded);
    tcase_add_test(tc, fast_back_to_back);
    tcase_add_test(tc, on_and_off);
    tcase_add_test(tc, interrupt_ends_the_spin);
    tcase_add_test(tc, interrupt_blocking_call);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    return tu_run_suite(suite());
}
