/* SPDX-License-Identifier: Apache-2.0 */
/* conn_reply.h - reading one reply frame of a libgpuq connection: its
 * prefix and header, then its payload into the buffers of the request it
 * answers (conn_reply.c).
 *
 * conn.c embeds a conn_reply in each connection; its wait (wait_head) picks
 * the queue head, checks that the reply read by conn_reply_read_head is the
 * head's, and hands the payload to conn_reply_read_whole, _split or _orphan
 * by the kind of request the head is.
 */
#ifndef GPUQ_CLIENT_CONN_REPLY_H
#define GPUQ_CLIENT_CONN_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "req.h"

/* Largest reply header libgpuq accepts (status info included). */
#define GPUQ_CLIENT_MAX_REPLY_HEADER (1u << 20)
/* Largest document (sessions, metrics) libgpuq reads; larger ones are
 * skipped and reported as too_large. */
#define GPUQ_CLIENT_MAX_DOC (256u << 20)

typedef struct conn_reply {
    uint8_t *hbuf; /* last reply header; reply.info points here */
    size_t hbuf_cap;
    uint64_t last_payload; /* payload_len of the last reply read */
    int rx_fd;             /* an fd that came with the last reply (arena_open), or -1 */
} conn_reply;

/* Read one reply frame's prefix and header (into the reply state's hbuf,
 * *hlen bytes) and decode it into *rep; last_payload is its payload
 * length, still unread. Transport or framing failures break the
 * connection. */
int conn_reply_read_head(gpuq_conn *c, gpuq_reply *rep, size_t *hlen);
/* The whole payload into out[out_cap] (gpuq_submit's requests and raw
 * reads); one that does not fit is read and dropped. Returns the reply's
 * status (a server error with "name: message" in gpuq_errmsg). */
int conn_reply_read_whole(gpuq_conn *c, const gpuq_reply *rep, void *out, size_t out_cap);
/* A builder request's reply into *res: output 0's bytes (by "dtype"/"shape")
 * into out[0], then output 1's (by "dtype_b"/"shape_b") into out[1];
 * without output buffers the payload is kept in res. expect: bytes of
 * output 0 the request implies (0: not known, or no result); where: each
 * output's entry of "out" as sent (GPUQ_REF_*): only GPUQ_REF_WIRE
 * outputs are in the payload, a GPUQ_REF_ARENA one is in its arena
 * already (its bytes counted in res), a GPUQ_REF_NAME one kept by gpuqd
 * (0 bytes in res). A payload that does not match the reply's shapes, the
 * request, or the buffers is dropped, so the stream stays in step.
 * Returns the result's status, also kept in res. */
int conn_reply_read_split(gpuq_conn *c, const req_output out[REQ_MAX_IO], uint64_t expect,
                          const uint8_t where[REQ_MAX_IO], const gpuq_reply *rep, gpuq_result *res);
/* rep (just read) is a started notice (PROTOCOL.md 4.1) where the reply of
 * request want was due: it must name want and carry no payload (else the
 * stream breaks, GPUQ_E_PROTOCOL); the connection's started callback then
 * hears of it, unless the request is an orphan. 0: wait on for the reply. */
int conn_reply_started(gpuq_conn *c, uint64_t want, bool orphan, const gpuq_reply *rep);
/* The reply of a request whose blocking call was interrupted: its status
 * and message into *res (may be NULL), its payload dropped. */
int conn_reply_read_orphan(gpuq_conn *c, const gpuq_reply *rep, gpuq_result *res);
/* Close the fd that came with the last reply, if never taken, and free
 * the header buffer (gpuq_close). */
void conn_reply_release(conn_reply *r);

#endif
