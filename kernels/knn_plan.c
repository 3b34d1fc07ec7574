/* SPDX-License-Identifier: Apache-2.0 */
/* knn_plan.c - the device scratch a CUDA kNN needs, callable without CUDA
 * (the server sizes its pool allocation before it picks a backend). The
 * rules are in knn_plan.h. */
#include "knn_plan.h"

uint64_t gpuq_cuda_knn_scratch_bytes(int dt, uint64_t m, uint64_t n, uint64_t d, uint64_t k)
{
    if (!gpuq_knn_args_ok(dt, GPUQ_K_EUCLIDEAN, m, n, d, k))
        return 0;
    if (k > GPUQ_KNN_K_MAX)
        return gpuq_knn_big_plan_for(dt, m, n, k).bytes;
    gpuq_knn_plan p = gpuq_knn_plan_for(dt, m, n);
    uint64_t part = gpuq_knn_part_bytes(&p, dt, k);
    return part ? ((p.tile_bytes + 15) & ~(uint64_t)15) + part : p.tile_bytes;
}
