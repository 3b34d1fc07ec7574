/* SPDX-License-Identifier: Apache-2.0 */
/* scheduler.c - see scheduler.h. */
#include "scheduler.h"

#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "uvx.h"

static sched_dev *dev_of(server *srv, const request *r)
{
    return &srv->sched.devs[r->dev];
}

static uint64_t bytes_of(const request *r)
{
    return r->sz.payload + r->sz.output;
}

/* ---- the session's list of unanswered requests ---- */

void sched_track(request *r)
{
    session *s = r->s;
    server *srv = s->srv;
    int level = s->priority - GPUQ_PRIO_LOW;
    r->level = level < 0 ? 0 : level >= SCHED_LEVELS ? SCHED_LEVELS - 1 : level;
    int d = s->binfo.device < 0 ? 0 : s->binfo.device % SCHED_MAX_DEVS;
    r->dev = d < srv->sched.ndev ? d : 0;
    r->deadline_ns = r->req.deadline_ms ? r->t0_ns + r->req.deadline_ms * 1000000ull : 0;
    if (r->listed)
        return;
    r->lprev = NULL;
    r->lnext = s->unanswered;
    if (s->unanswered)
        s->unanswered->lprev = r;
    s->unanswered = r;
    r->listed = true;
}

static void sched_unqueue(request *r)
{
    if (!r->queued)
        return;
    sched_dev *d = dev_of(r->s->srv, r);
    int l = r->level;
    if (r->qprev)
        r->qprev->qnext = r->qnext;
    else
        d->head[l] = r->qnext;
    if (r->qnext)
        r->qnext->qprev = r->qprev;
    else
        d->tail[l] = r->qprev;
    r->qprev = r->qnext = NULL;
    r->queued = false;
    d->queued--;
    sched_unwatch(r);
}

void sched_untrack(request *r)
{
    session *s = r->s;
    sched_unqueue(r);
    sched_unwatch(r);
    r->gate_held = false;
    if (!r->listed)
        return;
    if (r->lprev)
        r->lprev->lnext = r->lnext;
    else
        s->unanswered = r->lnext;
    if (r->lnext)
        r->lnext->lprev = r->lprev;
    r->lprev = r->lnext = NULL;
    r->listed = false;
}

/* ---- deadlines ---- */

static void sched_on_timer(uv_timer_t *t);

static void sched_arm(sched *q, uint64_t now, uint64_t at)
{
    if (!q->timer_init || uv_is_closing((uv_handle_t *)&q->timer))
        return;
    if (q->timer_on && q->timer_at <= at)
        return;
    /* whole ms, rounded up: the timer never fires before the deadline */
    uint64_t ms = at > now ? (at - now + 999999) / 1000000 : 0;
    if (uvx_timer_start(&q->timer, sched_on_timer, ms, 0, "deadline timer") == 0) {
        q->timer_on = true;
        q->timer_at = at;
    }
}

void sched_watch(request *r)
{
    sched *q = &r->s->srv->sched;
    if (!r->deadline_ns || r->watched)
        return;
    r->dprev = NULL;
    r->dnext = q->watch;
    if (q->watch)
        q->watch->dprev = r;
    q->watch = r;
    r->watched = true;
    sched_arm(q, uv_hrtime(), r->deadline_ns);
}

void sched_unwatch(request *r)
{
    sched *q = &r->s->srv->sched;
    if (!r->watched)
        return;
    if (r->dprev)
        r->dprev->dnext = r->dnext;
    else
        q->watch = r->dnext;
    if (r->dnext)
        r->dnext->dprev = r->dprev;
    r->dprev = r->dnext = NULL;
    r->watched = false;
}

/* r is answered code now: 1 when it was running (abandoned), queued or
 * held (dropped); 0 when it is in none of those states. */
static int sched_answer_now(request *r, int code, const char *msg)
{
    sched *q = &r->s->srv->sched;
    if (r->running) {
        sched_unwatch(r);
        q->abandon(r, code, msg);
    } else if (r->queued) {
        sched_unqueue(r);
        q->answer(r, code, msg);
    } else if (r->gate_held) {
        r->gate_held = false;
        sched_unwatch(r);
        q->answer(r, code, msg);
    } else {
        return 0;
    }
    return 1;
}

void sched_fail(request *r, int code, const char *msg)
{
    (void)sched_answer_now(r, code, msg);
}

void sched_hold(request *r)
{
    r->gate_held = true;
    sched_watch(r);
}

void sched_release(request *r)
{
    if (!r->gate_held)
        return;
    r->gate_held = false;
    sched_unwatch(r);
    sched_enqueue(r);
}

static void sched_expire(request *r)
{
    sched *q = &r->s->srv->sched;
    char msg[96];
    snprintf(msg, sizeof msg, "deadline of %llu ms passed %s",
             (unsigned long long)r->req.deadline_ms,
             r->running     ? "while it ran"
             : r->gate_held ? "before its input was all announced"
                            : "before it ran");
    q->expired++;
    if (!sched_answer_now(r, GPUQ_E_DEADLINE_EXCEEDED, msg)) {
        sched_unwatch(r);
        q->expire_waiting(r);
    }
}

static void sched_on_timer(uv_timer_t *t)
{
    server *srv = t->data;
    sched *q = &srv->sched;
    q->timer_on = false;
    /* Answering may free requests and so change the list: one at a time,
     * from the head again after each. */
    for (;;) {
        uint64_t now = uv_hrtime(), next = 0;
        request *due = NULL;
        for (request *r = q->watch; r; r = r->dnext) {
            if (r->deadline_ns <= now) {
                due = r;
                break;
            }
            if (!next || r->deadline_ns < next)
                next = r->deadline_ns;
        }
        if (!due) {
            if (next)
                sched_arm(q, now, next);
            return;
        }
        sched_expire(due);
    }
}

int sched_init(server *srv)
{
    sched *q = &srv->sched;
    int n = srv->b ? srv->b->ops->ndevices(srv->b) : 1;
    q->ndev = n < 1 ? 1 : n > SCHED_MAX_DEVS ? SCHED_MAX_DEVS : n;
    int rc = uvx_timer_init(srv->loop, &q->timer, srv);
    if (rc == 0)
        q->timer_init = true;
    return rc;
}

void sched_close(server *srv)
{
    srv->sched.timer_on = false;
    uvx_close((uv_handle_t *)&srv->sched.timer, NULL);
}

/* ---- the queues ---- */

/* Level l has requests waiting or running on d, or queued one within the
 * hold. */
static bool sched_level_active(const sched_dev *d, int l, uint64_t now, uint64_t hold_ns)
{
    return d->head[l] || d->running_n[l] || (d->seen_ns[l] && now - d->seen_ns[l] < hold_ns);
}

/* Is a level above `level` active on d? */
static bool sched_above(const server *srv, const sched_dev *d, int level, uint64_t now)
{
    uint64_t hold_ns = (uint64_t)(srv->cfg.priority_hold_s * 1e9);
    for (int h = level + 1; h < SCHED_LEVELS; h++)
        if (sched_level_active(d, h, now, hold_ns))
            return true;
    return false;
}

/* Does r need one of the backend's slots (backend.h)? */
static bool sched_needs_slot(const server *srv, const request *r)
{
    return srv->b && srv->b->slots && !backend_batchable(srv->b, &r->job) &&
           !backend_row_batchable(srv->b, &r->job);
}

enum sched_verdict { SCHED_WAIT, SCHED_GO, SCHED_NO_SLOT };

/* May r (the first of the highest waiting level) enter d now? SCHED_NO_SLOT:
 * only because it needs a backend slot and none is free. */
static enum sched_verdict sched_admit(const server *srv, const sched_dev *d, const request *r,
                                      uint64_t now)
{
    const config *c = &srv->cfg;
    if (d->running >= c->device_window)
        return SCHED_WAIT;
    if (sched_above(srv, d, r->level, now)) {
        uint64_t lower = 0; /* levels between r's and an active one run nothing */
        for (int l = 0; l <= r->level; l++)
            lower += d->running_bytes[l];
        if (lower && lower + bytes_of(r) > c->bulk_window)
            return SCHED_WAIT;
    }
    if (sched_needs_slot(srv, r) && d->running_slots >= srv->b->slots)
        return SCHED_NO_SLOT; /* it would wait inside the backend, out of reach */
    return SCHED_GO;
}

/* The first request after r on its level that needs no slot and may enter
 * d now, or NULL: while the level's first waits for a slot, small requests
 * behind it go on (they run in batches, outside the slots). */
static request *sched_past_slot(const server *srv, const sched_dev *d, request *r, uint64_t now)
{
    for (request *n = r->qnext; n; n = n->qnext)
        if (!sched_needs_slot(srv, n))
            return sched_admit(srv, d, n, now) == SCHED_GO ? n : NULL;
    return NULL;
}

static void sched_pump(server *srv, sched_dev *d)
{
    sched *q = &srv->sched;
    if (d->pumping)
        return; /* run() may answer, which may come back here */
    d->pumping = true;
    uint64_t now = uv_hrtime();
    for (;;) {
        int l = SCHED_LEVELS - 1;
        while (l >= 0 && !d->head[l])
            l--;
        if (l < 0)
            break;
        request *r = d->head[l];
        enum sched_verdict v = sched_admit(srv, d, r, now);
        if (v == SCHED_NO_SLOT)
            r = sched_past_slot(srv, d, r, now);
        if (v == SCHED_WAIT || !r)
            break; /* strict: nothing of a lower level passes it */
        sched_unqueue(r);
        uint64_t bytes = bytes_of(r);
        bool slot = sched_needs_slot(srv, r);
        r->running = true;
        r->slot_held = slot;
        r->job.whole = sched_above(srv, d, l, now);
        d->running++;
        d->running_slots += slot;
        d->running_n[l]++;
        d->running_bytes[l] += bytes;
        sched_watch(r);      /* its deadline holds while it runs too */
        if (q->run(r) < 0) { /* refused and answered (so unwatched): r may be gone */
            d->running--;
            d->running_slots -= slot;
            d->running_n[l]--;
            d->running_bytes[l] -= bytes;
        }
    }
    d->pumping = false;
}

void sched_enqueue(request *r)
{
    server *srv = r->s->srv;
    sched *q = &srv->sched;
    sched_dev *d = dev_of(srv, r);
    uint64_t now = uv_hrtime();
    if (r->deadline_ns && now >= r->deadline_ns) {
        char msg[96];
        snprintf(msg, sizeof msg, "deadline of %llu ms passed before its input was in",
                 (unsigned long long)r->req.deadline_ms);
        q->expired++;
        q->answer(r, GPUQ_E_DEADLINE_EXCEEDED, msg);
        return;
    }
    int l = r->level;
    d->seen_ns[l] = now;
    r->qnext = NULL;
    r->qprev = d->tail[l];
    if (d->tail[l])
        d->tail[l]->qnext = r;
    else
        d->head[l] = r;
    d->tail[l] = r;
    r->queued = true;
    d->queued++;
    sched_watch(r);
    sched_pump(srv, d);
}

void sched_done(request *r)
{
    server *srv = r->s->srv;
    sched_dev *d = dev_of(srv, r);
    if (!r->running)
        return;
    r->running = false;
    d->running--;
    d->running_slots -= r->slot_held;
    r->slot_held = false;
    d->running_n[r->level]--;
    d->running_bytes[r->level] -= bytes_of(r);
    sched_pump(srv, d);
}

void sched_kick(server *srv)
{
    for (int i = 0; i < srv->sched.ndev; i++)
        sched_pump(srv, &srv->sched.devs[i]);
}

/* ---- cancel ---- */

/* Cancel s's unanswered requests that match (all when all_ids): queued ones
 * answered now, running ones marked. Answering takes r off the list (and
 * may free it), so the walk starts again after each. */
static void sched_cancel_walk(session *s, bool all_ids, uint64_t id, uint32_t *dropped,
                              uint32_t *running)
{
    sched *q = &s->srv->sched;
    bool again = true;
    while (again) {
        again = false;
        for (request *r = s->unanswered; r; r = r->lnext) {
            if (!all_ids && r->req.id != id)
                continue;
            if (r->queued || r->gate_held) {
                q->cancelled++;
                (*dropped)++;
                (void)sched_answer_now(r, GPUQ_E_CANCELLED, "cancelled before it ran");
                again = true;
                break;
            }
            if (r->running) {
                /* answered now, stopped at its next block of rows; it
                 * leaves s's list, so the walk starts again */
                q->cancelled++;
                (*running)++;
                q->abandon(r, GPUQ_E_CANCELLED, "cancelled while it ran");
                again = true;
                break;
            }
        }
    }
}

void sched_cancel(session *s, uint64_t id, uint32_t *dropped, uint32_t *running)
{
    *dropped = *running = 0;
    sched_cancel_walk(s, false, id, dropped, running);
}

void sched_drop_session(session *s)
{
    uint32_t dropped = 0, running = 0;
    sched_cancel_walk(s, true, 0, &dropped, &running);
    s->srv->sched.dropped_closed += dropped + running;
    if (dropped || running)
        log_debug("session %llu closed: %u queued requests dropped, %u running discarded",
                  (unsigned long long)s->id, dropped, running);
}

uint32_t sched_queued(const server *srv, int i)
{
    int q = i < 0 ? 0 : i % SCHED_MAX_DEVS;
    return q < srv->sched.ndev ? srv->sched.devs[q].queued : 0;
}

uint32_t sched_queued_all(const server *srv)
{
    uint32_t n = 0;
    for (int i = 0; i < srv->sched.ndev; i++)
        n += srv->sched.devs[i].queued;
    return n;
}
