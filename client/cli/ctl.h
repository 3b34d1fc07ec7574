/* SPDX-License-Identifier: Apache-2.0 */
/* ctl.h - gpuqctl's command table and the helpers every command uses.
 *
 * A command is a { name, usage, min_args, max_args, exec, help, desc, opts,
 * example } entry (names may be two words: "distance grid"). The op
 * commands live with their ops (ops/<op>.c, side GPUQ_OP_CTL); the others
 * in ctl_basic.c and ctl_admin.c. ctl_main.c lists them in op_list.h's
 * order. An entry's opts table is what `gpuqctl CMD --help` shows and what
 * ctl_parse_args accepts: an option it does not document is unknown.
 * exec returns the process exit status: 0, CTL_EXIT_FAIL (1) for server and
 * op errors, CTL_EXIT_USAGE (2) for usage errors, CTL_EXIT_UNREACHABLE (3)
 * when no gpuqd answers on any socket tried. Errors are one line on stderr:
 * "gpuqctl: <error_name>: <message>".
 */
#ifndef GPUQ_CLIENT_CTL_H
#define GPUQ_CLIENT_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "gpuq_internal.h"
#include "mpread.h"

#define CTL_EXIT_FAIL 1
#define CTL_EXIT_USAGE 2
#define CTL_EXIT_UNREACHABLE 3

typedef struct ctl_ctx {
    const char *socket; /* NULL: the default socket */
    bool json;
    int priority;
    int transport;                 /* gpuq_transport: --transport, AUTO by default */
    uint64_t deadline_ms;          /* --deadline: each compute request's (0: none) */
    const struct ctl_entry *entry; /* the command being run */
    /* the command's arguments, as ctl_parse_args last saw them (borrowed):
     * for messages that name the option a value came from (ctl_opt_of) */
    int argc;
    const char **argv;
} ctl_ctx;

/* One option as --help shows it and ctl_parse_args knows it. A long
 * option takes its value as "--name VALUE" or "--name=VALUE", a short one
 * (alias) as "-o VALUE". */
typedef struct ctl_optdoc {
    const char *name;  /* "--method" */
    const char *alias; /* "-m", or NULL */
    const char *arg;   /* "NAME", "LAT,LON", "START:STOP:N"; NULL for a flag */
    const char *def;   /* the default as one would type it; NULL: none */
    const char *help;  /* what it does (wrapped by --help) */
} ctl_optdoc;

typedef struct ctl_entry {
    const char *name;
    const char *usage;      /* arguments after the name */
    int min_args, max_args; /* positional arguments */
    int (*exec)(ctl_ctx *ctx, int argc, const char **argv);
    const char *help;       /* one sentence (the command list) */
    const char *desc;       /* what CMD --help says it does; NULL: help */
    const ctl_optdoc *opts; /* its options, ended by a NULL name; NULL: none */
    const char *example;    /* command lines, one a line, each "gpuqctl ..." */
} ctl_entry;

/* One option of a command as exec receives it: a flag (val NULL) or an
 * option with a value. name is the entry's ctl_optdoc name or alias. */
typedef struct ctl_opt {
    const char *name; /* "--method", "-o" */
    const char **val; /* set to the value; NULL for a flag */
    bool *flag;       /* set for a flag */
} ctl_opt;

/* Split argv into options (any order) and positionals; checks the entry's
 * min/max. The options are the entry's opts (each must be in opts[nopts],
 * where its value goes) and the global ones (ctl_global_opts; --timing
 * when timing is not NULL, which the entry then documents). Mistakes are
 * diagnosed by what they look like: "--to 30 101" is a point without its
 * comma, "--metric -o" a missing value, "--methd" a misspelled --method.
 * Returns 0 or CTL_EXIT_USAGE (message printed). An opts[] name that the
 * entry does not document is a bug: it aborts. */
int ctl_parse_args(ctl_ctx *ctx, int argc, const char **argv, const ctl_opt *opts, int nopts,
                   const char **pos, int *npos, bool *timing);

/* The option that gave val, as the user typed it ("-o", "--output"): val
 * must be the very pointer ctl_parse_args stored (argv[i + 1], or what
 * follows "--name="); the name goes into buf[cap] when it must be cut out
 * of "--name=VALUE". fallback when no argument gave val. */
const char *ctl_opt_of(const ctl_ctx *ctx, const char *val, const char *fallback, char *buf,
                       size_t cap);

/* The context ctl_parse_args last saw (the command being run), for the
 * helpers an op's exec calls without one (op_ctl_load's "@NAME"); NULL
 * before. */
const ctl_ctx *ctl_current(void);

/* The options every command takes, before or after its name (--socket,
 * --json, --priority, --transport, --deadline), ended by a NULL name. */
extern const ctl_optdoc ctl_global_opts[];
/* If argv[*i] is a global option, apply it to ctx (its value: "=VALUE" or
 * argv[*i + 1], *i advanced past it) and return 1; 0 if it is not one; or
 * CTL_EXIT_USAGE (message printed). */
int ctl_parse_global(ctl_ctx *ctx, int argc, const char **argv, int *i);
/* The closest of names[n] to s (a typo's distance), or NULL. */
const char *ctl_suggest(const char *s, const char *const *names, int n);
/* Set enum key of req from the command line's value for option opt
 * ("--metric"): a name or an alias; else a usage error listing them. */
int ctl_set_enum(const ctl_ctx *ctx, gpuq_request *req, const char *key, const char *opt,
                 const char *s);
/* Each of pos[n] must be a file argument: a number that names no file is
 * a usage error ("'101' is a number, not an .npy file"), and so is an
 * empty one. */
int ctl_check_files(const ctl_ctx *ctx, const char *const *pos, int n);

int ctl_usage_error(const ctl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "gpuqctl: name: msg" (msg's own "name: " prefix dropped); returns 1. */
int ctl_fail(int code, const char *msg);
int ctl_failf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A document of msgpack maps one after the other (sessions, list) printed
 * as one JSON array on stdout; built in memory first, so a malformed
 * document prints no half array but ctl_fail(code, what). Returns an exit
 * status. */
int ctl_stream_json(const uint8_t *doc, size_t len, int code, const char *what);
/* uid as its user name, or its number when it has none. */
void ctl_user_name(double uid, char *buf, size_t cap);
/* Write n bytes to stderr with write(2) alone, through EINTR (so a signal
 * handler may call it); gives up quietly when stderr is gone. */
void ctl_write_stderr(const char *s, size_t n);
/* Connect with ctx's socket and priority, and set its transport (shm
 * against a gpuqd that offers no arenas fails here) and deadline; prints
 * the error itself. Returns 0, CTL_EXIT_UNREACHABLE when no socket tried accepted
 * (the message names each, with why), else CTL_EXIT_FAIL. */
int ctl_connect(const ctl_ctx *ctx, gpuq_conn **c);
/* For commands without options or arguments: parse (only --json/--priority)
 * and connect. Returns 0 or the exit status (message printed). */
int ctl_connect_bare(ctl_ctx *ctx, int argc, const char **argv, gpuq_conn **c);

/* Strict number parsing: whole string, finite, in range. 0 or -1. */
int ctl_parse_double(const char *s, double *v);
int ctl_parse_u64(const char *s, uint64_t *v);
/* A priority level: low, normal, high or -1, 0, 1 (gpuq_prio_parse). */
int ctl_parse_priority(const char *s, int *prio);
/* "auto", "socket" or "shm" into a gpuq_transport. */
int ctl_parse_transport(const char *s, int *t);
/* Milliseconds, 0 .. GPUQ_MAX_DEADLINE_MS (--deadline). */
int ctl_parse_deadline(const char *s, uint64_t *ms);

/* One member of a msgpack map read by ctl_read_map: scalars decoded
 * (numbers and bools in num, strings in s), every value's raw bytes kept. */
typedef struct ctl_kv {
    char key[64];
    gpuq_mp_type type;
    double num;
    bool b;
    char s[256];
    const uint8_t *raw;
    size_t raw_len;
} ctl_kv;
/* Read one map from r into kv[cap] (extra members are skipped); *n set.
 * Returns 0 or -1 (malformed). */
int ctl_read_map(gpuq_mpr *r, ctl_kv *kv, int cap, int *n);
const ctl_kv *ctl_kv_get(const ctl_kv *kv, int n, const char *key);
double ctl_kv_num(const ctl_kv *kv, int n, const char *key);      /* 0 if absent */
const char *ctl_kv_str(const ctl_kv *kv, int n, const char *key); /* "" if absent */
/* "1.5 GiB", "3m02s" into buf; returns buf. */
const char *ctl_fmt_bytes(double v, char *buf, size_t cap);
const char *ctl_fmt_age(double s, char *buf, size_t cap);
/* A time of us microseconds in the unit that reads best, three significant
 * digits: "999 ns", "843 µs", "28.4 µs", "1.25 ms", "7.01 s" (999.9 µs is
 * "1.00 ms": the unit after rounding; "0 µs"; "-" for NaN, infinity or a
 * negative time; past 1e9 s an exponent). Returns buf. */
const char *ctl_fmt_us(double us, char *buf, size_t cap);
/* A rate of per_s units a second with an SI prefix, three significant
 * digits: ("req/s") "12.3k req/s", "843 req/s", "0.25 req/s", "0.0000123
 * req/s" (a slow rate is never shown as 0, only none is); ("B/s") "579
 * MB/s", "12.3 GB/s"; "- req/s" for NaN, infinity or a negative rate.
 * Returns buf. */
const char *ctl_fmt_rate(double per_s, const char *unit, char *buf, size_t cap);

extern const ctl_entry ctl_ping_entry, ctl_status_entry;
extern const ctl_entry ctl_sessions_entry, ctl_metrics_entry, ctl_drain_entry, ctl_shutdown_entry,
    ctl_kill_session_entry, ctl_set_limit_entry;
/* Resident arrays: put, get, ls, rm (ctl_resident.c). */
extern const ctl_entry ctl_put_entry, ctl_get_entry, ctl_ls_entry, ctl_rm_entry;
/* Watching requests: slowlog [--reset], monitor (ctl_monitor.c). */
extern const ctl_entry ctl_slowlog_entry, ctl_monitor_entry;
/* Commands that are no op's (ctl_main.c lists them after the op table's). */
extern const ctl_entry ctl_bench_entry;

#endif
