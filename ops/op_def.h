/* SPDX-License-Identifier: Apache-2.0 */
/* op_def.h - what an op is on the wire: its name, flags, header keys and
 * check (the GPUQ_OP_PROTO side of ops/<op>.c, linked into gpuq_proto).
 *
 * The decoder, gpuq_request_check, the encoder and the argument getters and
 * setters read these defs through op_def_of(); no code outside ops/
 * knows which keys an op takes or how its sizes follow from its shapes.
 */
#ifndef GPUQ_OPS_OP_DEF_H
#define GPUQ_OPS_OP_DEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hdr_util.h"
#include "header.h"

/* Op flags. */
#define GPUQ_OPF_COMPUTE 0x1u    /* carries arrays, runs on a backend, has "dtype" */
#define GPUQ_OPF_ADMIN 0x2u      /* only an admin may send it */
#define GPUQ_OPF_NO_PAYLOAD 0x4u /* "<op> takes no payload" is checked for it */
/* Which common fields the encoder writes for the op (the decoder takes
 * every common key for every op, as it always has). */
#define GPUQ_OPF_SHAPES 0x10u  /* "shape", "shape_b" (when ndim > 0) */
#define GPUQ_OPF_HELLO 0x20u   /* "version", "client", "priority", "device" */
#define GPUQ_OPF_SESSION 0x40u /* "session" */
#define GPUQ_OPF_LIMIT 0x80u   /* "limit", "value" */

/* Key flags. */
#define GPUQ_KEYF_ENCODE_DEFAULT 0x1u /* encoded even when unset (its default) */

/* Another name an enum value is accepted under (scipy's "cityblock" for
 * "manhattan"): decoded and set like the name itself, never encoded. */
typedef struct gpuq_enum_alias {
    const char *name;
    int index; /* into the key's names */
} gpuq_enum_alias;

/* One op-specific header key. */
typedef struct gpuq_key_def {
    const char *name; /* the map key on the wire */
    gpuq_arg_type type;
    unsigned flags;           /* GPUQ_KEYF_* */
    gpuq_arg def;             /* the value when absent */
    const char *const *names; /* GPUQ_ARG_ENUM: wire names by index */
    int nnames;
    const gpuq_enum_alias *aliases; /* GPUQ_ARG_ENUM: more accepted names, or NULL */
    int naliases;
} gpuq_key_def;

/* An op's check: ranks, shapes, argument ranges -> *in_elems (input
 * elements of the request's dtype) and in *sz: nout, each output's dtype
 * (GPUQ_DT_NONE: the request's), ndim and shape, scratch bytes, geometry.
 * Overflow-safe. Called by gpuq_request_check after the common max_payload
 * check, with sz zeroed; the caller then computes the byte counts (output
 * shape overflow, then input, then output bytes), checks them against the
 * limits and payload_len against sz->payload. For a GPUQ_OPF_NO_PAYLOAD op
 * the caller only checks that payload_len is 0. Returns 0 or a GPUQ_E_* code
 * with a one-line message (hdr_fail). */
typedef int (*gpuq_op_check_fn)(const gpuq_request *req, uint64_t payload_len,
                                const gpuq_limits *lim, gpuq_sizes *sz, uint64_t *in_elems,
                                char *msg, size_t cap);

typedef struct gpuq_op_def {
    gpuq_op op;
    const char *name;         /* the wire name */
    unsigned flags;           /* GPUQ_OPF_* */
    const gpuq_key_def *keys; /* op-specific keys; index = args[] slot */
    unsigned nkeys;           /* <= GPUQ_MAX_OP_ARGS */
    gpuq_op_check_fn check;   /* NULL: nothing beyond the flags */
    gpuq_dtype default_dtype; /* dtype when the header has none (grid: f64) */
} gpuq_op_def;

/* Internal symbols are op_* (not gpuq_*): libgpuq.so exports only gpuq_*. */

/* The def of op, or NULL (GPUQ_OP_NONE, out of range). */
const gpuq_op_def *op_def_of(gpuq_op op);
/* Index of key in def's key table, or -1. */
int op_key_index(const gpuq_op_def *def, const char *key, size_t len);
/* Index of the enum name s[len] (a name or an alias) in kd's names, or -1.
 * What the decoder and gpuq_request_set_enum accept. */
int op_enum_lookup(const gpuq_key_def *kd, const char *s, size_t len);

/* ---- helpers for op checks (ops/op_check.c) ---- */

/* a * b, false on overflow. */
bool op_mul(uint64_t a, uint64_t b, uint64_t *out);
/* dtype f32 or f64, else bad_dtype "<op> needs dtype f32 or f64". */
int op_check_dtype(const gpuq_request *req, char *msg, size_t cap);
/* Every dimension > 0, else empty "<key>[k] is 0; arrays must not be empty". */
int op_check_nonempty(const char *key, uint32_t ndim, const uint64_t *shape, char *msg, size_t cap);
/* Two row sets X "shape" [m, d] and Y "shape_b" [n, d] (pairwise, knn):
 * both rank 2 ("<op> needs ..."), the same d, non-empty, m*d + n*d input
 * elements without overflow. Sets sz->m, n, d and *in_elems. */
int op_check_xy(const gpuq_request *req, gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap);
/* "radius" finite and > 0; "to" latitude in [-90, 90], longitude finite. */
int op_check_radius(double radius, char *msg, size_t cap);
int op_check_to(double lat, double lon, char *msg, size_t cap);
/* "p" (the key k_p) of pairwise and knn: when set, the metric (k_metric)
 * must be minkowski and p > 0 (+inf: chebyshev), else bad_argument. */
int op_check_metric_p(const gpuq_request *req, unsigned k_metric, unsigned k_p, char *msg,
                      size_t cap);
/* Output k of sz: dtype (GPUQ_DT_NONE: the request's), ndim, shape[0..1]. */
void op_set_out(gpuq_sizes *sz, unsigned k, gpuq_dtype dtype, uint32_t ndim, uint64_t d0,
                uint64_t d1);

/* Shared enum names ("on_zero": error, zero, nan), by GPUQ_K_ON_ZERO_*. */
#define OP_ON_ZERO_NNAMES 3
extern const char *const op_on_zero_names[OP_ON_ZERO_NNAMES];
/* The "on_zero" key of normalize, pairwise and knn: error by default. */
#define OP_ON_ZERO_KEY_DEF                                                                         \
    {                                                                                              \
        "on_zero", GPUQ_ARG_ENUM, 0, {.e = 0}, op_on_zero_names, OP_ON_ZERO_NNAMES, NULL, 0        \
    }
/* Pairwise metric names ("metric" of pairwise and knn), by GPUQ_K_* metric. */
extern const char *const op_metric_names[6];
/* Their aliases (ops/pairwise.c): scipy's and scikit-learn's names. */
#define OP_METRIC_NALIASES 5
extern const gpuq_enum_alias op_metric_aliases[OP_METRIC_NALIASES];
/* The "p" key of pairwise and knn: minkowski's exponent, default 2 (scipy's
 * cdist); op_check_metric_p checks it. */
#define OP_P_KEY_DEF                                                                               \
    {                                                                                              \
        "p", GPUQ_ARG_DOUBLE, 0, {.d = 2.0}, NULL, 0, NULL, 0                                      \
    }
/* The "metric" key of pairwise and knn: euclidean by default, scipy's
 * aliases accepted. */
#define OP_METRIC_KEY_DEF                                                                          \
    {                                                                                              \
        "metric", GPUQ_ARG_ENUM, 0, {.e = GPUQ_K_EUCLIDEAN}, op_metric_names, GPUQ_K_METRIC_COUNT, \
            op_metric_aliases, OP_METRIC_NALIASES                                                  \
    }

/* Each op file's def (GPUQ_OP_PROTO). */
#define GPUQ_OP_DECL_DEF_(e, n) extern const gpuq_op_def op_def_##n;
GPUQ_OP_LIST(GPUQ_OP_DECL_DEF_)
#undef GPUQ_OP_DECL_DEF_

#endif
