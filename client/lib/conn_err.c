/* SPDX-License-Identifier: Apache-2.0 */
/* conn_err.c - a connection's error state (see conn_err.h). */
#include "conn_err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "conn_defs.h"

int conn_set_err(gpuq_conn *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

int conn_break(gpuq_conn *c, int code, const char *what)
{
    c->broken = code;
    if (code == GPUQ_E_CLOSED)
        return conn_set_err(c, code, "server closed the connection (%s)", what);
    if (code == GPUQ_E_IO)
        return conn_set_err(c, code, "%s: %s", what, strerror(errno));
    return conn_set_err(c, code, "%s", what);
}
