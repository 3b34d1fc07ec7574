/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_gate.c - the kernels' stop gate (gpuq_cuda_ctx_set_gate): what
 * gpuqd sets when a running request is cancelled, expires or loses its
 * client (issue 30, item 6).
 *
 *  - set before the launch: pairwise's tiled kernel (float32 and float64)
 *    does not write the tile that reads the gate (its elements keep their
 *    NaN poison) and the flag reads -GPUQ_K_E_STOPPED; kNN's flag reads the
 *    same;
 *  - the gate belongs to the launch: after set_gate(NULL) the same ctx
 *    computes the CPU reference's distances again, flag clear;
 *  - set while a pairwise of some hundred milliseconds runs: it ends early
 *    (under half its ungated time, measured in the same run), the flag says
 *    stopped and part of the output was never written; the same for kNN
 *    (time and flag);
 *  - the test sleep (gpuqd's GPUQ_TEST_SLOW_MS) ends within milliseconds of
 *    its gate, not after its full time.
 * No GPU: exit 77 (ctest: Skipped) unless GPUQ_REQUIRE_GPU=1.
 */
#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"
#include "gpuq_kernels.h"
#include "testutil.h"

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;
static int *g_gate; /* pinned: the device reads it at this pointer */
static int *g_flag; /* pinned */

static void gate_set(int v)
{
    __atomic_store_n(g_gate, v, __ATOMIC_RELAXED);
}

/* The ctx's error flag after the stream's work, then cleared. */
static int flag_now(void)
{
    ck_assert_int_eq(gpuq_cuda_ctx_flag_to_host(g_ctx, g_flag), GPUQ_K_OK);
    CK(cudaStreamSynchronize(g_stream));
    int f = *g_flag;
    ck_assert_int_eq(gpuq_cuda_ctx_flag_reset(g_ctx), GPUQ_K_OK);
    CK(cudaStreamSynchronize(g_stream));
    return f;
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes));
    CK_UPLOAD(d, h, bytes);
    return d;
}

/* Elements of out[0..n) (f32 or f64 on the device) that are still NaN. */
static uint64_t count_nan(const void *d_out, uint64_t n, size_t esz)
{
    void *h = malloc(n * esz);
    ck_assert_ptr_nonnull(h);
    CK(cudaMemcpy(h, d_out, n * esz, cudaMemcpyDeviceToHost));
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        k += esz == 4 ? isnan(((float *)h)[i]) : isnan(((double *)h)[i]);
    free(h);
    return k;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A float32 kNN's device buffers: x (m x d), y (n x d), its outputs and
 * scratch. x and y copied from hx, hy, or (NULL) constant bytes. */
typedef struct knn_dev {
    uint64_t m, n, d, k;
    void *x, *y, *dist, *idx, *scratch;
} knn_dev;

static void *dev_fill(const void *h, size_t bytes, int byte)
{
    if (h)
        return dev_copy(h, bytes);
    void *d = NULL;
    CK(cudaMalloc(&d, bytes));
    CK_MEMSET(d, byte, bytes);
    return d;
}

static knn_dev knn_dev_new(uint64_t m, uint64_t n, uint64_t d, uint64_t k, const float *hx,
                           const float *hy)
{
    knn_dev b = {.m = m, .n = n, .d = d, .k = k};
    uint64_t sb = gpuq_cuda_knn_scratch_bytes(GPUQ_K_F32, m, n, d, k);
    ck_assert_uint_gt(sb, 0);
    b.x = dev_fill(hx, m * d * 4, 0x3f);
    b.y = dev_fill(hy, n * d * 4, 0x3e);
    CK(cudaMalloc(&b.scratch, sb));
    CK(cudaMalloc(&b.dist, m * k * 4));
    CK(cudaMalloc(&b.idx, m * k * 8));
    CK(cudaDeviceSynchronize());
    return b;
}

/* Enqueue the kNN on the test's ctx, with gate (NULL: none). */
static void knn_dev_run(const knn_dev *b, const int *gate)
{
    gpuq_cuda_ctx_set_gate(g_ctx, gate);
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, GPUQ_K_F32, GPUQ_K_EUCLIDEAN, 2.0, 0, b->x, b->y, b->m,
                                   b->n, b->d, b->k, b->scratch, b->dist, (int64_t *)b->idx),
                     GPUQ_K_OK);
    gpuq_cuda_ctx_set_gate(g_ctx, NULL);
}

static void knn_dev_free(knn_dev *b)
{
    CK(cudaFree(b->x));
    CK(cudaFree(b->y));
    CK(cudaFree(b->dist));
    CK(cudaFree(b->idx));
    CK(cudaFree(b->scratch));
}

/* _i: 0 float32, 1 float64. A gate set before the launch: the tile that
 * reads it writes nothing, the flag says stopped; then without a gate the
 * same launch gives the float64 CPU reference's distances. */
START_TEST(pairwise_gate_set_before)
{
    const int dt = _i ? GPUQ_K_F64 : GPUQ_K_F32;
    const size_t esz = _i ? 8 : 4;
    const uint64_t m = 300, n = 129, d = 65;
    double *hx = malloc(m * d * sizeof *hx), *hy = malloc(n * d * sizeof *hy);
    ck_assert(hx && hy);
    tu_rand_fill_f64(hx, m * d, -1, 1);
    tu_rand_fill_f64(hy, n * d, -1, 1);
    void *bx = malloc(m * d * esz), *by = malloc(n * d * esz);
    ck_assert(bx && by);
    for (uint64_t i = 0; i < m * d; i++)
        _i ? (void)(((double *)bx)[i] = hx[i]) : (void)(((float *)bx)[i] = (float)hx[i]);
    for (uint64_t i = 0; i < n * d; i++)
        _i ? (void)(((double *)by)[i] = hy[i]) : (void)(((float *)by)[i] = (float)hy[i]);
    void *dx = dev_copy(bx, m * d * esz), *dy = dev_copy(by, n * d * esz), *dout = NULL;
    CK(cudaMalloc(&dout, m * n * esz));
    CK_MEMSET(dout, 0xff, m * n * esz); /* all-ones bits: NaN in both dtypes */

    gate_set(1);
    gpuq_cuda_ctx_set_gate(g_ctx, g_gate);
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, GPUQ_K_EUCLIDEAN, 2.0, 0, dx, dy, m, n, d, dout),
                     GPUQ_K_OK);
    gpuq_cuda_ctx_set_gate(g_ctx, NULL);
    ck_assert_int_eq(flag_now(), -GPUQ_K_E_STOPPED);
    /* tile 0 (rows 0..127, columns 0..63) reads the gate itself: nothing
     * of it written (the others may have started before it set the flag) */
    void *h = malloc(m * n * esz);
    ck_assert_ptr_nonnull(h);
    CK(cudaMemcpy(h, dout, m * n * esz, cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < 128; i++)
        for (uint64_t j = 0; j < 64; j++)
            ck_assert_msg(_i ? isnan(((double *)h)[i * n + j]) : isnan(((float *)h)[i * n + j]),
                          "out[%llu][%llu] was written", (unsigned long long)i,
                          (unsigned long long)j);
    free(h);

    /* the gate is still set, but this launch has none */
    ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, dt, GPUQ_K_EUCLIDEAN, 2.0, 0, dx, dy, m, n, d, dout),
                     GPUQ_K_OK);
    ck_assert_int_eq(flag_now(), 0);
    void *got = malloc(m * n * esz);
    double *ref = malloc(m * n * sizeof *ref);
    ck_assert(got && ref);
    CK(cudaMemcpy(got, dout, m * n * esz, cudaMemcpyDeviceToHost));
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 2.0, 0, hx, hy, m, n, d, ref),
                     GPUQ_K_OK);
    for (uint64_t i = 0; i < m * n; i++) {
        double g = _i ? ((double *)got)[i] : (double)((float *)got)[i];
        ck_assert_msg(fabs(g - ref[i]) <= (_i ? 1e-12 : 1e-5) * (fabs(ref[i]) + 1e-30),
                      "out[%llu] %.17g, reference %.17g", (unsigned long long)i, g, ref[i]);
    }
    gate_set(0);
    free(got), free(ref), free(hx), free(hy), free(bx), free(by);
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    CK(cudaFree(dout));
}
END_TEST

/* kNN with its gate set: the distance tiles stop and the flag says so;
 * without it, the flag stays clear. */
START_TEST(knn_gate_set_before)
{
    const uint64_t m = 700, n = 900, d = 33;
    float *hx = malloc(m * d * sizeof *hx), *hy = malloc(n * d * sizeof *hy);
    ck_assert(hx && hy);
    for (uint64_t i = 0; i < m * d; i++)
        hx[i] = (float)((double)rand() / RAND_MAX);
    for (uint64_t i = 0; i < n * d; i++)
        hy[i] = (float)((double)rand() / RAND_MAX);
    knn_dev b = knn_dev_new(m, n, d, 5, hx, hy);
    for (int gated = 1; gated >= 0; gated--) {
        gate_set(1);
        knn_dev_run(&b, gated ? g_gate : NULL);
        ck_assert_int_eq(flag_now(), gated ? -GPUQ_K_E_STOPPED : 0);
    }
    gate_set(0);
    free(hx), free(hy);
    knn_dev_free(&b);
}
END_TEST

/* A float32 pairwise of a few hundred milliseconds, its gate set a tenth
 * of the way in: it ends before half its ungated time, part of its output
 * unwritten, the flag saying stopped. Inputs are constant (the time does
 * not depend on values); d grows until the ungated run takes 200 ms. */
START_TEST(pairwise_gate_mid_run)
{
    const uint64_t m = 8192, n = 8192;
    uint64_t d = 2048;
    void *dx = NULL, *dy = NULL, *dout = NULL;
    CK(cudaMalloc(&dout, m * n * 4));
    double full = 0;
    for (;;) {
        CK(cudaMalloc(&dx, m * d * 4));
        CK(cudaMalloc(&dy, n * d * 4));
        CK_MEMSET(dx, 0x3f, m * d * 4); /* 0.747 each: no zero sums */
        CK_MEMSET(dy, 0, n * d * 4);
        CK(cudaDeviceSynchronize());
        double t0 = now_s();
        ck_assert_int_eq(gpuq_cuda_pairwise(g_ctx, GPUQ_K_F32, GPUQ_K_SQEUCLIDEAN, 2.0, 0, dx, dy,
                                            m, n, d, dout),
                         GPUQ_K_OK);
        CK(cudaStreamSynchronize(g_stream));
        full = now_s() - t0;
        ck_assert_int_eq(flag_now(), 0);
        if (full >= 0.2 || d >= 32768)
            break;
        CK(cudaFree(dx));
        CK(cudaFree(dy));
        d *= 2;
    }
    printf("pairwise_gate_mid_run: %llu x %llu x %llu float32 takes %.0f ms ungated\n",
           (unsigned long long)m, (unsigned long long)n, (unsigned long long)d, full * 1e3);
    ck_assert_msg(full >= 0.1, "the ungated run took only %.0f ms", full * 1e3);
    CK_MEMSET(dout, 0xff, m * n * 4);
    CK(cudaDeviceSynchronize());
    gate_set(0);
    gpuq_cuda_ctx_set_gate(g_ctx, g_gate);
    double t0 = now_s();
    ck_assert_int_eq(
        gpuq_cuda_pairwise(g_ctx, GPUQ_K_F32, GPUQ_K_SQEUCLIDEAN, 2.0, 0, dx, dy, m, n, d, dout),
        GPUQ_K_OK);
    gpuq_cuda_ctx_set_gate(g_ctx, NULL);
    usleep((useconds_t)(full * 1e5)); /* a tenth */
    gate_set(1);
    CK(cudaStreamSynchronize(g_stream));
    double gated = now_s() - t0;
    printf("pairwise_gate_mid_run: gate set after %.0f ms, the kernel ended after %.0f ms\n",
           full * 1e2, gated * 1e3);
    ck_assert_int_eq(flag_now(), -GPUQ_K_E_STOPPED);
    uint64_t unwritten = count_nan(dout, m * n, 4);
    ck_assert_msg(unwritten > 0 && unwritten < m * n, "%llu of %llu unwritten",
                  (unsigned long long)unwritten, (unsigned long long)(m * n));
    ck_assert_msg(gated < full / 2, "gated run %.0f ms, ungated %.0f ms", gated * 1e3, full * 1e3);
    gate_set(0);
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    CK(cudaFree(dout));
}
END_TEST

/* kNN of a few hundred milliseconds (its top-k merge over 32768 x 32768
 * candidates is most of it), its gate set a tenth of the way in: it ends
 * before half its ungated time and the flag says stopped. */
START_TEST(knn_gate_mid_run)
{
    knn_dev b = knn_dev_new(32768, 32768, 1024, 4, NULL, NULL);
    double t[2] = {0, 0};
    for (int gated = 0; gated < 2; gated++) {
        gate_set(0);
        double t0 = now_s();
        knn_dev_run(&b, gated ? g_gate : NULL);
        if (gated) {
            usleep((useconds_t)(t[0] * 1e5)); /* a tenth */
            gate_set(1);
        }
        CK(cudaStreamSynchronize(g_stream));
        t[gated] = now_s() - t0;
        ck_assert_int_eq(flag_now(), gated ? -GPUQ_K_E_STOPPED : 0);
    }
    printf("knn_gate_mid_run: %.0f ms ungated, %.0f ms with the gate set after %.0f ms\n",
           t[0] * 1e3, t[1] * 1e3, t[0] * 1e2);
    ck_assert_msg(t[0] >= 0.02, "the ungated kNN took only %.0f ms", t[0] * 1e3);
    ck_assert_msg(t[1] < t[0] / 2, "gated %.0f ms, ungated %.0f ms", t[1] * 1e3, t[0] * 1e3);
    gate_set(0);
    knn_dev_free(&b);
}
END_TEST

/* The test sleep of 10 s, its gate set after 50 ms: the stream is idle
 * well before a second. Without a gate, 100 ms take 100 ms. */
START_TEST(sleep_gate)
{
    double t0 = now_s();
    ck_assert_int_eq(gpuq_cuda_test_sleep(g_stream, 100, NULL), GPUQ_K_OK);
    CK(cudaStreamSynchronize(g_stream));
    ck_assert_double_ge(now_s() - t0, 0.095);
    gate_set(0);
    t0 = now_s();
    ck_assert_int_eq(gpuq_cuda_test_sleep(g_stream, 10000, g_gate), GPUQ_K_OK);
    usleep(50000);
    gate_set(1);
    CK(cudaStreamSynchronize(g_stream));
    double t = now_s() - t0;
    ck_assert_msg(t < 1.0, "the gated sleep ended after %.0f ms", t * 1e3);
    gate_set(0);
}
END_TEST

static Suite *gate_suite(void)
{
    Suite *s = suite_create("gpu_gate");
    /* small: what compute-sanitizer runs (CK_RUN_CASE=gate) */
    TCase *tc = tcase_create("gate");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, pairwise_gate_set_before, 0, 2);
    tcase_add_test(tc, knn_gate_set_before);
    tcase_add_test(tc, sleep_gate);
    suite_add_tcase(s, tc);
    /* hundreds of milliseconds of kernels each */
    TCase *mid = tcase_create("mid_run");
    tcase_set_timeout(mid, 300);
    tcase_add_test(mid, pairwise_gate_mid_run);
    tcase_add_test(mid, knn_gate_mid_run);
    suite_add_tcase(s, mid);
    return s;
}

int main(void)
{
    int no_dev = gpu_test_no_device("test_gpu_gate");
    if (no_dev >= 0)
        return no_dev;
    printf("test_gpu_gate: seed %llu\n", (unsigned long long)tu_seed());
    setenv("CK_FORK", "no", 1); /* CUDA state does not survive fork */
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK ||
        cudaHostAlloc((void **)&g_gate, 2 * sizeof(int), cudaHostAllocPortable) != cudaSuccess) {
        fprintf(stderr, "test_gpu_gate: cannot create stream, ctx or pinned gate\n");
        return EXIT_FAILURE;
    }
    g_flag = g_gate + 1;
    *g_gate = *g_flag = 0;
    int failed = gpu_test_run(gate_suite());
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaFreeHost(g_gate);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
