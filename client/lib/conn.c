/* SPDX-License-Identifier: Apache-2.0 */
/* conn.c - a libgpuq connection's request path: pipelined submit and wait,
 * and the plain blocking call (conn_call) the other parts build on.
 *
 * libgpuq's files, top to bottom (calls point down only; tests/lint/
 * layers.py checks that none comes back up): ops.c (convenience calls);
 * call.c (the blocking calls); stage.c (the staging arena); arena.c (the
 * arena ops) and connect.c (gpuq_connect: socket, hello; gpuq_close);
 * conn.c; conn_reply.c (reading replies), cancel.c (deadlines, interrupts)
 * and arena_map.c (mapped arenas, refs); conn_err.c (the error state).
 *
 * Happy path: gpuq_connect (connect.c) made the connection and keeps the
 * server's info and limits. gpuq_submit_req encodes a builder request with
 * the next id, decodes and checks that header with proto's own functions
 * (what is valid, and the exact input and output sizes, are decided there and
 * nowhere else in libgpuq), writes prefix + header + A + B with one writev,
 * and queues (id, output buffers, expected size); gpuq_wait_req reads the
 * next reply frame into the queue head's buffers: output 0 then output 1, by
 * the reply's own dtype/shape and dtype_b/shape_b (the reading itself is
 * conn_reply.c's; the queue and the order check are here).
 * gpuq_submit/gpuq_wait (gpuq_internal.h) are the same path for a filled
 * gpuq_request, the whole payload into one buffer. The blocking calls
 * (call.c's gpuq_call_req, gpuq_call) may send their arrays through the
 * connection's staging arena instead of the socket: conn_submit_req takes
 * the stager they hand it (stage.c's stage_req); pipelined submits never
 * stage. A stager may ask for its request to go gated ("gate": true is
 * added to the header; PROTOCOL.md 3.4): the "ready" requests sent after
 * it (conn_follow_last) are no pending requests of their own, and the
 * wait that reads the gated request's reply reads theirs right after it
 * (read_followers). Deadlines and interruptible waits are cancel.c's; a
 * blocking call whose wait was interrupted gives its request up
 * (conn_orphan_head: its reply is read and dropped later, the caller's
 * buffers no longer touched). A request with its arrays by reference both ways (no
 * payload) gets a spin window at send (sockio_spin_plan): its wait sleeps to
 * just before the reply is due, then polls without sleeping for a while
 * (sockio_spin_wait) before it blocks.
 * Resident arrays (PROTOCOL.md 3.5): a builder request's resident inputs
 * and kept outputs are entries of "in" / "out" by name (req.c), beside
 * nil entries for what travels and arena ranges for what lies in arenas.
 * A request with a resident input (get's "name" too) is decoded but not
 * checked here: its shapes are gpuqd's, so its outputs are read by the
 * reply's own shapes, never staged, and gpuqd's checks judge it.
 *
 * Failures: a request that fails the checks is refused before anything is
 * sent, with the code the server would give. A socket error or a broken reply
 * stream marks the connection broken (every later call returns that code); a
 * server error reply is just the request's status, with "name: message" in
 * gpuq_errmsg. A send that fails because the server hung up first returns the
 * refusal the server left for us, if any (busy over max_sessions), not
 * "closed". A result that does not fit its buffers, or whose size differs
 * from what its shapes or the request imply, is read and dropped
 * (GPUQ_E_TOO_LARGE, GPUQ_E_SIZE_MISMATCH; conn_reply.c) so the stream stays
 * in step. A reply whose id is not the oldest outstanding request's
 * (replies come in request order) breaks the connection with
 * GPUQ_E_PROTOCOL before any of its payload is read: no caller's buffer
 * gets another request's result. A submit refuses (GPUQ_E_BUSY, nothing
 * sent) once max_inflight requests are outstanding: callers interleave
 * waits, so the server's replies never pile up unread while we block
 * writing.
 */
#include "conn.h"
#include "conn_defs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "gpuq_limits.h"
#include "mpread.h"
#include "mpwrite.h"
#include "arena_map.h"
#include "cancel.h"
#include "conn_err.h"
#include "conn_reply.h"
#include "sockio.h"

bool gpuq_unreachable(const gpuq_conn *c)
{
    return c && c->unreachable;
}

const gpuq_server_info *gpuq_info(const gpuq_conn *c)
{
    return &c->info;
}
const char *gpuq_errmsg(const gpuq_conn *c)
{
    return c->err;
}
unsigned gpuq_pending(const gpuq_conn *c)
{
    return (unsigned)(c->q_len - c->q_follow);
}

int gpuq_set_wait_spin(gpuq_conn *c, bool on)
{
    if (!c)
        return GPUQ_E_BAD_ARGUMENT;
    c->spin_off = !on;
    return 0;
}

static int queue_push(gpuq_conn *c, const pending_req *p)
{
    if (c->q_len == c->q_cap) {
        size_t ncap = c->q_cap ? c->q_cap * 2 : 16;
        pending_req *nq = malloc(ncap * sizeof *nq);
        if (!nq)
            return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory queueing a request");
        for (size_t i = 0; i < c->q_len; i++)
            nq[i] = c->q[(c->q_head + i) % c->q_cap];
        free(c->q);
        c->q = nq;
        c->q_cap = ncap;
        c->q_head = 0;
    }
    c->q[(c->q_head + c->q_len) % c->q_cap] = *p;
    c->q_len++;
    return 0;
}

int gpuq_send_raw(gpuq_conn *c, const void *buf, size_t len)
{
    if (c->broken)
        return c->broken; /* c->err still says why */
    struct iovec iov = {(void *)buf, len};
    int rc = sockio_writev_full(c->fd, &iov, 1);
    if (rc)
        return conn_break(c, rc, "send");
    return 0;
}

/* Sending failed with rc. When the server hung up (rc GPUQ_E_CLOSED: EPIPE
 * or ECONNRESET) with nothing outstanding, it may have said why first: a
 * refusal of the whole connection (an error reply with id 0, such as busy
 * for a connection over max_sessions) is then already in our receive queue,
 * since gpuqd closes only after that reply was written, and the kernel keeps
 * it readable even when it resets the connection for our unread bytes. Read
 * it, waiting at most CONN_REFUSAL_WAIT_MS, and fail with its code and
 * message instead of "closed". With requests outstanding the next replies
 * are theirs and stay unread: the connection is broken either way. */
#define CONN_REFUSAL_WAIT_MS 200
static int conn_send_failed(gpuq_conn *c, int rc, const char *what)
{
    if (rc != GPUQ_E_CLOSED || c->q_len != 0 ||
        sockio_wait_readable(c->fd, CONN_REFUSAL_WAIT_MS) != 1)
        return conn_break(c, rc, what);
    gpuq_reply rep;
    int st = gpuq_recv_reply(c, &rep, NULL, 0);
    if (c->broken || st >= 0 || rep.id != 0)
        return conn_break(c, rc, what); /* no reply after all, or not a refusal */
    c->broken = st;                     /* c->err is the server's "name: message" */
    return st;
}

/* Refuse a request before encoding it: a dead stream, or (counted: not a
 * cancel, which gpuqd does not count either) max_inflight requests
 * outstanding, so the server's replies never pile up unread while we block
 * writing. */
static int submit_ready(gpuq_conn *c, bool counted)
{
    if (c->broken)
        return c->broken; /* c->err still says why */
    if (counted && c->info.limits.max_inflight && c->q_len >= c->info.limits.max_inflight)
        return conn_set_err(c, GPUQ_E_BUSY,
                            "%zu requests outstanding (max_inflight %u): wait first", c->q_len,
                            c->info.limits.max_inflight);
    return 0;
}

/* Queue p and send prefix + hdr + a + b with one writev. hdr is borrowed. */
static int send_frame(gpuq_conn *c, const pending_req *p, const uint8_t *hdr, size_t hlen,
                      const void *a, size_t a_len, const void *b, size_t b_len)
{
    uint64_t payload = (uint64_t)a_len + (uint64_t)b_len;
    if (payload > c->info.limits.max_payload)
        return conn_set_err(c, GPUQ_E_TOO_LARGE, "payload of %llu bytes over the server's %llu",
                            (unsigned long long)payload,
                            (unsigned long long)c->info.limits.max_payload);
    if (hlen > c->info.limits.max_header)
        return conn_set_err(c, GPUQ_E_TOO_LARGE, "request header of %zu bytes over the server's %u",
                            hlen, c->info.limits.max_header);
    int rc = queue_push(c, p);
    if (rc)
        return rc;
    gpuq_prefix pre = {GPUQ_PROTO_VERSION, GPUQ_KIND_REQUEST, 0, (uint32_t)hlen, payload};
    uint8_t pb[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&pre, pb);
    struct iovec iov[4] = {
        {pb, sizeof pb}, {(void *)hdr, hlen}, {(void *)a, a_len}, {(void *)b, b_len}};
    uint64_t sent = 0;
    rc = sockio_writev_full_intr(c->fd, iov, 4, c->tx_fd, c->cancel.intr_fd, &sent);
    c->tx_fd = -1;
    if (rc) {
        c->q_len--; /* never sent (or sent in part: the stream is dead anyway) */
        bool intr = rc == GPUQ_E_INTERRUPTED || rc == GPUQ_E_BAD_ARGUMENT;
        if (intr && sent == 0) /* none of it on the stream: in step */
            return cancel_unsent(c, rc, p->id);
        if (intr)
            return conn_break(c, rc,
                              "interrupted while sending a request; part of it was sent, "
                              "so the connection cannot go on");
        return conn_send_failed(c, rc, "sending a request");
    }
    c->next_id++;
    return 0;
}

int gpuq_submit(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
                size_t b_len, void *out, size_t out_cap, uint64_t *id_out)
{
    int rc = submit_ready(c, true);
    if (rc)
        return rc;
    req->id = c->next_id;
    uint8_t *hdr = NULL;
    size_t hlen = 0;
    uint64_t own_deadline = req->deadline_ms; /* the caller's request stays as it came */
    if (own_deadline == 0)
        req->deadline_ms = cancel_deadline(&c->cancel, req->op);
    rc = gpuq_request_encode(req, &hdr, &hlen);
    req->deadline_ms = own_deadline;
    if (rc)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory encoding a request");
    pending_req p = {.id = req->id, .out = {{out, out_cap}}};
    /* gpuq_call staged, or gpuqctl's arrays in place (no resident array) */
    if (a_len + b_len == 0 && req->nout_ref && req_refs_all_arena(req->in_kind, req->nin_ref) &&
        req_refs_all_arena(req->out_kind, req->nout_ref))
        sockio_spin_plan(&p.spin, req->in_ref, req->nin_ref, req->out_ref, req->nout_ref);
    rc = send_frame(c, &p, hdr, hlen, a, a_len, b, b_len);
    free(hdr);
    if (rc == 0 && id_out)
        *id_out = req->id;
    return rc;
}

/* *hdr (a header map, malloc'd; replaced) with "gate": true added: the
 * stager put the inputs in place only after the send (PROTOCOL.md 3.4). */
static int hdr_add_gate(gpuq_conn *c, uint8_t **hdr, size_t *hlen)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, *hdr, *hlen);
    uint32_t n;
    if (gpuq_mpr_map(&r, &n)) /* req_encode wrote it */
        return conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: a request header is not a map");
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory encoding a request");
    gpuq_mpw_map(w, n + 1);
    gpuq_mpw_raw(w, r.p, gpuq_mpr_left(&r));
    gpuq_mpw_str(w, "gate");
    gpuq_mpw_bool(w, true);
    uint8_t *out;
    size_t len;
    int rc = gpuq_mpw_take(w, &out, &len);
    gpuq_mpw_free(w);
    if (rc)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory encoding a request");
    free(*hdr);
    *hdr = out;
    *hlen = len;
    return 0;
}

/* What check_req found of a builder request's header. */
typedef struct req_plan {
    bool sized; /* no input is resident: sz is the request's, as proto's checks say */
    /* where each output goes, as the header says (put's "name": kept) */
    uint8_t out_where[REQ_MAX_IO];
} req_plan;

/* The sizes a builder request implies, decided by proto's decoder and
 * checks (the daemon's own), and its output buffers held against them. A
 * request with a resident input (its own, or get's "name") is decoded
 * only: its shapes are the server's, so sz has its input count and the
 * carried inputs' bytes, and the reply's shapes size its outputs. */
static int check_req(gpuq_conn *c, gpuq_req *r, const uint8_t *hdr, size_t hlen, uint64_t payload,
                     gpuq_sizes *sz, req_plan *plan)
{
    gpuq_request dec;
    char msg[256];
    int rc = gpuq_request_decode(hdr, hlen, &dec, msg, sizeof msg);
    if (rc)
        return conn_set_err(c, rc, "%s: %s", gpuq_errname(rc), msg);
    plan->sized = true;
    for (unsigned k = 0; k < dec.nin_ref && k < GPUQ_MAX_INPUTS; k++)
        plan->sized = plan->sized && gpuq_request_in_kind(&dec, k) != GPUQ_REF_NAME;
    for (unsigned o = 0; o < REQ_MAX_IO; o++)
        plan->out_where[o] = (uint8_t)gpuq_request_out_kind(&dec, o);
    bool b_alone = (r->in[1].set || r->in_res[1]) && !(r->in[0].set || r->in_res[0]);
    if (!plan->sized) {
        if (b_alone)
            return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                                "bad_argument: input 1 (B) needs input 0 (A)");
        memset(sz, 0, sizeof *sz);
        sz->nin = req_inputs(r);
        for (unsigned k = 0; k < sz->nin; k++)
            sz->in_bytes[k] = r->in[k].set ? r->in[k].len : 0;
        return 0;
    }
    if ((rc = gpuq_request_check(&dec, payload, &c->info.limits, sz, msg, sizeof msg)) != 0)
        return conn_set_err(c, rc, "%s: %s", gpuq_errname(rc), msg);
    if (b_alone)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: input 1 (B) needs input 0 (A)");
    for (unsigned o = 0; o < REQ_MAX_IO; o++) {
        if (r->out_res[o] && o >= sz->nout)
            return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                                "bad_argument: output %u is resident but %s gives %u output%s", o,
                                r->op, (unsigned)sz->nout, sz->nout == 1 ? "" : "s");
    }
    for (unsigned o = 0; o < sz->nout && o < REQ_MAX_IO; o++) { /* each output its own buffer */
        if (r->out_res[o] || plan->out_where[o] == GPUQ_REF_NAME)
            continue; /* kept by gpuqd: no bytes come back */
        if (sz->out[o].bytes && !r->out[o].buf)
            return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                                o ? "bad_argument: %s returns a second result of %llu bytes: set "
                                    "output %u"
                                  : "bad_argument: %s returns %llu bytes: set output %u",
                                r->op, (unsigned long long)sz->out[o].bytes, o);
        if (sz->out[o].bytes > r->out[o].cap)
            return conn_set_err(
                c, GPUQ_E_TOO_LARGE,
                "too_large: result of %llu bytes does not fit output %u's %zu bytes",
                (unsigned long long)sz->out[o].bytes, o, r->out[o].cap);
    }
    return 0;
}

/* Bytes of r's input k that go in the payload, by refs. */
static size_t wire_len(const gpuq_req *r, const req_refs *refs, unsigned k)
{
    return r->in[k].set && refs->in_kind[k] == GPUQ_REF_WIRE ? r->in[k].len : 0;
}

/* The outputs' entries of r's "out" (sz, plan: check_req's): every output
 * of the op when its sizes are known; else as many as r names (a buffer
 * or a resident array) up to the last resident one. */
static uint32_t out_entries(const gpuq_req *r, const gpuq_sizes *sz, const req_plan *plan)
{
    if (plan->sized)
        return sz->nout;
    uint32_t n = 0;
    for (unsigned o = 0; o < REQ_MAX_IO; o++)
        if (r->out_res[o] || r->out[o].buf)
            n = o + 1;
    return req_has_resident_out(r) ? n : 0;
}

int conn_submit_req(gpuq_conn *c, gpuq_req *r, conn_stager stage, bool counted, uint64_t *id)
{
    int rc = submit_ready(c, counted);
    if (rc)
        return rc;
    if (r->err)
        return conn_set_err(c, r->err, "%s: %s", gpuq_errname(r->err), r->errmsg);
    uint8_t *hdr = NULL;
    size_t hlen = 0;
    gpuq_sizes sz;
    req_plan plan;
    const req_input *a = &r->in[0], *b = &r->in[1];
    /* the request's sizes first (carried by socket, resident inputs named:
     * its outputs' places wait for the sizes), then the refs of arrays that
     * lie in this connection's arenas or are staged, and resident outputs */
    req_refs refs;
    req_refs_init(r, req_inputs(r), 0, &refs);
    uint64_t hdr_id = c->next_id;
    uint64_t deadline = cancel_deadline(&c->cancel, gpuq_op_parse(r->op, strlen(r->op)));
    if (req_encode(r, hdr_id, &refs, deadline, &hdr, &hlen))
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory encoding a request");
    size_t a_len = wire_len(r, &refs, 0), b_len = wire_len(r, &refs, 1);
    rc = check_req(c, r, hdr, hlen, (uint64_t)a_len + b_len, &sz, &plan);
    if (rc)
        goto err_after_encode;
    req_refs_init(r, sz.nin, out_entries(r, &sz, &plan), &refs);
    /* outputs are placed only when their sizes are known and the op does
     * not place them itself (put's "name") */
    refs.out_fixed = !plan.sized || plan.out_where[0] == GPUQ_REF_NAME;
    if ((rc = arena_refs_for(c, r, &sz, &refs)) != 0)
        goto err_after_encode;
    int ifd = c->cancel.intr_fd; /* staging's own calls (arena_open) are not interrupted */
    c->cancel.intr_fd = -1;
    bool gate = false;
    rc = stage ? stage(c, r, &sz, &refs, &gate) : 0;
    c->cancel.intr_fd = ifd;
    if (rc)
        goto err_after_encode;
    /* staging may have made calls of its own (arena_open): a new id */
    if (req_refs_any(refs.in_kind, refs.nin) || req_refs_any(refs.out_kind, refs.nout) ||
        c->next_id != hdr_id) {
        free(hdr);
        hdr = NULL;
        if (req_encode(r, c->next_id, &refs, deadline, &hdr, &hlen))
            return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory encoding a request");
        if (gate && (rc = hdr_add_gate(c, &hdr, &hlen)) != 0)
            goto err_after_encode;
        a_len = wire_len(r, &refs, 0);
        b_len = wire_len(r, &refs, 1);
        if ((rc = check_req(c, r, hdr, hlen, (uint64_t)a_len + b_len, &sz, &plan)) != 0)
            goto err_after_encode;
    }
    pending_req p = {.id = c->next_id,
                     .split = true,
                     .expect =
                         plan.sized && plan.out_where[0] != GPUQ_REF_NAME ? sz.out[0].bytes : 0};
    memcpy(p.out, r->out, sizeof p.out);
    memcpy(p.out_where, plan.out_where, sizeof p.out_where);
    /* by reference both ways: its wait may spin (sockio.h) */
    if (refs.nout && a_len + b_len == 0 && req_refs_all_arena(refs.in_kind, refs.nin) &&
        req_refs_all_arena(refs.out_kind, refs.nout))
        sockio_spin_plan(&p.spin, refs.in, refs.nin, refs.out, refs.nout);
    rc = send_frame(c, &p, hdr, hlen, a->data, a_len, b->data, b_len);
    if (rc == 0 && id)
        *id = p.id;

err_after_encode:
    free(hdr);
    return rc;
}

int gpuq_submit_req(gpuq_conn *c, gpuq_req *r, uint64_t *id)
{
    return conn_submit_req(c, r, NULL, true, id);
}

/* A reply that is not the queue head's (a later request's, one already
 * answered, an id never sent): replies come in request order, so the
 * stream cannot be matched up any more and the connection breaks. Nothing
 * of the reply reaches the caller: its payload is left unread (never in the
 * head's buffers), and *rep and res (may be NULL) say only the head's id and
 * GPUQ_E_PROTOCOL. */
static int reply_not_head(gpuq_conn *c, uint64_t want, gpuq_reply *rep, gpuq_result *res)
{
    char what[128];
    snprintf(what, sizeof what, "reply out of order: id %llu where %llu was due",
             (unsigned long long)rep->id, (unsigned long long)want);
    int rc = conn_break(c, GPUQ_E_PROTOCOL, what);
    memset(rep, 0, sizeof *rep);
    rep->id = want;
    rep->status = rc;
    if (res) {
        result_reset(res);
        res->id = want;
        res->status = rc;
    }
    return rc;
}

/* The replies of the readies that follow the head just read (a gated
 * blocking call's, conn_follow_last): they come right after it. rc is the
 * head's status; a ready refused makes it GPUQ_E_PROTOCOL when it was 0
 * (the head's own message stays otherwise). */
static int read_followers(gpuq_conn *c, int rc)
{
    while (c->q_len && c->q[c->q_head].follows) {
        uint64_t id = c->q[c->q_head].id;
        gpuq_reply rep;
        size_t hlen;
        int frc = conn_reply_read_head(c, &rep, &hlen);
        if (frc == 0 && rep.id != id && !(rep.status < 0 && rep.id == 0))
            return reply_not_head(c, id, &rep, NULL);
        if (frc == 0 && (frc = sockio_discard(c->fd, c->reply.last_payload)) != 0)
            conn_break(c, frc, "reading a reply payload"); /* a ready's reply has none */
        if (c->broken)
            return c->broken;
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
        c->q_follow--;
        if (rep.status < 0 && rc == 0)
            rc = conn_set_err(c, GPUQ_E_PROTOCOL,
                              "protocol: gpuqd refused ready %llu of a gated request (a libgpuq "
                              "bug): %s: %s",
                              (unsigned long long)id, gpuq_errname(rep.status), rep.message);
    }
    return rc;
}

/* Wait for the queue head: *rep gets its header; a builder request's
 * outputs go to res (may be NULL), a gpuq_submit request's whole payload to
 * its buffer. Interrupted (wait_readable): the head stays queued, and
 * rep->id and res's id name it. */
static int wait_head(gpuq_conn *c, gpuq_reply *rep, gpuq_result *res)
{
    if (c->q_len == 0)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "no request outstanding");
    pending_req head = c->q[c->q_head];
    gpuq_result tmp = {0};
    size_t hlen;
    if (!c->spin_off && !c->broken) /* only the head's own window: never added up */
        sockio_spin_wait(c->fd, c->cancel.intr_fd, &head.spin);
    int rc;
    do { /* a started notice of the head (conn_reply_started): its reply follows */
        rc = c->broken ? c->broken : cancel_wait(c, c->fd, head.id);
        if (rc == GPUQ_E_IO)
            rc = conn_break(c, rc, "waiting for a reply");
        if (rc && !c->broken) {
            memset(rep, 0, sizeof *rep);
            rep->id = head.id;
            rep->status = rc;
            if (res) {
                res->id = head.id;
                res->status = rc;
            }
            return rc;
        }
        if (rc == 0)
            rc = conn_reply_read_head(c, rep, &hlen);
    } while (rc == 0 && rep->started &&
             (rc = conn_reply_started(c, head.id, head.orphan, rep)) == 0);
    /* the head's reply, or an error of the whole stream (id 0) */
    if (rc == 0 && rep->id != head.id && !(rep->status < 0 && rep->id == 0))
        return reply_not_head(c, head.id, rep, res);
    if (rc == 0 && head.orphan)
        rc = conn_reply_read_orphan(c, rep, res);
    else if (rc == 0 && head.split)
        rc = conn_reply_read_split(c, head.out, head.expect, head.out_where, rep, res ? res : &tmp);
    else if (rc == 0)
        rc = conn_reply_read_whole(c, rep, head.out[0].buf, head.out[0].cap);
    result_reset(&tmp);
    rep->info = NULL;
    rep->info_len = 0;
    if (c->broken)
        return rc;
    c->q_head = (c->q_head + 1) % c->q_cap;
    c->q_len--;
    return read_followers(c, rc);
}

void conn_follow_last(gpuq_conn *c)
{
    c->q[(c->q_head + c->q_len - 1) % c->q_cap].follows = true;
    c->q_follow++;
}

void conn_orphan_head(gpuq_conn *c)
{
    pending_req *p = &c->q[c->q_head];
    p->orphan = true;
    memset(p->out, 0, sizeof p->out);
}

int gpuq_wait(gpuq_conn *c, gpuq_reply *rep)
{
    gpuq_reply tmp;
    return wait_head(c, rep ? rep : &tmp, NULL);
}

int gpuq_wait_req(gpuq_conn *c, gpuq_result *res)
{
    gpuq_reply rep;
    if (res)
        result_reset(res);
    int rc = wait_head(c, &rep, res);
    if (res && !res->status)
        res->status = rc; /* a transport failure, or a request from gpuq_submit */
    return rc;
}

int conn_blocking_ready(gpuq_conn *c)
{
    if (c->broken)
        return c->broken; /* c->err still says why */
    if (c->q_len)
        return conn_set_err(c, GPUQ_E_BUSY,
                            "a blocking call with %zu pipelined requests outstanding", c->q_len);
    return 0;
}

int conn_call(gpuq_conn *c, gpuq_req *r, conn_stager stage, gpuq_result *res)
{
    int rc = conn_blocking_ready(c);
    if (rc || (rc = conn_submit_req(c, r, stage, true, NULL))) {
        if (res) {
            result_reset(res);
            res->status = rc;
        }
        return rc;
    }
    rc = gpuq_wait_req(c, res);
    if (rc == GPUQ_E_INTERRUPTED)
        conn_orphan_head(c);
    return rc;
}
