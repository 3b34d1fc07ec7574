/* SPDX-License-Identifier: Apache-2.0 */
/* request_encode.c - a gpuq_request into a msgpack header.
 *
 * Writes id, op, timing, then what the op's def says it uses: dtype (compute
 * ops), shapes, the hello and admin fields, and each op key that is set or
 * flagged GPUQ_KEYF_ENCODE_DEFAULT, in key-table order. Only keys the op
 * takes are written, so the strict decoder accepts what this writes.
 */
#include <string.h>

#include "errors.h"
#include "hdr_util.h"
#include "header.h"
#include "mpwrite.h"
#include "op_def.h"

static void encode_arg(gpuq_mpw *w, const gpuq_key_def *kd, const gpuq_arg *v)
{
    gpuq_mpw_str(w, kd->name);
    switch (kd->type) {
    case GPUQ_ARG_BOOL:
        gpuq_mpw_bool(w, v->b);
        break;
    case GPUQ_ARG_UINT:
        gpuq_mpw_uint(w, v->u);
        break;
    case GPUQ_ARG_INT:
        gpuq_mpw_int(w, v->i);
        break;
    case GPUQ_ARG_DOUBLE:
        gpuq_mpw_double(w, v->d);
        break;
    case GPUQ_ARG_ENUM: /* setters keep e in range; a corrupt one goes as nil (refused) */
        if (v->e >= 0 && v->e < kd->nnames)
            gpuq_mpw_str(w, kd->names[v->e]);
        else
            gpuq_mpw_nil(w);
        break;
    case GPUQ_ARG_PAIR:
        gpuq_mpw_array(w, 2);
        gpuq_mpw_double(w, v->pair[0]);
        gpuq_mpw_double(w, v->pair[1]);
        break;
    case GPUQ_ARG_RANGE:
        gpuq_mpw_array(w, 3);
        gpuq_mpw_double(w, v->range.start);
        gpuq_mpw_double(w, v->range.stop);
        gpuq_mpw_uint(w, v->range.n);
        break;
    }
}

void gpuq_refs_write(gpuq_mpw *w, const char *key, const gpuq_ref *refs, uint32_t count,
                     const uint8_t *kinds, const char (*names)[GPUQ_RES_NAME_MAX + 1])
{
    gpuq_mpw_str(w, key);
    gpuq_mpw_array(w, count);
    for (uint32_t k = 0; k < count; k++) {
        uint8_t kind = kinds ? kinds[k] : GPUQ_REF_ARENA;
        if (kind == GPUQ_REF_WIRE) {
            gpuq_mpw_nil(w);
        } else if (kind == GPUQ_REF_NAME && names) {
            char name[GPUQ_RES_NAME_MAX + 1];
            memcpy(name, names[k], GPUQ_RES_NAME_MAX);
            name[GPUQ_RES_NAME_MAX] = '\0';
            gpuq_mpw_str(w, name);
        } else {
            gpuq_mpw_array(w, 3);
            gpuq_mpw_uint(w, refs[k].arena);
            gpuq_mpw_uint(w, refs[k].offset);
            gpuq_mpw_uint(w, refs[k].length);
        }
    }
}

static void encode_common(gpuq_mpw *w, uint32_t *n, const gpuq_request *req, unsigned flags)
{
    const char *s;
    if ((flags & GPUQ_OPF_COMPUTE) && (s = gpuq_dtype_name(req->dtype)) != NULL)
        hdr_kv_str(w, n, "dtype", s);
    if (flags & GPUQ_OPF_HELLO) {
        gpuq_mpw_str(w, "version");
        gpuq_mpw_uint(w, req->version);
        (*n)++;
        if (req->client[0]) {
            char name[GPUQ_CLIENT_NAME_MAX + 1];
            memcpy(name, req->client, GPUQ_CLIENT_NAME_MAX);
            name[GPUQ_CLIENT_NAME_MAX] = '\0';
            hdr_kv_str(w, n, "client", name);
        }
        gpuq_mpw_str(w, "priority");
        gpuq_mpw_int(w, req->priority);
        gpuq_mpw_str(w, "device");
        gpuq_mpw_int(w, req->device);
        *n += 2;
    }
    if (flags & GPUQ_OPF_SHAPES) {
        if (req->ndim_a)
            hdr_kv_shape(w, n, "shape", req->ndim_a, req->shape_a);
        if (req->ndim_b)
            hdr_kv_shape(w, n, "shape_b", req->ndim_b, req->shape_b);
    }
    if (flags & GPUQ_OPF_SESSION) {
        gpuq_mpw_str(w, "session");
        gpuq_mpw_uint(w, req->session);
        (*n)++;
    }
    if (flags & GPUQ_OPF_LIMIT) {
        char name[GPUQ_LIMIT_NAME_MAX + 1];
        memcpy(name, req->limit, GPUQ_LIMIT_NAME_MAX);
        name[GPUQ_LIMIT_NAME_MAX] = '\0';
        hdr_kv_str(w, n, "limit", name);
        gpuq_mpw_str(w, "value");
        gpuq_mpw_uint(w, req->value);
        (*n)++;
    }
    /* any op: the check says which take them; put's out and get's in are
     * its "name" (the decoder's expansion), not written twice */
    if (req->nin_ref && req->op != GPUQ_OP_GET) {
        gpuq_refs_write(w, "in", req->in_ref,
                        req->nin_ref < GPUQ_MAX_INPUTS ? req->nin_ref : GPUQ_MAX_INPUTS,
                        req->in_kind, (const char(*)[GPUQ_RES_NAME_MAX + 1]) req->in_name);
        (*n)++;
    }
    if (req->nout_ref && req->op != GPUQ_OP_PUT) {
        gpuq_refs_write(w, "out", req->out_ref,
                        req->nout_ref < GPUQ_MAX_OUTPUTS ? req->nout_ref : GPUQ_MAX_OUTPUTS,
                        req->out_kind, (const char(*)[GPUQ_RES_NAME_MAX + 1]) req->out_name);
        (*n)++;
    }
    if (req->name[0]) {
        char name[GPUQ_RES_NAME_MAX + 1];
        memcpy(name, req->name, GPUQ_RES_NAME_MAX);
        name[GPUQ_RES_NAME_MAX] = '\0';
        hdr_kv_str(w, n, "name", name);
    }
    if (req->has_access)
        hdr_kv_str(w, n, "access", req->access == GPUQ_ACCESS_ALL ? "all" : "private");
    if (req->persist) {
        gpuq_mpw_str(w, "persist");
        gpuq_mpw_bool(w, true);
        (*n)++;
    }
    if (req->has_size) {
        gpuq_mpw_str(w, "size");
        gpuq_mpw_uint(w, req->size);
        (*n)++;
    }
    if (req->has_arena) {
        gpuq_mpw_str(w, "arena");
        gpuq_mpw_uint(w, req->arena);
        (*n)++;
    }
    if (req->deadline_ms) {
        gpuq_mpw_str(w, "deadline_ms");
        gpuq_mpw_uint(w, req->deadline_ms);
        (*n)++;
    }
    if (req->has_request) {
        gpuq_mpw_str(w, "request");
        gpuq_mpw_uint(w, req->request);
        (*n)++;
    }
    if (req->gate) {
        gpuq_mpw_str(w, "gate");
        gpuq_mpw_bool(w, true);
        (*n)++;
    }
    if (req->progress) {
        gpuq_mpw_str(w, "progress");
        gpuq_mpw_bool(w, true);
        (*n)++;
    }
    if (req->has_bytes) {
        gpuq_mpw_str(w, "bytes");
        gpuq_mpw_uint(w, req->bytes);
        (*n)++;
    }
}

int gpuq_request_encode(const gpuq_request *req, uint8_t **out, size_t *outlen)
{
    gpuq_mpw *w = hdr_begin_map(0);
    const gpuq_op_def *d = op_def_of(req->op);
    uint32_t n = 0;

    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, req->id);
    n++;
    if (d)
        hdr_kv_str(w, &n, "op", d->name);
    if (req->timing) {
        gpuq_mpw_str(w, "timing");
        gpuq_mpw_bool(w, true);
        n++;
    }
    if (d) {
        encode_common(w, &n, req, d->flags);
        for (unsigned k = 0; k < d->nkeys; k++) {
            bool set = req->args_set & (1u << k);
            if (!set && !(d->keys[k].flags & GPUQ_KEYF_ENCODE_DEFAULT))
                continue;
            encode_arg(w, &d->keys[k], set ? &req->args[k] : &d->keys[k].def);
            n++;
        }
    }
    return hdr_finish_map(w, n, 0, out, outlen);
}
