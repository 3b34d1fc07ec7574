/* SPDX-License-Identifier: Apache-2.0 */
/* test_staging.c - staging_set_capacity (config reload): lowering the total
 * limit frees only unused memory, in-use slots stay valid, new reservations
 * wait (busy) or can never fit (too large); raising it lets them in again.
 * The headroom kept for newcomers, and memory given back when idle.
 * A fake backend counts host allocations.
 *
 * Growth off the loop (issue 28): with a pinner, new memory is allocated on
 * the pinning thread (the fake's host_alloc records the thread it ran on);
 * the reservation waits (busy, with a ticket) until the grow finished and
 * the waker ran; a failed grow gives the waiter no_memory with the reason,
 * and later reservations grow again; frees run on that thread too; the
 * next chunk is grown ahead under the low-water mark. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "errors.h"
#include "staging.h"
#include "testutil.h"

#define MIB (1024u * 1024u)

static int nalloc, nfree;

static void *fake_alloc(backend *b, size_t len)
{
    (void)b;
    nalloc++;
    return malloc(len);
}

static void fake_free(backend *b, void *p)
{
    (void)b;
    nfree++;
    free(p);
}

static const backend_ops fake_ops = {
    .name = "fake", .host_alloc = fake_alloc, .host_free = fake_free};

/* A backend that counts host allocations, and st on it with total bytes. */
static void fake_pool(backend *b, staging *st, uint64_t total)
{
    memset(b, 0, sizeof *b);
    b->ops = &fake_ops;
    nalloc = nfree = 0;
    staging_init(st, b, total);
}

START_TEST(lower_then_raise)
{
    backend b;
    staging st;
    fake_pool(&b, &st, 8 * MIB);
    uint64_t used = 0;
    staging_slot *a = NULL, *c = NULL, *d = NULL;
    /* two stand-alone 2 MiB slots (over the chunked classes) */
    ck_assert_int_eq(staging_reserve(&st, 2 * MIB, &used, 8 * MIB, &a), 0);
    ck_assert_int_eq(staging_reserve(&st, 2 * MIB, &used, 8 * MIB, &c), 0);
    ck_assert_int_eq(nalloc, 2);
    memset(a->ptr, 0xab, a->size);
    staging_release(&st, c, &used);
    ck_assert_uint_eq(st.in_use, 2 * MIB);

    /* lower under what is allocated: the free slot goes, the used one stays */
    staging_set_capacity(&st, 3 * MIB);
    ck_assert_int_eq(nfree, 1);
    ck_assert_uint_eq(st.capacity, 2 * MIB);
    ck_assert_uint_eq(st.in_use, 2 * MIB);
    ck_assert_uint_eq(a->ptr[a->size - 1], 0xab);
    ck_assert_int_eq(staging_reserve(&st, 2 * MIB, &used, 8 * MIB, &d), GPUQ_E_BUSY);
    ck_assert_int_eq(staging_reserve(&st, 4 * MIB, &used, 8 * MIB, &d), GPUQ_E_TOO_LARGE);

    /* lower under what is in use: nothing in use is freed */
    staging_set_capacity(&st, 1 * MIB);
    ck_assert_int_eq(nfree, 1);
    ck_assert_uint_eq(st.in_use, 2 * MIB);
    ck_assert_uint_eq(a->ptr[0], 0xab);
    ck_assert_int_eq(staging_reserve(&st, 8192, &used, 8 * MIB, &d), GPUQ_E_BUSY);

    /* raise again: room for more */
    staging_set_capacity(&st, 8 * MIB);
    ck_assert_int_eq(staging_reserve(&st, 2 * MIB, &used, 8 * MIB, &d), 0);
    ck_assert_uint_eq(st.in_use, 4 * MIB);
    ck_assert_uint_eq(used, 4 * MIB);
    staging_release(&st, a, &used);
    staging_release(&st, d, &used);
    ck_assert_uint_eq(used, 0);
    ck_assert_uint_eq(st.in_use, 0);
    staging_destroy(&st);
    ck_assert_int_eq(nalloc, nfree);
    ck_assert_uint_eq(st.capacity, 0);
}
END_TEST

/* The headroom: the last bytes of the total go only to small requests of
 * sessions holding nothing; one request may take at most total - headroom. */
START_TEST(headroom_for_newcomers)
{
    backend b;
    staging st;
    fake_pool(&b, &st, 64 * MIB);
    staging_set_headroom(&st, 8 * MIB);
    uint64_t hog = 0, hog2 = 0, newcomer = 0;
    staging_slot *h[8], *n1 = NULL, *n2 = NULL, *x = NULL;
    /* one request over total - headroom can never fit */
    ck_assert_int_eq(staging_reserve(&st, 56 * MIB + 1, &hog, 64 * MIB, &x), GPUQ_E_TOO_LARGE);
    /* a hog fills the shared part: 7 x 8 MiB = 56 MiB, then waits */
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(staging_reserve(&st, 8 * MIB, &hog, 64 * MIB, &h[i]), 0);
    ck_assert_uint_eq(st.in_use, 56 * MIB);
    ck_assert_int_eq(staging_reserve(&st, 4096, &hog, 64 * MIB, &x), GPUQ_E_BUSY);
    /* a second session holding nothing, but asking more than the headroom */
    ck_assert_int_eq(staging_reserve(&st, 8 * MIB + 1, &hog2, 64 * MIB, &x), GPUQ_E_BUSY);
    /* a newcomer's small request gets in; its second one waits */
    ck_assert_int_eq(staging_reserve(&st, 6 * MIB, &newcomer, 64 * MIB, &n1), 0);
    ck_assert_int_eq(staging_reserve(&st, 4096, &newcomer, 64 * MIB, &n2), GPUQ_E_BUSY);
    /* another newcomer: what is left of the headroom (2 MiB) */
    ck_assert_int_eq(staging_reserve(&st, 2 * MIB, &hog2, 64 * MIB, &n2), 0);
    ck_assert_uint_eq(st.in_use, 64 * MIB);
    staging_release(&st, n1, &newcomer);
    staging_release(&st, n2, &hog2);
    for (int i = 0; i < 7; i++)
        staging_release(&st, h[i], &hog);
    ck_assert_uint_eq(hog + hog2 + newcomer + st.in_use, 0);
    /* with no headroom a single request may take the whole total */
    staging_set_headroom(&st, 0);
    ck_assert_int_eq(staging_reserve(&st, 64 * MIB, &hog, 64 * MIB, &x), 0);
    staging_release(&st, x, &hog);
    staging_destroy(&st);
    ck_assert_int_eq(nalloc, nfree);
}
END_TEST

/* Given back when idle: free stand-alone slots (largest first) and chunks
 * with no slot in use, down to the floor; nothing in use moves. */
START_TEST(release_idle)
{
    backend b;
    staging st;
    fake_pool(&b, &st, 256 * MIB);
    uint64_t used = 0;
    staging_slot *small[3], *big[2];
    for (int i = 0; i < 3; i++) /* carved from one 16 MiB chunk */
        ck_assert_int_eq(staging_reserve(&st, 64 * 1024, &used, 256 * MIB, &small[i]), 0);
    ck_assert_int_eq(staging_reserve(&st, 2 * MIB, &used, 256 * MIB, &big[0]), 0);
    ck_assert_int_eq(staging_reserve(&st, 4 * MIB, &used, 256 * MIB, &big[1]), 0);
    ck_assert_int_eq(nalloc, 3);
    ck_assert_uint_eq(st.capacity, 22 * MIB);
    memset(small[0]->ptr, 0x5a, small[0]->size);
    staging_release(&st, small[1], &used);
    staging_release(&st, small[2], &used);
    staging_release(&st, big[0], &used);
    staging_release(&st, big[1], &used);
    /* floor 18 MiB: only the 4 MiB slot goes */
    ck_assert_uint_eq(staging_release_idle(&st, 18 * MIB), 4 * MIB);
    ck_assert_uint_eq(st.capacity, 18 * MIB);
    /* floor 0: the 2 MiB slot goes; the chunk stays (small[0] in use) */
    ck_assert_uint_eq(staging_release_idle(&st, 0), 2 * MIB);
    ck_assert_uint_eq(st.capacity, 16 * MIB);
    ck_assert_int_eq(nfree, 2);
    ck_assert_uint_eq(small[0]->ptr[small[0]->size - 1], 0x5a);
    /* once its last slot is free the chunk goes too */
    staging_release(&st, small[0], &used);
    ck_assert_uint_eq(staging_release_idle(&st, 0), 16 * MIB);
    ck_assert_uint_eq(st.capacity, 0);
    ck_assert_uint_eq(st.released_total, 22 * MIB);
    ck_assert_ptr_null(st.free_list);
    ck_assert_ptr_null(st.chunks);
    ck_assert_int_eq(nalloc, nfree);
    /* and grows again on demand */
    ck_assert_int_eq(staging_reserve(&st, 64 * 1024, &used, 256 * MIB, &small[0]), 0);
    ck_assert_uint_eq(st.capacity, 16 * MIB);
    staging_release(&st, small[0], &used);
    staging_destroy(&st);
    ck_assert_int_eq(nalloc, nfree);
}
END_TEST

/* ---- growth on the pinning thread ---- */

static uv_thread_t main_thread;
static int t_alloc_off_loop, t_alloc_on_loop, t_free_off_loop, t_free_on_loop;
static int t_nalloc, t_nfree, t_fail, t_wakes;

static int on_main(void)
{
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &main_thread);
}

static int t_thread_init(backend *b, char *why, size_t cap)
{
    (void)b;
    (void)why;
    (void)cap;
    return 0;
}

/* (counters: written on the pinning thread, read on the loop after the
 * job came back through the pinner's mutex) */
static void *t_alloc(backend *b, size_t len)
{
    (void)b;
    if (on_main())
        t_alloc_on_loop++;
    else
        t_alloc_off_loop++;
    if (t_fail)
        return NULL;
    t_nalloc++;
    return malloc(len);
}

static void t_free(backend *b, void *p)
{
    (void)b;
    if (on_main())
        t_free_on_loop++;
    else
        t_free_off_loop++;
    t_nfree++;
    free(p);
}

static const backend_ops thread_ops = {
    .name = "fake", .host_thread_init = t_thread_init, .host_alloc = t_alloc, .host_free = t_free};

static void t_wake(void *arg)
{
    (void)arg;
    t_wakes++;
}

typedef struct tpool {
    uv_loop_t loop;
    backend b;
    pinner pin;
    staging st;
} tpool;

static void tpool_init(tpool *t, uint64_t total)
{
    memset(t, 0, sizeof *t);
    main_thread = uv_thread_self();
    t_alloc_off_loop = t_alloc_on_loop = t_free_off_loop = t_free_on_loop = 0;
    t_nalloc = t_nfree = t_fail = t_wakes = 0;
    ck_assert_int_eq(uv_loop_init(&t->loop), 0);
    t->b.ops = &thread_ops;
    t->b.loop = &t->loop;
    char why[160] = "";
    ck_assert_int_eq(pinner_init(&t->pin, &t->loop, &t->b, why, sizeof why), 0);
    ck_assert(pinner_on(&t->pin));
    staging_init(&t->st, &t->b, total);
    staging_set_pinner(&t->st, &t->pin, t_wake, NULL);
}

/* Run the loop until the pinner has nothing in flight (5 s at most). */
static void tpool_settle(tpool *t)
{
    for (int i = 0; i < 5000 && t->pin.pending; i++) {
        (void)uv_run(&t->loop, UV_RUN_NOWAIT);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    ck_assert_uint_eq(t->pin.pending, 0);
}

static void tpool_fini(tpool *t)
{
    staging_destroy(&t->st);
    pinner_close(&t->pin);
    ck_assert_uint_eq(t->pin.pending, 0);
    ck_assert_int_eq(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&t->loop), 0);
    ck_assert_int_eq(t_nalloc, t_nfree);
    ck_assert_int_eq(t_alloc_on_loop, 0);
    ck_assert_int_eq(t_free_on_loop, 0);
}

START_TEST(grow_on_the_pinning_thread)
{
    tpool t;
    tpool_init(&t, 256 * MIB);
    uint64_t used = 0, ticket = 0;
    staging_slot *a = NULL, *big = NULL;
    /* a small class: a chunk is grown, the caller waits */
    ck_assert_int_eq(staging_reserve_wait(&t.st, 64 * 1024, &used, 256 * MIB, &ticket, &a),
                     GPUQ_E_BUSY);
    ck_assert_uint_ne(ticket, 0);
    ck_assert_uint_eq(used, 0);
    ck_assert_uint_eq(t.st.capacity, 0);
    ck_assert_uint_eq(t.st.growing, 16 * MIB);
    ck_assert_int_eq(t_wakes, 0);
    tpool_settle(&t);
    ck_assert_int_eq(t_wakes, 1);
    ck_assert_int_eq(t_alloc_off_loop, 1);
    ck_assert_uint_eq(t.st.capacity, 16 * MIB);
    ck_assert_int_eq(staging_reserve_wait(&t.st, 64 * 1024, &used, 256 * MIB, &ticket, &a), 0);
    ck_assert_uint_eq(ticket, 0);
    memset(a->ptr, 1, a->size);
    /* a stand-alone slot: another grow, joined by a second try */
    uint64_t t2 = 0;
    ck_assert_int_eq(staging_reserve_wait(&t.st, 3 * MIB, &used, 256 * MIB, &t2, &big),
                     GPUQ_E_BUSY);
    uint64_t first = t2;
    ck_assert_int_eq(staging_reserve_wait(&t.st, 3 * MIB, &used, 256 * MIB, &t2, &big),
                     GPUQ_E_BUSY);
    ck_assert_uint_eq(t2, first); /* the same grow, not a second one */
    tpool_settle(&t);
    ck_assert_int_eq(t_alloc_off_loop, 2);
    ck_assert_int_eq(staging_reserve_wait(&t.st, 3 * MIB, &used, 256 * MIB, &t2, &big), 0);
    memset(big->ptr, 2, big->size);
    /* given back: accounted at once, freed on the pinning thread */
    staging_release(&t.st, big, &used);
    staging_release(&t.st, a, &used);
    ck_assert_uint_eq(used, 0);
    uint64_t cap = t.st.capacity;
    ck_assert_uint_eq(staging_release_idle(&t.st, 0), cap);
    ck_assert_uint_eq(t.st.capacity, 0);
    tpool_settle(&t);
    ck_assert_int_eq(t_free_off_loop, 2);
    ck_assert_int_eq(t_free_on_loop, 0);
    tpool_fini(&t);
}
END_TEST

START_TEST(grow_fails_then_recovers)
{
    tpool t;
    tpool_init(&t, 256 * MIB);
    uint64_t used = 0, ticket = 0;
    staging_slot *a = NULL;
    t_fail = 1;
    ck_assert_int_eq(staging_reserve_wait(&t.st, 2 * MIB, &used, 256 * MIB, &ticket, &a),
                     GPUQ_E_BUSY);
    tpool_settle(&t);
    ck_assert_int_eq(t_wakes, 1); /* a failure wakes the waiter too */
    ck_assert_int_eq(staging_reserve_wait(&t.st, 2 * MIB, &used, 256 * MIB, &ticket, &a),
                     GPUQ_E_NO_MEMORY);
    ck_assert_uint_eq(ticket, 0);
    ck_assert_ptr_nonnull(strstr(staging_fail_msg(&t.st), "could not allocate 2097152 bytes"));
    ck_assert_uint_eq(t.st.grow_failures, 1);
    ck_assert_uint_eq(t.st.growing, 0);
    ck_assert_uint_eq(used, 0);
    ck_assert_uint_eq(t.st.in_use, 0);
    /* the failure does not stick: the next reservation grows again */
    t_fail = 0;
    ck_assert_int_eq(staging_reserve_wait(&t.st, 2 * MIB, &used, 256 * MIB, &ticket, &a),
                     GPUQ_E_BUSY);
    tpool_settle(&t);
    ck_assert_int_eq(staging_reserve_wait(&t.st, 2 * MIB, &used, 256 * MIB, &ticket, &a), 0);
    ck_assert_uint_eq(used, 2 * MIB);
    staging_release(&t.st, a, &used);
    tpool_fini(&t);
}
END_TEST

START_TEST(grow_ahead_under_low_water)
{
    tpool t;
    tpool_init(&t, 256 * MIB);
    uint64_t used = 0, ticket = 0;
    staging_slot *s[16];
    ck_assert_int_eq(staging_reserve_wait(&t.st, MIB, &used, 256 * MIB, &ticket, &s[0]),
                     GPUQ_E_BUSY);
    tpool_settle(&t);
    int n = 0;
    /* 1 MiB slots until the chunk's free room is under the mark */
    while (16 * MIB - (uint64_t)(n + 1) * MIB >= STAGING_LOW_WATER) {
        ck_assert_int_eq(staging_reserve_wait(&t.st, MIB, &used, 256 * MIB, &ticket, &s[n]), 0);
        n++;
        ck_assert_uint_eq(t.st.grows_ahead, 0);
    }
    ck_assert_int_eq(staging_reserve_wait(&t.st, MIB, &used, 256 * MIB, &ticket, &s[n]), 0);
    n++;
    ck_assert_uint_eq(t.st.grows_ahead, 1);
    ck_assert_uint_eq(t.st.growing, 16 * MIB);
    tpool_settle(&t);
    ck_assert_uint_eq(t.st.capacity, 32 * MIB);
    /* the rest comes without waiting */
    while (n < 16) {
        ck_assert_int_eq(staging_reserve_wait(&t.st, MIB, &used, 256 * MIB, &ticket, &s[n]), 0);
        n++;
    }
    for (int i = 0; i < n; i++)
        staging_release(&t.st, s[i], &used);
    tpool_fini(&t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("staging");
    TCase *tc = tcase_create("staging");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, lower_then_raise);
    tcase_add_test(tc, headroom_for_newcomers);
    tcase_add_test(tc, release_idle);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("pinner");
    tcase_set_timeout(tp, 30);
    tcase_add_test(tp, grow_on_the_pinning_thread);
    tcase_add_test(tp, grow_fails_then_recovers);
    tcase_add_test(tp, grow_ahead_under_low_water);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
