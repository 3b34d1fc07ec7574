/* SPDX-License-Identifier: Apache-2.0 */
/* resident.c - libgpuq's calls for resident arrays (PROTOCOL.md 3.5):
 * gpuq_put, gpuq_get, gpuq_list (and its JSON form) and gpuq_remove, each
 * one blocking request built with the public builder, as ops.c's calls are.
 *
 * Happy path: a name is checked with proto's gpuq_name_check before any
 * request is built; put sends the array as a blocking call's input (socket
 * or the staging arena, call.c), the decoder making its "name" the output
 * kept; get reads the array by the reply's dtype and shape (its size is
 * gpuqd's to say) into the caller's buffer or the result; list turns the
 * reply's arrays into a msgpack stream of maps, one per array, as
 * gpuq_sessions hands out sessions.
 *
 * Failures: a bad name is GPUQ_E_BAD_ARGUMENT before anything is sent; a
 * server error is the call's status with gpuqd's message (not_found,
 * permission_denied, ...); a list reply that is not what PROTOCOL.md says
 * is GPUQ_E_PROTOCOL. The connection serves on after any of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "conn_defs.h"
#include "conn_err.h"
#include "mpread.h"

/* name may be sent: 0, or GPUQ_E_BAD_ARGUMENT with c's message saying why. */
static int name_ok(gpuq_conn *c, const char *name)
{
    if (!name)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: the name is NULL");
    char why[128];
    if (gpuq_name_check(name, strlen(name), why, sizeof why) != 0)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: name: %s", why);
    return 0;
}

/* A request of op with "name", or NULL with c's error set. */
static gpuq_req *named_req(gpuq_conn *c, const char *op, const char *name)
{
    gpuq_req *r = gpuq_req_new(op);
    if (!r) {
        conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory building a request");
        return NULL;
    }
    gpuq_req_set_str(r, "name", name);
    return r;
}

/* Blocking call of r into res (c's scratch result when NULL); r is freed. */
static int finish(gpuq_conn *c, gpuq_req *r, gpuq_result *res)
{
    int rc = gpuq_call_req(c, r, res ? res : &c->scratch);
    gpuq_req_free(r);
    return rc;
}

int gpuq_put(gpuq_conn *c, const char *name, gpuq_dtype dt, unsigned ndim, const uint64_t *shape,
             const void *data, unsigned flags)
{
    int rc = name_ok(c, name);
    if (rc)
        return rc;
    if (ndim < 1 || ndim > GPUQ_MAX_DIMS || !shape)
        return conn_set_err(c, GPUQ_E_BAD_SHAPE, "bad_shape: put takes 1 or 2 dimensions, not %u",
                            ndim);
    uint64_t bytes = gpuq_dtype_size(dt);
    if (dt != GPUQ_DT_F32 && dt != GPUQ_DT_F64)
        return conn_set_err(c, GPUQ_E_BAD_DTYPE, "bad_dtype: put takes f32 or f64");
    for (unsigned k = 0; k < ndim; k++)
        if (__builtin_mul_overflow(bytes, shape[k], &bytes) || bytes > SIZE_MAX)
            return conn_set_err(c, GPUQ_E_BAD_SHAPE, "bad_shape: array size overflows");
    gpuq_req *r = named_req(c, "put", name);
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_input(r, 0, dt, ndim, shape, data, (size_t)bytes);
    gpuq_req_set_access(r, flags & GPUQ_ACCESS_ALL ? GPUQ_ACCESS_ALL : GPUQ_ACCESS_PRIVATE);
    if (flags & GPUQ_PERSIST)
        gpuq_req_set_bool(r, "persist", true);
    return finish(c, r, NULL);
}

int gpuq_get(gpuq_conn *c, const char *name, void *buf, size_t cap, gpuq_result *res)
{
    int rc = name_ok(c, name);
    if (rc)
        return rc;
    if (!buf && !res)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                            "bad_argument: get needs a buffer or a result for the bytes");
    gpuq_req *r = named_req(c, "get", name);
    if (!r)
        return GPUQ_E_NO_MEMORY;
    if (buf)
        gpuq_req_set_output(r, 0, buf, cap);
    gpuq_result *out = res ? res : &c->scratch;
    if ((rc = finish(c, r, out)) != 0 || buf)
        return rc;
    /* kept in res: its bytes are the array's, by the reply's shape */
    uint64_t want = gpuq_dtype_size(gpuq_result_dtype(out, 0));
    for (unsigned k = 0; k < gpuq_result_ndim(out, 0); k++)
        if (__builtin_mul_overflow(want, gpuq_result_dim(out, 0, k), &want))
            want = UINT64_MAX;
    if (gpuq_result_outputs(out) != 1 || want != out->payload_len) {
        out->status = conn_set_err(
            c, GPUQ_E_SIZE_MISMATCH, "size_mismatch: get: %zu bytes for an array of %llu",
            out->payload_len, (unsigned long long)(want == UINT64_MAX ? 0 : want));
        return out->status;
    }
    out->out[0].bytes = out->payload_len;
    return 0;
}

int gpuq_remove(gpuq_conn *c, const char *name)
{
    int rc = name_ok(c, name);
    if (rc)
        return rc;
    gpuq_req *r = named_req(c, "remove", name);
    return r ? finish(c, r, NULL) : GPUQ_E_NO_MEMORY;
}

/* The maps of the stream buf[len]: their number, or -1 when it is not a
 * stream of maps. */
static long count_maps(const uint8_t *buf, size_t len)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, buf, len);
    long n = 0;
    while (gpuq_mpr_left(&r) > 0) {
        if (gpuq_mpr_peek(&r) != GPUQ_MP_MAP || gpuq_mpr_skip(&r))
            return -1;
        n++;
    }
    return n;
}

int gpuq_list(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count)
{
    *doc = NULL;
    *len = 0;
    if (count)
        *count = 0;
    gpuq_req *r = gpuq_req_new("list");
    if (!r)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory building a request");
    int rc = finish(c, r, NULL);
    if (rc)
        return rc;
    /* the arrays: the payload, a stream of maps (PROTOCOL.md 3.5: info
     * {"format": "msgpack-stream", "count": N}, as sessions sends its
     * sessions); or, from a gpuqd that says them in info, its "arrays" */
    const uint8_t *data, *info = NULL;
    size_t dlen, ilen = 0;
    gpuq_result_payload(&c->scratch, &data, &dlen);
    uint8_t *d = NULL;
    size_t n = 0;
    gpuq_mpr m;
    uint32_t na;
    bool in_info = false;
    if (gpuq_result_info(&c->scratch, &info, &ilen) == 0) {
        gpuq_mpr_init(&m, info, ilen);
        in_info = !dlen && gpuq_mpr_find(&m, "arrays") == 0;
    }
    if (in_info) {
        if (gpuq_mpr_array(&m, &na))
            return conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: list info's \"arrays\" is no array");
        const uint8_t *first = m.p;
        for (uint32_t i = 0; i < na; i++)
            if (gpuq_mpr_skip(&m))
                return conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: list info is malformed");
        data = first;
        dlen = (size_t)(m.p - first); /* the elements, one after the other: a stream */
    }
    if (!(d = malloc(dlen + 1)))
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory");
    if (dlen)
        memcpy(d, data, dlen);
    n = dlen;
    d[n] = '\0';
    long maps = count_maps(d, n);
    uint64_t said = 0;
    if (maps < 0) {
        free(d);
        return conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: list: the arrays are not maps");
    }
    if (!in_info && info) { /* the count info gives, when it gives one */
        gpuq_mpr_init(&m, info, ilen);
        if (gpuq_mpr_find(&m, "count") == 0 &&
            (gpuq_mpr_uint(&m, &said) || said != (uint64_t)maps)) {
            free(d);
            return conn_set_err(c, GPUQ_E_PROTOCOL,
                                "protocol: list: %ld arrays where its info's count says %llu", maps,
                                (unsigned long long)said);
        }
    }
    *doc = d;
    *len = n;
    if (count)
        *count = (uint32_t)maps;
    return 0;
}

int gpuq_list_json(gpuq_conn *c, char *buf, size_t cap)
{
    uint8_t *doc;
    size_t len;
    int rc = gpuq_list(c, &doc, &len, NULL);
    if (rc)
        return rc;
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    size_t at = 0;
    bool full = cap < 3;
    if (!full)
        buf[at++] = '[';
    for (unsigned i = 0; !full && rc == 0 && gpuq_mpr_left(&r) > 0; i++) {
        if (i)
            buf[at++] = ',';
        rc = gpuq_mpr_to_json(&r, buf + at, cap - at - 1); /* room for the ']' */
        at += strlen(buf + at);
        full = rc == GPUQ_E_TOO_LARGE;
    }
    free(doc);
    if (!full && rc == 0) {
        buf[at++] = ']';
        buf[at] = '\0';
        return 0;
    }
    if (cap)
        buf[0] = '\0';
    if (rc && rc != GPUQ_E_TOO_LARGE)
        return conn_set_err(c, rc, "list document is not valid msgpack");
    return conn_set_err(c, GPUQ_E_TOO_LARGE, "too_large: list JSON does not fit %zu bytes", cap);
}
