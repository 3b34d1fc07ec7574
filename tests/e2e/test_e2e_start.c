/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_start.c - gpuqd's first log line says which backend runs and, for
 * the CPU backend under --device auto, why in plain words: "no NVIDIA
 * driver: using the CPU backend" on a machine without a driver (the CUDA
 * runtime's own wording, "CUDA driver version is insufficient for CUDA
 * runtime version", misleads there), "built without CUDA: ..." for a build
 * without it. --device cuda without a driver fails (exit 2) saying so.
 *
 * Whether a driver is here is decided the way gpuqd decides it, by loading
 * libcuda.so.1; with a driver present the no-driver lines cannot be checked
 * here and say so (the line must still not be the runtime's wording). */
#include <check.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#ifdef GPUQ_HAVE_CUDA
static bool driver_present(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return false;
    dlclose(h);
    return true;
}
#endif

/* The first line gpuqd logged ("<N>..."), in a static buffer. */
static const char *first_log_line(const char *path)
{
    static char line[512];
    size_t len = 0;
    char *log = tu_read_file(path, &len);
    ck_assert_ptr_nonnull(log);
    const char *p = log;
    while (*p && *p != '<') { /* a wrapper's banner (GPUQ_TEST_DAEMON_WRAPPER) */
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : p + strlen(p);
    }
    size_t n = strcspn(p, "\n");
    ck_assert_msg(n > 0 && n < sizeof line, "no log line in:\n%s", log);
    memcpy(line, p, n);
    line[n] = '\0';
    free(log);
    return line;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

START_TEST(auto_says_why_cpu)
{
    tu_daemon d;
    tu_daemon_start(&d, "auto", NULL);
    const char *line = first_log_line(d.log);
    printf("first log line: %s\n", line);
    ck_assert_msg(!strstr(line, "insufficient") && !strstr(line, "Insufficient"),
                  "the CUDA runtime's wording: %s", line);
    ck_assert_msg(strncmp(line, "<6>gpuqd ", 9) == 0, "not an info line of gpuqd: %s", line);
#ifdef GPUQ_HAVE_CUDA
    if (driver_present()) {
        printf("auto_says_why_cpu: a driver (libcuda.so.1) is here: the no-driver line "
               "cannot be checked on this machine\n");
        ck_assert_msg(strstr(line, "backend cuda (auto: CUDA device found)") ||
                          ends_with(line, ": using the CPU backend"),
                      "%s", line);
    } else {
        ck_assert_msg(ends_with(line, ": no NVIDIA driver: using the CPU backend"), "%s", line);
    }
#else
    ck_assert_msg(ends_with(line, ": built without CUDA: using the CPU backend"), "%s", line);
#endif
    ck_assert_int_eq(tu_daemon_stop(&d), 0);
}
END_TEST

START_TEST(cuda_without_driver_fails_plainly)
{
#ifdef GPUQ_HAVE_CUDA
    if (driver_present()) {
        printf("cuda_without_driver_fails_plainly: a driver (libcuda.so.1) is here: "
               "not applicable on this machine\n");
        return;
    }
    const char *want = "<3>gpuqd: --device cuda: no NVIDIA driver (libcuda.so.1 not found); "
                       "--device auto would use the CPU backend";
#else
    const char *want = "<3>gpuqd: --device cuda: gpuqd was built without CUDA";
#endif
    char dir[256], sock[300], err[300];
    tu_tmpdir(dir, sizeof dir);
    snprintf(sock, sizeof sock, "%s/s.sock", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    const char *argv[] = {GPUQD_PATH, "--device", "cuda", "--socket", sock, NULL};
    ck_assert_int_eq(tu_run(argv, NULL, err), 2);
    ck_assert_str_eq(first_log_line(err), want);
    ck_assert_int_ne(access(sock, F_OK), 0); /* never bound */
    tu_rmtree(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_start");
    TCase *tc = tcase_create("first log line");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, auto_says_why_cpu);
    tcase_add_test(tc, cuda_without_driver_fails_plainly);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
