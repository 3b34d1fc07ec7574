/* SPDX-License-Identifier: Apache-2.0 */
/* bench_kernels.c - gpuq_bench_kernels: kernel-only times of gpuq's CUDA
 * pairwise kernels, from CUDA events around the launches, with the inputs
 * already on the device: what gpuq_bench's end-to-end rows hide behind the
 * transfers (a 4096 x 4096 float32 result is 64 MiB to download, the
 * kernel a small part of the round trip). bench/peer_torch.py prints
 * torch.cdist's kernel-only time for the same shape, measured the same way,
 * so that the two sit side by side in bench/gpu_run.sh's log.
 *
 * Rows: pairwise 4096 x 4096, d = 64 (gpuq_bench's shape, y = x as its
 * request sends), every metric in float32; float64 euclidean on its default
 * route (cuBLAS GEMM when loaded) and tiled, float64 manhattan; float32
 * euclidean at d = 1000 (partial sums split every 64 coordinates), with
 * distinct rows and with all rows equal (the route's worst case: every
 * distance 0 is summed again in double, pairwise.cu); and the
 * d = 64 float32 euclidean request cut into 8 row ranges of 512 launched
 * back to back (what a pipelined request launches); and knn of 1, 4, 8,
 * 32 and 64 queries against 1M x 128 float32 rows, k = 10 (issue 29's
 * resident base; the few-row distance kernel up to 32 rows). Each row: p50 and min
 * over the repetitions after one warm-up launch, and a check of four rows
 * of the result against the CPU reference (float64 sums; 1e-5 relative in
 * float32, 1e-9 in float64, floor 1): a wrong result makes the row an
 * error, and any error makes the program exit 1. Without a CUDA device it
 * prints why and exits 3.
 *
 *   gpuq_bench_kernels [--quick]   (--quick: 256 x 256, d = 16, 3 reps)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpuq_kernels.h"

#define BK_CU(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_kernels: %s: %s\n", #call, cudaGetErrorString(e_));             \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

typedef struct bk {
    cudaStream_t stream;
    gpuq_cuda_ctx *ctx;
    cudaEvent_t ev0, ev1;
    int reps;
    int errors, rows;
} bk;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* gpuq_bench's and peer_torch.py's input: ((i * 2654435761) mod q) / q with
 * q = 1000. Row r of d coordinates starts at i = r d, so for d a multiple
 * of 1000 every row is the same (all distances 0); q = 1000003 (prime)
 * gives distinct rows. */
static void fill(int dt, void *h, uint64_t count, unsigned q)
{
    for (uint64_t i = 0; i < count; i++) {
        double v = (double)((i * 2654435761u) % q) / (double)q;
        if (dt == GPUQ_K_F32)
            ((float *)h)[i] = (float)v;
        else
            ((double *)h)[i] = v;
    }
}

/* A row of the table: p50 and min of ts[reps] (ms), or the error why. */
static void bk_report(bk *b, const char *what, int bad, const char *why, float *ts)
{
    if (bad) {
        b->errors++;
        fprintf(stderr, "bench_kernels: %s: %s\n", what, why);
        printf("| %s | n/a | n/a | 1 |\n", what);
    } else {
        qsort(ts, (size_t)b->reps, sizeof *ts, cmp_float);
        printf("| %s | %.1f us | %.1f us | 0 |\n", what, 1e3 * ts[b->reps / 2], 1e3 * ts[0]);
    }
    fflush(stdout);
}

/* One launch of the row's work: the whole request, or nr-row ranges. */
static int bk_launch(bk *b, int dt, int metric, const char *d_x, uint64_t m, uint64_t d,
                     uint64_t nr, char *d_out)
{
    size_t es = dt == GPUQ_K_F32 ? 4 : 8;
    for (uint64_t r0 = 0; r0 < m; r0 += nr) {
        uint64_t rows = m - r0 < nr ? m - r0 : nr;
        int k = gpuq_cuda_pairwise(b->ctx, dt, metric, 2.0, 0, d_x + r0 * d * es, d_x, rows, m, d,
                                   d_out + r0 * m * es);
        if (k != GPUQ_K_OK) {
            fprintf(stderr, "bench_kernels: gpuq_cuda_pairwise: %d\n", k);
            return -1;
        }
    }
    return 0;
}

/* Rows 0, 1, m/2 and m-1 of d_out against the CPU reference; 0 when right. */
/* Sum of squares of row i of h_x (f64 only: the GEMM route's bound). */
static double bk_norm2(const double *x, uint64_t i, uint64_t d)
{
    double s = 0;
    for (uint64_t k = 0; k < d; k++)
        s += x[i * d + k] * x[i * d + k];
    return s;
}

static int bk_check(int dt, int metric, const void *h_x, const char *d_out, uint64_t m, uint64_t d,
                    int gemm, char *why, size_t cap) /* gemm: the f64 GEMM route may run */
{
    size_t es = dt == GPUQ_K_F32 ? 4 : 8;
    const uint64_t rows[4] = {0, 1, m / 2, m - 1};
    void *got = malloc(m * es), *ref = malloc(m * es);
    int bad = 0;
    if (!got || !ref) {
        snprintf(why, cap, "out of memory");
        bad = 1;
    }
    for (int k = 0; k < 4 && !bad; k++) {
        uint64_t i = rows[k];
        if (cudaMemcpy(got, d_out + i * m * es, m * es, cudaMemcpyDeviceToHost) != cudaSuccess ||
            gpuq_cpu_pairwise(dt, metric, 2.0, 0, (const char *)h_x + i * d * es, h_x, 1, m, d,
                              ref) != GPUQ_K_OK) {
            snprintf(why, cap, "row %llu: copy or reference failed", (unsigned long long)i);
            bad = 1;
            break;
        }
        for (uint64_t j = 0; j < m; j++) {
            double g = dt == GPUQ_K_F32 ? ((float *)got)[j] : ((double *)got)[j];
            double r = dt == GPUQ_K_F32 ? ((float *)ref)[j] : ((double *)ref)[j];
            double tol = (dt == GPUQ_K_F32 ? 1e-5 : 1e-9) * fmax(fabs(r), 1.0);
            if (gemm &&
                dt == GPUQ_K_F64) /* ||x||^2 + ||y||^2 - 2 x.y cancels: sqrt of 2(d+4)u (nx + ny)
                 absolute (numtol.h's nt_pairwise_gemm_acc, the route's documented trade-off) */
                tol += sqrt(2.0 * ((double)d + 4.0) * 0x1p-53 *
                            (bk_norm2(h_x, i, d) + bk_norm2(h_x, j, d)));
            if (!(fabs(g - r) <= tol)) {
                snprintf(why, cap, "element [%llu][%llu] is %.9g, CPU %.9g", (unsigned long long)i,
                         (unsigned long long)j, g, r);
                bad = 1;
                break;
            }
        }
    }
    free(got);
    free(ref);
    return bad;
}

/* One row of the table: m x m against itself, d coordinates, in ranges of
 * nr rows (m: the whole request); fill's q. */
static void bk_row(bk *b, const char *what, int dt, int metric, uint64_t m, uint64_t d, uint64_t nr,
                   unsigned q, int gemm)
{
    size_t es = dt == GPUQ_K_F32 ? 4 : 8;
    void *h_x = malloc(m * d * es);
    char *d_x = NULL, *d_out = NULL;
    float *ts = calloc((size_t)b->reps, sizeof *ts);
    char why[256] = "";
    int bad = !h_x || !ts;
    b->rows++;
    gpuq_cuda_ctx_use_gemm(b->ctx, gemm);
    if (!bad) {
        fill(dt, h_x, m * d, q);
        bad = cudaMalloc((void **)&d_x, m * d * es) != cudaSuccess ||
              cudaMalloc((void **)&d_out, m * m * es) != cudaSuccess ||
              cudaMemcpy(d_x, h_x, m * d * es, cudaMemcpyHostToDevice) != cudaSuccess ||
              cudaMemsetAsync(gpuq_cuda_ctx_errflag(b->ctx), 0, sizeof(int), b->stream) !=
                  cudaSuccess;
        if (bad)
            snprintf(why, sizeof why, "device memory or copy failed");
    }
    /* warm-up (module load, cuBLAS handle), then the timed launches */
    if (!bad && (bad = bk_launch(b, dt, metric, d_x, m, d, nr, d_out) != 0 ||
                       cudaStreamSynchronize(b->stream) != cudaSuccess))
        snprintf(why, sizeof why, "warm-up launch failed");
    for (int r = 0; r < b->reps && !bad; r++) {
        if (cudaEventRecord(b->ev0, b->stream) != cudaSuccess ||
            bk_launch(b, dt, metric, d_x, m, d, nr, d_out) != 0 ||
            cudaEventRecord(b->ev1, b->stream) != cudaSuccess ||
            cudaEventSynchronize(b->ev1) != cudaSuccess ||
            cudaEventElapsedTime(&ts[r], b->ev0, b->ev1) != cudaSuccess) {
            snprintf(why, sizeof why, "timed launch %d failed", r);
            bad = 1;
        }
    }
    int flag = -1;
    if (!bad && (cudaMemcpy(&flag, gpuq_cuda_ctx_errflag(b->ctx), sizeof flag,
                            cudaMemcpyDeviceToHost) != cudaSuccess ||
                 flag != 0)) {
        snprintf(why, sizeof why, "error flag %d", flag);
        bad = 1;
    }
    if (!bad)
        bad = bk_check(dt, metric, h_x, d_out, m, d, gemm, why, sizeof why);
    bk_report(b, what, bad, why, ts);
    gpuq_cuda_ctx_use_gemm(b->ctx, 1);
    cudaFree(d_x);
    cudaFree(d_out);
    free(h_x);
    free(ts);
}

/* kNN of m queries against n rows (d, k, f32 euclidean), kernel only: the
 * resident-array rows of issue 29 without the round trip. The first and
 * last queries' neighbours checked against the CPU reference (the same
 * indices; distances within 1e-5 relative). */
static void bk_knn_row(bk *b, uint64_t m, uint64_t n, uint64_t d, uint64_t k)
{
    const int dt = GPUQ_K_F32, metric = GPUQ_K_EUCLIDEAN;
    char what[160], why[256] = "";
    snprintf(what, sizeof what, "knn euclidean f32, %llu queries x %llu rows, d = %llu, k = %llu",
             (unsigned long long)m, (unsigned long long)n, (unsigned long long)d,
             (unsigned long long)k);
    uint64_t sb = gpuq_cuda_knn_scratch_bytes(dt, m, n, d, k);
    float *h_x = malloc(m * d * 4), *h_y = malloc(n * d * 4), *g_d = malloc(m * k * 4);
    float *c_d = malloc(k * 4);
    int64_t *g_i = malloc(m * k * 8), *c_i = malloc(k * 8);
    float *ts = calloc((size_t)b->reps, sizeof *ts);
    char *d_x = NULL, *d_y = NULL, *d_s = NULL, *d_dist = NULL, *d_idx = NULL;
    int bad = !h_x || !h_y || !g_d || !c_d || !g_i || !c_i || !ts || sb == 0;
    b->rows++;
    if (!bad) {
        fill(dt, h_y, n * d, 1000003u);
        for (uint64_t i = 0; i < m * d; i++) /* queries near rows of y */
            h_x[i] = h_y[(i * 7919) % (n * d)] + 1e-3f * (float)(i % 13);
        bad = cudaMalloc((void **)&d_x, m * d * 4) != cudaSuccess ||
              cudaMalloc((void **)&d_y, n * d * 4) != cudaSuccess ||
              cudaMalloc((void **)&d_s, sb) != cudaSuccess ||
              cudaMalloc((void **)&d_dist, m * k * 4) != cudaSuccess ||
              cudaMalloc((void **)&d_idx, m * k * 8) != cudaSuccess ||
              cudaMemcpy(d_x, h_x, m * d * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
              cudaMemcpy(d_y, h_y, n * d * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
              cudaMemsetAsync(gpuq_cuda_ctx_errflag(b->ctx), 0, sizeof(int), b->stream) !=
                  cudaSuccess;
        if (bad)
            snprintf(why, sizeof why, "device memory or copy failed");
    }
    for (int r = -1; r < b->reps && !bad; r++) { /* r -1: the warm-up */
        if (cudaEventRecord(b->ev0, b->stream) != cudaSuccess ||
            gpuq_cuda_knn(b->ctx, dt, metric, 2.0, 0, d_x, d_y, m, n, d, k, d_s, d_dist,
                          (int64_t *)d_idx) != GPUQ_K_OK ||
            cudaEventRecord(b->ev1, b->stream) != cudaSuccess ||
            cudaEventSynchronize(b->ev1) != cudaSuccess ||
            (r >= 0 && cudaEventElapsedTime(&ts[r], b->ev0, b->ev1) != cudaSuccess)) {
            snprintf(why, sizeof why, "launch %d failed", r);
            bad = 1;
        }
    }
    if (!bad && (cudaMemcpy(g_d, d_dist, m * k * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
                 cudaMemcpy(g_i, d_idx, m * k * 8, cudaMemcpyDeviceToHost) != cudaSuccess)) {
        snprintf(why, sizeof why, "copy back failed");
        bad = 1;
    }
    for (uint64_t q = 0; q < m && !bad; q += m > 1 ? m - 1 : 1) {
        if (gpuq_cpu_knn(dt, metric, 2.0, 0, h_x + q * d, h_y, 1, n, d, k, c_d, c_i) != GPUQ_K_OK) {
            snprintf(why, sizeof why, "CPU reference failed");
            bad = 1;
        }
        for (uint64_t t = 0; t < k && !bad; t++)
            if (g_i[q * k + t] != c_i[t] ||
                !(fabs(g_d[q * k + t] - c_d[t]) <= 1e-5 * fmax(fabs(c_d[t]), 1e-30))) {
                snprintf(why, sizeof why, "query %llu neighbour %llu: %lld (%.9g), CPU %lld (%.9g)",
                         (unsigned long long)q, (unsigned long long)t, (long long)g_i[q * k + t],
                         g_d[q * k + t], (long long)c_i[t], c_d[t]);
                bad = 1;
            }
    }
    bk_report(b, what, bad, why, ts);
    cudaFree(d_x), cudaFree(d_y), cudaFree(d_s), cudaFree(d_dist), cudaFree(d_idx);
    free(h_x), free(h_y), free(g_d), free(c_d), free(g_i), free(c_i), free(ts);
}

static int bk_open(bk *b)
{
    BK_CU(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    BK_CU(cudaEventCreate(&b->ev0));
    BK_CU(cudaEventCreate(&b->ev1));
    if (gpuq_cuda_ctx_create(b->stream, &b->ctx) != GPUQ_K_OK) {
        fprintf(stderr, "bench_kernels: gpuq_cuda_ctx_create failed\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("bench_kernels: no CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "count 0");
        return 3;
    }
    bk b;
    memset(&b, 0, sizeof b);
    b.reps = quick ? 3 : 20;
    if (bk_open(&b) != 0)
        return 1;
    struct cudaDeviceProp prop;
    char gemm_why[256] = "";
    int have_gemm = gpuq_cuda_gemm_status(gemm_why, sizeof gemm_why);
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
        snprintf(prop.name, sizeof prop.name, "device 0");
    const uint64_t m = quick ? 256 : 4096, d = quick ? 16 : 64, dl = quick ? 100 : 1000;
    static const char *const names[4] = {"euclidean", "sqeuclidean", "cosine", "manhattan"};
    char what[160];
    printf("| gpuq kernels, CUDA events, inputs on the device (%s) | p50 | min | errors |\n",
           prop.name);
    printf("|---|---:|---:|---:|\n");
    for (int mt = 0; mt < 4; mt++) {
        snprintf(what, sizeof what, "pairwise %s f32, %llux%llu, d = %llu, kernel only", names[mt],
                 (unsigned long long)m, (unsigned long long)m, (unsigned long long)d);
        bk_row(&b, what, GPUQ_K_F32, mt, m, d, m, 1000u, 1);
    }
    snprintf(what, sizeof what, "pairwise euclidean f64, %llux%llu, d = %llu, kernel only (%s)",
             (unsigned long long)m, (unsigned long long)m, (unsigned long long)d,
             have_gemm ? "cuBLAS GEMM route" : "tiled: no cuBLAS");
    bk_row(&b, what, GPUQ_K_F64, GPUQ_K_EUCLIDEAN, m, d, m, 1000u, 1);
    snprintf(what, sizeof what, "pairwise euclidean f64, %llux%llu, d = %llu, kernel only (tiled)",
             (unsigned long long)m, (unsigned long long)m, (unsigned long long)d);
    bk_row(&b, what, GPUQ_K_F64, GPUQ_K_EUCLIDEAN, m, d, m, 1000u, 0);
    snprintf(what, sizeof what, "pairwise manhattan f64, %llux%llu, d = %llu, kernel only",
             (unsigned long long)m, (unsigned long long)m, (unsigned long long)d);
    bk_row(&b, what, GPUQ_K_F64, GPUQ_K_MANHATTAN, m, d, m, 1000u, 1);
    snprintf(what, sizeof what, "pairwise euclidean f32, %llux%llu, d = %llu, kernel only",
             (unsigned long long)m, (unsigned long long)m, (unsigned long long)dl);
    bk_row(&b, what, GPUQ_K_F32, GPUQ_K_EUCLIDEAN, m, dl, m, 1000003u, 1);
    /* the worst case of the float-sum route: every distance is 0, so every
     * element is summed again in double by one thread (pairwise.cu) */
    snprintf(what, sizeof what,
             "pairwise euclidean f32, %llux%llu, d = %llu, all rows equal, kernel only",
             (unsigned long long)m, (unsigned long long)m, (unsigned long long)dl);
    bk_row(&b, what, GPUQ_K_F32, GPUQ_K_EUCLIDEAN, m, dl, m, quick ? 100u : 1000u, 1);
    snprintf(what, sizeof what,
             "pairwise euclidean f32, %llux%llu, d = %llu, 8 row ranges of %llu, kernels only",
             (unsigned long long)m, (unsigned long long)m, (unsigned long long)d,
             (unsigned long long)(m / 8));
    bk_row(&b, what, GPUQ_K_F32, GPUQ_K_EUCLIDEAN, m, d, m / 8, 1000u, 1);
    /* issue 29's resident base: 1M x 128 (quick: 20000 x 16) */
    const uint64_t kn_n = quick ? 20000 : 1u << 20, kn_d = quick ? 16 : 128;
    const uint64_t kn_m[5] = {1, 4, 8, 32, 64};
    for (int i = 0; i < 5; i++)
        bk_knn_row(&b, kn_m[i], kn_n, kn_d, 10);
    printf("bench_kernels: %d errors in %d rows\n", b.errors, b.rows);
    cudaStreamSynchronize(b.stream);
    gpuq_cuda_ctx_destroy(b.ctx);
    cudaEventDestroy(b.ev0);
    cudaEventDestroy(b.ev1);
    cudaStreamDestroy(b.stream);
    return b.errors ? 1 : 0;
}
