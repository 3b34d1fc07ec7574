/* SPDX-License-Identifier: Apache-2.0 */
/* arena.h - libgpuq's shared-memory arenas (PROTOCOL.md 3.4), internal
 * side: which arrays of a request lie in an arena of its connection, and
 * unmapping them all when the connection closes. */
#ifndef GPUQ_CLIENT_ARENA_H
#define GPUQ_CLIENT_ARENA_H

#include "req.h"

/* refs for r's arrays (its checked sizes sz): all inputs by reference when
 * every set input lies wholly in one arena of c, else none; the same for
 * the outputs. An array that straddles an arena's edge is
 * GPUQ_E_BAD_ARGUMENT (message set on c). */
int arena_refs_for(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs);
/* Unmap and free every arena of c (gpuq_close; the daemon frees its side
 * when the session ends). */
void arena_unmap_all(gpuq_conn *c);

#endif
