/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_session.c - libFuzzer target for gpuqd's session and request state
 * machine: read states (prefix, header, payload, skip, staging wait),
 * pipelining, reply order, backpressure, disconnects, drain.
 *
 * Each input is a script (fuzz_session.h) run against a whole server of its
 * own: a real listener on a socket in a temp directory, the real session,
 * request, control and staging code, and the fake backend (fake_backend.h)
 * in place of CPU or CUDA, so every completion happens on the loop thread when the
 * script says. Up to four clients (fuzz_client.h) connect and send frames
 * built from a compact encoding (every op, valid or subtly not) or raw
 * bytes, split at any point, interleaved; the script also runs the loop,
 * finishes or fails backend jobs, stops and resumes reading, half-closes
 * and closes clients, changes limits, signals shutdown and loses the device.
 *
 * Beside "no crash, no ASan/UBSan report, no leak", the clients check every
 * reply against their model of the server's framing (fuzz_client.h), and:
 * - SYNC runs the loop until nothing moves (finishing every job); then, if
 *   every client reads, each frame sent whole must have been answered, and
 *   the server's books must balance: at most one live request per session
 *   (the one waiting for its payload or for staging it cannot have now),
 *   holding exactly its slot; no closed session left; no job left.
 * - At the end (clients closed, jobs finished, the SIGTERM path, quiet): no
 *   session, no live request, staging in_use 0, the backend destroyed with
 *   all its host memory and sessions released, no handle on the loop,
 *   server_run's uv_loop_close() == 0 and exit code 0 (3 after device lost).
 * A breach aborts with a message (fuzz_violation).
 *
 * The server is driven only through server.h, the backend interface and
 * its socket, plus what a harness needs: new sessions get a small SO_SNDBUF
 * (replies back up within a few KB), and SYNC reads the server's books and
 * retries a staging wait (request_retry_staging) to tell a lost wakeup from a wait.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "request.h"
#include "errors.h"
#include "fake_backend.h"
#include "frame.h"
#include "fuzz_session.h"
#include "header.h"
#include "../req_args.h"
#include "log.h"
#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PUMPS 20000 /* loop turns one quiescence may take */
#define IDLE_PUMPS 4    /* turns without progress that mean quiet */
#define SERVER_SNDBUF 4096

typedef struct world {
    uv_loop_t loop;
    server srv;
    config cfg;
    fake_stats fst;
    backend *b; /* valid while srv.b (the server destroys it) */
    fuzz_env env;
    fuzz_client cl[FZ_CLIENTS];
    uint64_t last_session; /* highest session id given a small SO_SNDBUF */
    uint64_t pat;          /* payload byte generator */
} world;

static world W;
static config g_base_cfg;
static char g_dir[64], g_sock[108];

const fuzz_counts *fuzz_session_counts(void)
{
    return &W.env.count;
}

static const gpuq_limits *permissive(void)
{
    static gpuq_limits lim = {UINT32_MAX, UINT64_MAX, UINT32_MAX, UINT64_MAX,
                              UINT64_MAX, UINT32_MAX, UINT64_MAX, UINT64_MAX,
                              UINT64_MAX, UINT64_MAX, UINT64_MAX};
    return &lim;
}

/* What the clients must know of the server, after each change of it. */
static void env_update(void)
{
    if (W.srv.cfg.lim.max_header != W.env.max_header ||
        W.srv.cfg.lim.max_payload != W.env.max_payload)
        W.env.model_valid = false; /* a set_limit of either: the model cuts frames wrong */
    W.env.server_closing = W.srv.draining || W.srv.accept_stopped;
    W.env.drain_timed_out = W.cfg.drain_timeout_s > 0 && W.srv.finishing;
}

/* ---- the loop ---- */

/* New sessions get a small send buffer, so replies back up within a few KB
 * (as to a slow reader). */
static void small_sndbuf(void)
{
    for (session *s = W.srv.sessions; s; s = s->next) {
        if (s->id <= W.last_session || s->closing)
            continue;
        uv_os_fd_t fd;
        if (uv_fileno((uv_handle_t *)&s->pipe, &fd) == 0) {
            int sz = SERVER_SNDBUF;
            (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        }
    }
    for (session *s = W.srv.sessions; s; s = s->next)
        if (s->id > W.last_session)
            W.last_session = s->id;
}

/* One loop turn: what the script queued goes out, the server runs once,
 * replies are read and checked. */
static void pump(void)
{
    fuzz_clients_io(&W.env, W.cl, FZ_CLIENTS, false);
    (void)uv_run(&W.loop, UV_RUN_NOWAIT);
    env_update();
    small_sndbuf();
    fuzz_clients_io(&W.env, W.cl, FZ_CLIENTS, true);
}

/* What moves when anything happens (no padding: compared with memcmp). */
typedef struct sig {
    uint64_t progress, completed, submitted, live, in_use, bytes_in, bytes_out, nsess, flags;
} sig;

static sig signature(void)
{
    sig g = {W.env.progress,
             W.fst.completed,
             W.fst.submitted,
             W.srv.live,
             W.srv.st.in_use,
             W.srv.stats.bytes_in,
             W.srv.stats.bytes_out,
             0,
             (uint64_t)W.fst.closed | (uint64_t)W.srv.finishing << 1};
    for (session *s = W.srv.sessions; s; s = s->next)
        g.nsess++;
    return g;
}

/* Run until nothing moves, finishing every backend job (with status 0). */
static void quiesce(void)
{
    int idle = 0;
    for (int i = 0; i < MAX_PUMPS; i++) {
        sig before = signature();
        if (W.srv.b)
            fake_backend_finish_all(W.b, 0);
        pump();
        sig after = signature();
        if (!memcmp(&before, &after, sizeof before)) {
            if (++idle >= IDLE_PUMPS)
                return;
        } else {
            idle = 0;
        }
    }
    fuzz_violation("no quiescence after %d loop iterations (%llu live requests)", MAX_PUMPS,
                   (unsigned long long)W.srv.live);
}

/* The server's own books at quiescence with every client reading: what is
 * still alive is at most one request per session, the one whose payload (or
 * staging) it waits for, holding exactly its slot; nothing closed lingers. */
static void server_quiet_check(void)
{
    uint64_t live = 0, used = 0;
    for (session *s = W.srv.sessions; s; s = s->next) {
        if (s->closing)
            fuzz_violation("session %llu closed but never freed (refs %d)",
                           (unsigned long long)s->id, s->refs);
        if (s->rstate == RS_WAIT_STAGING) {
            /* It may wait for staging that another session's half-sent
             * payload holds; if a retry gets it now, a wakeup was lost. */
            request_retry_staging(s);
            if (s->rstate != RS_WAIT_STAGING)
                fuzz_violation("session %llu waited for staging that was free (a lost wakeup)",
                               (unsigned long long)s->id);
        }
        uint64_t slot = s->cur && s->cur->slot ? s->cur->slot->size : 0;
        if (s->live != (s->cur ? 1u : 0u) || s->staging_used != slot)
            fuzz_violation("session %llu quiet with %u live requests and %llu staging bytes "
                           "(%s request in progress, its slot %llu)",
                           (unsigned long long)s->id, s->live, (unsigned long long)s->staging_used,
                           s->cur ? "a" : "no", (unsigned long long)slot);
        live += s->live;
        used += s->staging_used;
    }
    if (W.srv.live != live || W.srv.inflight != live || W.srv.st.in_use != used)
        fuzz_violation("server quiet with live %llu, in flight %llu, staging %llu; its sessions "
                       "hold %llu requests and %llu bytes",
                       (unsigned long long)W.srv.live, (unsigned long long)W.srv.inflight,
                       (unsigned long long)W.srv.st.in_use, (unsigned long long)live,
                       (unsigned long long)used);
    if (W.srv.b && fake_backend_queued(W.b))
        fuzz_violation("backend jobs left after quiescence");
}

/* After quiescence with every client reading: each frame fully sent has its
 * reply (a lost wakeup, a stuck staging wait or a dropped reply shows here). */
static void sync_check(void)
{
    quiesce();
    W.env.count.syncs++;
    if (W.srv.draining || W.srv.accept_stopped)
        return;
    for (int i = 0; i < FZ_CLIENTS; i++)
        if (W.cl[i].fd >= 0 && !W.cl[i].eof && !W.cl[i].reading)
            return; /* a client that does not read may hold the staging others wait for */
    server_quiet_check();
    if (!W.env.model_valid)
        return;
    for (int i = 0; i < FZ_CLIENTS; i++) {
        if (W.cl[i].fd >= 0)
            W.env.count.sync_checked++;
        fuzz_client_check_answered(&W.cl[i], i);
    }
}

/* ---- frames from the compact encoding ---- */

static const gpuq_op frame_ops[] = {
    GPUQ_OP_HELLO,    GPUQ_OP_PING,         GPUQ_OP_STATUS,    GPUQ_OP_NORMALIZE, GPUQ_OP_HAVERSINE,
    GPUQ_OP_GRID,     GPUQ_OP_PAIRWISE,     GPUQ_OP_SESSIONS,  GPUQ_OP_METRICS,   GPUQ_OP_DRAIN,
    GPUQ_OP_SHUTDOWN, GPUQ_OP_KILL_SESSION, GPUQ_OP_SET_LIMIT,
};
#define NFRAME_OPS (sizeof frame_ops / sizeof frame_ops[0])
_Static_assert(NFRAME_OPS == FZ_F_COUNT, "frame_ops and FZ_F_* (fuzz_session.h) differ");

/* max_header is left out: a change of it would change how later frames are
 * cut, which the model follows only for the limits it knows. */
static const char *const limit_names[] = {"max_payload",   "max_inflight", "session_staging",
                                          "total_staging", "max_sessions", "max_output"};
static const uint64_t limit_values[] = {0, 1, 2, 4096, 8192, 65536, 1u << 20, UINT64_MAX};

typedef struct script {
    const uint8_t *p;
    size_t n, off;
} script;

static uint8_t next_byte(script *s)
{
    return s->off < s->n ? s->p[s->off++] : 0;
}

/* A FRAME command's operands (fuzz_session.h) into a frame on c's stream. */
static void frame_build(fuzz_client *c, script *s)
{
    uint8_t sel = next_byte(s), fl = next_byte(s), a = next_byte(s), b = next_byte(s);
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = frame_ops[sel % NFRAME_OPS];
    r.id = (fl & 4) ? (uint64_t)(sel >> 4) : ++c->next_id;
    r.timing = fl & 1;
    r.dtype = (fl & 2) ? GPUQ_DT_F32 : GPUQ_DT_F64;
    switch (r.op) {
    case GPUQ_OP_HELLO:
        r.version = (fl & 8) ? 2 : GPUQ_PROTO_VERSION;
        r.priority = (int32_t)(a % 11) - 5;
        r.device = b % 8 == 7 ? 3 : b % 8 == 6 ? 0 : -1;
        snprintf(r.client, sizeof r.client, "fuzz%u", (unsigned)(b >> 4));
        break;
    case GPUQ_OP_NORMALIZE:
        if (fl & 16) {
            r.ndim_a = 1;
            r.shape_a[0] = a % 16 + 1u;
        } else {
            r.ndim_a = 2;
            r.shape_a[0] = a % 6 + 1u;
            r.shape_a[1] = b % 6 + 1u;
            rq_set_flat(&r, b & 0x80);
        }
        rq_set_method(&r, (gpuq_norm_method)((fl >> 5) % GPUQ_NORM_COUNT));
        rq_set_zero_ok(&r, a & 0x80);
        break;
    case GPUQ_OP_HAVERSINE:
        r.ndim_a = 2;
        r.shape_a[0] = a % 8 + 1u;
        r.shape_a[1] = 2;
        if (fl & 16) {
            rq_set_has_to(&r, true);
            rq_set_to_lat(&r, 10.0);
            rq_set_to_lon(&r, 20.0);
        } else {
            r.ndim_b = 2;
            r.shape_b[0] = r.shape_a[0];
            r.shape_b[1] = 2;
        }
        break;
    case GPUQ_OP_GRID:
        if ((fl & 16) && (b & 1)) {
            rq_set_lat_n(&r, 512); /* 1 or 2 MiB: a stand-alone staging slot */
            rq_set_lon_n(&r, 512);
        } else {
            rq_set_lat_n(&r, a % 8 + 1u);
            rq_set_lon_n(&r, b % 8 + 1u);
        }
        if (fl & 0x80)
            r.dtype = GPUQ_DT_NONE;
        break;
    case GPUQ_OP_PAIRWISE:
        r.ndim_a = r.ndim_b = 2;
        r.shape_a[0] = a % 5 + 1u;
        r.shape_b[0] = b % 5 + 1u;
        r.shape_a[1] = r.shape_b[1] = (fl >> 5) % 4 + 1u;
        rq_set_metric(&r, (gpuq_metric)((a >> 4) % GPUQ_METRIC_COUNT));
        rq_set_zero_ok(&r, b & 0x80);
        break;
    case GPUQ_OP_KILL_SESSION:
        r.has_session = true;
        r.session = a % 8;
        break;
    case GPUQ_OP_SET_LIMIT:
        snprintf(r.limit, sizeof r.limit, "%s",
                 limit_names[a % (sizeof limit_names / sizeof limit_names[0])]);
        r.has_value = true;
        r.value = limit_values[b % (sizeof limit_values / sizeof limit_values[0])];
        break;
    default:
        break;
    }
    uint8_t *hdr;
    size_t hlen;
    if (gpuq_request_encode(&r, &hdr, &hlen) != 0)
        fuzz_violation("gpuq_request_encode failed");
    gpuq_sizes sz;
    char msg[160];
    (void)gpuq_request_check(&r, 0, permissive(), &sz, msg, sizeof msg); /* sz.payload */
    uint64_t plen = sz.payload;
    if ((fl & 8) && r.op != GPUQ_OP_HELLO)
        plen++;
    gpuq_prefix pre = {GPUQ_PROTO_VERSION, GPUQ_KIND_REQUEST, 0, (uint32_t)hlen, plen};
    uint8_t pbuf[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&pre, pbuf);
    fuzz_client_append(&W.env, c, pbuf, sizeof pbuf);
    fuzz_client_append(&W.env, c, hdr, hlen);
    free(hdr);
    uint8_t chunk[256];
    while (plen > 0) {
        size_t k = plen < sizeof chunk ? (size_t)plen : sizeof chunk;
        for (size_t i = 0; i < k; i++) {
            W.pat = W.pat * 6364136223846793005ull + 1442695040888963407ull;
            chunk[i] = (uint8_t)(W.pat >> 56);
        }
        fuzz_client_append(&W.env, c, chunk, k);
        plen -= k;
    }
}

/* ---- commands ---- */

static int finish_status(uint8_t mode)
{
    static const int st[] = {
        0, 0, 0, 0, GPUQ_E_ZERO_NORM, GPUQ_E_OUT_OF_RANGE, GPUQ_E_DEVICE, GPUQ_E_NO_MEMORY};
    return st[mode % (sizeof st / sizeof st[0])];
}

static void run_command(script *s, uint8_t op)
{
    int ci = op >> 6;
    fuzz_client *c = &W.cl[ci];
    int cmd = (op & 0x1f) % FZ_CMD_COUNT;
    if (W.env.trace)
        fprintf(stderr, "fuzz_session: @%zu client %d cmd %d\n", s->off - 1, ci, cmd);
    switch (cmd) {
    case FZ_CMD_FRAME:
    case FZ_CMD_FRAME_SEND:
        fuzz_client_connect(&W.env, c);
        frame_build(c, s);
        if (cmd == FZ_CMD_FRAME_SEND)
            c->want = c->len;
        break;
    case FZ_CMD_RAW: {
        fuzz_client_connect(&W.env, c);
        size_t n = next_byte(s);
        n = n < s->n - s->off ? n : s->n - s->off;
        fuzz_client_append(&W.env, c, s->p + s->off, n);
        s->off += n;
        break;
    }
    case FZ_CMD_SEND: {
        size_t n = next_byte(s);
        c->want = n == 0 || c->len - c->want < n ? c->len : c->want + n;
        break;
    }
    case FZ_CMD_RUN: {
        int k = next_byte(s) % 16 + 1;
        while (k-- > 0)
            pump();
        break;
    }
    case FZ_CMD_FINISH: {
        uint8_t idx = next_byte(s), mode = next_byte(s);
        if (W.srv.b)
            (void)fake_backend_finish(W.b, idx, finish_status(mode));
        break;
    }
    case FZ_CMD_FINISH_ALL: {
        uint8_t mode = next_byte(s);
        if (W.srv.b)
            fake_backend_finish_all(W.b, finish_status(mode));
        break;
    }
    case FZ_CMD_STOP_READ:
        c->reading = false;
        break;
    case FZ_CMD_START_READ:
        c->reading = true;
        break;
    case FZ_CMD_CLOSE:
        if (c->fd >= 0)
            W.env.progress++;
        fuzz_client_reset(c);
        break;
    case FZ_CMD_SHUT_WR: /* after sending what the socket takes now */
        fuzz_client_io(&W.env, c, ci);
        if (c->fd >= 0 && !c->wr_shut) {
            (void)shutdown(c->fd, SHUT_WR);
            c->wr_shut = true;
        }
        break;
    case FZ_CMD_CONNECT:
        fuzz_client_connect(&W.env, c);
        break;
    case FZ_CMD_FAIL_NEXT: {
        uint8_t what = next_byte(s);
        if (W.srv.b)
            fake_backend_fail_next(W.b, what % FAKE_FAIL_COUNT);
        break;
    }
    case FZ_CMD_SYNC:
        sync_check();
        break;
    case FZ_CMD_LIMITS: {
        uint8_t which = next_byte(s), v = next_byte(s);
        char msg[160];
        if (W.srv.finishing)
            break;
        if (gpuq_limits_set(&W.srv.cfg.lim,
                            limit_names[which % (sizeof limit_names / sizeof limit_names[0])],
                            limit_values[v % (sizeof limit_values / sizeof limit_values[0])], NULL,
                            msg, sizeof msg) == 0)
            server_limits_changed(&W.srv);
        break;
    }
    case FZ_CMD_SIGTERM:
        server_shutdown(&W.srv, 0);
        break;
    case FZ_CMD_LOSE:
        if (W.srv.b)
            fake_backend_lose(W.b, "fuzz: device lost");
        break;
    default:
        break;
    }
    env_update(); /* a command may close sessions itself (SIGTERM with nothing live) */
    if (op & FZ_AND_RUN)
        pump();
}

/* ---- one input ---- */

static void count_handle(uv_handle_t *h, void *arg)
{
    int *n = arg;
    (*n)++;
    fprintf(stderr, "fuzz_session: handle left: %s%s\n", uv_handle_type_name(uv_handle_get_type(h)),
            uv_is_closing(h) ? " (closing)" : "");
}

/* A server of its own for one input, as the profile bytes say
 * (FZ_P1_*, FZ_P2_*). */
static void world_start(uint8_t profile, uint8_t profile2)
{
    static const uint64_t total[] = {8192, 16384, 65536, 4u << 20};
    static const uint64_t per[] = {4096, 8192, 32768, UINT64_MAX};
    static const uint32_t infl[] = {1, 2, 4, 64};
    for (int i = 0; i < FZ_CLIENTS; i++) {
        W.cl[i].fd = -1;
        fuzz_client_reset(&W.cl[i]);
    }
    W.cfg = g_base_cfg;
    gpuq_limits *lim = &W.cfg.lim;
    lim->max_header = 2048;
    lim->max_payload = 65536;
    lim->max_output = 4u << 20;
    lim->total_staging = total[profile & 3];
    lim->session_staging = per[(profile >> 2) & 3];
    if (lim->session_staging > lim->total_staging)
        lim->session_staging = lim->total_staging;
    lim->max_inflight = infl[(profile >> 4) & 3];
    lim->max_sessions = (profile & FZ_P1_MAX_SESSIONS_3) ? 3 : 256;
    /* the model knows max_sessions only: every client has the fuzzer's uid,
     * so the per-user cap (a quarter by default) must not refuse first */
    W.cfg.pol.max_sessions_per_user = lim->max_sessions;
    if (profile2 & FZ_P2_DRAIN_TIMEOUT)
        W.cfg.drain_timeout_s = 1e-6; /* a 0 ms timer: fires at the next loop turn */
    if (profile2 & FZ_P2_NO_ADMIN) {
        W.cfg.pol.admin_group[0] = '\0';
        W.cfg.pol.admin_gid = (gid_t)-1;
    }
    W.env.sock_path = g_sock;
    W.env.max_header = lim->max_header;
    W.env.max_payload = lim->max_payload;
    W.env.model_valid = true;
    W.env.allow_eof = W.env.server_closing = W.env.drain_timed_out = false;
    W.env.progress = 0;
    W.last_session = 0;
    W.pat = 1;
    memset(&W.fst, 0, sizeof W.fst);
    if (uv_loop_init(&W.loop) < 0)
        fuzz_violation("uv_loop_init failed");
    W.b = fake_backend_create(&W.loop, request_complete, &W.fst);
    if (!W.b)
        fuzz_violation("fake_backend_create failed");
    fake_backend_set_auto(W.b, profile & FZ_P1_AUTO);
    if (server_init_with_backend(&W.srv, &W.loop, &W.cfg, W.b) != 0)
        fuzz_violation("server_init_with_backend failed (socket %s)", g_sock);
    /* A signal sent to the fuzzer must stop it, not drain the server under
     * test: FZ_CMD_SIGTERM calls server_shutdown as the handler would.
     * (libuv then leaves SIGINT/SIGTERM at their default action.) */
    if (uv_signal_stop(&W.srv.sigint) < 0 || uv_signal_stop(&W.srv.sigterm) < 0 ||
        uv_signal_stop(&W.srv.sighup) < 0)
        fuzz_violation("uv_signal_stop failed");
}

static void world_end(void)
{
    for (int i = 0; i < FZ_CLIENTS; i++)
        fuzz_client_reset(&W.cl[i]);
    quiesce();
    server_shutdown(&W.srv, 0);
    quiesce();
    if (!W.srv.finishing)
        fuzz_violation("end: the server did not finish draining (%llu requests live, %u sessions)",
                       (unsigned long long)W.srv.live, W.srv.nsessions);
    if (W.srv.sessions || W.srv.nsessions)
        fuzz_violation("end: sessions left (%u counted)", W.srv.nsessions);
    if (W.srv.live || W.srv.inflight)
        fuzz_violation("end: %llu requests live, %llu in flight", (unsigned long long)W.srv.live,
                       (unsigned long long)W.srv.inflight);
    if (W.srv.st.in_use)
        fuzz_violation("end: staging in_use %llu", (unsigned long long)W.srv.st.in_use);
    if (W.srv.b || !W.fst.destroyed || !W.fst.closed)
        fuzz_violation("end: backend not destroyed");
    if (W.fst.host_bytes || W.fst.host_allocs != W.fst.host_frees)
        fuzz_violation("end: %llu host bytes of %llu allocations not freed",
                       (unsigned long long)W.fst.host_bytes,
                       (unsigned long long)(W.fst.host_allocs - W.fst.host_frees));
    if (W.fst.sessions)
        fuzz_violation("end: %lld backend sessions open", (long long)W.fst.sessions);
    if (W.fst.submitted != W.fst.completed)
        fuzz_violation("end: %llu jobs submitted, %llu completed",
                       (unsigned long long)W.fst.submitted, (unsigned long long)W.fst.completed);
    int handles = 0;
    uv_walk(&W.loop, count_handle, &handles);
    if (handles)
        fuzz_violation("end: %d handles left on the loop", handles);
    int code = server_run(&W.srv); /* closes the loop */
    int want = W.srv.lost ? 3 : 0;
    if (code != want)
        fuzz_violation("end: server_run returned %d, want %d", code, want);
}

static void cleanup_dir(void)
{
    unlink(g_sock);
    rmdir(g_dir);
}

static void init_once(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    signal(SIGPIPE, SIG_IGN);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    unsetenv("WATCHDOG_USEC");
    const char *tr = getenv("GPUQ_FUZZ_TRACE");
    W.env.trace = tr && *tr && *tr != '0';
    log_set_level(W.env.trace ? LOG_LVL_DEBUG : 0); /* quiet: the checks say what broke */
    char *argv[] = {"fuzz_session", NULL};
    if (config_load(&g_base_cfg, 1, argv) != 0)
        fuzz_violation("config_load: %s", g_base_cfg.error);
    snprintf(g_base_cfg.device, sizeof g_base_cfg.device, "cpu");
    g_base_cfg.drain_timeout_s = 0; /* no timer: the drain ends when all is answered */
    /* No I/O threads (io_threads needs a restart, so no script turns them
     * on): a script's turns stay deterministic, as libFuzzer and the replay
     * need, and quiet means quiet; test_io_pool and test_e2e_iothreads
     * cover them. */
    g_base_cfg.io_threads = 0;
    /* nothing that depends on the clock: no timeouts, staging never given back */
    g_base_cfg.hello_timeout_s = g_base_cfg.frame_timeout_s = g_base_cfg.idle_timeout_s = 0;
    g_base_cfg.staging_release_s = 86400;
    g_base_cfg.socket_mode = 0600;
    /* Our own group is the admin group, so admin ops run when not root too. */
    snprintf(g_base_cfg.pol.admin_group, sizeof g_base_cfg.pol.admin_group, "fuzz");
    g_base_cfg.pol.admin_gid = getgid();
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/gpuq-fuzz-XXXXXX",
             tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
    if (!mkdtemp(g_dir))
        fuzz_violation("mkdtemp %s: %s", g_dir, strerror(errno));
    snprintf(g_sock, sizeof g_sock, "%s/s", g_dir);
    snprintf(g_base_cfg.socket, sizeof g_base_cfg.socket, "%s", g_sock);
    atexit(cleanup_dir);
    fuzz_violation_cleanup = cleanup_dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    W.env.count.inputs++;
    script s = {data, size, 0};
    uint8_t p1 = next_byte(&s);
    world_start(p1, next_byte(&s));
    while (s.off < s.n)
        run_command(&s, next_byte(&s));
    world_end();
    return 0;
}
