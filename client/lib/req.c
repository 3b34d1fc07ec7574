/* SPDX-License-Identifier: Apache-2.0 */
/* req.c - the public request builder (gpuq_req_*) and result accessors
 * (gpuq_result_*).
 *
 * The builder is generic on purpose: it writes each setter's key and value
 * as msgpack and knows no op, key or range, so a new op never changes it or
 * the ABI. What is valid is decided later, when conn.c decodes the header
 * req_encode produced with proto's gpuq_request_decode/gpuq_request_check:
 * the same code the daemon runs. The setters only refuse what can never be
 * sent (NULL pointers, an index beyond the two inputs/outputs, an input whose
 * byte length is not its shape's, a resident array's name that is no name:
 * gpuq_name_check); the first such error sticks to the request and its
 * submit returns it.
 */
#include "req.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 3, 4))) static int req_fail(gpuq_req *r, int code, const char *fmt,
                                                          ...)
{
    if (r->err == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->errmsg, sizeof r->errmsg, fmt, ap);
        va_end(ap);
        r->err = code;
    }
    return code;
}

gpuq_req *gpuq_req_new(const char *op)
{
    if (!op)
        return NULL;
    gpuq_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->op = strdup(op);
    if (!r->op)
        goto err_after_alloc;
    r->w = gpuq_mpw_new();
    if (!r->w)
        goto err_after_op;
    return r;

err_after_op:
    free(r->op);
err_after_alloc:
    free(r);
    return NULL;
}

void gpuq_req_free(gpuq_req *r)
{
    if (!r)
        return;
    gpuq_mpw_free(r->w);
    free(r->body);
    free(r->op);
    free(r);
}

const char *gpuq_req_errmsg(const gpuq_req *r)
{
    return r->errmsg;
}

/* Start one entry: checks the key and writes it. */
static int entry_key(gpuq_req *r, const char *key)
{
    if (!key)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "header key is NULL");
    if (strcmp(key, "deadline_ms") == 0)
        r->has_deadline = true;
    if (strcmp(key, "gate") == 0)
        r->has_gate = true;
    gpuq_mpw_str(r->w, key);
    r->n++;
    return 0;
}

int gpuq_req_set_str(gpuq_req *r, const char *key, const char *val)
{
    if (!val)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "value of \"%s\" is NULL", key ? key : "");
    int rc = entry_key(r, key);
    if (rc == 0)
        gpuq_mpw_str(r->w, val);
    return rc;
}

int gpuq_req_set_u64(gpuq_req *r, const char *key, uint64_t val)
{
    int rc = entry_key(r, key);
    if (rc == 0)
        gpuq_mpw_uint(r->w, val);
    return rc;
}

int gpuq_req_set_i64(gpuq_req *r, const char *key, int64_t val)
{
    int rc = entry_key(r, key);
    if (rc == 0)
        gpuq_mpw_int(r->w, val);
    return rc;
}

int gpuq_req_set_f64(gpuq_req *r, const char *key, double val)
{
    int rc = entry_key(r, key);
    if (rc == 0)
        gpuq_mpw_double(r->w, val);
    return rc;
}

int gpuq_req_set_bool(gpuq_req *r, const char *key, bool val)
{
    int rc = entry_key(r, key);
    if (rc == 0)
        gpuq_mpw_bool(r->w, val);
    return rc;
}

int gpuq_req_set_f64s(gpuq_req *r, const char *key, const double *vals, size_t n)
{
    if ((n && !vals) || n > UINT32_MAX)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "values of \"%s\" are NULL or too many",
                        key ? key : "");
    int rc = entry_key(r, key);
    if (rc)
        return rc;
    gpuq_mpw_array(r->w, (uint32_t)n);
    for (size_t k = 0; k < n; k++)
        gpuq_mpw_double(r->w, vals[k]);
    return 0;
}

int gpuq_req_set_range(gpuq_req *r, const char *key, double start, double stop, uint64_t n)
{
    int rc = entry_key(r, key);
    if (rc)
        return rc;
    gpuq_mpw_array(r->w, 3);
    gpuq_mpw_double(r->w, start);
    gpuq_mpw_double(r->w, stop);
    gpuq_mpw_uint(r->w, n);
    return 0;
}

int gpuq_req_set_timing(gpuq_req *r, bool on)
{
    return gpuq_req_set_bool(r, "timing", on);
}

/* All arrays of a request share the wire's one "dtype". */
static int use_dtype(gpuq_req *r, gpuq_dtype dt)
{
    if (!gpuq_dtype_name((gpuq_dtype)dt))
        return req_fail(r, GPUQ_E_BAD_DTYPE, "dtype %d is not f32, f64 or i64", (int)dt);
    if (r->dtype != GPUQ_DT_NONE && r->dtype != (int)dt)
        return req_fail(r, GPUQ_E_BAD_DTYPE, "dtype %s differs from the request's %s",
                        gpuq_dtype_name((gpuq_dtype)dt), gpuq_dtype_name((gpuq_dtype)r->dtype));
    r->dtype = dt;
    return 0;
}

int gpuq_req_set_dtype(gpuq_req *r, gpuq_dtype dt)
{
    return use_dtype(r, dt);
}

int gpuq_req_set_input(gpuq_req *r, unsigned idx, gpuq_dtype dt, unsigned ndim,
                       const uint64_t *shape, const void *data, size_t len)
{
    if (idx >= REQ_MAX_IO)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "input %u: only inputs 0 (A) and 1 (B)", idx);
    if (ndim < 1 || ndim > GPUQ_MAX_DIMS || !shape)
        return req_fail(r, GPUQ_E_BAD_SHAPE, "input %u has %u dimensions; 1 to %u allowed", idx,
                        ndim, GPUQ_MAX_DIMS);
    if (len && !data)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "input %u: %zu bytes at NULL", idx, len);
    int rc = use_dtype(r, dt);
    if (rc)
        return rc;
    uint64_t bytes = gpuq_dtype_size((gpuq_dtype)dt);
    for (unsigned k = 0; k < ndim; k++) {
        if (__builtin_mul_overflow(bytes, shape[k], &bytes))
            return req_fail(r, GPUQ_E_BAD_SHAPE, "input %u: its shape overflows", idx);
    }
    if (bytes != len)
        return req_fail(r, GPUQ_E_SIZE_MISMATCH,
                        "input %u has %zu bytes but its shape implies %llu", idx, len,
                        (unsigned long long)bytes);
    req_input *in = &r->in[idx];
    in->set = true;
    in->data = data;
    in->len = len;
    in->ndim = ndim;
    memcpy(in->shape, shape, ndim * sizeof *shape);
    r->in_res[idx] = false;
    return 0;
}

/* name into dst (GPUQ_RES_NAME_MAX + 1 bytes) when it is a resident
 * array's name (PROTOCOL.md 3.5); else the request's error, what leading
 * its message ("input 1"). */
static int take_name(gpuq_req *r, const char *what, const char *name, char *dst)
{
    if (!name)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "%s: the name is NULL", what);
    char why[128];
    size_t len = strlen(name);
    if (gpuq_name_check(name, len, why, sizeof why) != 0)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "%s: %s", what, why);
    memcpy(dst, name, len + 1);
    return 0;
}

int gpuq_req_set_input_resident(gpuq_req *r, unsigned idx, const char *name)
{
    if (idx >= REQ_MAX_IO)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "input %u: only inputs 0 (A) and 1 (B)", idx);
    char what[16];
    snprintf(what, sizeof what, "input %u", idx);
    int rc = take_name(r, what, name, r->in_name[idx]);
    if (rc)
        return rc;
    memset(&r->in[idx], 0, sizeof r->in[idx]);
    r->in_res[idx] = true;
    return 0;
}

int gpuq_req_set_output_resident(gpuq_req *r, unsigned idx, const char *name)
{
    if (idx >= REQ_MAX_IO)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "output %u: only outputs 0 and 1", idx);
    char what[16];
    snprintf(what, sizeof what, "output %u", idx);
    int rc = take_name(r, what, name, r->out_name[idx]);
    if (rc)
        return rc;
    r->out[idx].buf = NULL;
    r->out[idx].cap = 0;
    r->out_res[idx] = true;
    return 0;
}

int gpuq_req_set_access(gpuq_req *r, gpuq_access access)
{
    if (access != GPUQ_ACCESS_PRIVATE && access != GPUQ_ACCESS_ALL)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "access %d is neither private (0) nor all (1)",
                        (int)access);
    return gpuq_req_set_str(r, "access", access == GPUQ_ACCESS_ALL ? "all" : "private");
}

int gpuq_req_set_output(gpuq_req *r, unsigned idx, void *buf, size_t cap)
{
    if (idx >= REQ_MAX_IO)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "output %u: only outputs 0 and 1", idx);
    if (!buf && cap)
        return req_fail(r, GPUQ_E_BAD_ARGUMENT, "output %u: %zu bytes at NULL", idx, cap);
    r->out[idx].buf = buf;
    r->out[idx].cap = cap;
    r->out_res[idx] = false;
    return 0;
}

static void put_shape(gpuq_mpw *w, const char *key, const req_input *in)
{
    gpuq_mpw_str(w, key);
    gpuq_mpw_array(w, in->ndim);
    for (unsigned k = 0; k < in->ndim; k++)
        gpuq_mpw_uint(w, in->shape[k]);
}

int req_encode(gpuq_req *r, uint64_t id, const req_refs *refs, uint64_t deadline, uint8_t **out,
               size_t *len)
{
    /* Move what the setters wrote since last time to the end of body. */
    uint8_t *add = NULL;
    size_t add_len = 0;
    if (gpuq_mpw_take(r->w, &add, &add_len))
        return GPUQ_E_NO_MEMORY;
    if (add_len) {
        uint8_t *nb = realloc(r->body, r->body_len + add_len);
        if (!nb) {
            free(add);
            return GPUQ_E_NO_MEMORY;
        }
        memcpy(nb + r->body_len, add, add_len);
        r->body = nb;
        r->body_len += add_len;
    }
    free(add);

    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    uint32_t nin = refs && req_refs_any(refs->in_kind, refs->nin) ? refs->nin : 0;
    uint32_t nout = refs && req_refs_any(refs->out_kind, refs->nout) ? refs->nout : 0;
    if (r->has_deadline)
        deadline = 0; /* the request's own value stands */
    uint32_t n = 2 + r->n + (r->dtype != GPUQ_DT_NONE) + r->in[0].set + r->in[1].set + (nin > 0) +
                 (nout > 0) + (deadline > 0);
    gpuq_mpw_map(w, n);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, id);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, r->op);
    if (r->dtype != GPUQ_DT_NONE) {
        gpuq_mpw_str(w, "dtype");
        gpuq_mpw_str(w, gpuq_dtype_name((gpuq_dtype)r->dtype));
    }
    if (r->in[0].set)
        put_shape(w, "shape", &r->in[0]);
    if (r->in[1].set)
        put_shape(w, "shape_b", &r->in[1]);
    if (nin)
        gpuq_refs_write(w, "in", refs->in, nin, refs->in_kind,
                        (const char(*)[GPUQ_RES_NAME_MAX + 1]) r->in_name);
    if (nout)
        gpuq_refs_write(w, "out", refs->out, nout, refs->out_kind,
                        (const char(*)[GPUQ_RES_NAME_MAX + 1]) r->out_name);
    if (deadline) {
        gpuq_mpw_str(w, "deadline_ms");
        gpuq_mpw_uint(w, deadline);
    }
    if (r->body_len)
        gpuq_mpw_raw(w, r->body, r->body_len);
    int rc = gpuq_mpw_take(w, out, len);
    gpuq_mpw_free(w);
    return rc ? GPUQ_E_NO_MEMORY : 0;
}

uint32_t req_inputs(const gpuq_req *r)
{
    return r->in[1].set || r->in_res[1] ? 2 : r->in[0].set || r->in_res[0] ? 1 : 0;
}

bool req_has_resident_out(const gpuq_req *r)
{
    return r->out_res[0] || r->out_res[1];
}

void req_refs_init(const gpuq_req *r, uint32_t nin, uint32_t nout, req_refs *refs)
{
    memset(refs, 0, sizeof *refs);
    refs->nin = nin < REQ_MAX_IO ? nin : REQ_MAX_IO;
    refs->nout = nout < REQ_MAX_IO ? nout : REQ_MAX_IO;
    for (unsigned k = 0; k < REQ_MAX_IO; k++) {
        refs->in_kind[k] = r->in_res[k] ? GPUQ_REF_NAME : GPUQ_REF_WIRE;
        refs->out_kind[k] = r->out_res[k] ? GPUQ_REF_NAME : GPUQ_REF_WIRE;
    }
}

bool req_refs_any(const uint8_t *kinds, uint32_t n)
{
    for (uint32_t k = 0; k < n && k < REQ_MAX_IO; k++)
        if (kinds[k] != GPUQ_REF_WIRE)
            return true;
    return false;
}

bool req_refs_all_arena(const uint8_t *kinds, uint32_t n)
{
    for (uint32_t k = 0; k < n && k < REQ_MAX_IO; k++)
        if (kinds[k] != GPUQ_REF_ARENA)
            return false;
    return true;
}

/* ---- results ---- */

gpuq_result *gpuq_result_new(void)
{
    return calloc(1, sizeof(gpuq_result));
}

void result_reset(gpuq_result *res)
{
    free(res->info);
    free(res->payload);
    memset(res, 0, sizeof *res);
}

int result_from_reply(gpuq_result *res, const gpuq_reply *rep)
{
    result_reset(res);
    res->id = rep->id;
    res->status = rep->status;
    memcpy(res->message, rep->message, sizeof res->message);
    res->has_timing = rep->has_timing;
    res->timing = rep->timing;
    if (rep->info) {
        if (!(res->info = malloc(rep->info_len)))
            return GPUQ_E_NO_MEMORY;
        memcpy(res->info, rep->info, rep->info_len);
        res->info_len = rep->info_len;
    }
    if (rep->ndim > 0) {
        res->nout = 1;
        res->out[0].dtype = rep->dtype;
        res->out[0].ndim = rep->ndim;
        memcpy(res->out[0].shape, rep->shape, sizeof res->out[0].shape);
    }
    if (rep->ndim_b > 0) {
        res->nout = 2;
        res->out[1].dtype = rep->dtype_b;
        res->out[1].ndim = rep->ndim_b;
        memcpy(res->out[1].shape, rep->shape_b, sizeof res->out[1].shape);
    }
    return 0;
}

void gpuq_result_free(gpuq_result *res)
{
    if (!res)
        return;
    result_reset(res);
    free(res);
}

uint64_t gpuq_result_id(const gpuq_result *res)
{
    return res->id;
}
int gpuq_result_status(const gpuq_result *res)
{
    return res->status;
}
const char *gpuq_result_message(const gpuq_result *res)
{
    return res->message;
}
unsigned gpuq_result_outputs(const gpuq_result *res)
{
    return res->nout;
}

gpuq_dtype gpuq_result_dtype(const gpuq_result *res, unsigned idx)
{
    return idx < res->nout ? (gpuq_dtype)res->out[idx].dtype : GPUQ_DT_NONE;
}

unsigned gpuq_result_ndim(const gpuq_result *res, unsigned idx)
{
    return idx < res->nout ? res->out[idx].ndim : 0;
}

uint64_t gpuq_result_dim(const gpuq_result *res, unsigned idx, unsigned axis)
{
    return idx < res->nout && axis < res->out[idx].ndim ? res->out[idx].shape[axis] : 0;
}

size_t gpuq_result_bytes(const gpuq_result *res, unsigned idx)
{
    return idx < REQ_MAX_IO ? res->out[idx].bytes : 0;
}

int gpuq_result_timing(const gpuq_result *res, gpuq_timing_stage stage, double *us)
{
    const gpuq_timing *t = &res->timing;
    const double v[] = {t->queue_us, t->h2d_us, t->kernel_us, t->d2h_us, t->total_us};
    if (!res->has_timing || (unsigned)stage >= sizeof v / sizeof v[0])
        return GPUQ_E_BAD_ARGUMENT;
    *us = v[stage];
    return 0;
}

int gpuq_result_info(const gpuq_result *res, const uint8_t **info, size_t *len)
{
    if (!res->info)
        return GPUQ_E_BAD_ARGUMENT;
    *info = res->info;
    *len = res->info_len;
    return 0;
}

int gpuq_result_payload(const gpuq_result *res, const uint8_t **data, size_t *len)
{
    *data = res->payload;
    *len = res->payload_len;
    return 0;
}
