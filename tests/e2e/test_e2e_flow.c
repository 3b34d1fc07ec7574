/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_flow.c - many requests in flight: pipelining and reply order, many
 * concurrent clients at different priorities, a client that disconnects with
 * work in flight, backpressure, SIGTERM answering every accepted request, and
 * a large payload read a MiB per loop turn. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "req_args.h"
#include "e2e_util.h"

#define NPIPE 48

START_TEST(pipelined_in_order)
{
    gpuq_conn *c = e2e_connect("pipe", GPUQ_PRIO_NORMAL);
    static double in[NPIPE][257], out[NPIPE][257];
    uint64_t ids[NPIPE];
    unsigned max = gpuq_info(c)->limits.max_inflight;
    ck_assert_uint_ge(max, 8);
    unsigned sent = 0, got = 0;
    while (got < NPIPE) {
        while (sent < NPIPE && gpuq_pending(c) < max) {
            for (int j = 0; j < 257; j++)
                in[sent][j] = 1.0 + sent + j;
            gpuq_request r;
            gpuq_request_init(&r);
            r.op = GPUQ_OP_NORMALIZE;
            r.dtype = GPUQ_DT_F64;
            rq_set_method(&r, sent % 2 ? GPUQ_NORM_L1 : GPUQ_NORM_SUM);
            r.ndim_a = 1;
            r.shape_a[0] = 257;
            int rc = gpuq_submit(c, &r, in[sent], sizeof in[sent], NULL, 0, out[sent],
                                 sizeof out[sent], &ids[sent]);
            ck_assert_int_eq(rc, 0);
            sent++;
        }
        gpuq_reply rep;
        ck_assert_int_eq(gpuq_wait(c, &rep), 0);
        ck_assert_uint_eq(rep.id, ids[got]); /* request order */
        double s = 0;
        for (int j = 0; j < 257; j++)
            s += in[got][j];
        for (int j = 0; j < 257; j++)
            ck_assert_double_eq_tol(out[got][j], in[got][j] / s, 1e-15);
        got++;
    }
    ck_assert_uint_eq(gpuq_pending(c), 0);
    gpuq_close(c);
}
END_TEST

/* Fork clients; each runs requests and checks its results. */
START_TEST(concurrent_clients)
{
    enum { NCLIENT = 12, NREQ = 40 };
    pid_t pids[NCLIENT];
    for (int k = 0; k < NCLIENT; k++) {
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0) {
            gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                                   .client_name = "conc",
                                   .priority = (k % 3) - 1,
                                   .device = -1};
            gpuq_conn *c = NULL;
            if (gpuq_connect(&o, &c) != 0)
                _exit(10);
            for (int i = 0; i < NREQ; i++) {
                double x[64], y[64];
                for (int j = 0; j < 64; j++)
                    x[j] = (double)(k + 1) * (j + 1);
                if (gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_L2, x, 64, y) != 0)
                    _exit(11);
                double n = 0;
                for (int j = 0; j < 64; j++)
                    n += y[j] * y[j];
                if (fabs(n - 1) > 1e-12)
                    _exit(12);
            }
            gpuq_close(c);
            _exit(0);
        }
    }
    for (int k = 0; k < NCLIENT; k++) {
        int st = 0;
        ck_assert_int_eq(waitpid(pids[k], &st, 0), pids[k]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d failed: %d", k, st);
    }
    char js[16384];
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "normalize"), NCLIENT * NREQ);
}
END_TEST

/* Slow jobs (GPUQ_TEST_SLOW_MS): disconnect while they run; no leak, status
 * back to baseline, daemon fine. */
START_TEST(disconnect_in_flight)
{
    e2e_teardown();
    setenv("GPUQ_TEST_SLOW_MS", "100", 1);
    e2e_start(NULL);
    unsetenv("GPUQ_TEST_SLOW_MS");
    for (int round = 0; round < 3; round++) {
        gpuq_conn *c = e2e_connect("gone", GPUQ_PRIO_NORMAL);
        static double x[4096], y[8][4096];
        for (int j = 0; j < 4096; j++)
            x[j] = j + 1;
        for (int i = 0; i < 8; i++) {
            gpuq_request r = e2e_norm_req(4096);
            uint64_t id;
            ck_assert_int_eq(gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[i], sizeof y[i], &id), 0);
        }
        gpuq_close(c); /* with 8 requests in flight */
    }
    usleep(1500000); /* let the slow jobs finish */
    char js[16384];
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "sessions"), 1);
    ck_assert_int_eq(e2e_json_int(js, "in_flight"), 0);
    ck_assert_int_eq(e2e_json_int(js, "staging_bytes"), 0);
    e2e_assert_serves();
}
END_TEST

/* A client that never reads: the daemon stops reading it (bounded memory)
 * and others are served meanwhile. */
START_TEST(slow_reader_bounded)
{
    const char *extra[] = {"--session-staging", "1M", NULL};
    e2e_restart(extra);
    int fd = e2e_raw_socket();
    gpuq_request h;
    gpuq_request_init(&h);
    h.op = GPUQ_OP_HELLO;
    h.id = 1;
    h.version = GPUQ_PROTO_VERSION;
    e2e_send_req(fd, &h, NULL, 0);
    /* Queue many 64 KiB requests without reading a reply; sending blocks once
     * the daemon applies backpressure, so send from a child with a deadline. */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(5);
        static double x[8192];
        for (int j = 0; j < 8192; j++)
            x[j] = 1;
        for (uint64_t i = 0; i < 4000; i++) {
            gpuq_request r;
            gpuq_request_init(&r);
            r.id = 2 + i;
            r.op = GPUQ_OP_NORMALIZE;
            r.dtype = GPUQ_DT_F64;
            r.ndim_a = 1;
            r.shape_a[0] = 8192;
            e2e_send_req(fd, &r, x, sizeof x);
        }
        _exit(0);
    }
    usleep(1500000);
    char js[16384];
    e2e_status(js, sizeof js);
    long long staged = e2e_json_int(js, "staging_bytes");
    ck_assert_int_le(staged, 1 << 20); /* never more than the session's staging */
    e2e_assert_serves();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fd);
}
END_TEST

/* The daemon's own max_inflight check, on the wire (libgpuq never sends more
 * than max_inflight, so only raw frames reach it). Request 1 is a normalize
 * whose 8 MiB reply cannot be written while this client does not read, so
 * it and the two after it stay in flight (a request counts until its reply
 * is written) whatever the backend's speed. Then a ping (never counts),
 * a fourth normalize (the limit), and six more that are over it: each of
 * those is answered busy at once under its own id, the rest are served
 * with exact results, in request order, and the session and the daemon
 * go on. */
START_TEST(max_inflight_on_the_wire)
{
    enum { LIMIT = 4, OVER = 6, BIG = 1 << 20 };
    const char *extra[] = {"--max-inflight", "4", NULL};
    e2e_restart(extra);
    static uint8_t hb[65536];
    int fd = e2e_hello_socket("inflight", hb, sizeof hb);
    static double big[BIG];
    for (int j = 0; j < BIG; j++)
        big[j] = 1.0; /* sum BIG: every result 2^-20 */
    /* ids: 1 (big), 2, 3, 4 (ping), 5, then 6..11 over the limit */
    double small[3] = {1, 2, 5};
    for (uint64_t id = 1; id <= LIMIT + 1 + OVER; id++) {
        gpuq_request r = e2e_norm_req(id == 1 ? BIG : 3);
        r.id = id;
        if (id == 4) {
            gpuq_request_init(&r);
            r.op = GPUQ_OP_PING;
            r.id = id;
            e2e_send_req(fd, &r, NULL, 0);
        } else if (id == 1) {
            e2e_send_req(fd, &r, big, sizeof big);
        } else {
            e2e_send_req(fd, &r, small, sizeof small);
        }
    }
    /* until the daemon has read every header: then LIMIT are in flight */
    char js[16384];
    for (int k = 0; k < 500; k++) {
        e2e_status(js, sizeof js);
        if (e2e_json_int(js, "normalize") == LIMIT + OVER)
            break;
        usleep(10000);
    }
    ck_assert_int_eq(e2e_json_int(js, "normalize"), LIMIT + OVER);
    ck_assert_int_eq(e2e_json_int(js, "in_flight"), LIMIT);
    static double y[BIG];
    for (uint64_t id = 1; id <= LIMIT + 1 + OVER; id++) {
        gpuq_reply rep;
        size_t len = 0;
        int rc = e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, sizeof y, &len);
        ck_assert_msg(rc == 0, "reply %llu: %s", (unsigned long long)id,
                      rc == E2E_CLOSED ? "closed" : "timed out");
        ck_assert_uint_eq(rep.id, id); /* request order */
        if (id > LIMIT + 1) {
            ck_assert_msg(rep.status == GPUQ_E_BUSY, "request %llu over the limit: %s (%s)",
                          (unsigned long long)id, gpuq_errname(rep.status), rep.message);
            ck_assert_str_eq(rep.message, "4 requests in flight on this session (the limit)");
            ck_assert_uint_eq(len, 0);
            continue;
        }
        ck_assert_msg(rep.status == 0, "request %llu within the limit: %s (%s)",
                      (unsigned long long)id, gpuq_errname(rep.status), rep.message);
        if (id == 4) { /* the ping */
            ck_assert_uint_eq(len, 0);
        } else if (id == 1) {
            ck_assert_uint_eq(len, sizeof big);
            for (int j = 0; j < BIG; j++)
                ck_assert(y[j] == 1.0 / BIG);
        } else {
            ck_assert_uint_eq(len, sizeof small);
            ck_assert(y[0] == 0.125 && y[1] == 0.25 && y[2] == 0.625);
        }
    }
    /* the limit frees as replies are written: the same session computes */
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "busy"), OVER);
    for (uint64_t id = 20; id < 20 + LIMIT; id++) {
        gpuq_request r = e2e_norm_req(3);
        r.id = id;
        e2e_send_req(fd, &r, small, sizeof small);
    }
    for (uint64_t id = 20; id < 20 + LIMIT; id++) {
        gpuq_reply rep;
        size_t len = 0;
        ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, sizeof y, &len), 0);
        ck_assert_msg(rep.status == 0, "%s", rep.message);
        ck_assert_uint_eq(rep.id, id);
        ck_assert(y[0] == 0.125 && y[1] == 0.25 && y[2] == 0.625);
    }
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* A client keeps `window` float64 normalizes of n values outstanding on a
 * fresh connection and sends the next one the moment a reply arrives,
 * `total` in all: every reply is right and none is busy. x: n values, each
 * 1.0 (each result is 1 / n, exactly); y: room for a result. */
static void run_window(const char *name, uint64_t window, uint64_t total, const double *x,
                       double *y, uint64_t n)
{
    static uint8_t hb[65536];
    int fd = e2e_hello_socket(name, hb, sizeof hb);
    uint64_t sent = 0;
    for (; sent < window; sent++) {
        gpuq_request r = e2e_norm_req(n);
        r.id = sent + 1;
        e2e_send_req(fd, &r, x, n * sizeof *x);
    }
    for (uint64_t got = 1; got <= total; got++) {
        gpuq_reply rep;
        size_t len = 0;
        ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, n * sizeof *y, &len), 0);
        ck_assert_uint_eq(rep.id, got);
        ck_assert_msg(rep.status == 0, "%s: request %llu of %llu: %s (%s)", name,
                      (unsigned long long)got, (unsigned long long)total, gpuq_errname(rep.status),
                      rep.message);
        ck_assert(len == n * sizeof *y && y[0] == 1.0 / (double)n && y[n - 1] == 1.0 / (double)n);
        if (sent < total) {
            gpuq_request r = e2e_norm_req(n);
            r.id = ++sent;
            e2e_send_req(fd, &r, x, n * sizeof *x);
        }
    }
    close(fd);
}

/* A reply read frees its request's slot: a client that keeps max_inflight
 * requests outstanding, and sends the next one the moment a reply arrives,
 * is never refused busy: a request whose reply bytes are all with the
 * kernel no longer counts, although its write callback may come after the
 * next request is read in the same loop turn. Small replies, then replies
 * of 1 MiB: more than the socket takes at once, so gpuqd writes each in
 * parts as the client drains it (a group's byte count must then be right:
 * request.c's wr_end). */
START_TEST(inflight_slot_free_once_reply_read)
{
    enum { WINDOW = 3, BIG = 1 << 17 };
    const char *extra[] = {"--max-inflight", "3", NULL};
    e2e_restart(extra);
    double small[4] = {1, 1, 1, 1}, y[4];
    run_window("window", WINDOW, 3000, small, y, 4);
    double *bx = malloc(BIG * sizeof *bx), *by = malloc(BIG * sizeof *by);
    ck_assert(bx && by);
    for (int i = 0; i < BIG; i++)
        bx[i] = 1.0;
    run_window("window-big", WINDOW, 60, bx, by, BIG);
    free(bx), free(by);
    e2e_assert_serves();
}
END_TEST

/* SIGTERM with work in flight: every accepted request is answered, exit 0. */
START_TEST(sigterm_answers_in_flight)
{
    e2e_teardown();
    setenv("GPUQ_TEST_SLOW_MS", "200", 1);
    e2e_start(NULL);
    unsetenv("GPUQ_TEST_SLOW_MS");
    gpuq_conn *c = e2e_connect("term", GPUQ_PRIO_NORMAL);
    static double x[16] = {1, 2, 3}, y[6][16];
    for (int i = 0; i < 6; i++) {
        gpuq_request r;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_NORMALIZE;
        r.dtype = GPUQ_DT_F64;
        r.ndim_a = 1;
        r.shape_a[0] = 16;
        uint64_t id;
        ck_assert_int_eq(gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[i], sizeof y[i], &id), 0);
    }
    /* Ping round trip: the six are accepted (read) by now. */
    usleep(100000);
    tu_daemon_kill(&e2e_d, SIGTERM);
    for (int i = 0; i < 6; i++) {
        gpuq_reply rep;
        int rc = gpuq_wait(c, &rep);
        ck_assert_msg(rc == 0, "request %d: %s", i, gpuq_errmsg(c));
        ck_assert_double_eq_tol(y[i][2], 0.5, 1e-15);
    }
    gpuq_close(c);
    int st = 0;
    ck_assert_int_eq(waitpid(e2e_d.pid, &st, 0), e2e_d.pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    e2e_d.pid = 0;
    ck_assert_int_ne(access(e2e_d.socket, F_OK), 0); /* socket file removed */
    e2e_start(NULL);                                 /* for the fixture's teardown */
}
END_TEST

/* A 16 MiB payload over the socket and its 16 MiB result, the result
 * right and another session served meanwhile and after. With the I/O
 * threads off (--io-threads 0) the loop reads it, yielding after every MiB
 * (SESSION_READ_BUDGET: status read_yields counts 16); with them (the
 * default) one thread reads the payload and one writes the reply
 * (io_reads, io_writes) and the loop never yields. */
static void large_payload(bool threads)
{
    const char *off[] = {"--io-threads", "0", NULL};
    e2e_restart(threads ? NULL : off);
    enum { N = 2 << 20 }; /* float64: 16 MiB */
    double *x = malloc((size_t)N * sizeof *x), *y = malloc((size_t)N * sizeof *y);
    ck_assert(x && y);
    double sum = 0;
    for (int i = 0; i < N; i++)
        sum += x[i] = 1.0 + i % 7;
    char js[16384];
    e2e_status(js, sizeof js);
    long long yields0 = e2e_json_int(js, "read_yields"), reads0 = e2e_json_int(js, "io_reads");
    long long writes0 = e2e_json_int(js, "io_writes");
    ck_assert_int_eq(e2e_json_int(js, "io_threads"), threads ? 2 : 0);
    gpuq_conn *a = e2e_connect("big", GPUQ_PRIO_NORMAL),
              *b = e2e_connect("small", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_set_transport(a, GPUQ_TRANSPORT_SOCKET), 0);
    ck_assert_int_eq(gpuq_ping(b), 0);
    gpuq_request r = e2e_norm_req(N);
    uint64_t id;
    ck_assert_int_eq(
        gpuq_submit(a, &r, x, (size_t)N * sizeof *x, NULL, 0, y, (size_t)N * sizeof *y, &id), 0);
    ck_assert_int_eq(gpuq_ping(b), 0);
    gpuq_reply rep;
    ck_assert_msg(gpuq_wait(a, &rep) == 0, "%s", gpuq_errmsg(a));
    for (int i = 0; i < N; i += 4099)
        ck_assert_double_eq_tol(y[i], x[i] / sum, 1e-15);
    e2e_status(js, sizeof js);
    long long yields = e2e_json_int(js, "read_yields") - yields0;
    long long reads = e2e_json_int(js, "io_reads") - reads0;
    long long writes = e2e_json_int(js, "io_writes") - writes0;
    if (threads) {
        ck_assert_msg(yields == 0 && reads == 1 && writes == 1,
                      "read_yields +%lld, io_reads +%lld, io_writes +%lld; want 0, 1, 1", yields,
                      reads, writes);
    } else {
        ck_assert_msg(yields >= 16 && yields <= 17, "read_yields grew by %lld, want 16", yields);
        ck_assert_msg(reads == 0 && writes == 0, "io_reads +%lld, io_writes +%lld", reads, writes);
    }
    ck_assert_int_eq(gpuq_ping(b), 0);
    gpuq_close(a);
    gpuq_close(b);
    free(x);
    free(y);
    e2e_assert_serves();
}

START_TEST(large_payload_io_threads)
{
    large_payload(true);
}
END_TEST

START_TEST(large_payload_yields)
{
    large_payload(false);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_flow");
    TCase *tc = tcase_create("flow");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, pipelined_in_order);
    tcase_add_test(tc, concurrent_clients);
    tcase_add_test(tc, disconnect_in_flight);
    tcase_add_test(tc, slow_reader_bounded);
    tcase_add_test(tc, max_inflight_on_the_wire);
    tcase_add_test(tc, inflight_slot_free_once_reply_read);
    tcase_add_test(tc, sigterm_answers_in_flight);
    tcase_add_test(tc, large_payload_io_threads);
    tcase_add_test(tc, large_payload_yields);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
