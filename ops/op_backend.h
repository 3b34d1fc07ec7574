/* SPDX-License-Identifier: Apache-2.0 */
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
    void *scratch;               /* sz->scratch bytes on a device; a CPU run in pieces:
                                  * cpu_scratch's (else NULL) */
} op_bufs;

/* How a CUDA run splits into independent ranges of rows, for the pipelined
 * path (server/backends/cuda/backend_cuda_pipe.c: the upload of one chunk, the kernel on
 * the one before and the download of the one before that run at once).
 * Row r of the split is A's bytes [r * a_row, (r + 1) * a_row) and output
 * k's [r * out_row[k], ...); rows * a_row is A's size (0: no input A, as in
 * grid) and rows * out_row[k] output k's. B either goes up whole before the
 * first chunk (b_row 0: pairwise and knn need all of it for every row) or
 * in chunks with A (b_row: haversine's pairs). */
typedef struct op_split {
    uint64_t rows;
    uint64_t a_row, b_row;
    uint64_t out_row[GPUQ_MAX_OUTPUTS];
    /* Two phases (flat normalize: one reduction over every row): each
     * chunk is reduced as it lands (launch_cuda_reduce), then the whole is
     * combined (launch_cuda_finish), then launch_cuda_rows writes each
     * chunk's output. Otherwise launch_cuda_rows runs on each chunk as soon
     * as it landed. */
    int two_phase;
    /* The op's chunk scratch (cuda_chunk_scratch) depends on the chunk's
     * rows: every chunk but the last gets the same rows (no tapering, see
     * server/backends/cuda/backend_cuda_pipe.c), and op_rows.chunk is that size. */
    int fixed_chunks;
} op_split;

/* The rows of one launch of a split run: [r0, r0 + nr); chunk: the most
 * rows of any chunk of the plan. In a two-phase or fixed_chunks split,
 * every chunk but the last has exactly `chunk` rows, so this is chunk
 * number r0 / chunk; otherwise the first and last chunks may be smaller. */
typedef struct op_rows {
    uint64_t r0, nr, chunk;
} op_rows;

typedef struct op_backend_def {
    /* Run on the CPU reference kernels; returns a GPUQ_K_* code. */
    int (*run_cpu)(const gpuq_request *req, const gpuq_sizes *sz, const op_bufs *h);
    /* Optional, with cuda_split (one phase): run_cpu on rows rw of that
     * split only, each value exactly as the whole run computes it; h holds
     * the whole buffers. The CPU backend runs a long job in blocks of rows
     * and stops between two once the job's result is no longer wanted
     * (server/backends/backend_run.c). */
    int (*run_cpu_rows)(const gpuq_request *req, const gpuq_sizes *sz, const op_bufs *h,
                        const op_rows *rw);
    /* Optional, with a two_phase cuda_split: the CPU backend runs the
     * split's rows (one long row's values) in pieces of cpu_piece rows
     * (server/backends/backend_run.c, run_pieces), several threads at once:
     * run_cpu_reduce on every piece of a pass (any order), then
     * run_cpu_combine (one thread; *more: another pass, pass + 1, is
     * wanted), then run_cpu_scale on every piece. h->scratch holds
     * cpu_scratch(req, sz) bytes (0: bad sizes, run whole). The bits depend
     * on cpu_piece, not on the threads. All return GPUQ_K_* codes. */
    uint64_t cpu_piece;
    uint64_t (*cpu_scratch)(const gpuq_request *req, const gpuq_sizes *sz);
    int (*run_cpu_reduce)(const gpuq_request *req, const gpuq_sizes *sz, const op_bufs *h,
                          const op_rows *rw, int pass);
    int (*run_cpu_combine)(const gpuq_request *req, const gpuq_sizes *sz, const op_bufs *h,
                           int pass, int *more);
    int (*run_cpu_scale)(const gpuq_request *req, const gpuq_sizes *sz, const op_bufs *h,
                         const op_rows *rw);
#ifdef GPUQ_HAVE_CUDA
    /* Enqueue the op's kernels on ctx's stream; returns a GPUQ_K_* code. */
    int (*launch_cuda)(gpuq_cuda_ctx *ctx, const gpuq_request *req, const gpuq_sizes *sz,
                       const op_bufs *d);
#endif
    /* Optional: the device scratch bytes a CUDA run of this checked request
     * needs (NULL: sz->scratch). A backend-side hook because the kernels'
     * sizing (gpuq_cuda_knn_scratch_bytes) is not part of gpuq_proto. */
    uint64_t (*cuda_scratch)(const gpuq_request *req, const gpuq_sizes *sz);
    /* Optional, the pipelined CUDA path: fill *sp and return 1 when a CUDA
     * run of this checked request can split into row ranges (rows >= 2);
     * 0: it runs whole. Plain C (tests check the geometry without a GPU). */
    int (*cuda_split)(const gpuq_request *req, const gpuq_sizes *sz, op_split *sp);
#ifdef GPUQ_HAVE_CUDA
    /* With cuda_split, optional: the device scratch bytes a split run with
     * chunks of `chunk` rows needs (NULL: op_scratch_bytes). */
    uint64_t (*cuda_chunk_scratch)(const gpuq_request *req, const gpuq_sizes *sz, uint64_t chunk);
    /* With cuda_split: enqueue the op on rows rw only, on ctx's stream. d
     * holds the whole buffers (the op offsets them); what the launch reads
     * of A (and of a row-aligned B) is within rw, and it writes the
     * outputs' rows rw only, each value exactly as the whole run would
     * (bit for bit), unless the op's comment says otherwise. Returns a
     * GPUQ_K_* code. */
    int (*launch_cuda_rows)(gpuq_cuda_ctx *ctx, const gpuq_request *req, const gpuq_sizes *sz,
                            const op_bufs *d, const op_rows *rw);
    /* two_phase: the input rows rw have landed: reduce them (into scratch). */
    int (*launch_cuda_reduce)(gpuq_cuda_ctx *ctx, const gpuq_request *req, const gpuq_sizes *sz,
                              const op_bufs *d, const op_rows *rw);
    /* two_phase: every chunk is reduced: combine (rw->chunk: the plan's). */
    int (*launch_cuda_finish)(gpuq_cuda_ctx *ctx, const gpuq_request *req, const gpuq_sizes *sz,
                              const op_bufs *d, const op_rows *rw);
#endif
    /* The op's output is its input A, byte for byte (put, get): a CUDA
     * run with resident arrays moves the bytes in one copy, from wherever
     * A is to wherever the output goes (server/backends/cuda/
     * backend_cuda_res.c), with no buffer between. */
    int identity;
    /* Small requests of this op may run in batches (backend.h: batch_max,
     * batch_bytes): the CPU backend runs a batch's jobs one after the other
     * in one thread-pool work item; CUDA needs cuda_batch_item too. */
    int batchable;
#ifdef GPUQ_HAVE_CUDA
    /* With batchable: describe this checked request, its input at in and
     * output at out (device-addressable), as one item of a batched launch
     * (gpuq_cuda_normalize_batch); 1, or 0 when it cannot join a batch (it
     * then runs alone). */
    int (*cuda_batch_item)(const gpuq_request *req, const gpuq_sizes *sz, const void *in, void *out,
                           gpuq_norm_item *it);
#endif
    /* Optional: cross-session row batches (server/backends/backend_run.c,
     * backend_row_batchable). 1 when each row of A's result depends on
     * that row and B alone, bit for bit, however many rows A has (so the
     * rows of several requests against one resident B run as one request
     * of their concatenated rows, each getting exactly what it would
     * alone): sp->rows, a_row and out_row[] describe A's rows (b_row 0),
     * and key[0..3] the op's arguments that must be equal for two requests
     * to share a run (with op, dtype and B). 0: never batched so. */
    int (*row_batch)(const gpuq_request *req, const gpuq_sizes *sz, op_split *sp, uint64_t key[4]);
    /* Optional: a message for kernel code kcode (GPUQ_K_E_ZERO, _OVERFLOW,
     * ...) of this request, given its host inputs h_in (A) and h_b (B), each
     * NULL where the backend has no host bytes of it (a resident array on
     * CUDA). Writes msg and returns 1, or 0 for the generic message. */
    int (*kernel_message)(const gpuq_request *req, const gpuq_sizes *sz, const void *h_in,
                          const void *h_b, int kcode, char *msg, size_t cap);
} op_backend_def;

/* The backend def of op, or NULL; control ops have an all-NULL def. */
const op_backend_def *op_backend_of(gpuq_op op);

/* The device scratch bytes of a checked request: the op's cuda_scratch
 * hook, else sz->scratch. */
uint64_t op_scratch_bytes(const gpuq_request *r, const gpuq_sizes *sz);
/* kernel_message of the ops with a cosine metric (pairwise, knn): a zero
 * vector under cosine, naming the array (x or y) and the first zero row
 * found (x's first) when the host bytes are there. */
int op_cosine_zero_message(const gpuq_request *r, const gpuq_sizes *sz, const void *h_in,
                           const void *h_b, int kcode, char *msg, size_t cap);
/* The kernels' dtype code (GPUQ_K_F32/F64) of a checked request. */
int op_kernel_dtype(const gpuq_request *r);
/* Byte offset of array B in the input (A is 2-D whenever a B exists); 0
 * when the request has no B. */
size_t op_b_offset(const gpuq_request *r);
/* A split along the first dimension of A and of every output: rows units,
 * each array's bytes / rows per row; B row-aligned when b_rows (else sent
 * whole). Returns 1 when rows >= 2 (something to split), else 0. */
int op_split_rows(const gpuq_sizes *sz, uint64_t rows, int b_rows, op_split *sp);
/* A's rows of an x-against-y op (pairwise, knn): rows m, a_row, out_row
 * (b_row 0), for its row_batch hook; 1, or 0 without m or B. */
int op_row_split(const gpuq_sizes *sz, op_split *sp);
/* The op's cuda_split, or 0 when it has none. */
int op_cuda_split(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp);
/* The op_bufs of a checked request whose input starts at in and output
 * at out (host or device), scratch as given. */
op_bufs op_bufs_make(const gpuq_request *r, const gpuq_sizes *sz, const void *in, void *out,
                     void *scratch);

#define OP_DECL_BACKEND_(e, n) extern const op_backend_def op_backend_##n;
GPUQ_OP_LIST(OP_DECL_BACKEND_)
#undef OP_DECL_BACKEND_

#endif
