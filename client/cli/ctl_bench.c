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
 * summary is printed (ctl_bench_report.c): text, or one JSON object with
 * --json. --op ping: the measured clients time gpuq_ping round trips
 * instead, one at a time.
 *
 * Streamers (--bulk B, the isolation scenario): B more clients, each its
 * own session with its own priority (--bulk-priority, low by default) and
 * transport (--bulk-transport, socket by default), keep --bulk-depth f32
 * sum normalizes of --bulk-size values in flight through the same warm-up
 * and window as the measured clients, and stop with them; their figures
 * are reported apart. --baseline first runs the measured clients alone
 * (the same warm-up and window, the streamers connected but idle), then
 * again beside the streamers, and reports both and their ratios: the
 * slowdown the streamers cause, from one command and the same sessions.
 *
 * Latency: each client stores its samples (microseconds, doubles), at most
 * BENCH_SAMPLES_TOTAL over all clients (and BENCH_SAMPLES_CLIENT_MAX for
 * one); past its share a client keeps a uniform reservoir, and the merge
 * weights each client's samples by how many they stand for, so the
 * percentiles stay those of all the replies (ctl_bench_stats.h). max is
 * exact. The live line's percentiles come from a histogram of ~5 % buckets.
 *
 * Failures: a reply with an error, or a result that fails its check, is an
 * error (counted in the warm-up and the drain too, the streamers' and the
 * baseline's too; exit 1, the first named on stderr); req/s, MB/s and the latencies count successes
 * only; a run in which no request finished inside the window exits 1 as well. A submit that libgpuq
 * refuses (nothing sent: the same request would be refused again) or a connection that breaks ends
 * that client. Usage errors (2) are found before connecting, but for --depth over max_inflight; no
 * gpuqd (3) at connect. SIGINT, SIGTERM or SIGHUP stop the clients; the summary of what was
 * measured is printed and the exit status is 128 + signal (130 for Ctrl-C); a second one ends
 * gpuqctl at once.
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
#include "ctl_bench_args.h"
#include "ctl_bench_client.h"
#include "ctl_bench_report.h"
#include "ctl_progress.h"

#define BENCH_SAMPLES_TOTAL (8u << 20)
#define BENCH_SAMPLES_CLIENT_MAX (4u << 20)
#define BENCH_SAMPLES_CLIENT_MIN (64u << 10)

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

/* "bench  3.0 s  148k req/s  579 MB/s  p50 52.0 \u00b5s  p99 80.1 \u00b5s  errors 0":
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
    char line[256], r1[32], r2[32], p50[32], p99[32];
    int len = snprintf(line, sizeof line, "%sbench %4.1f s  %s  %s  p50 %s  p99 %s  errors %llu%s",
                       lv->tty ? "\r" : "", (double)(t - run->ws_ns) / 1e9,
                       ctl_fmt_rate(rate, "req/s", r1, sizeof r1),
                       ctl_fmt_rate(rate * (double)req_bytes, "B/s", r2, sizeof r2),
                       ctl_fmt_us(d ? hist_pct(h, d, 0.50) : NAN, p50, sizeof p50),
                       ctl_fmt_us(d ? hist_pct(h, d, 0.99) : NAN, p99, sizeof p99),
                       (unsigned long long)err, lv->tty ? "\033[K" : "\n");
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

/* ---- the command ---- */

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
        if (!cls[i].bulk)
            atomic_fetch_add(&run->running, 1);
        rc = pthread_create(&cls[i].thread, NULL, bench_client_main, &cls[i]);
        if (rc != 0) {
            if (!cls[i].bulk)
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

/* Run the window: the live line (of the nlive measured clients) until it
 * ends, every measured client finished or a signal came; then stop all n
 * clients (the streamers too) and join them. Returns the signal. */
static int run_window(bench_client *cls, unsigned nlive, unsigned n, bench_run *run, int64_t we,
                      uint64_t req_bytes)
{
    bench_live lv = {.on = ctl_progress_wanted(), .tty = isatty(STDERR_FILENO) == 1};
    lv.last_ns = run->ws_ns;
    int64_t next = run->ws_ns + BENCH_NS;
    while (bench_sig == 0 && atomic_load(&run->running) > 0 && !atomic_load(&run->stop)) {
        int64_t t = bench_now_ns();
        if (t >= we)
            break;
        if (lv.on && t >= next) {
            live_draw(&lv, cls, nlive, run, req_bytes);
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

/* One measured run of cls[n] (the first nlive the measured clients): the
 * warm-up, then the window. 0 or an error code (said); *sig the signal
 * that stopped it. */
static int run_phase(bench_client *cls, unsigned nlive, unsigned n, bench_run *run,
                     const bench_args *a, uint64_t req_bytes, int *sig)
{
    int64_t t0 = bench_now_ns();
    run->ws_ns = t0 + (int64_t)(a->warmup * 1e9);
    int64_t we = run->ws_ns + (int64_t)(a->duration * 1e9);
    atomic_store(&run->we_ns, we);
    atomic_store(&run->stop, false);
    atomic_store(&run->running, 0);
    int rc = start_clients(cls, n, run);
    if (rc)
        atomic_store(&run->stop, true); /* those started stop at once */
    *sig = run_window(cls, nlive, n, run, we, req_bytes);
    return rc;
}

/* Connect and set up client i of cls (measured below a->clients, then the
 * streamers). 0 or an exit status (message printed). */
static int client_open(ctl_ctx *ctx, const bench_args *a, bench_client *cls, unsigned i,
                       const bench_plan *plan, const bench_plan *bplan, bench_run *run)
{
    bench_client *cl = &cls[i];
    bool bulk = i >= a->clients;
    ctl_ctx cc = *ctx;
    if (bulk) { /* the streamers' session: their priority and transport, no deadline */
        cc.priority = a->bulk_priority;
        cc.transport = a->bulk_transport;
        cc.deadline_ms = 0;
    }
    size_t share = BENCH_SAMPLES_TOTAL / a->clients;
    share = share < BENCH_SAMPLES_CLIENT_MIN   ? BENCH_SAMPLES_CLIENT_MIN
            : share > BENCH_SAMPLES_CLIENT_MAX ? BENCH_SAMPLES_CLIENT_MAX
                                               : share;
    cl->run = run;
    cl->bulk = bulk;
    cl->plan = bulk ? bplan : a->ping ? NULL : plan;
    cl->depth = bulk ? a->bulk_depth : a->depth;
    int rc = ctl_connect(&cc, &cl->c);
    if (rc)
        return rc;
    uint32_t maxin = gpuq_info(cl->c)->limits.max_inflight;
    if ((i == 0 || i == a->clients) && cl->depth > maxin)
        return ctl_usage_error(ctx, "%s %u is over gpuqd's max_inflight (%u)",
                               bulk ? "--bulk-depth" : "--depth", cl->depth, maxin);
    char why[512] = "";
    int src = bench_client_setup(cl, cc.transport, bulk ? BENCH_SAMPLES_CLIENT_MIN : share, i + 1,
                                 why, sizeof why);
    if (src)
        return ctl_failf(src, "%s %u: %s", bulk ? "streamer" : "client",
                         bulk ? i + 1 - a->clients : i + 1, why);
    return 0;
}

/* "shm", "socket" or "mixed": how the arrays of cls[n] travel. */
static const char *transport_of(const bench_client *cls, unsigned n)
{
    unsigned nshm = 0;
    for (unsigned i = 0; i < n; i++)
        nshm += cls[i].shm;
    return nshm == n ? "shm" : nshm ? "mixed" : "socket";
}

/* The exit status of a finished run (its report printed). */
static int run_status(const bench_report *r)
{
    const bench_sum *sums[3] = {&r->alone, &r->main, &r->bulk}; /* in the order they ran */
    const char *who[3] = {"alone: ", "", "streamers: "};
    uint64_t errors = 0;
    int k0 = -1;
    for (int k = 0; k < 3; k++) {
        errors += sums[k]->errors;
        if (k0 < 0 && sums[k]->errors)
            k0 = k;
    }
    if (fflush(stdout) != 0)
        return ctl_fail(GPUQ_E_IO, "stdout: write failed");
    if (r->sig) {
        fprintf(stderr, "gpuqctl: interrupted\n");
        return 128 + r->sig;
    }
    if (errors)
        return ctl_failf(sums[k0]->first_code,
                         "%llu request%s failed or gave a wrong result; the first: %s%s",
                         (unsigned long long)errors, errors == 1 ? "" : "s", who[k0],
                         bench_err_text(sums[k0]->first_code, sums[k0]->first));
    const bench_sum *none = r->a->baseline && r->alone.ok == 0 ? &r->alone
                            : r->main.ok == 0                  ? &r->main
                                                               : NULL;
    if (none) /* measured nothing: no figure a script should take */
        return ctl_failf(GPUQ_E_TIMEOUT,
                         "no request finished within the %.3g s measured: one takes longer (a "
                         "longer --duration, or a smaller --size)",
                         none->duration_s);
    return 0;
}

/* --concurrency-range: a run of the first L clients a level (L from
 * range_lo by range_step to range_hi), each with its warm-up, its row
 * printed as it ends (CSV, a JSON object, or the table's). Stops at a
 * signal. Returns the exit status, as run_status gives it over every
 * level run (the first error of the earliest level named). */
static int run_levels(const ctl_ctx *ctx, bench_client *cls, bench_run *run, bench_report *rep,
                      uint64_t req_bytes)
{
    const bench_args *a = rep->a;
    if (a->csv)
        bench_print_csv_header();
    else if (!ctx->json)
        bench_print_levels_head(ctx, rep);
    bench_report all = *rep; /* the levels' counts together, for the status */
    all.main.errors = all.main.ok = 0;
    all.main.first[0] = '\0';
    bool none = false;
    int rc = 0;
    for (unsigned L = a->range_lo; L <= a->range_hi && !rc && !rep->sig; L += a->range_step) {
        bench_args al = *a;
        al.clients = L;
        rc = run_phase(cls, L, L, run, &al, req_bytes, &rep->sig);
        (void)bench_summarize(cls, L, run, req_bytes, &rep->main);
        for (unsigned i = 0; i < L; i++)
            bench_client_reset(&cls[i]);
        if (a->csv) {
            bench_print_csv_row(&al, L, &rep->main, req_bytes);
        } else if (ctx->json) {
            bench_report one = *rep;
            one.a = &al;
            bench_print_json(ctx, &one);
        } else {
            bench_print_level(&al, L, &rep->main);
        }
        (void)fflush(stdout); /* a row as it ends: a long range shows as it goes */
        if (rep->main.errors && !all.main.errors) {
            snprintf(all.main.first, sizeof all.main.first, "concurrency %llu: %s",
                     (unsigned long long)L * a->depth,
                     bench_err_text(rep->main.first_code, rep->main.first));
            all.main.first_code = rep->main.first_code;
        }
        all.main.errors += rep->main.errors;
        all.main.ok += rep->main.ok;
        if (!rep->main.ok && !none) { /* the first level that measured nothing */
            none = true;
            all.main.duration_s = rep->main.duration_s;
        }
        if (L > UINT32_MAX - a->range_step)
            break;
    }
    if (rc) /* a thread that would not start (said) */
        return rc;
    all.sig = rep->sig;
    if (none)
        all.main.ok = 0; /* run_status: that level measured nothing */
    return run_status(&all);
}

/* --input: the first request, sent and read before the load starts; its
 * reply is the reference of the others (ctl_bench_input.h). An error (the
 * op refuses the arrays or the keys) is said once. 0 or an exit status. */
static int first_reply(bench_client *cl, bench_plan *plan)
{
    char why[512] = "";
    int rc = bench_client_probe(cl, why, sizeof why);
    if (rc)
        return ctl_failf(rc, "%s (the first request; nothing was measured)",
                         bench_err_text(rc, why));
    if ((rc = bench_input_reference(plan, cl->res, cl->slots[0].out[0], cl->slots[0].out[1], why,
                                    sizeof why)))
        return ctl_failf(rc, "%s (the first reply)", why);
    return 0;
}

static void sum_empty(bench_sum *s)
{
    memset(s, 0, sizeof *s);
    s->lat.p50 = s->lat.p90 = s->lat.p99 = s->lat.p999 = s->lat.max = s->lat.mean = NAN;
}

static int bench_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    bench_args a;
    int rc = bench_parse_args(ctx, argc, argv, &a);
    if (rc)
        return rc;
    bench_plan plan, bplan;
    memset(&plan, 0, sizeof plan);
    memset(&bplan, 0, sizeof bplan);
    char why[512] = "";
    if (a.in.input && (rc = bench_input_plan(ctx, a.op, &a.in, &plan))) /* said */
        goto out_plan;
    int prc = a.ping || a.in.input
                  ? 0
                  : bench_plan_make(&plan, a.op, a.dt, a.size, a.dim, why, sizeof why);
    if (!prc && a.bulk)
        prc =
            bench_plan_make(&bplan, BENCH_NORMALIZE, GPUQ_DT_F32, a.bulk_size, 1, why, sizeof why);
    if (prc) {
        rc = ctl_fail(prc, why);
        goto out_plan;
    }
    bench_run run;
    memset(&run, 0, sizeof run);
    atomic_init(&run.we_ns, 0);
    atomic_init(&run.stop, false);
    atomic_init(&run.running, 0);
    unsigned total = a.clients + a.bulk;
    bench_client *cls = calloc(total, sizeof *cls);
    if (!cls) {
        rc = ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
        goto out_plan;
    }
    for (unsigned i = 0; i < total; i++)
        if ((rc = client_open(ctx, &a, cls, i, &plan, &bplan, &run)))
            goto out_clients;
    if (plan.user && (rc = first_reply(&cls[0], &plan)))
        goto out_clients;
    const gpuq_server_info *si = gpuq_info(cls[0].c);
    bench_report rep = {.a = &a,
                        .plan = a.ping ? NULL : &plan,
                        .transport = a.ping ? "socket" : transport_of(cls, a.clients),
                        .granted = si->priority_granted,
                        .backend = si->backend};
    sum_empty(&rep.main);
    sum_empty(&rep.alone);
    sum_empty(&rep.bulk);
    if (a.bulk) {
        rep.bulk_transport = transport_of(cls + a.clients, a.bulk);
        rep.bulk_granted = gpuq_info(cls[a.clients].c)->priority_granted;
    }
    uint64_t req_bytes = a.ping ? 0 : bench_plan_bytes(&plan);
    struct sigaction old[BENCH_NSIG];
    signals_on(old);
    if (a.range) {
        rc = run_levels(ctx, cls, &run, &rep, req_bytes);
        signals_off(old);
        goto out_clients;
    }
    if (a.baseline) { /* the measured clients alone, then the same beside the streamers */
        rc = run_phase(cls, a.clients, a.clients, &run, &a, req_bytes, &rep.sig);
        (void)bench_summarize(cls, a.clients, &run, req_bytes, &rep.alone);
        for (unsigned i = 0; i < a.clients; i++)
            bench_client_reset(&cls[i]);
    }
    if (!rc && !rep.sig) {
        rc = run_phase(cls, a.clients, total, &run, &a, req_bytes, &rep.sig);
        (void)bench_summarize(cls, a.clients, &run, req_bytes, &rep.main);
        if (a.bulk)
            (void)bench_summarize(cls + a.clients, a.bulk, &run, bench_plan_bytes(&bplan),
                                  &rep.bulk);
    }
    signals_off(old);
    if (rc) /* a thread that would not start (said) */
        goto out_clients;
    if (a.csv) {
        bench_print_csv_header();
        bench_print_csv_row(&a, a.clients, &rep.main, req_bytes);
    } else if (ctx->json) {
        bench_print_json(ctx, &rep);
    } else {
        bench_print_text(ctx, &rep);
    }
    rc = run_status(&rep);
out_clients:
    for (unsigned i = 0; i < total; i++)
        bench_client_free(&cls[i]);
    free(cls);
out_plan:
    bench_plan_free(&plan);
    bench_plan_free(&bplan);
    return rc;
}

static const ctl_optdoc bench_opts[] = {
    {"--op", NULL, "NAME", "normalize",
     "The op to send: normalize (sum, 1-D), haversine (to 30,101), pairwise (euclidean, rows "
     "against themselves), grid (the whole globe) or knn (euclidean, k 10); or ping: round trips "
     "of a ping, one at a time a client (--depth 1; --size, --dim and --dtype unused)."},
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
    {"--bulk", NULL, "B", "0",
     "Streamers: B more clients, each its own session, that keep large f32 sum normalizes in "
     "flight beside the measured clients, through the same warm-up and window (the background "
     "load of an isolation test). Their figures are reported apart; their errors count."},
    {"--bulk-size", NULL, "N", "4194304", "Values of each streamer's normalize (16 MiB of f32)."},
    {"--bulk-depth", NULL, "K", "2", "Normalizes each streamer keeps in flight."},
    {"--bulk-transport", NULL, "socket|shm|auto", "socket",
     "How the streamers' arrays travel: over the socket, or in an arena of their session (shm; "
     "auto as --transport says)."},
    {"--bulk-priority", NULL, "low|normal|high", "low", "The streamers' sessions' priority."},
    {"--baseline", NULL, NULL, NULL,
     "With --bulk: first measure the clients alone (the same warm-up and duration, the "
     "streamers idle), then beside the streamers, and report both and their p50 and p99 "
     "ratios."},
    {"--input", NULL, "X.npy", NULL,
     "Send your own array (an .npy file, or FILE.npz:NAME) instead of generated data: A of "
     "--op normalize, haversine ([n, 2]), "
     "pairwise or knn (X, the queries); its shape and dtype are the file's (any dtype gpuqctl "
     "reads: integers and bool as float64, float16 as float32), so --size, --dim and --dtype "
     "go. Every reply is checked against the first, which is fetched before the load starts: "
     "arrays or keys the op refuses are one error, exit 1."},
    {"--input-b", NULL, "Y.npy", NULL,
     "With --input: B, the same dtype (pairwise's Y, knn's rows searched, haversine's second "
     "points); without it pairwise and knn take X against itself."},
    {"--metric", NULL, "NAME", "euclidean",
     "With --input, pairwise and knn: the metric, as their commands take it."},
    {"--p", NULL, "P", NULL, "With --input and --metric minkowski: the exponent (> 0, or inf)."},
    {"--k", NULL, "K", "min(10, rows of B)", "With --input, knn: neighbours per row of X."},
    {"--method", NULL, "NAME", "sum",
     "With --input, normalize: the method, as its command takes it."},
    {"--on-zero", NULL, "NAME", "error",
     "With --input, normalize, pairwise and knn: what a zero vector gives, as their commands "
     "take it (error, zero, or for pairwise and knn nan)."},
    {"--to", NULL, "LAT,LON", "30,101", "With --input, haversine without --input-b: the point."},
    {"--concurrency-range", NULL, "START:END:STEP", NULL,
     "Measure at each level of concurrency, perf_analyzer's meaning (requests in flight): "
     "START, START + STEP, ... up to END clients, each keeping --depth in flight (concurrency "
     "= clients x depth), each level its own warm-up and --duration, a row each. 1 <= START <= "
     "END <= 1024, STEP >= 1; not with --clients, --bulk or --baseline."},
    {"--csv", NULL, NULL, NULL,
     "Print CSV instead: a header line, then a row a level (one without --concurrency-range): "
     "concurrency, clients, depth, requests, req_s, p50_us, p90_us, p99_us, max_us, errors, "
     "bytes_s; raw numbers, an empty latency when no request finished. bench/plot_bench.py "
     "plots it."},
    {NULL, NULL, NULL, NULL, NULL},
};

const ctl_entry ctl_bench_entry = {
    .name = "bench",
    .usage = "[--op NAME] [--size N] [--dim D] [--dtype f32|f64] [--clients C] [--depth D] "
             "[--duration SEC] [--warmup SEC] [--bulk B] [--bulk-size N] [--bulk-depth K] "
             "[--bulk-transport socket|shm|auto] [--bulk-priority PRIO] [--baseline] "
             "[--input X.npy] [--input-b Y.npy] [--metric NAME] [--p P] [--k K] [--method NAME] "
             "[--on-zero NAME] [--to LAT,LON] [--concurrency-range START:END:STEP] [--csv]",
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
            "p90_us, p99_us, p999_us, max_us, mean_us, bulk, alone, interrupted. --priority sets "
            "the "
            "sessions' priority; --transport shm puts each client's arrays in a shared-memory "
            "arena of its session (auto does so when they come to 1 MiB); --deadline MS gives "
            "each request a deadline, and one answered deadline_exceeded is an error, named so "
            "(first_error). --op ping times ping round trips instead (op \"ping\", size 0, dtype "
            "null). --bulk B runs B streamers beside the clients (16 MiB f32 normalizes, 2 in "
            "flight each, over the socket at low priority unless --bulk-size, --bulk-depth, "
            "--bulk-transport or --bulk-priority say otherwise); JSON bulk is then an object "
            "(clients, op, size, dtype, depth, transport, priority, priority_granted, requests, "
            "errors, first_error and the same figures), else null. --baseline measures the "
            "clients alone first; JSON alone is then an object (requests, errors, first_error, "
            "the figures, p50_ratio and p99_ratio: beside the streamers divided by alone), else "
            "null. JSON also has input and input_b (the files, or null) and concurrency "
            "(clients x depth). --input sends your arrays (size, dim and dtype are then theirs). "
            "--concurrency-range runs a level at a time: the text is a table of a row a level; "
            "--json prints an object a level, one a line; --csv a header and a row a level. "
            "Times and rates in text are in the unit that reads best (843 \u00b5s, 7.01 s, "
            "12.3k req/s); --json and --csv keep raw numbers. Exit status 1 when any "
            "request failed, or when none finished within the measured time (at any level); "
            "Ctrl-C stops, prints what was measured and exits 130.",
    .opts = bench_opts,
    .example = "gpuqctl bench --duration 0.3\n"
               "gpuqctl bench --op pairwise --size 128 --clients 2 --depth 4 --duration 0.3\n"
               "gpuqctl --json bench --op=haversine --dtype f64 --duration=0.3 --warmup 0\n"
               "gpuqctl bench --deadline 2000 --clients 2 --depth 4 --duration 0.3\n"
               "gpuqctl bench --bulk 2 --bulk-size 65536 --baseline --duration 0.3\n"
               "gpuqctl bench --op ping --bulk 1 --bulk-size 65536 --duration 0.3",
};
