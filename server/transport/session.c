/* SPDX-License-Identifier: Apache-2.0 */
/* session.c - see session.h. */
#include "session.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "session_fd.h"
#include "session_io.h"
#include "session_peer.h"
#include "uvx.h"

static void session_group_done(session *s, session_frame *f, int status);
static void session_list_flush(session *s);

session *session_new(server *srv)
{
    session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    /* IPC: a frame may carry an fd (PROTOCOL.md 3.4: arena_open's reply,
     * arena_import's request) */
    if (uvx_pipe_init_ipc(srv->loop, &s->pipe, s, 1) < 0) {
        free(s);
        return NULL;
    }
    s->srv = srv;
    s->refs = 1;
    s->id = srv->next_session_id++;
    s->hbuf = s->hdr_inline;
    s->pid = -1;
    s->rx_fd = -1;
    s->read_fd = -1;
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
    session_drop_fd(s);
    session_close_read_fd(s);
    if (s->prev)
        s->prev->next = s->next;
    else
        srv->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    log_debug("session %llu freed", (unsigned long long)s->id);
    free(s);
    srv->hooks.session_freed(srv);
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
    if (s->user_counted) {
        s->user_counted = false;
        policy_users_drop(&srv->users, s->uid);
    }
    log_debug("session %llu closing (%u in flight)", (unsigned long long)s->id, s->inflight);
    if (s->reading) {
        char label[32];
        (void)uvx_read_stop((uv_stream_t *)&s->pipe, session_label(s, label, sizeof label));
        s->reading = false;
    }
    session_ref(s); /* this scope */
    /* Before the fd closes: no I/O thread touches it, nor the buffers the
     * request layer is about to give back, after io_cancel. */
    if (srv->io && io_cancel(srv->io, &s->io.rd)) {
        session_io_count(s);
        session_unref(s);
    }
    if (srv->io && io_cancel(srv->io, &s->io.wr)) {
        session_frame *first = s->io_first;
        s->io_first = NULL;
        session_group_done(s, first, UV_ECANCELED);
        session_unref(s);
    }
    if (s->io_held) {
        session_frame *f = s->io_held;
        s->io_held = NULL;
        f->ops->done(f, UV_ECANCELED);
    }
    uvx_close((uv_handle_t *)&s->pipe, session_on_close);
    while (s->pending) {
        session_frame *f = s->pending;
        s->pending = f->next;
        f->ops->done(f, UV_ECANCELED);
    }
    srv->sev->closed(s);
    session_unref(s);
    srv->hooks.check_drain(srv);
}

/* Reading. A read goes into the session's buffer (rx), from which
 * session_feed hands each part of a frame (prefix, header, payload, bytes
 * to skip) to where it belongs, as many frames as the read brought: small
 * pipelined requests cost a read for many frames instead of three reads
 * each. Only the rest of a payload of at least SESSION_RX bytes is read
 * straight into its staging slot (session_direct), so that large arrays
 * are received into pinned memory without a copy. Bytes that wait (the
 * session waits for staging) stay in rx, and the session reads nothing
 * more until they are fed. */

static bool session_direct(const session *s)
{
    return s->rstate == RS_PAYLOAD && s->rx_off == s->rx_len &&
           s->payload_len - s->have >= SESSION_RX;
}

static void session_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    session *s = h->data;
    (void)suggested;
    if (session_direct(s)) { /* at most the rest of the read budget */
        uint64_t left = s->payload_len - s->have;
        if (left > SESSION_READ_BUDGET - s->read_run)
            left = SESSION_READ_BUDGET - s->read_run;
        buf->base = (char *)s->payload_buf + s->have;
        buf->len = (size_t)left;
        return;
    }
    if (s->rx_off == s->rx_len)
        s->rx_off = s->rx_len = 0;
    *buf = uv_buf_init((char *)s->rx + s->rx_len, (unsigned)(SESSION_RX - s->rx_len));
}

/* The payload of session_expect_payload is all in: hand it up. */
static void session_payload_in(session *s)
{
    s->payload_buf = NULL;
    s->payload_len = 0;
    session_skip(s, 0);
    s->srv->sev->payload(s);
}

/* n bytes of the current part arrived (in place): account, and hand the
 * part on when it is complete. */
static void session_part(session *s, uint64_t n)
{
    s->frame_got += n;
    switch (s->rstate) {
    case RS_PREFIX:
        s->have += n;
        if (s->have == GPUQ_PREFIX_SIZE) {
            int rc = gpuq_prefix_decode(s->prefix, GPUQ_PREFIX_SIZE, &s->pre);
            s->have = 0;
            s->srv->sev->prefix(s, rc);
        }
        break;
    case RS_HEADER:
        s->have += n;
        if (s->have == s->pre.header_len)
            s->srv->sev->header(s);
        break;
    case RS_PAYLOAD:
        s->have += n;
        if (s->have == s->payload_len)
            session_payload_in(s);
        break;
    case RS_SKIP:
        s->skip_left -= n;
        if (s->skip_left == 0)
            session_skip(s, 0);
        break;
    default:
        log_error("session %llu: read in state %d", (unsigned long long)s->id, (int)s->rstate);
        break;
    }
}

/* Hand rx's bytes to the frames they belong to, until they are all used,
 * the session waits for staging, or it closes or broke (the rest is then
 * dropped). */
static void session_feed(session *s)
{
    if (s->feeding)
        return;
    s->feeding = true;
    while (s->rx_off < s->rx_len && !s->closing && !s->broken && s->rstate != RS_WAIT_STAGING) {
        const uint8_t *p = s->rx + s->rx_off;
        uint64_t n = s->rx_len - s->rx_off, take = 0;
        switch (s->rstate) {
        case RS_PREFIX:
            if (s->have == 0)
                session_frame_start(s);
            take = GPUQ_PREFIX_SIZE - s->have;
            take = take < n ? take : n;
            memcpy(s->prefix + s->have, p, (size_t)take);
            break;
        case RS_HEADER:
            take = s->pre.header_len - s->have;
            take = take < n ? take : n;
            memcpy(s->hbuf + s->have, p, (size_t)take);
            break;
        case RS_PAYLOAD:
            take = s->payload_len - s->have;
            take = take < n ? take : n;
            memcpy((uint8_t *)s->payload_buf + s->have, p, (size_t)take);
            break;
        case RS_SKIP:
            take = s->skip_left < n ? s->skip_left : n;
            break;
        default:
            take = n; /* not reached: dropped */
            break;
        }
        s->rx_off += take;
        session_part(s, take);
    }
    if (s->closing || s->broken)
        s->rx_off = s->rx_len = 0;
    if (s->rx_off == s->rx_len)
        session_close_read_fd(s); /* its frame, if any, has begun: it holds it */
    s->feeding = false;
}

static void session_yield(session *s);

/* A read ended with err (< 0): EOF or a socket error. */
static void session_read_error(session *s, int err)
{
    if (err == UV_EOF && !s->closing && session_peer_reads(s)) {
        /* A half-close (shutdown(SHUT_WR)): libuv has stopped reading.
         * Every request read before it is still answered; the session
         * closes once they are (session_update_reading). */
        s->eof = true;
        s->reading = false;
        s->stop_ns = uv_hrtime();
        session_ref(s);
        session_update_reading(s);
        session_unref(s);
        return;
    }
    log_debug("session %llu: read: %s", (unsigned long long)s->id, uv_strerror(err));
    session_close(s);
}

static void session_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    session *s = st->data;
    bool direct = nread > 0 && (const uint8_t *)buf->base != s->rx + s->rx_len;
    if (uv_pipe_pending_count(&s->pipe) > 0)
        session_take_pending_fds(s, direct);
    if (nread < 0) {
        session_read_error(s, (int)nread);
        return;
    }
    if (nread == 0 || s->closing)
        return;
    s->srv->stats.bytes_in += (uint64_t)nread;
    s->bytes_in += (uint64_t)nread;
    s->read_run += (uint64_t)nread;
    if (s->read_run >= SESSION_READ_BUDGET) /* yield: read again next turn */
        session_yield(s);
    s->rx_ns = s->active_ns = uv_hrtime();
    session_ref(s);
    if (direct) {
        session_part(s, (uint64_t)nread);
    } else {
        s->rx_len += (size_t)nread;
        session_feed(s);
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

int session_expect_header(session *s)
{
    uint64_t hl = s->pre.header_len;
    if (hl > SESSION_HDR_INLINE) {
        uint8_t *h = malloc(hl);
        if (!h) {
            log_error("session %llu: out of memory for a header", (unsigned long long)s->id);
            return GPUQ_E_NO_MEMORY;
        }
        s->hbuf = h;
    }
    s->have = 0;
    s->rstate = RS_HEADER;
    return 0;
}

void session_header_done(session *s)
{
    if (s->hbuf != s->hdr_inline) {
        free(s->hbuf);
        s->hbuf = s->hdr_inline;
    }
}

void session_expect_payload(session *s, void *buf, uint64_t len)
{
    /* staging was granted: the payload's rate counts from now */
    s->frame_ns = uv_hrtime();
    s->frame_got = 0;
    s->payload_buf = buf;
    s->payload_len = len;
    s->have = 0;
    s->rstate = RS_PAYLOAD;
}

void session_drop_payload(session *s)
{
    if (s->rstate != RS_PAYLOAD)
        return;
    if (s->srv->io && io_cancel(s->srv->io, &s->io.rd)) { /* the buffer is no longer touched */
        session_io_count(s);
        s->have += atomic_load(&s->io.rd.moved);
        session_unref(s);
    }
    uint64_t left = s->payload_len - s->have;
    s->payload_buf = NULL;
    s->payload_len = 0;
    session_skip(s, left);
}

void session_wait(session *s)
{
    s->rstate = RS_WAIT_STAGING;
}

bool session_waiting(const session *s)
{
    return s->rstate == RS_WAIT_STAGING;
}

uint64_t session_next_seq(session *s)
{
    return s->next_seq++;
}

/* The loop's next turn: every session that yielded reads again. */
static void session_on_turn(uv_idle_t *h)
{
    server *srv = h->data;
    (void)uvx_idle_stop(h);
    srv->turn_pending = false;
    for (session *s = srv->sessions, *next; s; s = next) {
        session_ref(s);
        if (s->yielded) {
            s->yielded = false;
            session_feed(s); /* bytes left in rx first (they waited for staging) */
            session_update_reading(s);
        }
        next = s->next;
        session_unref(s);
    }
}

/* Stop reading until the loop's next turn (session_on_turn): the read
 * budget is spent (counted in read_yields), or bytes wait in rx that are
 * to be fed there rather than from inside the caller. */
static void session_next_turn(session *s)
{
    server *srv = s->srv;
    s->yielded = true;
    if (srv->turn_pending || !srv->turn_idle.loop || uv_is_closing((uv_handle_t *)&srv->turn_idle))
        return;
    if (uvx_idle_start(&srv->turn_idle, session_on_turn, "read turn") == 0)
        srv->turn_pending = true;
    else
        s->yielded = false; /* no next turn to wait for: keep reading */
}

static void session_yield(session *s)
{
    s->read_run = 0;
    s->srv->read_yields++;
    session_next_turn(s);
}

static void session_on_prepare(uv_prepare_t *h);

int session_layer_init(server *srv)
{
    int rc = uvx_idle_init(srv->loop, &srv->turn_idle, srv);
    if (rc < 0)
        return rc;
    rc = uv_prepare_init(srv->loop, &srv->flush_prep);
    if (rc < 0) {
        log_error("uv_prepare_init: %s", uv_strerror(rc));
        return rc;
    }
    srv->flush_prep.data = srv;
    srv->flush_init = true;
    unsigned n = (unsigned)srv->cfg.io_threads;
    if (n) {
        srv->io = io_pool_new(srv->loop, n);
        if (srv->io)
            log_debug("%u I/O threads for payloads and replies of %llu bytes and more", n,
                      (unsigned long long)srv->cfg.io_bulk_min);
        else
            log_warn("no I/O threads: bulk bytes move on the loop thread");
    }
    return 0;
}

void session_layer_stop_io(server *srv)
{
    io_pool_free(srv->io); /* every session closed: each took its jobs back */
    srv->io = NULL;
}

void session_layer_close(server *srv)
{
    srv->turn_pending = false;
    uvx_close((uv_handle_t *)&srv->turn_idle, NULL);
    /* what is listed is written now (the sessions close next) */
    if (srv->flush_init && srv->flush_on)
        session_on_prepare(&srv->flush_prep);
    srv->flush_init = false;
    uvx_close((uv_handle_t *)&srv->flush_prep, NULL);
}

static void session_io_read_done(io_job *j)
{
    session *s = j->owner;
    session_io_count(s);
    s->srv->io_reads++;
    s->have += atomic_load(&j->moved);
    if (s->closing || s->rstate != RS_PAYLOAD) {
        /* not reached: whoever closes the session or drops the payload
         * takes the job back first (session_close, session_drop_payload) */
        log_error("session %llu: an I/O thread's read ended after its payload was dropped",
                  (unsigned long long)s->id);
        session_unref(s);
        return;
    }
    if (s->have == s->payload_len)
        session_payload_in(s);
    else
        session_read_error(s, j->status < 0 ? j->status : UV_EIO);
    session_update_reading(s);
    session_unref(s);
}

static void session_io_read(session *s)
{
    s->io_rd_seen = 0;
    session_ref(s); /* the job's */
    (void)io_read(s->srv->io, &s->io, s->payload_buf + s->have, s->payload_len - s->have,
                  session_io_level(s), session_io_read_done, s);
}

/* After EOF: every frame read whole was answered and written (a frame cut
 * short by the EOF is not a request: the request layer drops it on close),
 * so the session closes. */
static bool session_eof_done(session *s)
{
    return s->eof && s->rx_off == s->rx_len && s->rstate != RS_WAIT_STAGING &&
           s->live == (s->cur ? 1u : 0u) && !s->pending && !s->flush_listed &&
           !io_busy(&s->io.rd) && !io_busy(&s->io.wr) && session_write_backlog(s) == 0;
}

void session_update_reading(session *s)
{
    if (s->closing)
        return;
    bool left = s->rx_off < s->rx_len; /* bytes read, not yet fed */
    if (left && !s->feeding && !s->yielded && s->rstate != RS_WAIT_STAGING && !s->broken)
        session_next_turn(s);
    if (session_eof_done(s)) {
        session_close(s);
        return;
    }
    bool want = !left && !s->eof && !s->broken && !s->yielded && s->rstate != RS_WAIT_STAGING &&
                !io_busy(&s->io.rd) && session_write_backlog(s) <= s->caps.session_staging &&
                s->live < 2 * s->caps.max_inflight + 16;
    int rc = 0;
    char label[32];
    if (want && session_io_reads(s)) {
        if (s->reading) {
            rc = uvx_read_stop((uv_stream_t *)&s->pipe, session_label(s, label, sizeof label));
            s->reading = false;
        }
        if (rc == 0) {
            session_reading_resumed(s);
            session_io_read(s);
        }
    } else if (want && !s->reading) {
        rc = uvx_read_start((uv_stream_t *)&s->pipe, session_alloc_cb, session_read_cb,
                            session_label(s, label, sizeof label));
        s->reading = rc == 0;
        session_reading_resumed(s);
    } else if (!want && s->reading) {
        rc = uvx_read_stop((uv_stream_t *)&s->pipe, session_label(s, label, sizeof label));
        s->reading = false;
        s->stop_ns = uv_hrtime();
    }
    if (rc < 0)
        session_close(s);
}

void session_start(session *s)
{
    uv_os_fd_t fd;
    s->start_ns = s->rx_ns = s->active_ns = uv_hrtime();
    int rc = uv_fileno((uv_handle_t *)&s->pipe, &fd);
    if (rc == 0) {
        io_conn_init(&s->io, fd, (unsigned)s->id);
        s->io_on = true;
        session_peer_read(s, fd);
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

/* Writing. A reply is not written when it is sent (session_send): the
 * session goes on the server's flush list, and in the loop's prepare phase
 * (before it next waits) every listed session writes the replies whose turn
 * has come, up to SESSION_WRITE_GROUP of them in one uv_write (one writev):
 * the replies of a batch, or of all the requests a turn completed, cost one
 * system call per session instead of one each. A reply that carries an fd
 * ends its group, and so does one after which the session closes. */

#define SESSION_WRITE_GROUP 16

/* A group's bytes are written (status 0) or failed: each frame's done(),
 * first to last (linked by next from the first). */
static void session_group_done(session *s, session_frame *f, int status)
{
    session_ref(s);
    if (status < 0) {
        if (status != UV_ECANCELED)
            log_debug("session %llu: write: %s", (unsigned long long)s->id, uv_strerror(status));
        session_close(s);
    } else {
        s->active_ns = uv_hrtime();
    }
    bool close_after = false;
    while (f) {
        session_frame *next = f->next;
        f->next = NULL;
        close_after |= f->close_after;
        f->ops->done(f, status);
        f = next;
    }
    if (close_after)
        session_close(s);
    session_unref(s);
}

static void session_on_write(uv_write_t *wr, int status)
{
    session_group_done(wr->handle->data, wr->data, status);
}

/* Write the group from first (nbufs buffers): at once if the socket takes
 * it all (its frames are done now), else the rest through uv_write (done
 * in its callback); a frame with an fd always goes through uv_write2. On
 * failure every frame of it is done with the error and the session closes. */
static void session_io_write_done(io_job *j)
{
    session *s = j->owner;
    session_frame *first = s->io_first;
    s->io_first = NULL;
    s->srv->io_writes++;
    session_group_done(s, first, j->status);
    if (!s->closing && (s->io_held || (s->pending && s->pending->seq == s->next_write_seq)))
        session_list_flush(s); /* the replies that waited for this group */
    session_unref(s);
}

static void session_write_group(session *s, session_frame *first, uv_buf_t *bufs, unsigned nbufs)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < nbufs; i++)
        total += bufs[i].len;
    /* bulk: an I/O thread writes it all, unless libuv still has bytes of
     * this session to write (they go first) */
    if (!first->send_handle && s->srv->io && s->io_on && total >= s->srv->cfg.io_bulk_min &&
        uvx_write_queue_size((uv_stream_t *)&s->pipe) == 0) {
        s->io_first = first;
        session_ref(s); /* the job's */
        (void)io_write(s->srv->io, &s->io, bufs, nbufs, session_io_level(s), session_io_write_done,
                       s);
        return;
    }
    if (!first->send_handle) {
        int n = uv_try_write((uv_stream_t *)&s->pipe, bufs, nbufs);
        if (n >= 0 && (uint64_t)n == total) {
            session_group_done(s, first, 0);
            return;
        }
        if (n < 0 && n != UV_EAGAIN) {
            session_group_done(s, first, n);
            return;
        }
        for (size_t skip = n > 0 ? (size_t)n : 0; skip > 0;) { /* the part written */
            size_t k = skip < bufs[0].len ? skip : bufs[0].len;
            bufs[0].base += k;
            bufs[0].len -= k;
            skip -= k;
            if (bufs[0].len == 0) {
                bufs++;
                nbufs--;
            }
        }
    }
    char label[32];
    int rc = uvx_write2(&first->wr, (uv_stream_t *)&s->pipe, bufs, nbufs, first->send_handle, first,
                        session_on_write, session_label(s, label, sizeof label));
    if (rc < 0)
        session_group_done(s, first, rc);
}

/* The group session_flush builds: frames linked from first, their bufs. */
typedef struct session_group {
    uv_buf_t bufs[2 * SESSION_WRITE_GROUP];
    unsigned nbufs, nframes;
    session_frame *first, *last;
} session_group;

static void session_group_write(session *s, session_group *g)
{
    if (g->first)
        session_write_group(s, g->first, g->bufs, g->nbufs);
    g->first = g->last = NULL;
    g->nbufs = g->nframes = 0;
}

/* f, encoded into fb[0..fn), joins the group (and ends it when it carries
 * an fd or closes the session). */
static void session_group_add(session *s, session_group *g, session_frame *f, const uv_buf_t *fb,
                              unsigned fn)
{
    if (!g->first)
        g->first = f;
    else
        g->last->next = f;
    g->last = f;
    for (unsigned i = 0; i < fn; i++)
        g->bufs[g->nbufs++] = fb[i];
    g->nframes++;
    if (f->send_handle || f->close_after)
        session_group_write(s, g);
}

static void session_flush(session *s)
{
    session_ref(s);
    session_group g = {.nbufs = 0};
    if (s->io_held && !io_busy(&s->io.wr)) { /* it waited for the group before it */
        session_frame *f = s->io_held;
        s->io_held = NULL;
        session_group_add(s, &g, f, s->io_held_bufs, s->io_held_n);
    }
    while (!s->closing && !io_busy(&s->io.wr) && !s->io_held && s->pending &&
           s->pending->seq == s->next_write_seq) {
        session_frame *f = s->pending;
        s->pending = f->next;
        f->next = NULL;
        if (!f->extra) /* a started notice: the reply of its seq follows */
            s->next_write_seq++;
        uv_buf_t fb[2];
        unsigned fn = 0;
        int rc = f->ops->encode(f, fb, &fn);
        if (rc < 0) {
            log_error("session %llu: cannot encode reply (out of memory)",
                      (unsigned long long)s->id);
            session_group_write(s, &g);
            f->ops->done(f, rc);
            session_close(s);
            break;
        }
        for (unsigned i = 0; i < fn; i++) {
            /* counted frame by frame, as encode assumed (request.c's wr_end) */
            s->srv->stats.bytes_out += fb[i].len;
            s->bytes_out += fb[i].len;
        }
        if (g.first && (f->send_handle || g.nframes == SESSION_WRITE_GROUP))
            session_group_write(s, &g);
        if (io_busy(&s->io.wr)) { /* that group went to an I/O thread: f waits */
            s->io_held = f;
            s->io_held_n = fn;
            for (unsigned i = 0; i < fn; i++)
                s->io_held_bufs[i] = fb[i];
            break;
        }
        session_group_add(s, &g, f, fb, fn);
    }
    session_group_write(s, &g);
    session_update_reading(s);
    session_unref(s);
}

static void session_on_prepare(uv_prepare_t *h)
{
    server *srv = h->data;
    int rc = uv_prepare_stop(h);
    if (rc < 0)
        log_error("uv_prepare_stop: %s", uv_strerror(rc));
    srv->flush_on = false;
    while (srv->flush_head) { /* a flush may list sessions again: to the end */
        session *s = srv->flush_head;
        srv->flush_head = s->flush_next;
        s->flush_next = NULL;
        s->flush_listed = false;
        if (!s->closing)
            session_flush(s);
        session_unref(s); /* the list's */
    }
}

/* s has a reply to write: on the flush list (holding a reference). */
static void session_list_flush(session *s)
{
    server *srv = s->srv;
    if (s->flush_listed)
        return;
    if (!srv->flush_on) {
        int rc = srv->flush_init ? uv_prepare_start(&srv->flush_prep, session_on_prepare) : -1;
        if (rc < 0) {
            if (srv->flush_init)
                log_error("uv_prepare_start: %s", uv_strerror(rc));
            session_flush(s); /* no prepare phase to wait for: write now */
            return;
        }
        srv->flush_on = true;
    }
    session_ref(s);
    s->flush_listed = true;
    s->flush_next = srv->flush_head;
    srv->flush_head = s;
}

void session_send(session *s, session_frame *f)
{
    if (s->closing) {
        f->ops->done(f, UV_ECANCELED);
        return;
    }
    session_frame **pp = &s->pending;
    /* in seq order; an extra frame before the frame of its seq, after
     * the extra ones queued before it */
    while (*pp && ((*pp)->seq < f->seq || ((*pp)->seq == f->seq && (*pp)->extra)))
        pp = &(*pp)->next;
    f->next = *pp;
    *pp = f;
    if (s->pending->seq == s->next_write_seq)
        session_list_flush(s);
}
