/* SPDX-License-Identifier: Apache-2.0 */
/* conn_err.h - a connection's error state: the one-line message
 * gpuq_errmsg returns and the code that broke its stream (c->broken), set
 * by every part of libgpuq. The bottom of libgpuq's modules: it calls none
 * of them. */
#ifndef GPUQ_CLIENT_CONN_ERR_H
#define GPUQ_CLIENT_CONN_ERR_H

#include "gpuq_internal.h"

/* Record a one-line message for gpuq_errmsg and return code. */
int conn_set_err(gpuq_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The stream is dead: every later call on c returns code. The message
 * names what failed (what), with strerror(errno) for GPUQ_E_IO. Returns
 * code. */
int conn_break(gpuq_conn *c, int code, const char *what);

#endif
