/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_stats.c - latency samples, their reservoir and percentiles
 * (ctl_bench_stats.h).
 *
 * Happy path: latencies go into a doubling array; at the end every set's
 * samples are copied with their weight into one array, sorted, and walked
 * once for the four ranks. Past cap_max (or when realloc fails) a set
 * replaces a random stored sample with probability n / count, which keeps
 * every latency given equally likely to be stored.
 */
#include "ctl_bench_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void bench_samples_init(bench_samples *s, size_t cap_max, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->cap_max = cap_max ? cap_max : 1;
    s->rng = seed * 0x9E3779B97F4A7C15ull + 1; /* never 0: xorshift's fixed point */
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

void bench_samples_add(bench_samples *s, double v)
{
    s->count++;
    s->max = s->count == 1 || v > s->max ? v : s->max;
    if (s->n < s->cap_max && s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 4096;
        nc = nc < s->cap_max ? nc : s->cap_max;
        double *nv = realloc(s->v, nc * sizeof *nv);
        if (nv) {
            s->v = nv;
            s->cap = nc;
        } else {
            s->cap_max = s->cap; /* no more memory: a reservoir of what there is */
        }
    }
    if (s->n < s->cap) {
        s->v[s->n++] = v;
        return;
    }
    uint64_t j = rng_next(&s->rng) % s->count;
    if (j < s->n)
        s->v[j] = v;
}

void bench_samples_free(bench_samples *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void bench_samples_clear(bench_samples *s)
{
    s->n = 0;
    s->count = 0;
    s->max = 0;
}

typedef struct wsample {
    double v, w;
} wsample;

static int wsample_cmp(const void *a, const void *b)
{
    double x = ((const wsample *)a)->v, y = ((const wsample *)b)->v;
    return (x > y) - (x < y);
}

int bench_percentiles(const bench_samples *sets, unsigned n, bench_pct *out)
{
    size_t total = 0;
    out->p50 = out->p90 = out->p99 = out->p999 = out->mean = out->max = NAN;
    for (unsigned i = 0; i < n; i++) {
        total += sets[i].n;
        if (sets[i].count && (isnan(out->max) || sets[i].max > out->max))
            out->max = sets[i].max;
    }
    if (total == 0)
        return 0;
    wsample *ws = malloc(total * sizeof *ws);
    if (!ws)
        return -1;
    size_t k = 0;
    double wsum = 0, vsum = 0;
    for (unsigned i = 0; i < n; i++) {
        double w = sets[i].n ? (double)sets[i].count / (double)sets[i].n : 0;
        for (size_t j = 0; j < sets[i].n; j++) {
            ws[k].v = sets[i].v[j];
            ws[k++].w = w;
            wsum += w;
            vsum += w * sets[i].v[j];
        }
    }
    qsort(ws, total, sizeof *ws, wsample_cmp);
    const double q[4] = {0.50, 0.90, 0.99, 0.999};
    double *res[4] = {&out->p50, &out->p90, &out->p99, &out->p999};
    double cum = 0;
    size_t j = 0;
    for (int t = 0; t < 4; t++) { /* nearest rank: the first whose cum reaches q of the weight */
        double want = q[t] * wsum * (1 - 1e-12);
        while (j < total - 1 && cum + ws[j].w < want)
            cum += ws[j++].w;
        *res[t] = ws[j].v;
    }
    out->mean = vsum / wsum;
    free(ws);
    return 0;
}
