/* SPDX-License-Identifier: Apache-2.0 */
/* monitor.c - see monitor.h. */
#include "monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "log.h"
#include "mpwrite.h"
#include "session.h"

struct monitor_sub {
    monitor_list *ml; /* NULL once detached */
    session *s;       /* borrowed while attached */
    uint64_t id;      /* the monitor request's id: every record frame's "id" */
    uint64_t queued;  /* bytes of its frames queued, not yet written or dropped */
    uint64_t dropped; /* records dropped since its last record frame */
    uint64_t dropped_total, sent;
    int refs; /* attached + each queued frame */
    monitor_sub *next;
};

/* One record frame in a session's write queue: prefix + header, no
 * payload. */
typedef struct monitor_frame {
    session_frame f; /* first: the session hands this back */
    monitor_sub *sub;
    size_t len;
    uint8_t buf[];
} monitor_frame;

static void monitor_sub_unref(monitor_sub *m)
{
    if (--m->refs == 0)
        free(m);
}

static void monitor_detach(monitor_sub *m)
{
    monitor_list *ml = m->ml;
    if (!ml)
        return;
    for (monitor_sub **pp = &ml->head; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    ml->n--;
    m->ml = NULL;
    m->next = NULL;
    if (m->s->monitor == m)
        m->s->monitor = NULL;
    log_debug("session %llu: monitor %llu stopped: %llu records sent, %llu dropped",
              (unsigned long long)m->s->id, (unsigned long long)m->id, (unsigned long long)m->sent,
              (unsigned long long)m->dropped_total);
    m->s = NULL;
    monitor_sub_unref(m);
}

int monitor_start(monitor_list *ml, session *s, uint64_t id, char *msg, size_t cap)
{
    if (s->monitor) {
        snprintf(msg, cap, "this connection monitors already (request %llu); cancel it first",
                 (unsigned long long)s->monitor->id);
        return GPUQ_E_BAD_ARGUMENT;
    }
    monitor_sub *m = calloc(1, sizeof *m);
    if (!m)
        return GPUQ_E_NO_MEMORY;
    m->ml = ml;
    m->s = s;
    m->id = id;
    m->refs = 1;
    m->next = ml->head;
    ml->head = m;
    ml->n++;
    s->monitor = m;
    return 0;
}

bool monitor_stop(session *s, uint64_t id)
{
    monitor_sub *m = s->monitor;
    if (!m || m->id != id)
        return false;
    monitor_detach(m);
    return true;
}

void monitor_session_closed(session *s)
{
    if (s->monitor)
        monitor_detach(s->monitor);
}

uint64_t monitor_dropped_total(const session *s)
{
    return s->monitor ? s->monitor->dropped_total : 0;
}

void monitor_list_close(monitor_list *ml)
{
    while (ml->head)
        monitor_detach(ml->head);
}

static int monitor_frame_encode(session_frame *f, uv_buf_t bufs[2], unsigned *nbufs)
{
    monitor_frame *mf = (monitor_frame *)f;
    bufs[0] = uv_buf_init((char *)mf->buf, (unsigned)mf->len);
    *nbufs = 1;
    f->send_handle = NULL;
    return 0;
}

static void monitor_frame_done(session_frame *f, int status)
{
    (void)status; /* written, failed or dropped: its bytes no longer wait */
    monitor_frame *mf = (monitor_frame *)f;
    mf->sub->queued -= mf->len;
    monitor_sub_unref(mf->sub);
    free(mf);
}

static const session_frame_ops monitor_frame_ops = {
    .encode = monitor_frame_encode,
    .done = monitor_frame_done,
};

/* The frame of one record for m: {"id", "status": "ok", "monitor": seq,
 * "info": {"seq", "dropped", members...}} behind its prefix. NULL on out
 * of memory. */
static monitor_frame *monitor_frame_new(const monitor_sub *m, uint64_t seq, const uint8_t *members,
                                        size_t len, uint32_t nmembers)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return NULL;
    gpuq_mpw_map(w, 4);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, m->id);
    gpuq_mpw_str(w, "status");
    gpuq_mpw_str(w, "ok");
    gpuq_mpw_str(w, "monitor");
    gpuq_mpw_uint(w, seq);
    gpuq_mpw_str(w, "info");
    gpuq_mpw_map(w, nmembers + 2);
    gpuq_mpw_str(w, "seq");
    gpuq_mpw_uint(w, seq);
    gpuq_mpw_str(w, "dropped");
    gpuq_mpw_uint(w, m->dropped);
    gpuq_mpw_raw(w, members, len);
    uint8_t *hdr = NULL;
    size_t hlen = 0;
    int rc = gpuq_mpw_take(w, &hdr, &hlen);
    gpuq_mpw_free(w);
    if (rc < 0)
        return NULL;
    monitor_frame *mf = malloc(sizeof *mf + GPUQ_PREFIX_SIZE + hlen);
    if (mf) {
        memset(mf, 0, sizeof *mf);
        gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                         .kind = GPUQ_KIND_REPLY,
                         .flags = 0,
                         .header_len = (uint32_t)hlen,
                         .payload_len = 0};
        gpuq_prefix_encode(&p, mf->buf);
        memcpy(mf->buf + GPUQ_PREFIX_SIZE, hdr, hlen);
        mf->len = GPUQ_PREFIX_SIZE + hlen;
    }
    free(hdr);
    return mf;
}

void monitor_publish(monitor_list *ml, const session *from, int64_t uid, const uint8_t *members,
                     size_t len, uint32_t nmembers, uint64_t queue_cap)
{
    uint64_t seq = ++ml->seq;
    for (monitor_sub *m = ml->head, *next; m; m = next) {
        next = m->next;
        session *s = m->s;
        if (s == from || s->closing || (!s->caps.admin && (int64_t)s->uid != uid))
            continue;
        /* a record frame is its prefix, ~40 bytes of header and the members */
        if (!members || m->queued + GPUQ_PREFIX_SIZE + len + 64 > queue_cap) {
            m->dropped++;
            m->dropped_total++;
            continue;
        }
        monitor_frame *mf = monitor_frame_new(m, seq, members, len, nmembers);
        if (!mf) {
            m->dropped++;
            m->dropped_total++;
            continue;
        }
        m->dropped = 0;
        m->sent++;
        m->queued += mf->len;
        m->refs++;
        mf->sub = m;
        mf->f.ops = &monitor_frame_ops;
        mf->f.seq = session_next_seq(s);
        session_send(s, &mf->f);
    }
}
