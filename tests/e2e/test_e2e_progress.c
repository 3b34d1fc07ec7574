/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_progress.c - the "started" notice (PROTOCOL.md 4.1) and what
 * the clients make of it: gpuqd (server/request/started.c), libgpuq
 * (gpuq_set_started_fn) and gpuqctl's progress line (ctl_progress.c).
 *
 * On the wire, with one job at a time (--device-window 1) taking SLOW_MS:
 * a request sent with "progress": true gets {"id", "status": "started"}
 * without a payload when it leaves the queue, then its reply; one sent
 * without gets only its reply; one that never runs (its deadline passes in
 * the queue) gets no notice; the frames keep request order. A control op
 * with progress gets no notice; "progress" that is not a bool is refused
 * by name and the connection serves on. libgpuq calls the connection's
 * started callback once per opted-in request, a job's time before the
 * reply, on gpuq_call, gpuq_call_req and pipelined waits, and never for
 * requests without progress. gpuqctl's line (GPUQ_PROGRESS=1) says queued
 * while another client's job runs, then running, by socket and shared
 * memory, and the result is the one a plain run gives.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"
#include "mpread.h"
#include "mpwrite.h"

enum { N = 1024, SLOW_MS = 400 };

static double x[N], y[8][N];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void start_slow(int ms)
{
    for (int i = 0; i < N; i++)
        x[i] = i + 1;
    const char *extra[] = {"--device-window", "1", NULL};
    e2e_restart_slow(ms, extra);
}

/* ---- the wire ---- */

typedef struct frame_seen {
    uint64_t id;
    int status;
    bool started;
    size_t payload;
    double at;
} frame_seen;

static frame_seen read_frame(int fd)
{
    static uint8_t data[N * sizeof(double)];
    uint8_t hbuf[4096];
    gpuq_reply rep;
    size_t len = 0;
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, data, sizeof data, &len), 0);
    return (frame_seen){rep.id, rep.status, rep.started, len, now_s()};
}

START_TEST(started_before_reply_in_order)
{
    start_slow(SLOW_MS);
    uint8_t hbuf[4096];
    int fd = e2e_hello_socket("wire", hbuf, sizeof hbuf);
    uint8_t *buf = NULL;
    size_t len = 0;
    for (uint64_t k = 1; k <= 4; k++) {
        gpuq_request r = e2e_norm_req(N);
        r.id = k;
        r.progress = k != 2;              /* 2: not opted in */
        r.deadline_ms = k == 4 ? 100 : 0; /* 4: expires queued behind three jobs */
        e2e_append_req(&buf, &len, &r, x, sizeof x);
    }
    ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
    double t0 = now_s();
    free(buf);
    /* request order; a notice just before its own reply, without payload */
    const struct {
        uint64_t id;
        bool started;
    } want[] = {{1, true}, {1, false}, {2, false}, {3, true}, {3, false}, {4, false}};
    frame_seen got[6];
    for (int k = 0; k < 6; k++) {
        got[k] = read_frame(fd);
        ck_assert_msg(got[k].id == want[k].id && got[k].started == want[k].started,
                      "frame %d: id %llu started %d; expected id %llu started %d", k,
                      (unsigned long long)got[k].id, got[k].started, (unsigned long long)want[k].id,
                      want[k].started);
        if (got[k].started)
            ck_assert(got[k].status == 0 && got[k].payload == 0);
    }
    ck_assert_int_eq(got[1].status, 0);
    ck_assert_uint_eq(got[1].payload, sizeof x);
    ck_assert_int_eq(got[5].status, GPUQ_E_DEADLINE_EXCEEDED);
    /* the notice as the job starts, the reply a job's time later */
    ck_assert_msg(got[0].at - t0 < 0.25 * SLOW_MS / 1e3 + 0.1, "started after %.3f s",
                  got[0].at - t0);
    ck_assert_msg(got[1].at - got[0].at > 0.8 * SLOW_MS / 1e3, "reply %.3f s after started",
                  got[1].at - got[0].at);
    /* nothing more: request 4 never ran */
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply_within(fd, &rep, hbuf, sizeof hbuf, 0.5), E2E_TIMED_OUT);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* A frame of header {"id": id, "op": "ping", "progress": value}. */
static void send_ping(int fd, uint64_t id, bool as_int)
{
    gpuq_mpw *w = gpuq_mpw_new();
    ck_assert_ptr_nonnull(w);
    gpuq_mpw_map(w, 3);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, id);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, "ping");
    gpuq_mpw_str(w, "progress");
    if (as_int)
        gpuq_mpw_uint(w, 1);
    else
        gpuq_mpw_bool(w, true);
    uint8_t *hdr;
    size_t hlen;
    ck_assert_int_eq(gpuq_mpw_take(w, &hdr, &hlen), 0);
    gpuq_mpw_free(w);
    e2e_send_frame(fd, hdr, (uint32_t)hlen, 0, NULL, 0);
    free(hdr);
}

START_TEST(control_op_and_bad_value)
{
    uint8_t hbuf[4096];
    int fd = e2e_hello_socket("ping", hbuf, sizeof hbuf);
    send_ping(fd, 7, false);
    send_ping(fd, 8, true);
    send_ping(fd, 9, false);
    frame_seen a = read_frame(fd), b = read_frame(fd), c = read_frame(fd);
    ck_assert(a.id == 7 && a.status == 0 && !a.started);
    ck_assert_msg(b.id == 8 && b.status == GPUQ_E_BAD_HEADER && !b.started, "id %llu status %d",
                  (unsigned long long)b.id, b.status);
    ck_assert(c.id == 9 && c.status == 0 && !c.started);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply_within(fd, &rep, hbuf, sizeof hbuf, 0.3), E2E_TIMED_OUT);
    /* the refusal names the key */
    send_ping(fd, 10, true);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == GPUQ_E_BAD_HEADER && strstr(rep.message, "\"progress\""),
                  "message: %s", rep.message);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* ---- libgpuq ---- */

typedef struct heard {
    int n;
    uint64_t ids[8];
    double at[8];
} heard;

static void on_started(void *user, uint64_t id)
{
    heard *h = user;
    if (h->n < 8) {
        h->ids[h->n] = id;
        h->at[h->n] = now_s();
    }
    h->n++;
}

START_TEST(lib_callback)
{
    start_slow(SLOW_MS);
    gpuq_conn *c = e2e_connect("lib", GPUQ_PRIO_NORMAL);
    heard h = {0};
    gpuq_set_started_fn(c, on_started, &h);
    /* gpuq_call: once, with the reply's id, a job's time before it */
    gpuq_request r = e2e_norm_req(N);
    r.progress = true;
    gpuq_reply rep;
    ck_assert_int_eq(gpuq_call(c, &r, x, sizeof x, NULL, 0, y[0], sizeof y[0], &rep), 0);
    double done = now_s();
    ck_assert_int_eq(h.n, 1);
    ck_assert_uint_eq(h.ids[0], rep.id);
    ck_assert_msg(done - h.at[0] > 0.8 * SLOW_MS / 1e3, "callback %.3f s before the reply",
                  done - h.at[0]);
    /* without progress: not called */
    r.progress = false;
    ck_assert_int_eq(gpuq_call(c, &r, x, sizeof x, NULL, 0, y[1], sizeof y[1], &rep), 0);
    ck_assert_int_eq(h.n, 1);
    /* a builder request with "progress" */
    gpuq_req *q = gpuq_req_new("normalize");
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(gpuq_req_set_dtype(q, GPUQ_DT_F64), 0);
    ck_assert_int_eq(gpuq_req_set_str(q, "method", "sum"), 0);
    ck_assert_int_eq(gpuq_req_set_bool(q, "progress", true), 0);
    const uint64_t shape[1] = {N};
    ck_assert_int_eq(gpuq_req_set_input(q, 0, GPUQ_DT_F64, 1, shape, x, sizeof x), 0);
    ck_assert_int_eq(gpuq_req_set_output(q, 0, y[2], sizeof y[2]), 0);
    gpuq_result *res = gpuq_result_new();
    ck_assert_ptr_nonnull(res);
    ck_assert_int_eq(gpuq_call_req(c, q, res), 0);
    ck_assert_int_eq(h.n, 2);
    gpuq_result_free(res);
    gpuq_req_free(q);
    /* pipelined: one per opted-in request, in order, each before its wait
     * returns */
    uint64_t ids[3];
    for (int k = 0; k < 3; k++) {
        r.progress = k != 1;
        ck_assert_int_eq(
            gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[3 + k], sizeof y[3 + k], &ids[k]), 0);
    }
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(gpuq_wait(c, &rep), 0);
        ck_assert_uint_eq(rep.id, ids[k]);
        ck_assert_int_eq(h.n, (k < 2 ? 3 : 4)); /* #3's notice comes after #2's reply */
    }
    ck_assert(h.ids[2] == ids[0] && h.ids[3] == ids[2]);
    double sum = (double)N * (N + 1) / 2;
    for (int k = 0; k < 6; k++)
        ck_assert_msg(y[k][0] > 0.999999 / sum && y[k][0] < 1.000001 / sum, "y[%d]", k);
    gpuq_close(c);
}
END_TEST

/* ---- gpuqctl's line ---- */

START_TEST(ctl_queued_then_running)
{
    start_slow(1500);
    char xp[320], op[320], pp[320], ep[320];
    snprintf(xp, sizeof xp, "%s/x.npy", e2e_d.dir);
    snprintf(op, sizeof op, "%s/o.npy", e2e_d.dir);
    snprintf(pp, sizeof pp, "%s/p.npy", e2e_d.dir);
    snprintf(ep, sizeof ep, "%s/err.txt", e2e_d.dir);
    {
        char cmd[700];
        snprintf(cmd, sizeof cmd,
                 "%s -c \"import numpy as np; np.save('%s', np.arange(1, 601.0).reshape(30, 20))\"",
                 GPUQ_PYTHON, xp);
        ck_assert_int_eq(system(cmd), 0);
    }
    for (int t = 0; t < 2; t++) {
        /* another client's job holds the device for 1.5 s */
        gpuq_conn *c = e2e_connect("hold", GPUQ_PRIO_NORMAL);
        gpuq_request r = e2e_norm_req(N);
        uint64_t id;
        ck_assert_int_eq(gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[0], sizeof y[0], &id), 0);
        usleep(100000);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            int fe = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fe < 0 || dup2(fe, 2) < 0)
                _exit(126);
            setenv("GPUQ_PROGRESS", "1", 1);
            execl(GPUQCTL_PATH, GPUQCTL_PATH, "--socket", e2e_d.socket, "--transport",
                  t ? "shm" : "socket", "normalize", xp, "-o", op, (char *)NULL);
            _exit(127);
        }
        ck_assert_int_eq(e2e_wait_exit(pid, 60), 0);
        gpuq_reply rep;
        ck_assert_int_eq(gpuq_wait(c, &rep), 0);
        gpuq_close(c);
        size_t len;
        char *e = tu_read_file(ep, &len);
        ck_assert_ptr_nonnull(e);
        const char *via = t ? "(shared memory)" : "(socket)";
        char queued[64], running[64];
        snprintf(queued, sizeof queued, " s, queued %s", via);
        snprintf(running, sizeof running, " s, running for ");
        const char *q = strstr(e, queued), *run = strstr(e, running);
        ck_assert_msg(q && run && q < run && strstr(run, via), "stderr: %s", e);
        ck_assert_msg(strncmp(e, "\rgpuqctl: 1.", 12) == 0 && e[len - 1] == '\n', "stderr: %s", e);
        free(e);
        const char *plain[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "normalize",
                               xp,           "-o",       pp,           NULL};
        ck_assert_int_eq(tu_run(plain, NULL, NULL), 0);
        size_t la, lb;
        char *a = tu_read_file(op, &la), *b = tu_read_file(pp, &lb);
        ck_assert(a && b && la == lb && memcmp(a, b, la) == 0);
        free(a);
        free(b);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_progress");
    TCase *tc = tcase_create("progress");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, started_before_reply_in_order);
    tcase_add_test(tc, control_op_and_bad_value);
    tcase_add_test(tc, lib_callback);
    tcase_add_test(tc, ctl_queued_then_running);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
