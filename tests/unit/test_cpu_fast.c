/* SPDX-License-Identifier: Apache-2.0 */
/* test_cpu_fast.c - the CPU backend's tiled pairwise kernel (kernels/cpu_fast.c)
 * against a long double reference of this file's own.
 *
 * Sizes at every edge of the kernel's tiles and blocks (2 x rows by 4 y rows,
 * 32 x rows a block, 4 coordinates a vector step): m in 1, 2, 3, 31, 32, 33,
 * 65; n in 1, 3, 4, 5, 9; d in 1, 3, 4, 5, 7, 33; every metric (minkowski
 * p = 3, and p = 1 and 2, which take the manhattan and sqeuclidean sums),
 * float32 and float64, on U(-1, 1) rows with x's row 0 a copy of y's row 0
 * (euclidean, sqeuclidean, manhattan, chebyshev and minkowski give exactly
 * 0 there). Bounds (u = 2^-53), with the rounding to the dtype on top:
 * sums (d + 4) u relative (PROTOCOL.md), cosine (2d + 8) u absolute,
 * minkowski ((d + 2) / p + 7) u relative, chebyshev bit for bit. Then:
 * each row computed alone (m = 1, as a thread's block of one row gets it)
 * and y shifted by one row (its rows at other places in the tiles) give
 * the whole run's bits; cosine zero vectors in x or y are GPUQ_K_E_ZERO, 1
 * or NaN by on_zero, the other pairs untouched; NaN and inf coordinates;
 * bad arguments.
 */
#include "cpu_fast.h"
#include "gpuq_kernels.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U 0x1p-53
#define MAXM 65
#define MAXN 9
#define MAXD 33

static const uint64_t ms[] = {1, 2, 3, 31, 32, 33, 65};
static const uint64_t ns[] = {1, 3, 4, 5, 9};
static const uint64_t ds[] = {1, 3, 4, 5, 7, 33};

/* metric, p: the cases of the loop tests */
static const struct {
    int metric;
    double p;
} cases[] = {{GPUQ_K_EUCLIDEAN, 2}, {GPUQ_K_SQEUCLIDEAN, 2}, {GPUQ_K_COSINE, 2},
             {GPUQ_K_MANHATTAN, 2}, {GPUQ_K_CHEBYSHEV, 2},   {GPUQ_K_MINKOWSKI, 3},
             {GPUQ_K_MINKOWSKI, 1}, {GPUQ_K_MINKOWSKI, 2},   {GPUQ_K_MINKOWSKI, 1.5}};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static double at(const void *a, int f32, size_t i)
{
    return f32 ? (double)((const float *)a)[i] : ((const double *)a)[i];
}

static void put(void *a, int f32, size_t i, double v)
{
    if (f32)
        ((float *)a)[i] = (float)v;
    else
        ((double *)a)[i] = v;
}

/* The exact-ish distance of rows xi, yj (long double sums); chebyshev as
 * the kernel's double max of rounded differences (it is exact on those). */
static long double ref_dist(int metric, double p, const void *x, const void *y, int f32, uint64_t i,
                            uint64_t j, uint64_t d)
{
    long double s = 0, nx = 0, ny = 0;
    double mx = 0;
    for (uint64_t k = 0; k < d; k++) {
        long double a = at(x, f32, i * d + k), b = at(y, f32, j * d + k);
        long double t = fabsl(a - b);
        switch (metric) {
        case GPUQ_K_COSINE:
            s += a * b, nx += a * a, ny += b * b;
            break;
        case GPUQ_K_MANHATTAN:
            s += t;
            break;
        case GPUQ_K_CHEBYSHEV: {
            double td = fabs(at(x, f32, i * d + k) - at(y, f32, j * d + k));
            mx = td > mx || td != td ? td : mx;
            break;
        }
        case GPUQ_K_MINKOWSKI:
            s += powl(t, p);
            break;
        default:
            s += t * t;
        }
    }
    switch (metric) {
    case GPUQ_K_EUCLIDEAN:
        return sqrtl(s);
    case GPUQ_K_COSINE:
        return 1.0L - s / (sqrtl(nx) * sqrtl(ny));
    case GPUQ_K_CHEBYSHEV:
        return mx;
    case GPUQ_K_MINKOWSKI:
        return powl(s, 1.0L / p);
    default:
        return s;
    }
}

static double bound(int metric, double p, int f32, uint64_t d, long double ref)
{
    double r = fabs((double)ref), e;
    switch (metric) {
    case GPUQ_K_COSINE:
        e = (2.0 * (double)d + 8) * U;
        break;
    case GPUQ_K_CHEBYSHEV:
        e = 0;
        break;
    case GPUQ_K_MINKOWSKI:
        e = (((double)d + 2) / p + 7) * U * r;
        break;
    default:
        e = ((double)d + 4) * U * r;
    }
    return e + (f32 ? 0x1p-24 * r : 0.0);
}

typedef struct data {
    int f32;
    uint64_t m, n, d;
    void *x, *y, *out, *part;
} data;

static data make(int f32, uint64_t m, uint64_t n, uint64_t d)
{
    size_t es = f32 ? 4 : 8;
    data g = {.f32 = f32, .m = m, .n = n, .d = d};
    double *v = malloc((m + n) * d * sizeof *v);
    g.x = malloc(m * d * es), g.y = malloc(n * d * es);
    g.out = malloc(m * n * es), g.part = malloc(m * n * es);
    ck_assert(v && g.x && g.y && g.out && g.part);
    tu_rand_fill_f64(v, (m + n) * d, -1.0, 1.0);
    for (uint64_t k = 0; k < m * d; k++)
        put(g.x, f32, k, v[k]);
    for (uint64_t k = 0; k < n * d; k++)
        put(g.y, f32, k, v[m * d + k]);
    memcpy(g.x, g.y, d * es); /* x[0] == y[0] */
    free(v);
    return g;
}

static void drop(data *g)
{
    free(g->x), free(g->y), free(g->out), free(g->part);
}

/* _i: case * 2 + f32. Every size: the bound, exact zeros, and the bits of
 * one row at a time and of y shifted by a row. */
START_TEST(tiles_vs_reference)
{
    int metric = cases[_i / 2].metric, f32 = _i % 2;
    double p = cases[_i / 2].p;
    int dt = f32 ? GPUQ_K_F32 : GPUQ_K_F64;
    size_t es = f32 ? 4 : 8;
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (size_t c = 0; c < sizeof ds / sizeof ds[0]; c++) {
                uint64_t m = ms[a], n = ns[b], d = ds[c];
                data g = make(f32, m, n, d);
                ck_assert_int_eq(gpuq_cpu_pairwise_fast(dt, metric, p, 0, g.x, g.y, m, n, d, g.out),
                                 GPUQ_K_OK);
                int bad = 0;
                for (uint64_t i = 0; i < m && !bad; i++)
                    for (uint64_t j = 0; j < n && !bad; j++) {
                        long double ref = ref_dist(metric, p, g.x, g.y, f32, i, j, d);
                        double got = at(g.out, f32, i * n + j);
                        double want = f32 ? (double)(float)ref : (double)ref;
                        double e = fabs(got - (double)ref), lim = bound(metric, p, f32, d, ref);
                        if (metric == GPUQ_K_CHEBYSHEV ? got != want : !(e <= lim))
                            bad = 1;
                        if (i == 0 && j == 0 && metric != GPUQ_K_COSINE && got != 0.0)
                            bad = 1;
                        if (bad)
                            ck_abort_msg("metric %d p %g %s m %llu n %llu d %llu: d(%llu, %llu) = "
                                         "%.17g, want %.17Lg (error %.3g > %.3g)",
                                         metric, p, f32 ? "f32" : "f64", (unsigned long long)m,
                                         (unsigned long long)n, (unsigned long long)d,
                                         (unsigned long long)i, (unsigned long long)j, got, ref, e,
                                         lim);
                    }
                /* one row at a time: a block of one row in a threaded job */
                for (uint64_t i = 0; i < m; i++)
                    ck_assert_int_eq(gpuq_cpu_pairwise_fast(dt, metric, p, 0,
                                                            (char *)g.x + i * d * es, g.y, 1, n, d,
                                                            (char *)g.part + i * n * es),
                                     GPUQ_K_OK);
                ck_assert_msg(memcmp(g.part, g.out, m * n * es) == 0,
                              "m %llu n %llu d %llu: rows alone differ from the whole run",
                              (unsigned long long)m, (unsigned long long)n, (unsigned long long)d);
                /* y from its row 1: each y row at another place in the tiles */
                if (n > 1) {
                    ck_assert_int_eq(gpuq_cpu_pairwise_fast(dt, metric, p, 0, g.x,
                                                            (char *)g.y + d * es, m, n - 1, d,
                                                            g.part),
                                     GPUQ_K_OK);
                    for (uint64_t i = 0; i < m; i++)
                        ck_assert_msg(memcmp((char *)g.part + i * (n - 1) * es,
                                             (char *)g.out + (i * n + 1) * es, (n - 1) * es) == 0,
                                      "m %llu n %llu d %llu: y shifted by a row differs",
                                      (unsigned long long)m, (unsigned long long)n,
                                      (unsigned long long)d);
                }
                drop(&g);
            }
}
END_TEST

/* _i: 0 x's row 2 zero, 1 y's row 5 zero; each dtype, each on_zero. */
START_TEST(cosine_zero_vectors)
{
    const uint64_t m = 33, n = 9, d = 7;
    for (int f32 = 0; f32 < 2; f32++) {
        int dt = f32 ? GPUQ_K_F32 : GPUQ_K_F64;
        size_t es = f32 ? 4 : 8;
        data g = make(f32, m, n, d);
        uint64_t zr = _i == 0 ? 2 : 5;
        memset((char *)(_i == 0 ? g.x : g.y) + zr * d * es, 0, d * es);
        ck_assert_int_eq(gpuq_cpu_pairwise_fast(dt, GPUQ_K_COSINE, 2, GPUQ_K_ON_ZERO_ERROR, g.x,
                                                g.y, m, n, d, g.out),
                         GPUQ_K_E_ZERO);
        for (int oz = GPUQ_K_ON_ZERO_ZERO; oz <= GPUQ_K_ON_ZERO_NAN; oz++) {
            ck_assert_int_eq(
                gpuq_cpu_pairwise_fast(dt, GPUQ_K_COSINE, 2, oz, g.x, g.y, m, n, d, g.out),
                GPUQ_K_OK);
            for (uint64_t i = 0; i < m; i++)
                for (uint64_t j = 0; j < n; j++) {
                    double got = at(g.out, f32, i * n + j);
                    if ((_i == 0 && i == zr) || (_i == 1 && j == zr)) {
                        if (oz == GPUQ_K_ON_ZERO_NAN)
                            ck_assert_msg(isnan(got), "(%llu, %llu) = %g, want NaN",
                                          (unsigned long long)i, (unsigned long long)j, got);
                        else
                            ck_assert_msg(got == 1.0, "(%llu, %llu) = %g, want 1",
                                          (unsigned long long)i, (unsigned long long)j, got);
                    } else {
                        long double ref = ref_dist(GPUQ_K_COSINE, 2, g.x, g.y, f32, i, j, d);
                        ck_assert_msg(fabs(got - (double)ref) <=
                                          bound(GPUQ_K_COSINE, 2, f32, d, ref),
                                      "(%llu, %llu) = %.17g, want %.17Lg", (unsigned long long)i,
                                      (unsigned long long)j, got, ref);
                    }
                }
        }
        drop(&g);
    }
}
END_TEST

/* A NaN coordinate makes every metric NaN for its pairs; an inf one inf
 * (cosine NaN), also when the NaN comes after an inf in the same lane. */
START_TEST(nan_and_inf)
{
    const uint64_t m = 3, n = 5, d = 9;
    for (int c = 0; c < NCASES; c++)
        for (int f32 = 0; f32 < 2; f32++) {
            int dt = f32 ? GPUQ_K_F32 : GPUQ_K_F64;
            data g = make(f32, m, n, d);
            put(g.x, f32, 1 * d + 0, INFINITY); /* x row 1: inf at 0, NaN at 4 (same lane) */
            put(g.x, f32, 1 * d + 4, NAN);
            put(g.y, f32, 3 * d + 8, -INFINITY); /* y row 3: -inf in the tail */
            ck_assert_int_eq(gpuq_cpu_pairwise_fast(dt, cases[c].metric, cases[c].p, 0, g.x, g.y, m,
                                                    n, d, g.out),
                             GPUQ_K_OK);
            for (uint64_t j = 0; j < n; j++)
                ck_assert_msg(isnan(at(g.out, f32, 1 * n + j)), "case %d: (1, %llu) not NaN", c,
                              (unsigned long long)j);
            for (uint64_t i = 0; i < m; i += 2) {
                double v = at(g.out, f32, i * n + 3);
                if (cases[c].metric == GPUQ_K_COSINE)
                    ck_assert_msg(isnan(v), "case %d: cosine (%llu, 3) = %g", c,
                                  (unsigned long long)i, v);
                else
                    ck_assert_msg(isinf(v) && v > 0, "case %d: (%llu, 3) = %g, want inf", c,
                                  (unsigned long long)i, v);
            }
            drop(&g);
        }
}
END_TEST

START_TEST(bad_arguments)
{
    double x[4] = {1, 2, 3, 4}, o[4];
    ck_assert_int_eq(gpuq_cpu_pairwise_fast(7, GPUQ_K_EUCLIDEAN, 2, 0, x, x, 2, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_METRIC_COUNT, 2, 0, x, x, 2, 2, 2, o),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2, GPUQ_K_ON_ZERO_COUNT,
                                            x, x, 2, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_MINKOWSKI, NAN, 0, x, x, 2, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(
        gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2, 0, NULL, x, 2, 2, 2, o),
        GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2, 0, x, x, 0, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2, 0, x, x, 2, 2, 0, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2, 0, x, x, 1ull << 40,
                                            1ull << 40, 1ull << 40, o),
                     GPUQ_K_E_ARG);
    /* and a good call after them: 2 x 2 of [1 2] [3 4] */
    ck_assert_int_eq(gpuq_cpu_pairwise_fast(GPUQ_K_F64, GPUQ_K_SQEUCLIDEAN, 2, 0, x, x, 2, 2, 2, o),
                     GPUQ_K_OK);
    ck_assert(o[0] == 0 && o[1] == 8 && o[2] == 8 && o[3] == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_fast");
    TCase *tc = tcase_create("cpu_fast");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, tiles_vs_reference, 0, 2 * NCASES);
    tcase_add_loop_test(tc, cosine_zero_vectors, 0, 2);
    tcase_add_test(tc, nan_and_inf);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
