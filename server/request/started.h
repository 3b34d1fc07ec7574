/* SPDX-License-Identifier: Apache-2.0 */
/* started.h - the "started" notice of a request sent with "progress": true
 * (PROTOCOL.md 4.1): a reply frame {"id", "status": "started"} without a
 * payload, written in the request's place among its session's replies
 * (after every earlier request's reply), before its own reply.
 *
 * Happy path: request_run handed the request to the backend; started_send
 * encodes the frame and queues it with session_send as an extra frame
 * (session_frame.extra): it takes the request's sequence number without
 * using it up, so the reply written after it keeps its place.
 * Failures: out of memory means no notice (logged at debug); the reply
 * comes as ever. A closing session drops it with the rest of its queue.
 */
#ifndef GPUQ_SERVER_STARTED_H
#define GPUQ_SERVER_STARTED_H

#include "server_defs.h"

/* Queue r's started notice, once, if r asked for it and its reply is not
 * queued yet (r borrowed). */
void started_send(request *r);

#endif
