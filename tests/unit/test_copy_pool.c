/* SPDX-License-Identifier: Apache-2.0 */
/* test_copy_pool.c - libgpuq's threaded copy (client/lib/copy_pool.c).
 *
 * Every copy equals memcpy's, byte for byte, with nothing written outside
 * the destination: sizes around the threshold and the chunk boundaries
 * (k * chunk - 1, k * chunk, k * chunk + 1), odd sizes, a size that gives
 * every thread several chunks, source and destination off by 1 to 63 bytes
 * from a 64-byte boundary, several segments (zero-length ones among them),
 * more segments than a job takes. GPUQ_COPY_THREADS sets the threads (each
 * test runs in its own process, so each starts its own pool), 1 and bad
 * values included; the workers do take chunks. Two threads copying at once
 * both get memcpy's bytes. After fork the child has no workers until its
 * first large copy, then its own (as many as /proc/self/task shows), and a
 * fork while another thread copies never leaves the child stuck. Streaming
 * stores and memcpy (GPUQ_COPY_NT=0) give the same bytes. Workers poll for
 * GPUQ_COPY_SPIN_US after a job (running, not asleep), then sleep; with 0
 * they sleep at once; a copy expected soon (copy_pool_expect) keeps them
 * polling until it is due, one expected too late or too small does not. A
 * copy takes one thread per COPY_POOL_PER_THREAD bytes at most.
 */
#include <dirent.h>
#include <stdio.h>
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy_pool.h"
#include "testutil.h"

#define CH COPY_POOL_CHUNK
#define GUARD 64

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static void fill_rand(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        p[i] = (uint8_t)(rng >> 24);
    }
}

/* A copy of len bytes through the pool, src at alignment sa and dst at da
 * (bytes past a 64-byte boundary), against memcpy; the guard bytes around
 * the destination stay as they were. */
static void check_one(size_t len, size_t sa, size_t da)
{
    /* aligned_alloc wants a size that is a multiple of the alignment */
    size_t up = (len + 63) / 64 * 64;
    uint8_t *src = aligned_alloc(64, up + 128), *dst = aligned_alloc(64, up + 2 * GUARD + 128);
    uint8_t *want = malloc(len + 2 * GUARD + 128);
    ck_assert(src && dst && want);
    fill_rand(src + sa, len);
    memset(dst, 0xa5, len + 2 * GUARD + 128);
    memcpy(want, dst, len + 2 * GUARD + 128);
    memcpy(want + GUARD + da, src + sa, len);
    copy_seg s = {dst + GUARD + da, src + sa, len};
    copy_pool_run(&s, 1);
    ck_assert_msg(memcmp(dst, want, len + 2 * GUARD + 128) == 0,
                  "copy of %zu bytes (src +%zu, dst +%zu) differs from memcpy's", len, sa, da);
    free(src), free(dst), free(want);
}

static void use_threads(const char *v)
{
    ck_assert_int_eq(setenv("GPUQ_COPY_THREADS", v, 1), 0);
}

START_TEST(sizes_and_alignments)
{
    use_threads("4");
    if (_i == 1) /* memcpy instead of streaming stores */
        ck_assert_int_eq(setenv("GPUQ_COPY_NT", "0", 1), 0);
    static const size_t align[][2] = {{0, 0}, {1, 0}, {0, 1}, {3, 7}, {63, 1}, {17, 33}};
    size_t sizes[] = {0,
                      1,
                      63,
                      COPY_POOL_MIN - 1,
                      COPY_POOL_MIN,
                      COPY_POOL_MIN + 1,
                      5 * CH - 1,
                      5 * CH,
                      5 * CH + 1,
                      7 * CH + 13,
                      3 * 4 * CH + 4 * CH / 2 + 3, /* several chunks for each of 4 threads */
                      64 * CH + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t a = 0; a < sizeof align / sizeof *align; a++)
            check_one(sizes[i], align[a][0], align[a][1]);
    ck_assert_uint_eq(copy_pool_workers(), 3);
}
END_TEST

START_TEST(segments)
{
    use_threads("3");
    /* lengths of up to COPY_POOL_MAX_SEGS + 1 segments, some empty, some
     * ending mid-chunk, in one buffer with a gap between them */
    static const size_t lens[][5] = {
        {CH + 1, 3 * CH - 1, 0, 0, 0},      {0, 5 * CH + 7, 0, 0, 0},
        {CH - 1, 1, CH + 1, 2 * CH - 3, 0}, {4 * CH, 0, 0, 4 * CH + 1, 0},
        {CH, CH, CH, CH, CH + 5},           {COPY_POOL_MIN / 2, COPY_POOL_MIN / 2 - 1, 0, 0, 0},
    };
    static const unsigned nseg[] = {2, 2, 4, 4, 5, 2};
    for (size_t t = 0; t < sizeof nseg / sizeof *nseg; t++) {
        size_t total = 0;
        for (unsigned k = 0; k < nseg[t]; k++)
            total += lens[t][k] + 3;
        uint8_t *src = malloc(total + 1), *dst = malloc(total + 1), *want = malloc(total + 1);
        ck_assert(src && dst && want);
        fill_rand(src, total + 1);
        memset(dst, 0x5a, total + 1);
        memcpy(want, dst, total + 1);
        copy_seg seg[5];
        size_t off = 1;
        for (unsigned k = 0; k < nseg[t]; k++) {
            seg[k] = (copy_seg){dst + off, src + total - off - lens[t][k], lens[t][k]};
            memcpy(want + off, seg[k].src, lens[t][k]);
            off += lens[t][k] + 3;
        }
        copy_pool_run(seg, nseg[t]);
        ck_assert_msg(memcmp(dst, want, total + 1) == 0, "segments case %zu differs", t);
        free(src), free(dst), free(want);
    }
}
END_TEST

/* The number of threads copy_pool.c picks without GPUQ_COPY_THREADS. */
static unsigned default_threads(void)
{
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int n = CPU_COUNT(&set) - 2;
    return n > 16 ? 16 : n < 1 ? 1 : (unsigned)n;
}

START_TEST(thread_counts)
{
    /* _i: 0 "1" (never a thread), then values that are ignored */
    static const char *const v[] = {"1", "0", "65", "4x", "", "-2"};
    use_threads(v[_i]);
    check_one(4 * CH + 5, 1, 2);
    unsigned want = _i == 0 ? 0 : default_threads() - 1;
    ck_assert_uint_eq(copy_pool_workers(), want);
    if (want == 0)
        ck_assert_uint_eq(copy_pool_worker_chunks(), 0);
}
END_TEST

START_TEST(workers_take_chunks)
{
    use_threads("4");
    size_t len = 64 * CH;
    uint8_t *src = malloc(len), *dst = malloc(len);
    ck_assert(src && dst);
    fill_rand(src, len);
    /* a worker may wake after the caller took every chunk, but not each
     * time of many */
    for (int i = 0; i < 200 && copy_pool_worker_chunks() == 0; i++) {
        memset(dst, 0, len);
        copy_seg s = {dst, src, len};
        copy_pool_run(&s, 1);
        ck_assert(memcmp(dst, src, len) == 0);
    }
    ck_assert_uint_gt(copy_pool_worker_chunks(), 0);
    free(src), free(dst);
}
END_TEST

/* The states of this process's threads other than the main one: how many
 * run (R) and how many sleep (S). */
static void worker_states(int *running, int *sleeping)
{
    *running = *sleeping = 0;
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == getpid())
            continue;
        char path[300], buf[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* gone meanwhile */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *close = strrchr(buf, ')'); /* "pid (comm) S ..." */
        ck_assert_ptr_nonnull(close);
        *running += close[2] == 'R';
        *sleeping += close[2] == 'S';
    }
    closedir(d);
}

START_TEST(workers_spin_then_sleep)
{
    use_threads("3");
    /* _i: 0 polls for 0.4 s after a job, 1 never */
    ck_assert_int_eq(setenv("GPUQ_COPY_SPIN_US", _i == 0 ? "400000" : "0", 1), 0);
    int running = 0, sleeping = 0, polled = 0, quiet = 0;
    /* A worker that woke after the caller took every chunk did not copy
     * and does not poll: on a loaded machine it may take a few rounds
     * before both workers copied in one. 50 ms after a copy, pollers
     * still run and the others sleep. */
    for (int round = 0; round < (_i == 0 ? 20 : 3) && !polled; round++) {
        check_one(64 * CH, 0, 0);
        usleep(50000);
        worker_states(&running, &sleeping);
        polled = running == 2;
        quiet += running == 0;
    }
    ck_assert_uint_eq(copy_pool_workers(), 2);
    if (_i == 0)
        ck_assert_msg(polled, "no copy of 20 left both workers polling 50 ms after it");
    else
        ck_assert_msg(quiet > 0, "workers ran 50 ms after each of 3 copies, with spin 0");
    /* past the window: asleep (within a second more on a loaded machine) */
    usleep(400000);
    for (int i = 0; i < 100 && (worker_states(&running, &sleeping), sleeping != 2); i++)
        usleep(10000);
    ck_assert_msg(sleeping == 2, "%d of 2 workers sleep after the window", sleeping);
}
END_TEST

START_TEST(expect_keeps_workers_polling)
{
    use_threads("3"); /* the default spin: COPY_POOL_SPIN_US */
    /* _i: 0 a copy out expected within 1.9 ms: the workers that copied poll
     * on past the spin; 1 one expected later than COPY_POOL_EXPECT_MAX_US,
     * 2 one under COPY_POOL_MIN: nothing changes, they sleep after the spin */
    static const struct {
        size_t bytes;
        uint64_t ns;
    } want[] = {{COPY_POOL_MIN, 1900000},
                {COPY_POOL_MIN, (uint64_t)COPY_POOL_EXPECT_MAX_US * 1000u + 1},
                {COPY_POOL_MIN - 1, 1900000}};
    ck_assert_uint_gt(1900, COPY_POOL_SPIN_US * 3); /* a window the spin alone would not give */
    size_t len = 64 * CH;
    uint8_t *src = malloc(len), *dst = malloc(len);
    ck_assert(src && dst);
    fill_rand(src, len);
    int running = 0, sleeping = 0, seen = 0, told = 0;
    for (int round = 0; round < 400 && !seen; round++) {
        memset(dst, 0, len);
        copy_seg s = {dst, src, len};
        copy_pool_run(&s, 1);
        double t0 = tu_now_s();
        copy_pool_expect(want[_i].bytes, want[_i].ns); /* at once, as stage.c does */
        uint64_t left = copy_pool_poll_left_ns();
        if (_i == 0)
            ck_assert_uint_gt(left, COPY_POOL_SPIN_US * 1000u);
        else
            ck_assert_uint_le(left, COPY_POOL_SPIN_US * 1000u); /* the spin's own window */
        usleep(900); /* past the spin's window, inside the expected one */
        worker_states(&running, &sleeping);
        double us = (tu_now_s() - t0) * 1e6;
        ck_assert(memcmp(dst, src, len) == 0);
        /* A round tells only when the look fell between the spin's window
         * and the expected one: on a loaded machine the sleep may outlast
         * both, and then the round is run again. */
        if (us < COPY_POOL_SPIN_US + 200 || us > 1700)
            continue;
        told++;
        seen = _i == 0 ? running >= 1 : running == 0;
    }
    free(src), free(dst);
    ck_assert_uint_eq(copy_pool_workers(), 2);
    ck_assert_msg(seen,
                  _i == 0 ? "no copy of %d left a worker polling 1 ms after it"
                          : "workers ran 1 ms after each of %d copies",
                  told);
    /* after the expected window: asleep */
    usleep(5000);
    for (int i = 0; i < 100 && (worker_states(&running, &sleeping), sleeping != 2); i++)
        usleep(10000);
    ck_assert_msg(sleeping == 2, "%d of 2 workers sleep after the window", sleeping);
}
END_TEST

START_TEST(threads_follow_size)
{
    use_threads("8");
    ck_assert_int_eq(setenv("GPUQ_COPY_SPIN_US", "400000", 1), 0);
    /* 16 MiB: every worker may take part, and those that did poll; then
     * 1 MiB + 1, three per-thread shares: the caller and two workers take
     * it, the pollers beyond those two go to sleep */
    check_one(64 * CH, 0, 0);
    check_one(COPY_POOL_MIN + 1, 0, 0);
    ck_assert_uint_eq(copy_pool_workers(), 7);
    usleep(50000);
    int running, sleeping;
    worker_states(&running, &sleeping);
    ck_assert_msg(running <= 2 && sleeping >= 5,
                  "a copy of 1 MiB + 1 left %d workers running, %d sleeping (at most 2 take it)",
                  running, sleeping);
}
END_TEST

/* The sizing rule alone, free of any thread's timing (on two cores the
 * workers may not wake in time for a 1 MiB copy to show who took it). */
START_TEST(share_follows_size)
{
    static const struct {
        size_t total;
        unsigned nworkers, want;
    } c[] = {
        {0, 7, 0},
        {COPY_POOL_PER_THREAD, 7, 0},
        {COPY_POOL_PER_THREAD + 1, 7, 1},
        {COPY_POOL_MIN, 7, 1},
        {COPY_POOL_MIN + 1, 7, 2},
        {4 * COPY_POOL_MIN, 15, 7},
        {4 * COPY_POOL_MIN + 1, 15, 8},
        {64 * CH, 7, 7},
        {64 * CH, 0, 0},
        {3 * COPY_POOL_PER_THREAD - 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        ck_assert_msg(copy_pool_share(c[i].total, c[i].nworkers) == c[i].want,
                      "case %zu: %zu bytes, %u workers: %u taken, want %u", i, c[i].total,
                      c[i].nworkers, copy_pool_share(c[i].total, c[i].nworkers), c[i].want);
}
END_TEST

typedef struct racer {
    uint8_t seed;
    int rounds;
    volatile int *stop; /* NULL: run `rounds` times */
    int bad;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    size_t len = 6 * CH + r->seed;
    uint8_t *src = malloc(len), *dst = malloc(len);
    if (!src || !dst) {
        r->bad = -1;
        return NULL;
    }
    for (size_t i = 0; i < len; i++)
        src[i] = (uint8_t)(i * 7 + r->seed);
    for (int i = 0; r->stop ? !*r->stop : i < r->rounds; i++) {
        memset(dst, 0, len);
        copy_seg s = {dst, src, len};
        copy_pool_run(&s, 1);
        if (memcmp(dst, src, len) != 0)
            r->bad++;
    }
    free(src), free(dst);
    return NULL;
}

START_TEST(two_callers_at_once)
{
    use_threads("3");
    racer r[2] = {{.seed = 1, .rounds = 300}, {.seed = 2, .rounds = 300}};
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, race, &r[k]), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(pthread_join(t[k], NULL), 0);
        ck_assert_int_eq(r[k].bad, 0);
    }
}
END_TEST

/* In a child after fork: the pool is the child's own. Returns the exit
 * status to give. */
static int child_copies(void)
{
    if (copy_pool_workers() != 0)
        return 2; /* the parent's workers do not exist here */
    size_t len = 9 * CH + 3;
    uint8_t *src = malloc(len), *dst = calloc(1, len);
    if (!src || !dst)
        return 3;
    for (size_t i = 0; i < len; i++)
        src[i] = (uint8_t)(i * 13 + 5);
    copy_seg s = {dst, src, len};
    copy_pool_run(&s, 1);
    if (memcmp(dst, src, len) != 0)
        return 4;
    unsigned w = copy_pool_workers();
    if (w != 3 || tu_thread_count() != 1 + w)
        return 5; /* its own workers, as many as it says */
    return 0;
}

/* waitpid with a limit: a child stuck on a lock fails the test. */
static int wait_child(pid_t pid)
{
    int st;
    for (int i = 0; i < 3000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        ck_assert_int_ge(r, 0);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    ck_abort_msg("a child after fork did not finish within 30 s");
    return -1;
}

START_TEST(fork_child_has_own_pool)
{
    use_threads("4");
    check_one(8 * CH, 0, 0);
    ck_assert_uint_eq(copy_pool_workers(), 3);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(child_copies());
    ck_assert_int_eq(wait_child(pid), 0);
    check_one(8 * CH + 1, 1, 1); /* and the parent's pool still works */
    ck_assert_uint_eq(copy_pool_workers(), 3);
}
END_TEST

START_TEST(fork_while_copying)
{
    use_threads("4");
    volatile int stop = 0;
    racer r = {.seed = 3, .stop = &stop};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, race, &r), 0);
    for (int i = 0; i < 30; i++) {
        usleep(1000 + 300 * (unsigned)i);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            _exit(child_copies());
        ck_assert_int_eq(wait_child(pid), 0);
    }
    stop = 1;
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(r.bad, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("copy_pool");
    TCase *tc = tcase_create("copy_pool");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, sizes_and_alignments, 0, 2);
    tcase_add_loop_test(tc, workers_spin_then_sleep, 0, 2);
    tcase_add_loop_test(tc, expect_keeps_workers_polling, 0, 3);
    tcase_add_test(tc, threads_follow_size);
    tcase_add_test(tc, share_follows_size);
    tcase_add_test(tc, segments);
    tcase_add_loop_test(tc, thread_counts, 0, 6);
    tcase_add_test(tc, workers_take_chunks);
    tcase_add_test(tc, two_callers_at_once);
    tcase_add_test(tc, fork_child_has_own_pool);
    tcase_add_test(tc, fork_while_copying);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
