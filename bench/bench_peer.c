/* SPDX-License-Identifier: Apache-2.0 */
/* bench_peer.c - see bench_peer.h. The CPU path is three calls; the CUDA
 * path mirrors one request of the CUDA backend (copy in, reset the error
 * flag, kernel, copy result and flag back) and then waits for the stream,
 * which is what an in-process caller has to do before it can read a result.
 */
#include "bench_peer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "errors.h"
#include "gpuq_kernels.h"

#ifdef GPUQ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

struct bench_peer {
    bool cuda;
    char name[48];
    char err[256];
#ifdef GPUQ_HAVE_CUDA
    cudaStream_t stream;
    gpuq_cuda_ctx *kctx;
    void *d_a, *d_b, *d_out, *d_s; /* inputs A and B, result, kNN scratch; grown on demand */
    size_t cap_a, cap_b, cap_out, cap_s;
    int *h_flag; /* pinned copy of the kernels' error flag */
#endif
};

static int peer_fail(bench_peer *p, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    return code;
}

/* A GPUQ_K_* code of a CPU reference or kernel call as a GPUQ_E_* code. */
static int peer_kcode(bench_peer *p, int k, const char *what)
{
    switch (k) {
    case GPUQ_K_OK:
        return 0;
    case GPUQ_K_E_ZERO:
        return peer_fail(p, GPUQ_E_ZERO_NORM, "%s: zero norm", what);
    case GPUQ_K_E_RANGE:
        return peer_fail(p, GPUQ_E_OUT_OF_RANGE, "%s: out of range", what);
    case GPUQ_K_E_OVERFLOW:
        return peer_fail(p, GPUQ_E_OUT_OF_RANGE, "%s: overflow", what);
    case GPUQ_K_E_NOMEM:
        return peer_fail(p, GPUQ_E_NO_MEMORY, "%s: out of memory", what);
    case GPUQ_K_E_ARG:
        return peer_fail(p, GPUQ_E_BAD_ARGUMENT, "%s: bad argument", what);
    default:
        return peer_fail(p, GPUQ_E_DEVICE, "%s: kernel error %d", what, k);
    }
}

const char *bench_peer_name(const bench_peer *p)
{
    return p->name;
}

const char *bench_peer_errmsg(const bench_peer *p)
{
    return p->err;
}

#ifdef GPUQ_HAVE_CUDA
#define PEER_CU(p, call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return peer_fail((p), GPUQ_E_DEVICE, "%s: %s", #call, cudaGetErrorString(e_));         \
    } while (0)

static int peer_cuda_open(bench_peer *p, int device)
{
    if (device < 0)
        device = 0;
    PEER_CU(p, cudaSetDevice(device));
    PEER_CU(p, cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
    int k = gpuq_cuda_ctx_create(p->stream, &p->kctx);
    if (k != GPUQ_K_OK)
        return peer_kcode(p, k, "gpuq_cuda_ctx_create");
    PEER_CU(p, cudaHostAlloc((void **)&p->h_flag, sizeof(int), cudaHostAllocDefault));
    snprintf(p->name, sizeof p->name, "cuda kernels, device %d", device);
    return 0;
}

static int peer_grow(bench_peer *p, void **d, size_t *cap, size_t bytes)
{
    if (*cap >= bytes)
        return 0;
    if (*d) {
        PEER_CU(p, cudaFree(*d));
        *d = NULL;
        *cap = 0;
    }
    PEER_CU(p, cudaMalloc(d, bytes));
    *cap = bytes;
    return 0;
}

/* Copy in (A, then B when b_bytes > 0), reset the flag; the caller enqueues
 * the kernel; peer_cuda_finish copies out and waits. */
static int peer_cuda_start(bench_peer *p, const void *a, size_t a_bytes, const void *b,
                           size_t b_bytes, size_t out_bytes)
{
    int rc;
    if ((rc = peer_grow(p, &p->d_a, &p->cap_a, a_bytes ? a_bytes : 1)) ||
        (rc = peer_grow(p, &p->d_b, &p->cap_b, b_bytes ? b_bytes : 1)) ||
        (rc = peer_grow(p, &p->d_out, &p->cap_out, out_bytes)))
        return rc;
    if (a_bytes)
        PEER_CU(p, cudaMemcpyAsync(p->d_a, a, a_bytes, cudaMemcpyHostToDevice, p->stream));
    if (b_bytes)
        PEER_CU(p, cudaMemcpyAsync(p->d_b, b, b_bytes, cudaMemcpyHostToDevice, p->stream));
    PEER_CU(p, cudaMemsetAsync(gpuq_cuda_ctx_errflag(p->kctx), 0, sizeof(int), p->stream));
    return 0;
}

static int peer_cuda_finish(bench_peer *p, int k, const char *what, void *out, size_t out_bytes)
{
    if (k != GPUQ_K_OK)
        return peer_kcode(p, k, what);
    PEER_CU(p, cudaGetLastError());
    PEER_CU(p, cudaMemcpyAsync(out, p->d_out, out_bytes, cudaMemcpyDeviceToHost, p->stream));
    PEER_CU(p, cudaMemcpyAsync(p->h_flag, gpuq_cuda_ctx_errflag(p->kctx), sizeof(int),
                               cudaMemcpyDeviceToHost, p->stream));
    PEER_CU(p, cudaStreamSynchronize(p->stream));
    if (*p->h_flag)
        return peer_kcode(p, -*p->h_flag, what);
    return 0;
}
#endif

int bench_peer_open(bool cuda, int device, bench_peer **out, char *why, size_t cap)
{
    *out = NULL;
    bench_peer *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(why, cap, "out of memory");
        return GPUQ_E_NO_MEMORY;
    }
    p->cuda = cuda;
    snprintf(p->name, sizeof p->name, "cpu reference");
    if (cuda) {
#ifdef GPUQ_HAVE_CUDA
        int rc = peer_cuda_open(p, device);
        if (rc) {
            snprintf(why, cap, "%s", p->err);
            bench_peer_close(p);
            return rc;
        }
#else
        snprintf(why, cap, "gpuq_bench was built without CUDA");
        free(p);
        return GPUQ_E_DEVICE;
#endif
    }
    *out = p;
    return 0;
}

void bench_peer_close(bench_peer *p)
{
    if (!p)
        return;
#ifdef GPUQ_HAVE_CUDA
    /* Teardown errors are reported, not returned: nothing is measured any more. */
    cudaError_t e = cudaSuccess;
    if (p->stream && (e = cudaStreamSynchronize(p->stream)) != cudaSuccess)
        fprintf(stderr, "bench: cudaStreamSynchronize: %s\n", cudaGetErrorString(e));
    if (p->kctx)
        gpuq_cuda_ctx_destroy(p->kctx);
    void *bufs[] = {p->d_a, p->d_b, p->d_out, p->d_s};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i] && (e = cudaFree(bufs[i])) != cudaSuccess)
            fprintf(stderr, "bench: cudaFree: %s\n", cudaGetErrorString(e));
    if (p->h_flag && (e = cudaFreeHost(p->h_flag)) != cudaSuccess)
        fprintf(stderr, "bench: cudaFreeHost: %s\n", cudaGetErrorString(e));
    if (p->stream && (e = cudaStreamDestroy(p->stream)) != cudaSuccess)
        fprintf(stderr, "bench: cudaStreamDestroy: %s\n", cudaGetErrorString(e));
#endif
    free(p);
}

int bench_peer_alloc(bench_peer *p, size_t bytes, void **out)
{
    *out = NULL;
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        PEER_CU(p, cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocDefault));
        return 0;
    }
#endif
    *out = malloc(bytes ? bytes : 1);
    if (!*out)
        return peer_fail(p, GPUQ_E_NO_MEMORY, "malloc(%zu) failed", bytes);
    return 0;
}

void bench_peer_free(bench_peer *p, void *ptr)
{
    if (!ptr)
        return;
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        cudaError_t e = cudaFreeHost(ptr);
        if (e != cudaSuccess)
            fprintf(stderr, "bench: cudaFreeHost: %s\n", cudaGetErrorString(e));
        return;
    }
#endif
    free(ptr);
}

int bench_peer_normalize(bench_peer *p, int method, const float *in, float *out, uint64_t rows,
                         uint64_t cols)
{
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        size_t bytes = rows * cols * sizeof(float);
        int rc = peer_cuda_start(p, in, bytes, NULL, 0, bytes);
        if (rc)
            return rc;
        int k = gpuq_cuda_normalize(p->kctx, GPUQ_K_F32, method, 0, p->d_a, p->d_out, rows, cols);
        return peer_cuda_finish(p, k, "normalize", out, bytes);
    }
#endif
    return peer_kcode(p, gpuq_cpu_normalize(GPUQ_K_F32, method, 0, in, out, rows, cols),
                      "normalize");
}

int bench_peer_haversine_to(bench_peer *p, const double *pts, uint64_t n, double *out)
{
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        int rc = peer_cuda_start(p, pts, n * 2 * sizeof(double), NULL, 0, n * sizeof(double));
        if (rc)
            return rc;
        int k = gpuq_cuda_haversine_to(p->kctx, GPUQ_K_F64, p->d_a, n, BENCH_GRID_TO_LAT,
                                       BENCH_GRID_TO_LON, BENCH_GRID_RADIUS, p->d_out);
        return peer_cuda_finish(p, k, "haversine", out, n * sizeof(double));
    }
#endif
    return peer_kcode(p,
                      gpuq_cpu_haversine_to(GPUQ_K_F64, pts, n, BENCH_GRID_TO_LAT,
                                            BENCH_GRID_TO_LON, BENCH_GRID_RADIUS, out),
                      "haversine");
}

#ifdef GPUQ_HAVE_CUDA
/* GB/s of reps copies of bytes each way between host memory h and the
 * device, timed with events on the peer's stream; the best of reps. */
static int peer_copy_rate(bench_peer *p, void *h, size_t bytes, int reps, double *h2d, double *d2h)
{
    int rc = peer_grow(p, &p->d_out, &p->cap_out, bytes);
    if (rc)
        return rc;
    cudaEvent_t e0, e1;
    PEER_CU(p, cudaEventCreate(&e0));
    if (cudaEventCreate(&e1) != cudaSuccess) {
        (void)cudaEventDestroy(e0);
        return peer_fail(p, GPUQ_E_DEVICE, "cudaEventCreate failed");
    }
    *h2d = *d2h = 0;
    for (int dir = 0; dir < 2 && rc == 0; dir++)
        for (int i = 0; i <= reps && rc == 0; i++) { /* i = 0: warm-up */
            float ms = 0;
            cudaError_t e = cudaEventRecord(e0, p->stream);
            if (e == cudaSuccess)
                e = dir == 0
                        ? cudaMemcpyAsync(p->d_out, h, bytes, cudaMemcpyHostToDevice, p->stream)
                        : cudaMemcpyAsync(h, p->d_out, bytes, cudaMemcpyDeviceToHost, p->stream);
            if (e == cudaSuccess)
                e = cudaEventRecord(e1, p->stream);
            if (e == cudaSuccess)
                e = cudaEventSynchronize(e1);
            if (e == cudaSuccess)
                e = cudaEventElapsedTime(&ms, e0, e1);
            if (e != cudaSuccess) {
                rc = peer_fail(p, GPUQ_E_DEVICE, "copy ceiling: %s", cudaGetErrorString(e));
                break;
            }
            double gbs = ms > 0 ? (double)bytes / (ms * 1e-3) / 1e9 : 0;
            double *best = dir == 0 ? h2d : d2h;
            if (i > 0 && gbs > *best)
                *best = gbs;
        }
    (void)cudaEventDestroy(e0);
    (void)cudaEventDestroy(e1);
    return rc;
}
#endif

#ifdef GPUQ_HAVE_CUDA
/* GB/s each way of bytes up from h and bytes down into h2 at the same
 * time, on two streams (the best of reps): can both copy directions run at
 * full speed together (PCIe is full duplex; the copy engines are separate)? */
static int peer_duplex_rate(bench_peer *p, void *h, void *h2, size_t bytes, int reps, double *gbs)
{
    int rc = peer_grow(p, &p->d_out, &p->cap_out, bytes);
    if (rc || (rc = peer_grow(p, &p->d_b, &p->cap_b, bytes)))
        return rc;
    cudaStream_t s2 = NULL;
    cudaEvent_t ev[3] = {NULL, NULL, NULL};
    cudaError_t e = cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    for (int i = 0; i < 3 && e == cudaSuccess; i++)
        e = cudaEventCreate(&ev[i]);
    *gbs = 0;
    for (int i = 0; i <= reps && e == cudaSuccess; i++) {
        float ms = 0;
        if ((e = cudaEventRecord(ev[0], p->stream)) != cudaSuccess ||
            (e = cudaStreamWaitEvent(s2, ev[0], 0)) != cudaSuccess ||
            (e = cudaMemcpyAsync(p->d_out, h, bytes, cudaMemcpyHostToDevice, p->stream)) !=
                cudaSuccess ||
            (e = cudaMemcpyAsync(h2, p->d_b, bytes, cudaMemcpyDeviceToHost, s2)) != cudaSuccess ||
            (e = cudaEventRecord(ev[1], s2)) != cudaSuccess ||
            (e = cudaStreamWaitEvent(p->stream, ev[1], 0)) != cudaSuccess ||
            (e = cudaEventRecord(ev[2], p->stream)) != cudaSuccess ||
            (e = cudaEventSynchronize(ev[2])) != cudaSuccess ||
            (e = cudaEventElapsedTime(&ms, ev[0], ev[2])) != cudaSuccess)
            break;
        double r = ms > 0 ? (double)bytes / (ms * 1e-3) / 1e9 : 0;
        if (i > 0 && r > *gbs)
            *gbs = r;
    }
    if (e != cudaSuccess)
        rc = peer_fail(p, GPUQ_E_DEVICE, "duplex copy ceiling: %s", cudaGetErrorString(e));
    for (int i = 0; i < 3; i++)
        if (ev[i])
            (void)cudaEventDestroy(ev[i]);
    if (s2)
        (void)cudaStreamDestroy(s2);
    return rc;
}
#endif

int bench_peer_copy_ceiling(bench_peer *p, void *pinned, size_t bytes, int reps,
                            bench_copy_rates *r)
{
    memset(r, 0, sizeof *r);
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        int rc = peer_copy_rate(p, pinned, bytes, reps, &r->pinned_h2d, &r->pinned_d2h);
        if (rc)
            return rc;
        /* The same bytes as gpuqd's arenas hold them: a memfd mapping,
         * registered with cudaHostRegister (4 KiB pages, not one pinned
         * allocation). */
        int fd = memfd_create("gpuq-bench", MFD_CLOEXEC);
        if (fd < 0)
            return peer_fail(p, GPUQ_E_IO, "memfd_create: %s", strerror(errno));
        void *m = MAP_FAILED;
        if (ftruncate(fd, (off_t)bytes) == 0)
            m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            return peer_fail(p, GPUQ_E_IO, "memfd mapping: %s", strerror(errno));
        memset(m, 1, bytes);
        cudaError_t e = cudaHostRegister(m, bytes, cudaHostRegisterPortable);
        if (e != cudaSuccess)
            rc = peer_fail(p, GPUQ_E_DEVICE, "cudaHostRegister: %s", cudaGetErrorString(e));
        else {
            rc = peer_copy_rate(p, m, bytes, reps, &r->memfd_h2d, &r->memfd_d2h);
            if (!rc)
                rc = peer_duplex_rate(p, pinned, m, bytes, reps, &r->duplex);
            if ((e = cudaHostUnregister(m)) != cudaSuccess && !rc)
                rc = peer_fail(p, GPUQ_E_DEVICE, "cudaHostUnregister: %s", cudaGetErrorString(e));
        }
        munmap(m, bytes);
        return rc;
    }
#endif
    (void)pinned;
    (void)bytes;
    (void)reps;
    return peer_fail(p, GPUQ_E_DEVICE, "no CUDA peer: no copy ceiling");
}

int bench_peer_pairwise(bench_peer *p, const float *x, const float *y, uint64_t m, uint64_t d,
                        float *out)
{
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        size_t in_bytes = m * d * sizeof(float), out_bytes = m * m * sizeof(float);
        int rc = peer_cuda_start(p, x, in_bytes, y, in_bytes, out_bytes);
        if (rc)
            return rc;
        int k = gpuq_cuda_pairwise(p->kctx, GPUQ_K_F32, GPUQ_K_EUCLIDEAN, 2.0, 0, p->d_a, p->d_b, m,
                                   m, d, p->d_out);
        return peer_cuda_finish(p, k, "pairwise", out, out_bytes);
    }
#endif
    return peer_kcode(
        p, gpuq_cpu_pairwise(GPUQ_K_F32, GPUQ_K_EUCLIDEAN, 2.0, 0, x, y, m, m, d, out), "pairwise");
}

int bench_peer_knn(bench_peer *p, const float *x, uint64_t m, const float *y, uint64_t n,
                   uint64_t d, uint64_t k, float *dist, int64_t *idx)
{
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        /* distances then (256-aligned) indices in d_out, as the daemon's two outputs */
        size_t dbytes = m * k * sizeof(float), ioff = (dbytes + 255) & ~(size_t)255;
        size_t ibytes = m * k * sizeof(int64_t);
        size_t sbytes = (size_t)gpuq_cuda_knn_scratch_bytes(GPUQ_K_F32, m, n, d, k);
        int rc =
            peer_cuda_start(p, x, m * d * sizeof(float), y, n * d * sizeof(float), ioff + ibytes);
        if (rc || (rc = peer_grow(p, &p->d_s, &p->cap_s, sbytes ? sbytes : 1)))
            return rc;
        int kc = gpuq_cuda_knn(p->kctx, GPUQ_K_F32, GPUQ_K_EUCLIDEAN, 2.0, 0, p->d_a, p->d_b, m, n,
                               d, k, p->d_s, p->d_out, (int64_t *)((char *)p->d_out + ioff));
        if (kc == GPUQ_K_OK)
            PEER_CU(p, cudaMemcpyAsync(idx, (char *)p->d_out + ioff, ibytes, cudaMemcpyDeviceToHost,
                                       p->stream));
        return peer_cuda_finish(p, kc, "knn", dist, dbytes);
    }
#endif
    return peer_kcode(
        p, gpuq_cpu_knn(GPUQ_K_F32, GPUQ_K_EUCLIDEAN, 2.0, 0, x, y, m, n, d, k, dist, idx), "knn");
}

int bench_peer_grid(bench_peer *p, uint64_t nlat, uint64_t nlon, double *out)
{
#ifdef GPUQ_HAVE_CUDA
    if (p->cuda) {
        size_t out_bytes = nlat * nlon * sizeof(double);
        int rc = peer_cuda_start(p, NULL, 0, NULL, 0, out_bytes);
        if (rc)
            return rc;
        int k = gpuq_cuda_grid(p->kctx, GPUQ_K_F64, BENCH_GRID_LAT0, BENCH_GRID_LAT1, nlat,
                               BENCH_GRID_LON0, BENCH_GRID_LON1, nlon, BENCH_GRID_TO_LAT,
                               BENCH_GRID_TO_LON, BENCH_GRID_RADIUS, p->d_out);
        return peer_cuda_finish(p, k, "grid", out, out_bytes);
    }
#endif
    return peer_kcode(p,
                      gpuq_cpu_grid(GPUQ_K_F64, BENCH_GRID_LAT0, BENCH_GRID_LAT1, nlat,
                                    BENCH_GRID_LON0, BENCH_GRID_LON1, nlon, BENCH_GRID_TO_LAT,
                                    BENCH_GRID_TO_LON, BENCH_GRID_RADIUS, out),
                      "grid");
}
