/* SPDX-License-Identifier: Apache-2.0 */
/* bench_harness.c - the harness every row uses: timing, percentiles, the row table and its errors,
 * connecting, comparing results. */
#include "bench_harness.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_harness.h"

double now_s(void)
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
double pct(double *v, int n, int p)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return v[(size_t)(n - 1) * (size_t)p / 100];
}

/* Print an error's message unless it repeats the last one printed,
 * ERRORS_SHOWN messages at most per row. */
void row_note(row *r, const char *line)
{
    if (r->quiet || r->shown >= ERRORS_SHOWN || !strcmp(line, r->last))
        return;
    fprintf(stderr, "bench: %s: %s\n", r->what, line);
    snprintf(r->last, sizeof r->last, "%s", line);
    r->shown++;
}

/* Count an error (side: "gpuq", "in-process", ...) and note it. */
void row_error(row *r, const char *side, const char *msg)
{
    char line[sizeof r->first];
    snprintf(line, sizeof line, "%s: %s", side, msg);
    if (r->errors++ == 0)
        memcpy(r->first, line, sizeof line);
    row_note(r, line);
}

/* Speed ratio gpuq / peer from the two figures (times: pass peer, ours;
 * rates: ours, peer); n/a when either is missing. */
void ratio_fmt(char *buf, size_t cap, double num, double den)
{
    if (num > 0 && den > 0 && isfinite(num / den))
        snprintf(buf, cap, "%.*f", num / den < 0.1 ? 4 : 2, num / den); /* never "0.00" */
    else
        snprintf(buf, cap, "n/a");
}

void row_print(bench *b, const row *r, const char *ours, const char *peer, const char *ratio)
{
    printf("| %-46s | %-28s | %-28s | %5s | %6ld |\n", r->what, ours, peer, ratio, r->errors);
    fflush(stdout);
    b->rows++;
    b->errors += r->errors;
    b->rows_failed += r->errors > 0;
}

int bench_connect(const char *sock, gpuq_conn **out, char *why, size_t cap)
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
int close_f32(const float *a, const float *b, size_t n, double tol, double floor_, size_t *bad)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= tol * fmax(fabs((double)b[i]), floor_))) {
            *bad = i;
            return -1;
        }
    return 0;
}

int close_f64(const double *a, const double *b, size_t n, double tol, double floor_, size_t *bad)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol * fmax(fabs(b[i]), floor_))) {
            *bad = i;
            return -1;
        }
    return 0;
}

int io_full(int fd, void *buf, size_t len, bool wr)
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

void lat_us_fmt(char *buf, size_t cap, double *v, int n, double *p50)
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
double *samples_alloc(int reps)
{
    double *v = calloc((size_t)reps, sizeof *v);
    if (!v) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    return v;
}
