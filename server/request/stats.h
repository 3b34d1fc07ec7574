/* SPDX-License-Identifier: Apache-2.0 */
/* stats.h - counters of the daemon (per op, per error code, bytes, sessions)
 * and the status reply's info map. */
#ifndef GPUQ_SERVER_STATS_H
#define GPUQ_SERVER_STATS_H

#include <stdint.h>

#include "errors.h"
#include "header.h"
#include "mpwrite.h"

typedef struct stats {
    uint64_t requests[GPUQ_OP_COUNT];
    uint64_t errors[1 - GPUQ_E_LAST];
    uint64_t bytes_in, bytes_out;
    uint64_t sessions_total;
} stats;

struct server;
struct session;

void stats_request(stats *st, gpuq_op op);
void stats_error(stats *st, int code);
/* Write the devices array (index, name, total_memory, memory_in_use,
 * sessions, in_flight, bytes) into w. */
void stats_devices(const struct server *srv, gpuq_mpw *w);
/* The keys hello and status share: version, server, backend, devices. */
#define STATS_SERVER_KEYS 4
void stats_server_keys(const struct server *srv, gpuq_mpw *w);
/* The sessions document: one msgpack map per session, concatenated (a
 * msgpack stream, so any number of sessions fits the bounded readers).
 * A non-admin viewer sees only sessions of its own uid. *out is malloc'd
 * (owned by the caller). Returns 0 or GPUQ_E_NO_MEMORY. */
int stats_sessions_doc(const struct server *srv, const struct session *viewer, uint8_t **out,
                       size_t *len, uint32_t *count);
/* Write the status info map of srv into w (borrowed). */
void stats_status_info(const struct server *srv, gpuq_mpw *w);

#endif
