/* ctl_admin.c - gpuqctl sessions, metrics, and the admin forms: drain,
 * shutdown, kill-session ID, set-limit NAME VALUE.
 *
 * sessions prints one row per session (or a JSON array with --json);
 * metrics prints the server's Prometheus text as it came. Admin forms print
 * one line on success; a non-admin gets "gpuqctl: permission_denied: ..."
 * and exit status 1.
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static int sessions_json(const uint8_t *doc, size_t len)
{
    size_t cap = 64 + len * 4;
    char *one = malloc(cap);
    if (!one)
        return ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    printf("[");
    for (int i = 0; gpuq_mpr_left(&r) > 0; i++) {
        if (gpuq_mpr_to_json(&r, one, cap)) {
            free(one);
            printf("]\n");
            return ctl_fail(GPUQ_E_BAD_HEADER, "malformed sessions document");
        }
        printf("%s%s", i ? "," : "", one);
    }
    printf("]\n");
    free(one);
    return 0;
}

static void user_name(double uid, char *buf, size_t cap)
{
    struct passwd *pw = uid >= 0 ? getpwuid((uid_t)uid) : NULL;
    if (pw)
        snprintf(buf, cap, "%s", pw->pw_name);
    else
        snprintf(buf, cap, "%.0f", uid);
}

static int sessions_table(const uint8_t *doc, size_t len)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    printf("%-6s %-8s %-10s %-16s %-8s %-6s %9s %9s %10s %10s %6s %8s\n", "ID", "PID", "USER",
           "CLIENT", "PRIORITY", "DEVICE", "IN_FLIGHT", "REQUESTS", "BYTES_IN", "BYTES_OUT",
           "ERRORS", "AGE");
    while (gpuq_mpr_left(&r) > 0) {
        ctl_kv kv[24];
        int n;
        if (ctl_read_map(&r, kv, 24, &n))
            return ctl_fail(GPUQ_E_BAD_HEADER, "malformed sessions document");
        char user[64], bin[32], bout[32], age[32], client[80];
        user_name(ctl_kv_num(kv, n, "uid"), user, sizeof user);
        snprintf(client, sizeof client, "%s%s", ctl_kv_str(kv, n, "client"),
                 ctl_kv_num(kv, n, "self") ? "*" : "");
        printf("%-6.0f %-8.0f %-10s %-16s %-8s %-6.0f %9.0f %9.0f %10s %10s %6.0f %8s\n",
               ctl_kv_num(kv, n, "id"), ctl_kv_num(kv, n, "pid"), user, client,
               ctl_kv_str(kv, n, "priority"), ctl_kv_num(kv, n, "device"),
               ctl_kv_num(kv, n, "in_flight"), ctl_kv_num(kv, n, "requests"),
               ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_in"), bin, sizeof bin),
               ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_out"), bout, sizeof bout),
               ctl_kv_num(kv, n, "errors"),
               ctl_fmt_age(ctl_kv_num(kv, n, "age_s"), age, sizeof age));
    }
    return 0;
}

static int sessions_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    gpuq_conn *c;
    int rc = ctl_connect_bare(ctx, argc, argv, &c);
    if (rc)
        return rc;
    uint8_t *doc;
    size_t len;
    uint32_t count;
    int src = gpuq_sessions(c, &doc, &len, &count);
    if (src)
        rc = ctl_fail(src, gpuq_errmsg(c));
    else
        rc = ctx->json ? sessions_json(doc, len) : sessions_table(doc, len);
    free(doc);
    gpuq_close(c);
    return rc;
}

static int metrics_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    gpuq_conn *c;
    int rc = ctl_connect_bare(ctx, argc, argv, &c);
    if (rc)
        return rc;
    char *text;
    size_t len;
    int src = gpuq_metrics(c, &text, &len);
    if (src)
        rc = ctl_fail(src, gpuq_errmsg(c));
    else
        fwrite(text, 1, len, stdout);
    free(text);
    gpuq_close(c);
    return rc;
}

/* Connect, run one admin call, print msg on success. */
static int admin_run(ctl_ctx *ctx, int argc, const char **argv, const char **pos, int *npos,
                     int (*call)(gpuq_conn *c, const char **pos, char *out, size_t cap))
{
    int rc = ctl_parse_args(ctx, argc, argv, NULL, 0, pos, npos, NULL);
    if (rc)
        return rc;
    gpuq_conn *c;
    if ((rc = ctl_connect(ctx, &c)))
        return rc;
    char out[256] = "";
    int src = call(c, pos, out, sizeof out);
    if (src == CTL_EXIT_USAGE)
        rc = ctl_usage_error(ctx, "%s", out);
    else if (src)
        rc = ctl_fail(src, gpuq_errmsg(c));
    else
        printf("%s\n", out);
    gpuq_close(c);
    return rc;
}

static int drain_call(gpuq_conn *c, const char **pos, char *out, size_t cap)
{
    int rc = gpuq_drain(c);
    if (!rc)
        snprintf(out, cap, "gpuqd is draining: no new sessions; it exits once the open ones close");
    return rc;
}

static int shutdown_call(gpuq_conn *c, const char **pos, char *out, size_t cap)
{
    int rc = gpuq_shutdown(c);
    if (!rc)
        snprintf(out, cap, "gpuqd is shutting down: accepted requests are answered, then it exits");
    return rc;
}

static int kill_call(gpuq_conn *c, const char **pos, char *out, size_t cap)
{
    uint64_t id;
    if (ctl_parse_u64(pos[0], &id)) {
        snprintf(out, cap, "bad session id '%s'", pos[0]);
        return CTL_EXIT_USAGE;
    }
    int rc = gpuq_kill_session(c, id);
    if (!rc)
        snprintf(out, cap, "session %llu closed", (unsigned long long)id);
    return rc;
}

/* "123", "4K", "16M", "2G" (binary units). */
static int parse_size(const char *s, uint64_t *v)
{
    char num[32];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof num)
        return -1;
    unsigned shift = 0;
    memcpy(num, s, n + 1);
    switch (num[n - 1]) {
    case 'K':
    case 'k':
        shift = 10;
        break;
    case 'M':
    case 'm':
        shift = 20;
        break;
    case 'G':
    case 'g':
        shift = 30;
        break;
    default:
        break;
    }
    if (shift)
        num[n - 1] = '\0';
    uint64_t u;
    if (ctl_parse_u64(num, &u) || (shift && u > (UINT64_MAX >> shift)))
        return -1;
    *v = u << shift;
    return 0;
}

static int set_limit_call(gpuq_conn *c, const char **pos, char *out, size_t cap)
{
    uint64_t v, old = 0;
    if (parse_size(pos[1], &v)) {
        snprintf(out, cap, "bad value '%s' (a number, or with K, M, G)", pos[1]);
        return CTL_EXIT_USAGE;
    }
    int rc = gpuq_set_limit(c, pos[0], v, &old);
    if (!rc)
        snprintf(out, cap, "%s: %llu -> %llu", pos[0], (unsigned long long)old,
                 (unsigned long long)v);
    return rc;
}

static int drain_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *pos[1];
    int npos;
    return admin_run(ctx, argc, argv, pos, &npos, drain_call);
}

static int shutdown_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *pos[1];
    int npos;
    return admin_run(ctx, argc, argv, pos, &npos, shutdown_call);
}

static int kill_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *pos[1];
    int npos;
    return admin_run(ctx, argc, argv, pos, &npos, kill_call);
}

static int set_limit_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *pos[2];
    int npos;
    return admin_run(ctx, argc, argv, pos, &npos, set_limit_call);
}

const ctl_entry ctl_sessions_entry = {
    .name = "sessions",
    .usage = "",
    .min_args = 0,
    .max_args = 0,
    .exec = sessions_exec,
    .help = "The connected sessions, one row each.",
    .desc = "Print one row per session connected to gpuqd: id, pid, user, client name (* marks "
            "this gpuqctl's own), priority, device, requests in flight and done, bytes in and "
            "out, errors and age. With --json, a JSON array of one object per session.",
    .opts = NULL,
    .example = "gpuqctl sessions\ngpuqctl --json sessions",
};

const ctl_entry ctl_metrics_entry = {
    .name = "metrics",
    .usage = "",
    .min_args = 0,
    .max_args = 0,
    .exec = metrics_exec,
    .help = "The daemon's metrics (Prometheus text).",
    .desc = "Print gpuqd's counters and gauges in the Prometheus text exposition format 0.0.4, "
            "as it sent them (for a scraper's textfile collector, say).",
    .opts = NULL,
    .example = "gpuqctl metrics\ngpuqctl metrics | grep gpuq_requests_total",
};

const ctl_entry ctl_drain_entry = {
    .name = "drain",
    .usage = "",
    .min_args = 0,
    .max_args = 0,
    .exec = drain_exec,
    .help = "Refuse new sessions, exit once the open ones close (admin).",
    .desc = "Ask gpuqd to drain: it accepts no new connections, serves the open ones as usual "
            "and exits once the last has closed. Only an admin may: root, or a member of "
            "gpuqd's admin_group; anyone else gets permission_denied (exit status 1).",
    .opts = NULL,
    .example = "sudo gpuqctl drain",
};

const ctl_entry ctl_shutdown_entry = {
    .name = "shutdown",
    .usage = "",
    .min_args = 0,
    .max_args = 0,
    .exec = shutdown_exec,
    .help = "Answer the accepted requests, then exit (admin).",
    .desc = "Ask gpuqd to shut down, as SIGTERM does: requests it has read are answered, "
            "later ones refused (shutting_down), then it exits. "
            "Only an admin may (root, or a member of gpuqd's admin_group).",
    .opts = NULL,
    .example = "sudo gpuqctl shutdown",
};

const ctl_entry ctl_kill_session_entry = {
    .name = "kill-session",
    .usage = "ID",
    .min_args = 1,
    .max_args = 1,
    .exec = kill_exec,
    .help = "Close session ID (admin).",
    .desc = "Close the session with id ID (the ID column of 'gpuqctl sessions'); its work in "
            "flight is dropped. Only an admin may (root, or a member of gpuqd's admin_group).",
    .opts = NULL,
    .example = "gpuqctl sessions\nsudo gpuqctl kill-session 12",
};

const ctl_entry ctl_set_limit_entry = {
    .name = "set-limit",
    .usage = "NAME VALUE",
    .min_args = 2,
    .max_args = 2,
    .exec = set_limit_exec,
    .help = "Change one of the daemon's limits while it runs (admin).",
    .desc = "Set gpuqd's limit NAME to VALUE (a number, or with a K, M or G suffix) until it "
            "restarts or reloads its settings, and print the old and new values. NAME is one "
            "of max_header, max_payload, max_output, max_inflight, session_staging, "
            "total_staging, max_sessions, session_arena and total_arena (gpuqd --help says "
            "what each is). Only an admin may (root, or a member of gpuqd's admin_group).",
    .opts = NULL,
    .example = "sudo gpuqctl set-limit max_inflight 128\nsudo gpuqctl set-limit max_payload 2G",
};
