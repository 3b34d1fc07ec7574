/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.h - request latency histograms by op and status, and the
 * Prometheus text exposition (format 0.0.4) of everything gpuqd counts.
 *
 * metrics_observe runs on the loop thread for every reply written (a few
 * array increments, no allocation). metrics_render builds the whole text on
 * demand for the "metrics" op; only op/status pairs seen so far are listed.
 */
#ifndef GPUQ_SERVER_METRICS_H
#define GPUQ_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "header.h"

#define METRICS_NBUCKETS 17
#define METRICS_NSTATUS (1 - GPUQ_E_LAST) /* 0: ok, i: error code -i */

typedef struct metrics {
    uint64_t count[GPUQ_OP_COUNT][METRICS_NSTATUS];
    double sum[GPUQ_OP_COUNT][METRICS_NSTATUS];
    /* per bucket, not cumulative (rendering accumulates) */
    uint64_t bucket[GPUQ_OP_COUNT][METRICS_NSTATUS][METRICS_NBUCKETS];
} metrics;

struct server;

/* One reply: op (GPUQ_OP_NONE when the header did not decode), status (0 or
 * a GPUQ_E_* code), seconds from the header read to the reply queued. */
void metrics_observe(metrics *m, gpuq_op op, int status, double seconds);
/* The exposition text of srv into *out (malloc'd, owned by the caller).
 * Returns 0 or GPUQ_E_NO_MEMORY. */
int metrics_render(const struct server *srv, char **out, size_t *len);

#endif
