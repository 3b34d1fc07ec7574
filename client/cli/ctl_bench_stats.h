/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_stats.h - gpuqctl bench's latency samples and their
 * percentiles (ctl_bench_stats.c).
 *
 * Each client keeps its own bench_samples (no locks): every latency is
 * stored while the set holds at most cap_max of them; past that the set is
 * a uniform reservoir of all it was given (Vitter's algorithm R), so memory
 * stays bounded on long runs. bench_percentiles merges several sets, each
 * sample weighted by the latencies it stands for (count / stored), so a set
 * that kept a reservoir counts as much as the replies it saw.
 */
#ifndef GPUQ_CLIENT_CTL_BENCH_STATS_H
#define GPUQ_CLIENT_CTL_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_samples {
    double *v;      /* owned: the stored latencies */
    size_t n, cap;  /* stored, allocated */
    size_t cap_max; /* at most this many stored (lowered when memory runs out) */
    uint64_t count; /* latencies given */
    double max;     /* the largest given (exact) */
    uint64_t rng;   /* the reservoir's xorshift state */
} bench_samples;

/* An empty set storing at most cap_max (>= 1), its reservoir seeded by
 * seed. */
void bench_samples_init(bench_samples *s, size_t cap_max, uint64_t seed);
/* Give one latency. Never fails: when the array cannot grow, the set keeps
 * a reservoir of what it has. */
void bench_samples_add(bench_samples *s, double v);
void bench_samples_free(bench_samples *s);
/* Forget every latency given (the array is kept for the next ones). */
void bench_samples_clear(bench_samples *s);

typedef struct bench_pct {
    double p50, p90, p99, p999; /* nearest rank over the weighted samples */
    double max, mean;
} bench_pct;

/* Percentiles of sets[0..n) together; every field NaN when none holds a
 * sample. 0, or -1 when the merge cannot get its memory (fields NaN but
 * max). */
int bench_percentiles(const bench_samples *sets, unsigned n, bench_pct *out);

#endif
