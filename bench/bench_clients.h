/* SPDX-License-Identifier: Apache-2.0 */
/* bench_clients.h - many clients: client processes, each its own connection, by socket (throughput)
 * and from their own arenas (the shm ceiling). */
#ifndef GPUQ_BENCH_CLIENTS_H
#define GPUQ_BENCH_CLIENTS_H

#include "bench_harness.h"
#include "bench_job.h"

/* nclients processes, each its own connection with DEPTH requests of
 * small in flight, beside one in-process thread back to back. */
void bench_throughput(bench *b, int nclients, int nreq, job *small, int peer_reps);
/* nclients processes with depth flat normalizes of n float32 each in flight
 * from their own arenas: input GB/s beside the copy ceiling. */
void bench_shm_clients(bench *b, int nclients, int depth, uint64_t n, int nreq);

#endif
