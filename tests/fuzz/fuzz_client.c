/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_client.c - see fuzz_client.h. */
#include "fuzz_client.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "errors.h"
#include "fake_backend.h"

#define FUZZ_MAX_CLIENTS 16
#define FUZZ_CLIENT_SNDBUF 4096 /* small: the client's sends back up within a few KB */

enum { M_PREFIX, M_HEADER, M_PAYLOAD, M_SKIP, M_DEAD };

void (*fuzz_violation_cleanup)(void);

void fuzz_violation(const char *fmt, ...)
{
    if (fuzz_violation_cleanup)
        fuzz_violation_cleanup();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_session: invariant broken: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

void *fuzz_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        fuzz_violation("out of memory in the harness (%zu bytes)", n);
    return q;
}

/* ---- the model: frames as dispatch cuts them ---- */

/* Limits only add refusals: a request the server accepts passes these. */
static const gpuq_limits *permissive(void)
{
    static gpuq_limits lim = {UINT32_MAX, UINT64_MAX, UINT32_MAX, UINT64_MAX,
                              UINT64_MAX, UINT32_MAX, UINT64_MAX, UINT64_MAX,
                              UINT64_MAX, UINT64_MAX, UINT64_MAX};
    return &lim;
}

static fuzz_expect *expect_push(fuzz_client *c)
{
    if (c->nexp == c->expcap) {
        c->expcap = c->expcap ? 2 * c->expcap : 16;
        c->exp = fuzz_xrealloc(c->exp, c->expcap * sizeof *c->exp);
    }
    fuzz_expect *e = &c->exp[c->nexp++];
    memset(e, 0, sizeof *e);
    e->answer_off = e->end_off = c->m.off;
    return e;
}

/* A complete prefix, as request_on_prefix (server/request/request.c) judges it (with
 * env->max_header). */
static void model_prefix(fuzz_env *env, fuzz_client *c)
{
    fuzz_model *m = &c->m;
    m->have = 0;
    int rc = gpuq_prefix_decode(m->prefix, GPUQ_PREFIX_SIZE, &m->pre);
    if (rc < 0) {
        fuzz_expect *e = expect_push(c);
        e->must_status = rc == GPUQ_E_VERSION ? GPUQ_E_VERSION : GPUQ_E_PROTOCOL;
        e->closes = true;
        m->st = M_DEAD;
        return;
    }
    uint64_t hl = m->pre.header_len, pl = m->pre.payload_len;
    if (m->pre.kind != GPUQ_KIND_REQUEST || hl > env->max_header || pl > UINT64_MAX - hl) {
        /* answered, then closed: a reply frame from a client, or lengths
         * the server would have to discard */
        fuzz_expect *e = expect_push(c);
        e->must_status = m->pre.kind != GPUQ_KIND_REQUEST ? GPUQ_E_PROTOCOL : GPUQ_E_TOO_LARGE;
        e->closes = true;
        m->st = M_DEAD;
        return;
    }
    if (hl == 0) {
        fuzz_expect *e = expect_push(c);
        e->must_status = GPUQ_E_BAD_HEADER;
        m->left = pl;
        m->st = m->left ? M_SKIP : M_PREFIX;
        return;
    }
    if (m->hcap < hl) {
        m->hdr = fuzz_xrealloc(m->hdr, hl);
        m->hcap = hl;
    }
    m->left = hl;
    m->st = M_HEADER;
}

/* A complete header, as request_on_header (server/request/request.c) decodes it. */
static void model_header(fuzz_env *env, fuzz_client *c)
{
    fuzz_model *m = &c->m;
    gpuq_request req;
    char msg[160];
    uint64_t pl = m->pre.payload_len;
    int rc = gpuq_request_decode(m->hdr, m->pre.header_len, &req, msg, sizeof msg);
    fuzz_expect *e = expect_push(c);
    e->id = req.id;
    e->end_off = m->off + pl;
    if (pl > env->max_payload) { /* answered under its id, then closed */
        e->must_status = GPUQ_E_TOO_LARGE;
        e->closes = true;
        m->st = M_DEAD;
        return;
    }
    if (rc < 0) {
        e->must_status = rc;
    } else {
        e->op = req.op;
        e->timing = req.timing;
        e->dtype = req.dtype ? req.dtype : GPUQ_DT_F64;
        /* Limits only add refusals: what the server accepts passes here. */
        e->can_succeed = gpuq_request_check(&req, pl, permissive(), &e->sz, msg, sizeof msg) == 0;
        if (req.op == GPUQ_OP_KILL_SESSION)
            env->allow_eof = true;
    }
    e->in_hash = FAKE_HASH_INIT;
    e->payload_done = pl == 0;
    m->cur = c->nexp - 1;
    m->left = pl;
    m->st = pl ? M_PAYLOAD : M_PREFIX;
}

/* The server reads the client's bytes in this order; run the same parse. */
static void model_feed(fuzz_env *env, fuzz_client *c, const uint8_t *p, size_t n)
{
    fuzz_model *m = &c->m;
    while (n > 0) {
        size_t take = n;
        switch (m->st) {
        case M_PREFIX:
            take = GPUQ_PREFIX_SIZE - m->have < n ? GPUQ_PREFIX_SIZE - m->have : n;
            memcpy(m->prefix + m->have, p, take);
            m->have += (uint32_t)take;
            m->off += take;
            if (m->have == GPUQ_PREFIX_SIZE)
                model_prefix(env, c);
            break;
        case M_HEADER:
            take = m->left < n ? (size_t)m->left : n;
            memcpy(m->hdr + (m->pre.header_len - m->left), p, take);
            m->left -= take;
            m->off += take;
            if (m->left == 0)
                model_header(env, c);
            break;
        case M_PAYLOAD: {
            take = m->left < n ? (size_t)m->left : n;
            fuzz_expect *e = &c->exp[m->cur];
            e->in_hash = fake_hash(e->in_hash, p, take);
            m->left -= take;
            m->off += take;
            if (m->left == 0) {
                e->payload_done = true;
                m->st = M_PREFIX;
            }
            break;
        }
        case M_SKIP:
            take = m->left < n ? (size_t)m->left : n;
            m->left -= take;
            m->off += take;
            if (m->left == 0)
                m->st = M_PREFIX;
            break;
        default:
            m->off += n;
            break;
        }
        p += take;
        n -= take;
    }
}

/* ---- replies ---- */

static bool op_has_info(gpuq_op op)
{
    return op == GPUQ_OP_HELLO || op == GPUQ_OP_STATUS || op == GPUQ_OP_SESSIONS ||
           op == GPUQ_OP_METRICS || gpuq_op_is_admin(op);
}

static void check_reply(fuzz_env *env, fuzz_client *c, int ci, const gpuq_reply *rep,
                        const uint8_t *pay, uint64_t pl)
{
    if (rep->status > 0 || rep->status < GPUQ_E_LAST)
        fuzz_violation("client %d: reply status %d is no GPUQ_E_* code", ci, rep->status);
    if (rep->status < 0 && pl)
        fuzz_violation("client %d: error reply (%s) with %llu payload bytes", ci,
                       gpuq_errname(rep->status), (unsigned long long)pl);
    if (c->ended)
        fuzz_violation("client %d: a reply (id %llu, %s) after the session's last reply", ci,
                       (unsigned long long)rep->id, gpuq_errname(rep->status));
    env->count.replies++;
    if (env->trace)
        fprintf(stderr, "fuzz_session: client %d reply id %llu %s (%s) %llu bytes\n", ci,
                (unsigned long long)rep->id, gpuq_errname(rep->status), rep->message,
                (unsigned long long)pl);
    if (c->nreplies == 0 && rep->status == GPUQ_E_BUSY && rep->id == 0 &&
        strstr(rep->message, "sessions open (the limit)")) {
        c->refused = c->ended = true; /* server_on_connection's refusal */
        env->count.refused++;
        return;
    }
    if (!env->model_valid)
        return;
    env->count.modelled++;
    if (c->next_exp >= c->nexp)
        fuzz_violation("client %d: reply id %llu (%s) to no frame (%zu frames sent)", ci,
                       (unsigned long long)rep->id, gpuq_errname(rep->status), c->nexp);
    size_t k = c->next_exp++;
    const fuzz_expect *e = &c->exp[k];
    if (rep->id != e->id)
        fuzz_violation("client %d: reply %zu has id %llu, frame %zu had id %llu (order broken)", ci,
                       k, (unsigned long long)rep->id, k, (unsigned long long)e->id);
    if (e->answer_off > c->sent)
        fuzz_violation(
            "client %d: reply to frame %zu before its header was sent (%zu of %llu bytes)", ci, k,
            c->sent, (unsigned long long)e->answer_off);
    if (e->must_status && rep->status != e->must_status)
        fuzz_violation("client %d: frame %zu (id %llu) got %s, must get %s", ci, k,
                       (unsigned long long)e->id, gpuq_errname(rep->status),
                       gpuq_errname(e->must_status));
    if (e->closes)
        c->ended = true;
    if (rep->status < 0) {
        env->count.errors++;
        return;
    }
    if (!e->can_succeed)
        fuzz_violation("client %d: frame %zu (id %llu, op %s) succeeded but cannot", ci, k,
                       (unsigned long long)e->id, gpuq_op_name(e->op) ? gpuq_op_name(e->op) : "?");
    if (op_has_info(e->op) && !rep->info)
        fuzz_violation("client %d: %s reply without info", ci, gpuq_op_name(e->op));
    if (!gpuq_op_is_compute(e->op))
        env->count.ok_other++;
    if (e->op == GPUQ_OP_SESSIONS || e->op == GPUQ_OP_METRICS) {
        if (pl == 0)
            fuzz_violation("client %d: %s reply without a document", ci, gpuq_op_name(e->op));
        return;
    }
    if (!gpuq_op_is_compute(e->op)) {
        if (pl)
            fuzz_violation("client %d: %s reply with %llu payload bytes", ci, gpuq_op_name(e->op),
                           (unsigned long long)pl);
        return;
    }
    if (!e->payload_done || e->end_off > c->sent)
        fuzz_violation("client %d: frame %zu (id %llu) succeeded before its payload was sent", ci,
                       k, (unsigned long long)e->id);
    if (pl != e->sz.output)
        fuzz_violation("client %d: %s id %llu: %llu payload bytes, the request implies %llu", ci,
                       gpuq_op_name(e->op), (unsigned long long)e->id, (unsigned long long)pl,
                       (unsigned long long)e->sz.output);
    if (rep->dtype != e->dtype || rep->ndim != e->sz.out_ndim)
        fuzz_violation("client %d: %s id %llu: dtype %d ndim %u, want dtype %d ndim %u", ci,
                       gpuq_op_name(e->op), (unsigned long long)e->id, (int)rep->dtype, rep->ndim,
                       (int)e->dtype, e->sz.out_ndim);
    for (uint32_t d = 0; d < rep->ndim; d++)
        if (rep->shape[d] != e->sz.out_shape[d])
            fuzz_violation("client %d: %s id %llu: shape[%u] %llu, want %llu", ci,
                           gpuq_op_name(e->op), (unsigned long long)e->id, d,
                           (unsigned long long)rep->shape[d],
                           (unsigned long long)e->sz.out_shape[d]);
    if (rep->has_timing != e->timing)
        fuzz_violation("client %d: %s id %llu: timing %d, asked %d", ci, gpuq_op_name(e->op),
                       (unsigned long long)e->id, rep->has_timing, e->timing);
    env->count.ok_compute++;
    uint8_t *want = fuzz_xrealloc(NULL, (size_t)pl);
    fake_fill_output(e->id, e->in_hash, want, pl);
    if (memcmp(pay, want, (size_t)pl) != 0)
        fuzz_violation("client %d: %s id %llu: the result is not the backend's for this input", ci,
                       gpuq_op_name(e->op), (unsigned long long)e->id);
    free(want);
}

/* Take every whole reply frame out of c->in. */
static void client_parse(fuzz_env *env, fuzz_client *c, int ci)
{
    size_t pos = 0;
    for (;;) {
        size_t avail = c->in_len - pos;
        const uint8_t *p = c->in + pos;
        if (avail < GPUQ_PREFIX_SIZE)
            break;
        gpuq_prefix pre;
        int rc = gpuq_prefix_decode(p, GPUQ_PREFIX_SIZE, &pre);
        if (rc != 0 || pre.kind != GPUQ_KIND_REPLY)
            fuzz_violation("client %d: reply prefix does not decode (%s, kind %u)", ci,
                           gpuq_errname(rc), pre.kind);
        if (pre.header_len == 0 || pre.header_len > (1u << 20) || pre.payload_len > (64u << 20))
            fuzz_violation("client %d: reply prefix with header %u payload %llu bytes", ci,
                           pre.header_len, (unsigned long long)pre.payload_len);
        size_t total = GPUQ_PREFIX_SIZE + pre.header_len + (size_t)pre.payload_len;
        if (avail < total)
            break;
        gpuq_reply rep;
        char msg[256];
        rc = gpuq_reply_decode(p + GPUQ_PREFIX_SIZE, pre.header_len, &rep, msg, sizeof msg);
        if (rc != 0)
            fuzz_violation("client %d: reply header does not decode: %s", ci, msg);
        check_reply(env, c, ci, &rep, p + GPUQ_PREFIX_SIZE + pre.header_len, pre.payload_len);
        c->nreplies++;
        env->progress++;
        pos += total;
    }
    memmove(c->in, c->in + pos, c->in_len - pos);
    c->in_len -= pos;
}

/* ---- sockets ---- */

void fuzz_client_reset(fuzz_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->out);
    free(c->exp);
    free(c->in);
    free(c->m.hdr);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

void fuzz_client_connect(fuzz_env *env, fuzz_client *c)
{
    if (c->fd >= 0 && !c->eof)
        return;
    fuzz_client_reset(c);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        fuzz_violation("socket: %s", strerror(errno));
    int sz = FUZZ_CLIENT_SNDBUF;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", env->sock_path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        /* listener closed (drain, shutdown) or backlog full: no connection */
        close(fd);
        return;
    }
    c->fd = fd;
    c->reading = true;
    env->progress++;
}

static void client_eof(fuzz_env *env, fuzz_client *c, int ci)
{
    c->eof = true;
    env->progress++;
    env->count.eofs++;
    bool why = c->ended || c->wr_shut || env->allow_eof || !env->model_valid || env->server_closing;
    if (!why)
        fuzz_violation("client %d: the server closed a healthy session (%llu replies read)", ci,
                       (unsigned long long)c->nreplies);
    /* On EOF from the client (SHUT_WR) the server closes at once, cutting a
     * reply it is writing: allowed (PROTOCOL.md does not define half-close);
     * so may a drain timeout. Otherwise a close comes after whole replies. */
    if (c->in_len && !(c->wr_shut || env->drain_timed_out || env->allow_eof || !env->model_valid))
        fuzz_violation("client %d: the server closed with %zu bytes of a reply unwritten", ci,
                       c->in_len);
}

void fuzz_client_io(fuzz_env *env, fuzz_client *c, int ci)
{
    if (c->fd < 0)
        return;
    while (c->sent < c->want && !c->send_dead && !c->wr_shut) {
        ssize_t n = send(c->fd, c->out + c->sent, c->want - c->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->sent += (size_t)n;
            env->progress++;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            if (n < 0 && errno != EAGAIN)
                c->send_dead = true;
            break;
        }
    }
    while (c->reading && !c->eof) {
        if (c->in_cap - c->in_len < 65536) {
            c->in_cap = 2 * c->in_cap > c->in_len + 65536 ? 2 * c->in_cap : c->in_len + 65536;
            c->in = fuzz_xrealloc(c->in, c->in_cap);
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            env->progress++;
            client_parse(env, c, ci);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            break;
        } else {
            client_eof(env, c, ci);
            break;
        }
    }
}

/* One poll for all clients, then I/O only where it can move (a recv that
 * would block costs as much as the rest of a loop turn). */
void fuzz_clients_io(fuzz_env *env, fuzz_client *cl, int n, bool recv)
{
    /* One poll for all, then I/O only where it can move: a recv that would
     * block costs about as much as the rest of a loop turn. */
    struct pollfd pfd[FUZZ_MAX_CLIENTS];
    int map[FUZZ_MAX_CLIENTS], np = 0;
    for (int i = 0; i < n && i < FUZZ_MAX_CLIENTS; i++) {
        fuzz_client *c = &cl[i];
        short ev = 0;
        if (c->fd < 0)
            continue;
        if (recv && c->reading && !c->eof)
            ev |= POLLIN;
        if (c->sent < c->want && !c->send_dead && !c->wr_shut)
            ev |= POLLOUT;
        if (!ev)
            continue;
        pfd[np] = (struct pollfd){.fd = c->fd, .events = ev};
        map[np++] = i;
    }
    if (np == 0)
        return;
    int rc;
    while ((rc = poll(pfd, (nfds_t)np, 0)) < 0 && errno == EINTR)
        ;
    if (rc < 0)
        fuzz_violation("poll: %s", strerror(errno));
    for (int k = 0; k < np; k++) {
        fuzz_client *c = &cl[map[k]];
        if (!pfd[k].revents)
            continue;
        if (recv) {
            fuzz_client_io(env, c, map[k]);
        } else {
            bool reading = c->reading;
            c->reading = false; /* send only */
            fuzz_client_io(env, c, map[k]);
            c->reading = reading;
        }
    }
}

void fuzz_client_append(fuzz_env *env, fuzz_client *c, const void *p, size_t n)
{
    if (c->fd < 0 || !n)
        return;
    if (c->cap - c->len < n) {
        c->cap = (c->len + n) * 2;
        c->out = fuzz_xrealloc(c->out, c->cap);
    }
    memcpy(c->out + c->len, p, n);
    c->len += n;
    model_feed(env, c, p, n);
}

void fuzz_client_check_answered(const fuzz_client *c, int ci)
{
    if (c->fd < 0 || c->eof || c->wr_shut || c->send_dead || c->ended)
        return;
    if (c->sent < c->want)
        fuzz_violation("client %d: quiet, but the server did not read %zu bytes sent to it", ci,
                       c->want - c->sent);
    if (c->next_exp < c->nexp && c->exp[c->next_exp].end_off <= c->sent)
        fuzz_violation("client %d: quiet, but frame %zu (id %llu) was sent whole and not "
                       "answered (%zu of %zu frames answered)",
                       ci, c->next_exp, (unsigned long long)c->exp[c->next_exp].id, c->next_exp,
                       c->nexp);
}
