/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_bench.c - gpuqctl bench, the load generator, against a real
 * gpuqd, as a user or a script runs it.
 *
 * --json: one object whose fields are sane (requests > 0, no errors, req/s
 * and MB/s agree with requests, duration and bytes, p50 <= p90 <= p99 <=
 * p99.9 <= max) and echo what was asked, for each op and dtype, pipelined
 * over several clients, and agree with what gpuqd counted; --transport shm
 * puts the arrays in arenas (gpuqd opens one per client and no array byte
 * crosses the socket). Errors: a gpuqd that refuses every request (staging
 * too small: every reply too_large), and one whose max_output libgpuq
 * refuses before sending, give exit 1, the errors counted and the first
 * named. Streamers (--bulk): their own sessions, priority and transport,
 * their figures apart in "bulk", their errors counted; --baseline measures
 * the clients alone first ("alone", with the ratios); --op ping times
 * pings. Usage errors exit 2 with nothing on stdout (also --depth and
 * --bulk-depth over max_inflight, known only once connected), no daemon
 * exits 3. The text
 * summary names every field; the live line shows off a terminal only with
 * GPUQ_PROGRESS=1; SIGINT stops the run, prints what was measured (JSON
 * "interrupted": true) and exits 130.
 */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"

typedef tu_output run_out;
#define run_free tu_output_free

/* gpuqctl --socket <the daemon's> args... (NULL-terminated). */
static run_out bench_argv(const char *const *args)
{
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, NULL};
    return tu_capture(pre, args, e2e_d.dir, "bench");
}

#define BENCH(...) bench_argv((const char *const[]){"bench", __VA_ARGS__, NULL})

/* ---- the JSON object, by key (bench's keys are unique) ---- */

static const char *json_at(const char *js, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(js, k);
    ck_assert_msg(p, "no \"%s\" in %s", key, js);
    return p + strlen(k);
}

static double jnum(const char *js, const char *key)
{
    const char *p = json_at(js, key);
    if (strncmp(p, "null", 4) == 0)
        return NAN;
    char *end;
    double v = strtod(p, &end);
    ck_assert_msg(end != p && (*end == ',' || *end == '}'), "\"%s\" is no number: %s", key, js);
    return v;
}

/* The string value of key into buf ("null" for null; no escapes expected). */
static const char *jstr(const char *js, const char *key, char *buf, size_t cap)
{
    const char *p = json_at(js, key);
    if (strncmp(p, "null", 4) == 0) {
        snprintf(buf, cap, "null");
        return buf;
    }
    ck_assert_msg(*p == '"', "\"%s\" is no string: %s", key, js);
    size_t n = strcspn(p + 1, "\"");
    snprintf(buf, cap, "%.*s", (int)n, p + 1);
    return buf;
}

/* A bare word (true, false, null) at key. */
static void assert_jword(const char *js, const char *key, const char *want)
{
    const char *p = json_at(js, key);
    size_t n = strlen(want);
    ck_assert_msg(strncmp(p, want, n) == 0 && (p[n] == ',' || p[n] == '}'), "\"%s\" is not %s: %s",
                  key, want, js);
}

static void assert_jstr(const char *js, const char *key, const char *want)
{
    char buf[512];
    ck_assert_msg(strcmp(jstr(js, key, buf, sizeof buf), want) == 0,
                  "\"%s\" is '%s', want '%s': %s", key, buf, want, js);
}

/* One line, one object, every field a bench run has. */
static void assert_one_object(const char *js)
{
    size_t len = strlen(js);
    ck_assert_msg(len > 2 && js[0] == '{' && js[len - 2] == '}' && js[len - 1] == '\n' &&
                      strchr(js, '\n') == js + len - 1,
                  "not one JSON object on one line: %s", js);
    static const char *const keys[] = {"command",   "op",         "size",
                                       "dtype",     "clients",    "depth",
                                       "transport", "priority",   "priority_granted",
                                       "backend",   "warmup_s",   "duration_s",
                                       "requests",  "errors",     "first_error",
                                       "req_s",     "mb_s",       "p50_us",
                                       "p90_us",    "p99_us",     "p999_us",
                                       "max_us",    "mean_us",    "bulk",
                                       "alone",     "interrupted"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        (void)json_at(js, keys[k]);
    assert_jstr(js, "command", "bench");
}

/* A clean run: requests counted, no error, the numbers consistent. */
static void assert_sane(const char *js, double duration, double req_bytes)
{
    assert_one_object(js);
    double req = jnum(js, "requests"), rs = jnum(js, "req_s"), mbs = jnum(js, "mb_s");
    double dur = jnum(js, "duration_s");
    ck_assert_msg(req > 0 && jnum(js, "errors") == 0, "%s", js);
    assert_jword(js, "first_error", "null");
    assert_jword(js, "interrupted", "false");
    const char *bulk = strstr(js, "\"bulk\":{");
    ck_assert_msg(!bulk || jnum(bulk, "errors") == 0, "streamers' errors: %s", js);
    ck_assert_msg(fabs(dur - duration) < 0.02, "duration_s %g, asked %g: %s", dur, duration, js);
    ck_assert_msg(rs > 0 && fabs(rs - req / dur) <= 1e-3 * rs + 1e-3, "req_s %g: %s", rs, js);
    ck_assert_msg(fabs(mbs - rs * req_bytes / 1e6) <= 1e-3 * mbs + 1e-3, "mb_s %g: %s", mbs, js);
    double p50 = jnum(js, "p50_us"), p90 = jnum(js, "p90_us"), p99 = jnum(js, "p99_us");
    double p999 = jnum(js, "p999_us"), mx = jnum(js, "max_us"), mean = jnum(js, "mean_us");
    ck_assert_msg(p50 > 0 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= mx, "%s", js);
    ck_assert_msg(mean > 0 && mean <= mx, "%s", js);
    /* a client waits for each reply, so no request took longer than the run */
    ck_assert_msg(mx < (duration + 5) * 1e6, "%s", js);
}

static long long status_count(const char *key)
{
    char js[16384];
    e2e_status(js, sizeof js);
    long long v = e2e_json_int(js, key);
    return v < 0 ? 0 : v; /* a count gpuqd has not started (errors.too_large) */
}

/* ---- a clean run of each op ---- */

START_TEST(json_normalize_pipelined)
{
    long long before = status_count("normalize");
    run_out r = BENCH("--json", "--clients", "2", "--depth", "4", "--duration", "0.4", "--warmup",
                      "0.2", "--transport", "socket");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(r.err[0] == '\0', "stderr: %s", r.err); /* no live line off a terminal */
    assert_sane(r.out, 0.4, 2 * 1024 * 4);                /* 1024 f32 in, 1024 out */
    assert_jstr(r.out, "op", "normalize");
    assert_jstr(r.out, "dtype", "f32");
    assert_jstr(r.out, "transport", "socket");
    assert_jstr(r.out, "backend", tu_test_device());
    assert_jstr(r.out, "priority", "normal");
    assert_jstr(r.out, "priority_granted", "normal");
    assert_jword(r.out, "bulk", "null");
    assert_jword(r.out, "alone", "null");
    ck_assert_int_eq((int)jnum(r.out, "size"), 1024);
    ck_assert_int_eq((int)jnum(r.out, "clients"), 2);
    ck_assert_int_eq((int)jnum(r.out, "depth"), 4);
    ck_assert(jnum(r.out, "warmup_s") == 0.2);
    /* gpuqd saw what was counted, the warm-up's (0.2 s of them) and the
     * drain's (at most clients x depth) */
    long long sent = status_count("normalize") - before;
    ck_assert_msg(sent > (long long)jnum(r.out, "requests") + 2 * 4, "gpuqd counted %lld: %s", sent,
                  r.out);
    run_free(&r);
}
END_TEST

static const struct {
    const char *op, *size, *dim, *dtype;
    double bytes; /* one request's input plus output bytes */
} ops[] = {
    {"normalize", "1000", NULL, "f64", 2 * 1000 * 8},
    {"haversine", "100", NULL, "f32", 100 * 2 * 4 + 100 * 4},
    {"pairwise", "24", "5", "f32", 2 * 24 * 5 * 4 + 24 * 24 * 4},
    {"grid", "20", NULL, "f64", 20 * 20 * 8},
    {"knn", "40", "3", "f64", (40 * 3 + 40 * 3) * 8 + 40 * 10 * (8 + 8)},
};

START_TEST(json_each_op)
{
    const char *args[24] = {"bench",      "--json",  "--op",        ops[_i].op,   "--size",
                            ops[_i].size, "--dtype", ops[_i].dtype, "--duration", "0.3",
                            "--warmup",   "0",       "--depth",     "2"};
    int n = 14;
    if (ops[_i].dim) {
        args[n++] = "--dim";
        args[n++] = ops[_i].dim;
    }
    args[n] = NULL;
    run_out r = bench_argv(args);
    ck_assert_msg(r.rc == 0, "%s: exit %d: %s", ops[_i].op, r.rc, r.err);
    assert_sane(r.out, 0.3, ops[_i].bytes);
    assert_jstr(r.out, "op", ops[_i].op);
    assert_jstr(r.out, "dtype", ops[_i].dtype);
    ck_assert_int_eq((long)jnum(r.out, "size"), atol(ops[_i].size));
    if (ops[_i].dim)
        ck_assert_int_eq((long)jnum(r.out, "dim"), atol(ops[_i].dim));
    run_free(&r);
}
END_TEST

/* shm: an arena per client, and the arrays never on the socket. */
START_TEST(json_shm)
{
    long long opens = status_count("arena_open"), in0 = status_count("bytes_in");
    run_out r = BENCH("--json", "--transport", "shm", "--clients", "2", "--depth", "3", "--size",
                      "4096", "--duration", "0.3", "--warmup", "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    assert_sane(r.out, 0.3, 2 * 4096 * 4);
    assert_jstr(r.out, "transport", "shm");
    ck_assert_int_eq(status_count("arena_open") - opens, 2);
    /* every request's 16 KiB of input went by reference: the socket carried
     * headers only, well under one input per request */
    long long in = status_count("bytes_in") - in0, req = (long long)jnum(r.out, "requests");
    ck_assert_msg(in < req * 4096 * 4 / 8, "%lld bytes in for %lld requests", in, req);
    run_free(&r);
    /* auto: large arrays by shm, small by socket */
    r = BENCH("--json", "--size", "300000", "--duration", "0.3", "--warmup", "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    assert_jstr(r.out, "transport", "shm");
    run_free(&r);
    r = BENCH("--json", "--size", "30", "--duration", "0.3", "--warmup", "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    assert_jstr(r.out, "transport", "socket");
    run_free(&r);
}
END_TEST

START_TEST(priority_echoed)
{
    run_out r = BENCH("--json", "--priority", "low", "--duration", "0.3", "--warmup", "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    assert_jstr(r.out, "priority", "low");
    assert_jstr(r.out, "priority_granted", "low");
    run_free(&r);
}
END_TEST

/* ---- streamers, the baseline, pings ---- */

/* The object at "key":{ in js (its keys are then the first found). */
static const char *jobj(const char *js, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":{", key);
    const char *p = strstr(js, k);
    ck_assert_msg(p, "no object \"%s\" in %s", key, js);
    return p + strlen(k) - 1;
}

/* A high-priority client beside 2 low-priority socket streamers, measured
 * alone first: three sets of figures, each counted by gpuqd too. */
START_TEST(json_bulk_baseline)
{
    long long before = status_count("normalize");
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "--priority", "high", NULL};
    const char *args[] = {"--json", "bench",      "--bulk",    "2", "--bulk-size",
                          "65536",  "--baseline", "--clients", "1", "--duration",
                          "0.3",    "--warmup",   "0.1",       NULL};
    run_out r = tu_capture(pre, args, e2e_d.dir, "bulk");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    assert_sane(r.out, 0.3, 2 * 1024 * 4);
    assert_jstr(r.out, "priority_granted", "high");
    const char *b = jobj(r.out, "bulk"), *al = jobj(r.out, "alone");
    ck_assert_int_eq((int)jnum(b, "clients"), 2);
    ck_assert_int_eq((int)jnum(b, "size"), 65536);
    ck_assert_int_eq((int)jnum(b, "depth"), 2);
    assert_jstr(b, "transport", "socket");
    assert_jstr(b, "priority", "low");
    assert_jstr(b, "priority_granted", "low");
    double breq = jnum(b, "requests"), areq = jnum(al, "requests");
    ck_assert_msg(breq > 0 && jnum(b, "errors") == 0 && jnum(b, "mb_s") > 0, "%s", r.out);
    ck_assert_msg(fabs(jnum(b, "mb_s") - jnum(b, "req_s") * 2 * 65536 * 4 / 1e6) <=
                      1e-3 * jnum(b, "mb_s") + 1e-3,
                  "%s", r.out);
    ck_assert_msg(areq > 0 && jnum(al, "errors") == 0 && jnum(al, "p50_us") > 0, "%s", r.out);
    double ratio = jnum(r.out, "p99_us") / jnum(al, "p99_us");
    ck_assert_msg(fabs(jnum(al, "p99_ratio") - ratio) <= 1e-3 * ratio, "%s", r.out);
    /* gpuqd served every counted request of the three */
    long long sent = status_count("normalize") - before;
    ck_assert_msg(sent >= (long long)(jnum(r.out, "requests") + areq + breq), "%lld: %s", sent,
                  r.out);
    run_free(&r);
    /* the streamers in arenas: one each, none for the measured client */
    long long opens = status_count("arena_open");
    r = BENCH("--json", "--bulk", "2", "--bulk-size", "65536", "--bulk-transport", "shm",
              "--bulk-priority", "normal", "--transport", "socket", "--duration", "0.3", "--warmup",
              "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    assert_sane(r.out, 0.3, 2 * 1024 * 4);
    assert_jstr(jobj(r.out, "bulk"), "transport", "shm");
    assert_jstr(jobj(r.out, "bulk"), "priority_granted", "normal");
    assert_jword(r.out, "alone", "null");
    ck_assert_int_eq(status_count("arena_open") - opens, 2);
    run_free(&r);
}
END_TEST

/* The streamers' failures are errors of the run: exit 1, counted, named. */
START_TEST(bulk_errors_counted)
{
    const char *extra[] = {"--max-output", "8192", NULL}; /* 4 KiB results pass, 256 KiB not */
    e2e_restart(extra);
    run_out r = BENCH("--json", "--bulk", "2", "--bulk-size", "65536", "--duration", "0.3",
                      "--warmup", "0");
    ck_assert_msg(r.rc == 1, "exit %d: %s", r.rc, r.err);
    assert_one_object(r.out);
    const char *b = jobj(r.out, "bulk");
    ck_assert_msg(jnum(r.out, "errors") == 0 && jnum(r.out, "requests") > 0, "%s", r.out);
    ck_assert_msg(jnum(b, "errors") == 2 && jnum(b, "requests") == 0, "%s", r.out);
    ck_assert_msg(strstr(r.err, "the first: streamers: ") && strstr(r.err, "max_output"), "%s",
                  r.err);
    run_free(&r);
    /* the text summary shows them */
    r = BENCH("--bulk", "1", "--bulk-size", "65536", "--baseline", "--duration", "0.2", "--warmup",
              "0");
    ck_assert_msg(r.rc == 1, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(strstr(r.out, "streamers   1 x depth 2, normalize 65536 f32, socket, priority "
                                "low (asked low)\n") &&
                      strstr(r.out, "errors 1 (first: ") && strstr(r.out, "\nalone       "),
                  "%s", r.out);
    run_free(&r);
}
END_TEST

/* --op ping: gpuq_ping round trips, counted by gpuqd as pings. */
START_TEST(json_ping)
{
    long long before = status_count("ping");
    run_out r =
        BENCH("--json", "--op", "ping", "--clients", "2", "--duration", "0.3", "--warmup", "0.1");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    assert_sane(r.out, 0.3, 0);
    assert_jstr(r.out, "op", "ping");
    assert_jword(r.out, "dtype", "null");
    ck_assert_int_eq((int)jnum(r.out, "size"), 0);
    ck_assert_msg(status_count("ping") - before >= (long long)jnum(r.out, "requests"), "%s", r.out);
    run_free(&r);
    r = BENCH("--op", "ping", "--duration", "0.2", "--warmup", "0");
    ck_assert_msg(r.rc == 0 && strstr(r.out, "op          ping (gpuq_ping round trips)\n"),
                  "%d %s %s", r.rc, r.out, r.err);
    run_free(&r);
}
END_TEST

/* ---- errors ---- */

/* gpuqd refuses every request (its staging cannot hold one): exit 1, every
 * refusal counted, none as a request. */
START_TEST(daemon_refuses_all)
{
    const char *extra[] = {"--session-staging", "4096", NULL}; /* a request needs 8 KiB */
    e2e_restart(extra);
    long long before = status_count("too_large");
    run_out r =
        BENCH("--json", "--clients", "2", "--depth", "4", "--duration", "0.3", "--warmup", "0.1");
    ck_assert_msg(r.rc == 1, "exit %d: %s", r.rc, r.err);
    assert_one_object(r.out);
    double errs = jnum(r.out, "errors");
    ck_assert_msg(errs >= 8 && jnum(r.out, "requests") == 0 && jnum(r.out, "req_s") == 0, "%s",
                  r.out);
    ck_assert_msg(isnan(jnum(r.out, "p50_us")) && isnan(jnum(r.out, "max_us")), "%s", r.out);
    char first[512];
    jstr(r.out, "first_error", first, sizeof first);
    ck_assert_msg(strncmp(first, "too_large: ", 11) == 0 && strstr(first, "session_staging"), "%s",
                  r.out);
    /* gpuqd refused as many as were counted: the clients read every reply */
    ck_assert_int_eq(status_count("too_large") - before, (long long)errs);
    ck_assert_msg(strstr(r.err, "gpuqctl: too_large: ") && strstr(r.err, "failed"), "%s", r.err);
    run_free(&r);
    /* the text summary says so too */
    r = BENCH("--duration", "0.2", "--warmup", "0");
    ck_assert_msg(r.rc == 1 && strstr(r.out, "(first: too_large: "), "%d %s %s", r.rc, r.out,
                  r.err);
    run_free(&r);
}
END_TEST

/* Results over max_output: libgpuq refuses before sending; each client
 * stops at its first refusal, and that is an error too. */
/* Requests that take longer than the window (a 36 MB result: longer than
 * 1 ms on either backend): nothing measured is a failure
 * (exit 1, said), not a table of zeros that a script would take. */
START_TEST(nothing_finished)
{
    run_out r = BENCH("--json", "--op", "pairwise", "--size", "3000", "--duration", "0.001",
                      "--warmup", "0");
    ck_assert_msg(r.rc == 1, "exit %d: %s\n%s", r.rc, r.out, r.err);
    assert_one_object(r.out);
    ck_assert_msg(jnum(r.out, "requests") == 0 && jnum(r.out, "errors") == 0, "%s", r.out);
    ck_assert_msg(strstr(r.err, "no request finished within"), "%s", r.err);
    run_free(&r);
}
END_TEST

START_TEST(refused_before_sending)
{
    const char *extra[] = {"--max-output", "64", NULL};
    e2e_restart(extra);
    run_out r = BENCH("--json", "--clients", "3", "--duration", "0.3", "--warmup", "0");
    ck_assert_msg(r.rc == 1, "exit %d: %s", r.rc, r.err);
    assert_one_object(r.out);
    ck_assert_msg(jnum(r.out, "errors") == 3 && jnum(r.out, "requests") == 0, "%s", r.out);
    char first[512];
    jstr(r.out, "first_error", first, sizeof first);
    ck_assert_msg(strstr(first, "too_large") && strstr(first, "max_output"), "%s", r.out);
    run_free(&r);
}
END_TEST

static const struct {
    const char *args[6];
    const char *says; /* in the message */
} misuses[] = {
    {{"--op", "normalise"}, "did you mean normalize"},
    {{"--op", "sort"}, "bad --op 'sort'"},
    {{"--depth", "0"}, "bad --depth '0'"},
    {{"--depth", "65"}, "over gpuqd's max_inflight (64)"},
    {{"--duration", "-1"}, "bad --duration '-1'"},
    {{"--duration", "0"}, "bad --duration '0'"},
    {{"--duration", "x"}, "bad --duration 'x'"},
    {{"--warmup", "-0.5"}, "bad --warmup"},
    {{"--size", "0"}, "bad --size '0'"},
    {{"--size", "-3"}, "bad --size"},
    {{"--clients", "0"}, "bad --clients '0'"},
    {{"--dtype", "i64"}, "bad --dtype 'i64'"},
    {{"--dim", "0"}, "bad --dim '0'"},
    {{"--count", "3"}, "unknown option '--count'"},
    {{"--op", "pong"}, "did you mean ping"},
    {{"--op", "ping", "--depth", "2"}, "--op ping: each client has one ping in flight"},
    {{"--baseline"}, "--baseline needs --bulk"},
    {{"--bulk-size", "5"}, "--bulk-size needs --bulk"},
    {{"--bulk", "1", "--bulk-transport", "tcp"}, "bad --bulk-transport 'tcp'"},
    {{"--bulk", "1", "--bulk-priority", "top"}, "bad --bulk-priority 'top'"},
    {{"--bulk", "1", "--bulk-size", "0"}, "bad --bulk-size '0'"},
    {{"--bulk", "1", "--bulk-depth", "65"}, "--bulk-depth 65 is over gpuqd's max_inflight (64)"},
    {{"extra"}, "unexpected argument 'extra'"},
};

START_TEST(usage_errors)
{
    const char *args[10] = {"bench"};
    int n = 1;
    for (int k = 0; misuses[_i].args[k]; k++)
        args[n++] = misuses[_i].args[k];
    args[n] = NULL;
    run_out r = bench_argv(args);
    ck_assert_msg(r.rc == 2, "%s: exit %d: %s", misuses[_i].says, r.rc, r.err);
    ck_assert_msg(r.out[0] == '\0', "stdout: %s", r.out);
    ck_assert_msg(strstr(r.err, "gpuqctl: usage: ") && strstr(r.err, misuses[_i].says), "%s",
                  r.err);
    run_free(&r);
}
END_TEST

START_TEST(unreachable)
{
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_dpath("nobody.sock"), NULL};
    const char *args[] = {"--json", "bench", "--duration", "0.2", NULL};
    run_out r = tu_capture(pre, args, e2e_d.dir, "u");
    ck_assert_msg(r.rc == 3 && r.out[0] == '\0' && strstr(r.err, "cannot connect"), "%d %s", r.rc,
                  r.err);
    run_free(&r);
}
END_TEST

/* ---- what a person sees ---- */

START_TEST(text_summary)
{
    run_out r = BENCH("--op", "haversine", "--size", "64", "--clients", "2", "--depth", "2",
                      "--duration", "0.3", "--warmup", "0.1");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    static const char *const must[] = {"op          haversine, size 64, f32\n",
                                       "clients     2 x depth 2\n",
                                       "transport   socket\n",
                                       "priority    normal (asked normal)\n",
                                       "backend     ",
                                       "duration    300 ms (after 100 ms of warm-up)\n",
                                       "requests    ",
                                       "errors      0\n",
                                       " req/s, ",
                                       "B/s\n",
                                       "latency     p50 ",
                                       ", p90 ",
                                       ", p99 ",
                                       ", p99.9 ",
                                       ", max "};
    for (size_t k = 0; k < sizeof must / sizeof must[0]; k++)
        ck_assert_msg(strstr(r.out, must[k]), "no '%s' in:\n%s", must[k], r.out);
    ck_assert_msg(strstr(r.out, tu_test_device()), "%s", r.out);
    long req = atol(strstr(r.out, "requests    ") + 12);
    ck_assert_msg(req > 0, "%s", r.out);
    run_free(&r);
}
END_TEST

/* Off a terminal no live line; GPUQ_PROGRESS=1 forces one a second. */
START_TEST(live_line)
{
    run_out r = BENCH("--duration", "1.3", "--warmup", "0");
    ck_assert_msg(r.rc == 0 && r.err[0] == '\0', "%d: %s", r.rc, r.err);
    run_free(&r);
    ck_assert_int_eq(setenv("GPUQ_PROGRESS", "1", 1), 0);
    r = BENCH("--json", "--duration", "1.3", "--warmup", "0");
    ck_assert_int_eq(unsetenv("GPUQ_PROGRESS"), 0);
    ck_assert_msg(r.rc == 0, "%d: %s", r.rc, r.err);
    ck_assert_msg(strncmp(r.err, "bench  1.0 s  ", 14) == 0 && strstr(r.err, " req/s  ") &&
                      strstr(r.err, "B/s  p50 ") && strstr(r.err, "s  p99 ") &&
                      strstr(r.err, "s  errors 0\n"),
                  "%s", r.err);
    ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "one line: %s", r.err);
    assert_sane(r.out, 1.3, 2 * 1024 * 4);
    run_free(&r);
}
END_TEST

/* SIGINT: the clients stop, the summary of what was measured, 130. */
START_TEST(interrupted)
{
    int out = open(e2e_dpath("i.out"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(e2e_dpath("i.err"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(out >= 0 && err >= 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(99);
        execl(GPUQCTL_PATH, GPUQCTL_PATH, "--socket", e2e_d.socket, "--json", "bench", "--clients",
              "2", "--duration", "60", "--warmup", "0.2", (char *)NULL);
        _exit(98);
    }
    close(out);
    close(err);
    tu_sleep_s(1.2);
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    double t0 = tu_now_s();
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(tu_now_s() - t0 < 5, "it took %.1f s to stop", tu_now_s() - t0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d", st);
    size_t len;
    char *js = tu_read_file(e2e_dpath("i.out"), &len), *e = tu_read_file(e2e_dpath("i.err"), &len);
    ck_assert(js && e);
    assert_one_object(js);
    assert_jword(js, "interrupted", "true");
    double dur = jnum(js, "duration_s");
    ck_assert_msg(dur > 0.5 && dur < 4 && jnum(js, "requests") > 0 && jnum(js, "errors") == 0, "%s",
                  js);
    ck_assert_msg(strstr(e, "gpuqctl: interrupted"), "%s", e);
    free(js);
    free(e);
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_bench");
    TCase *tc = tcase_create("bench");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, json_normalize_pipelined);
    tcase_add_loop_test(tc, json_each_op, 0, (int)(sizeof ops / sizeof ops[0]));
    tcase_add_test(tc, json_shm);
    tcase_add_test(tc, priority_echoed);
    tcase_add_test(tc, json_bulk_baseline);
    tcase_add_test(tc, bulk_errors_counted);
    tcase_add_test(tc, json_ping);
    tcase_add_test(tc, daemon_refuses_all);
    tcase_add_test(tc, refused_before_sending);
    tcase_add_test(tc, nothing_finished);
    tcase_add_loop_test(tc, usage_errors, 0, (int)(sizeof misuses / sizeof misuses[0]));
    tcase_add_test(tc, unreachable);
    tcase_add_test(tc, text_summary);
    tcase_add_test(tc, live_line);
    tcase_add_test(tc, interrupted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU on the CUDA run */
    return tu_run_suite(suite());
}
