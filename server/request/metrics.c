/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c - see metrics.h. */
#include "metrics.h"
#include "scheduler.h"
#include "session.h"
#include "session_timeout.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_defs.h"

/* Upper bounds in seconds: 50 us to 10 s, roughly 1-2.5-5 steps. */
static const double bucket_le[METRICS_NBUCKETS] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                   0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                                   0.5,     1.0,    2.5,     5.0,    10.0};

void metrics_observe(metrics *m, gpuq_op op, int status, double seconds)
{
    unsigned o = (unsigned)op < GPUQ_OP_COUNT ? (unsigned)op : 0;
    unsigned st = (status < 0 && status >= GPUQ_E_LAST) ? (unsigned)-status : 0;
    if (status < GPUQ_E_LAST)
        st = -GPUQ_E_INTERNAL;
    m->count[o][st]++;
    m->sum[o][st] += seconds;
    for (int b = 0; b < METRICS_NBUCKETS; b++) {
        if (seconds <= bucket_le[b]) {
            m->bucket[o][st][b]++;
            break;
        }
    }
}

/* A growing text buffer; an allocation failure is sticky. */
typedef struct textbuf {
    char *p;
    size_t len, cap;
    bool oom;
} textbuf;

__attribute__((format(printf, 2, 3))) static void tb_printf(textbuf *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t ncap = t->cap ? t->cap * 2 : 8192;
        while (ncap < t->len + (size_t)n + 1)
            ncap *= 2;
        char *np = realloc(t->p, ncap);
        if (!np) {
            t->oom = true;
            return;
        }
        t->p = np;
        t->cap = ncap;
    }
}

static void tb_head(textbuf *t, const char *name, const char *type, const char *help)
{
    tb_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newline escaped as the format requires. */
static void label_escape(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; *s && o + 2 < cap; s++) {
        if (*s == '\\' || *s == '"') {
            out[o++] = '\\';
            out[o++] = *s;
        } else if (*s == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else {
            out[o++] = *s;
        }
    }
    out[o] = '\0';
}

static const char *op_label(unsigned o)
{
    const char *n = gpuq_op_name((gpuq_op)o);
    return n ? n : "none";
}

static const char *status_label(unsigned st)
{
    return st ? gpuq_errname(-(int)st) : "ok";
}

static void render_requests(textbuf *t, const metrics *m)
{
    tb_head(t, "gpuq_requests_total", "counter", "Requests answered, by op and status.");
    for (unsigned o = 0; o < GPUQ_OP_COUNT; o++)
        for (unsigned st = 0; st < METRICS_NSTATUS; st++)
            if (m->count[o][st])
                tb_printf(t, "gpuq_requests_total{op=\"%s\",status=\"%s\"} %llu\n", op_label(o),
                          status_label(st), (unsigned long long)m->count[o][st]);
    tb_head(t, "gpuq_request_duration_seconds", "histogram",
            "Time from a request's header read to its reply queued, by op and status.");
    for (unsigned o = 0; o < GPUQ_OP_COUNT; o++) {
        for (unsigned st = 0; st < METRICS_NSTATUS; st++) {
            if (!m->count[o][st])
                continue;
            const char *on = op_label(o), *sn = status_label(st);
            uint64_t cum = 0;
            for (int b = 0; b < METRICS_NBUCKETS; b++) {
                cum += m->bucket[o][st][b];
                tb_printf(t,
                          "gpuq_request_duration_seconds_bucket{op=\"%s\",status=\"%s\",le=\"%g\"} "
                          "%llu\n",
                          on, sn, bucket_le[b], (unsigned long long)cum);
            }
            tb_printf(t,
                      "gpuq_request_duration_seconds_bucket{op=\"%s\",status=\"%s\",le=\"+Inf\"} "
                      "%llu\n",
                      on, sn, (unsigned long long)m->count[o][st]);
            tb_printf(t, "gpuq_request_duration_seconds_sum{op=\"%s\",status=\"%s\"} %.9g\n", on,
                      sn, m->sum[o][st]);
            tb_printf(t, "gpuq_request_duration_seconds_count{op=\"%s\",status=\"%s\"} %llu\n", on,
                      sn, (unsigned long long)m->count[o][st]);
        }
    }
}

static void gauge(textbuf *t, const char *name, const char *help, double v)
{
    tb_head(t, name, "gauge", help);
    tb_printf(t, "%s %.17g\n", name, v);
}

static void counter(textbuf *t, const char *name, const char *help, uint64_t v)
{
    tb_head(t, name, "counter", help);
    tb_printf(t, "%s %llu\n", name, (unsigned long long)v);
}

typedef enum {
    DEV_MEM_TOTAL,
    DEV_MEM_USED,
    DEV_SESSIONS,
    DEV_INFLIGHT,
    DEV_BYTES,
    DEV_NFIELDS
} dev_field;

static void render_devices(textbuf *t, const server *srv)
{
    static const struct {
        const char *name, *type, *help;
    } defs[DEV_NFIELDS] = {
        {"gpuq_device_memory_bytes", "gauge",
         "Device memory of each device (0 on the CPU backend)."},
        {"gpuq_device_memory_used_bytes", "gauge",
         "Device bytes gpuqd has allocated from its pool."},
        {"gpuq_device_sessions", "gauge", "Sessions placed on each device."},
        {"gpuq_device_in_flight", "gauge", "Jobs submitted to each device and not completed."},
        {"gpuq_device_bytes_total", "counter",
         "Input plus output bytes of jobs run on each device."},
    };
    backend *b = srv->b;
    int n = b ? b->ops->ndevices(b) : 0;
    backend_device *devs = n > 0 ? calloc((size_t)n, sizeof *devs) : NULL;
    if (n > 0 && !devs) {
        t->oom = true;
        return;
    }
    for (int i = 0; i < n; i++) /* once per device: CUDA asks the pool */
        b->ops->device_info(b, i, &devs[i]);
    for (int f = 0; f < DEV_NFIELDS; f++) {
        tb_head(t, defs[f].name, defs[f].type, defs[f].help);
        for (int i = 0; i < n; i++) {
            const backend_device *d = &devs[i];
            char name[2 * sizeof d->name];
            label_escape(name, sizeof name, d->name);
            uint64_t v = f == DEV_MEM_TOTAL  ? d->total_memory
                         : f == DEV_MEM_USED ? d->memory_in_use
                         : f == DEV_SESSIONS ? d->sessions
                         : f == DEV_INFLIGHT ? d->in_flight
                                             : d->bytes;
            tb_printf(t, "%s{device=\"%d\",name=\"%s\"} %llu\n", defs[f].name, d->index, name,
                      (unsigned long long)v);
        }
    }
    free(devs);
}

int metrics_render(const server *srv, char **out, size_t *len)
{
    textbuf t = {0};
    const stats *st = &srv->stats;
    uint32_t waiting = 0;
    for (const session *s = srv->sessions; s; s = s->next)
        waiting += s->rstate == RS_WAIT_STAGING && !s->closing;
    tb_head(&t, "gpuq_build_info", "gauge", "gpuqd's version and backend (always 1).");
    tb_printf(&t, "gpuq_build_info{version=\"%s\",backend=\"%s\"} 1\n", GPUQD_VERSION,
              srv->b ? srv->b->ops->name : "none");
    gauge(&t, "gpuq_uptime_seconds", "Seconds since gpuqd started.",
          (double)(uv_hrtime() - srv->start_ns) / 1e9);
    gauge(&t, "gpuq_draining", "1 while gpuqd drains (drain or shutdown), else 0.",
          srv->draining || srv->accept_stopped);
    gauge(&t, "gpuq_sessions", "Open sessions.", srv->nsessions);
    counter(&t, "gpuq_sessions_opened_total", "Sessions accepted since start.", st->sessions_total);
    tb_head(&t, "gpuq_sessions_timed_out_total", "counter",
            "Sessions gpuqd closed because the client was too slow, by timeout.");
    for (int k = 0; k < TIMEOUT_KINDS; k++)
        tb_printf(&t, "gpuq_sessions_timed_out_total{timeout=\"%s\"} %llu\n",
                  session_timeout_name(k), (unsigned long long)srv->timeouts[k]);
    render_requests(&t, &srv->metrics);
    gauge(&t, "gpuq_in_flight", "Compute requests accepted and not yet answered.",
          (double)srv->inflight);
    gauge(&t, "gpuq_queue_depth", "Jobs submitted to the backend and not completed.",
          srv->b ? (double)srv->b->ops->inflight(srv->b) : 0);
    gauge(&t, "gpuq_queued_requests",
          "Compute requests waiting in the device queues for their turn (device_window, "
          "bulk_window).",
          (double)sched_queued_all(srv));
    tb_head(&t, "gpuq_requests_cancelled_total", "counter",
            "Requests cancelled: by a cancel request, or because their session closed.");
    tb_printf(&t, "gpuq_requests_cancelled_total{reason=\"cancel\"} %llu\n",
              (unsigned long long)(srv->sched.cancelled - srv->sched.dropped_closed));
    tb_printf(&t, "gpuq_requests_cancelled_total{reason=\"disconnect\"} %llu\n",
              (unsigned long long)srv->sched.dropped_closed);
    counter(&t, "gpuq_requests_expired_total",
            "Requests answered deadline_exceeded (not finished within their deadline_ms).",
            srv->sched.expired);
    counter(&t, "gpuq_requests_stopped_total",
            "Requests answered early (cancelled, expired, disconnected) whose work then stopped "
            "before its end.",
            srv->sched.stopped);
    counter(&t, "gpuq_batches_total",
            "Batches of two or more small requests that ran together (batch_max, batch_bytes).",
            srv->b ? srv->b->batches : 0);
    counter(&t, "gpuq_batched_requests_total", "Requests that ran in such batches.",
            srv->b ? srv->b->batched : 0);
    counter(&t, "gpuq_pipelined_requests_total",
            "Requests that ran in pipelined chunks (CUDA, chunk_bytes).",
            srv->b ? srv->b->pipelined : 0);
    counter(&t, "gpuq_pipeline_chunks_total", "The chunks those requests ran in.",
            srv->b ? srv->b->chunks : 0);
    tb_head(&t, "gpuq_completions_seen_total", "counter",
            "Finished CUDA jobs, by how gpuqd noticed: its loop's spin, a doorbell (a host "
            "function, slow to wake on some machines), the 100 ms poll.");
    if (srv->b) {
        tb_printf(&t, "gpuq_completions_seen_total{by=\"spin\"} %llu\n",
                  (unsigned long long)srv->b->seen_spin);
        tb_printf(&t, "gpuq_completions_seen_total{by=\"doorbell\"} %llu\n",
                  (unsigned long long)srv->b->seen_doorbell);
        tb_printf(&t, "gpuq_completions_seen_total{by=\"poll\"} %llu\n",
                  (unsigned long long)srv->b->seen_poll);
    }
    gauge(&t, "gpuq_staging_waiting_sessions", "Sessions paused until staging memory frees up.",
          waiting);
    counter(&t, "gpuq_received_bytes_total", "Bytes read from clients.", st->bytes_in);
    counter(&t, "gpuq_sent_bytes_total", "Bytes written to clients.", st->bytes_out);
    counter(&t, "gpuq_read_yields_total",
            "Times a session stopped reading after 1 MiB to let others in on the same turn.",
            srv->read_yields);
    counter(&t, "gpuq_io_thread_reads_total",
            "Payloads whose bulk an I/O thread read (io_bulk_min and more).", srv->io_reads);
    counter(&t, "gpuq_io_thread_writes_total",
            "Reply groups an I/O thread wrote (io_bulk_min bytes and more).", srv->io_writes);
    gauge(&t, "gpuq_pinned_bytes_in_use",
          "Staging bytes reserved by requests (page-locked on the CUDA backend).",
          (double)srv->st.in_use);
    gauge(&t, "gpuq_pinned_bytes_allocated", "Staging bytes allocated (kept for reuse).",
          (double)srv->st.capacity);
    gauge(&t, "gpuq_pinned_bytes_limit", "Staging bytes gpuqd may allocate (total_staging).",
          (double)srv->st.total_limit);
    counter(&t, "gpuq_pinned_bytes_released_total",
            "Staging bytes given back after being idle (above staging_keep).",
            srv->st.released_total);
    counter(&t, "gpuq_loop_pins_total",
            "Host memory pin and unpin calls made on the loop thread while sessions were "
            "served (0: all of them ran on the pinning thread).",
            backend_loop_pins(srv->b));
    gauge(&t, "gpuq_resident_arrays", "Resident arrays by name (PROTOCOL.md 3.5).",
          (double)srv->resident.named);
    tb_head(&t, "gpuq_resident_bytes", "gauge",
            "Bytes of resident arrays charged to each uid (replaced or removed ones still in "
            "use, and reservations, included).");
    for (uint32_t i = 0; i < srv->resident.nowners; i++)
        tb_printf(&t, "gpuq_resident_bytes{uid=\"%u\"} %llu\n",
                  (unsigned)srv->resident.owners[i].uid,
                  (unsigned long long)srv->resident.owners[i].bytes);
    render_devices(&t, srv);
    if (t.oom) {
        free(t.p);
        return GPUQ_E_NO_MEMORY;
    }
    *out = t.p;
    *len = t.len;
    return 0;
}
