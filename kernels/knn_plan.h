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

/* 1 when the arguments of a kNN call are valid (pointers aside). */
static inline int gpuq_knn_args_ok(int dt, int metric, uint64_t m, uint64_t n, uint64_t d,
                                   uint64_t k)
{
    return (dt == GPUQ_K_F32 || dt == GPUQ_K_F64) && metric >= GPUQ_K_EUCLIDEAN &&
           metric <= GPUQ_K_MANHATTAN && m > 0 && n > 0 && d > 0 && k >= 1 && k <= n &&
           k <= GPUQ_KNN_K_MAX && n <= (uint64_t)INT64_MAX && m <= UINT64_MAX / d &&
           n <= UINT64_MAX / d && m <= UINT64_MAX / k;
}

typedef struct gpuq_knn_plan {
    uint64_t mb;         /* query rows per tile: min(m, GPUQ_KNN_MB_MAX) */
    uint64_t nb;         /* Y rows per tile: >= min(n, GPUQ_KNN_K_MAX), so the first
                            block alone fills every running top-k */
    uint64_t tile_bytes; /* mb * nb * element size <= GPUQ_KNN_TILE_BYTES */
} gpuq_knn_plan;

/* The plan for valid arguments (gpuq_knn_args_ok). */
static inline gpuq_knn_plan gpuq_knn_plan_for(int dt, uint64_t m, uint64_t n)
{
    gpuq_knn_plan p;
    uint64_t sz = dt == GPUQ_K_F32 ? 4 : 8;
    p.mb = m < GPUQ_KNN_MB_MAX ? m : GPUQ_KNN_MB_MAX;
    p.nb = GPUQ_KNN_TILE_BYTES / (p.mb * sz);
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

#endif
