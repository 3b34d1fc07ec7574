/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_args.c - gpuqctl bench's command line into a bench_args
 * (ctl_bench_args.h).
 *
 * Happy path: ctl_parse_args splits the options (those ctl_bench.c's
 * table documents), each value is checked against its range, and the
 * defaults fill the rest. Failures are usage errors naming the option:
 * a value out of range or malformed ("--concurrency-range 3:1:1"), an
 * option without the one it needs (--bulk-size without --bulk, --metric
 * without --input), or two that exclude each other (--input and --size,
 * --csv and --json, --concurrency-range and --clients).
 */
#include "ctl_bench_args.h"

#include <stdio.h>
#include <string.h>

/* "--bulk-size" given without --bulk: a usage error naming it. */
static int bulk_alone(ctl_ctx *ctx, const char *const *vals, const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        if (vals[k])
            return ctl_usage_error(ctx, "%s needs --bulk C (the streamers it describes)", names[k]);
    return 0;
}

/* The streamers' options into a (a->bulk set). */
static int parse_bulk(ctl_ctx *ctx, bench_args *a, const char *size_s, const char *depth_s,
                      const char *tr_s, const char *prio_s)
{
    uint64_t v;
    if (size_s &&
        (ctl_parse_u64(size_s, &a->bulk_size) || a->bulk_size < 1 || a->bulk_size > BENCH_MAX_SIZE))
        return ctl_usage_error(ctx, "bad --bulk-size '%s' (1 .. %llu)", size_s, BENCH_MAX_SIZE);
    if (depth_s && (ctl_parse_u64(depth_s, &v) || v < 1 || v > (1u << 20)))
        return ctl_usage_error(ctx, "bad --bulk-depth '%s' (1 .. gpuqd's max_inflight)", depth_s);
    a->bulk_depth = depth_s ? (unsigned)v : a->bulk_depth;
    if (tr_s && ctl_parse_transport(tr_s, &a->bulk_transport))
        return ctl_usage_error(ctx, "bad --bulk-transport '%s' (socket|shm|auto)", tr_s);
    if (prio_s && ctl_parse_priority(prio_s, &a->bulk_priority))
        return ctl_usage_error(ctx, "bad --bulk-priority '%s' (low|normal|high or -1|0|1)", prio_s);
    return 0;
}

static int parse_op(ctl_ctx *ctx, const char *op_s, bench_args *a)
{
    if (!strcmp(op_s, "ping")) {
        a->ping = true;
        return 0;
    }
    int k = 0;
    while (k < BENCH_NOPS && strcmp(op_s, bench_op_names[k]) != 0)
        k++;
    if (k < BENCH_NOPS) {
        a->op = (bench_op)k;
        return 0;
    }
    const char *names[BENCH_NOPS + 1];
    for (int j = 0; j < BENCH_NOPS; j++)
        names[j] = bench_op_names[j];
    names[BENCH_NOPS] = "ping";
    const char *near = ctl_suggest(op_s, names, BENCH_NOPS + 1);
    if (near)
        return ctl_usage_error(ctx, "bad --op '%s': did you mean %s? (%s)", op_s, near,
                               "normalize|haversine|pairwise|grid|knn|ping");
    return ctl_usage_error(ctx, "bad --op '%s' (normalize|haversine|pairwise|grid|knn|ping)", op_s);
}

/* "LO:HI:STEP" (all three) into a's range; clients is HI. */
static int parse_range(ctl_ctx *ctx, const char *s, const char *clients_s, bench_args *a)
{
    uint64_t v[3];
    char part[3][32];
    const char *p = s;
    int n = 0;
    for (; n < 3; n++) {
        size_t len = strcspn(p, ":");
        if (len >= sizeof part[n] || (n < 2) != (p[len] == ':'))
            break;
        memcpy(part[n], p, len);
        part[n][len] = '\0';
        if (ctl_parse_u64(part[n], &v[n]))
            break;
        p += len + (n < 2);
    }
    if (n < 3 || v[0] < 1 || v[1] < v[0] || v[1] > BENCH_MAX_CLIENTS || v[2] < 1)
        return ctl_usage_error(ctx,
                               "bad --concurrency-range '%s' (START:END:STEP, whole numbers, "
                               "1 <= START <= END <= %u, STEP >= 1)",
                               s, BENCH_MAX_CLIENTS);
    if (clients_s)
        return ctl_usage_error(ctx, "--concurrency-range sets the clients a level: no --clients");
    if (a->bulk || a->baseline)
        return ctl_usage_error(ctx, "--concurrency-range: no --bulk or --baseline (one level "
                                    "at a time, alone)");
    a->range = true;
    a->range_lo = (unsigned)v[0];
    a->range_hi = (unsigned)v[1];
    a->range_step = (unsigned)v[2];
    a->clients = a->range_hi;
    return 0;
}

int bench_parse_args(ctl_ctx *ctx, int argc, const char **argv, bench_args *a)
{
    const char *op_s = NULL, *size_s = NULL, *dim_s = NULL, *dtype_s = NULL, *clients_s = NULL,
               *depth_s = NULL, *dur_s = NULL, *warm_s = NULL, *bulk_s = NULL;
    /* the streamers' options, in bulk_names' order */
    static const char *const bulk_names[] = {"--bulk-size", "--bulk-depth", "--bulk-transport",
                                             "--bulk-priority"};
    const char *bv[4] = {NULL, NULL, NULL, NULL};
    const char *range_s = NULL;
    bench_input_args in = {0};
    bool baseline = false, csv = false;
    const ctl_opt opts[] = {
        {"--input", &in.input, NULL},
        {"--input-b", &in.input_b, NULL},
        {"--metric", &in.metric, NULL},
        {"--k", &in.k, NULL},
        {"--p", &in.p, NULL},
        {"--method", &in.method, NULL},
        {"--on-zero", &in.on_zero, NULL},
        {"--to", &in.to, NULL},
        {"--concurrency-range", &range_s, NULL},
        {"--csv", NULL, &csv},
        {"--op", &op_s, NULL},
        {"--size", &size_s, NULL},
        {"--dim", &dim_s, NULL},
        {"--dtype", &dtype_s, NULL},
        {"--clients", &clients_s, NULL},
        {"--depth", &depth_s, NULL},
        {"--duration", &dur_s, NULL},
        {"--warmup", &warm_s, NULL},
        {"--bulk", &bulk_s, NULL},
        {"--bulk-size", &bv[0], NULL},
        {"--bulk-depth", &bv[1], NULL},
        {"--bulk-transport", &bv[2], NULL},
        {"--bulk-priority", &bv[3], NULL},
        {"--baseline", NULL, &baseline},
    };
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, &npos,
                            NULL);
    if (rc)
        return rc;
    *a = (bench_args){.op = BENCH_NORMALIZE,
                      .size = 1024,
                      .dim = 64,
                      .dt = GPUQ_DT_F32,
                      .clients = 1,
                      .depth = 1,
                      .duration = 5,
                      .warmup = 0.5,
                      .bulk_depth = 2,
                      .bulk_size = 4u << 20, /* 16 MiB of f32 */
                      .bulk_priority = GPUQ_PRIO_LOW,
                      .bulk_transport = GPUQ_TRANSPORT_SOCKET};
    if (op_s && (rc = parse_op(ctx, op_s, a)))
        return rc;
    if (size_s && (ctl_parse_u64(size_s, &a->size) || a->size < 1 || a->size > BENCH_MAX_SIZE))
        return ctl_usage_error(ctx, "bad --size '%s' (1 .. %llu)", size_s, BENCH_MAX_SIZE);
    if (dim_s && (ctl_parse_u64(dim_s, &a->dim) || a->dim < 1 || a->dim > BENCH_MAX_DIM))
        return ctl_usage_error(ctx, "bad --dim '%s' (1 .. %u)", dim_s, BENCH_MAX_DIM);
    if (dtype_s) {
        if (!strcmp(dtype_s, "f32") || !strcmp(dtype_s, "float32"))
            a->dt = GPUQ_DT_F32;
        else if (!strcmp(dtype_s, "f64") || !strcmp(dtype_s, "float64"))
            a->dt = GPUQ_DT_F64;
        else
            return ctl_usage_error(ctx, "bad --dtype '%s' (f32|f64)", dtype_s);
    }
    uint64_t v;
    if (clients_s && (ctl_parse_u64(clients_s, &v) || v < 1 || v > BENCH_MAX_CLIENTS))
        return ctl_usage_error(ctx, "bad --clients '%s' (1 .. %u)", clients_s, BENCH_MAX_CLIENTS);
    a->clients = clients_s ? (unsigned)v : a->clients;
    if (depth_s && (ctl_parse_u64(depth_s, &v) || v < 1 || v > (1u << 20)))
        return ctl_usage_error(ctx, "bad --depth '%s' (1 .. gpuqd's max_inflight)", depth_s);
    a->depth = depth_s ? (unsigned)v : a->depth;
    if (a->ping && a->depth != 1)
        return ctl_usage_error(ctx, "--op ping: each client has one ping in flight (--depth 1)");
    if (dur_s && (ctl_parse_double(dur_s, &a->duration) || !(a->duration > 0) || a->duration > 1e6))
        return ctl_usage_error(ctx, "bad --duration '%s' (seconds, more than 0)", dur_s);
    if (warm_s && (ctl_parse_double(warm_s, &a->warmup) || !(a->warmup >= 0) || a->warmup > 1e6))
        return ctl_usage_error(ctx, "bad --warmup '%s' (seconds, 0 or more)", warm_s);
    if (bulk_s && (ctl_parse_u64(bulk_s, &v) || v > BENCH_MAX_CLIENTS))
        return ctl_usage_error(ctx, "bad --bulk '%s' (0 .. %u)", bulk_s, BENCH_MAX_CLIENTS);
    a->bulk = bulk_s ? (unsigned)v : 0;
    if (!a->bulk && (rc = bulk_alone(ctx, bv, bulk_names, 4)))
        return rc;
    if (a->bulk && (rc = parse_bulk(ctx, a, bv[0], bv[1], bv[2], bv[3])))
        return rc;
    a->baseline = baseline;
    if (baseline && !a->bulk)
        return ctl_usage_error(ctx, "--baseline needs --bulk C (it measures the clients without "
                                    "the streamers first)");
    a->in = in;
    a->csv = csv;
    if ((rc = bench_input_usage(ctx, a->op, a->ping, &in)))
        return rc;
    const char *generated[3][2] = {{"--size", size_s}, {"--dim", dim_s}, {"--dtype", dtype_s}};
    for (int k = 0; in.input && k < 3; k++)
        if (generated[k][1])
            return ctl_usage_error(ctx, "%s: with --input the shapes and dtype are the file's",
                                   generated[k][0]);
    if (csv && ctx->json)
        return ctl_usage_error(ctx, "--csv and --json: one output format");
    return range_s ? parse_range(ctx, range_s, clients_s, a) : 0;
}
