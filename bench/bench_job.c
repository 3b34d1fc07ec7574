/* SPDX-License-Identifier: Apache-2.0 */
/* bench_job.c - one request kind: gpuq's run, the in-process peer's, the check of its result, and
 * the latency rows. */
#include "bench_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_harness.h"

int job_init(bench *b, job *j, int op, uint64_t n, uint64_t d, uint64_t ny, uint64_t k)
{
    memset(j, 0, sizeof *j);
    j->op = op;
    j->rows = 1;
    j->method = GPUQ_NORM_SUM;
    j->n = n;
    j->d = d;
    j->ny = ny;
    j->k = k;
    size_t in_alloc = 0;
    switch (op) {
    case JOB_NORMALIZE:
        in_alloc = j->in_bytes = n * sizeof(float);
        j->out_bytes = n * sizeof(float);
        j->tol = 1e-5; /* the same code on both sides: a few ulp at most */
        break;
    case JOB_PAIRWISE:
        in_alloc = n * d * sizeof(float);
        j->in_bytes = 2 * in_alloc;
        j->out_bytes = n * n * sizeof(float);
        j->tol = 1e-4, j->floor_ = 1.0;
        break;
    case JOB_HAVERSINE: /* n (lat, lon) pairs to one point */
        in_alloc = j->in_bytes = n * 2 * sizeof(double);
        j->out_bytes = n * sizeof(double);
        j->tol = 1e-12, j->floor_ = 1.0;
        break;
    case JOB_KNN: /* distances, then (8-aligned) the int64 indices */
        in_alloc = j->in_bytes = (n + j->ny) * d * sizeof(float);
        j->out_bytes = n * j->k * (sizeof(float) + sizeof(int64_t));
        j->tol = 1e-4, j->floor_ = 1.0;
        break;
    default:
        j->out_bytes = n * n * sizeof(double);
        j->tol = 1e-9, j->floor_ = 1.0;
        break;
    }
    size_t out_alloc = j->out_bytes + (op == JOB_KNN ? sizeof(int64_t) : 0);
    j->in_alloc = in_alloc;
    j->out_alloc = out_alloc;
    if (!b->peer) {
        /* no peer: plain buffers; gpuq's side still runs */
        j->in = in_alloc ? malloc(in_alloc) : NULL;
        j->out = malloc(out_alloc);
        j->ref = malloc(out_alloc);
        if ((in_alloc && !j->in) || !j->out || !j->ref)
            return GPUQ_E_NO_MEMORY;
    } else {
        int rc;
        if ((in_alloc && (rc = bench_peer_alloc(b->peer, in_alloc, &j->in))) ||
            (rc = bench_peer_alloc(b->peer, out_alloc, &j->out)) ||
            (rc = bench_peer_alloc(b->peer, out_alloc, &j->ref)))
            return rc;
    }
    if (op == JOB_NORMALIZE)
        for (uint64_t i = 0; i < n; i++)
            ((float *)j->in)[i] = 1.0f + (float)(i % 997);
    else if (op == JOB_PAIRWISE)
        for (uint64_t i = 0; i < n * d; i++)
            ((float *)j->in)[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    else if (op == JOB_HAVERSINE) /* peer_torch.py makes the same points */
        for (uint64_t i = 0; i < n; i++) {
            ((double *)j->in)[2 * i] =
                -90.0 + 180.0 * (double)((i * 2654435761u) % 100003u) / 100003.0;
            ((double *)j->in)[2 * i + 1] =
                -180.0 + 360.0 * (double)(((i * 40503u) ^ (i >> 3)) % 100019u) / 100019.0;
        }
    else if (op == JOB_KNN) {
        /* y: U(-1, 1) from a hash; x: every (ny/n)-th row of y + 1e-3, so
         * that the nearest row of query i is i * (ny / n) by construction */
        float *x = j->in, *y = x + n * d;
        for (uint64_t i = 0; i < j->ny * d; i++)
            y[i] = (float)(((i * 2654435761u) ^ (i >> 7) * 40503u) % 200001u) / 100000.0f - 1.0f;
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t c = 0; c < d; c++)
                x[i * d + c] = y[i * (j->ny / n) * d + c] + 1e-3f;
        size_t ioff = (n * j->k * sizeof(float) + 7) & ~(size_t)7;
        j->idx = (int64_t *)((char *)j->out + ioff);
        j->ref_idx = (int64_t *)((char *)j->ref + ioff);
    }
    j->gin = j->in;
    j->gout = j->out;
    j->gidx = j->idx;
    return 0;
}

/* gpuq's side of j from an arena of c: the input copied in, the output
 * written there (the copy is setup, not timed: a user of arenas builds the
 * arrays in place). */
int job_use_arena(gpuq_conn *c, job *j)
{
    uint64_t ia = (j->in_alloc + 4095) & ~(uint64_t)4095;
    int rc = gpuq_arena_open(c, ia + j->out_alloc, &j->arena);
    if (rc)
        return rc;
    j->gin = j->in_alloc ? gpuq_arena_alloc(j->arena, j->in_alloc) : NULL;
    j->gout = gpuq_arena_alloc(j->arena, j->out_alloc);
    if ((j->in_alloc && !j->gin) || !j->gout)
        return GPUQ_E_NO_MEMORY;
    if (j->in_alloc)
        memcpy(j->gin, j->in, j->in_alloc);
    if (j->idx)
        j->gidx = (int64_t *)((char *)j->gout + ((char *)j->idx - (char *)j->out));
    return 0;
}

void job_free(bench *b, job *j)
{
    if (j->arena)
        (void)gpuq_arena_close(j->arena);
    void *bufs[] = {j->in, j->out, j->ref};
    for (size_t i = 0; i < 3; i++) {
        if (b->peer)
            bench_peer_free(b->peer, bufs[i]);
        else
            free(bufs[i]);
    }
}

/* A job whose buffers could not be had: say why, free what was. */
void job_fail(bench *b, job *j)
{
    fprintf(stderr, "bench: buffers of %zu + %zu bytes: %s\n", j->in_bytes, 2 * j->out_bytes,
            b->peer ? bench_peer_errmsg(b->peer) : "out of memory");
    job_free(b, j);
}

static int job_gpuq(gpuq_conn *c, job *j)
{
    switch (j->op) {
    case JOB_NORMALIZE:
        if (j->rows == 1)
            return gpuq_normalize_1d(c, GPUQ_DT_F32, (gpuq_norm_method)j->method, j->gin, j->n,
                                     j->gout);
        return gpuq_normalize(c, GPUQ_DT_F32, (gpuq_norm_method)j->method, false, j->gin, j->rows,
                              j->n / j->rows, j->gout);
    case JOB_HAVERSINE:
        return gpuq_haversine_to(c, GPUQ_DT_F64, j->gin, j->n, BENCH_GRID_TO_LAT, BENCH_GRID_TO_LON,
                                 BENCH_GRID_RADIUS, j->gout);
    case JOB_PAIRWISE:
        return gpuq_pairwise(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, j->gin, j->gin, j->n, j->n,
                             j->d, j->gout);
    case JOB_KNN:
        return gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, j->gin,
                        (const float *)j->gin + j->n * j->d, j->n, j->ny, j->d, j->k, j->gout,
                        j->gidx);
    default:
        return gpuq_grid(c, GPUQ_DT_F64, BENCH_GRID_LAT0, BENCH_GRID_LAT1, j->n, BENCH_GRID_LON0,
                         BENCH_GRID_LON1, j->n, BENCH_GRID_TO_LAT, BENCH_GRID_TO_LON,
                         BENCH_GRID_RADIUS, j->gout);
    }
}

/* One more run of j as a builder request with "timing" (GPUQ_BENCH_STAGES
 * set): the daemon's per-stage device times beside the wall time, on
 * stderr, to tell where a row's time goes. knn is left out. */
#define STAGE_REPS_MAX 200
void job_stages(gpuq_conn *c, const char *what, job *j)
{
    static const char *const norm[] = {"sum", "l1", "l2", "minmax", "zscore"};
    const char *opn = j->op == JOB_NORMALIZE   ? "normalize"
                      : j->op == JOB_HAVERSINE ? "haversine"
                      : j->op == JOB_PAIRWISE  ? "pairwise"
                      : j->op == JOB_GRID      ? "grid"
                                               : NULL;
    gpuq_req *r = opn ? gpuq_req_new(opn) : NULL;
    gpuq_result *res = gpuq_result_new();
    if (!r || !res)
        goto out;
    double to[2] = {BENCH_GRID_TO_LAT, BENCH_GRID_TO_LON};
    if (j->op == JOB_NORMALIZE) {
        uint64_t shape[2] = {j->rows, j->n / j->rows};
        gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, shape, j->gin, j->in_bytes);
        gpuq_req_set_str(r, "method", norm[j->method]);
        if (j->rows == 1)
            gpuq_req_set_bool(r, "flat", true);
    } else if (j->op == JOB_HAVERSINE) {
        uint64_t shape[2] = {j->n, 2};
        gpuq_req_set_input(r, 0, GPUQ_DT_F64, 2, shape, j->gin, j->in_bytes);
        gpuq_req_set_f64s(r, "to", to, 2);
        gpuq_req_set_f64(r, "radius", BENCH_GRID_RADIUS);
    } else if (j->op == JOB_PAIRWISE) {
        uint64_t shape[2] = {j->n, j->d};
        gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, shape, j->gin, j->in_bytes / 2);
        gpuq_req_set_input(r, 1, GPUQ_DT_F32, 2, shape, j->gin, j->in_bytes / 2);
        gpuq_req_set_str(r, "metric", "euclidean");
    } else {
        gpuq_req_set_dtype(r, GPUQ_DT_F64);
        gpuq_req_set_range(r, "lat", BENCH_GRID_LAT0, BENCH_GRID_LAT1, j->n);
        gpuq_req_set_range(r, "lon", BENCH_GRID_LON0, BENCH_GRID_LON1, j->n);
        gpuq_req_set_f64s(r, "to", to, 2);
        gpuq_req_set_f64(r, "radius", BENCH_GRID_RADIUS);
    }
    gpuq_req_set_output(r, 0, j->gout, j->out_bytes);
    gpuq_req_set_timing(r, true);
    /* GPUQ_BENCH_STAGES=N (N > 1): N runs back to back, each stage's
     * median printed (the wall's too); 1: three runs, each printed */
    int reps = atoi(getenv("GPUQ_BENCH_STAGES"));
    if (reps > STAGE_REPS_MAX)
        reps = STAGE_REPS_MAX;
    int each = reps <= 1;
    if (each)
        reps = 3;
    static double v[6][STAGE_REPS_MAX];
    int done = 0;
    for (int rep = 0; rep < reps; rep++, done++) {
        double t = now_s();
        int rc = gpuq_call_req(c, r, res);
        t = (now_s() - t) * 1e6;
        if (rc) {
            fprintf(stderr, "bench: stages: %s: %s\n", what, gpuq_errmsg(c));
            break;
        }
        double us[5] = {0};
        for (int k = 0; k < 5; k++)
            (void)gpuq_result_timing(res, (gpuq_timing_stage)k, &us[k]);
        v[0][rep] = t;
        for (int k = 0; k < 5; k++)
            v[k + 1][rep] = us[k];
        if (each)
            fprintf(stderr,
                    "bench: stages: %s: wall %.0f us; queue %.0f, h2d %.0f, kernel %.0f, d2h %.0f, "
                    "total %.0f us\n",
                    what, t, us[0], us[1], us[2], us[3], us[4]);
    }
    if (!each && done > 0) {
        double m[6];
        for (int k = 0; k < 6; k++)
            m[k] = pct(v[k], done, 50);
        fprintf(stderr,
                "bench: stages p50 of %d: %s: wall %.0f us; queue %.0f, h2d %.0f, kernel %.0f, "
                "d2h %.0f, total %.0f us\n",
                done, what, m[0], m[1], m[2], m[3], m[4], m[5]);
    }
out:
    gpuq_req_free(r);
    gpuq_result_free(res);
}

int job_peer(bench_peer *p, job *j)
{
    switch (j->op) {
    case JOB_NORMALIZE:
        return bench_peer_normalize(p, j->method, j->in, j->ref, j->rows, j->n / j->rows);
    case JOB_HAVERSINE:
        return bench_peer_haversine_to(p, j->in, j->n, j->ref);
    case JOB_PAIRWISE:
        return bench_peer_pairwise(p, j->in, j->in, j->n, j->d, j->ref);
    case JOB_KNN:
        return bench_peer_knn(p, j->in, j->n, (const float *)j->in + j->n * j->d, j->ny, j->d, j->k,
                              j->ref, j->ref_idx);
    default:
        return bench_peer_grid(p, j->n, j->n, j->ref);
    }
}

/* gpuq's result against the peer's. */
static int job_check(const job *j, char *why, size_t cap)
{
    size_t bad = 0;
    if (j->op == JOB_KNN) {
        for (uint64_t i = 0; i < j->n; i++) {
            int64_t want = (int64_t)(i * (j->ny / j->n));
            if (j->gidx[i * j->k] != want) {
                snprintf(why, cap, "wrong result: nearest row of query %llu is %lld, want %lld",
                         (unsigned long long)i, (long long)j->gidx[i * j->k], (long long)want);
                return 1;
            }
            for (uint64_t t = 0; t < j->k; t++) {
                int64_t v = j->gidx[i * j->k + t];
                if (v < 0 || (uint64_t)v >= j->ny) {
                    snprintf(why, cap, "wrong result: index %lld out of [0, %llu)", (long long)v,
                             (unsigned long long)j->ny);
                    return 1;
                }
            }
        }
        if (close_f32(j->gout, j->ref, j->n * j->k, j->tol, j->floor_, &bad)) {
            snprintf(why, cap, "wrong result: distance %zu is %.9g, in-process gives %.9g", bad,
                     (double)((float *)j->gout)[bad], (double)((float *)j->ref)[bad]);
            return 1;
        }
        return 0;
    }
    bool f64 = j->op == JOB_GRID || j->op == JOB_HAVERSINE;
    int rc = f64 ? close_f64(j->gout, j->ref, j->out_bytes / 8, j->tol, j->floor_, &bad)
                 : close_f32(j->gout, j->ref, j->out_bytes / 4, j->tol, j->floor_, &bad);
    if (rc) {
        double got = f64 ? ((double *)j->gout)[bad] : ((float *)j->gout)[bad];
        double want = f64 ? ((double *)j->ref)[bad] : ((float *)j->ref)[bad];
        snprintf(why, cap, "wrong result: element %zu is %.9g, in-process gives %.9g", bad, got,
                 want);
    }
    return rc;
}

/* Before each run of gpuq's side: NaN (all ones) into SPREAD elements
 * spread over the output, first and last included, so that a result not
 * written fails the check. Not the whole output: a memset of every byte
 * before each request would leave its lines dirty in the CPU's caches,
 * which the next request's DMA then pays for (a grid request took 0.5 ms
 * instead of 0.24 on the H100), a cost the peers' reused outputs do not
 * have. Before a row's first run the whole output is poisoned
 * (gpuq_samples), so that run is checked whole. */
enum { SPREAD = 256 };

static size_t job_esize(const job *j)
{
    return j->op == JOB_GRID || j->op == JOB_HAVERSINE ? 8 : 4;
}

/* The output's element count (knn: its distances) and the index of the
 * k-th spread element. */
static size_t job_nout(const job *j)
{
    return j->op == JOB_KNN ? (size_t)(j->n * j->k) : (size_t)j->out_bytes / job_esize(j);
}

static size_t spread_at(size_t k, size_t n)
{
    return k == SPREAD - 1 ? n - 1 : k * (n / (SPREAD - 1));
}

static void job_poison(job *j)
{
    size_t es = job_esize(j), n = job_nout(j);
    for (size_t k = 0; n > 0 && k < SPREAD; k++)
        memset((char *)j->gout + spread_at(k, n) * es, 0xff, es);
}

/* The spread elements only, against the peer's result (knn: whole, its
 * check is per query). */
static int job_check_spread(const job *j, char *why, size_t cap)
{
    if (j->op == JOB_KNN)
        return job_check(j, why, cap);
    size_t es = job_esize(j), n = job_nout(j), bad = 0;
    for (size_t k = 0; k < SPREAD && n > 0; k++) {
        size_t i = spread_at(k, n);
        const char *g = (const char *)j->gout + i * es, *r = (const char *)j->ref + i * es;
        int rc = es == 8
                     ? close_f64((const double *)g, (const double *)r, 1, j->tol, j->floor_, &bad)
                     : close_f32((const float *)g, (const float *)r, 1, j->tol, j->floor_, &bad);
        if (rc) {
            double got = es == 8 ? *(const double *)g : *(const float *)g;
            double want = es == 8 ? *(const double *)r : *(const float *)r;
            snprintf(why, cap, "wrong result: element %zu is %.9g, in-process gives %.9g", i, got,
                     want);
            return 1;
        }
    }
    return 0;
}

/* p50 in ms and the GB/s it makes of gb gigabytes; n/a without samples. */
void large_fmt(char *buf, size_t cap, double *v, int n, double gb, double *p50)
{
    *p50 = 0;
    if (n == 0) {
        snprintf(buf, cap, "n/a");
        return;
    }
    *p50 = pct(v, n, 50);
    double rate = gb / *p50; /* kNN moves little data for its time: keep its digits */
    snprintf(buf, cap, "%.2f ms, %.*f GB/s", *p50 * 1e3, rate < 0.1 ? 4 : 2, rate);
}

/* reps runs of gpuq's side of j, seconds each into ours (successes only;
 * returns their count). check: against the peer's result in j->ref, the
 * first and last runs whole, the others at their spread elements. The runs
 * go back to back as the peer's do: a whole check between runs (2 ms for a
 * million doubles) let the daemon and this process fall idle before each
 * request, and the wake-ups it then paid made the large rows 0.1-0.25 ms
 * slower than requests that follow each other. */
int gpuq_samples(bench *b, row *r, job *j, int reps, double *ours, bool check)
{
    char why[300];
    int no = 0;
    if (check)
        memset(j->gout, 0xff, j->out_bytes); /* NaN: the first run is checked whole */
    for (int i = 0; i < reps; i++) {
        if (!b->c) {
            row_error(r, "gpuq", b->conn_why);
            continue;
        }
        if (check)
            job_poison(j);
        double t = now_s();
        int rc = job_gpuq(b->c, j);
        double dt = now_s() - t;
        bool whole = i == 0 || i == reps - 1;
        if (rc)
            row_error(r, "gpuq", gpuq_errmsg(b->c));
        else if (check &&
                 (whole ? job_check(j, why, sizeof why) : job_check_spread(j, why, sizeof why)))
            row_error(r, "gpuq", why);
        else
            ours[no++] = dt;
    }
    return no;
}

/* reps runs of j on each side, one at a time; the peer first, as its result
 * is the reference. large: figures in ms and GB/s (payload plus result). */
void bench_latency(bench *b, const char *what, job *j, int reps, bool large)
{
    row r = {.what = what};
    double *ours = samples_alloc(reps), *peer = samples_alloc(reps);
    int np = 0;
    for (int i = 0; i < reps; i++) {
        if (!b->peer) {
            row_error(&r, "in-process", b->peer_why);
            continue;
        }
        double t = now_s();
        int rc = job_peer(b->peer, j);
        double dt = now_s() - t;
        if (rc)
            row_error(&r, "in-process", bench_peer_errmsg(b->peer));
        else
            peer[np++] = dt;
    }
    bool have_ref = np == reps;
    int no = gpuq_samples(b, &r, j, reps, ours, have_ref);
    char so[64], sp[64], sr[16];
    double o50 = 0, p50 = 0;
    double gb = (double)(j->in_bytes + j->out_bytes) / 1e9;
    if (large) {
        large_fmt(so, sizeof so, ours, no, gb, &o50);
        large_fmt(sp, sizeof sp, peer, np, gb, &p50);
    } else {
        for (int i = 0; i < no; i++)
            ours[i] *= 1e6;
        for (int i = 0; i < np; i++)
            peer[i] *= 1e6;
        lat_us_fmt(so, sizeof so, ours, no, &o50);
        lat_us_fmt(sp, sizeof sp, peer, np, &p50);
    }
    ratio_fmt(sr, sizeof sr, p50, o50);
    row_print(b, &r, so, sp, sr);
    free(ours);
    free(peer);
}
