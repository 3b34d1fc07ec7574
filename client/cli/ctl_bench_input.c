/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_input.c - gpuqctl bench on the user's arrays
 * (ctl_bench_input.h).
 *
 * Happy path: the op's options are set on a gpuq_request as the op's own
 * command sets them (ctl_set_enum: names, aliases and "did you mean"; the
 * op's key table says which keys it takes), the files are read whole
 * (npy_read converts integers, bool, float16 and Fortran order), their
 * shapes and dtype go into the request, and gpuq_request_check (the check
 * gpuqd runs, with no limit: gpuqd's own come with the first reply) gives
 * the outputs' sizes. Each client's requests carry the same arrays and
 * keys (every key the request has set, by its type in the op's table, so
 * a key the table gains needs nothing here). The first reply, fetched
 * before the load starts, is the reference: every later reply must have
 * its dtypes and shapes and, within rounding, its values.
 *
 * Failures: an option the op does not take, or one without --input, is a
 * usage error; a file that cannot be read, dtypes that differ and shapes
 * or keys the op refuses are one error each (exit 1) before connecting.
 */
#include "ctl_bench_input.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "op_ctl.h"
#include "op_def.h"

/* results of at most this many elements are compared whole on every reply */
#define BENCH_INPUT_SCAN_EVERY_MAX 65536u
#define BENCH_INPUT_KNN_K 10u

/* The option of each enum key the bench takes, and its key. */
static const struct {
    const char *opt, *key;
    size_t at; /* offsetof the value in bench_input_args */
} enum_opts[] = {
    {"--metric", "metric", offsetof(bench_input_args, metric)},
    {"--method", "method", offsetof(bench_input_args, method)},
    {"--on-zero", "on_zero", offsetof(bench_input_args, on_zero)},
};
#define BENCH_NENUM (sizeof enum_opts / sizeof enum_opts[0])

static const char *arg_at(const bench_input_args *in, size_t at)
{
    return *(const char *const *)((const char *)in + at);
}

static const gpuq_op_def *def_of(bench_op op)
{
    const char *name = bench_op_names[op];
    int code = gpuq_op_parse(name, strlen(name));
    return code < 0 ? NULL : op_def_of((gpuq_op)code);
}

static bool takes(const gpuq_op_def *d, const char *key)
{
    return d && op_key_index(d, key, strlen(key)) >= 0;
}

int bench_input_usage(ctl_ctx *ctx, bench_op op, bool ping, const bench_input_args *in)
{
    const char *given[BENCH_NENUM + 4][2];
    size_t n = 0;
    for (size_t k = 0; k < BENCH_NENUM; k++)
        if (arg_at(in, enum_opts[k].at))
            given[n][0] = enum_opts[k].opt, given[n++][1] = enum_opts[k].key;
    if (in->k)
        given[n][0] = "--k", given[n++][1] = "k";
    if (in->to)
        given[n][0] = "--to", given[n++][1] = "to";
    if (in->p)
        given[n][0] = "--p", given[n++][1] = "p";
    if (in->input_b && !in->input)
        return ctl_usage_error(ctx, "--input-b needs --input (B goes with A)");
    if (!in->input) {
        if (n)
            return ctl_usage_error(ctx,
                                   "%s needs --input X.npy (the generated data's requests are "
                                   "fixed: --op's description says which)",
                                   given[0][0]);
        return 0;
    }
    if (ping)
        return ctl_usage_error(ctx, "--input: --op ping sends no arrays");
    const gpuq_op_def *d = def_of(op);
    if (!d || !(d->flags & GPUQ_OPF_COMPUTE) || op == BENCH_GRID)
        return ctl_usage_error(ctx, "--input: --op %s takes no input arrays", bench_op_names[op]);
    if (in->input_b && op == BENCH_NORMALIZE)
        return ctl_usage_error(ctx, "--input-b: --op normalize takes one array");
    for (size_t k = 0; k < n; k++)
        if (!takes(d, given[k][1]))
            return ctl_usage_error(ctx, "%s: --op %s takes no \"%s\"", given[k][0],
                                   bench_op_names[op], given[k][1]);
    return 0;
}

/* The options into p->req (its op set). 0 or an exit status (printed). */
static int set_keys(ctl_ctx *ctx, const bench_input_args *in, bench_plan *p)
{
    int rc;
    /* pairwise's and knn's metric as their commands set it: euclidean
     * unless given, --p, --on-zero */
    bool metric = takes(op_def_of(p->req.op), "metric");
    if (metric && (rc = op_ctl_set_metric(ctx, &p->req, in->metric, in->p, in->on_zero)))
        return rc;
    for (size_t k = 0; !metric && k < BENCH_NENUM; k++) {
        const char *v = arg_at(in, enum_opts[k].at);
        if (v && (rc = ctl_set_enum(ctx, &p->req, enum_opts[k].key, enum_opts[k].opt, v)))
            return rc;
    }
    uint64_t kk;
    if (in->k && (ctl_parse_u64(in->k, &kk) || kk < 1 || gpuq_request_set_uint(&p->req, "k", kk)))
        return ctl_usage_error(ctx, "bad --k '%s' (a whole number, 1 or more)", in->k);
    double lat, lon;
    if (in->to &&
        (op_ctl_parse_point(in->to, &lat, &lon) || gpuq_request_set_pair(&p->req, "to", lat, lon)))
        return ctl_usage_error(ctx, "bad --to '%s' (LAT,LON in degrees)", in->to);
    return 0;
}

/* Read path into *a (whole). 0 or 1 (printed). */
static int read_file(const char *path, npy_array *a)
{
    char err[512];
    memset(a, 0, sizeof *a);
    a->fd = -1;
    int rc = npy_read(path, a, err, sizeof err);
    return rc ? ctl_fail(rc, err) : 0;
}

/* The request's shapes and sizes into p's fields. */
static void plan_sizes(bench_plan *p)
{
    const gpuq_request *r = &p->req;
    p->dt = r->dtype;
    p->esize = gpuq_dtype_size(r->dtype);
    p->nin = p->sz.nin;
    for (unsigned k = 0; k < p->nin && k < 2; k++) {
        p->in_ndim[k] = k ? r->ndim_b : r->ndim_a;
        for (unsigned j = 0; j < 2; j++)
            p->in_shape[k][j] = k ? r->shape_b[j] : r->shape_a[j];
        p->in_bytes[k] = p->sz.in_bytes[k];
    }
    p->n = r->shape_a[0];
    p->dim = r->ndim_a == 2 ? r->shape_a[1] : 1;
    p->nout = p->sz.nout;
    for (unsigned k = 0; k < p->nout; k++) {
        if (p->sz.out[k].dtype == GPUQ_DT_NONE)
            p->sz.out[k].dtype = r->dtype;
        p->out_bytes[k] = p->sz.out[k].bytes;
    }
    p->out_ndim = p->sz.out[0].ndim;
    p->out_shape[0] = p->sz.out[0].shape[0];
    p->out_shape[1] = p->out_ndim == 2 ? p->sz.out[0].shape[1] : 0;
    p->out_elems = p->sz.out[0].bytes / gpuq_dtype_size(p->sz.out[0].dtype);
    if (takes(op_def_of(r->op), "k"))
        p->k = gpuq_request_get_uint(r, "k");
    p->scan_every = p->out_elems <= BENCH_INPUT_SCAN_EVERY_MAX;
    uint64_t e = p->out_elems;
    uint64_t at[BENCH_MAX_CHECKS] = {0, e / 3, 2 * (e / 3), e - 1};
    for (unsigned k = 0; k < BENCH_MAX_CHECKS; k++)
        p->check_at[p->nchecks++] = at[k];
    bool f32 = p->dt == GPUQ_DT_F32;
    p->tol_rel = f32 ? 1e-5 : 1e-12;
}

int bench_input_plan(ctl_ctx *ctx, bench_op op, const bench_input_args *in, bench_plan *p)
{
    memset(p, 0, sizeof *p);
    p->op = op;
    p->user = true;
    gpuq_request_init(&p->req);
    const char *name = bench_op_names[op];
    p->req.op = (gpuq_op)gpuq_op_parse(name, strlen(name));
    int rc = set_keys(ctx, in, p);
    if (rc)
        return rc;
    npy_array a, b;
    if ((rc = read_file(in->input, &a)))
        return rc;
    memset(&b, 0, sizeof b);
    b.fd = -1;
    if (in->input_b && (rc = read_file(in->input_b, &b)))
        goto out;
    if (in->input_b && a.dtype != b.dtype) {
        rc = ctl_failf(GPUQ_E_BAD_DTYPE,
                       "--input %s (x) is %s, --input-b %s (y) is %s: x and y need one dtype",
                       in->input, gpuq_dtype_name(a.dtype), in->input_b, gpuq_dtype_name(b.dtype));
        goto out;
    }
    gpuq_request *r = &p->req;
    r->dtype = a.dtype;
    op_ctl_shape_a(r, &a);
    uint64_t payload = a.nbytes;
    /* B: the user's, or A again for the ops of two row sets (rows against
     * themselves); haversine without B measures to --to, (30, 101) unless
     * given */
    if (in->input_b) {
        op_ctl_shape_b(r, &b);
        payload += b.nbytes;
    } else if (op == BENCH_PAIRWISE || op == BENCH_KNN) {
        op_ctl_shape_b(r, &a);
        payload += a.nbytes;
    } else if (op == BENCH_HAVERSINE && !in->to) {
        (void)gpuq_request_set_pair(r, "to", 30.0, 101.0);
    }
    if (op == BENCH_KNN && !in->k) { /* min(10, rows of B) neighbours */
        uint64_t ny = r->shape_b[0];
        (void)gpuq_request_set_uint(r, "k", ny < BENCH_INPUT_KNN_K ? ny : BENCH_INPUT_KNN_K);
    }
    gpuq_limits open; /* gpuqd's own limits answer the first request */
    memset(&open, 0xff, sizeof open);
    char msg[512];
    if ((rc = gpuq_request_check(r, payload, &open, &p->sz, msg, sizeof msg))) {
        if (in->input_b)
            rc = ctl_failf(rc, "--input %s (x) and --input-b %s (y): %s", in->input, in->input_b,
                           msg);
        else
            rc = ctl_failf(rc, "--input %s: %s", in->input, msg);
        goto out;
    }
    p->in[0] = a.data; /* the plan's now */
    a.data = NULL;
    p->in[1] = b.data;
    b.data = NULL;
    plan_sizes(p);
    rc = 0;
out:
    npy_free(&a);
    npy_free(&b);
    return rc;
}

gpuq_req *bench_input_req_make(const bench_plan *p, const void *a, const void *b, void *out0,
                               void *out1, char *err, size_t cap)
{
    const gpuq_request *q = &p->req;
    const gpuq_op_def *d = op_def_of(q->op);
    gpuq_req *r = gpuq_req_new(d->name);
    if (!r) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    gpuq_req_set_input(r, 0, p->dt, p->in_ndim[0], p->in_shape[0], a, p->in_bytes[0]);
    if (p->nin > 1)
        gpuq_req_set_input(r, 1, p->dt, p->in_ndim[1], p->in_shape[1], b, p->in_bytes[1]);
    /* every key set, and those the encoder always writes, by their type */
    for (unsigned k = 0; k < d->nkeys; k++) {
        const gpuq_key_def *kd = &d->keys[k];
        if (!gpuq_request_arg_isset(q, k) && !(kd->flags & GPUQ_KEYF_ENCODE_DEFAULT))
            continue;
        double v[2];
        switch (kd->type) {
        case GPUQ_ARG_BOOL:
            gpuq_req_set_bool(r, kd->name, gpuq_request_arg_bool(q, k));
            break;
        case GPUQ_ARG_UINT:
            gpuq_req_set_u64(r, kd->name, gpuq_request_arg_uint(q, k));
            break;
        case GPUQ_ARG_INT:
            gpuq_req_set_i64(r, kd->name, gpuq_request_arg_int(q, k));
            break;
        case GPUQ_ARG_DOUBLE:
            gpuq_req_set_f64(r, kd->name, gpuq_request_arg_double(q, k));
            break;
        case GPUQ_ARG_ENUM:
            gpuq_req_set_str(r, kd->name, kd->names[gpuq_request_arg_enum(q, k)]);
            break;
        case GPUQ_ARG_PAIR:
            gpuq_request_arg_pair(q, k, &v[0], &v[1]);
            gpuq_req_set_f64s(r, kd->name, v, 2);
            break;
        case GPUQ_ARG_RANGE: {
            gpuq_arg_range g = gpuq_request_arg_range(q, k);
            gpuq_req_set_range(r, kd->name, g.start, g.stop, g.n);
            break;
        }
        }
    }
    return bench_req_finish(r, p, out0, out1, err, cap);
}

/* Element i of x of dtype dt as a double. */
static double elem(const void *x, gpuq_dtype dt, uint64_t i)
{
    switch (dt) {
    case GPUQ_DT_F32:
        return (double)((const float *)x)[i];
    case GPUQ_DT_I64:
        return (double)((const int64_t *)x)[i];
    default:
        return ((const double *)x)[i];
    }
}

/* The reply's outputs are the plan's: count, dtypes, shapes, bytes. */
static int check_shape(const bench_plan *p, const gpuq_result *res, char *err, size_t cap)
{
    const char *op = bench_op_names[p->op];
    if (gpuq_result_outputs(res) != p->nout) {
        snprintf(err, cap, "wrong result: %s reply of %u outputs, want %u", op,
                 gpuq_result_outputs(res), p->nout);
        return -1;
    }
    for (unsigned k = 0; k < p->nout; k++) {
        const gpuq_out *o = &p->sz.out[k];
        bool ok = gpuq_result_dtype(res, k) == o->dtype && gpuq_result_ndim(res, k) == o->ndim &&
                  gpuq_result_bytes(res, k) == o->bytes;
        for (unsigned j = 0; ok && j < o->ndim; j++)
            ok = gpuq_result_dim(res, k, j) == o->shape[j];
        if (!ok) {
            snprintf(err, cap,
                     "wrong result: %s output %u is %s [%llu, %llu], want %s [%llu, %llu]", op, k,
                     gpuq_dtype_name(gpuq_result_dtype(res, k)),
                     (unsigned long long)gpuq_result_dim(res, k, 0),
                     (unsigned long long)gpuq_result_dim(res, k, 1), gpuq_dtype_name(o->dtype),
                     (unsigned long long)o->shape[0],
                     (unsigned long long)(o->ndim == 2 ? o->shape[1] : 0));
            return -1;
        }
    }
    return 0;
}

/* got agrees with the first reply's want: both NaN, the same infinity, or
 * within rounding of the values' scale. */
static bool agrees(const bench_plan *p, double got, double want)
{
    if (isnan(want) || isinf(want))
        return isnan(want) ? isnan(got) : got == want;
    return fabs(got - want) <= p->tol_rel * (fabs(want) + p->ref_scale); /* false for NaN */
}

/* Element i of the reply against the reference. */
static int check_at(const bench_plan *p, const void *out0, const void *out1, uint64_t i, char *err,
                    size_t cap)
{
    const char *op = bench_op_names[p->op];
    double got = elem(out0, p->sz.out[0].dtype, i), want = elem(p->ref[0], p->sz.out[0].dtype, i);
    if (!agrees(p, got, want)) {
        snprintf(err, cap, "wrong result: %s element %llu is %.9g, the first reply's %.9g", op,
                 (unsigned long long)i, got, want);
        return -1;
    }
    if (p->nout > 1 && p->sz.out[1].dtype == GPUQ_DT_I64) { /* knn: a row of B */
        int64_t ix = ((const int64_t *)out1)[i];
        if (ix < 0 || (uint64_t)ix >= p->req.shape_b[0]) {
            snprintf(err, cap, "wrong result: %s index %llu is %lld, not a row of B (%llu rows)",
                     op, (unsigned long long)i, (long long)ix,
                     (unsigned long long)p->req.shape_b[0]);
            return -1;
        }
    }
    return 0;
}

int bench_input_check(const bench_plan *p, const gpuq_result *res, const void *out0,
                      const void *out1, bool full, char *err, size_t cap)
{
    if (check_shape(p, res, err, cap))
        return -1;
    if (!p->ref[0])
        return 0;
    if (!full) {
        for (unsigned k = 0; k < p->nchecks; k++)
            if (check_at(p, out0, out1, p->check_at[k], err, cap))
                return -1;
        return 0;
    }
    for (uint64_t i = 0; i < p->out_elems; i++)
        if (check_at(p, out0, out1, i, err, cap))
            return -1;
    return 0;
}

int bench_input_reference(bench_plan *p, const gpuq_result *res, const void *out0, const void *out1,
                          char *err, size_t cap)
{
    if (check_shape(p, res, err, cap))
        return GPUQ_E_INTERNAL;
    const void *src[2] = {out0, out1};
    for (unsigned k = 0; k < p->nout; k++) {
        if (!(p->ref[k] = malloc((size_t)p->out_bytes[k]))) {
            snprintf(err, cap, "cannot allocate %llu bytes for the first reply",
                     (unsigned long long)p->out_bytes[k]);
            return GPUQ_E_NO_MEMORY;
        }
        memcpy(p->ref[k], src[k], (size_t)p->out_bytes[k]);
    }
    double scale = 0;
    for (uint64_t i = 0; i < p->out_elems; i++) {
        double v = fabs(elem(p->ref[0], p->sz.out[0].dtype, i));
        if (isfinite(v) && v > scale)
            scale = v;
    }
    p->ref_scale = scale;
    return 0;
}

/* "[1000, 64]" */
static void shape_str(unsigned ndim, const uint64_t *s, char *buf, size_t cap)
{
    if (ndim == 2)
        snprintf(buf, cap, "[%llu, %llu]", (unsigned long long)s[0], (unsigned long long)s[1]);
    else
        snprintf(buf, cap, "[%llu]", (unsigned long long)s[0]);
}

void bench_input_describe(const bench_plan *p, const bench_input_args *in, char *buf, size_t cap)
{
    char sa[64], sb[64];
    shape_str(p->in_ndim[0], p->in_shape[0], sa, sizeof sa);
    int n = snprintf(buf, cap, "%s %s %s", in->input, sa, gpuq_dtype_name(p->dt));
    if (in->input_b && n >= 0 && (size_t)n < cap) {
        shape_str(p->in_ndim[1], p->in_shape[1], sb, sizeof sb);
        n += snprintf(buf + n, cap - (size_t)n, " and %s %s", in->input_b, sb);
    }
    const gpuq_op_def *d = op_def_of(p->req.op);
    for (unsigned k = 0; d && k < d->nkeys && n >= 0 && (size_t)n < cap; k++) {
        const gpuq_key_def *kd = &d->keys[k];
        if (!gpuq_request_arg_isset(&p->req, k))
            continue;
        if (kd->type == GPUQ_ARG_ENUM)
            n += snprintf(buf + n, cap - (size_t)n, ", %s %s", kd->name,
                          kd->names[gpuq_request_arg_enum(&p->req, k)]);
        else if (kd->type == GPUQ_ARG_UINT)
            n += snprintf(buf + n, cap - (size_t)n, ", %s %llu", kd->name,
                          (unsigned long long)gpuq_request_arg_uint(&p->req, k));
        else if (kd->type == GPUQ_ARG_PAIR) {
            double x, y;
            gpuq_request_arg_pair(&p->req, k, &x, &y);
            n += snprintf(buf + n, cap - (size_t)n, ", %s %g,%g", kd->name, x, y);
        }
    }
}
