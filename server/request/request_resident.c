/* SPDX-License-Identifier: Apache-2.0 */
/* request_resident.c - see request_resident.h. */
#include "request_resident.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "mpwrite.h"

/* "[3, 4]" into buf. */
static void shape_str(char *buf, size_t cap, uint32_t ndim, const uint64_t *shape)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint32_t k = 0; k < ndim && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", k ? ", " : "",
                              (unsigned long long)shape[k]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* Input k's shape key (shape for A, shape_b for B) against array a:
 * filled in when absent. */
static int fill_shape(gpuq_request *q, unsigned k, const resident *a, char *msg, size_t cap)
{
    uint32_t *ndim = k == 0 ? &q->ndim_a : &q->ndim_b;
    uint64_t *shape = k == 0 ? q->shape_a : q->shape_b;
    if (*ndim == 0) {
        *ndim = a->ndim;
        memcpy(shape, a->shape, a->ndim * sizeof *shape);
        return 0;
    }
    if (*ndim == a->ndim && memcmp(shape, a->shape, a->ndim * sizeof *shape) == 0)
        return 0;
    char sent[64], have[64];
    shape_str(sent, sizeof sent, *ndim, shape);
    shape_str(have, sizeof have, a->ndim, a->shape);
    snprintf(msg, cap, "%s %s differs from resident array \"%.*s\" (in[%u]), which is %s",
             k == 0 ? "shape" : "shape_b", sent, RESIDENT_SHOW(a->name), k, have);
    return GPUQ_E_BAD_SHAPE;
}

int request_resident_inputs(request *r, char *msg, size_t cap)
{
    session *s = r->s;
    gpuq_request *q = &r->req;
    if (q->op == GPUQ_OP_GET) { /* get's dtype and shape, if sent, are ignored */
        q->dtype = GPUQ_DT_NONE;
        q->ndim_a = q->ndim_b = 0;
    }
    for (uint32_t k = 0; k < q->nin_ref && k < GPUQ_MAX_INPUTS; k++) {
        if (q->in_kind[k] != GPUQ_REF_NAME)
            continue;
        resident *a = resident_find(&s->srv->resident, q->in_name[k]);
        if (!a) {
            snprintf(msg, cap, "no resident array \"%.*s\" (in[%u])", RESIDENT_SHOW(q->in_name[k]),
                     k);
            return GPUQ_E_NOT_FOUND;
        }
        if (!resident_can_read(a, s->uid, s->caps.admin)) {
            snprintf(msg, cap,
                     "resident array \"%.*s\" (in[%u]) is private to uid %u; uid %u may not read "
                     "it",
                     RESIDENT_SHOW(a->name), k, (unsigned)a->owner, (unsigned)s->uid);
            return GPUQ_E_PERMISSION;
        }
        if (a->device != s->binfo.device) {
            snprintf(msg, cap,
                     "resident array \"%.*s\" (in[%u]) is on device %d; this session uses "
                     "device %d",
                     RESIDENT_SHOW(a->name), k, a->device, s->binfo.device);
            return GPUQ_E_BAD_ARGUMENT;
        }
        int rc = fill_shape(q, k, a, msg, cap);
        if (rc)
            return rc;
        if (q->dtype == GPUQ_DT_NONE) {
            q->dtype = a->dtype;
        } else if (q->dtype != a->dtype) {
            snprintf(
                msg, cap, "dtype %s differs from resident array \"%.*s\" (in[%u]), which is %s",
                gpuq_dtype_name(q->dtype), RESIDENT_SHOW(a->name), k, gpuq_dtype_name(a->dtype));
            return GPUQ_E_BAD_DTYPE;
        }
        resident_ref(a);
        r->res_in[k] = a;
    }
    return 0;
}

int request_resident_reserve(request *r, char *msg, size_t cap)
{
    session *s = r->s;
    server *srv = s->srv;
    const gpuq_request *q = &r->req;
    for (uint32_t k = 0; k < GPUQ_MAX_INPUTS; k++)
        r->job.res_in[k] = r->res_in[k] ? r->res_in[k]->mem : NULL;
    for (uint32_t k = 0; k < q->nout_ref && k < GPUQ_MAX_OUTPUTS; k++) {
        if (q->out_kind[k] != GPUQ_REF_NAME)
            continue;
        const resident *old = resident_find(&srv->resident, q->out_name[k]);
        if (old && old->owner != s->uid && !s->caps.admin) {
            snprintf(msg, cap,
                     "resident array \"%.*s\" (out[%u]) belongs to uid %u; uid %u may not "
                     "replace it",
                     RESIDENT_SHOW(old->name), k, (unsigned)old->owner, (unsigned)s->uid);
            return GPUQ_E_PERMISSION;
        }
        if (q->persist && !srv->store.on) {
            snprintf(msg, cap,
                     "resident array \"%.*s\" (out[%u]): persist, but gpuqd has no state "
                     "directory (gpuqd --state-dir)",
                     RESIDENT_SHOW(q->out_name[k]), k);
            return GPUQ_E_STORAGE;
        }
        uint64_t bytes = r->sz.out[k].bytes;
        int rc = resident_reserve(&srv->resident, s->uid, q->out_name[k], bytes,
                                  s->caps.resident_bytes, srv->cfg.lim.total_resident, msg, cap);
        if (rc)
            return rc;
        r->keep_bytes[k] = bytes;
        r->job.keep[k] = 1;
    }
    return 0;
}

/* A put's reply info: what was stored. */
static int put_info(request *r, const resident *a, bool replaced)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 6);
    gpuq_mpw_str(w, "name");
    gpuq_mpw_str(w, a->name);
    gpuq_mpw_str(w, "bytes");
    gpuq_mpw_uint(w, a->bytes);
    resident_write_kind(w, a->dtype, a->ndim, a->shape);
    gpuq_mpw_str(w, "device");
    gpuq_mpw_int(w, a->device);
    gpuq_mpw_str(w, "replaced");
    gpuq_mpw_bool(w, replaced);
    int rc = gpuq_mpw_take(w, &r->info, &r->info_len);
    gpuq_mpw_free(w);
    return rc;
}

int request_resident_commit(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    const gpuq_request *q = &r->req;
    for (uint32_t k = 0; k < q->nout_ref && k < GPUQ_MAX_OUTPUTS; k++) {
        if (!r->job.keep[k] || !r->keep_bytes[k])
            continue;
        const gpuq_out *o = &r->sz.out[k];
        resident_spec sp = {.name = q->out_name[k],
                            .uid = s->uid,
                            .admin = s->caps.admin,
                            .access = q->has_access ? q->access : GPUQ_ACCESS_PRIVATE,
                            .dtype = o->dtype,
                            .ndim = o->ndim,
                            .shape = o->shape,
                            .bytes = r->keep_bytes[k],
                            .device = s->binfo.device,
                            .mem = r->job.res_out[k]};
        bool replaced = false;
        /* an array kept without persist replaces a persisted one: its file
         * goes first (a restart must not bring the old one back) */
        resident *old = resident_find(&srv->resident, sp.name);
        bool may = old && (old->owner == s->uid || s->caps.admin);
        int rc;
        if (may && old->persisted && !q->persist) {
            if ((rc = resident_store_unlink(&srv->store, sp.name, r->message, sizeof r->message)))
                return rc;
            old->persisted = false;
        }
        rc = resident_commit(&srv->resident, &sp, &replaced, r->message, sizeof r->message);
        if (rc)
            return rc; /* what is left is released with r */
        resident *now = resident_find(&srv->resident, sp.name);
        if (now)
            now->persisted = q->persist;
        r->job.res_out[k] = NULL; /* the array's now */
        r->keep_bytes[k] = 0;     /* and its reservation */
        log_debug("session %llu: resident array \"%.*s\" stored (%llu bytes%s)",
                  (unsigned long long)s->id, RESIDENT_SHOW(sp.name), (unsigned long long)sp.bytes,
                  replaced ? ", replacing the old one" : "");
        if (q->op == GPUQ_OP_PUT) {
            const resident *a = resident_find(&srv->resident, sp.name);
            if (a && (rc = put_info(r, a, replaced)) != 0) {
                snprintf(r->message, sizeof r->message, "out of memory for the reply");
                return rc;
            }
        }
    }
    return 0;
}

/* One persisted output's write finished (loop thread). */
static void store_done(void *arg, int rc, const char *why)
{
    request *r = arg;
    if (rc && !r->store_rc) {
        r->store_rc = rc;
        snprintf(r->message, sizeof r->message, "%s", why);
    }
    if (--r->store_pending > 0)
        return;
    free(r->store_jobs);
    r->store_jobs = NULL;
    /* every file is in place: now the arrays themselves (a kill before
     * this loads the new files at the next start: "as meant to be") */
    r->status = r->store_rc ? r->store_rc : request_resident_commit(r);
    r->store_then(r);
}

int request_resident_finish(request *r, void (*then)(request *r))
{
    session *s = r->s;
    server *srv = s->srv;
    const gpuq_request *q = &r->req;
    int n = 0;
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++)
        n += r->job.keep[k] && r->keep_bytes[k] && r->job.res_out[k];
    if (!q->persist || n == 0) {
        r->status = request_resident_commit(r);
        return 0;
    }
    r->store_jobs = calloc((size_t)n, sizeof *r->store_jobs);
    if (!r->store_jobs) {
        snprintf(r->message, sizeof r->message, "out of memory for the writes to persist");
        r->status = GPUQ_E_NO_MEMORY;
        return 0;
    }
    r->store_then = then;
    r->store_rc = 0;
    r->store_pending = n;
    int i = 0;
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++) {
        if (!r->job.keep[k] || !r->keep_bytes[k] || !r->job.res_out[k])
            continue;
        resident_store_job *j = &r->store_jobs[i++];
        const gpuq_out *o = &r->sz.out[k];
        const resident *old = resident_find(&srv->resident, q->out_name[k]);
        snprintf(j->name, sizeof j->name, "%s", q->out_name[k]);
        j->owner = old ? old->owner : s->uid; /* an admin's replacement keeps the owner */
        j->access = q->has_access ? q->access : GPUQ_ACCESS_PRIVATE;
        j->dtype = o->dtype;
        j->ndim = o->ndim;
        memcpy(j->shape, o->shape, sizeof j->shape);
        j->bytes = o->bytes;
        j->device = s->binfo.device;
        j->mem = r->job.res_out[k];
        j->done = store_done;
        j->arg = r;
        (void)resident_store_write(&srv->store, j); /* on: checked at the header */
    }
    return 1;
}

void request_resident_release(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    for (uint32_t k = 0; k < GPUQ_MAX_INPUTS; k++) {
        if (r->res_in[k])
            resident_unref(r->res_in[k]);
        r->res_in[k] = NULL;
        r->job.res_in[k] = NULL;
    }
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++) {
        if (r->job.res_out[k] && srv->b->ops->res_free)
            srv->b->ops->res_free(srv->b, s->binfo.device, r->job.res_out[k]);
        r->job.res_out[k] = NULL;
        if (r->keep_bytes[k])
            resident_unreserve(&srv->resident, s->uid, r->keep_bytes[k]);
        r->keep_bytes[k] = 0;
    }
}
