/* SPDX-License-Identifier: Apache-2.0 */
/* test_cpu_flat.c - one long row normalized in pieces (gpuq_kernels.h:
 * gpuq_cpu_normalize_flat_*), the CPU backend's path for a large 1-D or
 * flat normalize on several threads.
 *
 * Against gpuq_cpu_normalize, which test_cpu_ref.c checks against exact
 * results: on the inputs that plain sums get wrong (testutil's kinds), every
 * method and dtype, pieces of several sizes (one piece, a ragged last one),
 * each element within twice the exact bound (both sides are within it),
 * minmax bit for bit, and the same code where the whole row fails (a sum
 * out of the dtype's range). The pieces reduced in any order give the same
 * bits (the merge is in piece order). The extreme rows (sums out of
 * double's range) repeated over many pieces give the short row's results
 * scaled by the repeat count. A zero or constant row is GPUQ_K_E_ZERO, or
 * zeros / NaN with on_zero; NaN propagates; bad arguments are GPUQ_K_E_ARG.
 */
#include "gpuq_kernels.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ELEM_TOL64 2e-15 /* as test_cpu_ref.c: the exact result rounded once, a few ulp */
#define ELEM_TOL32 6.0e-8

static const int dts[2] = {GPUQ_K_F32, GPUQ_K_F64};
static const uint64_t pieces[] = {1000, 4096, 1 << 20}; /* ragged, ragged, one piece */
enum { FLAT_N = 7013 };

static size_t dt_size(int dt)
{
    return dt == GPUQ_K_F32 ? 4 : 8;
}

static double at(int dt, const void *a, uint64_t i)
{
    return dt == GPUQ_K_F32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
}

/* x as the dtype (malloc'd) */
static void *as_dt(int dt, const double *x, uint64_t n)
{
    void *v = malloc(n * dt_size(dt));
    ck_assert_ptr_nonnull(v);
    for (uint64_t i = 0; i < n; i++) {
        if (dt == GPUQ_K_F32)
            ((float *)v)[i] = (float)x[i];
        else
            ((double *)v)[i] = x[i];
    }
    return v;
}

/* The flat path over in[0..n): the pieces of each pass reduced in reverse
 * order when rev, then every value scaled in two ranges (the split inside a
 * piece). Returns the first failing code. */
static int flat_run(int dt, int method, int zero_ok, const void *in, void *out, uint64_t n,
                    uint64_t piece, int rev)
{
    uint64_t bytes = gpuq_cpu_normalize_flat_scratch_bytes(n, piece);
    ck_assert_uint_gt(bytes, 0);
    void *scratch = malloc(bytes);
    ck_assert_ptr_nonnull(scratch);
    uint64_t np = (n + piece - 1) / piece;
    int more = 1, rc = GPUQ_K_OK;
    for (int pass = 0; more && rc == GPUQ_K_OK; pass++) {
        for (uint64_t i = 0; i < np; i++)
            ck_assert_int_eq(gpuq_cpu_normalize_flat_reduce(dt, method, pass, in, n, piece,
                                                            rev ? np - 1 - i : i, scratch),
                             GPUQ_K_OK);
        rc = gpuq_cpu_normalize_flat_finish(dt, method, zero_ok, pass, n, piece, scratch, &more);
        ck_assert_int_le(pass, 1);
    }
    uint64_t mid = n / 3;
    if (rc == GPUQ_K_OK)
        rc = gpuq_cpu_normalize_flat_scale(dt, in, out, n, 0, mid, scratch);
    if (rc == GPUQ_K_OK)
        rc = gpuq_cpu_normalize_flat_scale(dt, in, out, n, mid, n - mid, scratch);
    free(scratch);
    return rc;
}

/* _i: method x dtype x kind x piece size */
START_TEST(flat_vs_whole)
{
    int method = _i % 5, dt = dts[(_i / 5) % 2], kind = (_i / 10) % TU_NORM_KINDS;
    uint64_t piece = pieces[_i / (10 * TU_NORM_KINDS)], n = FLAT_N;
    double *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_norm_fill(kind, dt == GPUQ_K_F32, x, 1, n);
    void *in = as_dt(dt, x, n), *whole = malloc(n * dt_size(dt)), *fwd = malloc(n * dt_size(dt)),
         *rev = malloc(n * dt_size(dt));
    ck_assert(whole && fwd && rev);
    int want = gpuq_cpu_normalize(dt, method, 0, in, whole, 1, n);
    int got = flat_run(dt, method, 0, in, fwd, n, piece, 0);
    ck_assert_msg(got == want, "method %d %s of %s, piece %llu: code %d, the whole row's %d",
                  method, dt == GPUQ_K_F32 ? "f32" : "f64", tu_norm_kind_names[kind],
                  (unsigned long long)piece, got, want);
    ck_assert_int_eq(flat_run(dt, method, 0, in, rev, n, piece, 1), want);
    if (want == GPUQ_K_OK) {
        ck_assert_msg(memcmp(fwd, rev, n * dt_size(dt)) == 0, "the order of the pieces shows");
        if (method == GPUQ_K_MINMAX)
            ck_assert(memcmp(fwd, whole, n * dt_size(dt)) == 0);
        double tol = 2 * (dt == GPUQ_K_F32 ? ELEM_TOL32 : ELEM_TOL64);
        double floor = dt == GPUQ_K_F32 ? 0x1p-126 : 0x1p-1022;
        uint64_t j = 0;
        for (; j < n; j++) {
            double a = at(dt, fwd, j), b = at(dt, whole, j);
            if (!(fabs(a - b) <= tol * fmax(fabs(b), floor)))
                break;
        }
        ck_assert_msg(j == n, "method %d %s of %s, piece %llu: [%llu] = %.17g, whole row %.17g",
                      method, dt == GPUQ_K_F32 ? "f32" : "f64", tu_norm_kind_names[kind],
                      (unsigned long long)piece, (unsigned long long)j, j < n ? at(dt, fwd, j) : 0,
                      j < n ? at(dt, whole, j) : 0);
    }
    free(x), free(in), free(whole), free(fwd), free(rev);
}
END_TEST

/* The extreme rows spread over 12 pieces: each copy's result is the short
 * row's over the repeat count (sum, l1), its square root (l2), or as is. */
START_TEST(flat_extremes)
{
    int dt = tu_norm_extremes[_i].dt, method = tu_norm_extremes[_i].method,
        n = tu_norm_extremes[_i].n;
    uint64_t rep = 3000, cols = rep * (uint64_t)n, piece = cols / 12 + 1;
    double *x = malloc(cols * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (uint64_t j = 0; j < cols; j++)
        x[j] = tu_norm_extremes[_i].x[j % (uint64_t)n];
    void *in = as_dt(dt, x, cols), *out = malloc(cols * dt_size(dt));
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(flat_run(dt, method, 0, in, out, cols, piece, 0), GPUQ_K_OK);
    double k = method == GPUQ_K_SUM || method == GPUQ_K_L1 ? (double)rep
               : method == GPUQ_K_L2                       ? sqrt((double)rep)
                                                           : 1.0;
    double tol = dt == GPUQ_K_F32 ? 0x1p-23 : 0x1p-50, want = 0.0;
    uint64_t j = 0;
    for (; j < cols; j++) {
        want = tu_norm_extremes[_i].want[j % (uint64_t)n] / k;
        if (dt == GPUQ_K_F32)
            want = tu_round_f32(want);
        double g = at(dt, out, j);
        if (!(fabs(g - want) <= tol * fabs(want) || fabs(g - want) < 0x1p-1060))
            break;
    }
    ck_assert_msg(j == cols, "case %d [%llu] = %.17g, want %.17g", _i, (unsigned long long)j,
                  j < cols ? at(dt, out, j) : 0.0, want);
    free(x), free(in), free(out);
}
END_TEST

/* A zero row (sum, l1, l2) or a constant one (minmax, zscore): the error,
 * or zeros or NaN with on_zero, as gpuq_cpu_normalize. */
START_TEST(flat_zero)
{
    enum { N = 5000 };
    for (int method = GPUQ_K_SUM; method <= GPUQ_K_ZSCORE; method++) {
        double *x = calloc(N, sizeof *x), *out = malloc(N * sizeof *out);
        ck_assert(x && out);
        if (method == GPUQ_K_MINMAX || method == GPUQ_K_ZSCORE)
            for (int j = 0; j < N; j++)
                x[j] = 3.25;
        ck_assert_int_eq(flat_run(GPUQ_K_F64, method, 0, x, out, N, 700, 0), GPUQ_K_E_ZERO);
        ck_assert_int_eq(flat_run(GPUQ_K_F64, method, GPUQ_K_ON_ZERO_ZERO, x, out, N, 700, 0),
                         GPUQ_K_OK);
        for (int j = 0; j < N; j++)
            ck_assert(out[j] == 0.0 && !signbit(out[j]));
        ck_assert_int_eq(flat_run(GPUQ_K_F64, method, GPUQ_K_ON_ZERO_NAN, x, out, N, 700, 0),
                         GPUQ_K_OK);
        for (int j = 0; j < N; j++)
            ck_assert(isnan(out[j]));
        free(x), free(out);
    }
}
END_TEST

/* A NaN in the last piece makes every output NaN; a value whose result
 * leaves float (a sum cancelled to 1e-39) is GPUQ_K_E_OVERFLOW, as the
 * whole row's. */
START_TEST(flat_nan_and_overflow)
{
    enum { N = 9001 };
    float *x = malloc(N * sizeof *x), *out = malloc(N * sizeof *out);
    ck_assert(x && out);
    for (int j = 0; j < N; j++)
        x[j] = 1.0f + (float)(j % 7);
    x[N - 2] = NAN;
    for (int method = GPUQ_K_SUM; method <= GPUQ_K_ZSCORE; method++) {
        ck_assert_int_eq(flat_run(GPUQ_K_F32, method, 0, x, out, N, 1000, 0), GPUQ_K_OK);
        for (int j = 0; j < N; j++)
            ck_assert(isnan(out[j]));
    }
    for (int j = 0; j + 1 < N; j++)
        x[j] = j % 2 ? -1.0f : 1.0f; /* N - 1 values: they cancel */
    x[N - 1] = 1e-39f;               /* the sum; 1 / 1e-39 > FLT_MAX */
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, 0, x, out, 1, N),
                     GPUQ_K_E_OVERFLOW);
    ck_assert_int_eq(flat_run(GPUQ_K_F32, GPUQ_K_SUM, 0, x, out, N, 1000, 0), GPUQ_K_E_OVERFLOW);
    free(x), free(out);
}
END_TEST

START_TEST(flat_bad_args)
{
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8], scratch[64];
    int more;
    ck_assert_uint_eq(gpuq_cpu_normalize_flat_scratch_bytes(0, 4), 0);
    ck_assert_uint_eq(gpuq_cpu_normalize_flat_scratch_bytes(8, 0), 0);
    ck_assert_uint_eq(gpuq_cpu_normalize_flat_scratch_bytes(UINT64_MAX, 1), 0);
    ck_assert_uint_le(gpuq_cpu_normalize_flat_scratch_bytes(8, 4), sizeof scratch);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_reduce(0, GPUQ_K_SUM, 0, x, 8, 4, 0, scratch),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_reduce(GPUQ_K_F64, 9, 0, x, 8, 4, 0, scratch),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_reduce(GPUQ_K_F64, GPUQ_K_SUM, 0, x, 8, 4, 2, scratch),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_reduce(GPUQ_K_F64, GPUQ_K_SUM, 1, x, 8, 4, 0, scratch),
                     GPUQ_K_E_ARG); /* a second pass is zscore's only */
    ck_assert_int_eq(
        gpuq_cpu_normalize_flat_reduce(GPUQ_K_F64, GPUQ_K_SUM, 0, NULL, 8, 4, 0, scratch),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_reduce(GPUQ_K_F64, GPUQ_K_SUM, 0, x, 8, 0, 0, scratch),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_normalize_flat_finish(GPUQ_K_F64, GPUQ_K_SUM, 0, 0, 8, 4, scratch, NULL),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_normalize_flat_finish(GPUQ_K_F64, GPUQ_K_SUM, 7, 0, 8, 4, scratch, &more),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_normalize_flat_finish(GPUQ_K_F64, GPUQ_K_L2, 0, 1, 8, 4, scratch, &more),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_scale(GPUQ_K_F64, x, out, 8, 5, 4, scratch),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_scale(GPUQ_K_F64, x, NULL, 8, 0, 4, scratch),
                     GPUQ_K_E_ARG);
    /* and the right calls work: sum of 1..8 is 36 */
    for (uint64_t p = 0; p < 2; p++)
        ck_assert_int_eq(
            gpuq_cpu_normalize_flat_reduce(GPUQ_K_F64, GPUQ_K_SUM, 0, x, 8, 4, p, scratch),
            GPUQ_K_OK);
    ck_assert_int_eq(
        gpuq_cpu_normalize_flat_finish(GPUQ_K_F64, GPUQ_K_SUM, 0, 0, 8, 4, scratch, &more),
        GPUQ_K_OK);
    ck_assert_int_eq(more, 0);
    ck_assert_int_eq(gpuq_cpu_normalize_flat_scale(GPUQ_K_F64, x, out, 8, 0, 8, scratch),
                     GPUQ_K_OK);
    for (int j = 0; j < 8; j++)
        ck_assert(out[j] == x[j] / 36.0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_flat");
    TCase *tc = tcase_create("flat");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, flat_vs_whole, 0,
                        (int)(10 * TU_NORM_KINDS * (sizeof pieces / sizeof pieces[0])));
    tcase_add_loop_test(tc, flat_extremes, 0, (int)tu_norm_n_extremes);
    tcase_add_test(tc, flat_zero);
    tcase_add_test(tc, flat_nan_and_overflow);
    tcase_add_test(tc, flat_bad_args);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
