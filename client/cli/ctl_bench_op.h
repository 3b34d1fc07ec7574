/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_op.h - what `gpuqctl bench` sends and how it checks the
 * replies, per op (ctl_bench_op.c): the inputs (deterministic, made once),
 * one request built from them, and a cheap but real check of a result.
 *
 * --size N means: normalize, N values (1-D, method sum); haversine, N
 * points to a fixed point (30, 101); pairwise, N rows of --dim against
 * themselves (euclidean); knn, min(N, 1024) queries against N rows of
 * --dim, k = min(10, N); grid, an N x N grid over the whole globe.
 *
 * With --input (ctl_bench_input.h) the plan is the user's instead (user
 * set): their arrays, the op's keys as given, the sizes gpuq_request_check
 * derives, and as the check the first reply (ref), which every later one
 * must agree with.
 */
#ifndef GPUQ_CLIENT_CTL_BENCH_OP_H
#define GPUQ_CLIENT_CTL_BENCH_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuq_internal.h" /* gpuq.h, and proto's names (gpuq_dtype_name) */

typedef enum bench_op {
    BENCH_NORMALIZE,
    BENCH_HAVERSINE,
    BENCH_PAIRWISE,
    BENCH_GRID,
    BENCH_KNN,
    BENCH_NOPS
} bench_op;

extern const char *const bench_op_names[BENCH_NOPS];

#define BENCH_MAX_CHECKS 4

/* The work of one request, shared read-only by every client once made. */
typedef struct bench_plan {
    bench_op op;
    gpuq_dtype dt;
    size_t esize; /* bytes of one element of dt */
    uint64_t n, dim, queries, k;
    unsigned nin;        /* input arrays: 0 (grid), 1 or 2 */
    unsigned in_ndim[2]; /* their ranks and shapes */
    uint64_t in_shape[2][2];
    uint64_t in_bytes[2];
    void *in[2];       /* owned: the inputs (B may be A's bytes, in[1] NULL: see b_of) */
    unsigned nout;     /* outputs: 1, or 2 (knn: distances, indices) */
    unsigned out_ndim; /* rank of each output (both share the shape) */
    uint64_t out_shape[2];
    uint64_t out_bytes[2];
    uint64_t out_elems; /* elements of output 0 */
    /* elements of output 0 whose values are known: check[k] at want[k],
     * within tol_rel * |want| + tol_abs */
    unsigned nchecks;
    uint64_t check_at[BENCH_MAX_CHECKS];
    double want[BENCH_MAX_CHECKS];
    double tol_rel, tol_abs;
    double max_value;       /* every output 0 value lies in [0, max_value] (not normalize) */
    double sum_of_ones_tol; /* normalize: |sum - 1| at most this */
    bool scan_every;        /* small results: scan every reply, else one in 64 */
    /* the user's arrays (--input; ctl_bench_input.c): in[0] and in[1] are
     * theirs (in[1] NULL: B is A), req the request as checked (op, dtype,
     * shapes, keys), sz its outputs (every dtype resolved), ref the first
     * reply's outputs (owned; NULL until bench_input_reference) */
    bool user;
    gpuq_request req;
    gpuq_sizes sz;
    void *ref[2];
    double ref_scale; /* the largest |finite value| of ref[0] */
} bench_plan;

/* Make the plan and its inputs. 0, or GPUQ_E_TOO_LARGE (sizes overflow; why
 * in err) or GPUQ_E_NO_MEMORY. */
int bench_plan_make(bench_plan *p, bench_op op, gpuq_dtype dt, uint64_t n, uint64_t dim, char *err,
                    size_t cap);
void bench_plan_free(bench_plan *p);
/* Bytes one request moves: inputs plus outputs. */
uint64_t bench_plan_bytes(const bench_plan *p);
/* The data of input k (B of pairwise is A's, and the user's B when they
 * gave only A). */
const void *bench_plan_input(const bench_plan *p, unsigned k);

/* A request for p whose inputs are a, b (borrowed, p->in_bytes each; b
 * ignored unless p->nin is 2) and outputs out0, out1 (borrowed,
 * p->out_bytes each; out1 only for knn). NULL: out of memory or a setter
 * refused (its message in err). */
gpuq_req *bench_req_make(const bench_plan *p, const void *a, const void *b, void *out0, void *out1,
                         char *err, size_t cap);
/* The end of making r (bench_req_make, bench_input_req_make): its outputs
 * out0 and out1 set as p sizes them; r, or NULL (r freed, err said) when
 * a setter had failed. */
gpuq_req *bench_req_finish(gpuq_req *r, const bench_plan *p, void *out0, void *out1, char *err,
                           size_t cap);

/* Check one reply: its shape (from res) and, when full, every value of
 * output 0 (finite, in range, normalize's sum 1); always the known values
 * and knn's index range of row 0. 0, or -1 with what was wrong in err. */
int bench_check(const bench_plan *p, const gpuq_result *res, const void *out0, const void *out1,
                bool full, char *err, size_t cap);

#endif
