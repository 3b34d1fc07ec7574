/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench.c - gpuqctl bench: the users' load generator (as
 * redis-benchmark and Triton's perf_analyzer are).
 *
 * Happy path: the options are checked; the request's inputs are made once
 * (ctl_bench_op.c); C clients connect, each its own session (the first
 * tells gpuqd's max_inflight, which --depth may not pass), and each gets
 * its own output buffers and D requests, in an arena of its connection
 * under shm (so no array byte crosses the socket) or in the heap. Then C
 * threads each keep D requests in flight (gpuq_submit_req / gpuq_wait_req,
 * replies in order), check every reply (ctl_bench_op.h) and time it from
 * submit to its reply read (ctl_bench_client.c). Replies read in the measured window (after
 * --warmup, for --duration) are counted and timed; the main thread draws a
 * live line a second on a terminal (ctl_progress_wanted). At the end of the
 * window the clients stop submitting, read what is outstanding, and the
 * summary is printed: text, or one JSON object with --json.
 *
 * Latency: each client stores its samples (microseconds, doubles), at most
 * BENCH_SAMPLES_TOTAL over all clients (and BENCH_SAMPLES_CLIENT_MAX for
 * one); past its share a client keeps a uniform reservoir, and the merge
 * weights each client's samples by how many they stand for, so the
 * percentiles stay those of all the replies (ctl_bench_stats.h). max is
 * exact. The live line's percentiles come from a histogram of ~5 % buckets.
 *
 * Failures: a reply with an error, or a result that fails its check, is an
 * error (counted in the warm-up and the drain too; exit 1, the first named
 * on stderr); req/s, MB/s and the latencies count successes only; a run in
 * which no request finished inside the window exits 1 as well. A submit
 * that libgpuq refuses (nothing sent: the same request would be refused
 * again) or a connection that breaks ends that client. Usage errors (2) are
 * found before connecting, but for --depth over max_inflight; no gpuqd (3)
 * at connect. SIGINT, SIGTERM or SIGHUP stop the clients; the summary of
 * what was measured is printed and the exit status is 128 + signal (130
 * for Ctrl-C); a second one ends gpuqctl at once.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_bench_client.h"
#include "ctl_json.h"
#include "ctl_progress.h"

#define BENCH_SAMPLES_TOTAL (8u << 20)
#define BENCH_SAMPLES_CLIENT_MAX (4u << 20)
#define BENCH_SAMPLES_CLIENT_MIN (64u << 10)
#define BENCH_MAX_CLIENTS 1024u
#define BENCH_MAX_SIZE (1ull << 31)
#define BENCH_MAX_DIM 65536u

/* ---- signals ---- */

static const int bench_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define BENCH_NSIG (sizeof bench_signals / sizeof bench_signals[0])
static volatile sig_atomic_t bench_sig;

static void on_signal(int sig)
{
    bench_sig = sig; /* the main thread stops the clients; SA_RESETHAND: a second one kills */
}

/* Handle the signals (those not ignored) until signals_off. */
static void signals_on(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* no SA_RESTART: the main thread's sleep ends */
    sigemptyset(&sa.sa_mask);
    bench_sig = 0;
    for (size_t k = 0; k < BENCH_NSIG; k++) {
        if (sigaction(bench_signals[k], NULL, &old[k]) == 0 && old[k].sa_handler != SIG_IGN)
            (void)sigaction(bench_signals[k], &sa, NULL);
    }
}

static void signals_off(const struct sigaction *old)
{
    for (size_t k = 0; k < BENCH_NSIG; k++)
        (void)sigaction(bench_signals[k], &old[k], NULL);
}

/* ---- the live line ---- */

typedef struct bench_live {
    bool on, tty;
    bool shown;
    int64_t last_ns;
    uint64_t last_ok;
    uint64_t last_hist[BENCH_HIST_BUCKETS];
} bench_live;

static double hist_pct(const uint64_t *h, uint64_t total, double q)
{
    uint64_t want = (uint64_t)ceil(q * (double)total), cum = 0;
    for (int b = 0; b < BENCH_HIST_BUCKETS; b++) {
        cum += h[b];
        if (cum >= want && cum > 0)
            return bench_hist_value(b);
    }
    return NAN;
}

/* "bench  3.0 s  148213 req/s  579 MB/s  p50 52 us  p99 80 us  errors 0":
 * the second since the last line. */
static void live_draw(bench_live *lv, bench_client *cls, unsigned n, const bench_run *run,
                      uint64_t req_bytes)
{
    int64_t t = bench_now_ns();
    uint64_t ok = 0, err = 0, h[BENCH_HIST_BUCKETS] = {0};
    for (unsigned i = 0; i < n; i++) {
        ok += atomic_load_explicit(&cls[i].live_ok, memory_order_relaxed);
        err += atomic_load_explicit(&cls[i].live_err, memory_order_relaxed);
        for (int b = 0; b < BENCH_HIST_BUCKETS; b++)
            h[b] += atomic_load_explicit(&cls[i].hist[b], memory_order_relaxed);
    }
    uint64_t d = ok - lv->last_ok;
    for (int b = 0; b < BENCH_HIST_BUCKETS; b++) {
        uint64_t v = h[b];
        h[b] -= lv->last_hist[b];
        lv->last_hist[b] = v;
    }
    double dt = (double)(t - lv->last_ns) / 1e9;
    double rate = dt > 0 ? (double)d / dt : 0;
    char line[256];
    int len = snprintf(line, sizeof line,
                       "%sbench %4.1f s  %.0f req/s  %.0f MB/s  p50 %.0f us  p99 %.0f us  errors "
                       "%llu%s",
                       lv->tty ? "\r" : "", (double)(t - run->ws_ns) / 1e9, rate,
                       rate * (double)req_bytes / 1e6, d ? hist_pct(h, d, 0.50) : 0.0,
                       d ? hist_pct(h, d, 0.99) : 0.0, (unsigned long long)err,
                       lv->tty ? "\033[K" : "\n");
    if (len > 0 && (size_t)len < sizeof line) {
        ctl_write_stderr(line, (size_t)len);
        lv->shown = lv->tty;
    }
    lv->last_ns = t;
    lv->last_ok = ok;
}

static void live_clear(bench_live *lv)
{
    if (lv->shown)
        ctl_write_stderr("\r\033[K", 4);
    lv->shown = false;
}

/* ---- the summary ---- */

typedef struct bench_sum {
    double duration_s;
    uint64_t ok, errors;
    const char *first; /* NULL: none */
    int first_code;
    double req_s, mb_s;
    bench_pct lat;
} bench_sum;

/* cls[n] after the join; -1: no memory for the percentiles (said). */
static int summarize(const bench_client *cls, unsigned n, const bench_run *run, bench_sum *s)
{
    memset(s, 0, sizeof *s);
    int64_t first_ns = 0;
    bench_samples *sets = malloc(n * sizeof *sets);
    for (unsigned i = 0; i < n; i++) {
        const bench_client *cl = &cls[i];
        s->ok += cl->lat.count;
        s->errors += cl->errors;
        if (sets)
            sets[i] = cl->lat; /* a shallow copy: the samples stay the client's */
        if (cl->errors && (!s->first || cl->first_ns < first_ns)) {
            s->first = cl->first;
            s->first_code = cl->first_code;
            first_ns = cl->first_ns;
        }
    }
    int64_t we = atomic_load(&run->we_ns);
    s->duration_s = we > run->ws_ns ? (double)(we - run->ws_ns) / 1e9 : 0;
    s->req_s = s->duration_s > 0 ? (double)s->ok / s->duration_s : 0;
    s->mb_s = s->req_s * (double)bench_plan_bytes(run->plan) / 1e6;
    int rc = sets ? bench_percentiles(sets, n, &s->lat) : -1;
    free(sets);
    if (rc) {
        s->lat.p50 = s->lat.p90 = s->lat.p99 = s->lat.p999 = s->lat.max = s->lat.mean = NAN;
        fprintf(stderr, "gpuqctl: bench: no memory to sort the latencies; percentiles left out\n");
    }
    return rc;
}

typedef struct bench_args {
    bench_op op;
    uint64_t size, dim;
    gpuq_dtype dt;
    unsigned clients, depth;
    double duration, warmup;
} bench_args;

static const char *prio_name(int p)
{
    const char *s = gpuq_prio_name(p);
    return s ? s : "?";
}

static void print_json(const ctl_ctx *ctx, const bench_args *a, const char *transport, int granted,
                       const char *backend, const bench_sum *s, int sig)
{
    FILE *f = stdout;
    fprintf(f, "{\"command\":\"bench\",\"op\":\"%s\",\"size\":%llu,", bench_op_names[a->op],
            (unsigned long long)a->size);
    if (a->op == BENCH_PAIRWISE || a->op == BENCH_KNN)
        fprintf(f, "\"dim\":%llu,", (unsigned long long)a->dim);
    fprintf(f,
            "\"dtype\":\"%s\",\"clients\":%u,\"depth\":%u,\"transport\":\"%s\","
            "\"priority\":\"%s\",\"priority_granted\":\"%s\",\"deadline_ms\":%llu,"
            "\"backend\":",
            gpuq_dtype_name(a->dt), a->clients, a->depth, transport, prio_name(ctx->priority),
            prio_name(granted), (unsigned long long)ctx->deadline_ms);
    ctl_json_str(f, backend);
    fputs(",\"warmup_s\":", f);
    ctl_json_num(f, a->warmup);
    fputs(",\"duration_s\":", f);
    ctl_json_num(f, round(s->duration_s * 1e6) / 1e6);
    fprintf(f, ",\"requests\":%llu,\"errors\":%llu,\"first_error\":", (unsigned long long)s->ok,
            (unsigned long long)s->errors);
    if (s->first)
        ctl_json_str(f, s->first);
    else
        fputs("null", f);
    const struct {
        const char *key;
        double v;
    } nums[] = {{"req_s", s->req_s},    {"mb_s", s->mb_s},       {"p50_us", s->lat.p50},
                {"p90_us", s->lat.p90}, {"p99_us", s->lat.p99},  {"p999_us", s->lat.p999},
                {"max_us", s->lat.max}, {"mean_us", s->lat.mean}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
        fprintf(f, ",\"%s\":", nums[k].key);
        ctl_json_num(f, round(nums[k].v * 1e3) / 1e3); /* NaN: null */
    }
    fprintf(f, ",\"interrupted\":%s}\n", sig ? "true" : "false");
}

static void print_text(const ctl_ctx *ctx, const bench_args *a, const char *transport, int granted,
                       const char *backend, const bench_sum *s)
{
    char size[64];
    if (a->op == BENCH_PAIRWISE || a->op == BENCH_KNN)
        snprintf(size, sizeof size, "%llu x %llu", (unsigned long long)a->size,
                 (unsigned long long)a->dim);
    else if (a->op == BENCH_GRID)
        snprintf(size, sizeof size, "%llu x %llu", (unsigned long long)a->size,
                 (unsigned long long)a->size);
    else
        snprintf(size, sizeof size, "%llu", (unsigned long long)a->size);
    printf("%-11s %s, size %s, %s\n", "op", bench_op_names[a->op], size, gpuq_dtype_name(a->dt));
    printf("%-11s %u x depth %u\n", "clients", a->clients, a->depth);
    printf("%-11s %s\n", "transport", transport);
    printf("%-11s %s (asked %s)\n", "priority", prio_name(granted), prio_name(ctx->priority));
    if (ctx->deadline_ms)
        printf("%-11s %llu ms a request\n", "deadline", (unsigned long long)ctx->deadline_ms);
    printf("%-11s %s\n", "backend", backend);
    printf("%-11s %.3f s (after %.3g s of warm-up)\n", "duration", s->duration_s, a->warmup);
    printf("%-11s %llu\n", "requests", (unsigned long long)s->ok);
    if (s->first)
        printf("%-11s %llu (first: %s)\n", "errors", (unsigned long long)s->errors, s->first);
    else
        printf("%-11s 0\n", "errors");
    printf("%-11s %.0f req/s, %.1f MB/s\n", "throughput", s->req_s, s->mb_s);
    if (s->ok)
        printf("%-11s p50 %.1f, p90 %.1f, p99 %.1f, p99.9 %.1f, max %.1f us\n", "latency",
               s->lat.p50, s->lat.p90, s->lat.p99, s->lat.p999, s->lat.max);
    else
        printf("%-11s - (no request completed in the measured time)\n", "latency");
}

/* ---- the command ---- */

static int parse_args(ctl_ctx *ctx, int argc, const char **argv, bench_args *a)
{
    const char *op_s = NULL, *size_s = NULL, *dim_s = NULL, *dtype_s = NULL, *clients_s = NULL,
               *depth_s = NULL, *dur_s = NULL, *warm_s = NULL;
    const ctl_opt opts[] = {
        {"--op", &op_s, NULL},        {"--size", &size_s, NULL},       {"--dim", &dim_s, NULL},
        {"--dtype", &dtype_s, NULL},  {"--clients", &clients_s, NULL}, {"--depth", &depth_s, NULL},
        {"--duration", &dur_s, NULL}, {"--warmup", &warm_s, NULL},
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
                      .warmup = 0.5};
    if (op_s) {
        int k = 0;
        while (k < BENCH_NOPS && strcmp(op_s, bench_op_names[k]) != 0)
            k++;
        if (k == BENCH_NOPS) {
            const char *near = ctl_suggest(op_s, bench_op_names, BENCH_NOPS);
            if (near)
                return ctl_usage_error(ctx, "bad --op '%s': did you mean %s? (%s)", op_s, near,
                                       "normalize|haversine|pairwise|grid|knn");
            return ctl_usage_error(ctx, "bad --op '%s' (normalize|haversine|pairwise|grid|knn)",
                                   op_s);
        }
        a->op = (bench_op)k;
    }
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
    if (dur_s && (ctl_parse_double(dur_s, &a->duration) || !(a->duration > 0) || a->duration > 1e6))
        return ctl_usage_error(ctx, "bad --duration '%s' (seconds, more than 0)", dur_s);
    if (warm_s && (ctl_parse_double(warm_s, &a->warmup) || !(a->warmup >= 0) || a->warmup > 1e6))
        return ctl_usage_error(ctx, "bad --warmup '%s' (seconds, 0 or more)", warm_s);
    return 0;
}

/* Sleep until t (CLOCK_MONOTONIC ns) or a signal. */
static void sleep_until(int64_t t)
{
    struct timespec ts = {.tv_sec = t / BENCH_NS, .tv_nsec = t % BENCH_NS};
    (void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL); /* EINTR: a signal */
}

/* Start the clients' threads with the signals blocked (the main thread
 * takes them). Returns 0 or an error code (message printed). */
static int start_clients(bench_client *cls, unsigned n, bench_run *run)
{
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t k = 0; k < BENCH_NSIG; k++)
        sigaddset(&block, bench_signals[k]);
    int rc = pthread_sigmask(SIG_BLOCK, &block, &old);
    if (rc != 0)
        return ctl_failf(GPUQ_E_INTERNAL, "pthread_sigmask: %s", strerror(rc));
    int fail = 0;
    for (unsigned i = 0; i < n; i++) {
        atomic_fetch_add(&run->running, 1);
        rc = pthread_create(&cls[i].thread, NULL, bench_client_main, &cls[i]);
        if (rc != 0) {
            atomic_fetch_sub(&run->running, 1);
            fail = ctl_failf(GPUQ_E_NO_MEMORY, "cannot start client thread %u: %s", i + 1,
                             strerror(rc));
            break;
        }
        cls[i].started = true;
    }
    if ((rc = pthread_sigmask(SIG_SETMASK, &old, NULL)) != 0 && !fail)
        fail = ctl_failf(GPUQ_E_INTERNAL, "pthread_sigmask: %s", strerror(rc));
    return fail;
}

/* Run the window: the live line until it ends, every client finished or a
 * signal came; then stop the clients and join them. Returns the signal. */
static int run_window(bench_client *cls, unsigned n, bench_run *run, int64_t we)
{
    bench_live lv = {.on = ctl_progress_wanted(), .tty = isatty(STDERR_FILENO) == 1};
    lv.last_ns = run->ws_ns;
    int64_t next = run->ws_ns + BENCH_NS;
    uint64_t req_bytes = bench_plan_bytes(run->plan);
    while (bench_sig == 0 && atomic_load(&run->running) > 0 && !atomic_load(&run->stop)) {
        int64_t t = bench_now_ns();
        if (t >= we)
            break;
        if (lv.on && t >= next) {
            live_draw(&lv, cls, n, run, req_bytes);
            next += BENCH_NS;
        }
        int64_t wake = t + BENCH_NS / 20; /* notice finished clients soon */
        wake = wake < next ? wake : next;
        sleep_until(wake < we ? wake : we);
    }
    int sig = bench_sig;
    int64_t t = bench_now_ns();
    if (t < we) /* stopped early: the window ends now */
        atomic_store(&run->we_ns, t > run->ws_ns ? t : run->ws_ns);
    atomic_store(&run->stop, true);
    for (unsigned i = 0; i < n; i++) {
        if (!cls[i].started)
            continue;
        int rc = pthread_join(cls[i].thread, NULL);
        if (rc != 0) { /* cannot happen for a joinable thread of ours */
            fprintf(stderr, "gpuqctl: bench: pthread_join: %s\n", strerror(rc));
            abort();
        }
        cls[i].started = false;
    }
    live_clear(&lv);
    return sig;
}

static const char *err_text(int code, const char *msg)
{
    const char *name = gpuq_errname(code);
    size_t nl = strlen(name);
    if (strncmp(msg, name, nl) == 0 && msg[nl] == ':' && msg[nl + 1] == ' ')
        return msg + nl + 2;
    return msg;
}

static int bench_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    bench_args a;
    int rc = parse_args(ctx, argc, argv, &a);
    if (rc)
        return rc;
    bench_plan plan;
    char why[512] = "";
    int prc = bench_plan_make(&plan, a.op, a.dt, a.size, a.dim, why, sizeof why);
    if (prc) {
        bench_plan_free(&plan);
        return ctl_fail(prc, why);
    }
    bench_run run = {.plan = &plan};
    atomic_init(&run.we_ns, 0);
    atomic_init(&run.stop, false);
    atomic_init(&run.running, 0);
    bench_client *cls = calloc(a.clients, sizeof *cls);
    if (!cls) {
        rc = ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
        goto out_plan;
    }
    size_t share = BENCH_SAMPLES_TOTAL / a.clients;
    share = share < BENCH_SAMPLES_CLIENT_MIN   ? BENCH_SAMPLES_CLIENT_MIN
            : share > BENCH_SAMPLES_CLIENT_MAX ? BENCH_SAMPLES_CLIENT_MAX
                                               : share;
    for (unsigned i = 0; i < a.clients; i++) {
        bench_client *cl = &cls[i];
        cl->run = &run;
        cl->depth = a.depth;
        if ((rc = ctl_connect(ctx, &cl->c)))
            goto out_clients;
        uint32_t maxin = gpuq_info(cl->c)->limits.max_inflight;
        if (i == 0 && a.depth > maxin) {
            rc = ctl_usage_error(ctx, "--depth %u is over gpuqd's max_inflight (%u)", a.depth,
                                 maxin);
            goto out_clients;
        }
        int src = bench_client_setup(cl, ctx->transport, share, i + 1, why, sizeof why);
        if (src) {
            rc = ctl_failf(src, "client %u: %s", i + 1, why);
            goto out_clients;
        }
    }
    unsigned nshm = 0;
    for (unsigned i = 0; i < a.clients; i++)
        nshm += cls[i].shm;
    const char *transport = nshm == a.clients ? "shm" : nshm ? "mixed" : "socket";
    const gpuq_server_info *si = gpuq_info(cls[0].c);
    struct sigaction old[BENCH_NSIG];
    signals_on(old);
    int64_t t0 = bench_now_ns();
    run.ws_ns = t0 + (int64_t)(a.warmup * 1e9);
    int64_t we = run.ws_ns + (int64_t)(a.duration * 1e9);
    atomic_store(&run.we_ns, we);
    int sig = 0;
    if ((rc = start_clients(cls, a.clients, &run)))
        atomic_store(&run.stop, true); /* those started stop at once */
    sig = run_window(cls, a.clients, &run, we);
    signals_off(old);
    if (rc)
        goto out_clients;
    bench_sum s;
    (void)summarize(cls, a.clients, &run, &s); /* without memory: no percentiles, said */
    if (ctx->json)
        print_json(ctx, &a, transport, si->priority_granted, si->backend, &s, sig);
    else
        print_text(ctx, &a, transport, si->priority_granted, si->backend, &s);
    if (fflush(stdout) != 0) {
        rc = ctl_fail(GPUQ_E_IO, "stdout: write failed");
    } else if (sig) {
        fprintf(stderr, "gpuqctl: interrupted\n");
        rc = 128 + sig;
    } else if (s.errors) {
        rc = ctl_failf(s.first_code, "%llu request%s failed or gave a wrong result; the first: %s",
                       (unsigned long long)s.errors, s.errors == 1 ? "" : "s",
                       err_text(s.first_code, s.first));
    } else if (s.ok == 0) { /* measured nothing: no figure a script should take */
        rc = ctl_failf(GPUQ_E_TIMEOUT,
                       "no request finished within the %.3g s measured: one takes longer (a "
                       "longer --duration, or a smaller --size)",
                       s.duration_s);
    } else {
        rc = 0;
    }
out_clients:
    for (unsigned i = 0; i < a.clients; i++)
        bench_client_free(&cls[i]);
    free(cls);
out_plan:
    bench_plan_free(&plan);
    return rc;
}

static const ctl_optdoc bench_opts[] = {
    {"--op", NULL, "NAME", "normalize",
     "The op to send: normalize (sum, 1-D), haversine (to 30,101), pairwise (euclidean, rows "
     "against themselves), grid (the whole globe) or knn (euclidean, k 10)."},
    {"--size", NULL, "N", "1024",
     "normalize: N values; haversine: N points; pairwise: N rows of --dim; knn: N rows of --dim, "
     "min(N, 1024) of them the queries; grid: N x N points. 1 .. 2147483648."},
    {"--dim", NULL, "D", "64", "Columns of pairwise's and knn's rows, 1 .. 65536."},
    {"--dtype", NULL, "f32|f64", "f32", "The arrays' element type (float32 or float64)."},
    {"--clients", NULL, "C", "1",
     "Client threads, each with its own connection (session), 1 .. 1024."},
    {"--depth", NULL, "D", "1",
     "Requests each client keeps in flight (pipelined), 1 .. gpuqd's max_inflight."},
    {"--duration", NULL, "SEC", "5", "Seconds measured, after the warm-up (decimals allowed)."},
    {"--warmup", NULL, "SEC", "0.5",
     "Seconds of load before the measurement; their replies are checked, not counted."},
    {NULL, NULL, NULL, NULL, NULL},
};

const ctl_entry ctl_bench_entry = {
    .name = "bench",
    .usage = "[--op NAME] [--size N] [--dim D] [--dtype f32|f64] [--clients C] [--depth D] "
             "[--duration SEC] [--warmup SEC]",
    .min_args = 0,
    .max_args = 0,
    .exec = bench_exec,
    .help = "Load gpuqd with requests and measure req/s, MB/s and latency.",
    .desc = "A load generator: C clients, each its own session, keep D requests of one op in "
            "flight for --duration seconds after --warmup, and check every reply (a failed or "
            "wrong one is an error). On a terminal a live line shows each second. Then it prints "
            "the op, size, dtype, clients, depth, transport, the priority gpuqd granted, its "
            "backend, the duration measured, requests and errors (the first named), req/s, MB/s "
            "(input plus output bytes) and the latency from submit to reply in microseconds: "
            "p50, p90, p99, p99.9 and max. With --json, one object: command, op, size, dtype, "
            "clients, depth, transport, priority, priority_granted, deadline_ms (0: none), "
            "backend, warmup_s, "
            "duration_s, requests, errors, first_error (null when none), req_s, mb_s, p50_us, "
            "p90_us, p99_us, p999_us, max_us, mean_us, interrupted. --priority sets the "
            "sessions' priority; --transport shm puts each client's arrays in a shared-memory "
            "arena of its session (auto does so when they come to 1 MiB); --deadline MS gives "
            "each request a deadline, and one answered deadline_exceeded is an error, named so "
            "(first_error). Exit status 1 when any "
            "request failed, or when none finished within the measured time; Ctrl-C stops, "
            "prints what was measured and exits 130.",
    .opts = bench_opts,
    .example = "gpuqctl bench --duration 0.3\n"
               "gpuqctl bench --op pairwise --size 128 --clients 2 --depth 4 --duration 0.3\n"
               "gpuqctl --json bench --op=haversine --dtype f64 --duration=0.3 --warmup 0\n"
               "gpuqctl bench --deadline 2000 --clients 2 --depth 4 --duration 0.3",
};
