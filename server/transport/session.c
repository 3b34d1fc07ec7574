/* SPDX-License-Identifier: Apache-2.0 */
/* session.c - see session.h. */
#include "session.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "policy.h"
#include "uvx.h"

/* "session N" for the log lines uvx writes. */
static const char *session_label(const session *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "session %llu", (unsigned long long)s->id);
    return buf;
}

static void session_close_read_fd(session *s);

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

/* Fds (SCM_RIGHTS). The kernel hands an fd over with the read that holds
 * the first byte of the frame it came with, and ends that read after the
 * message that carried it. So it belongs to a frame that begins in the
 * read's bytes: it waits in read_fd, is offered to each frame that begins
 * in them (rx_fd, from its prefix on; arena_import takes it, request.c
 * drops it for any other op, which passes it on to the next frame while
 * the read's bytes last), and is closed when they are all fed. A client
 * that attaches its fds as PROTOCOL.md says (each arena_import's own, with
 * its first byte; none with other frames) gets each to its own frame. An
 * fd that comes with a direct read (inside a payload) belongs to no frame:
 * closed at once. */
static void session_take_pending_fds(session *s, bool direct)
{
    int fd;
    while ((fd = uvx_take_pending_fd(&s->pipe)) != -1) {
        if (fd < 0)
            continue; /* could not be taken: closed */
        if (!direct && s->read_fd < 0) {
            s->read_fd = fd;
            continue;
        }
        if (!direct)
            s->read_fd_extra = true;
        close(fd);
    }
}

int session_take_fd(session *s, bool *extra)
{
    int fd = s->rx_fd;
    *extra = s->rx_fd_extra;
    s->rx_fd = -1;
    s->rx_fd_extra = false;
    return fd;
}

void session_drop_fd(session *s)
{
    if (s->rx_fd >= 0 && s->read_fd < 0 && s->rx_off < s->rx_len && !s->closing) {
        /* a later frame in this read's bytes may be the fd's */
        s->read_fd = s->rx_fd;
        s->read_fd_extra = s->rx_fd_extra;
        s->rx_fd = -1;
        s->rx_fd_extra = false;
        return;
    }
    if (s->rx_fd >= 0)
        close(s->rx_fd);
    s->rx_fd = -1;
    s->rx_fd_extra = false;
}

static void session_close_read_fd(session *s)
{
    if (s->read_fd >= 0)
        close(s->read_fd);
    s->read_fd = -1;
    s->read_fd_extra = false;
}

/* A frame begins: the previous frame's fd, never taken, is closed; this
 * read's fd (if any) is offered to it. */
static void session_frame_start(session *s)
{
    s->frame_ns = s->rx_ns;
    s->frame_got = 0;
    if (s->rx_fd >= 0)
        close(s->rx_fd);
    s->rx_fd = s->read_fd;
    s->rx_fd_extra = s->read_fd_extra;
    s->read_fd = -1;
    s->read_fd_extra = false;
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
        if (s->have == s->payload_len) {
            s->payload_buf = NULL;
            s->payload_len = 0;
            session_skip(s, 0);
            s->srv->sev->payload(s);
        }
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

/* After EOF: did the client only shut its sending side (shutdown(SHUT_WR):
 * it still reads, so what it sent is answered) or close the connection
 * (then nobody will read a reply and its work is dropped)? A Unix socket
 * whose peer is gone polls POLLHUP; one that was half-closed does not. */
static bool session_peer_reads(session *s)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&s->pipe, &fd) != 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

static void session_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    session *s = st->data;
    bool direct = nread > 0 && (const uint8_t *)buf->base != s->rx + s->rx_len;
    if (uv_pipe_pending_count(&s->pipe) > 0)
        session_take_pending_fds(s, direct);
    if (nread == UV_EOF && !s->closing && session_peer_reads(s)) {
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
    if (nread < 0) {
        log_debug("session %llu: read: %s", (unsigned long long)s->id, uv_strerror((int)nread));
        session_close(s);
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
    return 0;
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

/* After EOF: every frame read whole was answered and written (a frame cut
 * short by the EOF is not a request: the request layer drops it on close),
 * so the session closes. */
static bool session_eof_done(session *s)
{
    return s->eof && s->rx_off == s->rx_len && s->rstate != RS_WAIT_STAGING &&
           s->live == (s->cur ? 1u : 0u) && !s->pending && !s->flush_listed &&
           uvx_write_queue_size((uv_stream_t *)&s->pipe) == 0;
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
                uvx_write_queue_size((uv_stream_t *)&s->pipe) <= s->caps.session_staging &&
                s->live < 2 * s->caps.max_inflight + 16;
    int rc = 0;
    char label[32];
    if (want && !s->reading) {
        rc = uvx_read_start((uv_stream_t *)&s->pipe, session_alloc_cb, session_read_cb,
                            session_label(s, label, sizeof label));
        s->reading = rc == 0;
        uint64_t now = uv_hrtime();
        s->rx_ns = now; /* a frame's stall counts from here */
        /* nor does the pause count against the frame's rate: a frame begun
         * while reading stopped (from bytes already read) counts from now */
        if (s->stop_ns && s->frame_ns)
            s->frame_ns = s->frame_ns > s->stop_ns ? now : s->frame_ns + (now - s->stop_ns);
        s->stop_ns = 0;
    } else if (!want && s->reading) {
        rc = uvx_read_stop((uv_stream_t *)&s->pipe, session_label(s, label, sizeof label));
        s->reading = false;
        s->stop_ns = uv_hrtime();
    }
    if (rc < 0)
        session_close(s);
}

/* The peer's supplementary groups (SO_PEERGROUPS, Linux 4.13+) into
 * s->groups; without them only the primary gid counts for policy. */
static void session_read_groups(session *s, int fd)
{
    gid_t *g;
    int n, err = policy_peer_groups(fd, &g, &n);
    if (err) {
        log_debug("session %llu: SO_PEERGROUPS: %s", (unsigned long long)s->id, strerror(err));
        return;
    }
    free(s->groups);
    s->groups = g;
    s->ngroups = n;
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
static void session_write_group(session *s, session_frame *first, uv_buf_t *bufs, unsigned nbufs)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < nbufs; i++)
        total += bufs[i].len;
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

static void session_flush(session *s)
{
    session_ref(s);
    uv_buf_t bufs[2 * SESSION_WRITE_GROUP];
    unsigned nbufs = 0, nframes = 0;
    session_frame *first = NULL, *last = NULL;
    while (!s->closing && s->pending && s->pending->seq == s->next_write_seq) {
        session_frame *f = s->pending;
        s->pending = f->next;
        f->next = NULL;
        s->next_write_seq++;
        uv_buf_t fb[2];
        unsigned fn = 0;
        int rc = f->ops->encode(f, fb, &fn);
        if (rc < 0) {
            log_error("session %llu: cannot encode reply (out of memory)",
                      (unsigned long long)s->id);
            if (first)
                session_write_group(s, first, bufs, nbufs);
            f->ops->done(f, rc);
            session_close(s);
            first = NULL;
            break;
        }
        if (first && (f->send_handle || nframes == SESSION_WRITE_GROUP)) {
            session_write_group(s, first, bufs, nbufs);
            first = NULL;
        }
        if (!first) {
            first = f;
            nbufs = nframes = 0;
        } else {
            last->next = f;
        }
        last = f;
        for (unsigned i = 0; i < fn; i++) {
            bufs[nbufs++] = fb[i];
            /* counted frame by frame, as encode assumed (request.c's wr_end) */
            s->srv->stats.bytes_out += fb[i].len;
            s->bytes_out += fb[i].len;
        }
        nframes++;
        if (f->send_handle || f->close_after) {
            session_write_group(s, first, bufs, nbufs);
            first = NULL;
        }
    }
    if (first)
        session_write_group(s, first, bufs, nbufs);
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
    while (*pp && (*pp)->seq < f->seq)
        pp = &(*pp)->next;
    f->next = *pp;
    *pp = f;
    if (s->pending->seq == s->next_write_seq)
        session_list_flush(s);
}
