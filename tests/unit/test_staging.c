/* test_staging.c - staging_set_capacity (config reload): lowering the total
 * limit frees only unused memory, in-use slots stay valid, new reservations
 * wait (busy) or can never fit (too large); raising it lets them in again.
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

START_TEST(lower_then_raise)
{
    backend b;
    memset(&b, 0, sizeof b);
    b.ops = &fake_ops;
    nalloc = nfree = 0;
    staging st;
    staging_init(&st, &b, 8 * MIB);
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

static Suite *suite(void)
{
    Suite *s = suite_create("staging");
    TCase *tc = tcase_create("staging");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, lower_then_raise);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
