/* SPDX-License-Identifier: Apache-2.0 */
/* session_fd.h - the fds that come with a session's frames (SCM_RIGHTS):
 * which frame each belongs to (session_fd.c's comment), and closing those
 * no frame took: session.c's side, and the request layer's (session_take_fd,
 * session_drop_fd). */
#ifndef GPUQ_SERVER_SESSION_FD_H
#define GPUQ_SERVER_SESSION_FD_H

#include <stdbool.h>

#include "server_defs.h"

/* The fds the last read brought (direct: it went straight into a payload,
 * so they belong to no frame and are closed). */
void session_take_pending_fds(session *s, bool direct);
/* The fd that came with the current frame's first byte (SCM_RIGHTS), now
 * the caller's, or -1; *extra: more than one came (the others were closed).
 * session_drop_fd closes it (each frame's header calls one of the two). */
int session_take_fd(session *s, bool *extra);
void session_drop_fd(session *s);
/* Close the read's fd that no frame was offered. */
void session_close_read_fd(session *s);
/* A frame begins: its clocks start, the read's fd is offered to it. */
void session_frame_start(session *s);

#endif
