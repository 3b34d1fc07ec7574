/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_stage.c - plain memory staged through the connection's arena
 * with the threaded copies (client/lib/copy_pool.c), end to end.
 *
 * The suite runs with GPUQ_COPY_THREADS=4, so the staging copies are cut
 * into chunks for four threads wherever a call's inputs or outputs come to
 * COPY_POOL_MIN bytes. Under AUTO the results equal the socket path's
 * byte for byte, and nothing is written past the caller's output, for
 * arrays whose bytes lie at the chunk boundaries (a whole number of chunks,
 * one element less, one more; the threshold itself) and for one that gives
 * every thread several chunks: one input and one output (normalize, f32 and
 * f64), two inputs (haversine between two point sets), two outputs (knn's
 * distances and indices). A child forked after the parent's copies ran on
 * threads makes staged calls of its own on a new connection with threads
 * of its own, while the parent keeps calling. A short staged call has the
 * copy threads poll for its copy out; a long one, a small one and a socket
 * call do not.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy_pool.h"
#include "e2e_util.h"
#include "gpuq.h"

#define CH COPY_POOL_CHUNK

/* Byte counts of an array at the copy chunk boundaries, in elements of
 * `elem` bytes: k chunks less one element, k chunks, k chunks and one. */
static size_t at_boundary(int k, int d, size_t elem)
{
    return (k * CH + (size_t)(d * (long)elem)) / elem;
}

START_TEST(normalize_at_chunk_boundaries)
{
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    /* chunks: 2 (half the threshold each way: the call is staged, each copy
     * on the caller's thread alone), 4 (the threshold), 5, and 4 threads x
     * 5 chunks and a bit */
    static const int ks[] = {2, 4, 5, 20};
    for (int f32 = 0; f32 < 2; f32++) {
        size_t elem = f32 ? 4 : 8;
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            for (int d = -1; d <= 1; d++) {
                size_t n = at_boundary(ks[ki], d, elem), bytes = n * elem;
                void *x = e2e_rand_buf(bytes, f32), *ya = e2e_out_buf(bytes),
                     *ys = e2e_out_buf(bytes);
                gpuq_dtype dt = f32 ? GPUQ_DT_F32 : GPUQ_DT_F64;
                ck_assert_msg(gpuq_normalize_1d(a, dt, GPUQ_NORM_ZSCORE, x, n, ya) == 0, "%s",
                              gpuq_errmsg(a));
                ck_assert_msg(gpuq_normalize_1d(s, dt, GPUQ_NORM_ZSCORE, x, n, ys) == 0, "%s",
                              gpuq_errmsg(s));
                ck_assert_msg(memcmp(ya, ys, bytes) == 0,
                              "normalize of %zu bytes (%s): staged differs from socket", bytes,
                              f32 ? "f32" : "f64");
                e2e_guard_intact(ya, bytes, "normalize");
                /* in place: the input is the output */
                memcpy(ya, x, bytes);
                ck_assert_int_eq(gpuq_normalize_1d(a, dt, GPUQ_NORM_ZSCORE, ya, n, ya), 0);
                ck_assert_int_eq(memcmp(ya, ys, bytes), 0);
                free(x), free(ya), free(ys);
            }
        }
    }
    ck_assert_int_eq(e2e_status_int("arena_open") > 0, 1);
    ck_assert_uint_eq(copy_pool_workers(), 3); /* the copies had threads */
    gpuq_close(a), gpuq_close(s);
}
END_TEST

/* A staged blocking call whose device time is short has the copy threads
 * poll for its copy out (copy_pool_expect): 1M f32 each way does, 16M
 * (due later than COPY_POOL_EXPECT_MAX_US at SOCKIO_SPIN_BYTES_PER_NS) and
 * outputs under COPY_POOL_MIN do not, nor does a call by socket. */
START_TEST(copy_out_expected)
{
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    static const struct {
        size_t n;
        int sock;
        uint64_t more;
    } calls[] = {{1u << 20, 0, 1}, {1u << 24, 0, 0}, {COPY_POOL_MIN / 8, 0, 0}, {1u << 20, 1, 0}};
    for (size_t k = 0; k < sizeof calls / sizeof *calls; k++) {
        size_t bytes = calls[k].n * 4;
        void *x = e2e_rand_buf(bytes, 1), *y = e2e_out_buf(bytes);
        uint64_t before = copy_pool_expects();
        gpuq_conn *c = calls[k].sock ? s : a;
        ck_assert_msg(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_L2, x, calls[k].n, y) == 0, "%s",
                      gpuq_errmsg(c));
        ck_assert_msg(copy_pool_expects() - before == calls[k].more,
                      "call %zu (%zu values%s): %llu expected copies, want %llu", k, calls[k].n,
                      calls[k].sock ? ", socket" : "",
                      (unsigned long long)(copy_pool_expects() - before),
                      (unsigned long long)calls[k].more);
        e2e_guard_intact(y, bytes, "normalize");
        free(x), free(y);
    }
    gpuq_close(a), gpuq_close(s);
}
END_TEST

START_TEST(two_inputs_at_chunk_boundaries)
{
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    /* haversine between a[i] and b[i]: two inputs of 16 bytes a point */
    static const int ks[] = {4, 5, 20};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        for (int d = -1; d <= 1; d++) {
            size_t n = at_boundary(ks[ki], d, 16);
            double *pa = e2e_rand_buf(16 * n, 0), *pb = e2e_rand_buf(16 * n, 0);
            double *oa = e2e_out_buf(8 * n), *os = e2e_out_buf(8 * n);
            ck_assert_msg(gpuq_haversine_pair(a, GPUQ_DT_F64, pa, pb, n, 6371.0, oa) == 0, "%s",
                          gpuq_errmsg(a));
            ck_assert_msg(gpuq_haversine_pair(s, GPUQ_DT_F64, pa, pb, n, 6371.0, os) == 0, "%s",
                          gpuq_errmsg(s));
            ck_assert_msg(memcmp(oa, os, 8 * n) == 0, "haversine of %zu points differs", n);
            e2e_guard_intact(oa, 8 * n, "haversine");
            free(pa), free(pb), free(oa), free(os);
        }
    }
    gpuq_close(a), gpuq_close(s);
}
END_TEST

START_TEST(two_outputs_at_chunk_boundaries)
{
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    /* knn with k 1 against 8 points of 2 dimensions: distances of 4 bytes a
     * row, indices of 8 */
    enum { N = 8, D = 2 };
    float *y = e2e_rand_buf(N * D * 4, 1);
    static const int ks[] = {4, 5};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        for (int d = -1; d <= 1; d++) {
            size_t m = at_boundary(ks[ki], d, 4);
            float *x = e2e_rand_buf(m * D * 4, 1);
            float *da = e2e_out_buf(4 * m), *ds = e2e_out_buf(4 * m);
            int64_t *ia = e2e_out_buf(8 * m), *is = e2e_out_buf(8 * m);
            ck_assert_msg(
                gpuq_knn(a, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, x, y, m, N, D, 1, da, ia) == 0,
                "%s", gpuq_errmsg(a));
            ck_assert_msg(
                gpuq_knn(s, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, x, y, m, N, D, 1, ds, is) == 0,
                "%s", gpuq_errmsg(s));
            ck_assert_msg(memcmp(da, ds, 4 * m) == 0, "knn distances of %zu rows differ", m);
            ck_assert_msg(memcmp(ia, is, 8 * m) == 0, "knn indices of %zu rows differ", m);
            e2e_guard_intact(da, 4 * m, "knn distances");
            e2e_guard_intact(ia, 8 * m, "knn indices");
            free(x), free(da), free(ds), free(ia), free(is);
        }
    }
    free(y);
    gpuq_close(a), gpuq_close(s);
}
END_TEST

enum { FN = 5 * CH / 4 + 1 }; /* f32 elements: 5 chunks and 4 bytes each way */

/* The forked child: staged calls on a connection of its own give ref's
 * bytes, with copy threads of its own. Returns its exit status. */
static int child_calls(const float *x, const float *ref)
{
    if (copy_pool_workers() != 0)
        return 10;
    gpuq_connect_opts o = {.socket_path = e2e_d.socket, .client_name = "child", .device = -1};
    gpuq_conn *c = NULL;
    if (gpuq_connect(&o, &c))
        return 11;
    float *y = malloc(FN * 4);
    if (!y)
        return 12;
    for (int i = 0; i < 3; i++) {
        memset(y, 0, FN * 4);
        if (gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, FN, y))
            return 13;
        if (memcmp(y, ref, FN * 4))
            return 14;
    }
    unsigned w = copy_pool_workers();
    if (w != 3 || tu_thread_count() != 1 + w)
        return 15;
    gpuq_close(c);
    free(y);
    return 0;
}

START_TEST(forked_child_stages)
{
    gpuq_conn *a = e2e_connect("parent", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    float *x = e2e_rand_buf(FN * 4, 1), *ref = malloc(FN * 4), *y = malloc(FN * 4);
    ck_assert(ref && y);
    ck_assert_int_eq(gpuq_normalize_1d(s, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, FN, ref), 0);
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, FN, y), 0);
    ck_assert_int_eq(memcmp(y, ref, FN * 4), 0);
    ck_assert_uint_eq(copy_pool_workers(), 3);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(child_calls(x, ref));
    for (int i = 0; i < 3; i++) { /* the parent calls on meanwhile */
        memset(y, 0, FN * 4);
        ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, FN, y), 0);
        ck_assert_int_eq(memcmp(y, ref, FN * 4), 0);
    }
    int rc = e2e_wait_exit(pid, 60);
    ck_assert_msg(rc == 0, "the forked child exited %d (see child_calls)", rc);
    free(x), free(ref), free(y);
    gpuq_close(a), gpuq_close(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_stage");
    TCase *tc = tcase_create("stage");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, normalize_at_chunk_boundaries);
    tcase_add_test(tc, copy_out_expected);
    tcase_add_test(tc, two_inputs_at_chunk_boundaries);
    tcase_add_test(tc, two_outputs_at_chunk_boundaries);
    tcase_add_test(tc, forked_child_stages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    /* four threads copy, whatever this machine's CPUs: the chunks above
     * are spread over them */
    if (setenv("GPUQ_COPY_THREADS", "4", 1))
        return 1;
    return tu_run_suite(suite());
}
