/* SPDX-License-Identifier: Apache-2.0 */
/* conn.h - libgpuq internals: the connection's error state, for conn.c and
 * its parts (conn_defs.h holds the connection's fields, which they use
 * directly: c->broken is the code that broke its stream, c->scratch the
 * result the convenience calls reuse).
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

#endif
