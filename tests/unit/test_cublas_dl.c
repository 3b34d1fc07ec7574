/* SPDX-License-Identifier: Apache-2.0 */
/* test_cublas_dl.c - cuBLAS loaded at run time (kernels/cublas_dl.cu).
 *
 * Needs no GPU: loading libcublas and resolving its symbols touches no
 * device. Each test runs in a forked child (CK_FORK forced on), so each
 * sees a process in which nothing was decided yet. Checks that libcublas is
 * not in the process before the first use (gpuqd starts without it), that
 * it loads when the toolkit's copy exists, that GPUQ_NO_CUBLAS keeps it out,
 * and that the reason fits any buffer.
 */
#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cublas_api.h>

#include "gpuq_kernels.h"
#include "testutil.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

static int cublas_in_process(void)
{
    void *h = dlopen(SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h != NULL;
}

/* The toolkit's copy exists, so loading must work (the build machine). */
static int toolkit_has_cublas(void)
{
    return access(GPUQ_CUDA_LIBDIR "/" SONAME, R_OK) == 0;
}

START_TEST(test_not_linked)
{
    ck_assert_msg(!cublas_in_process(), SONAME " is loaded before first use");
}
END_TEST

/* _i 0: GPUQ_NO_CUBLAS unset; 1: "0"; 2: "" (all mean: load). */
START_TEST(test_loads)
{
    if (_i == 0)
        unsetenv("GPUQ_NO_CUBLAS");
    else
        setenv("GPUQ_NO_CUBLAS", _i == 1 ? "0" : "", 1);
    char why[512] = "";
    int ok = gpuq_cuda_gemm_status(why, sizeof why);
    printf("test_cublas_dl: %d: %s\n", ok, why);
    if (!toolkit_has_cublas()) {
        printf("test_cublas_dl: no %s: not checking that it loads\n", GPUQ_CUDA_LIBDIR "/" SONAME);
        return;
    }
    ck_assert_msg(ok == 1, "not loaded: %s", why);
    ck_assert_msg(why[0] == '/' && strstr(why, SONAME), "path: '%s'", why);
    ck_assert(cublas_in_process());
    /* Decided once. */
    setenv("GPUQ_NO_CUBLAS", "1", 1);
    ck_assert_int_eq(gpuq_cuda_gemm_status(NULL, 0), 1);
}
END_TEST

START_TEST(test_switched_off)
{
    setenv("GPUQ_NO_CUBLAS", _i == 0 ? "1" : "yes", 1);
    char why[512] = "";
    ck_assert_int_eq(gpuq_cuda_gemm_status(why, sizeof why), 0);
    ck_assert_msg(strstr(why, "GPUQ_NO_CUBLAS"), "why: '%s'", why);
    ck_assert(!cublas_in_process());
    unsetenv("GPUQ_NO_CUBLAS");
    ck_assert_int_eq(gpuq_cuda_gemm_status(NULL, 0), 0);
    ck_assert(!cublas_in_process());
}
END_TEST

START_TEST(test_why_cap)
{
    char why[8];
    memset(why, 'x', sizeof why);
    int ok = gpuq_cuda_gemm_status(why, 1);
    ck_assert_int_eq(why[0], '\0');
    ck_assert_int_eq(why[1], 'x');
    ck_assert_int_eq(gpuq_cuda_gemm_status(why, sizeof why), ok);
    ck_assert_uint_le(strlen(why), sizeof why - 1);
    ck_assert_int_eq(gpuq_cuda_gemm_status(why, 0), ok);
}
END_TEST

static Suite *cublas_dl_suite(void)
{
    Suite *s = suite_create("cublas_dl");
    TCase *tc = tcase_create("load");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_not_linked);
    tcase_add_loop_test(tc, test_loads, 0, 3);
    tcase_add_loop_test(tc, test_switched_off, 0, 2);
    tcase_add_test(tc, test_why_cap);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* Each test needs a process that has not loaded (or refused) cuBLAS. */
    setenv("CK_FORK", "yes", 1);
    return tu_run_suite(cublas_dl_suite());
}
