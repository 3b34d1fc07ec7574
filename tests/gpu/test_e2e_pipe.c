/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_pipe.c - pipelined, chunked jobs through gpuqd on the CUDA
 * backend (server/backends/cuda/backend_cuda_pipe.c), from a client's side.
 *
 * The same requests, every op in f32 and f64 with row counts no chunk size
 * divides, go to a daemon that runs jobs whole (GPUQ_CUDA_CHUNK_BYTES=0)
 * and to one that splits them in chunks of 64 KiB: the replies must be the
 * same bytes (flat normalize sum/l1/l2/zscore: within its bound; minmax the
 * same bytes), and within the documented error of the CPU reference (kNN:
 * a valid top-k, knn_check.h). That the chunked daemon really pipelines is
 * shown by GPUQ_TEST_INJECT_PIPE, which fires only in a chunked job; the
 * direct test (test_gpu_pipe) counts chunks per op.
 *
 * Faults: a failure injected mid-pipeline fails that request alone
 * (device_error), the session and the daemon serve on, nothing is left in
 * flight or in staging; a sticky fault mid-pipeline answers every request
 * and the daemon exits 3. GPUQ_CUDA_CHUNK_BYTES=0 turns pipelining off, and
 * the default chunks a 16 MiB job but not a 1 MiB one; a job of a lower
 * level runs whole while a higher level is active. Timing of a chunked
 * request: three positive spans within the total.
 *
 * No GPU: skipped (exit 77), unless GPUQ_REQUIRE_GPU=1.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq_kernels.h"
#include "knn_check.h"
#include "numtol.h"
#include "req_args.h"

_Static_assert(NT_F32 == GPUQ_DT_F32 && NT_F64 == GPUQ_DT_F64 && NT_F32 == GPUQ_K_F32 &&
                   NT_F64 == GPUQ_K_F64 && NT_COSINE == GPUQ_METRIC_COSINE,
               "numtol.h numbers dtypes and metrics as the wire and the kernels");

#define ELEM_TOL64 2e-15
#define ELEM_TOL32 6.0e-8

static void start_with(const char *chunk, const char *env, const char *val)
{
    if (chunk)
        setenv("GPUQ_CUDA_CHUNK_BYTES", chunk, 1);
    if (env)
        setenv(env, val, 1);
    tu_daemon_start(&e2e_d, "cuda", NULL);
    unsetenv("GPUQ_CUDA_CHUNK_BYTES");
    if (env)
        unsetenv(env);
}

static size_t esz(int dt)
{
    return dt == GPUQ_DT_F32 ? 4 : 8;
}

static double at(int dt, const void *p, size_t i)
{
    return dt == GPUQ_DT_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* ---- the requests ---- */

enum { K_NORM, K_HAV, K_GRID, K_PAIR, K_KNN };
typedef struct ecase {
    int kind, dt, method, flat;
    uint64_t a0, a1, d, k; /* as test_gpu_pipe.c: haversine pairs when d == 1 */
} ecase;

static const ecase CASES[] = {
    {K_NORM, GPUQ_DT_F32, GPUQ_NORM_L1, 0, 1001, 37, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_NORM_ZSCORE, 0, 1001, 37, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_NORM_SUM, 0, 100003, 0, 0, 0},
    {K_NORM, GPUQ_DT_F32, GPUQ_NORM_ZSCORE, 1, 317, 211, 0, 0},
    {K_NORM, GPUQ_DT_F64, GPUQ_NORM_MINMAX, 1, 317, 211, 0, 0},
    {K_HAV, GPUQ_DT_F64, 0, 0, 50001, 0, 0, 0},
    {K_HAV, GPUQ_DT_F32, 0, 0, 50001, 0, 1, 0},
    {K_GRID, GPUQ_DT_F64, 0, 0, 333, 257, 0, 0},
    {K_GRID, GPUQ_DT_F32, 0, 0, 333, 257, 0, 0},
    {K_PAIR, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, 0, 301, 203, 7, 0},
    {K_PAIR, GPUQ_DT_F64, GPUQ_METRIC_COSINE, 0, 301, 203, 7, 0},
    {K_KNN, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, 0, 2049, 3001, 5, 7},
    {K_KNN, GPUQ_DT_F64, GPUQ_METRIC_COSINE, 0, 2049, 3001, 5, 7},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

typedef struct ebuf {
    gpuq_request req;
    uint64_t nin, out_bytes, out0_bytes;
    double *x;
    void *in; /* A then B, as stored */
    size_t a_len, b_len;
} ebuf;

static void make(const ecase *c, ebuf *e)
{
    gpuq_request *r = &e->req;
    size_t es = esz(c->dt);
    gpuq_request_init(r);
    r->dtype = (gpuq_dtype)c->dt;
    e->nin = 0;
    e->b_len = 0;
    switch (c->kind) {
    case K_NORM:
        r->op = GPUQ_OP_NORMALIZE;
        r->ndim_a = c->a1 ? 2 : 1;
        r->shape_a[0] = c->a0;
        r->shape_a[1] = c->a1;
        rq_set_method(r, c->method);
        if (c->flat)
            rq_set_flat(r, true);
        e->nin = c->a0 * (c->a1 ? c->a1 : 1);
        e->out_bytes = e->out0_bytes = e->nin * es;
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
            e->b_len = c->a0 * 2 * es;
        } else {
            gpuq_request_set_pair(r, "to", -33.9, 151.2);
        }
        e->nin = c->a0 * (c->d ? 4 : 2);
        e->out_bytes = e->out0_bytes = c->a0 * es;
        break;
    case K_GRID:
        r->op = GPUQ_OP_GRID;
        gpuq_request_set_range(r, "lat", -61.25, 77.5, c->a0);
        gpuq_request_set_range(r, "lon", -170.0, 33.3, c->a1);
        gpuq_request_set_pair(r, "to", 12.5, -45.0);
        e->out_bytes = e->out0_bytes = c->a0 * c->a1 * es;
        break;
    default:
        r->op = c->kind == K_PAIR ? GPUQ_OP_PAIRWISE : GPUQ_OP_KNN;
        r->ndim_a = r->ndim_b = 2;
        r->shape_a[0] = c->a0;
        r->shape_b[0] = c->a1;
        r->shape_a[1] = r->shape_b[1] = c->d;
        rq_set_metric(r, c->method);
        e->nin = (c->a0 + c->a1) * c->d;
        e->b_len = c->a1 * c->d * es;
        if (c->kind == K_KNN) {
            ck_assert_int_eq(gpuq_request_set_uint(r, "k", c->k), 0);
            e->out0_bytes = c->a0 * c->k * es;
            e->out_bytes = e->out0_bytes + c->a0 * c->k * 8;
        } else {
            e->out_bytes = e->out0_bytes = c->a0 * c->a1 * es;
        }
        break;
    }
    e->a_len = e->nin * es - e->b_len;
    e->x = malloc((e->nin ? e->nin : 1) * sizeof *e->x);
    e->in = malloc(e->nin * es + 8);
    ck_assert(e->x && e->in);
    if (c->kind == K_HAV) {
        for (uint64_t i = 0; i < e->nin / 2; i++) {
            e->x[2 * i] = -80.0 + 160.0 * (double)((i * 7919) % 1000) / 1000.0;
            e->x[2 * i + 1] = -179.0 + 358.0 * (double)((i * 104729) % 997) / 997.0;
        }
    } else if (c->kind == K_NORM) {
        tu_norm_fill(TU_NORM_MIXED, c->dt == GPUQ_DT_F32, e->x, 1, e->nin);
    } else {
        tu_rand_fill_f64(e->x, e->nin, -1.0, 1.0);
    }
    for (uint64_t i = 0; i < e->nin; i++) {
        if (c->dt == GPUQ_DT_F32) {
            ((float *)e->in)[i] = (float)e->x[i];
            e->x[i] = ((float *)e->in)[i];
        } else {
            ((double *)e->in)[i] = e->x[i];
        }
    }
}

static int call(gpuq_conn *c, ebuf *e, void *out, gpuq_reply *rep)
{
    return gpuq_call(c, &e->req, e->in, e->a_len, e->b_len ? (char *)e->in + e->a_len : NULL,
                     e->b_len, out, e->out_bytes, rep);
}

/* The reply got against the CPU reference of c. */
static void check_cpu(const ecase *c, const ebuf *e, const void *got, const char *what)
{
    int dt = c->dt;
    size_t es = esz(dt), n = e->out0_bytes / es, w = 0;
    void *ref = malloc(e->out_bytes + 8);
    double *g = malloc(n * sizeof *g + 8), *r = malloc(n * sizeof *r + 8),
           *tol = malloc(n * sizeof *tol + 8);
    ck_assert(ref && g && r && tol);
    const char *a = e->in, *b = (const char *)e->in + e->a_len;
    int kc = GPUQ_K_OK;
    switch (c->kind) {
    case K_NORM:
        kc = c->flat || !c->a1 ? gpuq_cpu_normalize(dt, c->method, 0, a, ref, 1, e->nin)
                               : gpuq_cpu_normalize(dt, c->method, 0, a, ref, c->a0, c->a1);
        break;
    case K_HAV:
        kc = c->d ? gpuq_cpu_haversine_pair(dt, a, b, c->a0, GPUQ_EARTH_RADIUS_KM, ref)
                  : gpuq_cpu_haversine_to(dt, a, c->a0, -33.9, 151.2, GPUQ_EARTH_RADIUS_KM, ref);
        break;
    case K_GRID:
        kc = gpuq_cpu_grid(dt, -61.25, 77.5, c->a0, -170.0, 33.3, c->a1, 12.5, -45.0,
                           GPUQ_EARTH_RADIUS_KM, ref);
        break;
    case K_PAIR:
        kc = gpuq_cpu_pairwise(dt, c->method, 2.0, 0, a, b, c->a0, c->a1, c->d, ref);
        break;
    default: {
        int64_t *gi = malloc(c->a0 * c->k * sizeof *gi), *ri = malloc(c->a0 * c->k * sizeof *ri);
        double *full = malloc(c->a1 * sizeof *full), *gd = malloc(c->k * sizeof *gd),
               *rd = malloc(c->k * sizeof *rd);
        unsigned char *seen = calloc(c->a1, 1);
        ck_assert(gi && ri && full && gd && rd && seen);
        memcpy(gi, (const char *)got + e->out0_bytes, c->a0 * c->k * 8);
        ck_assert_int_eq(
            gpuq_cpu_knn(dt, c->method, 2.0, 0, a, b, c->a0, c->a1, c->d, c->k, ref, ri),
            GPUQ_K_OK);
        kc_params p = {dt, c->method, 1, 2, c->a1, c->d, c->k};
        for (uint64_t i = 0; i < c->a0; i++) {
            ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, c->method, 2.0, 0, e->x + i * c->d,
                                               e->x + c->a0 * c->d, 1, c->a1, c->d, full),
                             GPUQ_K_OK);
            for (uint64_t t = 0; t < c->k; t++) {
                gd[t] = at(dt, got, i * c->k + t);
                rd[t] = at(dt, ref, i * c->k + t);
            }
            char why[256];
            int bad =
                kc_check_row(&p, gd, gi + i * c->k, full, ri + i * c->k, rd, seen, why, sizeof why);
            ck_assert_msg(!bad, "%s: row %llu: %s", what, (unsigned long long)i, why);
        }
        free(gi), free(ri), free(full), free(gd), free(rd), free(seen);
        free(ref), free(g), free(r), free(tol);
        return;
    }
    }
    ck_assert_int_eq(kc, GPUQ_K_OK);
    for (size_t i = 0; i < n; i++) {
        g[i] = at(dt, got, i);
        r[i] = at(dt, ref, i);
    }
    if (c->kind == K_NORM) {
        double err = tu_elem_err_f64(g, r, n, &w),
               bound = dt == GPUQ_DT_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64;
        ck_assert_msg(err <= bound, "%s: element %zu is %.17g, CPU %.17g: rel err %g", what, w,
                      g[w], r[w], err);
    } else {
        for (size_t i = 0; i < n; i++) {
            /* pairwise f32: the float-sum route's bound (numtol.h) */
            double acc = c->kind != K_PAIR   ? nt_haversine_acc(r[i], GPUQ_EARTH_RADIUS_KM)
                         : dt == GPUQ_DT_F32 ? nt_pairwise_f32_acc(c->method, c->d, r[i])
                                             : nt_pairwise_acc(c->method, c->d, r[i]);
            tol[i] = nt_tol(dt, 2, 2, r[i], acc);
        }
        double worst = nt_worst(g, r, tol, n, &w);
        ck_assert_msg(worst <= 1.0, "%s: element %zu is %.17g, CPU %.17g: %.3g times the bound",
                      what, w, g[w], r[w], worst);
    }
    free(ref), free(g), free(r), free(tol);
}

/* A 1001 x 37 float64 normalize (l2): 10 chunks of 64 KiB. */
static ebuf norm_rows(void)
{
    static const ecase c = {K_NORM, GPUQ_DT_F64, GPUQ_NORM_L2, 0, 1001, 37, 0, 0};
    ebuf e;
    make(&c, &e);
    return e;
}

/* Jobs gpuqd saw finish (status seen_*): by its spin, a doorbell or its
 * poll. */
static long long seen_done(void)
{
    static char js[65536];
    e2e_status(js, sizeof js);
    long long s = e2e_json_int(js, "seen_spin"), d = e2e_json_int(js, "seen_doorbell"),
              p = e2e_json_int(js, "seen_poll");
    ck_assert(s >= 0 && d >= 0 && p >= 0);
    return s + d + p;
}

START_TEST(chunked_matches_whole_and_cpu)
{
    static ebuf e[NCASES];
    static void *whole[NCASES];
    for (size_t i = 0; i < NCASES; i++)
        make(&CASES[i], &e[i]);
    start_with("0", NULL, NULL);
    gpuq_conn *c = e2e_connect("whole", GPUQ_PRIO_NORMAL);
    for (size_t i = 0; i < NCASES; i++) {
        whole[i] = malloc(e[i].out_bytes + 8);
        ck_assert_ptr_nonnull(whole[i]);
        int rc = call(c, &e[i], whole[i], NULL);
        ck_assert_msg(rc == 0, "case %zu whole: %s", i, gpuq_errmsg(c));
    }
    gpuq_close(c);
    /* status: nothing ran in chunks; every job was seen done, one way or
     * another, once */
    ck_assert_int_eq(e2e_status_int("pipelined"), 0);
    ck_assert_int_eq(e2e_status_int("chunks"), 0);
    ck_assert_int_eq(seen_done(), (long long)NCASES);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);

    /* Chunks of 64 KiB; the first request, chunked, takes the injected
     * failure: proof that this daemon pipelines (the hook fires nowhere
     * else). */
    start_with("65536", "GPUQ_TEST_INJECT_PIPE", "1");
    c = e2e_connect("chunked", GPUQ_PRIO_NORMAL);
    ebuf probe = norm_rows();
    void *po = malloc(probe.out_bytes);
    ck_assert_ptr_nonnull(po);
    ck_assert_int_eq(call(c, &probe, po, NULL), GPUQ_E_DEVICE);
    ck_assert_ptr_nonnull(strstr(gpuq_errmsg(c), "injected"));
    void *got = malloc(4 << 20);
    ck_assert_ptr_nonnull(got);
    for (size_t i = 0; i < NCASES; i++) {
        const ecase *k = &CASES[i];
        char what[128];
        snprintf(what, sizeof what, "case %zu (kind %d dt %d method %d)", i, k->kind, k->dt,
                 k->method);
        ck_assert_uint_le(e[i].out_bytes, 4 << 20);
        memset(got, 0xff, e[i].out_bytes);
        int rc = call(c, &e[i], got, NULL);
        ck_assert_msg(rc == 0, "%s chunked: %s", what, gpuq_errmsg(c));
        /* flat sum/l1/l2/zscore group their sums by chunk: the CPU bound only */
        int flat = k->kind == K_NORM && (k->flat || !k->a1);
        if (!flat || k->method == GPUQ_NORM_MINMAX)
            ck_assert_msg(memcmp(got, whole[i], e[i].out_bytes) == 0,
                          "%s: chunked reply differs from whole", what);
        check_cpu(k, &e[i], got, what);
    }
    gpuq_close(c);
    /* the probe and every case but the smallest went in chunks; each
     * chunked job in two at least; every job (the failed probe too) seen
     * done once */
    long long piped = e2e_status_int("pipelined"), chunks = e2e_status_int("chunks");
    ck_assert_int_ge(piped, 2);
    ck_assert_int_le(piped, (long long)NCASES + 1);
    ck_assert_int_ge(chunks, 2 * piped);
    ck_assert_int_eq(seen_done(), (long long)NCASES + 1);
    e2e_assert_serves();
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    for (size_t i = 0; i < NCASES; i++)
        free(e[i].x), free(e[i].in), free(whole[i]);
    free(probe.x), free(probe.in), free(po), free(got);
}
END_TEST

START_TEST(injected_failure_fails_one_request)
{
    start_with("65536", "GPUQ_TEST_INJECT_PIPE", "2");
    gpuq_conn *c = e2e_connect("inject", GPUQ_PRIO_NORMAL);
    ebuf e = norm_rows();
    static const ecase k = {K_NORM, GPUQ_DT_F64, GPUQ_NORM_L2, 0, 1001, 37, 0, 0};
    void *o = malloc(e.out_bytes);
    ck_assert_ptr_nonnull(o);
    for (int i = 1; i <= 3; i++) {
        memset(o, 0xff, e.out_bytes);
        int rc = call(c, &e, o, NULL);
        if (i == 2) {
            ck_assert_msg(rc == GPUQ_E_DEVICE && strstr(gpuq_errmsg(c), "injected"),
                          "request 2: %d %s", rc, gpuq_errmsg(c));
        } else {
            ck_assert_msg(rc == 0, "request %d: %s", i, gpuq_errmsg(c));
            check_cpu(&k, &e, o, "around the injected failure");
        }
    }
    gpuq_close(c);
    e2e_assert_serves();
    char js[16384];
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "in_flight"), 0);
    ck_assert_int_eq(e2e_json_int(js, "staging_bytes"), 0);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    free(e.x), free(e.in), free(o);
}
END_TEST

/* GPUQ_CUDA_CHUNK_BYTES=0: never chunked (the hook cannot fire); unset:
 * the default chunks a 16 MiB job, not a 1 MiB one. */
START_TEST(chunk_bytes_setting)
{
    start_with("0", "GPUQ_TEST_INJECT_PIPE", "1");
    gpuq_conn *c = e2e_connect("off", GPUQ_PRIO_NORMAL);
    ebuf e = norm_rows();
    void *o = malloc(e.out_bytes);
    ck_assert_ptr_nonnull(o);
    ck_assert_msg(call(c, &e, o, NULL) == 0, "chunking off: %s", gpuq_errmsg(c));
    gpuq_close(c);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);

    start_with(NULL, "GPUQ_TEST_INJECT_PIPE", "2");
    c = e2e_connect("default", GPUQ_PRIO_NORMAL);
    static const ecase small = {K_NORM, GPUQ_DT_F32, GPUQ_NORM_SUM, 0, 1024, 128, 0, 0}; /* 1 MiB */
    static const ecase big = {K_NORM, GPUQ_DT_F32, GPUQ_NORM_SUM, 0, 2048, 1024, 0, 0}; /* 16 MiB */
    ebuf s, b;
    make(&small, &s);
    make(&big, &b);
    void *so = malloc(s.out_bytes), *bo = malloc(b.out_bytes);
    ck_assert(so && bo);
    ck_assert_msg(call(c, &s, so, NULL) == 0, "1 MiB, whole: %s", gpuq_errmsg(c));
    check_cpu(&small, &s, so, "1 MiB");
    ck_assert_int_eq(call(c, &b, bo, NULL), GPUQ_E_DEVICE); /* the 2nd job, chunked */
    ck_assert_msg(call(c, &b, bo, NULL) == 0, "16 MiB: %s", gpuq_errmsg(c));
    check_cpu(&big, &b, bo, "16 MiB");
    gpuq_close(c);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    free(e.x), free(e.in), free(o), free(s.x), free(s.in), free(so), free(b.x), free(b.in),
        free(bo);
}
END_TEST

/* While a higher priority level is active on the device, a lower level's
 * job runs whole (the scheduler marks it, so that the loop does not enqueue
 * a chunked job's many calls ahead of that level's requests); with no
 * higher level about, the same job is chunked. GPUQ_TEST_INJECT_PIPE=2
 * fails the second job only if it is chunked. */
START_TEST(whole_while_higher_level_active)
{
    for (int hold = 0; hold < 2; hold++) {
        const char *extra[] = {"--priority-hold", hold ? "60" : "0", NULL};
        setenv("GPUQ_CUDA_CHUNK_BYTES", "65536", 1);
        setenv("GPUQ_TEST_INJECT_PIPE", "2", 1);
        tu_daemon_start(&e2e_d, "cuda", extra);
        unsetenv("GPUQ_CUDA_CHUNK_BYTES");
        unsetenv("GPUQ_TEST_INJECT_PIPE");
        gpuq_conn *hi = e2e_connect("high", GPUQ_PRIO_HIGH);
        gpuq_conn *lo = e2e_connect("low", GPUQ_PRIO_LOW);
        float x[256], y[256];
        for (int i = 0; i < 256; i++)
            x[i] = (float)(i + 1);
        ck_assert_msg(gpuq_normalize_1d(hi, GPUQ_DT_F32, GPUQ_NORM_SUM, x, 256, y) == 0, "%s",
                      gpuq_errmsg(hi)); /* job 1: the high level was active just now */
        static const ecase k = {K_NORM, GPUQ_DT_F64, GPUQ_NORM_L2, 0, 1001, 37, 0, 0};
        ebuf e = norm_rows();
        void *o = malloc(e.out_bytes);
        ck_assert_ptr_nonnull(o);
        int rc = call(lo, &e, o, NULL); /* job 2 */
        if (hold) {
            ck_assert_msg(rc == 0, "beside an active high level: %d %s", rc, gpuq_errmsg(lo));
            check_cpu(&k, &e, o, "run whole");
        } else {
            ck_assert_msg(rc == GPUQ_E_DEVICE && strstr(gpuq_errmsg(lo), "injected"),
                          "no higher level active: %d %s (not chunked?)", rc, gpuq_errmsg(lo));
        }
        gpuq_close(hi);
        gpuq_close(lo);
        ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
        free(e.x), free(e.in), free(o);
    }
}
END_TEST

START_TEST(sticky_fault_mid_pipeline)
{
    start_with("65536", "GPUQ_TEST_INJECT_STICKY", "2");
    gpuq_conn *c = e2e_connect("sticky", GPUQ_PRIO_NORMAL);
    enum { N = 4 };
    ebuf e = norm_rows();
    void *o[N];
    for (int i = 0; i < N; i++) {
        o[i] = malloc(e.out_bytes);
        ck_assert_ptr_nonnull(o[i]);
        uint64_t id;
        ck_assert_int_eq(gpuq_submit(c, &e.req, e.in, e.a_len, NULL, 0, o[i], e.out_bytes, &id), 0);
    }
    int lost = 0, answered = 0;
    for (int i = 0; i < N; i++) {
        gpuq_reply rep;
        int rc = gpuq_wait(c, &rep);
        if (rc == GPUQ_E_CLOSED || rc == GPUQ_E_IO)
            break;
        answered++;
        lost += rc == GPUQ_E_DEVICE_LOST;
    }
    gpuq_close(c);
    ck_assert_int_eq(answered, N);
    ck_assert_int_ge(lost, 1);
    int st = 0;
    for (int i = 0; i < 1500 && waitpid(e2e_d.pid, &st, WNOHANG) == 0; i++)
        usleep(20000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "gpuqd status %d", st);
    e2e_d.pid = 0;
    tu_daemon_stop(&e2e_d);
    for (int i = 0; i < N; i++)
        free(o[i]);
    free(e.x), free(e.in);
}
END_TEST

START_TEST(timing_of_a_chunked_request)
{
    start_with("65536", NULL, NULL);
    gpuq_conn *c = e2e_connect("timing", GPUQ_PRIO_NORMAL);
    ebuf e = norm_rows();
    e.req.timing = true;
    void *o = malloc(e.out_bytes);
    ck_assert_ptr_nonnull(o);
    gpuq_reply rep;
    ck_assert_msg(call(c, &e, o, &rep) == 0, "%s", gpuq_errmsg(c));
    ck_assert(rep.has_timing);
    gpuq_timing t = rep.timing;
    ck_assert_msg(t.h2d_us > 0 && t.kernel_us > 0 && t.d2h_us > 0 && t.queue_us >= 0,
                  "h2d %g kernel %g d2h %g queue %g", t.h2d_us, t.kernel_us, t.d2h_us, t.queue_us);
    ck_assert_msg(t.h2d_us + t.kernel_us + t.d2h_us <= t.total_us,
                  "device spans %g + %g + %g > total %g", t.h2d_us, t.kernel_us, t.d2h_us,
                  t.total_us);
    gpuq_close(c);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    free(e.x), free(e.in), free(o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_pipe");
    TCase *tc = tcase_create("pipe");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, chunked_matches_whole_and_cpu);
    tcase_add_test(tc, injected_failure_fails_one_request);
    tcase_add_test(tc, chunk_bytes_setting);
    tcase_add_test(tc, whole_while_higher_level_active);
    tcase_add_test(tc, timing_of_a_chunked_request);
    suite_add_tcase(s, tc);
    /* A faulting kernel on purpose: tagged so that a run under
     * compute-sanitizer can leave it out (CK_EXCLUDE_TAGS=fault). */
    TCase *tf = tcase_create("fault");
    tcase_set_timeout(tf, 300);
    tcase_set_tags(tf, "fault");
    tcase_add_test(tf, sticky_fault_mid_pipeline);
    suite_add_tcase(s, tf);
    return s;
}

int main(void)
{
    setenv("GPUQ_TEST_DEVICE", "cuda", 1);
    e2e_skip_without_gpu(); /* no GPU: exits 77 (ctest: Skipped) */
    return tu_run_suite(suite());
}
