/* SPDX-License-Identifier: Apache-2.0 */
/* gpuq_kernel_enums.h - the kernels' dtype, method and metric codes.
 *
 * The one source of these values: ops/normalize.c and ops/pairwise.c index
 * their wire-name arrays by them and assert at compile time that the
 * public GPUQ_NORM_* / GPUQ_METRIC_* of proto/header.h agree. Plain C, no
 * CUDA, so the protocol side may include it.
 */
#ifndef GPUQ_KERNEL_ENUMS_H
#define GPUQ_KERNEL_ENUMS_H

enum { GPUQ_K_F32 = 1, GPUQ_K_F64 = 2 };
enum { GPUQ_K_SUM = 0, GPUQ_K_L1, GPUQ_K_L2, GPUQ_K_MINMAX, GPUQ_K_ZSCORE, GPUQ_K_METHOD_COUNT };
enum {
    GPUQ_K_EUCLIDEAN = 0,
    GPUQ_K_SQEUCLIDEAN,
    GPUQ_K_COSINE,
    GPUQ_K_MANHATTAN,
    GPUQ_K_CHEBYSHEV, /* max |x_k - y_k| */
    GPUQ_K_MINKOWSKI, /* (sum |x_k - y_k|^p)^(1/p), p > 0 (p = inf: chebyshev) */
    GPUQ_K_METRIC_COUNT
};
/* What a zero denominator gives ("on_zero"): a zero norm, constant row or
 * cosine zero vector is GPUQ_K_E_ZERO, or its values are zeros (normalize)
 * and 1.0 (cosine), or NaN. */
enum { GPUQ_K_ON_ZERO_ERROR = 0, GPUQ_K_ON_ZERO_ZERO, GPUQ_K_ON_ZERO_NAN, GPUQ_K_ON_ZERO_COUNT };

#endif
