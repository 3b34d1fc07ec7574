/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_fast_tile.h - the body of cpu_fast.c's kernel, included once per
 * instruction set: by cpu_fast.c (the x86-64 baseline) and by
 * cpu_fast_avx2.c (under #pragma GCC target("avx2")), each defining
 * CF_ENTRY, the name of its copy of cf_run_any. A target pragma has to
 * cover every function the vectors go through: GCC splits a vector too
 * wide for a function's own target before it inlines the function, so
 * target_clones on the caller alone would leave the SSE2 halves. No
 * include guard: meant to be included once per file.
 *
 * Tiles, blocks and the order of the operations: cpu_fast.c's opening
 * comment.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gpuq_kernels.h"
#include "metric_math.h"

#ifndef CF_ENTRY
#error "define CF_ENTRY before including cpu_fast_tile.h"
#endif

/* Every function here is static and always inlined into CF_ENTRY, so a
 * 32-byte vector never crosses a call boundary: clang's warning that such
 * a vector changes the ABI without AVX (the baseline copy) does not apply. */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpsabi"
#endif

typedef double cf_v4d __attribute__((vector_size(32)));
typedef int64_t cf_v4i __attribute__((vector_size(32)));

#define CF_INLINE static inline __attribute__((always_inline))
#define CF_MR 2  /* x rows of a tile */
#define CF_NR 4  /* y rows of a tile */
#define CF_XB 32 /* x rows of a cache block */

/* What a pair accumulates: sum of (x-y)^2, of |x-y|, of x*y, max |x-y|, or
 * sum of |x-y|^p (mm_term). */
enum { CF_SQ, CF_ABS, CF_DOT, CF_MAX, CF_POW };

/* (an element-wise vector, not __builtin_convertvector: GCC 12 widens
 * that in two halves, this in one vcvtps2pd) */
CF_INLINE cf_v4d cf_load4(const void *p, uint64_t k, int f32)
{
    if (f32) {
        const float *q = (const float *)p + k;
        return (cf_v4d){q[0], q[1], q[2], q[3]};
    }
    cf_v4d t;
    memcpy(&t, (const double *)p + k, sizeof t);
    return t;
}

CF_INLINE double cf_load1(const void *p, uint64_t k, int f32)
{
    return f32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

CF_INLINE cf_v4d cf_abs4(cf_v4d t)
{
    return (cf_v4d)((cf_v4i)t & INT64_MAX);
}

/* One step of 4 lanes. CF_MAX: |x-y| is >= 0 or a NaN with its sign bit
 * clear, and such doubles order as their bits do as int64 (NaN above
 * +inf), so an integer max keeps a NaN for good, as mm_max does. */
CF_INLINE cf_v4d cf_step4(int kind, double pw, cf_v4d a, cf_v4d x, cf_v4d y)
{
    switch (kind) {
    case CF_SQ: {
        cf_v4d t = x - y;
        return a + t * t;
    }
    case CF_ABS:
        return a + cf_abs4(x - y);
    case CF_DOT:
        return a + x * y;
    case CF_MAX: {
        cf_v4i ai = (cf_v4i)a, ti = (cf_v4i)cf_abs4(x - y);
        cf_v4i g = ti > ai;
        return (cf_v4d)((ai & ~g) | (ti & g));
    }
    default: {
        cf_v4d t = cf_abs4(x - y);
        for (int l = 0; l < 4; l++)
            a[l] += mm_term(t[l], pw);
        return a;
    }
    }
}

CF_INLINE double cf_step1(int kind, double pw, double a, double x, double y)
{
    switch (kind) {
    case CF_SQ: {
        double t = x - y;
        return a + t * t;
    }
    case CF_ABS:
        return a + fabs(x - y);
    case CF_DOT:
        return a + x * y;
    case CF_MAX:
        return mm_max(a, fabs(x - y));
    default:
        return a + mm_term(fabs(x - y), pw);
    }
}

CF_INLINE double cf_reduce(int kind, cf_v4d a, double tail)
{
    if (kind == CF_MAX)
        return mm_max(mm_max(mm_max(a[0], a[1]), mm_max(a[2], a[3])), tail);
    return ((a[0] + a[1]) + (a[2] + a[3])) + tail;
}

/* The accumulations of the MR x NR pairs of x's rows x, x + d, ... against
 * y's rows y, y + d, ... (element offsets) into acc[i][j]. */
#define CF_TILE(MR, NR)                                                                            \
    CF_INLINE void cf_tile_##MR##x##NR(int kind, int f32, double pw, const void *x, const void *y, \
                                       uint64_t d, double acc[CF_MR][CF_NR])                       \
    {                                                                                              \
        cf_v4d a[MR][NR];                                                                          \
        double s[MR][NR];                                                                          \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                       \
        {                                                                                          \
            _Pragma("GCC unroll 8") for (int j = 0; j < NR; j++)                                   \
            {                                                                                      \
                a[i][j] = (cf_v4d){0.0, 0.0, 0.0, 0.0};                                            \
                s[i][j] = 0.0;                                                                     \
            }                                                                                      \
        }                                                                                          \
        uint64_t k = 0;                                                                            \
        for (; k + 4 <= d; k += 4) {                                                               \
            cf_v4d xv[MR];                                                                         \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) xv[i] =                           \
                cf_load4(x, (uint64_t)i * d + k, f32);                                             \
            _Pragma("GCC unroll 8") for (int j = 0; j < NR; j++)                                   \
            {                                                                                      \
                cf_v4d yv = cf_load4(y, (uint64_t)j * d + k, f32);                                 \
                _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) a[i][j] =                     \
                    cf_step4(kind, pw, a[i][j], xv[i], yv);                                        \
            }                                                                                      \
        }                                                                                          \
        for (; k < d; k++)                                                                         \
            for (int i = 0; i < MR; i++)                                                           \
                for (int j = 0; j < NR; j++)                                                       \
                    s[i][j] = cf_step1(kind, pw, s[i][j], cf_load1(x, (uint64_t)i * d + k, f32),   \
                                       cf_load1(y, (uint64_t)j * d + k, f32));                     \
        for (int i = 0; i < MR; i++)                                                               \
            for (int j = 0; j < NR; j++)                                                           \
                acc[i][j] = cf_reduce(kind, a[i][j], s[i][j]);                                     \
    }

CF_TILE(2, 4)
CF_TILE(1, 1)
#undef CF_TILE

/* One distance from its accumulation (nx, ny: cosine's sqrt of the rows'
 * sums of squares, 0 for a zero vector), as the reference's pair_finish. */
CF_INLINE double cf_finish(int metric, double pw, int on_zero, double acc, double nx, double ny)
{
    switch (metric) {
    case GPUQ_K_EUCLIDEAN:
        return sqrt(acc);
    case GPUQ_K_MINKOWSKI:
        return mm_root(acc, pw);
    case GPUQ_K_COSINE:
        if (nx == 0.0 || ny == 0.0)
            return on_zero == GPUQ_K_ON_ZERO_NAN ? NAN : 1.0;
        return 1.0 - acc / (nx * ny);
    default:
        return acc;
    }
}

CF_INLINE const void *cf_row(int f32, const void *base, uint64_t r, uint64_t d)
{
    return f32 ? (const void *)((const float *)base + r * d)
               : (const void *)((const double *)base + r * d);
}

/* sqrt of row r's sum of squares; a zero one is GPUQ_K_E_ZERO without
 * on_zero. */
CF_INLINE int cf_norm(int f32, const void *base, uint64_t r, uint64_t d, int on_zero, double *nrm)
{
    double acc[CF_MR][CF_NR];
    const void *row = cf_row(f32, base, r, d);
    cf_tile_1x1(CF_DOT, f32, 0.0, row, row, d, acc);
    *nrm = sqrt(acc[0][0]);
    return acc[0][0] == 0.0 && !on_zero ? GPUQ_K_E_ZERO : GPUQ_K_OK;
}

CF_INLINE void cf_put(int f32, void *out, uint64_t at, double v)
{
    if (f32)
        ((float *)out)[at] = (float)v;
    else
        ((double *)out)[at] = v;
}

/* The whole run for one accumulation kind and dtype (both constants where
 * it is called, so every step inlines without a switch). */
CF_INLINE int cf_run(int kind, int f32, int metric, double pw, int on_zero, const void *x,
                     const void *y, uint64_t m, uint64_t n, uint64_t d, void *out)
{
    const int cos = metric == GPUQ_K_COSINE;
    double acc[CF_MR][CF_NR];
    double nx[CF_XB] = {0}, ny[CF_NR] = {0};
    int rc;
    for (uint64_t i0 = 0; i0 < m; i0 += CF_XB) {
        const uint64_t mb = m - i0 < CF_XB ? m - i0 : CF_XB;
        for (uint64_t i = 0; cos && i < mb; i++)
            if ((rc = cf_norm(f32, x, i0 + i, d, on_zero, &nx[i])) != GPUQ_K_OK)
                return rc;
        for (uint64_t j0 = 0; j0 < n; j0 += CF_NR) {
            const uint64_t nb = n - j0 < CF_NR ? n - j0 : CF_NR;
            for (uint64_t j = 0; cos && j < nb; j++)
                if ((rc = cf_norm(f32, y, j0 + j, d, on_zero, &ny[j])) != GPUQ_K_OK)
                    return rc;
            const void *yb = cf_row(f32, y, j0, d);
            uint64_t i = 0;
            for (; nb == CF_NR && i + CF_MR <= mb; i += CF_MR) {
                cf_tile_2x4(kind, f32, pw, cf_row(f32, x, i0 + i, d), yb, d, acc);
                for (int a = 0; a < CF_MR; a++)
                    for (int b = 0; b < CF_NR; b++)
                        cf_put(f32, out, (i0 + i + a) * n + j0 + b,
                               cf_finish(metric, pw, on_zero, acc[a][b], nx[i + a], ny[b]));
            }
            for (; i < mb; i++)
                for (uint64_t j = 0; j < nb; j++) {
                    cf_tile_1x1(kind, f32, pw, cf_row(f32, x, i0 + i, d), cf_row(f32, y, j0 + j, d),
                                d, acc);
                    cf_put(f32, out, (i0 + i) * n + j0 + j,
                           cf_finish(metric, pw, on_zero, acc[0][0], nx[i], ny[j]));
                }
        }
    }
    return GPUQ_K_OK;
}

#define CF_CASE(KIND)                                                                              \
    case KIND:                                                                                     \
        return f32 ? cf_run(KIND, 1, metric, p, on_zero, x, y, m, n, d, out)                       \
                   : cf_run(KIND, 0, metric, p, on_zero, x, y, m, n, d, out);

/* cf_run for a kind (CF_SQ ... CF_POW) and dtype known only at run time;
 * arguments checked by the caller. */
int CF_ENTRY(int kind, int f32, int metric, double p, int on_zero, const void *x, const void *y,
             uint64_t m, uint64_t n, uint64_t d, void *out);
int CF_ENTRY(int kind, int f32, int metric, double p, int on_zero, const void *x, const void *y,
             uint64_t m, uint64_t n, uint64_t d, void *out)
{
    switch (kind) {
        CF_CASE(CF_SQ)
        CF_CASE(CF_ABS)
        CF_CASE(CF_DOT)
        CF_CASE(CF_MAX)
    default:
        return f32 ? cf_run(CF_POW, 1, metric, p, on_zero, x, y, m, n, d, out)
                   : cf_run(CF_POW, 0, metric, p, on_zero, x, y, m, n, d, out);
    }
}
#undef CF_CASE
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
