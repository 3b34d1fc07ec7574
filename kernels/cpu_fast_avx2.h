/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_fast_avx2.h - the AVX2 copy of cpu_fast.c's kernel (cpu_fast_avx2.c),
 * called only where __builtin_cpu_supports("avx2"). */
#ifndef GPUQ_KERNELS_CPU_FAST_AVX2_H
#define GPUQ_KERNELS_CPU_FAST_AVX2_H

#include <stdint.h>

int cf_run_any_avx2(int kind, int f32, int metric, double p, int on_zero, const void *x,
                    const void *y, uint64_t m, uint64_t n, uint64_t d, void *out);

#endif
