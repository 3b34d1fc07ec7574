/* SPDX-License-Identifier: Apache-2.0 */
/* py_peer.c - libgpuq's figures for bench/py_bench.py (issue 13's targets).
 *
 * gpuq_py_peer --socket PATH --mode small|shm|auto [--n N] [--reps R] [--warmup W]
 *
 * small: a float32 sum normalize of N values (default 1024) one at a time
 * by socket (gpuq_normalize_1d, transport SOCKET), as the Python client's
 * serial calls do. shm: the same of N values (default 2^24) with input and
 * output in an arena of the connection (no array byte on the socket).
 * auto: the same of N values (default 2^24) in the caller's own malloc'ed
 * memory with libgpuq's default transport (AUTO: large arrays go through
 * its staging arena, a copy in and a copy out), as a plain C caller makes
 * the call (bench/load.py and py_bench.py's issue-28 rows).
 * Each call is timed on its own (CLOCK_MONOTONIC); the result is checked
 * (sum of the output within 1e-3 of 1). Prints one line:
 *   p50_us=... p10_us=... p90_us=... min_us=... ok=R errors=E backend=...
 * Exit status: 0, 1 when any call failed (its error on stderr), 2 on bad
 * usage or when the connection or arena cannot be had.
 */
#include "gpuq.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(void)
{
    fprintf(stderr, "usage: gpuq_py_peer --socket PATH --mode small|shm|auto [--n N] [--reps R] "
                    "[--warmup W]\n");
}

/* Sum of y in float64: a sum normalize gives 1 (within float32 rounding). */
static int check(const float *y, uint64_t n)
{
    double s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += y[i];
    return fabs(s - 1.0) < 1e-3 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *sock = NULL, *mode = NULL;
    uint64_t n = 0;
    long reps = 0, warmup = -1;
    for (int i = 1; i < argc; i++) {
        int has = i + 1 < argc;
        if (!strcmp(argv[i], "--socket") && has)
            sock = argv[++i];
        else if (!strcmp(argv[i], "--mode") && has)
            mode = argv[++i];
        else if (!strcmp(argv[i], "--n") && has)
            n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && has)
            reps = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--warmup") && has)
            warmup = strtol(argv[++i], NULL, 10);
        else {
            usage();
            return 2;
        }
    }
    int shm = mode && !strcmp(mode, "shm"), aut = mode && !strcmp(mode, "auto");
    if (!sock || !mode || (!shm && !aut && strcmp(mode, "small"))) {
        usage();
        return 2;
    }
    if (!n)
        n = shm || aut ? (1u << 24) : 1024;
    if (reps <= 0)
        reps = shm || aut ? 15 : 2000;
    if (warmup < 0)
        warmup = shm || aut ? 2 : 100;

    gpuq_connect_opts o = {.socket_path = sock, .client_name = "gpuq_py_peer", .device = -1};
    gpuq_conn *c = NULL;
    int rc = gpuq_connect(&o, &c);
    if (rc) {
        fprintf(stderr, "py_peer: connect: %s\n", c ? gpuq_errmsg(c) : gpuq_strerror(rc));
        gpuq_close(c);
        return 2;
    }
    int status = 2;
    float *x = NULL, *y = NULL;
    double *t = malloc((size_t)reps * sizeof *t);
    gpuq_arena *a = NULL;
    if (!t)
        goto err_after_connect;
    if (gpuq_set_transport(c, aut ? GPUQ_TRANSPORT_AUTO : GPUQ_TRANSPORT_SOCKET)) {
        fprintf(stderr, "py_peer: transport: %s\n", gpuq_errmsg(c));
        goto err_after_connect;
    }
    if (shm) {
        if (gpuq_arena_open(c, 2 * n * sizeof(float), &a)) {
            fprintf(stderr, "py_peer: arena: %s\n", gpuq_errmsg(c));
            goto err_after_connect;
        }
        x = gpuq_arena_alloc(a, n * sizeof(float));
        y = gpuq_arena_alloc(a, n * sizeof(float));
    } else {
        x = malloc(n * sizeof(float));
        y = malloc(n * sizeof(float));
    }
    if (!x || !y) {
        fprintf(stderr, "py_peer: no memory for %llu floats\n", (unsigned long long)n);
        goto err_after_buffers;
    }
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(1 + i % 1000);
    long ok = 0, errors = 0;
    for (long k = -warmup; k < reps; k++) {
        memset(y, 0, n * sizeof(float));
        double t0 = now_us();
        rc = gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, n, y);
        double dt = now_us() - t0;
        if (rc || check(y, n)) {
            if (errors++ < 3)
                fprintf(stderr, "py_peer: normalize: %s\n", rc ? gpuq_errmsg(c) : "wrong result");
            continue;
        }
        if (k >= 0)
            t[ok++] = dt;
    }
    if (ok) {
        qsort(t, (size_t)ok, sizeof *t, cmp_double);
        printf("p50_us=%.2f p10_us=%.2f p90_us=%.2f min_us=%.2f ok=%ld errors=%ld backend=%s\n",
               t[ok / 2], t[ok / 10], t[(ok * 9) / 10], t[0], ok, errors, gpuq_info(c)->backend);
    } else {
        printf("p50_us=nan ok=0 errors=%ld backend=%s\n", errors, gpuq_info(c)->backend);
    }
    status = errors ? 1 : 0;
err_after_buffers:
    if (!shm) {
        free(x);
        free(y);
    }
    gpuq_arena_close(a);
err_after_connect:
    free(t);
    gpuq_close(c);
    return status;
}
