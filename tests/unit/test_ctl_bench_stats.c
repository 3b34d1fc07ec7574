/* SPDX-License-Identifier: Apache-2.0 */
/* test_ctl_bench_stats.c - gpuqctl bench's latency statistics
 * (client/cli/ctl_bench_stats.c) on their own: exact nearest-rank percentiles
 * of samples given in any order, several sets merged as one, nothing given
 * (NaN), a set past its cap (a uniform reservoir, count and max exact), and
 * a reservoir weighted by the latencies it stands for when merged with an
 * exact set. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "ctl_bench_stats.h"
#include "testutil.h"

/* 1 .. n in a shuffled order into s. */
static void add_shuffled(bench_samples *s, unsigned lo, unsigned n, unsigned seed)
{
    unsigned *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (unsigned i = 0; i < n; i++)
        v[i] = lo + i;
    srand(seed);
    for (unsigned i = n - 1; i > 0; i--) {
        unsigned j = (unsigned)rand() % (i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    for (unsigned i = 0; i < n; i++)
        bench_samples_add(s, v[i]);
    free(v);
}

START_TEST(exact_ranks)
{
    bench_samples s;
    bench_samples_init(&s, 1u << 20, 1);
    add_shuffled(&s, 1, 1000, 7);
    bench_pct p;
    ck_assert_int_eq(bench_percentiles(&s, 1, &p), 0);
    ck_assert(p.p50 == 500 && p.p90 == 900 && p.p99 == 990 && p.p999 == 999);
    ck_assert(p.max == 1000 && fabs(p.mean - 500.5) < 1e-9);
    ck_assert_uint_eq(s.count, 1000);
    bench_samples_free(&s);
    /* one sample: every rank is it */
    bench_samples_init(&s, 10, 1);
    bench_samples_add(&s, 42);
    ck_assert_int_eq(bench_percentiles(&s, 1, &p), 0);
    ck_assert(p.p50 == 42 && p.p999 == 42 && p.max == 42 && p.mean == 42);
    bench_samples_free(&s);
}
END_TEST

START_TEST(sets_merged)
{
    bench_samples s[3];
    bench_samples_init(&s[0], 1u << 20, 1);
    bench_samples_init(&s[1], 1u << 20, 2);
    bench_samples_init(&s[2], 1u << 20, 3); /* empty: weighs nothing */
    add_shuffled(&s[0], 901, 100, 1);
    add_shuffled(&s[1], 1, 900, 2);
    bench_pct p;
    ck_assert_int_eq(bench_percentiles(s, 3, &p), 0);
    ck_assert(p.p50 == 500 && p.p90 == 900 && p.p99 == 990 && p.p999 == 999 && p.max == 1000);
    for (int k = 0; k < 3; k++)
        bench_samples_free(&s[k]);
}
END_TEST

START_TEST(nothing_given)
{
    bench_samples s;
    bench_samples_init(&s, 100, 1);
    bench_pct p;
    ck_assert_int_eq(bench_percentiles(&s, 1, &p), 0);
    ck_assert(isnan(p.p50) && isnan(p.p90) && isnan(p.p99) && isnan(p.p999));
    ck_assert(isnan(p.max) && isnan(p.mean));
    ck_assert_int_eq(bench_percentiles(NULL, 0, &p), 0);
    ck_assert(isnan(p.p50) && isnan(p.max));
}
END_TEST

/* Past its cap a set keeps cap samples, uniform over all it was given
 * (given in increasing order: a reservoir that kept the first or the last
 * would be far off). */
START_TEST(reservoir_uniform)
{
    bench_samples s;
    bench_samples_init(&s, 2000, 5);
    for (unsigned i = 1; i <= 200000; i++)
        bench_samples_add(&s, i);
    ck_assert_uint_eq(s.n, 2000);
    ck_assert_uint_eq(s.count, 200000);
    bench_pct p;
    ck_assert_int_eq(bench_percentiles(&s, 1, &p), 0);
    ck_assert(p.max == 200000);
    ck_assert_msg(fabs(p.p50 - 100000) < 8000 && fabs(p.p90 - 180000) < 6000, "p50 %g p90 %g",
                  p.p50, p.p90);
    ck_assert_msg(fabs(p.mean - 100000) < 6000, "mean %g", p.mean);
    bench_samples_free(&s);
}
END_TEST

/* A reservoir of 100000 latencies of 10 us (1000 stored) and 1000 exact
 * latencies of 1000 us: the slow ones are 1 % of the replies, so p90 and
 * p99 are 10 and p99.9 is 1000; unweighted (1000 against 1000) p90 would
 * be 1000. */
START_TEST(reservoir_weighted)
{
    bench_samples s[2];
    bench_samples_init(&s[0], 1000, 1);
    bench_samples_init(&s[1], 1u << 20, 2);
    for (int i = 0; i < 100000; i++)
        bench_samples_add(&s[0], 10);
    for (int i = 0; i < 1000; i++)
        bench_samples_add(&s[1], 1000);
    ck_assert_uint_eq(s[0].n, 1000);
    bench_pct p;
    ck_assert_int_eq(bench_percentiles(s, 2, &p), 0);
    ck_assert_msg(p.p50 == 10 && p.p90 == 10 && p.p99 == 10 && p.p999 == 1000, "%g %g %g %g", p.p50,
                  p.p90, p.p99, p.p999);
    ck_assert(fabs(p.mean - (10.0 * 100000 + 1000.0 * 1000) / 101000) < 1e-6);
    bench_samples_free(&s[0]);
    bench_samples_free(&s[1]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ctl_bench_stats");
    TCase *tc = tcase_create("stats");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, exact_ranks);
    tcase_add_test(tc, sets_merged);
    tcase_add_test(tc, nothing_given);
    tcase_add_test(tc, reservoir_uniform);
    tcase_add_test(tc, reservoir_weighted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
