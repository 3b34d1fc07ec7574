/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - see config.h. The flags are parsed twice with getopt_long: the
 * first pass finds --config/--check-config (and --help, --version, bad
 * options), the file is read, then the second pass applies the other flags,
 * so a flag wins over the file wherever it stands on the command line.
 * Flags and file keys share one table (config_keys.c). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config_file.h"
#include "config_keys.h"
#include "header.h"
#include "text_wrap.h"
#include "log.h"
#include "policy.h"

/* What --version says was built in. */
#ifdef GPUQ_HAVE_SYSTEMD
#define GPUQD_FEAT_SYSTEMD "systemd"
#else
#define GPUQD_FEAT_SYSTEMD "no systemd"
#endif
#ifdef GPUQ_HAVE_CUDA
#define GPUQD_FEAT_CUDA "cuda"
#else
#define GPUQD_FEAT_CUDA "no cuda"
#endif
#define GPUQD_FEATURES GPUQD_FEAT_SYSTEMD ", " GPUQD_FEAT_CUDA

/* What --help says of each setting's flag: its argument, its default
 * when that is not simply the built-in value (config_defaults, printed as
 * the config file spells it), and what it does. One row per key of
 * config_keys.c ('rule' keys have no flag); a key without a row is still a
 * flag and still listed, but test_config fails until it has one. */
typedef struct opt_doc {
    const char *key;  /* config_keys.c's name */
    const char *arg;  /* "N", "SEC", ... */
    const char *def;  /* NULL: the built-in value */
    const char *help; /* one or two sentences */
} opt_doc;

static const opt_doc opt_docs[] = {
    {"socket", "PATH",
     "$GPUQ_SOCKET, else $XDG_RUNTIME_DIR/gpuq/gpuqd.sock, else /run/gpuq/gpuqd.sock",
     "The Unix socket to listen on when systemd passes none."},
    {"socket_mode", "OCTAL", NULL, "Mode of the socket file gpuqd binds itself."},
    {"socket_group", "GROUP", "gpuqd's own group",
     "Group of the socket gpuqd binds and of the directory it makes for it (then mode 0750): "
     "as root, --socket-group gpuq lets the members of gpuq connect (systemd's socket has "
     "SocketGroup=)."},
    {"state_dir", "DIR", NULL,
     "Directory where gpuqd persists resident arrays (PROTOCOL.md 3.5; the unit's "
     "StateDirectory=). Empty (--state-dir ''): no state directory, persistence off. At most "
     "186 bytes. Needs a restart."},
    {"listen_backlog", "N", NULL,
     "Connections the kernel queues until gpuqd accepts them (1 .. 1048576; capped by "
     "net.core.somaxconn); also set on a socket systemd passed. Needs a restart. The "
     "default is SOMAXCONN."},
    {"device", "auto|cuda|cpu", NULL,
     "Backend: auto (CUDA when a GPU is usable, else the CPU), cuda (fail without a GPU) or "
     "cpu."},
    {"log_level", "LEVEL", NULL, "Logging to stderr: error, warn, info or debug."},
    {"drain_timeout", "SEC", NULL,
     "On SIGTERM, seconds to finish accepted work before closing what is left (0: wait as long "
     "as it takes)."},
    {"device_memory_limit", "N", NULL,
     "Device memory gpuqd may hold on each GPU for requests (0: no limit beyond the GPU's own); "
     "a request over it gets no_memory."},
    {"hello_timeout", "SEC", NULL, "Close a connection that has not said hello by then (0: off)."},
    {"idle_timeout", "SEC", NULL,
     "Close a session with nothing in flight and no traffic for that long (0: off)."},
    {"frame_timeout", "SEC", NULL,
     "Close a connection whose frame's bytes stop arriving for that long (0: off)."},
    {"frame_min_rate", "N", NULL,
     "Bytes per second a frame must arrive at, on average from its first byte, once "
     "frame_timeout has passed; a slower one is closed with timeout (0: off)."},
    {"reply_timeout", "SEC", NULL,
     "Close a connection whose client takes no byte of its queued replies for that long "
     "(0: off)."},
    {"staging_keep", "N", NULL, "Staging memory kept allocated when idle."},
    {"staging_release_after", "SEC", NULL,
     "Give staging memory beyond staging_keep back once no request has reserved any for that "
     "long."},
    {"staging_headroom", "N", NULL,
     "The last bytes of total_staging, kept for sessions that hold no staging (at most half of "
     "it)."},
    {"device_window", "N", NULL,
     "Requests running on one device at once (1 .. 1048576); the rest wait in its queue, by "
     "priority, then arrival."},
    {"bulk_window", "N", NULL,
     "While a higher priority level is active, bytes (input + output) of lower-priority "
     "requests that may run on a device at once (one always may)."},
    {"priority_hold", "SEC", NULL,
     "How long a priority level counts as active after its last compute request (0: only "
     "while its requests wait or run)."},
    {"batch_max", "N", NULL,
     "Small requests that run together as one batch at most (0 .. 1024; 0: each runs alone)."},
    {"batch_bytes", "N", NULL,
     "A request of at most this many input + output bytes may join a batch (at most 16M)."},
    {"io_threads", "N", NULL,
     "Threads that read large payloads and write large replies, so the loop thread never "
     "carries a session's bulk bytes (0 .. 64; 0: the loop moves every byte). Needs a "
     "restart."},
    {"io_bulk_min", "N", NULL,
     "A payload's rest or a reply of at least this many bytes moves on an I/O thread."},
    {"slowlog_len", "N", NULL,
     "Requests the slowlog keeps, the slowest since start or the last reset (0 .. 65536; 0: "
     "off; gpuqctl slowlog)."},
    {"slowlog_min_us", "US", NULL,
     "A request enters the slowlog only when its reply took at least this many microseconds "
     "from its header (0: every request)."},
    {"monitor_queue", "N", NULL,
     "Bytes of records one monitor connection (gpuqctl monitor) may have unread; more records "
     "are dropped and counted in its next one (4K .. 1G)."},
    {"max_header", "N", NULL, "Bytes of one request's header (1 .. 1G)."},
    {"max_payload", "N", NULL, "Bytes of one request's payload (its input arrays)."},
    {"max_output", "N", NULL, "Bytes of one request's result."},
    {"max_inflight", "N", NULL, "Requests in flight per session (1 .. 1048576); more get busy."},
    {"session_staging", "N", NULL,
     "Staging memory (pinned host memory on CUDA) per session; over it, a session waits."},
    {"total_staging", "N", NULL, "Staging memory over all sessions."},
    {"max_sessions", "N", NULL, "Concurrent sessions (1 .. 1048576); more are refused (busy)."},
    {"session_arena", "N", NULL, "Shared-memory arena bytes one session may map (0: no arenas)."},
    {"total_arena", "N", NULL, "Shared-memory arena bytes over all sessions."},
    {"resident_bytes", "N", NULL,
     "Bytes of resident arrays (named arrays gpuqd keeps) one user (uid) may own (0: none)."},
    {"total_resident", "N", NULL, "Bytes of resident arrays over all users."},
    {"admin_group", "GROUP", "none (root only)",
     "Members of this group (and root) may drain, shut down, kill sessions and change limits."},
    {"max_priority", "low|normal|high", NULL,
     "The highest priority a non-admin session gets (also -1, 0, 1)."},
    {"max_sessions_per_user", "N", NULL,
     "Sessions one user (uid) may have open at once; more are refused (busy). 0: a quarter of "
     "max_sessions, at least 1. Root and admins are capped only by max_sessions, unless a "
     "[user] or [group] rule names them."},
};

/* state_dir's row states its longest value (config_keys.c's set_path). */
_Static_assert(CONFIG_LINE_MAX - (sizeof "state_dir = " - 1) == 186, "fix state_dir's help");

/* The flags that are not settings. */
static const opt_doc fixed_docs[] = {
    {"config", "FILE", "none", "Read the settings from FILE (INI), then apply the flags."},
    {"check-config", "FILE", NULL,
     "Print the settings FILE and the flags give (or FILE:LINE: what is wrong) and exit."},
    {"reload", "PID", NULL,
     "Check the settings as --check-config does, then send SIGHUP to the gpuqd with that "
     "process id and exit (the unit's ExecReload=)."},
};

static const opt_doc *opt_doc_of(const char *key)
{
    for (size_t i = 0; i < sizeof opt_docs / sizeof opt_docs[0]; i++)
        if (!strcmp(opt_docs[i].key, key))
            return &opt_docs[i];
    return NULL;
}

/* A setting's built-in value as --help shows it. */
static const char *default_str(const config *d, const config_key *k, char *buf, size_t cap)
{
    uint64_t v;
    if (config_key_is_server_number(k))
        return config_key_value_str(d, k, buf, cap);
    if (!strcmp(k->section, "limits") && gpuq_limits_get(&d->lim, k->name, &v) == 0) {
        static const char suffix[] = "GMK";
        for (unsigned i = 0; i < 3; i++) {
            unsigned shift = 30u - 10u * i;
            if (v && v % (1ull << shift) == 0) {
                snprintf(buf, cap, "%llu%c", (unsigned long long)(v >> shift), suffix[i]);
                return buf;
            }
        }
        snprintf(buf, cap, "%llu", (unsigned long long)v);
        return buf;
    }
    switch (k->id) {
    case KEY_SOCKET_MODE:
        snprintf(buf, cap, "%04o", d->socket_mode);
        return buf;
    case KEY_STATE_DIR:
        return d->state_dir;
    case KEY_DEVICE:
        return d->device;
    case KEY_LOG_LEVEL:
        return config_log_level_str(d->log_level);
    case KEY_MAX_PRIORITY:
        return config_prio_str(d->pol.max_priority, buf, cap);
    case KEY_MAX_SESSIONS_PER_USER:
        snprintf(buf, cap, "%u", d->pol.max_sessions_per_user);
        return buf;
    default:
        return NULL;
    }
}

/* "  --name ARG            text Default: X." wrapped to 80 columns. */
static void usage_opt(FILE *f, const char *name, const char *arg, const char *def, const char *help)
{
    enum { COL = 30, WIDTH = 79 };
    char text[640];
    /* a default is short (a path is at most CONFIG_LINE_MAX bytes) */
    snprintf(text, sizeof text, "%s%s%.200s%s", help, def ? " Default: " : "", def ? def : "",
             def ? "." : "");
    char left[96];
    snprintf(left, sizeof left, "  --%s%s%s", name, arg ? " " : "", arg ? arg : "");
    text_wrap_row(f, left, COL, WIDTH, text);
}

static void config_defaults(config *c);

/* gpuqd --help: every flag with its argument, default and meaning. */
static void usage(FILE *f)
{
    static config d;
    char name[48], buf[48];
    config_defaults(&d);
    fprintf(f, "usage: gpuqd [OPTIONS]\n"
               "\n"
               "gpuqd serves GPU work (normalize, haversine, grid, pairwise, knn) to local\n"
               "processes over a Unix socket. Settings: the built-in defaults, then the\n"
               "--config FILE (INI), then the flags; every setting is a flag named after its\n"
               "config file key with '-' for '_' (--max-inflight is [limits] max_inflight).\n"
               "Flags take their value as --name VALUE or --name=VALUE. Sizes (N) take K, M\n"
               "or G suffixes (1K = 1024); SEC is decimal seconds. SIGHUP re-reads the file\n"
               "and flags (all but socket, socket_mode, socket_group, state_dir, device,\n"
               "device_memory_limit, listen_backlog and io_threads).\n"
               "\n"
               "options:\n");
    for (size_t i = 0; i < sizeof fixed_docs / sizeof fixed_docs[0]; i++)
        usage_opt(f, fixed_docs[i].key, fixed_docs[i].arg, fixed_docs[i].def, fixed_docs[i].help);
    usage_opt(f, "help", NULL, NULL, "Print this help and exit (also -h).");
    usage_opt(f, "version", NULL, NULL,
              "Print gpuqd's version and what it was built with, and exit (also -V).");
    const char *section = "";
    for (int i = 0; i < KEY_COUNT; i++) {
        const config_key *k = config_key_by_id((enum config_key_id)i);
        if (!strcmp(k->section, "rule"))
            continue;
        if (strcmp(section, k->section)) {
            section = k->section;
            fprintf(f, "\n[%s] settings:\n", section);
        }
        snprintf(name, sizeof name, "%s", k->name);
        for (char *p = name; *p; p++)
            if (*p == '_')
                *p = '-';
        const opt_doc *o = opt_doc_of(k->name);
        const char *def = o && o->def ? o->def : default_str(&d, k, buf, sizeof buf);
        usage_opt(f, name, o ? o->arg : "VALUE", def, o ? o->help : "");
    }
    fprintf(f, "\nexit status: 0 ok (and after --help, --version, --check-config); 1 a\n"
               "failure while running; 2 bad flags or settings (or --device cuda without a\n"
               "usable GPU); 3 a lost GPU (device_lost).\n"
               "\n"
               "examples:\n"
               "  gpuqd --device=cpu --socket /tmp/gpuqd.sock\n"
               "  gpuqd --config /etc/gpuq/gpuqd.conf --log-level=debug\n"
               "  gpuqd --check-config /etc/gpuq/gpuqd.conf\n");
}

enum { O_CONFIG = 256, O_CHECK, O_RELOAD, O_VERSION, O_HELP, O_KEY = 512 };

/* The flags: --config, --check-config, --reload, --version, --help, and one per
 * global setting, named after its key with '-' for '_' (config_keys.c), so
 * the two can never disagree. Built once. */
static struct option opts[KEY_COUNT + 6];
static char opt_names[KEY_COUNT][40];

static void config_build_opts(void)
{
    static const struct option fixed[] = {{"config", required_argument, 0, O_CONFIG},
                                          {"check-config", required_argument, 0, O_CHECK},
                                          {"reload", required_argument, 0, O_RELOAD},
                                          {"version", no_argument, 0, O_VERSION},
                                          {"help", no_argument, 0, O_HELP}};
    if (opts[0].name)
        return;
    size_t n = 0;
    for (; n < sizeof fixed / sizeof fixed[0]; n++)
        opts[n] = fixed[n];
    for (int i = 0; i < KEY_COUNT; i++) {
        const config_key *k = config_key_by_id((enum config_key_id)i);
        if (!strcmp(k->section, "rule"))
            continue;
        snprintf(opt_names[i], sizeof opt_names[i], "%s", k->name);
        for (char *p = opt_names[i]; *p; p++)
            if (*p == '_')
                *p = '-';
        opts[n++] = (struct option){opt_names[i], required_argument, 0, O_KEY + i};
    }
    opts[n] = (struct option){0, 0, 0, 0};
}

static void config_defaults(config *c)
{
    memset(c, 0, sizeof *c);
    c->socket_mode = 0660;
    c->socket_gid = (gid_t)-1;
    snprintf(c->state_dir, sizeof c->state_dir, "/var/lib/gpuq");
    c->listen_backlog = SOMAXCONN;
    snprintf(c->device, sizeof c->device, "auto");
    gpuq_limits_default(&c->lim);
    c->log_level = LOG_LVL_INFO;
    c->drain_timeout_s = 30.0;
    c->hello_timeout_s = 10.0;
    c->idle_timeout_s = 0.0;
    c->frame_timeout_s = 30.0;
    c->frame_min_rate = 1ull << 20;
    c->reply_timeout_s = 30.0;
    c->staging_keep = 64ull << 20;
    c->staging_release_s = 5.0;
    c->staging_headroom = 64ull << 20;
    c->device_window = 256;
    c->bulk_window = 8ull << 20;
    c->priority_hold_s = 0.2;
    c->batch_max = 128;
    c->batch_bytes = 64u << 10;
    c->io_threads = 2;
    c->io_bulk_min = 64u << 10;
    c->slowlog_len = 128;
    c->slowlog_min_us = 10000;
    c->monitor_queue = 1u << 20;
    c->pol.admin_gid = (gid_t)-1;
    c->pol.max_priority = GPUQ_PRIO_HIGH;
}

/* getopt_long from the start of argv: "+" stops at the first non-option, so
 * argv is never permuted (reload parses the same argv again); ":" reports a
 * missing argument as ':'; -h and -V are --help and --version. optind = 0
 * makes glibc re-initialise. getopt_long takes "--name=VALUE" as "--name
 * VALUE" (and a unique prefix of a name for the name). */
static int next_opt(int argc, char **argv, bool restart)
{
    if (restart) {
        config_build_opts();
        optind = 0;
        opterr = 0;
    }
    return getopt_long(argc, argv, "+:hV", opts, NULL);
}

/* --reload's PID: a whole decimal number, 1 .. INT_MAX. 0 and negative
 * numbers are refused: kill(2) would take them for a process group or for
 * every process. */
static int parse_pid(const char *s, pid_t *pid)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > INT_MAX)
        return -1;
    *pid = (pid_t)v;
    return 0;
}

/* 0: run; 1: --help/--version (printed when print); -1: bad setting; -2: bad
 * usage (unknown option, missing argument, stray argument). */
static int config_parse(config *c, int argc, char **argv, bool print)
{
    config_defaults(c);
    const char *path = NULL;
    int o;
    bool first = true;
    while ((o = next_opt(argc, argv, first)) != -1) {
        first = false;
        switch (o) {
        case O_CONFIG:
        case O_CHECK:
            if (path && c->check_only != (o == O_CHECK)) {
                snprintf(c->error, sizeof c->error, "give --config or --check-config, not both");
                return -2;
            }
            path = optarg;
            c->check_only = o == O_CHECK;
            break;
        case O_RELOAD:
            if (parse_pid(optarg, &c->reload_pid) < 0) {
                snprintf(c->error, sizeof c->error, "--reload: '%s' is not a process id", optarg);
                return -2;
            }
            break;
        case 'V':
        case O_VERSION:
            if (print)
                printf("gpuqd " GPUQD_VERSION " (%s)\n", GPUQD_FEATURES);
            return 1;
        case 'h':
        case O_HELP:
            if (print)
                usage(stdout);
            return 1;
        case ':':
            snprintf(c->error, sizeof c->error, "option '%s' needs an argument", argv[optind - 1]);
            return -2;
        case '?':
            if (optopt)
                snprintf(c->error, sizeof c->error, "unknown option '-%c'", optopt);
            else
                snprintf(c->error, sizeof c->error, "unknown option '%s'", argv[optind - 1]);
            return -2;
        default:
            break; /* a setting: second pass */
        }
    }
    if (optind < argc) {
        snprintf(c->error, sizeof c->error, "unexpected argument '%s'", argv[optind]);
        return -2;
    }
    if (c->check_only && c->reload_pid) {
        snprintf(c->error, sizeof c->error, "give --check-config or --reload, not both");
        return -2;
    }
    if (path) {
        if (strlen(path) >= sizeof c->config_path) {
            snprintf(c->error, sizeof c->error, "config file path too long");
            return -1;
        }
        snprintf(c->config_path, sizeof c->config_path, "%s", path);
        if (config_file_read(c, path) < 0)
            return -1;
    }
    first = true;
    while ((o = next_opt(argc, argv, first)) != -1) {
        first = false;
        if (o < O_KEY)
            continue;
        const config_key *k = config_key_by_id((enum config_key_id)(o - O_KEY));
        char why[300];
        if (config_key_set(c, NULL, k, optarg, why, sizeof why) < 0) {
            snprintf(c->error, sizeof c->error, "--%s: %s", opt_names[o - O_KEY], why);
            return -1;
        }
    }
    if (c->lim.session_staging > c->lim.total_staging)
        c->lim.session_staging = c->lim.total_staging;
    return 0;
}

int config_load(config *c, int argc, char **argv)
{
    int rc = config_parse(c, argc, argv, true);
    if (rc < 0) {
        fprintf(stderr, "gpuqd: %s\n", c->error);
        if (rc == -2)
            fprintf(stderr, "gpuqd --help lists the options.\n");
        return -1;
    }
    if (rc > 0)
        return 1;
    if (c->check_only) {
        config_print(c, stdout);
        fflush(stdout);
        return 1;
    }
    return 0;
}

int config_reload(config *c, int argc, char **argv)
{
    int rc = config_parse(c, argc, argv, false);
    if (rc > 0) {
        snprintf(c->error, sizeof c->error, "the arguments ask for --help or --version");
        return -1;
    }
    return rc < 0 ? -1 : 0;
}

static void print_rule(const policy_rule *r, FILE *f)
{
    char b[32];
    fprintf(f, "\n[%s %s]\n", r->is_group ? "group" : "user", r->name);
    if (r->max_priority != GPUQ_PRIO_UNSET)
        fprintf(f, "max_priority = %s\n", config_prio_str(r->max_priority, b, sizeof b));
    if (r->max_inflight)
        fprintf(f, "max_inflight = %u\n", r->max_inflight);
    if (r->session_staging)
        fprintf(f, "session_staging = %llu\n", (unsigned long long)r->session_staging);
    if (r->has_session_arena)
        fprintf(f, "session_arena = %llu\n", (unsigned long long)r->session_arena);
    if (r->has_resident_bytes)
        fprintf(f, "resident_bytes = %llu\n", (unsigned long long)r->resident_bytes);
    if (r->max_sessions_per_user)
        fprintf(f, "max_sessions_per_user = %u\n", r->max_sessions_per_user);
}

void config_print(const config *c, FILE *f)
{
    char b[40];
    fprintf(f, "# gpuqd %s settings: the defaults, then %s, then the flags.\n", GPUQD_VERSION,
            c->config_path[0] ? c->config_path : "(no config file)");
    fprintf(f, "[server]\n");
    if (c->socket[0])
        fprintf(f, "socket = %s\n", c->socket);
    else
        fprintf(f, "# socket: not set, so $GPUQ_SOCKET, else $XDG_RUNTIME_DIR/gpuq/gpuqd.sock, "
                   "else /run/gpuq/gpuqd.sock\n");
    fprintf(f, "socket_mode = %04o\n", c->socket_mode);
    if (c->socket_group[0])
        fprintf(f, "socket_group = %s\n", c->socket_group);
    else
        fprintf(f, "# socket_group: not set, so gpuqd's own group\n");
    if (c->state_dir[0])
        fprintf(f, "state_dir = %s\n", c->state_dir);
    else
        fprintf(f, "# state_dir: empty, so no state directory (persistence off)\n"
                   "state_dir =\n");
    fprintf(f, "device = %s\n", c->device);
    fprintf(f, "log_level = %s\n", config_log_level_str(c->log_level));
    for (int i = 0; i < KEY_COUNT; i++) {
        const config_key *k = config_key_by_id((enum config_key_id)i);
        if (config_key_is_server_number(k))
            fprintf(f, "%s = %s\n", k->name, config_key_value_str(c, k, b, sizeof b));
    }
    fprintf(f, "\n[limits]\n");
    fprintf(f, "max_header = %u\n", c->lim.max_header);
    fprintf(f, "max_payload = %llu\n", (unsigned long long)c->lim.max_payload);
    fprintf(f, "max_output = %llu\n", (unsigned long long)c->lim.max_output);
    fprintf(f, "max_inflight = %u\n", c->lim.max_inflight);
    fprintf(f, "session_staging = %llu\n", (unsigned long long)c->lim.session_staging);
    fprintf(f, "total_staging = %llu\n", (unsigned long long)c->lim.total_staging);
    fprintf(f, "max_sessions = %u\n", c->lim.max_sessions);
    fprintf(f, "session_arena = %llu\n", (unsigned long long)c->lim.session_arena);
    fprintf(f, "total_arena = %llu\n", (unsigned long long)c->lim.total_arena);
    fprintf(f, "resident_bytes = %llu\n", (unsigned long long)c->lim.resident_bytes);
    fprintf(f, "total_resident = %llu\n", (unsigned long long)c->lim.total_resident);
    fprintf(f, "\n[policy]\n");
    if (c->pol.admin_group[0])
        fprintf(f, "admin_group = %s\n", c->pol.admin_group);
    else
        fprintf(f, "admin_group =\n");
    fprintf(f, "max_priority = %s\n", config_prio_str(c->pol.max_priority, b, sizeof b));
    if (!c->pol.max_sessions_per_user)
        fprintf(f, "# max_sessions_per_user 0: a quarter of max_sessions, at least 1 (%u)\n",
                policy_sessions_per_user(c));
    fprintf(f, "max_sessions_per_user = %u\n", c->pol.max_sessions_per_user);
    for (int i = 0; i < c->pol.nrules; i++)
        print_rule(&c->pol.rules[i], f);
}

static const policy_rule *rule_find(const gpuq_policy *pol, bool is_group, uint32_t id)
{
    for (int i = 0; i < pol->nrules; i++)
        if (pol->rules[i].is_group == is_group && pol->rules[i].id == id)
            return &pol->rules[i];
    return NULL;
}

static const char *rule_prio_str(int prio, char *buf, size_t cap)
{
    return prio == GPUQ_PRIO_UNSET ? "unset" : config_prio_str(prio, buf, cap);
}

/* A rule's session_arena or resident_bytes (a value with its own "set"
 * flag) as the reload log says it: "unset", or the bytes (0 is a value
 * there: arenas off, no resident arrays). */
static const char *rule_flagged_str(bool set, uint64_t v, char *buf, size_t cap)
{
    if (!set)
        return "unset";
    snprintf(buf, cap, "%llu", (unsigned long long)v);
    return buf;
}

/* One info line per field of a rule present before and after. */
static int log_rule_changes(const policy_rule *o, const policy_rule *n)
{
    const char *what = n->is_group ? "group" : "user";
    char a[32], b[32];
    int count = 0;
    if (o->max_priority != n->max_priority) {
        log_info("reload: policy: [%s %s] max_priority %s -> %s", what, n->name,
                 rule_prio_str(o->max_priority, a, sizeof a),
                 rule_prio_str(n->max_priority, b, sizeof b));
        count++;
    }
    if (o->max_inflight != n->max_inflight) {
        log_info("reload: policy: [%s %s] max_inflight %u -> %u (0: unset)", what, n->name,
                 o->max_inflight, n->max_inflight);
        count++;
    }
    if (o->session_staging != n->session_staging) {
        log_info("reload: policy: [%s %s] session_staging %llu -> %llu (0: unset)", what, n->name,
                 (unsigned long long)o->session_staging, (unsigned long long)n->session_staging);
        count++;
    }
    if (o->has_session_arena != n->has_session_arena ||
        (n->has_session_arena && o->session_arena != n->session_arena)) {
        log_info("reload: policy: [%s %s] session_arena %s -> %s (0: arenas off)", what, n->name,
                 rule_flagged_str(o->has_session_arena, o->session_arena, a, sizeof a),
                 rule_flagged_str(n->has_session_arena, n->session_arena, b, sizeof b));
        count++;
    }
    if (o->has_resident_bytes != n->has_resident_bytes ||
        (n->has_resident_bytes && o->resident_bytes != n->resident_bytes)) {
        log_info("reload: policy: [%s %s] resident_bytes %s -> %s (0: no resident arrays)", what,
                 n->name, rule_flagged_str(o->has_resident_bytes, o->resident_bytes, a, sizeof a),
                 rule_flagged_str(n->has_resident_bytes, n->resident_bytes, b, sizeof b));
        count++;
    }
    if (o->max_sessions_per_user != n->max_sessions_per_user) {
        log_info("reload: policy: [%s %s] max_sessions_per_user %u -> %u (0: unset)", what, n->name,
                 o->max_sessions_per_user, n->max_sessions_per_user);
        count++;
    }
    return count;
}

static int log_policy_changes(const gpuq_policy *o, const gpuq_policy *n)
{
    char a[32], b[32];
    int count = 0;
    if (strcmp(o->admin_group, n->admin_group) || o->admin_gid != n->admin_gid) {
        log_info("reload: admin_group %s -> %s", o->admin_group[0] ? o->admin_group : "(root only)",
                 n->admin_group[0] ? n->admin_group : "(root only)");
        count++;
    }
    if (o->max_priority != n->max_priority) {
        log_info("reload: max_priority %s -> %s", config_prio_str(o->max_priority, a, sizeof a),
                 config_prio_str(n->max_priority, b, sizeof b));
        count++;
    }
    if (o->max_sessions_per_user != n->max_sessions_per_user) {
        log_info("reload: max_sessions_per_user %u -> %u (0: a quarter of max_sessions)",
                 o->max_sessions_per_user, n->max_sessions_per_user);
        count++;
    }
    for (int i = 0; i < o->nrules; i++) {
        const policy_rule *r = &o->rules[i];
        if (!rule_find(n, r->is_group, r->id)) {
            log_info("reload: policy: [%s %s] removed", r->is_group ? "group" : "user", r->name);
            count++;
        }
    }
    for (int i = 0; i < n->nrules; i++) {
        const policy_rule *r = &n->rules[i];
        const policy_rule *old = rule_find(o, r->is_group, r->id);
        if (!old) {
            log_info("reload: policy: [%s %s] added", r->is_group ? "group" : "user", r->name);
            count++;
        } else {
            count += log_rule_changes(old, r);
        }
    }
    return count;
}

#define LOG_CHANGED(field, fmt, cast)                                                              \
    do {                                                                                           \
        if (o->lim.field != n->lim.field) {                                                        \
            log_info("reload: " #field " " fmt " -> " fmt, (cast)o->lim.field,                     \
                     (cast)n->lim.field);                                                          \
            count++;                                                                               \
        }                                                                                          \
    } while (0)

int config_log_changes(const config *o, const config *n)
{
    int count = 0;
    if (strcmp(o->socket, n->socket))
        log_warn("reload: socket %s -> %s needs a restart; ignored",
                 o->socket[0] ? o->socket : "(default)", n->socket[0] ? n->socket : "(default)");
    if (o->socket_mode != n->socket_mode)
        log_warn("reload: socket_mode %04o -> %04o needs a restart; ignored", o->socket_mode,
                 n->socket_mode);
    if (strcmp(o->socket_group, n->socket_group) || o->socket_gid != n->socket_gid)
        log_warn("reload: socket_group %s -> %s needs a restart; ignored",
                 o->socket_group[0] ? o->socket_group : "(none)",
                 n->socket_group[0] ? n->socket_group : "(none)");
    if (strcmp(o->state_dir, n->state_dir))
        log_warn("reload: state_dir %s -> %s needs a restart; ignored",
                 o->state_dir[0] ? o->state_dir : "(none)",
                 n->state_dir[0] ? n->state_dir : "(none)");
    if (strcmp(o->device, n->device))
        log_warn("reload: device %s -> %s needs a restart; ignored", o->device, n->device);
    LOG_CHANGED(max_header, "%u", unsigned);
    LOG_CHANGED(max_payload, "%llu", unsigned long long);
    LOG_CHANGED(max_output, "%llu", unsigned long long);
    LOG_CHANGED(max_inflight, "%u", unsigned);
    LOG_CHANGED(session_staging, "%llu", unsigned long long);
    LOG_CHANGED(total_staging, "%llu", unsigned long long);
    LOG_CHANGED(max_sessions, "%u", unsigned);
    LOG_CHANGED(session_arena, "%llu", unsigned long long);
    LOG_CHANGED(total_arena, "%llu", unsigned long long);
    LOG_CHANGED(resident_bytes, "%llu", unsigned long long);
    LOG_CHANGED(total_resident, "%llu", unsigned long long);
    if (o->log_level != n->log_level) {
        log_info("reload: log_level %s -> %s", config_log_level_str(o->log_level),
                 config_log_level_str(n->log_level));
        count++;
    }
    for (int i = 0; i < KEY_COUNT; i++) {
        const config_key *k = config_key_by_id((enum config_key_id)i);
        char a[40], b[40];
        if (!config_key_is_server_number(k) || !strcmp(config_key_value_str(o, k, a, sizeof a),
                                                       config_key_value_str(n, k, b, sizeof b)))
            continue;
        if (config_key_needs_restart(k)) {
            log_warn("reload: %s %s -> %s needs a restart; ignored", k->name, a, b);
        } else {
            log_info("reload: %s %s -> %s", k->name, a, b);
            count++;
        }
    }
    return count + log_policy_changes(&o->pol, &n->pol);
}
