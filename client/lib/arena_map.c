/* SPDX-License-Identifier: Apache-2.0 */
/* arena_map.c - the arenas a connection has mapped: carve arrays out of
 * them (gpuq_arena_alloc/free), and name those arrays by reference in
 * requests (arena_refs_for, for conn.c's submit). Opening and closing an
 * arena are requests: arena.c's.
 *
 * The allocator's bookkeeping lives in libgpuq's heap, never in the shared
 * bytes (the daemon writes results there): a sorted array of segments that
 * cover the arena, each free or used, split on alloc (first fit, 64-byte
 * aligned) and merged with free neighbours on free. */
#include "arena_map.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "conn_defs.h"
#include "conn_err.h"

int arena_map_add(gpuq_conn *c, uint64_t id, uint64_t size, int fd, gpuq_arena **out)
{
    gpuq_arena *a = calloc(1, sizeof *a);
    if (a)
        a->segs = malloc(sizeof *a->segs * 8);
    if (!a || !a->segs) {
        free(a);
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory");
    }
    void *p = size <= SIZE_MAX ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                               : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(a->segs);
        free(a);
        return conn_set_err(c, GPUQ_E_IO, "cannot map arena %llu: %m", (unsigned long long)id);
    }
    a->c = c, a->id = id, a->base = p, a->size = size;
    a->cap = 8;
    a->nseg = 1;
    a->segs[0] = (seg){0, size, false};
    a->next = c->arenas;
    c->arenas = a;
    *out = a;
    return 0;
}

void arena_unmap(gpuq_arena *a)
{
    gpuq_arena **pp = &a->c->arenas;
    while (*pp && *pp != a)
        pp = &(*pp)->next;
    if (*pp)
        *pp = a->next;
    munmap(a->base, (size_t)a->size);
    free(a->segs);
    free(a);
}

void arena_unmap_all(gpuq_conn *c)
{
    gpuq_arena **head = &c->arenas;
    while (*head)
        arena_unmap(*head);
}

void *gpuq_arena_base(const gpuq_arena *a)
{
    return a->base;
}

uint64_t gpuq_arena_size(const gpuq_arena *a)
{
    return a->size;
}

uint64_t gpuq_arena_id(const gpuq_arena *a)
{
    return a->id;
}

/* Insert a segment at index i (room made). */
static bool seg_insert(gpuq_arena *a, size_t i, seg s)
{
    if (a->nseg == a->cap) {
        seg *ns = realloc(a->segs, sizeof *ns * a->cap * 2);
        if (!ns)
            return false;
        a->segs = ns;
        a->cap *= 2;
    }
    memmove(&a->segs[i + 1], &a->segs[i], sizeof *a->segs * (a->nseg - i));
    a->segs[i] = s;
    a->nseg++;
    return true;
}

static void seg_remove(gpuq_arena *a, size_t i)
{
    memmove(&a->segs[i], &a->segs[i + 1], sizeof *a->segs * (a->nseg - i - 1));
    a->nseg--;
}

void *gpuq_arena_alloc(gpuq_arena *a, uint64_t bytes)
{
    if (!a)
        return NULL;
    if (bytes == 0)
        bytes = 1;
    if (bytes > UINT64_MAX - ARENA_ALIGN)
        return NULL;
    uint64_t len = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    for (size_t i = 0; i < a->nseg; i++) {
        seg *s = &a->segs[i];
        if (s->used || s->len < len)
            continue; /* segments start 64-aligned: offsets are sums of aligned lengths */
        if (s->len > len) {
            seg rest = {s->off + len, s->len - len, false};
            if (!seg_insert(a, i + 1, rest))
                return NULL;
            s = &a->segs[i];
            s->len = len;
        }
        s->used = true;
        return a->base + s->off;
    }
    return NULL;
}

void gpuq_arena_free(gpuq_arena *a, void *p)
{
    if (!a || !p || (uint8_t *)p < a->base || (uint8_t *)p >= a->base + a->size)
        return;
    uint64_t off = (uint64_t)((uint8_t *)p - a->base);
    for (size_t i = 0; i < a->nseg; i++) {
        if (a->segs[i].off != off || !a->segs[i].used)
            continue;
        a->segs[i].used = false;
        if (i + 1 < a->nseg && !a->segs[i + 1].used) {
            a->segs[i].len += a->segs[i + 1].len;
            seg_remove(a, i + 1);
        }
        if (i > 0 && !a->segs[i - 1].used) {
            a->segs[i - 1].len += a->segs[i].len;
            seg_remove(a, i);
        }
        return;
    }
}

/* The arena of c holding [p, p + len), with *off; NULL when none does.
 * *straddle: the range overlaps an arena without lying inside it. */
static gpuq_arena *arena_of(gpuq_conn *c, const void *p, uint64_t len, uint64_t *off,
                            bool *straddle)
{
    const uint8_t *b = p;
    for (gpuq_arena *a = c->arenas; a; a = a->next) {
        const uint8_t *lo = a->base, *hi = a->base + a->size;
        if (b >= lo && b < hi) {
            if (len > (uint64_t)(hi - b)) {
                *straddle = true;
                return NULL;
            }
            *off = (uint64_t)(b - lo);
            return a;
        }
        if (b < lo && len > (uint64_t)(lo - b)) {
            *straddle = true;
            return NULL;
        }
    }
    return NULL;
}

/* The carried entries (GPUQ_REF_WIRE) of kinds[0..n) by reference when
 * each of them lies wholly in one arena of c (ptr[k], len[k]), else none
 * (PROTOCOL.md 3.4: a side's carried arrays go all by reference or none). */
static void refs_side(gpuq_conn *c, uint8_t *kinds, gpuq_ref *refs, uint32_t n,
                      const void *const *ptr, const uint64_t *len, bool *straddle)
{
    gpuq_ref got[REQ_MAX_IO];
    uint32_t want = 0, found = 0;
    for (uint32_t k = 0; k < n && k < REQ_MAX_IO; k++) {
        if (kinds[k] != GPUQ_REF_WIRE)
            continue;
        want++;
        uint64_t off;
        gpuq_arena *a = ptr[k] ? arena_of(c, ptr[k], len[k], &off, straddle) : NULL;
        if (a) {
            got[k] = (gpuq_ref){a->id, off, len[k]};
            found++;
        }
    }
    if (!want || found != want)
        return;
    for (uint32_t k = 0; k < n && k < REQ_MAX_IO; k++) {
        if (kinds[k] == GPUQ_REF_WIRE) {
            kinds[k] = GPUQ_REF_ARENA;
            refs[k] = got[k];
        }
    }
}

int arena_refs_for(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs)
{
    if (!c->arenas)
        return 0;
    bool straddle = false;
    const void *ptr[REQ_MAX_IO] = {NULL, NULL};
    uint64_t len[REQ_MAX_IO] = {0, 0};
    for (uint32_t k = 0; k < refs->nin && k < REQ_MAX_IO; k++) {
        ptr[k] = r->in[k].set ? r->in[k].data : NULL;
        len[k] = r->in[k].len;
    }
    refs_side(c, refs->in_kind, refs->in, refs->nin, ptr, len, &straddle);
    if (!refs->out_fixed) {
        for (uint32_t k = 0; k < refs->nout && k < REQ_MAX_IO; k++) {
            ptr[k] = r->out[k].buf;
            len[k] = k < sz->nout ? sz->out[k].bytes : 0;
        }
        refs_side(c, refs->out_kind, refs->out, refs->nout, ptr, len, &straddle);
    }
    if (straddle)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                            "bad_argument: an array overlaps an arena's edge (it must lie wholly "
                            "inside one arena, or outside all)");
    return 0;
}
