/* SPDX-License-Identifier: Apache-2.0 */
/* stage.c - the staging arena of a connection (see stage.h; gpuq.h for
 * gpuq_set_transport).
 *
 * Happy path: a blocking call's arrays that would cross the socket are laid
 * out in the connection's staging arena, each on a 64-byte boundary (the
 * inputs, then the outputs), the inputs copied in, and the request names
 * them by reference; when the reply is in, the outputs are copied out to
 * the caller's buffers. Both copies go through copy_pool.c: chunked over
 * the process's copy threads from COPY_POOL_MIN bytes on, one memcpy on
 * this thread below that; after the copy in, the copy threads poll on
 * through a short request's device time (copy_pool_expect), so the copy out
 * does not wait for threads woken from sleep. The arena is opened on first use and grown by
 * closing it and opening a larger one (twice the old size, at least what
 * the request needs, at most the session's session_arena), so a run of
 * growing requests reopens it only a few times.
 *
 * Gated (stage.h): inputs of STAGE_GATE_MIN bytes or more, when the hello
 * said "gate" and GPUQ_GATE was 1 at connect (opt-in), are not copied before
 * the send: the request goes with "gate": true, and stage_feed then copies
 * them in pieces (A's bytes, then B's), each through copy_pool.c, sending
 * {"op": "ready", "request": id, "bytes": n} with the bytes in place so
 * far after each; gpuqd uploads a piece while the next one is copied. The
 * bytes in the arena are the same as ungated, and so are the results.
 *
 * Failure: the daemon may refuse an arena (session_arena or 16 arenas:
 * too_large; total_arena: busy; memory: no_memory) and libgpuq may fail to
 * map it. Under AUTO the request then goes by socket and the size is
 * remembered (failed_at), so later requests that large do not ask again;
 * under SHM the call fails with that code and nothing is sent. A dead
 * connection is an error either way. A ready that cannot be sent breaks
 * the connection: the gated request would wait for its input until
 * gpuqd's frame_timeout.
 */
#include "stage.h"

#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "conn_defs.h"
#include "conn_err.h"
#include "copy_pool.h"
#include "sockio.h"

#define STAGE_ALIGN 64u
/* A staged request's copy out is expected this long after its device time
 * at SOCKIO_SPIN_BYTES_PER_NS (the round trip, queueing, the kernel). */
#define STAGE_EXPECT_SLACK_NS 500000u

/* The arrays of one request that would cross the socket: nin inputs
 * (borrowed until staged) and nout outputs (borrowed until stage_end). A
 * side with a count of 0 goes as it would have. */
typedef struct stage_io {
    uint32_t nin, nout;
    const void *in[REQ_MAX_IO];
    uint64_t in_len[REQ_MAX_IO];
    void *out[REQ_MAX_IO];
    uint64_t out_len[REQ_MAX_IO];
    bool no_gate; /* the request carries its caller's own "gate" key */
} stage_io;

static uint64_t align_up(uint64_t v)
{
    return (v + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

/* The message of c's last error without its "name: " prefix. */
static const char *err_body(gpuq_conn *c, int code)
{
    const char *m = gpuq_errmsg(c), *name = gpuq_errname(code);
    size_t nl = strlen(name);
    return strncmp(m, name, nl) == 0 && m[nl] == ':' && m[nl + 1] == ' ' ? m + nl + 2 : m;
}

/* An arena of at least need bytes as s->arena. Returns 0, 1 (AUTO: none to
 * be had, go by socket) or an error (SHM refused, or a dead connection). */
static int stage_grow(gpuq_conn *c, conn_stage *s, uint64_t need)
{
    bool shm = s->transport == GPUQ_TRANSPORT_SHM;
    uint64_t cap = gpuq_info(c)->limits.session_arena;
    if (!shm && s->failed_at && need >= s->failed_at)
        return 1;
    if (need > cap) {
        if (!shm) {
            s->failed_at = need;
            return 1;
        }
        return conn_set_err(c, GPUQ_E_TOO_LARGE,
                            "too_large: shm transport: the arrays need a staging arena of %llu "
                            "bytes, over this session's session_arena %llu",
                            (unsigned long long)need, (unsigned long long)cap);
    }
    uint64_t want = need;
    if (s->arena) {
        uint64_t old = gpuq_arena_size(s->arena);
        uint64_t grown = old > cap / 2 ? cap : old * 2;
        if (grown > want)
            want = grown;
        gpuq_arena_close(s->arena); /* unmapped whatever the daemon said */
        s->arena = NULL;
        if (c->broken)
            return c->broken;
    }
    int rc = gpuq_arena_open(c, want, &s->arena);
    if (rc && want > need && !c->broken)
        rc = gpuq_arena_open(c, need, &s->arena);
    if (rc == 0)
        return 0;
    s->arena = NULL;
    if (c->broken)
        return rc;
    if (!shm) {
        if (!s->failed_at || need < s->failed_at)
            s->failed_at = need;
        return 1;
    }
    char why[512];
    snprintf(why, sizeof why, "%s", err_body(c, rc));
    return conn_set_err(c, rc, "%s: shm transport: no staging arena of %llu bytes: %s",
                        gpuq_errname(rc), (unsigned long long)need, why);
}

static int stage_area(gpuq_conn *c, uint64_t bytes, uint64_t need, void **base, uint64_t *arena_id)
{
    conn_stage *s = &c->stage;
    *base = NULL;
    *arena_id = 0;
    if (c->broken)
        return c->broken;
    if (s->transport == GPUQ_TRANSPORT_SOCKET ||
        (s->transport == GPUQ_TRANSPORT_AUTO && (!s->offered || bytes < GPUQ_SHM_MIN_BYTES)))
        return 0;
    if (!s->offered) /* SHM: gpuq_set_transport refuses it without arenas */
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                            "bad_argument: shm transport: gpuqd offers no arenas");
    if (!s->arena || gpuq_arena_size(s->arena) < need) {
        int rc = stage_grow(c, s, need);
        if (rc)
            return rc < 0 ? rc : 0;
    }
    *base = gpuq_arena_base(s->arena);
    *arena_id = gpuq_arena_id(s->arena);
    return 0;
}

/* Whether staged inputs of `bytes` bytes go gated on c: the hello said
 * "gate", GPUQ_GATE was 1 at connect, and they are large enough for
 * the overlap to pay for the ready requests. */
static bool stage_gates(const conn_stage *s, uint64_t bytes)
{
    return s->gate_offered && !s->gate_off && bytes >= STAGE_GATE_MIN;
}

static int stage_begin(gpuq_conn *c, const stage_io *io, gpuq_ref *in_refs, gpuq_ref *out_refs,
                       bool *staged, bool *gated)
{
    conn_stage *s = &c->stage;
    *staged = *gated = false;
    s->active = s->gated = false;
    if (io->nin + io->nout == 0 || io->nin > REQ_MAX_IO || io->nout > REQ_MAX_IO)
        return 0;
    /* the layout; lengths were checked against max_payload and max_output */
    uint64_t bytes = 0, in_bytes = 0, need = 0, in_off[REQ_MAX_IO], out_off[REQ_MAX_IO];
    for (uint32_t k = 0; k < io->nin; k++) {
        in_off[k] = need;
        need += align_up(io->in_len[k]);
        in_bytes += io->in_len[k];
    }
    bytes = in_bytes;
    for (uint32_t k = 0; k < io->nout; k++) {
        out_off[k] = need;
        need += align_up(io->out_len[k]);
        bytes += io->out_len[k];
    }
    void *base;
    uint64_t id;
    int rc = stage_area(c, bytes, need, &base, &id);
    if (rc || !base)
        return rc;
    bool gate = io->nin > 0 && !io->no_gate && stage_gates(s, in_bytes);
    copy_seg seg[REQ_MAX_IO];
    for (uint32_t k = 0; k < io->nin; k++) {
        seg[k] = (copy_seg){(uint8_t *)base + in_off[k], io->in[k], (size_t)io->in_len[k]};
        in_refs[k] = (gpuq_ref){id, in_off[k], io->in_len[k]};
        s->in[k] = io->in[k];
        s->in_off[k] = in_off[k];
        s->in_len[k] = io->in_len[k];
    }
    if (!gate) { /* gated: stage_feed copies them once the request is sent */
        copy_pool_run(seg, io->nin);
        /* the copy out follows by about the request's device time: the
         * copy threads poll until then if that is short */
        copy_pool_expect((size_t)(bytes - in_bytes),
                         bytes / SOCKIO_SPIN_BYTES_PER_NS + STAGE_EXPECT_SLACK_NS);
    }
    s->nin = io->nin;
    s->nout = io->nout;
    for (uint32_t k = 0; k < io->nout; k++) {
        out_refs[k] = (gpuq_ref){id, out_off[k], io->out_len[k]};
        s->out[k] = io->out[k];
        s->out_off[k] = out_off[k];
        s->out_len[k] = io->out_len[k];
    }
    s->active = true;
    s->gated = gate;
    *staged = true;
    *gated = gate;
    return 0;
}

uint64_t stage_gate_piece(uint64_t input)
{
    uint64_t p = align_up(input / 8);
    return p < STAGE_GATE_PIECE_MIN   ? STAGE_GATE_PIECE_MIN
           : p > STAGE_GATE_PIECE_MAX ? STAGE_GATE_PIECE_MAX
                                      : p;
}

uint64_t stage_ready_count(const gpuq_conn *c)
{
    return c->stage.readies;
}

/* {"op": "ready", "request": id, "bytes": bytes}, outside max_inflight
 * (gpuqd does not count it either), its reply left to the wait for
 * request id's (conn_follow_last). A ready that cannot be sent leaves the
 * gated request waiting for input it will never get: the connection
 * breaks. */
static int send_ready(gpuq_conn *c, uint64_t id, uint64_t bytes)
{
    gpuq_req *r = gpuq_req_new("ready");
    int rc = GPUQ_E_NO_MEMORY;
    if (r) {
        gpuq_req_set_u64(r, "request", id);
        gpuq_req_set_u64(r, "bytes", bytes);
        rc = conn_submit_req(c, r, NULL, false, NULL);
        gpuq_req_free(r);
    }
    if (rc == 0) {
        conn_follow_last(c);
        c->stage.readies++;
        return 0;
    }
    if (c->broken)
        return rc;
    char what[sizeof c->err];
    snprintf(what, sizeof what,
             "%s: a ready of gated request %llu could not be sent (%s): the "
             "connection cannot go on",
             gpuq_errname(rc), (unsigned long long)id, r ? gpuq_errmsg(c) : "out of memory");
    return conn_break(c, rc, what);
}

int stage_feed(gpuq_conn *c, uint64_t id)
{
    conn_stage *s = &c->stage;
    if (!s->active || !s->gated)
        return 0;
    s->gated = false;
    uint64_t total = 0;
    for (uint32_t k = 0; k < s->nin; k++)
        total += s->in_len[k];
    uint64_t piece = stage_gate_piece(total), done = 0, at = 0; /* at: bytes of input k copied */
    uint32_t k = 0;
    uint8_t *base = gpuq_arena_base(s->arena);
    int ifd = c->cancel.intr_fd; /* the readies must go out: gpuqd waits for them */
    c->cancel.intr_fd = -1;
    int rc = 0;
    while (done < total && rc == 0) {
        uint64_t want = total - done < piece ? total - done : piece;
        copy_seg seg[REQ_MAX_IO];
        unsigned n = 0;
        while (want) { /* a piece spans at most the end of A and the start of B */
            if (at == s->in_len[k]) {
                k++, at = 0;
                continue;
            }
            uint64_t m = s->in_len[k] - at < want ? s->in_len[k] - at : want;
            seg[n++] =
                (copy_seg){base + s->in_off[k] + at, (const uint8_t *)s->in[k] + at, (size_t)m};
            at += m, done += m, want -= m;
        }
        copy_pool_run(seg, n);
        rc = send_ready(c, id, done);
    }
    c->cancel.intr_fd = ifd;
    return rc;
}

void stage_end(gpuq_conn *c, bool ok)
{
    conn_stage *s = &c->stage;
    s->gated = false; /* a request never sent is never fed */
    if (!s->active)
        return;
    s->active = false;
    if (!ok || !s->arena)
        return;
    const uint8_t *base = gpuq_arena_base(s->arena);
    copy_seg seg[REQ_MAX_IO];
    for (uint32_t k = 0; k < s->nout; k++)
        seg[k] = (copy_seg){s->out[k], base + s->out_off[k], (size_t)s->out_len[k]};
    copy_pool_run(seg, s->nout);
}

/* gpuq_call_req's carried arrays (refs' GPUQ_REF_WIRE entries: in no
 * arena, not resident), into the staging arena when c's transport says so;
 * refs names them there. A side with an array in an arena already stays
 * as it is (all of a side's carried arrays by reference, or none), and so
 * do the outputs when refs->out_fixed. A resident input means no gate:
 * "gate" needs every input in an arena. */
int stage_req(gpuq_conn *c, const gpuq_req *r, const gpuq_sizes *sz, req_refs *refs, bool *gate)
{
    stage_io io = {.no_gate = r->has_gate};
    uint32_t in_at[REQ_MAX_IO], out_at[REQ_MAX_IO]; /* io's array j is entry in_at[j] */
    bool in_placed = false, out_placed = refs->out_fixed;
    for (uint32_t k = 0; k < refs->nin && k < REQ_MAX_IO; k++) {
        in_placed = in_placed || refs->in_kind[k] == GPUQ_REF_ARENA;
        io.no_gate = io.no_gate || refs->in_kind[k] == GPUQ_REF_NAME;
    }
    for (uint32_t k = 0; k < refs->nout && k < REQ_MAX_IO; k++)
        out_placed = out_placed || refs->out_kind[k] == GPUQ_REF_ARENA;
    for (uint32_t k = 0; !in_placed && k < refs->nin && k < REQ_MAX_IO; k++) {
        if (refs->in_kind[k] != GPUQ_REF_WIRE || !r->in[k].set)
            continue;
        in_at[io.nin] = k;
        io.in[io.nin] = r->in[k].data;
        io.in_len[io.nin++] = r->in[k].len;
    }
    for (uint32_t k = 0; !out_placed && k < refs->nout && k < sz->nout && k < REQ_MAX_IO; k++) {
        if (refs->out_kind[k] != GPUQ_REF_WIRE)
            continue;
        out_at[io.nout] = k;
        io.out[io.nout] = r->out[k].buf;
        io.out_len[io.nout++] = sz->out[k].bytes;
    }
    gpuq_ref in_refs[REQ_MAX_IO], out_refs[REQ_MAX_IO];
    bool staged;
    int rc = stage_begin(c, &io, in_refs, out_refs, &staged, gate);
    if (rc == 0 && staged) {
        for (uint32_t j = 0; j < io.nin; j++) {
            refs->in_kind[in_at[j]] = GPUQ_REF_ARENA;
            refs->in[in_at[j]] = in_refs[j];
        }
        for (uint32_t j = 0; j < io.nout; j++) {
            refs->out_kind[out_at[j]] = GPUQ_REF_ARENA;
            refs->out[out_at[j]] = out_refs[j];
        }
    }
    return rc;
}

/* gpuq_call's arrays (payload a then b, result out[out_cap], packed) into
 * the staging arena when c's transport says so: req gets the refs and
 * *staged is true. A request whose sizes do not add up is left to the
 * daemon to refuse, by socket, as before. */
int stage_call(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
               size_t b_len, void *out, size_t out_cap, bool *staged)
{
    *staged = false;
    const conn_stage *s = &c->stage;
    uint64_t bytes = (uint64_t)a_len + b_len + out_cap;
    if (req->nin_ref || req->nout_ref || s->transport == GPUQ_TRANSPORT_SOCKET ||
        (s->transport == GPUQ_TRANSPORT_AUTO && (!s->offered || bytes < GPUQ_SHM_MIN_BYTES)))
        return 0;
    gpuq_sizes sz;
    char msg[256];
    if (gpuq_request_check(req, (uint64_t)a_len + b_len, &gpuq_info(c)->limits, &sz, msg,
                           sizeof msg) ||
        sz.nin + sz.nout == 0 || sz.nin > REQ_MAX_IO || sz.nout > REQ_MAX_IO ||
        sz.output != out_cap || (out_cap && !out))
        return 0;
    stage_io io = {.nin = sz.nin, .nout = sz.nout};
    if (sz.nin == 2 && a_len == sz.in_bytes[0] && b_len == sz.in_bytes[1]) {
        io.in[0] = a, io.in[1] = b;
    } else if (b_len == 0) { /* A and B packed in a */
        io.in[0] = a;
        io.in[1] = sz.nin == 2 ? (const uint8_t *)a + sz.in_bytes[0] : NULL;
    } else {
        return 0;
    }
    io.in_len[0] = sz.in_bytes[0], io.in_len[1] = sz.in_bytes[1];
    io.out[0] = out;
    io.out[1] = sz.nout == 2 ? (uint8_t *)out + sz.out[0].bytes : NULL;
    io.out_len[0] = sz.out[0].bytes, io.out_len[1] = sz.out[1].bytes;
    bool gated;
    int rc = stage_begin(c, &io, req->in_ref, req->out_ref, staged, &gated);
    if (rc == 0 && *staged) {
        req->nin_ref = io.nin;
        req->nout_ref = io.nout;
        req->gate = gated;
    }
    return rc;
}

int gpuq_stage_area(gpuq_conn *c, uint64_t bytes, uint64_t need, void **base, uint64_t *arena_id)
{
    *base = NULL;
    *arena_id = 0;
    if (!c->broken && gpuq_pending(c))
        return conn_set_err(c, GPUQ_E_BUSY, "busy: %u requests outstanding: wait first",
                            gpuq_pending(c));
    return stage_area(c, bytes, need, base, arena_id);
}

int gpuq_set_transport(gpuq_conn *c, gpuq_transport t)
{
    conn_stage *s = &c->stage;
    if (t != GPUQ_TRANSPORT_AUTO && t != GPUQ_TRANSPORT_SOCKET && t != GPUQ_TRANSPORT_SHM)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                            "bad_argument: transport %d is none of auto (0), socket (1), shm (2)",
                            (int)t);
    if (t == GPUQ_TRANSPORT_SHM && !s->offered)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                            "bad_argument: transport shm: gpuqd offers this session no "
                            "shared-memory arenas (session_arena 0, or a gpuqd without them)");
    s->transport = t;
    s->failed_at = 0; /* a new choice asks again */
    if (t == GPUQ_TRANSPORT_SOCKET && s->arena && gpuq_pending(c) == 0 && !c->broken) {
        gpuq_arena_close(s->arena);
        s->arena = NULL;
    }
    return 0;
}
