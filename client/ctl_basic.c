/* ctl_basic.c - gpuqctl ping and status.
 *
 * ping sends N pings on one session and prints each round trip and a
 * min/avg/max summary (or one JSON object with --json). status prints the
 * server's status info as "key: value" lines (nested maps flattened to
 * "limits.max_header"), or the raw JSON with --json.
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
        if (!ctx->json)
            printf("ping %llu: %.1f us\n", (unsigned long long)(i + 1), dt);
    }
    if (ctx->json) {
        printf("{\"count\":%llu,\"rtt_us\":[", (unsigned long long)count);
        for (uint64_t i = 0; i < count; i++)
            printf("%s%.3f", i ? "," : "", rtt[i]);
        printf("],\"min_us\":%.3f,\"avg_us\":%.3f,\"max_us\":%.3f}\n", mn, sum / (double)count, mx);
    } else {
        printf("%llu pings: min/avg/max = %.1f/%.1f/%.1f us\n", (unsigned long long)count, mn,
               sum / (double)count, mx);
    }
    rc = 0;
out_close:
    gpuq_close(c);
out_free:
    free(rtt);
    return rc;
}

/* Print one value (and, for maps, its members) as "prefix: value" lines. */
static int print_flat(gpuq_mpr *r, const char *prefix, int depth)
{
    if (gpuq_mpr_peek(r) == GPUQ_MP_MAP && depth < 3) {
        uint32_t n;
        if (gpuq_mpr_map(r, &n))
            return -1;
        if (n == 0 && *prefix)
            printf("%s: {}\n", prefix);
        for (uint32_t i = 0; i < n; i++) {
            const char *k;
            uint32_t kl;
            if (gpuq_mpr_str(r, &k, &kl))
                return -1;
            char key[512];
            if (*prefix)
                snprintf(key, sizeof key, "%s.%.*s", prefix, (int)kl, k);
            else
                snprintf(key, sizeof key, "%.*s", (int)kl, k);
            if (print_flat(r, key, depth + 1))
                return -1;
        }
        return 0;
    }
    bool is_str = gpuq_mpr_peek(r) == GPUQ_MP_STR;
    char val[4096];
    if (gpuq_mpr_to_json(r, val, sizeof val))
        return -1;
    size_t len = strlen(val);
    if (is_str && len >= 2) {
        val[len - 1] = '\0';
        printf("%s: %s\n", prefix, val + 1);
    } else {
        printf("%s: %s\n", prefix, val);
    }
    return 0;
}

static int status_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, NULL, 0, pos, &npos, NULL);
    if (rc)
        return rc;
    gpuq_conn *c;
    if ((rc = ctl_connect(ctx, &c)))
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
    } else if (print_flat(&r, "", 0)) {
        rc = ctl_fail(GPUQ_E_BAD_HEADER, "malformed status info");
    }
out_close:
    gpuq_close(c);
    return rc;
}

const ctl_entry ctl_ping_entry = {"ping", "[--count N] [--json]", 0, 0, ping_exec};
const ctl_entry ctl_status_entry = {"status", "[--json]", 0, 0, status_exec};
