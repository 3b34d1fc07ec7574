/* SPDX-License-Identifier: Apache-2.0 */
/* arena_map.h - libgpuq's shared-memory arenas (PROTOCOL.md 3.4) as a
 * connection has them mapped: the allocator's segments, which arrays of a
 * request lie in an arena of its connection, and unmapping. */
#ifndef GPUQ_CLIENT_ARENA_MAP_H
#define GPUQ_CLIENT_ARENA_MAP_H

#include <stdbool.h>

#include "req.h"

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

/* Map size bytes of fd (the daemon's arena id) as a new arena of c, one
 * free segment, first on c's list: 0, or GPUQ_E_NO_MEMORY / GPUQ_E_IO with
 * c's message set (fd stays the caller's). */
int arena_map_add(gpuq_conn *c, uint64_t id, uint64_t size, int fd, gpuq_arena **out);
/* Unlink a from its connection's list, unmap and free it. */
void arena_unmap(gpuq_arena *a);
/* refs (req_refs_init'ed) for r's arrays (its checked sizes sz): the
 * carried inputs (GPUQ_REF_WIRE entries) by reference when every one of
 * them lies wholly in one arena of c, else none; the same for the carried
 * outputs unless refs->out_fixed. Resident entries stay as they are. An
 * array that straddles an arena's edge is GPUQ_E_BAD_ARGUMENT (message
 * set on c). */
int arena_refs_for(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs);
/* Unmap and free every arena of c (gpuq_close; the daemon frees its side
 * when the session ends). */
void arena_unmap_all(gpuq_conn *c);

#endif
