/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_gate_stage.c - libgpuq's gated staging (client/lib/stage.c;
 * PROTOCOL.md 3.4), end to end on the CPU backend.
 *
 * A blocking call on plain memory whose inputs come to STAGE_GATE_MIN
 * bytes or more goes gated: the request is sent first, then the inputs are
 * copied into the staging arena in pieces (stage_gate_piece), each followed
 * by a "ready". Checked here: the results equal the socket path's byte for
 * byte, nothing is written past an output, for inputs whose bytes lie at
 * the piece boundaries (a whole number of pieces, one element less, one
 * more) and around STAGE_GATE_MIN, in each piece-size regime (1 MiB, an
 * eighth of the input, 4 MiB), for one input (normalize f32 and f64, by
 * gpuq_call_req and by gpuq_call), two inputs that a piece spans
 * (haversine between two point sets) and two outputs (knn); the exact
 * number of readies each call sent, counted by libgpuq and by gpuqd;
 * none under STAGE_GATE_MIN, on SOCKET, or with GPUQ_GATE=0; the
 * connection in step after a gated call (nothing pending, a pipelined
 * pair works), after one that gpuqd refuses (zero_norm) and after one
 * whose wait is interrupted (the readies' replies read with the request's
 * by the next wait).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq.h"
#include "stage.h"

#define MIB ((size_t)1 << 20)

/* The readies a gated call with `input` staged input bytes sends: one per
 * piece; none for an input under STAGE_GATE_MIN. */
static uint64_t readies_for(uint64_t input)
{
    if (input < STAGE_GATE_MIN)
        return 0;
    uint64_t p = stage_gate_piece(input);
    return (input + p - 1) / p;
}

/* The readies c sent since *last (updated). */
static uint64_t readies_since(const gpuq_conn *c, uint64_t *last)
{
    uint64_t now = stage_ready_count(c), d = now - *last;
    *last = now;
    return d;
}

/* gpuqd's count of ready requests (status "requests" map). */
static long long daemon_readies(void)
{
    static char js[65536];
    e2e_status(js, sizeof js);
    const char *m = strstr(js, "\"requests\"");
    ck_assert_ptr_nonnull(m);
    const char *end = strchr(m, '}');
    const char *k = strstr(m, "\"ready\"");
    if (!k || k > end)
        return 0; /* none counted yet */
    return e2e_json_int(k, "ready");
}

START_TEST(piece_sizes)
{
    /* the three regimes, at their edges */
    ck_assert_uint_eq(stage_gate_piece(STAGE_GATE_MIN), 1 * MIB);
    ck_assert_uint_eq(stage_gate_piece(8 * MIB), 1 * MIB);
    ck_assert_uint_eq(stage_gate_piece(8 * MIB + 8), 1 * MIB + 64);
    ck_assert_uint_eq(stage_gate_piece(12 * MIB), 3 * MIB / 2);
    ck_assert_uint_eq(stage_gate_piece(32 * MIB), 4 * MIB);
    ck_assert_uint_eq(stage_gate_piece(1024 * MIB), 4 * MIB);
    ck_assert_uint_eq(readies_for(STAGE_GATE_MIN - 1), 0);
    ck_assert_uint_eq(readies_for(STAGE_GATE_MIN), 2);
    ck_assert_uint_eq(readies_for(16 * MIB), 8);
    ck_assert_uint_eq(readies_for(36 * MIB + 4), 10);
}
END_TEST

/* Input bytes of normalize calls: around STAGE_GATE_MIN; whole pieces of
 * 1 MiB; the input/8 regime; whole pieces of 4 MiB. Each also one element
 * less and more. */
static const size_t norm_bytes[] = {2 * MIB, 3 * MIB, 12 * MIB, 36 * MIB};

START_TEST(normalize_at_piece_boundaries)
{
    gpuq_conn *a = e2e_connect("gated", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    uint64_t seen = 0, sent = 0;
    long long before = daemon_readies();
    for (int f32 = 0; f32 < 2; f32++) {
        size_t elem = f32 ? 4 : 8;
        gpuq_dtype dt = f32 ? GPUQ_DT_F32 : GPUQ_DT_F64;
        for (size_t bi = 0; bi < sizeof norm_bytes / sizeof *norm_bytes; bi++) {
            for (int d = -1; d <= 1; d++) {
                size_t bytes = norm_bytes[bi] + (size_t)(d * (long)elem), n = bytes / elem;
                void *x = e2e_rand_buf(bytes, f32), *ya = e2e_out_buf(bytes),
                     *ys = e2e_out_buf(bytes);
                ck_assert_msg(gpuq_normalize_1d(a, dt, GPUQ_NORM_ZSCORE, x, n, ya) == 0, "%s",
                              gpuq_errmsg(a));
                ck_assert_uint_eq(readies_since(a, &seen), readies_for(bytes));
                sent += readies_for(bytes);
                ck_assert_msg(gpuq_normalize_1d(s, dt, GPUQ_NORM_ZSCORE, x, n, ys) == 0, "%s",
                              gpuq_errmsg(s));
                ck_assert_msg(memcmp(ya, ys, bytes) == 0,
                              "normalize of %zu bytes (%s): gated differs from socket", bytes,
                              f32 ? "f32" : "f64");
                e2e_guard_intact(ya, bytes, "normalize");
                ck_assert_uint_eq(gpuq_pending(a), 0);
                free(x), free(ya), free(ys);
            }
        }
    }
    ck_assert_uint_eq(stage_ready_count(s), 0);
    ck_assert_uint_gt(sent, 0);
    ck_assert_int_eq(daemon_readies() - before, (long long)sent); /* each one reached gpuqd */
    gpuq_close(a), gpuq_close(s);
}
END_TEST

/* gpuq_call (a filled gpuq_request, stage_call): the same gating. */
START_TEST(gpuq_call_gates)
{
    gpuq_conn *a = e2e_connect("gated", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    static const size_t ns[] = {STAGE_GATE_MIN / 8 - 1, STAGE_GATE_MIN / 8, 3 * MIB / 8 + 1};
    uint64_t seen = 0;
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        size_t n = ns[i], bytes = 8 * n;
        double *x = e2e_rand_buf(bytes, 0), *ya = e2e_out_buf(bytes), *ys = e2e_out_buf(bytes);
        gpuq_request ra = e2e_norm_req(n), rs = e2e_norm_req(n);
        ck_assert_msg(gpuq_call(a, &ra, x, bytes, NULL, 0, ya, bytes, NULL) == 0, "%s",
                      gpuq_errmsg(a));
        ck_assert_uint_eq(readies_since(a, &seen), readies_for(bytes));
        ck_assert(!ra.gate && ra.nin_ref == 0 && ra.nout_ref == 0); /* as it came */
        ck_assert_msg(gpuq_call(s, &rs, x, bytes, NULL, 0, ys, bytes, NULL) == 0, "%s",
                      gpuq_errmsg(s));
        ck_assert_msg(memcmp(ya, ys, bytes) == 0, "gpuq_call of %zu bytes differs", bytes);
        e2e_guard_intact(ya, bytes, "gpuq_call");
        free(x), free(ya), free(ys);
    }
    gpuq_close(a), gpuq_close(s);
}
END_TEST

START_TEST(two_inputs_at_piece_boundaries)
{
    gpuq_conn *a = e2e_connect("gated", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    /* haversine between a[i] and b[i], 16 bytes a point each: inputs of
     * 2 MiB together (each 1 MiB: A is the first piece), of 3 MiB (the
     * second piece spans A's end and B's start), of 36 MiB; a point less
     * and more */
    static const size_t totals[] = {2 * MIB, 3 * MIB, 36 * MIB};
    uint64_t seen = 0;
    for (size_t ti = 0; ti < sizeof totals / sizeof *totals; ti++) {
        for (int d = -1; d <= 1; d++) {
            size_t n = totals[ti] / 32 + (size_t)d, in = 32 * n;
            double *pa = e2e_rand_buf(16 * n, 0), *pb = e2e_rand_buf(16 * n, 0);
            double *oa = e2e_out_buf(8 * n), *os = e2e_out_buf(8 * n);
            ck_assert_msg(gpuq_haversine_pair(a, GPUQ_DT_F64, pa, pb, n, 6371.0, oa) == 0, "%s",
                          gpuq_errmsg(a));
            ck_assert_uint_eq(readies_since(a, &seen), readies_for(in));
            ck_assert_msg(gpuq_haversine_pair(s, GPUQ_DT_F64, pa, pb, n, 6371.0, os) == 0, "%s",
                          gpuq_errmsg(s));
            ck_assert_msg(memcmp(oa, os, 8 * n) == 0, "haversine of %zu points differs", n);
            e2e_guard_intact(oa, 8 * n, "haversine");
            free(pa), free(pb), free(oa), free(os);
        }
    }
    ck_assert_uint_gt(seen, 0);
    gpuq_close(a), gpuq_close(s);
}
END_TEST

START_TEST(two_outputs_at_piece_boundaries)
{
    gpuq_conn *a = e2e_connect("gated", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    /* knn with k 1 against 8 points of 2 dimensions (f32): x of 8 bytes a
     * row, y of 64 bytes, the last piece's end */
    enum { N = 8, D = 2 };
    float *y = e2e_rand_buf(N * D * 4, 1);
    static const size_t totals[] = {2 * MIB, 5 * MIB};
    uint64_t seen = 0;
    for (size_t ti = 0; ti < sizeof totals / sizeof *totals; ti++) {
        for (int d = -1; d <= 1; d++) {
            size_t m = (totals[ti] - N * D * 4) / 8 + (size_t)d, in = 8 * m + N * D * 4;
            float *x = e2e_rand_buf(m * D * 4, 1);
            float *da = e2e_out_buf(4 * m), *ds = e2e_out_buf(4 * m);
            int64_t *ia = e2e_out_buf(8 * m), *is = e2e_out_buf(8 * m);
            ck_assert_msg(
                gpuq_knn(a, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, x, y, m, N, D, 1, da, ia) == 0,
                "%s", gpuq_errmsg(a));
            ck_assert_uint_eq(readies_since(a, &seen), readies_for(in));
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
    ck_assert_uint_gt(seen, 0);
    free(y);
    gpuq_close(a), gpuq_close(s);
}
END_TEST

enum { BIG_N = 4 << 20 }; /* f32 elements: 16 MiB, 8 pieces of 2 MiB */

/* GPUQ_GATE=0 (or unset) at gpuq_connect: staged, not gated; GPUQ_GATE=1 gates. */
START_TEST(gate_env_off)
{
    ck_assert_int_eq(setenv("GPUQ_GATE", "0", 1), 0);
    gpuq_conn *off = e2e_connect("off", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(setenv("GPUQ_GATE", "1", 1), 0);
    gpuq_conn *on = e2e_connect("on", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(unsetenv("GPUQ_GATE"), 0);
    gpuq_conn *dflt = e2e_connect("default", GPUQ_PRIO_NORMAL); /* off: opt-in */
    ck_assert_int_eq(setenv("GPUQ_GATE", "1", 1), 0);
    float *x = e2e_rand_buf(4 * BIG_N, 1), *yo = e2e_out_buf(4 * BIG_N),
          *yn = e2e_out_buf(4 * BIG_N);
    long long before = daemon_readies();
    ck_assert_int_eq(gpuq_normalize_1d(off, GPUQ_DT_F32, GPUQ_NORM_MINMAX, x, BIG_N, yo), 0);
    ck_assert_uint_eq(stage_ready_count(off), 0);
    ck_assert_int_eq(daemon_readies(), before);
    ck_assert_int_eq(e2e_status_int("arena_open") > 0, 1); /* it was staged all the same */
    ck_assert_int_eq(gpuq_normalize_1d(on, GPUQ_DT_F32, GPUQ_NORM_MINMAX, x, BIG_N, yn), 0);
    ck_assert_uint_eq(stage_ready_count(on), 8);
    ck_assert_int_eq(daemon_readies(), before + 8);
    ck_assert_int_eq(memcmp(yo, yn, 4 * BIG_N), 0);
    ck_assert_int_eq(gpuq_normalize_1d(dflt, GPUQ_DT_F32, GPUQ_NORM_MINMAX, x, BIG_N, yo), 0);
    ck_assert_uint_eq(stage_ready_count(dflt), 0); /* unset: not gated */
    ck_assert_int_eq(memcmp(yo, yn, 4 * BIG_N), 0);
    free(x), free(yo), free(yn);
    gpuq_close(off), gpuq_close(on), gpuq_close(dflt);
}
END_TEST

/* A builder request that sets "gate" itself keeps its own key: libgpuq
 * does not gate it too (the header once had the key twice: bad_header). */
START_TEST(builder_gate_key_kept)
{
    gpuq_conn *a = e2e_connect("gated", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    uint64_t n = BIG_N;
    float *x = e2e_rand_buf(4 * BIG_N, 1), *ya = e2e_out_buf(4 * BIG_N),
          *ys = e2e_out_buf(4 * BIG_N);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    gpuq_req *r = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F32, 1, &n, x, 4 * BIG_N), 0);
    ck_assert_int_eq(gpuq_req_set_str(r, "method", "l2"), 0);
    ck_assert_int_eq(gpuq_req_set_bool(r, "gate", false), 0);
    ck_assert_int_eq(gpuq_req_set_output(r, 0, ya, 4 * BIG_N), 0);
    long long before = daemon_readies();
    ck_assert_msg(gpuq_call_req(a, r, res) == 0, "%s", gpuq_errmsg(a));
    ck_assert_int_eq(gpuq_result_status(res), 0);
    ck_assert_uint_eq(stage_ready_count(a), 0); /* the caller's gate: none of libgpuq's */
    ck_assert_int_eq(daemon_readies(), before);
    ck_assert_int_eq(e2e_status_int("arena_open") > 0, 1); /* staged all the same */
    ck_assert_int_eq(gpuq_normalize_1d(s, GPUQ_DT_F32, GPUQ_NORM_L2, x, BIG_N, ys), 0);
    ck_assert_int_eq(memcmp(ya, ys, 4 * BIG_N), 0);
    e2e_guard_intact(ya, 4 * BIG_N, "normalize");
    /* the same request without the key is gated as any other */
    gpuq_req *g = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(g);
    gpuq_req_set_input(g, 0, GPUQ_DT_F32, 1, &n, x, 4 * BIG_N);
    gpuq_req_set_str(g, "method", "l2");
    gpuq_req_set_output(g, 0, ya, 4 * BIG_N);
    ck_assert_msg(gpuq_call_req(a, g, res) == 0, "%s", gpuq_errmsg(a));
    ck_assert_uint_eq(stage_ready_count(a), readies_for(4 * BIG_N));
    ck_assert_int_eq(memcmp(ya, ys, 4 * BIG_N), 0);
    ck_assert_uint_eq(gpuq_pending(a), 0);
    gpuq_req_free(r), gpuq_req_free(g), gpuq_result_free(res);
    free(x), free(ya), free(ys);
    gpuq_close(a), gpuq_close(s);
}
END_TEST

/* The builder request of a small f64 normalize (sum) of x[n] into y. */
static gpuq_req *small_norm(const double *x, uint64_t n, double *y)
{
    gpuq_req *r = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(r);
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, &n, x, n * 8);
    gpuq_req_set_str(r, "method", "sum");
    gpuq_req_set_output(r, 0, y, n * 8);
    return r;
}

/* After gated calls, and one gpuqd refuses (zero_norm: the readies' replies
 * are read all the same), nothing is pending and pipelined requests work. */
START_TEST(in_step_after_gated_calls)
{
    gpuq_conn *c = e2e_connect("gated", GPUQ_PRIO_NORMAL),
              *s = e2e_conn_with("sock", GPUQ_TRANSPORT_SOCKET);
    float *x = e2e_rand_buf(4 * BIG_N, 1), *y = e2e_out_buf(4 * BIG_N),
          *ys = e2e_out_buf(4 * BIG_N);
    float *zero = calloc(BIG_N, 4);
    ck_assert_ptr_nonnull(zero);
    uint64_t seen = 0;
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, BIG_N, y), 0);
        ck_assert_uint_eq(readies_since(c, &seen), 8);
        ck_assert_uint_eq(gpuq_pending(c), 0);
        /* a constant input: zero_norm, after its input was all announced */
        int rc = gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, zero, BIG_N, y);
        ck_assert_msg(rc == GPUQ_E_ZERO_NORM, "rc %d: %s", rc, gpuq_errmsg(c));
        ck_assert_msg(strncmp(gpuq_errmsg(c), "zero_norm: ", 11) == 0, "%s", gpuq_errmsg(c));
        ck_assert_uint_eq(readies_since(c, &seen), 8);
        ck_assert_uint_eq(gpuq_pending(c), 0);
        /* pipelined: two submits, two waits, in order */
        double sx[2][3] = {{1, 2, 5}, {2, 2, 4}}, sy[2][3] = {{0}};
        gpuq_req *r0 = small_norm(sx[0], 3, sy[0]), *r1 = small_norm(sx[1], 3, sy[1]);
        uint64_t id0, id1;
        ck_assert_int_eq(gpuq_submit_req(c, r0, &id0), 0);
        ck_assert_int_eq(gpuq_submit_req(c, r1, &id1), 0);
        ck_assert_uint_eq(gpuq_pending(c), 2);
        gpuq_result *res = gpuq_result_new();
        ck_assert_int_eq(gpuq_wait_req(c, res), 0);
        ck_assert_uint_eq(gpuq_result_id(res), id0);
        ck_assert_int_eq(gpuq_wait_req(c, res), 0);
        ck_assert_uint_eq(gpuq_result_id(res), id1);
        ck_assert(sy[0][0] == 0.125 && sy[0][2] == 0.625 && sy[1][1] == 0.25);
        ck_assert_uint_eq(gpuq_pending(c), 0);
        gpuq_result_free(res), gpuq_req_free(r0), gpuq_req_free(r1);
    }
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, BIG_N, y), 0);
    ck_assert_int_eq(gpuq_normalize_1d(s, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, BIG_N, ys), 0);
    ck_assert_int_eq(memcmp(y, ys, 4 * BIG_N), 0);
    free(x), free(y), free(ys), free(zero);
    gpuq_close(c), gpuq_close(s);
}
END_TEST

/* A gated call whose wait is interrupted (a timer fd, while gpuqd's job
 * is slowed) gives up the request alone: one pending, its output never
 * written; the next wait reads its reply and its readies', and the
 * connection goes on. */
START_TEST(interrupted_gated_call)
{
    e2e_restart_slow(1500, NULL);
    gpuq_conn *c = e2e_connect("gated", GPUQ_PRIO_NORMAL);
    float *x = e2e_rand_buf(4 * BIG_N, 1), *y = e2e_out_buf(4 * BIG_N),
          *y2 = e2e_out_buf(4 * BIG_N);
    /* a first call opens the staging arena, and gives the reference */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, BIG_N, y2), 0);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    ck_assert_int_ge(tfd, 0);
    struct itimerspec its = {.it_value = {.tv_nsec = 300 * 1000 * 1000}};
    ck_assert_int_eq(timerfd_settime(tfd, 0, &its, NULL), 0);
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, tfd), 0);
    uint64_t seen = stage_ready_count(c);
    int rc = gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, BIG_N, y);
    ck_assert_msg(rc == GPUQ_E_INTERRUPTED, "rc %d: %s", rc, gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_set_interrupt_fd(c, -1), 0);
    close(tfd);
    ck_assert_uint_eq(readies_since(c, &seen), 8); /* all sent before the wait */
    ck_assert_uint_eq(gpuq_pending(c), 1);
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_wait_req(c, res), 0); /* the request's, then its readies' */
    ck_assert_uint_eq(gpuq_pending(c), 0);
    const uint8_t *yb = (const uint8_t *)y;
    size_t i = 0;
    while (i < 4 * (size_t)BIG_N && yb[i] == 0x3c)
        i++;
    ck_assert_msg(i == 4 * (size_t)BIG_N, "byte %zu of an interrupted call's output written", i);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, x, BIG_N, y), 0);
    ck_assert_int_eq(memcmp(y, y2, 4 * BIG_N), 0);
    gpuq_result_free(res);
    free(x), free(y), free(y2);
    gpuq_close(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_gate_stage");
    TCase *tc = tcase_create("gate");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, piece_sizes);
    tcase_add_test(tc, normalize_at_piece_boundaries);
    tcase_add_test(tc, gpuq_call_gates);
    tcase_add_test(tc, two_inputs_at_piece_boundaries);
    tcase_add_test(tc, two_outputs_at_piece_boundaries);
    tcase_add_test(tc, gate_env_off);
    tcase_add_test(tc, builder_gate_key_kept);
    tcase_add_test(tc, in_step_after_gated_calls);
    tcase_add_test(tc, interrupted_gated_call);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    if (setenv("GPUQ_GATE", "1", 1) || setenv("GPUQ_COPY_THREADS", "4", 1)) /* opt-in */
        return 1;
    return tu_run_suite(suite());
}
