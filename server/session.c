/* session.c - see session.h. */
#include "session.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dispatch.h"
#include "frame.h"
#include "log.h"
#include "server.h"
#include "utf8.h"

session *session_new(server *srv)
{
    session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    int rc = uv_pipe_init(srv->loop, &s->pipe, 0);
    if (rc < 0) {
        log_error("uv_pipe_init: %s", uv_strerror(rc));
        free(s);
        return NULL;
    }
    s->pipe.data = s;
    s->srv = srv;
    s->refs = 1;
    s->id = srv->next_session_id++;
    s->hbuf = s->hdr_inline;
    s->pid = -1;
    s->next = srv->sessions;
    if (srv->sessions)
        srv->sessions->prev = s;
    srv->sessions = s;
    s->counted = true;
    srv->nsessions++;
    srv->stats.sessions_total++;
    return s;
}

void session_ref(session *s)
{
    s->refs++;
}

void session_unref(session *s)
{
    if (--s->refs > 0)
        return;
    server *srv = s->srv;
    if (s->bsess && srv->b)
        srv->b->ops->session_close(srv->b, s->bsess);
    if (s->hbuf != s->hdr_inline)
        free(s->hbuf);
    free(s->groups);
    if (s->prev)
        s->prev->next = s->next;
    else
        srv->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    log_debug("session %llu freed", (unsigned long long)s->id);
    free(s);
    server_session_freed(srv);
}

static void session_on_close(uv_handle_t *h)
{
    session_unref(h->data);
}

void session_close(session *s)
{
    if (s->closing)
        return;
    s->closing = true;
    server *srv = s->srv;
    if (s->counted) {
        s->counted = false;
        srv->nsessions--;
    }
    log_debug("session %llu closing (%u in flight)", (unsigned long long)s->id, s->inflight);
    if (s->reading) {
        int rc = uv_read_stop((uv_stream_t *)&s->pipe);
        if (rc < 0)
            log_warn("session %llu: uv_read_stop: %s", (unsigned long long)s->id, uv_strerror(rc));
        s->reading = false;
    }
    session_ref(s); /* this scope */
    uv_close((uv_handle_t *)&s->pipe, session_on_close);
    while (s->pending) {
        request *r = s->pending;
        s->pending = r->next;
        request_free(r);
    }
    if (s->cur) {
        request *r = s->cur;
        s->cur = NULL;
        request_free(r);
    }
    session_unref(s);
    server_check_drain(srv);
}

static void session_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    session *s = h->data;
    uint64_t left;
    switch (s->rstate) {
    case RS_PREFIX:
        *buf = uv_buf_init((char *)s->prefix + s->have, (unsigned)(GPUQ_PREFIX_SIZE - s->have));
        return;
    case RS_HEADER:
        *buf = uv_buf_init((char *)s->hbuf + s->have, (unsigned)(s->pre.header_len - s->have));
        return;
    case RS_PAYLOAD:
        left = s->cur->sz.payload - s->have;
        buf->base = (char *)s->cur->slot->ptr + s->have;
        buf->len = left > (1u << 30) ? (1u << 30) : (size_t)left;
        return;
    case RS_SKIP:
        left = s->skip_left < SESSION_SCRATCH ? s->skip_left : SESSION_SCRATCH;
        *buf = uv_buf_init((char *)s->scratch, (unsigned)left);
        return;
    default:
        *buf = uv_buf_init(NULL, 0);
        return;
    }
}

static void session_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    session *s = st->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            log_debug("session %llu: read: %s", (unsigned long long)s->id, uv_strerror((int)nread));
        session_close(s);
        return;
    }
    if (nread == 0 || s->closing)
        return;
    s->srv->stats.bytes_in += (uint64_t)nread;
    s->bytes_in += (uint64_t)nread;
    s->rx_ns = s->active_ns = uv_hrtime();
    session_ref(s);
    switch (s->rstate) {
    case RS_PREFIX:
        s->have += (uint64_t)nread;
        if (s->have == GPUQ_PREFIX_SIZE)
            dispatch_prefix(s);
        break;
    case RS_HEADER:
        s->have += (uint64_t)nread;
        if (s->have == s->pre.header_len)
            dispatch_header(s);
        break;
    case RS_PAYLOAD:
        s->have += (uint64_t)nread;
        if (s->have == s->cur->sz.payload)
            dispatch_payload_done(s);
        break;
    case RS_SKIP:
        s->skip_left -= (uint64_t)nread;
        if (s->skip_left == 0)
            session_skip(s, 0);
        break;
    default:
        log_error("session %llu: read in state %d", (unsigned long long)s->id, (int)s->rstate);
        break;
    }
    session_update_reading(s);
    session_unref(s);
}

void session_skip(session *s, uint64_t n)
{
    s->have = 0;
    s->skip_left = n;
    s->rstate = n ? RS_SKIP : RS_PREFIX;
}

void session_update_reading(session *s)
{
    if (s->closing)
        return;
    bool want =
        !s->broken && s->rstate != RS_WAIT_STAGING &&
        uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) <= s->caps.session_staging &&
        s->live < 2 * s->caps.max_inflight + 16;
    int rc = 0;
    if (want && !s->reading) {
        rc = uv_read_start((uv_stream_t *)&s->pipe, session_alloc_cb, session_read_cb);
        s->reading = rc == 0;
        s->rx_ns = uv_hrtime(); /* a frame's stall counts from here */
    } else if (!want && s->reading) {
        rc = uv_read_stop((uv_stream_t *)&s->pipe);
        s->reading = false;
    }
    if (rc < 0) {
        log_warn("session %llu: read start/stop: %s", (unsigned long long)s->id, uv_strerror(rc));
        session_close(s);
    }
}

/* The peer's supplementary groups (SO_PEERGROUPS, Linux 4.13+) into
 * s->groups; without them only the primary gid counts for policy. */
static void session_read_groups(session *s, int fd)
{
    socklen_t len = 64 * sizeof(gid_t);
    for (int tries = 0; tries < 3; tries++) {
        gid_t *g = malloc(len ? len : sizeof(gid_t));
        if (!g)
            return;
        socklen_t got = len;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &got) == 0) {
            free(s->groups);
            s->groups = g;
            s->ngroups = (int)(got / sizeof(gid_t));
            return;
        }
        int err = errno;
        free(g);
        if (err != ERANGE || got <= len) {
            log_debug("session %llu: SO_PEERGROUPS: %s", (unsigned long long)s->id, strerror(err));
            return;
        }
        len = got;
    }
}

void session_apply_policy(session *s)
{
    policy_caps_for(&s->srv->cfg, s->uid, s->gid, s->groups, s->ngroups, &s->caps);
}

void session_start(session *s)
{
    uv_os_fd_t fd;
    s->start_ns = s->rx_ns = s->active_ns = uv_hrtime();
    int rc = uv_fileno((uv_handle_t *)&s->pipe, &fd);
    if (rc == 0) {
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0) {
            s->pid = cr.pid;
            s->uid = cr.uid;
            s->gid = cr.gid;
            session_read_groups(s, fd);
        } else {
            log_warn("session %llu: SO_PEERCRED failed", (unsigned long long)s->id);
            s->uid = (uid_t)-1;
            s->gid = (gid_t)-1;
        }
    } else {
        log_warn("session %llu: uv_fileno: %s", (unsigned long long)s->id, uv_strerror(rc));
        s->uid = (uid_t)-1;
        s->gid = (gid_t)-1;
    }
    session_apply_policy(s);
    log_debug("session %llu: connected pid %d uid %u gid %u%s", (unsigned long long)s->id,
              (int)s->pid, (unsigned)s->uid, (unsigned)s->gid, s->caps.admin ? " (admin)" : "");
    session_update_reading(s);
}

request *request_new(session *s)
{
    request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->s = s;
    r->seq = s->next_seq++;
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
    bool released = false;
    if (r->slot) {
        staging_release(&srv->st, r->slot, &s->staging_used);
        released = true;
    }
    free(r->wbuf);
    free(r->info);
    free(r->doc);
    if (r->compute) {
        s->inflight--;
        srv->inflight--;
    }
    s->live--;
    srv->live--;
    free(r);
    if (released)
        server_staging_released(srv);
    if (!s->closing)
        session_update_reading(s);
    session_unref(s);
    server_check_drain(srv);
}

static void session_on_write(uv_write_t *wr, int status)
{
    request *r = wr->data;
    session *s = r->s;
    session_ref(s);
    if (status < 0) {
        if (status != UV_ECANCELED)
            log_debug("session %llu: write: %s", (unsigned long long)s->id, uv_strerror(status));
        session_close(s);
    } else {
        s->active_ns = uv_hrtime();
    }
    bool close_after = r->close_after;
    request_free(r);
    if (close_after)
        session_close(s);
    session_unref(s);
}

static void session_write(request *r)
{
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
        plen = r->sz.output;
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
        goto err;
    uv_buf_t bufs[2];
    bufs[0] = uv_buf_init((char *)r->wbuf, (unsigned)wlen);
    unsigned nbufs = 1;
    if (plen) {
        bufs[1].base = r->doc ? (char *)r->doc : (char *)r->slot->ptr + r->out_off;
        bufs[1].len = (size_t)plen;
        nbufs = 2;
    }
    r->wr.data = r;
    rc = uv_write(&r->wr, (uv_stream_t *)&s->pipe, bufs, nbufs, session_on_write);
    if (rc < 0) {
        log_debug("session %llu: uv_write: %s", (unsigned long long)s->id, uv_strerror(rc));
        request_free(r);
        session_close(s);
        return;
    }
    srv->stats.bytes_out += wlen + plen;
    s->bytes_out += wlen + plen;
    return;
err:
    log_error("session %llu: cannot encode reply (out of memory)", (unsigned long long)s->id);
    request_free(r);
    session_close(s);
}

static void session_flush(session *s)
{
    session_ref(s);
    while (!s->closing && s->pending && s->pending->seq == s->next_write_seq) {
        request *r = s->pending;
        s->pending = r->next;
        r->next = NULL;
        s->next_write_seq++;
        session_write(r);
    }
    session_update_reading(s);
    session_unref(s);
}

void session_reply(request *r)
{
    session *s = r->s;
    if (s->closing) {
        request_free(r);
        return;
    }
    request **pp = &s->pending;
    while (*pp && (*pp)->seq < r->seq)
        pp = &(*pp)->next;
    r->next = *pp;
    *pp = r;
    session_flush(s);
}

void session_refuse(request *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gpuq_utf8_vsnprintf(r->message, sizeof r->message, fmt, ap); /* no half character */
    va_end(ap);
    r->status = code;
    log_debug("session %llu: request %llu refused: %s: %s", (unsigned long long)r->s->id,
              (unsigned long long)r->req.id, gpuq_errname(code), r->message);
    session_reply(r);
}

/* In the middle of a frame: some of its bytes came, the rest has not. */
static bool session_mid_frame(const session *s)
{
    return s->rstate != RS_PREFIX || s->have > 0;
}

/* The server waits on the client: it reads, or it stopped reading because
 * the client does not read its replies. (Waiting for staging, or for the
 * backend to finish earlier requests, is the server's own doing.) */
static bool session_waits_for_client(session *s)
{
    return s->rstate != RS_WAIT_STAGING &&
           (s->reading || uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) > 0);
}

static const char *const timeout_names[TIMEOUT_KINDS] = {"hello", "idle", "frame"};

const char *session_timeout_name(int kind)
{
    return kind >= 0 && kind < TIMEOUT_KINDS ? timeout_names[kind] : "?";
}

/* Close s for a timeout: a final `timeout` reply, then the close; at most
 * SESSION_LINGER_NS later whatever happens. */
#define SESSION_LINGER_NS 1000000000ull
static void session_close_timeout(session *s, uint64_t now, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    static log_limit lim;
    log_limited(&lim, LOG_LVL_INFO, "session %llu (pid %d, uid %d, '%s'): closed: %s",
                (unsigned long long)s->id, (int)s->pid, s->uid == (uid_t)-1 ? -1 : (int)s->uid,
                s->client, msg);
    /* The reply goes after those owed before it; the linger bounds the wait
     * when the client does not read them. A frame stalled in its payload
     * gets the reply under its own id, its staging given back at once. */
    request *r = s->cur;
    if (r) {
        s->cur = NULL;
        bool released = r->slot != NULL;
        if (r->slot)
            staging_release(&s->srv->st, r->slot, &s->staging_used);
        r->slot = NULL;
        if (r->compute) {
            r->compute = false;
            s->inflight--;
            s->srv->inflight--;
        }
        if (released)
            server_staging_released(s->srv);
    } else if (!(r = request_new(s))) {
        session_close(s);
        return;
    }
    s->broken = true;
    s->linger_until_ns = now + SESSION_LINGER_NS;
    r->close_after = true;
    session_update_reading(s);
    session_refuse(r, GPUQ_E_TIMEOUT, "%s", msg);
}

int session_sweep(session *s, uint64_t now)
{
    const config *cfg = &s->srv->cfg;
    if (s->closing)
        return -1;
    if (s->broken) { /* a final reply is on its way: give it a while, then close */
        if (!s->linger_until_ns)
            s->linger_until_ns = now + SESSION_LINGER_NS;
        else if (now >= s->linger_until_ns)
            session_close(s);
        return -1;
    }
    double hello = cfg->hello_timeout_s, frame = cfg->frame_timeout_s, idle = cfg->idle_timeout_s;
    if (!s->hello_done && hello > 0 && (double)(now - s->start_ns) >= hello * 1e9) {
        session_close_timeout(s, now, "no hello within %g s (hello_timeout)", hello);
        return TIMEOUT_HELLO;
    }
    if (session_mid_frame(s) && frame > 0 && session_waits_for_client(s) &&
        (double)(now - s->rx_ns) >= frame * 1e9) {
        session_close_timeout(s, now, "a frame stalled: no byte for %g s (frame_timeout)", frame);
        return TIMEOUT_FRAME;
    }
    if (s->hello_done && idle > 0 && !s->live && !session_mid_frame(s) &&
        (double)(now - s->active_ns) >= idle * 1e9) {
        session_close_timeout(s, now, "idle for %g s (idle_timeout)", idle);
        return TIMEOUT_IDLE;
    }
    return -1;
}
