/* SPDX-License-Identifier: Apache-2.0 */
/* knn_check.h - is a kNN result right? One row at a time, for the CPU suite
 * (against scipy cdist + a stable argsort) and the GPU suite (against
 * gpuq_cpu_knn) alike.
 *
 * Float rounding may reorder near-ties (a float32 result is rounded, the
 * reference is not; two implementations sum in different orders), so a row
 * passes when it is a valid top-k rather than the reference's exact list:
 *  - indices in [0, n), distinct;
 *  - sorted by (distance as returned, index): NaN last, exactly equal
 *    distances lower index first;
 *  - each distance within tol of the reference distance of its index;
 *  - the t-th distance within 2 tol of the reference's t-th (the k-th
 *    included: nothing nearer was left out);
 *  - the t-th index the reference's, or a near-tie: the reference distance
 *    of the returned index within 2 tol of the reference's t-th.
 * tol(v) = nt_tol(dt, nround, nacc, v, nt_pairwise_acc_p(metric, kc_minkowski_p, d, v)).
 */
#ifndef GPUQ_KNN_CHECK_H
#define GPUQ_KNN_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "numtol.h"

typedef struct kc_params {
    int dt, metric, nround, nacc;
    uint64_t n, d, k;
} kc_params;

/* Minkowski's exponent for kc_tol (nt_pairwise_acc_p; the other metrics
 * ignore it): a test of minkowski sets it before checking (outside
 * kc_params, whose positional initializers elsewhere name every field). */
static double kc_minkowski_p = 2.0;

static inline double kc_tol(const kc_params *p, double v)
{
    if (isnan(v))
        return 0.0;
    return nt_tol(p->dt, p->nround, p->nacc, v,
                  nt_pairwise_acc_p(p->metric, kc_minkowski_p, p->d, v));
}

/* |a - b| <= tol, NaN only with NaN */
static inline int kc_near(double a, double b, double tol)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b || fabs(a - b) <= tol;
}

/* (da, ia) strictly before (db, ib) in the kNN order */
static inline int kc_before(double da, int64_t ia, double db, int64_t ib)
{
    if (isnan(da) || isnan(db)) {
        if (isnan(da) != isnan(db))
            return isnan(db);
        return ia < ib;
    }
    return da < db || (da == db && ia < ib);
}

/* One row: got_d/got_i[k] against full[n] (reference distance of every
 * index) and ref_i/ref_d[k] (the reference's top-k). seen: n bytes of 0,
 * left 0. Returns 0, or 1 with the reason in why. */
static inline int kc_check_row(const kc_params *p, const double *got_d, const int64_t *got_i,
                               const double *full, const int64_t *ref_i, const double *ref_d,
                               unsigned char *seen, char *why, size_t cap)
{
    int bad = 0;
    uint64_t t;
    for (t = 0; t < p->k && !bad; t++) {
        int64_t j = got_i[t];
        if (j < 0 || (uint64_t)j >= p->n) {
            snprintf(why, cap, "position %llu: index %lld out of [0, %llu)", (unsigned long long)t,
                     (long long)j, (unsigned long long)p->n);
            bad = 1;
        } else if (seen[j]) {
            snprintf(why, cap, "position %llu: index %lld twice", (unsigned long long)t,
                     (long long)j);
            bad = 1;
        } else {
            seen[j] = 1;
        }
    }
    for (uint64_t u = 0; u < t; u++) /* leave seen clear */
        if (got_i[u] >= 0 && (uint64_t)got_i[u] < p->n)
            seen[got_i[u]] = 0;
    for (t = 0; t < p->k && !bad; t++) {
        double g = got_d[t], f = full[got_i[t]], tol = kc_tol(p, ref_d[t]);
        if (t > 0 && !kc_before(got_d[t - 1], got_i[t - 1], g, got_i[t])) {
            snprintf(why, cap,
                     "positions %llu, %llu out of order: (%.17g, %lld) then (%.17g, %lld)",
                     (unsigned long long)t - 1, (unsigned long long)t, got_d[t - 1],
                     (long long)got_i[t - 1], g, (long long)got_i[t]);
            bad = 1;
        } else if (!kc_near(g, f, kc_tol(p, f))) {
            snprintf(why, cap, "position %llu: distance %.17g, reference for index %lld %.17g",
                     (unsigned long long)t, g, (long long)got_i[t], f);
            bad = 1;
        } else if (!kc_near(g, ref_d[t], 2 * tol)) {
            snprintf(why, cap,
                     "position %llu: distance %.17g, reference's %llu-th %.17g (index "
                     "%lld)",
                     (unsigned long long)t, g, (unsigned long long)t + 1, ref_d[t],
                     (long long)ref_i[t]);
            bad = 1;
        } else if (got_i[t] != ref_i[t] && !kc_near(f, ref_d[t], 2 * tol)) {
            snprintf(why, cap,
                     "position %llu: index %lld (reference distance %.17g), want %lld "
                     "(%.17g): not a near-tie",
                     (unsigned long long)t, (long long)got_i[t], f, (long long)ref_i[t], ref_d[t]);
            bad = 1;
        }
    }
    return bad;
}

/* The planted ties: the first three rows of y[n] (rows of row_bytes bytes,
 * in the dtype) equal to the query row x, by index, into want[]; how many
 * there are (at most 3). The suites plant rows 0, n/2 and n-1 equal to x
 * row 0, but a random row may round to the same values too (offset data in
 * f32 with d = 1: about one case in 500): all of them tie at the same
 * distance, so the first three of them lead, in index order. */
static inline int kc_planted_ties(const void *x, const void *y, uint64_t n, size_t row_bytes,
                                  int64_t want[3])
{
    int nw = 0;
    for (uint64_t j = 0; j < n && nw < 3; j++)
        if (!memcmp((const char *)y + j * row_bytes, x, row_bytes))
            want[nw++] = (int64_t)j;
    return nw;
}

#endif
