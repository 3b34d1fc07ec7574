/* SPDX-License-Identifier: Apache-2.0 */
/* bench_job.h - one request kind: gpuq's run, the in-process peer's, the check of its result, and
 * the latency rows. */
#ifndef GPUQ_BENCH_JOB_H
#define GPUQ_BENCH_JOB_H

#include "bench_harness.h"

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

/* A job of op and sizes with its peer's buffers and result (0, or -1 with
 * the row failed); job_use_arena moves gpuq's buffers into an arena of c;
 * job_free releases both; job_fail marks the bench failed for it. */
int job_init(bench *b, job *j, int op, uint64_t n, uint64_t d, uint64_t ny, uint64_t k);
int job_use_arena(gpuq_conn *c, job *j);
void job_free(bench *b, job *j);
void job_fail(bench *b, job *j);
/* GPUQ_BENCH_STAGES: the daemon's per-stage device times of j on stderr. */
void job_stages(gpuq_conn *c, const char *what, job *j);
/* One in-process run of j (0, or a code). */
int job_peer(bench_peer *p, job *j);
/* p50 in ms and the GB/s it makes of gb gigabytes; n/a without samples. */
void large_fmt(char *buf, size_t cap, double *v, int n, double gb, double *p50);
/* reps runs of gpuq's side of j, seconds each into ours (successes only;
 * returns their count); check: against the peer's result. */
int gpuq_samples(bench *b, row *r, job *j, int reps, double *ours, bool check);
/* One latency row of j: gpuq beside the peer, reps runs (large: GB/s). */
void bench_latency(bench *b, const char *what, job *j, int reps, bool large);

#endif
