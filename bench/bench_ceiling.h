/* SPDX-License-Identifier: Apache-2.0 */
/* bench_ceiling.h - ping and the ceilings: what the socket and the copies allow (a socketpair echo
 * to a forked process, memcpy, the pinned device copies). */
#ifndef GPUQ_BENCH_CEILING_H
#define GPUQ_BENCH_CEILING_H

#include "bench_harness.h"
#include "bench_job.h"

/* The flat normalize by socket beside a socketpair echo of the same bytes
 * to a forked process (what the socket allows). */
void bench_socket_ceiling(bench *b, job *j, int reps);
/* memcpy (CPU) or the pinned host-device copies (CUDA) of bytes. */
void bench_copy_ceiling(bench *b, size_t bytes);
/* Ping round trips beside a 32-byte socketpair echo. */
void bench_ping(bench *b, int reps);

#endif
