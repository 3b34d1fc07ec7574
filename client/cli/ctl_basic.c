/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_basic.c - gpuqctl ping and status.
 *
 * ping sends N pings on one session and prints each round trip and a
 * min/avg/max summary (or one JSON object with --json). status prints a
 * summary of the server's status info and a table of its devices, or the
 * whole info as JSON with --json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "mpread.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int ping_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *count_s = NULL;
    const ctl_opt opts[] = {{"--count", &count_s, NULL}, {"-c", &count_s, NULL}};
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 2, pos, &npos, NULL);
    if (rc)
        return rc;
    uint64_t count = 1;
    if (count_s && (ctl_parse_u64(count_s, &count) || count < 1 || count > 1000000))
        return ctl_usage_error(ctx, "bad --count '%s' (1..1000000)", count_s);
    double *rtt = malloc(count * sizeof *rtt);
    if (!rtt)
        return ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
    gpuq_conn *c;
    if ((rc = ctl_connect(ctx, &c)))
        goto out_free;
    double mn = 0, mx = 0, sum = 0;
    for (uint64_t i = 0; i < count; i++) {
        double t0 = now_us();
        int prc = gpuq_ping(c);
        double dt = now_us() - t0;
        if (prc) {
            rc = ctl_fail(prc, gpuq_errmsg(c));
            goto out_close;
        }
        rtt[i] = dt;
        sum += dt;
        mn = i == 0 || dt < mn ? dt : mn;
        mx = i == 0 || dt > mx ? dt : mx;
        if (!ctx->json) {
            char t[32];
            printf("ping %llu: %s\n", (unsigned long long)(i + 1), ctl_fmt_us(dt, t, sizeof t));
        }
    }
    if (ctx->json) {
        printf("{\"count\":%llu,\"rtt_us\":[", (unsigned long long)count);
        for (uint64_t i = 0; i < count; i++)
            printf("%s%.3f", i ? "," : "", rtt[i]);
        printf("],\"min_us\":%.3f,\"avg_us\":%.3f,\"max_us\":%.3f}\n", mn, sum / (double)count, mx);
    } else {
        char lo[32], avg[32], hi[32];
        printf("%llu pings: min %s, avg %s, max %s\n", (unsigned long long)count,
               ctl_fmt_us(mn, lo, sizeof lo), ctl_fmt_us(sum / (double)count, avg, sizeof avg),
               ctl_fmt_us(mx, hi, sizeof hi));
    }
    rc = 0;
out_close:
    gpuq_close(c);
out_free:
    free(rtt);
    return rc;
}

/* "name count  name count" of a map of counters, or "-" when empty. */
static int print_counts(const char *label, const ctl_kv *e)
{
    printf("%-10s", label);
    if (!e || e->type != GPUQ_MP_MAP) {
        printf(" -\n");
        return 0;
    }
    gpuq_mpr r;
    gpuq_mpr_init(&r, e->raw, e->raw_len);
    ctl_kv kv[64];
    int n;
    if (ctl_read_map(&r, kv, 64, &n))
        return -1;
    int shown = 0;
    for (int i = 0; i < n; i++) {
        if (kv[i].num == 0)
            continue;
        printf("%s %s %.0f", shown ? "," : "", kv[i].key, kv[i].num);
        shown++;
    }
    printf("%s\n", shown ? "" : " -");
    return 0;
}

static int print_devices(const ctl_kv *e)
{
    if (!e || e->type != GPUQ_MP_ARRAY)
        return -1;
    gpuq_mpr r;
    gpuq_mpr_init(&r, e->raw, e->raw_len);
    uint32_t nd;
    if (gpuq_mpr_array(&r, &nd))
        return -1;
    printf("\n%-6s %-28s %10s %10s %8s %9s %10s\n", "DEVICE", "NAME", "MEMORY", "IN_USE",
           "SESSIONS", "IN_FLIGHT", "BYTES");
    for (uint32_t i = 0; i < nd; i++) {
        ctl_kv kv[16];
        int n;
        if (ctl_read_map(&r, kv, 16, &n))
            return -1;
        char mem[32], used[32], bytes[32];
        char idx[16];
        double di = ctl_kv_num(kv, n, "index");
        snprintf(idx, sizeof idx, di < 0 ? "-" : "%.0f", di);
        printf("%-6s %-28.28s %10s %10s %8.0f %9.0f %10s\n", idx, ctl_kv_str(kv, n, "name"),
               ctl_fmt_bytes(ctl_kv_num(kv, n, "total_memory"), mem, sizeof mem),
               ctl_fmt_bytes(ctl_kv_num(kv, n, "memory_in_use"), used, sizeof used),
               ctl_kv_num(kv, n, "sessions"), ctl_kv_num(kv, n, "in_flight"),
               ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes"), bytes, sizeof bytes));
    }
    return 0;
}

/* The status info as a short summary and a devices table. */
static int print_status(gpuq_mpr *r)
{
    ctl_kv kv[48];
    int n;
    if (ctl_read_map(r, kv, 48, &n))
        return -1;
    char a[32], b[32], up[32];
    printf("%s (protocol %.0f), pid %.0f, up %s, %s\n", ctl_kv_str(kv, n, "server"),
           ctl_kv_num(kv, n, "version"), ctl_kv_num(kv, n, "pid"),
           ctl_fmt_age(ctl_kv_num(kv, n, "uptime_s"), up, sizeof up), ctl_kv_str(kv, n, "state"));
    printf("%-10s %s\n", "backend", ctl_kv_str(kv, n, "backend"));
    printf("%-10s %.0f open, %.0f since start\n", "sessions", ctl_kv_num(kv, n, "sessions"),
           ctl_kv_num(kv, n, "sessions_total"));
    printf("%-10s %.0f (%.0f queued)\n", "in flight", ctl_kv_num(kv, n, "in_flight"),
           ctl_kv_num(kv, n, "queued"));
    printf("%-10s %.0f, %.0f past their deadline; %.0f stopped running early\n", "cancelled",
           ctl_kv_num(kv, n, "cancelled"), ctl_kv_num(kv, n, "expired"),
           ctl_kv_num(kv, n, "stopped"));
    printf("%-10s %.0f requests in %.0f batches\n", "batched", ctl_kv_num(kv, n, "batched"),
           ctl_kv_num(kv, n, "batches"));
    printf("%-10s %.0f requests in %.0f chunks\n", "pipelined", ctl_kv_num(kv, n, "pipelined"),
           ctl_kv_num(kv, n, "chunks"));
    printf("%-10s %.0f by spin, %.0f by doorbell, %.0f by poll\n", "seen done",
           ctl_kv_num(kv, n, "seen_spin"), ctl_kv_num(kv, n, "seen_doorbell"),
           ctl_kv_num(kv, n, "seen_poll"));
    printf("%-10s %s in use, %s allocated\n", "staging",
           ctl_fmt_bytes(ctl_kv_num(kv, n, "staging_bytes"), a, sizeof a),
           ctl_fmt_bytes(ctl_kv_num(kv, n, "staging_capacity"), b, sizeof b));
    printf("%-10s %s in, %s out\n", "traffic",
           ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_in"), a, sizeof a),
           ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_out"), b, sizeof b));
    if (print_counts("requests", ctl_kv_get(kv, n, "requests")) ||
        print_counts("errors", ctl_kv_get(kv, n, "errors")))
        return -1;
    return print_devices(ctl_kv_get(kv, n, "devices"));
}

static int status_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    gpuq_conn *c;
    int rc = ctl_connect_bare(ctx, argc, argv, &c);
    if (rc)
        return rc;
    const uint8_t *info;
    size_t len;
    int src = gpuq_status_info(c, &info, &len);
    if (src) {
        rc = ctl_fail(src, gpuq_errmsg(c));
        goto out_close;
    }
    gpuq_mpr r;
    gpuq_mpr_init(&r, info, len);
    if (ctx->json) {
        size_t cap = 1u << 20;
        char *buf = malloc(cap);
        if (!buf) {
            rc = ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
            goto out_close;
        }
        src = gpuq_mpr_to_json(&r, buf, cap);
        if (src)
            rc = ctl_fail(src, "cannot render the status info as JSON");
        else
            printf("%s\n", buf);
        free(buf);
    } else if (print_status(&r)) {
        rc = ctl_fail(GPUQ_E_BAD_HEADER, "malformed status info");
    }
out_close:
    gpuq_close(c);
    return rc;
}

static const ctl_optdoc ping_opts[] = {
    {"--count", "-c", "N", "1", "Pings to send on the one session, 1 .. 1000000."},
    {NULL, NULL, NULL, NULL, NULL},
};

const ctl_entry ctl_ping_entry = {
    .name = "ping",
    .usage = "[--count N]",
    .min_args = 0,
    .max_args = 0,
    .exec = ping_exec,
    .help = "Round-trip time to the daemon.",
    .desc = "Connect to gpuqd and send it N pings on one session; print each round trip in "
            "microseconds and the min/avg/max, or with --json one object: count, rtt_us (each "
            "ping), min_us, avg_us, max_us.",
    .opts = ping_opts,
    .example = "gpuqctl ping\ngpuqctl ping --count=10\ngpuqctl --json ping -c 3",
};

const ctl_entry ctl_status_entry = {
    .name = "status",
    .usage = "",
    .min_args = 0,
    .max_args = 0,
    .exec = status_exec,
    .help = "The daemon's version, backend, sessions, traffic and devices.",
    .desc = "Print gpuqd's version and protocol, pid, uptime and state, its backend, the "
            "sessions, requests in flight, staging memory, traffic, request and error counts, "
            "and a table of its devices (memory, sessions, work in flight). With --json, the "
            "whole status document as one JSON object.",
    .opts = NULL,
    .example = "gpuqctl status\ngpuqctl --json status",
};
