/* SPDX-License-Identifier: Apache-2.0 */
/* session_timeout.h - the clocks that close a session whose client is too
 * slow or gone quiet (config hello_timeout, frame_timeout, frame_min_rate,
 * reply_timeout, idle_timeout; 0 is off), checked by the server's sweep
 * timer.
 *
 * Happy path: session_sweep finds nothing due. When one is due it logs the
 * reason (rate-limited), marks the session broken, queues one final
 * `timeout` reply through the request layer (srv->sev->timeout, which gives
 * a stalled frame's staging back at once) and lets the session linger at
 * most SESSION_LINGER_NS for that reply to be written; the next sweep after
 * that closes it whatever the client does.
 */
#ifndef GPUQ_SERVER_SESSION_TIMEOUT_H
#define GPUQ_SERVER_SESSION_TIMEOUT_H

#include <stdint.h>

#include "server_defs.h"

/* Close s if one of its timeouts has passed at now (uv_hrtime), with a
 * final `timeout` reply when nothing else is queued for it. Also ends the
 * linger of a session that is closing after a final reply. Returns the enum
 * session_timeout_kind that fired, or -1. */
int session_sweep(session *s, uint64_t now);
const char *session_timeout_name(int kind);

#endif
