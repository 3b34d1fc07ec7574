/* SPDX-License-Identifier: Apache-2.0 */
/* metric_math.h - the scalar pieces of the chebyshev and minkowski metrics,
 * shared by the CPU reference (cpu_ref.c) and the CUDA kernels
 * (pairwise.cu, knn.cu), so that both backends compute the same terms and
 * the same root.
 *
 * Happy path: a distance accumulates mm_max(acc, |x_k - y_k|) (chebyshev)
 * or acc + mm_term(|x_k - y_k|, p) (minkowski, p > 0) in double, from
 * acc = 0, and minkowski finishes with mm_root(acc, p). No failure: NaN and
 * Inf follow IEEE (a NaN coordinate makes the distance NaN, an infinite one
 * +inf).
 *
 * mm_root takes the p-th root without pow(s, 1 / p): the rounding of 1 / p
 * is multiplied by |ln s| there (up to 745 units of the last place for a
 * sum far from 1: scipy's formula). s = f 2^e (f in [0.5, 1)) instead
 * gives s^(1/p) = 2^(e/p) f^(1/p) with e/p carried as two doubles (the low
 * part exact by an FMA) and f's root within 1 + 0.7 / p units: within
 * (6 + 1 / p) units of the last place whatever s is. p = 1 and p = 2 are
 * exact or correctly rounded (s itself, sqrt). p below 0.001 (1 / p above
 * 1000, where f^(1/p) could underflow) takes pow(s, 1 / p), and so do the
 * sums 0, NaN and +inf (which that maps to themselves).
 */
#ifndef GPUQ_METRIC_MATH_H
#define GPUQ_METRIC_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define MM_FN static __host__ __device__ __forceinline__
#else
#define MM_FN static inline
#endif

/* max(a, b) for b >= 0 or NaN, NaN once either is NaN (fmax drops NaN). */
MM_FN double mm_max(double a, double b)
{
    return (a != a || b <= a) ? a : b;
}

/* One minkowski term: t^p for t = |x_k - y_k| >= 0 (or NaN), p > 0. */
MM_FN double mm_term(double t, double p)
{
    if (p == 2.0)
        return t * t;
    if (p == 1.0)
        return t;
    return pow(t, p);
}

/* The p-th root of a minkowski sum s >= 0 (p > 0, finite). */
MM_FN double mm_root(double s, double p)
{
    if (p == 1.0)
        return s;
    if (p == 2.0)
        return sqrt(s);
    const double q = 1.0 / p;
    if (!(s > 0.0) || isinf(s) || !(q <= 1000.0))
        return pow(s, q);
    int e = 0; /* frexp sets it; initialised for gcc -O2's maybe-uninitialized */
    const double f = frexp(s, &e);
    const double th = (double)e / p;
    const double tl = fma(-th, p, (double)e) / p; /* e/p = th + tl, to about u^2 */
    /* th = ti + (th - ti), ti = floor(th): 2^(th - ti) f^(1/p) lies in
     * [2^-1000, 2), so only ldexp may overflow or underflow, rounding once
     * (ti clamped: beyond +-2200 the result is +inf or 0 either way) */
    double ti = floor(th);
    const double r = exp2(th - ti) * fma(tl, 0.69314718055994530942, 1.0) * pow(f, q);
    ti = ti > 2200.0 ? 2200.0 : ti < -2200.0 ? -2200.0 : ti;
    return ldexp(r, (int)ti);
}

#endif
