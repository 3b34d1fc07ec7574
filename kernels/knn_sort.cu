/* SPDX-License-Identifier: Apache-2.0 */
/* knn_sort.cu - the select of kNN for k > GPUQ_KNN_K_MAX, where the
 * shared-memory lists of knn.cu's select kernel no longer fit.
 *
 * Happy path, per distance tile (knn.cu computes it, knn_plan.h plans it):
 *  1. knn_sort_fill writes, per query row, a segment of (key, index)
 *     entries: the running top-k (dist/idx, absent for the first tile),
 *     then the tile's row (indices j0 ..), keys as knn_sort.h's knn_key;
 *  2. CUB's segmented radix sort orders every segment by key, stably: the
 *     running list is sorted by (key, index) and holds only indices below
 *     j0, and the tile's entries follow by index, so equal keys stay in
 *     index order and the result is the (key, index) order of knn_ref.c;
 *  3. knn_sort_take writes each segment's first k entries back to
 *     dist/idx (the distance from its key: exact, the dtype's value).
 * Exact, as the small-k select: every candidate is compared.
 * Cost: each tile sorts rows * (k + cols) 64-bit keys with 64-bit values
 * (about 8 radix passes over 32 bytes an entry), a block per row: one
 * query row against a large y runs on one SM per tile.
 * Fails: GPUQ_K_E_ARG when CUB asks for more temporary storage than the
 * plan reserves (GPUQ_KNN_CUB_TEMP_BYTES); CUDA errors as cuda_check.h
 * maps them. Nothing synchronizes.
 */
#include <cub/device/device_segmented_radix_sort.cuh>

#include "cuda_check.h"
#include "knn_sort.h"

namespace
{

constexpr unsigned SORT_THREADS = 256;

/* Entries of segment r: [0, lead) the running list, [lead, lead + cols)
 * the tile's row; offs[r] = r * seg for r in 0 .. rows. */
template <typename T>
__global__ void knn_sort_fill(const T *tile, const T *dist, const int64_t *idx, uint64_t rows,
                              uint64_t cols, uint64_t j0, uint64_t k, uint64_t lead, uint64_t seg,
                              uint64_t *keys, int64_t *vals, int *offs)
{
    const uint64_t total = rows * seg, step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < total; v += step) {
        const uint64_t r = v / seg, t = v % seg;
        if (t < lead) {
            keys[v] = knn_key((double)dist[r * k + t]);
            vals[v] = idx[r * k + t];
        } else {
            keys[v] = knn_key((double)tile[r * cols + (t - lead)]);
            vals[v] = (int64_t)(j0 + t - lead);
        }
        if (t == 0)
            offs[r] = (int)(r * seg);
        if (v == total - 1)
            offs[rows] = (int)total;
    }
}

template <typename T>
__global__ void knn_sort_take(const uint64_t *keys, const int64_t *vals, uint64_t rows,
                              uint64_t seg, uint64_t k, T *dist, int64_t *idx)
{
    const uint64_t total = rows * k, step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < total; v += step) {
        const uint64_t r = v / k, t = v % k;
        dist[v] = (T)knn_unkey(keys[r * seg + t]);
        idx[v] = vals[r * seg + t];
    }
}

unsigned grid_for(uint64_t items)
{
    uint64_t b = (items + SORT_THREADS - 1) / SORT_THREADS;
    return (unsigned)(b < 65535 ? (b ? b : 1) : 65535);
}

template <typename T>
int sort_merge(gpuq_cuda_ctx *ctx, const gpuq_knn_big_plan *p, char *scratch, uint64_t rows,
               uint64_t cols, uint64_t j0, uint64_t k, int first, T *dist, int64_t *idx)
{
    const uint64_t lead = first ? 0 : k, seg = lead + cols, items = rows * seg;
    const uint64_t part = gpuq_knn_align256(p->mb * p->ent * 8);
    uint64_t *keys0 = (uint64_t *)(scratch + p->keys_off);
    uint64_t *keys1 = (uint64_t *)(scratch + p->keys_off + part);
    int64_t *vals0 = (int64_t *)(scratch + p->keys_off + 2 * part);
    int64_t *vals1 = (int64_t *)(scratch + p->keys_off + 3 * part);
    int *offs = (int *)(scratch + p->offs_off);
    if (rows == 0 || rows > p->mb || cols > p->nb || (first && cols < k) || items > INT32_MAX)
        return GPUQ_K_E_ARG;
    knn_sort_fill<T><<<grid_for(items), SORT_THREADS, 0, ctx->stream>>>(
        (const T *)(scratch + p->tile_off), dist, idx, rows, cols, j0, k, lead, seg, keys0, vals0,
        offs);
    GPUQ_LAUNCH_CHECK(ctx);
    cub::DoubleBuffer<uint64_t> dk(keys0, keys1);
    cub::DoubleBuffer<int64_t> dv(vals0, vals1);
    size_t temp = 0;
    GPUQ_CUDA_CHECK(ctx, cub::DeviceSegmentedRadixSort::SortPairs(NULL, temp, dk, dv, (int)items,
                                                                  (int)rows, offs, offs + 1, 0, 64,
                                                                  ctx->stream));
    if (temp > GPUQ_KNN_CUB_TEMP_BYTES) {
        gpuq_kernels_logf(GPUQ_K_LOG_ERROR,
                          "knn sort: CUB wants %zu bytes of temporary storage, reserve %llu", temp,
                          (unsigned long long)GPUQ_KNN_CUB_TEMP_BYTES);
        return GPUQ_K_E_ARG;
    }
    temp = GPUQ_KNN_CUB_TEMP_BYTES;
    GPUQ_CUDA_CHECK(ctx, cub::DeviceSegmentedRadixSort::SortPairs(scratch + p->temp_off, temp, dk,
                                                                  dv, (int)items, (int)rows, offs,
                                                                  offs + 1, 0, 64, ctx->stream));
    knn_sort_take<T><<<grid_for(rows * k), SORT_THREADS, 0, ctx->stream>>>(
        dk.Current(), dv.Current(), rows, seg, k, dist, idx);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

} /* namespace */

int gpuq_knn_sort_merge(gpuq_cuda_ctx *ctx, int dt, const gpuq_knn_big_plan *p, void *scratch,
                        uint64_t rows, uint64_t cols, uint64_t j0, uint64_t k, int first,
                        void *dist, int64_t *idx)
{
    if (dt == GPUQ_K_F32)
        return sort_merge<float>(ctx, p, (char *)scratch, rows, cols, j0, k, first, (float *)dist,
                                 idx);
    return sort_merge<double>(ctx, p, (char *)scratch, rows, cols, j0, k, first, (double *)dist,
                              idx);
}
