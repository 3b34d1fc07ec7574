/* SPDX-License-Identifier: Apache-2.0 */
/* call.c - libgpuq's blocking calls, gpuq_call and gpuq_call_req: the
 * request path of conn.c with the arrays staged through the connection's
 * staging arena when its transport says so (stage.c), the results copied
 * out of it after the reply, and the request given up when its wait is
 * interrupted. Pipelined submits (conn.c) never stage.
 *
 * A staged request may go gated (stage.h): sent before its inputs are in
 * the arena, which stage_feed then copies, announcing each piece with a
 * "ready". The wait reads the readies' replies after the request's (conn.c,
 * conn_follow_last), so an interrupted wait gives up the request alone and
 * the next wait still reads them all: the connection stays in step.
 */
#include <stddef.h>

#include "conn.h"
#include "conn_defs.h"
#include "conn_err.h"
#include "stage.h"

int gpuq_call(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
              size_t b_len, void *out, size_t out_cap, gpuq_reply *rep)
{
    gpuq_reply tmp;
    if (!rep)
        rep = &tmp;
    bool staged = false, own_gate = req->gate;
    int rc = conn_blocking_ready(c);
    int ifd = c->cancel.intr_fd; /* staging's own calls (arena_open) are not interrupted */
    c->cancel.intr_fd = -1;
    rc = rc ? rc : stage_call(c, req, a, a_len, b, b_len, out, out_cap, &staged);
    c->cancel.intr_fd = ifd;
    if (rc)
        return rc;
    if (staged) {
        uint64_t id = 0;
        rc = gpuq_submit(c, req, NULL, 0, NULL, 0, NULL, 0, &id);
        req->nin_ref = req->nout_ref = 0; /* the caller's request as it came */
        req->gate = own_gate;
        if (rc == 0 && (rc = stage_feed(c, id)) == 0) {
            rc = gpuq_wait(c, rep);
            if (rc == GPUQ_E_INTERRUPTED)
                conn_orphan_head(c);
        }
        stage_end(c, rc == 0);
        return rc;
    }
    if ((rc = gpuq_submit(c, req, a, a_len, b, b_len, out, out_cap, NULL)))
        return rc;
    rc = gpuq_wait(c, rep);
    if (rc == GPUQ_E_INTERRUPTED)
        conn_orphan_head(c);
    if (rc == 0 && c->reply.last_payload != out_cap)
        return conn_set_err(c, GPUQ_E_SIZE_MISMATCH, "result of %llu bytes, expected %zu",
                            (unsigned long long)c->reply.last_payload, out_cap);
    return rc;
}

int gpuq_call_req(gpuq_conn *c, gpuq_req *r, gpuq_result *res)
{
    uint64_t id = 0;
    int rc = conn_blocking_ready(c);
    if (rc == 0 && (rc = conn_submit_req(c, r, stage_req, true, &id)) == 0 &&
        (rc = stage_feed(c, id)) == 0) {
        rc = gpuq_wait_req(c, res);
        if (rc == GPUQ_E_INTERRUPTED)
            conn_orphan_head(c);
    } else if (res) {
        result_reset(res);
        res->status = rc;
    }
    stage_end(c, rc == 0);
    return rc;
}
