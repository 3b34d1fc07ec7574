/* SPDX-License-Identifier: Apache-2.0 */
/* session.h - one client connection, the transport: bytes in, frames out,
 * timeouts, close. What a frame means is the request module's (request.h),
 * which the session reaches only through srv->sev (session_events).
 *
 * Happy path: the read state machine asks for exactly the bytes the current
 * part still needs: PREFIX (decoded here, then sev->prefix) -> HEADER
 * (sev->header) -> PAYLOAD straight into the buffer the request layer gave
 * (session_expect_payload; sev->payload) or SKIP into scratch. Replies are
 * session_frames with a sequence number; a frame waits in `pending` until
 * all earlier ones were written, is encoded when its turn comes and written
 * with one uv_write; its owner's done() runs once it was written.
 *
 * A half-close (EOF while the peer still reads) stops reading only: the
 * session closes once every request read before it was answered.
 *
 * Failure: a read/write error or the peer's close closes the session (closing flag, read
 * stop, uv_close; pending frames are dropped through their done(), the
 * request layer drops s->cur through sev->closed). A client that is too
 * slow (no hello, a stalled frame, idle) is closed by session_sweep, which
 * the server's timer calls: sev->timeout queues a final reply first. The
 * struct lives until its last reference goes: the pipe handle (until its
 * close callback) and every live request.
 */
#ifndef GPUQ_SERVER_SESSION_H
#define GPUQ_SERVER_SESSION_H

#include "server_defs.h"
#include "session_fd.h"
#include "session_peer.h"

/* A new session with an initialised pipe (refs = 1, the handle); NULL on
 * allocation failure. Linked into srv's list. */
session *session_new(server *srv);
/* After uv_accept: read peer credentials and start reading. */
void session_start(session *s);
/* Idempotent. Drops frames that are queued but unwritten. */
void session_close(session *s);
void session_ref(session *s);
void session_unref(session *s);
/* Start or stop reading according to state, write queue and limits. */
void session_update_reading(session *s);
/* The idle handle that lets sessions which yielded their read budget read
 * again on the next loop turn (SESSION_READ_BUDGET). */
int session_layer_init(struct server *srv);
void session_layer_close(struct server *srv);

/* The read state, set by the layer above after each event: */
/* skip n payload bytes next (then back to PREFIX; n = 0: PREFIX now) */
void session_skip(session *s, uint64_t n);
/* read s->pre.header_len header bytes next (into s->hbuf). Returns 0 or
 * GPUQ_E_NO_MEMORY (nothing changed). */
int session_expect_header(session *s);
/* the header in s->hbuf was used: give back a large header buffer */
void session_header_done(session *s);
/* read len (> 0) payload bytes into buf (borrowed until sev->payload) */
void session_expect_payload(session *s, void *buf, uint64_t len);
/* the payload of session_expect_payload is no longer wanted: its bytes
 * still to come are skipped (its buffer is no longer touched) */
void session_drop_payload(session *s);
/* stop reading until the request layer can take the frame (staging) */
void session_wait(session *s);
bool session_waiting(const session *s);

/* Stop the I/O threads that session_layer_init started (cfg.io_threads;
 * 0: none, bulk stays on the loop), once every session is closing. */
void session_layer_stop_io(struct server *srv);

/* The sequence number of the next reply frame on s. */
uint64_t session_next_seq(session *s);
/* Queue f (owned by its owner until f->ops->done) for writing in seq order;
 * on a closing session it is dropped at once (done with UV_ECANCELED). */
void session_send(session *s, session_frame *f);

#endif
