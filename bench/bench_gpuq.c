/* bench_gpuq.c - end-to-end throughput and latency of gpuqd, plus an
 * in-process baseline of the same op with no daemon in between.
 *
 * Starts its own gpuqd (--gpuqd PATH, --device cpu|cuda) on a temporary
 * socket, then measures: ping latency; small-request (4 KiB float32
 * normalize) throughput with 1, 16 and 64 client processes, each keeping 8
 * requests in flight; and large-request latency for normalize (10^7 float32),
 * pairwise (4096 x 4096 x 64 float32) and the default grid (1000 x 1000).
 * Prints a Markdown table (rows start with '|'). Speed targets live here,
 * never in tests.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuq.h"
#include "gpuq_kernels.h"

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

static char sock[256];

static gpuq_conn *conn(void)
{
    gpuq_connect_opts o = {.socket_path = sock, .client_name = "bench", .priority = 0,
                           .device = -1};
    gpuq_conn *c = NULL;
    int rc = gpuq_connect(&o, &c);
    if (rc) {
        fprintf(stderr, "bench: connect: %s\n", gpuq_strerror(rc));
        exit(1);
    }
    return c;
}

/* One client: nreq 4 KiB normalize requests, `depth` in flight. */
static int client_loop(int nreq, unsigned depth)
{
    gpuq_conn *c = conn();
    static float x[1024], y[16][1024];
    for (int i = 0; i < 1024; i++)
        x[i] = 1.0f + (float)(i % 97);
    int sent = 0, got = 0;
    while (got < nreq) {
        while (sent < nreq && gpuq_pending(c) < depth) {
            gpuq_request r;
            gpuq_request_init(&r);
            r.op = GPUQ_OP_NORMALIZE;
            r.dtype = GPUQ_DT_F32;
            r.ndim_a = 1;
            r.shape_a[0] = 1024;
            uint64_t id;
            if (gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[sent % 16], sizeof y[0], &id))
                return 1;
            sent++;
        }
        gpuq_reply rep;
        if (gpuq_wait(c, &rep))
            return 2;
        got++;
    }
    gpuq_close(c);
    return 0;
}

static double throughput(int nclients, int nreq)
{
    double t0 = now_s();
    pid_t pids[64];
    for (int k = 0; k < nclients; k++) {
        pids[k] = fork();
        if (pids[k] == 0)
            _exit(client_loop(nreq, 8));
    }
    int bad = 0;
    for (int k = 0; k < nclients; k++) {
        int st;
        waitpid(pids[k], &st, 0);
        bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    double dt = now_s() - t0;
    if (bad)
        fprintf(stderr, "bench: %d clients failed\n", bad);
    return (double)nclients * nreq / dt;
}

static void row(const char *what, const char *value)
{
    printf("| %-52s | %24s |\n", what, value);
}

int main(int argc, char **argv)
{
    const char *gpuqd = "gpuqd", *device = "cpu";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--gpuqd"))
            gpuqd = argv[i + 1];
        else if (!strcmp(argv[i], "--device"))
            device = argv[i + 1];
    }
    char dir[] = "/tmp/gpuq-bench-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    snprintf(sock, sizeof sock, "%s/s.sock", dir);
    pid_t d = fork();
    if (d == 0) {
        execl(gpuqd, gpuqd, "--device", device, "--socket", sock, "--log-level", "warn",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000 && access(sock, F_OK) != 0; i++)
        usleep(20000);
    usleep(100000);

    char v[64];
    printf("| %-52s | %24s |\n|---|---|\n", "gpuq benchmark", device);
    /* ping latency */
    gpuq_conn *c = conn();
    enum { NP = 2000 };
    static double lat[NP];
    for (int i = 0; i < NP; i++) {
        double t = now_s();
        gpuq_ping(c);
        lat[i] = (now_s() - t) * 1e6;
    }
    qsort(lat, NP, sizeof lat[0], cmp_d);
    snprintf(v, sizeof v, "p50 %.1f us, p99 %.1f us", lat[NP / 2], lat[NP * 99 / 100]);
    row("ping round trip", v);
    /* small normalize latency, one at a time */
    static float x[1024], y[1024];
    for (int i = 0; i < 1024; i++)
        x[i] = 1.0f + (float)i;
    for (int i = 0; i < NP; i++) {
        double t = now_s();
        gpuq_normalize(c, GPUQ_DT_F32, GPUQ_NORM_SUM, false, x, 1, 1024, 1, y);
        lat[i] = (now_s() - t) * 1e6;
    }
    qsort(lat, NP, sizeof lat[0], cmp_d);
    snprintf(v, sizeof v, "p50 %.1f us, p99 %.1f us", lat[NP / 2], lat[NP * 99 / 100]);
    row("normalize 4 KiB f32, 1 in flight", v);
    /* in-process baseline on the CPU reference */
    double t0 = now_s();
    for (int i = 0; i < 20000; i++)
        gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, 0, x, y, 1, 1024);
    snprintf(v, sizeof v, "%.2f us/op", (now_s() - t0) / 20000 * 1e6);
    row("in-process CPU baseline, same op", v);
    /* throughput */
    int counts[] = {1, 16, 64};
    for (int k = 0; k < 3; k++) {
        char what[80];
        snprintf(what, sizeof what, "normalize 4 KiB f32, %d clients x 8 in flight", counts[k]);
        snprintf(v, sizeof v, "%.0f req/s", throughput(counts[k], counts[k] >= 16 ? 2000 : 20000));
        row(what, v);
    }
    /* large requests */
    size_t n = 10 * 1000 * 1000;
    float *bx = malloc(n * 4), *by = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        bx[i] = 1.0f + (float)(i % 1000);
    for (int i = 0; i < 5; i++) {
        double t = now_s();
        gpuq_normalize(c, GPUQ_DT_F32, GPUQ_NORM_SUM, false, bx, 1, n, 1, by);
        lat[i] = (now_s() - t) * 1e3;
    }
    qsort(lat, 5, sizeof lat[0], cmp_d);
    snprintf(v, sizeof v, "%.2f ms (%.1f GB/s)", lat[2], 8.0 * n / lat[2] / 1e6);
    row("normalize 10^7 f32 (40 MB in, 40 MB out)", v);
    free(bx), free(by);
    size_t m = 4096, dd = 64;
    float *px = malloc(m * dd * 4), *po = malloc(m * m * 4);
    for (size_t i = 0; i < m * dd; i++)
        px[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    for (int i = 0; i < 3; i++) {
        double t = now_s();
        gpuq_pairwise(c, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, px, px, m, m, dd, po);
        lat[i] = (now_s() - t) * 1e3;
    }
    qsort(lat, 3, sizeof lat[0], cmp_d);
    snprintf(v, sizeof v, "%.2f ms", lat[1]);
    row("pairwise euclidean 4096x4096, d=64, f32", v);
    free(px), free(po);
    double *g = malloc(1000 * 1000 * 8);
    for (int i = 0; i < 5; i++) {
        double t = now_s();
        gpuq_grid(c, GPUQ_DT_F64, -90, 90, 1000, -180, 180, 1000, 30, 101, 6371.0088, g);
        lat[i] = (now_s() - t) * 1e3;
    }
    qsort(lat, 5, sizeof lat[0], cmp_d);
    snprintf(v, sizeof v, "%.2f ms", lat[2]);
    row("grid 1000x1000 f64 (8 MB out)", v);
    free(g);
    gpuq_close(c);
    kill(d, SIGTERM);
    int st;
    waitpid(d, &st, 0);
    rmdir(dir);
    return 0;
}
