/* SPDX-License-Identifier: Apache-2.0 */
/* request.c - see request.h. */
#include "request.h"
#include "request_resident.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "frame.h"
#include "log.h"
#include "metrics.h"
#include "request_log.h"
#include "scheduler.h"
#include "session.h"
#include "session_io.h"
#include "staging.h"
#include "started.h"
#include "stats.h"
#include "utf8.h"
#include "uvx.h"

#define REQUEST_OF_FRAME(f) ((request *)((char *)(f)-offsetof(request, out)))

/* ---- in flight and staging: raised and lowered only here ---- */

static void request_set_compute(request *r, bool on)
{
    session *s = r->s;
    if (r->compute == on)
        return;
    r->compute = on;
    if (on) {
        s->inflight++;
        s->srv->inflight++;
    } else {
        s->inflight--;
        s->srv->inflight--;
    }
}

/* s's compute requests still in flight as the client sees them: those
 * whose reply bytes are all with the kernel no longer count, although
 * their write callbacks (which free them) may come after the client's next
 * request is read in the same loop turn. So a client that sends as soon
 * as it reads a reply never finds that reply's slot taken (PROTOCOL.md).
 * Since session.c writes with uv_try_write first (a reply written at once
 * is done at once), this matters only when the rest of a partly written
 * group was written inside uv_write itself, whose callback then waits a
 * turn: a race of microseconds that no test provokes at will (the mutation
 * check no longer plants a bug here for that reason). A group an I/O
 * thread writes counts as written as far as its system calls have offered
 * it to the client (session_write_backlog, io_pool.h's io_left): the client
 * can have read no more, and may have read that much before the call
 * returned. */
static uint32_t request_inflight(session *s)
{
    uint32_t n = s->inflight;
    if (!s->wq_head)
        return n;
    uint64_t written = s->bytes_out - session_write_backlog(s);
    for (const request *w = s->wq_head; w && w->wr_end <= written && n > 0; w = w->wnext)
        n--;
    return n;
}

static void request_wq_unlink(request *r)
{
    session *s = r->s;
    request **pp = &s->wq_head, *prev = NULL;
    if (!r->in_wq)
        return;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->wnext;
    }
    if (*pp) {
        *pp = r->wnext;
        if (s->wq_tail == r)
            s->wq_tail = prev;
    }
    r->in_wq = false;
    r->wnext = NULL;
}

/* Give r's slot back (if any); waiting sessions retry on the next turn. */
static void request_release_slot(request *r)
{
    if (!r->slot)
        return;
    staging_release(&r->s->srv->st, r->slot, &r->s->staging_used);
    r->slot = NULL;
    request_schedule_retry(r->s->srv);
}

/* ---- life ---- */

request *request_new(session *s)
{
    request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->s = s;
    r->out.seq = session_next_seq(s);
    r->t0_ns = uv_hrtime();
    s->nrequests++;
    gpuq_request_init(&r->req);
    r->req.id = 0;
    session_ref(s);
    s->live++;
    s->srv->live++;
    return r;
}

void request_free(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    sched_untrack(r);
    request_release_slot(r);
    request_wq_unlink(r);
    request_set_compute(r, false);
    arena_refs_drop(r->held);
    request_resident_release(r);
    uvx_fd_handle_close(r->fd_pipe);
    r->fd_pipe = NULL;
    free(r->wbuf);
    free(r->info);
    free(r->doc);
    s->live--;
    srv->live--;
    free(r);
    if (!s->closing)
        session_update_reading(s);
    session_unref(s);
    srv->hooks.check_drain(srv);
}

/* ---- the reply frame (session_frame_ops) ---- */

static int request_encode(session_frame *f, uv_buf_t bufs[2], unsigned *nbufs)
{
    request *r = REQUEST_OF_FRAME(f);
    session *s = r->s;
    server *srv = s->srv;
    gpuq_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.id = r->req.id;
    rep.status = r->status;
    snprintf(rep.message, sizeof rep.message, "%s", r->message);
    uint64_t plen = 0;
    if (r->status == 0 && r->compute) {
        rep.dtype = r->req.dtype ? r->req.dtype : GPUQ_DT_F64;
        rep.ndim = r->sz.out_ndim;
        memcpy(rep.shape, r->sz.out_shape, sizeof rep.shape);
        if (r->sz.nout > 1) { /* a second output (knn's indices) */
            rep.dtype_b = r->sz.out[1].dtype;
            rep.ndim_b = r->sz.out[1].ndim;
            memcpy(rep.shape_b, r->sz.out[1].shape, sizeof rep.shape_b);
        }
        plen = gpuq_request_wire_out(&r->req, &r->sz); /* the rest: in arenas, or kept */
        if (r->req.timing) {
            rep.has_timing = true;
            rep.timing = r->job.timing;
            rep.timing.total_us = (double)(uv_hrtime() - r->job.submit_ns) / 1e3;
        }
    } else if (r->status == 0 && r->doc) {
        plen = r->doc_len;
    }
    rep.info = r->info;
    rep.info_len = r->info_len;
    if (r->status < 0) {
        stats_error(&srv->stats, r->status);
        s->nerrors++;
    }
    metrics_observe(&srv->metrics, r->req.op, r->status, (double)(uv_hrtime() - r->t0_ns) / 1e9);
    size_t wlen;
    int rc = gpuq_reply_frame(&rep, plen, &r->wbuf, &wlen);
    if (rc < 0)
        return rc;
    if (r->compute) { /* session_flush adds these bytes to bytes_out right after */
        r->wr_end = s->bytes_out + wlen + plen;
        r->wnext = NULL;
        if (s->wq_tail)
            s->wq_tail->wnext = r;
        else
            s->wq_head = r;
        s->wq_tail = r;
        r->in_wq = true;
    }
    bufs[0] = uv_buf_init((char *)r->wbuf, (unsigned)wlen);
    *nbufs = 1;
    f->send_handle = (uv_stream_t *)r->fd_pipe; /* arena_open's memfd, if any */
    if (plen) {
        bufs[1].base = r->doc ? (char *)r->doc : (char *)r->slot->ptr + r->out_off;
        bufs[1].len = (size_t)plen;
        *nbufs = 2;
    }
    return 0;
}

static void request_frame_done(session_frame *f, int status)
{
    (void)status; /* the session handled write errors */
    request *r = REQUEST_OF_FRAME(f);
    if (r->in_backend) { /* answered early: freed when its job completes */
        r->reply_done = true;
        return;
    }
    request_free(r);
}

static const session_frame_ops request_frame_ops = {
    .encode = request_encode,
    .done = request_frame_done,
};

void request_reply(request *r)
{
    sched_untrack(r);    /* answered: no longer cancellable, queued or watched */
    request_log_done(r); /* slowlog, monitors, debug line: before r may be freed */
    r->out.ops = &request_frame_ops;
    session_send(r->s, &r->out);
}

static void request_vrefuse(request *r, int code, const char *fmt, va_list ap)
{
    gpuq_utf8_vsnprintf(r->message, sizeof r->message, fmt, ap); /* no half character */
    r->status = code;
    log_debug("session %llu: request %llu refused: %s: %s", (unsigned long long)r->s->id,
              (unsigned long long)r->req.id, gpuq_errname(code), r->message);
    request_reply(r);
}

void request_refuse(request *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    request_vrefuse(r, code, fmt, ap);
    va_end(ap);
}

void request_refuse_session(session *s, int code, const char *fmt, ...)
{
    request *r = request_new(s);
    if (!r) {
        session_close(s);
        return;
    }
    s->broken = true;
    r->out.close_after = true;
    session_update_reading(s);
    va_list ap;
    va_start(ap, fmt);
    request_vrefuse(r, code, fmt, ap);
    va_end(ap);
}

/* ---- what a frame becomes ---- */

static request *request_new_or_close(session *s)
{
    request *r = request_new(s);
    if (!r) {
        log_error("session %llu: out of memory for a request", (unsigned long long)s->id);
        session_close(s);
    }
    return r;
}

static void request_on_prefix(session *s, int rc)
{
    const gpuq_limits *lim = &s->srv->cfg.lim;
    if (rc < 0) {
        request *r = request_new_or_close(s);
        if (!r)
            return;
        s->broken = true;
        r->out.close_after = true;
        if (rc == GPUQ_E_VERSION)
            request_refuse(r, GPUQ_E_VERSION, "frame version %u not supported (server speaks %u)",
                           s->pre.version, GPUQ_PROTO_VERSION);
        else
            request_refuse(r, GPUQ_E_PROTOCOL, "broken frame prefix (magic, kind or flags)");
        return;
    }
    uint64_t hl = s->pre.header_len, pl = s->pre.payload_len;
    if (s->pre.kind != GPUQ_KIND_REQUEST || hl > lim->max_header || pl > UINT64_MAX - hl) {
        /* A reply frame from a client, or lengths the server would have to
         * discard rather than read (a header over max_header, a total that
         * overflows): one error reply, then the connection closes. */
        request *r = request_new_or_close(s);
        if (!r)
            return;
        s->broken = true;
        r->out.close_after = true;
        if (s->pre.kind != GPUQ_KIND_REQUEST)
            request_refuse(r, GPUQ_E_PROTOCOL,
                           "a client sends request frames (kind 1), not kind %u", s->pre.kind);
        else if (hl > lim->max_header)
            request_refuse(r, GPUQ_E_TOO_LARGE,
                           "header of %llu bytes over the limit of %u; closing the connection",
                           (unsigned long long)hl, lim->max_header);
        else
            request_refuse(r, GPUQ_E_TOO_LARGE,
                           "header_len + payload_len overflows 64 bits; closing the connection");
        return;
    }
    if (hl == 0) {
        request *r = request_new_or_close(s);
        if (!r)
            return;
        session_skip(s, pl);
        request_refuse(r, GPUQ_E_BAD_HEADER, "empty header");
        return;
    }
    /* A payload over max_payload is refused once its header is read, so the
     * reply names the request id; then the connection closes (on_header)
     * instead of discarding what may be gigabytes. */
    if (session_expect_header(s) < 0)
        session_close(s);
}

/* sched's run: r's turn on its device came; submit it to the backend.
 * 0, or < 0 when it was refused (answered here; r may be gone). */
static int request_run(request *r)
{
    backend *b = r->s->srv->b;
    r->in_backend = true;
    r->run_ns = uv_hrtime();
    int rc = b->ops->submit(b, &r->job);
    if (rc < 0) {
        r->in_backend = false;
        r->running = false;
        request_refuse(r, rc, "%s", r->job.message[0] ? r->job.message : "backend refused the job");
        return rc;
    }
    started_send(r); /* "progress": the client hears it left the queue */
    return 0;
}

/* sched's answer: r, dropped from its queue (cancelled, expired), gets
 * code; its staging goes back now (no result will be written). */
static void request_answer(request *r, int code, const char *msg)
{
    request_release_slot(r);
    request_refuse(r, code, "%s", msg);
}

/* sched's abandon: r runs and its result is no longer wanted (cancelled,
 * deadline passed, session closed). The client is answered now, so that
 * neither it nor the replies after r wait for the job; the job is told to
 * stop (at its next block of rows on the CPU, tile on CUDA) and r keeps
 * its staging and arenas until it completed (request_complete). It no
 * longer counts in flight for the session's max_inflight: the client may
 * send the next. */
static void request_abandon(request *r, int code, const char *msg)
{
    backend *b = r->s->srv->b;
    r->early = true;
    __atomic_store_n(&r->job.stop, 1, __ATOMIC_RELAXED);
    if (b->ops->stop)
        b->ops->stop(b, &r->job);
    request_set_compute(r, false);
    request_refuse(r, code, "%s", msg);
}

/* sched's expire_waiting: r waits for staging or its payload (s->cur) and
 * its deadline passed. Answered now; the rest of its payload is read and
 * discarded (its staging back at once), and the session reads on. */
static void request_expire_waiting(request *r)
{
    session *s = r->s;
    if (s->cur != r)
        return;
    bool waiting = session_waiting(s);
    s->cur = NULL;
    if (waiting)
        session_skip(s, gpuq_request_wire_in(&r->req, &r->sz));
    else
        session_drop_payload(s);
    request_release_slot(r);
    session_ref(s);
    request_refuse(r, GPUQ_E_DEADLINE_EXCEEDED, "deadline of %llu ms passed %s",
                   (unsigned long long)r->req.deadline_ms,
                   waiting ? "waiting for staging" : "while its payload arrived");
    session_update_reading(s);
    session_unref(s);
}

bool request_gate_sweep(session *s, uint64_t now)
{
    double ft = s->srv->cfg.frame_timeout_s;
    if (ft <= 0 || s->closing)
        return false;
    for (request *r = s->unanswered; r; r = r->lnext) {
        if (!r->req.gate || r->job.gate_ready >= r->sz.payload || r->early || now < r->t0_ns ||
            (double)(now - r->t0_ns) < ft * 1e9)
            continue;
        char msg[160];
        snprintf(msg, sizeof msg,
                 "frame_timeout: gated request %llu: %llu of its %llu input bytes announced "
                 "within %g s",
                 (unsigned long long)r->req.id, (unsigned long long)r->job.gate_ready,
                 (unsigned long long)r->sz.payload, ft);
        log_info("session %llu: %s", (unsigned long long)s->id, msg);
        r->out.close_after = true; /* as for a payload that stopped */
        session_ref(s);
        sched_fail(r, GPUQ_E_TIMEOUT, msg);
        session_update_reading(s);
        session_unref(s);
        return true;
    }
    return false;
}

/* r's input is in place: the job is set up and r goes to its device's
 * queue (scheduler.c), which submits it when its turn comes. */
static void request_ready(request *r)
{
    session *s = r->s;
    r->job.req = &r->req;
    r->job.sz = &r->sz;
    const gpuq_sizes *sz = &r->sz;
    /* arrays on the wire in the staging slot, packed, in order; those in
     * arenas are set already (arena_resolve), resident ones are the
     * job's res_in and keep (request_resident_reserve) */
    uint8_t *in = r->slot ? r->slot->ptr : NULL, *out = r->slot ? r->slot->ptr + r->out_off : NULL;
    for (uint32_t k = 0; k < GPUQ_MAX_INPUTS; k++) {
        if (gpuq_request_in_kind(&r->req, k) != GPUQ_REF_WIRE)
            continue;
        r->job.h_in[k] = k < sz->nin ? in : NULL;
        in += k < sz->nin ? sz->in_bytes[k] : 0;
    }
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++) {
        if (gpuq_request_out_kind(&r->req, k) != GPUQ_REF_WIRE)
            continue;
        r->job.h_out[k] = k < sz->nout ? out : NULL;
        out += k < sz->nout ? sz->out[k].bytes : 0;
    }
    r->job.bsess = s->bsess;
    r->job.owner = r;
    r->job.submit_ns = uv_hrtime(); /* timing's queue_us includes the wait in the queue */
    /* gated: a backend that cannot wait on the device gets it all at once */
    backend *b = s->srv->b;
    if (r->req.gate && r->job.gate_ready < sz->payload && !(b->ops->gate && b->gate_ok)) {
        sched_hold(r);
        return;
    }
    sched_enqueue(r);
}

static size_t align64(uint64_t n)
{
    return (size_t)((n + 63) & ~(uint64_t)63);
}

/* Reserve staging for s->cur, then read its payload or submit it. */
static void request_reserve(session *s)
{
    server *srv = s->srv;
    request *r = s->cur;
    /* staging only for what travels by socket */
    uint64_t in_sock = gpuq_request_wire_in(&r->req, &r->sz);
    size_t need = align64(in_sock) + (size_t)gpuq_request_wire_out(&r->req, &r->sz);
    if (need == 0) { /* every array is in an arena or resident */
        s->cur = NULL;
        r->out_off = 0;
        session_skip(s, 0);
        request_ready(r);
        return;
    }
    /* New memory is pinned off the loop: busy until that grow finished
     * (r->staging_ticket), then retried as after a release. */
    int rc = staging_reserve_wait(&srv->st, need, &s->staging_used, s->caps.session_staging,
                                  &r->staging_ticket, &r->slot);
    if (rc == GPUQ_E_BUSY) {
        if (!session_waiting(s))
            log_debug("session %llu: waiting for %zu bytes of staging", (unsigned long long)s->id,
                      need);
        session_wait(s);
        sched_watch(r);
        return;
    }
    sched_unwatch(r);
    s->cur = NULL;
    if (rc < 0) {
        r->slot = NULL;
        request_set_compute(r, false);
        session_skip(s, in_sock);
        if (rc == GPUQ_E_TOO_LARGE)
            request_refuse(r, rc,
                           "request needs %zu bytes of staging (%zu after rounding), over "
                           "session_staging (%llu) or total_staging - staging_headroom",
                           need, staging_class(need), (unsigned long long)s->caps.session_staging);
        else
            request_refuse(r, rc, "cannot allocate %zu bytes of staging: %s", need,
                           staging_fail_msg(&srv->st));
        return;
    }
    r->out_off = align64(in_sock);
    if (in_sock) {
        s->cur = r;
        session_expect_payload(s, r->slot->ptr, in_sock);
        sched_watch(r); /* its deadline holds while its payload arrives */
    } else {
        session_skip(s, 0);
        request_ready(r);
    }
}

void request_retry_staging(session *s)
{
    if (s->closing || !session_waiting(s) || !s->cur)
        return;
    session_ref(s);
    request_reserve(s);
    session_update_reading(s);
    session_unref(s);
}

static void request_on_retry(uv_idle_t *h)
{
    server *srv = h->data;
    (void)uvx_idle_stop(h);
    srv->retry_pending = false;
    for (session *s = srv->sessions, *next; s; s = next) {
        session_ref(s);
        if (session_waiting(s) && !s->closing)
            request_retry_staging(s);
        next = s->next;
        session_unref(s);
    }
}

void request_schedule_retry(server *srv)
{
    if (srv->retry_pending || uv_is_closing((uv_handle_t *)&srv->retry_idle) ||
        !srv->retry_idle.loop)
        return;
    if (uvx_idle_start(&srv->retry_idle, request_on_retry, "staging retry") == 0)
        srv->retry_pending = true;
}

/* A control op answered later (control.h: CONTROL_PENDING). */
static void request_control_later(request *r)
{
    request_reply(r);
}

int request_layer_init(server *srv)
{
    control_layer_init(request_control_later);
    srv->sched.run = request_run;
    srv->sched.answer = request_answer;
    srv->sched.expire_waiting = request_expire_waiting;
    srv->sched.abandon = request_abandon;
    int rc = request_log_init(srv);
    if (rc < 0)
        return rc;
    rc = uvx_idle_init(srv->loop, &srv->retry_idle, srv);
    return rc < 0 ? rc : sched_init(srv);
}

void request_layer_close(server *srv)
{
    srv->retry_pending = false;
    uvx_close((uv_handle_t *)&srv->retry_idle, NULL);
    sched_close(srv);
    request_log_close(srv);
}

static void request_on_header(session *s)
{
    server *srv = s->srv;
    const gpuq_limits *lim = &srv->cfg.lim;
    uint64_t plen = s->pre.payload_len;
    request *r = request_new_or_close(s);
    if (!r)
        return;
    char msg[160] = "";
    int rc = gpuq_request_decode(s->hbuf, s->pre.header_len, &r->req, msg, sizeof msg);
    session_header_done(s);
    if (rc < 0 || r->req.op != GPUQ_OP_ARENA_IMPORT)
        session_drop_fd(s); /* only arena_import takes one (control.c) */
    session_skip(s, plen);  /* unless a compute op takes the payload below */
    if (plen > lim->max_payload) {
        s->broken = true;
        r->out.close_after = true;
        request_refuse(r, GPUQ_E_TOO_LARGE,
                       "payload of %llu bytes over the limit of %llu; closing the connection",
                       (unsigned long long)plen, (unsigned long long)lim->max_payload);
        return;
    }
    if (rc < 0) {
        request_refuse(r, rc, "%s", msg[0] ? msg : gpuq_strerror(rc));
        return;
    }
    stats_request(&srv->stats, r->req.op);
    if (srv->draining && !control_while_draining(r->req.op)) {
        request_refuse(r, GPUQ_E_SHUTTING_DOWN, "gpuqd is shutting down");
        return;
    }
    if (r->req.op != GPUQ_OP_HELLO && !s->hello_done) {
        request_refuse(r, GPUQ_E_NO_HELLO, "send hello before any other request");
        return;
    }
    /* resident inputs first: their shapes and dtype are part of the check */
    if (gpuq_op_is_compute(r->req.op) && r->req.nin_ref &&
        (rc = request_resident_inputs(r, msg, sizeof msg)) < 0) {
        request_refuse(r, rc, "%s", msg);
        return;
    }
    rc = gpuq_request_check(&r->req, plen, lim, &r->sz, msg, sizeof msg);
    if (rc < 0) {
        request_refuse(r, rc, "%s", msg[0] ? msg : gpuq_strerror(rc));
        return;
    }
    if (gpuq_op_is_compute(r->req.op)) {
        uint32_t inflight = request_inflight(s);
        if (inflight >= s->caps.max_inflight) {
            request_refuse(r, GPUQ_E_BUSY, "%u requests in flight on this session (the limit)",
                           inflight);
            return;
        }
        if ((r->req.nin_ref || r->req.nout_ref) &&
            (rc = arena_resolve(&s->arenas, &r->req, r->held, r->job.h_in, r->job.h_out, msg,
                                sizeof msg)) < 0) {
            request_refuse(r, rc, "%s", msg);
            return;
        }
        if ((rc = request_resident_reserve(r, msg, sizeof msg)) < 0) {
            request_refuse(r, rc, "%s", msg);
            return;
        }
        request_set_compute(r, true);
        sched_track(r);
        s->cur = r;
        request_reserve(s);
        return;
    }
    rc = control_run(r);
    if (rc == CONTROL_PENDING)
        return; /* control.c owns r until it is answered */
    if (rc < 0) {
        if (!r->message[0])
            snprintf(r->message, sizeof r->message, "%s", gpuq_strerror(rc));
        r->status = rc;
    }
    request_reply(r);
}

static void request_on_payload(session *s)
{
    request *r = s->cur;
    s->cur = NULL;
    sched_unwatch(r);
    request_ready(r);
}

static void request_on_timeout(session *s, const char *msg)
{
    /* A frame stalled in its payload gets the reply under its own id, its
     * staging given back at once. */
    request *r = s->cur;
    if (r) {
        s->cur = NULL;
        session_drop_payload(s); /* an I/O thread reading it stops first */
        request_release_slot(r);
        request_set_compute(r, false);
    } else if (!(r = request_new(s))) {
        session_close(s);
        return;
    }
    r->out.close_after = true;
    session_update_reading(s);
    request_refuse(r, GPUQ_E_TIMEOUT, "%s", msg);
}

static void request_on_closed(session *s)
{
    /* queued work dropped now (staging back at once), running work's
     * results discarded when it ends */
    sched_drop_session(s);
    request_log_session_closed(s); /* its monitor stops */
    /* the session's arenas: gone from its table now; each lives on while a
     * request in the backend still names it */
    arena_close_all(&s->arenas);
    if (s->cur) {
        request *r = s->cur;
        s->cur = NULL;
        request_free(r);
    }
}

const session_events request_session_events = {
    .prefix = request_on_prefix,
    .header = request_on_header,
    .payload = request_on_payload,
    .timeout = request_on_timeout,
    .closed = request_on_closed,
};

void request_complete(gpuq_job *job)
{
    request *r = job->owner;
    server *srv = r->s->srv;
    r->in_backend = false;
    r->done_ns = uv_hrtime();
    sched_done(r); /* the next queued requests may start now */
    if (srv->b->lost && !srv->lost) {
        srv->lost = true;
        log_error("device lost: %s", srv->b->lost_reason);
        srv->hooks.shutdown(srv, 3);
    }
    if (r->early) {
        /* answered already (request_abandon); cancelled: its work stopped
         * early */
        if (job->status == GPUQ_E_CANCELLED)
            srv->sched.stopped++;
        if (r->reply_done)
            request_free(r);
        return;
    }
    r->status = job->status;
    if (srv->lost) {
        r->status = GPUQ_E_DEVICE_LOST;
        snprintf(r->message, sizeof r->message, "device lost: %.140s", srv->b->lost_reason);
    } else if (r->deadline_ns && uv_hrtime() > r->deadline_ns) {
        /* The deadline timer answers a running request at its deadline
         * (sched.abandon); this covers a job that completes past it in the
         * loop turn before the timer's callback (whole milliseconds): a
         * race of under a millisecond that no test provokes at will, so the
         * mutation check plants no bug here. */
        srv->sched.expired++;
        r->status = GPUQ_E_DEADLINE_EXCEEDED;
        snprintf(r->message, sizeof r->message,
                 "deadline of %llu ms passed while it ran; its result was discarded",
                 (unsigned long long)r->req.deadline_ms);
    } else if (r->status < 0) {
        snprintf(r->message, sizeof r->message, "%s",
                 job->message[0] ? job->message : gpuq_strerror(r->status));
    } else if (request_resident_finish(r, request_reply)) {
        /* its kept outputs' files are being written: the reply follows;
         * answered from here on (no longer cancellable, no deadline) */
        sched_untrack(r);
        return;
    }
    request_reply(r); /* its kept outputs became resident arrays first */
}
