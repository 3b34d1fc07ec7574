/* SPDX-License-Identifier: Apache-2.0 */
/* control.c - the control ops' wire descriptions: hello, ping, status,
 * sessions, metrics, arena_open, arena_import, arena_close, cancel, ready (anyone) and
 * drain, shutdown, kill_session, set_limit (admin). None takes a payload or an op key; their
 * arguments are the protocol's common fields (version, client, priority, device, session, limit,
 * value). What they do is the server's (server/request/control.c); their gpuqctl commands live in
 * client/cli/ctl_basic.c and client/cli/ctl_admin.c.
 */

/* ---------------------------------------------------------------- proto */
#ifdef GPUQ_OP_PROTO
#include "errors.h"
#include "op_def.h"

static int check_hello(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                       gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    if (req->version == 0)
        return hdr_fail(msg, cap, GPUQ_E_VERSION, "hello needs \"version\" (the server speaks %u)",
                        GPUQ_PROTO_VERSION);
    if (req->version != GPUQ_PROTO_VERSION)
        return hdr_fail(msg, cap, GPUQ_E_VERSION,
                        "protocol version %u is not supported (server speaks %u)",
                        (unsigned)req->version, GPUQ_PROTO_VERSION);
    return 0;
}

static int check_kill_session(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                              gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    if (!req->has_session)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "kill_session needs \"session\"");
    return 0;
}

static int check_set_limit(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                           gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    if (!req->limit[0] || !req->has_value)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "set_limit needs \"limit\" and \"value\"");
    gpuq_limits tmp = *lim;
    if (gpuq_limits_set(&tmp, req->limit, req->value, NULL, msg, cap) != 0) {
        if (msg && cap > 0)
            hdr_one_line(msg, cap); /* it quotes the client's limit name */
        return GPUQ_E_BAD_ARGUMENT;
    }
    return 0;
}

static int check_arena_open(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                            gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    if (!req->has_size || req->size == 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "arena_open needs \"size\" (bytes, > 0)");
    return 0;
}

static int check_arena_close(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                             gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    if (!req->has_arena)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "arena_close needs \"arena\"");
    return 0;
}

static int check_cancel(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                        gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    if (!req->has_request)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "cancel needs \"request\" (the id of the request to cancel)");
    return 0;
}

static int check_ready(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                       gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    if (!req->has_request || !req->has_bytes)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "ready needs \"request\" (the gated request's id) and \"bytes\"");
    return 0;
}

#define CONTROL_(e, n, f, chk)                                                                     \
    const gpuq_op_def op_def_##n = {                                                               \
        .op = GPUQ_OP_##e, .name = #n, .flags = GPUQ_OPF_NO_PAYLOAD | (f), .check = (chk)}
CONTROL_(HELLO, hello, GPUQ_OPF_HELLO, check_hello);
CONTROL_(PING, ping, 0, NULL);
CONTROL_(STATUS, status, 0, NULL);
CONTROL_(SESSIONS, sessions, 0, NULL);
CONTROL_(METRICS, metrics, 0, NULL);
CONTROL_(DRAIN, drain, GPUQ_OPF_ADMIN, NULL);
CONTROL_(SHUTDOWN, shutdown, GPUQ_OPF_ADMIN, NULL);
CONTROL_(KILL_SESSION, kill_session, GPUQ_OPF_ADMIN | GPUQ_OPF_SESSION, check_kill_session);
CONTROL_(SET_LIMIT, set_limit, GPUQ_OPF_ADMIN | GPUQ_OPF_LIMIT, check_set_limit);
CONTROL_(ARENA_OPEN, arena_open, 0, check_arena_open);
CONTROL_(ARENA_IMPORT, arena_import, 0, NULL);
CONTROL_(ARENA_CLOSE, arena_close, 0, check_arena_close);
CONTROL_(CANCEL, cancel, 0, check_cancel);
CONTROL_(READY, ready, 0, check_ready);
CONTROL_(SLOWLOG, slowlog, 0, NULL);
CONTROL_(SLOWLOG_RESET, slowlog_reset, GPUQ_OPF_ADMIN, NULL);
CONTROL_(MONITOR, monitor, 0, NULL);
#undef CONTROL_
#endif

/* -------------------------------------------------------------- backend */
#ifdef GPUQ_OP_BACKEND
#include "op_backend.h"

/* Control ops never reach a backend: all hooks NULL. */
const op_backend_def op_backend_hello, op_backend_ping, op_backend_status, op_backend_sessions,
    op_backend_metrics, op_backend_drain, op_backend_shutdown, op_backend_kill_session,
    op_backend_set_limit, op_backend_arena_open, op_backend_arena_import, op_backend_arena_close,
    op_backend_cancel, op_backend_ready, op_backend_slowlog, op_backend_slowlog_reset,
    op_backend_monitor;
#endif

/* ------------------------------------------------------------------ ctl */
#ifdef GPUQ_OP_CTL
#include "op_ctl.h"

const ctl_entry *const op_ctl_hello = NULL; /* gpuq_connect says hello */
const ctl_entry *const op_ctl_ping = &ctl_ping_entry;
const ctl_entry *const op_ctl_status = &ctl_status_entry;
const ctl_entry *const op_ctl_sessions = &ctl_sessions_entry;
const ctl_entry *const op_ctl_metrics = &ctl_metrics_entry;
const ctl_entry *const op_ctl_drain = &ctl_drain_entry;
const ctl_entry *const op_ctl_shutdown = &ctl_shutdown_entry;
const ctl_entry *const op_ctl_kill_session = &ctl_kill_session_entry;
const ctl_entry *const op_ctl_set_limit = &ctl_set_limit_entry;
/* arenas are libgpuq's business (gpuqctl --transport shm) */
const ctl_entry *const op_ctl_arena_open = NULL;
const ctl_entry *const op_ctl_arena_import = NULL;
const ctl_entry *const op_ctl_arena_close = NULL;
/* gpuqctl sends cancel itself on Ctrl-C */
const ctl_entry *const op_ctl_cancel = NULL;
/* libgpuq sends ready for its gated staging */
const ctl_entry *const op_ctl_ready = NULL;
/* request_log.c's: gpuqctl slowlog [--reset] and gpuqctl monitor (ctl_monitor.c) */
const ctl_entry *const op_ctl_slowlog = &ctl_slowlog_entry;
const ctl_entry *const op_ctl_slowlog_reset = NULL;
const ctl_entry *const op_ctl_monitor = &ctl_monitor_entry;
#endif
