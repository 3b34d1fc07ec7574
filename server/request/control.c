/* SPDX-License-Identifier: Apache-2.0 */
/* control.c - see control.h. */
#include "control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
#include "request_log.h"
#include "scheduler.h"
#include "session.h"
#include "stats.h"
#include "uvx.h"

/* request.c's reply function for answers that come later (loop thread). */
static void (*control_reply_later)(request *r);

void control_layer_init(void (*reply_later)(request *r))
{
    control_reply_later = reply_later;
}

static int control_info_take(request *r, gpuq_mpw *w)
{
    int rc = gpuq_mpw_take(w, &r->info, &r->info_len);
    gpuq_mpw_free(w);
    return rc;
}

/* Fill r's reply for hello. Returns 0 or a code (message set). */
static int control_hello(request *r)
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
    backend_mark_serving(srv->b); /* loop_pins counts from here on */
    s->priority = prio;
    snprintf(s->client, sizeof s->client, "%s", r->req.client);
    s->hello_done = true;
    log_debug("session %llu: hello from '%s' pid %d uid %u, priority %s (asked %s)",
              (unsigned long long)s->id, s->client, (int)s->pid, (unsigned)s->uid,
              gpuq_prio_name(prio), gpuq_prio_name(r->req.priority));
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, STATS_SERVER_KEYS + 8);
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
    mine.session_arena = s->caps.session_arena;
    mine.resident_bytes = s->caps.resident_bytes;
    gpuq_mpw_str(w, "limits");
    gpuq_limits_encode(&mine, w);
    gpuq_mpw_str(w, "arenas"); /* shared-memory arenas offered (PROTOCOL.md 3.4) */
    gpuq_mpw_bool(w, mine.session_arena > 0);
    gpuq_mpw_str(w, "gate"); /* gated requests and ready (PROTOCOL.md 3.4) */
    gpuq_mpw_bool(w, true);
    return control_info_take(r, w);
}

static int control_status(request *r)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    stats_status_info(r->s->srv, w);
    return control_info_take(r, w);
}

/* A one-entry info map {"format": fmt, "count": n} for document replies. */
static int control_doc_info(request *r, const char *fmt, uint32_t count)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "format");
    gpuq_mpw_str(w, fmt);
    gpuq_mpw_str(w, "count");
    gpuq_mpw_uint(w, count);
    return control_info_take(r, w);
}

static int control_sessions(request *r)
{
    uint32_t n = 0;
    int rc = stats_sessions_doc(r->s->srv, r->s, &r->doc, &r->doc_len, &n);
    if (rc < 0)
        return rc;
    return control_doc_info(r, "msgpack-stream", n);
}

static int control_metrics(request *r)
{
    char *text = NULL;
    size_t len = 0;
    int rc = metrics_render(r->s->srv, &text, &len);
    if (rc < 0)
        return rc;
    r->doc = (uint8_t *)text;
    r->doc_len = len;
    return control_doc_info(r, "prometheus-0.0.4", 1);
}

/* A small info map {"key": value} for admin replies. */
static int control_info_uint(request *r, const char *k1, uint64_t v1, const char *k2, uint64_t v2)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, k1);
    gpuq_mpw_uint(w, v1);
    gpuq_mpw_str(w, k2);
    gpuq_mpw_uint(w, v2);
    return control_info_take(r, w);
}

/* Admin ops (gpuq_op_is_admin) from a session that is not an admin
 * (policy.h). */
static int control_refuse_non_admin(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    const char *op = gpuq_op_name(r->req.op);
    log_info("session %llu: %s refused: uid %d is not an admin", (unsigned long long)s->id, op,
             s->uid == (uid_t)-1 ? -1 : (int)s->uid);
    if (srv->cfg.pol.admin_group[0])
        snprintf(r->message, sizeof r->message, "%s needs root or a member of group %s", op,
                 srv->cfg.pol.admin_group);
    else
        snprintf(r->message, sizeof r->message, "%s needs root", op);
    return GPUQ_E_PERMISSION;
}

static int control_ping(request *r)
{
    (void)r;
    return 0;
}

static int control_drain(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    log_info("drain requested by session %llu (uid %d): no new sessions; %u open",
             (unsigned long long)s->id, (int)s->uid, srv->nsessions);
    srv->hooks.stop_accepting(srv);
    return control_info_uint(r, "sessions", srv->nsessions, "in_flight", srv->inflight);
}

static int control_shutdown(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    log_info("shutdown requested by session %llu (uid %d)", (unsigned long long)s->id, (int)s->uid);
    srv->hooks.shutdown(srv, 0);
    return control_info_uint(r, "sessions", srv->nsessions, "in_flight", srv->inflight);
}

static int control_kill_session(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
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
    log_info("session %llu ('%s', pid %d, uid %d, %u in flight) killed by session %llu (uid %d)",
             (unsigned long long)t->id, t->client, (int)t->pid, (int)t->uid, infl,
             (unsigned long long)s->id, (int)s->uid);
    session_close(t);
    return control_info_uint(r, "session", r->req.session, "in_flight", infl);
}

static int control_set_limit(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    uint64_t old = 0;
    char msg[160];
    if (gpuq_limits_set(&srv->cfg.lim, r->req.limit, r->req.value, &old, msg, sizeof msg)) {
        snprintf(r->message, sizeof r->message, "%s", msg);
        return GPUQ_E_BAD_ARGUMENT;
    }
    log_info("set_limit %s %llu -> %llu by session %llu (uid %d)", r->req.limit,
             (unsigned long long)old, (unsigned long long)r->req.value, (unsigned long long)s->id,
             (int)s->uid);
    srv->hooks.limits_changed(srv);
    return control_info_uint(r, "old", old, "value", r->req.value);
}

/* ---- shared-memory arenas (PROTOCOL.md 3.4; arena.h) ---- */

/* The arena's reply: {"arena": id, "size": bytes}, or the pin's failure
 * (then no fd goes with it). */
static int control_arena_reply(request *r, arena *a, int rc, const char *why)
{
    if (rc == 0)
        rc = control_info_uint(r, "arena", a->id, "size", a->size);
    else
        snprintf(r->message, sizeof r->message, "cannot pin the arena for DMA: %s", why);
    if (rc < 0) {
        uvx_fd_handle_close(r->fd_pipe);
        r->fd_pipe = NULL;
        return rc;
    }
    log_debug("session %llu: arena %llu of %llu bytes %s", (unsigned long long)r->s->id,
              (unsigned long long)a->id, (unsigned long long)a->size,
              r->req.op == GPUQ_OP_ARENA_OPEN ? "created" : "imported");
    return 0;
}

/* A pending arena's pin finished (arena.h): r's reply goes now, in its
 * place in the session's order (its session may have closed meanwhile:
 * the reply is then dropped, and the arena went with the session). */
static void control_arena_pinned(void *arg, arena *a, int rc, const char *why)
{
    request *r = arg;
    r->status = control_arena_reply(r, a, rc, why);
    if (r->status < 0 && !r->message[0])
        snprintf(r->message, sizeof r->message, "%s", gpuq_strerror(r->status));
    control_reply_later(r);
}

/* Create (fd < 0) or import (fd: the client's, borrowed) an arena; reply
 * {"arena": id, "size": bytes}; a created arena's memfd goes with the reply
 * (r->fd_pipe, closed when the request is freed). Pinned on the pinning
 * thread: CONTROL_PENDING, the reply follows (control_arena_pinned). */
static int control_arena_make(request *r, int fd)
{
    session *s = r->s;
    server *srv = s->srv;
    arena *a = NULL;
    int send_fd = -1;
    int rc =
        arena_create(&s->arenas, &srv->arena_books, srv->b, &srv->pin, fd, r->req.size,
                     s->caps.session_arena, srv->cfg.lim.total_arena, &a, fd < 0 ? &send_fd : NULL,
                     r->message, sizeof r->message, control_arena_pinned, r);
    if (rc < 0)
        return rc;
    if (send_fd >= 0 && !(r->fd_pipe = uvx_fd_handle(srv->loop, send_fd))) {
        close(send_fd);
        arena_drop(&s->arenas, a); /* a pending pin then answers no one */
        snprintf(r->message, sizeof r->message, "cannot pass the arena's fd");
        return GPUQ_E_NO_MEMORY;
    }
    if (rc == ARENA_PENDING)
        return CONTROL_PENDING;
    return control_arena_reply(r, a, 0, "");
}

static int control_arena_open(request *r)
{
    return control_arena_make(r, -1);
}

static int control_arena_import(request *r)
{
    bool extra;
    int fd = session_take_fd(r->s, &extra);
    if (fd < 0 || extra) {
        if (fd >= 0)
            close(fd);
        snprintf(r->message, sizeof r->message,
                 "arena_import needs one file descriptor attached (SCM_RIGHTS) to the frame's "
                 "first byte; it got %s",
                 extra ? "more than one" : "none");
        return GPUQ_E_BAD_ARGUMENT;
    }
    int rc = control_arena_make(r, fd);
    close(fd); /* mapped (or refused; a pending pin needs only the mapping) */
    return rc;
}

static int control_arena_close(request *r)
{
    if (arena_close(&r->s->arenas, r->req.arena) < 0) {
        snprintf(r->message, sizeof r->message, "no arena %llu in this session",
                 (unsigned long long)r->req.arena);
        return GPUQ_E_BAD_ARGUMENT;
    }
    return 0;
}

typedef struct control_entry {
    int (*run)(request *r);
    bool while_draining; /* served while the daemon drains */
} control_entry;

/* cancel: this session's unanswered requests with that id (scheduler.c). */
static int control_cancel(request *r)
{
    uint32_t dropped, running;
    if (request_log_cancel(r->s, r->req.request))
        log_debug("session %llu: cancel stopped monitor %llu", (unsigned long long)r->s->id,
                  (unsigned long long)r->req.request);
    sched_cancel(r->s, r->req.request, &dropped, &running);
    log_debug("session %llu: cancel of request %llu: %u dropped, %u running",
              (unsigned long long)r->s->id, (unsigned long long)r->req.request, dropped, running);
    return control_info_uint(r, "dropped", dropped, "running", running);
}

/* ready: the first n input bytes of this session's unanswered gated request
 * with that id are in place (PROTOCOL.md 3.4). A held request goes to its
 * queue once all are; one in a backend that waits on the device is told. */
static int control_ready(request *r)
{
    session *s = r->s;
    uint64_t id = r->req.request, n = r->req.bytes;
    request *g = NULL;
    bool seen = false;
    uint64_t total = 0;
    for (request *u = s->unanswered; u && !g; u = u->lnext) {
        seen |= u->req.id == id;
        if (u->req.id == id && u->req.gate)
            g = u;
    }
    if (!g && seen) {
        snprintf(r->message, sizeof r->message, "request %llu is not gated",
                 (unsigned long long)id);
        return GPUQ_E_BAD_ARGUMENT;
    }
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 3);
    gpuq_mpw_str(w, "found");
    gpuq_mpw_bool(w, g != NULL);
    if (g) {
        gpuq_job *job = &g->job;
        total = g->sz.payload;
        if (n > total || n < job->gate_ready) {
            gpuq_mpw_free(w);
            if (n > total)
                snprintf(r->message, sizeof r->message, "bytes %llu is over its %llu input bytes",
                         (unsigned long long)n, (unsigned long long)total);
            else
                snprintf(r->message, sizeof r->message,
                         "bytes %llu is less than the %llu already ready", (unsigned long long)n,
                         (unsigned long long)job->gate_ready);
            return GPUQ_E_BAD_ARGUMENT;
        }
        bool more = n > job->gate_ready;
        job->gate_ready = n;
        backend *b = s->srv->b;
        if (g->gate_held && n == total)
            sched_release(g); /* may submit it, or answer it (its deadline): g may be gone */
        else if (more && g->in_backend && !job->stop && b->ops->gate)
            b->ops->gate(b, job);
    }
    gpuq_mpw_str(w, "ready");
    gpuq_mpw_uint(w, g ? n : 0);
    gpuq_mpw_str(w, "input");
    gpuq_mpw_uint(w, total);
    return control_info_take(r, w);
}

/* list (PROTOCOL.md 3.5): the arrays the peer may read, by name, as a
 * msgpack stream in the payload (as sessions: a header could not carry
 * thousands). */
static int control_list(request *r)
{
    session *s = r->s;
    resident **v;
    int n = resident_visible(&s->srv->resident, s->uid, s->caps.admin, &v);
    if (n < 0)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w) {
        free(v);
        return GPUQ_E_NO_MEMORY;
    }
    for (int i = 0; i < n; i++) {
        const resident *a = v[i];
        gpuq_mpw_map(w, 9);
        resident_write_desc(w, a->name, a->owner, a->access, a->dtype, a->ndim, a->shape, a->bytes,
                            a->device);
        gpuq_mpw_str(w, "users");
        gpuq_mpw_uint(w, resident_users(a));
        gpuq_mpw_str(w, "persist");
        gpuq_mpw_bool(w, a->persisted);
    }
    free(v);
    int rc = gpuq_mpw_take(w, &r->doc, &r->doc_len);
    gpuq_mpw_free(w);
    return rc < 0 ? rc : control_doc_info(r, "msgpack-stream", (uint32_t)n);
}

/* remove (PROTOCOL.md 3.5): the name goes now; the array when its last
 * user has finished. */
static int control_remove(request *r)
{
    session *s = r->s;
    resident *a = resident_find(&s->srv->resident, r->req.name);
    if (!a) {
        snprintf(r->message, sizeof r->message, "no resident array \"%.*s\"",
                 RESIDENT_SHOW(r->req.name));
        return GPUQ_E_NOT_FOUND;
    }
    if (a->owner != s->uid && !s->caps.admin) {
        snprintf(r->message, sizeof r->message,
                 "resident array \"%.*s\" belongs to uid %u; uid %u may not remove it",
                 RESIDENT_SHOW(a->name), (unsigned)a->owner, (unsigned)s->uid);
        return GPUQ_E_PERMISSION;
    }
    int rc;
    if (a->persisted &&
        (rc = resident_store_unlink(&s->srv->store, a->name, r->message, sizeof r->message)))
        return rc; /* the file stays, and so does the array */
    a->persisted = false;
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "name");
    gpuq_mpw_str(w, a->name);
    gpuq_mpw_str(w, "bytes");
    gpuq_mpw_uint(w, a->bytes);
    log_debug("session %llu: resident array \"%.*s\" removed (%u users)", (unsigned long long)s->id,
              RESIDENT_SHOW(a->name), resident_users(a));
    resident_unname(a); /* a may be gone now */
    return control_info_take(r, w);
}

static const control_entry control_table[GPUQ_OP_COUNT] = {
    [GPUQ_OP_HELLO] = {.run = control_hello},
    [GPUQ_OP_PING] = {.run = control_ping},
    [GPUQ_OP_STATUS] = {.run = control_status, .while_draining = true},
    [GPUQ_OP_SESSIONS] = {.run = control_sessions, .while_draining = true},
    [GPUQ_OP_METRICS] = {.run = control_metrics, .while_draining = true},
    [GPUQ_OP_DRAIN] = {.run = control_drain},
    [GPUQ_OP_SHUTDOWN] = {.run = control_shutdown},
    [GPUQ_OP_KILL_SESSION] = {.run = control_kill_session},
    [GPUQ_OP_SET_LIMIT] = {.run = control_set_limit},
    [GPUQ_OP_ARENA_OPEN] = {.run = control_arena_open},
    [GPUQ_OP_ARENA_IMPORT] = {.run = control_arena_import},
    [GPUQ_OP_ARENA_CLOSE] = {.run = control_arena_close},
    [GPUQ_OP_CANCEL] = {.run = control_cancel, .while_draining = true},
    [GPUQ_OP_READY] = {.run = control_ready, .while_draining = true},
    [GPUQ_OP_LIST] = {.run = control_list, .while_draining = true},
    [GPUQ_OP_REMOVE] = {.run = control_remove},
    [GPUQ_OP_SLOWLOG] = {.run = request_log_slowlog, .while_draining = true},
    [GPUQ_OP_SLOWLOG_RESET] = {.run = request_log_slowlog_reset},
    [GPUQ_OP_MONITOR] = {.run = request_log_monitor, .while_draining = true},
};

static const control_entry *control_entry_of(gpuq_op op)
{
    if ((int)op < 0 || op >= GPUQ_OP_COUNT || !control_table[op].run)
        return NULL;
    return &control_table[op];
}

bool control_while_draining(gpuq_op op)
{
    const control_entry *e = control_entry_of(op);
    return e && e->while_draining;
}

int control_run(request *r)
{
    const control_entry *e = control_entry_of(r->req.op);
    if (!e)
        return GPUQ_E_INTERNAL;
    if (gpuq_op_is_admin(r->req.op) && !r->s->caps.admin)
        return control_refuse_non_admin(r);
    return e->run(r);
}
