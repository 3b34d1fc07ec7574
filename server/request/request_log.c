/* SPDX-License-Identifier: Apache-2.0 */
/* request_log.c - see request_log.h. */
#include "request_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "header.h"
#include "log.h"
#include "mpwrite.h"
#include "session.h"

int request_log_init(server *srv)
{
    request_log *L = calloc(1, sizeof *L);
    if (!L)
        return GPUQ_E_NO_MEMORY;
    slowlog_init(&L->sl);
    srv->rlog = L;
    return 0;
}

void request_log_close(server *srv)
{
    request_log *L = srv->rlog;
    if (!L)
        return;
    monitor_list_close(&L->mon);
    slowlog_free(&L->sl);
    free(L);
    srv->rlog = NULL;
}

/* The slowlog's capacity follows slowlog_len (set, reloaded). */
static void request_log_follow_len(request_log *L, uint64_t len)
{
    if (len == L->want_len)
        return;
    L->want_len = len;
    if (slowlog_resize(&L->sl, (size_t)len) < 0)
        log_warn("slowlog_len %llu: out of memory; keeping %zu records", (unsigned long long)len,
                 L->sl.cap);
}

static const char *const transport_names[] = {"none", "socket", "arena", "resident", "mixed"};

static int transport_of_kind(gpuq_ref_kind k)
{
    return k == GPUQ_REF_WIRE ? REQLOG_SOCKET : k == GPUQ_REF_NAME ? REQLOG_RESIDENT : REQLOG_ARENA;
}

/* How r's arrays travelled: its inputs' and outputs' kinds. */
static int request_log_transport(const request *r)
{
    uint32_t nin = r->sz.nin, nout = r->sz.nout;
    uint32_t named = (r->req.ndim_a > 0) + (r->req.ndim_b > 0);
    if (named > nin)
        nin = named;
    if (r->req.nin_ref > nin)
        nin = r->req.nin_ref;
    if (r->req.nout_ref > nout)
        nout = r->req.nout_ref;
    int t = REQLOG_NONE;
    for (uint32_t k = 0; k < nin + nout && k < GPUQ_MAX_INPUTS + GPUQ_MAX_OUTPUTS; k++) {
        int kt = transport_of_kind(k < nin ? gpuq_request_in_kind(&r->req, k)
                                           : gpuq_request_out_kind(&r->req, k - nin));
        t = t == REQLOG_NONE || t == kt ? kt : REQLOG_MIXED;
    }
    return t;
}

static double ns_us(uint64_t a, uint64_t b)
{
    return b > a ? (double)(b - a) / 1e3 : 0.0;
}

static void request_log_build(const request *r, uint64_t now, reqlog_rec *rec)
{
    const session *s = r->s;
    memset(rec, 0, sizeof *rec);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rec->wall_us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    rec->session = s->id;
    rec->id = r->req.id;
    rec->uid = s->uid == (uid_t)-1 ? -1 : (int64_t)s->uid;
    rec->pid = (int32_t)s->pid;
    snprintf(rec->client, sizeof rec->client, "%s", s->client);
    rec->op = (int)r->req.op;
    rec->dtype = (int)(r->req.dtype ? r->req.dtype : r->compute ? r->sz.out_dtype : 0);
    rec->ndim = r->req.ndim_a;
    rec->ndim_b = r->req.ndim_b;
    memcpy(rec->shape, r->req.shape_a, sizeof rec->shape);
    memcpy(rec->shape_b, r->req.shape_b, sizeof rec->shape_b);
    rec->priority = s->priority;
    rec->transport = request_log_transport(r);
    /* queue: from its input in place until its turn on the device (or
     * until now, answered while it waited); kernel: the backend's device
     * time when it measured it (timing asked), else submit to completion */
    uint64_t ready = r->job.submit_ns;
    if (ready)
        rec->queue_us = ns_us(ready, r->run_ns ? r->run_ns : now);
    if (r->run_ns) {
        if (r->req.timing && r->status == 0 && r->job.timing.kernel_us > 0)
            rec->kernel_us = r->job.timing.kernel_us;
        else
            rec->kernel_us = ns_us(r->run_ns, r->done_ns ? r->done_ns : now);
    }
    rec->total_us = ns_us(r->t0_ns, now);
    rec->status = r->status;
    if (r->status < 0)
        snprintf(rec->message, sizeof rec->message, "%s", r->message);
    rec->bytes_in = r->sz.payload;
    if (r->status == 0)
        rec->bytes_out = r->compute ? r->sz.output : r->doc_len;
}

/* rec's map members (REQLOG_MEMBERS of them) onto w. */
#define REQLOG_MEMBERS 20
static void request_log_members(gpuq_mpw *w, const reqlog_rec *rec)
{
    const char *op = gpuq_op_name((gpuq_op)rec->op), *dt = gpuq_dtype_name((gpuq_dtype)rec->dtype);
    const char *prio = gpuq_prio_name(rec->priority);
    gpuq_mpw_str(w, "time_us");
    gpuq_mpw_uint(w, rec->wall_us);
    gpuq_mpw_str(w, "session");
    gpuq_mpw_uint(w, rec->session);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, rec->id);
    gpuq_mpw_str(w, "uid");
    gpuq_mpw_int(w, rec->uid);
    gpuq_mpw_str(w, "pid");
    gpuq_mpw_int(w, rec->pid);
    gpuq_mpw_str(w, "client");
    gpuq_mpw_str(w, rec->client);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, op ? op : "");
    gpuq_mpw_str(w, "dtype");
    gpuq_mpw_str(w, dt && rec->ndim ? dt : "");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, rec->ndim);
    for (uint32_t k = 0; k < rec->ndim && k < GPUQ_MAX_DIMS; k++)
        gpuq_mpw_uint(w, rec->shape[k]);
    gpuq_mpw_str(w, "shape_b");
    gpuq_mpw_array(w, rec->ndim_b);
    for (uint32_t k = 0; k < rec->ndim_b && k < GPUQ_MAX_DIMS; k++)
        gpuq_mpw_uint(w, rec->shape_b[k]);
    gpuq_mpw_str(w, "priority");
    gpuq_mpw_str(w, prio ? prio : "");
    gpuq_mpw_str(w, "transport");
    gpuq_mpw_str(w, transport_names[rec->transport]);
    gpuq_mpw_str(w, "queue_us");
    gpuq_mpw_double(w, rec->queue_us);
    gpuq_mpw_str(w, "kernel_us");
    gpuq_mpw_double(w, rec->kernel_us);
    gpuq_mpw_str(w, "total_us");
    gpuq_mpw_double(w, rec->total_us);
    gpuq_mpw_str(w, "outcome");
    gpuq_mpw_str(w, rec->status == 0 ? "ok" : gpuq_errname(rec->status));
    gpuq_mpw_str(w, "code");
    gpuq_mpw_int(w, rec->status);
    gpuq_mpw_str(w, "message");
    gpuq_mpw_str(w, rec->message);
    gpuq_mpw_str(w, "bytes_in");
    gpuq_mpw_uint(w, rec->bytes_in);
    gpuq_mpw_str(w, "bytes_out");
    gpuq_mpw_uint(w, rec->bytes_out);
}

/* us in the unit that reads best ("843 us", "33.5 ms", "7.01 s"; ASCII:
 * the journal's line). */
static const char *request_log_fmt_us(double us, char *buf, size_t cap)
{
    /* %.3g rounds 999.7 up to 1e+03: the next unit from 999.5 on */
    if (us < 999.5)
        snprintf(buf, cap, "%.3g us", us);
    else if (us < 999.5e3)
        snprintf(buf, cap, "%.3g ms", us / 1e3);
    else if (us < 999.5e6)
        snprintf(buf, cap, "%.3g s", us / 1e6);
    else
        snprintf(buf, cap, "%.0f s", us / 1e6);
    return buf;
}

static void request_log_debug(const reqlog_rec *rec)
{
    char q[24], k[24], t[24];
    const char *op = gpuq_op_name((gpuq_op)rec->op), *dt = gpuq_dtype_name((gpuq_dtype)rec->dtype);
    char shape[96] = "";
    if (rec->ndim) {
        int n = snprintf(shape, sizeof shape, " [%llu", (unsigned long long)rec->shape[0]);
        for (uint32_t dim = 1; dim < rec->ndim && dim < GPUQ_MAX_DIMS && n > 0; dim++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "x%llu",
                          (unsigned long long)rec->shape[dim]);
        if (rec->ndim_b && n > 0)
            n += snprintf(shape + n, sizeof shape - (size_t)n, ", %llu%s%llu",
                          (unsigned long long)rec->shape_b[0], rec->ndim_b > 1 ? "x" : "",
                          rec->ndim_b > 1 ? (unsigned long long)rec->shape_b[1] : 0ull);
        if (n > 0 && (size_t)n < sizeof shape - 1)
            snprintf(shape + n, sizeof shape - (size_t)n, "]");
    }
    log_debug("request: session %llu '%s' uid %lld id %llu %s%s%s%s priority %s via %s: "
              "queue %s, kernel %s, total %s, %llu B in, %llu B out: %s%s%s",
              (unsigned long long)rec->session, rec->client, (long long)rec->uid,
              (unsigned long long)rec->id, op ? op : "?", rec->ndim && dt ? " " : "",
              rec->ndim && dt ? dt : "", shape, gpuq_prio_name(rec->priority),
              transport_names[rec->transport], request_log_fmt_us(rec->queue_us, q, sizeof q),
              request_log_fmt_us(rec->kernel_us, k, sizeof k),
              request_log_fmt_us(rec->total_us, t, sizeof t), (unsigned long long)rec->bytes_in,
              (unsigned long long)rec->bytes_out,
              rec->status == 0 ? "ok" : gpuq_errname(rec->status), rec->status ? ": " : "",
              rec->message);
}

void request_log_done(request *r)
{
    server *srv = r->s->srv;
    request_log *L = srv->rlog;
    if (!L)
        return;
    request_log_follow_len(L, srv->cfg.slowlog_len);
    uint64_t now = uv_hrtime();
    double total_us = ns_us(r->t0_ns, now);
    bool slow = slowlog_wants(&L->sl, total_us, srv->cfg.slowlog_min_us);
    bool debug = srv->cfg.log_level >= LOG_LVL_DEBUG;
    if (!slow && !debug && !monitor_any(&L->mon))
        return; /* nobody watches: nothing built */
    reqlog_rec rec;
    request_log_build(r, now, &rec);
    if (slow)
        slowlog_offer(&L->sl, &rec, srv->cfg.slowlog_min_us);
    if (debug)
        request_log_debug(&rec);
    if (!monitor_any(&L->mon))
        return;
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *members = NULL;
    size_t len = 0;
    if (w)
        request_log_members(w, &rec);
    if (!w || gpuq_mpw_take(w, &members, &len) < 0) {
        members = NULL; /* each monitor counts it dropped */
        len = 0;
    }
    gpuq_mpw_free(w);
    monitor_publish(&L->mon, r->s, rec.uid, members, len, REQLOG_MEMBERS, srv->cfg.monitor_queue);
    free(members);
}

void request_log_session_closed(session *s)
{
    monitor_session_closed(s);
}

static int request_log_take_info(request *r, gpuq_mpw *w)
{
    int rc = gpuq_mpw_take(w, &r->info, &r->info_len);
    gpuq_mpw_free(w);
    return rc;
}

int request_log_slowlog(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    request_log *L = srv->rlog;
    request_log_follow_len(L, srv->cfg.slowlog_len);
    const reqlog_rec **order = L->sl.n ? malloc(L->sl.n * sizeof *order) : NULL;
    if (L->sl.n && !order)
        return GPUQ_E_NO_MEMORY;
    size_t n = slowlog_sorted(&L->sl, order, L->sl.n);
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w) {
        free(order);
        return GPUQ_E_NO_MEMORY;
    }
    uint32_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s->caps.admin && order[i]->uid != (int64_t)s->uid)
            continue; /* others' requests: admins only */
        gpuq_mpw_map(w, REQLOG_MEMBERS);
        request_log_members(w, order[i]);
        shown++;
    }
    free(order);
    int rc = shown ? gpuq_mpw_take(w, &r->doc, &r->doc_len) : 0;
    gpuq_mpw_free(w);
    if (rc < 0)
        return rc;
    if (!(w = gpuq_mpw_new()))
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 5);
    gpuq_mpw_str(w, "format");
    gpuq_mpw_str(w, "msgpack-stream");
    gpuq_mpw_str(w, "count");
    gpuq_mpw_uint(w, shown);
    gpuq_mpw_str(w, "slowlog_len");
    gpuq_mpw_uint(w, L->sl.cap);
    gpuq_mpw_str(w, "slowlog_min_us");
    gpuq_mpw_uint(w, srv->cfg.slowlog_min_us);
    gpuq_mpw_str(w, "entered");
    gpuq_mpw_uint(w, L->sl.entered);
    return request_log_take_info(r, w);
}

int request_log_slowlog_reset(request *r)
{
    session *s = r->s;
    request_log *L = s->srv->rlog;
    size_t n = L->sl.n;
    slowlog_reset(&L->sl);
    log_info("slowlog reset by session %llu (uid %d): %zu records cleared",
             (unsigned long long)s->id, s->uid == (uid_t)-1 ? -1 : (int)s->uid, n);
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_map(w, 1);
    gpuq_mpw_str(w, "cleared");
    gpuq_mpw_uint(w, n);
    return request_log_take_info(r, w);
}

int request_log_monitor(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    int rc = monitor_start(&srv->rlog->mon, s, r->req.id, r->message, sizeof r->message);
    if (rc < 0)
        return rc;
    log_debug("session %llu: monitor %llu started (%s, queue %llu bytes)",
              (unsigned long long)s->id, (unsigned long long)r->req.id,
              s->caps.admin ? "every session" : "its uid's sessions",
              (unsigned long long)srv->cfg.monitor_queue);
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w) {
        monitor_stop(s, r->req.id);
        return GPUQ_E_NO_MEMORY;
    }
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "all");
    gpuq_mpw_bool(w, s->caps.admin);
    gpuq_mpw_str(w, "queue_bytes");
    gpuq_mpw_uint(w, srv->cfg.monitor_queue);
    return request_log_take_info(r, w);
}

bool request_log_cancel(session *s, uint64_t id)
{
    return monitor_stop(s, id);
}
