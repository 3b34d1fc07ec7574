/* bench_peer.h - gpuq_bench's in-process peer: the op the daemon is asked
 * for, done in the benchmark's own process with no daemon in between, so
 * every benchmark row can print what the daemon costs against the same work
 * measured in the same run.
 *
 * cpu: the CPU references (gpuq_cpu_*), the code the CPU backend runs.
 * cuda: the same CUDA kernels the CUDA backend runs (gpuq_cuda_*), on one
 * stream of the device the daemon placed the session on, with H2D copy,
 * error-flag reset, kernel, D2H copy of result and flag, and a stream
 * synchronize per call, from pinned host buffers (bench_peer_alloc). Device
 * buffers grow on demand and are kept, like the daemon's pools.
 *
 * Every function returns 0 or a negative GPUQ_E_* code; bench_peer_errmsg
 * says why (the CUDA call and its error, or the kernel's data error).
 */
#ifndef GPUQ_BENCH_PEER_H
#define GPUQ_BENCH_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_peer bench_peer;

/* The grid every grid row computes: lat -90..90, lon -180..180, to (30, 101)
 * on a sphere of 6371.0088 km, float64. */
#define BENCH_GRID_LAT0 -90.0
#define BENCH_GRID_LAT1 90.0
#define BENCH_GRID_LON0 -180.0
#define BENCH_GRID_LON1 180.0
#define BENCH_GRID_TO_LAT 30.0
#define BENCH_GRID_TO_LON 101.0
#define BENCH_GRID_RADIUS 6371.0088

/* cuda: false for the CPU references; true for the CUDA kernels on device
 * (GPUQ_E_DEVICE when built without CUDA or when the device cannot be set
 * up). *out is owned by the caller (bench_peer_close), NULL on failure; a
 * one-line reason goes to why (cap bytes). */
int bench_peer_open(bool cuda, int device, bench_peer **out, char *why, size_t cap);
void bench_peer_close(bench_peer *p);
/* "cpu reference" or "cuda kernels, device N". */
const char *bench_peer_name(const bench_peer *p);
const char *bench_peer_errmsg(const bench_peer *p);

/* Host buffers for inputs and results: pinned (cudaHostAlloc) for the CUDA
 * peer, malloc otherwise. Free with bench_peer_free. Never touch them in a
 * forked child: CUDA marks pinned memory MADV_DONTFORK. */
int bench_peer_alloc(bench_peer *p, size_t bytes, void **out);
void bench_peer_free(bench_peer *p, void *ptr);

/* normalize (sum) of n float32 as one row: out[n]. */
int bench_peer_normalize(bench_peer *p, const float *in, float *out, uint64_t n);
/* pairwise euclidean, x[m][d] against y[m][d], float32: out[m][m]. */
int bench_peer_pairwise(bench_peer *p, const float *x, const float *y, uint64_t m, uint64_t d,
                        float *out);
/* knn euclidean float32, k nearest rows of y[n][d] for each row of x[m][d]:
 * dist[m][k], idx[m][k]. */
int bench_peer_knn(bench_peer *p, const float *x, uint64_t m, const float *y, uint64_t n,
                   uint64_t d, uint64_t k, float *dist, int64_t *idx);
/* The BENCH_GRID_* grid of nlat x nlon points: out[nlat][nlon] float64. */
int bench_peer_grid(bench_peer *p, uint64_t nlat, uint64_t nlon, double *out);

#endif
