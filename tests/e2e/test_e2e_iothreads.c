/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_iothreads.c - socket bulk on gpuqd's I/O threads (issue 28):
 * payloads and replies of io_bulk_min bytes and more move on an I/O thread,
 * so a high-priority session is served while others stream bulk over the
 * socket or trickle a payload; frames around the threshold and pipelined
 * behind bulk arrive intact; a client that goes away in the middle of a
 * payload or of its reply leaves nothing held; a payload an I/O thread is
 * reading when frame_timeout or the request's deadline ends it is given
 * up cleanly (the interleavings that crashed gpuqd once, 0fc0934). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e_util.h"

/* sum-normalize reference: y = x / sum(x) */
static void fill(double *x, size_t n, unsigned seed, double *sum)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] = 1.0 + (double)((i * 7 + seed) % 13);
    *sum = s;
}

static void check_norm(const double *x, const double *y, size_t n, double sum)
{
    for (size_t i = 0; i < n; i += 1 + n / 97)
        ck_assert_double_eq_tol(y[i], x[i] / sum, 1e-15);
    ck_assert_double_eq_tol(y[n - 1], x[n - 1] / sum, 1e-15);
}

typedef struct streamer {
    pthread_t th;
    atomic_bool *stop;
    unsigned seed;
    long done;
    char err[256];
} streamer;

enum { STREAM_N = 512 << 10 }; /* float64: 4 MiB each way */

/* A low-priority session streaming normalizes over the socket, 2 in flight. */
static void *streamer_main(void *arg)
{
    streamer *st = arg;
    gpuq_conn *c = NULL;
    double *x = malloc(STREAM_N * sizeof *x), *y[2];
    y[0] = malloc(STREAM_N * sizeof *y[0]);
    y[1] = malloc(STREAM_N * sizeof *y[1]);
    double sum;
    fill(x, STREAM_N, st->seed, &sum);
    gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                           .client_name = "stream",
                           .priority = GPUQ_PRIO_LOW,
                           .device = -1};
    if (gpuq_connect(&o, &c) != 0 || gpuq_set_transport(c, GPUQ_TRANSPORT_SOCKET) != 0) {
        snprintf(st->err, sizeof st->err, "connect: %s", c ? gpuq_errmsg(c) : "failed");
        goto out;
    }
    gpuq_request r = e2e_norm_req(STREAM_N);
    uint64_t id;
    unsigned k = 0;
    for (int i = 0; i < 2; i++)
        if (gpuq_submit(c, &r, x, STREAM_N * sizeof *x, NULL, 0, y[i], STREAM_N * sizeof *y[i],
                        &id)) {
            snprintf(st->err, sizeof st->err, "submit: %s", gpuq_errmsg(c));
            goto out;
        }
    while (gpuq_pending(c) > 0) {
        gpuq_reply rep;
        if (gpuq_wait(c, &rep) != 0) {
            snprintf(st->err, sizeof st->err, "wait: %s", gpuq_errmsg(c));
            goto out;
        }
        double *got = y[k % 2];
        if (fabs(got[5] - x[5] / sum) > 1e-15 ||
            fabs(got[STREAM_N - 1] - x[STREAM_N - 1] / sum) > 1e-15) {
            snprintf(st->err, sizeof st->err, "wrong result");
            goto out;
        }
        memset(got, 0, 64);
        st->done++;
        if (!atomic_load(st->stop) && gpuq_submit(c, &r, x, STREAM_N * sizeof *x, NULL, 0, got,
                                                  STREAM_N * sizeof *got, &id)) {
            snprintf(st->err, sizeof st->err, "submit: %s", gpuq_errmsg(c));
            goto out;
        }
        k++;
    }
out:
    if (c)
        gpuq_close(c);
    free(x);
    free(y[0]);
    free(y[1]);
    return NULL;
}

typedef struct trickler {
    pthread_t th;
    atomic_bool *stop;
    int fd;
    size_t sent;
    int status;
    double y5;
    uint8_t hb[4096];
} trickler;

/* A raw client that sends a 4 MiB payload 4 KiB at a time, 5 ms apart,
 * until told to stop; then the rest at once, and reads its reply. */
static void *trickler_main(void *arg)
{
    trickler *t = arg;
    size_t n = STREAM_N, bytes = n * sizeof(double);
    double *x = malloc(bytes), sum;
    fill(x, n, 3, &sum);
    gpuq_request r = e2e_norm_req(n);
    uint8_t *h = NULL;
    size_t hl = 0;
    t->status = -1;
    if (gpuq_request_encode(&r, &h, &hl) != 0)
        goto out;
    e2e_send_frame(t->fd, h, (uint32_t)hl, bytes, NULL, 0);
    const uint8_t *p = (const uint8_t *)x;
    while (!atomic_load(t->stop) && t->sent + 4096 < bytes) {
        if (send(t->fd, p + t->sent, 4096, MSG_NOSIGNAL) != 4096)
            goto out;
        t->sent += 4096;
        tu_sleep_s(0.005);
    }
    while (t->sent < bytes) {
        ssize_t w = send(t->fd, p + t->sent, bytes - t->sent, MSG_NOSIGNAL);
        if (w <= 0)
            goto out;
        t->sent += (size_t)w;
    }
    gpuq_reply rep;
    double *y = malloc(bytes);
    size_t got = 0;
    int rc = e2e_read_reply_data(t->fd, &rep, t->hb, sizeof t->hb, y, bytes, &got);
    t->status = rc == 0 && got == bytes ? rep.status : -2;
    t->y5 = y[5] - x[5] / sum;
    free(y);
out:
    free(h);
    free(x);
    return NULL;
}

/* 4 low-priority sessions stream 4 MiB normalizes over the socket, 2 in
 * flight each, and 2 trickle a payload, while a high-priority session pings
 * and normalizes 1024 values 300 times: each of its requests is answered,
 * right, within a bound that only starvation could break (speed is
 * bench/'s), the bulk went by the I/O threads and was right too. */
START_TEST(bulk_beside_small)
{
    atomic_bool stop = false;
    long long reads0 = e2e_status_int("io_reads");
    streamer st[4];
    trickler tr[2];
    for (int i = 0; i < 4; i++) {
        st[i] = (streamer){.stop = &stop, .seed = (unsigned)i};
        ck_assert_int_eq(pthread_create(&st[i].th, NULL, streamer_main, &st[i]), 0);
    }
    static uint8_t hb[65536];
    for (int i = 0; i < 2; i++) {
        tr[i] = (trickler){.stop = &stop, .fd = e2e_hello_socket("trickle", hb, sizeof hb)};
        ck_assert_int_eq(pthread_create(&tr[i].th, NULL, trickler_main, &tr[i]), 0);
    }
    gpuq_conn *c = e2e_connect("hi", GPUQ_PRIO_HIGH);
    double v[1024], y[1024], sum, worst = 0;
    fill(v, 1024, 9, &sum);
    tu_sleep_s(0.2); /* the streamers are streaming */
    for (int i = 0; i < 300; i++) {
        double t0 = tu_now_s();
        ck_assert_int_eq(gpuq_ping(c), 0);
        ck_assert_msg(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, v, 1024, y) == 0, "%s",
                      gpuq_errmsg(c));
        double dt = tu_now_s() - t0;
        worst = dt > worst ? dt : worst;
        check_norm(v, y, 1024, sum);
    }
    ck_assert_msg(worst < 2.0, "a ping and a small request took %.3f s beside the bulk", worst);
    /* the tricklers are still mid-payload: their jobs wait, nobody else does */
    for (int i = 0; i < 2; i++)
        ck_assert_msg(tr[i].sent < STREAM_N * sizeof(double), "trickler %d already done", i);
    atomic_store(&stop, true);
    for (int i = 0; i < 4; i++) {
        pthread_join(st[i].th, NULL);
        ck_assert_msg(!st[i].err[0], "streamer %d: %s", i, st[i].err);
        ck_assert_int_gt(st[i].done, 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(tr[i].th, NULL);
        ck_assert_int_eq(tr[i].status, 0);
        ck_assert_double_eq_tol(tr[i].y5, 0, 1e-15);
        close(tr[i].fd);
    }
    gpuq_close(c);
    ck_assert_int_ge(e2e_status_int("io_reads") - reads0, 6);
    e2e_wait_status("staging_bytes", 0, 10);
    e2e_assert_serves();
}
END_TEST

/* Payloads whose rest is just under, at and over io_bulk_min (loop reads
 * and thread reads), three 200 KiB frames and a small one in one write (a
 * thread reads each payload exactly, never the next frame's bytes), and a
 * refused header whose large payload is skipped before a good frame. */
START_TEST(threshold_and_pipelining)
{
    const char *extra[] = {"--io-bulk-min", "64K", NULL};
    e2e_restart(extra);
    static uint8_t hb[65536];
    int fd = e2e_hello_socket("edges", hb, sizeof hb);
    size_t ns[] = {8190, 8191, 8192, 8193, 8200, 16384, 100000};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        size_t n = ns[k];
        double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), sum;
        fill(x, n, (unsigned)k, &sum);
        gpuq_request r = e2e_norm_req(n);
        e2e_send_req(fd, &r, x, n * sizeof *x);
        gpuq_reply rep;
        size_t got;
        ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, n * sizeof *y, &got), 0);
        ck_assert_int_eq(rep.status, 0);
        ck_assert_uint_eq(got, n * sizeof *y);
        check_norm(x, y, n, sum);
        free(x);
        free(y);
    }
    /* pipelined: 3 x 200 KiB, then 4 values, in one write */
    enum { BIG = 25600 };
    double *x = malloc(3 * BIG * sizeof *x), sums[3], small[4] = {1, 2, 3, 4}, ssum = 10;
    for (int i = 0; i < 3; i++)
        fill(x + i * BIG, BIG, 40u + (unsigned)i, &sums[i]);
    uint8_t *buf = NULL;
    size_t len = 0;
    gpuq_request r = e2e_norm_req(BIG);
    for (int i = 0; i < 3; i++) {
        r.id = 100u + (unsigned)i;
        e2e_append_req(&buf, &len, &r, x + i * BIG, BIG * sizeof *x);
    }
    gpuq_request rs = e2e_norm_req(4);
    rs.id = 103;
    e2e_append_req(&buf, &len, &rs, small, sizeof small);
    ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    free(buf);
    buf = NULL;
    len = 0;
    double *y = malloc(BIG * sizeof *y);
    for (int i = 0; i < 4; i++) {
        gpuq_reply rep;
        size_t got;
        ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, BIG * sizeof *y, &got), 0);
        ck_assert_int_eq(rep.status, 0);
        ck_assert_uint_eq(rep.id, 100u + (unsigned)i);
        if (i < 3)
            check_norm(x + i * BIG, y, BIG, sums[i]);
        else
            check_norm(small, y, 4, ssum);
    }
    /* 20 requests of 4096 values in one write: they run as a batch, their
     * replies come in one turn, the first 16 (512 KiB) go to an I/O thread
     * as one group and the rest wait for it, in order (when they all came
     * in one turn, which is timing: 20 rounds) */
    enum { SMALL = 4096, NB = 20 };
    double *xs = malloc(NB * SMALL * sizeof *xs), bsum[NB];
    for (int i = 0; i < NB; i++)
        fill(xs + i * SMALL, SMALL, 60u + (unsigned)i, &bsum[i]);
    gpuq_request rb = e2e_norm_req(SMALL);
    for (int round = 0; round < 20; round++) { /* a turn's boundary is timing: try often */
        for (int i = 0; i < NB; i++) {
            rb.id = 300u + (unsigned)i;
            e2e_append_req(&buf, &len, &rb, xs + i * SMALL, SMALL * sizeof *xs);
        }
        ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
        free(buf);
        buf = NULL;
        len = 0;
        for (int i = 0; i < NB; i++) {
            gpuq_reply rep;
            size_t got;
            ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, BIG * sizeof *y, &got),
                             0);
            ck_assert_int_eq(rep.status, 0);
            ck_assert_uint_eq(rep.id, 300u + (unsigned)i);
            ck_assert_uint_eq(got, SMALL * sizeof *y);
            check_norm(xs + i * SMALL, y, SMALL, bsum[i]);
        }
    }
    free(xs);
    /* a refused header (dtype f64 normalize of 0 values) with a 1 MiB payload
     * that is skipped, then a good frame */
    gpuq_request bad = e2e_norm_req(0);
    bad.id = 200;
    size_t junk = 1 << 20;
    uint8_t *j = calloc(1, junk);
    e2e_send_req(fd, &bad, j, junk);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hb, sizeof hb), 0);
    ck_assert_int_ne(rep.status, 0);
    ck_assert_uint_eq(rep.id, 200);
    rs.id = 201;
    e2e_send_req(fd, &rs, small, sizeof small);
    size_t got;
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, BIG * sizeof *y, &got), 0);
    ck_assert_int_eq(rep.status, 0);
    check_norm(small, y, 4, ssum);
    free(j);
    free(x);
    free(y);
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* A 1 MiB reply whose job takes 200 ms, then 20 requests refused at once
 * (a payload of the wrong size), all in one write: the refusals wait for
 * the big reply, and when it comes the first 16 replies go to an I/O
 * thread as one group; the 17th waits for that group (it must not be
 * written beside it), then the rest follow, each whole and in order. */
START_TEST(replies_wait_for_a_threads_group)
{
    const char *extra[] = {"--io-bulk-min", "64K", NULL};
    e2e_restart_slow(200, extra);
    static uint8_t hb[65536];
    int fd = e2e_hello_socket("held", hb, sizeof hb);
    enum { N = 1 << 17 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), sum, bad[1] = {1};
    fill(x, N, 7, &sum);
    uint8_t *buf = NULL;
    size_t len = 0;
    gpuq_request r = e2e_norm_req(N);
    r.id = 1;
    e2e_append_req(&buf, &len, &r, x, N * sizeof *x);
    for (int i = 0; i < 20; i++) {
        gpuq_request e = e2e_norm_req(4);
        e.id = 2u + (unsigned)i;
        e2e_append_req(&buf, &len, &e, bad, sizeof bad); /* 8 bytes, not 32 */
    }
    ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    free(buf);
    gpuq_reply rep;
    size_t got;
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, N * sizeof *y, &got), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.id, 1);
    check_norm(x, y, N, sum);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(e2e_read_reply(fd, &rep, hb, sizeof hb), 0);
        ck_assert_int_ne(rep.status, 0);
        ck_assert_uint_eq(rep.id, 2u + (unsigned)i);
    }
    close(fd);
    free(x);
    free(y);
    e2e_assert_serves();
}
END_TEST

/* A libgpuq client killed while its plain arrays are staged through its
 * arena (transport auto) and its requests run: the daemon drops its
 * session, arena and staging, and serves on. */
START_TEST(killed_mid_staged_call)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        enum { N = 4 << 20 }; /* float32: 16 MiB each way */
        float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
        for (int i = 0; x && i < N; i++)
            x[i] = 1.0f + (float)(i % 5);
        gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                               .client_name = "killed",
                               .priority = GPUQ_PRIO_NORMAL,
                               .device = -1};
        gpuq_conn *c = NULL;
        if (!x || !y || gpuq_connect(&o, &c) != 0)
            _exit(2);
        for (;;)
            if (gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, N, y) != 0)
                _exit(3);
    }
    double t0 = tu_now_s();
    while (e2e_status_int("arenas") <= 0 && tu_now_s() - t0 < 10)
        tu_sleep_s(0.01);
    ck_assert_int_gt(e2e_status_int("arenas"), 0); /* it staged through one */
    tu_sleep_s(0.1);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(e2e_wait_exit(pid, 10), 128 + SIGKILL);
    e2e_wait_status("arenas", 0, 10);
    e2e_wait_status("arena_bytes", 0, 10);
    e2e_wait_status("staging_bytes", 0, 10);
    e2e_assert_serves();
}
END_TEST

/* Some session holds staging (within 5 s). */
static void staging_held(void)
{
    double t0 = tu_now_s();
    while (e2e_status_int("staging_bytes") <= 0 && tu_now_s() - t0 < 5)
        tu_sleep_s(0.01);
    ck_assert_int_gt(e2e_status_int("staging_bytes"), 0);
}

/* A client gone in the middle of its payload (an I/O thread reading it)
 * and one gone before reading its 16 MiB reply (an I/O thread writing it):
 * the daemon drops both, gives their staging back and serves on. */
START_TEST(gone_mid_transfer)
{
    static uint8_t hb[65536];
    size_t n = 2 << 20, bytes = n * sizeof(double);
    double *x = malloc(bytes), sum;
    fill(x, n, 1, &sum);
    gpuq_request r = e2e_norm_req(n);
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
    /* mid-payload */
    int fd = e2e_hello_socket("half", hb, sizeof hb);
    e2e_send_frame(fd, h, (uint32_t)hl, bytes, x, bytes / 2);
    staging_held();
    close(fd);
    e2e_wait_status("staging_bytes", 0, 10);
    /* mid-reply: the client reads nothing of it */
    fd = e2e_hello_socket("deaf", hb, sizeof hb);
    int small = 4096;
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    e2e_send_frame(fd, h, (uint32_t)hl, bytes, x, bytes);
    long long w0 = e2e_status_int("io_writes");
    tu_sleep_s(0.5); /* the reply is written as far as the socket takes it */
    ck_assert_int_eq(e2e_status_int("io_writes"), w0); /* not all of it */
    staging_held();
    close(fd);
    e2e_wait_status("staging_bytes", 0, 10);
    e2e_wait_status("sessions", 1, 10); /* the one asking */
    free(h);
    free(x);
    e2e_assert_serves();
}
END_TEST

/* A 16 MiB payload half sent, then nothing: an I/O thread is in the middle
 * of reading it when (1) the request's deadline passes: deadline_exceeded,
 * the rest is read and discarded when it comes, and the session goes on;
 * (2) frame_timeout passes: timeout, the session closes. Staging comes
 * back both times and the daemon serves. */
START_TEST(deadline_and_timeout_mid_bulk_payload)
{
    const char *extra[] = {"--frame-timeout", "1", NULL};
    e2e_restart(extra);
    static uint8_t hb[65536];
    size_t n = 2 << 20, bytes = n * sizeof(double);
    double *x = malloc(bytes), sum;
    fill(x, n, 5, &sum);
    gpuq_request r = e2e_norm_req(n);
    r.id = 11;
    r.deadline_ms = 300;
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
    long long reads0 = e2e_status_int("io_reads");
    int fd = e2e_hello_socket("late", hb, sizeof hb);
    e2e_send_frame(fd, h, (uint32_t)hl, bytes, x, bytes / 2);
    staging_held();
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply_within(fd, &rep, hb, sizeof hb, 5), 0);
    ck_assert_uint_eq(rep.id, 11);
    ck_assert_msg(rep.status == GPUQ_E_DEADLINE_EXCEEDED, "got %s (%s)", gpuq_errname(rep.status),
                  rep.message);
    e2e_wait_status("staging_bytes", 0, 10);
    /* the rest of the payload, then a ping on the same session */
    ck_assert_int_eq(send(fd, (const uint8_t *)x + bytes / 2, bytes / 2, MSG_NOSIGNAL),
                     (ssize_t)(bytes / 2));
    gpuq_request ping;
    gpuq_request_init(&ping);
    ping.op = GPUQ_OP_PING;
    ping.id = 12;
    e2e_send_req(fd, &ping, NULL, 0);
    ck_assert_int_eq(e2e_read_reply_within(fd, &rep, hb, sizeof hb, 5), 0);
    ck_assert_uint_eq(rep.id, 12);
    ck_assert_int_eq(rep.status, 0);
    close(fd);
    /* frame_timeout mid-payload */
    r.deadline_ms = 0;
    free(h);
    h = NULL;
    ck_assert_int_eq(gpuq_request_encode(&r, &h, &hl), 0);
    fd = e2e_hello_socket("stalled", hb, sizeof hb);
    e2e_send_frame(fd, h, (uint32_t)hl, bytes, x, bytes / 2);
    staging_held();
    ck_assert_int_eq(e2e_read_reply_within(fd, &rep, hb, sizeof hb, 5), 0);
    ck_assert_msg(rep.status == GPUQ_E_TIMEOUT, "got %s (%s)", gpuq_errname(rep.status),
                  rep.message);
    ck_assert_msg(strstr(rep.message, "frame_timeout"), "message: %s", rep.message);
    /* the rest, late: whatever of it gpuqd still reads must land nowhere
     * (the ASan build checks) */
    (void)send(fd, (const uint8_t *)x + bytes / 2, bytes / 2, MSG_NOSIGNAL | MSG_DONTWAIT);
    e2e_expect_closed(fd, 5);
    close(fd);
    e2e_wait_status("staging_bytes", 0, 10);
    /* the same request whole: right, and its payload went by an I/O
     * thread (as the two above did, until they were given up) */
    fd = e2e_hello_socket("whole", hb, sizeof hb);
    e2e_send_frame(fd, h, (uint32_t)hl, bytes, x, bytes);
    double *y = malloc(bytes);
    size_t got = 0;
    ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hb, sizeof hb, y, bytes, &got), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(got, bytes);
    check_norm(x, y, n, sum);
    ck_assert_int_gt(e2e_status_int("io_reads"), reads0);
    close(fd);
    free(y);
    free(h);
    free(x);
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_iothreads");
    TCase *tc = tcase_create("iothreads");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bulk_beside_small);
    tcase_add_test(tc, threshold_and_pipelining);
    tcase_add_test(tc, gone_mid_transfer);
    tcase_add_test(tc, replies_wait_for_a_threads_group);
    tcase_add_test(tc, killed_mid_staged_call);
    tcase_add_test(tc, deadline_and_timeout_mid_bulk_payload);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
