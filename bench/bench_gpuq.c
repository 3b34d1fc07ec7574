/* SPDX-License-Identifier: Apache-2.0 */
/* bench_gpuq.c - end-to-end latency and throughput of gpuqd, each row beside
 * an in-process peer of the same work measured in the same run.
 *
 * gpuq_bench [--gpuqd PATH] [--device cpu|cuda] [--socket PATH] [--quick]
 *
 * Starts its own gpuqd (--gpuqd, --device) on a temporary socket, or with
 * --socket uses a daemon already listening there. Rows: ping round trip;
 * 4 KiB float32 normalize one at a time; the same with 1, 16 and 64 client
 * processes each keeping 8 requests in flight; then the large rows, each
 * by socket and again with gpuq's arrays in an arena (", shm"): flat sum
 * normalize of 2^24 float32 (64 MiB), row-wise l2 normalize of 4096 x 4096
 * float32, haversine of 10^6 float64 points to one point, pairwise
 * euclidean (4096 x 4096, d = 64, float32), the grid (1000 x 1000 float64)
 * and kNN (m = 4096 queries, n = 10^6 rows, d = 64, k = 10, float32: a 256
 * MB payload, within the default max_payload of 1 GiB); the flat normalize
 * also as a plain call with libgpuq's default transport (", auto": its
 * staging arena and two copies). Ceilings: the flat
 * normalize by socket against a socketpair echo of the same bytes to a
 * forked process (request in, reply out: what the socket allows); 4 client
 * processes with 2 flat normalizes each in flight from their own arenas,
 * input GB/s against the pinned host-to-device copy (CUDA) or memcpy (CPU);
 * on CUDA, 64 MiB copies each way from memory registered as gpuqd
 * registers arenas against a pinned allocation. --quick shrinks counts and
 * sizes for CI; GPUQ_BENCH_SHM_ONLY=1 runs the shm rows and what follows
 * them only (for experiments), =clients the many-client row and the copy
 * ceiling only; GPUQ_BENCH_STAGES=1 adds the daemon's per-stage device
 * times of three runs of each shm row on stderr, =N (N > 1) the median of
 * N runs. bench/targets.py sets these rows beside the
 * PyTorch peer's (bench/peer_torch.py) and the targets.
 *
 * Output: a Markdown table, rows starting with '|': what, gpuq's figure, the
 * peer's figure, the speed ratio gpuq / peer (1.00: as fast; 0.25: four
 * times slower) and the row's error count. The peer (bench_peer.h) is the
 * same op in this process on the daemon's backend (CPU reference, or the
 * same CUDA kernels with copies from pinned memory); for ping it is a
 * 32-byte echo between two processes over a Unix socketpair, the floor under
 * any round trip; for throughput it is one thread back to back.
 *
 * Failure: any failed request - an error reply, a connect failure, a broken
 * or short reply stream, a reply of the wrong shape or with wrong values
 * (checked against the peer's result: a row's first and last runs whole,
 * the runs between, which go back to back, at 256 spread elements poisoned
 * before each), a client process that dies - counts
 * in its row's errors, and so does a failed in-process run. Latencies and
 * rates count successful requests only; a client with any failure counts
 * none of its requests as done; a row with no success prints n/a. The table
 * ends with a "bench:" line giving the total; the exit status is 1 when any
 * row has errors or the daemon it started exited non-zero, 2 on bad usage.
 * Details of the first errors of each row go to stderr.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_peer.h"
#include "gpuq_internal.h"
#include "gpuq_kernels.h"

enum { SMALL_N = 1024, DEPTH = 8, SLOTS = 16, ECHO_BYTES = 32, ERRORS_SHOWN = 3 };

typedef struct bench {
    char sock[256];
    bool quick;
    gpuq_conn *c;     /* the latency rows' connection; NULL when connect failed */
    bench_peer *peer; /* NULL when it could not be opened (peer_why says why) */
    char peer_why[256];
    char conn_why[256]; /* why c is NULL */
    long errors;        /* over all rows */
    int rows, rows_failed;
} bench;

typedef struct row {
    const char *what;
    long errors;     /* failed gpuq requests plus failed in-process runs */
    bool quiet;      /* a client process: keep the first error for its report */
    int shown;       /* messages printed */
    char first[200]; /* "side: message" of the first error */
    char last[200];  /* the last message printed: repeats are not printed again */
} row;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile of v[0..n), n > 0 (sorts v). */
static double pct(double *v, int n, int p)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return v[(size_t)(n - 1) * (size_t)p / 100];
}

/* Print an error's message unless it repeats the last one printed,
 * ERRORS_SHOWN messages at most per row. */
static void row_note(row *r, const char *line)
{
    if (r->quiet || r->shown >= ERRORS_SHOWN || !strcmp(line, r->last))
        return;
    fprintf(stderr, "bench: %s: %s\n", r->what, line);
    snprintf(r->last, sizeof r->last, "%s", line);
    r->shown++;
}

/* Count an error (side: "gpuq", "in-process", ...) and note it. */
static void row_error(row *r, const char *side, const char *msg)
{
    char line[sizeof r->first];
    snprintf(line, sizeof line, "%s: %s", side, msg);
    if (r->errors++ == 0)
        memcpy(r->first, line, sizeof line);
    row_note(r, line);
}

/* Speed ratio gpuq / peer from the two figures (times: pass peer, ours;
 * rates: ours, peer); n/a when either is missing. */
static void ratio_fmt(char *buf, size_t cap, double num, double den)
{
    if (num > 0 && den > 0 && isfinite(num / den))
        snprintf(buf, cap, "%.*f", num / den < 0.1 ? 4 : 2, num / den); /* never "0.00" */
    else
        snprintf(buf, cap, "n/a");
}

static void row_print(bench *b, const row *r, const char *ours, const char *peer, const char *ratio)
{
    printf("| %-46s | %-28s | %-28s | %5s | %6ld |\n", r->what, ours, peer, ratio, r->errors);
    fflush(stdout);
    b->rows++;
    b->errors += r->errors;
    b->rows_failed += r->errors > 0;
}

static int bench_connect(const char *sock, gpuq_conn **out, char *why, size_t cap)
{
    gpuq_connect_opts o = {
        .socket_path = sock, .client_name = "bench", .priority = 0, .device = -1};
    gpuq_conn *c = NULL;
    *out = NULL;
    int rc = gpuq_connect(&o, &c);
    if (rc) {
        snprintf(why, cap, "connect: %s", c ? gpuq_errmsg(c) : gpuq_strerror(rc));
        gpuq_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* |a - b| <= tol * max(|b|, floor) for every element (NaN fails). */
static int close_f32(const float *a, const float *b, size_t n, double tol, double floor_,
                     size_t *bad)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= tol * fmax(fabs((double)b[i]), floor_))) {
            *bad = i;
            return -1;
        }
    return 0;
}

static int close_f64(const double *a, const double *b, size_t n, double tol, double floor_,
                     size_t *bad)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol * fmax(fabs(b[i]), floor_))) {
            *bad = i;
            return -1;
        }
    return 0;
}

/* ---- ping, and its peer: an echo over a socketpair ---- */

static int io_full(int fd, void *buf, size_t len, bool wr)
{
    char *p = buf;
    while (len) {
        ssize_t k = wr ? write(fd, p, len) : read(fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k == 0 ? GPUQ_E_CLOSED : GPUQ_E_IO;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

static int echo_bulk(size_t in_bytes, size_t out_bytes, int reps, double *lat, int *n, char *why,
                     size_t cap);

/* reps round trips of ECHO_BYTES to a forked echo process; lat[*n] in us. */
static int echo_peer(int reps, double *lat, int *n, char *why, size_t cap)
{
    int rc = echo_bulk(ECHO_BYTES, ECHO_BYTES, reps, lat, n, why, cap);
    for (int i = 0; i < *n; i++)
        lat[i] *= 1e6;
    return rc;
}

static void lat_us_fmt(char *buf, size_t cap, double *v, int n, double *p50)
{
    *p50 = 0;
    if (n == 0) {
        snprintf(buf, cap, "n/a");
        return;
    }
    *p50 = pct(v, n, 50);
    snprintf(buf, cap, "p50 %.1f us, p99 %.1f us", *p50, pct(v, n, 99));
}

/* reps timing samples; out of memory ends the benchmark (exit 1). */
static double *samples_alloc(int reps)
{
    double *v = calloc((size_t)reps, sizeof *v);
    if (!v) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    return v;
}

static void bench_ping(bench *b, int reps)
{
    row r = {.what = "ping round trip"};
    double *ours = samples_alloc(reps), *peer = samples_alloc(reps);
    int no = 0, np = 0;
    for (int i = 0; i < reps; i++) {
        if (!b->c) {
            row_error(&r, "gpuq", b->conn_why);
            continue;
        }
        double t = now_s();
        int rc = gpuq_ping(b->c);
        double dt = (now_s() - t) * 1e6;
        if (rc)
            row_error(&r, "gpuq", gpuq_errmsg(b->c));
        else
            ours[no++] = dt;
    }
    char why[200];
    if (echo_peer(reps, peer, &np, why, sizeof why))
        row_error(&r, "socketpair echo", why);
    char so[64], sp[64], sr[16];
    double o50, p50;
    lat_us_fmt(so, sizeof so, ours, no, &o50);
    lat_us_fmt(sp, sizeof sp, peer, np, &p50);
    ratio_fmt(sr, sizeof sr, p50, o50);
    row_print(b, &r, so, sp, sr);
    free(ours);
    free(peer);
}

/* ---- one request kind: gpuq's run, the peer's, and the check ---- */

enum { JOB_NORMALIZE, JOB_PAIRWISE, JOB_GRID, JOB_KNN, JOB_HAVERSINE };

typedef struct job {
    int op;
    uint64_t n;     /* normalize: elements; pairwise: m (x is m x d, y = x); grid: nlat = nlon;
                     * haversine: points */
    uint64_t rows;  /* normalize: rows of n / rows elements (1: the whole array) */
    int method;     /* normalize: GPUQ_NORM_* */
    uint64_t d;     /* pairwise, knn: dimensions */
    uint64_t ny, k; /* knn: rows of y (x is n rows, then y in the same buffer), k */
    int64_t *idx, *ref_idx; /* knn: the indices, inside out and ref after the distances */
    void *in;               /* normalize, pairwise input; peer-allocated */
    void *out, *ref;        /* gpuq's result, the peer's; peer-allocated */
    size_t in_bytes;        /* payload per request (pairwise sends x twice) */
    size_t out_bytes;       /* result per request */
    double tol, floor_;     /* close_f32/close_f64 */
    /* gpuq's buffers: in/out, or (shm rows) copies inside an arena of the
     * bench's connection, which then go by reference (PROTOCOL.md 3.4) */
    void *gin, *gout;
    int64_t *gidx;
    gpuq_arena *arena;
    size_t in_alloc, out_alloc;
} job;

static int job_init(bench *b, job *j, int op, uint64_t n, uint64_t d, uint64_t ny, uint64_t k)
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
static int job_use_arena(gpuq_conn *c, job *j)
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

static void job_free(bench *b, job *j)
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
static void job_fail(bench *b, job *j)
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
        return gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, j->k, j->gin,
                        (const float *)j->gin + j->n * j->d, j->n, j->ny, j->d, j->gout, j->gidx);
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
static void job_stages(gpuq_conn *c, const char *what, job *j)
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

static int job_peer(bench_peer *p, job *j)
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
static void large_fmt(char *buf, size_t cap, double *v, int n, double gb, double *p50)
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
static int gpuq_samples(bench *b, row *r, job *j, int reps, double *ours, bool check)
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
static void bench_latency(bench *b, const char *what, job *j, int reps, bool large)
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

/* ---- throughput: client processes, each its own connection ---- */

/* What a client process tells the parent (one write, under PIPE_BUF). */
typedef struct client_report {
    int idx;
    long ok;
    char first[200]; /* its first error, "" when none */
} client_report;

/* One client process: nreq SMALL_N-float normalize requests, DEPTH in
 * flight, each reply checked against the CPU reference (computed here: the
 * parent's buffers may be pinned, which a forked child must not touch).
 * Fills rep: the number of successful replies, the first error. */
static void client_loop(const char *sock, const char *what, int nreq, client_report *rep)
{
    static float x[SMALL_N], want[SMALL_N], y[SLOTS][SMALL_N];
    row r = {.what = what, .quiet = true};
    rep->ok = 0;
    for (int i = 0; i < SMALL_N; i++)
        x[i] = 1.0f + (float)(i % 97);
    if (gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, 0, x, want, 1, SMALL_N) != GPUQ_K_OK) {
        row_error(&r, "client", "CPU reference failed");
        goto done;
    }
    gpuq_conn *c;
    char why[200];
    if (bench_connect(sock, &c, why, sizeof why)) {
        row_error(&r, "gpuq", why);
        goto done;
    }
    int sent = 0, got = 0;
    bool stop = false;
    for (;;) {
        while (!stop && sent < nreq && gpuq_pending(c) < DEPTH) {
            gpuq_request req;
            gpuq_request_init(&req);
            req.op = GPUQ_OP_NORMALIZE;
            req.dtype = GPUQ_DT_F32;
            req.ndim_a = 1;
            req.shape_a[0] = SMALL_N;
            memset(y[sent % SLOTS], 0xff, sizeof y[0]);
            int rc = gpuq_submit(c, &req, x, sizeof x, NULL, 0, y[sent % SLOTS], sizeof y[0], NULL);
            if (rc) {
                row_error(&r, "gpuq submit", gpuq_errmsg(c));
                stop = true; /* the connection is unusable or refuses: no more requests */
                break;
            }
            sent++;
        }
        unsigned before = gpuq_pending(c);
        if (before == 0)
            break;
        gpuq_reply rp;
        int rc = gpuq_wait(c, &rp);
        if (gpuq_pending(c) == before) { /* the stream broke: no reply will come */
            row_error(&r, "gpuq wait", gpuq_errmsg(c));
            break;
        }
        const float *out = y[got++ % SLOTS];
        size_t bad;
        if (rc) {
            row_error(&r, "gpuq", gpuq_errmsg(c));
        } else if (rp.dtype != GPUQ_DT_F32 || rp.ndim != 1 || rp.shape[0] != SMALL_N) {
            row_error(&r, "gpuq", "reply of the wrong dtype or shape");
        } else if (close_f32(out, want, SMALL_N, 1e-5, 0.0, &bad)) {
            snprintf(why, sizeof why, "wrong result: element %zu is %.9g, want %.9g", bad,
                     (double)out[bad], (double)want[bad]);
            row_error(&r, "gpuq", why);
        } else {
            rep->ok++;
        }
    }
    gpuq_close(c);
done:
    memcpy(rep->first, r.first, sizeof rep->first);
}

static void bench_throughput(bench *b, int nclients, int nreq, job *small, int peer_reps)
{
    char what[80];
    snprintf(what, sizeof what, "normalize 4 KiB f32, %d client%s x %d in flight", nclients,
             nclients == 1 ? "" : "s", DEPTH);
    row r = {.what = what};
    pid_t pids[64];
    long ok_of[64];
    bool exited_ok[64];
    int failed = 0;
    if (nclients > 64)
        nclients = 64;
    int pfd[2];
    if (pipe(pfd) != 0) {
        fprintf(stderr, "bench: pipe: %s\n", strerror(errno));
        exit(1);
    }
    fflush(NULL);
    double t0 = now_s();
    for (int k = 0; k < nclients; k++) {
        ok_of[k] = 0;
        exited_ok[k] = false;
        pids[k] = fork();
        if (pids[k] == 0) {
            close(pfd[0]);
            client_report rep = {.idx = k};
            client_loop(b->sock, what, nreq, &rep);
            int wrc = io_full(pfd[1], &rep, sizeof rep, true);
            _exit(wrc == 0 && rep.ok == nreq ? 0 : 1);
        }
        if (pids[k] < 0)
            fprintf(stderr, "bench: %s: fork: %s\n", what, strerror(errno));
    }
    close(pfd[1]);
    /* Reports until every client has closed the pipe (exited), then reap. */
    client_report rep;
    while (io_full(pfd[0], &rep, sizeof rep, false) == 0) {
        if (rep.idx < 0 || rep.idx >= nclients)
            continue;
        ok_of[rep.idx] = rep.ok;
        rep.first[sizeof rep.first - 1] = 0;
        if (rep.first[0])
            row_note(&r, rep.first); /* its count is taken below */
    }
    close(pfd[0]);
    for (int k = 0; k < nclients; k++) {
        int st;
        if (pids[k] > 0 && waitpid(pids[k], &st, 0) == pids[k])
            exited_ok[k] = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    double dt = now_s() - t0;
    long done = 0;
    for (int k = 0; k < nclients; k++) {
        if (exited_ok[k] && ok_of[k] == nreq) {
            done += nreq;
        } else {
            /* at least one: a client that failed after all its replies (its report
             * lost, a crash on exit) still failed */
            long lost = nreq - ok_of[k];
            r.errors += lost > 0 ? lost : 1;
            failed++;
        }
    }
    if (failed)
        fprintf(stderr, "bench: %s: %d of %d clients failed; their requests are not counted\n",
                what, failed, nclients);
    /* the peer: the same op, one thread, back to back; one measurement, so
     * one error when any run of it fails */
    int np = 0;
    double tp = now_s();
    if (!b->peer)
        row_error(&r, "in-process", b->peer_why);
    else
        for (; np < peer_reps; np++)
            if (job_peer(b->peer, small)) {
                row_error(&r, "in-process", bench_peer_errmsg(b->peer));
                break;
            }
    tp = now_s() - tp;
    char so[64], sp[64], sr[16];
    double ours = done ? (double)done / dt : 0, peer = np == peer_reps ? (double)np / tp : 0;
    if (ours > 0)
        snprintf(so, sizeof so, "%.0f req/s", ours);
    else
        snprintf(so, sizeof so, "n/a");
    if (peer > 0)
        snprintf(sp, sizeof sp, "%.0f req/s, 1 thread", peer);
    else
        snprintf(sp, sizeof sp, "n/a");
    ratio_fmt(sr, sizeof sr, ours, peer);
    row_print(b, &r, so, sp, sr);
}

/* ---- ceilings: what the socket and the copies allow ---- */

/* One round trip of a request-sized message over a socketpair to a forked
 * process: in_bytes there (all read), then out_bytes back, as a request and
 * its reply go. reps round trips; lat[*n] in seconds. */
static int echo_bulk(size_t in_bytes, size_t out_bytes, int reps, double *lat, int *n, char *why,
                     size_t cap)
{
    int sv[2];
    *n = 0;
    size_t big = in_bytes > out_bytes ? in_bytes : out_bytes;
    char *buf = malloc(big ? big : 1);
    if (!buf) {
        snprintf(why, cap, "out of memory");
        return GPUQ_E_NO_MEMORY;
    }
    memset(buf, 1, big);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, cap, "socketpair: %s", strerror(errno));
        free(buf);
        return GPUQ_E_IO;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, cap, "fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        free(buf);
        return GPUQ_E_IO;
    }
    if (pid == 0) {
        close(sv[0]);
        int rc;
        while ((rc = io_full(sv[1], buf, in_bytes, false)) == 0)
            if (io_full(sv[1], buf, out_bytes, true))
                _exit(1);
        _exit(rc == GPUQ_E_CLOSED ? 0 : 1);
    }
    close(sv[1]);
    int rc = 0;
    for (int i = 0; i < reps && rc == 0; i++) {
        double t = now_s();
        if ((rc = io_full(sv[0], buf, in_bytes, true)) ||
            (rc = io_full(sv[0], buf, out_bytes, false)))
            snprintf(why, cap, "echo: %s", gpuq_strerror(rc));
        else
            lat[(*n)++] = now_s() - t;
    }
    close(sv[0]);
    free(buf);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (!rc)
            snprintf(why, cap, "echo process failed");
        rc = rc ? rc : GPUQ_E_IO;
    }
    return rc;
}

/* gpuq's request j over the socket against the socket's own round trip of
 * the same bytes: the ratio is the share of the ceiling gpuq reaches. */
static void bench_socket_ceiling(bench *b, job *j, int reps)
{
    char what[96];
    snprintf(what, sizeof what, "normalize f32 sum, n = %llu, socket vs echo",
             (unsigned long long)j->n);
    row r = {.what = what};
    double *ours = samples_alloc(reps), *peer = samples_alloc(reps);
    int np = 0;
    char why[300];
    if (echo_bulk(j->in_bytes, j->out_bytes, reps, peer, &np, why, sizeof why))
        row_error(&r, "socketpair echo", why);
    int no = gpuq_samples(b, &r, j, reps, ours, false);
    char so[64], sp[64], sr[16];
    double o50, p50, gb = (double)(j->in_bytes + j->out_bytes) / 1e9;
    large_fmt(so, sizeof so, ours, no, gb, &o50);
    large_fmt(sp, sizeof sp, peer, np, gb, &p50);
    ratio_fmt(sr, sizeof sr, p50, o50);
    row_print(b, &r, so, sp, sr);
    free(ours);
    free(peer);
}

/* The copy ceilings of the CUDA peer: gpuqd's way (a registered memfd
 * mapping) against a pinned allocation, each direction. */
static void bench_copy_ceiling(bench *b, size_t bytes)
{
    char w0[96], w1[96];
    snprintf(w0, sizeof w0, "copy %zu MiB host to device: arena memory vs pinned", bytes >> 20);
    snprintf(w1, sizeof w1, "copy %zu MiB device to host: arena memory vs pinned", bytes >> 20);
    row r0 = {.what = w0}, r1 = {.what = w1};
    bench_copy_rates cr;
    void *pinned = NULL;
    int rc = bench_peer_alloc(b->peer, bytes, &pinned);
    if (!rc) {
        memset(pinned, 1, bytes);
        rc = bench_peer_copy_ceiling(b->peer, pinned, bytes, 10, &cr);
    }
    bench_peer_free(b->peer, pinned);
    char a[64], p[64], q[16];
    if (rc) {
        row_error(&r0, "in-process", bench_peer_errmsg(b->peer));
        row_error(&r1, "in-process", bench_peer_errmsg(b->peer));
        row_print(b, &r0, "n/a", "n/a", "n/a");
        row_print(b, &r1, "n/a", "n/a", "n/a");
        return;
    }
    snprintf(a, sizeof a, "%.1f GB/s", cr.memfd_h2d);
    snprintf(p, sizeof p, "%.1f GB/s", cr.pinned_h2d);
    ratio_fmt(q, sizeof q, cr.memfd_h2d, cr.pinned_h2d);
    row_print(b, &r0, a, p, q);
    snprintf(a, sizeof a, "%.1f GB/s", cr.memfd_d2h);
    snprintf(p, sizeof p, "%.1f GB/s", cr.pinned_d2h);
    ratio_fmt(q, sizeof q, cr.memfd_d2h, cr.pinned_d2h);
    row_print(b, &r1, a, p, q);
    /* an upload and a download at once: the full-duplex pipelining's ceiling */
    char w2[96];
    snprintf(w2, sizeof w2, "copy %zu MiB both ways at once, each way vs pinned H2D alone",
             bytes >> 20);
    row r2 = {.what = w2};
    snprintf(a, sizeof a, "%.1f GB/s", cr.duplex);
    snprintf(p, sizeof p, "%.1f GB/s", cr.pinned_h2d);
    ratio_fmt(q, sizeof q, cr.duplex, cr.pinned_h2d);
    row_print(b, &r2, a, p, q);
}

/* What a shm client process tells the parent. */
typedef struct shm_report {
    int idx;
    long ok;
    double t0, t1; /* CLOCK_MONOTONIC: its first submit, its last reply */
    char first[200];
} shm_report;

/* One shm client: an arena with depth slots of n floats in and out, nreq
 * flat sum normalizes with depth in flight, started when go_fd reads EOF.
 * The last result in each slot is checked against the CPU reference,
 * after the clock stops. */
static void shm_client(const char *sock, const char *what, uint64_t n, int depth, int nreq,
                       int ready_fd, int go_fd, shm_report *rep)
{
    row r = {.what = what, .quiet = true};
    gpuq_conn *c = NULL;
    gpuq_arena *a = NULL;
    float *want = NULL, *in[8] = {0}, *out[8] = {0};
    char why[200], ch = 'r';
    bool ready_sent;
    size_t bytes = n * sizeof(float);
    rep->ok = 0;
    if (bench_connect(sock, &c, why, sizeof why)) {
        row_error(&r, "gpuq", why);
        goto ready;
    }
    if (gpuq_arena_open(c, (uint64_t)depth * 2 * (bytes + 64), &a)) {
        row_error(&r, "gpuq arena", gpuq_errmsg(c));
        goto ready;
    }
    want = malloc(bytes);
    for (int s = 0; s < depth; s++) {
        in[s] = gpuq_arena_alloc(a, bytes);
        out[s] = gpuq_arena_alloc(a, bytes);
    }
    if (!want || !in[depth - 1] || !out[depth - 1]) {
        row_error(&r, "client", "out of memory");
        goto ready;
    }
    for (uint64_t i = 0; i < n; i++)
        in[0][i] = 1.0f + (float)(i % 997);
    for (int s = 1; s < depth; s++)
        memcpy(in[s], in[0], bytes);
    if (gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, 0, in[0], want, 1, n) != GPUQ_K_OK)
        row_error(&r, "client", "CPU reference failed");
ready:
    ready_sent = io_full(ready_fd, &ch, 1, true) == 0;
    close(ready_fd); /* the parent's count of ready clients ends at EOF too */
    if (ready_sent && r.errors == 0 && read(go_fd, &ch, 1) == 0) { /* EOF: go */
        /* the builder: an array that lies in an arena of the connection goes
         * by reference (gpuq_submit's raw payload would copy it) */
        gpuq_req *req[8] = {0};
        gpuq_result *res = gpuq_result_new();
        uint64_t shape[1] = {n};
        for (int s = 0; s < depth; s++)
            if (!(req[s] = gpuq_req_new("normalize")) ||
                gpuq_req_set_input(req[s], 0, GPUQ_DT_F32, 1, shape, in[s], bytes) ||
                gpuq_req_set_output(req[s], 0, out[s], bytes)) {
                row_error(&r, "gpuq request", req[s] ? gpuq_req_errmsg(req[s]) : "out of memory");
                goto done_reqs;
            }
        if (!res) {
            row_error(&r, "client", "out of memory");
            goto done_reqs;
        }
        int sent = 0, got = 0;
        rep->t0 = now_s();
        while (got < nreq) {
            while (sent < nreq && sent - got < depth) {
                if (gpuq_submit_req(c, req[sent % depth], NULL)) {
                    row_error(&r, "gpuq submit", gpuq_errmsg(c));
                    goto done_reqs;
                }
                sent++;
            }
            unsigned before = gpuq_pending(c);
            int rc = gpuq_wait_req(c, res);
            if (gpuq_pending(c) == before) {
                row_error(&r, "gpuq wait", gpuq_errmsg(c));
                goto done_reqs;
            }
            got++;
            if (rc) {
                row_error(&r, "gpuq",
                          *gpuq_result_message(res) ? gpuq_result_message(res) : gpuq_errmsg(c));
            } else {
                rep->ok++;
            }
        }
        rep->t1 = now_s();
        /* each slot holds its last request's result: checked after the clock */
        for (int s = 0; s < depth && s < nreq; s++) {
            size_t bad;
            if (close_f32(out[s], want, n, 1e-5, 0.0, &bad)) {
                snprintf(why, sizeof why, "wrong result: element %zu is %.9g, want %.9g", bad,
                         (double)out[s][bad], (double)want[bad]);
                row_error(&r, "gpuq", why);
                rep->ok--;
            }
        }
    done_reqs:
        for (int s = 0; s < depth; s++)
            gpuq_req_free(req[s]);
        gpuq_result_free(res);
    }
    free(want);
    gpuq_close(c); /* closes the arena too */
    memcpy(rep->first, r.first, sizeof rep->first);
}

/* nclients processes, each depth requests of n floats in flight from its
 * own arena: the input rate of all of them together (bytes of the inputs
 * over the span from the first submit to the last reply), against what the
 * host can feed the device: the pinned H2D ceiling on CUDA, memcpy on the
 * CPU backend. */
static void bench_shm_clients(bench *b, int nclients, int depth, uint64_t n, int nreq)
{
    char what[128];
    snprintf(what, sizeof what, "normalize f32 sum, n = %llu, %d clients x %d in flight, shm",
             (unsigned long long)n, nclients, depth);
    row r = {.what = what};
    enum { MAXC = 16 };
    if (nclients > MAXC)
        nclients = MAXC;
    if (depth > 8)
        depth = 8;
    pid_t pids[MAXC];
    int ready[2], go[2], rep_p[2];
    if (pipe(ready) || pipe(go) || pipe(rep_p)) {
        fprintf(stderr, "bench: pipe: %s\n", strerror(errno));
        exit(1);
    }
    fflush(NULL);
    for (int k = 0; k < nclients; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            close(ready[0]);
            close(go[1]);
            close(rep_p[0]);
            shm_report rep = {.idx = k};
            shm_client(b->sock, what, n, depth, nreq, ready[1], go[0], &rep);
            int wrc = io_full(rep_p[1], &rep, sizeof rep, true);
            _exit(wrc == 0 && rep.ok == nreq ? 0 : 1);
        }
        if (pids[k] < 0)
            fprintf(stderr, "bench: %s: fork: %s\n", what, strerror(errno));
    }
    close(ready[1]);
    close(go[0]);
    close(rep_p[1]);
    char ch;
    for (int k = 0; k < nclients; k++) /* each is connected, its arena filled */
        if (io_full(ready[0], &ch, 1, false))
            break;
    close(go[1]); /* go */
    close(ready[0]);
    double t0 = 0, t1 = 0;
    long done = 0;
    int failed = 0, reported = 0;
    shm_report rep;
    while (io_full(rep_p[0], &rep, sizeof rep, false) == 0) {
        if (rep.idx < 0 || rep.idx >= nclients)
            continue;
        reported++;
        rep.first[sizeof rep.first - 1] = 0;
        if (rep.first[0])
            row_note(&r, rep.first);
        if (rep.ok == nreq) {
            done += nreq;
            t0 = t0 == 0 || rep.t0 < t0 ? rep.t0 : t0;
            t1 = rep.t1 > t1 ? rep.t1 : t1;
        } else {
            r.errors += nreq - rep.ok > 0 ? nreq - rep.ok : 1;
            failed++;
        }
    }
    close(rep_p[0]);
    for (int k = 0; k < nclients; k++) { /* a failed client's report counts its errors */
        int st;
        if (pids[k] > 0)
            (void)waitpid(pids[k], &st, 0);
    }
    if (reported < nclients) {
        r.errors += (long)(nclients - reported) * nreq;
        failed += nclients - reported;
    }
    if (failed)
        fprintf(stderr, "bench: %s: %d of %d clients failed\n", what, failed, nclients);
    /* the ceiling */
    double ceil_gbs = 0;
    const char *ceil_what = "memcpy";
    if (b->peer && !strncmp(bench_peer_name(b->peer), "cuda", 4)) {
        bench_copy_rates cr;
        void *pinned = NULL;
        ceil_what = "pinned H2D";
        if (bench_peer_alloc(b->peer, n * sizeof(float), &pinned) == 0 &&
            bench_peer_copy_ceiling(b->peer, pinned, n * sizeof(float), 10, &cr) == 0)
            ceil_gbs = cr.pinned_h2d;
        else
            row_error(&r, "in-process", bench_peer_errmsg(b->peer));
        bench_peer_free(b->peer, pinned);
    } else {
        size_t bytes = n * sizeof(float);
        char *x = malloc(bytes), *y = malloc(bytes);
        if (x && y) {
            memset(x, 1, bytes);
            memset(y, 0, bytes);
            double best = 1e30;
            for (int i = 0; i < 5; i++) {
                double t = now_s();
                memcpy(y, x, bytes);
                t = now_s() - t;
                best = t < best ? t : best;
                x[i] = y[bytes - 1 - (size_t)i]; /* keep the copy */
            }
            ceil_gbs = (double)bytes / best / 1e9;
        } else {
            row_error(&r, "in-process", "out of memory");
        }
        free(x);
        free(y);
    }
    char so[64], sp[64], sr[16];
    double gbs = done && t1 > t0 ? (double)done * (double)(n * sizeof(float)) / (t1 - t0) / 1e9 : 0;
    if (failed == 0 && gbs > 0)
        snprintf(so, sizeof so, "%.1f GB/s", gbs);
    else
        snprintf(so, sizeof so, "n/a");
    if (ceil_gbs > 0)
        snprintf(sp, sizeof sp, "%.1f GB/s, %s", ceil_gbs, ceil_what);
    else
        snprintf(sp, sizeof sp, "n/a");
    ratio_fmt(sr, sizeof sr, failed ? 0 : gbs, ceil_gbs);
    row_print(b, &r, so, sp, sr);
}

/* ---- the daemon this program starts ---- */

/* Does a server accept connections at path? The socket file appears at
 * bind(), a moment before listen(): a connect in between is refused. */
static bool sock_listening(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return false;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool ok = connect(fd, (const struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static pid_t daemon_start(bench *b, const char *gpuqd, const char *device, char *dir)
{
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    snprintf(b->sock, sizeof b->sock, "%s/s.sock", dir);
    fflush(NULL);
    pid_t d = fork();
    if (d < 0) {
        fprintf(stderr, "bench: fork: %s\n", strerror(errno));
        return -1;
    }
    if (d == 0) {
        /* every client is this user: the per-user cap lifted to max_sessions */
        execl(gpuqd, gpuqd, "--device", device, "--socket", b->sock, "--log-level", "warn",
              "--max-sessions-per-user", "256", (char *)NULL);
        fprintf(stderr, "bench: exec %s: %s\n", gpuqd, strerror(errno));
        _exit(127);
    }
    for (int i = 0; i < 1000 && !sock_listening(b->sock); i++) {
        int st;
        if (waitpid(d, &st, WNOHANG) == d) {
            fprintf(stderr, "bench: gpuqd exited before listening (status %d)\n",
                    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            return 0; /* reaped: nothing to stop later */
        }
        usleep(20000);
    }
    return d;
}

/* SIGTERM and wait: 0 when it exited 0. */
static int daemon_stop(pid_t d)
{
    if (d <= 0)
        return d == 0 ? -1 : 0;
    if (kill(d, SIGTERM) != 0) {
        fprintf(stderr, "bench: kill gpuqd: %s\n", strerror(errno));
        return -1;
    }
    int st;
    if (waitpid(d, &st, 0) != d) {
        fprintf(stderr, "bench: waitpid gpuqd: %s\n", strerror(errno));
        return -1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench: gpuqd exited with status %d\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return -1;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: gpuq_bench [--gpuqd PATH] [--device cpu|cuda] [--socket PATH] "
                    "[--quick]\n");
}

int main(int argc, char **argv)
{
    const char *gpuqd = "gpuqd", *device = "cpu", *socket = NULL;
    static bench b;
    for (int i = 1; i < argc; i++) {
        bool has_val = i + 1 < argc;
        if (!strcmp(argv[i], "--quick"))
            b.quick = true;
        else if (!strcmp(argv[i], "--gpuqd") && has_val)
            gpuqd = argv[++i];
        else if (!strcmp(argv[i], "--device") && has_val)
            device = argv[++i];
        else if (!strcmp(argv[i], "--socket") && has_val)
            socket = argv[++i];
        else {
            usage();
            return 2;
        }
    }
    char dir[] = "/tmp/gpuq-bench-XXXXXX";
    pid_t d = -1; /* -1: none started; 0: started and already gone */
    if (socket)
        snprintf(b.sock, sizeof b.sock, "%s", socket);
    else if ((d = daemon_start(&b, gpuqd, device, dir)) < 0)
        return 1;

    /* b.c NULL on failure: every gpuq request of every row fails. Its
     * rows by socket go by socket: libgpuq's default (AUTO) would put large
     * arrays in its staging arena (the ", auto" row measures that). */
    if (bench_connect(b.sock, &b.c, b.conn_why, sizeof b.conn_why))
        fprintf(stderr, "bench: %s: %s\n", b.sock, b.conn_why);
    else if (gpuq_set_transport(b.c, GPUQ_TRANSPORT_SOCKET))
        fprintf(stderr, "bench: transport socket: %s\n", gpuq_errmsg(b.c));
    const gpuq_server_info *info = b.c ? gpuq_info(b.c) : NULL;
    const char *backend = info ? info->backend : device;
    int rc = bench_peer_open(!strcmp(backend, "cuda"), info ? info->device : -1, &b.peer,
                             b.peer_why, sizeof b.peer_why);
    if (rc)
        fprintf(stderr, "bench: in-process peer: %s\n", b.peer_why);

    char title[64], ours_h[64], peer_h[64];
    snprintf(title, sizeof title, "gpuq_bench%s", b.quick ? " --quick" : "");
    snprintf(ours_h, sizeof ours_h, "gpuq (%s)", backend);
    snprintf(peer_h, sizeof peer_h, "in-process (%s)", b.peer ? bench_peer_name(b.peer) : "none");
    printf("| %-46s | %-28s | %-28s | %5s | %6s |\n", title, ours_h, peer_h, "ratio", "errors");
    printf("|---|---|---|---:|---:|\n");
    fflush(stdout);

    bool q = b.quick, fatal = false;
    /* GPUQ_BENCH_SHM_ONLY=1 (experiments): the shared-memory rows alone;
     * =clients: the many-client row alone */
    const char *only = getenv("GPUQ_BENCH_SHM_ONLY");
    bool shm_only = only && (!strcmp(only, "1") || !strcmp(only, "clients"));
    bool clients_only = only && !strcmp(only, "clients");
    if (!shm_only) {
        bench_ping(&b, q ? 200 : 2000);
        job small;
        if (job_init(&b, &small, JOB_NORMALIZE, SMALL_N, 0, 0, 0)) {
            job_fail(&b, &small);
            fatal = true;
            goto err_after_connect;
        }
        bench_latency(&b, "normalize 4 KiB f32, 1 in flight", &small, q ? 200 : 2000, false);
        int counts[] = {1, 16, 64}, qcounts[] = {1, 4};
        for (int k = 0; k < (q ? 2 : 3); k++) {
            int n = q ? qcounts[k] : counts[k];
            bench_throughput(&b, n, q ? 300 : n >= 16 ? 2000 : 20000, &small, q ? 2000 : 20000);
        }
        job_free(&b, &small);
    }

    /* The target rows (bench/targets.py reads them): every large
     * row twice, by socket and with gpuq's arrays in an arena (", shm"). */
    struct {
        int op;
        uint64_t n, d;
        int reps;
        uint64_t ny, k, rows;
        int method;
    } large[] = {
        /* 25 runs of the data-plane rows (peer_torch.py's too): a p50 of 7
         * moved by up to 20% between runs on an H200 guest */
        {JOB_NORMALIZE, q ? 100000 : 16777216, 0, q ? 3 : 25, 0, 0, 1, GPUQ_NORM_SUM},
        {JOB_NORMALIZE, q ? 64 * 512 : 4096 * 4096, 0, q ? 3 : 25, 0, 0, q ? 64 : 4096,
         GPUQ_NORM_L2},
        {JOB_HAVERSINE, q ? 10000 : 1000000, 0, q ? 3 : 25, 0, 0, 1, 0},
        {JOB_PAIRWISE, q ? 256 : 4096, q ? 16 : 64, q ? 3 : 7, 0, 0, 1, 0},
        {JOB_GRID, q ? 200 : 1000, 0, q ? 3 : 25, 0, 0, 1, 0},
        {JOB_KNN, q ? 256 : 4096, q ? 16 : 64, 3, q ? 20000 : 1000000, 10, 1, 0},
    };
    for (size_t k = 0; !clients_only && k < sizeof large / sizeof large[0]; k++) {
        job j;
        char what[96];
        unsigned long long n = large[k].n, dim = large[k].d;
        if (large[k].op == JOB_NORMALIZE && large[k].rows == 1)
            snprintf(what, sizeof what, "normalize f32 sum, n = %llu", n);
        else if (large[k].op == JOB_NORMALIZE)
            snprintf(what, sizeof what, "normalize f32 l2 rows, %llux%llu",
                     (unsigned long long)large[k].rows, n / large[k].rows);
        else if (large[k].op == JOB_HAVERSINE)
            snprintf(what, sizeof what, "haversine f64 to a point, n = %llu", n);
        else if (large[k].op == JOB_PAIRWISE)
            snprintf(what, sizeof what, "pairwise euclidean f32, %llux%llu, d = %llu", n, n, dim);
        else if (large[k].op == JOB_KNN) /* peer_torch.py's row name */
            snprintf(what, sizeof what, "knn euclidean f32, m = %llu, n = %llu, d = %llu, k = %llu",
                     n, (unsigned long long)large[k].ny, dim, (unsigned long long)large[k].k);
        else
            snprintf(what, sizeof what, "grid f64, %llux%llu", n, n);
        if (job_init(&b, &j, large[k].op, large[k].n, large[k].d, large[k].ny, large[k].k)) {
            job_fail(&b, &j);
            fatal = true;
            goto err_after_connect;
        }
        j.rows = large[k].rows;
        j.method = large[k].method;
        if (!shm_only)
            bench_latency(&b, what, &j, large[k].reps, true);
        if (k == 0 && !shm_only) {
            /* the socket's own ceiling for the same bytes */
            bench_socket_ceiling(&b, &j, large[k].reps);
            /* a plain call with plain buffers, libgpuq choosing (AUTO): its
             * staging arena, a copy in and a copy out around the request */
            char what_auto[112];
            snprintf(what_auto, sizeof what_auto, "%s, auto", what);
            if (b.c && gpuq_set_transport(b.c, GPUQ_TRANSPORT_AUTO) == 0) {
                bench_latency(&b, what_auto, &j, large[k].reps, true);
                if (gpuq_set_transport(b.c, GPUQ_TRANSPORT_SOCKET))
                    fprintf(stderr, "bench: back to the socket: %s\n", gpuq_errmsg(b.c));
            } else {
                row r = {.what = what_auto};
                row_error(&r, "gpuq", b.c ? gpuq_errmsg(b.c) : b.conn_why);
                row_print(&b, &r, "n/a", "n/a", "n/a");
            }
        }
        /* the same with gpuq's arrays in an arena: no array byte on the socket */
        char what_shm[112];
        snprintf(what_shm, sizeof what_shm, "%s, shm", what);
        if (b.c && job_use_arena(b.c, &j) != 0) {
            row r = {.what = what_shm};
            row_error(&r, "gpuq", gpuq_errmsg(b.c));
            row_print(&b, &r, "n/a", "n/a", "n/a");
        } else {
            bench_latency(&b, what_shm, &j, large[k].reps, true);
            if (getenv("GPUQ_BENCH_STAGES") && b.c)
                job_stages(b.c, what_shm, &j);
        }
        job_free(&b, &j);
    }
    /* 48 requests a client: the first uploads (nothing to download yet)
     * and the last downloads (nothing left to upload), some 10 ms, are a
     * thirtieth of the span, not a tenth as with 16 */
    bench_shm_clients(&b, 4, 2, q ? 100000 : 16777216, q ? 4 : 48);
    if (b.peer && !strncmp(bench_peer_name(b.peer), "cuda", 4))
        bench_copy_ceiling(&b, (size_t)64 << 20);

err_after_connect:
    gpuq_close(b.c);
    bench_peer_close(b.peer);
    int daemon_rc = socket ? 0 : daemon_stop(d);
    if (!socket && rmdir(dir) != 0)
        fprintf(stderr, "bench: rmdir %s: %s\n", dir, strerror(errno));
    printf("bench: %ld errors in %d of %d rows%s%s\n", b.errors, b.rows_failed, b.rows,
           daemon_rc ? "; gpuqd did not exit cleanly" : "", fatal ? "; stopped early" : "");
    return b.errors || daemon_rc || fatal ? 1 : 0;
}
