/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_pipe.c - pipelined, chunked CUDA jobs.
 *
 * Why: a job that copies all its input, runs, then copies all its output
 * leaves the GPU idle during the copies and one copy engine idle always.
 * Split into chunks of rows (the op says how: op_backend_def.cuda_split),
 * the upload of chunk k+1, the op on chunk k and the download of chunk k-1
 * run at once, and both copy directions are busy. Chunks also bound how
 * long one job holds a copy engine.
 *
 * Happy path, per job, on the session's compute stream C and copy streams
 * IN and OUT (same priority as C), all enqueued at submit on the loop:
 *   C:   [output and scratch allocations, errflag reset: the caller]
 *   IN:  [the input's allocation: the caller] B whole when every row needs
 *        it (pairwise, knn)
 *   per chunk k:
 *     IN:  H2D of A's rows (and B's, when row-aligned), record ev_in
 *     C:   wait ev_in, the op on rows k (launch_cuda_rows), record ev_comp
 *     OUT: wait ev_comp, D2H of each output's rows k
 *   join: OUT records ev_out, C waits on it.
 * C has waited on IN's last ev_in, so after the join every copy of the job
 * is ordered before what the caller enqueues next on C: the cudaFreeAsync
 * of the device buffers, the errflag copy, the timing and completion
 * events. IN waits for nothing on C: its input buffer is allocated on IN
 * itself, so the next job's uploads run while C and OUT still finish this
 * one (its last kernels, its downloads): back-to-back jobs of one session
 * use both copy directions at once (4 clients x 2 flat 64 MiB normalizes
 * in flight moved 34 GB/s up on an H200 when every upload waited for the
 * session's previous downloads, 44-45 GB/s since). Completion
 * (backend_cuda_done.c) is unchanged: the job is done when its event on C
 * is. Events are per session and reused chunk after
 * chunk: cudaStreamWaitEvent takes the event's state when it is enqueued,
 * so recording it again right after the wait is legal, and the jobs of one
 * session are enqueued one after the other on the loop.
 *
 * Two-phase ops (flat normalize: one reduction over all values): per
 * chunk IN uploads and C reduces it as it lands (launch_cuda_reduce); then
 * C combines (launch_cuda_finish); then C writes the output's first piece
 * (a nominal chunk's rows: launch_cuda_rows) and OUT downloads it, then the
 * same for all the rest at once. Their upload chunks are
 * CUDA_PIPE_TWO_PHASE_SCALE nominal ones: the reduction runs some 60 times
 * faster than the link, so a larger last chunk costs little, and each copy
 * costs a few microseconds (four clients with two 64 MiB flat normalizes
 * each in flight moved 45.6-46.8 GB/s in 8 MiB chunks, 47.0-47.9 in 32 MiB
 * ones, H200 guest).
 *
 * Timing (job->timing, when asked): the three spans still add up to the
 * job's device time, but overlap makes them consecutive stretches of one
 * timeline instead of three phases: h2d from the job's start (t[0], on IN
 * when the job has input) until its last input byte landed (t[1], recorded
 * on IN), kernel from then until its last kernel ended (t[2] on C: it
 * includes C finishing the session's previous job, if any), d2h from then
 * until its last output byte and the error flag arrived (t[3] on C after
 * the join). Work that overlapped counts in the earliest span it
 * overlapped: a pipelined job's kernel_us and d2h_us are only what the
 * upload did not hide.
 *
 * Failures: every CUDA call is checked; the first failure stops enqueuing
 * and joins: for each copy stream this job used, an event is recorded on it
 * and C waits on it, so that the caller's frees and completion event stay
 * behind every copy already enqueued (a staging slot or arena must not be
 * released while a copy stream can still touch it). If that fails too, the
 * copy stream is synchronized (a rare, slow, safe path). No stream is left
 * waiting on an event that is never recorded: every wait follows its
 * record (and a wait on an unrecorded event would not block anyway).
 * Sticky errors lose the device as everywhere in the backend.
 *
 * Test hooks: GPUQ_TEST_INJECT_PIPE=N fails the N-th submitted job, when it
 * is pipelined, at its middle chunk (after its upload, before its kernel:
 * for an op of one phase, earlier chunks' downloads are on OUT by then)
 * with a non-sticky CUDA error; GPUQ_TEST_INJECT_STICKY=N, for a pipelined
 * job, launches the faulting kernel at that point instead of before the
 * job's kernels.
 */
#include "backend_cuda_pipe.h"

#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend_cuda_dev.h"
#include "backend_cuda_gate.h"
#include "errors.h"
#include "gpuq_kernels.h"
#include "log.h"

/* ---- the plan ----
 * Not chunked: a job of at most chunk_bytes in + out, an op that does not
 * split, and a job the scheduler marked whole (a higher priority level is
 * active on its device: a chunked job makes the loop enqueue dozens of
 * calls, and that level's small requests measurably waited behind them:
 * p99 3.7x alone chunked, 1.4x whole, beside 4 clients' 16 MiB jobs on an
 * H200).
 *
 * Chunk size: about chunk_bytes each way (a row's bytes up or down,
 * whichever is more), at most CUDA_PIPE_MAX_CHUNKS chunks, at least two.
 * Tapered (one-phase ops whose scratch does not depend on the chunk, with
 * a nominal chunk's rows at least, two when tapered at both ends): the
 * last CUDA_PIPE_RAMP chunks are 1/2, 1/4, ... 1/2^RAMP of the nominal
 * size, and when the download is at least as large as the upload the
 * first ones the same in reverse. While the first chunk goes up nothing
 * can come down, and after the last went up only its kernel and download
 * are left: small end chunks shorten both (with 4 MiB chunks, a 64 MiB
 * row-wise normalize took 1480 us of device time untapered against a 1332
 * us duplex copy on an H200). Between them the chunks are large, since
 * every copy costs a few microseconds of its own. */

/* Chunk boundaries: chunks of `chunk` rows from row `at` (the last of
 * them ends at `end`), into pl->start from index k; returns the next k. */
static uint64_t plan_even(cuda_plan *pl, uint64_t k, uint64_t at, uint64_t end, uint64_t chunk)
{
    for (; at < end; at += chunk)
        pl->start[k++] = at;
    return k;
}

/* Tapered chunks of nominal size c: CUDA_PIPE_RAMP chunks of c/2^RAMP ..
 * c/2 rows at the end, the same rising at the start when head, and the
 * rows between in chunks of about c. */
static void plan_taper(cuda_plan *pl, uint64_t c, int head)
{
    uint64_t rows = pl->sp.rows, ramp[CUDA_PIPE_RAMP], sum = 0, k = 0, at = 0;
    for (int i = 0; i < CUDA_PIPE_RAMP; i++) {
        ramp[i] = c >> (CUDA_PIPE_RAMP - i);
        sum += ramp[i];
    }
    uint64_t ends = head ? 2 : 1, mid = rows - ends * sum;
    uint64_t nmid = mid / c + (mid % c != 0);
    if (nmid > CUDA_PIPE_MAX_CHUNKS - ends * CUDA_PIPE_RAMP)
        nmid = CUDA_PIPE_MAX_CHUNKS - ends * CUDA_PIPE_RAMP;
    uint64_t mc = mid / nmid + (mid % nmid != 0);
    for (int i = 0; head && i < CUDA_PIPE_RAMP; i++) {
        pl->start[k++] = at;
        at += ramp[i];
    }
    k = plan_even(pl, k, at, at + mid, mc);
    at += mid;
    for (int i = CUDA_PIPE_RAMP - 1; i >= 0; i--) {
        pl->start[k++] = at;
        at += ramp[i];
    }
    pl->start[k] = rows;
    pl->nchunks = k;
    pl->chunk = mc > ramp[CUDA_PIPE_RAMP - 1] ? mc : ramp[CUDA_PIPE_RAMP - 1];
}

int cuda_pipe_plan(const backend_cuda *b, const gpuq_job *job, cuda_plan *pl)
{
    const gpuq_sizes *sz = job->sz;
    const op_backend_def *ob = op_backend_of(job->req->op);
    memset(pl, 0, sizeof *pl);
    /* A gated job chunks at an eighth of the size, from a quarter of the
     * threshold up: its uploads wait for the client's copies, which come
     * in pieces of a few MiB (libgpuq: 1 to 4 MiB), so smaller chunks
     * start sooner after each. */
    uint64_t cb = job->req->gate ? b->chunk_bytes / 8 : b->chunk_bytes;
    if (b->chunk_bytes == 0 || job->whole || !ob || !ob->launch_cuda_rows ||
        sz->payload + sz->output <= (job->req->gate ? b->chunk_bytes / 4 : b->chunk_bytes))
        return 0;
    if (!op_cuda_split(job->req, sz, &pl->sp) || pl->sp.rows < 2)
        return 0;
    const op_split *sp = &pl->sp;
    if (sp->two_phase && (!ob->launch_cuda_reduce || !ob->launch_cuda_finish))
        return 0;
    uint64_t up = sp->a_row + sp->b_row, down = 0;
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++)
        down += sp->out_row[k];
    uint64_t row = up > down ? up : down;
    if (row == 0)
        return 0;
    uint64_t c = cb / row;
    if (c == 0)
        c = 1;
    uint64_t nominal = c;
    if (sp->two_phase && !job->req->gate) /* fewer, larger uploads; the download starts small */
        c = c > UINT64_MAX / CUDA_PIPE_TWO_PHASE_SCALE ? UINT64_MAX : c * CUDA_PIPE_TWO_PHASE_SCALE;
    if (c >= sp->rows)
        c = sp->rows / 2 + sp->rows % 2; /* over the threshold: two chunks at least */
    /* tapered at the end always; at the start too unless the upload is
     * the larger side (then the first downloads are not what waits) */
    int head = down >= up, taper = !sp->two_phase && !sp->fixed_chunks &&
                                   c >= (1u << CUDA_PIPE_RAMP) && sp->rows / c >= 1u + head;
    if (taper) {
        plan_taper(pl, c, head);
    } else {
        /* even: at most CUDA_PIPE_MAX_CHUNKS chunks, the rows spread
         * evenly over that many */
        uint64_t least = sp->rows / CUDA_PIPE_MAX_CHUNKS + (sp->rows % CUDA_PIPE_MAX_CHUNKS != 0);
        if (c < least)
            c = least;
        uint64_t n = sp->rows / c + (sp->rows % c != 0);
        if (n < 2)
            return 0;
        c = sp->rows / n + (sp->rows % n != 0);
        pl->chunk = c;
        pl->nchunks = plan_even(pl, 0, 0, sp->rows, c);
        pl->start[pl->nchunks] = sp->rows;
    }
    pl->scratch = ob->cuda_chunk_scratch ? ob->cuda_chunk_scratch(job->req, sz, pl->chunk)
                                         : op_scratch_bytes(job->req, sz);
    if (sp->two_phase && pl->scratch == 0)
        return 0; /* the op cannot split these sizes: run whole */
    if (sp->two_phase)
        pl->head = nominal < pl->start[1] ? nominal : pl->start[1];
    return pl->nchunks >= 2;
}

/* ---- the run ---- */

typedef struct pipe_ctx {
    backend_cuda *b;
    cuda_sess *s;
    gpuq_job *job;
    const cuda_plan *pl;
    const op_backend_def *ob;
    op_bufs d;
    char *d_a, *d_b;       /* d.a and d.b, writable: the uploads' destinations */
    int in_used, out_used; /* this job put work on copy_in / copy_out */
    char *detail;
    size_t cap;
} pipe_ctx;

/* A failed CUDA call: its status (sticky ones lose the device) and line. */
static int pipe_fail(pipe_ctx *p, cudaError_t e, const char *what)
{
    snprintf(p->detail, p->cap, "%s: %s", what, cudaGetErrorString(e));
    return cuda_status_of(p->b, e, what);
}

/* A launch hook's GPUQ_K_* code (not OK) as a status. */
static int pipe_kfail(pipe_ctx *p, int k)
{
    snprintf(p->detail, p->cap, "kernel launch failed");
    return cuda_status_of_kcode(p->b, p->job, k);
}

#define PIPE_CALL(p, call, what)                                                                   \
    do {                                                                                           \
        cudaError_t pe_ = (call);                                                                  \
        if (pe_ != cudaSuccess)                                                                    \
            return pipe_fail((p), pe_, (what));                                                    \
    } while (0)

#define PIPE_K(p, call)                                                                            \
    do {                                                                                           \
        int pk_ = (call);                                                                          \
        if (pk_ != GPUQ_K_OK)                                                                      \
            return pipe_kfail((p), pk_);                                                           \
    } while (0)

static op_rows pipe_rows(const cuda_plan *pl, uint64_t k)
{
    return (op_rows){.r0 = pl->start[k], .nr = pl->start[k + 1] - pl->start[k], .chunk = pl->chunk};
}

/* IN: chunk k's rows of A (and of a row-aligned B), then (on the last
 * chunk) the timing event t[1], then ev_in; C waits on it. */
static int pipe_upload(pipe_ctx *p, uint64_t k)
{
    const op_split *sp = &p->pl->sp;
    cuda_sess *s = p->s;
    cuda_jobx *x = p->job->bpriv;
    op_rows rw = pipe_rows(p->pl, k);
    const char *h_a = p->job->h_in[0], *h_b = p->job->h_in[1];
    int rc;
    /* a gated job of a unit per chunk: chunk k waits for its rows */
    if (x->gate_n > 1 &&
        (rc = cuda_gate_wait(p->b, s->copy_in, x, (uint32_t)k + 1, p->detail, p->cap)) != 0)
        return rc;
    if (sp->a_row)
        PIPE_CALL(p,
                  cudaMemcpyAsync(p->d_a + rw.r0 * sp->a_row, h_a + rw.r0 * sp->a_row,
                                  rw.nr * sp->a_row, cudaMemcpyHostToDevice, s->copy_in),
                  "cudaMemcpyAsync(H2D chunk)");
    if (sp->b_row)
        PIPE_CALL(p,
                  cudaMemcpyAsync(p->d_b + rw.r0 * sp->b_row, h_b + rw.r0 * sp->b_row,
                                  rw.nr * sp->b_row, cudaMemcpyHostToDevice, s->copy_in),
                  "cudaMemcpyAsync(H2D chunk B)");
    /* Before ev_in, so that C's wait covers it and the event is complete
     * by the time the job is (its elapsed time is read then). */
    if (k + 1 == p->pl->nchunks && x->timing)
        PIPE_CALL(p, cudaEventRecord(x->t[1], s->copy_in), "cudaEventRecord(t1)");
    PIPE_CALL(p, cudaEventRecord(s->ev_in, s->copy_in), "cudaEventRecord(in)");
    PIPE_CALL(p, cudaStreamWaitEvent(s->stream, s->ev_in, 0), "cudaStreamWaitEvent(in)");
    return 0;
}

/* C: the op on rows rw (t[2] after the last: last); OUT: its outputs'
 * rows. */
static int pipe_compute_download(pipe_ctx *p, op_rows rw, int last)
{
    const op_split *sp = &p->pl->sp;
    cuda_sess *s = p->s;
    cuda_jobx *x = p->job->bpriv;
    PIPE_K(p, p->ob->launch_cuda_rows(s->kctx, p->job->req, p->job->sz, &p->d, &rw));
    if (last && x->timing)
        PIPE_CALL(p, cudaEventRecord(x->t[2], s->stream), "cudaEventRecord(t2)");
    PIPE_CALL(p, cudaEventRecord(s->ev_comp, s->stream), "cudaEventRecord(compute)");
    p->out_used = 1;
    PIPE_CALL(p, cudaStreamWaitEvent(s->copy_out, s->ev_comp, 0), "cudaStreamWaitEvent(compute)");
    for (uint32_t o = 0; o < p->job->sz->nout && o < GPUQ_MAX_OUTPUTS; o++) {
        uint64_t ob = sp->out_row[o];
        if (ob)
            PIPE_CALL(p,
                      cudaMemcpyAsync((char *)p->job->h_out[o] + rw.r0 * ob,
                                      (const char *)p->d.out[o] + rw.r0 * ob, rw.nr * ob,
                                      cudaMemcpyDeviceToHost, s->copy_out),
                      "cudaMemcpyAsync(D2H chunk)");
    }
    return 0;
}

/* The test hooks at the middle chunk (see the top of this file). */
static int pipe_inject(pipe_ctx *p, uint64_t k)
{
    backend_cuda *b = p->b;
    if (k != p->pl->nchunks / 2)
        return 0;
    if (b->inject_sticky && b->submits == b->inject_sticky)
        PIPE_K(p, gpuq_cuda_test_fault(p->s->stream));
    if (b->inject_pipe && b->submits == b->inject_pipe)
        return pipe_fail(p, cudaErrorLaunchOutOfResources, "injected (GPUQ_TEST_INJECT_PIPE)");
    return 0;
}

/* Everything up to the join; returns at the first failure. */
static int pipe_enqueue(pipe_ctx *p)
{
    cuda_sess *s = p->s;
    const gpuq_sizes *sz = p->job->sz;
    const cuda_plan *pl = p->pl;
    cuda_jobx *x = p->job->bpriv;
    /* the input buffer came on IN: joined on failure from the start */
    int rc, has_in = p->d_a != NULL;
    if (has_in) {
        p->in_used = 1;
        /* a gated job of one unit: everything on IN waits for all of it */
        if (x->gate_n == 1 && (rc = cuda_gate_wait(p->b, s->copy_in, x, 1, p->detail, p->cap)) != 0)
            return rc;
        if (sz->nin > 1 && !pl->sp.b_row && sz->in_bytes[1])
            PIPE_CALL(p,
                      cudaMemcpyAsync(p->d_b, p->job->h_in[1], sz->in_bytes[1],
                                      cudaMemcpyHostToDevice, s->copy_in),
                      "cudaMemcpyAsync(H2D B)");
    } else if (x->timing) {
        PIPE_CALL(p, cudaEventRecord(x->t[1], s->stream), "cudaEventRecord(t1)");
    }
    for (uint64_t k = 0; k < pl->nchunks; k++) {
        if (has_in && (rc = pipe_upload(p, k)) != 0)
            return rc;
        if ((rc = pipe_inject(p, k)) != 0)
            return rc;
        if (pl->sp.two_phase) {
            op_rows rw = pipe_rows(pl, k);
            PIPE_K(p, p->ob->launch_cuda_reduce(s->kctx, p->job->req, sz, &p->d, &rw));
        } else if ((rc = pipe_compute_download(p, pipe_rows(pl, k), k + 1 == pl->nchunks)) != 0) {
            return rc;
        }
    }
    if (pl->sp.two_phase) {
        /* The output in two pieces: a nominal chunk's rows (pl->head),
         * whose download starts at once, then all the rest in one launch
         * and one copy (each copy costs a few microseconds of its own). */
        op_rows all = {.r0 = 0, .nr = pl->sp.rows, .chunk = pl->chunk};
        op_rows head = {.r0 = 0, .nr = pl->head, .chunk = pl->chunk};
        op_rows rest = {.r0 = head.nr, .nr = pl->sp.rows - head.nr, .chunk = pl->chunk};
        PIPE_K(p, p->ob->launch_cuda_finish(s->kctx, p->job->req, sz, &p->d, &all));
        if ((rc = pipe_compute_download(p, head, 0)) != 0 ||
            (rc = pipe_compute_download(p, rest, 1)) != 0)
            return rc;
    }
    if (p->out_used) {
        PIPE_CALL(p, cudaEventRecord(s->ev_out, s->copy_out), "cudaEventRecord(out)");
        PIPE_CALL(p, cudaStreamWaitEvent(s->stream, s->ev_out, 0), "cudaStreamWaitEvent(out)");
    }
    return 0;
}

/* After a failure: order what side put on its stream before C's next
 * work, or wait for it. When neither works the job's host memory could
 * still be read or written by a copy after it completes: the device is
 * then treated as lost (gpuqd exits, every job is answered). */
static void pipe_join_side(pipe_ctx *p, cudaStream_t side, cudaEvent_t ev, const char *what)
{
    cudaError_t e = cudaEventRecord(ev, side);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(p->s->stream, ev, 0);
    if (e == cudaSuccess)
        return;
    log_error("cuda: joining the %s stream after a failed job: %s; synchronizing it", what,
              cudaGetErrorString(e));
    e = cudaStreamSynchronize(side);
    if (e != cudaSuccess)
        cuda_mark_lost(p->b, "cudaStreamSynchronize(copy stream) after a failed job", e);
}

int cuda_pipe_run(backend_cuda *b, cuda_sess *s, gpuq_job *job, const cuda_plan *pl, void *d_in,
                  void *d_out, void *d_scratch, char *detail, size_t cap)
{
    pipe_ctx p = {.b = b,
                  .s = s,
                  .job = job,
                  .pl = pl,
                  .ob = op_backend_of(job->req->op),
                  .d = op_bufs_make(job->req, job->sz, d_in, d_out, d_scratch),
                  .d_a = d_in,
                  .d_b = job->sz->nin > 1 && d_in ? (char *)d_in + op_b_offset(job->req) : NULL,
                  .detail = detail,
                  .cap = cap};
    b->base.pipelined++;
    b->base.chunks += pl->nchunks;
    int rc = pipe_enqueue(&p);
    if (rc) {
        if (p.out_used)
            pipe_join_side(&p, s->copy_out, s->ev_out, "copy out");
        if (p.in_used)
            pipe_join_side(&p, s->copy_in, s->ev_in, "copy in");
    }
    return rc;
}
