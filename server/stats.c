/* stats.c - see stats.h. */
#include "stats.h"

#include <unistd.h>

#include "server_defs.h"

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

void stats_status_info(const server *srv, gpuq_mpw *w)
{
    const stats *st = &srv->stats;
    gpuq_mpw_map(w, 15);
    gpuq_mpw_str(w, "version");
    gpuq_mpw_uint(w, GPUQ_PROTO_VERSION);
    gpuq_mpw_str(w, "server");
    gpuq_mpw_str(w, "gpuqd " GPUQD_VERSION);
    gpuq_mpw_str(w, "uptime_s");
    gpuq_mpw_double(w, (double)(uv_hrtime() - srv->start_ns) / 1e9);
    gpuq_mpw_str(w, "backend");
    gpuq_mpw_str(w, srv->b->ops->name);
    gpuq_mpw_str(w, "devices");
    srv->b->ops->devices(srv->b, w);
    gpuq_mpw_str(w, "sessions");
    gpuq_mpw_uint(w, srv->nsessions);
    gpuq_mpw_str(w, "in_flight");
    gpuq_mpw_uint(w, srv->inflight);
    gpuq_mpw_str(w, "staging_bytes");
    gpuq_mpw_uint(w, srv->st.in_use);
    gpuq_mpw_str(w, "staging_capacity");
    gpuq_mpw_uint(w, srv->st.capacity);
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
    gpuq_mpw_str(w, "sessions_total");
    gpuq_mpw_uint(w, st->sessions_total);
    gpuq_mpw_str(w, "pid");
    gpuq_mpw_uint(w, (uint64_t)getpid());
}
