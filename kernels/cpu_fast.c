/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_fast.c - pairwise distances for the CPU backend, in tiles of vector code.
 *
 * Happy path: x's rows in blocks of CF_XB (they stay in L2), y's in groups
 * of CF_NR (they stay in L1 while every pair of the block's rows meets
 * them); a tile of CF_MR x rows by CF_NR y rows keeps its CF_MR * CF_NR
 * accumulators in vector registers, each a vector of 4 doubles over k mod 4,
 * so one load of x and of y serves several pairs. float32 input is widened
 * to double as it is loaded; every operation is in double. The d % 4 last
 * coordinates go into a scalar sum, added after the lanes
 * ((l0 + l1) + (l2 + l3)) + tail. The edges (rows left over from the tiles)
 * run the same steps one pair at a time, so a pair's value never depends
 * on where its rows sit: a job split in blocks gets the whole run's values.
 * Cosine takes each row's sum of squares the same way (a pair of a row with
 * itself) and finishes as the reference, 1 - x.y / (sqrt(xx) sqrt(yy)).
 *
 * Failures: bad arguments (GPUQ_K_E_ARG, the reference's checks); a zero
 * vector under cosine without on_zero (GPUQ_K_E_ZERO, found when its row's
 * norm is taken; the output is then partly written and to be discarded).
 *
 * Portability: the vectors are GCC's generic vectors; this file's copy of
 * the body (cpu_fast_tile.h) is built for the x86-64 baseline (SSE2
 * halves), cpu_fast_avx2.c's for AVX2, picked at run time
 * (__builtin_cpu_supports), so the binary runs on any x86-64. Both do the
 * same operations in the same order and are compiled with
 * -ffp-contract=off (no fused multiply-add anywhere), so every CPU gives
 * the same bits.
 */
#include "cpu_fast.h"

#include "cpu_fast_avx2.h"

#define CF_ENTRY cf_run_any_base
#include "cpu_fast_tile.h"

/* The kind a metric accumulates; minkowski with p 1 or 2 sums exactly what
 * manhattan or sqeuclidean do (mm_term gives t and t * t there). */
static int cf_kind(int metric, double p)
{
    switch (metric) {
    case GPUQ_K_MANHATTAN:
        return CF_ABS;
    case GPUQ_K_COSINE:
        return CF_DOT;
    case GPUQ_K_CHEBYSHEV:
        return CF_MAX;
    case GPUQ_K_MINKOWSKI:
        return p == 1.0 ? CF_ABS : p == 2.0 ? CF_SQ : CF_POW;
    default:
        return CF_SQ;
    }
}

int gpuq_cpu_pairwise_fast(int dt, int metric, double p, int on_zero, const void *x, const void *y,
                           uint64_t m, uint64_t n, uint64_t d, void *out)
{
    if ((dt != GPUQ_K_F32 && dt != GPUQ_K_F64) || !gpuq_metric_args_ok(metric, p, on_zero) || !x ||
        !y || !out || m == 0 || n == 0 || d == 0 || m > UINT64_MAX / d || n > UINT64_MAX / d ||
        m > UINT64_MAX / n)
        return GPUQ_K_E_ARG;
    metric = gpuq_metric_resolve(metric, p);
    /* the AVX2 copy where the CPU has it: the same bits, twice the lanes per op */
    int (*run)(int, int, int, double, int, const void *, const void *, uint64_t, uint64_t, uint64_t,
               void *) = __builtin_cpu_supports("avx2") ? cf_run_any_avx2 : cf_run_any_base;
    return run(cf_kind(metric, p), dt == GPUQ_K_F32, metric, p, on_zero, x, y, m, n, d, out);
}
