/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_fast_avx2.c - cpu_fast.c's kernel compiled for AVX2 (no FMA: the
 * same operations as the baseline copy, so the same bits), picked at run
 * time by gpuq_cpu_pairwise_fast; the binary still runs on any x86-64. */
#include "cpu_fast_avx2.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* GCC takes a target pragma; clang (the fuzz and sanitizer builds) has no
 * such pragma and takes the attribute on every function instead. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC target("avx2")
#endif
#define CF_ENTRY cf_run_any_avx2
#include "cpu_fast_tile.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif
