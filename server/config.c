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

#include "config_file.h"
#include "config_keys.h"
#include "header.h"
#include "log.h"

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

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuqd [--config FILE | --check-config FILE] [--socket PATH]\n"
               "             [--socket-mode OCTAL] [--socket-group NAME]\n"
               "             [--device auto|cuda|cpu]\n"
               "             [--log-level error|warn|info|debug] [--drain-timeout SEC]\n"
               "             [--max-header N] [--max-payload N] [--max-output N]\n"
               "             [--max-inflight N] [--session-staging N] [--total-staging N]\n"
               "             [--max-sessions N] [--device-memory-limit N] [--admin-group NAME]\n"
               "             [--max-priority low|normal|high] [--hello-timeout SEC]\n"
               "             [--idle-timeout SEC] [--frame-timeout SEC] [--staging-keep N]\n"
               "             [--staging-release-after SEC] [--staging-headroom N]\n"
               "             [--reload PID] [--version] [--help]\n"
               "Settings: the defaults, then the --config FILE (INI), then the flags.\n"
               "--check-config FILE prints the settings FILE and the flags give, and exits.\n"
               "--reload PID checks the settings like --check-config, then sends SIGHUP to\n"
               "the gpuqd with that process id and exits (the unit's ExecReload=).\n"
               "Sizes accept K, M, G suffixes. Socket: --socket, else $GPUQ_SOCKET, else\n"
               "$XDG_RUNTIME_DIR/gpuq/gpuqd.sock, else /run/gpuq/gpuqd.sock.\n"
               "--socket-group NAME gives the socket gpuqd binds, and the directory it makes\n"
               "for it (then mode 0750), to group NAME: as root, --socket-group gpuq lets\n"
               "the members of gpuq connect. (systemd's socket has its own SocketGroup=.)\n"
               "SIGHUP re-reads the file and flags (limits, log level, drain timeout, policy);\n"
               "socket, socket_mode, socket_group, device, device_memory_limit need a restart.\n");
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
    snprintf(c->device, sizeof c->device, "auto");
    gpuq_limits_default(&c->lim);
    c->log_level = LOG_LVL_INFO;
    c->drain_timeout_s = 30.0;
    c->hello_timeout_s = 10.0;
    c->idle_timeout_s = 0.0;
    c->frame_timeout_s = 30.0;
    c->staging_keep = 64ull << 20;
    c->staging_release_s = 5.0;
    c->staging_headroom = 64ull << 20;
    c->pol.admin_gid = (gid_t)-1;
    c->pol.max_priority = GPUQ_PRIO_HIGH;
}

/* getopt_long from the start of argv: "+" stops at the first non-option, so
 * argv is never permuted (reload parses the same argv again); ":" reports a
 * missing argument as ':'. optind = 0 makes glibc re-initialise. */
static int next_opt(int argc, char **argv, bool restart)
{
    if (restart) {
        config_build_opts();
        optind = 0;
        opterr = 0;
    }
    return getopt_long(argc, argv, "+:", opts, NULL);
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
        case O_VERSION:
            if (print)
                printf("gpuqd " GPUQD_VERSION " (%s)\n", GPUQD_FEATURES);
            return 1;
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
            usage(stderr);
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
    fprintf(f, "\n[policy]\n");
    if (c->pol.admin_group[0])
        fprintf(f, "admin_group = %s\n", c->pol.admin_group);
    else
        fprintf(f, "admin_group =\n");
    fprintf(f, "max_priority = %s\n", config_prio_str(c->pol.max_priority, b, sizeof b));
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

/* A rule's session_arena as the reload log says it: "unset", or the bytes
 * (0 is a value there: arenas off). */
static const char *rule_arena_str(const policy_rule *r, char *buf, size_t cap)
{
    if (!r->has_session_arena)
        return "unset";
    snprintf(buf, cap, "%llu", (unsigned long long)r->session_arena);
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
                 rule_arena_str(o, a, sizeof a), rule_arena_str(n, b, sizeof b));
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
