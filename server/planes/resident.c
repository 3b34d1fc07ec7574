/* SPDX-License-Identifier: Apache-2.0 */
/* resident.c - see resident.h. */
#include "resident.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "mpwrite.h"

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h % RESIDENT_BUCKETS;
}

void resident_init(resident_books *bk, backend *b)
{
    memset(bk, 0, sizeof *bk);
    bk->b = b;
}

/* ---- per-uid books ---- */

/* The entry of uid, added (zeroed) when add; NULL when absent (or out of
 * memory while adding). */
static resident_owner *owner_of(resident_books *bk, uid_t uid, bool add)
{
    uint32_t lo = 0, hi = bk->nowners;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (bk->owners[mid].uid < uid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < bk->nowners && bk->owners[lo].uid == uid)
        return &bk->owners[lo];
    if (!add)
        return NULL;
    if (bk->nowners == bk->cap_owners) {
        uint32_t cap = bk->cap_owners ? bk->cap_owners * 2 : 8;
        resident_owner *v = realloc(bk->owners, cap * sizeof *v);
        if (!v)
            return NULL;
        bk->owners = v;
        bk->cap_owners = cap;
    }
    memmove(&bk->owners[lo + 1], &bk->owners[lo], (bk->nowners - lo) * sizeof *bk->owners);
    bk->nowners++;
    bk->owners[lo] = (resident_owner){.uid = uid};
    return &bk->owners[lo];
}

/* Drop uid's entry once nothing is charged to it. */
static void owner_trim(resident_books *bk, resident_owner *o)
{
    if (o->arrays || o->bytes)
        return;
    uint32_t at = (uint32_t)(o - bk->owners);
    memmove(o, o + 1, (bk->nowners - at - 1) * sizeof *o);
    bk->nowners--;
}

int resident_reserve(resident_books *bk, uid_t uid, const char *name, uint64_t bytes,
                     uint64_t uid_cap, uint64_t total_cap, char *msg, size_t cap)
{
    resident_owner *o = owner_of(bk, uid, false);
    uint64_t mine = o ? o->bytes : 0;
    if (bk->count >= GPUQ_MAX_RESIDENT) {
        snprintf(msg, cap, "resident array \"%.*s\": %u resident arrays exist (the most)",
                 RESIDENT_SHOW(name), GPUQ_MAX_RESIDENT);
        return GPUQ_E_TOO_LARGE;
    }
    if (bytes > uid_cap || mine > uid_cap - bytes) {
        snprintf(msg, cap,
                 "resident array \"%.*s\" of %llu bytes: uid %u would hold %llu, over its "
                 "resident_bytes %llu",
                 RESIDENT_SHOW(name), (unsigned long long)bytes, (unsigned)uid,
                 (unsigned long long)(mine + bytes), (unsigned long long)uid_cap);
        return GPUQ_E_TOO_LARGE;
    }
    if (bytes > total_cap) {
        snprintf(msg, cap,
                 "resident array \"%.*s\" of %llu bytes is over total_resident %llu by itself",
                 RESIDENT_SHOW(name), (unsigned long long)bytes, (unsigned long long)total_cap);
        return GPUQ_E_TOO_LARGE;
    }
    if (bk->bytes > total_cap - bytes) {
        snprintf(msg, cap,
                 "resident array \"%.*s\" of %llu bytes: resident arrays hold %llu of "
                 "total_resident %llu (retry after a remove)",
                 RESIDENT_SHOW(name), (unsigned long long)bytes, (unsigned long long)bk->bytes,
                 (unsigned long long)total_cap);
        return GPUQ_E_BUSY;
    }
    if (!(o = owner_of(bk, uid, true))) {
        snprintf(msg, cap, "resident array \"%.*s\": out of memory for its books",
                 RESIDENT_SHOW(name));
        return GPUQ_E_NO_MEMORY;
    }
    o->bytes += bytes;
    bk->bytes += bytes;
    bk->count++;
    return 0;
}

void resident_unreserve(resident_books *bk, uid_t uid, uint64_t bytes)
{
    resident_owner *o = owner_of(bk, uid, false);
    if (!o) {
        log_error("resident: a reservation of uid %u was not on the books", (unsigned)uid);
        return;
    }
    o->bytes -= bytes;
    bk->bytes -= bytes;
    bk->count--;
    owner_trim(bk, o);
}

/* ---- the table ---- */

resident *resident_find(resident_books *bk, const char *name)
{
    for (resident *a = bk->bucket[name_hash(name)]; a; a = a->hnext)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

bool resident_can_read(const resident *a, uid_t uid, bool admin)
{
    return admin || a->owner == uid || a->access == GPUQ_ACCESS_ALL;
}

void resident_ref(resident *a)
{
    a->refs++;
}

void resident_unref(resident *a)
{
    if (--a->refs > 0)
        return;
    resident_books *bk = a->books;
    if (a->mem && bk->b->ops->res_free)
        bk->b->ops->res_free(bk->b, a->device, a->mem);
    resident_owner *o = owner_of(bk, a->charge, false);
    if (o) {
        o->bytes -= a->bytes;
        o->arrays--;
        owner_trim(bk, o);
    }
    bk->bytes -= a->bytes;
    bk->count--;
    free(a);
}

void resident_unname(resident *a)
{
    if (!a->named)
        return;
    resident_books *bk = a->books;
    resident **pp = &bk->bucket[name_hash(a->name)];
    while (*pp && *pp != a)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = a->hnext;
    a->hnext = NULL;
    a->named = false;
    bk->named--;
    resident_unref(a); /* the table's */
}

int resident_commit(resident_books *bk, const resident_spec *sp, bool *replaced, char *msg,
                    size_t cap)
{
    resident *old = resident_find(bk, sp->name);
    if (old && old->owner != sp->uid && !sp->admin) {
        snprintf(msg, cap,
                 "resident array \"%.*s\" belongs to uid %u; only it or an admin may "
                 "replace it",
                 RESIDENT_SHOW(sp->name), (unsigned)old->owner);
        return GPUQ_E_PERMISSION;
    }
    resident_owner *o = owner_of(bk, sp->uid, false);
    if (!o) { /* resident_reserve made it */
        snprintf(msg, cap, "resident array \"%.*s\": no reservation for it",
                 RESIDENT_SHOW(sp->name));
        return GPUQ_E_INTERNAL;
    }
    resident *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(msg, cap, "resident array \"%.*s\": out of memory", RESIDENT_SHOW(sp->name));
        return GPUQ_E_NO_MEMORY;
    }
    snprintf(a->name, sizeof a->name, "%s", sp->name);
    a->owner = old ? old->owner : sp->uid;
    a->charge = sp->uid;
    a->access = sp->access;
    a->dtype = sp->dtype;
    a->ndim = sp->ndim;
    memcpy(a->shape, sp->shape, sp->ndim * sizeof *a->shape);
    a->bytes = sp->bytes;
    a->device = sp->device;
    a->mem = sp->mem;
    a->books = bk;
    a->refs = 1; /* the table's */
    o->arrays++; /* its bytes and count were reserved */
    *replaced = old != NULL;
    if (old)
        resident_unname(old); /* lives on while requests use it */
    uint32_t h = name_hash(a->name);
    a->hnext = bk->bucket[h];
    bk->bucket[h] = a;
    a->named = true;
    bk->named++;
    return 0;
}

void resident_close(resident_books *bk)
{
    for (uint32_t h = 0; h < RESIDENT_BUCKETS; h++)
        while (bk->bucket[h])
            resident_unname(bk->bucket[h]);
    if (bk->count)
        log_error("resident: %u arrays (%llu bytes) still in use at shutdown", bk->count,
                  (unsigned long long)bk->bytes);
    else {
        free(bk->owners);
        bk->owners = NULL;
        bk->nowners = bk->cap_owners = 0;
    }
}

static int by_name(const void *x, const void *y)
{
    return strcmp((*(resident *const *)x)->name, (*(resident *const *)y)->name);
}

int resident_visible(resident_books *bk, uid_t uid, bool admin, resident ***out)
{
    *out = NULL;
    if (bk->named == 0)
        return 0;
    resident **v = malloc(bk->named * sizeof *v);
    if (!v)
        return -1;
    int n = 0;
    for (uint32_t h = 0; h < RESIDENT_BUCKETS; h++)
        for (resident *a = bk->bucket[h]; a; a = a->hnext)
            if (resident_can_read(a, uid, admin))
                v[n++] = a;
    qsort(v, (size_t)n, sizeof *v, by_name);
    *out = v;
    return n;
}

void resident_write_kind(gpuq_mpw *w, gpuq_dtype dt, uint32_t ndim, const uint64_t *shape)
{
    gpuq_mpw_str(w, "dtype");
    gpuq_mpw_str(w, gpuq_dtype_name(dt));
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, ndim);
    for (uint32_t k = 0; k < ndim; k++)
        gpuq_mpw_uint(w, shape[k]);
}

void resident_write_desc(gpuq_mpw *w, const char *name, uid_t owner, uint8_t access, gpuq_dtype dt,
                         uint32_t ndim, const uint64_t *shape, uint64_t bytes, int device)
{
    gpuq_mpw_str(w, "name");
    gpuq_mpw_str(w, name);
    gpuq_mpw_str(w, "owner");
    gpuq_mpw_uint(w, (uint64_t)owner);
    gpuq_mpw_str(w, "access");
    gpuq_mpw_str(w, access == GPUQ_ACCESS_ALL ? "all" : "private");
    resident_write_kind(w, dt, ndim, shape);
    gpuq_mpw_str(w, "bytes");
    gpuq_mpw_uint(w, bytes);
    gpuq_mpw_str(w, "device");
    gpuq_mpw_int(w, device);
}

uint32_t resident_users(const resident *a)
{
    return (uint32_t)(a->refs - (a->named ? 1 : 0));
}
