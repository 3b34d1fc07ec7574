/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_report.h - what gpuqctl bench was asked (bench_args) and what
 * it measured (bench_sum, bench_report), and the summary it prints: text,
 * or one JSON object with --json (ctl_bench_report.c).
 *
 * A report has the measured clients' figures; with --baseline also theirs
 * alone, measured first with no streamer running, and the ratios of the
 * two; with --bulk the streamers' own figures.
 */
#ifndef GPUQ_CLIENT_CTL_BENCH_REPORT_H
#define GPUQ_CLIENT_CTL_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "ctl.h"
#include "ctl_bench_client.h"
#include "ctl_bench_input.h"

typedef struct bench_args {
    bench_op op;
    bool ping; /* --op ping: the measured clients ping (op unused) */
    uint64_t size, dim;
    gpuq_dtype dt;
    unsigned clients, depth;
    double duration, warmup;
    bool baseline;             /* the measured clients alone first */
    unsigned bulk, bulk_depth; /* streamers (0: none), each keeping bulk_depth in flight */
    uint64_t bulk_size;        /* values of their f32 sum normalize */
    int bulk_priority, bulk_transport;
    bench_input_args in; /* --input: the user's arrays and the op's options */
    bool csv;            /* --csv: a header and a row a level */
    /* --concurrency-range LO:HI:STEP: levels of LO, LO + STEP, ... <= HI
     * clients (clients is HI then) */
    bool range;
    unsigned range_lo, range_hi, range_step;
} bench_args;

typedef struct bench_sum {
    double duration_s;
    uint64_t ok, errors;
    char first[512]; /* the first error's message; "": none */
    int first_code;
    double req_s, mb_s;
    bench_pct lat;
} bench_sum;

/* The figures of cls[n] after the join, each request moving req_bytes;
 * the window is run's. -1: no memory for the percentiles (said; NaN). */
int bench_summarize(const bench_client *cls, unsigned n, const bench_run *run, uint64_t req_bytes,
                    bench_sum *s);

typedef struct bench_report {
    const bench_args *a;
    const bench_plan *plan; /* NULL for ping */
    const char *transport;  /* the measured clients': shm, socket or mixed */
    int granted;            /* the priority gpuqd granted them */
    const char *backend;
    bench_sum main;
    bench_sum alone;            /* with a->baseline */
    bench_sum bulk;             /* with a->bulk */
    const char *bulk_transport; /* the streamers' */
    int bulk_granted;
    int sig; /* the signal that stopped the run, or 0 */
} bench_report;

/* A run's summary (r->main of a->clients clients). JSON: one line. */
void bench_print_json(const ctl_ctx *ctx, const bench_report *r);
void bench_print_text(const ctl_ctx *ctx, const bench_report *r);

/* --csv: the header line, then a row of a level's figures (raw numbers:
 * concurrency = clients x depth, requests, req/s, latencies in
 * microseconds, errors, bytes a second; a latency with no request done
 * is an empty field). */
void bench_print_csv_header(void);
void bench_print_csv_row(const bench_args *a, unsigned clients, const bench_sum *s,
                         uint64_t req_bytes);
/* --concurrency-range in text: what runs (r's fields, not r->main) and
 * the table's header; then a row a level, as each ends. */
void bench_print_levels_head(const ctl_ctx *ctx, const bench_report *r);
void bench_print_level(const bench_args *a, unsigned clients, const bench_sum *s);
/* msg without its "error_name: " prefix when it has code's. */
const char *bench_err_text(int code, const char *msg);

#endif
