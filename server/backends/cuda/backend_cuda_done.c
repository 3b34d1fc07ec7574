/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_done.c - see backend_cuda_done.h. */
#include "backend_cuda_done.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "errors.h"
#include "gpuq_kernels.h"
#include "log.h"
#include "backend_cuda_dev.h"
#include "backend_run.h"

/* ---- completion ---- */

/* A job is finished: its guess no longer counts (cuda_wake_plan). */
static void cuda_wake_forget(cuda_sess *s, cuda_jobx *x)
{
    uint64_t *q = &s->dev->est_ns[cuda_level_index(s->level)];
    *q = *q > x->est_ns ? *q - x->est_ns : 0;
    x->est_ns = 0;
    x->pc = 0;
    x->pq = 0;
}

/* Finish one job (loop thread): status, timing, bookkeeping, callback. */
void cuda_finish_job(backend_cuda *b, cuda_sess *s, gpuq_job *job, int lost)
{
    cuda_jobx *x = job->bpriv;
    if (lost) {
        job->status = GPUQ_E_DEVICE_LOST;
        cuda_set_msg(job->message, sizeof job->message, job->status, b->base.lost_reason);
    } else if (!x) {
        /* failed before a jobx existed: submit preset job->status/message */
    } else if (x->status) {
        job->status = x->status;
        snprintf(job->message, sizeof job->message, "%s", x->message);
    } else {
        /* The kernels' device flag holds a GPUQ_K_E_* code negated (0: fine);
         * the CPU backend maps the same codes through the same table. */
        job->status = backend_map_kernel_error(job, -*x->h_flag);
    }
    if (job->status == 0 && x && x->timing) {
        float ms[3] = {0, 0, 0};
        for (int i = 0; i < 3; i++)
            if (cudaEventElapsedTime(&ms[i], x->t[i], x->t[i + 1]) != cudaSuccess)
                ms[i] = 0;
        float all = 0;
        if (cudaEventElapsedTime(&all, x->t[0], x->t[3]) != cudaSuccess)
            all = 0;
        job->timing.h2d_us = ms[0] * 1000.0;
        job->timing.kernel_us = ms[1] * 1000.0;
        job->timing.d2h_us = ms[2] * 1000.0;
        /* Host time from submit to now, less the device time: waiting in the
         * stream plus completion latency. */
        double host_us = (double)(uv_hrtime() - job->submit_ns) / 1000.0;
        double q = host_us - all * 1000.0;
        job->timing.queue_us = q > 0 ? q : 0;
    }
    if (!lost && b->seen)
        (*b->seen)++;
    if (x) {
        cuda_wake_forget(s, x);
        cuda_jobx_put(s, x);
    }
    job->bpriv = NULL;
    job->next = NULL;
    s->nflight--;
    s->dev->in_flight--;
    b->inflight--;
    b->base.complete(job);
}

/* ---- batches (backend_cuda_batch.c launches them): a lane's FIFO ---- */

/* Complete one batch's jobs, each through its own session: status st (0:
 * each its flag) or, lost, device_lost. */
static void batch_complete(backend_cuda *b, gpuq_job *j, int st, int lost)
{
    for (gpuq_job *next; j; j = next) {
        next = j->next;
        j->next = NULL;
        cuda_jobx *x = j->bpriv;
        if (st && x && !x->status) {
            x->status = st;
            cuda_set_msg(x->message, sizeof x->message, st, "batched launch failed");
        }
        cuda_finish_job(b, j->bsess, j, lost);
    }
}

static void cuda_batch_drain(backend_cuda *b, cuda_sess *lane)
{
    while (lane->bhead && !b->base.lost) {
        cuda_batch *bt = lane->bhead;
        cudaError_t e = cudaEventQuery(bt->done);
        if (e == cudaErrorNotReady)
            break;
        int st = 0;
        if (e != cudaSuccess) {
            if (cuda_sticky(e)) {
                cuda_mark_lost(b, "cudaEventQuery", e);
                break;
            }
            st = GPUQ_E_DEVICE; /* for this batch only */
        }
        lane->bhead = bt->next;
        if (!lane->bhead)
            lane->btail = NULL;
        gpuq_job *jobs = bt->jobs;
        int row = bt->row;
        bt->row = 0;
        if (st) /* its state may not have been reset: not reused */
            cuda_batch_free(lane, bt);
        else
            cuda_batch_put(lane, bt);
        if (row && (st || *((cuda_jobx *)jobs->bpriv)->h_flag != 0))
            cuda_row_alone(b, jobs); /* each fails (or not) as it would alone */
        else
            batch_complete(b, jobs, st, 0);
        if (row)
            cuda_row_kick(b, lane);
    }
}

/* Device lost: complete lane's waiting row jobs as lost. */
static void cuda_row_fail_waiting(backend_cuda *b, cuda_sess *lane)
{
    while (lane->rpend_head) {
        gpuq_job *j = lane->rpend_head;
        lane->rpend_head = j->next;
        j->next = NULL;
        cuda_finish_job(b, j->bsess, j, 1);
    }
    lane->rpend_tail = NULL;
}

static void cuda_batch_fail_all(backend_cuda *b, cuda_sess *lane)
{
    while (lane->bhead) {
        cuda_batch *bt = lane->bhead;
        lane->bhead = bt->next;
        if (!lane->bhead)
            lane->btail = NULL;
        gpuq_job *jobs = bt->jobs;
        cuda_batch_put(lane, bt);
        batch_complete(b, jobs, 0, 1);
    }
}

void cuda_fail_all(backend_cuda *b)
{
    for (cuda_sess *s = b->sessions; s; s = s->next) {
        if (s->lane) {
            cuda_batch_fail_all(b, s);
            cuda_row_fail_waiting(b, s);
        }
        while (s->head) {
            gpuq_job *job = s->head;
            s->head = job->next;
            if (!s->head)
                s->tail = NULL;
            cuda_finish_job(b, s, job, 1);
        }
    }
}

/* Complete the session's finished jobs in FIFO order; re-arm if some remain
 * (unless the spin is polling them). */
void cuda_drain_session(backend_cuda *b, cuda_sess *s)
{
    if (s->lane)
        cuda_batch_drain(b, s);
    while (s->head && !b->base.lost) {
        gpuq_job *job = s->head;
        cuda_jobx *x = job->bpriv;
        cudaError_t e = x ? cudaEventQuery(x->done) : cudaSuccess;
        if (e == cudaErrorNotReady)
            break;
        if (e != cudaSuccess) {
            if (cuda_sticky(e)) {
                cuda_mark_lost(b, "cudaEventQuery", e);
                break;
            }
            /* A non-sticky error reported for this job only. */
            if (x && !x->status) {
                x->status = GPUQ_E_DEVICE;
                cuda_set_msg(x->message, sizeof x->message, x->status, cudaGetErrorString(e));
            }
        }
        s->head = job->next;
        if (!s->head)
            s->tail = NULL;
        cuda_finish_job(b, s, job, 0);
    }
    if (b->base.lost)
        cuda_fail_all(b);
    else if (cuda_sess_busy(s) && !s->armed && !b->spin_on)
        cuda_arm_doorbell(b, s);
}

static void doorbell(void *arg)
{
    /* CUDA driver thread: no CUDA call here. */
    cuda_sess *s = arg;
    backend_cuda *b = s->b;
    pthread_mutex_lock(&b->mu);
    s->wake_next = b->wake_head;
    b->wake_head = s;
    pthread_mutex_unlock(&b->mu);
    uv_async_send(&b->async);
}

void cuda_arm_doorbell(backend_cuda *b, cuda_sess *s)
{
    if (b->base.lost || cuda_use_device(b, s->dev->index) != 0)
        return;
    cudaError_t e = cudaLaunchHostFunc(s->stream, doorbell, s);
    if (e == cudaSuccess) {
        s->armed = 1;
        return;
    }
    /* Not armed: the poll timer still drains this session. */
    log_error("cuda: cudaLaunchHostFunc: %s", cudaGetErrorString(e));
    if (cuda_sticky(e))
        cuda_mark_lost(b, "cudaLaunchHostFunc", e);
}

void cuda_on_async(uv_async_t *h)
{
    backend_cuda *b = h->data;
    b->walking++;
    /* Jobs that failed before reaching the device. */
    while (b->imm_head) {
        gpuq_job *job = b->imm_head;
        b->imm_head = job->next;
        if (!b->imm_head)
            b->imm_tail = NULL;
        cuda_finish_job(b, job->bsess, job, 0);
    }
    pthread_mutex_lock(&b->mu);
    cuda_sess *w = b->wake_head;
    b->wake_head = NULL;
    pthread_mutex_unlock(&b->mu);
    b->seen = &b->base.seen_doorbell;
    while (w) {
        cuda_sess *s = w;
        w = s->wake_next;
        s->wake_next = NULL;
        s->armed = 0;
        cuda_drain_session(b, s);
    }
    b->seen = NULL;
    if (b->base.lost)
        cuda_fail_all(b);
    b->walking--;
    cuda_reap_sessions(b);
    cuda_timer_start_if_needed(b);
}

/* Complete what is finished on every busy session. */
void cuda_drain_all(backend_cuda *b)
{
    b->walking++;
    for (cuda_sess *s = b->sessions; s && !b->base.lost; s = s->next)
        if (cuda_sess_busy(s))
            cuda_drain_session(b, s);
    if (b->base.lost)
        cuda_fail_all(b);
    b->walking--;
    cuda_reap_sessions(b);
}

void cuda_on_timer(uv_timer_t *t)
{
    backend_cuda *b = t->data;
    b->seen = &b->base.seen_poll;
    cuda_drain_all(b);
    b->seen = NULL;
    if (b->inflight == 0 && b->timer_on) {
        uv_timer_stop(&b->timer);
        b->timer_on = 0;
    }
}

/* The adaptive spin: while jobs are in flight and something happened in
 * the last spin_ns (a submit or a completion), every loop iteration queries
 * the head event of each busy session instead of waiting for a doorbell, so
 * small jobs complete without a host function's round trip. When the window
 * closes with jobs left, doorbells are armed for them and the loop sleeps. */
void cuda_on_spin(uv_idle_t *h)
{
    backend_cuda *b = h->data;
    uint64_t now = uv_hrtime();
    uint64_t before = b->inflight;
    b->seen = &b->base.seen_spin;
    cuda_drain_all(b);
    b->seen = NULL;
    if (b->inflight < before && b->spin_until < now + b->spin_ns)
        b->spin_until = now + b->spin_ns;
    if (b->inflight > 0 && now < b->spin_until && !b->base.lost)
        return;
    uv_idle_stop(&b->spin);
    b->spin_on = 0;
    for (cuda_sess *s = b->sessions; s; s = s->next)
        if (cuda_sess_busy(s) && !s->armed)
            cuda_arm_doorbell(b, s);
}

/* Spin until at least until (ns). */
static void cuda_spin_until(backend_cuda *b, uint64_t until)
{
    if (b->spin_until < until)
        b->spin_until = until;
    if (b->spin_on)
        return;
    int rc = uv_idle_start(&b->spin, cuda_on_spin);
    if (rc == 0)
        b->spin_on = 1;
    else
        log_error("cuda: uv_idle_start: %s", uv_strerror(rc));
}

/* A job was submitted: keep (or start) spinning. */
void cuda_spin_kick(backend_cuda *b)
{
    cuda_spin_until(b, uv_hrtime() + b->spin_ns);
}

/* (Re)arm the wake timer for at (ns) unless it fires earlier already. */
static void cuda_wake_at(backend_cuda *b, uint64_t now, uint64_t at)
{
    if (b->wake_on && b->wake_at <= at)
        return;
    /* libuv timers count whole ms: round down, so the spin starts early */
    uint64_t ms = at > now ? (at - now) / 1000000 : 0;
    int rc = uv_timer_start(&b->wake, cuda_on_wake, ms, 0);
    if (rc != 0) {
        log_error("cuda: uv_timer_start(wake): %s", uv_strerror(rc));
        return;
    }
    b->wake_on = 1;
    b->wake_at = at;
}

/* The predictive spin. A doorbell (a host function) wakes the loop a long
 * while after the GPU finishes on some machines (about 150 to 300 us under
 * a virtual machine's interrupt delivery), which for a large job costs
 * more than a tenth of its time; the spin finds the end within a loop
 * iteration but burns a core. So for a job whose guessed device time (its
 * bytes at est_gbps) outlasts the spin window, the loop sleeps until
 * wake_lead_ns before the guess, then spins until the job completes or
 * wake_tail_ns past the guess (then the doorbell, armed as ever, remains).
 * A pipelined job of one phase moves its input and output at once, so its
 * guess counts the larger of the two: counted as a sum, a 64 MiB row-wise
 * normalize was guessed at 2.2 ms, done in 1.5, and left to its doorbell
 * (0.1-0.4 ms later on an H200 guest). Jobs already in flight at its level
 * or above can delay it by up to their own guesses (dev->est_ns), so its
 * spin runs that much longer (x->pq): four clients with two 64 MiB flat
 * normalizes each in flight had 34-53 of 192 jobs found by doorbells
 * without it, none with it, and moved 44.1-45.6 GB/s instead of
 * 46.3-46.9 (H200 guest, GPUQ_CUDA_WAKE_QUEUE=0 against the default). */
void cuda_wake_plan(backend_cuda *b, cuda_sess *s, gpuq_job *job, uint64_t est_bytes)
{
    cuda_jobx *x = job->bpriv;
    if (!x || b->wake_tail_ns == 0 || b->est_gbps == 0)
        return;
    uint64_t now = uv_hrtime();
    uint64_t est = est_bytes / b->est_gbps; /* bytes / (GB/s) = ns */
    int lv = cuda_level_index(s->level);
    cuda_dev *d = s->dev;
    /* Jobs in flight at its level or above may run before it, or beside
     * it on the copy engines (streams of one priority share them about
     * evenly): it ends no earlier than its own guess and may end as much
     * later as they take. Its window runs from the one to the other. */
    x->pq = 0;
    for (int l = lv; b->wake_queue && l < CUDA_LEVELS; l++)
        x->pq += d->est_ns[l];
    x->est_ns = est;
    d->est_ns[lv] += est;
    x->pc = now + est;
    if (est <= b->wake_lead_ns + 1000000) { /* due within the timer's resolution */
        cuda_spin_until(b, x->pc + x->pq + b->wake_tail_ns);
        x->pc = 0;
        return;
    }
    cuda_wake_at(b, now, x->pc - b->wake_lead_ns);
}

uint64_t cuda_est_bytes(const gpuq_job *job)
{
    const gpuq_sizes *sz = job->sz;
    uint64_t all = sz->payload + sz->output, dev = 0;
    for (uint32_t k = 0; k < sz->nin && k < GPUQ_MAX_INPUTS; k++)
        dev += job->res_in[k] ? sz->in_bytes[k] : 0;
    for (uint32_t k = 0; k < sz->nout && k < GPUQ_MAX_OUTPUTS; k++)
        dev += job->keep[k] ? sz->out[k].bytes : 0;
    return all - dev + dev / CUDA_EST_DEVICE_SCALE;
}

void cuda_spin_for(backend_cuda *b, uint64_t est_bytes)
{
    if (b->wake_tail_ns == 0 || b->est_gbps == 0)
        return;
    cuda_spin_until(b, uv_hrtime() + est_bytes / b->est_gbps + b->wake_tail_ns);
}

void cuda_on_wake(uv_timer_t *t)
{
    backend_cuda *b = t->data;
    uint64_t now = uv_hrtime(), until = 0, next = UINT64_MAX;
    b->wake_on = 0;
    for (cuda_sess *s = b->sessions; s; s = s->next)
        for (gpuq_job *j = s->head; j; j = j->next) {
            cuda_jobx *x = j->bpriv;
            if (!x || !x->pc)
                continue;
            if (x->pc <= now + b->wake_lead_ns + 1000000) {
                if (until < x->pc + x->pq + b->wake_tail_ns)
                    until = x->pc + x->pq + b->wake_tail_ns;
                x->pc = 0;
            } else if (x->pc - b->wake_lead_ns < next) {
                next = x->pc - b->wake_lead_ns;
            }
        }
    if (until)
        cuda_spin_until(b, until);
    if (next != UINT64_MAX)
        cuda_wake_at(b, now, next);
}

void cuda_timer_start_if_needed(backend_cuda *b)
{
    if (b->handles_open && b->inflight > 0 && !b->timer_on) {
        if (uv_timer_start(&b->timer, cuda_on_timer, CUDA_POLL_MS, CUDA_POLL_MS) == 0)
            b->timer_on = 1;
    }
}

void cuda_complete_later(backend_cuda *b, gpuq_job *job)
{
    job->next = NULL;
    if (b->imm_tail)
        b->imm_tail->next = job;
    else
        b->imm_head = job;
    b->imm_tail = job;
    uv_async_send(&b->async);
}
