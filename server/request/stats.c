/* SPDX-License-Identifier: Apache-2.0 */
/* stats.c - see stats.h. */
#include "stats.h"

#include <unistd.h>

#include "request_log.h"
#include "scheduler.h"
#include "server_defs.h"
#include "session.h"
#include "session_timeout.h"

void stats_request(stats *st, gpuq_op op)
{
    if ((unsigned)op < GPUQ_OP_COUNT)
        st->requests[op]++;
}

void stats_error(stats *st, int code)
{
    if (code < 0 && code >= GPUQ_E_LAST)
        st->errors[-code]++;
}

void stats_devices(const server *srv, gpuq_mpw *w)
{
    backend *b = srv->b;
    int n = b->ops->ndevices(b);
    gpuq_mpw_array(w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        backend_device d;
        b->ops->device_info(b, i, &d);
        gpuq_mpw_map(w, 8);
        gpuq_mpw_str(w, "index");
        gpuq_mpw_int(w, d.index);
        gpuq_mpw_str(w, "name");
        gpuq_mpw_str(w, d.name);
        gpuq_mpw_str(w, "total_memory");
        gpuq_mpw_uint(w, d.total_memory);
        gpuq_mpw_str(w, "memory_in_use");
        gpuq_mpw_uint(w, d.memory_in_use);
        gpuq_mpw_str(w, "sessions");
        gpuq_mpw_uint(w, d.sessions);
        gpuq_mpw_str(w, "in_flight");
        gpuq_mpw_uint(w, d.in_flight);
        gpuq_mpw_str(w, "queued");
        gpuq_mpw_uint(w, sched_queued(srv, d.index));
        gpuq_mpw_str(w, "bytes");
        gpuq_mpw_uint(w, d.bytes);
    }
}

int stats_sessions_doc(const server *srv, const session *viewer, uint8_t **out, size_t *len,
                       uint32_t *count)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return GPUQ_E_NO_MEMORY;
    uint64_t now = uv_hrtime();
    uint32_t n = 0;
    for (const session *s = srv->sessions; s; s = s->next) {
        if (s->closing || (!viewer->caps.admin && s->uid != viewer->uid))
            continue;
        n++;
        /* its current op: the oldest compute request not yet answered
         * (s->unanswered lists them newest first) */
        const request *cur = s->unanswered;
        while (cur && cur->lnext)
            cur = cur->lnext;
        gpuq_mpw_map(w, 20);
        gpuq_mpw_str(w, "current_op");
        gpuq_mpw_str(w, cur ? gpuq_op_name(cur->req.op) : "");
        gpuq_mpw_str(w, "current_bytes");
        gpuq_mpw_uint(w, cur ? cur->sz.payload : 0);
        gpuq_mpw_str(w, "current_us");
        gpuq_mpw_double(w, cur && now > cur->t0_ns ? (double)(now - cur->t0_ns) / 1e3 : 0.0);
        gpuq_mpw_str(w, "current_state");
        gpuq_mpw_str(w, !cur ? "" : cur->running ? "running" : cur->queued ? "queued" : "waiting");
        gpuq_mpw_str(w, "id");
        gpuq_mpw_uint(w, s->id);
        gpuq_mpw_str(w, "pid");
        gpuq_mpw_int(w, s->pid);
        gpuq_mpw_str(w, "uid");
        gpuq_mpw_int(w, s->uid == (uid_t)-1 ? -1 : (int64_t)s->uid);
        gpuq_mpw_str(w, "client");
        gpuq_mpw_str(w, s->client);
        gpuq_mpw_str(w, "priority");
        gpuq_mpw_str(w, s->hello_done ? gpuq_prio_name(s->priority) : "");
        gpuq_mpw_str(w, "stream_priority");
        gpuq_mpw_int(w, s->binfo.priority_granted);
        gpuq_mpw_str(w, "device");
        gpuq_mpw_int(w, s->hello_done ? s->binfo.device : -1);
        gpuq_mpw_str(w, "admin");
        gpuq_mpw_bool(w, s->caps.admin);
        gpuq_mpw_str(w, "in_flight");
        gpuq_mpw_uint(w, s->inflight);
        gpuq_mpw_str(w, "requests");
        gpuq_mpw_uint(w, s->nrequests);
        gpuq_mpw_str(w, "errors");
        gpuq_mpw_uint(w, s->nerrors);
        gpuq_mpw_str(w, "bytes_in");
        gpuq_mpw_uint(w, s->bytes_in);
        gpuq_mpw_str(w, "bytes_out");
        gpuq_mpw_uint(w, s->bytes_out);
        gpuq_mpw_str(w, "staging_bytes");
        gpuq_mpw_uint(w, s->staging_used);
        gpuq_mpw_str(w, "age_s");
        gpuq_mpw_double(w, (double)(now - s->start_ns) / 1e9);
        gpuq_mpw_str(w, "self");
        gpuq_mpw_bool(w, s == viewer);
    }
    *count = n;
    int rc = gpuq_mpw_take(w, out, len);
    gpuq_mpw_free(w);
    return rc;
}

void stats_server_keys(const server *srv, gpuq_mpw *w)
{
    gpuq_mpw_str(w, "version");
    gpuq_mpw_uint(w, GPUQ_PROTO_VERSION);
    gpuq_mpw_str(w, "server");
    gpuq_mpw_str(w, "gpuqd " GPUQD_VERSION);
    gpuq_mpw_str(w, "backend");
    gpuq_mpw_str(w, srv->b->ops->name);
    gpuq_mpw_str(w, "devices");
    stats_devices(srv, w);
}

void stats_status_info(const server *srv, gpuq_mpw *w)
{
    const stats *st = &srv->stats;
    gpuq_mpw_map(w, STATS_SERVER_KEYS + 36);
    stats_server_keys(srv, w);
    gpuq_mpw_str(w, "uptime_s");
    gpuq_mpw_double(w, (double)(uv_hrtime() - srv->start_ns) / 1e9);
    gpuq_mpw_str(w, "state");
    gpuq_mpw_str(w, srv->draining ? "shutting_down" : srv->accept_stopped ? "draining" : "serving");
    gpuq_mpw_str(w, "sessions");
    gpuq_mpw_uint(w, srv->nsessions);
    gpuq_mpw_str(w, "in_flight");
    gpuq_mpw_uint(w, srv->inflight);
    gpuq_mpw_str(w, "staging_bytes");
    gpuq_mpw_uint(w, srv->st.in_use);
    gpuq_mpw_str(w, "staging_capacity");
    gpuq_mpw_uint(w, srv->st.capacity);
    gpuq_mpw_str(w, "staging_released");
    gpuq_mpw_uint(w, srv->st.released_total);
    /* shared-memory arenas mapped (closed ones still used by work included) */
    gpuq_mpw_str(w, "arenas");
    gpuq_mpw_uint(w, srv->arena_books.count);
    gpuq_mpw_str(w, "arena_bytes");
    gpuq_mpw_uint(w, srv->arena_books.bytes);
    /* resident arrays named, the bytes of all that exist (replaced or
     * removed ones still used, and reservations, included), per owner */
    const resident_books *rb = &srv->resident;
    gpuq_mpw_str(w, "resident_arrays");
    gpuq_mpw_uint(w, rb->named);
    gpuq_mpw_str(w, "resident_bytes");
    gpuq_mpw_uint(w, rb->bytes);
    gpuq_mpw_str(w, "resident_owners");
    gpuq_mpw_array(w, rb->nowners);
    for (uint32_t i = 0; i < rb->nowners; i++) {
        gpuq_mpw_map(w, 3);
        gpuq_mpw_str(w, "uid");
        gpuq_mpw_uint(w, (uint64_t)rb->owners[i].uid);
        gpuq_mpw_str(w, "arrays");
        gpuq_mpw_uint(w, rb->owners[i].arrays);
        gpuq_mpw_str(w, "bytes");
        gpuq_mpw_uint(w, rb->owners[i].bytes);
    }
    gpuq_mpw_str(w, "timeouts");
    gpuq_mpw_map(w, TIMEOUT_KINDS);
    for (int k = 0; k < TIMEOUT_KINDS; k++) {
        gpuq_mpw_str(w, session_timeout_name(k));
        gpuq_mpw_uint(w, srv->timeouts[k]);
    }
    gpuq_mpw_str(w, "requests");
    gpuq_mpw_map(w, GPUQ_OP_COUNT - 1);
    for (int op = 1; op < GPUQ_OP_COUNT; op++) {
        gpuq_mpw_str(w, gpuq_op_name((gpuq_op)op));
        gpuq_mpw_uint(w, st->requests[op]);
    }
    uint32_t nerr = 0;
    for (int i = 1; i <= -GPUQ_E_LAST; i++)
        nerr += st->errors[i] != 0;
    gpuq_mpw_str(w, "errors");
    gpuq_mpw_map(w, nerr);
    for (int i = 1; i <= -GPUQ_E_LAST; i++) {
        if (st->errors[i]) {
            gpuq_mpw_str(w, gpuq_errname(-i));
            gpuq_mpw_uint(w, st->errors[i]);
        }
    }
    gpuq_mpw_str(w, "bytes_in");
    gpuq_mpw_uint(w, st->bytes_in);
    gpuq_mpw_str(w, "bytes_out");
    gpuq_mpw_uint(w, st->bytes_out);
    gpuq_mpw_str(w, "read_yields");
    gpuq_mpw_uint(w, srv->read_yields);
    gpuq_mpw_str(w, "io_threads");
    gpuq_mpw_uint(w, io_pool_threads(srv->io));
    gpuq_mpw_str(w, "io_reads");
    gpuq_mpw_uint(w, srv->io_reads);
    gpuq_mpw_str(w, "io_writes");
    gpuq_mpw_uint(w, srv->io_writes);
    gpuq_mpw_str(w, "sessions_total");
    gpuq_mpw_uint(w, st->sessions_total);
    gpuq_mpw_str(w, "queued");
    gpuq_mpw_uint(w, sched_queued_all(srv));
    gpuq_mpw_str(w, "cancelled");
    gpuq_mpw_uint(w, srv->sched.cancelled);
    gpuq_mpw_str(w, "expired");
    gpuq_mpw_uint(w, srv->sched.expired);
    gpuq_mpw_str(w, "stopped");
    gpuq_mpw_uint(w, srv->sched.stopped);
    gpuq_mpw_str(w, "monitors"); /* connections attached by the monitor op now */
    gpuq_mpw_uint(w, srv->rlog ? srv->rlog->mon.n : 0);
    /* the backend's counters (PROTOCOL.md, status) */
    const backend *b = srv->b;
    const struct {
        const char *key;
        uint64_t v;
    } counts[] = {
        {"batches", b ? b->batches : 0},     {"batched", b ? b->batched : 0},
        {"pipelined", b ? b->pipelined : 0}, {"chunks", b ? b->chunks : 0},
        {"seen_spin", b ? b->seen_spin : 0}, {"seen_doorbell", b ? b->seen_doorbell : 0},
        {"seen_poll", b ? b->seen_poll : 0},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        gpuq_mpw_str(w, counts[i].key);
        gpuq_mpw_uint(w, counts[i].v);
    }
    /* pin and unpin calls made on the loop thread while sessions were
     * served (backend.h: backend_note_pin); 0 unless something pins there */
    gpuq_mpw_str(w, "loop_pins");
    gpuq_mpw_uint(w, backend_loop_pins(b));
    gpuq_mpw_str(w, "pid");
    gpuq_mpw_uint(w, (uint64_t)getpid());
}
