/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_report.c - gpuqctl bench's figures and summary
 * (ctl_bench_report.h).
 *
 * Happy path: each group of clients (the measured ones, alone and beside
 * the streamers; the streamers) is summed after its join: successes,
 * errors (the earliest named), req/s over the window, MB/s from the bytes
 * one request moves, and the latency percentiles of every success
 * (ctl_bench_stats.h). Then one summary: text lines, or one JSON object
 * whose keys stay the same from run to run (null where a figure does not
 * apply: "bulk" without --bulk, "alone" without --baseline, a ratio over a
 * figure of 0).
 *
 * Failures: no memory to merge the latencies leaves the percentiles out
 * (NaN, null in JSON), said on stderr.
 */
#include "ctl_bench_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_json.h"

int bench_summarize(const bench_client *cls, unsigned n, const bench_run *run, uint64_t req_bytes,
                    bench_sum *s)
{
    memset(s, 0, sizeof *s);
    int64_t first_ns = 0;
    bool have_first = false;
    bench_samples *sets = malloc((n ? n : 1) * sizeof *sets);
    for (unsigned i = 0; i < n; i++) {
        const bench_client *cl = &cls[i];
        s->ok += cl->lat.count;
        s->errors += cl->errors;
        if (sets)
            sets[i] = cl->lat; /* a shallow copy: the samples stay the client's */
        if (cl->errors && (!have_first || cl->first_ns < first_ns)) {
            snprintf(s->first, sizeof s->first, "%s", cl->first);
            s->first_code = cl->first_code;
            first_ns = cl->first_ns;
            have_first = true;
        }
    }
    int64_t we = atomic_load(&run->we_ns);
    s->duration_s = we > run->ws_ns ? (double)(we - run->ws_ns) / 1e9 : 0;
    s->req_s = s->duration_s > 0 ? (double)s->ok / s->duration_s : 0;
    s->mb_s = s->req_s * (double)req_bytes / 1e6;
    int rc = sets ? bench_percentiles(sets, n, &s->lat) : -1;
    free(sets);
    if (rc) {
        s->lat.p50 = s->lat.p90 = s->lat.p99 = s->lat.p999 = s->lat.max = s->lat.mean = NAN;
        fprintf(stderr, "gpuqctl: bench: no memory to sort the latencies; percentiles left out\n");
    }
    return rc;
}

const char *bench_err_text(int code, const char *msg)
{
    const char *name = gpuq_errname(code);
    size_t nl = strlen(name);
    if (strncmp(msg, name, nl) == 0 && msg[nl] == ':' && msg[nl + 1] == ' ')
        return msg + nl + 2;
    return msg;
}

static const char *prio_name(int p)
{
    const char *s = gpuq_prio_name(p);
    return s ? s : "?";
}

/* now / then, NaN when then is not a positive figure */
static double ratio(double now, double then)
{
    return then > 0 && isfinite(now) ? now / then : NAN;
}

/* ,"key":v for each of a sum's figures named in keys (a NULL-ended list
 * of req_s mb_s p50_us p90_us p99_us p999_us max_us mean_us). */
static void json_figures(FILE *f, const bench_sum *s, const char *const *keys)
{
    const struct {
        const char *key;
        double v;
    } nums[] = {{"req_s", s->req_s},    {"mb_s", s->mb_s},       {"p50_us", s->lat.p50},
                {"p90_us", s->lat.p90}, {"p99_us", s->lat.p99},  {"p999_us", s->lat.p999},
                {"max_us", s->lat.max}, {"mean_us", s->lat.mean}};
    for (const char *const *k = keys; *k; k++) {
        for (size_t j = 0; j < sizeof nums / sizeof nums[0]; j++) {
            if (strcmp(*k, nums[j].key) != 0)
                continue;
            fprintf(f, ",\"%s\":", nums[j].key);
            ctl_json_num(f, round(nums[j].v * 1e3) / 1e3); /* NaN: null */
        }
    }
}

/* "requests":N,"errors":E,"first_error":... (no leading comma) */
static void json_counts(FILE *f, const bench_sum *s)
{
    fprintf(f, "\"requests\":%llu,\"errors\":%llu,\"first_error\":", (unsigned long long)s->ok,
            (unsigned long long)s->errors);
    if (s->first[0])
        ctl_json_str(f, s->first);
    else
        fputs("null", f);
}

static void json_str_or_null(FILE *f, const char *s)
{
    if (s)
        ctl_json_str(f, s);
    else
        fputs("null", f);
}

static const char *const all_figures[] = {"req_s",   "mb_s",   "p50_us",  "p90_us", "p99_us",
                                          "p999_us", "max_us", "mean_us", NULL};

static void json_bulk(FILE *f, const bench_report *r)
{
    const bench_args *a = r->a;
    fprintf(f,
            ",\"bulk\":{\"clients\":%u,\"op\":\"normalize\",\"size\":%llu,\"dtype\":\"f32\","
            "\"depth\":%u,\"transport\":\"%s\",\"priority\":\"%s\",\"priority_granted\":\"%s\",",
            a->bulk, (unsigned long long)a->bulk_size, a->bulk_depth, r->bulk_transport,
            prio_name(a->bulk_priority), prio_name(r->bulk_granted));
    json_counts(f, &r->bulk);
    json_figures(f, &r->bulk, all_figures);
    fputc('}', f);
}

static void json_alone(FILE *f, const bench_report *r)
{
    fputs(",\"alone\":{", f);
    json_counts(f, &r->alone);
    json_figures(f, &r->alone, all_figures);
    fputs(",\"p50_ratio\":", f);
    ctl_json_num(f, round(ratio(r->main.lat.p50, r->alone.lat.p50) * 1e4) / 1e4);
    fputs(",\"p99_ratio\":", f);
    ctl_json_num(f, round(ratio(r->main.lat.p99, r->alone.lat.p99) * 1e4) / 1e4);
    fputc('}', f);
}

void bench_print_json(const ctl_ctx *ctx, const bench_report *r)
{
    FILE *f = stdout;
    const bench_args *a = r->a;
    const bench_sum *s = &r->main;
    bool user = r->plan && r->plan->user;
    uint64_t size = a->ping ? 0 : user ? r->plan->n : a->size;
    fprintf(f, "{\"command\":\"bench\",\"op\":\"%s\",\"size\":%llu,",
            a->ping ? "ping" : bench_op_names[a->op], (unsigned long long)size);
    if (!a->ping && (a->op == BENCH_PAIRWISE || a->op == BENCH_KNN))
        fprintf(f, "\"dim\":%llu,", (unsigned long long)(user ? r->plan->dim : a->dim));
    if (a->ping)
        fputs("\"dtype\":null,", f);
    else
        fprintf(f, "\"dtype\":\"%s\",", gpuq_dtype_name(user ? r->plan->dt : a->dt));
    fputs("\"input\":", f);
    json_str_or_null(f, a->in.input);
    fputs(",\"input_b\":", f);
    json_str_or_null(f, a->in.input_b);
    fprintf(f,
            ",\"concurrency\":%llu,\"clients\":%u,\"depth\":%u,\"transport\":\"%s\","
            "\"priority\":\"%s\",\"priority_granted\":\"%s\",\"deadline_ms\":%llu,"
            "\"backend\":",
            (unsigned long long)a->clients * a->depth, a->clients, a->depth, r->transport,
            prio_name(ctx->priority), prio_name(r->granted), (unsigned long long)ctx->deadline_ms);
    ctl_json_str(f, r->backend);
    fputs(",\"warmup_s\":", f);
    ctl_json_num(f, a->warmup);
    fputs(",\"duration_s\":", f);
    ctl_json_num(f, round(s->duration_s * 1e6) / 1e6);
    fputc(',', f);
    json_counts(f, s);
    json_figures(f, s, all_figures);
    if (a->bulk)
        json_bulk(f, r);
    else
        fputs(",\"bulk\":null", f);
    if (a->baseline)
        json_alone(f, r);
    else
        fputs(",\"alone\":null", f);
    fprintf(f, ",\"interrupted\":%s}\n", r->sig ? "true" : "false");
}

/* The lines that say what ran: op, clients (the line given), transport,
 * priority, deadline, backend. */
static void print_setup(const ctl_ctx *ctx, const bench_report *r, const char *clients)
{
    const bench_args *a = r->a;
    char size[64];
    if (a->op == BENCH_PAIRWISE || a->op == BENCH_KNN)
        snprintf(size, sizeof size, "%llu x %llu", (unsigned long long)a->size,
                 (unsigned long long)a->dim);
    else if (a->op == BENCH_GRID)
        snprintf(size, sizeof size, "%llu x %llu", (unsigned long long)a->size,
                 (unsigned long long)a->size);
    else
        snprintf(size, sizeof size, "%llu", (unsigned long long)a->size);
    if (a->ping) {
        printf("%-11s ping (gpuq_ping round trips)\n", "op");
    } else if (r->plan && r->plan->user) {
        char what[1024];
        bench_input_describe(r->plan, &a->in, what, sizeof what);
        printf("%-11s %s, %s\n", "op", bench_op_names[a->op], what);
    } else {
        printf("%-11s %s, size %s, %s\n", "op", bench_op_names[a->op], size,
               gpuq_dtype_name(a->dt));
    }
    printf("%-11s %s\n", "clients", clients);
    printf("%-11s %s\n", "transport", r->transport);
    printf("%-11s %s (asked %s)\n", "priority", prio_name(r->granted), prio_name(ctx->priority));
    if (ctx->deadline_ms)
        printf("%-11s %llu ms a request\n", "deadline", (unsigned long long)ctx->deadline_ms);
    printf("%-11s %s\n", "backend", r->backend);
}

/* "after 500 ms of warm-up" (each: " each"), or "no warm-up". */
static const char *warmup_text(double warmup_s, const char *each, char *buf, size_t cap)
{
    char t[32];
    if (warmup_s > 0)
        snprintf(buf, cap, "after %s of warm-up%s", ctl_fmt_us(warmup_s * 1e6, t, sizeof t), each);
    else
        snprintf(buf, cap, "no warm-up");
    return buf;
}

void bench_print_text(const ctl_ctx *ctx, const bench_report *r)
{
    const bench_args *a = r->a;
    const bench_sum *s = &r->main;
    char cl[64], d1[32], d2[64];
    snprintf(cl, sizeof cl, "%u x depth %u", a->clients, a->depth);
    print_setup(ctx, r, cl);
    printf("%-11s %s (%s)\n", "duration", ctl_fmt_us(s->duration_s * 1e6, d1, sizeof d1),
           warmup_text(a->warmup, "", d2, sizeof d2));
    printf("%-11s %llu\n", "requests", (unsigned long long)s->ok);
    if (s->first[0])
        printf("%-11s %llu (first: %s)\n", "errors", (unsigned long long)s->errors, s->first);
    else
        printf("%-11s 0\n", "errors");
    char r1[32], r2[32], t1[32], t2[32], t3[32], t4[32], t5[32];
    printf("%-11s %s, %s\n", "throughput", ctl_fmt_rate(s->req_s, "req/s", r1, sizeof r1),
           ctl_fmt_rate(s->mb_s * 1e6, "B/s", r2, sizeof r2));
    if (s->ok)
        printf("%-11s p50 %s, p90 %s, p99 %s, p99.9 %s, max %s\n", "latency",
               ctl_fmt_us(s->lat.p50, t1, sizeof t1), ctl_fmt_us(s->lat.p90, t2, sizeof t2),
               ctl_fmt_us(s->lat.p99, t3, sizeof t3), ctl_fmt_us(s->lat.p999, t4, sizeof t4),
               ctl_fmt_us(s->lat.max, t5, sizeof t5));
    else
        printf("%-11s - (no request completed in the measured time)\n", "latency");
    if (a->bulk) {
        const bench_sum *b = &r->bulk;
        printf("%-11s %u x depth %u, normalize %llu f32, %s, priority %s (asked %s)\n", "streamers",
               a->bulk, a->bulk_depth, (unsigned long long)a->bulk_size, r->bulk_transport,
               prio_name(r->bulk_granted), prio_name(a->bulk_priority));
        printf("%-11s %llu requests, %s, %s, p50 %s, p99 %s, errors %llu%s%s%s\n", "",
               (unsigned long long)b->ok, ctl_fmt_rate(b->req_s, "req/s", r1, sizeof r1),
               ctl_fmt_rate(b->mb_s * 1e6, "B/s", r2, sizeof r2),
               ctl_fmt_us(b->lat.p50, t1, sizeof t1), ctl_fmt_us(b->lat.p99, t2, sizeof t2),
               (unsigned long long)b->errors, b->first[0] ? " (first: " : "", b->first,
               b->first[0] ? ")" : "");
    }
    if (a->baseline) {
        const bench_sum *al = &r->alone;
        printf("%-11s %llu requests, p50 %s, p99 %s, errors %llu; beside the streamers "
               "p50 x%.2f, p99 x%.2f\n",
               "alone", (unsigned long long)al->ok, ctl_fmt_us(al->lat.p50, t1, sizeof t1),
               ctl_fmt_us(al->lat.p99, t2, sizeof t2), (unsigned long long)al->errors,
               ratio(s->lat.p50, al->lat.p50), ratio(s->lat.p99, al->lat.p99));
    }
}

void bench_print_csv_header(void)
{
    fputs("concurrency,clients,depth,requests,req_s,p50_us,p90_us,p99_us,max_us,errors,bytes_s\n",
          stdout);
}

/* A CSV field: the number, or nothing for NaN. */
static void csv_num(double v, const char *sep)
{
    if (isfinite(v))
        printf("%.3f%s", v, sep);
    else
        fputs(sep, stdout);
}

void bench_print_csv_row(const bench_args *a, unsigned clients, const bench_sum *s,
                         uint64_t req_bytes)
{
    printf("%llu,%u,%u,%llu,", (unsigned long long)clients * a->depth, clients, a->depth,
           (unsigned long long)s->ok);
    csv_num(s->req_s, ",");
    csv_num(s->lat.p50, ",");
    csv_num(s->lat.p90, ",");
    csv_num(s->lat.p99, ",");
    csv_num(s->lat.max, ",");
    printf("%llu,", (unsigned long long)s->errors);
    csv_num(s->req_s * (double)req_bytes, "\n");
}

/* s right-aligned in width columns (UTF-8: "\u00b5" is one column). */
static void print_right(const char *s, int width)
{
    int cols = 0;
    for (const char *c = s; *c; c++)
        cols += ((unsigned char)*c & 0xC0) != 0x80;
    printf("%*s%s", width > cols ? width - cols : 0, "", s);
}

void bench_print_levels_head(const ctl_ctx *ctx, const bench_report *r)
{
    const bench_args *a = r->a;
    char cl[96], d1[32], d2[64];
    snprintf(cl, sizeof cl, "%u to %u, step %u, x depth %u (a level each)", a->range_lo,
             a->range_hi, a->range_step, a->depth);
    print_setup(ctx, r, cl);
    printf("%-11s %s a level (%s)\n", "duration", ctl_fmt_us(a->duration * 1e6, d1, sizeof d1),
           warmup_text(a->warmup, " each", d2, sizeof d2));
    printf("\n%11s %7s %5s %9s %13s %11s %9s %9s %9s %9s %6s\n", "concurrency", "clients", "depth",
           "requests", "throughput", "bytes/s", "p50", "p90", "p99", "max", "errors");
}

void bench_print_level(const bench_args *a, unsigned clients, const bench_sum *s)
{
    char buf[32];
    printf("%11llu %7u %5u %9llu ", (unsigned long long)clients * a->depth, clients, a->depth,
           (unsigned long long)s->ok);
    print_right(ctl_fmt_rate(s->req_s, "req/s", buf, sizeof buf), 13);
    putchar(' ');
    print_right(ctl_fmt_rate(s->mb_s * 1e6, "B/s", buf, sizeof buf), 11);
    const double lat[4] = {s->lat.p50, s->lat.p90, s->lat.p99, s->lat.max};
    for (int k = 0; k < 4; k++) {
        putchar(' ');
        print_right(ctl_fmt_us(s->ok ? lat[k] : NAN, buf, sizeof buf), 9);
    }
    printf(" %6llu\n", (unsigned long long)s->errors);
}
