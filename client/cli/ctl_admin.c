/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_admin.c - gpuqctl sessions, metrics, and the admin forms: drain,
 * shutdown, kill-session ID, set-limit NAME VALUE.
 *
 * sessions prints one row per session (or a JSON array with --json);
 * metrics prints the server's Prometheus text as it came (or, with --json,
 * a JSON array of its samples: name, labels, value). Admin forms print one
 * line on success (with --json one object: command, ok, message, and
 * kill-session's session or set-limit's name, old and new); a non-admin
 * gets "gpuqctl: permission_denied: ..." and exit status 1, with nothing
 * on stdout, --json or not.
 */
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_json.h"

static int sessions_table(const uint8_t *doc, size_t len)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    printf("%-6s %-8s %-10s %-16s %-8s %-6s %9s %9s %10s %10s %6s %8s  %-10s %-8s %10s %10s\n",
           "ID", "PID", "USER", "CLIENT", "PRIORITY", "DEVICE", "IN_FLIGHT", "REQUESTS", "BYTES_IN",
           "BYTES_OUT", "ERRORS", "AGE", "CURRENT", "STATE", "CUR_BYTES", "CUR_TIME");
    while (gpuq_mpr_left(&r) > 0) {
        ctl_kv kv[24];
        int n;
        if (ctl_read_map(&r, kv, 24, &n))
            return ctl_fail(GPUQ_E_BAD_HEADER, "malformed sessions document");
        char user[64], bin[32], bout[32], age[32], client[80], cbytes[32], ctime[32];
        ctl_user_name(ctl_kv_num(kv, n, "uid"), user, sizeof user);
        snprintf(client, sizeof client, "%s%s", ctl_kv_str(kv, n, "client"),
                 ctl_kv_num(kv, n, "self") ? "*" : "");
        /* the oldest request in flight: its op, state, input bytes and time so far */
        const char *cur = ctl_kv_str(kv, n, "current_op");
        snprintf(cbytes, sizeof cbytes, "-");
        snprintf(ctime, sizeof ctime, "-");
        if (cur[0]) {
            ctl_fmt_bytes(ctl_kv_num(kv, n, "current_bytes"), cbytes, sizeof cbytes);
            ctl_fmt_us(ctl_kv_num(kv, n, "current_us"), ctime, sizeof ctime);
        }
        printf("%-6.0f %-8.0f %-10s %-16s %-8s %-6.0f %9.0f %9.0f %10s %10s %6.0f %8s  ",
               ctl_kv_num(kv, n, "id"), ctl_kv_num(kv, n, "pid"), user, client,
               ctl_kv_str(kv, n, "priority"), ctl_kv_num(kv, n, "device"),
               ctl_kv_num(kv, n, "in_flight"), ctl_kv_num(kv, n, "requests"),
               ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_in"), bin, sizeof bin),
               ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_out"), bout, sizeof bout),
               ctl_kv_num(kv, n, "errors"),
               ctl_fmt_age(ctl_kv_num(kv, n, "age_s"), age, sizeof age));
        /* µs is two bytes and one column: pad by hand */
        printf("%-10s %-8s %10s ", cur[0] ? cur : "-",
               cur[0] ? ctl_kv_str(kv, n, "current_state") : "-", cbytes);
        int cols = 0;
        for (const unsigned char *p = (const unsigned char *)ctime; *p; p++)
            cols += (*p & 0xc0) != 0x80;
        printf("%*s%s\n", cols < 10 ? 10 - cols : 0, "", ctime);
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
        rc = ctx->json ? ctl_stream_json(doc, len, GPUQ_E_BAD_HEADER, "malformed sessions document")
                       : sessions_table(doc, len);
    free(doc);
    gpuq_close(c);
    return rc;
}

/* One label value of the exposition format: '"' then text with \\, \" and
 * \n escaped, then '"'. Unescaped into out[cap]; *pp moved past it. */
static int prom_label_value(const char **pp, const char *end, char *out, size_t cap, size_t *len)
{
    const char *p = *pp;
    size_t n = 0;
    if (p >= end || *p++ != '"')
        return -1;
    while (p < end && *p != '"') {
        char ch = *p++;
        if (ch == '\\') {
            if (p >= end)
                return -1;
            ch = *p++;
            if (ch == 'n')
                ch = '\n';
            else if (ch != '\\' && ch != '"')
                return -1;
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = ch;
    }
    if (p >= end)
        return -1;
    *pp = p + 1;
    out[n] = '\0';
    *len = n;
    return 0;
}

static bool prom_name_char(char ch, bool first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':' ||
           (!first && ch >= '0' && ch <= '9');
}

/* One sample line (name, {labels}, value, optional timestamp) as a JSON
 * object on f. 0, or -1 when the line is not one. */
static int prom_sample_json(FILE *f, const char *p, const char *end)
{
    const char *name = p;
    while (p < end && prom_name_char(*p, p == name))
        p++;
    if (p == name)
        return -1;
    fputs("{\"name\":", f);
    ctl_json_strn(f, name, (size_t)(p - name));
    fputs(",\"labels\":{", f);
    if (p < end && *p == '{') {
        p++;
        for (int i = 0;; i++) {
            while (p < end && *p == ' ')
                p++;
            if (p < end && *p == '}') {
                p++;
                break;
            }
            const char *ln = p;
            while (p < end && prom_name_char(*p, p == ln))
                p++;
            if (p == ln || p >= end || *p != '=')
                return -1;
            size_t lnl = (size_t)(p - ln);
            p++;
            char val[1024];
            size_t vl;
            if (prom_label_value(&p, end, val, sizeof val, &vl))
                return -1;
            fputs(i ? "," : "", f);
            ctl_json_strn(f, ln, lnl);
            fputc(':', f);
            ctl_json_strn(f, val, vl);
            if (p < end && *p == ',')
                p++;
            else if (p >= end || *p != '}')
                return -1;
        }
    }
    fputs("},\"value\":", f);
    while (p < end && *p == ' ')
        p++;
    const char *v = p;
    while (p < end && *p != ' ')
        p++;
    char num[64];
    if (p == v || (size_t)(p - v) >= sizeof num)
        return -1;
    memcpy(num, v, (size_t)(p - v));
    num[p - v] = '\0';
    char *stop;
    double d = strtod(num, &stop);
    if (*stop)
        return -1;
    if (isfinite(d))
        ctl_json_num(f, d);
    else /* JSON has no infinities or NaN: Prometheus's own spelling, as a string */
        ctl_json_str(f, isnan(d) ? "NaN" : d > 0 ? "+Inf" : "-Inf");
    fputc('}', f);
    return 0;
}

/* The Prometheus text as one JSON array of samples: [{"name", "labels",
 * "value"}], comments (HELP, TYPE) left out; into a buffer first, so a
 * malformed line prints no half array. */
static int metrics_json(const char *text, size_t len)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f)
        return ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
    fputc('[', f);
    int n = 0, line = 0, bad = 0;
    for (const char *p = text, *end = text + len; p < end && !bad;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        line++;
        if (eol > p && *p != '#') {
            fputs(n++ ? "," : "", f);
            bad = prom_sample_json(f, p, eol) ? line : 0;
        }
        p = nl ? nl + 1 : end;
    }
    fputs("]\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
    }
    int rc = 0;
    if (bad)
        rc = ctl_failf(GPUQ_E_PROTOCOL, "malformed metrics text at line %d", bad);
    else
        fwrite(buf, 1, blen, stdout);
    free(buf);
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
    else if (ctx->json)
        rc = metrics_json(text, len);
    else
        fwrite(text, 1, len, stdout);
    free(text);
    gpuq_close(c);
    return rc;
}

/* What an admin call did, for its line or its JSON. */
typedef struct admin_res {
    char msg[256];    /* the line printed without --json */
    const char *name; /* set-limit's limit, or NULL */
    uint64_t old_v, new_v;
    bool has_session;
    uint64_t session;
} admin_res;

/* The JSON form of a successful admin call: {"command", "ok", "message"}
 * and what the call adds. */
static void admin_json(const ctl_ctx *ctx, const admin_res *r)
{
    fputs("{\"command\":", stdout);
    ctl_json_str(stdout, ctx->entry ? ctx->entry->name : "");
    fputs(",\"ok\":true,\"message\":", stdout);
    ctl_json_str(stdout, r->msg);
    if (r->has_session)
        printf(",\"session\":%llu", (unsigned long long)r->session);
    if (r->name) {
        fputs(",\"name\":", stdout);
        ctl_json_str(stdout, r->name);
        printf(",\"old\":%llu,\"new\":%llu", (unsigned long long)r->old_v,
               (unsigned long long)r->new_v);
    }
    fputs("}\n", stdout);
}

/* Connect, run one admin call, print its line (or JSON) on success. */
static int admin_run(ctl_ctx *ctx, int argc, const char **argv, const char **pos, int *npos,
                     int (*call)(gpuq_conn *c, const char **pos, admin_res *res))
{
    int rc = ctl_parse_args(ctx, argc, argv, NULL, 0, pos, npos, NULL);
    if (rc)
        return rc;
    gpuq_conn *c;
    if ((rc = ctl_connect(ctx, &c)))
        return rc;
    admin_res res;
    memset(&res, 0, sizeof res);
    int src = call(c, pos, &res);
    if (src == CTL_EXIT_USAGE)
        rc = ctl_usage_error(ctx, "%s", res.msg);
    else if (src)
        rc = ctl_fail(src, gpuq_errmsg(c));
    else if (ctx->json)
        admin_json(ctx, &res);
    else
        printf("%s\n", res.msg);
    gpuq_close(c);
    return rc;
}

static int drain_call(gpuq_conn *c, const char **pos, admin_res *res)
{
    int rc = gpuq_drain(c);
    if (!rc)
        snprintf(res->msg, sizeof res->msg,
                 "gpuqd is draining: no new sessions; it exits once the open ones close");
    return rc;
}

static int shutdown_call(gpuq_conn *c, const char **pos, admin_res *res)
{
    int rc = gpuq_shutdown(c);
    if (!rc)
        snprintf(res->msg, sizeof res->msg,
                 "gpuqd is shutting down: accepted requests are answered, then it exits");
    return rc;
}

static int kill_call(gpuq_conn *c, const char **pos, admin_res *res)
{
    uint64_t id;
    if (ctl_parse_u64(pos[0], &id)) {
        snprintf(res->msg, sizeof res->msg, "bad session id '%s'", pos[0]);
        return CTL_EXIT_USAGE;
    }
    int rc = gpuq_kill_session(c, id);
    if (!rc) {
        snprintf(res->msg, sizeof res->msg, "session %llu closed", (unsigned long long)id);
        res->has_session = true;
        res->session = id;
    }
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

static int set_limit_call(gpuq_conn *c, const char **pos, admin_res *res)
{
    uint64_t v, old = 0;
    if (parse_size(pos[1], &v)) {
        snprintf(res->msg, sizeof res->msg, "bad value '%s' (a number, or with K, M, G)", pos[1]);
        return CTL_EXIT_USAGE;
    }
    int rc = gpuq_set_limit(c, pos[0], v, &old);
    if (!rc) {
        snprintf(res->msg, sizeof res->msg, "%s: %llu -> %llu", pos[0], (unsigned long long)old,
                 (unsigned long long)v);
        res->name = pos[0];
        res->old_v = old;
        res->new_v = v;
    }
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
            "out, errors and age, then its oldest request in flight: op, state (waiting, "
            "queued or running), input bytes and time since its header came (- when none). "
            "With --json, a JSON array of one object per session.",
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
