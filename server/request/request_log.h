/* SPDX-License-Identifier: Apache-2.0 */
/* request_log.h - what gpuqd tells of each finished request: the slowlog,
 * the monitors, the debug log (PROTOCOL.md 3.6; issue 31 "Watch requests").
 *
 * Happy path: request.c calls request_log_done once per request, where its
 * reply is decided (request_reply: success, error, cancel, deadline). When
 * no monitor is attached, the log level is not debug and the request is
 * not slow enough for the slowlog, that is one clock read and a few
 * compares: no allocation, no formatting. Otherwise one reqlog_rec is
 * built (request_log_defs.h) and offered to the slowlog (slowlog.h), its
 * map members encoded once for the monitors (monitor.h) and a debug line
 * written. control.c runs the ops: slowlog (the kept records the asker may
 * see, slowest first), slowlog_reset (admin) and monitor.
 *
 * Failure: out of memory while building a record's encoding drops it for
 * the monitors (counted as dropped by each) and the debug line; the
 * slowlog copies records into memory it holds. A slowlog_len it cannot
 * allocate keeps the old length (logged once per change).
 */
#ifndef GPUQ_SERVER_REQUEST_LOG_H
#define GPUQ_SERVER_REQUEST_LOG_H

#include "monitor.h"
#include "server_defs.h"
#include "slowlog.h"

struct request_log {
    slowlog sl;
    monitor_list mon;
    uint64_t want_len; /* the slowlog_len slowlog.cap follows (a failed resize is retried on
                          the next change) */
};

/* srv->rlog, empty. 0 or GPUQ_E_NO_MEMORY. */
int request_log_init(server *srv);
/* Detach every monitor and free srv->rlog (idempotent). */
void request_log_close(server *srv);
/* r's reply was decided (status and message set): log it. r borrowed. */
void request_log_done(request *r);
/* s closes: its monitor, if any, stops. */
void request_log_session_closed(session *s);

/* The ops (control.c's table): fill r's reply; 0 or a code (message set). */
int request_log_slowlog(request *r);
int request_log_slowlog_reset(request *r);
int request_log_monitor(request *r);
/* A cancel of request id on s stopped s's monitor? (control.c's cancel) */
bool request_log_cancel(session *s, uint64_t id);

#endif
