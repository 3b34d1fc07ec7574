/* test_e2e_ctl.c - every gpuqctl form against a real gpuqd, checked against
 * numpy/scipy by tests/ref/ctl_check.py (which reports each failure). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "e2e_util.h"

START_TEST(every_form)
{
    const char *args[] = {GPUQCTL_PATH, e2e_d.socket, e2e_d.dir, NULL};
    char out[320];
    snprintf(out, sizeof out, "%s/ctl_check.log", e2e_d.dir);
    const char *argv[] = {
        GPUQ_PYTHON, GPUQ_TESTS_DIR "/ref/ctl_check.py", args[0], args[1], args[2], NULL};
    int rc = tu_run(argv, out, out);
    size_t len = 0;
    char *log = tu_read_file(out, &len);
    ck_assert_msg(rc == 0, "ctl_check.py failed (%d):\n%.*s", rc, (int)len, log ? log : "");
    free(log);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_ctl");
    TCase *tc = tcase_create("ctl");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_form);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
