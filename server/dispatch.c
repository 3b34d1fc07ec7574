/* dispatch.c - see dispatch.h. */
#include "dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "stats.h"

static request *dispatch_new(session *s)
{
    request *r = request_new(s);
    if (!r) {
        log_error("session %llu: out of memory for a request", (unsigned long long)s->id);
        session_close(s);
    }
    return r;
}

void dispatch_prefix(session *s)
{
    const gpuq_limits *lim = &s->srv->cfg.lim;
    int rc = gpuq_prefix_decode(s->prefix, GPUQ_PREFIX_SIZE, &s->pre);
    s->have = 0;
    if (rc < 0) {
        request *r = dispatch_new(s);
        if (!r)
            return;
        s->broken = true;
        r->close_after = true;
        if (rc == GPUQ_E_VERSION)
            session_refuse(r, GPUQ_E_VERSION, "frame version %u not supported (server speaks %u)",
                           s->pre.version, GPUQ_PROTO_VERSION);
        else
            session_refuse(r, GPUQ_E_PROTOCOL, "broken frame prefix (magic, kind or flags)");
        return;
    }
    uint64_t hl = s->pre.header_len, pl = s->pre.payload_len;
    if (s->pre.kind != GPUQ_KIND_REQUEST || hl > lim->max_header || pl > UINT64_MAX - hl) {
        /* A reply frame from a client, or lengths the server would have to
         * discard rather than read (a header over max_header, a total that
         * overflows): one error reply, then the connection closes. */
        request *r = dispatch_new(s);
        if (!r)
            return;
        s->broken = true;
        r->close_after = true;
        if (s->pre.kind != GPUQ_KIND_REQUEST)
            session_refuse(r, GPUQ_E_PROTOCOL,
                           "a client sends request frames (kind 1), not kind %u", s->pre.kind);
        else if (hl > lim->max_header)
            session_refuse(r, GPUQ_E_TOO_LARGE,
                           "header of %llu bytes over the limit of %u; closing the connection",
                           (unsigned long long)hl, lim->max_header);
        else
            session_refuse(r, GPUQ_E_TOO_LARGE,
                           "header_len + payload_len overflows 64 bits; closing the connection");
        return;
    }
    if (hl == 0) {
        request *r = dispatch_new(s);
        if (!r)
            return;
        session_skip(s, pl);
        session_refuse(r, GPUQ_E_BAD_HEADER, "empty header");
        return;
    }
    /* A payload over max_payload is refused once its header is read, so the
     * reply names the request id; then the connection closes (dispatch_header)
     * instead of discarding what may be gigabytes. */
    if (hl > SESSION_HDR_INLINE) {
        s->hbuf = malloc(hl);
        if (!s->hbuf) {
            s->hbuf = s->hdr_inline;
            log_error("session %llu: out of memory for a header", (unsigned long long)s->id);
            session_close(s);
            return;
        }
    }
    s->rstate = RS_HEADER;
}

static int dispatch_info_take(request *r, gpuq_mpw *w)
{
    int rc = gpuq_mpw_take(w, &r->info, &r->info_len);
    gpuq_mpw_free(w);
    return rc;
}

/* Fill r's reply for hello. Returns 0 or a code (message set). */
static int dispatch_hello(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    /* (the protocol version was checked with the header: gpuq_request_check) */
    if (s->hello_done) {
        snprintf(r->message, sizeof r->message,
                 "this session already said hello (session %llu); open a new connection for "
                 "another priority or device",
                 (unsigned long long)s->id);
        return GPUQ_E_BAD_ARGUMENT;
    }
    int prio = policy_grant_priority(&s->caps, r->req.priority);
    int rc = srv->b->ops->session_open(srv->b, prio, r->req.device, &s->bsess, &s->binfo);
    if (rc < 0) {
        s->bsess = NULL;
        if (rc == GPUQ_E_BAD_ARGUMENT)
            snprintf(r->message, sizeof r->message, "device %d does not exist (%d devices)",
                     (int)r->req.device, srv->b->ops->ndevices(srv->b));
        else
            snprintf(r->message, sizeof r->message, "cannot open a backend session: %s",
                     gpuq_strerror(rc));
        return rc;
    }
    s->priority = prio;
    snprintf(s->client, sizeof s->client, "%s", r->req.client);
    s->hello_done = true;
    log_debug("session %llu: hello from '%s' pid %d uid %u, priority %s (asked %s)",
              (unsigned long long)s->id, s->client, (int)s->pid, (unsigned)s->uid,
              gpuq_prio_name(prio), gpuq_prio_name(r->req.priority));
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, STATS_SERVER_KEYS + 6);
    stats_server_keys(srv, w);
    gpuq_mpw_str(w, "session");
    gpuq_mpw_uint(w, s->id);
    gpuq_mpw_str(w, "priority");
    gpuq_mpw_int(w, s->priority);
    gpuq_mpw_str(w, "stream_priority");
    gpuq_mpw_int(w, s->binfo.priority_granted);
    gpuq_mpw_str(w, "device");
    gpuq_mpw_int(w, s->binfo.device);
    gpuq_mpw_str(w, "admin");
    gpuq_mpw_bool(w, s->caps.admin);
    /* the limits that apply to this session: its caps in place of the globals */
    gpuq_limits mine = srv->cfg.lim;
    mine.max_inflight = s->caps.max_inflight;
    mine.session_staging = s->caps.session_staging;
    gpuq_mpw_str(w, "limits");
    gpuq_limits_encode(&mine, w);
    return dispatch_info_take(r, w);
}

static int dispatch_status(request *r)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    stats_status_info(r->s->srv, w);
    return dispatch_info_take(r, w);
}

/* A one-entry info map {"format": fmt, "count": n} for document replies. */
static int dispatch_doc_info(request *r, const char *fmt, uint32_t count)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "format");
    gpuq_mpw_str(w, fmt);
    gpuq_mpw_str(w, "count");
    gpuq_mpw_uint(w, count);
    return dispatch_info_take(r, w);
}

static int dispatch_sessions(request *r)
{
    uint32_t n = 0;
    int rc = stats_sessions_doc(r->s->srv, r->s, &r->doc, &r->doc_len, &n);
    if (rc < 0)
        return rc;
    return dispatch_doc_info(r, "msgpack-stream", n);
}

static int dispatch_metrics(request *r)
{
    char *text = NULL;
    size_t len = 0;
    int rc = metrics_render(r->s->srv, &text, &len);
    if (rc < 0)
        return rc;
    r->doc = (uint8_t *)text;
    r->doc_len = len;
    return dispatch_doc_info(r, "prometheus-0.0.4", 1);
}

/* A small info map {"key": value} for admin replies. */
static int dispatch_info_uint(request *r, const char *k1, uint64_t v1, const char *k2, uint64_t v2)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, k1);
    gpuq_mpw_uint(w, v1);
    gpuq_mpw_str(w, k2);
    gpuq_mpw_uint(w, v2);
    return dispatch_info_take(r, w);
}

/* drain, shutdown, kill_session, set_limit: admins only (policy.h). */
static int dispatch_admin(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    const char *op = gpuq_op_name(r->req.op);
    if (!s->caps.admin) {
        log_info("session %llu: %s refused: uid %d is not an admin", (unsigned long long)s->id, op,
                 s->uid == (uid_t)-1 ? -1 : (int)s->uid);
        if (srv->cfg.pol.admin_group[0])
            snprintf(r->message, sizeof r->message, "%s needs root or a member of group %s", op,
                     srv->cfg.pol.admin_group);
        else
            snprintf(r->message, sizeof r->message, "%s needs root", op);
        return GPUQ_E_PERMISSION;
    }
    switch (r->req.op) {
    case GPUQ_OP_DRAIN:
        log_info("drain requested by session %llu (uid %d): no new sessions; %u open",
                 (unsigned long long)s->id, (int)s->uid, srv->nsessions);
        server_stop_accepting(srv);
        return dispatch_info_uint(r, "sessions", srv->nsessions, "in_flight", srv->inflight);
    case GPUQ_OP_SHUTDOWN:
        log_info("shutdown requested by session %llu (uid %d)", (unsigned long long)s->id,
                 (int)s->uid);
        server_shutdown(srv, 0);
        return dispatch_info_uint(r, "sessions", srv->nsessions, "in_flight", srv->inflight);
    case GPUQ_OP_KILL_SESSION: {
        session *t = srv->sessions;
        while (t && (t->id != r->req.session || t->closing))
            t = t->next;
        if (!t) {
            snprintf(r->message, sizeof r->message, "no open session %llu",
                     (unsigned long long)r->req.session);
            return GPUQ_E_BAD_ARGUMENT;
        }
        if (t == s) {
            snprintf(r->message, sizeof r->message, "kill_session cannot close the asking session");
            return GPUQ_E_BAD_ARGUMENT;
        }
        uint32_t infl = t->inflight;
        log_info(
            "session %llu ('%s', pid %d, uid %d, %u in flight) killed by session %llu (uid %d)",
            (unsigned long long)t->id, t->client, (int)t->pid, (int)t->uid, infl,
            (unsigned long long)s->id, (int)s->uid);
        session_close(t);
        return dispatch_info_uint(r, "session", r->req.session, "in_flight", infl);
    }
    case GPUQ_OP_SET_LIMIT: {
        uint64_t old = 0;
        char msg[160];
        if (gpuq_limits_set(&srv->cfg.lim, r->req.limit, r->req.value, &old, msg, sizeof msg)) {
            snprintf(r->message, sizeof r->message, "%s", msg);
            return GPUQ_E_BAD_ARGUMENT;
        }
        log_info("set_limit %s %llu -> %llu by session %llu (uid %d)", r->req.limit,
                 (unsigned long long)old, (unsigned long long)r->req.value,
                 (unsigned long long)s->id, (int)s->uid);
        server_limits_changed(srv);
        return dispatch_info_uint(r, "old", old, "value", r->req.value);
    }
    default:
        return GPUQ_E_INTERNAL;
    }
}

static void dispatch_submit(request *r)
{
    session *s = r->s;
    backend *b = s->srv->b;
    r->job.req = &r->req;
    r->job.sz = &r->sz;
    r->job.h_in = r->slot->ptr;
    r->job.h_out = r->slot->ptr + r->out_off;
    r->job.bsess = s->bsess;
    r->job.owner = r;
    r->job.submit_ns = uv_hrtime();
    r->in_backend = true;
    int rc = b->ops->submit(b, &r->job);
    if (rc < 0) {
        r->in_backend = false;
        session_refuse(r, rc, "%s", r->job.message[0] ? r->job.message : "backend refused the job");
    }
}

static size_t align64(uint64_t n)
{
    return (size_t)((n + 63) & ~(uint64_t)63);
}

/* Reserve staging for s->cur, then read its payload or submit it. */
static void dispatch_reserve(session *s)
{
    server *srv = s->srv;
    request *r = s->cur;
    size_t need = align64(r->sz.payload) + (size_t)r->sz.output;
    int rc = staging_reserve(&srv->st, need, &s->staging_used, s->caps.session_staging, &r->slot);
    if (rc == GPUQ_E_BUSY) {
        if (s->rstate != RS_WAIT_STAGING)
            log_debug("session %llu: waiting for %zu bytes of staging", (unsigned long long)s->id,
                      need);
        s->rstate = RS_WAIT_STAGING;
        return;
    }
    s->cur = NULL;
    if (rc < 0) {
        r->slot = NULL;
        r->compute = false;
        s->inflight--;
        srv->inflight--;
        session_skip(s, r->sz.payload);
        if (rc == GPUQ_E_TOO_LARGE)
            session_refuse(r, rc,
                           "request needs %zu bytes of staging (%zu after rounding), over "
                           "session_staging (%llu) or total_staging - staging_headroom",
                           need, staging_class(need), (unsigned long long)s->caps.session_staging);
        else
            session_refuse(r, rc, "cannot allocate %zu bytes of staging", need);
        return;
    }
    r->out_off = align64(r->sz.payload);
    if (r->sz.payload) {
        s->cur = r;
        s->have = 0;
        s->rstate = RS_PAYLOAD;
    } else {
        session_skip(s, 0);
        dispatch_submit(r);
    }
}

void dispatch_retry(session *s)
{
    if (s->closing || s->rstate != RS_WAIT_STAGING || !s->cur)
        return;
    session_ref(s);
    dispatch_reserve(s);
    session_update_reading(s);
    session_unref(s);
}

void dispatch_header(session *s)
{
    server *srv = s->srv;
    const gpuq_limits *lim = &srv->cfg.lim;
    uint64_t plen = s->pre.payload_len;
    request *r = dispatch_new(s);
    if (!r)
        return;
    char msg[160] = "";
    int rc = gpuq_request_decode(s->hbuf, s->pre.header_len, &r->req, msg, sizeof msg);
    if (s->hbuf != s->hdr_inline) {
        free(s->hbuf);
        s->hbuf = s->hdr_inline;
    }
    session_skip(s, plen); /* unless a compute op takes the payload below */
    if (plen > lim->max_payload) {
        s->broken = true;
        r->close_after = true;
        session_refuse(r, GPUQ_E_TOO_LARGE,
                       "payload of %llu bytes over the limit of %llu; closing the connection",
                       (unsigned long long)plen, (unsigned long long)lim->max_payload);
        return;
    }
    if (rc < 0) {
        session_refuse(r, rc, "%s", msg[0] ? msg : gpuq_strerror(rc));
        return;
    }
    stats_request(&srv->stats, r->req.op);
    if (srv->draining && r->req.op != GPUQ_OP_STATUS && r->req.op != GPUQ_OP_METRICS &&
        r->req.op != GPUQ_OP_SESSIONS) {
        session_refuse(r, GPUQ_E_SHUTTING_DOWN, "gpuqd is shutting down");
        return;
    }
    if (r->req.op != GPUQ_OP_HELLO && !s->hello_done) {
        session_refuse(r, GPUQ_E_NO_HELLO, "send hello before any other request");
        return;
    }
    rc = gpuq_request_check(&r->req, plen, lim, &r->sz, msg, sizeof msg);
    if (rc < 0) {
        session_refuse(r, rc, "%s", msg[0] ? msg : gpuq_strerror(rc));
        return;
    }
    switch (r->req.op) {
    case GPUQ_OP_HELLO:
        rc = dispatch_hello(r);
        break;
    case GPUQ_OP_PING:
        rc = 0;
        break;
    case GPUQ_OP_STATUS:
        rc = dispatch_status(r);
        break;
    case GPUQ_OP_SESSIONS:
        rc = dispatch_sessions(r);
        break;
    case GPUQ_OP_METRICS:
        rc = dispatch_metrics(r);
        break;
    case GPUQ_OP_DRAIN:
    case GPUQ_OP_SHUTDOWN:
    case GPUQ_OP_KILL_SESSION:
    case GPUQ_OP_SET_LIMIT:
        rc = dispatch_admin(r);
        break;
    default:
        if (s->inflight >= s->caps.max_inflight) {
            session_refuse(r, GPUQ_E_BUSY, "%u requests in flight on this session (the limit)",
                           s->inflight);
            return;
        }
        r->compute = true;
        s->inflight++;
        srv->inflight++;
        s->cur = r;
        dispatch_reserve(s);
        return;
    }
    if (rc < 0) {
        if (!r->message[0])
            snprintf(r->message, sizeof r->message, "%s", gpuq_strerror(rc));
        r->status = rc;
    }
    session_reply(r);
}

void dispatch_payload_done(session *s)
{
    request *r = s->cur;
    s->cur = NULL;
    session_skip(s, 0);
    dispatch_submit(r);
}

void dispatch_complete(gpuq_job *job)
{
    request *r = job->owner;
    server *srv = r->s->srv;
    r->in_backend = false;
    if (srv->b->lost && !srv->lost) {
        srv->lost = true;
        log_error("device lost: %s", srv->b->lost_reason);
        server_shutdown(srv, 3);
    }
    r->status = job->status;
    if (srv->lost) {
        r->status = GPUQ_E_DEVICE_LOST;
        snprintf(r->message, sizeof r->message, "device lost: %.140s", srv->b->lost_reason);
    } else if (r->status < 0) {
        snprintf(r->message, sizeof r->message, "%s",
                 job->message[0] ? job->message : gpuq_strerror(r->status));
    }
    session_reply(r);
}
