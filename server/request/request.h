/* SPDX-License-Identifier: Apache-2.0 */
/* request.h - one request's life, from its frame header to its reply.
 *
 * The request module owns a request: its state (header read, waiting for
 * staging, reading its payload, in the backend, done, queued, written), its
 * session reference, its staging slot (reserved and released only here), the
 * in-flight counts (raised and lowered only here), retries of requests that
 * wait for staging, completion from the backend, and the handoff of its reply
 * frame to the session, which writes frames in request order.
 *
 * Happy path (a compute op): the session decoded a frame prefix
 * (request_on_prefix: kind and lengths checked) -> the header arrived
 * (request_on_header: decoded, hello/draining/limits checked; a control op
 * is answered at once by control.c) -> in flight counted, staging reserved
 * for input + output -> the payload is read straight into the slot
 * (session_expect_payload) -> submitted to the backend -> request_complete
 * (loop thread) -> reply queued with session_send; when its turn comes it
 * is encoded (prefix + header, result straight from the slot) -> written ->
 * request_free: slot released, counts lowered, session reference dropped.
 *
 * Failure paths:
 * - broken prefix (magic/kind/version/flags), a header over max_header or
 *   lengths that overflow: one error reply, the session stops reading and
 *   closes after it (close_after);
 * - empty or undecodable header, no hello yet, draining, a check failed,
 *   max_inflight reached: an error reply, the payload is skipped;
 *   a payload over max_payload: error reply, then close;
 * - staging: never fits -> too_large and skip; fits but not now -> the
 *   session stops reading (session_wait) and the request waits; it is
 *   retried on the loop turn after staging was released or limits changed
 *   (a uv_idle handle), never from inside request_free; allocation failed ->
 *   no_memory and skip;
 * - the backend refuses the job at submit: error reply;
 * - the backend fails it, or the device is lost (device_lost, the server
 *   shuts down with exit code 3): error reply;
 * - the session closes (peer gone, kill_session, timeout, write error):
 *   queued replies are dropped and the request waiting for staging or its
 *   payload is freed at once; one in the backend lives until its completion
 *   (it holds a session reference), then is dropped unwritten;
 * - a timeout (session_sweep): the request waiting for its payload (or a
 *   new one) carries the final `timeout` reply, its staging given back at
 *   once; the session closes after it.
 * Out of memory for a request closes the session.
 */
#ifndef GPUQ_SERVER_REQUEST_H
#define GPUQ_SERVER_REQUEST_H

#include "server_defs.h"

/* The session events (server_defs.h) the request layer handles; server.c
 * points srv->sev at it. */
extern const session_events request_session_events;

/* Init the retry handle (srv->loop must be set). Returns 0 or a libuv code. */
int request_layer_init(server *srv);
/* Close the retry handle (shutdown; idempotent). */
void request_layer_close(server *srv);

/* The sweep (server.c): a gated request of s whose input was not all
 * announced frame_timeout after its header is answered timeout, and s
 * closes after that reply (PROTOCOL.md 3.4). Returns whether one was. */
bool request_gate_sweep(session *s, uint64_t now);

/* The backend's completion callback (loop thread); job->owner is the
 * request. */
void request_complete(gpuq_job *job);

/* Staging was released or the limits changed: every session waiting for
 * staging tries again on the next loop turn. */
void request_schedule_retry(server *srv);
/* s's request waiting for staging tries again now (no-op otherwise). */
void request_retry_staging(session *s);

/* A new request on s (a session reference, the next reply sequence number);
 * NULL on out of memory. */
request *request_new(session *s);
/* Free r: its slot, buffers, counts and session reference. Never submits or
 * retries anything itself. */
void request_free(request *r);
/* r is done (status and message set): hand its reply to the session. The
 * session owns r from here on (freed once written or dropped). */
void request_reply(request *r);
/* Set status + message, then request_reply. */
void request_refuse(request *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Refuse the session itself: a final reply with code and message, then the
 * close (reading stops now). Out of memory: close at once. */
void request_refuse_session(session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
