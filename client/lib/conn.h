/* SPDX-License-Identifier: Apache-2.0 */
/* conn.h - libgpuq's request path (conn.c) as its other parts use it:
 * submit a builder request, optionally staging its arrays through a hook
 * the caller hands down (call.c's blocking calls pass stage.c's), and a
 * blocking call on that path. conn_defs.h holds the connection's fields;
 * conn_err.h its error state.
 */
#ifndef GPUQ_CLIENT_CONN_H
#define GPUQ_CLIENT_CONN_H

#include <stdbool.h>

#include "req.h"

/* Stage r's arrays that refs does not already name (r's sizes in sz):
 * 0, or an error code with c's message set; *gate true sends r with
 * "gate": true (its inputs are put in place after the send, PROTOCOL.md
 * 3.4). Called by conn_submit_req after the checks and before the header
 * is encoded, with c's interrupt fd off (staging's own calls are not
 * interrupted). */
typedef int (*conn_stager)(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs,
                           bool *gate);

/* Submit r: checked by proto's own decoder and checks, its arrays by
 * reference when they lie in c's arenas, else staged by stage (may be
 * NULL: by socket); counted: against max_inflight (a cancel is not).
 * *id (may be NULL) gets its id. */
int conn_submit_req(gpuq_conn *c, gpuq_req *r, conn_stager stage, bool counted, uint64_t *id);
/* 0 when c may make a blocking call: not broken, nothing outstanding. */
int conn_blocking_ready(gpuq_conn *c);
/* A blocking call of r on c's request path: submit (stage as above), wait,
 * and give the request up (its reply read and dropped later) when the
 * wait is interrupted. res (may be NULL) gets the result. */
int conn_call(gpuq_conn *c, gpuq_req *r, conn_stager stage, gpuq_result *res);
/* The request just submitted (the newest outstanding) is a "ready" of
 * the gated request before it: its reply is read by the wait that reads
 * that request's, right after it, and never by a wait of its own;
 * gpuq_pending does not count it. A ready refused is a libgpuq bug: that
 * wait returns GPUQ_E_PROTOCOL, with gpuqd's message, unless the gated
 * request itself failed. */
void conn_follow_last(gpuq_conn *c);
/* A blocking call's wait was interrupted: its request, the only one
 * outstanding, is given up by the call (gpuq_set_interrupt_fd). */
void conn_orphan_head(gpuq_conn *c);

#endif
