/* SPDX-License-Identifier: Apache-2.0 */
/* arena.h - shared-memory arenas (PROTOCOL.md 3.4).
 *
 * An arena is a sealed memfd that gpuqd and one client both map: gpuqd
 * creates it (arena_open) or takes the client's (arena_import, which must
 * be a tmpfs memfd sealed against shrinking: nothing else is safe to map,
 * arena.c says why), maps it MAP_SHARED, and registers it with
 * the backend once (CUDA: cudaHostRegister), so requests that name bytes of
 * it ("in"/"out" refs) copy by DMA straight between it and the device.
 *
 * Ownership: the session's table holds one reference per open arena; each
 * request that names an arena holds one more from its check until it is
 * freed (reply written, or dropped after its GPU work completed). The
 * mapping and the registration go when the session closed the arena (op or
 * session end) and the last reference is dropped, so GPU work never touches
 * unmapped memory, whatever the client does.
 */
#ifndef GPUQ_SERVER_ARENA_H
#define GPUQ_SERVER_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "header.h"

struct arena_books;
typedef struct arena {
    uint64_t id;
    uint8_t *base;
    uint64_t size;
    bool registered;
    int refs;
    backend *b;                /* unregisters it */
    struct arena_books *books; /* the server's counts, lowered at the end */
} arena;

/* Server-wide arena ids and bytes (server_defs.h embeds it). */
typedef struct arena_books {
    uint64_t next_id;
    uint64_t bytes; /* all arenas mapped, closed ones still referenced included */
    uint32_t count;
} arena_books;

/* A session's open arenas. */
typedef struct arena_table {
    arena *a[GPUQ_MAX_ARENAS];
    uint32_t n;
    uint64_t bytes;
} arena_table;

/* Create (fd < 0: a new sealed memfd of size bytes rounded up to the page
 * size; *fd_out gets an fd to send, owned by the caller) or import (fd >= 0:
 * the client's, borrowed; size from fstat) an arena within the quotas
 * (session_cap: the session's session_arena; total_cap: total_arena), map
 * and register it, and add it to t. Returns 0 with *out, or a GPUQ_E_* code
 * with a one-line msg; nothing is left behind on error. */
int arena_create(arena_table *t, arena_books *bk, backend *b, int fd, uint64_t size,
                 uint64_t session_cap, uint64_t total_cap, arena **out, int *fd_out, char *msg,
                 size_t cap);
/* The open arena id of t, or NULL. */
arena *arena_find(arena_table *t, uint64_t id);
/* Remove id from t and drop the table's reference. GPUQ_E_BAD_ARGUMENT if t
 * has no such arena. */
int arena_close(arena_table *t, uint64_t id);
/* Close every arena of t (session end). */
void arena_close_all(arena_table *t);
void arena_ref(arena *a);
void arena_unref(arena *a); /* the last one unregisters, unmaps, frees */

/* A checked request's refs against t: every arena open, every range inside
 * it. Fills host pointers in[k] / out[k] for the refs given and takes a
 * reference on each arena named (arena_refs_drop gives them back). Returns 0
 * or GPUQ_E_BAD_ARGUMENT with msg; takes nothing on error. */
int arena_resolve(arena_table *t, const gpuq_request *req, arena *held[4], const void *in[2],
                  void *out[2], char *msg, size_t cap);
void arena_refs_drop(arena *held[4]);

#endif
