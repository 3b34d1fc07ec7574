/* SPDX-License-Identifier: Apache-2.0 */
/* request_log_defs.h - one finished request as the slowlog, the monitors
 * and the debug log see it (request_log.c builds it, slowlog.c keeps the
 * slowest, monitor.c streams it). Types only. */
#ifndef GPUQ_SERVER_REQUEST_LOG_DEFS_H
#define GPUQ_SERVER_REQUEST_LOG_DEFS_H

#include <stdint.h>

#include "gpuq_limits.h"

/* How a request's arrays travelled (PROTOCOL.md 3.6: "transport"). */
enum reqlog_transport {
    REQLOG_NONE = 0, /* no array: a control op */
    REQLOG_SOCKET,   /* every array in the frames' payloads */
    REQLOG_ARENA,    /* every array in shared-memory arenas */
    REQLOG_RESIDENT, /* every array a resident one */
    REQLOG_MIXED     /* more than one of those */
};

typedef struct reqlog_rec {
    uint64_t wall_us; /* unix time (µs) its reply was decided */
    uint64_t session; /* session id */
    uint64_t id;      /* the client's request id */
    int64_t uid;      /* -1: unknown */
    int32_t pid;      /* -1: unknown */
    char client[GPUQ_CLIENT_NAME_MAX + 1];
    int op;    /* gpuq_op; GPUQ_OP_NONE when its header was not decoded */
    int dtype; /* gpuq_dtype, GPUQ_DT_NONE when none */
    uint32_t ndim, ndim_b;
    uint64_t shape[GPUQ_MAX_DIMS], shape_b[GPUQ_MAX_DIMS];
    int priority; /* the level its session was granted (GPUQ_PRIO_*) */
    int transport;
    double queue_us, kernel_us, total_us;
    int status; /* 0 or GPUQ_E_* */
    char message[160];
    uint64_t bytes_in, bytes_out;
} reqlog_rec;

#endif
