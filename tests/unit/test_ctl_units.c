/* SPDX-License-Identifier: Apache-2.0 */
/* test_ctl_units.c - gpuqctl's human units (client/cli/ctl_doc.c): times in
 * the unit that reads best with three significant digits (µs, ms, s, at
 * each boundary and where rounding crosses one; ns under 1 µs; huge times
 * bounded), rates with an SI prefix
 * (on the number for counts, on the unit for bytes), a slow rate never
 * shown as 0, and NaN or a negative value as "-". */
#include <check.h>
#include <math.h>

#include "ctl.h"
#include "testutil.h"

START_TEST(times)
{
    static const struct {
        double us;
        const char *want;
    } c[] = {
        {0, "0 \u00b5s"},
        {0.004, "4.00 ns"},
        {0.35, "350 ns"},
        {0.999, "999 ns"},
        {0.9994, "999 ns"},
        {0.9996, "1.00 \u00b5s"},
        {1, "1.00 \u00b5s"},
        {4.956, "4.96 \u00b5s"},
        {9.994, "9.99 \u00b5s"},
        {9.996, "10.0 \u00b5s"},
        {28.44, "28.4 \u00b5s"},
        {99.96, "100 \u00b5s"},
        {843.2, "843 \u00b5s"},
        {999.4, "999 \u00b5s"},
        {999.6, "1.00 ms"},
        {999.9, "1.00 ms"},
        {1250, "1.25 ms"},
        {12345, "12.3 ms"},
        {999400, "999 ms"},
        {999600, "1.00 s"},
        {7012345, "7.01 s"},
        {123456789, "123 s"},
        {86400e6, "86400 s"},
        {1e20, "1e+14 s"},
        {1e300, "1e+294 s"},
        {INFINITY, "-"},
        {NAN, "-"},
        {-1, "-"},
        {-0.001, "-"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char buf[32];
        ck_assert_str_eq(ctl_fmt_us(c[i].us, buf, sizeof buf), c[i].want);
    }
}
END_TEST

START_TEST(rates)
{
    static const struct {
        double v;
        const char *unit, *want;
    } c[] = {
        {0, "req/s", "0 req/s"},           {0.25, "req/s", "0.25 req/s"},
        {0.0123, "req/s", "0.0123 req/s"}, {1, "req/s", "1.00 req/s"},
        {843, "req/s", "843 req/s"},       {999.4, "req/s", "999 req/s"},
        {999.6, "req/s", "1.00k req/s"},   {12345, "req/s", "12.3k req/s"},
        {165432, "req/s", "165k req/s"},   {3.2e6, "req/s", "3.20M req/s"},
        {579e6, "B/s", "579 MB/s"},        {12.34e9, "B/s", "12.3 GB/s"},
        {512, "B/s", "512 B/s"},           {NAN, "req/s", "- req/s"},
        {0.42, "req/s", "0.42 req/s"},     {0.9949, "req/s", "0.995 req/s"},
        {0.996, "req/s", "1.00 req/s"},    {1.23e-5, "req/s", "0.0000123 req/s"},
        {1e-4, "req/s", "0.0001 req/s"},   {INFINITY, "req/s", "- req/s"},
        {-3, "req/s", "- req/s"},          {4e18, "req/s", "4000P req/s"},
        {1e300, "B/s", "1e+285 PB/s"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char buf[48];
        ck_assert_str_eq(ctl_fmt_rate(c[i].v, c[i].unit, buf, sizeof buf), c[i].want);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl_units");
    TCase *tc = tcase_create("units");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, times);
    tcase_add_test(tc, rates);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
