/* SPDX-License-Identifier: Apache-2.0 */
/* arena.c - gpuq_arena_*: map the daemon's arenas, carve arrays out of
 * them, and name those arrays by reference in requests (see gpuq.h).
 *
 * The allocator's bookkeeping lives in libgpuq's heap, never in the shared
 * bytes (the daemon writes results there): a sorted array of segments that
 * cover the arena, each free or used, split on alloc (first fit, 64-byte
 * aligned) and merged with free neighbours on free. */
#include "arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "conn_defs.h"
#include "mpread.h"

#define ARENA_ALIGN 64u

typedef struct seg {
    uint64_t off, len;
    bool used;
} seg;

struct gpuq_arena {
    gpuq_conn *c;
    uint64_t id;
    uint8_t *base;
    uint64_t size;
    seg *segs;
    size_t nseg, cap;
    gpuq_arena *next;
};

/* {"arena": id, "size": bytes} from the reply's info. */
static int info_arena(const uint8_t *info, size_t len, uint64_t *id, uint64_t *size)
{
    gpuq_mpr r;
    uint32_t n;
    int got = 0;
    gpuq_mpr_init(&r, info, len);
    if (gpuq_mpr_map(&r, &n))
        return GPUQ_E_PROTOCOL;
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t kl;
        if (gpuq_mpr_str(&r, &key, &kl))
            return GPUQ_E_PROTOCOL;
        if (kl == 5 && !memcmp(key, "arena", 5)) {
            if (gpuq_mpr_uint(&r, id))
                return GPUQ_E_PROTOCOL;
            got |= 1;
        } else if (kl == 4 && !memcmp(key, "size", 4)) {
            if (gpuq_mpr_uint(&r, size))
                return GPUQ_E_PROTOCOL;
            got |= 2;
        } else if (gpuq_mpr_skip(&r)) {
            return GPUQ_E_PROTOCOL;
        }
    }
    return got == 3 ? 0 : GPUQ_E_PROTOCOL;
}

/* Send an arena_open / arena_import; map what the reply describes. fd: the
 * memfd to attach (import), or -1 (open: the reply carries one). */
static int arena_make(gpuq_conn *c, const char *op, uint64_t bytes, int fd, gpuq_arena **out)
{
    *out = NULL;
    gpuq_req *r = gpuq_req_new(op);
    if (!r)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory");
    if (fd < 0)
        gpuq_req_set_u64(r, "size", bytes);
    gpuq_result *res = &c->scratch;
    if (fd >= 0)
        c->tx_fd = fd;
    int rc = gpuq_call_req(c, r, res);
    c->tx_fd = -1;
    gpuq_req_free(r);
    int rx = c->reply.rx_fd;
    c->reply.rx_fd = -1;
    if (rc) {
        if (rx >= 0)
            close(rx);
        return rc;
    }
    const uint8_t *info;
    size_t ilen;
    uint64_t id = 0, size = 0;
    if (gpuq_result_info(res, &info, &ilen) || info_arena(info, ilen, &id, &size)) {
        rc = conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: %s reply without arena and size", op);
        goto err_fd;
    }
    int map_fd = fd >= 0 ? fd : rx;
    if (map_fd < 0) {
        rc = conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: arena_open reply without an fd");
        goto err_fd;
    }
    gpuq_arena *a = calloc(1, sizeof *a);
    if (a)
        a->segs = malloc(sizeof *a->segs * 8);
    if (!a || !a->segs) {
        if (a)
            free(a);
        rc = conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory");
        goto err_fd;
    }
    void *p = size <= SIZE_MAX
                  ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(a->segs);
        free(a);
        rc = conn_set_err(c, GPUQ_E_IO, "cannot map arena %llu: %m", (unsigned long long)id);
        goto err_fd;
    }
    if (rx >= 0)
        close(rx); /* the mapping keeps the memory */
    a->c = c, a->id = id, a->base = p, a->size = size;
    a->cap = 8;
    a->nseg = 1;
    a->segs[0] = (seg){0, size, false};
    gpuq_arena **head = &c->arenas;
    a->next = *head;
    *head = a;
    *out = a;
    return 0;

err_fd:
    if (rx >= 0)
        close(rx);
    /* the daemon holds an arena we cannot use: give it back */
    if (id) {
        gpuq_req *cr = gpuq_req_new("arena_close");
        if (cr && gpuq_req_set_u64(cr, "arena", id) == 0)
            (void)gpuq_call_req(c, cr, &c->scratch);
        gpuq_req_free(cr);
    }
    return rc;
}

int gpuq_arena_open(gpuq_conn *c, uint64_t bytes, gpuq_arena **out)
{
    return arena_make(c, "arena_open", bytes, -1, out);
}

int gpuq_arena_import(gpuq_conn *c, int fd, gpuq_arena **out)
{
    if (fd < 0) {
        *out = NULL;
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: fd %d", fd);
    }
    return arena_make(c, "arena_import", 0, fd, out);
}

static void arena_unlink_free(gpuq_arena *a)
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

int gpuq_arena_close(gpuq_arena *a)
{
    if (!a)
        return 0;
    gpuq_conn *c = a->c;
    int rc = GPUQ_E_NO_MEMORY;
    gpuq_req *r = gpuq_req_new("arena_close");
    if (r && gpuq_req_set_u64(r, "arena", a->id) == 0)
        rc = gpuq_call_req(c, r, &c->scratch);
    gpuq_req_free(r);
    arena_unlink_free(a);
    return rc;
}

void arena_unmap_all(gpuq_conn *c)
{
    gpuq_arena **head = &c->arenas;
    while (*head)
        arena_unlink_free(*head);
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

int arena_refs_for(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs)
{
    memset(refs, 0, sizeof *refs);
    if (!c->arenas)
        return 0;
    bool straddle = false;
    uint32_t nin = 0, nout = 0;
    for (uint32_t k = 0; k < sz->nin && k < REQ_MAX_IO; k++) {
        uint64_t off;
        gpuq_arena *a =
            r->in[k].set ? arena_of(c, r->in[k].data, r->in[k].len, &off, &straddle) : NULL;
        if (a)
            refs->in[nin++] = (gpuq_ref){a->id, off, r->in[k].len};
    }
    for (uint32_t k = 0; k < sz->nout && k < REQ_MAX_IO; k++) {
        uint64_t off;
        gpuq_arena *a =
            r->out[k].buf ? arena_of(c, r->out[k].buf, sz->out[k].bytes, &off, &straddle) : NULL;
        if (a)
            refs->out[nout++] = (gpuq_ref){a->id, off, sz->out[k].bytes};
    }
    if (straddle)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                            "bad_argument: an array overlaps an arena's edge (it must lie wholly "
                            "inside one arena, or outside all)");
    /* all inputs by reference or none; the same for outputs (PROTOCOL.md 3.4) */
    refs->nin = nin == sz->nin ? nin : 0;
    refs->nout = nout == sz->nout ? nout : 0;
    return 0;
}
