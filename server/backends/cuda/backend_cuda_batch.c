/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_batch.c - see backend_cuda_batch.h. */
#include "backend_cuda_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend_cuda_dev.h"
#include "backend_cuda_done.h"
#include "backend_run.h"
#include "errors.h"
#include "gpuq_kernels.h"
#include "log.h"
#include "op_backend.h"

static void cuda_on_flush(uv_idle_t *h);

int cuda_batch_init(backend_cuda *b)
{
    int rc = uv_idle_init(b->base.loop, &b->flush);
    if (rc == 0) {
        b->flush.data = b;
        b->flush_cb = cuda_on_flush;
    }
    return rc;
}

/* The lane of device d for level (opened at first use), or NULL. */
static cuda_sess *lane_get(backend_cuda *b, cuda_dev *d, int level)
{
    int l = level - GPUQ_PRIO_LOW;
    if (l < 0 || l >= CUDA_LEVELS)
        return NULL;
    if (d->lane[l])
        return d->lane[l];
    void *bs = NULL;
    backend_session_info info;
    if (cuda_session_open(&b->base, level, d->index, &bs, &info) != 0)
        return NULL;
    cuda_sess *lane = bs;
    lane->lane = 1;
    d->sessions--; /* the backend's own: not a client session */
    d->lane[l] = lane;
    return lane;
}

/* The item of job (its op's cuda_batch_item on the host arrays); 1 or 0. */
static int job_item(const gpuq_job *job, gpuq_norm_item *it)
{
    const op_backend_def *ob = op_backend_of(job->req->op);
    if (!ob || !ob->cuda_batch_item ||
        !ob->cuda_batch_item(job->req, job->sz, job->h_in[0], job->h_out[0], it))
        return 0;
    it->flag = ((cuda_jobx *)job->bpriv)->h_flag;
    return 1;
}

int cuda_batch_take(backend_cuda *b, cuda_sess *s, gpuq_job *job)
{
    cuda_jobx *x = job->bpriv;
    gpuq_norm_item it;
    /* The test hooks (slow jobs, an injected fault) keep to the one-job path. */
    if (!backend_batchable(&b->base, job) || x->timing || b->slow_ms || b->inject_sticky ||
        !cuda_zero_copy_ok(b, s, job) || !job_item(job, &it))
        return 0;
    cuda_sess *lane = lane_get(b, s->dev, s->level);
    if (!lane || cuda_flush_soon(b) != 0)
        return 0;
    job->next = NULL;
    if (lane->pend_tail)
        lane->pend_tail->next = job;
    else
        lane->pend_head = job;
    lane->pend_tail = job;
    lane->npend++;
    cuda_lane_list(b, lane);
    b->zero_copy_jobs++;
    return 1;
}

int cuda_row_take(backend_cuda *b, cuda_sess *s, gpuq_job *job)
{
    /* zero-copy gathers and scatters need host arrays the device reaches */
    if (!backend_row_batchable(&b->base, job) || b->slow_ms || b->inject_sticky ||
        !s->dev->host_ptr_ok)
        return 0;
    cuda_sess *lane = lane_get(b, s->dev, s->level);
    if (!lane || cuda_flush_soon(b) != 0)
        return 0;
    job->next = NULL;
    if (lane->rpend_tail)
        lane->rpend_tail->next = job;
    else
        lane->rpend_head = job;
    lane->rpend_tail = job;
    cuda_lane_list(b, lane);
    return 1;
}

/* A batch object of lane: from its free list, or new (its state allocated
 * and zeroed on the lane's stream). NULL with *st and detail set. */
static cuda_batch *batch_get(backend_cuda *b, cuda_sess *lane, int *st, char *detail, size_t cap)
{
    cuda_batch *bt = lane->bfree;
    if (bt) {
        lane->bfree = bt->next;
        bt->next = NULL;
        return bt;
    }
    bt = calloc(1, sizeof *bt);
    if (!bt) {
        *st = GPUQ_E_NO_MEMORY;
        snprintf(detail, cap, "batch");
        return NULL;
    }
    size_t bytes = (size_t)gpuq_cuda_normalize_batch_state_bytes();
    const char *what = "cudaEventCreateWithFlags(batch)";
    cudaError_t e = cudaEventCreateWithFlags(&bt->done, cudaEventDisableTiming);
    if (e == cudaSuccess) {
        what = "cudaMallocFromPoolAsync(batch state)";
        e = cudaMallocFromPoolAsync(&bt->d_state, bytes, lane->dev->pool, lane->stream);
        if (e == cudaSuccess) {
            what = "cudaMemsetAsync(batch state)";
            e = cudaMemsetAsync(bt->d_state, 0, bytes, lane->stream);
            if (e == cudaSuccess)
                return bt;
            if (cudaFreeAsync(bt->d_state, lane->stream) != cudaSuccess)
                log_error("cuda: cudaFreeAsync(batch state) failed");
        }
        cudaEventDestroy(bt->done);
    }
    *st = cuda_status_of(b, e, what);
    snprintf(detail, cap, "%s: %s", what, cudaGetErrorString(e));
    free(bt);
    return NULL;
}

/* Fail the jobs from first (linked by job->next), status st: completed
 * through the immediate list (never from inside a submit). */
static void fail_jobs(backend_cuda *b, gpuq_job *first, int st, const char *detail)
{
    for (gpuq_job *j = first, *next; j; j = next) {
        next = j->next;
        cuda_jobx *x = j->bpriv;
        x->status = st;
        cuda_set_msg(x->message, sizeof x->message, st, detail && *detail ? detail : NULL);
        cuda_complete_later(b, j);
    }
}

/* bt, launched (its event recorded) with the n jobs from first (a row
 * batch: row), joins lane's FIFO; the loop watches for its end (the spin
 * for est_bytes' guess when not 0, a doorbell, the poll timer). */
static void lane_enqueue(backend_cuda *b, cuda_sess *lane, cuda_batch *bt, gpuq_job *first,
                         uint32_t n, int row, uint64_t est_bytes)
{
    bt->jobs = first;
    bt->n = n;
    bt->row = row;
    bt->next = NULL;
    if (lane->btail)
        lane->btail->next = bt;
    else
        lane->bhead = bt;
    lane->btail = bt;
    backend_count_batch(&b->base, n);
    if (b->spin_ns)
        cuda_spin_kick(b);
    if (est_bytes)
        cuda_spin_for(b, est_bytes);
    if (!lane->armed && !b->spin_on)
        cuda_arm_doorbell(b, lane);
    cuda_timer_start_if_needed(b);
}

/* Launch the first batch_max (at most GPUQ_NORM_BATCH_MAX) of lane's
 * pending jobs as one batch. */
static void lane_launch(backend_cuda *b, cuda_sess *lane)
{
    uint32_t cap = b->base.batch_max;
    if (cap == 0 || cap > GPUQ_NORM_BATCH_MAX)
        cap = GPUQ_NORM_BATCH_MAX;
    gpuq_norm_item items[GPUQ_NORM_BATCH_MAX];
    gpuq_job *first = lane->pend_head, *last = first;
    uint32_t n = 0;
    for (gpuq_job *j = first; j && n < cap; j = j->next) {
        if (!job_item(j, &items[n]))
            memset(&items[n], 0, sizeof items[n]); /* taken only when it had one: not reached */
        last = j;
        n++;
    }
    lane->pend_head = last->next;
    if (!lane->pend_head)
        lane->pend_tail = NULL;
    lane->npend -= n;
    last->next = NULL;

    int st = 0;
    char detail[120] = "";
    cuda_batch *bt = NULL;
    if (b->base.lost) {
        st = GPUQ_E_DEVICE_LOST;
        snprintf(detail, sizeof detail, "%.100s", b->base.lost_reason);
        goto fail;
    }
    if ((st = cuda_use_device(b, lane->dev->index)) != 0)
        goto fail;
    if (!(bt = batch_get(b, lane, &st, detail, sizeof detail)))
        goto fail;
    int k = gpuq_cuda_normalize_batch(lane->kctx, items, n, bt->d_state);
    if (k != GPUQ_K_OK) {
        /* Nothing ran: the state is still zero. */
        cuda_batch_put(lane, bt);
        st = cuda_status_of_kcode(b, first, k);
        snprintf(detail, sizeof detail, "batched kernel launch failed");
        goto fail;
    }
    cudaError_t e = cudaEventRecord(bt->done, lane->stream);
    if (e != cudaSuccess) {
        st = cuda_status_of(b, e, "cudaEventRecord(batch)");
        snprintf(detail, sizeof detail, "cudaEventRecord(batch): %s", cudaGetErrorString(e));
        /* The kernel is enqueued: let it end before the jobs' host memory
         * goes back (the slow way: the event is unusable). */
        if (st != GPUQ_E_DEVICE_LOST && cudaStreamSynchronize(lane->stream) == cudaSuccess)
            cuda_batch_put(lane, bt);
        else
            cuda_batch_free(lane, bt);
        goto fail;
    }
    lane_enqueue(b, lane, bt, first, n, 0, 0);
    return;

fail:
    fail_jobs(b, first, st, detail);
}

/* Enqueue up to GPUQ_COPY_ITEMS_MAX items at a time; a GPUQ_K_* code. */
static int copy_items(cuda_sess *lane, const gpuq_copy_item *it, unsigned n)
{
    for (unsigned at = 0; at < n; at += GPUQ_COPY_ITEMS_MAX) {
        unsigned c = n - at < GPUQ_COPY_ITEMS_MAX ? n - at : GPUQ_COPY_ITEMS_MAX;
        int k = gpuq_cuda_copy_items(lane->kctx, it + at, c);
        if (k != GPUQ_K_OK)
            return k;
    }
    return GPUQ_K_OK;
}

/* Launch jobs[0..n) (linked by job->next from jobs[0]) as one row batch
 * on lane (backend_cuda_batch.h). Whatever keeps it from being launched
 * whole sends its jobs to run alone. */
static void row_launch(backend_cuda *b, cuda_sess *lane, gpuq_job **jobs, unsigned n)
{
    backend_row_plan p;
    gpuq_copy_item it[BACKEND_ROW_BATCH_MAX * (GPUQ_MAX_OUTPUTS + 1)];
    const op_backend_def *ob = op_backend_of(jobs[0]->req->op);
    void *d_a = NULL, *d_out = NULL, *d_scr = NULL;
    cuda_batch *bt = NULL;
    int st = 0, enq = 0;
    char detail[120] = "";
    const char *what = "";
    cudaError_t e = cudaSuccess;
    if (b->base.lost) {
        fail_jobs(b, jobs[0], GPUQ_E_DEVICE_LOST, b->base.lost_reason);
        return;
    }
    if (n < 2 || !ob || !ob->launch_cuda || backend_row_plan_make(jobs, n, &p) != 0 ||
        cuda_use_device(b, lane->dev->index) != 0 ||
        !(bt = batch_get(b, lane, &st, detail, sizeof detail)))
        goto alone;
    what = "cudaMallocFromPoolAsync(row batch)";
    if ((e = cuda_dev_alloc(b, lane, &d_a, p.sz.in_bytes[0])) != cudaSuccess ||
        (e = cuda_dev_alloc(b, lane, &d_out, p.sz.output)) != cudaSuccess ||
        (e = cuda_dev_alloc(b, lane, &d_scr, op_scratch_bytes(&p.req, &p.sz))) != cudaSuccess)
        goto undo;
    enq = 1;
    for (unsigned i = 0; i < n; i++)
        it[i] = (gpuq_copy_item){jobs[i]->h_in[0], (char *)d_a + p.row0[i] * p.a_row,
                                 jobs[i]->sz->in_bytes[0]};
    int k = copy_items(lane, it, n);
    int *flag = gpuq_cuda_ctx_errflag(lane->kctx);
    what = "cudaMemsetAsync(errflag)";
    if (k == GPUQ_K_OK && (e = cudaMemsetAsync(flag, 0, sizeof(int), lane->stream)) != cudaSuccess)
        goto undo;
    op_bufs d = {.a = d_a,
                 .b = jobs[0]->res_in[1],
                 .out = {d_out, p.sz.nout > 1 ? (char *)d_out + p.out_at[1] : NULL},
                 .scratch = d_scr};
    if (k == GPUQ_K_OK)
        k = ob->launch_cuda(lane->kctx, &p.req, &p.sz, &d);
    unsigned ni = 0;
    for (unsigned i = 0; i < n; i++) {
        for (uint32_t o = 0; o < p.sz.nout; o++)
            it[ni++] = (gpuq_copy_item){(char *)d_out + p.out_at[o] + p.row0[i] * p.out_row[o],
                                        jobs[i]->h_out[o], jobs[i]->sz->out[o].bytes};
        it[ni++] = (gpuq_copy_item){flag, ((cuda_jobx *)jobs[i]->bpriv)->h_flag, sizeof(int)};
    }
    if (k == GPUQ_K_OK)
        k = copy_items(lane, it, ni);
    if (k != GPUQ_K_OK) {
        st = cuda_status_of_kcode(b, jobs[0], k);
        what = "row batch kernel launch";
        goto undo;
    }
    what = "cudaEventRecord(row batch)";
    if ((e = cudaEventRecord(bt->done, lane->stream)) != cudaSuccess)
        goto undo;
    for (void **q = (void *[]){d_a, d_out, d_scr}, **end = q + 3; q < end; q++)
        if (*q && cudaFreeAsync(*q, lane->stream) != cudaSuccess)
            log_error("cuda: cudaFreeAsync(row batch) failed");
    /* the loop watches for its end from now to past its guess: the next
     * batch of its kind waits for that moment */
    uint64_t est = jobs[0]->sz->in_bytes[1] / CUDA_EST_DEVICE_SCALE;
    for (unsigned i = 0; i < n; i++)
        est += jobs[i]->sz->in_bytes[0] + jobs[i]->sz->output;
    lane_enqueue(b, lane, bt, jobs[0], n, 1, est);
    return;

undo:
    if (e != cudaSuccess)
        st = cuda_status_of(b, e, what);
    /* What was enqueued reads and writes the jobs' host memory: let it end
     * before they run again alone (or fail, the device lost). */
    if (enq && st != GPUQ_E_DEVICE_LOST && (e = cudaStreamSynchronize(lane->stream)) != cudaSuccess)
        st = cuda_status_of(b, e, "cudaStreamSynchronize(row batch)");
    for (void **q = (void *[]){d_a, d_out, d_scr}, **end = q + 3; q < end; q++)
        if (*q && !b->base.lost && cudaFreeAsync(*q, lane->stream) != cudaSuccess)
            log_error("cuda: cudaFreeAsync(row batch) failed");
    if (bt) /* its state was not used */
        cuda_batch_put(lane, bt);
    if (b->base.lost) {
        fail_jobs(b, jobs[0], GPUQ_E_DEVICE_LOST, b->base.lost_reason);
        return;
    }
alone:
    cuda_row_alone(b, jobs[0]);
}

/* Is a row batch of job's kind in lane's FIFO? */
static int row_running(const cuda_sess *lane, const gpuq_job *job)
{
    for (const cuda_batch *bt = lane->bhead; bt; bt = bt->next)
        if (bt->row && backend_row_same(bt->jobs, job))
            return 1;
    return 0;
}

/* The idle phase's row batches of lane: each kind with none running goes,
 * at most batch_max (and BACKEND_ROW_BATCH_MAX) jobs in arrival order;
 * the rest wait (cuda_row_kick). */
static void row_flush(backend_cuda *b, cuda_sess *lane)
{
    uint32_t max =
        b->base.batch_max < BACKEND_ROW_BATCH_MAX ? b->base.batch_max : BACKEND_ROW_BATCH_MAX;
    gpuq_job *keep = NULL, **keep_tail = &keep;
    while (lane->rpend_head) {
        gpuq_job *first = lane->rpend_head;
        lane->rpend_head = first->next;
        first->next = NULL;
        if (!b->base.lost && row_running(lane, first)) {
            *keep_tail = first;
            keep_tail = &first->next;
            continue;
        }
        gpuq_job *jobs[BACKEND_ROW_BATCH_MAX];
        unsigned n = 1;
        jobs[0] = first;
        for (gpuq_job **pp = &lane->rpend_head; *pp && n < max;) {
            gpuq_job *j = *pp;
            if (!backend_row_same(first, j)) {
                pp = &j->next;
                continue;
            }
            *pp = j->next;
            j->next = NULL;
            jobs[n - 1]->next = j;
            jobs[n++] = j;
        }
        if (n == 1) /* alone: its own session's path (small buffers, no gathers) */
            cuda_row_alone(b, first);
        else
            row_launch(b, lane, jobs, n);
    }
    lane->rpend_head = keep;
    lane->rpend_tail = NULL;
    for (gpuq_job *j = keep; j; j = j->next)
        lane->rpend_tail = j;
}

/* The idle phase after the loop turn that made jobs pending: launch them. */
static void cuda_on_flush(uv_idle_t *h)
{
    backend_cuda *b = h->data;
    int rc = uv_idle_stop(&b->flush);
    if (rc != 0)
        log_error("cuda: uv_idle_stop(flush): %s", uv_strerror(rc));
    b->flush_on = 0;
    while (b->pend_lanes) {
        cuda_sess *lane = b->pend_lanes;
        b->pend_lanes = lane->pend_next;
        lane->pend_next = NULL;
        lane->pend_listed = 0;
        while (lane->pend_head)
            lane_launch(b, lane);
        row_flush(b, lane);
    }
}
