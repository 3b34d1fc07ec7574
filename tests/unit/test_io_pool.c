/* SPDX-License-Identifier: Apache-2.0 */
/* test_io_pool.c - the I/O threads (server/transport/io_pool.c) over
 * socketpairs: exact reads across slices, writes of several buffers, a
 * trickling peer that parks a job while others finish, EOF and errors,
 * cancelling a job in each state, many sessions on few threads, and the
 * threads' spin (no wake-ups under a stream of jobs, parked jobs not
 * starved by it). Each
 * job's done must run exactly once on the loop thread, or never after a
 * successful io_cancel. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "io_pool.h"
#include "testutil.h"

typedef struct peer {
    int fd[2]; /* [0]: the pool's end (non-blocking), [1]: the test's */
    io_conn c;
    int dones;
    uv_thread_t done_thread;
} peer;

static uv_loop_t loop;
static io_pool *pool;
static uv_thread_t loop_thread;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    loop_thread = uv_thread_self();
    pool = io_pool_new(&loop, 2);
    ck_assert_ptr_nonnull(pool);
}

static void teardown(void)
{
    io_pool_free(pool);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static void peer_open(peer *p, unsigned key)
{
    memset(p, 0, sizeof *p);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fd), 0);
    int fl = fcntl(p->fd[0], F_GETFL);
    ck_assert_int_eq(fcntl(p->fd[0], F_SETFL, fl | O_NONBLOCK), 0);
    io_conn_init(&p->c, p->fd[0], key);
}

static void peer_close(peer *p)
{
    close(p->fd[0]);
    if (p->fd[1] >= 0)
        close(p->fd[1]);
}

static void on_done(io_job *j)
{
    peer *p = j->owner;
    p->dones++;
    p->done_thread = uv_thread_self();
}

/* Run the loop until p has seen n dones (or 10 s). */
static void wait_dones(peer *p, int n)
{
    double t0 = tu_now_s();
    while (p->dones < n && tu_now_s() - t0 < 10)
        uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(p->dones, n);
    ck_assert(uv_thread_equal(&p->done_thread, &loop_thread));
}

static uint8_t *pattern(size_t n, unsigned seed)
{
    uint8_t *b = malloc(n);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 31u + seed + (i >> 12));
    return b;
}

typedef struct writer {
    int fd;
    const uint8_t *b;
    size_t n, step;
    double pause_s;
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    for (size_t off = 0; off < w->n;) {
        size_t k = w->n - off < w->step ? w->n - off : w->step;
        ssize_t r = write(w->fd, w->b + off, k);
        if (r <= 0)
            break;
        off += (size_t)r;
        if (w->pause_s > 0)
            tu_sleep_s(w->pause_s);
    }
    return NULL;
}

/* A read of several slices lands exactly, and no byte past it is taken. */
START_TEST(read_exact)
{
    peer p;
    peer_open(&p, 1);
    size_t n = 3 * IO_SLICE + 12345;
    uint8_t *src = pattern(n + 7, 1), *dst = calloc(1, n);
    writer w = {p.fd[1], src, n + 7, 65536, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, writer_main, &w), 0);
    ck_assert_int_eq(io_read(pool, &p.c, dst, n, 1, on_done, &p), 0);
    ck_assert(io_busy(&p.c.rd));
    wait_dones(&p, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(p.c.rd.status, 0);
    ck_assert_uint_eq(atomic_load(&p.c.rd.moved), n);
    ck_assert(!io_busy(&p.c.rd));
    ck_assert_int_eq(memcmp(dst, src, n), 0);
    uint8_t rest[16];
    ck_assert_int_eq(read(p.fd[0], rest, sizeof rest), 7); /* the next frame's bytes */
    ck_assert_int_eq(memcmp(rest, src + n, 7), 0);
    free(src);
    free(dst);
    peer_close(&p);
}
END_TEST

static void *drain_main(void *arg)
{
    writer *w = arg; /* reads w->n bytes into w->b (cast away const) */
    uint8_t *b = (uint8_t *)w->b;
    for (size_t off = 0; off < w->n;) {
        ssize_t r = read(w->fd, b + off, w->n - off < 4096 ? w->n - off : 4096);
        if (r <= 0)
            break;
        off += (size_t)r;
    }
    return NULL;
}

/* A write of several buffers reaches the peer whole and in order, while the
 * peer reads slowly (the job parks on a full socket). */
START_TEST(write_bufs)
{
    peer p;
    peer_open(&p, 2);
    size_t sizes[5] = {10, IO_SLICE + 3, 1, 2 * IO_SLICE, 77}, n = 0;
    for (int i = 0; i < 5; i++)
        n += sizes[i];
    uint8_t *src = pattern(n, 2), *got = calloc(1, n);
    uv_buf_t bufs[5];
    for (size_t i = 0, off = 0; i < 5; off += sizes[i], i++)
        bufs[i] = uv_buf_init((char *)src + off, (unsigned)sizes[i]);
    ck_assert_int_eq(io_write(pool, &p.c, bufs, 5, 0, on_done, &p), 0);
    ck_assert(io_busy(&p.c.wr) && io_left(&p.c.wr) <= n);
    writer d = {p.fd[1], got, n, 0, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, drain_main, &d), 0);
    wait_dones(&p, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(p.c.wr.status, 0);
    ck_assert_uint_eq(io_left(&p.c.wr), 0);
    ck_assert_int_eq(memcmp(got, src, n), 0);
    free(src);
    free(got);
    peer_close(&p);
}
END_TEST

/* A peer that trickles parks its job; another session on the same thread
 * (same key parity) is read whole meanwhile. */
START_TEST(trickle_costs_others_nothing)
{
    peer slow, fast;
    peer_open(&slow, 4);
    peer_open(&fast, 6); /* 4 % 2 == 6 % 2: the same thread */
    size_t n = 1 << 20;
    uint8_t *a = pattern(n, 3), *b = pattern(n, 4), *da = calloc(1, n), *db = calloc(1, n);
    ck_assert_int_eq(io_read(pool, &slow.c, da, n, 1, on_done, &slow), 0);
    ck_assert_int_eq(write(slow.fd[1], a, 100), 100); /* then nothing for a while */
    writer w = {fast.fd[1], b, n, 65536, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, writer_main, &w), 0);
    ck_assert_int_eq(io_read(pool, &fast.c, db, n, 1, on_done, &fast), 0);
    wait_dones(&fast, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(memcmp(db, b, n), 0);
    ck_assert_int_eq(slow.dones, 0);
    ck_assert_uint_eq(atomic_load(&slow.c.rd.moved), 100);
    /* the trickler finishes later */
    writer w2 = {slow.fd[1], a + 100, n - 100, 4096, 0.0001};
    ck_assert_int_eq(pthread_create(&th, NULL, writer_main, &w2), 0);
    wait_dones(&slow, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(memcmp(da, a, n), 0);
    free(a);
    free(b);
    free(da);
    free(db);
    peer_close(&slow);
    peer_close(&fast);
}
END_TEST

/* EOF mid-read: UV_EOF and how far it got; a write to a closed peer: EPIPE
 * (no SIGPIPE). */
START_TEST(eof_and_error)
{
    peer p;
    peer_open(&p, 1);
    uint8_t buf[4096];
    ck_assert_int_eq(io_read(pool, &p.c, buf, sizeof buf, 2, on_done, &p), 0);
    ck_assert_int_eq(write(p.fd[1], "abcde", 5), 5);
    shutdown(p.fd[1], SHUT_WR);
    wait_dones(&p, 1);
    ck_assert_int_eq(p.c.rd.status, UV_EOF);
    ck_assert_uint_eq(atomic_load(&p.c.rd.moved), 5);
    ck_assert_int_eq(memcmp(buf, "abcde", 5), 0);
    close(p.fd[1]);
    p.fd[1] = -1;
    size_t n = 4 << 20;
    uint8_t *src = pattern(n, 5);
    uv_buf_t b = uv_buf_init((char *)src, (unsigned)n);
    ck_assert_int_eq(io_write(pool, &p.c, &b, 1, 0, on_done, &p), 0);
    wait_dones(&p, 2);
    ck_assert_int_eq(p.c.wr.status, UV_EPIPE);
    free(src);
    peer_close(&p);
}
END_TEST

/* io_cancel: an idle job (false), a parked read and a parked write (true,
 * done never runs, the fd then closes), a job done but not yet delivered
 * (true, done never runs). */
START_TEST(cancel_each_state)
{
    peer p;
    peer_open(&p, 3);
    ck_assert(!io_cancel(pool, &p.c.rd));
    uint8_t buf[1 << 16];
    ck_assert_int_eq(io_read(pool, &p.c, buf, sizeof buf, 1, on_done, &p), 0);
    ck_assert_int_eq(write(p.fd[1], "abcdefghij", 10), 10);
    tu_sleep_s(0.05); /* parked by now, or about to be: either is fine */
    ck_assert(io_cancel(pool, &p.c.rd));
    ck_assert(!io_busy(&p.c.rd));
    size_t n = 8 << 20; /* more than the socket holds: parks */
    uint8_t *src = pattern(n, 6);
    uv_buf_t b = uv_buf_init((char *)src, (unsigned)n);
    ck_assert_int_eq(io_write(pool, &p.c, &b, 1, 1, on_done, &p), 0);
    tu_sleep_s(0.05);
    ck_assert(io_cancel(pool, &p.c.wr));
    uint64_t moved = atomic_load(&p.c.wr.moved);
    ck_assert(moved > 0 && moved < n);
    /* done, not delivered: the loop has not run */
    ck_assert_int_eq(io_read(pool, &p.c, buf, 10, 1, on_done, &p), 0);
    ck_assert_int_eq(write(p.fd[1], "0123456789", 10), 10);
    double t0 = tu_now_s();
    while (atomic_load(&p.c.rd.moved) < 10 && tu_now_s() - t0 < 5)
        tu_sleep_s(0.001);
    tu_sleep_s(0.01);
    ck_assert(io_cancel(pool, &p.c.rd));
    for (int i = 0; i < 20; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        tu_sleep_s(0.005);
    }
    ck_assert_int_eq(p.dones, 0);
    free(src);
    peer_close(&p);
}
END_TEST

/* Many sessions on two threads, each reading and writing at once, with
 * cancels of some mid-way: every job ends exactly once. */
START_TEST(many_sessions)
{
    enum { P = 16 };
    size_t n = 300000;
    peer p[P];
    uint8_t *src[P], *dst[P], *back[P];
    pthread_t wt[P], rt[P];
    writer w[P], r[P];
    for (int i = 0; i < P; i++) {
        peer_open(&p[i], (unsigned)i);
        src[i] = pattern(n, (unsigned)i);
        dst[i] = calloc(1, n);
        back[i] = calloc(1, n);
        w[i] = (writer){p[i].fd[1], src[i], n, 8192, 0};
        r[i] = (writer){p[i].fd[1], back[i], n, 0, 0};
        ck_assert_int_eq(io_read(pool, &p[i].c, dst[i], n, i % IO_LEVELS, on_done, &p[i]), 0);
        uv_buf_t b = uv_buf_init((char *)src[i], (unsigned)n);
        ck_assert_int_eq(io_write(pool, &p[i].c, &b, 1, i % IO_LEVELS, on_done, &p[i]), 0);
        ck_assert_int_eq(pthread_create(&wt[i], NULL, writer_main, &w[i]), 0);
        ck_assert_int_eq(pthread_create(&rt[i], NULL, drain_main, &r[i]), 0);
    }
    for (int i = 0; i < P; i++) {
        wait_dones(&p[i], 2);
        pthread_join(wt[i], NULL);
        pthread_join(rt[i], NULL);
        ck_assert_int_eq(memcmp(dst[i], src[i], n), 0);
        ck_assert_int_eq(memcmp(back[i], src[i], n), 0);
        free(src[i]);
        free(dst[i]);
        free(back[i]);
        peer_close(&p[i]);
    }
}
END_TEST

/* Replace the fixture's pool with one whose threads spin spin_us after
 * their last job (GPUQ_IO_SPIN_US). */
static void pool_with_spin(const char *spin_us)
{
    io_pool_free(pool);
    uv_run(&loop, UV_RUN_NOWAIT); /* its async handle closes */
    ck_assert_int_eq(setenv("GPUQ_IO_SPIN_US", spin_us, 1), 0);
    pool = io_pool_new(&loop, 2);
    unsetenv("GPUQ_IO_SPIN_US");
    ck_assert_ptr_nonnull(pool);
}

/* n small writes on p, each submitted once the one before is done (and its
 * bytes read back whole); returns the wakes they cost. */
static uint64_t write_chain(peer *p, int n)
{
    uint64_t w0 = io_pool_wakes(pool);
    for (int i = 0; i < n; i++) {
        char msg[64], got[64];
        memset(msg, 'a' + i % 26, sizeof msg);
        uv_buf_t b = uv_buf_init(msg, sizeof msg);
        ck_assert_int_eq(io_write(pool, &p->c, &b, 1, 1, on_done, p), 0);
        wait_dones(p, p->dones + 1);
        size_t off = 0;
        while (off < sizeof got) {
            ssize_t r = read(p->fd[1], got + off, sizeof got - off);
            ck_assert_int_gt(r, 0);
            off += (size_t)r;
        }
        ck_assert_int_eq(memcmp(got, msg, sizeof msg), 0);
    }
    return io_pool_wakes(pool) - w0;
}

/* A thread that still spins after its last job takes the next without a
 * wake-up (and stops at once when its pool does); without the spin each
 * job of the chain wakes it. */
START_TEST(spinning_threads_need_no_wake)
{
    peer p;
    peer_open(&p, 1);
    pool_with_spin("3000000"); /* 3 s: longer than the chain takes */
    ck_assert_uint_le(write_chain(&p, 20), 1);
    double t0 = tu_now_s();
    pool_with_spin("0"); /* the spinning threads see the stop at once */
    ck_assert(tu_now_s() - t0 < 1.0);
    ck_assert_uint_ge(write_chain(&p, 20), 15);
    peer_close(&p);
}
END_TEST

static void *drain_all(void *arg)
{
    int fd = *(int *)arg;
    char b[4096];
    while (read(fd, b, sizeof b) > 0)
        ;
    return NULL;
}

/* A parked read whose bytes come while its thread runs a stream of small
 * jobs (each submitted as the last is done, so the spinning thread never
 * sleeps in epoll) still finishes, in the middle of the stream. */
START_TEST(parked_job_resumes_under_a_stream)
{
    pool_with_spin("3000000");
    peer slow, busy;
    peer_open(&slow, 2);
    peer_open(&busy, 4); /* 2 % 2 == 4 % 2: the same thread */
    uint8_t buf[100], *src = pattern(sizeof buf, 9);
    ck_assert_int_eq(io_read(pool, &slow.c, buf, sizeof buf, 1, on_done, &slow), 0);
    tu_sleep_s(0.02); /* nothing to read: parked */
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, drain_all, &busy.fd[1]), 0);
    char msg[64];
    memset(msg, 'x', sizeof msg);
    uv_buf_t b = uv_buf_init(msg, sizeof msg);
    int sent = 0;
    double t0 = tu_now_s();
    while (slow.dones == 0 && tu_now_s() - t0 < 2.5) {
        if (!io_busy(&busy.c.wr)) {
            ck_assert_int_eq(io_write(pool, &busy.c, &b, 1, 1, on_done, &busy), 0);
            if (++sent == 50)
                ck_assert_int_eq(write(slow.fd[1], src, sizeof buf), (ssize_t)sizeof buf);
        }
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    ck_assert_int_ge(sent, 50);
    ck_assert_int_eq(slow.dones, 1);
    ck_assert_int_eq(memcmp(buf, src, sizeof buf), 0);
    wait_dones(&busy, sent);
    ck_assert_int_eq(shutdown(busy.fd[0], SHUT_WR), 0);
    pthread_join(th, NULL);
    free(src);
    peer_close(&slow);
    peer_close(&busy);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("io_pool");
    TCase *tc = tcase_create("io_pool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, read_exact);
    tcase_add_test(tc, write_bufs);
    tcase_add_test(tc, trickle_costs_others_nothing);
    tcase_add_test(tc, eof_and_error);
    tcase_add_test(tc, cancel_each_state);
    tcase_add_test(tc, many_sessions);
    tcase_add_test(tc, spinning_threads_need_no_wake);
    tcase_add_test(tc, parked_job_resumes_under_a_stream);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
