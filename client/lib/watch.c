/* SPDX-License-Identifier: Apache-2.0 */
/* watch.c - watching gpuqd's requests: gpuq_slowlog, gpuq_slowlog_reset
 * and gpuq_monitor (PROTOCOL.md 3.6; gpuq.h).
 *
 * gpuq_monitor is a blocking call that owns the connection while it runs:
 * it sends `monitor`, reads its ok reply through the request queue, then
 * reads record frames itself (each a reply frame with the monitor's id and
 * a "monitor" key; their info map goes to the caller's function). To stop
 * (the function returned nonzero, or the interrupt fd became readable) it
 * sends `cancel` of the monitor request and reads on, dropping the records
 * still on their way, until the cancel's reply: gpuqd sends no record
 * after it, so the connection is then in step and free for other calls.
 *
 * Failures: a refused monitor (an error reply) returns its code; a
 * transport error breaks the connection as for any call; a frame that is
 * neither a record nor the cancel's reply (gpuqd's final reply before it
 * closes the connection, e.g. reply_timeout) returns that reply's code.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "conn_defs.h"
#include "conn_err.h"
#include "mpread.h"

/* A blocking call of op into c's scratch result. */
static int watch_call(gpuq_conn *c, const char *op)
{
    gpuq_req *r = gpuq_req_new(op);
    if (!r)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory building a request");
    int rc = gpuq_call_req(c, r, &c->scratch);
    gpuq_req_free(r);
    return rc;
}

int gpuq_slowlog(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count)
{
    *doc = NULL;
    *len = 0;
    if (count)
        *count = 0;
    int rc = watch_call(c, "slowlog");
    if (rc)
        return rc;
    const uint8_t *data = NULL, *info = NULL;
    size_t dlen = 0, ilen = 0;
    gpuq_result_payload(&c->scratch, &data, &dlen);
    uint8_t *d = malloc(dlen + 1);
    if (!d)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory");
    if (dlen)
        memcpy(d, data, dlen);
    d[dlen] = '\0';
    *doc = d;
    *len = dlen;
    if (count && gpuq_result_info(&c->scratch, &info, &ilen) == 0) {
        uint64_t v = 0;
        (void)gpuq_mpr_map_uint(info, ilen, "count", &v);
        *count = (uint32_t)v;
    }
    return 0;
}

int gpuq_slowlog_reset(gpuq_conn *c, uint64_t *cleared)
{
    int rc = watch_call(c, "slowlog_reset");
    const uint8_t *info = NULL;
    size_t ilen = 0;
    if (rc == 0 && cleared && gpuq_result_info(&c->scratch, &info, &ilen) == 0)
        (void)gpuq_mpr_map_uint(info, ilen, "cleared", cleared);
    return rc;
}

/* The cancel just read raw was the queue's only entry: forget it. */
static void watch_pop_head(gpuq_conn *c)
{
    if (c->q_len == 0)
        return;
    c->q_head = (c->q_head + 1) % c->q_cap;
    c->q_len--;
}

/* Stop monitor mid: cancel it and read until the cancel's reply. */
static int watch_stop(gpuq_conn *c, uint64_t mid)
{
    uint64_t cid;
    int ifd = c->cancel.intr_fd;
    c->cancel.intr_fd = -1; /* the stop itself is not interrupted */
    int rc = gpuq_submit_cancel(c, mid, &cid);
    while (rc == 0) {
        gpuq_reply rep;
        int st = gpuq_recv_reply(c, &rep, NULL, 0);
        if (c->broken) {
            rc = c->broken;
            break;
        }
        if (rep.id == cid) {
            watch_pop_head(c);
            rc = st;
            break;
        }
        if (rep.id != mid) { /* gpuqd's final reply: it closes the connection */
            rc = st < 0 ? st : conn_break(c, GPUQ_E_PROTOCOL, "unexpected reply while stopping");
            break;
        }
    }
    c->cancel.intr_fd = ifd;
    return rc;
}

int gpuq_monitor(gpuq_conn *c, gpuq_monitor_fn fn, void *user)
{
    int rc = conn_blocking_ready(c);
    if (rc)
        return rc;
    if (!fn)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: gpuq_monitor needs a function");
    gpuq_req *r = gpuq_req_new("monitor");
    if (!r)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory building a request");
    uint64_t mid;
    rc = gpuq_submit_req(c, r, &mid);
    gpuq_req_free(r);
    if (rc)
        return rc;
    if ((rc = gpuq_wait_req(c, &c->scratch)) != 0)
        return rc; /* refused, or the stream broke */
    for (;;) {
        rc = cancel_wait(c, c->fd, mid);
        if (rc == GPUQ_E_INTERRUPTED) {
            int src = watch_stop(c, mid);
            return src ? src
                       : conn_set_err(c, GPUQ_E_INTERRUPTED, "interrupted: the monitor stopped");
        }
        if (rc)
            return rc == GPUQ_E_IO ? conn_break(c, rc, "poll") : rc;
        gpuq_reply rep;
        int st = gpuq_recv_reply(c, &rep, NULL, 0);
        if (c->broken)
            return c->broken;
        if (rep.id != mid || st != 0) /* gpuqd's last word before it closes */
            return st < 0 ? st
                          : conn_break(c, GPUQ_E_PROTOCOL, "unexpected reply while monitoring");
        if (fn(user, rep.info, rep.info_len))
            return watch_stop(c, mid);
    }
}
