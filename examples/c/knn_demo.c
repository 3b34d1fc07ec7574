/* SPDX-License-Identifier: Apache-2.0 */
/* knn_demo.c - cosine kNN with libgpuq's public API (<gpuq/gpuq.h>), as a
 * program of your own would use it.
 *
 * Happy path: connect (gpuqd found as gpuqctl finds it, or the socket given
 * as argv[1]); make a base of 4000 x 32 float32 rows and 16 queries from a
 * fixed seed, each query a noisy copy of a known base row; normalize both by
 * rows (l2) in gpuqd; ask for each query's 5 nearest base rows under cosine
 * (gpuq_knn); then do the same again with the normalized base stored once
 * in gpuqd as a resident array (gpuq_put) and named by a builder request
 * (gpuq_req_set_input_resident), which must give the same bits; check both
 * against a float64 brute force on the CPU; remove the resident array.
 * Then the failures the docs promise: k = 0 is GPUQ_E_BAD_ARGUMENT with
 * gpuqd's message and the connection serves on (a ping), and the removed
 * array is GPUQ_E_NOT_FOUND.
 *
 * Fails (exit 1, the reason on stderr): no gpuqd answers (the message names
 * every socket tried), a call fails, or a result differs from the CPU's.
 *
 *   cc -o knn_demo knn_demo.c $(pkg-config --cflags --libs gpuq) -lm
 *   ./knn_demo [SOCKET]
 */
#include <gpuq/gpuq.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DEMO_N = 4000, DEMO_D = 32, DEMO_M = 16, DEMO_K = 5 };

/* Deterministic uniform numbers in [-1, 1) (xorshift64*). */
static double demo_uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) * 0x1p-52 - 1.0;
}

/* Cosine distance 1 - cos in double between raw rows a and b. */
static double demo_cosine(const float *a, const float *b)
{
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < DEMO_D; j++) {
        ab += (double)a[j] * b[j];
        aa += (double)a[j] * a[j];
        bb += (double)b[j] * b[j];
    }
    return 1.0 - ab / (sqrt(aa) * sqrt(bb));
}

/* The k nearest rows of base to q, nearest first, ties by the lower index. */
static void demo_brute_force(const float *base, const float *q, double *dist, int64_t *idx)
{
    for (int t = 0; t < DEMO_K; t++)
        dist[t] = INFINITY, idx[t] = -1;
    for (int64_t i = 0; i < DEMO_N; i++) {
        double d = demo_cosine(q, base + i * DEMO_D);
        if (d >= dist[DEMO_K - 1])
            continue; /* equal: the lower index already there wins */
        int t = DEMO_K - 1;
        for (; t > 0 && dist[t - 1] > d; t--)
            dist[t] = dist[t - 1], idx[t] = idx[t - 1];
        dist[t] = d, idx[t] = i;
    }
}

/* 0 when gpuq's answer for query i is the brute force's: the same rows, or
 * rows whose float64 distances tie within float32 rounding (2e-5). */
static int demo_check(const float *base, const float *q, const float *dist, const int64_t *idx,
                      int i, int *exact)
{
    double want_d[DEMO_K];
    int64_t want_i[DEMO_K];
    demo_brute_force(base, q, want_d, want_i);
    int same = 1;
    for (int t = 0; t < DEMO_K; t++) {
        if (idx[t] < 0 || idx[t] >= DEMO_N)
            return fprintf(stderr, "query %d: index %lld out of range\n", i, (long long)idx[t]), -1;
        double own = demo_cosine(q, base + idx[t] * DEMO_D);
        if (fabs(own - dist[t]) > 2e-5 || fabs(want_d[t] - dist[t]) > 2e-5) {
            fprintf(stderr, "query %d, neighbour %d: gpuq row %lld at %.7f, CPU row %lld at %.7f\n",
                    i, t, (long long)idx[t], dist[t], (long long)want_i[t], want_d[t]);
            return -1;
        }
        same &= idx[t] == want_i[t];
    }
    *exact += same;
    return 0;
}

/* The same kNN through the builder, the base named instead of sent. */
static int demo_knn_resident(gpuq_conn *c, const char *name, const float *q, float *dist,
                             int64_t *idx)
{
    const uint64_t qshape[2] = {DEMO_M, DEMO_D};
    int rc = GPUQ_E_NO_MEMORY;
    gpuq_req *r = gpuq_req_new("knn");
    gpuq_result *res = gpuq_result_new();
    if (!r || !res)
        goto out;
    /* The setters' errors stick to r: one check, at the call, suffices. */
    gpuq_req_set_input(r, 0, GPUQ_DT_F32, 2, qshape, q, sizeof(float) * DEMO_M * DEMO_D);
    gpuq_req_set_input_resident(r, 1, name); /* "in": [nil, name] */
    gpuq_req_set_str(r, "metric", "cosine");
    gpuq_req_set_u64(r, "k", DEMO_K);
    gpuq_req_set_output(r, 0, dist, sizeof(float) * DEMO_M * DEMO_K);
    gpuq_req_set_output(r, 1, idx, sizeof(int64_t) * DEMO_M * DEMO_K);
    rc = gpuq_call_req(c, r, res);
    if (rc)
        fprintf(stderr, "knn against resident '%s': %s\n", name, gpuq_errmsg(c));
out:
    gpuq_result_free(res);
    gpuq_req_free(r);
    return rc;
}

int main(int argc, char **argv)
{
    static float base[DEMO_N * DEMO_D], unit[DEMO_N * DEMO_D];
    float q[DEMO_M * DEMO_D], qunit[DEMO_M * DEMO_D];
    float dist[DEMO_M * DEMO_K], dist2[DEMO_M * DEMO_K];
    int64_t idx[DEMO_M * DEMO_K], idx2[DEMO_M * DEMO_K], source[DEMO_M];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    char name[64];
    int rc, status = 1, stored = 0, exact = 0, top1 = 0;

    for (size_t i = 0; i < DEMO_N * DEMO_D; i++)
        base[i] = (float)demo_uniform(&seed);
    for (int i = 0; i < DEMO_M; i++) {
        source[i] = (int64_t)((demo_uniform(&seed) + 1.0) / 2.0 * DEMO_N) % DEMO_N;
        for (int j = 0; j < DEMO_D; j++)
            q[i * DEMO_D + j] = base[source[i] * DEMO_D + j] + 0.02f * (float)demo_uniform(&seed);
    }

    gpuq_connect_opts o = {.socket_path = argc > 1 ? argv[1] : NULL,
                           .client_name = "knn_demo",
                           .priority = GPUQ_PRIO_NORMAL,
                           .device = -1};
    gpuq_conn *c = NULL;
    rc = gpuq_connect(&o, &c);
    if (rc) {
        /* c is NULL only when out of memory; else it holds the reason. */
        fprintf(stderr, "knn_demo: connect: %s\n", c ? gpuq_errmsg(c) : gpuq_strerror(rc));
        gpuq_close(c);
        return 1;
    }
    printf("connected: %s, backend %s\n", gpuq_info(c)->server, gpuq_info(c)->backend);

    /* Rows to unit length, then cosine kNN: every array over the socket (or
     * the staging arena, at 1 MiB or more). */
    if ((rc = gpuq_normalize(c, GPUQ_DT_F32, GPUQ_NORM_L2, false, base, DEMO_N, DEMO_D, unit)) ||
        (rc = gpuq_normalize(c, GPUQ_DT_F32, GPUQ_NORM_L2, false, q, DEMO_M, DEMO_D, qunit)) ||
        (rc = gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_COSINE, qunit, unit, DEMO_M, DEMO_N, DEMO_D,
                       DEMO_K, dist, idx))) {
        fprintf(stderr, "knn_demo: %s\n", gpuq_errmsg(c));
        goto out;
    }

    /* The base once into gpuqd, then only the queries travel. One namespace
     * serves all users: a name of this process's own. */
    snprintf(name, sizeof name, "knn-demo-%ld", (long)getpid());
    const uint64_t bshape[2] = {DEMO_N, DEMO_D};
    if ((rc = gpuq_put(c, name, GPUQ_DT_F32, 2, bshape, unit, GPUQ_ACCESS_PRIVATE))) {
        fprintf(stderr, "knn_demo: put %s: %s\n", name, gpuq_errmsg(c));
        goto out;
    }
    stored = 1;
    if (demo_knn_resident(c, name, qunit, dist2, idx2))
        goto out;
    if (memcmp(dist, dist2, sizeof dist) || memcmp(idx, idx2, sizeof idx)) {
        fprintf(stderr, "knn_demo: the resident base gave other results than the sent one\n");
        goto out;
    }
    printf("%d queries x %d base rows (d = %d), k = %d: sent and resident base agree\n", DEMO_M,
           DEMO_N, DEMO_D, DEMO_K);

    for (int i = 0; i < DEMO_M; i++) {
        if (demo_check(base, q + i * DEMO_D, dist + i * DEMO_K, idx + i * DEMO_K, i, &exact))
            goto out;
        top1 += idx[i * DEMO_K] == source[i];
        if (i < 3) {
            printf("query %d (from row %lld):", i, (long long)source[i]);
            for (int t = 0; t < DEMO_K; t++)
                printf(" %lld (%.4f)", (long long)idx[i * DEMO_K + t], dist[i * DEMO_K + t]);
            printf("\n");
        }
    }
    printf("CPU brute force (float64): %d of %d queries identical, top-1 the source row for %d\n",
           exact, DEMO_M, top1);
    if (top1 != DEMO_M) {
        fprintf(stderr, "knn_demo: a query's nearest row is not the row it was made from\n");
        goto out;
    }

    if ((rc = gpuq_remove(c, name))) {
        fprintf(stderr, "knn_demo: remove %s: %s\n", name, gpuq_errmsg(c));
        goto out;
    }
    stored = 0;

    /* Errors are codes with gpuqd's message; the connection goes on. */
    rc = gpuq_knn(c, GPUQ_DT_F32, GPUQ_METRIC_COSINE, qunit, unit, DEMO_M, DEMO_N, DEMO_D, 0, dist,
                  idx);
    printf("k = 0: %s (%d)\n", gpuq_errmsg(c), rc);
    if (rc != GPUQ_E_BAD_ARGUMENT || (rc = gpuq_ping(c))) {
        fprintf(stderr, "knn_demo: k = 0 gave %d, then: %s\n", rc, gpuq_errmsg(c));
        goto out;
    }
    rc = demo_knn_resident(c, name, qunit, dist2, idx2); /* prints gpuqd's message */
    if (rc != GPUQ_E_NOT_FOUND) {
        fprintf(stderr, "knn_demo: a removed array gave %d, not not_found\n", rc);
        goto out;
    }
    printf("after remove: %s\n", gpuq_strerror(rc));
    printf("ok\n");
    status = 0;
out:
    if (stored && gpuq_remove(c, name))
        fprintf(stderr, "knn_demo: remove %s: %s\n", name, gpuq_errmsg(c));
    gpuq_close(c);
    return status;
}
