/* SPDX-License-Identifier: Apache-2.0 */
/* monitor.h - the connections that watch finished requests (the `monitor`
 * op, PROTOCOL.md 3.6): one unsolicited frame per record each may see.
 *
 * Happy path: monitor_start attaches a subscriber to the session that sent
 * `monitor` (s->monitor); request_log.c hands monitor_publish each record
 * (its map members encoded once); for each subscriber that may see it
 * (an admin: every record; others: their uid's; never its own
 * connection's) a frame is built and queued on its session in reply order
 * (session_send). A `cancel` naming the monitor request (monitor_stop) or
 * the connection's close (monitor_session_closed) detaches it.
 *
 * Backpressure: a subscriber holds at most queue_cap bytes of frames
 * queued and not yet written; a record beyond that is dropped and counted,
 * and the next record it gets carries the count ("dropped"). So a monitor
 * that does not read costs the daemon at most queue_cap bytes, never a
 * wait. Out of memory for a frame counts as a drop too.
 *
 * A subscriber lives while attached or while a frame of it is queued
 * (refs); its queued frames are written or dropped by the session as any
 * reply. Loop thread only.
 */
#ifndef GPUQ_SERVER_MONITOR_H
#define GPUQ_SERVER_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server_defs.h"

typedef struct monitor_sub monitor_sub;

typedef struct monitor_list {
    monitor_sub *head; /* attached subscribers */
    uint32_t n;
    uint64_t seq; /* records published so far (each record's "seq") */
} monitor_list;

static inline bool monitor_any(const monitor_list *ml)
{
    return ml->head != NULL;
}

/* Attach s (borrowed) as a monitor whose request id is id. 0, or
 * GPUQ_E_BAD_ARGUMENT (s monitors already; msg set) or GPUQ_E_NO_MEMORY. */
int monitor_start(monitor_list *ml, session *s, uint64_t id, char *msg, size_t cap);
/* s's `cancel` of request id: detach s's monitor if id is its request.
 * Returns whether it was (records queued before stay queued). */
bool monitor_stop(session *s, uint64_t id);
/* s closes: detach its monitor, if any. */
void monitor_session_closed(session *s);
/* Queue one record frame on every subscriber that may see it. members:
 * nmembers key/value pairs of the record's map, encoded (borrowed); uid
 * and from: whose request it was. members NULL (out of memory): each
 * subscriber that may see it counts it dropped. */
void monitor_publish(monitor_list *ml, const session *from, int64_t uid, const uint8_t *members,
                     size_t len, uint32_t nmembers, uint64_t queue_cap);
/* Records s's monitor dropped since it started (0 without one), and the
 * bytes it has queued. */
uint64_t monitor_dropped_total(const session *s);
/* Detach every subscriber (shutdown). */
void monitor_list_close(monitor_list *ml);

#endif
