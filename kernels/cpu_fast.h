/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_fast.h - the CPU backend's fast pairwise kernel (cpu_fast.c).
 *
 * The same contract and results (within the same bound) as the reference
 * gpuq_cpu_pairwise (gpuq_kernels.h, cpu_ref.c), computed in cache tiles
 * with vector code; the reference stays the ground truth the tests compare
 * against.
 */
#ifndef GPUQ_KERNELS_CPU_FAST_H
#define GPUQ_KERNELS_CPU_FAST_H

#include <stdint.h>

/* Pairwise x[m][d] vs y[n][d] -> out[m][n], as gpuq_cpu_pairwise: the
 * same arguments, checks, metrics (scipy cdist definitions), on_zero modes
 * and GPUQ_K_* codes; every sum in double, never the ||x||^2 + ||y||^2 -
 * 2 x.y expansion, so PROTOCOL.md's bounds hold ((d + 4) u relative for
 * euclidean, sqeuclidean, manhattan; (2d + 8) u absolute for cosine;
 * chebyshev exact; minkowski as gpuq_cpu_pairwise). Each distance depends
 * on its two rows, d and the arguments only, bit for bit, whatever m, n,
 * where the row sits in x or y, and the CPU it runs on (any x86-64: the
 * vector paths do the same operations in the same order, with no fused
 * multiply-add), so a job split in blocks of rows gets the whole run's
 * values. Its sums are in another order than the reference's, so the two
 * differ in the last bits. No allocation; thread-safe. */
int gpuq_cpu_pairwise_fast(int dt, int metric, double p, int on_zero, const void *x, const void *y,
                           uint64_t m, uint64_t n, uint64_t d, void *out);

#endif
