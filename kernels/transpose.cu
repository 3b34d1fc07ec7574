/* SPDX-License-Identifier: Apache-2.0 */
/* transpose.cu - out[cols][rows] = in[rows][cols] on the GPU, for the ops
 * that work along another axis by the row code (normalize's columns).
 *
 * Happy path: 32 x 32 tiles through shared memory (padded against bank
 * conflicts), 32 x 8 threads a block, each thread 4 elements; grid x over
 * column tiles, y over row tiles (up to 65535, looped beyond). Moves bits
 * only: exact. Fails: GPUQ_K_E_ARG on bad arguments; CUDA errors of the
 * launch as cuda_check.h maps them. Nothing synchronizes.
 */
#include <stdint.h>

#include "cuda_check.h"
#include "gpuq_kernels.h"

namespace
{

constexpr int TR_TILE = 32;
constexpr int TR_ROWS = 8;

template <typename T>
__global__ void __launch_bounds__(TR_TILE *TR_ROWS)
    transpose_kernel(const T *in, T *out, uint64_t rows, uint64_t cols, uint64_t row_tiles)
{
    __shared__ T tile[TR_TILE][TR_TILE + 1];
    const uint64_t c0 = (uint64_t)blockIdx.x * TR_TILE;
    for (uint64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
        const uint64_t r0 = rt * TR_TILE;
        for (int j = threadIdx.y; j < TR_TILE; j += TR_ROWS) {
            uint64_t r = r0 + j, c = c0 + threadIdx.x;
            if (r < rows && c < cols)
                tile[j][threadIdx.x] = in[r * cols + c];
        }
        __syncthreads();
        for (int j = threadIdx.y; j < TR_TILE; j += TR_ROWS) {
            uint64_t c = c0 + j, r = r0 + threadIdx.x; /* out row c, column r */
            if (r < rows && c < cols)
                out[c * rows + r] = tile[threadIdx.x][j];
        }
        __syncthreads(); /* the next row tile reuses the shared tile */
    }
}

template <typename T>
int transpose_typed(gpuq_cuda_ctx *ctx, const T *in, T *out, uint64_t rows, uint64_t cols)
{
    uint64_t col_tiles = (cols + TR_TILE - 1) / TR_TILE, row_tiles = (rows + TR_TILE - 1) / TR_TILE;
    if (col_tiles > 0x7fffffffu)
        return GPUQ_K_E_ARG;
    dim3 grid((unsigned)col_tiles, (unsigned)(row_tiles < 65535 ? row_tiles : 65535));
    dim3 block(TR_TILE, TR_ROWS);
    transpose_kernel<T><<<grid, block, 0, ctx->stream>>>(in, out, rows, cols, row_tiles);
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

} /* namespace */

extern "C" int gpuq_cuda_transpose(gpuq_cuda_ctx *ctx, int dt, const void *d_in, void *d_out,
                                   uint64_t rows, uint64_t cols)
{
    if (!ctx || !d_in || !d_out || d_in == d_out || rows == 0 || cols == 0 ||
        rows > UINT64_MAX / cols || (dt != GPUQ_K_F32 && dt != GPUQ_K_F64))
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        return transpose_typed<float>(ctx, (const float *)d_in, (float *)d_out, rows, cols);
    return transpose_typed<double>(ctx, (const double *)d_in, (double *)d_out, rows, cols);
}
