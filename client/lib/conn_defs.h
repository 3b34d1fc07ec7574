/* SPDX-License-Identifier: Apache-2.0 */
/* conn_defs.h - a libgpuq connection's state, shared by conn.c and its parts
 * (conn_reply.c reads replies, stage.c stages arrays, cancel.c deadlines and
 * the cancel op, arena.c mapped arenas, hello.c the hello exchange), which
 * use its fields directly. Types only. */
#ifndef GPUQ_CLIENT_CONN_DEFS_H
#define GPUQ_CLIENT_CONN_DEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cancel.h"
#include "conn_reply.h"
#include "req.h"
#include "sockio.h"
#include "sockpath.h"
#include "stage.h"

typedef struct pending_req {
    uint64_t id;
    bool split;                    /* from gpuq_submit_req: outputs 0 and 1 by the reply's shapes */
    req_output out[REQ_MAX_IO];    /* borrowed from the caller until its wait */
    uint64_t expect;               /* split: bytes of output 0 the request implies (0: no result) */
    uint8_t out_where[REQ_MAX_IO]; /* split: each output's GPUQ_REF_* as sent (in the reply's
                                      payload only when GPUQ_REF_WIRE) */
    bool orphan; /* its blocking call was interrupted: no buffer is the caller's, the payload is
                    dropped */
    sockio_spin spin; /* by reference both ways: when its wait spins (sockio.h) */
    bool follows;     /* a ready of the request before it: read with that one's reply */
} pending_req;

struct gpuq_conn {
    int fd;
    int broken; /* 0, or the code that broke the stream */
    uint64_t next_id;
    gpuq_server_info info;
    char path[SOCKPATH_LEN];
    bool unreachable; /* gpuq_connect found no socket that accepts */
    char err[1024];   /* room for every socket path tried and why (sockpath.c) */
    pending_req *q;   /* ring buffer */
    size_t q_cap, q_head, q_len;
    size_t q_follow;     /* entries that follow another (conn_follow_last): not pending */
    conn_reply reply;    /* the reply being read (client/lib/conn_reply.c) */
    gpuq_result scratch; /* the convenience calls' result (status info lives here) */
    int tx_fd;           /* an fd to attach to the next frame sent (arena_import), or -1 */
    gpuq_arena *arenas;  /* mapped arenas (client/lib/arena.c) */
    conn_stage stage;    /* the blocking calls' staging arena (client/lib/stage.c) */
    conn_cancel cancel;  /* its deadline and interrupt fd (client/lib/cancel.c) */
    bool spin_off;       /* gpuq_set_wait_spin(c, false), or GPUQ_WAIT_SPIN=0 at connect */
    /* gpuq_set_started_fn (NULL: notices are read and dropped) */
    gpuq_started_fn started_fn;
    void *started_user;
};

#endif
