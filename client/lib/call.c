/* SPDX-License-Identifier: Apache-2.0 */
/* call.c - libgpuq's blocking calls, gpuq_call and gpuq_call_req: the
 * request path of conn.c with the arrays staged through the connection's
 * staging arena when its transport says so (stage.c), the results copied
 * out of it after the reply, and the request given up when its wait is
 * interrupted. Pipelined submits (conn.c) never stage.
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
    bool staged = false;
    int rc = conn_blocking_ready(c);
    int ifd = c->cancel.intr_fd; /* staging's own calls (arena_open) are not interrupted */
    c->cancel.intr_fd = -1;
    rc = rc ? rc : stage_call(c, req, a, a_len, b, b_len, out, out_cap, &staged);
    c->cancel.intr_fd = ifd;
    if (rc)
        return rc;
    if (staged) {
        rc = gpuq_submit(c, req, NULL, 0, NULL, 0, NULL, 0, NULL);
        req->nin_ref = req->nout_ref = 0; /* the caller's request as it came */
        rc = rc ? rc : gpuq_wait(c, rep);
        if (rc == GPUQ_E_INTERRUPTED)
            conn_orphan_head(c);
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
    int rc = conn_call(c, r, stage_req, res);
    stage_end(c, rc == 0);
    return rc;
}
