/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_gate.c - gated requests and the ready op (PROTOCOL.md 3.4) end
 * to end, through the raw request structs (libgpuq's own gated staging is
 * test_e2e_stage's): a gated normalize whose input is announced in pieces
 * equals the ungated one byte for byte and computes nothing before its
 * last piece; every bad ready is refused with its message and the session
 * serves on; a gated request whose input never comes is answered at its
 * deadline, by cancel, by frame_timeout (the connection closed), or
 * dropped with its connection, and in each case nothing stays in flight
 * (on CUDA: its uploads, waiting on the device, are released). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq.h"

static gpuq_conn *c;
static gpuq_arena *a;

enum { N = 2 << 20, PIECE = 1 << 20 }; /* 16 MiB of float64, 1 MiB pieces */

static void gate_setup(void)
{
    e2e_setup();
    c = e2e_connect("gate", GPUQ_PRIO_NORMAL);
    ck_assert_msg(gpuq_arena_open(c, 3 * (size_t)N * 8, &a) == 0, "%s", gpuq_errmsg(c));
}

static void gate_teardown(void)
{
    gpuq_close(c); /* closes a */
    c = NULL;
    a = NULL;
    e2e_teardown();
}

/* x: N values at the arena's start, out at N * 8, a second out at 2N * 8 */
static double *xs(void)
{
    return gpuq_arena_base(a);
}

static gpuq_request gated_norm(uint64_t out_off)
{
    gpuq_request q = e2e_norm_req(N); /* f64, method sum */
    q.nin_ref = q.nout_ref = 1;
    q.in_ref[0] = (gpuq_ref){gpuq_arena_id(a), 0, (uint64_t)N * 8};
    q.out_ref[0] = (gpuq_ref){gpuq_arena_id(a), out_off, (uint64_t)N * 8};
    q.gate = true;
    return q;
}

static gpuq_request ready_req(uint64_t target, uint64_t bytes)
{
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_READY;
    q.has_request = q.has_bytes = true;
    q.request = target;
    q.bytes = bytes;
    return q;
}

/* Send a ready and return its id. */
static uint64_t send_ready(uint64_t target, uint64_t bytes)
{
    gpuq_request q = ready_req(target, bytes);
    uint64_t id = 0;
    ck_assert_msg(gpuq_submit(c, &q, NULL, 0, NULL, 0, NULL, 0, &id) == 0, "%s", gpuq_errmsg(c));
    return id;
}

static void fill(double *x, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        x[i] = 1.0 + (double)((i * 13) % 17);
}

/* The input announced in 1 MiB pieces, each written just before its
 * ready; halfway the daemon is given time and must not have written any
 * result; all replies ok; the result equals the ungated call's bit for bit. */
START_TEST(pieces_equal_ungated)
{
    double *x = xs(), *y = x + N, *ref = x + 2 * (size_t)N;
    memset(x, 0, 3 * (size_t)N * 8);
    gpuq_request q = gated_norm((uint64_t)N * 8);
    uint64_t gid = 0;
    ck_assert_int_eq(gpuq_submit(c, &q, NULL, 0, NULL, 0, NULL, 0, &gid), 0);
    size_t per = PIECE / 8, sent = 0;
    unsigned readies = 0;
    while (sent < (size_t)N) {
        size_t next = sent + per < (size_t)N ? sent + per : (size_t)N;
        fill(x, sent, next);
        send_ready(gid, next * 8);
        readies++;
        sent = next;
        if (sent == (size_t)N / 2) {
            tu_sleep_s(0.3);
            for (size_t i = 0; i < (size_t)N; i += 4099)
                ck_assert_msg(y[i] == 0.0, "a result at %zu before the input was all in", i);
        }
    }
    gpuq_reply rep;
    ck_assert_msg(gpuq_wait(c, &rep) == 0, "gated: %s", rep.message);
    ck_assert_uint_eq(rep.id, gid);
    for (unsigned k = 0; k < readies; k++)
        ck_assert_msg(gpuq_wait(c, &rep) == 0, "ready %u: %s", k, rep.message);
    ck_assert_uint_eq(gpuq_pending(c), 0);
    /* the same request ungated, into ref */
    q = gated_norm(2 * (uint64_t)N * 8);
    q.gate = false;
    ck_assert_int_eq(gpuq_call(c, &q, NULL, 0, NULL, 0, NULL, 0, &rep), 0);
    ck_assert_msg(memcmp(y, ref, (size_t)N * 8) == 0, "gated result differs from ungated");
    double sum = 0;
    for (size_t i = 0; i < (size_t)N; i++)
        sum += x[i];
    ck_assert_double_eq_tol(y[12345], x[12345] / sum, 1e-15);
    ck_assert_int_eq(gpuq_ping(c), 0);
}
END_TEST

/* A bad request, answered code with needle in its message; the session
 * serves on. */
static void expect_refused(gpuq_request q, int code, const char *needle)
{
    gpuq_reply rep;
    int rc = gpuq_call(c, &q, NULL, 0, NULL, 0, NULL, 0, &rep);
    ck_assert_msg(rc == code, "got %s (%s), want %s", gpuq_errname(rc), rep.message,
                  gpuq_errname(code));
    ck_assert_msg(strstr(rep.message, needle), "message \"%s\" lacks \"%s\"", rep.message, needle);
    ck_assert_int_eq(gpuq_ping(c), 0);
}

START_TEST(bad_gates_and_readies)
{
    /* gate without "in" */
    gpuq_request q = e2e_norm_req(16);
    q.gate = true;
    double in[16] = {1, 2, 3};
    gpuq_reply rep;
    int rc = gpuq_call(c, &q, in, sizeof in, NULL, 0, NULL, 0, &rep);
    ck_assert_int_eq(rc, GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(rep.message, "\"gate\" needs \"in\""), "%s", rep.message);
    /* ready without bytes, without request */
    q = ready_req(1, 8);
    q.has_bytes = false;
    expect_refused(q, GPUQ_E_BAD_ARGUMENT, "ready needs");
    q = ready_req(1, 8);
    q.has_request = false;
    expect_refused(q, GPUQ_E_BAD_ARGUMENT, "ready needs");
    /* a ready of a request that is not there: ok */
    expect_refused(ready_req(987654, 8), 0, "");
    /* over the input, then backwards, then equal (fine), of one gated request */
    fill(xs(), 0, N);
    q = gated_norm((uint64_t)N * 8);
    uint64_t gid = 0;
    ck_assert_int_eq(gpuq_submit(c, &q, NULL, 0, NULL, 0, NULL, 0, &gid), 0);
    uint64_t r_over = send_ready(gid, (uint64_t)N * 8 + 1);
    uint64_t r_half = send_ready(gid, (uint64_t)N * 4);
    uint64_t r_back = send_ready(gid, (uint64_t)N * 2);
    uint64_t r_same = send_ready(gid, (uint64_t)N * 4);
    uint64_t r_all = send_ready(gid, (uint64_t)N * 8);
    ck_assert_int_eq(gpuq_wait(c, &rep), 0); /* the gated request: done */
    ck_assert_uint_eq(rep.id, gid);
    ck_assert_int_eq(gpuq_wait(c, &rep), GPUQ_E_BAD_ARGUMENT);
    ck_assert_uint_eq(rep.id, r_over);
    ck_assert_msg(strstr(rep.message, "is over its"), "%s", rep.message);
    ck_assert_int_eq(gpuq_wait(c, &rep), 0);
    ck_assert_uint_eq(rep.id, r_half);
    ck_assert_int_eq(gpuq_wait(c, &rep), GPUQ_E_BAD_ARGUMENT);
    ck_assert_uint_eq(rep.id, r_back);
    ck_assert_msg(strstr(rep.message, "is less than the"), "%s", rep.message);
    ck_assert_int_eq(gpuq_wait(c, &rep), 0);
    ck_assert_uint_eq(rep.id, r_same);
    ck_assert_int_eq(gpuq_wait(c, &rep), 0);
    ck_assert_uint_eq(rep.id, r_all);
    ck_assert_int_eq(gpuq_ping(c), 0);
}
END_TEST

/* A ready naming a request that is in flight but not gated. */
START_TEST(ready_of_ungated)
{
    gpuq_close(c);
    const char *extra[] = {NULL};
    e2e_restart_slow(600, extra); /* every job takes 0.6 s */
    c = e2e_connect("gate", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_arena_open(c, 3 * (size_t)N * 8, &a), 0);
    fill(xs(), 0, N);
    gpuq_request q = gated_norm((uint64_t)N * 8);
    q.gate = false;
    uint64_t nid = 0;
    ck_assert_int_eq(gpuq_submit(c, &q, NULL, 0, NULL, 0, NULL, 0, &nid), 0);
    uint64_t rid = send_ready(nid, 8);
    gpuq_reply rep;
    ck_assert_int_eq(gpuq_wait(c, &rep), 0);
    ck_assert_int_eq(gpuq_wait(c, &rep), GPUQ_E_BAD_ARGUMENT);
    ck_assert_uint_eq(rep.id, rid);
    ck_assert_msg(strstr(rep.message, "is not gated"), "%s", rep.message);
    ck_assert_int_eq(gpuq_ping(c), 0);
}
END_TEST

/* Nothing is left in flight: the daemon's in_flight is 0 within 10 s. */
static void nothing_in_flight(void)
{
    e2e_wait_status("in_flight", 0, 10);
    e2e_assert_serves();
}

/* Input never announced: answered at the deadline, by cancel; half
 * announced, then the connection closes: dropped. */
START_TEST(never_announced)
{
    fill(xs(), 0, N);
    gpuq_request q = gated_norm((uint64_t)N * 8);
    q.deadline_ms = 300;
    gpuq_reply rep;
    double t0 = tu_now_s();
    ck_assert_int_eq(gpuq_call(c, &q, NULL, 0, NULL, 0, NULL, 0, &rep), GPUQ_E_DEADLINE_EXCEEDED);
    ck_assert_msg(tu_now_s() - t0 < 5, "answered after %.1f s", tu_now_s() - t0);
    nothing_in_flight();
    /* cancel */
    q.deadline_ms = 0;
    uint64_t gid = 0, cid = 0;
    ck_assert_int_eq(gpuq_submit(c, &q, NULL, 0, NULL, 0, NULL, 0, &gid), 0);
    send_ready(gid, (uint64_t)N); /* an eighth */
    ck_assert_int_eq(gpuq_submit_cancel(c, gid, &cid), 0);
    ck_assert_int_eq(gpuq_wait(c, &rep), GPUQ_E_CANCELLED);
    ck_assert_uint_eq(rep.id, gid);
    ck_assert_int_eq(gpuq_wait(c, &rep), 0); /* the ready */
    ck_assert_int_eq(gpuq_wait(c, &rep), 0); /* the cancel */
    ck_assert_uint_eq(rep.id, cid);
    nothing_in_flight();
    /* the connection closes with one half announced */
    ck_assert_int_eq(gpuq_submit(c, &q, NULL, 0, NULL, 0, NULL, 0, &gid), 0);
    send_ready(gid, (uint64_t)N * 4);
    tu_sleep_s(0.2);
    gpuq_close(c);
    c = NULL;
    a = NULL;
    e2e_wait_status("sessions", 1, 10); /* the one asking */
    e2e_wait_status("arenas", 0, 10);
    nothing_in_flight();
}
END_TEST

/* frame_timeout: a gated request whose input is not all announced 1 s
 * after its header is answered timeout and the connection closes. */
START_TEST(frame_timeout_closes)
{
    gpuq_close(c);
    const char *extra[] = {"--frame-timeout", "1", NULL};
    e2e_restart(extra);
    c = e2e_connect("gate", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_arena_open(c, 3 * (size_t)N * 8, &a), 0);
    fill(xs(), 0, N);
    gpuq_request q = gated_norm((uint64_t)N * 8);
    uint64_t gid = 0;
    ck_assert_int_eq(gpuq_submit(c, &q, NULL, 0, NULL, 0, NULL, 0, &gid), 0);
    send_ready(gid, (uint64_t)N * 2);
    gpuq_reply rep;
    double t0 = tu_now_s();
    ck_assert_int_eq(gpuq_wait(c, &rep), GPUQ_E_TIMEOUT);
    double dt = tu_now_s() - t0;
    ck_assert_msg(dt > 0.7 && dt < 5, "answered after %.2f s (frame_timeout 1 s)", dt);
    ck_assert_msg(strstr(rep.message, "frame_timeout"), "%s", rep.message);
    ck_assert_int_ne(gpuq_ping(c), 0); /* closed */
    gpuq_close(c);
    c = NULL;
    a = NULL;
    e2e_wait_status("arenas", 0, 10);
    nothing_in_flight();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_gate");
    TCase *tc = tcase_create("gate");
    tcase_add_checked_fixture(tc, gate_setup, gate_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pieces_equal_ungated);
    tcase_add_test(tc, bad_gates_and_readies);
    tcase_add_test(tc, ready_of_ungated);
    tcase_add_test(tc, never_announced);
    tcase_add_test(tc, frame_timeout_closes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
