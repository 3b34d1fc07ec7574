/* SPDX-License-Identifier: Apache-2.0 */
/* session_timeout.c - see session_timeout.h. */
#include "session_timeout.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "session.h"
#include "session_io.h"
#include "uvx.h"

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
           (s->reading || io_busy(&s->io.rd) || session_write_backlog(s) > 0);
}

static const char *const timeout_names[TIMEOUT_KINDS] = {"hello", "idle", "frame", "reply"};

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
    s->broken = true;
    s->linger_until_ns = now + SESSION_LINGER_NS;
    /* The reply goes after those owed before it; the linger bounds the wait
     * when the client does not read them. */
    s->srv->sev->timeout(s, msg);
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
    double reply = cfg->reply_timeout_s, rate = (double)cfg->frame_min_rate;
    session_io_progress(s); /* an I/O thread's bytes count as read */
    /* its clock may have read a later time than the sweep's now */
    if (s->rx_ns > now)
        now = s->rx_ns;
    if (s->active_ns > now)
        now = s->active_ns;
    uint64_t wq = session_write_backlog(s), taken = s->bytes_out - wq;
    if (wq == 0 || taken != s->taken_seen || !s->taken_ns)
        s->taken_ns = now;
    s->taken_seen = taken;
    if (!s->hello_done && hello > 0 && (double)(now - s->start_ns) >= hello * 1e9) {
        session_close_timeout(s, now, "no hello within %g s (hello_timeout)", hello);
        return TIMEOUT_HELLO;
    }
    if (session_mid_frame(s) && frame > 0 && session_waits_for_client(s) &&
        (double)(now - s->rx_ns) >= frame * 1e9) {
        session_close_timeout(s, now, "a frame stalled: no byte for %g s (frame_timeout)", frame);
        return TIMEOUT_FRAME;
    }
    double spent = (double)(now - s->frame_ns) / 1e9 - frame; /* past the grace */
    if (session_mid_frame(s) && frame > 0 && rate > 0 && session_waits_for_client(s) && spent > 0 &&
        (double)s->frame_got < rate * spent) {
        session_close_timeout(s, now,
                              "a frame too slow: %llu bytes in %.1f s, under %llu bytes/s "
                              "(frame_min_rate) after frame_timeout",
                              (unsigned long long)s->frame_got, spent + frame,
                              (unsigned long long)cfg->frame_min_rate);
        return TIMEOUT_FRAME;
    }
    if (wq > 0 && reply > 0 && (double)(now - s->taken_ns) >= reply * 1e9) {
        session_close_timeout(s, now,
                              "replies unread: the client took no byte of %llu for %g s "
                              "(reply_timeout)",
                              (unsigned long long)wq, reply);
        return TIMEOUT_REPLY;
    }
    if (s->hello_done && idle > 0 && !s->live && !s->monitor && !session_mid_frame(s) &&
        (double)(now - s->active_ns) >= idle * 1e9) {
        session_close_timeout(s, now, "idle for %g s (idle_timeout)", idle);
        return TIMEOUT_IDLE;
    }
    return -1;
}
