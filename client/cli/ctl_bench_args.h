/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_args.h - gpuqctl bench's options, parsed and checked
 * (ctl_bench_args.c), before anything connects or reads a file.
 */
#ifndef GPUQ_CLIENT_CTL_BENCH_ARGS_H
#define GPUQ_CLIENT_CTL_BENCH_ARGS_H

#include "ctl.h"
#include "ctl_bench_report.h"

#define BENCH_MAX_CLIENTS 1024u
#define BENCH_MAX_SIZE (1ull << 31)
#define BENCH_MAX_DIM 65536u

/* argv (bench's arguments) into *a, the defaults where not given. 0, or
 * CTL_EXIT_USAGE (the message printed, naming the option). */
int bench_parse_args(ctl_ctx *ctx, int argc, const char **argv, bench_args *a);

#endif
