/* SPDX-License-Identifier: Apache-2.0 */
/* norm_math.h - the numerics of normalize, shared by cpu_ref.c and normalize.cu.
 *
 * Why a header of its own: the CPU reference and the CUDA kernels must agree
 * on every rule that decides a result (bins, scaling, which denominator is
 * zero, which output overflows), and the CPU is what the GPU is tested
 * against. It is plain double arithmetic on small structs, compiled as C11 on
 * the host and as __host__ __device__ C++ by nvcc. No FMA is relied upon, and
 * nvcc's contractions do no harm: the products here are exact (powers of two)
 * or only feed a sum whose rounding error is not tracked anyway.
 *
 * How a row is reduced (every sum in double whatever the input dtype):
 *  - Each sum is a Neumaier (Kahan-Babuska) compensated sum, an nm_pair:
 *    s is the plain running sum, c collects the rounding errors s made.
 *    Partial sums (GPU threads, warps, blocks) merge through an exact TwoSum,
 *    so the error stays about u|S| + O(n u^2) sum|a| in any order
 *    (u = 2^-53).
 *  - float64 input goes into bins so that no sum overflows or underflows
 *    (Blue's nrm2, as in LAPACK 3.10): |a| > 2^480 is added scaled by
 *    2^-600, and for l2 |a| < 2^-511 (whose square would underflow) scaled by
 *    2^600; the rest as is. Power-of-two scaling is exact, so the bins cost
 *    no accuracy; only contributions far below u times the result are lost.
 *    float32 input needs no bins: its sums and squares stay in double's range.
 *  - zscore: pass 1 sums a (binned) and finds min and max; pass 2 sums d and
 *    d^2 for d = a*c - m0, where c = 2^-ilogb(max|a|) (zscore does not
 *    change when a is scaled, and this c keeps |d| <= 4) and m0 is the pass-1
 *    mean (scaled); sum(d) also takes each d's own rounding error (TwoSum),
 *    so it is the exact sum(a*c - m0) to second order. The mean is then
 *    m0 + sum(d)/n, kept as two doubles, and n*var = sum(d^2) - sum(d)^2/n
 *    (the corrected two-pass algorithm), so a - mean keeps full relative
 *    accuracy even next to the mean.
 *
 * A finished row is an nm_affine: out = ((a*pre - sh) - sl) / den, with pre
 * a power of two (zscore's c; else 1 unless the denominator itself is out
 * of double's range or a subnormal l2 norm), den == 0 a zero row
 * (zero_norm), and check set when an output that overflows the dtype is an
 * error (all inputs finite). A row holding NaN or Inf gets its denominator
 * by plain IEEE arithmetic instead (check clear): NaN and Inf propagate as
 * they do in numpy.
 */
#ifndef GPUQ_NORM_MATH_H
#define GPUQ_NORM_MATH_H

#include <math.h>
#include <stdint.h>

#include "gpuq_kernels.h"

#ifdef __CUDACC__
#define NM_FN static __host__ __device__ __forceinline__
#else
#define NM_FN static inline
#endif

#define NM_BIG 0x1p480   /* |a| above: the big bin (sum, l1, l2, zscore pass 1) */
#define NM_SML 0x1p-511  /* |a| below: the small bin (l2 only) */
#define NM_DOWN 0x1p-600 /* big-bin scale */
#define NM_UP 0x1p600    /* small-bin scale */
#define NM_TINY 0x1p-300 /* l2: a middle sum of squares below this joins the small bin */
#define NM_DBL_MIN 0x1p-1022

/* Pass modes: what one pass over a row accumulates. */
enum {
    NM_SUM = 0, /* sum of a: p[0] middle, p[1] big */
    NM_ABS,     /* sum of |a|: as NM_SUM */
    NM_SQ,      /* sum of a^2: p[0] middle, p[1] big, p[2] small */
    NM_MINMAX,  /* mn, mx only */
    NM_ZS1,     /* zscore pass 1: as NM_SUM, plus mn, mx */
    NM_ZS2      /* zscore pass 2: p[0] sum of d, p[1] sum of d^2 */
};

typedef struct nm_pair {
    double s, c; /* value s + c */
} nm_pair;

typedef struct nm_acc {
    nm_pair p[3];
    double mn, mx; /* NaN if a NaN was seen (numpy's min/max) */
} nm_acc;

typedef struct nm_affine {
    double pre, sh, sl, den; /* out = ((a*pre - sh) - sl) / den */
    int check;               /* an output that overflows the dtype is an error */
    int done;                /* zscore: 0 while pass 2 is still to run */
} nm_affine;

/* ---- compensated sums ---- */

NM_FN void nm_pair_add(nm_pair *p, double v)
{
    double t = p->s + v;
    p->c += fabs(p->s) >= fabs(v) ? (p->s - t) + v : (v - t) + p->s;
    p->s = t;
}

/* a + b; the TwoSum error of a.s + b.s is exact and symmetric, so merge(a, b)
 * and merge(b, a) are the same bits (the GPU butterfly relies on it). */
NM_FN nm_pair nm_pair_merge(nm_pair a, nm_pair b)
{
    nm_pair r;
    double t = a.s + b.s, bv = t - a.s;
    r.s = t;
    r.c = ((a.s - (t - bv)) + (b.s - bv)) + (a.c + b.c);
    return r;
}

NM_FN double nm_pair_value(nm_pair p)
{
    return p.s + p.c;
}

NM_FN nm_pair nm_pair_scale(nm_pair p, double k)
{
    p.s *= k;
    p.c *= k;
    return p;
}

NM_FN nm_pair nm_pair_ldexp(nm_pair p, int e)
{
    p.s = ldexp(p.s, e);
    p.c = ldexp(p.c, e);
    return p;
}

NM_FN int nm_pair_zero(nm_pair p)
{
    return p.s == 0.0 && p.c == 0.0;
}

NM_FN double nm_min(double a, double b)
{
    return (a < b || a != a) ? a : b;
}

NM_FN double nm_max(double a, double b)
{
    return (a > b || a != a) ? a : b;
}

/* ---- accumulators ---- */

NM_FN void nm_acc_init(nm_acc *a)
{
    for (int i = 0; i < 3; i++) {
        a->p[i].s = 0.0;
        a->p[i].c = 0.0;
    }
    a->mn = INFINITY;
    a->mx = -INFINITY;
}

/* How many of p[] a mode uses (bins: float64 input), and whether mn/mx. */
NM_FN int nm_mode_pairs(int mode, int bins)
{
    switch (mode) {
    case NM_SUM:
    case NM_ABS:
    case NM_ZS1:
        return bins ? 2 : 1;
    case NM_SQ:
        return bins ? 3 : 1;
    case NM_ZS2:
        return 2;
    default:
        return 0;
    }
}

NM_FN int nm_mode_minmax(int mode)
{
    return mode == NM_MINMAX || mode == NM_ZS1;
}

/* a += b over the np pairs (and mn/mx when mm) that the mode uses. */
NM_FN void nm_acc_merge(nm_acc *a, const nm_acc *b, int np, int mm)
{
    for (int i = 0; i < 3; i++)
        if (i < np)
            a->p[i] = nm_pair_merge(a->p[i], b->p[i]);
    if (mm) {
        a->mn = nm_min(a->mn, b->mn);
        a->mx = nm_max(a->mx, b->mx);
    }
}

/* Add one element x (the input value as double). MODE is a constant where
 * this is inlined, so the switch folds away. c, m0: pass 2's scale and
 * (scaled) mean. NaN lands in p[0] and Inf in p[1] (or p[0] without bins):
 * either makes that bin's s non-finite, which nm_nonfinite detects. */
NM_FN void nm_acc_add(nm_acc *a, int mode, int bins, double x, double c, double m0)
{
    double ax = fabs(x), y, d, bv;
    switch (mode) {
    case NM_SUM:
    case NM_ABS:
    case NM_ZS1:
        y = mode == NM_ABS ? ax : x;
        if (bins && ax > NM_BIG)
            nm_pair_add(&a->p[1], y * NM_DOWN);
        else
            nm_pair_add(&a->p[0], y);
        if (mode == NM_ZS1) {
            a->mn = nm_min(a->mn, x);
            a->mx = nm_max(a->mx, x);
        }
        break;
    case NM_SQ:
        if (bins && ax > NM_BIG) {
            y = ax * NM_DOWN;
            nm_pair_add(&a->p[1], y * y);
        } else if (bins && ax < NM_SML) {
            y = ax * NM_UP;
            nm_pair_add(&a->p[2], y * y);
        } else {
            nm_pair_add(&a->p[0], ax * ax);
        }
        break;
    case NM_MINMAX:
        a->mn = nm_min(a->mn, x);
        a->mx = nm_max(a->mx, x);
        break;
    default: /* NM_ZS2; y - m0 = d + e exactly (TwoSum), e joins sum(d)'s error */
        y = x * c;
        d = y - m0;
        bv = d - y;
        nm_pair_add(&a->p[0], d);
        a->p[0].c += (y - (d - bv)) + (-m0 - bv);
        nm_pair_add(&a->p[1], d * d);
        break;
    }
}

/* ---- finishing a row ---- */

NM_FN nm_affine nm_affine_plain(double den)
{
    nm_affine f;
    f.pre = 1.0;
    f.sh = 0.0;
    f.sl = 0.0;
    f.den = den;
    f.check = 1;
    f.done = 1;
    return f;
}

/* A bin's s is non-finite only if the row holds a NaN or an Inf: finite
 * input cannot overflow a bin. */
NM_FN int nm_nonfinite(const nm_acc *a)
{
    return !isfinite(a->p[0].s) || !isfinite(a->p[1].s) || !isfinite(a->p[2].s);
}

/* The denominator is v * up (up, down: 2^600 and 2^-600 or the reverse).
 * Divide by it directly when it is a normal double (one rounding, numpy's
 * result); else keep it scaled and scale the input instead. */
NM_FN void nm_set_den(nm_affine *f, double v, double up, double down)
{
    double d = v * up;
    if (isfinite(d) && fabs(d) >= NM_DBL_MIN) {
        f->den = d;
    } else {
        f->pre = down;
        f->den = v;
    }
}

/* sum, l1, l2 from the pass-1 accumulator (NM_SUM, NM_ABS, NM_SQ). */
NM_FN nm_affine nm_finish_norm(int method, const nm_acc *a)
{
    nm_pair mid = a->p[0], big = a->p[1], sml = a->p[2], t;
    nm_affine f = nm_affine_plain(0.0);
    if (nm_nonfinite(a)) {
        double d = mid.s + big.s + sml.s; /* +-Inf or NaN */
        f.den = method == GPUQ_K_L2 ? sqrt(d) : d;
        f.check = 0;
        return f;
    }
    if (method != GPUQ_K_L2) {
        if (nm_pair_zero(big)) {
            f.den = nm_pair_value(mid);
        } else { /* in units of 2^600 */
            t = nm_pair_merge(big, nm_pair_scale(mid, NM_DOWN));
            nm_set_den(&f, nm_pair_value(t), NM_UP, NM_DOWN);
        }
        return f;
    }
    if (!nm_pair_zero(big)) { /* squares in units of 2^1200; the small bin is negligible */
        t = nm_pair_merge(big, nm_pair_scale(nm_pair_scale(mid, NM_DOWN), NM_DOWN));
        nm_set_den(&f, sqrt(nm_pair_value(t)), NM_UP, NM_DOWN);
    } else if (!nm_pair_zero(mid) && (nm_pair_zero(sml) || nm_pair_value(mid) >= NM_TINY)) {
        t = nm_pair_merge(mid, nm_pair_scale(nm_pair_scale(sml, NM_DOWN), NM_DOWN));
        f.den = sqrt(nm_pair_value(t));
    } else { /* squares in units of 2^-1200; 0 for an all-zero row */
        t = nm_pair_merge(sml, nm_pair_scale(nm_pair_scale(mid, NM_UP), NM_UP));
        nm_set_den(&f, sqrt(nm_pair_value(t)), NM_DOWN, NM_UP);
    }
    return f;
}

/* minmax from NM_MINMAX: (a - min) / (max - min); when max - min overflows,
 * everything is halved first (exact, but for negligible subnormal bits). */
NM_FN nm_affine nm_finish_minmax(const nm_acc *a)
{
    nm_affine f = nm_affine_plain(a->mx - a->mn);
    f.sh = a->mn;
    if (!isfinite(a->mn) || !isfinite(a->mx)) {
        f.check = 0;
    } else if (!isfinite(f.den)) {
        f.pre = 0.5;
        f.sh = a->mn * 0.5;
        f.den = a->mx * 0.5 - a->mn * 0.5;
    }
    return f;
}

/* zscore after pass 1 (NM_ZS1) over n values. Returns 1 when f is final: a
 * row holding NaN or Inf (all NaN), a constant row (den 0). Else 0, with
 * f->pre = c and f->sh = m0 for pass 2 (NM_ZS2). */
NM_FN int nm_zscore_stage0(const nm_acc *a, uint64_t n, nm_affine *f)
{
    *f = nm_affine_plain(0.0);
    if (nm_nonfinite(a) || !isfinite(a->mn) || !isfinite(a->mx)) {
        f->sh = NAN;
        f->den = NAN;
        f->check = 0;
        return 1;
    }
    if (a->mn == a->mx)
        return 1;
    int e = ilogb(fmax(fabs(a->mn), fabs(a->mx)));
    e = e < -1000 ? -1000 : e; /* 2^-e stays a double; |a*c| < 2 still */
    nm_pair s = nm_pair_merge(nm_pair_ldexp(a->p[0], -e), nm_pair_ldexp(a->p[1], 600 - e));
    f->pre = ldexp(1.0, -e);
    f->sh = nm_pair_value(s) / (double)n;
    f->done = 0;
    return 0;
}

/* zscore after pass 2 (NM_ZS2, with f from stage 0): the corrected mean as
 * sh + sl and the population std as den (in units of c). */
NM_FN void nm_zscore_stage1(const nm_acc *b, uint64_t n, nm_affine *f)
{
    double dn = (double)n;
    double r = nm_pair_value(b->p[0]), q = nm_pair_value(b->p[1]);
    double m2 = q - r * (r / dn);
    double hi = f->sh, lo = r / dn;
    double t = hi + lo, bv = t - hi;
    f->sh = t;
    f->sl = (hi - (t - bv)) + (lo - bv);
    f->den = m2 > 0.0 ? sqrt(m2 / dn) : 0.0;
    f->done = 1;
}

/* The pass-1 mode of a method (GPUQ_K_*), and its finish (not zscore). */
NM_FN int nm_first_mode(int method)
{
    switch (method) {
    case GPUQ_K_SUM:
        return NM_SUM;
    case GPUQ_K_L1:
        return NM_ABS;
    case GPUQ_K_L2:
        return NM_SQ;
    case GPUQ_K_MINMAX:
        return NM_MINMAX;
    default:
        return NM_ZS1;
    }
}

NM_FN nm_affine nm_finish(int method, const nm_acc *a)
{
    return method == GPUQ_K_MINMAX ? nm_finish_minmax(a) : nm_finish_norm(method, a);
}

NM_FN double nm_apply(const nm_affine *f, double x)
{
    return ((x * f->pre - f->sh) - f->sl) / f->den;
}

#endif
