/* SPDX-License-Identifier: Apache-2.0 */
/* gpuq_internal.h - libgpuq's in-tree API: requests as proto's structs.
 *
 * Not installed and not exported from libgpuq.so (libgpuq.map): gpuqctl,
 * the tests and the benchmark link the static library and fill a
 * gpuq_request (proto/header.h) directly, which is what the public builder
 * (gpuq.h) hides so that the ABI does not change with each op. The same
 * connection serves both: requests from gpuq_submit and gpuq_submit_req share
 * one queue and replies come in request order whichever call waits.
 *
 * proto/header.h comes first: it defines the enums gpuq.h would otherwise
 * define for users.
 */
#ifndef GPUQ_CLIENT_GPUQ_INTERNAL_H
#define GPUQ_CLIENT_GPUQ_INTERNAL_H

#include "header.h"

#include "gpuq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pipelined: fill a gpuq_request (gpuq_request_init, then op fields; id is
 * assigned here). Payload: the input arrays' bytes, A then B, borrowed until
 * gpuq_submit returns. The whole result payload is written into out
 * (borrowed until the matching gpuq_wait returns; out_cap bytes). */
int gpuq_submit(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
                size_t b_len, void *out, size_t out_cap, uint64_t *id_out);
/* Wait for the oldest outstanding request (from either submit). *rep (may be
 * NULL) gets its reply header (rep->info is NULL); returns rep->status. */
int gpuq_wait(gpuq_conn *c, gpuq_reply *rep);

/* Submit req and wait for its reply. out_cap is the exact result size; a
 * successful reply of another size is GPUQ_E_SIZE_MISMATCH. *rep (may be
 * NULL) gets the reply header. Needs gpuq_pending() == 0. */
int gpuq_call(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
              size_t b_len, void *out, size_t out_cap, gpuq_reply *rep);
/* gpuq_call is a blocking call: unless req already names arrays by
 * reference, its arrays go through c's staging arena when c's transport
 * says so (gpuq_set_transport), and out gets the result either way. */

/* For a caller that builds a blocking call's arrays in place (gpuqctl reads
 * .npy data straight into it): need bytes of c's staging arena for arrays
 * of `bytes` bytes, by c's transport: *base and *arena_id set when the
 * arrays should go there (opened or grown as for the blocking calls), NULL
 * and 0 when they should go by socket (SOCKET; AUTO under
 * GPUQ_SHM_MIN_BYTES, without arenas or without an arena to be had). The
 * caller names its arrays with req->in_ref/out_ref and calls gpuq_call.
 * *base stays valid until the staging arena is reopened (a later call that
 * needs more), given back (GPUQ_TRANSPORT_SOCKET) or unmapped (gpuq_close).
 * Returns 0, or (SHM without an arena, a dead connection, requests
 * outstanding) the error. */
int gpuq_stage_area(gpuq_conn *c, uint64_t bytes, uint64_t need, void **base, uint64_t *arena_id);

/* c (may be NULL) is what a gpuq_connect that reached no gpuqd handed back:
 * no socket tried accepted a connection (gpuq_errmsg says why for each).
 * False once any socket accepted, even when the hello then failed: gpuqctl
 * tells "no daemon" (exit 3) from "the daemon said no" (exit 1) by it. */
bool gpuq_unreachable(const gpuq_conn *c);

/* The bytes that this process's libgpuq sockets have sent and received
 * so far, all connections together (frames: prefixes, headers and arrays).
 * Safe to call from another thread while a call blocks (relaxed atomic
 * loads): gpuqctl's progress line reads them while gpuq_call waits. Sends
 * go out in pieces of at most 4 MiB (sockio.h), so the count moves during
 * a large request. */
void gpuq_io_counts(uint64_t *sent, uint64_t *received);

/* Raw frames, for tests: send arbitrary bytes; read one reply frame (the
 * payload into out[out_cap]) outside the request queue. */
int gpuq_send_raw(gpuq_conn *c, const void *buf, size_t len);
int gpuq_recv_reply(gpuq_conn *c, gpuq_reply *rep, void *out, size_t out_cap);

#ifdef __cplusplus
}
#endif
#endif
