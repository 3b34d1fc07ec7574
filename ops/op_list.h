/* SPDX-License-Identifier: Apache-2.0 */
/* op_list.h - every op of gpuq, one line each (an X-macro).
 *
 * X(ENUM, name): ENUM becomes GPUQ_OP_<ENUM> in proto/header.h's gpuq_op,
 * name is the op's file stem and its symbols' suffix: ops/<file>.c defines
 * gpuq_op_def_<name> (compiled with GPUQ_OP_PROTO), gpuq_op_backend_<name>
 * (GPUQ_OP_BACKEND) and gpuq_op_ctl_<name> (GPUQ_OP_CTL); ops/op_table.c
 * builds each side's table from this list. The enum value is an index into
 * per-op counters (stats, metrics), so a new op is APPENDED, never inserted:
 * what an op is (compute, admin, no payload) is its def's flags, not its
 * place here. Installed beside header.h (the public gpuq_op enum uses it).
 */
#ifndef GPUQ_OPS_OP_LIST_H
#define GPUQ_OPS_OP_LIST_H

#define GPUQ_OP_LIST(X)                                                                            \
    X(HELLO, hello)                                                                                \
    X(PING, ping)                                                                                  \
    X(STATUS, status)                                                                              \
    X(NORMALIZE, normalize)                                                                        \
    X(HAVERSINE, haversine)                                                                        \
    X(GRID, grid)                                                                                  \
    X(PAIRWISE, pairwise)                                                                          \
    X(SESSIONS, sessions)                                                                          \
    X(METRICS, metrics)                                                                            \
    X(DRAIN, drain)                                                                                \
    X(SHUTDOWN, shutdown)                                                                          \
    X(KILL_SESSION, kill_session)                                                                  \
    X(SET_LIMIT, set_limit)                                                                        \
    X(KNN, knn)                                                                                    \
    X(ARENA_OPEN, arena_open)                                                                      \
    X(ARENA_IMPORT, arena_import)                                                                  \
    X(ARENA_CLOSE, arena_close)                                                                    \
    X(CANCEL, cancel)                                                                              \
    X(READY, ready)                                                                                \
    X(PUT, put)                                                                                    \
    X(GET, get)                                                                                    \
    X(LIST, list)                                                                                  \
    X(REMOVE, remove)                                                                              \
    X(SLOWLOG, slowlog)                                                                            \
    X(SLOWLOG_RESET, slowlog_reset)                                                                \
    X(MONITOR, monitor)

#endif
