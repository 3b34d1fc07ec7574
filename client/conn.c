/* conn.c - a libgpuq connection: socket, hello, pipelined submit/wait.
 *
 * Happy path: gpuq_connect opens the Unix socket, sends "hello" and keeps the
 * server's info and limits. gpuq_submit gives each request the next id,
 * writes prefix + header + A + B with one writev, and queues (id, out,
 * out_cap); gpuq_wait reads the next reply frame into the queue head's buffer.
 *
 * Failures: a socket error or a broken reply stream marks the connection
 * broken (every later call returns that code); a server error reply is just
 * the request's status, with "name: message" in gpuq_errmsg. A send that
 * fails because the server hung up first returns the refusal the server
 * left for us, if any (busy over max_sessions), not "closed". A result larger
 * than out_cap is read and dropped (GPUQ_E_TOO_LARGE) so the stream stays in
 * step. gpuq_submit refuses (GPUQ_E_BUSY, nothing sent) once max_inflight
 * requests are outstanding: callers interleave waits, so the server's replies
 * never pile up unread while we block writing.
 */
#include "conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "gpuq_limits.h"
#include "mpread.h"
#include "sockio.h"
#include "utf8.h"

typedef struct pending_req {
    uint64_t id;
    void *out;      /* borrowed from the caller until its gpuq_wait */
    size_t out_cap;
} pending_req;

struct gpuq_conn {
    int fd;
    int broken;             /* 0, or the code that broke the stream */
    uint64_t next_id;
    gpuq_server_info info;
    char path[256];
    char err[512];
    pending_req *q;         /* ring buffer */
    size_t q_cap, q_head, q_len;
    uint8_t *hbuf;          /* last reply header; reply.info points here */
    size_t hbuf_cap;
    uint64_t last_payload;  /* payload_len of the last reply read */
};

int conn_set_err(gpuq_conn *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

static int key_is(const char *k, uint32_t klen, const char *want)
{
    return strlen(want) == klen && memcmp(k, want, klen) == 0;
}

static int conn_break(gpuq_conn *c, int code, const char *what)
{
    c->broken = code;
    if (code == GPUQ_E_CLOSED)
        return conn_set_err(c, code, "server closed the connection (%s)", what);
    if (code == GPUQ_E_IO)
        return conn_set_err(c, code, "%s: %s", what, strerror(errno));
    return conn_set_err(c, code, "%s", what);
}

int gpuq_default_socket(char *buf, size_t cap)
{
    const char *s = getenv("GPUQ_SOCKET");
    int n;
    if (s && *s) {
        n = snprintf(buf, cap, "%s", s);
    } else if ((s = getenv("XDG_RUNTIME_DIR")) && *s) {
        n = snprintf(buf, cap, "%s/gpuq/gpuqd.sock", s);
    } else {
        n = snprintf(buf, cap, "/run/gpuq/gpuqd.sock");
    }
    if (n < 0 || (size_t)n >= cap)
        return GPUQ_E_TOO_LARGE;
    return 0;
}

const gpuq_server_info *gpuq_info(const gpuq_conn *c) { return &c->info; }
const char *gpuq_errmsg(const gpuq_conn *c) { return c->err; }
unsigned gpuq_pending(const gpuq_conn *c) { return (unsigned)c->q_len; }

static int queue_push(gpuq_conn *c, uint64_t id, void *out, size_t out_cap)
{
    if (c->q_len == c->q_cap) {
        size_t ncap = c->q_cap ? c->q_cap * 2 : 16;
        pending_req *nq = malloc(ncap * sizeof *nq);
        if (!nq)
            return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory queueing a request");
        for (size_t i = 0; i < c->q_len; i++)
            nq[i] = c->q[(c->q_head + i) % c->q_cap];
        free(c->q);
        c->q = nq;
        c->q_cap = ncap;
        c->q_head = 0;
    }
    pending_req *p = &c->q[(c->q_head + c->q_len) % c->q_cap];
    p->id = id;
    p->out = out;
    p->out_cap = out_cap;
    c->q_len++;
    return 0;
}

int gpuq_send_raw(gpuq_conn *c, const void *buf, size_t len)
{
    if (c->broken)
        return c->broken; /* c->err still says why */
    struct iovec iov = {(void *)buf, len};
    int rc = sockio_writev_full(c->fd, &iov, 1);
    if (rc)
        return conn_break(c, rc, "send");
    return 0;
}

/* Read one reply frame; the result goes into out[out_cap]. Transport or
 * framing failures break the connection; a server error is returned as the
 * reply's status with the connection still usable. */
static int read_reply_doc(gpuq_conn *c, gpuq_reply *rep, void *out, size_t out_cap,
                          uint8_t **doc, size_t *doc_len)
{
    if (c->broken)
        return c->broken; /* c->err still says why */
    memset(rep, 0, sizeof *rep);
    uint8_t pre[GPUQ_PREFIX_SIZE];
    int rc = sockio_read_full(c->fd, pre, sizeof pre);
    if (rc)
        return conn_break(c, rc, "reading a reply");
    gpuq_prefix p;
    rc = gpuq_prefix_decode(pre, sizeof pre, &p);
    if (rc == GPUQ_E_VERSION)
        return conn_break(c, rc, "server speaks another protocol version");
    if (rc || p.kind != GPUQ_KIND_REPLY)
        return conn_break(c, GPUQ_E_PROTOCOL, "malformed reply frame prefix");
    if (p.header_len == 0 || p.header_len > GPUQ_CLIENT_MAX_REPLY_HEADER)
        return conn_break(c, GPUQ_E_PROTOCOL, "reply header length out of bounds");
    if (p.header_len > c->hbuf_cap) {
        uint8_t *nb = realloc(c->hbuf, p.header_len);
        if (!nb)
            return conn_break(c, GPUQ_E_NO_MEMORY, "out of memory reading a reply header");
        c->hbuf = nb;
        c->hbuf_cap = p.header_len;
    }
    rc = sockio_read_full(c->fd, c->hbuf, p.header_len);
    if (rc)
        return conn_break(c, rc, "reading a reply header");
    c->last_payload = p.payload_len;
    char msg[200];
    if (gpuq_reply_decode(c->hbuf, p.header_len, rep, msg, sizeof msg)) {
        /* Without a trustworthy id the stream cannot be matched up. */
        char what[256];
        snprintf(what, sizeof what, "bad reply header: %s", msg);
        return conn_break(c, GPUQ_E_PROTOCOL, what);
    }
    if (doc && p.payload_len > 0 && p.payload_len <= GPUQ_CLIENT_MAX_DOC) {
        /* A document (sessions, metrics): its size is only known now. */
        uint8_t *d = malloc((size_t)p.payload_len + 1);
        if (!d) {
            rc = sockio_discard(c->fd, p.payload_len);
            if (rc)
                return conn_break(c, rc, "reading a reply payload");
            return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory for a %llu-byte reply",
                                (unsigned long long)p.payload_len);
        }
        rc = sockio_read_full(c->fd, d, (size_t)p.payload_len);
        if (rc) {
            free(d);
            return conn_break(c, rc, "reading a reply payload");
        }
        d[p.payload_len] = '\0';
        *doc = d;
        *doc_len = (size_t)p.payload_len;
    } else if (p.payload_len > out_cap || (p.payload_len > 0 && !out)) {
        rc = sockio_discard(c->fd, p.payload_len);
        if (rc)
            return conn_break(c, rc, "reading a reply payload");
        if (rep->status == 0)
            return conn_set_err(c, GPUQ_E_TOO_LARGE,
                                "result of %llu bytes does not fit the %zu-byte buffer",
                                (unsigned long long)p.payload_len, out_cap);
    } else if (p.payload_len > 0) {
        rc = sockio_read_full(c->fd, out, (size_t)p.payload_len);
        if (rc)
            return conn_break(c, rc, "reading a reply payload");
    }
    if (rep->status < 0)
        return conn_set_err(c, rep->status, "%s: %s", gpuq_errname(rep->status), rep->message);
    return 0;
}

static int read_reply(gpuq_conn *c, gpuq_reply *rep, void *out, size_t out_cap)
{
    return read_reply_doc(c, rep, out, out_cap, NULL, NULL);
}

int gpuq_recv_reply(gpuq_conn *c, gpuq_reply *rep, void *out, size_t out_cap)
{
    return read_reply(c, rep, out, out_cap);
}

/* Sending failed with rc. When the server hung up (rc GPUQ_E_CLOSED: EPIPE
 * or ECONNRESET) with nothing outstanding, it may have said why first: a
 * refusal of the whole connection (an error reply with id 0, such as busy
 * for a connection over max_sessions) is then already in our receive queue,
 * since gpuqd closes only after that reply was written, and the kernel keeps
 * it readable even when it resets the connection for our unread bytes. Read
 * it, waiting at most CONN_REFUSAL_WAIT_MS, and fail with its code and
 * message instead of "closed". With requests outstanding the next replies
 * are theirs and stay unread: the connection is broken either way. */
#define CONN_REFUSAL_WAIT_MS 200
static int conn_send_failed(gpuq_conn *c, int rc, const char *what)
{
    if (rc != GPUQ_E_CLOSED || c->q_len != 0 ||
        sockio_wait_readable(c->fd, CONN_REFUSAL_WAIT_MS) != 1)
        return conn_break(c, rc, what);
    gpuq_reply rep;
    int st = read_reply(c, &rep, NULL, 0);
    if (c->broken || st >= 0 || rep.id != 0)
        return conn_break(c, rc, what); /* no reply after all, or not a refusal */
    c->broken = st;                     /* c->err is the server's "name: message" */
    return st;
}

int gpuq_submit(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
                size_t b_len, void *out, size_t out_cap, uint64_t *id_out)
{
    if (c->broken)
        return c->broken; /* c->err still says why */
    if (c->info.limits.max_inflight && c->q_len >= c->info.limits.max_inflight)
        return conn_set_err(c, GPUQ_E_BUSY, "%zu requests outstanding (max_inflight %u): wait first",
                            c->q_len, c->info.limits.max_inflight);
    uint64_t payload = (uint64_t)a_len + (uint64_t)b_len;
    if (payload > c->info.limits.max_payload)
        return conn_set_err(c, GPUQ_E_TOO_LARGE, "payload of %llu bytes over the server's %llu",
                            (unsigned long long)payload,
                            (unsigned long long)c->info.limits.max_payload);
    req->id = c->next_id;
    uint8_t *hdr = NULL;
    size_t hlen = 0;
    if (gpuq_request_encode(req, &hdr, &hlen))
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory encoding a request");
    int rc;
    if (hlen > c->info.limits.max_header) {
        rc = conn_set_err(c, GPUQ_E_TOO_LARGE, "request header of %zu bytes over the server's %u",
                          hlen, c->info.limits.max_header);
        goto err_after_encode;
    }
    rc = queue_push(c, req->id, out, out_cap);
    if (rc)
        goto err_after_encode;
    gpuq_prefix p = {GPUQ_PROTO_VERSION, GPUQ_KIND_REQUEST, 0, (uint32_t)hlen, payload};
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&p, pre);
    struct iovec iov[4] = {
        {pre, sizeof pre}, {hdr, hlen}, {(void *)a, a_len}, {(void *)b, b_len}};
    rc = sockio_writev_full(c->fd, iov, 4);
    free(hdr);
    if (rc) {
        c->q_len--; /* never sent (or sent in part: the stream is dead anyway) */
        return conn_send_failed(c, rc, "sending a request");
    }
    c->next_id++;
    if (id_out)
        *id_out = req->id;
    return 0;

err_after_encode:
    free(hdr);
    return rc;
}

int gpuq_wait(gpuq_conn *c, gpuq_reply *rep)
{
    gpuq_reply tmp;
    if (!rep)
        rep = &tmp;
    if (c->q_len == 0)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "no request outstanding");
    pending_req head = c->q[c->q_head];
    int rc = read_reply(c, rep, head.out, head.out_cap);
    rep->info = NULL;
    rep->info_len = 0;
    if (c->broken)
        return rc;
    c->q_head = (c->q_head + 1) % c->q_cap;
    c->q_len--;
    if (rep->id != head.id) {
        if (rep->status < 0 && rep->id == 0)
            return rc; /* the server failed the stream as a whole */
        return conn_break(c, GPUQ_E_PROTOCOL, "reply out of order");
    }
    return rc;
}

int gpuq_call(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
              size_t b_len, void *out, size_t out_cap, gpuq_reply *rep)
{
    gpuq_reply tmp;
    if (!rep)
        rep = &tmp;
    if (c->broken)
        return c->broken; /* c->err still says why */
    if (c->q_len)
        return conn_set_err(c, GPUQ_E_BUSY, "a blocking call with %zu pipelined requests outstanding",
                            c->q_len);
    int rc = gpuq_submit(c, req, a, a_len, b, b_len, out, out_cap, NULL);
    if (rc)
        return rc;
    rc = gpuq_wait(c, rep);
    if (rc == 0 && c->last_payload != out_cap)
        return conn_set_err(c, GPUQ_E_SIZE_MISMATCH, "result of %llu bytes, expected %zu",
                            (unsigned long long)c->last_payload, out_cap);
    return rc;
}

/* Submit a request with no payload and read its reply keeping "info"; a
 * reply payload goes to *doc (malloc'd, NUL-terminated, caller frees) when
 * doc is not NULL. */
static int call_info_doc(gpuq_conn *c, gpuq_request *req, gpuq_reply *rep, uint8_t **doc,
                         size_t *doc_len)
{
    if (c->broken)
        return c->broken; /* c->err still says why */
    if (c->q_len)
        return conn_set_err(c, GPUQ_E_BUSY, "a blocking call with %zu pipelined requests outstanding",
                            c->q_len);
    int rc = gpuq_submit(c, req, NULL, 0, NULL, 0, NULL, 0, NULL);
    if (rc)
        return rc;
    c->q_head = (c->q_head + 1) % c->q_cap;
    c->q_len--;
    rc = read_reply_doc(c, rep, NULL, 0, doc, doc_len);
    if (c->broken)
        return rc;
    if (rep->id != req->id && !(rep->status < 0 && rep->id == 0))
        return conn_break(c, GPUQ_E_PROTOCOL, "reply out of order");
    return rc;
}

static int call_info(gpuq_conn *c, gpuq_request *req, gpuq_reply *rep)
{
    return call_info_doc(c, req, rep, NULL, NULL);
}

/* A document op (sessions, metrics): *doc malloc'd, owned by the caller. */
static int call_doc(gpuq_conn *c, gpuq_op op, uint8_t **doc, size_t *len, uint32_t *count)
{
    *doc = NULL;
    *len = 0;
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = op;
    gpuq_reply rep;
    int rc = call_info_doc(c, &req, &rep, doc, len);
    if (rc == 0 && !*doc) {
        uint8_t *empty = calloc(1, 1);
        if (!empty)
            return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory");
        *doc = empty;
    }
    if (rc) {
        free(*doc);
        *doc = NULL;
        *len = 0;
        return rc;
    }
    if (count) {
        *count = 0;
        gpuq_mpr r;
        gpuq_mpr_init(&r, rep.info, rep.info ? rep.info_len : 0);
        uint32_t n;
        if (rep.info && gpuq_mpr_map(&r, &n) == 0) {
            for (uint32_t i = 0; i < n; i++) {
                const char *k;
                uint32_t kl;
                uint64_t v;
                if (gpuq_mpr_str(&r, &k, &kl))
                    break;
                if (key_is(k, kl, "count") && gpuq_mpr_uint(&r, &v) == 0)
                    *count = (uint32_t)v;
                else if (gpuq_mpr_skip(&r))
                    break;
            }
        }
    }
    return 0;
}

int gpuq_sessions(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count)
{
    return call_doc(c, GPUQ_OP_SESSIONS, doc, len, count);
}

int gpuq_metrics(gpuq_conn *c, char **text, size_t *len)
{
    uint8_t *d = NULL;
    int rc = call_doc(c, GPUQ_OP_METRICS, &d, len, NULL);
    *text = (char *)d;
    return rc;
}

/* An admin op; the reply's info value "key" (an unsigned int) into *v. */
static int call_admin(gpuq_conn *c, gpuq_request *req, const char *key, uint64_t *v)
{
    gpuq_reply rep;
    int rc = call_info(c, req, &rep);
    if (rc || !v || !rep.info)
        return rc;
    gpuq_mpr r;
    gpuq_mpr_init(&r, rep.info, rep.info_len);
    uint32_t n;
    if (gpuq_mpr_map(&r, &n))
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        if (gpuq_mpr_str(&r, &k, &kl))
            return 0;
        if (key_is(k, kl, key) && gpuq_mpr_uint(&r, v) == 0)
            return 0;
        if (gpuq_mpr_skip(&r))
            return 0;
    }
    return 0;
}

int gpuq_drain(gpuq_conn *c)
{
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = GPUQ_OP_DRAIN;
    return call_admin(c, &req, NULL, NULL);
}

int gpuq_shutdown(gpuq_conn *c)
{
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = GPUQ_OP_SHUTDOWN;
    return call_admin(c, &req, NULL, NULL);
}

int gpuq_kill_session(gpuq_conn *c, uint64_t session_id)
{
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = GPUQ_OP_KILL_SESSION;
    req.has_session = true;
    req.session = session_id;
    return call_admin(c, &req, NULL, NULL);
}

int gpuq_set_limit(gpuq_conn *c, const char *name, uint64_t value, uint64_t *old)
{
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = GPUQ_OP_SET_LIMIT;
    if (!name || strlen(name) > GPUQ_LIMIT_NAME_MAX)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "limit name missing or too long");
    snprintf(req.limit, sizeof req.limit, "%s", name);
    req.has_value = true;
    req.value = value;
    return call_admin(c, &req, "old", old);
}

static void copy_str(char *dst, size_t cap, const char *s, uint32_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static int parse_hello_info(const uint8_t *buf, size_t len, gpuq_server_info *si)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, buf, len);
    uint32_t n;
    if (gpuq_mpr_map(&r, &n))
        return GPUQ_E_BAD_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        const char *k, *s;
        uint32_t kl, sl;
        uint64_t u;
        int64_t v;
        int rc;
        if (gpuq_mpr_str(&r, &k, &kl))
            return GPUQ_E_BAD_HEADER;
        if (key_is(k, kl, "version")) {
            rc = gpuq_mpr_uint(&r, &u);
            si->version = (uint32_t)u;
        } else if (key_is(k, kl, "server") && !(rc = gpuq_mpr_str(&r, &s, &sl))) {
            copy_str(si->server, sizeof si->server, s, sl);
        } else if (key_is(k, kl, "backend") && !(rc = gpuq_mpr_str(&r, &s, &sl))) {
            copy_str(si->backend, sizeof si->backend, s, sl);
        } else if (key_is(k, kl, "session")) {
            rc = gpuq_mpr_uint(&r, &si->session_id);
        } else if (key_is(k, kl, "priority")) {
            rc = gpuq_mpr_int(&r, &v);
            si->priority_granted = (int)v;
        } else if (key_is(k, kl, "stream_priority")) {
            rc = gpuq_mpr_int(&r, &v);
            si->stream_priority = (int)v;
        } else if (key_is(k, kl, "device")) {
            rc = gpuq_mpr_int(&r, &v);
            si->device = (int)v;
        } else if (key_is(k, kl, "admin")) {
            rc = gpuq_mpr_bool(&r, &si->admin);
        } else if (key_is(k, kl, "limits")) {
            rc = gpuq_limits_decode(&r, &si->limits);
        } else if (key_is(k, kl, "server") || key_is(k, kl, "backend")) {
            /* wrong type: rc already set by the failed gpuq_mpr_str */
        } else {
            rc = gpuq_mpr_skip(&r);
        }
        if (rc)
            return GPUQ_E_BAD_HEADER;
    }
    return 0;
}

static int hello(gpuq_conn *c, const gpuq_connect_opts *o)
{
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = GPUQ_OP_HELLO;
    req.version = GPUQ_PROTO_VERSION;
    const char *name = o && o->client_name ? o->client_name : "libgpuq";
    size_t nlen = strlen(name);
    if (!gpuq_utf8_valid(name, nlen)) /* the server would refuse it: bad_header */
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "client name is not valid UTF-8");
    nlen = gpuq_utf8_cut(name, nlen, GPUQ_CLIENT_NAME_MAX); /* long names: whole characters */
    memcpy(req.client, name, nlen);
    req.client[nlen] = '\0';
    req.priority = o ? o->priority : GPUQ_PRIO_NORMAL;
    req.device = o ? o->device : -1;
    gpuq_reply rep;
    int rc = call_info(c, &req, &rep);
    if (rc)
        return rc;
    if (!rep.info)
        return conn_break(c, GPUQ_E_PROTOCOL, "hello reply without info");
    if (parse_hello_info(rep.info, rep.info_len, &c->info))
        return conn_break(c, GPUQ_E_PROTOCOL, "malformed hello info");
    if (c->info.version != GPUQ_PROTO_VERSION)
        return conn_break(c, GPUQ_E_VERSION, "server protocol version differs");
    return 0;
}

int gpuq_connect(const gpuq_connect_opts *opts, gpuq_conn **out)
{
    *out = NULL;
    gpuq_conn *c = calloc(1, sizeof *c);
    if (!c)
        return GPUQ_E_NO_MEMORY;
    c->fd = -1;
    c->next_id = 1;
    c->info.device = -1;
    gpuq_limits_default(&c->info.limits);
    int rc;
    if (opts && opts->socket_path) {
        if (strlen(opts->socket_path) >= sizeof c->path) {
            rc = conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "socket path too long");
            goto err_after_alloc;
        }
        strcpy(c->path, opts->socket_path);
    } else if (gpuq_default_socket(c->path, sizeof c->path)) {
        rc = conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "default socket path too long");
        goto err_after_alloc;
    }
    rc = sockio_connect(c->path, &c->fd);
    if (rc) {
        conn_set_err(c, GPUQ_E_IO, "cannot connect to %s: %s", c->path, strerror(errno));
        rc = GPUQ_E_IO;
        goto err_after_alloc;
    }
    rc = hello(c, opts);
    if (rc)
        goto err_after_alloc;
    *out = c;
    return 0;

err_after_alloc:
    /* The caller may want the message: hand back the failed connection. */
    c->broken = c->broken ? c->broken : rc;
    *out = c;
    return rc;
}

void gpuq_close(gpuq_conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->q);
    free(c->hbuf);
    free(c);
}

int gpuq_ping(gpuq_conn *c)
{
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = GPUQ_OP_PING;
    return gpuq_call(c, &req, NULL, 0, NULL, 0, NULL, 0, NULL);
}

int gpuq_status_info(gpuq_conn *c, const uint8_t **info, size_t *len)
{
    gpuq_request req;
    gpuq_request_init(&req);
    req.op = GPUQ_OP_STATUS;
    gpuq_reply rep;
    int rc = call_info(c, &req, &rep);
    if (rc)
        return rc;
    if (!rep.info)
        return conn_set_err(c, GPUQ_E_PROTOCOL, "status reply without info");
    *info = rep.info;
    *len = rep.info_len;
    return 0;
}

int gpuq_status_json(gpuq_conn *c, char *buf, size_t cap)
{
    const uint8_t *info;
    size_t len;
    int rc = gpuq_status_info(c, &info, &len);
    if (rc)
        return rc;
    gpuq_mpr r;
    gpuq_mpr_init(&r, info, len);
    rc = gpuq_mpr_to_json(&r, buf, cap);
    if (rc == GPUQ_E_TOO_LARGE)
        return conn_set_err(c, rc, "status JSON does not fit %zu bytes", cap);
    if (rc)
        return conn_set_err(c, rc, "status info is not valid msgpack");
    return 0;
}
