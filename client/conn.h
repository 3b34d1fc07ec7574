/* SPDX-License-Identifier: Apache-2.0 */
/* conn.h - libgpuq internals shared between conn.c and ops.c.
 *
 * The struct itself stays private to conn.c; ops.c uses the public API plus
 * conn_set_err for argument errors it finds before any I/O and
 * conn_scratch for the result its convenience calls read. conn_reply.c,
 * which reads the replies, breaks the connection with conn_break.
 */
#ifndef GPUQ_CLIENT_CONN_H
#define GPUQ_CLIENT_CONN_H

#include "req.h"

/* Largest reply header libgpuq accepts (status info included). */
#define GPUQ_CLIENT_MAX_REPLY_HEADER (1u << 20)
/* Largest document (sessions, metrics) libgpuq reads; larger ones are
 * skipped and reported as too_large. */
#define GPUQ_CLIENT_MAX_DOC (256u << 20)

/* Record a one-line message for gpuq_errmsg and return code. */
int conn_set_err(gpuq_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The stream is dead: every later call on c returns code. The message
 * names what failed (what), with strerror(errno) for GPUQ_E_IO. Returns
 * code. */
int conn_break(gpuq_conn *c, int code, const char *what);
/* 0, or the code that broke c's stream (conn_break). */
int conn_broken(const gpuq_conn *c);
/* c's own result, reused by every convenience call (borrowed; valid until
 * the next call on c). */
gpuq_result *conn_scratch(gpuq_conn *c);

#endif
