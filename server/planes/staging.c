/* SPDX-License-Identifier: Apache-2.0 */
/* staging.c - see staging.h. */
#include "staging.h"

#include <stdbool.h>
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

/* Unlink and free the free stand-alone slot *pp. */
static void staging_free_slot(staging *st, staging_slot **pp)
{
    staging_slot *s = *pp;
    *pp = s->next;
    st->capacity -= s->size;
    st->b->ops->host_free(st->b, s->ptr);
    free(s);
}

/* Free unused stand-alone slots until need more bytes fit under the limit. */
static void staging_trim(staging *st, size_t need)
{
    staging_slot **pp = &st->free_list;
    while (*pp && st->capacity + need > st->total_limit) {
        if ((*pp)->chunk)
            pp = &(*pp)->next;
        else
            staging_free_slot(st, pp);
    }
}

static staging_slot *staging_grow(staging *st, size_t cls)
{
    staging_slot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->size = cls;
    if (cls <= STAGING_CHUNKED_MAX) {
        staging_chunk *c = st->chunks;
        if (!c || c->size - c->used < cls) {
            c = calloc(1, sizeof *c);
            if (!c)
                goto err_after_slot;
            c->ptr = st->b->ops->host_alloc(st->b, STAGING_CHUNK);
            if (!c->ptr) {
                free(c);
                goto err_after_slot;
            }
            c->size = STAGING_CHUNK;
            c->next = st->chunks;
            st->chunks = c;
            st->capacity += STAGING_CHUNK;
            log_debug("staging: new chunk, capacity %llu", (unsigned long long)st->capacity);
        }
        s->ptr = c->ptr + c->used;
        c->used += cls;
        c->nslots++;
        s->chunk = c;
        return s;
    }
    staging_trim(st, cls);
    s->ptr = st->b->ops->host_alloc(st->b, cls);
    if (!s->ptr)
        goto err_after_slot;
    st->capacity += cls;
    return s;
err_after_slot:
    free(s);
    return NULL;
}

int staging_reserve(staging *st, size_t n, uint64_t *sess_used, uint64_t sess_limit,
                    staging_slot **out)
{
    size_t cls = staging_class(n);
    uint64_t head = staging_headroom(st);
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
    if (!s && !(s = staging_grow(st, cls)))
        return GPUQ_E_NO_MEMORY;
    s->next = NULL;
    st->in_use += cls;
    st->reserves++;
    *sess_used += cls;
    *out = s;
    return 0;
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
    st->b->ops->host_free(st->b, c->ptr);
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
    while (st->free_list) {
        staging_slot *s = st->free_list;
        st->free_list = s->next;
        if (!s->chunk)
            st->b->ops->host_free(st->b, s->ptr);
        free(s);
    }
    while (st->chunks) {
        staging_chunk *c = st->chunks;
        st->chunks = c->next;
        st->b->ops->host_free(st->b, c->ptr);
        free(c);
    }
    st->capacity = 0;
}
