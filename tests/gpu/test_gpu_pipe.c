/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_pipe.c - pipelined, chunked CUDA jobs (server/backends/cuda/backend_cuda_pipe.c)
 * and the kernels' pieces they use.
 *
 * The backend is driven directly (its own uv loop, one session), so that a
 * test can switch chunking per job (b->chunk_bytes), count the jobs and
 * chunks that went through the pipeline (b->base.pipelined, b->base.chunks: a chunked
 * run that silently ran whole would prove nothing), and look at the
 * session's copy streams when a job completes: both must be idle then (the
 * join), since the job's host memory is handed back at completion.
 *
 * Every op, f32 and f64, with row counts that no chunk size divides, runs
 * whole and in chunks on the same inputs: the results must be the same bits
 * (flat normalize sum/l1/l2/zscore, whose partial sums group differently,
 * and float64 pairwise on cuBLAS, whose algorithm may depend on m: within
 * their bounds; flat minmax: bit for bit), and within the documented error
 * of the CPU reference. Host arrays are not adjacent (each output before
 * the inputs, gaps between, the second output 4 bytes off alignment), half
 * in cudaHostAlloc memory and half in malloc memory registered with
 * cudaHostRegister, as shared-memory arenas are. Data errors (a zero row, a
 * bad latitude, a cosine zero vector) in a late chunk give the whole run's
 * status and message. A failure injected mid-pipeline
 * (b->inject_pipe) fails that job only, with both copy streams idle at its
 * completion, and the next job is right; many chunked jobs in flight at
 * once, on two sessions, reuse the sessions' events correctly.
 *
 * The flat normalize pieces (gpuq_cuda_normalize_flat_*) are also checked
 * alone: pieces reduced in reverse order, scaled in ranges that cut across
 * pieces, against gpuq_cuda_normalize and the CPU, their flags, bad
 * arguments.
 *
 * No GPU: exit 77 (ctest: Skipped) unless GPUQ_REQUIRE_GPU=1.
 */
#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <uv.h>

#include "backend.h"
#include "backend_cuda_dev.h"
#include "backend_cuda_pipe.h"
#include "errors.h"
#include "gpu_test.h"
#include "gpuq_kernels.h"
#include "header.h"
#include "numtol.h"
#include "req_args.h"
#include "testutil.h"

_Static_assert(NT_F32 == GPUQ_DT_F32 && NT_F64 == GPUQ_DT_F64 && NT_F32 == GPUQ_K_F32 &&
                   NT_F64 == GPUQ_K_F64,
               "numtol.h numbers dtypes as the wire and the kernels");

#define ELEM_TOL64 2e-15 /* normalize, per element, against exact (test_gpu_kernels) */
#define ELEM_TOL32 6.0e-8
#define CHUNK 65536 /* the chunk size of the chunked runs */
#define HOST_CAP ((size_t)160 << 20)

static uv_loop_t g_loop;
static backend *g_b;
static void *g_sess[2];
static char *g_pinned, *g_reg; /* cudaHostAlloc / malloc + cudaHostRegister, HOST_CAP each */

static backend_cuda *bc(void)
{
    return (backend_cuda *)g_b;
}

/* ---- the backend, driven directly ---- */

typedef struct tjob {
    gpuq_job job;
    gpuq_request req;
    gpuq_sizes sz;
    int done;
    cudaError_t q_in, q_out; /* the session's copy streams at completion */
} tjob;

static void on_done(gpuq_job *job)
{
    tjob *t = job->owner;
    cuda_sess *s = job->bsess;
    t->q_in = cudaStreamQuery(s->copy_in);
    t->q_out = cudaStreamQuery(s->copy_out);
    t->done = 1;
}

static void be_start(void)
{
    char why[256];
    ck_assert_int_eq(uv_loop_init(&g_loop), 0);
    g_b = backend_cuda_create(&g_loop, on_done, 0, why, sizeof why);
    ck_assert_msg(g_b != NULL, "backend_cuda_create: %s", why);
    for (int i = 0; i < 2; i++) {
        backend_session_info info;
        ck_assert_int_eq(g_b->ops->session_open(g_b, GPUQ_PRIO_NORMAL, 0, &g_sess[i], &info), 0);
    }
}

static void be_stop(void)
{
    for (int i = 0; i < 2; i++)
        g_b->ops->session_close(g_b, g_sess[i]);
    g_b->ops->destroy(g_b);
    uv_run(&g_loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&g_loop), 0);
    g_b = NULL;
}

static void wait_done(tjob *t)
{
    uint64_t t0 = uv_hrtime();
    while (!t->done) {
        uv_run(&g_loop, UV_RUN_ONCE);
        ck_assert_msg(uv_hrtime() - t0 < 60ull * 1000000000ull, "job not completed in 60 s");
    }
}

static void submit_to(tjob *t, void *sess, const void *a, const void *b, void *o0, void *o1)
{
    memset(&t->job, 0, sizeof t->job);
    t->job.req = &t->req;
    t->job.sz = &t->sz;
    t->job.h_in[0] = t->sz.nin > 0 ? a : NULL;
    t->job.h_in[1] = t->sz.nin > 1 ? b : NULL;
    t->job.h_out[0] = o0;
    t->job.h_out[1] = t->sz.nout > 1 ? o1 : NULL;
    t->job.bsess = sess;
    t->job.owner = t;
    t->job.submit_ns = uv_hrtime();
    t->done = 0;
    ck_assert_int_eq(g_b->ops->submit(g_b, &t->job), 0);
}

static void submit(tjob *t, int sess, const void *a, const void *b, void *o0, void *o1)
{
    submit_to(t, g_sess[sess], a, b, o0, o1);
}

/* ---- requests ---- */

static void check_req(tjob *t, uint64_t payload)
{
    gpuq_limits lim;
    char msg[256];
    gpuq_limits_default(&lim);
    lim.max_payload = lim.max_output = (uint64_t)1 << 34;
    int rc = gpuq_request_check(&t->req, payload, &lim, &t->sz, msg, sizeof msg);
    ck_assert_msg(rc == 0, "request check: %s", msg);
}

static size_t esz(int dt)
{
    return dt == GPUQ_DT_F32 ? 4 : 8;
}

/* A case: one request, its inputs (float64 values, rounded to dt when
 * stored) and what to compare. */
enum { K_NORM, K_HAV, K_GRID, K_PAIR, K_KNN };
typedef struct tcase_def {
    int kind, dt, method, flat;
    uint64_t a0, a1; /* normalize rows, cols (cols 0: 1-D); haversine n; grid nlat, nlon;
                        pairwise/knn m, n */
    uint64_t d, k;   /* pairwise/knn; haversine: pair when d == 1 */
} tcase_def;

static uint64_t build(tjob *t, const tcase_def *c)
{
    gpuq_request *r = &t->req;
    uint64_t in = 0;
    gpuq_request_init(r);
    r->dtype = (gpuq_dtype)c->dt;
    switch (c->kind) {
    case K_NORM:
        r->op = GPUQ_OP_NORMALIZE;
        r->ndim_a = c->a1 ? 2 : 1;
        r->shape_a[0] = c->a0;
        r->shape_a[1] = c->a1;
        rq_set_method(r, c->method);
        if (c->flat)
            rq_set_flat(r, true);
        in = c->a0 * (c->a1 ? c->a1 : 1);
        break;
    case K_HAV:
        r->op = GPUQ_OP_HAVERSINE;
        r->ndim_a = 2;
        r->shape_a[0] = c->a0;
        r->shape_a[1] = 2;
        if (c->d) {
            r->ndim_b = 2;
            r->shape_b[0] = c->a0;
            r->shape_b[1] = 2;
        } else {
            gpuq_request_set_pair(r, "to", -33.9, 151.2);
        }
        in = c->a0 * (c->d ? 4 : 2);
        break;
    case K_GRID:
        r->op = GPUQ_OP_GRID;
        gpuq_request_set_range(r, "lat", -61.25, 77.5, c->a0);
        gpuq_request_set_range(r, "lon", -170.0, 33.3, c->a1);
        gpuq_request_set_pair(r, "to", 12.5, -45.0);
        break;
    default:
        r->op = c->kind == K_PAIR ? GPUQ_OP_PAIRWISE : GPUQ_OP_KNN;
        r->ndim_a = r->ndim_b = 2;
        r->shape_a[0] = c->a0;
        r->shape_b[0] = c->a1;
        r->shape_a[1] = r->shape_b[1] = c->d;
        rq_set_metric(r, c->method);
        if (c->kind == K_KNN)
            ck_assert_int_eq(gpuq_request_set_uint(r, "k", c->k), 0);
        in = (c->a0 + c->a1) * c->d;
        break;
    }
    check_req(t, in * esz(c->dt));
    return in;
}

/* Inputs for c: n values as float64 (rounded to dt) and as stored. */
static void fill(const tcase_def *c, const tjob *t, double *x, void *stored, uint64_t n)
{
    if (c->kind == K_HAV) {
        for (uint64_t i = 0; i < n / 2; i++) {
            x[2 * i] = -80.0 + 160.0 * (double)((i * 7919) % 1000) / 1000.0;
            x[2 * i + 1] = -179.0 + 358.0 * (double)((i * 104729) % 997) / 997.0;
        }
    } else if (c->kind == K_NORM && c->method >= GPUQ_K_MINMAX) {
        tu_rand_fill_f64(x, n, -1.5, 1.5);
    } else if (c->kind == K_NORM) {
        tu_norm_fill(TU_NORM_MIXED, c->dt == GPUQ_DT_F32, x, 1, n);
    } else {
        tu_rand_fill_f64(x, n, -1.0, 1.0);
    }
    (void)t;
    for (uint64_t i = 0; i < n; i++) {
        if (c->dt == GPUQ_DT_F32) {
            ((float *)stored)[i] = (float)x[i];
            x[i] = ((float *)stored)[i];
        } else {
            ((double *)stored)[i] = x[i];
        }
    }
}

/* Where one run's arrays go in base: the second output first, 4 bytes off
 * an 8-byte boundary, then the first output, then A, then B, 4 KiB and more
 * apart (never adjacent, outputs before inputs). */
typedef struct place {
    char *a, *b, *o0, *o1;
} place;

static size_t up(size_t v)
{
    return (v + 4096 + 255) & ~(size_t)255;
}

static place layout(char *base, const gpuq_sizes *sz)
{
    place p = {NULL, NULL, NULL, NULL};
    size_t at = 4;
    if (sz->nout > 1) {
        p.o1 = base + at;
        at = up(at + sz->out[1].bytes);
    }
    p.o0 = base + at;
    at = up(at + sz->out[0].bytes);
    p.a = base + at;
    at = up(at + sz->in_bytes[0]);
    if (sz->nin > 1) {
        p.b = base + at;
        at += sz->in_bytes[1];
    }
    ck_assert_uint_le(at, HOST_CAP);
    return p;
}

/* Run t's request once on session sess with chunk bytes cb, inputs in[],
 * in host memory base; the outputs are copied to out (packed). Returns the
 * job's status; *chunks the chunks it ran in (0: whole). */
static int run_once(tjob *t, int sess, uint64_t cb, char *base, const void *in, void *out,
                    uint64_t *chunks)
{
    place p = layout(base, &t->sz);
    if (t->sz.nin > 0)
        memcpy(p.a, in, t->sz.in_bytes[0]);
    if (t->sz.nin > 1)
        memcpy(p.b, (const char *)in + t->sz.in_bytes[0], t->sz.in_bytes[1]);
    memset(p.o0, 0xff, t->sz.out[0].bytes);
    if (p.o1)
        memset(p.o1, 0xff, t->sz.out[1].bytes);
    bc()->chunk_bytes = cb;
    /* a job without input whose output the device reaches runs zero-copy
     * at any size (test_zero_copy_no_input): chunked runs turn that off */
    uint64_t zc = bc()->zc_bytes;
    if (cb)
        bc()->zc_bytes = 0;
    uint64_t n0 = bc()->base.pipelined, c0 = bc()->base.chunks;
    submit(t, sess, p.a, p.b, p.o0, p.o1);
    wait_done(t);
    bc()->zc_bytes = zc;
    ck_assert_uint_le(bc()->base.pipelined - n0, 1);
    *chunks = bc()->base.chunks - c0;
    ck_assert(bc()->base.pipelined - n0 == (*chunks > 0));
    /* at completion nothing of the job is left on the copy streams */
    ck_assert_msg(t->q_in == cudaSuccess && t->q_out == cudaSuccess,
                  "copy streams busy at completion: in %s, out %s", cudaGetErrorString(t->q_in),
                  cudaGetErrorString(t->q_out));
    memcpy(out, p.o0, t->sz.out[0].bytes);
    if (p.o1)
        memcpy((char *)out + t->sz.out[0].bytes, p.o1, t->sz.out[1].bytes);
    return t->job.status;
}

static double at(int dt, const void *p, size_t i)
{
    return dt == GPUQ_DT_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* The CPU reference of t's request (backend_run_cpu) into out. */
static int run_cpu(tjob *t, const void *in, void *out)
{
    gpuq_job j;
    memset(&j, 0, sizeof j);
    j.req = &t->req;
    j.sz = &t->sz;
    j.h_in[0] = t->sz.nin > 0 ? in : NULL;
    j.h_in[1] = t->sz.nin > 1 ? (const char *)in + t->sz.in_bytes[0] : NULL;
    j.h_out[0] = out;
    j.h_out[1] = t->sz.nout > 1 ? (char *)out + t->sz.out[0].bytes : NULL;
    backend_run_cpu(&j);
    return j.status;
}

/* got (GPU) against ref (CPU), per element, under the op's bound. */
static void check_cpu(const tcase_def *c, const tjob *t, const double *x, const void *got,
                      const void *ref, const char *what)
{
    size_t n = (size_t)(t->sz.out[0].bytes / esz(c->dt)), w = 0;
    double *g = malloc(n * sizeof *g + 8), *r = malloc(n * sizeof *r + 8),
           *tol = malloc(n * sizeof *tol + 8);
    ck_assert(g && r && tol);
    for (size_t i = 0; i < n; i++) {
        g[i] = at(c->dt, got, i);
        r[i] = at(c->dt, ref, i);
    }
    if (c->kind == K_NORM) {
        double e = tu_elem_err_f64(g, r, n, &w);
        double bound = c->dt == GPUQ_DT_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64;
        ck_assert_msg(e <= bound, "%s: element %zu is %.17g, CPU %.17g: rel err %g > %g", what, w,
                      g[w], r[w], e, bound);
    } else {
        for (size_t i = 0; i < n; i++) {
            double acc;
            if (c->kind == K_HAV || c->kind == K_GRID) {
                acc = nt_haversine_acc(r[i], GPUQ_EARTH_RADIUS_KM);
            } else if (c->kind == K_PAIR && c->dt == GPUQ_DT_F64 && c->d >= 32) {
                size_t i0 = i / c->a1, j0 = i % c->a1;
                double nx = 0, ny = 0;
                for (uint64_t k = 0; k < c->d; k++) {
                    nx += x[i0 * c->d + k] * x[i0 * c->d + k];
                    ny += x[(c->a0 + j0) * c->d + k] * x[(c->a0 + j0) * c->d + k];
                }
                acc = nt_pairwise_gemm_acc(c->method, c->d, r[i], nx, ny);
            } else if (c->kind == K_PAIR && c->dt == GPUQ_DT_F32) {
                acc = nt_pairwise_f32_acc(c->method, c->d, r[i]); /* float sums (numtol.h) */
            } else {
                acc = nt_pairwise_acc(c->method, c->d, r[i]);
            }
            tol[i] = nt_tol(c->dt, 2, 2, r[i], acc);
        }
        double e = nt_worst(g, r, tol, n, &w);
        ck_assert_msg(e <= 1.0, "%s: element %zu is %.17g, CPU %.17g: %.3g times the bound", what,
                      w, g[w], r[w], e);
    }
    free(g), free(r), free(tol);
}

/* The cases: row counts no chunk size divides. */
/* The chunk size that gives c's job several chunks: two-phase ops (flat
 * normalize) upload CUDA_PIPE_TWO_PHASE_SCALE nominal chunks at a time. */
static uint64_t chunk_of(const tcase_def *c)
{
    int two_phase = c->kind == K_NORM && (c->flat || c->a1 == 0);
    return two_phase ? CHUNK / CUDA_PIPE_TWO_PHASE_SCALE : CHUNK;
}

static const tcase_def CASES[] = {
    {K_NORM, GPUQ_DT_F32, GPUQ_K_L1, 0, 1001, 37, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_K_ZSCORE, 0, 1001, 37, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_K_L2, 0, 5, 40000, 0, 0},           /* a chunk is one row */
    {K_NORM, GPUQ_DT_F32, GPUQ_K_SUM, 0, 3, (1u << 17) + 5, 0, 0}, /* the long-row kernels */
    {K_NORM, GPUQ_DT_F64, GPUQ_K_SUM, 0, 100003, 0, 0, 0},         /* 1-D: two phases */
    {K_NORM, GPUQ_DT_F32, GPUQ_K_L2, 0, 100003, 0, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_K_L1, 1, 317, 211, 0, 0}, /* flat */
    {K_NORM, GPUQ_DT_F32, GPUQ_K_ZSCORE, 1, 317, 211, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_K_ZSCORE, 0, 100003, 0, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_K_MINMAX, 0, 100003, 0, 0, 0},
    {K_NORM, GPUQ_DT_F32, GPUQ_K_MINMAX, 1, 317, 211, 0, 0},
    {K_HAV, GPUQ_DT_F64, 0, 0, 50001, 0, 0, 0},
    {K_HAV, GPUQ_DT_F32, 0, 0, 50001, 0, 0, 0},
    {K_HAV, GPUQ_DT_F64, 0, 0, 50001, 0, 1, 0}, /* pairs: B in chunks with A */
    {K_HAV, GPUQ_DT_F32, 0, 0, 50001, 0, 1, 0},
    {K_GRID, GPUQ_DT_F64, 0, 0, 333, 257, 0, 0},
    {K_GRID, GPUQ_DT_F32, 0, 0, 333, 257, 0, 0},
    {K_PAIR, GPUQ_DT_F32, GPUQ_K_EUCLIDEAN, 0, 301, 203, 7, 0},
    {K_PAIR, GPUQ_DT_F32, GPUQ_K_COSINE, 0, 301, 203, 7, 0},
    {K_PAIR, GPUQ_DT_F64, GPUQ_K_MANHATTAN, 0, 301, 203, 7, 0},
    {K_PAIR, GPUQ_DT_F64, GPUQ_K_SQEUCLIDEAN, 0, 301, 203, 7, 0},
    {K_PAIR, GPUQ_DT_F64, GPUQ_K_EUCLIDEAN, 0, 301, 203, 40, 0}, /* cuBLAS when loaded */
    {K_KNN, GPUQ_DT_F32, GPUQ_K_EUCLIDEAN, 0, 2049, 3001, 5, 7}, /* odd m*k, 2 query tiles */
    {K_KNN, GPUQ_DT_F32, GPUQ_K_COSINE, 0, 2049, 3001, 5, 7},
    {K_KNN, GPUQ_DT_F64, GPUQ_K_MANHATTAN, 0, 2049, 3001, 5, 7},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

/* Within the op's bound of each other, not the same bits (see the top). */
static int loose(const tcase_def *c)
{
    int flat = c->kind == K_NORM && (c->flat || c->a1 == 0);
    return (flat && c->method != GPUQ_K_MINMAX) || (c->kind == K_PAIR && c->dt == GPUQ_DT_F64 &&
                                                    c->d >= 32 && c->method != GPUQ_K_MANHATTAN);
}

START_TEST(test_chunked_equals_whole)
{
    const tcase_def *c = &CASES[_i];
    tjob t;
    memset(&t, 0, sizeof t);
    uint64_t nin = build(&t, c), chunks = 0;
    double *x = malloc((nin ? nin : 1) * sizeof *x);
    char *in = malloc(t.sz.payload + 8), *whole = malloc(t.sz.output + 8),
         *split = malloc(t.sz.output + 8), *cpu = malloc(t.sz.output + 8);
    ck_assert(x && in && whole && split && cpu);
    fill(c, &t, x, in, nin);
    char what[160];
    snprintf(what, sizeof what, "case %d (kind %d dt %d method %d %llu x %llu)", _i, c->kind, c->dt,
             c->method, (unsigned long long)c->a0, (unsigned long long)c->a1);
    be_start();
    ck_assert_int_eq(run_once(&t, 0, 0, g_pinned, in, whole, &chunks), 0);
    ck_assert_uint_eq(chunks, 0);
    /* chunked, into registered (arena-like) memory on odd cases */
    int rc = run_once(&t, 1, chunk_of(c), _i % 2 ? g_reg : g_pinned, in, split, &chunks);
    ck_assert_msg(rc == 0, "%s: chunked run: %d %s", what, rc, t.job.message);
    ck_assert_msg(chunks >= 3 && chunks <= CUDA_PIPE_MAX_CHUNKS, "%s: %llu chunks", what,
                  (unsigned long long)chunks);
    if (!loose(c)) {
        for (uint64_t i = 0; i < t.sz.output; i++)
            ck_assert_msg(whole[i] == split[i], "%s: byte %llu differs in chunks", what,
                          (unsigned long long)i);
    } else {
        check_cpu(c, &t, x, split, whole, what); /* chunked against whole */
    }
    if (c->kind != K_KNN) { /* knn: exact above; its CPU check is test_e2e_pipe's */
        ck_assert_int_eq(run_cpu(&t, in, cpu), 0);
        check_cpu(c, &t, x, split, cpu, what);
    }
    be_stop();
    free(x), free(in), free(whole), free(split), free(cpu);
}
END_TEST

/* A plan's chunks: rows [start[k], start[k + 1]) cover the split's rows in
 * order, none empty, at most CUDA_PIPE_MAX_CHUNKS, none over pl->chunk. */
static void plan_sane(const cuda_plan *pl)
{
    ck_assert_uint_ge(pl->nchunks, 2);
    ck_assert_uint_le(pl->nchunks, CUDA_PIPE_MAX_CHUNKS);
    ck_assert_uint_eq(pl->start[0], 0);
    ck_assert_uint_eq(pl->start[pl->nchunks], pl->sp.rows);
    for (uint64_t k = 0; k < pl->nchunks; k++) {
        ck_assert_uint_gt(pl->start[k + 1], pl->start[k]);
        ck_assert_uint_le(pl->start[k + 1] - pl->start[k], pl->chunk);
    }
}

/* The plan's chunk sizes against want[0..n). */
static void plan_is(const cuda_plan *pl, const uint64_t *want, uint64_t n)
{
    plan_sane(pl);
    ck_assert_uint_eq(pl->nchunks, n);
    for (uint64_t k = 0; k < n; k++)
        ck_assert_msg(pl->start[k + 1] - pl->start[k] == want[k], "chunk %llu: %llu rows, not %llu",
                      (unsigned long long)k, (unsigned long long)(pl->start[k + 1] - pl->start[k]),
                      (unsigned long long)want[k]);
}

/* The plan, by hand (b->chunk_bytes is all it reads of the backend). */
START_TEST(test_plan)
{
    backend_cuda fake;
    memset(&fake, 0, sizeof fake);
    tjob t;
    memset(&t, 0, sizeof t);
    cuda_plan pl;
    tcase_def c = {K_NORM, GPUQ_DT_F64, GPUQ_K_SUM, 0, 1001, 37, 0, 0};
    build(&t, &c);
    t.job.req = &t.req;
    t.job.sz = &t.sz;
    /* 296 bytes a row each way, 592592 in all; 65536 bytes each way -> a
     * nominal 221 rows, 4.5 chunks: tapered at both ends (the download is
     * as large as the upload), 13 27 55 110 rows, and the 591 between in 3
     * chunks */
    fake.chunk_bytes = 65536;
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    static const uint64_t taper[] = {13, 27, 55, 110, 197, 197, 197, 110, 55, 27, 13};
    plan_is(&pl, taper, 11);
    ck_assert_uint_eq(pl.chunk, 197);
    ck_assert_uint_eq(pl.sp.rows, 1001);
    ck_assert_uint_eq(pl.sp.a_row, 296);
    ck_assert_uint_eq(pl.sp.out_row[0], 296);
    t.job.whole = 1; /* the scheduler's mark (a higher level active): whole */
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 0);
    t.job.whole = 0;
    fake.chunk_bytes = 592592; /* not more than the threshold: whole */
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 0);
    fake.chunk_bytes = 592591; /* over it, but all rows fit a chunk: two, 501 and 500 */
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    static const uint64_t two[] = {501, 500};
    plan_is(&pl, two, 2);
    ck_assert_uint_eq(pl.chunk, 501);
    fake.chunk_bytes = 0; /* off */
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 0);
    fake.chunk_bytes = 1000; /* 3 rows a chunk: too small to taper; 334 chunks capped */
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    plan_sane(&pl);
    ck_assert_uint_eq(pl.chunk, 32); /* ceil(1001 / 32) rows each */
    ck_assert_uint_eq(pl.nchunks, CUDA_PIPE_MAX_CHUNKS);
    fake.chunk_bytes = 4736; /* 16 rows: tapered 1 2 4 8, the 971 between capped at 24 chunks */
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    plan_sane(&pl);
    ck_assert_uint_eq(pl.nchunks, CUDA_PIPE_MAX_CHUNKS);
    ck_assert_uint_eq(pl.chunk, 41);
    ck_assert_uint_eq(pl.start[1], 1);
    ck_assert_uint_eq(pl.start[pl.nchunks] - pl.start[pl.nchunks - 1], 1);
    /* 4096 x 4096 f32, the default 8 MiB: 512 rows nominal, 15 chunks */
    tcase_def big = {K_NORM, GPUQ_DT_F32, GPUQ_K_L2, 0, 4096, 4096, 0, 0};
    build(&t, &big);
    fake.chunk_bytes = CUDA_CHUNK_BYTES_DEFAULT;
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    static const uint64_t rows15[] = {32,  64,  128, 256, 448, 448, 448, 448,
                                      448, 448, 448, 256, 128, 64,  32};
    plan_is(&pl, rows15, 15);
    /* haversine of 10^6 f64 points to one: 16 bytes up, 8 down a row; the
     * upload is the larger side, so tapered at the end only */
    tcase_def hav = {K_HAV, GPUQ_DT_F64, 0, 0, 1000000, 0, 0, 0};
    build(&t, &hav);
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    static const uint64_t tail5[] = {508480, 262144, 131072, 65536, 32768};
    plan_is(&pl, tail5, 5);
    ck_assert_uint_eq(pl.chunk, 508480);
    /* flat: two phases, even chunks (the partials are per chunk) of
     * CUDA_PIPE_TWO_PHASE_SCALE nominal ones, its scratch from the
     * kernels, the first download piece a nominal chunk; 4 bytes a value
     * each way: 16384 -> 4096 values nominal, 16384 a chunk: 7 */
    tcase_def f = {K_NORM, GPUQ_DT_F32, GPUQ_K_ZSCORE, 0, 100003, 0, 0, 0};
    build(&t, &f);
    fake.chunk_bytes = 16384;
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    ck_assert_int_eq(pl.sp.two_phase, 1);
    static const uint64_t flat7[] = {14287, 14287, 14287, 14287, 14287, 14287, 14281};
    plan_is(&pl, flat7, 7);
    ck_assert_uint_eq(pl.chunk, 14287);
    ck_assert_uint_eq(pl.head, 4096);
    ck_assert_uint_eq(pl.scratch,
                      gpuq_cuda_normalize_flat_scratch_bytes(GPUQ_K_F32, 100003, 14287));
    /* 65536: 16384 nominal, 65536 a chunk: two; the head piece 16384 */
    fake.chunk_bytes = 65536;
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    static const uint64_t flat2[] = {50002, 50001};
    plan_is(&pl, flat2, 2);
    ck_assert_uint_eq(pl.head, 16384);
    /* 1024: 256 nominal, 1024 a chunk: 98 chunks, capped at 32 of 3126 */
    fake.chunk_bytes = 1024;
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    plan_sane(&pl);
    ck_assert_uint_eq(pl.nchunks, CUDA_PIPE_MAX_CHUNKS);
    ck_assert_uint_eq(pl.chunk, 3126);
    ck_assert_uint_eq(pl.head, 256);
    fake.chunk_bytes = 65536;
    /* grid: no input; 257 * 8 bytes a row -> 31 rows: 1 3 7 15 at each
     * end, the 281 between in 10 chunks of 29 (the last 20) */
    tcase_def g = {K_GRID, GPUQ_DT_F64, 0, 0, 333, 257, 0, 0};
    build(&t, &g);
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    ck_assert_uint_eq(pl.sp.a_row, 0);
    static const uint64_t grid18[] = {1,  3,  7,  15, 29, 29, 29, 29, 29,
                                      29, 29, 29, 29, 20, 15, 7,  3,  1};
    plan_is(&pl, grid18, 18);
    /* knn: even chunks (fixed_chunks); the scratch covers a chunk's
     * indices and the larger tile */
    tcase_def k = {K_KNN, GPUQ_DT_F32, GPUQ_K_EUCLIDEAN, 0, 2049, 3001, 5, 7};
    build(&t, &k);
    fake.chunk_bytes = 16384; /* 84 bytes a row down: 195 rows, 11 chunks */
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 1);
    plan_sane(&pl);
    ck_assert_uint_eq(pl.sp.b_row, 0);
    ck_assert_uint_eq(pl.sp.out_row[1], 7 * 8);
    ck_assert_uint_eq(pl.nchunks, 11);
    for (uint64_t i = 0; i + 1 < pl.nchunks; i++)
        ck_assert_uint_eq(pl.start[i + 1] - pl.start[i], pl.chunk);
    uint64_t last = 2049 - (pl.nchunks - 1) * pl.chunk;
    ck_assert_uint_ge(pl.scratch, pl.chunk * 7 * 8 + gpuq_cuda_knn_scratch_bytes(
                                                         GPUQ_K_F32, pl.chunk, 3001, 5, 7));
    ck_assert_uint_ge(pl.scratch, gpuq_cuda_knn_scratch_bytes(GPUQ_K_F32, last, 3001, 5, 7));
    /* one row has nothing to split */
    tcase_def one = {K_NORM, GPUQ_DT_F64, GPUQ_K_SUM, 0, 1, 1, 0, 0};
    build(&t, &one);
    fake.chunk_bytes = 1;
    ck_assert_int_eq(cuda_pipe_plan(&fake, &t.job, &pl), 0);
}
END_TEST

/* Data errors in a late chunk: the whole run's status and message. */
START_TEST(test_data_errors)
{
    static const tcase_def errs[] = {
        {K_NORM, GPUQ_DT_F64, GPUQ_K_L2, 0, 1001, 37, 0, 0},      /* row 950 zero */
        {K_NORM, GPUQ_DT_F32, GPUQ_K_MINMAX, 0, 100003, 0, 0, 0}, /* all constant */
        {K_HAV, GPUQ_DT_F64, 0, 0, 50001, 0, 1, 0},               /* lat 95 at n - 3 */
        {K_KNN, GPUQ_DT_F32, GPUQ_K_COSINE, 0, 2049, 3001, 5, 7}, /* x row m - 1 zero */
        {K_PAIR, GPUQ_DT_F32, GPUQ_K_COSINE, 0, 301, 203, 7, 0},  /* x row m - 1 zero */
    };
    static const int want[] = {GPUQ_E_ZERO_NORM, GPUQ_E_ZERO_NORM, GPUQ_E_OUT_OF_RANGE,
                               GPUQ_E_ZERO_NORM, GPUQ_E_ZERO_NORM};
    be_start();
    for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++) {
        const tcase_def *c = &errs[e];
        tjob t;
        memset(&t, 0, sizeof t);
        uint64_t nin = build(&t, c), chunks;
        double *x = malloc(nin * sizeof *x);
        char *in = malloc(t.sz.payload + 8), *o = malloc(t.sz.output + 8);
        ck_assert(x && in && o);
        fill(c, &t, x, in, nin);
        size_t es = esz(c->dt);
        if (e == 0)
            memset(in + 950 * 37 * es, 0, 37 * es);
        else if (e == 1)
            for (uint64_t i = 0; i < nin; i++)
                ((float *)in)[i] = 2.5f;
        else if (e == 2)
            ((double *)in)[2 * (50001 - 3)] = 95.0;
        else
            memset(in + (c->a0 - 1) * c->d * es, 0, c->d * es);
        char msg0[160];
        int rc0 = run_once(&t, 0, 0, g_pinned, in, o, &chunks);
        snprintf(msg0, sizeof msg0, "%s", t.job.message);
        ck_assert_int_eq(rc0, want[e]);
        int rc1 = run_once(&t, 0, chunk_of(c), g_reg, in, o, &chunks);
        ck_assert_uint_ge(chunks, 3);
        ck_assert_msg(rc1 == rc0 && strcmp(msg0, t.job.message) == 0,
                      "error case %zu: whole %d '%s', chunked %d '%s'", e, rc0, msg0, rc1,
                      t.job.message);
        free(x), free(in), free(o);
    }
    be_stop();
}
END_TEST

/* A failure mid-pipeline fails that job only: both copy streams idle when
 * it completes (run_once checks), then the same request is right. */
START_TEST(test_inject_mid_pipeline)
{
    static const int pick[] = {0, 4, 13, 15, 18, 23}; /* rows, flat, pairs, grid, pairwise, knn */
    const tcase_def *c = &CASES[pick[_i]];
    tjob t;
    memset(&t, 0, sizeof t);
    uint64_t nin = build(&t, c), chunks;
    double *x = malloc((nin ? nin : 1) * sizeof *x);
    char *in = malloc(t.sz.payload + 8), *whole = malloc(t.sz.output + 8),
         *o = malloc(t.sz.output + 8);
    ck_assert(x && in && whole && o);
    fill(c, &t, x, in, nin);
    be_start();
    ck_assert_int_eq(run_once(&t, 0, 0, g_pinned, in, whole, &chunks), 0);
    bc()->inject_pipe = bc()->submits + 1;
    int rc = run_once(&t, 0, CHUNK, g_reg, in, o, &chunks);
    ck_assert_uint_ge(chunks, 3);
    ck_assert_msg(rc == GPUQ_E_DEVICE && strstr(t.job.message, "injected"), "injected: %d '%s'", rc,
                  t.job.message);
    ck_assert_int_eq(g_b->lost, 0);
    ck_assert_int_eq(run_once(&t, 0, CHUNK, g_pinned, in, o, &chunks), 0);
    ck_assert_uint_ge(chunks, 3);
    if (!loose(c))
        ck_assert(memcmp(o, whole, t.sz.output) == 0);
    be_stop();
    free(x), free(in), free(whole), free(o);
}
END_TEST

/* Many chunked jobs in flight at once on two sessions (and whole ones
 * between): the sessions' events are reused job after job. */
START_TEST(test_many_in_flight)
{
    enum { N = 12 };
    static const int pick[] = {0, 1, 4, 12, 14, 16, 17, 22};
    static tjob t[N];
    char *in[N], *whole[N];
    place p[N];
    be_start();
    size_t off = 0;
    for (int i = 0; i < N; i++) {
        const tcase_def *c = &CASES[pick[i % 8]];
        uint64_t nin = build(&t[i], c), chunks;
        double *x = malloc((nin ? nin : 1) * sizeof *x);
        in[i] = malloc(t[i].sz.payload + 8);
        whole[i] = malloc(t[i].sz.output + 8);
        ck_assert(x && in[i] && whole[i]);
        fill(c, &t[i], x, in[i], nin);
        free(x);
        ck_assert_int_eq(run_once(&t[i], 0, 0, g_pinned, in[i], whole[i], &chunks), 0);
        /* each job its own place in the registered memory */
        p[i] = layout(g_reg + off, &t[i].sz);
        off += up(t[i].sz.payload + t[i].sz.output + 3 * 8192);
        ck_assert_uint_le(off, HOST_CAP);
        if (t[i].sz.nin > 0)
            memcpy(p[i].a, in[i], t[i].sz.in_bytes[0]);
        if (t[i].sz.nin > 1)
            memcpy(p[i].b, in[i] + t[i].sz.in_bytes[0], t[i].sz.in_bytes[1]);
    }
    uint64_t n0 = bc()->base.pipelined, zc = bc()->zc_bytes;
    bc()->zc_bytes = 0; /* the grid case chunked too (see run_once) */
    /* the predictive spin's guesses (cuda_wake_plan): each job may wait
     * behind every job of its level in flight before it, a job of a
     * higher level behind none of them, and the guesses are forgotten at
     * completion */
    cuda_dev *dev = ((cuda_sess *)g_sess[0])->dev;
    int lv = cuda_level_index(GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(dev->est_ns[lv], 0);
    uint64_t ahead = 0;
    for (int i = 0; i < N; i++) {
        bc()->chunk_bytes = i % 4 == 3 ? 0 : CHUNK; /* every fourth whole */
        submit(&t[i], i % 2, p[i].a, p[i].b, p[i].o0, p[i].o1);
        cuda_jobx *x = t[i].job.bpriv;
        ck_assert_ptr_nonnull(x);
        ck_assert_uint_gt(x->est_ns, 0);
        ck_assert_uint_eq(x->pq, ahead);
        ahead += x->est_ns;
    }
    ck_assert_uint_eq(dev->est_ns[lv], ahead);
    void *hi = NULL;
    backend_session_info info;
    ck_assert_int_eq(g_b->ops->session_open(g_b, GPUQ_PRIO_HIGH, 0, &hi, &info), 0);
    static tjob th; /* t[0] again (the same bytes to the same place) */
    th = t[0];
    submit_to(&th, hi, p[0].a, p[0].b, p[0].o0, p[0].o1);
    cuda_jobx *xh = th.job.bpriv;
    ck_assert_ptr_nonnull(xh);
    ck_assert_uint_eq(xh->pq, 0);
    ck_assert_uint_eq(dev->est_ns[cuda_level_index(GPUQ_PRIO_HIGH)], xh->est_ns);
    for (int i = 0; i < N; i++)
        wait_done(&t[i]);
    wait_done(&th);
    g_b->ops->session_close(g_b, hi);
    for (int l = 0; l < CUDA_LEVELS; l++)
        ck_assert_uint_eq(dev->est_ns[l], 0);
    bc()->zc_bytes = zc;
    ck_assert_uint_eq(bc()->base.pipelined - n0, N - N / 4);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(t[i].job.status == 0, "job %d: %s", i, t[i].job.message);
        const tcase_def *c = &CASES[pick[i % 8]];
        if (loose(c))
            continue;
        ck_assert_msg(memcmp(p[i].o0, whole[i], t[i].sz.out[0].bytes) == 0, "job %d out 0", i);
        if (p[i].o1)
            ck_assert_msg(memcmp(p[i].o1, whole[i] + t[i].sz.out[0].bytes, t[i].sz.out[1].bytes) ==
                              0,
                          "job %d out 1", i);
    }
    be_stop();
    for (int i = 0; i < N; i++)
        free(in[i]), free(whole[i]);
}
END_TEST

/* Large chunks: the last download takes long after the last kernel, so a
 * completion that did not wait for it shows (copy stream busy, bytes not
 * there yet); and the timing spans of a pipelined job. */
START_TEST(test_big_join_and_timing)
{
    tjob t;
    memset(&t, 0, sizeof t);
    uint64_t chunks;
    tcase_def g = {K_GRID, GPUQ_DT_F64, 0, 0, 4099, 4096, 0, 0}; /* 128 MiB out */
    build(&t, &g);
    char *whole = malloc(t.sz.output), *o = malloc(t.sz.output);
    ck_assert(whole && o);
    be_start();
    ck_assert_int_eq(run_once(&t, 0, 0, g_pinned, NULL, whole, &chunks), 0);
    ck_assert_int_eq(run_once(&t, 0, (uint64_t)24 << 20, g_pinned, NULL, o, &chunks), 0);
    ck_assert_uint_ge(chunks, 5);
    ck_assert(memcmp(o, whole, t.sz.output) == 0);
    free(whole), free(o);
    /* 64 MiB in, 64 MiB out, with timing */
    tcase_def n = {K_NORM, GPUQ_DT_F32, GPUQ_K_L2, 0, 4096, 4096, 0, 0};
    uint64_t nin = build(&t, &n);
    t.req.timing = true;
    double *x = malloc(nin * sizeof *x);
    char *in = malloc(t.sz.payload), *out = malloc(t.sz.output);
    ck_assert(x && in && out);
    fill(&n, &t, x, in, nin);
    /* the upload hid most of the kernels: the last chunk's kernel is what is
     * left (not under compute-sanitizer, GPUQ_SANITIZER_SMALL: it slows the
     * kernels many times over and not the copies). Up to three runs: other
     * suites sharing the GPU (the mutation check runs them side by side) can
     * slow one run's kernels past its upload; a span that counts the hidden
     * kernels is past it every time. */
    double best = -1;
    for (int run = 0; run < 3 && !(best >= 0 && best < 1.0); run++) {
        ck_assert_int_eq(run_once(&t, 1, (uint64_t)8 << 20, g_reg, in, out, &chunks), 0);
        ck_assert_uint_ge(chunks, 8);
        gpuq_timing tm = t.job.timing;
        ck_assert_msg(tm.h2d_us > 0 && tm.kernel_us > 0 && tm.d2h_us > 0,
                      "timing h2d %g kernel %g d2h %g", tm.h2d_us, tm.kernel_us, tm.d2h_us);
        double ratio = tm.kernel_us / tm.h2d_us;
        if (best < 0 || ratio < best)
            best = ratio;
        if (getenv("GPUQ_SANITIZER_SMALL"))
            best = 0;
    }
    ck_assert_msg(best < 1.0, "kernel span / upload span %g in the best of 3 runs", best);
    be_stop();
    free(x), free(in), free(out);
}
END_TEST

/* A job with no input (grid) whose output the device reaches runs its
 * kernel on the host output at any size, over the zero-copy threshold and
 * over the chunk threshold: no chunks, counted as zero-copy, the same bits
 * as the chunked run into pinned and into registered memory. An output off
 * its element size is chunked instead (a kernel's store there would fault
 * the device). Turned off (zc_bytes 0) it is chunked again. */
START_TEST(test_zero_copy_no_input)
{
    tjob t;
    memset(&t, 0, sizeof t);
    uint64_t chunks;
    tcase_def g = {K_GRID, GPUQ_DT_F64, 0, 0, 1000, 1000, 0, 0}; /* 8 MB out */
    build(&t, &g);
    char *split = malloc(t.sz.output), *cpu = malloc(t.sz.output);
    ck_assert(split && cpu);
    be_start();
    ck_assert_uint_gt(bc()->zc_bytes, 0);
    ck_assert_uint_lt(bc()->zc_bytes, t.sz.output);
    ck_assert_int_eq(run_once(&t, 0, CHUNK, g_pinned, NULL, split, &chunks), 0);
    ck_assert_uint_ge(chunks, 3);
    /* pinned and registered memory, aligned; then off the element size
     * (layout's base + 4), which a kernel must not store to: copies */
    for (int k = 0; k < 3; k++) {
        uint64_t z0 = bc()->zero_copy_jobs, n0 = bc()->base.pipelined;
        bc()->chunk_bytes = CHUNK;
        char *o0 = k == 2 ? layout(g_pinned, &t.sz).o0 : (k ? g_reg : g_pinned) + 4096;
        memset(o0, 0xff, t.sz.output);
        submit(&t, k % 2, NULL, NULL, o0, NULL);
        wait_done(&t);
        ck_assert_int_eq(t.job.status, 0);
        ck_assert_uint_eq(bc()->zero_copy_jobs - z0, k < 2);
        ck_assert_uint_eq(bc()->base.pipelined - n0, k == 2);
        ck_assert_msg(memcmp(o0, split, t.sz.output) == 0, "grid differs (case %d)", k);
    }
    ck_assert_int_eq(run_cpu(&t, NULL, cpu), 0);
    check_cpu(&g, &t, NULL, split, cpu, "zero-copy grid");
    uint64_t zc = bc()->zc_bytes, z0 = bc()->zero_copy_jobs, n0 = bc()->base.pipelined;
    bc()->zc_bytes = 0; /* off: chunked as before */
    bc()->chunk_bytes = CHUNK;
    submit(&t, 0, NULL, NULL, g_pinned + 4096, NULL);
    wait_done(&t);
    ck_assert_int_eq(t.job.status, 0);
    ck_assert_uint_eq(bc()->zero_copy_jobs, z0);
    ck_assert_uint_eq(bc()->base.pipelined - n0, 1);
    bc()->zc_bytes = zc;
    be_stop();
    free(split), free(cpu);
}
END_TEST

/* ---- the flat normalize pieces, alone ---- */

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;

static int read_flag(void)
{
    int f = -1;
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(&f, gpuq_cuda_ctx_errflag(g_ctx), sizeof f, cudaMemcpyDeviceToHost));
    CK_MEMSET(gpuq_cuda_ctx_errflag(g_ctx), 0, sizeof f);
    CK(cudaDeviceSynchronize());
    return f;
}

/* The pieces run of h_in (n values of dt): reduce in reverse order, finish,
 * scale in ranges of `cut` values (cutting across pieces). Returns the
 * flag; out on the host. */
static int flat_run(int dt, int method, int zero_ok, const void *h_in, uint64_t n, uint64_t piece,
                    uint64_t cut, void *h_out)
{
    size_t bytes = (size_t)n * esz(dt);
    uint64_t sb = gpuq_cuda_normalize_flat_scratch_bytes(dt, n, piece);
    ck_assert_uint_gt(sb, 0);
    void *d_in, *d_out, *d_s;
    CK(cudaMalloc(&d_in, bytes));
    CK(cudaMalloc(&d_out, bytes));
    CK(cudaMalloc(&d_s, sb));
    CK_UPLOAD(d_in, h_in, bytes);
    CK_MEMSET(d_s, 0xff, sb); /* stale partials must not count */
    CK(cudaDeviceSynchronize());
    uint64_t pieces = (n + piece - 1) / piece;
    for (uint64_t p = pieces; p-- > 0;)
        ck_assert_int_eq(gpuq_cuda_normalize_flat_reduce(g_ctx, dt, method, d_in, n, piece, p, d_s),
                         0);
    ck_assert_int_eq(
        gpuq_cuda_normalize_flat_finish(g_ctx, dt, method, zero_ok, d_in, n, piece, d_s), 0);
    for (uint64_t lo = 0; lo < n; lo += cut)
        ck_assert_int_eq(gpuq_cuda_normalize_flat_scale(g_ctx, dt, d_in, d_out, n, lo,
                                                        n - lo < cut ? n - lo : cut, d_s),
                         0);
    int f = read_flag();
    CK(cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_in));
    CK(cudaFree(d_out));
    CK(cudaFree(d_s));
    return f;
}

static int whole_run(int dt, int method, int zero_ok, const void *h_in, uint64_t n, void *h_out)
{
    size_t bytes = (size_t)n * esz(dt);
    void *d_in, *d_out;
    CK(cudaMalloc(&d_in, bytes));
    CK(cudaMalloc(&d_out, bytes));
    CK_UPLOAD(d_in, h_in, bytes);
    CK(cudaDeviceSynchronize());
    ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, dt, method, zero_ok, d_in, d_out, 1, n), 0);
    int f = read_flag();
    CK(cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_in));
    CK(cudaFree(d_out));
    return f;
}

START_TEST(test_flat_pieces)
{
    static const uint64_t shapes[][3] = {
        /* n, piece, scale cut */
        {1000003, 65536, 100000}, {1000003, 1000003, 333333}, {65537, 4096, 5000}, {3, 2, 1},
        {200001, 10007, 200001},  {50000, 70000, 777},
    };
    int dt = _i < 5 ? GPUQ_K_F32 : GPUQ_K_F64, method = _i % 5;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t n = shapes[s][0];
        double *x = malloc(n * sizeof *x);
        void *in = malloc(n * esz(dt)), *a = malloc(n * esz(dt)), *b = malloc(n * esz(dt)),
             *r = malloc(n * esz(dt));
        ck_assert(x && in && a && b && r);
        tu_norm_fill(TU_NORM_MIXED, dt == GPUQ_K_F32, x, 1, n);
        for (uint64_t i = 0; i < n; i++) {
            if (dt == GPUQ_K_F32)
                ((float *)in)[i] = (float)x[i];
            else
                ((double *)in)[i] = x[i];
        }
        ck_assert_int_eq(flat_run(dt, method, 0, in, n, shapes[s][1], shapes[s][2], a), 0);
        ck_assert_int_eq(whole_run(dt, method, 0, in, n, b), 0);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, in, r, 1, n), GPUQ_K_OK);
        if (method == GPUQ_K_MINMAX)
            ck_assert_msg(memcmp(a, b, n * esz(dt)) == 0, "minmax pieces differ from whole");
        double *ga = malloc(n * sizeof *ga), *gr = malloc(n * sizeof *gr);
        ck_assert(ga && gr);
        for (uint64_t i = 0; i < n; i++) {
            ga[i] = at(dt, a, i);
            gr[i] = at(dt, r, i);
        }
        size_t w = 0;
        double e = tu_elem_err_f64(ga, gr, n, &w),
               bound = dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64;
        ck_assert_msg(e <= bound,
                      "flat pieces dt %d method %d n %llu piece %llu: %zu is %.17g, "
                      "CPU %.17g (rel %g)",
                      dt, method, (unsigned long long)n, (unsigned long long)shapes[s][1], w, ga[w],
                      gr[w], e);
        free(x), free(in), free(a), free(b), free(r), free(ga), free(gr);
    }
}
END_TEST

START_TEST(test_flat_flags_and_args)
{
    enum { N = 70001 };
    static double z[N], o[N];
    for (int dt = GPUQ_K_F32; dt <= GPUQ_K_F64; dt++) {
        size_t es = esz(dt);
        char in[N * 8];
        memset(in, 0, sizeof in); /* zeros: sum/l1/l2 zero, minmax/zscore constant */
        for (int m = 0; m < 5; m++) {
            ck_assert_int_eq(flat_run(dt, m, 0, in, N, 8192, 10000, o), -GPUQ_K_E_ZERO);
            ck_assert_int_eq(flat_run(dt, m, 1, in, N, 8192, 10000, o), 0);
            ck_assert(memcmp(o, z, N * es) == 0); /* zero_ok: zeros */
        }
        /* a NaN in the last piece: NaN out, as the whole run, no flag */
        if (dt == GPUQ_K_F32)
            ((float *)in)[N - 1] = NAN;
        else
            ((double *)in)[N - 1] = NAN;
        ck_assert_int_eq(flat_run(dt, GPUQ_K_L2, 0, in, N, 8192, 10000, o), 0);
        ck_assert(isnan(at(dt, o, 5)));
    }
    void *d = NULL;
    CK(cudaMalloc(&d, 1 << 20));
    ck_assert_uint_eq(gpuq_cuda_normalize_flat_scratch_bytes(GPUQ_K_F32, 0, 10), 0);
    ck_assert_uint_eq(gpuq_cuda_normalize_flat_scratch_bytes(GPUQ_K_F32, 10, 0), 0);
    ck_assert_uint_eq(gpuq_cuda_normalize_flat_scratch_bytes(7, 10, 10), 0);
    ck_assert_int_eq(gpuq_cuda_normalize_flat_reduce(g_ctx, GPUQ_K_F32, 0, d, 100, 10, 10, d),
                     GPUQ_K_E_ARG); /* piece 10 of 10 */
    ck_assert_int_eq(
        gpuq_cuda_normalize_flat_reduce(g_ctx, GPUQ_K_F32, 0, d, 100, 10, 9, (char *)d + 8),
        GPUQ_K_E_ARG); /* scratch misaligned */
    ck_assert_int_eq(gpuq_cuda_normalize_flat_reduce(g_ctx, GPUQ_K_F32, 9, d, 100, 10, 9, d),
                     GPUQ_K_E_ARG); /* method */
    ck_assert_int_eq(gpuq_cuda_normalize_flat_finish(g_ctx, GPUQ_K_F64, 0, 0, d, 100, 0, d),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_normalize_flat_scale(g_ctx, GPUQ_K_F32, d, d, 100, 90, 11, d),
                     GPUQ_K_E_ARG); /* past the end */
    ck_assert_int_eq(gpuq_cuda_normalize_flat_scale(g_ctx, GPUQ_K_F32, d, d, 100, 0, 0, d),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_grid_rows(g_ctx, GPUQ_K_F64, 0, 1, 10, 9, 2, 0, 1, 10, 0, 0, 1, d),
                     GPUQ_K_E_ARG); /* rows 9..10 of 10 */
    ck_assert_int_eq(gpuq_cuda_grid_rows(g_ctx, GPUQ_K_F64, 0, 1, 10, 0, 0, 0, 1, 10, 0, 0, 1, d),
                     GPUQ_K_E_ARG);
    CK(cudaFree(d));
}
END_TEST

static Suite *pipe_suite(void)
{
    Suite *s = suite_create("gpu_pipe");
    TCase *tp = tcase_create("plan");
    tcase_set_timeout(tp, 60);
    tcase_add_test(tp, test_plan);
    suite_add_tcase(s, tp);
    TCase *tc = tcase_create("backend");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_chunked_equals_whole, 0, (int)NCASES);
    tcase_add_test(tc, test_data_errors);
    tcase_add_loop_test(tc, test_inject_mid_pipeline, 0, 6);
    tcase_add_test(tc, test_many_in_flight);
    tcase_add_test(tc, test_big_join_and_timing);
    tcase_add_test(tc, test_zero_copy_no_input);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("flat");
    tcase_set_timeout(tf, 300);
    tcase_add_loop_test(tf, test_flat_pieces, 0, 10);
    tcase_add_test(tf, test_flat_flags_and_args);
    suite_add_tcase(s, tf);
    return s;
}

int main(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        const char *only = getenv("CK_RUN_CASE");
        if (!gpu_required() && only && strcmp(only, "plan") == 0) {
            /* the plan needs no device: CK_RUN_CASE=plan runs it anywhere */
            int failed = gpu_test_run(pipe_suite());
            return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
        }
        return gpu_test_no_device("test_gpu_pipe");
    }
    printf("test_gpu_pipe: seed %llu\n", (unsigned long long)tu_seed());
    setenv("CK_FORK", "no", 1); /* CUDA state does not survive fork */
    g_reg = malloc(HOST_CAP);
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK ||
        cudaHostAlloc((void **)&g_pinned, HOST_CAP, cudaHostAllocPortable) != cudaSuccess ||
        !g_reg || cudaHostRegister(g_reg, HOST_CAP, cudaHostRegisterDefault) != cudaSuccess) {
        fprintf(stderr, "test_gpu_pipe: cannot create stream/ctx/host memory\n");
        return EXIT_FAILURE;
    }
    int failed = gpu_test_run(pipe_suite());
    cudaHostUnregister(g_reg);
    free(g_reg);
    cudaFreeHost(g_pinned);
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
