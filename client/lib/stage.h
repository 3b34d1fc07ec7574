/* SPDX-License-Identifier: Apache-2.0 */
/* stage.h - a connection's staging arena: how the blocking calls send
 * arrays that are not in an arena through shared memory (gpuq_set_transport
 * in gpuq.h says what the user sees).
 *
 * Each connection embeds a conn_stage (conn_defs.h). The blocking calls
 * (call.c) stage: gpuq_call_req hands stage_req to conn_submit_req as its
 * stager, gpuq_call calls stage_call before its submit (a pipelined submit
 * never stages), and both call stage_end once the reply is in.
 * Only one request from the blocking calls is ever in flight, so one arena
 * and one record of the staged request suffice.
 */
#ifndef GPUQ_CLIENT_STAGE_H
#define GPUQ_CLIENT_STAGE_H

#include "req.h"

typedef struct conn_stage {
    int transport;      /* gpuq_transport */
    bool offered;       /* the hello's "arenas" */
    gpuq_arena *arena;  /* NULL until first needed; also in the connection's arena list */
    uint64_t failed_at; /* AUTO: an arena of this many bytes was refused (0: none) */
    /* the staged request in flight: where its outputs go */
    bool active;
    uint32_t nout;
    void *out[REQ_MAX_IO];
    uint64_t out_off[REQ_MAX_IO], out_len[REQ_MAX_IO];
} conn_stage;

/* The submit of gpuq_call_req: r's arrays that refs (arena_refs_for) does
 * not name, into the staging arena when c's transport says so, and refs
 * names them too. Not staged (SOCKET; AUTO under GPUQ_SHM_MIN_BYTES, or
 * without an arena to be had): 0 and refs unchanged. SHM without an arena,
 * or a dead connection: the error, message set on c. May make blocking
 * calls on c (arena_open, arena_close): c must have nothing outstanding. */
int stage_req(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs);
/* The same for gpuq_call: the payload a then b and the result out[out_cap]
 * (outputs packed), when req names no array by reference itself and its
 * sizes add up (else the daemon refuses it by socket, as before). When
 * staged, *staged is true and req->nin_ref/nout_ref and refs are set; the
 * caller sends req without payload and puts nin_ref/nout_ref back to 0. */
int stage_call(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
               size_t b_len, void *out, size_t out_cap, bool *staged);
/* The staged request is over (its reply read, or its submit failed): its
 * outputs are copied out when ok. Nothing staged: nothing done. */
void stage_end(gpuq_conn *c, bool ok);

#endif
