/* SPDX-License-Identifier: Apache-2.0 */
/* test_staging.c - staging_set_capacity (config reload): lowering the total
 * limit frees only unused memory, in-use slots stay valid, new reservations
 * wait (busy) or can never fit (too large); raising it lets them in again.
 * The headroom kept for newcomers, and memory given back when idle.
 * A fake backend counts host allocations. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

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

static Suite *suite(void)
{
    Suite *s = suite_create("staging");
    TCase *tc = tcase_create("staging");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, lower_then_raise);
    tcase_add_test(tc, headroom_for_newcomers);
    tcase_add_test(tc, release_idle);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
