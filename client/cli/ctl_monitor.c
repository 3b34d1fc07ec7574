/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_monitor.c - gpuqctl monitor and gpuqctl slowlog [--reset]: what
 * gpuqd is doing (PROTOCOL.md 3.6).
 *
 * monitor prints one line per finished request the caller may see, as it
 * comes (stdout flushed per line): time, session, user, client, op, dtype
 * and shapes, priority, transport, queue, kernel and total time (in the
 * unit that reads best), bytes in and out, and the outcome; with --json one
 * JSON object per line (raw numbers). It runs until SIGINT, SIGTERM or
 * SIGHUP (the monitor is cancelled, exit 0), until stdout goes away (a
 * closed pipe: exit 0), or until gpuqd closes the connection (exit 1).
 * slowlog prints the kept slowest requests as a table, slowest first (or a
 * JSON array); --reset (admin) empties it instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "mpread.h"

/* "[1000x8, 500x8]" of the record's shape and shape_b arrays. */
static void rec_shapes(const ctl_kv *kv, int n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    const char *keys[2] = {"shape", "shape_b"};
    for (int a = 0; a < 2; a++) {
        const ctl_kv *e = ctl_kv_get(kv, n, keys[a]);
        if (!e)
            continue;
        gpuq_mpr r;
        gpuq_mpr_init(&r, e->raw, e->raw_len);
        uint32_t dims;
        if (gpuq_mpr_array(&r, &dims) || dims == 0)
            continue;
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s", a ? ", " : "[");
        for (uint32_t k = 0; k < dims; k++) {
            uint64_t v = 0;
            if (gpuq_mpr_uint(&r, &v))
                break;
            len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%llu", k ? "x" : "",
                                    (unsigned long long)v);
        }
    }
    if (len)
        snprintf(buf + len, len < cap ? cap - len : 0, "]");
}

/* Local time of unix microseconds: "2024-05-01 12:00:00.123". */
static void rec_time(double us, char *buf, size_t cap)
{
    time_t t = (time_t)(us / 1e6);
    struct tm tm;
    localtime_r(&t, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf + n, cap - n, ".%03u", (unsigned)((uint64_t)us % 1000000u / 1000u));
}

/* s right-aligned in w columns on stdout (UTF-8: "µs" is one column). */
static void col_right(const char *s, int w)
{
    int cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        cols += (*p & 0xc0) != 0x80;
    for (; cols < w; cols++)
        putchar(' ');
    fputs(s, stdout);
}

/* A time of the record, "-" for a stage a request without arrays never
 * passes (a control op's queue and kernel). */
static const char *rec_us(const ctl_kv *kv, int n, const char *key, char *buf, size_t cap)
{
    if (!strcmp(ctl_kv_str(kv, n, "transport"), "none") && strcmp(key, "total_us") &&
        ctl_kv_num(kv, n, key) == 0)
        return "-";
    return ctl_fmt_us(ctl_kv_num(kv, n, key), buf, cap);
}

#define REC_HEAD_FMT "%-23s %6s %-10s %-14s %-9s %-3s %-22s %-6s %-8s%10s%10s%10s%10s%10s %s\n"
static void rec_header(void)
{
    printf(REC_HEAD_FMT, "TIME", "SESS", "USER", "CLIENT", "OP", "DT", "SHAPES", "PRIO", "VIA",
           "QUEUE", "KERNEL", "TOTAL", "IN", "OUT", "OUTCOME");
}

/* One record as a table line on stdout. Returns 0 or -1 (malformed). */
static int rec_line(gpuq_mpr *r)
{
    ctl_kv kv[32];
    int n;
    if (ctl_read_map(r, kv, 32, &n))
        return -1;
    char when[40], user[64], shapes[96], q[24], k[24], t[24], in[24], out[24], sess[24];
    rec_time(ctl_kv_num(kv, n, "time_us"), when, sizeof when);
    ctl_user_name(ctl_kv_num(kv, n, "uid"), user, sizeof user);
    rec_shapes(kv, n, shapes, sizeof shapes);
    snprintf(sess, sizeof sess, "%.0f", ctl_kv_num(kv, n, "session"));
    const char *outcome = ctl_kv_str(kv, n, "outcome"), *msg = ctl_kv_str(kv, n, "message");
    const char *dt = ctl_kv_str(kv, n, "dtype");
    printf("%-23s %6s %-10s %-14s %-9s %-3s %-22s %-6s %-8s", when, sess, user,
           ctl_kv_str(kv, n, "client"), ctl_kv_str(kv, n, "op"), dt[0] ? dt : "-",
           shapes[0] ? shapes : "-", ctl_kv_str(kv, n, "priority"), ctl_kv_str(kv, n, "transport"));
    const char *cols[5] = {rec_us(kv, n, "queue_us", q, sizeof q),
                           rec_us(kv, n, "kernel_us", k, sizeof k),
                           rec_us(kv, n, "total_us", t, sizeof t),
                           ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_in"), in, sizeof in),
                           ctl_fmt_bytes(ctl_kv_num(kv, n, "bytes_out"), out, sizeof out)};
    for (int i = 0; i < 5; i++)
        col_right(cols[i], 10);
    printf(" %s%s%s", outcome, msg[0] ? ": " : "", msg);
    double dropped = ctl_kv_num(kv, n, "dropped");
    if (dropped > 0)
        printf(" (%.0f earlier records dropped: read too slowly)", dropped);
    putchar('\n');
    return 0;
}

/* ---- monitor ---- */

static int monitor_pipe[2] = {-1, -1};

static void monitor_on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t w = write(monitor_pipe[1], "x", 1);
    (void)w; /* full: a wake-up is pending anyway */
    errno = saved;
}

typedef struct monitor_out {
    bool json;
    bool gone; /* stdout failed (a closed pipe): stop, exit 0 */
    bool bad;  /* a malformed record */
    char *jbuf;
    size_t jcap;
} monitor_out;

static int monitor_record(void *user, const uint8_t *rec, size_t len)
{
    monitor_out *o = user;
    gpuq_mpr r;
    gpuq_mpr_init(&r, rec, len);
    if (o->json) {
        if (gpuq_mpr_to_json(&r, o->jbuf, o->jcap)) {
            o->bad = true;
            return 1;
        }
        fputs(o->jbuf, stdout);
        putchar('\n');
    } else if (rec_line(&r)) {
        o->bad = true;
        return 1;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        o->gone = true;
        return 1;
    }
    return 0;
}

static int monitor_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    gpuq_conn *c;
    int rc = ctl_connect_bare(ctx, argc, argv, &c);
    if (rc)
        return rc;
    monitor_out o = {.json = ctx->json, .jcap = 64u << 10};
    if (!(o.jbuf = malloc(o.jcap)) || pipe(monitor_pipe) < 0) {
        rc = ctl_fail(GPUQ_E_NO_MEMORY, "cannot set up the monitor (out of memory or fds)");
        goto out;
    }
    (void)fcntl(monitor_pipe[1], F_SETFL, O_NONBLOCK);
    (void)fcntl(monitor_pipe[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(monitor_pipe[1], F_SETFD, FD_CLOEXEC);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = monitor_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stdout shows as a write error */
    gpuq_set_interrupt_fd(c, monitor_pipe[0]);
    if (!o.json) {
        rec_header();
        if (fflush(stdout) != 0) {
            rc = 0;
            goto out;
        }
    }
    int mrc = gpuq_monitor(c, monitor_record, &o);
    if (o.bad)
        rc = ctl_fail(GPUQ_E_BAD_HEADER, "malformed monitor record");
    else if (mrc == 0 || mrc == GPUQ_E_INTERRUPTED)
        rc = 0; /* stopped: by a signal, or stdout went away */
    else
        rc = ctl_fail(mrc, gpuq_errmsg(c));
out:
    gpuq_close(c);
    free(o.jbuf);
    for (int i = 0; i < 2; i++)
        if (monitor_pipe[i] >= 0)
            close(monitor_pipe[i]);
    return rc;
}

/* ---- slowlog ---- */

static int slowlog_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    bool reset = false;
    const ctl_opt opts[] = {{"--reset", NULL, &reset}};
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 1, pos, &npos, NULL);
    if (rc)
        return rc;
    gpuq_conn *c;
    if ((rc = ctl_connect(ctx, &c)))
        return rc;
    if (reset) {
        uint64_t cleared = 0;
        int src = gpuq_slowlog_reset(c, &cleared);
        if (src)
            rc = ctl_fail(src, gpuq_errmsg(c));
        else if (ctx->json)
            printf("{\"command\":\"slowlog\",\"reset\":true,\"ok\":true,\"cleared\":%llu}\n",
                   (unsigned long long)cleared);
        else
            printf("slowlog reset: %llu records cleared\n", (unsigned long long)cleared);
        gpuq_close(c);
        return rc;
    }
    uint8_t *doc = NULL;
    size_t len = 0;
    uint32_t count = 0;
    int src = gpuq_slowlog(c, &doc, &len, &count);
    if (src) {
        rc = ctl_fail(src, gpuq_errmsg(c));
    } else if (ctx->json) {
        rc = ctl_stream_json(doc, len, GPUQ_E_BAD_HEADER, "malformed slowlog document");
    } else {
        rec_header();
        gpuq_mpr r;
        gpuq_mpr_init(&r, doc, len);
        while (rc == 0 && gpuq_mpr_left(&r) > 0)
            if (rec_line(&r))
                rc = ctl_fail(GPUQ_E_BAD_HEADER, "malformed slowlog document");
    }
    free(doc);
    gpuq_close(c);
    return rc;
}

static const ctl_optdoc slowlog_opts[] = {
    {"--reset", NULL, NULL, NULL,
     "Empty the slowlog instead of printing it, and print how many records it held (admin)."},
    {NULL, NULL, NULL, NULL, NULL},
};

const ctl_entry ctl_slowlog_entry = {
    .name = "slowlog",
    .usage = "[--reset]",
    .min_args = 0,
    .max_args = 0,
    .exec = slowlog_exec,
    .help = "The slowest recent requests, slowest first.",
    .desc = "Print the requests gpuqd kept as its slowest since it started or the slowlog was "
            "last reset (gpuqd's slowlog_len of them, each of at least slowlog_min_us), "
            "slowest first: when it ended, session, user, client, op, dtype and shapes, "
            "priority, transport, queue, kernel and total time, bytes in and out, and the "
            "outcome. An admin sees every user's requests, anyone else their own. With --json, "
            "a JSON array of the records (times in microseconds, as numbers).",
    .opts = slowlog_opts,
    .example = "gpuqctl slowlog\ngpuqctl --json slowlog\nsudo gpuqctl slowlog --reset",
};

const ctl_entry ctl_monitor_entry = {
    .name = "monitor",
    .usage = "",
    .min_args = 0,
    .max_args = 0,
    .exec = monitor_exec,
    .help = "Stream one line per finished request, live.",
    .desc = "Print one line per request gpuqd finishes, as it finishes (success, error, "
            "cancel, deadline), with the slowlog's columns, until Ctrl-C. An admin sees every "
            "session's requests, anyone else their own user's (never this connection's own). "
            "A monitor that reads too slowly loses records: gpuqd keeps at most monitor_queue "
            "bytes for it and the next line says how many were dropped. With --json, one JSON "
            "object per line.",
    .opts = NULL,
    .example = "gpuqctl monitor | head -20\ngpuqctl --json monitor | jq .total_us\n"
               "gpuqctl monitor | grep zero_norm",
};
