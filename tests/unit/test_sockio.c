/* SPDX-License-Identifier: Apache-2.0 */
/* test_sockio.c - libgpuq's blocking socket I/O (client/lib/sockio.c): whole
 * transfers over short writes and reads, many pieces in one send, and the
 * process-wide byte counts (gpuq_io_counts) that gpuqctl's progress line
 * reads from another thread: exact, and moving while one large send is
 * still blocked (sends go out in pieces of SOCKIO_SEND_CHUNK); and a reader
 * waiting for a reply sleeps through the peer's reads of what it sent (a
 * recv(2) blocked on a Unix socket is woken by each of them: gpuqd's loop
 * would pay a wake-up per request read).
 */
#include <check.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "gpuq_internal.h"
#include "sockio.h"
#include "testutil.h"

enum { BIG = 32 << 20 };

typedef struct sender {
    int fd;
    struct iovec iov[16];
    int cnt;
    int rc;
    volatile int done;
} sender;

static void *send_main(void *arg)
{
    sender *s = arg;
    s->rc = sockio_writev_full(s->fd, s->iov, s->cnt);
    s->done = 1;
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(counts_move_during_a_large_send)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint8_t *src = malloc(BIG), *dst = malloc(BIG);
    ck_assert(src && dst);
    for (size_t i = 0; i < BIG; i++)
        src[i] = (uint8_t)(i * 131u + (i >> 13));
    uint64_t sent0, recv0, sent, rcvd;
    gpuq_io_counts(&sent0, &recv0);
    sender s = {.fd = sv[0], .iov = {{src, BIG}}, .cnt = 1};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, send_main, &s), 0);
    /* read a quarter, slowly: the sender is still blocked, yet its count
     * has moved (one sendmsg of 32 MiB would return only at its end) */
    size_t got = 0;
    while (got < BIG / 4) {
        ssize_t n = recv(sv[1], dst + got, BIG / 4 - got, 0);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    sleep_ms(50);
    gpuq_io_counts(&sent, &rcvd);
    ck_assert_int_eq(s.done, 0);
    ck_assert_uint_ge(sent - sent0, SOCKIO_SEND_CHUNK);
    ck_assert_uint_lt(sent - sent0, BIG);
    ck_assert_int_eq(sockio_read_full(sv[1], dst + got, BIG - got), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(s.rc, 0);
    ck_assert(memcmp(src, dst, BIG) == 0);
    gpuq_io_counts(&sent, &rcvd);
    ck_assert_uint_eq(sent - sent0, BIG);
    ck_assert_uint_eq(rcvd - recv0, BIG - got); /* recv() above is not sockio's */
    close(sv[0]);
    close(sv[1]);
    free(src);
    free(dst);
}
END_TEST

START_TEST(many_pieces_in_one_send)
{
    /* more pieces than one sendmsg takes (SOCKIO_MAX_IOV), empty ones among
     * them, and one larger than a chunk: all arrive, in order */
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    enum { N = 13 };
    size_t len[N] = {1, 0, 7, 4096, 0, 3, SOCKIO_SEND_CHUNK + 5, 100, 0, 1, 65536, 9, 2};
    size_t total = 0;
    for (int k = 0; k < N; k++)
        total += len[k];
    uint8_t *src = malloc(total), *dst = malloc(total);
    ck_assert(src && dst);
    for (size_t i = 0; i < total; i++)
        src[i] = (uint8_t)(i * 7u + 3u);
    sender s = {.fd = sv[0], .cnt = N};
    size_t off = 0;
    for (int k = 0; k < N; k++) {
        s.iov[k] = (struct iovec){src + off, len[k]};
        off += len[k];
    }
    uint64_t sent0, recv0, sent, rcvd;
    gpuq_io_counts(&sent0, &recv0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, send_main, &s), 0);
    ck_assert_int_eq(sockio_read_full(sv[1], dst, total), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(s.rc, 0);
    ck_assert(memcmp(src, dst, total) == 0);
    gpuq_io_counts(&sent, &rcvd);
    ck_assert_uint_eq(sent - sent0, total);
    ck_assert_uint_eq(rcvd - recv0, total);
    /* the peer gone: closed, not a signal */
    close(sv[1]);
    struct iovec one = {src, 1};
    ck_assert_int_eq(sockio_writev_full(sv[0], &one, 1), GPUQ_E_CLOSED);
    close(sv[0]);
    free(src);
    free(dst);
}
END_TEST

typedef struct waiter {
    int fd;
    bool with_fd; /* through sockio_read_full_fd, as a reply's first bytes are read */
    int rc;
    long switches; /* voluntary context switches during the wait */
    uint8_t got;
} waiter;

static void *wait_main(void *arg)
{
    waiter *w = arg;
    static uint8_t piece[1024];
    for (int k = 0; k < 64; k++) { /* 64 separate sends: 64 buffers at the peer */
        struct iovec v = {piece, sizeof piece};
        ck_assert_int_eq(sockio_writev_full(w->fd, &v, 1), 0);
    }
    struct rusage a, b;
    ck_assert_int_eq(getrusage(RUSAGE_THREAD, &a), 0);
    int rx_fd = -1;
    w->rc = w->with_fd ? sockio_read_full_fd(w->fd, &w->got, 1, &rx_fd)
                       : sockio_read_full(w->fd, &w->got, 1); /* the "reply" */
    ck_assert_int_eq(rx_fd, -1);
    ck_assert_int_eq(getrusage(RUSAGE_THREAD, &b), 0);
    w->switches = b.ru_nvcsw - a.ru_nvcsw;
    return NULL;
}

START_TEST(waiting_reader_sleeps_through_the_peers_reads)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    waiter w = {.fd = sv[0], .with_fd = _i == 1};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_main, &w), 0);
    sleep_ms(100); /* it has sent and waits */
    uint8_t buf[1024];
    for (int k = 0; k < 64; k++) { /* the peer reads each send, time apart */
        ck_assert_int_eq(sockio_read_full(sv[1], buf, sizeof buf), 0);
        sleep_ms(2);
    }
    uint8_t one = 42;
    ck_assert_int_eq(send(sv[1], &one, 1, 0), 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_uint_eq(w.got, 42);
    /* woken once for the byte (a blocked recv: about 64 times) */
    ck_assert_int_lt(w.switches, 16);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sockio");
    TCase *tc = tcase_create("sockio");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, counts_move_during_a_large_send);
    tcase_add_test(tc, many_pieces_in_one_send);
    tcase_add_loop_test(tc, waiting_reader_sleeps_through_the_peers_reads, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
