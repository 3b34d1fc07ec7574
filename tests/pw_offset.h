/* SPDX-License-Identifier: Apache-2.0 */
/* pw_offset.h - the pairwise data of issue 30 item 7 and its per-element
 * checks, shared by test_cpu_ref (the CPU backend) and test_gpu_kernels
 * (CUDA), so that both backends are held to one promise on one input.
 *
 * x[m][d] and y[n][d] are 1e4 + N(0,1): distances of about sqrt(2d) next
 * to squared norms of about 1e8 d, where ||x||^2 + ||y||^2 - 2 x.y cancels
 * (the GEMM route gave 3e-7 relative per element in float64, and no 0 for
 * identical rows). Some rows of y are copies of rows of x (po_twin), tile
 * edges of the CUDA kernel included, so some distances are exactly 0.
 *
 * The reference is the direct formula summed in long double over the
 * values as the backends see them (rounded to the dtype first): code of its
 * own, exact to ~d 2^-64, far below the bounds checked. Per element: within
 * PO_REL (float64) or PO_REL32 (float32) relative where the distance is
 * above PO_SMALL, that times PO_SMALL absolute below it, and exactly 0.0
 * for every pair of identical rows. kNN: the k entries are the nearest
 * rows (ties within the bound may come in either order), their distances
 * within the same bounds, a copied row first at exactly 0.
 *
 * Header-only (static inline, like numtol.h): the suites link nothing new.
 * The checks return 0 or write what failed into msg and return 1.
 */
#ifndef GPUQ_TESTS_PW_OFFSET_H
#define GPUQ_TESTS_PW_OFFSET_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define PO_OFFSET 1e4
#define PO_REL 1e-12  /* float64, the target */
#define PO_REL32 1e-5 /* float32, the route's promise */
#define PO_SMALL 1e-3 /* distances below it are checked absolutely */

/* Whether row j of y is a copy of a row of x, and which (*i). Rows 3, 11,
 * 19, ... and the last and first of each 64-row tile of y, from rows of x
 * spread over its 128-row tiles. */
static inline int po_twin(size_t j, size_t m, size_t *i)
{
    if (j % 8 != 3 && j % 64 != 63 && j % 64 != 0)
        return 0;
    *i = (j * 37 + 5) % m;
    return 1;
}

/* x[n] = 1e4 + N(0,1), by Box-Muller from testutil's seeded generator. */
static inline void po_fill1(double *x, size_t n)
{
    for (size_t k = 0; k < n; k += 2) {
        double u[2];
        tu_rand_fill_f64(u, 2, 0.0, 1.0);
        double r = sqrt(-2.0 * log(1.0 - u[0])), t = 6.283185307179586 * u[1];
        x[k] = PO_OFFSET + r * cos(t);
        if (k + 1 < n)
            x[k + 1] = PO_OFFSET + r * sin(t);
    }
}

/* x[m][d] and y[n][d] as the top of this file says; returns how many rows
 * of y are copies. */
static inline size_t po_fill(double *x, size_t m, double *y, size_t n, size_t d)
{
    size_t twins = 0;
    po_fill1(x, m * d);
    po_fill1(y, n * d);
    for (size_t j = 0; j < n; j++) {
        size_t i;
        if (po_twin(j, m, &i)) {
            memcpy(y + j * d, x + i * d, d * sizeof *y);
            twins++;
        }
    }
    return twins;
}

/* The exact-enough distance of two rows: sum of (a - b)^2 in long double,
 * its square root for euclidean (sq = 0). */
static inline long double po_ref(int sq, const double *a, const double *b, size_t d)
{
    long double s = 0.0L;
    for (size_t k = 0; k < d; k++) {
        long double t = (long double)a[k] - (long double)b[k];
        s += t * t;
    }
    return sq ? s : sqrtl(s);
}

/* Whether got (the backend's distance of rows a and b) passes: exactly 0
 * for identical rows, else within rel of the reference (absolutely below
 * PO_SMALL). *ref gets the reference. NaN fails. */
static inline int po_elem_ok(int sq, double rel, const double *a, const double *b, size_t d,
                             double got, long double *ref)
{
    if (memcmp(a, b, d * sizeof *a) == 0) {
        *ref = 0.0L;
        return got == 0.0;
    }
    *ref = po_ref(sq, a, b, d);
    long double tol = rel * (*ref > PO_SMALL ? *ref : (long double)PO_SMALL);
    return fabsl((long double)got - *ref) <= tol;
}

/* got[m][n] (widened to double) against the reference; sq: sqeuclidean,
 * else euclidean. *zeros gets the number of identical pairs seen (the
 * caller checks it is not 0). */
static inline int po_check_pairwise(int sq, double rel, const double *x, const double *y, size_t m,
                                    size_t n, size_t d, const double *got, size_t *zeros, char *msg,
                                    size_t cap)
{
    size_t bad = 0, first = 0;
    long double first_ref = 0.0L;
    *zeros = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            long double ref;
            const double *a = x + i * d, *b = y + j * d;
            if (!po_elem_ok(sq, rel, a, b, d, got[i * n + j], &ref)) {
                if (bad++ == 0) {
                    first = i * n + j;
                    first_ref = ref;
                }
            }
            if (memcmp(a, b, d * sizeof *a) == 0)
                (*zeros)++;
        }
    if (bad == 0)
        return 0;
    snprintf(msg, cap,
             "%zu of %zu elements out of bound; first [%zu][%zu] is %.17g, reference %.17Lg "
             "(relative error %.3Lg, bound %g)",
             bad, m * n, first / n, first % n, got[first], first_ref,
             first_ref != 0.0L ? fabsl((long double)got[first] - first_ref) / first_ref : 0.0L,
             rel);
    return 1;
}

/* A kNN answer dist[m][k] (widened) and idx[m][k] against the reference:
 * each entry's distance passes po_elem_ok against the row it names; the
 * indices are distinct and in range and the distances ascending; no row
 * left out is nearer than the k-th by more than the bound; a row with a
 * copy in y has it first, at exactly 0 (the lowest copy's index). */
static inline int po_check_knn(int sq, double rel, const double *x, const double *y, size_t m,
                               size_t n, size_t d, size_t k, const double *dist, const int64_t *idx,
                               char *msg, size_t cap)
{
    unsigned char *seen = calloc(n ? n : 1, 1);
    if (!seen) {
        snprintf(msg, cap, "out of memory");
        return 1;
    }
    int fail = 0;
    for (size_t i = 0; i < m && !fail; i++) {
        const double *a = x + i * d, *di = dist + i * k;
        const int64_t *ii = idx + i * k;
        memset(seen, 0, n);
        for (size_t e = 0; e < k && !fail; e++) {
            long double ref;
            if (ii[e] < 0 || (uint64_t)ii[e] >= n || seen[ii[e]]) {
                snprintf(msg, cap, "row %zu entry %zu: index %lld out of range or repeated", i, e,
                         (long long)ii[e]);
                fail = 1;
                break;
            }
            seen[ii[e]] = 1;
            if (!po_elem_ok(sq, rel, a, y + (size_t)ii[e] * d, d, di[e], &ref)) {
                snprintf(msg, cap, "row %zu entry %zu (y row %lld): %.17g, reference %.17Lg", i, e,
                         (long long)ii[e], di[e], ref);
                fail = 1;
            } else if (e > 0 && !(di[e - 1] <= di[e])) {
                snprintf(msg, cap, "row %zu: entry %zu (%.17g) after %.17g", i, e, di[e],
                         di[e - 1]);
                fail = 1;
            }
        }
        if (fail)
            break;
        /* Nothing left out is nearer than the k-th by more than the bound. */
        long double kth = (long double)di[k - 1];
        size_t twin = n;
        for (size_t j = 0; j < n && !fail; j++) {
            const double *b = y + j * d;
            if (twin == n && memcmp(a, b, d * sizeof *a) == 0)
                twin = j;
            if (seen[j])
                continue;
            long double r = po_ref(sq, a, b, d);
            if (r < kth - rel * (kth > PO_SMALL ? kth : (long double)PO_SMALL)) {
                snprintf(msg, cap, "row %zu: y row %zu (%.17Lg) is nearer than the k-th (%.17g)", i,
                         j, r, di[k - 1]);
                fail = 1;
            }
        }
        if (!fail && twin < n && (ii[0] != (int64_t)twin || di[0] != 0.0)) {
            snprintf(msg, cap, "row %zu: copy y row %zu not first at 0 (got row %lld at %.17g)", i,
                     twin, (long long)ii[0], di[0]);
            fail = 1;
        }
    }
    free(seen);
    return fail;
}

#endif
