/* SPDX-License-Identifier: Apache-2.0 */
/* op_ctl.h - an op's gpuqctl command: the GPUQ_OP_CTL side of ops/<op>.c,
 * compiled into gpuqctl only.
 *
 * Each op file defines op_ctl_<name>, a pointer to its ctl_entry (NULL for
 * an op without a command); ctl_main.c lists the commands in op_list.h's
 * order through op_ctl_at. op_util.c holds what the compute commands share:
 * loading .npy inputs, sending the request, writing the result.
 */
#ifndef GPUQ_OPS_OP_CTL_H
#define GPUQ_OPS_OP_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "ctl.h"
#include "ctl_xfer.h"
#include "npy.h"

/* The --metric and --p entries of an opts_doc, shared by the distance ops
 * (pairwise, knn): the same names and parsing (ctl_util.c) for both. */
#define OP_METRIC_OPT_DOCS                                                                         \
    {"--metric", NULL, "NAME", "euclidean",                                                        \
     "euclidean, sqeuclidean (squared euclidean), cosine (1 - cosine similarity), manhattan "      \
     "(sum of |x - y|), chebyshev (max of |x - y|) or minkowski ((sum of |x - y|^p)^(1/p)), as "   \
     "scipy's cdist computes them; scipy's names cityblock (manhattan), chebychev and pnorm "      \
     "(minkowski) and scikit-learn's l1 (manhattan) and l2 (euclidean) are taken too."},           \
    {                                                                                              \
        "--p", NULL, "P", "2",                                                                     \
            "minkowski's exponent, a number > 0, or inf (chebyshev); only with --metric "          \
            "minkowski."                                                                           \
    }

/* The i-th command of the op table (ops without one skipped), or NULL. */
const ctl_entry *op_ctl_at(unsigned i);

/* One output of a command: its dtype, shape and .npy file. */
typedef ctl_out op_ctl_out;

/* ctl_run_op (client/cli/ctl_xfer.h): connect, send req with inputs a/b (either
 * may be NULL; opened by op_ctl_load, their data read on the way), write
 * each of the nout (1 or 2) outputs to its .npy file. Returns an exit
 * status. */
int op_ctl_run_outs(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
                    const op_ctl_out *outs, unsigned nout, bool timing);
/* The same with one output of req's dtype. */
int op_ctl_run(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
               int out_ndim, const uint64_t *out_shape, const char *out_path, bool timing);
/* npy_open (the header; the data is read by ctl_run_op, into the
 * connection's staging arena when the transport puts the arrays there)
 * with the error printed; returns an exit status. "-" is stdin (its header
 * read here, its data by ctl_run_op); gpuqctl's signal handlers go on
 * first (ctl_outfile_signals_on). "@NAME" is the resident array NAME
 * (ctl_resident_open: its dtype and shape from gpuqd, no data). */
int op_ctl_load(const char *path, npy_array *a);
/* Shapes of an .npy array into req's A or B. */
void op_ctl_shape_a(gpuq_request *req, const npy_array *a);
void op_ctl_shape_b(gpuq_request *req, const npy_array *b);
/* "LAT,LON" and "START:STOP:N"; 0 or -1. */
int op_ctl_parse_point(const char *s, double *lat, double *lon);
int op_ctl_parse_range(const char *s, double *start, double *stop, uint64_t *n);
/* Set enum key from a command-line name; prints "unknown <key> '<s>' (a|b|c)"
 * on error and returns CTL_EXIT_FAIL. */
int op_ctl_set_enum(gpuq_request *req, const char *key, const char *s);
/* pairwise's and knn's --metric (default euclidean), --p (NULL: unset;
 * a number, "inf" taken: the server checks its range) and --on-zero (NULL:
 * unset) into req; a usage error's exit status, or 0. */
int op_ctl_set_metric(ctl_ctx *ctx, gpuq_request *req, const char *metric_s, const char *p_s,
                      const char *on_zero_s);

#define OP_DECL_CTL_(e, n) extern const ctl_entry *const op_ctl_##n;
GPUQ_OP_LIST(OP_DECL_CTL_)
#undef OP_DECL_CTL_

#endif
