/* session.h - one client connection: frame reading, reference count, ordered
 * replies, close.
 *
 * Happy path: the read state machine asks for exactly the bytes the current
 * part still needs (PREFIX -> HEADER -> PAYLOAD straight into the staging slot
 * or SKIP into scratch); dispatch decides what a frame becomes. Every request
 * carries a sequence number; done requests wait in `pending` until all earlier
 * ones were written, and are written as prefix+header plus the result slot.
 *
 * Failure: a read/write error or EOF closes the session (closing flag, read
 * stop, uv_close). A client that is too slow (no hello, a stalled frame, idle)
 * is closed by session_sweep, which the server's timer calls. The struct lives until its last reference goes: the pipe
 * handle (until its close callback) and every live request.
 */
#ifndef GPUQ_SERVER_SESSION_H
#define GPUQ_SERVER_SESSION_H

#include "server_defs.h"

/* A new session with an initialised pipe (refs = 1, the handle); NULL on
 * allocation failure. Linked into srv's list. */
session *session_new(server *srv);
/* After uv_accept: read peer credentials and start reading. */
void session_start(session *s);
/* Idempotent. Drops requests that are done but unwritten. */
void session_close(session *s);
void session_ref(session *s);
void session_unref(session *s);
/* (Re)compute s->caps from its credentials and the server's config. */
void session_apply_policy(session *s);
/* Start or stop reading according to state, write queue and limits. */
void session_update_reading(session *s);
/* Skip n payload bytes next (then back to PREFIX). */
void session_skip(session *s, uint64_t n);

/* Timeouts (config hello_timeout, frame_timeout, idle_timeout; 0 is off):
 * close s if one has passed at now (uv_hrtime), with a final `timeout` reply
 * when nothing else is queued for it. Also ends the linger of a session that
 * is closing after a final reply. Returns the enum session_timeout_kind that
 * fired, or -1. */
int session_sweep(session *s, uint64_t now);
const char *session_timeout_name(int kind);

/* A new request on s (takes a reference, next sequence number); NULL on OOM. */
request *request_new(session *s);
/* Free a request: its slot, buffers, counts and session reference. */
void request_free(request *r);
/* r is done (status set): queue its reply in order. Owned by the session. */
void session_reply(request *r);
/* Convenience: set status+message and queue the reply. */
void session_refuse(request *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
