/* SPDX-License-Identifier: Apache-2.0 */
/* session_io.h - which thread moves a session's bytes, and the counts and
 * clocks that follow them (session.c decides; io_pool.h moves).
 *
 * A payload's rest of at least cfg.io_bulk_min bytes, once the session's
 * read buffer holds none of it, is read by an I/O thread straight into its
 * staging slot, and a reply group that large is written by one, so the
 * loop thread never carries a session's bulk. Everything else moves on the
 * loop, as small frames are cheapest there. What a thread moved is counted
 * into the session (bytes, the frame's clocks) when the job ends and at
 * each sweep, so the timeouts judge a frame read by a thread as they judge
 * one read by the loop.
 */
#ifndef GPUQ_SERVER_SESSION_IO_H
#define GPUQ_SERVER_SESSION_IO_H

#include "server_defs.h"

/* Reading (re)starts, on the loop or an I/O thread: a frame's stall and
 * rate clocks do not count the pause. */
void session_reading_resumed(session *s);
/* s's priority as an io_pool level (the scheduler's level index). */
int session_io_level(const session *s);
/* The rest of s's payload is for an I/O thread. */
bool session_io_reads(const session *s);
/* Count io.rd's bytes moved since last counted. */
void session_io_count(session *s);
/* The same, only while io.rd is submitted (session_sweep). */
void session_io_progress(session *s);
/* An I/O thread writes s's replies now. */
bool session_io_writing(const session *s);
/* Bytes of s's replies not yet with the kernel: libuv's queue, the group an
 * I/O thread writes and a reply encoded that waits for it. */
uint64_t session_write_backlog(session *s);

#endif
