/* SPDX-License-Identifier: Apache-2.0 */
/* config_keys.c - see config_keys.h. */
#include "config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "header.h"
#include "log.h"

_Static_assert(CONFIG_LINE_MAX == INI_MAX_LINE - 2, "config_file.c's line limit is inih's buffer");

enum {
    KIND_PATH,      /* a path: socket */
    KIND_DIR,       /* a directory path, "" for none: state_dir */
    KIND_MODE,      /* octal file mode */
    KIND_DEVICE,    /* auto | cuda | cpu */
    KIND_LOG_LEVEL, /* error | warn | info | debug */
    KIND_SECONDS,   /* decimal seconds */
    KIND_COUNT,     /* integer, K/M/G suffixes allowed (as the flags always did) */
    KIND_SIZE,      /* bytes, K/M/G suffixes */
    KIND_PRIO,      /* low | normal | high, or -1 | 0 | 1 */
    KIND_GROUP,     /* group name or gid; "" allowed */
};

#define U64 UINT64_MAX
static const config_key keys[KEY_COUNT] = {
    {KEY_SOCKET, "server", "socket", KIND_PATH, 0, 0},
    {KEY_SOCKET_MODE, "server", "socket_mode", KIND_MODE, 0, 0777},
    {KEY_SOCKET_GROUP, "server", "socket_group", KIND_GROUP, 0, 0},
    {KEY_STATE_DIR, "server", "state_dir", KIND_DIR, 0, 0},
    {KEY_LISTEN_BACKLOG, "server", "listen_backlog", KIND_COUNT, 1, 1u << 20},
    {KEY_DEVICE, "server", "device", KIND_DEVICE, 0, 0},
    {KEY_LOG_LEVEL, "server", "log_level", KIND_LOG_LEVEL, 0, 0},
    {KEY_DRAIN_TIMEOUT, "server", "drain_timeout", KIND_SECONDS, 0, 86400},
    {KEY_DEVICE_MEMORY_LIMIT, "server", "device_memory_limit", KIND_SIZE, 0, U64},
    {KEY_HELLO_TIMEOUT, "server", "hello_timeout", KIND_SECONDS, 0, 86400},
    {KEY_IDLE_TIMEOUT, "server", "idle_timeout", KIND_SECONDS, 0, 86400 * 365},
    {KEY_FRAME_TIMEOUT, "server", "frame_timeout", KIND_SECONDS, 0, 86400},
    {KEY_FRAME_MIN_RATE, "server", "frame_min_rate", KIND_SIZE, 0, U64},
    {KEY_REPLY_TIMEOUT, "server", "reply_timeout", KIND_SECONDS, 0, 86400},
    {KEY_STAGING_KEEP, "server", "staging_keep", KIND_SIZE, 0, U64},
    {KEY_STAGING_RELEASE_AFTER, "server", "staging_release_after", KIND_SECONDS, 0, 86400},
    {KEY_STAGING_HEADROOM, "server", "staging_headroom", KIND_SIZE, 0, U64},
    {KEY_DEVICE_WINDOW, "server", "device_window", KIND_COUNT, 1, 1u << 20},
    {KEY_BULK_WINDOW, "server", "bulk_window", KIND_SIZE, 0, U64},
    {KEY_PRIORITY_HOLD, "server", "priority_hold", KIND_SECONDS, 0, 3600},
    {KEY_BATCH_MAX, "server", "batch_max", KIND_COUNT, 0, 1024},
    {KEY_BATCH_BYTES, "server", "batch_bytes", KIND_SIZE, 0, 1u << 24},
    {KEY_IO_THREADS, "server", "io_threads", KIND_COUNT, 0, 64},
    {KEY_IO_BULK_MIN, "server", "io_bulk_min", KIND_SIZE, 1, U64},
    /* request/request_log.c: the slowlog and the monitors */
    {KEY_SLOWLOG_LEN, "server", "slowlog_len", KIND_COUNT, 0, 1u << 16},
    {KEY_SLOWLOG_MIN_US, "server", "slowlog_min_us", KIND_COUNT, 0, 86400ull * 1000000},
    {KEY_MONITOR_QUEUE, "server", "monitor_queue", KIND_SIZE, 4096, 1u << 30},
    /* [limits]: names, fields and ranges are proto's (gpuq_limits_set) */
    {KEY_MAX_HEADER, "limits", "max_header", KIND_SIZE, 0, 0},
    {KEY_MAX_PAYLOAD, "limits", "max_payload", KIND_SIZE, 0, 0},
    {KEY_MAX_OUTPUT, "limits", "max_output", KIND_SIZE, 0, 0},
    {KEY_MAX_INFLIGHT, "limits", "max_inflight", KIND_COUNT, 0, 0},
    {KEY_SESSION_STAGING, "limits", "session_staging", KIND_SIZE, 0, 0},
    {KEY_TOTAL_STAGING, "limits", "total_staging", KIND_SIZE, 0, 0},
    {KEY_MAX_SESSIONS, "limits", "max_sessions", KIND_COUNT, 0, 0},
    {KEY_SESSION_ARENA, "limits", "session_arena", KIND_SIZE, 0, 0},
    {KEY_TOTAL_ARENA, "limits", "total_arena", KIND_SIZE, 0, 0},
    {KEY_RESIDENT_BYTES, "limits", "resident_bytes", KIND_SIZE, 0, 0},
    {KEY_TOTAL_RESIDENT, "limits", "total_resident", KIND_SIZE, 0, 0},
    {KEY_ADMIN_GROUP, "policy", "admin_group", KIND_GROUP, 0, 0},
    {KEY_MAX_PRIORITY, "policy", "max_priority", KIND_PRIO, 0, 0},
    /* 0: a quarter of max_sessions (policy_sessions_per_user) */
    {KEY_MAX_SESSIONS_PER_USER, "policy", "max_sessions_per_user", KIND_COUNT, 0, 1u << 20},
    {KEY_RULE_MAX_PRIORITY, "rule", "max_priority", KIND_PRIO, 0, 0},
    {KEY_RULE_MAX_INFLIGHT, "rule", "max_inflight", KIND_COUNT, 1, 1u << 20},
    {KEY_RULE_SESSION_STAGING, "rule", "session_staging", KIND_SIZE, 1, U64},
    {KEY_RULE_SESSION_ARENA, "rule", "session_arena", KIND_SIZE, 0, U64}, /* 0: arenas off */
    /* 0: the peer may store no resident arrays */
    {KEY_RULE_RESIDENT_BYTES, "rule", "resident_bytes", KIND_SIZE, 0, U64},
    {KEY_RULE_MAX_SESSIONS_PER_USER, "rule", "max_sessions_per_user", KIND_COUNT, 1, 1u << 20},
};

int config_parse_size(const char *s, uint64_t *out)
{
    errno = 0;
    char *end;
    if (!s || !*s || *s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    unsigned shift = 0;
    if (*end) {
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        default:
            return -1;
        }
        end++;
        if (*end == 'i' || *end == 'B')
            end++;
        if (*end == 'B')
            end++;
        if (*end)
            return -1;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int config_parse_priority(const char *s, int *prio)
{
    return gpuq_prio_parse(s, prio) == 0 ? 0 : -1;
}

const config_key *config_key_find(const char *section, const char *name)
{
    for (int i = 0; i < KEY_COUNT; i++) {
        const config_key *k = &keys[i];
        bool sec_ok = section ? !strcmp(section, k->section) : strcmp(k->section, "rule") != 0;
        if (sec_ok && !strcmp(name, k->name))
            return k;
    }
    return NULL;
}

const config_key *config_key_by_id(enum config_key_id id)
{
    return (unsigned)id < KEY_COUNT ? &keys[id] : NULL;
}

void *config_key_field(config *c, const config_key *k)
{
    switch (k->id) {
    case KEY_DRAIN_TIMEOUT:
        return &c->drain_timeout_s;
    case KEY_HELLO_TIMEOUT:
        return &c->hello_timeout_s;
    case KEY_IDLE_TIMEOUT:
        return &c->idle_timeout_s;
    case KEY_FRAME_TIMEOUT:
        return &c->frame_timeout_s;
    case KEY_FRAME_MIN_RATE:
        return &c->frame_min_rate;
    case KEY_REPLY_TIMEOUT:
        return &c->reply_timeout_s;
    case KEY_STAGING_RELEASE_AFTER:
        return &c->staging_release_s;
    case KEY_DEVICE_MEMORY_LIMIT:
        return &c->device_memory_limit;
    case KEY_STAGING_KEEP:
        return &c->staging_keep;
    case KEY_STAGING_HEADROOM:
        return &c->staging_headroom;
    case KEY_DEVICE_WINDOW:
        return &c->device_window;
    case KEY_BULK_WINDOW:
        return &c->bulk_window;
    case KEY_PRIORITY_HOLD:
        return &c->priority_hold_s;
    case KEY_BATCH_MAX:
        return &c->batch_max;
    case KEY_BATCH_BYTES:
        return &c->batch_bytes;
    case KEY_LISTEN_BACKLOG:
        return &c->listen_backlog;
    case KEY_IO_THREADS:
        return &c->io_threads;
    case KEY_IO_BULK_MIN:
        return &c->io_bulk_min;
    case KEY_SLOWLOG_LEN:
        return &c->slowlog_len;
    case KEY_SLOWLOG_MIN_US:
        return &c->slowlog_min_us;
    case KEY_MONITOR_QUEUE:
        return &c->monitor_queue;
    default:
        return NULL;
    }
}

const void *config_key_cfield(const config *c, const config_key *k)
{
    return config_key_field((config *)c, k);
}

bool config_key_is_server_number(const config_key *k)
{
    static config probe; /* only its field addresses are looked at */
    return config_key_field(&probe, k) != NULL;
}

bool config_key_needs_restart(const config_key *k)
{
    return k->id == KEY_SOCKET || k->id == KEY_SOCKET_MODE || k->id == KEY_SOCKET_GROUP ||
           k->id == KEY_STATE_DIR || k->id == KEY_DEVICE || k->id == KEY_DEVICE_MEMORY_LIMIT ||
           k->id == KEY_LISTEN_BACKLOG || k->id == KEY_IO_THREADS;
}

int config_resolve_id(const char *name, int is_group, uint32_t *id)
{
    if (!name || !*name)
        return -1;
    if (strspn(name, "0123456789") == strlen(name)) {
        errno = 0;
        unsigned long long v = strtoull(name, NULL, 10);
        if (errno || v >= UINT32_MAX) /* (uid_t)-1 is "no user" */
            return -1;
        *id = (uint32_t)v;
        return 0;
    }
    if (is_group) {
        struct group *g = getgrnam(name);
        if (!g)
            return -1;
        *id = (uint32_t)g->gr_gid;
    } else {
        struct passwd *p = getpwnam(name);
        if (!p)
            return -1;
        *id = (uint32_t)p->pw_uid;
    }
    return 0;
}

const char *config_prio_str(int prio, char *buf, size_t cap)
{
    const char *name = gpuq_prio_name(prio);
    if (name)
        return name;
    snprintf(buf, cap, "%d", prio); /* not a level: only a bug gets here */
    return buf;
}

const char *config_log_level_str(int level)
{
    switch (level) {
    case LOG_LVL_ERROR:
        return "error";
    case LOG_LVL_WARN:
        return "warn";
    case LOG_LVL_INFO:
        return "info";
    case LOG_LVL_DEBUG:
        return "debug";
    default:
        return "?";
    }
}

const char *config_seconds_str(double s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.15g", s);
    if (strtod(buf, NULL) != s)
        snprintf(buf, cap, "%.17g", s);
    return buf;
}

/* "16K", "1G" when v is a whole multiple, else the number. */
static const char *size_str(uint64_t v, char *buf, size_t cap)
{
    static const char suffix[] = "GMK";
    for (int i = 0; i < 3; i++) {
        unsigned shift = 30u - 10u * (unsigned)i;
        if (v && v % (1ull << shift) == 0) {
            snprintf(buf, cap, "%llu%c", (unsigned long long)(v >> shift), suffix[i]);
            return buf;
        }
    }
    snprintf(buf, cap, "%llu", (unsigned long long)v);
    return buf;
}

const char *config_key_value_str(const config *c, const config_key *k, char *buf, size_t cap)
{
    const void *f = config_key_cfield(c, k);
    if (!f)
        return "";
    if (k->kind == KIND_SECONDS)
        return config_seconds_str(*(const double *)f, buf, cap);
    if (k->kind == KIND_COUNT) { /* a count reads best as a number: 4096, not 4K */
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)f);
        return buf;
    }
    return size_str(*(const uint64_t *)f, buf, cap);
}

/* A path (not empty) that config_print can write as "socket = PATH" for
 * inih to read back the same: no space at either end, no line break, and no
 * ';' or '#' first or after a space (inih takes those for a comment). */
static bool path_printable(const char *s)
{
    size_t n = strlen(s);
    if (isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n' ||
            ((s[i] == '#' || s[i] == ';') && (i == 0 || isspace((unsigned char)s[i - 1]))))
            return false;
    }
    return true;
}

/* The string a KIND_PATH or KIND_DIR key sets, and its size; NULL for
 * other keys. */
static char *path_field(config *c, const config_key *k, size_t *size)
{
    switch (k->id) {
    case KEY_SOCKET:
        *size = sizeof c->socket;
        return c->socket;
    case KEY_STATE_DIR:
        *size = sizeof c->state_dir;
        return c->state_dir;
    default:
        return NULL;
    }
}

/* socket or state_dir (by k): at most what its field holds and what one
 * config file line holds after "NAME = ", printable there; "" only for a
 * KIND_DIR key (no directory). */
static int set_path(config *c, const config_key *k, const char *value, char *why, size_t cap)
{
    size_t size = 0, n = strlen(value);
    char *dst = path_field(c, k, &size);
    if (!dst) {
        snprintf(why, cap, "internal error: key %s has no field", k->name);
        return -1;
    }
    size_t line_room = CONFIG_LINE_MAX - strlen(k->name) - strlen(" = ");
    if (n >= size || n > line_room) {
        if (line_room < size - 1)
            snprintf(why, cap,
                     "path longer than %zu bytes (\"%s = PATH\" must fit in a config file "
                     "line of %d characters)",
                     line_room, k->name, CONFIG_LINE_MAX);
        else
            snprintf(why, cap, "path longer than %zu bytes", size - 1);
        return -1;
    }
    if (n && !path_printable(value)) {
        snprintf(why, cap,
                 "a path with a space at either end, a line break, or ';' or '#' "
                 "first or after a space cannot be written in a config file");
        return -1;
    }
    snprintf(dst, size, "%s", value);
    return 0;
}

static int set_number(const config_key *k, const char *value, uint64_t *out, char *why, size_t cap)
{
    uint64_t v, min = k->min, max = k->max;
    if (config_parse_size(value, &v) < 0) {
        snprintf(why, cap, "bad %s '%s' (a number with an optional K, M or G suffix)",
                 k->kind == KIND_SIZE ? "size" : "number", value);
        return -1;
    }
    if (!strcmp(k->section, "limits") && gpuq_limits_range(k->name, &min, &max) < 0) {
        snprintf(why, cap, "internal error: %s is not a limit", k->name);
        return -1;
    }
    if (v < min || v > max) {
        char lo[32], hi[32];
        if (max == U64)
            snprintf(why, cap, "'%s' out of range (at least %llu)", value, (unsigned long long)min);
        else if (k->kind == KIND_SIZE)
            snprintf(why, cap, "'%s' out of range (%s .. %s)", value, size_str(min, lo, sizeof lo),
                     size_str(max, hi, sizeof hi));
        else
            snprintf(why, cap, "'%s' out of range (%llu .. %llu)", value, (unsigned long long)min,
                     (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

static int set_mode(const config_key *k, const char *value, unsigned *out, char *why, size_t cap)
{
    if (strspn(value, "01234567") != strlen(value) || strlen(value) > 12) {
        snprintf(why, cap, "bad octal mode '%s'", value);
        return -1;
    }
    unsigned long v = strtoul(value, NULL, 8);
    if (v > k->max) {
        snprintf(why, cap, "'%s' out of range (0000 .. %04llo)", value, (unsigned long long)k->max);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

static int set_seconds(const config_key *k, const char *value, double *out, char *why, size_t cap)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end || errno == ERANGE || !isfinite(v)) {
        snprintf(why, cap, "bad number of seconds '%s'", value);
        return -1;
    }
    if (v < (double)k->min || v > (double)k->max) {
        snprintf(why, cap, "'%s' out of range (%llu .. %llu seconds)", value,
                 (unsigned long long)k->min, (unsigned long long)k->max);
        return -1;
    }
    *out = v;
    return 0;
}

static int set_prio(const char *value, int *out, char *why, size_t cap)
{
    if (config_parse_priority(value, out) < 0) {
        snprintf(why, cap, "bad priority '%s' (low, normal or high; or -1, 0, 1)", value);
        return -1;
    }
    return 0;
}

/* admin_group or socket_group (by k): a name or number, "" for none. */
static int set_group(config *c, const config_key *k, const char *value, char *why, size_t cap)
{
    bool sock = k->id == KEY_SOCKET_GROUP;
    char *name = sock ? c->socket_group : c->pol.admin_group;
    gid_t *gid = sock ? &c->socket_gid : &c->pol.admin_gid;
    uint32_t id = 0;
    if (!*value) {
        name[0] = '\0';
        *gid = (gid_t)-1;
        return 0;
    }
    if (strlen(value) >= GPUQ_NAME_MAX) {
        snprintf(why, cap, "group name longer than %d bytes", GPUQ_NAME_MAX - 1);
        return -1;
    }
    if (config_resolve_id(value, 1, &id) < 0) {
        snprintf(why, cap, "unknown group '%s'", value);
        return -1;
    }
    snprintf(name, GPUQ_NAME_MAX, "%s", value);
    *gid = (gid_t)id;
    return 0;
}

int config_key_set(config *c, policy_rule *rule, const config_key *k, const char *value, char *why,
                   size_t cap)
{
    /* a group or a directory may be "" (none); every other value may not */
    if (!value || (!*value && k->kind != KIND_GROUP && k->kind != KIND_DIR)) {
        snprintf(why, cap, "empty value");
        return -1;
    }
    if ((rule != NULL) != !strcmp(k->section, "rule")) {
        snprintf(why, cap, "not valid here");
        return -1;
    }
    uint64_t v = 0;
    int lvl;
    switch (k->kind) {
    case KIND_PATH:
    case KIND_DIR:
        return set_path(c, k, value, why, cap);
    case KIND_MODE:
        return set_mode(k, value, &c->socket_mode, why, cap);
    case KIND_DEVICE:
        if (strcmp(value, "auto") && strcmp(value, "cuda") && strcmp(value, "cpu")) {
            snprintf(why, cap, "bad device '%s' (auto, cuda or cpu)", value);
            return -1;
        }
        snprintf(c->device, sizeof c->device, "%s", value);
        return 0;
    case KIND_LOG_LEVEL:
        if ((lvl = log_level_parse(value)) < 0) {
            snprintf(why, cap, "bad log level '%s' (error, warn, info or debug)", value);
            return -1;
        }
        c->log_level = lvl;
        return 0;
    case KIND_SECONDS:
        if (!config_key_field(c, k)) {
            snprintf(why, cap, "internal error: key %s has no field", k->name);
            return -1;
        }
        return set_seconds(k, value, config_key_field(c, k), why, cap);
    case KIND_PRIO:
        return set_prio(value, rule ? &rule->max_priority : &c->pol.max_priority, why, cap);
    case KIND_GROUP:
        return set_group(c, k, value, why, cap);
    case KIND_COUNT:
    case KIND_SIZE:
        if (set_number(k, value, &v, why, cap) < 0)
            return -1;
        break;
    default:
        snprintf(why, cap, "internal error: key kind %d", k->kind);
        return -1;
    }
    if (!strcmp(k->section, "limits"))
        return gpuq_limits_set(&c->lim, k->name, v, NULL, why, cap);
    uint64_t *field = config_key_field(c, k);
    if (field) {
        *field = v;
        return 0;
    }
    switch (k->id) {
    case KEY_RULE_MAX_INFLIGHT:
        rule->max_inflight = (uint32_t)v;
        break;
    case KEY_RULE_SESSION_STAGING:
        rule->session_staging = v;
        break;
    case KEY_RULE_SESSION_ARENA:
        rule->session_arena = v;
        rule->has_session_arena = true;
        break;
    case KEY_RULE_RESIDENT_BYTES:
        rule->resident_bytes = v;
        rule->has_resident_bytes = true;
        break;
    case KEY_MAX_SESSIONS_PER_USER:
        c->pol.max_sessions_per_user = (uint32_t)v;
        break;
    case KEY_RULE_MAX_SESSIONS_PER_USER:
        rule->max_sessions_per_user = (uint32_t)v;
        break;
    default:
        snprintf(why, cap, "internal error: key %s", k->name);
        return -1;
    }
    return 0;
}
