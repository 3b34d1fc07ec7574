/* SPDX-License-Identifier: Apache-2.0 */
/* bench_harness.h - the harness every row uses: timing, percentiles, the row table and its errors,
 * connecting, comparing results. */
#ifndef GPUQ_BENCH_HARNESS_H
#define GPUQ_BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

#include "bench_peer.h"
#include "gpuq_internal.h"

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

/* Monotonic seconds. */
double now_s(void);
/* The p-th percentile (nearest rank) of v[0..n), which it sorts. */
double pct(double *v, int n, int p);
/* Rows and their errors: a note on stderr (the first ERRORS_SHOWN, no
 * repeats), an error counted in r (side: "gpuq", the peer's name, "client"),
 * the speed ratio num / den as text, and the row in the table. */
void row_note(row *r, const char *line);
void row_error(row *r, const char *side, const char *msg);
void ratio_fmt(char *buf, size_t cap, double num, double den);
void row_print(bench *b, const row *r, const char *ours, const char *peer, const char *ratio);
/* Connect to sock as the bench does (0, or a code with why filled). */
int bench_connect(const char *sock, gpuq_conn **out, char *why, size_t cap);
/* |a - b| <= tol * max(|b|, floor_) for every element (NaN fails): 0, or
 * -1 with the first index that differs in *bad. */
int close_f32(const float *a, const float *b, size_t n, double tol, double floor_, size_t *bad);
int close_f64(const double *a, const double *b, size_t n, double tol, double floor_, size_t *bad);
/* All of len bytes written (wr) or read: 0, GPUQ_E_CLOSED or GPUQ_E_IO. */
int io_full(int fd, void *buf, size_t len, bool wr);
/* "p50 .. us, p99 .. us" of v[0..n) (n/a when n is 0); *p50 set. */
void lat_us_fmt(char *buf, size_t cap, double *v, int n, double *p50);
/* reps timing samples; out of memory ends the benchmark (exit 1). */
double *samples_alloc(int reps);

#endif
