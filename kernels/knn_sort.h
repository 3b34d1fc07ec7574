/* SPDX-License-Identifier: Apache-2.0 */
/* knn_sort.h - what knn.cu and knn_sort.cu share (CUDA only): the
 * distance key whose unsigned order is the kNN order, and the sort path's
 * merge of one distance tile (k > GPUQ_KNN_K_MAX, knn_plan.h). */
#ifndef GPUQ_KNN_SORT_H
#define GPUQ_KNN_SORT_H

#include <stdint.h>

#include "gpuq_kernels.h"
#include "knn_plan.h"

#define GPUQ_KNN_KEY_NONE UINT64_MAX /* NaN, and the empty slot */

/* The distance as a key whose unsigned order is the kNN order: NaN (every
 * NaN) the largest, -0 and +0 one value. */
static __device__ __forceinline__ uint64_t knn_key(double v)
{
    if (v != v)
        return GPUQ_KNN_KEY_NONE;
    if (v == 0.0)
        v = 0.0;
    uint64_t b = (uint64_t)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | (1ull << 63));
}

static __device__ __forceinline__ double knn_unkey(uint64_t key)
{
    uint64_t b = (key >> 63) ? (key & ~(1ull << 63)) : ~key;
    return __longlong_as_double((long long)b);
}

/* Merge tile[rows][cols] (distances of y rows j0 .. j0 + cols - 1, dtype
 * dt) into the running top-k of each row, dist[rows][k] / idx[rows][k]
 * (ignored when first: the list starts empty, and then cols >= k), under
 * plan p (rows <= p->mb, cols <= p->nb), on ctx's stream; scratch is the
 * sort path's scratch (tile at p->tile_off). Returns a GPUQ_K_* code:
 * GPUQ_K_E_ARG when CUB wants more temporary storage than the reserve. */
int gpuq_knn_sort_merge(gpuq_cuda_ctx *ctx, int dt, const gpuq_knn_big_plan *p, void *scratch,
                        uint64_t rows, uint64_t cols, uint64_t j0, uint64_t k, int first,
                        void *dist, int64_t *idx);

#endif
