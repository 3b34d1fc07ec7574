/* SPDX-License-Identifier: Apache-2.0 */
/* started.c - see started.h. */
#include "started.h"

#include <stdlib.h>
#include <string.h>

#include "header.h"
#include "log.h"
#include "session.h"

typedef struct started_frame {
    session_frame f; /* first: the session's list links this */
    uint8_t *buf;
    size_t len;
} started_frame;

static int started_encode(session_frame *f, uv_buf_t bufs[2], unsigned *nbufs)
{
    started_frame *sf = (started_frame *)f;
    bufs[0] = uv_buf_init((char *)sf->buf, (unsigned)sf->len);
    *nbufs = 1;
    f->send_handle = NULL;
    return 0;
}

static void started_done(session_frame *f, int status)
{
    (void)status; /* written, failed or dropped with its session */
    started_frame *sf = (started_frame *)f;
    free(sf->buf);
    free(sf);
}

static const session_frame_ops started_frame_ops = {
    .encode = started_encode,
    .done = started_done,
};

void started_send(request *r)
{
    /* once; and never after the reply, whose place it would take */
    if (!r->req.progress || r->started_sent || r->out.ops)
        return;
    r->started_sent = true;
    started_frame *sf = calloc(1, sizeof *sf);
    gpuq_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.id = r->req.id;
    rep.started = true;
    if (!sf || gpuq_reply_frame(&rep, 0, &sf->buf, &sf->len) < 0) {
        log_debug("session %llu: no memory for request %llu's started notice",
                  (unsigned long long)r->s->id, (unsigned long long)r->req.id);
        free(sf);
        return;
    }
    sf->f.ops = &started_frame_ops;
    sf->f.seq = r->out.seq; /* the reply's place, before the reply */
    sf->f.extra = true;
    session_send(r->s, &sf->f);
}
