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
 *
 * Gated input (PROTOCOL.md 3.4): when the hello said "gate" and the staged
 * inputs come to STAGE_GATE_MIN bytes or more, staging lays them out but
 * does not copy them: the request goes out with "gate": true, and the
 * caller then calls stage_feed, which copies them in pieces
 * (stage_gate_piece) and sends a "ready" after each, so that gpuqd moves
 * one piece to the device while the next is copied. The readies' replies
 * are read by the wait that reads the request's (conn_follow_last).
 */
#ifndef GPUQ_CLIENT_STAGE_H
#define GPUQ_CLIENT_STAGE_H

#include "req.h"

/* Staged inputs of this many bytes or more are gated, when they may be. */
#define STAGE_GATE_MIN ((uint64_t)2 << 20)
#define STAGE_GATE_PIECE_MIN ((uint64_t)1 << 20)
#define STAGE_GATE_PIECE_MAX ((uint64_t)4 << 20)

typedef struct conn_stage {
    int transport;      /* gpuq_transport */
    bool offered;       /* the hello's "arenas" */
    bool gate_offered;  /* the hello's "gate" */
    bool gate_off;      /* GPUQ_GATE was not 1 at gpuq_connect (gating is opt-in) */
    gpuq_arena *arena;  /* NULL until first needed; also in the connection's arena list */
    uint64_t failed_at; /* AUTO: an arena of this many bytes was refused (0: none) */
    /* the staged request in flight: where its outputs go */
    bool active;
    uint32_t nout;
    void *out[REQ_MAX_IO];
    uint64_t out_off[REQ_MAX_IO], out_len[REQ_MAX_IO];
    /* the staged request is gated and its inputs not yet copied (stage_feed) */
    bool gated;
    uint32_t nin;
    const void *in[REQ_MAX_IO]; /* the caller's, borrowed until stage_feed */
    uint64_t in_off[REQ_MAX_IO], in_len[REQ_MAX_IO];
    uint64_t readies; /* ready requests this connection sent (for tests) */
} conn_stage;

/* The submit of gpuq_call_req: r's carried arrays (refs' GPUQ_REF_WIRE
 * entries, after arena_refs_for), into the staging arena when c's
 * transport says so, and refs names them too (outputs only when
 * refs->out_fixed is false); *gate is true when the request is to go
 * gated (its inputs are then copied by stage_feed once it is sent; never
 * with a resident input). Not staged
 * (SOCKET; AUTO under GPUQ_SHM_MIN_BYTES, or without an arena to be had):
 * 0 and refs unchanged. SHM without an arena,
 * or a dead connection: the error, message set on c. May make blocking
 * calls on c (arena_open, arena_close): c must have nothing outstanding. */
int stage_req(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs, bool *gate);
/* The same for gpuq_call: the payload a then b and the result out[out_cap]
 * (outputs packed), when req names no array by reference itself and its
 * sizes add up (else the daemon refuses it by socket, as before). When
 * staged, *staged is true and req->nin_ref/nout_ref and refs are set, and
 * req->gate when gated; the caller sends req without payload and puts
 * nin_ref/nout_ref back to 0 and gate back as it was. */
int stage_call(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
               size_t b_len, void *out, size_t out_cap, bool *staged);
/* Right after the staged request (id) was sent: when it is gated, copy its
 * inputs into the arena piece by piece, each piece followed by a "ready"
 * with the bytes in place so far (outside max_inflight; its reply read and
 * checked by the wait for the request's, conn_follow_last). Not gated:
 * nothing done. Returns 0, or the error of a ready that could not be sent:
 * the connection is then broken (gpuqd would wait for the rest of the
 * input until frame_timeout). The interrupt fd is off meanwhile. */
int stage_feed(gpuq_conn *c, uint64_t id);
/* The staged request is over (its reply read, or its submit failed): its
 * outputs are copied out when ok. Nothing staged: nothing done. */
void stage_end(gpuq_conn *c, bool ok);
/* Bytes of one piece of a gated input of `input` bytes: input/8 rounded
 * up to 64 bytes, within [STAGE_GATE_PIECE_MIN, STAGE_GATE_PIECE_MAX] (the
 * last piece is what is left). */
uint64_t stage_gate_piece(uint64_t input);
/* For tests: the ready requests c has sent so far. */
uint64_t stage_ready_count(const gpuq_conn *c);

#endif
