/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_cpu_threads.c - the CPU backend's large jobs on several threads
 * (server/backends/backend_run.c, run_blocks), end to end.
 *
 * A job whose arrays come to 1 MiB or more runs its blocks of rows on up
 * to GPUQ_CPU_THREADS threads. Checked here, for pairwise (every metric,
 * f32 and f64, rows not a multiple of the block), knn and 2-D normalize:
 * the results of a daemon with 4 threads equal those of one with 1 byte
 * for byte, and a few entries equal a long double reference of the test's
 * own; the error of a job whose blocks fail in several places is the
 * first in row order (two zero rows: the lower is named); and a job
 * cancelled by its deadline while its threads run is answered, comes
 * back stopped, and the daemon serves on; one long row (1-D or flat
 * normalize) in pieces on those threads: the same bytes with 4 threads as
 * with 1, every method against a long double reference, its errors named;
 * the helper threads are there
 * while a large job runs (the daemon's /proc/PID/task), none with
 * GPUQ_CPU_THREADS=1.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq.h"

enum { M = 700, N = 650, D = 300 }; /* x 1.7 MB in f64: a threaded job */

static void start_with(const char *threads)
{
    e2e_teardown();
    ck_assert_int_eq(setenv("GPUQ_CPU_THREADS", threads, 1), 0);
    e2e_start(NULL);
    ck_assert_int_eq(unsetenv("GPUQ_CPU_THREADS"), 0);
}

static const gpuq_metric metrics[] = {GPUQ_METRIC_EUCLIDEAN, GPUQ_METRIC_SQEUCLIDEAN,
                                      GPUQ_METRIC_COSINE, GPUQ_METRIC_MANHATTAN};

/* Every op's outputs for the inputs x (M x D) and y (N x D) of dtype f32
 * or f64, into one buffer (malloc'd; *len its bytes). */
static uint8_t *run_all(const void *x, const void *y, int f32, size_t *len)
{
    gpuq_conn *c = e2e_connect("threads", GPUQ_PRIO_NORMAL);
    gpuq_dtype dt = f32 ? GPUQ_DT_F32 : GPUQ_DT_F64;
    size_t es = f32 ? 4 : 8, pw = (size_t)M * N * es, kd = (size_t)M * 10 * es,
           ki = (size_t)M * 10 * 8, nm = (size_t)M * D * es;
    size_t nmet = sizeof metrics / sizeof metrics[0];
    *len = nmet * pw + kd + ki + nm;
    uint8_t *out = malloc(*len), *o = out;
    ck_assert_ptr_nonnull(out);
    for (size_t k = 0; k < nmet; k++, o += pw)
        ck_assert_msg(gpuq_pairwise(c, dt, metrics[k], x, y, M, N, D, o) == 0, "%s",
                      gpuq_errmsg(c));
    ck_assert_msg(
        gpuq_knn(c, dt, GPUQ_METRIC_EUCLIDEAN, x, y, M, N, D, 10, o, (int64_t *)(o + kd)) == 0,
        "%s", gpuq_errmsg(c));
    o += kd + ki;
    ck_assert_msg(gpuq_normalize(c, dt, GPUQ_NORM_ZSCORE, false, x, M, D, o) == 0, "%s",
                  gpuq_errmsg(c));
    gpuq_close(c);
    return out;
}

static long double get(const void *a, int f32, size_t i)
{
    return f32 ? (long double)((const float *)a)[i] : (long double)((const double *)a)[i];
}

START_TEST(same_results_any_thread_count)
{
    int f32 = _i;
    size_t es = f32 ? 4 : 8;
    void *x = e2e_rand_buf((size_t)M * D * es, f32), *y = e2e_rand_buf((size_t)N * D * es, f32);
    start_with("1");
    size_t l1, l4;
    uint8_t *one = run_all(x, y, f32, &l1);
    start_with("4");
    uint8_t *four = run_all(x, y, f32, &l4);
    ck_assert_uint_eq(l1, l4);
    ck_assert_msg(memcmp(one, four, l1) == 0, "%s: 4 threads differ from 1", f32 ? "f32" : "f64");
    /* and they are distances: entries of the euclidean block against long double */
    static const size_t at[][2] = {{0, 0}, {M - 1, N - 1}, {351, 17}, {699, 0}, {13, 649}};
    for (size_t t = 0; t < sizeof at / sizeof at[0]; t++) {
        size_t i = at[t][0], j = at[t][1];
        long double s = 0;
        for (size_t k = 0; k < D; k++) {
            long double v = get(x, f32, i * D + k) - get(y, f32, j * D + k);
            s += v * v;
        }
        double want = (double)sqrtl(s), got = (double)get(four, f32, i * N + j);
        ck_assert_msg(fabs(got - want) <= (f32 ? 1e-6 : 1e-13) * want,
                      "d(%zu, %zu) = %.17g, want %.17g", i, j, got, want);
    }
    free(one), free(four), free(x), free(y);
}
END_TEST

/* One long row (1-D, and a 2-D array with flat) of FN values, 2.6 MB of
 * float64: normalized in 65536-value pieces on the job's threads
 * (backend_run.c, run_pieces). Every method's result with 4 threads equals
 * that with 1 byte for byte, and every element is within 1e-6 (float32) or
 * 1e-13 (float64) of a long double reference of the test's own (relative;
 * zscore's, whose values are O(1), absolute). */
enum { FN = 5 * 65536 + 124 };

static void flat_ref(int method, const void *x, int f32, long double *ref)
{
    long double s = 0, s1 = 0, s2 = 0, mn = get(x, f32, 0), mx = mn;
    for (size_t i = 0; i < FN; i++) {
        long double v = get(x, f32, i);
        s += v, s1 += fabsl(v), s2 += v * v;
        mn = v < mn ? v : mn, mx = v > mx ? v : mx;
    }
    long double mean = s / FN, var = 0;
    for (size_t i = 0; i < FN; i++)
        var += (get(x, f32, i) - mean) * (get(x, f32, i) - mean);
    long double sd = sqrtl(var / FN);
    for (size_t i = 0; i < FN; i++) {
        long double v = get(x, f32, i);
        ref[i] = method == GPUQ_NORM_SUM      ? v / s
                 : method == GPUQ_NORM_L1     ? v / s1
                 : method == GPUQ_NORM_L2     ? v / sqrtl(s2)
                 : method == GPUQ_NORM_MINMAX ? (v - mn) / (mx - mn)
                                              : (v - mean) / sd;
    }
}

static uint8_t *flat_all(const void *x, int f32)
{
    gpuq_conn *c = e2e_connect("threads-flat", GPUQ_PRIO_NORMAL);
    gpuq_dtype dt = f32 ? GPUQ_DT_F32 : GPUQ_DT_F64;
    size_t es = f32 ? 4 : 8, one = (size_t)FN * es;
    uint8_t *out = malloc(10 * one);
    ck_assert_ptr_nonnull(out);
    for (int m = 0; m < 5; m++) {
        ck_assert_msg(gpuq_normalize_1d(c, dt, (gpuq_norm_method)m, x, FN, out + m * one) == 0,
                      "%s", gpuq_errmsg(c));
        /* FN = 3 x 109268: a [3, 109268] array, flat */
        ck_assert_msg(gpuq_normalize(c, dt, (gpuq_norm_method)m, true, x, 3, FN / 3,
                                     out + (5 + m) * one) == 0,
                      "%s", gpuq_errmsg(c));
    }
    gpuq_close(c);
    return out;
}

START_TEST(flat_row_any_thread_count)
{
    int f32 = _i;
    size_t es = f32 ? 4 : 8, one = (size_t)FN * es;
    _Static_assert(FN % 3 == 0, "FN splits into 3 rows");
    void *x = e2e_rand_buf(one, f32);
    start_with("1");
    uint8_t *o1 = flat_all(x, f32);
    start_with("4");
    uint8_t *o4 = flat_all(x, f32);
    ck_assert_msg(memcmp(o1, o4, 10 * one) == 0, "%s: 4 threads differ from 1",
                  f32 ? "f32" : "f64");
    long double *ref = malloc(FN * sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    double tol = f32 ? 1e-6 : 1e-13;
    for (int m = 0; m < 5; m++) {
        flat_ref(m, x, f32, ref);
        ck_assert(memcmp(o4 + m * one, o4 + (5 + m) * one, one) == 0); /* 1-D = flat 2-D */
        size_t i = 0;
        for (; i < FN; i++) {
            double want = (double)ref[i], got = (double)get(o4 + m * one, f32, i);
            double scale = m == GPUQ_NORM_ZSCORE ? 1.0 : fabs(want);
            if (!(fabs(got - want) <= tol * scale))
                break;
        }
        ck_assert_msg(i == FN, "method %d [%zu] = %.17g, want %.17g", m, i,
                      i < FN ? (double)get(o4 + m * one, f32, i) : 0.0,
                      i < FN ? (double)ref[i] : 0.0);
    }
    free(ref), free(o1), free(o4), free(x);
}
END_TEST

/* A long row in pieces that fails: all zeros (zero_norm, row 0 named), a
 * result too large for float32 (its sum cancelled to 1e-39: out_of_range);
 * the session and the daemon serve on. */
START_TEST(flat_row_errors)
{
    start_with("4");
    float *x = calloc(FN, sizeof *x), *out = e2e_out_buf((size_t)FN * 4);
    ck_assert_ptr_nonnull(x);
    gpuq_conn *c = e2e_connect("threads-flat", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_L2, x, FN, out), GPUQ_E_ZERO_NORM);
    ck_assert_msg(strstr(gpuq_errmsg(c), "row 0 has zero l2 norm"), "%s", gpuq_errmsg(c));
    for (int j = 0; j + 2 < FN; j++)
        x[j] = j % 2 ? -1.0f : 1.0f; /* FN - 2 values, even: they cancel */
    x[FN - 1] = 1e-39f;
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, FN, out),
                     GPUQ_E_OUT_OF_RANGE);
    ck_assert_msg(strstr(gpuq_errmsg(c), "row 0: a sum result is too large for f32"), "%s",
                  gpuq_errmsg(c));
    x[FN - 1] = 1.0f; /* the sum is 1 now: each value as it is */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, FN, out), 0);
    ck_assert(out[0] == 1.0f && out[1] == -1.0f && out[FN - 1] == 1.0f);
    gpuq_close(c);
    e2e_assert_serves();
    free(x), free(out);
}
END_TEST

/* Rows 600 and 40 zero (in different blocks, run by different threads):
 * zero_norm names row 40, as the blocks one after the other would. */
START_TEST(first_failing_row_named)
{
    start_with("4");
    double *x = e2e_rand_buf((size_t)M * D * 8, 0), *out = e2e_out_buf((size_t)M * D * 8);
    memset(x + 600 * D, 0, D * 8);
    memset(x + 40 * D, 0, D * 8);
    gpuq_conn *c = e2e_connect("threads", GPUQ_PRIO_NORMAL);
    for (int round = 0; round < 5; round++) {
        ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, x, M, D, out),
                         GPUQ_E_ZERO_NORM);
        ck_assert_msg(strstr(gpuq_errmsg(c), "row 40 "), "%s", gpuq_errmsg(c));
    }
    /* cosine pairwise: x's row 40 a zero vector */
    float *xf = e2e_rand_buf((size_t)M * D * 4, 1), *yf = e2e_rand_buf((size_t)N * D * 4, 1),
          *d = malloc((size_t)M * N * 4);
    ck_assert_ptr_nonnull(d);
    memset(xf + 600 * D, 0, D * 4);
    memset(xf + 40 * D, 0, D * 4);
    ck_assert_int_eq(gpuq_pairwise(c, GPUQ_DT_F32, GPUQ_METRIC_COSINE, xf, yf, M, N, D, d),
                     GPUQ_E_ZERO_NORM);
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, false, x + 41 * D, 500, D, out),
                     0); /* the session goes on */
    gpuq_close(c);
    free(x), free(out), free(xf), free(yf), free(d);
}
END_TEST

/* A pairwise of some seconds given a 100 ms deadline: deadline_exceeded,
 * its threads stop between blocks (the daemon's stopped count), the daemon
 * serves on. */
START_TEST(deadline_stops_the_threads)
{
    start_with("4");
    enum { BM = 3000, BD = 512 };
    float *x = e2e_rand_buf((size_t)BM * BD * 4, 1), *d = malloc((size_t)BM * BM * 4);
    ck_assert_ptr_nonnull(d);
    gpuq_conn *c = e2e_connect("threads", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 100), 0);
    ck_assert_int_eq(gpuq_pairwise(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, x, x, BM, BM, BD, d),
                     GPUQ_E_DEADLINE_EXCEEDED);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 0), 0);
    /* answered at its deadline; its work comes back stopped later */
    for (int i = 0; i < 400 && e2e_status_int("stopped") < 1; i++)
        usleep(50000);
    ck_assert_int_eq(e2e_status_int("stopped"), 1);
    gpuq_close(c);
    e2e_assert_serves();
    free(x), free(d);
}
END_TEST

/* The daemon's threads now (its /proc/PID/task entries). */
static int daemon_threads(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)e2e_d.pid);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

typedef struct big_call {
    const float *x;
    float *d;
    int rc;
    int done; /* atomic: the call returned */
} big_call;

enum { TM = 2500, TD = 512 };

static void *big_pairwise(void *arg)
{
    big_call *b = arg;
    gpuq_conn *c = e2e_connect("threads-big", GPUQ_PRIO_NORMAL);
    b->rc = gpuq_pairwise(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, b->x, b->x, TM, TM, TD, b->d);
    gpuq_close(c);
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* _i: 0 GPUQ_CPU_THREADS=4: a large job gets three helper threads while it
 * runs; 1 GPUQ_CPU_THREADS=1: none. */
START_TEST(helpers_while_it_runs)
{
    start_with(_i == 0 ? "4" : "1");
    /* a first small job starts libuv's pool (its threads come at the first) */
    gpuq_conn *c = e2e_connect("threads-warm", GPUQ_PRIO_NORMAL);
    double one = 2, out;
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, &one, 1, &out), 0);
    gpuq_close(c);
    int idle = daemon_threads(), most = idle;
    big_call b = {.x = e2e_rand_buf((size_t)TM * TD * 4, 1), .d = malloc((size_t)TM * TM * 4)};
    ck_assert_ptr_nonnull(b.d);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, big_pairwise, &b), 0);
    for (int i = 0; i < 20000 && !__atomic_load_n(&b.done, __ATOMIC_ACQUIRE); i++) {
        int n = daemon_threads();
        most = n > most ? n : most;
        if (_i == 0 && most >= idle + 3)
            break;
        usleep(1000);
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(b.rc, 0);
    if (_i == 0)
        ck_assert_msg(most >= idle + 3, "%d threads at most while the job ran, %d idle", most,
                      idle);
    else
        ck_assert_msg(most == idle, "%d threads at most while the job ran, %d idle", most, idle);
    free((void *)b.x), free(b.d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("e2e_cpu_threads");
    TCase *tc = tcase_create("cpu_threads");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, same_results_any_thread_count, 0, 2);
    tcase_add_test(tc, first_failing_row_named);
    tcase_add_loop_test(tc, flat_row_any_thread_count, 0, 2);
    tcase_add_test(tc, flat_row_errors);
    tcase_add_test(tc, deadline_stops_the_threads);
    tcase_add_loop_test(tc, helpers_while_it_runs, 0, 2);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
