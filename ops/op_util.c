/* SPDX-License-Identifier: Apache-2.0 */
/* op_util.c - what the op files share, per side (see op_table.c).
 *
 * PROTO: the checks' common pieces (dtype, non-empty shapes, radius, "to")
 * and the "on_zero" names. BACKEND: buffer layout (B after A, outputs
 * packed). CTL: .npy in, one request, .npy out.
 */
#ifdef GPUQ_OP_PROTO
#include <math.h>

#include "errors.h"
#include "gpuq_kernel_enums.h"
#include "op_def.h"

_Static_assert(OP_ON_ZERO_NNAMES == GPUQ_K_ON_ZERO_COUNT && GPUQ_K_METRIC_COUNT == 6,
               "op_def.h's name counts differ from gpuq_kernel_enums.h's");

const char *const op_on_zero_names[GPUQ_K_ON_ZERO_COUNT] = {
    [GPUQ_K_ON_ZERO_ERROR] = "error", [GPUQ_K_ON_ZERO_ZERO] = "zero", [GPUQ_K_ON_ZERO_NAN] = "nan"};

const char *const op_metric_names[GPUQ_K_METRIC_COUNT] = {
    [GPUQ_K_EUCLIDEAN] = "euclidean", [GPUQ_K_SQEUCLIDEAN] = "sqeuclidean",
    [GPUQ_K_COSINE] = "cosine",       [GPUQ_K_MANHATTAN] = "manhattan",
    [GPUQ_K_CHEBYSHEV] = "chebyshev", [GPUQ_K_MINKOWSKI] = "minkowski"};

int op_check_metric_p(const gpuq_request *req, unsigned k_metric, unsigned k_p, char *msg,
                      size_t cap)
{
    int metric = gpuq_request_arg_enum(req, k_metric);
    double p = gpuq_request_arg_double(req, k_p);
    if (!gpuq_request_arg_isset(req, k_p))
        return 0;
    if (metric != GPUQ_K_MINKOWSKI) /* scipy's cdist refuses p for them too */
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "\"p\" is minkowski's exponent; metric %s takes none",
                        op_metric_names[metric]);
    if (!(p > 0.0)) /* NaN fails too */
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "p=%g: minkowski needs p > 0 (a number; inf means chebyshev)", p);
    return 0;
}

bool op_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

int op_check_dtype(const gpuq_request *req, char *msg, size_t cap)
{
    if (req->dtype != GPUQ_DT_F32 && req->dtype != GPUQ_DT_F64)
        return hdr_fail(msg, cap, GPUQ_E_BAD_DTYPE, "%s needs dtype f32 or f64",
                        gpuq_op_name(req->op));
    return 0;
}

int op_check_nonempty(const char *key, uint32_t ndim, const uint64_t *shape, char *msg, size_t cap)
{
    for (uint32_t k = 0; k < ndim; k++) {
        if (shape[k] == 0)
            return hdr_fail(msg, cap, GPUQ_E_EMPTY, "%s[%u] is 0; arrays must not be empty", key,
                            (unsigned)k);
    }
    return 0;
}

int op_check_xy(const gpuq_request *req, gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    const char *op = gpuq_op_name(req->op);
    uint64_t ea, eb;
    /* In the user's words (PROTOCOL.md 3.3): A is x, B is y. */
    if (req->ndim_a != 2)
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "%s needs x 2-D [m, d] (\"shape\")", op);
    if (req->ndim_b != 2)
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "%s needs y 2-D [n, d] (\"shape_b\")", op);
    if (req->shape_b[1] != req->shape_a[1])
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "y has d=%llu, x has d=%llu",
                        (unsigned long long)req->shape_b[1], (unsigned long long)req->shape_a[1]);
    for (int b = 0; b < 2; b++) {
        const uint64_t *s = b ? req->shape_b : req->shape_a;
        if (s[0] == 0 || s[1] == 0)
            return hdr_fail(msg, cap, GPUQ_E_EMPTY,
                            "%s is empty ([%llu, %llu]); arrays must not be empty", b ? "y" : "x",
                            (unsigned long long)s[0], (unsigned long long)s[1]);
    }
    sz->m = req->shape_a[0];
    sz->n = req->shape_b[0];
    sz->d = req->shape_a[1];
    if (!op_mul(sz->m, sz->d, &ea) || !op_mul(sz->n, sz->d, &eb) ||
        __builtin_add_overflow(ea, eb, in_elems))
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE,
                        "%s shapes x [%llu, %llu], y [%llu, %llu] overflow", op,
                        (unsigned long long)sz->m, (unsigned long long)sz->d,
                        (unsigned long long)sz->n, (unsigned long long)sz->d);
    return 0;
}

int op_check_radius(double radius, char *msg, size_t cap)
{
    if (!isfinite(radius) || !(radius > 0))
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "radius %g must be finite and > 0", radius);
    return 0;
}

int op_check_to(double lat, double lon, char *msg, size_t cap)
{
    if (!isfinite(lat) || lat < -90.0 || lat > 90.0)
        return hdr_fail(msg, cap, GPUQ_E_OUT_OF_RANGE, "\"to\" latitude %g is outside [-90, 90]",
                        lat);
    if (!isfinite(lon))
        return hdr_fail(msg, cap, GPUQ_E_OUT_OF_RANGE, "\"to\" longitude %g is not finite", lon);
    return 0;
}

void op_set_out(gpuq_sizes *sz, unsigned k, gpuq_dtype dtype, uint32_t ndim, uint64_t d0,
                uint64_t d1)
{
    sz->out[k].dtype = dtype;
    sz->out[k].ndim = ndim;
    sz->out[k].shape[0] = d0;
    sz->out[k].shape[1] = ndim > 1 ? d1 : 0;
    if (sz->nout < k + 1)
        sz->nout = k + 1;
}
#endif

#ifdef GPUQ_OP_BACKEND
#include <stdio.h>
#include <string.h>

#include "op_backend.h"

uint64_t op_scratch_bytes(const gpuq_request *r, const gpuq_sizes *sz)
{
    const op_backend_def *ob = op_backend_of(r->op);
    return ob && ob->cuda_scratch ? ob->cuda_scratch(r, sz) : sz->scratch;
}

/* The first row of v[rows][d] (dtype of r) whose squared norm is 0 in
 * double, the kernels' test (a sum of squares is 0 only if every square
 * is), or -1. */
static long long zero_row(const gpuq_request *r, const void *v, uint64_t rows, uint64_t d)
{
    for (uint64_t i = 0; v && i < rows; i++) {
        double s = 0.0;
        for (uint64_t k = 0; k < d; k++) {
            double t = r->dtype == GPUQ_DT_F32 ? (double)((const float *)v)[i * d + k]
                                               : ((const double *)v)[i * d + k];
            s += t * t;
        }
        if (s == 0.0)
            return (long long)i;
    }
    return -1;
}

int op_cosine_zero_message(const gpuq_request *r, const gpuq_sizes *sz, const void *h_in,
                           const void *h_b, int kcode, char *msg, size_t cap)
{
    static const char why[] =
        "(cosine distance needs a nonzero norm; on_zero \"zero\" or \"nan\" accepts it)";
    if (kcode != GPUQ_K_E_ZERO)
        return 0;
    /* B is y; pairwise's single-array form (no B) compares x with itself */
    long long at = zero_row(r, h_in, sz->m, sz->d);
    const char *name = "x";
    if (at < 0 && r->ndim_b) {
        at = zero_row(r, h_b, sz->n, sz->d);
        name = "y";
    }
    if (at >= 0)
        snprintf(msg, cap, "%s row %lld is a zero vector %s", name, at, why);
    else
        snprintf(msg, cap, "x or y has a zero vector %s", why);
    return 1;
}

int op_kernel_dtype(const gpuq_request *r)
{
    return r->dtype == GPUQ_DT_F32 ? GPUQ_K_F32 : GPUQ_K_F64;
}

size_t op_b_offset(const gpuq_request *r)
{
    if (r->ndim_b == 0)
        return 0;
    return (size_t)(r->shape_a[0] * r->shape_a[1]) * gpuq_dtype_size(r->dtype);
}

int op_split_rows(const gpuq_sizes *sz, uint64_t rows, int b_rows, op_split *sp)
{
    memset(sp, 0, sizeof *sp);
    if (rows < 2)
        return 0;
    sp->rows = rows;
    sp->a_row = sz->nin > 0 ? sz->in_bytes[0] / rows : 0;
    sp->b_row = b_rows && sz->nin > 1 ? sz->in_bytes[1] / rows : 0;
    for (uint32_t k = 0; k < sz->nout && k < GPUQ_MAX_OUTPUTS; k++)
        sp->out_row[k] = sz->out[k].bytes / rows;
    return 1;
}

int op_row_split(const gpuq_sizes *sz, op_split *sp)
{
    memset(sp, 0, sizeof *sp);
    if (sz->m == 0 || sz->nin < 2)
        return 0;
    sp->rows = sz->m;
    sp->a_row = sz->in_bytes[0] / sz->m;
    for (uint32_t k = 0; k < sz->nout && k < GPUQ_MAX_OUTPUTS; k++)
        sp->out_row[k] = sz->out[k].bytes / sz->m;
    return 1;
}

int op_cuda_split(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp)
{
    const op_backend_def *ob = op_backend_of(r->op);
    memset(sp, 0, sizeof *sp);
    return ob && ob->cuda_split ? ob->cuda_split(r, sz, sp) : 0;
}

op_bufs op_bufs_make(const gpuq_request *r, const gpuq_sizes *sz, const void *in, void *out,
                     void *scratch)
{
    op_bufs b = {.a = in, .b = NULL, .out = {out, NULL}, .scratch = scratch};
    if (r->ndim_b && in)
        b.b = (const char *)in + op_b_offset(r);
    if (sz->nout > 1 && out)
        b.out[1] = (char *)out + sz->out[0].bytes;
    return b;
}
#endif

#ifdef GPUQ_OP_CTL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_resident.h"
#include "ctl_xfer.h"
#include "op_ctl.h"
#include "op_def.h"

int op_ctl_set_metric(ctl_ctx *ctx, gpuq_request *req, const char *metric_s, const char *p_s,
                      const char *on_zero_s)
{
    int rc = ctl_set_enum(ctx, req, "metric", "--metric", metric_s ? metric_s : "euclidean");
    if (rc)
        return rc;
    if (p_s) {
        char *end;
        double p = strtod(p_s, &end);
        if (!*p_s || *end)
            return ctl_usage_error(ctx, "bad --p '%s' (a number > 0, or inf)", p_s);
        gpuq_request_set_double(req, "p", p);
    }
    if (on_zero_s)
        return ctl_set_enum(ctx, req, "on_zero", "--on-zero", on_zero_s);
    return 0;
}

int op_ctl_run_outs(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
                    const op_ctl_out *outs, unsigned nout, bool timing)
{
    return ctl_run_op(ctx, req, a, b, outs, nout, timing);
}

int op_ctl_run(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
               int out_ndim, const uint64_t *out_shape, const char *out_path, bool timing)
{
    op_ctl_out o = {req->dtype, out_ndim, {0, 0}, out_path};
    for (int k = 0; k < out_ndim && k < 2; k++)
        o.shape[k] = out_shape[k];
    return op_ctl_run_outs(ctx, req, a, b, &o, 1, timing);
}

int op_ctl_load(const char *path, npy_array *a)
{
    if (ctl_resident_name(path)) /* "@NAME": gpuqd has it (ctl_resident.c) */
        return ctl_resident_open(ctl_current(), path, a);
    char err[512];
    (void)ctl_outfile_signals_on();              /* reading stdin may wait: Ctrl-C says so */
    int rc = npy_open(path, a, err, sizeof err); /* the data: ctl_run_op */
    if (rc)
        return ctl_fail(rc, err);
    return 0;
}

/* "LAT,LON" */
int op_ctl_parse_point(const char *s, double *lat, double *lon)
{
    const char *comma = strchr(s, ',');
    if (!comma || (size_t)(comma - s) >= 64)
        return -1;
    char first[64];
    memcpy(first, s, (size_t)(comma - s));
    first[comma - s] = '\0';
    return ctl_parse_double(first, lat) || ctl_parse_double(comma + 1, lon) ? -1 : 0;
}

/* "START:STOP:N" */
int op_ctl_parse_range(const char *s, double *start, double *stop, uint64_t *n)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    char *c1 = strchr(buf, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c1 || !c2)
        return -1;
    *c1 = *c2 = '\0';
    return ctl_parse_double(buf, start) || ctl_parse_double(c1 + 1, stop) ||
                   ctl_parse_u64(c2 + 1, n)
               ? -1
               : 0;
}

void op_ctl_shape_a(gpuq_request *req, const npy_array *a)
{
    req->ndim_a = (uint32_t)a->ndim;
    req->shape_a[0] = a->shape[0];
    req->shape_a[1] = a->ndim == 2 ? a->shape[1] : 0;
}

void op_ctl_shape_b(gpuq_request *req, const npy_array *b)
{
    req->ndim_b = (uint32_t)b->ndim;
    req->shape_b[0] = b->shape[0];
    req->shape_b[1] = b->ndim == 2 ? b->shape[1] : 0;
}

int op_ctl_set_enum(gpuq_request *req, const char *key, const char *s)
{
    if (gpuq_request_set_enum(req, key, s) == 0)
        return 0;
    const gpuq_op_def *d = op_def_of(req->op);
    int k = d ? op_key_index(d, key, strlen(key)) : -1;
    char list[256] = "";
    size_t at = 0;
    for (int i = 0; k >= 0 && i < d->keys[k].nnames && at < sizeof list; i++) {
        int w = snprintf(list + at, sizeof list - at, "%s%s", i ? "|" : "", d->keys[k].names[i]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
    return ctl_failf(GPUQ_E_BAD_ARGUMENT, "unknown %s '%s' (%s)", key, s, list);
}
#endif
