/* SPDX-License-Identifier: Apache-2.0 */
/* conn_reply.c - reading one reply frame of a libgpuq connection.
 *
 * Happy path: conn_reply_read_head reads the frame's prefix and header
 * (kept in the connection's buffer: reply.info points there, and an fd that
 * came with the frame is kept for arena_open) and decodes it; the caller,
 * having matched its id to the queue head (conn.c), reads the payload: the
 * whole of it into one buffer (gpuq_submit's requests, raw reads), or a
 * builder request's output 0 then output 1, by the reply's own dtype/shape
 * and dtype_b/shape_b, into that request's buffers or, without buffers, as
 * a document kept in its result.
 *
 * Failures: a transport error, a malformed prefix or header, or a header
 * over GPUQ_CLIENT_MAX_REPLY_HEADER breaks the connection (every later call
 * returns that code). A server error reply is just the request's status,
 * with "name: message" in gpuq_errmsg. A result that does not fit its
 * buffers, or whose size differs from what its shapes or the request
 * imply, is read and dropped (GPUQ_E_TOO_LARGE, GPUQ_E_SIZE_MISMATCH) so
 * the stream stays in step; so is a document over GPUQ_CLIENT_MAX_DOC.
 */
#include "conn_reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn_defs.h"
#include "conn_err.h"
#include "frame.h"
#include "sockio.h"

int conn_reply_read_head(gpuq_conn *c, gpuq_reply *rep, size_t *hlen)
{
    if (c->broken)
        return c->broken; /* c's message still says why */
    conn_reply *r = &c->reply;
    int fd = c->fd;
    memset(rep, 0, sizeof *rep);
    uint8_t pre[GPUQ_PREFIX_SIZE];
    int rx = -1;
    int rc = sockio_read_full_fd(fd, pre, sizeof pre, &rx);
    if (rc)
        return conn_break(c, rc, "reading a reply");
    if (r->rx_fd >= 0) /* an earlier reply's, never taken */
        close(r->rx_fd);
    r->rx_fd = rx;
    gpuq_prefix p;
    rc = gpuq_prefix_decode(pre, sizeof pre, &p);
    if (rc == GPUQ_E_VERSION)
        return conn_break(c, rc, "server speaks another protocol version");
    if (rc || p.kind != GPUQ_KIND_REPLY)
        return conn_break(c, GPUQ_E_PROTOCOL, "malformed reply frame prefix");
    if (p.header_len == 0 || p.header_len > GPUQ_CLIENT_MAX_REPLY_HEADER)
        return conn_break(c, GPUQ_E_PROTOCOL, "reply header length out of bounds");
    if (p.header_len > r->hbuf_cap) {
        uint8_t *nb = realloc(r->hbuf, p.header_len);
        if (!nb)
            return conn_break(c, GPUQ_E_NO_MEMORY, "out of memory reading a reply header");
        r->hbuf = nb;
        r->hbuf_cap = p.header_len;
    }
    rc = sockio_read_full(fd, r->hbuf, p.header_len);
    if (rc)
        return conn_break(c, rc, "reading a reply header");
    r->last_payload = p.payload_len;
    *hlen = p.header_len;
    char msg[200];
    if (gpuq_reply_decode(r->hbuf, p.header_len, rep, msg, sizeof msg)) {
        /* Without a trustworthy id the stream cannot be matched up. */
        char what[256];
        snprintf(what, sizeof what, "bad reply header: %s", msg);
        return conn_break(c, GPUQ_E_PROTOCOL, what);
    }
    return 0;
}

/* Drop the unread payload of the last reply. */
static int drop_payload(gpuq_conn *c)
{
    int rc = sockio_discard(c->fd, c->reply.last_payload);
    if (rc)
        return conn_break(c, rc, "reading a reply payload");
    return 0;
}

/* The reply's status as the call's result: a server error is the request's
 * status, with "name: message" in gpuq_errmsg. */
static int reply_status(gpuq_conn *c, const gpuq_reply *rep)
{
    if (rep->status < 0)
        return conn_set_err(c, rep->status, "%s: %s", gpuq_errname(rep->status), rep->message);
    return 0;
}

int conn_reply_read_whole(gpuq_conn *c, const gpuq_reply *rep, void *out, size_t out_cap)
{
    uint64_t len = c->reply.last_payload;
    int rc;
    if (len > out_cap || (len > 0 && !out)) {
        if ((rc = drop_payload(c)))
            return rc;
        if (rep->status == 0)
            return conn_set_err(c, GPUQ_E_TOO_LARGE,
                                "result of %llu bytes does not fit the %zu-byte buffer",
                                (unsigned long long)len, out_cap);
    } else if (len > 0) {
        rc = sockio_read_full(c->fd, out, (size_t)len);
        if (rc)
            return conn_break(c, rc, "reading a reply payload");
    }
    return reply_status(c, rep);
}

int gpuq_recv_reply(gpuq_conn *c, gpuq_reply *rep, void *out, size_t out_cap)
{
    size_t hlen;
    int rc = conn_reply_read_head(c, rep, &hlen);
    if (rc)
        return rc;
    return conn_reply_read_whole(c, rep, out, out_cap);
}

/* Bytes of an array of dt with ndim dimensions; false on overflow or an
 * unknown dtype. */
static bool array_bytes(int dt, unsigned ndim, const uint64_t *shape, uint64_t *bytes)
{
    uint64_t b = gpuq_dtype_size((gpuq_dtype)dt);
    for (unsigned k = 0; k < ndim; k++) {
        if (__builtin_mul_overflow(b, shape[k], &b))
            return false;
    }
    *bytes = b;
    return b != 0 || ndim > 0;
}

int conn_reply_read_split(gpuq_conn *c, const req_output out[REQ_MAX_IO], uint64_t expect,
                          const uint8_t where[REQ_MAX_IO], const gpuq_reply *rep, gpuq_result *res)
{
    uint64_t len = c->reply.last_payload, n[REQ_MAX_IO] = {len, 0};
    int rc;
    if (result_from_reply(res, rep))
        goto err_no_memory;
    if (rep->status < 0) {
        if (len && (rc = drop_payload(c)))
            return rc;
        return reply_status(c, rep);
    }
    if (!out[0].buf && !out[1].buf) { /* a document, or nothing */
        if (len == 0)
            return 0;
        if (len > GPUQ_CLIENT_MAX_DOC) {
            res->status = conn_set_err(c, GPUQ_E_TOO_LARGE, "reply of %llu bytes is over %u",
                                       (unsigned long long)len, GPUQ_CLIENT_MAX_DOC);
            goto err_drop;
        }
        if (!(res->payload = malloc((size_t)len + 1)))
            goto err_no_memory;
        if ((rc = sockio_read_full(c->fd, res->payload, (size_t)len)))
            return conn_break(c, rc, "reading a reply payload");
        res->payload[len] = '\0';
        res->payload_len = (size_t)len;
        return 0;
    }
    /* the bytes each output has by the reply's shapes; those on the wire
     * make the payload */
    uint64_t wire = 0;
    bool bad = false;
    for (unsigned i = 0; i < REQ_MAX_IO; i++) {
        if (i < res->nout &&
            !array_bytes(res->out[i].dtype, res->out[i].ndim, res->out[i].shape, &n[i]))
            bad = true;
        if (!bad && where[i] == GPUQ_REF_WIRE && __builtin_add_overflow(wire, n[i], &wire))
            bad = true;
    }
    if (bad || wire != len) {
        res->status = conn_set_err(c, GPUQ_E_SIZE_MISMATCH,
                                   "reply payload of %llu bytes does not match its shapes",
                                   (unsigned long long)len);
        goto err_drop;
    }
    if (expect && n[0] != expect) {
        res->status = conn_set_err(c, GPUQ_E_SIZE_MISMATCH, "result of %llu bytes, expected %llu",
                                   (unsigned long long)n[0], (unsigned long long)expect);
        goto err_drop;
    }
    for (unsigned i = 0; i < REQ_MAX_IO; i++) {
        if (where[i] == GPUQ_REF_NAME)
            continue;
        if (n[i] > out[i].cap || (n[i] && !out[i].buf)) {
            res->status = conn_set_err(c, GPUQ_E_TOO_LARGE,
                                       "output %u of %llu bytes does not fit the %zu-byte buffer",
                                       i, (unsigned long long)n[i], out[i].cap);
            goto err_drop;
        }
    }
    for (unsigned i = 0; i < REQ_MAX_IO; i++) {
        if (where[i] == GPUQ_REF_NAME)
            continue; /* kept by gpuqd: 0 bytes here */
        if (n[i] && where[i] == GPUQ_REF_WIRE &&
            (rc = sockio_read_full(c->fd, out[i].buf, (size_t)n[i])))
            return conn_break(c, rc, "reading a reply payload");
        res->out[i].bytes = (size_t)n[i]; /* GPUQ_REF_ARENA: already in the arena */
    }
    return 0;

err_no_memory:
    res->status = conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory reading a reply");
err_drop:
    rc = res->status;
    if (len && !c->broken) {
        int drc = drop_payload(c);
        if (drc)
            return drc;
    }
    return rc;
}

int conn_reply_started(gpuq_conn *c, uint64_t want, bool orphan, const gpuq_reply *rep)
{
    char what[128];
    if (rep->id != want || c->reply.last_payload) {
        snprintf(what, sizeof what,
                 "started notice for id %llu (%llu payload bytes) where %llu was due",
                 (unsigned long long)rep->id, (unsigned long long)c->reply.last_payload,
                 (unsigned long long)want);
        return conn_break(c, GPUQ_E_PROTOCOL, what);
    }
    if (c->started_fn && !orphan)
        c->started_fn(c->started_user, rep->id);
    return 0;
}

void gpuq_set_started_fn(gpuq_conn *c, gpuq_started_fn fn, void *user)
{
    c->started_fn = fn;
    c->started_user = user;
}

int conn_reply_read_orphan(gpuq_conn *c, const gpuq_reply *rep, gpuq_result *res)
{
    if (res) {
        result_reset(res);
        res->id = rep->id;
        res->status = rep->status;
        memcpy(res->message, rep->message, sizeof res->message);
    }
    int rc = c->reply.last_payload ? drop_payload(c) : 0;
    return rc ? rc : reply_status(c, rep);
}

void conn_reply_release(conn_reply *r)
{
    if (r->rx_fd >= 0)
        close(r->rx_fd);
    free(r->hbuf);
}
