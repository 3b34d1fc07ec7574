/* SPDX-License-Identifier: Apache-2.0 */
/* knn_plan.h - argument rules and the CUDA blocking plan of kNN, shared by
 * the CPU reference (knn_ref.c), the CUDA kernels (knn.cu) and the scratch
 * size query (knn_plan.c), so that all three agree on what is valid and on
 * how large the device tile is. Plain C, no CUDA.
 *
 * The CUDA kNN never builds the whole m x n distance matrix: it walks X in
 * chunks of mb rows and Y in blocks of nb rows, computes one mb x nb tile
 * of distances into scratch and merges it into each query's running top-k
 * (kept in the outputs). mb and nb are chosen so that the tile stays within
 * GPUQ_KNN_TILE_BYTES whatever m and n are.
 */
#ifndef GPUQ_KNN_PLAN_H
#define GPUQ_KNN_PLAN_H

#include <stdint.h>

#include "gpuq_kernels.h"

#define GPUQ_KNN_TILE_BYTES ((uint64_t)128 << 20) /* the scratch bound */
#define GPUQ_KNN_MB_MAX 2048u                     /* query rows per tile */
#define GPUQ_KNN_NB_MAX ((uint64_t)1 << 22)       /* Y rows per tile */
/* Few query rows (at most GPUQ_KNN_SPLIT_ROWS per tile): each row's tile
 * is selected in segments of at least GPUQ_KNN_SEG_MIN columns by a block
 * each (at most GPUQ_KNN_SPLIT_BLOCKS blocks), whose partial top-k lists a
 * second pass merges: a handful of queries against a large Y no longer
 * leaves the select to a handful of blocks. The partial lists (at most
 * GPUQ_KNN_SPLIT_BLOCKS * k entries) come out of the scratch bound. */
#define GPUQ_KNN_SPLIT_ROWS 256u
#define GPUQ_KNN_SPLIT_BLOCKS 1024u /* about one wave of 256-thread blocks on an H200 */
#define GPUQ_KNN_SEG_MIN 8192u
#define GPUQ_KNN_PART_MAX_BYTES ((uint64_t)GPUQ_KNN_SPLIT_BLOCKS * GPUQ_KNN_K_MAX * 16)

/* 1 when the arguments of a kNN call are valid (pointers aside). */
static inline int gpuq_knn_args_ok(int dt, int metric, uint64_t m, uint64_t n, uint64_t d,
                                   uint64_t k)
{
    return (dt == GPUQ_K_F32 || dt == GPUQ_K_F64) && metric >= GPUQ_K_EUCLIDEAN &&
           metric < GPUQ_K_METRIC_COUNT && m > 0 && n > 0 && d > 0 && k >= 1 && k <= n &&
           k <= GPUQ_KNN_K_LIMIT && n <= (uint64_t)INT64_MAX && m <= UINT64_MAX / d &&
           n <= UINT64_MAX / d && m <= UINT64_MAX / k;
}

typedef struct gpuq_knn_plan {
    uint64_t mb;         /* query rows per tile: min(m, GPUQ_KNN_MB_MAX) */
    uint64_t nb;         /* Y rows per tile: >= min(n, GPUQ_KNN_K_MAX), so the first
                            block alone fills every running top-k */
    uint64_t tile_bytes; /* mb * nb * element size <= GPUQ_KNN_TILE_BYTES */
    uint64_t segs_max;   /* segments per row at most (1: no split) */
} gpuq_knn_plan;

/* Segments of a tile of cols columns under plan p: 1 (no split), or
 * *seg columns each (the last may be shorter). */
static inline uint64_t gpuq_knn_segs(const gpuq_knn_plan *p, uint64_t cols, uint64_t *seg)
{
    *seg = cols;
    if (p->segs_max <= 1 || cols < 2 * (uint64_t)GPUQ_KNN_SEG_MIN)
        return 1;
    uint64_t s = (cols + p->segs_max - 1) / p->segs_max;
    if (s < GPUQ_KNN_SEG_MIN)
        s = GPUQ_KNN_SEG_MIN;
    *seg = s;
    return (cols + s - 1) / s;
}

/* Bytes of the partial top-k lists of a split tile (keys of the dtype and
 * int64 indices), 0 when none: after the tile in the scratch, 16-aligned. */
static inline uint64_t gpuq_knn_part_bytes(const gpuq_knn_plan *p, int dt, uint64_t k)
{
    uint64_t seg, segs = gpuq_knn_segs(p, p->nb, &seg);
    if (segs <= 1)
        return 0;
    /* the keys, then (16-aligned) the indices */
    return ((p->mb * segs * k * (dt == GPUQ_K_F32 ? 4 : 8) + 15) & ~(uint64_t)15) +
           p->mb * segs * k * 8;
}

/* The plan for valid arguments (gpuq_knn_args_ok). */
static inline gpuq_knn_plan gpuq_knn_plan_for(int dt, uint64_t m, uint64_t n)
{
    gpuq_knn_plan p;
    uint64_t sz = dt == GPUQ_K_F32 ? 4 : 8;
    p.mb = m < GPUQ_KNN_MB_MAX ? m : GPUQ_KNN_MB_MAX;
    p.segs_max = p.mb <= GPUQ_KNN_SPLIT_ROWS ? GPUQ_KNN_SPLIT_BLOCKS / p.mb : 1;
    /* a split tile's partial lists come out of the bound */
    p.nb = (GPUQ_KNN_TILE_BYTES - (p.segs_max > 1 ? GPUQ_KNN_PART_MAX_BYTES : 0)) / (p.mb * sz);
    p.nb -= p.nb % 64; /* whole 64-wide distance tiles */
    if (p.nb > GPUQ_KNN_NB_MAX)
        p.nb = GPUQ_KNN_NB_MAX;
    if (p.nb < GPUQ_KNN_K_MAX) /* not reached with MB_MAX 2048; kept as a rule */
        p.nb = GPUQ_KNN_K_MAX;
    if (p.nb > n)
        p.nb = n;
    p.tile_bytes = p.mb * p.nb * sz;
    return p;
}

/* k > GPUQ_KNN_K_MAX (the sort path, knn_sort.cu): per chunk of mb query
 * rows and block of nb rows of y, the tile of distances, then each row's
 * running top-k and its tile row, keyed as (distance key, index), radix
 * sorted per row (CUB's segmented sort, stable: the running list comes
 * first and holds only lower indices, so equal keys stay by index) and cut
 * to k. nb >= k (when n allows), so the first block fills every list; mb
 * as large as the scratch bound allows, at least 1 (a single row whose
 * lists alone pass the bound, k of about 3M and more, takes what it needs:
 * gpuq_cuda_knn_scratch_bytes says how much, the server checks it).
 * Scratch, each part 256-aligned: tile; keys, keys' alternate, indices,
 * indices' alternate (mb * (k + nb) entries of 8 bytes each); the segment
 * offsets (mb + 1 int); CUB's temporary storage (a fixed reserve, checked
 * against CUB's own query at run time). */
#define GPUQ_KNN_BIG_NB_MIN ((uint64_t)1 << 16)
#define GPUQ_KNN_CUB_TEMP_BYTES ((uint64_t)1 << 20)

typedef struct gpuq_knn_big_plan {
    uint64_t mb, nb;   /* query rows per chunk, y rows per block */
    uint64_t ent;      /* entries per row at most: k + nb */
    uint64_t tile_off; /* 0 */
    uint64_t keys_off; /* keys[2], then vals[2], each mb * ent * 8 bytes */
    uint64_t offs_off; /* (mb + 1) int segment offsets */
    uint64_t temp_off; /* GPUQ_KNN_CUB_TEMP_BYTES */
    uint64_t bytes;    /* the whole scratch */
} gpuq_knn_big_plan;

static inline uint64_t gpuq_knn_align256(uint64_t v)
{
    return (v + 255) & ~(uint64_t)255;
}

/* The sort path's plan for valid arguments with k > GPUQ_KNN_K_MAX. */
static inline gpuq_knn_big_plan gpuq_knn_big_plan_for(int dt, uint64_t m, uint64_t n, uint64_t k)
{
    gpuq_knn_big_plan p;
    uint64_t sz = dt == GPUQ_K_F32 ? 4 : 8;
    p.nb = k > GPUQ_KNN_BIG_NB_MIN ? k : GPUQ_KNN_BIG_NB_MIN;
    if (p.nb > n)
        p.nb = n;
    p.ent = k + p.nb;
    uint64_t per_row = p.nb * sz + 4 * 8 * p.ent;
    p.mb = GPUQ_KNN_TILE_BYTES / per_row;
    if (p.mb > GPUQ_KNN_MB_MAX)
        p.mb = GPUQ_KNN_MB_MAX;
    if (p.mb > m)
        p.mb = m;
    if (p.mb < 1)
        p.mb = 1;
    p.tile_off = 0;
    p.keys_off = gpuq_knn_align256(p.mb * p.nb * sz);
    p.offs_off = p.keys_off + 4 * gpuq_knn_align256(p.mb * p.ent * 8);
    p.temp_off = p.offs_off + gpuq_knn_align256((p.mb + 1) * sizeof(int));
    p.bytes = p.temp_off + GPUQ_KNN_CUB_TEMP_BYTES;
    return p;
}

#endif
