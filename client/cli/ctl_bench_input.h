/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_input.h - gpuqctl bench on the user's own arrays (--input
 * X.npy [--input-b Y.npy], ctl_bench_input.c): the plan (ctl_bench_op.h,
 * user set) of a request made as the op's own command makes it (the op's
 * keys from --metric, --p, --k, --method, --on-zero, --to, checked against the
 * op's key table; the shapes and dtype from the files; the sizes from
 * gpuq_request_check, the check gpuqd runs), the requests built from it,
 * and the check of a reply: its outputs' dtypes and shapes, and its values
 * against the first reply's (which the first client fetches before the
 * load starts, so an input the op refuses is one error, not one a request).
 */
#ifndef GPUQ_CLIENT_CTL_BENCH_INPUT_H
#define GPUQ_CLIENT_CTL_BENCH_INPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "ctl.h"
#include "ctl_bench_op.h"

/* What the command line said of the user's request (borrowed strings,
 * NULL when not given). */
typedef struct bench_input_args {
    const char *input, *input_b;
    const char *metric, *method, *on_zero, *k, *to, *p;
} bench_input_args;

/* Options that need --input given without it, or that the op does not
 * take: a usage error naming the option (printed; CTL_EXIT_USAGE), else 0.
 * Called while parsing, before any file is read. */
int bench_input_usage(ctl_ctx *ctx, bench_op op, bool ping, const bench_input_args *in);

/* Read the files whole (npy_read: any dtype it converts) and make p, a
 * user plan of op. 0, or an exit status (the error printed): a usage error
 * for a bad option value, 1 for a file that cannot be read, dtypes that
 * differ, or shapes or keys the op refuses (gpuq_request_check's message,
 * the one gpuqd would answer). bench_plan_free frees what it made. */
int bench_input_plan(ctl_ctx *ctx, bench_op op, const bench_input_args *in, bench_plan *p);

/* A request of a user plan (as bench_req_make: inputs a, b, outputs
 * out0, out1 borrowed); NULL with err set when out of memory or a setter
 * refused. */
gpuq_req *bench_input_req_make(const bench_plan *p, const void *a, const void *b, void *out0,
                               void *out1, char *err, size_t cap);

/* Check a reply of a user plan: the outputs' count, dtypes and shapes;
 * then (once ref is set) output 0 against ref[0] at a few places, or at
 * every element when full (within f32's or f64's rounding of the values'
 * scale; NaN where ref has NaN), and each index of an int64 output
 * (knn's) a row of B. 0, or -1 with what was wrong in err. */
int bench_input_check(const bench_plan *p, const gpuq_result *res, const void *out0,
                      const void *out1, bool full, char *err, size_t cap);

/* Keep the first reply's outputs (out0, out1, of p's sizes; checked
 * first) as the reference of every later one. 0, GPUQ_E_NO_MEMORY, or
 * GPUQ_E_INTERNAL for a reply of the wrong shape (why in err). */
int bench_input_reference(bench_plan *p, const gpuq_result *res, const void *out0, const void *out1,
                          char *err, size_t cap);

/* "X.npy [1000, 64] f32 against Y.npy [5000, 64], metric cosine, k 5":
 * what the plan sends, for the text summary. */
void bench_input_describe(const bench_plan *p, const bench_input_args *in, char *buf, size_t cap);

#endif
