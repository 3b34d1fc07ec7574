/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_shape.c - the CUDA pieces of issue 31's shapes against the CPU
 * references: gpuq_cuda_transpose (exact, odd sizes past one tile and a
 * tall array past 65535 row tiles' grid), the column normalize the op runs
 * (transpose, row normalize, transpose back) against gpuq_cpu_normalize of
 * the transposed rows, and gpuq_cuda_knn with k past GPUQ_KNN_K_MAX (the
 * sort path: k = 1025, 2000, n, and n past one block of y) on small
 * integers with NaN rows, equal to gpuq_cpu_knn exactly (indices and
 * distances: nearest first, ties by the lower index, NaN last).
 */
#include <math.h>
#include <stdint.h>

#include "gpu_test.h"
#include "gpuq_kernels.h"

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CK(cudaMalloc(&d, bytes ? bytes : 1));
    if (h)
        CK_UPLOAD(d, h, bytes);
    return d;
}

static void *hmalloc(size_t n)
{
    void *p = malloc(n + 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(transpose_exact)
{
    static const uint64_t sz[][2] = {{1, 1}, {33, 31}, {7, 1000}, {1000, 3}, {2100001, 2}};
    for (int f32 = 0; f32 < 2; f32++) {
        size_t es = f32 ? 4 : 8;
        for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
            uint64_t r = sz[s][0], c = sz[s][1], n = r * c;
            char *h = hmalloc(n * es), *got = hmalloc(n * es);
            for (uint64_t i = 0; i < n; i++) {
                if (f32)
                    ((float *)h)[i] = (float)i;
                else
                    ((double *)h)[i] = (double)i + 0.5;
            }
            void *d_in = dev_copy(h, n * es), *d_out = dev_copy(NULL, n * es);
            ck_assert_int_eq(
                gpuq_cuda_transpose(g_ctx, f32 ? GPUQ_K_F32 : GPUQ_K_F64, d_in, d_out, r, c),
                GPUQ_K_OK);
            CK(cudaStreamSynchronize(g_stream));
            CK(cudaMemcpy(got, d_out, n * es, cudaMemcpyDeviceToHost));
            for (uint64_t i = 0; i < r; i++)
                for (uint64_t j = 0; j < c; j++)
                    ck_assert_msg(memcmp(got + (j * r + i) * es, h + (i * c + j) * es, es) == 0,
                                  "%llux%llu: (%llu, %llu)", (unsigned long long)r,
                                  (unsigned long long)c, (unsigned long long)i,
                                  (unsigned long long)j);
            CK(cudaFree(d_in));
            CK(cudaFree(d_out));
            free(h), free(got);
        }
    }
    void *p = dev_copy(NULL, 64);
    ck_assert_int_eq(gpuq_cuda_transpose(g_ctx, GPUQ_K_F32, p, p, 2, 2), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_transpose(g_ctx, GPUQ_K_F32, p, (char *)p + 32, 0, 2), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_transpose(g_ctx, 9, p, (char *)p + 32, 2, 2), GPUQ_K_E_ARG);
    CK(cudaFree(p));
}
END_TEST

/* Columns of A [R, C] as the op runs them on CUDA, against the CPU's rows
 * of A.T (the kernels' documented tolerance; minmax exact). */
START_TEST(normalize_columns)
{
    const uint64_t R = 1537, C = 45, n = R * C;
    for (int f32 = 0; f32 < 2; f32++) {
        size_t es = f32 ? 4 : 8;
        int dt = f32 ? GPUQ_K_F32 : GPUQ_K_F64;
        for (int method = 0; method < 5; method++) {
            char *a = hmalloc(n * es), *at = hmalloc(n * es), *got = hmalloc(n * es);
            char *ref = hmalloc(n * es);
            for (uint64_t i = 0; i < n; i++) {
                double v = method == 0 ? 0.25 + (double)((i * 37) % 101) / 7.0
                                       : -7.0 + (double)((i * 53) % 211) / 11.0;
                if (f32)
                    ((float *)a)[i] = (float)v;
                else
                    ((double *)a)[i] = v;
            }
            for (uint64_t i = 0; i < R; i++)
                for (uint64_t j = 0; j < C; j++)
                    memcpy(at + (j * R + i) * es, a + (i * C + j) * es, es);
            ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, at, ref, C, R), GPUQ_K_OK);
            void *d_a = dev_copy(a, n * es), *d_out = dev_copy(NULL, n * es);
            void *d_s = dev_copy(NULL, n * es);
            ck_assert_int_eq(gpuq_cuda_transpose(g_ctx, dt, d_a, d_out, R, C), GPUQ_K_OK);
            ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, dt, method, 0, d_out, d_s, C, R),
                             GPUQ_K_OK);
            ck_assert_int_eq(gpuq_cuda_transpose(g_ctx, dt, d_s, d_out, C, R), GPUQ_K_OK);
            CK(cudaStreamSynchronize(g_stream));
            CK(cudaMemcpy(got, d_out, n * es, cudaMemcpyDeviceToHost));
            double worst = 0.0;
            for (uint64_t i = 0; i < R; i++)
                for (uint64_t j = 0; j < C; j++) {
                    size_t gi = i * C + j, ri = j * R + i;
                    double g = f32 ? ((float *)got)[gi] : ((double *)got)[gi];
                    double w = f32 ? ((float *)ref)[ri] : ((double *)ref)[ri];
                    double e = fabs(g - w) / fmax(fabs(w), 1e-3);
                    worst = e > worst ? e : worst;
                }
            ck_assert_msg(worst <= (f32 ? 1e-6 : 1e-14), "method %d %s: %g", method,
                          f32 ? "f32" : "f64", worst);
            CK(cudaFree(d_a));
            CK(cudaFree(d_out));
            CK(cudaFree(d_s));
            free(a), free(at), free(got), free(ref);
        }
    }
}
END_TEST

static void knn_case(int dt, int metric, uint64_t m, uint64_t n, uint64_t d, uint64_t k)
{
    size_t es = dt == GPUQ_K_F32 ? 4 : 8;
    char *x = hmalloc(m * d * es), *y = hmalloc(n * d * es);
    for (uint64_t i = 0; i < m * d; i++) {
        double v = (double)((int)((i * 13) % 5) - 2);
        if (es == 4)
            ((float *)x)[i] = (float)v;
        else
            ((double *)x)[i] = v;
    }
    for (uint64_t i = 0; i < n * d; i++) {
        double v = (i / d) % 331 == 7 ? NAN : (double)((int)((i * 29 + i / 5) % 7) - 3);
        if (es == 4)
            ((float *)y)[i] = (float)v;
        else
            ((double *)y)[i] = v;
    }
    char *rd = hmalloc(m * k * es), *gd = hmalloc(m * k * es);
    int64_t *ri = hmalloc(m * k * 8), *gi = hmalloc(m * k * 8);
    ck_assert_int_eq(gpuq_cpu_knn(dt, metric, 2.0, 0, x, y, m, n, d, k, rd, ri), GPUQ_K_OK);
    uint64_t sb = gpuq_cuda_knn_scratch_bytes(dt, m, n, d, k);
    ck_assert_uint_gt(sb, 0);
    void *d_x = dev_copy(x, m * d * es), *d_y = dev_copy(y, n * d * es);
    void *d_s = dev_copy(NULL, sb), *d_d = dev_copy(NULL, m * k * es),
         *d_i = dev_copy(NULL, m * k * 8);
    ck_assert_int_eq(gpuq_cuda_knn(g_ctx, dt, metric, 2.0, 0, d_x, d_y, m, n, d, k, d_s, d_d, d_i),
                     GPUQ_K_OK);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(gd, d_d, m * k * es, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gi, d_i, m * k * 8, cudaMemcpyDeviceToHost));
    for (uint64_t t = 0; t < m * k; t++) {
        double g = es == 4 ? ((float *)gd)[t] : ((double *)gd)[t];
        double w = es == 4 ? ((float *)rd)[t] : ((double *)rd)[t];
        ck_assert_msg(gi[t] == ri[t] && (g == w || (isnan(g) && isnan(w))),
                      "dt %d metric %d m %llu n %llu k %llu: row %llu place %llu (%g, %lld), "
                      "want (%g, %lld)",
                      dt, metric, (unsigned long long)m, (unsigned long long)n,
                      (unsigned long long)k, (unsigned long long)(t / k),
                      (unsigned long long)(t % k), g, (long long)gi[t], w, (long long)ri[t]);
    }
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
    CK(cudaFree(d_s));
    CK(cudaFree(d_d));
    CK(cudaFree(d_i));
    free(x), free(y), free(rd), free(gd), free(ri), free(gi);
}

START_TEST(knn_big_k)
{
    static const struct {
        uint64_t m, n, d, k;
    } c[] = {{3, 2600, 3, 1025},  {5, 2600, 3, 2000},   {2, 2600, 2, 2600},
             {70, 3000, 4, 1500}, {2, 150000, 3, 1025}, {1, 140001, 2, 70000}};
    const int metrics[] = {GPUQ_K_SQEUCLIDEAN, GPUQ_K_MANHATTAN, GPUQ_K_EUCLIDEAN};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        for (int dt = GPUQ_K_F32; dt <= GPUQ_K_F64; dt++)
            for (int mi = 0; mi < 3; mi++)
                knn_case(dt, metrics[mi], c[i].m, c[i].n, c[i].d, c[i].k);
}
END_TEST

int main(void)
{
    int skip = gpu_test_no_device("test_gpu_shape");
    if (skip >= 0)
        return skip;
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK) {
        fprintf(stderr, "test_gpu_shape: cannot create stream/ctx\n");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("gpu_shape");
    TCase *t = tcase_create("shape");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, transpose_exact);
    tcase_add_test(t, normalize_columns);
    tcase_add_test(t, knn_big_k);
    suite_add_tcase(s, t);
    int failed = gpu_test_run(s);
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaStreamDestroy(g_stream);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
