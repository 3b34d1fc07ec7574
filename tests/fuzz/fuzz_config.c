/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_config.c - libFuzzer target for gpuqd's config file parser
 * (server/service/config.c, config_file.c, config_keys.c over libinih): sections,
 * keys and values of every kind, [user NAME] / [group NAME] policy rules.
 *
 * An input is a gpuqd.conf, written to a memfd and read as
 * "gpuqd [FLAGS] --config /proc/self/fd/N" reads it (config_reload, the
 * SIGHUP path, which prints nothing). Two comment lines give it more:
 *   #ARGS --max-inflight 3 --device cpu   (first line) command-line flags,
 *                                         split at spaces, applied over
 *                                         the file (any flag starting
 *                                         "--c" is dropped: no fuzzed
 *                                         --config or --check-config PATH)
 *   #---                                  the text after it is a second
 *                                         file B, read with the same flags
 *                                         (a reload from A to B)
 * Beyond "never crash" it checks, and aborts on a breach (fuzz_fail):
 *  - a refused file: a one-line error naming the file (and its line, for
 *    an error inside it), or a flag's error;
 *  - an accepted file: every setting within its documented bounds (the
 *    ranges of systemd/gpuqd.conf, README and PROTOCOL.md, written out here
 *    again, not taken from config_keys.c's table), at most 64 rules, each
 *    with a valid name and values and a (kind, id) of its own;
 *  - config_print of it is a file that parses back (without the flags) to
 *    the same settings, field by field (cfg_fields, pol_fields,
 *    rule_fields: tables proved complete at start-up by
 *    fuzz_fields_check), and config_log_changes finds no change between
 *    the two;
 *  - config_log_changes counts as many changes from A to B as from B to A
 *    (the defaults when there is no B), and none from A to A.
 * User and group names resolve through the system's databases, as gpuqd's
 * would.
 *
 * Built with -DGPUQ_FUZZ_REPLAY (fuzz_config_replay, a unit test) it gets a
 * main() that replays built-in inputs and the files named on the command
 * line, each cut at every byte; after --corpus it then fails unless the
 * files brought an accepted file with a rule of each kind, a rule with
 * session_arena 0 (arenas off: a value, not "unset"), and a refused one.
 */
#include "config.h"
#include "config_keys.h"
#include "header.h"
#include "log.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_fields.h"
#include "fuzz_replay.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

static int in_fd = -1, out_fd = -1;
static char in_path[64], out_path[64];

/* What the inputs reached (the replay test's floor). */
static unsigned long n_ok, n_refused, n_user_rules, n_group_rules, n_arena_off_rules;

/* ---- the fields of a config, and what a print + parse keeps ---- */

enum cfg_rule {
    CF_SAME,   /* the same bytes */
    CF_STR,    /* the same string */
    CF_POLICY, /* pol_fields */
    CF_RULES,  /* rule_fields, for the first nrules */
    CF_SKIP,   /* not a setting: config_path, reload_pid, error, the line a rule was read from */
};
#define CF(m, r) FUZZ_FIELD(config, m, r, 0)
static const fuzz_field cfg_fields[] = {
    CF(config_path, CF_SKIP),
    CF(socket, CF_STR),
    CF(socket_mode, CF_SAME),
    CF(socket_group, CF_STR),
    CF(socket_gid, CF_SAME),
    CF(state_dir, CF_STR),
    CF(listen_backlog, CF_SAME),
    CF(device, CF_STR),
    CF(lim, CF_SAME),
    CF(device_memory_limit, CF_SAME),
    CF(log_level, CF_SAME),
    CF(drain_timeout_s, CF_SAME),
    CF(hello_timeout_s, CF_SAME),
    CF(idle_timeout_s, CF_SAME),
    CF(frame_timeout_s, CF_SAME),
    CF(frame_min_rate, CF_SAME),
    CF(reply_timeout_s, CF_SAME),
    CF(staging_keep, CF_SAME),
    CF(staging_release_s, CF_SAME),
    CF(staging_headroom, CF_SAME),
    CF(device_window, CF_SAME),
    CF(bulk_window, CF_SAME),
    CF(priority_hold_s, CF_SAME),
    CF(batch_max, CF_SAME),
    CF(batch_bytes, CF_SAME),
    CF(io_threads, CF_SAME),
    CF(io_bulk_min, CF_SAME),
    CF(slowlog_len, CF_SAME),
    CF(slowlog_min_us, CF_SAME),
    CF(monitor_queue, CF_SAME),
    CF(pol, CF_POLICY),
    CF(check_only, CF_SAME),
    CF(reload_pid, CF_SKIP),
    CF(error, CF_SKIP),
};
#define PF(m, r) FUZZ_FIELD(gpuq_policy, m, r, 0)
static const fuzz_field pol_fields[] = {
    PF(admin_group, CF_STR),   PF(admin_gid, CF_SAME),
    PF(max_priority, CF_SAME), PF(max_sessions_per_user, CF_SAME),
    PF(nrules, CF_SAME),       PF(rules, CF_RULES),
};
#define RF(m, r) FUZZ_FIELD(policy_rule, m, r, 0)
static const fuzz_field rule_fields[] = {
    RF(is_group, CF_SAME),
    RF(id, CF_SAME),
    RF(name, CF_STR),
    RF(max_priority, CF_SAME),
    RF(max_inflight, CF_SAME),
    RF(session_staging, CF_SAME),
    RF(has_session_arena, CF_SAME),
    RF(session_arena, CF_SAME),
    RF(has_resident_bytes, CF_SAME),
    RF(resident_bytes, CF_SAME),
    RF(max_sessions_per_user, CF_SAME),
    RF(line, CF_SKIP),
};
/* gpuq_limits, compared as bytes above: both sides start from memset 0 */
#define LF(m) FUZZ_FIELD(gpuq_limits, m, CF_SAME, 0)
static const fuzz_field lim_fields[] = {
    LF(max_header),    LF(max_payload),    LF(max_inflight),   LF(session_staging),
    LF(total_staging), LF(max_sessions),   LF(max_output),     LF(session_arena),
    LF(total_arena),   LF(resident_bytes), LF(total_resident),
};
#define N(t) (sizeof(t) / sizeof((t)[0]))

FUZZ_DEFINE_DUMP(config, dump_config)
FUZZ_DEFINE_DUMP(gpuq_policy, dump_policy)
FUZZ_DEFINE_DUMP(policy_rule, dump_rule)
FUZZ_DEFINE_DUMP(gpuq_limits, dump_limits)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_fields_check("config", sizeof(config), _Alignof(config), cfg_fields, N(cfg_fields),
                      dump_config());
    fuzz_fields_check("gpuq_policy", sizeof(gpuq_policy), _Alignof(gpuq_policy), pol_fields,
                      N(pol_fields), dump_policy());
    fuzz_fields_check("policy_rule", sizeof(policy_rule), _Alignof(policy_rule), rule_fields,
                      N(rule_fields), dump_rule());
    fuzz_fields_check("gpuq_limits", sizeof(gpuq_limits), _Alignof(gpuq_limits), lim_fields,
                      N(lim_fields), dump_limits());
    in_fd = memfd_create("fuzz_config_in", 0);
    out_fd = memfd_create("fuzz_config_out", 0);
    if (in_fd < 0 || out_fd < 0)
        fuzz_fail("memfd_create failed");
    snprintf(in_path, sizeof in_path, "/proc/self/fd/%d", in_fd);
    snprintf(out_path, sizeof out_path, "/proc/self/fd/%d", out_fd);
    log_set_level(LOG_LVL_ERROR); /* config_log_changes: its info and warn lines */
    return 0;
}

/* The input's flags (#ARGS), in one buffer. */
#define MAX_ARGS 16
static char args_buf[512];
static char *args[MAX_ARGS];
static int nargs;

/* config_reload of "gpuqd FLAGS --config path" into *c (flags: the
 * input's, or none). */
static int parse(config *c, const char *path, bool flags)
{
    char *argv[MAX_ARGS + 4];
    int argc = 0;
    argv[argc++] = (char *)"gpuqd";
    for (int k = 0; flags && k < nargs; k++)
        argv[argc++] = args[k];
    argv[argc++] = (char *)"--config";
    argv[argc++] = (char *)path;
    argv[argc] = NULL;
    return config_reload(c, argc, argv);
}

/* #ARGS on the first line: split it into args (data is not changed). */
static void read_args(const uint8_t *data, size_t size)
{
    nargs = 0;
    if (size < 6 || memcmp(data, "#ARGS ", 6) != 0)
        return;
    const uint8_t *eol = memchr(data, '\n', size);
    size_t len = (size_t)((eol ? eol : data + size) - data) - 6;
    if (len >= sizeof args_buf)
        len = sizeof args_buf - 1;
    memcpy(args_buf, data + 6, len);
    args_buf[len] = '\0';
    for (char *save = NULL, *a = strtok_r(args_buf, " ", &save); a && nargs < MAX_ARGS;
         a = strtok_r(NULL, " ", &save))
        if (strncmp(a, "--c", 3) != 0)
            args[nargs++] = a;
}

/* ---- documented bounds ---- */

static void seconds_in(const char *name, double v, double max)
{
    if (!isfinite(v) || v < 0 || v > max)
        fuzz_fail("%s = %g accepted; documented range 0 .. %g", name, v, max);
}

static void count_in(const char *name, uint64_t v, uint64_t min, uint64_t max)
{
    if (v < min || v > max)
        fuzz_fail("%s = %llu accepted; documented range %llu .. %llu", name, (unsigned long long)v,
                  (unsigned long long)min, (unsigned long long)max);
}

static void bounds(const config *c)
{
    if (strnlen(c->socket, sizeof c->socket) == sizeof c->socket)
        fuzz_fail("socket not NUL-terminated");
    /* at most 186 bytes: "state_dir = DIR" fits in a config file line; "" is off */
    size_t sd = strnlen(c->state_dir, sizeof c->state_dir);
    if (sd > 186)
        fuzz_fail("state_dir of %zu bytes accepted; documented at most 186", sd);
    if (c->socket_mode > 0777)
        fuzz_fail("socket_mode %o accepted", c->socket_mode);
    if (strcmp(c->device, "auto") && strcmp(c->device, "cuda") && strcmp(c->device, "cpu"))
        fuzz_fail("device '%.8s' accepted", c->device);
    if (c->log_level != LOG_LVL_ERROR && c->log_level != LOG_LVL_WARN &&
        c->log_level != LOG_LVL_INFO && c->log_level != LOG_LVL_DEBUG)
        fuzz_fail("log level %d accepted", c->log_level);
    seconds_in("drain_timeout", c->drain_timeout_s, 86400);
    seconds_in("hello_timeout", c->hello_timeout_s, 86400);
    seconds_in("frame_timeout", c->frame_timeout_s, 86400);
    seconds_in("reply_timeout", c->reply_timeout_s, 86400);
    count_in("listen_backlog", c->listen_backlog, 1, 1u << 20);
    count_in("max_sessions_per_user", c->pol.max_sessions_per_user, 0, 1u << 20);
    seconds_in("idle_timeout", c->idle_timeout_s, 86400.0 * 365);
    seconds_in("staging_release_after", c->staging_release_s, 86400);
    count_in("max_header", c->lim.max_header, 1, 1u << 30);
    count_in("max_payload", c->lim.max_payload, 1, UINT64_MAX);
    count_in("max_output", c->lim.max_output, 1, UINT64_MAX);
    count_in("session_arena", c->lim.session_arena, 0, UINT64_MAX);
    count_in("total_arena", c->lim.total_arena, 1, UINT64_MAX);
    count_in("resident_bytes", c->lim.resident_bytes, 0, UINT64_MAX);
    count_in("total_resident", c->lim.total_resident, 1, UINT64_MAX);
    count_in("max_inflight", c->lim.max_inflight, 1, 1u << 20);
    count_in("max_sessions", c->lim.max_sessions, 1, 1u << 20);
    count_in("total_staging", c->lim.total_staging, 1, UINT64_MAX);
    count_in("session_staging", c->lim.session_staging, 1, c->lim.total_staging);
    count_in("max_priority", (uint64_t)(c->pol.max_priority + 1), 0, 2);
    size_t ag = strnlen(c->pol.admin_group, sizeof c->pol.admin_group);
    if (ag == sizeof c->pol.admin_group || (ag == 0) != (c->pol.admin_gid == (gid_t)-1))
        fuzz_fail("admin_group '%.64s' with gid %ld", c->pol.admin_group, (long)c->pol.admin_gid);
    if (c->pol.nrules < 0 || c->pol.nrules > GPUQ_POLICY_MAX_RULES)
        fuzz_fail("%d rules accepted", c->pol.nrules);
    for (int i = 0; i < c->pol.nrules; i++) {
        const policy_rule *r = &c->pol.rules[i];
        size_t nl = strnlen(r->name, sizeof r->name);
        if (nl == 0 || nl == sizeof r->name || strpbrk(r->name, " \t") || r->line < 1)
            fuzz_fail("rule %d: name '%.64s', line %d", i, r->name, r->line);
        if (r->max_priority != GPUQ_PRIO_UNSET &&
            (r->max_priority < GPUQ_PRIO_LOW || r->max_priority > GPUQ_PRIO_HIGH))
            fuzz_fail("[%s] max_priority %d accepted", r->name, r->max_priority);
        if (r->max_inflight != 0)
            count_in("rule max_inflight", r->max_inflight, 1, 1u << 20);
        if (!r->has_session_arena && r->session_arena != 0)
            fuzz_fail("[%s] session_arena %llu while unset", r->name,
                      (unsigned long long)r->session_arena);
        if (r->has_session_arena && r->session_arena == 0)
            n_arena_off_rules++;
        if (!r->has_resident_bytes && r->resident_bytes != 0)
            fuzz_fail("[%s] resident_bytes %llu while unset", r->name,
                      (unsigned long long)r->resident_bytes);
        if (r->id == UINT32_MAX)
            fuzz_fail("[%s] has id -1", r->name);
        for (int j = 0; j < i; j++)
            if (c->pol.rules[j].is_group == r->is_group && c->pol.rules[j].id == r->id)
                fuzz_fail("rules %d and %d name the same %s %u", j, i,
                          r->is_group ? "group" : "user", (unsigned)r->id);
        if (r->is_group)
            n_group_rules++;
        else
            n_user_rules++;
    }
}

/* ---- print + parse ---- */

static void same_fields(const char *what, const fuzz_field *t, size_t n, const void *a,
                        const void *b, int nrules)
{
    for (size_t k = 0; k < n; k++) {
        const fuzz_field *f = &t[k];
        const char *pa = (const char *)a + f->off, *pb = (const char *)b + f->off;
        bool ok = true;
        switch ((enum cfg_rule)f->rule) {
        case CF_SAME:
            ok = fuzz_field_eq(f, a, b);
            break;
        case CF_STR:
            ok = strncmp(pa, pb, f->size) == 0;
            break;
        case CF_POLICY: {
            const gpuq_policy *p = (const gpuq_policy *)pa;
            same_fields("policy", pol_fields, N(pol_fields), pa, pb, p->nrules);
            break;
        }
        case CF_RULES:
            for (int i = 0; i < nrules; i++)
                same_fields("rule", rule_fields, N(rule_fields), (const policy_rule *)pa + i,
                            (const policy_rule *)pb + i, 0);
            break;
        case CF_SKIP:
            break;
        }
        if (!ok)
            fuzz_fail("%s \"%s\" differs after config_print and a parse of its output", what,
                      f->name);
    }
}

static void print_parse(const config *c)
{
    static config again;
    FILE *f = fopen(out_path, "w");
    if (!f)
        fuzz_fail("cannot open %s", out_path);
    config_print(c, f);
    if (fclose(f) != 0)
        fuzz_fail("cannot write %s", out_path);
    if (parse(&again, out_path, false) != 0)
        fuzz_fail("config_print's output does not parse: %s", again.error);
    same_fields("setting", cfg_fields, N(cfg_fields), c, &again, 0);
    if (config_log_changes(c, &again) != 0)
        fuzz_fail("config_log_changes sees changes between a config and its print");
}

/* Parse path into *c with the input's flags; check what comes out. */
static bool one_file(config *c, const char *path)
{
    if (parse(c, path, true) != 0) {
        size_t len = strnlen(c->error, sizeof c->error), pl = strlen(path);
        if (len == 0 || len == sizeof c->error || memchr(c->error, '\n', len))
            fuzz_fail("refused without a one-line error: %s", c->error);
        if (!strstr(c->error, path) && nargs == 0)
            fuzz_fail("refused with an error that does not name the file: %s", c->error);
        if (!strncmp(c->error, path, pl) && c->error[pl] == ':' &&
            (c->error[pl + 1] < '1' || c->error[pl + 1] > '9'))
            fuzz_fail("error without a line number: %s", c->error);
        n_refused++;
        return false;
    }
    n_ok++;
    bounds(c);
    print_parse(c);
    if (config_log_changes(c, c) != 0)
        fuzz_fail("config_log_changes sees changes between a config and itself");
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static config a, b;
    static const char sep[] = "\n#---\n";

    if (in_fd < 0)
        LLVMFuzzerInitialize(NULL, NULL);
    read_args(data, size);
    const uint8_t *second = memmem(data, size, sep, sizeof sep - 1);
    size_t first_len = second ? (size_t)(second - data) + 1 : size;
    fuzz_put_file(in_fd, data, first_len);
    if (!one_file(&a, in_path))
        return 0;
    if (second) {
        second += sizeof sep - 1;
        fuzz_put_file(in_fd, second, size - (size_t)(second - data));
        if (!one_file(&b, in_path))
            return 0;
    } else {
        char *argv[] = {(char *)"gpuqd", NULL};
        if (config_reload(&b, 1, argv) != 0)
            fuzz_fail("the defaults do not load: %s", b.error);
    }
    int ab = config_log_changes(&a, &b), ba = config_log_changes(&b, &a);
    if (ab != ba)
        fuzz_fail("config_log_changes counts %d changes one way, %d the other", ab, ba);
    return 0;
}

#ifdef GPUQ_FUZZ_REPLAY

#define IN(lit)                                                                                    \
    {                                                                                              \
        lit, sizeof(lit) - 1                                                                       \
    }
static const struct {
    const char *b;
    size_t len;
} builtin[] = {
    IN(""),
    IN("[server]\nsocket_mode = 0777\n"),
    IN("[limits]\nsession_staging = 8G\ntotal_staging = 1K\n"),
    IN("[user 0]\nmax_inflight = 1\n[group 0]\nmax_priority = low\n"),
    IN("[user 0]\nsession_arena = 0\n[group 0]\nsession_arena = 1M\n"),
    IN("[server\n"),
    IN("\xef\xbb\xbf[policy]\nadmin_group =\n"),
};

int main(int argc, char **argv)
{
    size_t n = sizeof builtin / sizeof builtin[0];
    LLVMFuzzerInitialize(&argc, &argv);
    for (size_t k = 0; k < n; k++)
        fuzz_replay_input((const uint8_t *)builtin[k].b, builtin[k].len, 1);
    n_ok = n_refused = n_user_rules = n_group_rules = n_arena_off_rules = 0;
    bool corpus = fuzz_take_corpus_flag(&argc, &argv);
    int files = fuzz_replay_files(argc, argv, 1 << 16, 1 << 16);
    if (files < 0)
        return 1;
    int missing = 0;
    if (corpus && (!n_ok || !n_refused || !n_user_rules || !n_group_rules || !n_arena_off_rules)) {
        fprintf(stderr,
                "fuzz_config_replay: the files brought %lu accepted and %lu refused configs, "
                "%lu [user] and %lu [group] rules, %lu rules with session_arena 0; each must be "
                "more than 0\n",
                n_ok, n_refused, n_user_rules, n_group_rules, n_arena_off_rules);
        missing++;
    }
    printf("fuzz_config_replay: %zu built-in inputs and %d files: %s\n", n, files,
           missing ? "FAILED" : "ok");
    return missing ? 1 : 0;
}
#endif
