/* op_backend.h - how an op runs: the GPUQ_OP_BACKEND side of ops/<op>.c,
 * linked into gpuq_ops_backend (gpuqd only; never into libgpuq).
 *
 * The backends call an op through these hooks and know nothing else of it.
 * Buffers: input A at the start of the input, B right after A (a checked
 * request's shapes give the offset, op_backend_b_offset); output 0 and
 * output 1 follow each other PACKED (out[1] at out[0].bytes), in the staging
 * slot and in the device output buffer alike, which is also the reply's
 * payload order. An op whose second output needs alignment (int64 indices
 * after an odd count of f32) copes in its kernel or asks for scratch.
 */
#ifndef GPUQ_OPS_OP_BACKEND_H
#define GPUQ_OPS_OP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gpuq_kernels.h"
#include "header.h"

/* Pointers one run works on: host (CPU) or device (CUDA). */
typedef struct op_bufs {
    const void *a, *b;           /* inputs; b NULL when the request has no B */
    void *out[GPUQ_MAX_OUTPUTS]; /* outputs; out[1] NULL when nout < 2 */
    void *scratch;               /* sz->scratch bytes (device only; NULL if 0) */
} op_bufs;

typedef struct op_backend_def {
    /* Run on the CPU reference kernels; returns a GPUQ_K_* code. */
    int (*run_cpu)(const gpuq_request *req, const gpuq_sizes *sz, const op_bufs *h);
#ifdef GPUQ_HAVE_CUDA
    /* Enqueue the op's kernels on ctx's stream; returns a GPUQ_K_* code. */
    int (*launch_cuda)(gpuq_cuda_ctx *ctx, const gpuq_request *req, const gpuq_sizes *sz,
                       const op_bufs *d);
#endif
    /* Optional: the device scratch bytes a CUDA run of this checked request
     * needs (NULL: sz->scratch). A backend-side hook because the kernels'
     * sizing (gpuq_cuda_knn_scratch_bytes) is not part of gpuq_proto. */
    uint64_t (*cuda_scratch)(const gpuq_request *req, const gpuq_sizes *sz);
    /* Optional: a message for kernel code kcode (GPUQ_K_E_ZERO, _OVERFLOW,
     * ...) of this request, given its host input h_in (may be NULL). Writes
     * msg and returns 1, or 0 for the generic message. */
    int (*kernel_message)(const gpuq_request *req, const gpuq_sizes *sz, const void *h_in,
                          int kcode, char *msg, size_t cap);
} op_backend_def;

/* The backend def of op, or NULL; control ops have an all-NULL def. */
const op_backend_def *op_backend_of(gpuq_op op);

/* The device scratch bytes of a checked request: the op's cuda_scratch
 * hook, else sz->scratch. */
uint64_t op_scratch_bytes(const gpuq_request *r, const gpuq_sizes *sz);
/* kernel_message of the ops with a cosine metric (pairwise, knn): a zero
 * vector under cosine. */
int op_cosine_zero_message(const gpuq_request *r, const gpuq_sizes *sz, const void *h_in, int kcode,
                           char *msg, size_t cap);
/* The kernels' dtype code (GPUQ_K_F32/F64) of a checked request. */
int op_kernel_dtype(const gpuq_request *r);
/* Byte offset of array B in the input (A is 2-D whenever a B exists); 0
 * when the request has no B. */
size_t op_b_offset(const gpuq_request *r);
/* The op_bufs of a checked request whose input starts at in and output
 * at out (host or device), scratch as given. */
op_bufs op_bufs_make(const gpuq_request *r, const gpuq_sizes *sz, const void *in, void *out,
                     void *scratch);

#define OP_DECL_BACKEND_(e, n) extern const op_backend_def op_backend_##n;
GPUQ_OP_LIST(OP_DECL_BACKEND_)
#undef OP_DECL_BACKEND_

#endif
