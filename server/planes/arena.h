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
 *
 * Pinning off the loop (issue 28): with a pinner on, the registration runs
 * on the pinning thread. arena_create then returns ARENA_PENDING: the arena
 * is in the table (its bytes counted) but not ready, so no request and no
 * arena_close finds it; when the pin finished, the caller's pinned callback
 * runs on the loop (rc 0: ready; rc < 0: the arena is gone from the table
 * again). The pin job holds a reference, so a session that closes meanwhile
 * leaks nothing: the last reference unpins and unmaps, on the pinning
 * thread too (arena bytes leave the books at once).
 */
#ifndef GPUQ_SERVER_ARENA_H
#define GPUQ_SERVER_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "header.h"
#include "pinner.h"

/* arena_create's answer while the pin runs on the pinning thread. */
#define ARENA_PENDING 1

struct arena_books;
struct arena_table;
typedef struct arena arena;
/* The pin of a pending arena finished (loop thread): rc 0 and a ready
 * arena, or a GPUQ_E_* code with why (the arena left its table). a is
 * valid during the call only. */
typedef void (*arena_pinned_fn)(void *arg, arena *a, int rc, const char *why);

struct arena {
    pin_job job; /* its pin, then its release, on the pinning thread */
    uint64_t id;
    uint8_t *base;
    uint64_t size;
    bool registered;
    bool ready; /* pinned: requests may name it */
    int refs;
    backend *b;                /* unregisters it */
    pinner *pin;               /* borrowed: pins and releases it (NULL or off: at once) */
    struct arena_books *books; /* the server's counts, lowered at the end */
    struct arena_table *table; /* the table that holds it, or NULL */
    arena_pinned_fn pinned;    /* pending: told when the pin finished */
    void *pinned_arg;
};

/* Server-wide arena ids and bytes (server_defs.h embeds it). */
typedef struct arena_books {
    uint64_t next_id;
    uint64_t bytes; /* all arenas mapped, closed ones still referenced included */
    uint32_t count;
} arena_books;

/* A session's open arenas (pending ones included). */
typedef struct arena_table {
    arena *a[GPUQ_MAX_ARENAS];
    uint32_t n;
    uint64_t bytes;
} arena_table;

/* Create (fd < 0: a new sealed memfd of size bytes rounded up to the page
 * size; *fd_out gets an fd to send, owned by the caller) or import (fd >= 0:
 * the client's, borrowed; size from fstat: the caller may close it once
 * this returned) an arena within the quotas (session_cap: the session's
 * session_arena; total_cap: total_arena), map and register it (on pin's
 * thread when it is on), and add it to t. Returns 0 with *out ready,
 * ARENA_PENDING with *out pending (pinned(arg, ...) follows on the loop), or
 * a GPUQ_E_* code with a one-line msg; nothing is left behind on error. */
int arena_create(arena_table *t, arena_books *bk, backend *b, pinner *pin, int fd, uint64_t size,
                 uint64_t session_cap, uint64_t total_cap, arena **out, int *fd_out, char *msg,
                 size_t cap, arena_pinned_fn pinned, void *arg);
/* The open, ready arena id of t, or NULL. */
arena *arena_find(arena_table *t, uint64_t id);
/* Remove id from t and drop the table's reference. GPUQ_E_BAD_ARGUMENT if t
 * has no such arena. */
int arena_close(arena_table *t, uint64_t id);
/* Take a out of t (pending or not) and forget its pinned callback. */
void arena_drop(arena_table *t, arena *a);
/* Close every arena of t, pending ones too (session end). */
void arena_close_all(arena_table *t);
void arena_ref(arena *a);
/* The last one unregisters and unmaps (on the pinning thread when it is
 * on) and frees. */
void arena_unref(arena *a);

/* A checked request's arena refs (its entries of kind GPUQ_REF_ARENA)
 * against t: every arena open, every range inside it. Fills host pointers in[k] / out[k] for the
 * refs given and takes a reference on each arena named (arena_refs_drop gives them back). Returns 0
 * or GPUQ_E_BAD_ARGUMENT with msg; takes nothing on error. */
int arena_resolve(arena_table *t, const gpuq_request *req, arena *held[4], const void *in[2],
                  void *out[2], char *msg, size_t cap);
void arena_refs_drop(arena *held[4]);

#endif
