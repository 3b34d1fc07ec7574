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

void stats_request(stats *st, gpuq_op op);
void stats_error(stats *st, int code);
/* Write the status info map of srv into w (borrowed). */
void stats_status_info(const struct server *srv, gpuq_mpw *w);

#endif
