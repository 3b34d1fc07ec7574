/* SPDX-License-Identifier: Apache-2.0 */
/* staging.c - see staging.h. */
#include "staging.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "errors.h"
#include "log.h"

#define STAGING_CHUNK (16u << 20)
#define STAGING_CHUNKED_MAX (1u << 20)
#define STAGING_MIN 4096u

void staging_init(staging *st, backend *b, uint64_t total_limit)
{
    st->b = b;
    st->total_limit = total_limit;
    st->in_use = st->capacity = 0;
    st->headroom = 0;
    st->reserves = st->released_total = 0;
    st->free_list = NULL;
    st->chunks = NULL;
    st->pin = NULL;
    st->wake = NULL;
    st->wake_arg = NULL;
    st->grows = NULL;
    st->growing = st->grow_seq = st->fail_seq = 0;
    st->fail_msg[0] = '\0';
    st->grows_started = st->grows_ahead = st->grow_failures = 0;
    st->closed = false;
}

void staging_set_headroom(staging *st, uint64_t headroom)
{
    st->headroom = headroom;
}

static uint64_t staging_headroom(const staging *st)
{
    return st->headroom < st->total_limit / 2 ? st->headroom : st->total_limit / 2;
}

size_t staging_class(size_t n)
{
    if (n <= STAGING_MIN)
        return STAGING_MIN;
    size_t p = 1;
    while (p <= n / 2)
        p <<= 1; /* largest power of two <= n */
    size_t step = p / 4;
    if (n > SIZE_MAX - step)
        return SIZE_MAX;
    return (n + step - 1) / step * step;
}

void staging_set_pinner(staging *st, pinner *pin, void (*wake)(void *arg), void *arg)
{
    st->pin = pin;
    st->wake = wake;
    st->wake_arg = arg;
}

const char *staging_fail_msg(const staging *st)
{
    return st->fail_msg[0] ? st->fail_msg : "out of memory";
}

/* A grow in flight on the pinning thread: a chunk (for the small classes)
 * or a stand-alone slot of one class. Its structs are allocated up front,
 * so its end on the loop needs no allocation. */
typedef struct staging_grow {
    pin_job job; /* first: the job's done finds its grow */
    staging *st;
    size_t size;
    bool chunk;
    uint64_t seq;
    staging_chunk *c; /* chunk: the struct it becomes */
    staging_slot *s;  /* stand-alone: the slot it becomes */
    struct staging_grow *next;
} staging_grow;

/* Unlink and free the free stand-alone slot *pp (its memory on the pinning
 * thread when there is one; the capacity drops now). */
static void staging_free_slot(staging *st, staging_slot **pp)
{
    staging_slot *s = *pp;
    *pp = s->next;
    st->capacity -= s->size;
    pinner_free_host(st->pin, st->b, s->ptr);
    free(s);
}

/* Free unused stand-alone slots until need more bytes fit under the limit. */
static void staging_trim(staging *st, size_t need)
{
    staging_slot **pp = &st->free_list;
    while (*pp && st->capacity + st->growing + need > st->total_limit) {
        if ((*pp)->chunk)
            pp = &(*pp)->next;
        else
            staging_free_slot(st, pp);
    }
}

/* A slot of cls carved from the newest chunk; NULL when it has no room
 * (or, with *oom set, no memory for the slot's struct). */
static staging_slot *staging_carve(staging *st, size_t cls, bool *oom)
{
    staging_chunk *c = st->chunks;
    if (!c || c->size - c->used < cls)
        return NULL;
    staging_slot *s = calloc(1, sizeof *s);
    if (!s) {
        *oom = true;
        return NULL;
    }
    s->size = cls;
    s->ptr = c->ptr + c->used;
    c->used += cls;
    c->nslots++;
    s->chunk = c;
    return s;
}

/* c (zeroed) becomes the newest chunk, over ptr (STAGING_CHUNK bytes). */
static void staging_add_chunk(staging *st, staging_chunk *c, uint8_t *ptr)
{
    c->ptr = ptr;
    c->size = STAGING_CHUNK;
    c->next = st->chunks;
    st->chunks = c;
    st->capacity += STAGING_CHUNK;
    log_debug("staging: new chunk, capacity %llu", (unsigned long long)st->capacity);
}

static int staging_fail(staging *st, size_t len)
{
    snprintf(st->fail_msg, sizeof st->fail_msg, "the %s backend could not allocate %zu bytes",
             st->b->ops->name, len);
    return GPUQ_E_NO_MEMORY;
}

/* Without a pinner: new memory for a slot of cls at once. */
static int staging_grow_now(staging *st, size_t cls, staging_slot **out)
{
    if (cls <= STAGING_CHUNKED_MAX) {
        staging_chunk *c = calloc(1, sizeof *c);
        if (!c)
            goto err_oom;
        uint8_t *p = st->b->ops->host_alloc(st->b, STAGING_CHUNK);
        if (!p) {
            free(c);
            return staging_fail(st, STAGING_CHUNK);
        }
        staging_add_chunk(st, c, p);
        bool oom = false;
        if (!(*out = staging_carve(st, cls, &oom)))
            goto err_oom; /* the chunk stays for the next */
        return 0;
    }
    staging_slot *s = calloc(1, sizeof *s);
    if (!s)
        goto err_oom;
    staging_trim(st, cls);
    s->size = cls;
    s->ptr = st->b->ops->host_alloc(st->b, cls);
    if (!s->ptr) {
        free(s);
        return staging_fail(st, cls);
    }
    st->capacity += cls;
    *out = s;
    return 0;
err_oom:
    snprintf(st->fail_msg, sizeof st->fail_msg, "out of memory");
    return GPUQ_E_NO_MEMORY;
}

/* A grow on the pinning thread finished (loop thread): its memory joins the
 * pool, or its failure is kept for its waiters; they are woken either way. */
static void staging_grow_done(pin_job *j)
{
    staging_grow *g = (staging_grow *)j;
    staging *st = g->st;
    staging_grow **pp = &st->grows;
    while (*pp != g)
        pp = &(*pp)->next;
    *pp = g->next;
    st->growing -= g->size;
    if (j->status != 0) {
        st->fail_seq = g->seq;
        st->grow_failures++;
        snprintf(st->fail_msg, sizeof st->fail_msg, "%s", j->why);
        log_warn("staging: growing by %zu bytes failed: %s", g->size, j->why);
    } else if (st->closed) {
        pinner_free_host(st->pin, st->b, j->ptr);
    } else if (g->chunk) {
        staging_add_chunk(st, g->c, j->ptr);
        g->c = NULL;
    } else {
        g->s->ptr = j->ptr;
        g->s->size = g->size;
        g->s->next = st->free_list;
        st->free_list = g->s;
        st->capacity += g->size;
        g->s = NULL;
    }
    bool wake = !st->closed && st->wake;
    free(g->c);
    free(g->s);
    free(g);
    if (wake)
        st->wake(st->wake_arg);
}

/* The grow in flight that a slot of cls would come from, or NULL. */
static staging_grow *staging_grow_find(staging *st, size_t cls)
{
    bool chunk = cls <= STAGING_CHUNKED_MAX;
    for (staging_grow *g = st->grows; g; g = g->next)
        if (g->chunk == chunk && (chunk || g->size == cls))
            return g;
    return NULL;
}

/* Start growing for a slot of cls on the pinning thread; NULL on out of
 * memory (nothing started). */
static staging_grow *staging_grow_start(staging *st, size_t cls)
{
    bool chunk = cls <= STAGING_CHUNKED_MAX;
    staging_grow *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if (chunk)
        g->c = calloc(1, sizeof *g->c);
    else
        g->s = calloc(1, sizeof *g->s);
    if (!g->c && !g->s) {
        free(g);
        return NULL;
    }
    if (!chunk)
        staging_trim(st, cls);
    g->st = st;
    g->size = chunk ? STAGING_CHUNK : cls;
    g->chunk = chunk;
    g->seq = ++st->grow_seq;
    g->job.kind = PIN_ALLOC;
    g->job.len = g->size;
    g->job.done = staging_grow_done;
    g->next = st->grows;
    st->grows = g;
    st->growing += g->size;
    st->grows_started++;
    pinner_submit(st->pin, &g->job);
    return g;
}

/* After a small reservation: the newest chunk's free room fell under the
 * low-water mark, so the next chunk is grown now, before anyone waits for
 * it (if the limit has room for it and none is in flight). */
static void staging_grow_ahead(staging *st)
{
    const staging_chunk *c = st->chunks;
    if (!pinner_on(st->pin) || !c || c->size - c->used >= STAGING_LOW_WATER ||
        staging_grow_find(st, STAGING_MIN) ||
        st->capacity + st->growing + STAGING_CHUNK > st->total_limit)
        return;
    if (staging_grow_start(st, STAGING_MIN))
        st->grows_ahead++;
}

int staging_reserve_wait(staging *st, size_t n, uint64_t *sess_used, uint64_t sess_limit,
                         uint64_t *ticket, staging_slot **out)
{
    uint64_t none = 0;
    if (!ticket)
        ticket = &none;
    size_t cls = staging_class(n);
    uint64_t head = staging_headroom(st);
    uint64_t waited = *ticket;
    *ticket = 0;
    if (cls > sess_limit || cls > st->total_limit - head)
        return GPUQ_E_TOO_LARGE;
    /* The headroom is for small requests of sessions that hold nothing:
     * whoever holds staging already waits for its own releases, and a large
     * request waits for the shared part, instead of taking the last bytes. */
    bool newcomer = *sess_used == 0 && cls <= head;
    uint64_t limit = newcomer ? st->total_limit : st->total_limit - head;
    if (*sess_used + cls > sess_limit || st->in_use + cls > limit)
        return GPUQ_E_BUSY;
    staging_slot *s = NULL;
    for (staging_slot **pp = &st->free_list; *pp; pp = &(*pp)->next) {
        if ((*pp)->size == cls) {
            s = *pp;
            *pp = s->next;
            if (s->chunk)
                s->chunk->nfree--;
            break;
        }
    }
    bool oom = false;
    if (!s && cls <= STAGING_CHUNKED_MAX && !(s = staging_carve(st, cls, &oom)) && oom) {
        snprintf(st->fail_msg, sizeof st->fail_msg, "out of memory");
        return GPUQ_E_NO_MEMORY;
    }
    if (!s && !pinner_on(st->pin)) {
        int rc = staging_grow_now(st, cls, &s);
        if (rc < 0)
            return rc;
    }
    if (!s) {
        /* new memory needed: wait for a grow, unless the one waited for
         * (or one started after it) failed */
        if (waited && waited <= st->fail_seq)
            return GPUQ_E_NO_MEMORY;
        staging_grow *g = staging_grow_find(st, cls);
        if (!g && !(g = staging_grow_start(st, cls))) {
            snprintf(st->fail_msg, sizeof st->fail_msg, "out of memory");
            return GPUQ_E_NO_MEMORY;
        }
        *ticket = g->seq;
        return GPUQ_E_BUSY;
    }
    s->next = NULL;
    st->in_use += cls;
    st->reserves++;
    *sess_used += cls;
    *out = s;
    if (cls <= STAGING_CHUNKED_MAX)
        staging_grow_ahead(st);
    return 0;
}

int staging_reserve(staging *st, size_t n, uint64_t *sess_used, uint64_t sess_limit,
                    staging_slot **out)
{
    return staging_reserve_wait(st, n, sess_used, sess_limit, NULL, out);
}

void staging_release(staging *st, staging_slot *slot, uint64_t *sess_used)
{
    st->in_use -= slot->size;
    *sess_used -= slot->size;
    if (slot->chunk)
        slot->chunk->nfree++;
    slot->next = st->free_list;
    st->free_list = slot;
}

void staging_set_capacity(staging *st, uint64_t total_limit)
{
    st->total_limit = total_limit;
    staging_trim(st, 0);
}

/* Free chunk c, none of whose slots is in use: its slots leave the free list. */
static void staging_free_chunk(staging *st, staging_chunk **cp)
{
    staging_chunk *c = *cp;
    for (staging_slot **pp = &st->free_list; *pp;) {
        staging_slot *s = *pp;
        if (s->chunk == c) {
            *pp = s->next;
            free(s);
        } else {
            pp = &s->next;
        }
    }
    *cp = c->next;
    st->capacity -= c->size;
    pinner_free_host(st->pin, st->b, c->ptr);
    free(c);
}

uint64_t staging_release_idle(staging *st, uint64_t keep)
{
    uint64_t before = st->capacity;
    while (st->capacity > keep) {
        /* the largest free stand-alone slot */
        staging_slot **best = NULL;
        for (staging_slot **pp = &st->free_list; *pp; pp = &(*pp)->next)
            if (!(*pp)->chunk && (!best || (*pp)->size > (*best)->size))
                best = pp;
        if (best) {
            staging_free_slot(st, best);
            continue;
        }
        staging_chunk **cp = &st->chunks;
        while (*cp && (*cp)->nfree != (*cp)->nslots)
            cp = &(*cp)->next;
        if (!*cp)
            break;
        staging_free_chunk(st, cp);
    }
    st->released_total += before - st->capacity;
    return before - st->capacity;
}

void staging_destroy(staging *st)
{
    if (st->in_use)
        log_error("staging: %llu bytes still in use at exit", (unsigned long long)st->in_use);
    st->closed = true; /* grows in flight give their memory back as they end */
    while (st->free_list) {
        staging_slot *s = st->free_list;
        st->free_list = s->next;
        if (!s->chunk)
            pinner_free_host(st->pin, st->b, s->ptr);
        free(s);
    }
    while (st->chunks) {
        staging_chunk *c = st->chunks;
        st->chunks = c->next;
        pinner_free_host(st->pin, st->b, c->ptr);
        free(c);
    }
    st->capacity = 0;
}
