/* SPDX-License-Identifier: Apache-2.0 */
/* server.c - see server.h. */
#include "server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "listener.h"
#include "pinner.h"
#include "log.h"
#include "request.h"
#include "scheduler.h"
#include "sdnotify.h"
#include "session.h"
#include "session_timeout.h"
#include "staging.h"
#include "uvx.h"

/* Refusals and accept errors are logged at most LOG_LIMIT_BURST times per
 * LOG_LIMIT_WINDOW_S: a burst of connections must not flood the journal. */
static log_limit server_refuse_lim, server_accept_lim;

/* Why c may not become a session, into why[cap] (the busy reply's
 * message); 0 when it may. Over max_sessions first, then over its uid's
 * max_sessions_per_user (policy.h: admins are capped only by a rule). */
static int server_admit(server *srv, const listener_conn *c, char *why, size_t cap)
{
    if (srv->nsessions >= srv->cfg.lim.max_sessions) {
        snprintf(why, cap, "%u sessions open (the limit)", srv->cfg.lim.max_sessions);
        return -1;
    }
    policy_caps caps;
    policy_caps_for(&srv->cfg, c->uid, c->gid, c->groups, c->ngroups, &caps);
    uint32_t mine = policy_users_count(&srv->users, c->uid);
    if (mine >= caps.max_sessions_per_user) {
        snprintf(why, cap, "uid %u has %u sessions open (the max_sessions_per_user limit)",
                 (unsigned)c->uid, mine);
        return -1;
    }
    return 0;
}

/* Refuse c cheaply: no session is made. The busy reply (id 0) is written
 * at once and c closed; nothing of the peer is read (its hello stays
 * unread). On a Unix socket a written reply is in the peer's receive
 * queue, where our close cannot discard it: the kernel reports
 * ECONNRESET/EPIPE to the peer only after it has read what is queued (a
 * peer whose hello write fails reads the reply then; libgpuq does). */
static void server_refuse(server *srv, listener_conn *c, const char *why)
{
    log_limited(&server_refuse_lim, LOG_LVL_WARN, "connection of pid %d uid %u refused: %s",
                (int)c->pid, (unsigned)c->uid, why);
    gpuq_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.status = GPUQ_E_BUSY;
    snprintf(rep.message, sizeof rep.message, "%s", why);
    stats_error(&srv->stats, GPUQ_E_BUSY);
    metrics_observe(&srv->metrics, (gpuq_op)0, GPUQ_E_BUSY, 0.0);
    uint8_t *frame = NULL;
    size_t len = 0;
    int rc = gpuq_reply_frame(&rep, 0, &frame, &len);
    if (rc < 0) {
        (void)listener_refuse(c, NULL, 0); /* closed without a reply */
        return;
    }
    rc = listener_refuse(c, frame, len);
    if (rc < 0)
        log_debug("refused connection: reply not written: %s", uv_strerror(rc));
    free(frame);
}

static void server_on_connection(uv_stream_t *ls, int status)
{
    server *srv = ls->data;
    int rc = status;
    listener_conn *c = status < 0 ? NULL : listener_accept(ls, &rc);
    if (!c) {
        log_limited(&server_accept_lim, LOG_LVL_WARN, "accept: %s", uv_strerror(rc));
        return;
    }
    char why[160];
    if (server_admit(srv, c, why, sizeof why) < 0) {
        server_refuse(srv, c, why);
        return;
    }
    session *s = session_new(srv);
    if (!s) {
        log_error("out of memory for a session");
        server_refuse(srv, c, "out of memory for a session");
        return;
    }
    if ((rc = listener_conn_move(c, &s->pipe)) < 0) {
        log_warn("session %llu: uv_pipe_open: %s", (unsigned long long)s->id, uv_strerror(rc));
        session_close(s);
        return;
    }
    session_start(s);
    if (s->closing)
        return;
    if (policy_users_add(&srv->users, s->uid) == 0)
        s->user_counted = true;
    else
        log_warn("session %llu: out of memory counting its uid: not capped per user",
                 (unsigned long long)s->id);
}

static void server_maybe_destroy_backend(server *srv)
{
    if (!srv->finishing || srv->sessions || !srv->b || srv->b->ops->inflight(srv->b) != 0)
        return;
    staging_destroy(&srv->st);         /* its memory to the pinning thread */
    pinner_close(&srv->pin);           /* which frees it, and is joined */
    resident_store_close(&srv->store); /* no request waits for a write */
    resident_close(&srv->resident);    /* nothing in flight uses one */
    srv->b->ops->destroy(srv->b);
    srv->b = NULL;
}

static void server_finish(server *srv)
{
    if (srv->finishing)
        return;
    srv->finishing = true;
    if (srv->live)
        log_warn("closing sessions with %llu requests unanswered", (unsigned long long)srv->live);
    /* srv's own handles: closed if their init ran (the struct starts zeroed) */
    uvx_close((uv_handle_t *)&srv->drain_timer, NULL);
    uvx_close((uv_handle_t *)&srv->sweep_timer, NULL);
    uvx_close((uv_handle_t *)&srv->sigint, NULL);
    uvx_close((uv_handle_t *)&srv->sigterm, NULL);
    uvx_close((uv_handle_t *)&srv->sighup, NULL);
    request_layer_close(srv);
    session_layer_close(srv);
    sdnotify_close(&srv->sd);
    for (session *s = srv->sessions, *next; s; s = next) {
        next = s->next;
        session_close(s);
    }
    session_layer_stop_io(srv);
    server_maybe_destroy_backend(srv);
}

/* The sweep: every sweep_period_ms, close sessions whose client is too slow
 * and give staging back once it has been idle for staging_release_after. */
static void server_staging_sweep(server *srv, uint64_t now)
{
    staging *st = &srv->st;
    /* a grow started or in flight is activity too: its memory is for a
     * waiter, not to be given back before it reserved */
    uint64_t seen = st->reserves + st->grows_started;
    if (seen != srv->sweep_reserves || !srv->staging_idle_since_ns || st->grows) {
        srv->sweep_reserves = seen;
        srv->staging_idle_since_ns = now;
        return;
    }
    /* The memory is freed on the pinning thread (pinner.h), never on the
     * loop; still only with nothing on the backend, because cudaFreeHost
     * waits for the whole device and a grow queued behind it on that
     * thread would wait as long. */
    double after = srv->cfg.staging_release_s;
    if (st->capacity <= srv->cfg.staging_keep ||
        (double)(now - srv->staging_idle_since_ns) < after * 1e9 || !srv->b ||
        srv->b->ops->inflight(srv->b) != 0)
        return;
    uint64_t freed = staging_release_idle(st, srv->cfg.staging_keep);
    if (freed)
        log_info("staging: gave back %llu bytes after %g s idle (capacity %llu, keep %llu)",
                 (unsigned long long)freed, after, (unsigned long long)st->capacity,
                 (unsigned long long)srv->cfg.staging_keep);
}

static void server_on_sweep(uv_timer_t *t)
{
    server *srv = t->data;
    uint64_t now = uv_hrtime();
    for (session *s = srv->sessions, *next; s; s = next) {
        session_ref(s);
        int kind = session_sweep(s, now);
        if (kind < 0 && request_gate_sweep(s, now))
            kind = TIMEOUT_FRAME;
        if (kind >= 0)
            srv->timeouts[kind]++;
        next = s->next;
        session_unref(s);
    }
    server_staging_sweep(srv, now);
}

/* The sweep's period: an eighth of the shortest timeout in force, within
 * [10 ms, 1 s], so a timeout fires at most 1/8 (or 1 s) late. */
static void server_sweep_config(server *srv)
{
    const config *c = &srv->cfg;
    double t[] = {c->hello_timeout_s, c->idle_timeout_s, c->frame_timeout_s, c->reply_timeout_s,
                  c->staging_release_s};
    double shortest = 8.0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i] > 0 && t[i] < shortest)
            shortest = t[i];
    uint64_t ms = (uint64_t)(shortest * 1000.0 / 8.0);
    ms = ms < 10 ? 10 : ms > 1000 ? 1000 : ms;
    staging_set_headroom(&srv->st, c->staging_headroom);
    if (ms == srv->sweep_period_ms || srv->finishing)
        return;
    srv->sweep_period_ms = ms;
    (void)uvx_timer_start(&srv->sweep_timer, server_on_sweep, ms, ms, "sweep");
}

static void server_on_drain_timeout(uv_timer_t *t)
{
    server *srv = t->data;
    log_warn("drain timeout (%.0f s)", srv->cfg.drain_timeout_s);
    server_finish(srv);
}

void server_check_drain(server *srv)
{
    if (srv->accept_stopped && !srv->draining && srv->nsessions == 0) {
        log_info("drain: no session left");
        server_shutdown(srv, 0);
        return;
    }
    if (srv->draining && !srv->finishing && srv->live == 0)
        server_finish(srv);
}

static void server_close_listener(server *srv)
{
    if (!srv->listener_open)
        return;
    srv->listener_open = false;
    uvx_close((uv_handle_t *)&srv->listener, NULL);
    if (srv->socket_owned && unlink(srv->socket_path) < 0 && errno != ENOENT)
        log_warn("unlink %s: %m", srv->socket_path);
    srv->socket_owned = false;
}

void server_stop_accepting(server *srv)
{
    if (srv->accept_stopped || srv->draining)
        return;
    srv->accept_stopped = true;
    server_close_listener(srv);
    sdnotify_status(&srv->sd);
    server_check_drain(srv);
}

/* The batching settings into the backend (it reads them at each submit). */
static void server_apply_batching(server *srv)
{
    if (srv->b) {
        srv->b->batch_max = (uint32_t)srv->cfg.batch_max;
        srv->b->batch_bytes = srv->cfg.batch_bytes;
    }
}

void server_limits_changed(server *srv)
{
    server_apply_batching(srv);
    if (srv->cfg.lim.session_staging > srv->cfg.lim.total_staging)
        srv->cfg.lim.session_staging = srv->cfg.lim.total_staging;
    staging_set_capacity(&srv->st, srv->cfg.lim.total_staging);
    server_sweep_config(srv);
    for (session *s = srv->sessions; s; s = s->next)
        if (!s->closing)
            session_apply_policy(s);
    /* Raised limits may let waiting sessions go on (on the next loop turn);
     * lowered ones apply to requests not yet accepted. */
    request_schedule_retry(srv);
    sched_kick(srv); /* device_window, bulk_window or priority_hold may have grown */
    for (session *s = srv->sessions; s; s = s->next)
        if (!s->closing)
            session_update_reading(s);
}

void server_shutdown(server *srv, int code)
{
    if (code > srv->exit_code)
        srv->exit_code = code;
    if (srv->draining) {
        sdnotify_status(&srv->sd); /* e.g. the device was lost while draining */
        return;
    }
    srv->draining = true;
    log_info("draining: %llu requests in flight", (unsigned long long)srv->inflight);
    sdnotify_stopping(&srv->sd);
    server_close_listener(srv);
    if (srv->cfg.drain_timeout_s > 0) {
        (void)uvx_timer_start(&srv->drain_timer, server_on_drain_timeout,
                              (uint64_t)(srv->cfg.drain_timeout_s * 1000.0), 0, "drain");
    }
    server_check_drain(srv);
}

void server_session_freed(server *srv)
{
    server_maybe_destroy_backend(srv);
}

static const server_hooks server_hooks_table = {
    .shutdown = server_shutdown,
    .stop_accepting = server_stop_accepting,
    .limits_changed = server_limits_changed,
    .check_drain = server_check_drain,
    .session_freed = server_session_freed,
};

static void server_on_signal(uv_signal_t *h, int signum)
{
    server *srv = h->data;
    log_info("signal %d (%s): shutting down", signum, strsignal(signum));
    server_shutdown(srv, 0);
}

void server_set_args(server *srv, int argc, char **argv)
{
    srv->argc = argc;
    srv->argv = argv;
}

/* Take the run-time settings of a reloaded config; socket, socket_mode,
 * socket_group, device, device_memory_limit and listen_backlog stay as
 * they were (they need a restart). */
static void server_apply_config(server *srv, const config *nc)
{
    /* everything but what needs a restart (config_key_needs_restart) */
    char socket[sizeof srv->cfg.socket], device[sizeof srv->cfg.device];
    memcpy(socket, srv->cfg.socket, sizeof socket);
    memcpy(device, srv->cfg.device, sizeof device);
    char socket_group[sizeof srv->cfg.socket_group];
    memcpy(socket_group, srv->cfg.socket_group, sizeof socket_group);
    unsigned socket_mode = srv->cfg.socket_mode;
    gid_t socket_gid = srv->cfg.socket_gid;
    uint64_t device_memory_limit = srv->cfg.device_memory_limit;
    uint64_t listen_backlog = srv->cfg.listen_backlog;
    char state_dir[sizeof srv->cfg.state_dir]; /* the store keeps its own; a restart moves it */
    memcpy(state_dir, srv->cfg.state_dir, sizeof state_dir);
    srv->cfg = *nc;
    memcpy(srv->cfg.state_dir, state_dir, sizeof state_dir);
    memcpy(srv->cfg.socket, socket, sizeof socket);
    memcpy(srv->cfg.device, device, sizeof device);
    memcpy(srv->cfg.socket_group, socket_group, sizeof socket_group);
    srv->cfg.socket_gid = socket_gid;
    srv->cfg.socket_mode = socket_mode;
    srv->cfg.device_memory_limit = device_memory_limit;
    srv->cfg.listen_backlog = listen_backlog;
    log_set_level(nc->log_level);
    server_limits_changed(srv);
}

static void server_on_sighup(uv_signal_t *h, int signum)
{
    server *srv = h->data;
    static config nc; /* ~11 KB: off the stack; loop thread only */
    if (!srv->argv) {
        log_warn("signal %d (%s): no arguments to reload from; ignored", signum, strsignal(signum));
        return;
    }
    log_info("signal %d (%s): reloading %s", signum, strsignal(signum),
             srv->cfg.config_path[0] ? srv->cfg.config_path : "the flags (no config file)");
    if (config_reload(&nc, srv->argc, srv->argv) < 0) {
        log_error("reload failed: %s; keeping the old settings", nc.error);
        return;
    }
    /* The reload lines show at the more verbose of the old and new level. */
    log_set_level(nc.log_level > srv->cfg.log_level ? nc.log_level : srv->cfg.log_level);
    int n = config_log_changes(&srv->cfg, &nc);
    log_info("reload: %d settings changed", n);
    server_apply_config(srv, &nc);
}

/* STATUS= for systemd: one line, what systemctl status shows. */
static void server_status_line(void *arg, char *buf, size_t cap)
{
    const server *srv = arg;
    unsigned long long inflight = (unsigned long long)srv->inflight;
    if (srv->lost)
        snprintf(buf, cap, "device lost: %.120s; draining: %llu in flight",
                 srv->b ? srv->b->lost_reason : "", inflight);
    else if (srv->draining)
        snprintf(buf, cap, "draining: %llu in flight", inflight);
    else if (srv->accept_stopped)
        snprintf(buf, cap, "draining (no new sessions): %u sessions, %llu in flight",
                 srv->nsessions, inflight);
    else
        snprintf(buf, cap, "serving: backend %s, %u sessions, %llu in flight",
                 srv->b ? srv->b->ops->name : "none", srv->nsessions, inflight);
}

/* --device auto tries CUDA and falls back to the CPU; cuda without a usable
 * device is an error (exit 2). This is gpuqd's first log line, so it says
 * in plain words why the CPU backend runs ("no NVIDIA driver: using the CPU
 * backend"), not the CUDA runtime's wording. */
static int server_pick_backend(server *srv)
{
    const char *dev = srv->cfg.device;
    bool want_cuda = !strcmp(dev, "cuda"), try_cuda = want_cuda || !strcmp(dev, "auto");
    char fallback[256] = ""; /* auto without CUDA: why */
    if (try_cuda) {
#ifdef GPUQ_HAVE_CUDA
        char why[200] = "";
        int probe = backend_cuda_probe(why, sizeof why);
        if (probe == BACKEND_CUDA_OK)
            srv->b = backend_cuda_create(srv->loop, request_complete, srv->cfg.device_memory_limit,
                                         why, sizeof why);
        if (!srv->b && want_cuda) {
            log_error("--device cuda: %s; --device auto would use the CPU backend", why);
            return 2;
        }
        if (!srv->b)
            snprintf(fallback, sizeof fallback, "%s",
                     probe == BACKEND_CUDA_NO_DRIVER ? "no NVIDIA driver" : why);
#else
        if (want_cuda) {
            log_error("--device cuda: gpuqd was built without CUDA");
            return 2;
        }
        snprintf(fallback, sizeof fallback, "built without CUDA");
#endif
    }
    if (!srv->b) {
        char cwhy[200] = "";
        srv->b = backend_cpu_create(srv->loop, request_complete, cwhy, sizeof cwhy);
        if (!srv->b) {
            log_error("cannot create the CPU backend: %s", cwhy);
            return 1;
        }
    }
    if (fallback[0])
        log_tagged(LOG_LVL_INFO, "gpuqd " GPUQD_VERSION, "%s: using the CPU backend", fallback);
    else
        log_tagged(LOG_LVL_INFO, "gpuqd " GPUQD_VERSION, "backend %s (%s)", srv->b->ops->name,
                   try_cuda && !want_cuda ? "auto: CUDA device found" : "requested");
#ifdef GPUQ_HAVE_CUDA
    if (!fallback[0] && strcmp(srv->b->ops->name, "cuda") == 0)
        backend_cuda_load_blas();
#endif
    return 0;
}

int server_init(server *srv, uv_loop_t *loop, const config *cfg)
{
    memset(srv, 0, sizeof *srv);
    srv->loop = loop;
    srv->cfg = *cfg;
    int code = server_pick_backend(srv);
    if (code) { /* no backend: nothing of gpuqd's is on the loop */
        int rc = uv_loop_close(loop);
        if (rc < 0)
            log_warn("uv_loop_close: %s", uv_strerror(rc));
        return code;
    }
    return server_init_with_backend(srv, loop, cfg, srv->b);
}

/* A staging grow finished (staging.h): waiters reserve again, as after a
 * release. */
static void server_staging_grown(void *arg)
{
    request_schedule_retry(arg);
}

int server_init_with_backend(server *srv, uv_loop_t *loop, const config *cfg, backend *b)
{
    memset(srv, 0, sizeof *srv);
    srv->loop = loop;
    srv->cfg = *cfg;
    srv->b = b;
    server_apply_batching(srv);
    srv->next_session_id = 1;
    srv->start_ns = uv_hrtime();
    srv->hooks = server_hooks_table;
    srv->sev = &request_session_events;
    staging_init(&srv->st, srv->b, cfg->lim.total_staging);
    resident_init(&srv->resident, srv->b);
    int rc, code;
    if (resident_store_open(&srv->store, loop, srv->b, cfg->state_dir) < 0) {
        code = 1;
        goto err_after_backend;
    }
    resident_store_load(&srv->store, &srv->resident);
    char why[200] = "";
    if (pinner_init(&srv->pin, loop, srv->b, why, sizeof why) < 0) {
        log_error("cannot start the pinning thread: %s", why);
        code = 1;
        goto err_after_backend;
    }
    staging_set_pinner(&srv->st, &srv->pin, server_staging_grown, srv);
    if ((rc = request_layer_init(srv)) < 0 || (rc = session_layer_init(srv)) < 0 ||
        (rc = uvx_timer_init(loop, &srv->drain_timer, srv)) < 0 ||
        (rc = uvx_timer_init(loop, &srv->sweep_timer, srv)) < 0 ||
        (rc = uv_signal_init(loop, &srv->sigint)) < 0 ||
        (rc = uv_signal_init(loop, &srv->sigterm)) < 0 ||
        (rc = uv_signal_init(loop, &srv->sighup)) < 0) {
        log_error("uv init: %s", uv_strerror(rc));
        code = 1;
        goto err_after_backend;
    }
    srv->sigint.data = srv->sigterm.data = srv->sighup.data = srv;
    if ((rc = uv_signal_start(&srv->sigint, server_on_signal, SIGINT)) < 0 ||
        (rc = uv_signal_start(&srv->sigterm, server_on_signal, SIGTERM)) < 0 ||
        (rc = uv_signal_start(&srv->sighup, server_on_sighup, SIGHUP)) < 0) {
        log_error("uv_signal_start: %s", uv_strerror(rc));
        code = 1;
        goto err_after_backend;
    }
    server_sweep_config(srv);
    if (sdnotify_init(&srv->sd, loop, server_status_line, srv) < 0) {
        code = 1;
        goto err_after_backend;
    }
    listener_perm perm = {
        .mode = cfg->socket_mode, .gid = cfg->socket_gid, .group = cfg->socket_group};
    if (listener_resolve_path(cfg->socket[0] ? cfg->socket : NULL, &perm, srv->socket_path,
                              sizeof srv->socket_path) < 0) {
        code = 1;
        goto err_after_backend;
    }
    srv->listener.data = srv;
    if (listener_open(loop, &srv->listener, srv->socket_path, &perm, (int)cfg->listen_backlog,
                      server_on_connection, &srv->socket_owned) < 0) {
        code = 1;
        goto err_after_backend;
    }
    srv->listener.data = srv;
    srv->listener_open = true;
    if (srv->socket_owned && cfg->socket_group[0])
        log_info("listening on %s (mode %04o, group %s)", srv->socket_path, cfg->socket_mode,
                 cfg->socket_group);
    else if (srv->socket_owned)
        log_info("listening on %s", srv->socket_path);
    sdnotify_ready(&srv->sd);
    return 0;
err_after_backend:
    srv->exit_code = code;
    srv->draining = true;
    server_finish(srv);
    (void)server_run(srv);
    return code;
}

static void server_close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h)) {
        log_warn("closing a leftover handle of type %s",
                 uv_handle_type_name(uv_handle_get_type(h)));
        uv_close(h, NULL);
    }
}

int server_run(server *srv)
{
    int rc = uv_run(srv->loop, UV_RUN_DEFAULT);
    if (rc < 0)
        log_error("uv_run: %s", uv_strerror(rc));
    if (srv->b) {
        log_warn("backend still open after the loop ended");
        srv->finishing = true;
        if (!srv->sessions && srv->b->ops->inflight(srv->b) == 0)
            server_maybe_destroy_backend(srv);
    }
    uv_walk(srv->loop, server_close_walk, NULL);
    uv_run(srv->loop, UV_RUN_DEFAULT);
    if (srv->socket_owned) {
        unlink(srv->socket_path);
        srv->socket_owned = false;
    }
    policy_users_free(&srv->users); /* empty: every session was closed */
    rc = uv_loop_close(srv->loop);
    if (rc != 0) {
        log_error("uv_loop_close: %s", uv_strerror(rc));
        if (srv->exit_code == 0)
            srv->exit_code = 1;
    }
    log_info("exit %d", srv->exit_code);
    return srv->exit_code;
}
