/* SPDX-License-Identifier: Apache-2.0 */
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

/* normalize float32 in[rows][cols] row by row with method (GPUQ_K_SUM,
 * GPUQ_K_L2, ...; rows = 1: the whole array): out[rows][cols]. */
int bench_peer_normalize(bench_peer *p, int method, const float *in, float *out, uint64_t rows,
                         uint64_t cols);
/* haversine float64 from pts[n][2] (lat, lon) to the grid rows' point
 * (BENCH_GRID_TO_LAT, BENCH_GRID_TO_LON, radius BENCH_GRID_RADIUS): out[n]. */
int bench_peer_haversine_to(bench_peer *p, const double *pts, uint64_t n, double *out);

/* Copy ceilings in GB/s (the best of the repetitions, CUDA events): from
 * and to a pinned buffer, and from and to a memfd mapping registered with
 * cudaHostRegister as gpuqd registers its arenas; and both directions at
 * once (pinned up, registered down). */
typedef struct bench_copy_rates {
    double pinned_h2d, pinned_d2h, memfd_h2d, memfd_d2h;
    double duplex; /* each way, with an upload and a download at once */
} bench_copy_rates;
/* CUDA peer only (GPUQ_E_DEVICE otherwise); pinned: bytes from
 * bench_peer_alloc. */
int bench_peer_copy_ceiling(bench_peer *p, void *pinned, size_t bytes, int reps,
                            bench_copy_rates *r);
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
