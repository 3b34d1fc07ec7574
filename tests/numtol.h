/* SPDX-License-Identifier: Apache-2.0 */
/* numtol.h - ill-conditioned inputs and per-element error bounds of the
 * ops, for the CPU, end-to-end and GPU suites alike, so that each is stated
 * once.
 *
 * Why per element: a norm over the whole array (||out - ref|| / ||ref||)
 * dilutes one bad element by sqrt(N), and a bound loose enough for the
 * worst-conditioned element of a well-conditioned array hides float
 * accumulators. Each bound here follows from what gpuq_kernels.h promises:
 * every sum in double (u = 2^-53), one final rounding to the dtype
 * (uT = 2^-24 for float32, 2^-53 for float64).
 *
 * A comparison is |got - ref| <= tol, tol = nround * uT * |ref| + nacc * acc:
 *  - acc: the double-accumulation bound of one computation of the element
 *    (nt_pairwise_acc, nt_haversine_acc, ...);
 *  - nacc: how many such computations disagree: 1 against an exact
 *    reference (ref_ops.py *_exact), 2 against numpy/scipy (same formula, its
 *    own rounding) or CPU against GPU;
 *  - nround: how many of the two sides were rounded to the dtype: 1 against
 *    a float64 reference, 2 when two float32 results are compared.
 * The bounds are worst-case (Higham's gamma_n), so that a correct
 * implementation never fails by chance; a float accumulator exceeds them by
 * orders of magnitude on the inputs the suites use.
 */
#ifndef GPUQ_NUMTOL_H
#define GPUQ_NUMTOL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "testutil.h"

#define NT_U 0x1p-53 /* unit roundoff of double */

/* dtypes and metrics, numbered as gpuq_kernels.h (GPUQ_K_*) and the wire
 * (GPUQ_DT_*, GPUQ_METRIC_*) both number them: the suites include one or
 * the other and check that the numbers agree (_Static_assert). */
#define NT_F32 1
#define NT_F64 2
#define NT_EUCLIDEAN 0
#define NT_SQEUCLIDEAN 1
#define NT_COSINE 2
#define NT_MANHATTAN 3
#define NT_CHEBYSHEV 4
#define NT_MINKOWSKI 5

/* ---- inputs ---- */

/* Pairwise inputs (values for float64; round them for float32):
 *  uniform: U(-1, 1), the well-conditioned case;
 *  mixed:   signs mixed, magnitudes 10^U(-3, 3); one y row is minus an x
 *           row (cosine distance 2);
 *  offset:  1e4 + U(-1, 1): distances small next to the norms, cosine
 *           distances about 1e-9 (cancellation in 1 - cos); one y row equals
 *           an x row (distance 0);
 *  wide:    signs mixed, magnitudes 10^U(-6, 6). */
enum { NT_PW_UNIFORM, NT_PW_MIXED, NT_PW_OFFSET, NT_PW_WIDE, NT_PW_KINDS };

static inline const char *nt_pw_kind_name(int kind)
{
    static const char *const names[NT_PW_KINDS] = {"uniform", "mixed", "offset", "wide"};
    return kind >= 0 && kind < NT_PW_KINDS ? names[kind] : "?";
}

/* sign * 10^U(lo, hi) */
static inline void nt_fill_log_uniform(double *x, size_t n, double lo, double hi)
{
    tu_rand_fill_f64(x, n, lo, hi);
    for (size_t i = 0; i < n; i++) {
        double sign;
        tu_rand_fill_f64(&sign, 1, -1.0, 1.0);
        x[i] = copysign(pow(10.0, x[i]), sign);
    }
}

static inline void nt_pw_fill1(int kind, double *x, size_t n)
{
    switch (kind) {
    case NT_PW_MIXED:
        nt_fill_log_uniform(x, n, -3.0, 3.0);
        break;
    case NT_PW_OFFSET:
        tu_rand_fill_f64(x, n, -1.0, 1.0);
        for (size_t i = 0; i < n; i++)
            x[i] += 1e4;
        break;
    case NT_PW_WIDE:
        nt_fill_log_uniform(x, n, -6.0, 6.0);
        break;
    default:
        tu_rand_fill_f64(x, n, -1.0, 1.0);
        break;
    }
}

/* x[m][d] and y[n][d] of a kind, with the planted rows described above. */
static inline void nt_pw_fill(int kind, double *x, size_t m, double *y, size_t n, size_t d)
{
    nt_pw_fill1(kind, x, m * d);
    nt_pw_fill1(kind, y, n * d);
    size_t i = m > 1 ? 1 : 0, j = n > 1 ? 1 : 0;
    for (size_t k = 0; k < d; k++) {
        if (kind == NT_PW_OFFSET)
            y[k] = x[k];
        else if (kind == NT_PW_MIXED)
            y[j * d + k] = -x[i * d + k];
    }
}

/* Haversine inputs, (lat, lon) degrees:
 *  global:  uniform over lat [-90, 90], lon [-180, 180];
 *  near:    within 0.05 degree of (NT_NEAR_LAT, NT_NEAR_LON), both negative
 *           and exact in float32; point 0 is that point itself (distance 0);
 *  pairs:   b[i] within 0.01 degree of a[i], a in lat [-89.9, -0.1] and lon
 *           [-179.9, -0.1]; every 8th pair straddles the antimeridian
 *           (lon -179.99.. against 179.99..). */
#define NT_NEAR_LAT -33.875
#define NT_NEAR_LON -70.625

static inline void nt_points_global(double *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tu_rand_fill_f64(&p[2 * i], 1, -90.0, 90.0);
        tu_rand_fill_f64(&p[2 * i + 1], 1, -180.0, 180.0);
    }
}

static inline void nt_points_near(double *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tu_rand_fill_f64(&p[2 * i], 1, NT_NEAR_LAT - 0.05, NT_NEAR_LAT + 0.05);
        tu_rand_fill_f64(&p[2 * i + 1], 1, NT_NEAR_LON - 0.05, NT_NEAR_LON + 0.05);
    }
    p[0] = NT_NEAR_LAT;
    p[1] = NT_NEAR_LON;
}

static inline void nt_pairs_near(double *a, double *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double dl[2];
        tu_rand_fill_f64(&a[2 * i], 1, -89.9, -0.1);
        tu_rand_fill_f64(&a[2 * i + 1], 1, -179.9, -0.1);
        tu_rand_fill_f64(dl, 2, -0.01, 0.01);
        b[2 * i] = a[2 * i] + dl[0];
        b[2 * i + 1] = a[2 * i + 1] + dl[1];
        if (i % 8 == 7) {
            a[2 * i + 1] = -180.0 + fabs(dl[0]);
            b[2 * i + 1] = 180.0 - fabs(dl[1]);
        }
    }
}

/* ---- bounds ---- */

/* Unit roundoff of the output dtype (NT_F32 / NT_F64). */
static inline double nt_uout(int dt)
{
    return dt == NT_F32 ? 0x1p-24 : 0x1p-53;
}

/* The tolerance of one element: see the top of this file. The absolute
 * floor is the dtype's rounding of results in the subnormal range. */
static inline double nt_tol(int dt, int nround, int nacc, double ref, double acc)
{
    double floor_abs = dt == NT_F32 ? 0x1p-149 : 0x1p-1074;
    return (double)nround * (nt_uout(dt) * (1.0 + 0x1p-20) * fabs(ref) + floor_abs) +
           (double)nacc * acc;
}

/* Pairwise distance over d coordinates, summed in double in any order
 * (scipy cdist definitions):
 *  - sqeuclidean: each (x-y)^2 within 3u, the sum of d non-negative terms
 *    within (d-1)u: (d+2)u relative, (d+4)u kept;
 *  - euclidean: half of that after the square root, plus its rounding;
 *  - manhattan: |x-y| within u, the sum within (d-1)u;
 *  - cosine 1 - x.y/(|x||y|): the dot product is off by at most
 *    d u sum|x_k y_k| <= d u |x||y| and each norm by d u/2 relative, so the
 *    cosine is off by (2d+4)u absolute, whatever the angle; near-parallel
 *    vectors (a large common offset) make that a large relative error, which
 *    is the formula's and not to be blamed on the code.
 * Returns the absolute bound for the element whose value is ref. */
static inline double nt_pairwise_acc(int metric, uint64_t d, double ref)
{
    double dd = (double)d;
    switch (metric) {
    case NT_EUCLIDEAN:
        return (dd / 2.0 + 4.0) * NT_U * fabs(ref);
    case NT_SQEUCLIDEAN:
    case NT_MANHATTAN:
        return (dd + 4.0) * NT_U * fabs(ref);
    default: /* NT_COSINE */
        return (2.0 * dd + 8.0) * NT_U + 2.0 * NT_U * fabs(ref);
    }
}

/* nt_pairwise_acc with minkowski's exponent p: chebyshev is exact (a max
 * of exact differences in double; float64's difference rounds once, u),
 * minkowski within gpuq_kernels.h's ((d + 2) / p + 7) u relative (the
 * terms' and sum's errors divided by p in the root, the root's own 6 +
 * 1 / p units). The other metrics ignore p. */
static inline double nt_pairwise_acc_p(int metric, double p, uint64_t d, double ref)
{
    if (metric == NT_CHEBYSHEV || (metric == NT_MINKOWSKI && isinf(p)))
        return NT_U * fabs(ref);
    if (metric == NT_MINKOWSKI)
        return (((double)d + 2.0) / p + 7.0) * NT_U * fabs(ref);
    return nt_pairwise_acc(metric, d, ref);
}

/* The CUDA float32 route of euclidean, sqeuclidean and manhattan
 * (kernels/pairwise.cu): float sums of at most NT_F32_SPAN terms, the
 * partials of longer rows added in double. Every term is >= 0, so the
 * bound is relative: a - b rounds once, (a-b)^2 is exact inside the FMA
 * that adds it, each of the s = min(d, NT_F32_SPAN) additions of a partial
 * rounds once, and the double sum is rounded to float before the square
 * root: (s + 4) uT for sqeuclidean and manhattan, half of that plus the
 * square root's rounding for euclidean (uT = 2^-24; at most 4.1e-6 for any
 * d, the 1e-5 relative the route promises). The final rounding to the
 * dtype is nt_tol's nround. Cosine sums in double on every route:
 * nt_pairwise_acc. Squared sums that leave float's range (below 2^-100,
 * +inf) are summed again in double: nt_pairwise_acc's bound, smaller. */
#define NT_F32_SPAN 64
static inline double nt_pairwise_f32_acc(int metric, uint64_t d, double ref)
{
    double s = (double)(d < NT_F32_SPAN ? d : NT_F32_SPAN), uf = 0x1p-24;
    switch (metric) {
    case NT_EUCLIDEAN:
        return (s / 2.0 + 3.0) * uf * fabs(ref);
    case NT_SQEUCLIDEAN:
    case NT_MANHATTAN:
        return (s + 4.0) * uf * fabs(ref);
    default: /* NT_COSINE */
        return nt_pairwise_acc(metric, d, ref);
    }
}

/* The GEMM expansion ||x||^2 + ||y||^2 - 2 x.y, nx and ny the two rows'
 * sums of squares (pairwise.cu took it for float64 euclidean and
 * sqeuclidean with d >= 32 until issue 30; now only for cosine, which
 * keeps the direct bound here). Each of the three terms is off by (d+2)u
 * of its size, so the squared distance by 2(d+4)u (nx + ny) absolute:
 * large relative error when the distance is small next to the norms
 * (points far from the origin). A loose bound for the squared metrics now
 * that they sum directly: suites still using it check less than they could. */
static inline double nt_pairwise_gemm_acc(int metric, uint64_t d, double ref, double nx, double ny)
{
    if (metric == NT_COSINE || metric == NT_MANHATTAN)
        return nt_pairwise_acc(metric, d, ref);
    double e = 2.0 * ((double)d + 4.0) * NT_U * (nx + ny);
    if (metric == NT_SQEUCLIDEAN)
        return e + 4.0 * NT_U * fabs(ref);
    /* |sqrt(r + e) - sqrt(r)| <= min(e / sqrt(r), sqrt(e)) */
    double s = sqrt(e);
    if (fabs(ref) > 0.0 && e / fabs(ref) < s)
        s = e / fabs(ref);
    return s + 4.0 * NT_U * fabs(ref);
}

/* Haversine 2R asin(min(1, sqrt(a))), a = sin^2(dphi/2) + cos phi1 cos phi2
 * sin^2(dlambda/2), in double from degrees: the radians carry an absolute
 * error of a few u (|angle| <= 2 pi), which moves sqrt(a) by about 20u
 * absolute, and asin's slope 1/sqrt(1 - a) = 1/cos(theta/2) magnifies it
 * near antipodes; sin, cos, asin and sqrt add a few u relative. So: 64u R
 * / cos(theta/2) absolute plus 8u relative, theta = ref / R (cos(theta/2)
 * floored at 1e-4: the suites keep away from exact antipodes). */
static inline double nt_haversine_acc(double ref, double radius)
{
    double c = cos(0.5 * ref / radius);
    if (!(c > 1e-4))
        c = 1e-4;
    return 64.0 * NT_U * radius / c + 8.0 * NT_U * fabs(ref);
}

/* Worst element of got[n] against ref[n] under tol[n]: returns
 * max |got - ref| / tol (a comparison fails when it is > 1) and its index in
 * *worst. NaN must meet NaN and an infinity the same infinity, else +inf. */
static inline double nt_worst(const double *got, const double *ref, const double *tol, size_t n,
                              size_t *worst)
{
    double m = 0.0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r;
        if (isnan(ref[i]) || isnan(got[i]))
            r = isnan(ref[i]) && isnan(got[i]) ? 0.0 : INFINITY;
        else if (isinf(ref[i]) || isinf(got[i]))
            r = got[i] == ref[i] ? 0.0 : INFINITY;
        else if (got[i] == ref[i])
            r = 0.0;
        else
            r = tol[i] > 0.0 ? fabs(got[i] - ref[i]) / tol[i] : INFINITY;
        if (r > m) {
            m = r;
            *worst = i;
        }
    }
    return m;
}

#endif
