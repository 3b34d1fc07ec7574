/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_rowbatch.c - cross-session row batches (PROTOCOL.md 2,
 * Batching; backend.h): knn and pairwise queries of several connections
 * against one resident array run as one job of their rows, each answered
 * with the bytes it gets alone.
 *
 * On the CPU backend the batches are made certain with the slow hook
 * (GPUQ_TEST_SLOW_MS): a first query holds its kind's batch slot while it
 * sleeps, the queries of the other connections wait behind it and then run
 * together (status batches 1, batched 6). On CUDA (where the hook keeps
 * every job alone) the queries of every connection are written before any
 * reply is read, a few times over until a batch formed. Cases:
 *  - queries of 1 to 6 rows from 6 connections, and one of another metric:
 *    every reply bit for bit the reply of the same query sent alone, and
 *    of the same burst to a daemon with --batch-max 0 (no batch there);
 *  - a cosine query with a zero row inside a batch: it fails alone, with
 *    the code and message it gets alone; the others are answered as alone;
 *    pairwise queries batch beside them;
 *  - a held query whose deadline passes is answered deadline_exceeded at
 *    its deadline, a connection that closes while its query is held costs
 *    the others nothing, and the daemon serves on.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"

enum { NS = 8, N = 2000, D = 24, K = 5, SLOW_MS = 250, MAXOUT = 1 << 16 };

static uint8_t hbuf[1 << 16];
static uint64_t next_id = 1;
static bool on_cuda;
static float *base;

static void setup(void)
{
    on_cuda = getenv("GPUQ_TEST_DEVICE") && !strcmp(getenv("GPUQ_TEST_DEVICE"), "cuda");
    e2e_setup();
    base = e2e_rand_buf((size_t)N * D * 4, 1);
}

static void teardown(void)
{
    e2e_teardown();
    free(base);
}

/* The daemon for a case: slow on CPU (so that batches form), plain on CUDA. */
static void start(const char *const *extra)
{
    if (on_cuda)
        e2e_restart(extra);
    else
        e2e_restart_slow(SLOW_MS, extra);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One query: op (knn or pairwise), metric, m rows, k (knn), its rows, and
 * what it got. */
typedef struct query {
    gpuq_op op;
    const char *metric;
    uint64_t m, k, deadline_ms;
    float *x;
    int status;
    char message[256];
    uint8_t out[MAXOUT];
    size_t len;
} query;

static gpuq_request query_req(const query *q, bool named)
{
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = q->op;
    r.dtype = GPUQ_DT_F32;
    r.ndim_a = 2;
    r.shape_a[0] = q->m;
    r.shape_a[1] = D;
    ck_assert_int_eq(gpuq_request_set_enum(&r, "metric", q->metric), 0);
    if (q->op == GPUQ_OP_KNN)
        ck_assert_int_eq(gpuq_request_set_uint(&r, "k", q->k), 0);
    r.deadline_ms = q->deadline_ms;
    if (named) {
        r.nin_ref = 2;
        r.in_kind[0] = GPUQ_REF_WIRE;
        r.in_kind[1] = GPUQ_REF_NAME;
        snprintf(r.in_name[1], sizeof r.in_name[1], "base");
    } else {
        r.ndim_b = 2;
        r.shape_b[0] = N;
        r.shape_b[1] = D;
    }
    r.id = next_id++;
    return r;
}

static void send_query(int fd, const query *q, bool named)
{
    gpuq_request r = query_req(q, named);
    size_t xb = (size_t)q->m * D * 4;
    if (named) {
        e2e_send_req(fd, &r, q->x, xb);
        return;
    }
    uint8_t *both = malloc(xb + (size_t)N * D * 4);
    ck_assert_ptr_nonnull(both);
    memcpy(both, q->x, xb);
    memcpy(both + xb, base, (size_t)N * D * 4);
    e2e_send_req(fd, &r, both, xb + (size_t)N * D * 4);
    free(both);
}

static void read_answer(int fd, query *q)
{
    gpuq_reply rep;
    q->len = 0;
    ck_assert_int_eq(
        e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, q->out, sizeof q->out, &q->len), 0);
    q->status = rep.status;
    snprintf(q->message, sizeof q->message, "%s", rep.status ? rep.message : "");
}

/* q alone on fd (nothing else in flight anywhere), the base carried or named. */
static void run_alone(int fd, query *q, bool named)
{
    send_query(fd, q, named);
    read_answer(fd, q);
}

static void put_base(int fd)
{
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_PUT;
    snprintf(r.name, sizeof r.name, "base");
    r.dtype = GPUQ_DT_F32;
    r.ndim_a = 2;
    r.shape_a[0] = N;
    r.shape_a[1] = D;
    r.id = next_id++;
    e2e_send_req(fd, &r, base, (size_t)N * D * 4);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_msg(rep.status == 0, "put: %s", rep.message);
}

static void batch_counts(long long *batches, long long *batched)
{
    char js[1 << 16];
    e2e_status(js, sizeof js);
    *batches = e2e_json_int(js, "batches");
    *batched = e2e_json_int(js, "batched");
}

/* The burst: q[0] first (on CPU it runs, sleeping, while the others
 * arrive and wait), then q[1..nq) on their connections; every answer read
 * in order. */
static void burst(int *fd, query *q, int nq)
{
    send_query(fd[0], &q[0], true);
    if (!on_cuda)
        usleep(SLOW_MS * 1000 / 5); /* q[0] is running */
    for (int i = 1; i < nq; i++) {
        send_query(fd[i], &q[i], true);
        if (!on_cuda) /* loop turns apart: they batch because they wait */
            usleep(10000);
    }
    for (int i = 0; i < nq; i++)
        read_answer(fd[i], &q[i]);
}

static void assert_same(const query *a, const query *b, int i, const char *what)
{
    ck_assert_msg(a->status == b->status, "query %d: %s %s (%s), alone %s (%s)", i, what,
                  gpuq_errname(a->status), a->message, gpuq_errname(b->status), b->message);
    ck_assert_msg(!strcmp(a->message, b->message), "query %d: %s \"%s\", alone \"%s\"", i, what,
                  a->message, b->message);
    ck_assert_msg(a->len == b->len && memcmp(a->out, b->out, a->len) == 0,
                  "query %d: %s bytes differ from alone (%zu, %zu bytes)", i, what, a->len, b->len);
}

static query qs[NS], alone[NS], unb[NS];

/* The burst of qs, each answer the same as alone[]'s; on CUDA (where a
 * burst may reach the daemon over several loop turns) again until a batch
 * formed, 20 times at most. The counts after. */
static void burst_until_batched(int *fd, long long *batches, long long *batched)
{
    for (int tries = 0;; tries++) {
        burst(fd, qs, NS);
        for (int i = 0; i < NS; i++)
            assert_same(&qs[i], &alone[i], i, "batched");
        batch_counts(batches, batched);
        if (!on_cuda || *batched >= 2 || tries == 20)
            break;
    }
}

static void make_queries(const char *metric)
{
    for (int i = 0; i < NS; i++) {
        query *q = &qs[i];
        free(q->x);
        memset(q, 0, sizeof *q);
        q->op = GPUQ_OP_KNN;
        q->metric = metric;
        q->m = i < 7 ? (uint64_t)(i % 6) + 1 : 3;
        q->k = K;
        if (i == 7) /* the last one another kind: another metric */
            q->metric = strcmp(metric, "manhattan") ? "manhattan" : "euclidean";
        q->x = e2e_rand_buf((size_t)q->m * D * 4, 1);
    }
}

static void free_queries(void)
{
    for (int i = 0; i < NS; i++) {
        free(qs[i].x);
        qs[i].x = NULL;
    }
}

static void open_all(int *fd)
{
    for (int i = 0; i < NS; i++)
        fd[i] = e2e_hello_socket("rowbatch", hbuf, sizeof hbuf);
}

static void close_all(int *fd)
{
    for (int i = 0; i < NS; i++)
        close(fd[i]);
}

/* Each query alone (base carried: never a row batch), then the burst. */
START_TEST(rows_batched_identical)
{
    int fd[NS];
    make_queries("euclidean");
    start(NULL);
    open_all(fd);
    put_base(fd[0]);
    for (int i = 0; i < NS; i++) {
        alone[i] = qs[i];
        run_alone(fd[i], &alone[i], false);
        ck_assert_msg(alone[i].status == 0, "alone %d: %s", i, alone[i].message);
    }
    long long b0, d0, b1, d1;
    batch_counts(&b0, &d0);
    ck_assert_msg(b0 == 0 && d0 == 0, "nothing batched yet: %lld, %lld", b0, d0);
    burst_until_batched(fd, &b1, &d1);
    if (on_cuda)
        ck_assert_msg(b1 >= 1 && d1 >= 2, "no row batch in 20 bursts: %lld, %lld", b1, d1);
    else /* q[0] alone, q[1..6] one batch, q[7] (another metric) alone */
        ck_assert_msg(b1 == 1 && d1 == 6, "batches %lld, batched %lld (want 1, 6)", b1, d1);
    close_all(fd);

    /* the same burst to a daemon that never batches */
    start((const char *[]){"--batch-max", "0", NULL});
    open_all(fd);
    put_base(fd[0]);
    for (int i = 0; i < NS; i++)
        unb[i] = qs[i];
    burst(fd, unb, NS);
    for (int i = 0; i < NS; i++)
        assert_same(&unb[i], &alone[i], i, "--batch-max 0");
    batch_counts(&b1, &d1);
    ck_assert_msg(b1 == 0 && d1 == 0, "--batch-max 0: batches %lld, batched %lld", b1, d1);
    close_all(fd);
    free_queries();
}
END_TEST

/* Cosine: query 3 has a zero row (row 1 of 4): it fails alone, the others
 * are answered as alone; two pairwise queries ride along. */
START_TEST(bad_query_fails_alone)
{
    int fd[NS];
    make_queries("cosine");
    memset(qs[3].x + 1 * D, 0, D * 4);
    for (int i = 5; i < 7; i++) {
        qs[i].op = GPUQ_OP_PAIRWISE;
        qs[i].metric = "sqeuclidean";
        qs[i].m = 2; /* 2 x 2000 f32: 16000 bytes out */
        free(qs[i].x);
        qs[i].x = e2e_rand_buf((size_t)qs[i].m * D * 4, 1);
    }
    start(NULL);
    open_all(fd);
    put_base(fd[0]);
    for (int i = 0; i < NS; i++) {
        alone[i] = qs[i];
        run_alone(fd[i], &alone[i], true); /* named, but alone: a batch of one */
    }
    ck_assert_msg(alone[3].status == GPUQ_E_ZERO_NORM, "alone: %s (%s)",
                  gpuq_errname(alone[3].status), alone[3].message);
    for (int i = 0; i < NS; i++)
        ck_assert_msg(i == 3 || alone[i].status == 0, "alone %d: %s", i, alone[i].message);
    long long b1, d1;
    burst_until_batched(fd, &b1, &d1);
    ck_assert_msg(b1 >= 1 && d1 >= 2, "batches %lld, batched %lld", b1, d1);
    e2e_assert_serves();
    close_all(fd);
    free_queries();
}
END_TEST

/* CPU: a held query's deadline passes while it waits behind its kind's
 * running batch: deadline_exceeded at about its deadline; a connection
 * closed while its query is held; the others as alone. */
START_TEST(held_deadline_and_close)
{
    if (on_cuda)
        return; /* holding is made certain by the CPU's slow hook only */
    int fd[NS];
    make_queries("euclidean");
    start(NULL);
    open_all(fd);
    put_base(fd[0]);
    for (int i = 0; i < 5; i++) {
        alone[i] = qs[i];
        run_alone(fd[i], &alone[i], false);
    }
    send_query(fd[0], &qs[0], true);
    usleep(SLOW_MS * 1000 / 5);
    qs[1].deadline_ms = SLOW_MS / 5;
    double t0 = now_s();
    send_query(fd[1], &qs[1], true);
    send_query(fd[2], &qs[2], true);
    send_query(fd[3], &qs[3], true);
    close(fd[3]); /* leaves while held */
    fd[3] = -1;
    send_query(fd[4], &qs[4], true);
    read_answer(fd[1], &qs[1]);
    double waited = now_s() - t0;
    ck_assert_msg(qs[1].status == GPUQ_E_DEADLINE_EXCEEDED, "held past its deadline: %s (%s)",
                  gpuq_errname(qs[1].status), qs[1].message);
    ck_assert_msg(waited < SLOW_MS * 0.8 / 1000.0, "deadline answered after %.3f s", waited);
    read_answer(fd[0], &qs[0]);
    read_answer(fd[2], &qs[2]);
    read_answer(fd[4], &qs[4]);
    assert_same(&qs[0], &alone[0], 0, "first");
    assert_same(&qs[2], &alone[2], 2, "batched");
    assert_same(&qs[4], &alone[4], 4, "batched");
    e2e_assert_serves();
    e2e_wait_status("in_flight", 0, 10.0);
    for (int i = 0; i < NS; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    free_queries();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_rowbatch");
    TCase *tc = tcase_create("rowbatch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rows_batched_identical);
    tcase_add_test(tc, bad_query_fails_alone);
    tcase_add_test(tc, held_deadline_and_close);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    return tu_run_suite(suite());
}
