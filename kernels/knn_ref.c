/* SPDX-License-Identifier: Apache-2.0 */
/* knn_ref.c - the CPU reference of kNN: for each query row, the k nearest
 * rows of y by (distance, index).
 *
 * The distances are gpuq_cpu_pairwise's, computed for one query against a
 * chunk of KNN_CHUNK rows of y at a time (so kNN and pairwise cannot
 * disagree on a distance, and memory stays O(k + chunk) whatever n is),
 * then rounded to the dtype as pairwise rounds them: the order is decided
 * on the value returned, so the output is sorted exactly as it reads.
 * Selection keeps a max-heap of the k best (distance, index) pairs seen,
 * NaN above everything, and sorts it at the end of the row.
 *
 * Fails with GPUQ_K_E_ARG (knn_plan.h's rules), GPUQ_K_E_NOMEM (the heap and
 * the chunk buffer) or GPUQ_K_E_ZERO (pairwise's cosine zero vector). On
 * error the outputs may be partly written. Thread-safe, no global state.
 */
#include "gpuq_kernels.h"
#include "knn_plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define KNN_CHUNK 1024

typedef struct knn_ent {
    double dist; /* the dtype's value, widened */
    int64_t idx;
} knn_ent;

/* The kNN order: smaller distance first, NaN after every number, equal
 * distances (and NaNs among themselves) by the lower index. */
static int knn_less(const knn_ent *a, const knn_ent *b)
{
    int na = isnan(a->dist), nb = isnan(b->dist);
    if (na || nb) {
        if (na != nb)
            return nb;
        return a->idx < b->idx;
    }
    if (a->dist != b->dist)
        return a->dist < b->dist;
    return a->idx < b->idx;
}

/* Max-heap (by knn_less) of h[0..len): move h[i] down to its place. */
static void heap_down(knn_ent *h, uint64_t len, uint64_t i)
{
    for (;;) {
        uint64_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < len && knn_less(&h[top], &h[l]))
            top = l;
        if (r < len && knn_less(&h[top], &h[r]))
            top = r;
        if (top == i)
            return;
        knn_ent t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

static void heap_up(knn_ent *h, uint64_t i)
{
    while (i > 0) {
        uint64_t p = (i - 1) / 2;
        if (!knn_less(&h[p], &h[i]))
            return;
        knn_ent t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

/* Offer one candidate to the heap of the k best (len of them so far). */
static void heap_offer(knn_ent *h, uint64_t *len, uint64_t k, knn_ent c)
{
    if (*len < k) {
        h[*len] = c;
        heap_up(h, (*len)++);
    } else if (knn_less(&c, &h[0])) {
        h[0] = c;
        heap_down(h, k, 0);
    }
}

/* One query row: x_row against all of y, into dist[k] / idx[k]. */
static int knn_row(int dt, int metric, double p, int on_zero, const void *x_row, const void *y,
                   uint64_t n, uint64_t d, uint64_t k, void *buf, knn_ent *heap, void *dist,
                   int64_t *idx)
{
    size_t esz = dt == GPUQ_K_F32 ? sizeof(float) : sizeof(double);
    uint64_t len = 0;
    for (uint64_t j0 = 0; j0 < n; j0 += KNN_CHUNK) {
        uint64_t nb = n - j0 < KNN_CHUNK ? n - j0 : KNN_CHUNK;
        int rc = gpuq_cpu_pairwise(dt, metric, p, on_zero, x_row, (const char *)y + j0 * d * esz, 1,
                                   nb, d, buf);
        if (rc != GPUQ_K_OK)
            return rc;
        for (uint64_t j = 0; j < nb; j++) {
            knn_ent c;
            c.dist = dt == GPUQ_K_F32 ? (double)((const float *)buf)[j] : ((const double *)buf)[j];
            c.idx = (int64_t)(j0 + j);
            heap_offer(heap, &len, k, c);
        }
    }
    /* heap sort in place: the largest goes to the end each step */
    for (uint64_t end = len; end > 1; end--) {
        knn_ent t = heap[0];
        heap[0] = heap[end - 1];
        heap[end - 1] = t;
        heap_down(heap, end - 1, 0);
    }
    for (uint64_t t = 0; t < k; t++) {
        if (dt == GPUQ_K_F32)
            ((float *)dist)[t] = (float)heap[t].dist;
        else
            ((double *)dist)[t] = heap[t].dist;
        idx[t] = heap[t].idx;
    }
    return GPUQ_K_OK;
}

int gpuq_cpu_knn(int dt, int metric, double p, int on_zero, const void *x, const void *y,
                 uint64_t m, uint64_t n, uint64_t d, uint64_t k, void *out_dist, int64_t *out_idx)
{
    if (!x || !y || !out_dist || !out_idx || !gpuq_knn_args_ok(dt, metric, m, n, d, k) ||
        !gpuq_metric_args_ok(metric, p, on_zero))
        return GPUQ_K_E_ARG;
    size_t esz = dt == GPUQ_K_F32 ? sizeof(float) : sizeof(double);
    void *buf = malloc(KNN_CHUNK * sizeof(double));
    knn_ent *heap = malloc((size_t)k * sizeof *heap);
    int rc = buf && heap ? GPUQ_K_OK : GPUQ_K_E_NOMEM;
    for (uint64_t i = 0; rc == GPUQ_K_OK && i < m; i++)
        rc = knn_row(dt, metric, p, on_zero, (const char *)x + i * d * esz, y, n, d, k, buf, heap,
                     (char *)out_dist + i * k * esz, out_idx + i * k);
    free(heap);
    free(buf);
    return rc;
}
