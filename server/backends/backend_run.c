/* SPDX-License-Identifier: Apache-2.0 */
/* backend_run.c - one job on the CPU reference kernels.
 *
 * The op's backend def (ops/<op>.c, op_backend_of) runs it on the job's
 * host pointers (staging slot or arena): an op with row kernels in blocks of
 * rows, checking between two whether the job is still wanted, a large job's
 * blocks spread over several threads (run_blocks); one long row of an op
 * with piece hooks (flat normalize) in fixed pieces on those threads, its
 * reduce passes, combine and scaling in turn (run_pieces). Kernel codes become wire codes with a
 * message; the op may word the message itself (normalize names the failing row, found again by the
 * CPU reference's rules on the error path only).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "backend_run.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "gpuq_kernels.h"
#include "op_backend.h"

int backend_map_kernel_error(gpuq_job *job, int kcode)
{
    const gpuq_request *r = job->req;
    const op_backend_def *ob = op_backend_of(r->op);
    char *m = job->message;
    size_t cap = sizeof job->message;
    /* host bytes of A and B: the job's, or a resident array's on the CPU */
    const void *h_a = job->h_in[0] ? job->h_in[0] : job->res_host ? job->res_in[0] : NULL;
    const void *h_b = job->h_in[1] ? job->h_in[1] : job->res_host ? job->res_in[1] : NULL;
    int own = kcode != GPUQ_K_OK && ob && ob->kernel_message &&
              ob->kernel_message(r, job->sz, h_a, h_b, kcode, m, cap);
    switch (kcode) {
    case GPUQ_K_OK:
        return 0;
    case GPUQ_K_E_ZERO:
        if (!own)
            snprintf(m, cap, "zero norm or zero vector");
        return GPUQ_E_ZERO_NORM;
    case GPUQ_K_E_OVERFLOW:
        if (!own)
            snprintf(m, cap, "a result is too large for %s", gpuq_dtype_name(r->dtype));
        return GPUQ_E_OUT_OF_RANGE;
    case GPUQ_K_E_RANGE:
        if (!own)
            snprintf(m, cap, "latitude outside [-90, 90] or non-finite coordinate");
        return GPUQ_E_OUT_OF_RANGE;
    case GPUQ_K_E_STOPPED:
        snprintf(m, cap, "stopped on the device: no longer wanted");
        return GPUQ_E_CANCELLED;
    case GPUQ_K_E_ARG:
        snprintf(m, cap, "invalid argument for the kernel");
        return GPUQ_E_BAD_ARGUMENT;
    case GPUQ_K_E_NOMEM:
        snprintf(m, cap, "out of memory");
        return GPUQ_E_NO_MEMORY;
    case GPUQ_K_E_CUDA:
        snprintf(m, cap, "CUDA error");
        return GPUQ_E_DEVICE;
    case GPUQ_K_E_STICKY:
        snprintf(m, cap, "device lost");
        return GPUQ_E_DEVICE_LOST;
    default:
        snprintf(m, cap, "kernel returned %d", kcode);
        return GPUQ_E_INTERNAL;
    }
}

/* Blocks a long CPU job runs in: a job stops within about 1/BACKEND_CPU_BLOCKS
 * of its time once it is no longer wanted, at a cost of as many calls (the
 * ops' row kernels set nothing up per call that matters at this count). */
#define BACKEND_CPU_BLOCKS 64
/* A job whose arrays come to this many bytes or more runs its blocks on
 * several threads: the pool thread that runs it and helpers it starts for
 * the job (one per usable CPU beyond its own, BACKEND_CPU_MAX_THREADS in
 * all at most). Below, thread starts would cost more than they save. */
#define BACKEND_CPU_PAR_MIN ((uint64_t)1 << 20)
#define BACKEND_CPU_MAX_THREADS 16

/* The threads a large job takes: the usable CPUs (read once), 1 to
 * BACKEND_CPU_MAX_THREADS. GPUQ_CPU_THREADS (1..BACKEND_CPU_MAX_THREADS)
 * overrides it, read once too (1: every job on its pool thread alone). */
static unsigned cpu_threads;
static pthread_once_t cpu_threads_once = PTHREAD_ONCE_INIT;
static void cpu_threads_init(void)
{
    long n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *v = getenv("GPUQ_CPU_THREADS");
    if (v && *v) {
        char *end;
        long t = strtol(v, &end, 10);
        if (*end == '\0' && t >= 1 && t <= BACKEND_CPU_MAX_THREADS)
            n = t;
    }
    cpu_threads = n < 1 ? 1u : n > BACKEND_CPU_MAX_THREADS ? BACKEND_CPU_MAX_THREADS : (unsigned)n;
}

/* One job's blocks of rows, taken in turn by the threads that run it: each
 * block runs fn (the op's row kernel, or a phase of a run in pieces). */
typedef struct cpu_blocks cpu_blocks;
struct cpu_blocks {
    gpuq_job *job;
    const op_backend_def *ob;
    const op_bufs *h;
    int (*fn)(const cpu_blocks *cb, const op_rows *rw);
    int pass; /* run_pieces' reduce pass */
    uint64_t rows, block, nblocks;
    uint64_t next;       /* atomic: the next block to take */
    uint64_t rows_done;  /* atomic: rows of blocks that completed */
    bool stopped;        /* atomic: a thread found the job no longer wanted */
    pthread_mutex_t mu;  /* guards fail_block and fail_code */
    uint64_t fail_block; /* the first block (in row order) that failed; nblocks: none */
    int fail_code;
};

static int fn_rows(const cpu_blocks *cb, const op_rows *rw)
{
    return cb->ob->run_cpu_rows(cb->job->req, cb->job->sz, cb->h, rw);
}

static int fn_reduce(const cpu_blocks *cb, const op_rows *rw)
{
    return cb->ob->run_cpu_reduce(cb->job->req, cb->job->sz, cb->h, rw, cb->pass);
}

static int fn_scale(const cpu_blocks *cb, const op_rows *rw)
{
    return cb->ob->run_cpu_scale(cb->job->req, cb->job->sz, cb->h, rw);
}

/* Take blocks until none is left, the job is no longer wanted, or every
 * block left comes after one that failed (the first failure in row order
 * is the one reported, as when the blocks ran one after the other). */
static void *cpu_blocks_run(void *arg)
{
    cpu_blocks *cb = arg;
    for (;;) {
        uint64_t k = __atomic_fetch_add(&cb->next, 1, __ATOMIC_RELAXED);
        if (k >= cb->nblocks)
            break;
        if (__atomic_load_n(&cb->job->stop, __ATOMIC_RELAXED)) {
            __atomic_store_n(&cb->stopped, true, __ATOMIC_RELAXED);
            break;
        }
        if (pthread_mutex_lock(&cb->mu))
            abort(); /* a mutex of our own, never destroyed while in use */
        bool after_failure = k > cb->fail_block;
        pthread_mutex_unlock(&cb->mu);
        if (after_failure)
            break;
        op_rows rw = {.r0 = k * cb->block, .chunk = cb->block};
        rw.nr = cb->rows - rw.r0 < cb->block ? cb->rows - rw.r0 : cb->block;
        int kc = cb->fn(cb, &rw);
        if (kc != GPUQ_K_OK) {
            if (pthread_mutex_lock(&cb->mu))
                abort();
            if (k < cb->fail_block) {
                cb->fail_block = k;
                cb->fail_code = kc;
            }
            pthread_mutex_unlock(&cb->mu);
            break;
        }
        __atomic_fetch_add(&cb->rows_done, rw.nr, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* The threads a job of sz takes: the usable CPUs for a large job, else 1. */
static unsigned job_threads(const gpuq_job *job)
{
    if (job->sz->payload + job->sz->output < BACKEND_CPU_PAR_MIN)
        return 1;
    pthread_once(&cpu_threads_once, cpu_threads_init);
    return cpu_threads;
}

/* One phase: cb's blocks (block rows each, from 0) on this thread and up to
 * want - 1 helpers. The blocks are independent (each writes its own rows
 * of the outputs, or its own partial), so the result is the same whatever
 * thread ran which block. A helper that cannot start leaves its share to
 * the others. Returns 0, or -1 when the job failed or stopped (status and
 * message set) or its mutex could not be made. */
static int blocks_phase(gpuq_job *job, cpu_blocks *cb, uint64_t block, unsigned want)
{
    cb->block = block;
    cb->nblocks = (cb->rows + block - 1) / block;
    cb->next = 0;
    cb->rows_done = 0; /* this phase's: a stop's message counts them */
    cb->fail_block = cb->nblocks;
    if (want > cb->nblocks)
        want = (unsigned)cb->nblocks;
    if (pthread_mutex_init(&cb->mu, NULL)) {
        job->status = GPUQ_E_NO_MEMORY;
        snprintf(job->message, sizeof job->message, "cannot start the job's threads");
        return -1;
    }
    pthread_t tid[BACKEND_CPU_MAX_THREADS];
    unsigned started = 0;
    while (started + 1 < want && pthread_create(&tid[started], NULL, cpu_blocks_run, cb) == 0)
        started++;
    cpu_blocks_run(cb);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&cb->mu);
    if (cb->fail_block < cb->nblocks) {
        job->status = backend_map_kernel_error(job, cb->fail_code);
        return -1;
    }
    if (cb->stopped) {
        job->status = GPUQ_E_CANCELLED;
        snprintf(job->message, sizeof job->message, "stopped after %llu of %llu %s",
                 (unsigned long long)cb->rows_done, (unsigned long long)cb->rows,
                 cb->fn == fn_rows ? "rows" : "values");
        return -1;
    }
    job->status = 0;
    return 0;
}

/* A job's blocks of rows: BACKEND_CPU_BLOCKS blocks for each thread, so a
 * stop waits for one block of one thread's share, whatever the count. */
static void run_blocks(gpuq_job *job, const op_backend_def *ob, const op_bufs *h, uint64_t rows)
{
    cpu_blocks cb = {.job = job, .ob = ob, .h = h, .fn = fn_rows, .rows = rows};
    unsigned want = job_threads(job);
    uint64_t nb = (uint64_t)BACKEND_CPU_BLOCKS * want;
    (void)blocks_phase(job, &cb, (rows + nb - 1) / nb, want);
}

/* A two-phase split (one long row's values) in the op's pieces: each
 * reduce pass over every piece on the job's threads, the combine on this
 * one, then the scaling of every piece. The pieces do not depend on the
 * threads, so neither do the bits. 0, or -1 when run_pieces does not
 * apply (no hooks, a small job, bad sizes: run whole); a failure or a
 * stop is the job's status. */
static int run_pieces(gpuq_job *job, const op_backend_def *ob, op_bufs *h, uint64_t rows)
{
    if (!ob->run_cpu_reduce || !ob->run_cpu_combine || !ob->run_cpu_scale || !ob->cpu_piece ||
        rows < 2 * ob->cpu_piece || job->sz->payload + job->sz->output < BACKEND_CPU_PAR_MIN)
        return -1;
    uint64_t bytes = ob->cpu_scratch(job->req, job->sz);
    if (bytes == 0)
        return -1;
    if ((h->scratch = malloc(bytes)) == NULL) {
        job->status = GPUQ_E_NO_MEMORY;
        snprintf(job->message, sizeof job->message, "cannot allocate %llu bytes of scratch",
                 (unsigned long long)bytes);
        return 0;
    }
    cpu_blocks cb = {.job = job, .ob = ob, .h = h, .fn = fn_reduce, .rows = rows};
    unsigned want = job_threads(job);
    int more = 1, kc = GPUQ_K_OK;
    for (cb.pass = 0; more && kc == GPUQ_K_OK; cb.pass++) {
        if (blocks_phase(job, &cb, ob->cpu_piece, want) != 0)
            goto out;
        kc = ob->run_cpu_combine(job->req, job->sz, h, cb.pass, &more);
    }
    if (kc != GPUQ_K_OK) {
        job->status = backend_map_kernel_error(job, kc);
        goto out;
    }
    cb.fn = fn_scale;
    (void)blocks_phase(job, &cb, ob->cpu_piece, want);
out:
    free(h->scratch);
    h->scratch = NULL;
    return 0;
}

void backend_run_cpu(gpuq_job *job)
{
    const op_backend_def *ob = op_backend_of(job->req->op);
    if (!ob || !ob->run_cpu) {
        job->status = GPUQ_E_UNKNOWN_OP;
        snprintf(job->message, sizeof job->message, "op not runnable on a backend");
        return;
    }
    /* resident arrays are host memory here; kept outputs too, the
     * server's from completion on (the CPU backend's res_free) */
    job->res_host = job->res_in[0] != NULL;
    for (uint32_t k = 0; k < job->sz->nout && k < GPUQ_MAX_OUTPUTS; k++) {
        if (!job->keep[k] || job->res_out[k])
            continue;
        if (posix_memalign(&job->res_out[k], 64,
                           job->sz->out[k].bytes ? job->sz->out[k].bytes : 1) != 0) {
            job->res_out[k] = NULL;
            job->status = GPUQ_E_NO_MEMORY;
            snprintf(job->message, sizeof job->message,
                     "cannot allocate %llu bytes for output %u kept as a resident array",
                     (unsigned long long)job->sz->out[k].bytes, (unsigned)k);
            return;
        }
    }
    const void *in[GPUQ_MAX_INPUTS];
    void *out[GPUQ_MAX_OUTPUTS];
    for (uint32_t k = 0; k < GPUQ_MAX_INPUTS; k++)
        in[k] = job->res_in[k] ? job->res_in[k] : job->h_in[k];
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++)
        out[k] = job->keep[k] ? job->res_out[k] : job->h_out[k];
    op_bufs h = {.a = in[0],
                 .b = job->sz->nin > 1 ? in[1] : NULL,
                 .out = {out[0], job->sz->nout > 1 ? out[1] : NULL}};
    op_split sp;
    int split = ob->run_cpu_rows && op_cuda_split(job->req, job->sz, &sp);
    if (split && sp.two_phase && run_pieces(job, ob, &h, sp.rows) == 0)
        return;
    if (!split || sp.two_phase) {
        job->status = backend_map_kernel_error(job, ob->run_cpu(job->req, job->sz, &h));
        return;
    }
    run_blocks(job, ob, &h, sp.rows);
}

int backend_batchable(const backend *b, const gpuq_job *job)
{
    const op_backend_def *ob = op_backend_of(job->req->op);
    return b->batch_max > 0 && ob && ob->batchable && !job->req->timing && !job->req->gate &&
           job->sz->payload + job->sz->output <= b->batch_bytes;
}

void backend_count_batch(backend *b, unsigned n)
{
    if (n >= 2) {
        b->batches++;
        b->batched += n;
    }
}

/* The row layout and op key of job, or 0 when its op has none. */
static int row_info(const gpuq_job *job, op_split *sp, uint64_t key[4])
{
    const op_backend_def *ob = op_backend_of(job->req->op);
    return ob && ob->row_batch && ob->row_batch(job->req, job->sz, sp, key);
}

int backend_row_batchable(const backend *b, const gpuq_job *job)
{
    const gpuq_sizes *sz = job->sz;
    op_split sp;
    uint64_t key[4];
    if (b->batch_max == 0 || job->row_alone || job->req->timing || job->req->gate || sz->nin != 2 ||
        !job->res_in[1] || job->res_in[0] || !job->h_in[0] || job->keep[0] || job->keep[1] ||
        sz->in_bytes[0] + sz->output > b->batch_bytes)
        return 0;
    return row_info(job, &sp, key) && sp.rows == sz->m && sp.a_row * sp.rows == sz->in_bytes[0];
}

int backend_row_same(const gpuq_job *a, const gpuq_job *b)
{
    op_split sa, sb;
    uint64_t ka[4], kb[4];
    if (a->req->op != b->req->op || a->req->dtype != b->req->dtype ||
        a->res_in[1] != b->res_in[1] || a->sz->d != b->sz->d || a->sz->n != b->sz->n ||
        a->sz->nout != b->sz->nout)
        return 0;
    return row_info(a, &sa, ka) && row_info(b, &sb, kb) && memcmp(ka, kb, sizeof ka) == 0 &&
           sa.a_row == sb.a_row && memcmp(sa.out_row, sb.out_row, sizeof sa.out_row) == 0;
}

int backend_row_plan_make(gpuq_job *const *jobs, unsigned n, backend_row_plan *p)
{
    op_split sp;
    uint64_t key[4], rows = 0;
    if (n == 0 || n > BACKEND_ROW_BATCH_MAX || !row_info(jobs[0], &sp, key))
        return -1;
    for (unsigned i = 0; i < n; i++) {
        p->row0[i] = rows;
        if (jobs[i]->sz->m > UINT64_MAX / 2 - rows)
            return -1;
        rows += jobs[i]->sz->m;
    }
    p->req = *jobs[0]->req;
    p->sz = *jobs[0]->sz;
    p->req.shape_a[0] = rows;
    p->a_row = sp.a_row;
    p->sz.m = rows;
    p->sz.in_bytes[0] = rows * sp.a_row;
    p->sz.payload = p->sz.in_bytes[0] + p->sz.in_bytes[1];
    p->sz.output = 0;
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++) {
        p->out_row[k] = k < p->sz.nout ? sp.out_row[k] : 0;
        p->out_at[k] = p->sz.output;
        if (k < p->sz.nout) {
            p->sz.out[k].shape[0] = rows;
            p->sz.out[k].bytes = rows * sp.out_row[k];
            p->sz.output += p->sz.out[k].bytes;
        }
    }
    return 0;
}

void backend_run_row_batch(gpuq_job *const *jobs, unsigned n)
{
    gpuq_job *run[BACKEND_ROW_BATCH_MAX];
    unsigned nrun = 0;
    for (unsigned i = 0; i < n; i++) {
        if (__atomic_load_n(&jobs[i]->stop, __ATOMIC_RELAXED))
            backend_run_cpu(jobs[i]); /* stops at its first block */
        else
            run[nrun++] = jobs[i];
    }
    if (nrun == 0)
        return;
    backend_row_plan p;
    char *a = NULL, *out = NULL;
    gpuq_job one;
    memset(&one, 0, sizeof one);
    one.status = -1;
    if (nrun >= 2 && backend_row_plan_make(run, nrun, &p) == 0 &&
        (a = malloc(p.sz.in_bytes[0] ? p.sz.in_bytes[0] : 1)) != NULL &&
        (out = malloc(p.sz.output ? p.sz.output : 1)) != NULL) {
        for (unsigned i = 0; i < nrun; i++)
            memcpy(a + p.row0[i] * p.a_row, run[i]->h_in[0], run[i]->sz->in_bytes[0]);
        one.req = &p.req;
        one.sz = &p.sz;
        one.h_in[0] = a;
        one.res_in[1] = run[0]->res_in[1];
        for (uint32_t k = 0; k < p.sz.nout; k++)
            one.h_out[k] = out + p.out_at[k];
        backend_run_cpu(&one);
    }
    for (unsigned i = 0; i < nrun; i++) {
        gpuq_job *j = run[i];
        if (one.status != 0) { /* one job, or the batch failed: alone, as it would */
            backend_run_cpu(j);
            continue;
        }
        for (uint32_t k = 0; k < j->sz->nout; k++)
            memcpy(j->h_out[k], out + p.out_at[k] + p.row0[i] * p.out_row[k], j->sz->out[k].bytes);
        j->status = 0;
        j->message[0] = '\0';
    }
    free(a);
    free(out);
}
