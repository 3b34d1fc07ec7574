/* SPDX-License-Identifier: Apache-2.0 */
/* test_config.c - gpuqd's settings: the config file (every key, every error
 * class with its line), flags over the file in either order, the example
 * systemd/gpuqd.conf, config_print round trips, user/group resolution, and
 * what config_log_changes counts; the session_arena rule key (0 a value,
 * unset its own state) through parse, print and the reload log; the
 * resident array limits (resident_bytes, also a rule key, and
 * total_resident) the same way;
 * listen_backlog and max_sessions_per_user (global, rules, flags, default,
 * print, reload); state_dir (default, file, flags, empty, the longest path
 * a config file line holds, unprintable paths, print, reload). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "config_keys.h"
#include "header.h"
#include "log.h"
#include "policy.h"
#include "testutil.h"

static char dir[256];
static char path[320];

static void setup(void)
{
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/gpuqd.conf", dir);
}

static void teardown(void)
{
    tu_rmtree(dir);
}

static void write_conf(const char *p, const char *text)
{
    ck_assert_int_eq(tu_write_file(p, text, strlen(text)), 0);
}

/* config_load with argv = "gpuqd" followed by args (NULL-terminated). */
static int load(config *c, const char *const *args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"gpuqd";
    for (size_t i = 0; args && args[i]; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    return config_load(c, argc, argv);
}

static int load_file(config *c, const char *p)
{
    const char *args[] = {"--config", p, NULL};
    return load(c, args);
}

/* Every setting, field by field (not config_path, check_only, error, or the
 * lines rules were read from). */
static void assert_same(const config *a, const config *b)
{
    ck_assert_str_eq(a->socket, b->socket);
    ck_assert_uint_eq(a->socket_mode, b->socket_mode);
    ck_assert_str_eq(a->socket_group, b->socket_group);
    ck_assert_uint_eq(a->socket_gid, b->socket_gid);
    ck_assert_str_eq(a->state_dir, b->state_dir);
    ck_assert_str_eq(a->device, b->device);
    ck_assert_uint_eq(a->lim.max_header, b->lim.max_header);
    ck_assert_uint_eq(a->lim.max_payload, b->lim.max_payload);
    ck_assert_uint_eq(a->lim.max_output, b->lim.max_output);
    ck_assert_uint_eq(a->lim.max_inflight, b->lim.max_inflight);
    ck_assert_uint_eq(a->lim.session_staging, b->lim.session_staging);
    ck_assert_uint_eq(a->lim.total_staging, b->lim.total_staging);
    ck_assert_uint_eq(a->lim.max_sessions, b->lim.max_sessions);
    ck_assert_uint_eq(a->lim.session_arena, b->lim.session_arena);
    ck_assert_uint_eq(a->lim.total_arena, b->lim.total_arena);
    ck_assert_uint_eq(a->lim.resident_bytes, b->lim.resident_bytes);
    ck_assert_uint_eq(a->lim.total_resident, b->lim.total_resident);
    ck_assert_int_eq(a->log_level, b->log_level);
    ck_assert(a->drain_timeout_s == b->drain_timeout_s);
    ck_assert(a->hello_timeout_s == b->hello_timeout_s);
    ck_assert(a->idle_timeout_s == b->idle_timeout_s);
    ck_assert(a->frame_timeout_s == b->frame_timeout_s);
    ck_assert_uint_eq(a->frame_min_rate, b->frame_min_rate);
    ck_assert(a->reply_timeout_s == b->reply_timeout_s);
    ck_assert(a->staging_release_s == b->staging_release_s);
    ck_assert_uint_eq(a->staging_keep, b->staging_keep);
    ck_assert_uint_eq(a->staging_headroom, b->staging_headroom);
    ck_assert_uint_eq(a->device_memory_limit, b->device_memory_limit);
    ck_assert_uint_eq(a->listen_backlog, b->listen_backlog);
    ck_assert_uint_eq(a->pol.max_sessions_per_user, b->pol.max_sessions_per_user);
    ck_assert_str_eq(a->pol.admin_group, b->pol.admin_group);
    ck_assert_uint_eq(a->pol.admin_gid, b->pol.admin_gid);
    ck_assert_int_eq(a->pol.max_priority, b->pol.max_priority);
    ck_assert_int_eq(a->pol.nrules, b->pol.nrules);
    for (int i = 0; i < a->pol.nrules; i++) {
        const policy_rule *x = &a->pol.rules[i], *y = &b->pol.rules[i];
        ck_assert_int_eq(x->is_group, y->is_group);
        ck_assert_uint_eq(x->id, y->id);
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->max_priority, y->max_priority);
        ck_assert_uint_eq(x->max_inflight, y->max_inflight);
        ck_assert_uint_eq(x->session_staging, y->session_staging);
        ck_assert_int_eq(x->has_session_arena, y->has_session_arena);
        ck_assert_uint_eq(x->session_arena, y->session_arena);
        ck_assert_int_eq(x->has_resident_bytes, y->has_resident_bytes);
        ck_assert_uint_eq(x->resident_bytes, y->resident_bytes);
        ck_assert_uint_eq(x->max_sessions_per_user, y->max_sessions_per_user);
    }
}

static const char full_conf[] = "# every key\n"                                 /* 1 */
                                "[server]\n"                                    /* 2 */
                                "socket = /tmp/gpuq-x/gpuqd.sock   ; comment\n" /* 3 */
                                "socket_mode = 0640\n"                          /* 4 */
                                "device = cpu\n"                                /* 5 */
                                "log_level = debug   # comment\n"               /* 6 */
                                "drain_timeout = 12.5\n"                        /* 7 */
                                "\n"                                            /* 8 */
                                "[limits]\n"                                    /* 9 */
                                "  max_header = 8K\n"                           /* 10 */
                                "max_payload = 1M\n"                            /* 11 */
                                "max_output = 3G\n"                             /* 12 */
                                "max_inflight = 7\n"                            /* 13 */
                                "session_staging = 256M\n"                      /* 14 */
                                "total_staging = 1G\n"                          /* 15 */
                                "max_sessions = 100\n"                          /* 16 */
                                "[policy]\n"                                    /* 17 */
                                "admin_group = root\n"                          /* 18 */
                                "max_priority = normal\n"                       /* 19 */
                                "; rules\n"                                     /* 20 */
                                "[user root]\n"                                 /* 21 */
                                "max_priority = high\n"                         /* 22 */
                                "max_inflight = 16\n"                           /* 23 */
                                "session_staging = 512M\n"                      /* 24 */
                                "[group 0]\n"                                   /* 25 */
                                "max_priority = -1\n"                           /* 26 */
                                "max_inflight = 4\n"                            /* 27 */
                                "[user 4242]\n";                                /* 28 */

/* Rules with session_arena (arena_rules, the round trip). */
static const char arena_conf[] = "[limits]\n"              /* 1 */
                                 "session_arena = 16M\n"   /* 2 */
                                 "[user root]\n"           /* 3 */
                                 "session_arena = 0\n"     /* 4 */
                                 "[group 0]\n"             /* 5 */
                                 "session_arena = 1M\n"    /* 6 */
                                 "max_inflight = 3\n"      /* 7 */
                                 "[user 4242]\n"           /* 8 */
                                 "max_priority = low\n"    /* 9 */
                                 "[group 4243]\n"          /* 10 */
                                 "session_arena = 64G\n"   /* 11 */
                                 "[user 4244]\n"           /* 12 */
                                 "session_arena = 3KiB\n"  /* 13 */
                                 "session_arena = 0K\n"    /* 14 */
                                 "[group 4245]\n"          /* 15 */
                                 "session_arena = 4096\n"; /* 16 */

/* Rules with resident_bytes (resident_keys, the round trip). */
static const char resident_conf[] = "[limits]\n"                 /* 1 */
                                    "resident_bytes = 3000000\n" /* 2 */
                                    "total_resident = 5G\n"      /* 3 */
                                    "[user root]\n"              /* 4 */
                                    "resident_bytes = 0\n"       /* 5 */
                                    "[group 0]\n"                /* 6 */
                                    "resident_bytes = 1M\n"      /* 7 */
                                    "session_arena = 0\n"        /* 8 */
                                    "[user 4242]\n"              /* 9 */
                                    "session_arena = 2M\n"       /* 10 */
                                    "[group 4243]\n"             /* 11 */
                                    "resident_bytes = 64G\n"     /* 12 */
                                    "[user 4244]\n"              /* 13 */
                                    "resident_bytes = 3KiB\n"    /* 14 */
                                    "resident_bytes = 0K\n";     /* 15 */

START_TEST(every_key)
{
    config c;
    write_conf(path, full_conf);
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_str_eq(c.config_path, path);
    ck_assert(!c.check_only);
    ck_assert_str_eq(c.socket, "/tmp/gpuq-x/gpuqd.sock");
    ck_assert_uint_eq(c.socket_mode, 0640);
    ck_assert_str_eq(c.device, "cpu");
    ck_assert_int_eq(c.log_level, LOG_LVL_DEBUG);
    ck_assert(c.drain_timeout_s == 12.5);
    ck_assert_uint_eq(c.lim.max_header, 8192);
    ck_assert_uint_eq(c.lim.max_payload, 1u << 20);
    ck_assert_uint_eq(c.lim.max_output, 3ull << 30);
    ck_assert_uint_eq(c.lim.max_inflight, 7);
    ck_assert_uint_eq(c.lim.session_staging, 256u << 20);
    ck_assert_uint_eq(c.lim.total_staging, 1u << 30);
    ck_assert_uint_eq(c.lim.max_sessions, 100);
    ck_assert_str_eq(c.pol.admin_group, "root");
    ck_assert_uint_eq(c.pol.admin_gid, 0);
    ck_assert_int_eq(c.pol.max_priority, GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(c.pol.nrules, 3);
    const policy_rule *r = c.pol.rules;
    ck_assert(!r[0].is_group);
    ck_assert_uint_eq(r[0].id, 0);
    ck_assert_str_eq(r[0].name, "root");
    ck_assert_int_eq(r[0].max_priority, GPUQ_PRIO_HIGH);
    ck_assert_uint_eq(r[0].max_inflight, 16);
    ck_assert_uint_eq(r[0].session_staging, 512u << 20);
    ck_assert_int_eq(r[0].line, 21);
    ck_assert(r[1].is_group);
    ck_assert_uint_eq(r[1].id, 0);
    ck_assert_str_eq(r[1].name, "0");
    ck_assert_int_eq(r[1].max_priority, GPUQ_PRIO_LOW); /* written -1 */
    ck_assert_uint_eq(r[1].max_inflight, 4);
    ck_assert_uint_eq(r[1].session_staging, 0);
    ck_assert_int_eq(r[1].line, 25);
    ck_assert(!r[2].is_group);
    ck_assert_uint_eq(r[2].id, 4242);
    ck_assert_int_eq(r[2].max_priority, GPUQ_PRIO_UNSET);
    ck_assert_uint_eq(r[2].max_inflight, 0);
    ck_assert_int_eq(r[2].line, 28);
}
END_TEST

START_TEST(defaults_without_file)
{
    config c;
    ck_assert_int_eq(load(&c, NULL), 0);
    gpuq_limits d;
    gpuq_limits_default(&d);
    ck_assert_str_eq(c.config_path, "");
    ck_assert_str_eq(c.socket, "");
    ck_assert_uint_eq(c.socket_mode, 0660);
    ck_assert_str_eq(c.device, "auto");
    ck_assert_int_eq(c.log_level, LOG_LVL_INFO);
    ck_assert(c.drain_timeout_s == 30.0);
    ck_assert_uint_eq(c.lim.max_inflight, d.max_inflight);
    ck_assert_uint_eq(c.lim.total_staging, d.total_staging);
    ck_assert_uint_eq(c.lim.resident_bytes, 8ull << 30);
    ck_assert_uint_eq(c.lim.total_resident, 32ull << 30);
    ck_assert_uint_eq(d.resident_bytes, GPUQ_DEFAULT_RESIDENT_BYTES);
    ck_assert_uint_eq(d.total_resident, GPUQ_DEFAULT_TOTAL_RESIDENT);
    ck_assert_str_eq(c.pol.admin_group, "");
    ck_assert_uint_eq(c.pol.admin_gid, (gid_t)-1);
    ck_assert_str_eq(c.socket_group, "");
    ck_assert_uint_eq(c.socket_gid, (gid_t)-1);
    ck_assert_str_eq(c.state_dir, "/var/lib/gpuq");
    ck_assert_int_eq(c.pol.max_priority, GPUQ_PRIO_HIGH);
    ck_assert_int_eq(c.pol.nrules, 0);
}
END_TEST

/* Flags win over the file whether they come before or after --config. */
START_TEST(flags_override_file)
{
    write_conf(path, full_conf);
    const char *after[] = {"--config",
                           path,
                           "--max-inflight",
                           "3",
                           "--socket-mode",
                           "600",
                           "--admin-group",
                           "0",
                           "--max-priority",
                           "0",
                           "--log-level",
                           "warn",
                           "--socket",
                           "/tmp/other.sock",
                           NULL};
    const char *before[] = {"--max-inflight",
                            "3",
                            "--socket-mode",
                            "600",
                            "--admin-group",
                            "0",
                            "--max-priority",
                            "0",
                            "--log-level",
                            "warn",
                            "--socket",
                            "/tmp/other.sock",
                            "--config",
                            path,
                            NULL};
    const char *const *orders[] = {after, before};
    for (int i = 0; i < 2; i++) {
        config c;
        ck_assert_msg(load(&c, orders[i]) == 0, "%s", c.error);
        ck_assert_uint_eq(c.lim.max_inflight, 3);
        ck_assert_uint_eq(c.socket_mode, 0600);
        ck_assert_str_eq(c.pol.admin_group, "0");
        ck_assert_uint_eq(c.pol.admin_gid, 0);
        ck_assert_int_eq(c.pol.max_priority, GPUQ_PRIO_NORMAL); /* "0" */
        ck_assert_int_eq(c.log_level, LOG_LVL_WARN);
        ck_assert_str_eq(c.socket, "/tmp/other.sock");
        /* the file's other values stay */
        ck_assert_uint_eq(c.lim.max_payload, 1u << 20);
        ck_assert_str_eq(c.device, "cpu");
        ck_assert_int_eq(c.pol.nrules, 3);
    }
}
END_TEST

START_TEST(flag_errors)
{
    config c;
    const char *zero[] = {"--max-inflight", "0", NULL};
    ck_assert_int_eq(load(&c, zero), -1);
    ck_assert_msg(strstr(c.error, "--max-inflight") && strstr(c.error, "1 .. 1048576"), "%s",
                  c.error);
    const char *mode[] = {"--socket-mode", "8", NULL};
    ck_assert_int_eq(load(&c, mode), -1);
    ck_assert_msg(strstr(c.error, "--socket-mode") != NULL, "%s", c.error);
    const char *grp[] = {"--admin-group", "no-such-group-gpuq", NULL};
    ck_assert_int_eq(load(&c, grp), -1);
    ck_assert_msg(strstr(c.error, "unknown group 'no-such-group-gpuq'") != NULL, "%s", c.error);
    const char *sgrp[] = {"--socket-group", "no-such-group-gpuq", NULL};
    ck_assert_int_eq(load(&c, sgrp), -1);
    ck_assert_str_eq(c.error, "--socket-group: unknown group 'no-such-group-gpuq'");
    const char *sgrp_ok[] = {"--socket-group", "root", NULL};
    ck_assert_msg(load(&c, sgrp_ok) == 0, "%s", c.error);
    ck_assert_str_eq(c.socket_group, "root");
    ck_assert_uint_eq(c.socket_gid, 0);
    ck_assert_str_eq(c.pol.admin_group, ""); /* the other group key untouched */
    static const char *const prios[] = {"5", "-5", "2", "urgent"};
    for (int i = 0; i < 4; i++) {
        const char *prio[] = {"--max-priority", prios[i], NULL};
        ck_assert_int_eq(load(&c, prio), -1);
        char want[80];
        snprintf(want, sizeof want, "bad priority '%s' (low, normal or high; or -1, 0, 1)",
                 prios[i]);
        ck_assert_msg(strstr(c.error, "--max-priority") && strstr(c.error, want), "%s", c.error);
    }
    const char *unknown[] = {"--no-such-flag", NULL};
    ck_assert_int_eq(load(&c, unknown), -1);
    ck_assert_msg(strstr(c.error, "--no-such-flag") != NULL, "%s", c.error);
    const char *missing[] = {"--config", path, NULL}; /* setup made no file */
    ck_assert_int_eq(load(&c, missing), -1);
    char want[400];
    snprintf(want, sizeof want, "cannot open %s: No such file or directory", path);
    ck_assert_str_eq(c.error, want);
}
END_TEST

/* One error per entry: the file, the line it must name, and what the
 * message must say. */
static const struct {
    const char *text;
    int line;
    const char *say1, *say2;
} bad[] = {
    {"[server]\n[bogus]\n", 2, "unknown section", "[bogus]"},
    {"[server x]\n", 1, "unknown section", "[server x]"},
    {"[server]\nlog_level = info\nfoo = 1\n", 3, "unknown key 'foo'", "[server]"},
    {"[limits]\nsocket = /x\n", 2, "unknown key 'socket'", "[limits]"},
    {"[user root]\nmax_payload = 1\n", 2, "unknown key 'max_payload'", "[user root]"},
    {"[limits]\nmax_inflight = lots\n", 2, "max_inflight", "bad number 'lots'"},
    {"[limits]\n\nmax_payload = 12X\n", 3, "max_payload", "bad size '12X'"},
    {"[server]\ndrain_timeout = soon\n", 2, "drain_timeout", "bad number of seconds"},
    {"[server]\nsocket_mode = 0999\n", 2, "socket_mode", "bad octal mode"},
    {"[limits]\nmax_inflight = 0\n", 2, "max_inflight", "out of range (1 .. 1048576)"},
    {"[limits]\nmax_sessions = 2M\n", 2, "max_sessions", "out of range (1 .. 1048576)"},
    {"[limits]\nmax_header = 2G\n", 2, "max_header", "out of range (1 .. 1G)"},
    {"[limits]\nmax_payload = 0\n", 2, "max_payload", "out of range (at least 1)"},
    {"[server]\ndrain_timeout = 86401\n", 2, "drain_timeout", "out of range (0 .. 86400"},
    {"[server]\nhello_timeout = -1\n", 2, "hello_timeout", "out of range (0 .. 86400"},
    {"[server]\nframe_timeout = soon\n", 2, "frame_timeout", "bad number of seconds"},
    {"[server]\nreply_timeout = -1\n", 2, "reply_timeout", "out of range (0 .. 86400"},
    {"[server]\n\nreply_timeout = 86401\n", 3, "reply_timeout", "out of range (0 .. 86400"},
    {"[server]\nreply_timeout = soon\n", 2, "reply_timeout", "bad number of seconds"},
    {"[server]\nframe_min_rate = fast\n", 2, "frame_min_rate", "bad size 'fast'"},
    {"[server]\nframe_min_rate = -1\n", 2, "frame_min_rate", "bad size '-1'"},
    {"[limits]\nframe_min_rate = 1M\n", 2, "unknown key 'frame_min_rate'", "[limits]"},
    {"[limits]\nreply_timeout = 5\n", 2, "unknown key 'reply_timeout'", "[limits]"},
    {"[server]\nstaging_keep = 1Q\n", 2, "staging_keep", "bad size '1Q'"},
    {"[limits]\nstaging_headroom = 1M\n", 2, "unknown key 'staging_headroom'", "[limits]"},
    {"[server]\nsocket_mode = 01777\n", 2, "socket_mode", "out of range (0000 .. 0777)"},
    {"[server]\ndevice = gpu\n", 2, "device", "auto, cuda or cpu"},
    {"[server]\nlog_level = loud\n", 2, "log_level", "error, warn, info or debug"},
    {"[policy]\nmax_priority = 6\n", 2, "max_priority",
     "bad priority '6' (low, normal or high; or -1, 0, 1)"},
    {"[policy]\nmax_priority = 5\n", 2, "max_priority",
     "bad priority '5' (low, normal or high; or -1, 0, 1)"},
    {"[user root]\nmax_priority = -5\n", 2, "[user root] max_priority", "bad priority '-5'"},
    {"[group root]\n\nmax_priority = 2\n", 3, "[group root] max_priority", "bad priority '2'"},
    {"[group root]\nmax_priority = urgent\n", 2, "max_priority", "low, normal or high"},
    {"[user root]\nsession_arena = -1\n", 2, "[user root] session_arena", "bad size '-1'"},
    {"[group root]\n\nsession_arena = off\n", 3, "[group root] session_arena", "bad size 'off'"},
    {"[group 0]\nsession_arena = unset\n", 2, "[group 0] session_arena", "bad size 'unset'"},
    {"[user 0]\nsession_arena = 18446744073709551616\n", 2, "[user 0] session_arena",
     "bad size '18446744073709551616'"},
    {"[user 0]\nsession_arena = 17179869184G\n", 2, "session_arena", "bad size"},
    {"[user 0]\nsession_arena = 1T\n", 2, "session_arena", "bad size '1T'"},
    {"[user root]\nsession_arena = 1M\nsession_arena =\n", 3, "session_arena", "empty value"},
    {"[policy]\nsession_arena = 1M\n", 2, "unknown key 'session_arena'", "[policy]"},
    {"[server]\nsession_arena = 1M\n", 2, "unknown key 'session_arena'", "[server]"},
    {"[limits]\ntotal_resident = 0\n", 2, "total_resident", "out of range (at least 1)"},
    {"[limits]\nresident_bytes = -1\n", 2, "resident_bytes", "bad size '-1'"},
    {"[user root]\nresident_bytes = lots\n", 2, "[user root] resident_bytes", "bad size 'lots'"},
    {"[group 0]\n\nresident_bytes = 18446744073709551616\n", 3, "[group 0] resident_bytes",
     "bad size"},
    {"[group 0]\nresident_bytes =\n", 2, "resident_bytes", "empty value"},
    {"[user root]\ntotal_resident = 1M\n", 2, "unknown key 'total_resident'", "[user root]"},
    {"[policy]\nresident_bytes = 1M\n", 2, "unknown key 'resident_bytes'", "[policy]"},
    {"[server]\ndevice =\n", 2, "device", "empty value"},
    {"[server]\nlisten_backlog = 0\n", 2, "listen_backlog", "out of range (1 .. 1048576)"},
    {"[server]\nlisten_backlog = many\n", 2, "listen_backlog", "bad number 'many'"},
    {"[limits]\nlisten_backlog = 8\n", 2, "unknown key 'listen_backlog'", "[limits]"},
    {"[policy]\nmax_sessions_per_user = 2M\n", 2, "max_sessions_per_user",
     "out of range (0 .. 1048576)"},
    {"[user root]\nmax_sessions_per_user = 0\n", 2, "[user root] max_sessions_per_user",
     "out of range (1 .. 1048576)"},
    {"[limits]\nmax_sessions_per_user = 2\n", 2, "unknown key 'max_sessions_per_user'", "[limits]"},
    {"[user no-such-user-gpuq]\n", 1, "unknown user 'no-such-user-gpuq'", ""},
    {"[group no-such-group-gpuq]\n", 1, "unknown group 'no-such-group-gpuq'", ""},
    {"[policy]\nadmin_group = no-such-group-gpuq\n", 2, "admin_group", "unknown group"},
    {"[server]\nsocket_group = no-such-group-gpuq\n", 2, "socket_group",
     "unknown group 'no-such-group-gpuq'"},
    {"[policy]\nsocket_group = root\n", 2, "unknown key 'socket_group'", "[policy]"},
    {"[limits]\nstate_dir = /x\n", 2, "unknown key 'state_dir'", "[limits]"},
    {"[user root]\nstate_dir = /x\n", 2, "unknown key 'state_dir'", "[user root]"},
    /* "state_dir = #x" is state_dir = "" and a comment; without the space
     * '#' is the value's */
    {"[server]\n\nstate_dir=#x\n", 3, "[server] state_dir: ", "cannot be written in a config file"},
    {"[server]\nstate_dir=;x\n", 2, "[server] state_dir: ", "cannot be written"},
    {"[user]\n", 1, "[user] needs", "NAME"},
    {"[user root]\nmax_inflight = 2\n[user 0]\n", 3, "named twice", "first at line 1"},
    {"[group 0]\n[user 0]\n[group root]\n", 3, "named twice", "gid 0"},
    {"max_inflight = 2\n", 1, "outside a section", "max_inflight"},
    {"[server]\nthis line has no equals sign\n", 2, "syntax error", ""},
    {"[server\n", 1, "syntax error", ""},
};

START_TEST(file_errors)
{
    config c;
    write_conf(path, bad[_i].text);
    ck_assert_int_eq(load_file(&c, path), -1);
    char want[400];
    snprintf(want, sizeof want, "%s:%d: ", path, bad[_i].line);
    ck_assert_msg(strncmp(c.error, want, strlen(want)) == 0, "case %d: '%s' does not start '%s'",
                  _i, c.error, want);
    ck_assert_msg(strstr(c.error, bad[_i].say1) && strstr(c.error, bad[_i].say2),
                  "case %d: '%s' should say '%s' and '%s'", _i, c.error, bad[_i].say1,
                  bad[_i].say2);
    ck_assert_ptr_null(strchr(c.error, '\n'));
}
END_TEST

START_TEST(too_many_rules)
{
    size_t cap = 64 * (GPUQ_POLICY_MAX_RULES + 2);
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    size_t n = 0;
    for (int i = 0; i <= GPUQ_POLICY_MAX_RULES; i++)
        n += (size_t)snprintf(text + n, cap - n, "[user %d]\n", 10000 + i);
    write_conf(path, text);
    free(text);
    config c;
    ck_assert_int_eq(load_file(&c, path), -1);
    char want[400];
    snprintf(want, sizeof want, "%s:%d: more than %d", path, GPUQ_POLICY_MAX_RULES + 1,
             GPUQ_POLICY_MAX_RULES);
    ck_assert_msg(strncmp(c.error, want, strlen(want)) == 0, "%s", c.error);
    /* exactly the maximum is fine */
    text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    n = 0;
    for (int i = 0; i < GPUQ_POLICY_MAX_RULES; i++)
        n += (size_t)snprintf(text + n, cap - n, "[group %d]\n", 10000 + i);
    write_conf(path, text);
    free(text);
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_int_eq(c.pol.nrules, GPUQ_POLICY_MAX_RULES);
}
END_TEST

/* inih would read an over-long line as two; the reader refuses it. */
START_TEST(long_line)
{
    char text[400];
    snprintf(text, sizeof text, "[server]\nsocket = /%0250d\n", 0);
    write_conf(path, text);
    config c;
    ck_assert_int_eq(load_file(&c, path), -1);
    char want[400];
    snprintf(want, sizeof want, "%s:2: line longer than", path);
    ck_assert_msg(strncmp(c.error, want, strlen(want)) == 0, "%s", c.error);
}
END_TEST

START_TEST(root_ids)
{
    static const char *const texts[] = {"[user root]\n", "[user 0]\n", "[group root]\n",
                                        "[group 0]\n"};
    for (int i = 0; i < 4; i++) {
        config c;
        write_conf(path, texts[i]);
        ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
        ck_assert_int_eq(c.pol.nrules, 1);
        ck_assert_uint_eq(c.pol.rules[0].id, 0);
        ck_assert_int_eq(c.pol.rules[0].is_group, i >= 2);
        ck_assert_int_eq(c.pol.rules[0].line, 1);
    }
}
END_TEST

/* systemd/gpuqd.conf sets every key to its default. */
START_TEST(example_is_defaults)
{
    config ex, def;
    ck_assert_msg(load_file(&ex, GPUQ_TESTS_DIR "/../systemd/gpuqd.conf") == 0, "%s", ex.error);
    ck_assert_int_eq(load(&def, NULL), 0);
    assert_same(&ex, &def);
}
END_TEST

/* config_print's output loads back to the same settings. */
START_TEST(print_round_trip)
{
    static const char *const texts[] = {
        full_conf,
        "",
        "[policy]\nmax_priority = 1\n",
        "[server]\nhello_timeout = 2.5\nidle_timeout = 600\nframe_timeout = 0\n"
        "staging_keep = 3M\nstaging_release_after = 0.25\nstaging_headroom = 12345\n"
        "device_memory_limit = 1G\n",
        "[server]\nframe_min_rate = 0\nreply_timeout = 0\n",
        "[server]\nframe_min_rate = 12345\nreply_timeout = 2.5\n",
        arena_conf,
        "[limits]\nsession_arena = 0\ntotal_arena = 1M\n",
        resident_conf,
        "[limits]\nresident_bytes = 0\ntotal_resident = 1\n",
        "[server]\nsocket_group = root\n",
        "[server]\nstate_dir =\n",
        "[server]\nstate_dir = /srv/gpuq state/a;b#c\n",
        "[server]\nlisten_backlog = 1024\n[policy]\nmax_sessions_per_user = 3\n"
        "[user root]\nmax_sessions_per_user = 100\n[group 0]\nmax_sessions_per_user = 1\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        config a, b;
        write_conf(path, texts[i]);
        ck_assert_msg(load_file(&a, path) == 0, "%s", a.error);
        char out[400];
        snprintf(out, sizeof out, "%s/printed.conf", dir);
        FILE *f = fopen(out, "w");
        ck_assert_ptr_nonnull(f);
        config_print(&a, f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_msg(load_file(&b, out) == 0, "%s", b.error);
        assert_same(&a, &b);
    }
}
END_TEST

START_TEST(check_config_flag)
{
    write_conf(path, full_conf);
    const char *args[] = {"--check-config", path, NULL};
    config c;
    /* prints to stdout and asks the caller to exit 0 */
    ck_assert_int_eq(load(&c, args), 1);
    ck_assert(c.check_only);
    ck_assert_uint_eq(c.lim.max_inflight, 7);
    write_conf(path, "[limits]\nmax_inflight = none\n");
    ck_assert_int_eq(load(&c, args), -1);
}
END_TEST

/* --reload PID: a positive pid is kept (the caller signals it); anything
 * else is a usage error, never a pid kill(2) would read as a group. */
START_TEST(reload_flag)
{
    write_conf(path, full_conf);
    config c;
    const char *args[] = {"--config", path, "--reload", "4242", NULL};
    ck_assert_msg(load(&c, args) == 0, "%s", c.error);
    ck_assert_int_eq(c.reload_pid, 4242);
    ck_assert_uint_eq(c.lim.max_inflight, 7);
    const char *none[] = {"--config", path, NULL};
    ck_assert_int_eq(load(&c, none), 0);
    ck_assert_int_eq(c.reload_pid, 0);
    static const char *const bad_pids[] = {"0",  "-1",   "-0",         " 5", "5 ",
                                           "+5", "0x10", "2147483648", ""};
    for (size_t i = 0; i < sizeof bad_pids / sizeof bad_pids[0]; i++) {
        const char *a[] = {"--reload", bad_pids[i], NULL};
        ck_assert_msg(load(&c, a) == -1, "--reload '%s' accepted", bad_pids[i]);
        ck_assert_msg(strstr(c.error, "is not a process id") != NULL, "%s", c.error);
    }
    const char *both[] = {"--check-config", path, "--reload", "4242", NULL};
    ck_assert_int_eq(load(&c, both), -1);
    ck_assert_str_eq(c.error, "give --check-config or --reload, not both");
    /* a bad file with --reload: the error, so nothing is signalled */
    write_conf(path, "[limits]\nmax_inflight = none\n");
    ck_assert_int_eq(load(&c, args), -1);
}
END_TEST

START_TEST(log_changes_counts)
{
    config a, b;
    ck_assert_int_eq(load(&a, NULL), 0);
    ck_assert_int_eq(load(&b, NULL), 0);
    ck_assert_int_eq(config_log_changes(&a, &b), 0);
    /* restart-only settings are warned about, not counted */
    snprintf(b.socket, sizeof b.socket, "/tmp/elsewhere.sock");
    b.socket_mode = 0600;
    snprintf(b.device, sizeof b.device, "cpu");
    snprintf(b.socket_group, sizeof b.socket_group, "root");
    b.socket_gid = 0;
    snprintf(b.state_dir, sizeof b.state_dir, "/srv/gpuq");
    ck_assert_int_eq(config_log_changes(&a, &b), 0);
    write_conf(path, "[limits]\nmax_inflight = 32\ntotal_staging = 1G\n"
                     "[server]\nlog_level = debug\ndrain_timeout = 5\n"
                     "[policy]\nmax_priority = low\n"
                     "[user root]\nmax_inflight = 2\n[group 0]\n");
    ck_assert_msg(load_file(&b, path) == 0, "%s", b.error);
    /* max_inflight, total_staging, session_staging (cut to total), log_level,
     * drain_timeout, max_priority, two rules added */
    ck_assert_int_eq(config_log_changes(&a, &b), 8);
    config c;
    write_conf(path, "[limits]\nmax_inflight = 32\ntotal_staging = 1G\n"
                     "[server]\nlog_level = debug\ndrain_timeout = 5\n"
                     "[policy]\nmax_priority = low\n"
                     "[user 0]\nmax_inflight = 3\nmax_priority = low\n");
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    /* [group 0] removed; [user root] = [user 0]: max_inflight and max_priority */
    ck_assert_int_eq(config_log_changes(&b, &c), 3);
    ck_assert_int_eq(config_log_changes(&c, &c), 0);
}
END_TEST

/* config_reload reads the same arguments again, and a failure says why. */
START_TEST(reload_rereads)
{
    write_conf(path, "[limits]\nmax_inflight = 7\n");
    char *argv[] = {(char *)"gpuqd",         (char *)"--config", path,
                    (char *)"--max-payload", (char *)"1M",       NULL};
    config c, r;
    ck_assert_int_eq(config_load(&c, 5, argv), 0);
    ck_assert_uint_eq(c.lim.max_inflight, 7);
    write_conf(path, "[limits]\nmax_inflight = 9\nmax_payload = 2M\n");
    ck_assert_msg(config_reload(&r, 5, argv) == 0, "%s", r.error);
    ck_assert_uint_eq(r.lim.max_inflight, 9);
    ck_assert_uint_eq(r.lim.max_payload, 1u << 20); /* the flag still wins */
    ck_assert_str_eq(argv[2], path);                /* argv untouched */
    write_conf(path, "[limits]\nmax_inflight = 9\n\nmax_inflight = -1\n");
    ck_assert_int_eq(config_reload(&r, 5, argv), -1);
    char want[400];
    snprintf(want, sizeof want, "%s:4: ", path);
    ck_assert_msg(strncmp(r.error, want, strlen(want)) == 0, "%s", r.error);
    tu_rmtree(path);
    ck_assert_int_eq(config_reload(&r, 5, argv), -1);
    ck_assert_msg(strstr(r.error, "cannot open") != NULL, "%s", r.error);
}
END_TEST

/* session_arena in [user]/[group]: every size spelling, 0 (arenas off) kept
 * apart from unset, a value above [limits] session_arena accepted as
 * written (policy clamps it), and the last of a repeated key wins. */
START_TEST(arena_rules)
{
    config c;
    write_conf(path, arena_conf);
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_uint_eq(c.lim.session_arena, 16u << 20);
    ck_assert_int_eq(c.pol.nrules, 6);
    const policy_rule *r = c.pol.rules;
    ck_assert_int_eq(r[0].line, 3);
    ck_assert_int_eq(r[4].line, 12);
    ck_assert(r[0].has_session_arena); /* 0 is set, not unset */
    ck_assert_uint_eq(r[0].session_arena, 0);
    ck_assert(r[1].has_session_arena);
    ck_assert_uint_eq(r[1].session_arena, 1u << 20);
    ck_assert_uint_eq(r[1].max_inflight, 3);
    ck_assert(!r[2].has_session_arena); /* a rule that does not name it */
    ck_assert_uint_eq(r[2].session_arena, 0);
    ck_assert_int_eq(r[2].max_priority, GPUQ_PRIO_LOW);
    ck_assert(r[3].has_session_arena); /* above the global: kept as written */
    ck_assert_uint_eq(r[3].session_arena, 64ull << 30);
    ck_assert(r[4].has_session_arena); /* repeated: the last wins, 0 too */
    ck_assert_uint_eq(r[4].session_arena, 0);
    ck_assert_uint_eq(r[5].session_arena, 4096);
    /* the file's rules without session_arena have it unset */
    write_conf(path, full_conf);
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    for (int i = 0; i < c.pol.nrules; i++)
        ck_assert(!c.pol.rules[i].has_session_arena);
    /* a flag cannot set a rule key: --session-arena is [limits]' */
    const char *args[] = {"--config", path, "--session-arena", "0", NULL};
    write_conf(path, arena_conf);
    ck_assert_msg(load(&c, args) == 0, "%s", c.error);
    ck_assert_uint_eq(c.lim.session_arena, 0);
    ck_assert_uint_eq(c.pol.rules[1].session_arena, 1u << 20);
}
END_TEST

/* config_print writes a rule's session_arena only when set, 0 included,
 * and what it writes reads back the same (set/unset and value). */
START_TEST(arena_rules_print)
{
    config a, b;
    write_conf(path, arena_conf);
    ck_assert_msg(load_file(&a, path) == 0, "%s", a.error);
    char out[400];
    snprintf(out, sizeof out, "%s/printed.conf", dir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    config_print(&a, f);
    ck_assert_int_eq(fclose(f), 0);
    size_t len = 0;
    char *text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "[user root]\nsession_arena = 0\n") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "[group 0]\nmax_inflight = 3\nsession_arena = 1048576\n"), "%s",
                  text);
    ck_assert_msg(strstr(text, "[user 4242]\nmax_priority = low\n\n"), "%s", text);
    ck_assert_msg(strstr(text, "[group 4243]\nsession_arena = 68719476736\n"), "%s", text);
    ck_assert_msg(strstr(text, "[user 4244]\nsession_arena = 0\n"), "%s", text);
    free(text);
    ck_assert_msg(load_file(&b, out) == 0, "%s", b.error);
    assert_same(&a, &b);
    ck_assert_int_eq(config_log_changes(&a, &b), 0);
}
END_TEST

/* Run config_log_changes(o, n) with stderr (the logger's) caught into
 * dir/log.txt; returns its count and the text in log[cap]. */
static int log_changes_caught(const config *o, const config *n, char *log, size_t cap)
{
    char lp[400];
    snprintf(lp, sizeof lp, "%s/log.txt", dir);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(saved, 0);
    FILE *f = fopen(lp, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(dup2(fileno(f), STDERR_FILENO), 0);
    int count = config_log_changes(o, n);
    fflush(stderr);
    ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    fclose(f);
    size_t len = 0;
    char *text = tu_read_file(lp, &len);
    ck_assert_ptr_nonnull(text);
    snprintf(log, cap, "%s", text);
    free(text);
    return count;
}

/* A reload logs each session_arena rule change, with "unset" apart from 0,
 * and counts it; the same settings written otherwise ([user 0] for
 * [user root], 0K for 0) are no change. */
START_TEST(arena_rules_log_changes)
{
    config a, b, c;
    char log[2048];
    log_set_level(LOG_LVL_INFO);
    write_conf(path, "[user root]\nsession_arena = 0\n[group 0]\nsession_arena = 1M\n"
                     "[user 4242]\n[group 4243]\nsession_arena = 2M\n");
    ck_assert_msg(load_file(&a, path) == 0, "%s", a.error);
    write_conf(path, "[user root]\nsession_arena = 1M\n[group 0]\n"
                     "[user 4242]\nsession_arena = 0\n[group 4243]\nsession_arena = 2048K\n");
    ck_assert_msg(load_file(&b, path) == 0, "%s", b.error);
    ck_assert_int_eq(log_changes_caught(&a, &b, log, sizeof log), 3);
    ck_assert_msg(strstr(log, "reload: policy: [user root] session_arena 0 -> 1048576 "
                              "(0: arenas off)"),
                  "%s", log);
    ck_assert_msg(strstr(log, "reload: policy: [group 0] session_arena 1048576 -> unset"), "%s",
                  log);
    ck_assert_msg(strstr(log, "reload: policy: [user 4242] session_arena unset -> 0"), "%s", log);
    ck_assert_msg(!strstr(log, "4243"), "%s", log);
    ck_assert_int_eq(log_changes_caught(&b, &a, log, sizeof log), 3);
    ck_assert_msg(strstr(log, "[user 4242] session_arena 0 -> unset"), "%s", log);
    write_conf(path, "[user 0]\nsession_arena = 0K\n[group root]\nsession_arena = 1024K\n"
                     "[user 4242]\n[group 4243]\nsession_arena = 2M\n");
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_int_eq(log_changes_caught(&a, &c, log, sizeof log), 0);
    ck_assert_int_eq(log_changes_caught(&a, &a, log, sizeof log), 0);
}
END_TEST

/* resident_bytes and total_resident in [limits] (the defaults, the file,
 * flags over it, set_limit's ranges), resident_bytes in [user]/[group]
 * rules (0 kept apart from unset, a value above the global kept as written
 * and clamped by policy, the last of a repeated key wins), the printed form
 * and what a reload logs. */
START_TEST(resident_keys)
{
    config c;
    write_conf(path, resident_conf);
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_uint_eq(c.lim.resident_bytes, 3000000);
    ck_assert_uint_eq(c.lim.total_resident, 5ull << 30);
    ck_assert_uint_eq(c.lim.session_arena, GPUQ_DEFAULT_SESSION_ARENA); /* untouched */
    ck_assert_int_eq(c.pol.nrules, 5);
    const policy_rule *r = c.pol.rules;
    ck_assert(r[0].has_resident_bytes); /* 0 is set, not unset */
    ck_assert_uint_eq(r[0].resident_bytes, 0);
    ck_assert(r[1].has_resident_bytes);
    ck_assert_uint_eq(r[1].resident_bytes, 1u << 20);
    ck_assert(r[1].has_session_arena);
    ck_assert(!r[2].has_resident_bytes); /* a rule that does not name it */
    ck_assert_uint_eq(r[2].resident_bytes, 0);
    ck_assert(r[3].has_resident_bytes); /* above the global: kept as written */
    ck_assert_uint_eq(r[3].resident_bytes, 64ull << 30);
    ck_assert(r[4].has_resident_bytes); /* repeated: the last wins, 0 too */
    ck_assert_uint_eq(r[4].resident_bytes, 0);
    /* what policy makes of them: user over group, the group's 1M, the
     * 64G rule clamped to the global, the global for a peer without one */
    policy_caps caps;
    gid_t g0[] = {0}, g4243[] = {4243};
    policy_caps_for(&c, 0, 0, NULL, 0, &caps);
    ck_assert_uint_eq(caps.resident_bytes, 0);
    policy_caps_for(&c, 4250, 4250, g0, 1, &caps);
    ck_assert_uint_eq(caps.resident_bytes, 1u << 20);
    policy_caps_for(&c, 4250, 4250, g4243, 1, &caps);
    ck_assert_uint_eq(caps.resident_bytes, 3000000);
    policy_caps_for(&c, 4242, 4242, NULL, 0, &caps);
    ck_assert_uint_eq(caps.resident_bytes, 3000000);
    ck_assert_uint_eq(caps.session_arena, 2u << 20);
    /* flags over the file; a flag sets [limits], never a rule */
    const char *flags[] = {"--resident-bytes", "0", "--config", path, "--total-resident=1", NULL};
    ck_assert_msg(load(&c, flags) == 0, "%s", c.error);
    ck_assert_uint_eq(c.lim.resident_bytes, 0);
    ck_assert_uint_eq(c.lim.total_resident, 1);
    ck_assert_uint_eq(c.pol.rules[1].resident_bytes, 1u << 20);
    const char *bad_total[] = {"--total-resident", "0", NULL};
    ck_assert_int_eq(load(&c, bad_total), -1);
    ck_assert_msg(strstr(c.error, "--total-resident") && strstr(c.error, "at least 1"), "%s",
                  c.error);
    /* set_limit's table: resident_bytes 0 .. 2^64-1, total_resident 1 .. */
    uint64_t lo = 9, hi = 0, old = 0;
    char msg[160];
    ck_assert_int_eq(gpuq_limits_range("resident_bytes", &lo, &hi), 0);
    ck_assert(lo == 0 && hi == UINT64_MAX);
    ck_assert_int_eq(gpuq_limits_range("total_resident", &lo, &hi), 0);
    ck_assert(lo == 1 && hi == UINT64_MAX);
    gpuq_limits l;
    gpuq_limits_default(&l);
    ck_assert_int_eq(gpuq_limits_set(&l, "resident_bytes", 0, &old, msg, sizeof msg), 0);
    ck_assert_uint_eq(old, GPUQ_DEFAULT_RESIDENT_BYTES);
    ck_assert_uint_eq(l.resident_bytes, 0);
    ck_assert_int_eq(gpuq_limits_set(&l, "total_resident", 0, NULL, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "total_resident 0 is outside [1, 18446744073709551615]");
    ck_assert_uint_eq(l.total_resident, GPUQ_DEFAULT_TOTAL_RESIDENT);
    ck_assert_int_eq(gpuq_limits_set(&l, "total_resident", UINT64_MAX, &old, msg, sizeof msg), 0);
    ck_assert_uint_eq(old, GPUQ_DEFAULT_TOTAL_RESIDENT);
    ck_assert_uint_eq(l.total_resident, UINT64_MAX);
    /* printed: the limits, and a rule's key only when set (0 included) */
    write_conf(path, resident_conf);
    config a, b;
    ck_assert_msg(load_file(&a, path) == 0, "%s", a.error);
    char out[400];
    snprintf(out, sizeof out, "%s/printed.conf", dir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    config_print(&a, f);
    ck_assert_int_eq(fclose(f), 0);
    size_t len = 0;
    char *text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "\nresident_bytes = 3000000\ntotal_resident = 5368709120\n"), "%s",
                  text);
    ck_assert_msg(strstr(text, "[user root]\nresident_bytes = 0\n"), "%s", text);
    ck_assert_msg(strstr(text, "[group 0]\nsession_arena = 0\nresident_bytes = 1048576\n"), "%s",
                  text);
    ck_assert_msg(strstr(text, "[user 4242]\nsession_arena = 2097152\n\n"), "%s", text);
    ck_assert_msg(strstr(text, "[user 4244]\nresident_bytes = 0\n"), "%s", text);
    free(text);
    ck_assert_msg(load_file(&b, out) == 0, "%s", b.error);
    assert_same(&a, &b);
    ck_assert_int_eq(config_log_changes(&a, &b), 0);
    /* a reload logs and counts each change, "unset" apart from 0 */
    char log[2048];
    log_set_level(LOG_LVL_INFO);
    write_conf(path, "[limits]\nresident_bytes = 2M\ntotal_resident = 5G\n"
                     "[user root]\nresident_bytes = 1M\n[group 0]\nsession_arena = 0\n"
                     "[user 4242]\nresident_bytes = 0\nsession_arena = 2M\n"
                     "[group 4243]\nresident_bytes = 65536M\n"
                     "[user 4244]\nresident_bytes = 0\n");
    ck_assert_msg(load_file(&b, path) == 0, "%s", b.error);
    ck_assert_int_eq(log_changes_caught(&a, &b, log, sizeof log), 4);
    ck_assert_msg(strstr(log, "reload: resident_bytes 3000000 -> 2097152"), "%s", log);
    ck_assert_msg(strstr(log, "reload: policy: [user root] resident_bytes 0 -> 1048576 "
                              "(0: no resident arrays)"),
                  "%s", log);
    ck_assert_msg(strstr(log, "reload: policy: [group 0] resident_bytes 1048576 -> unset"), "%s",
                  log);
    ck_assert_msg(strstr(log, "reload: policy: [user 4242] resident_bytes unset -> 0"), "%s", log);
    ck_assert_msg(!strstr(log, "4243") && !strstr(log, "4244"), "%s", log);
    b.lim.total_resident = 7;
    ck_assert_int_eq(log_changes_caught(&a, &b, log, sizeof log), 5);
    ck_assert_msg(strstr(log, "reload: total_resident 5368709120 -> 7"), "%s", log);
}
END_TEST

/* listen_backlog ([server], needs a restart) and max_sessions_per_user
 * ([policy] and rules): defaults, file, flags over the file, the printed
 * form and what a reload logs. */
START_TEST(session_caps_keys)
{
    config c;
    ck_assert_int_eq(load(&c, NULL), 0);
    ck_assert_uint_eq(c.listen_backlog, SOMAXCONN);
    ck_assert_uint_eq(c.pol.max_sessions_per_user, 0);
    ck_assert_uint_eq(policy_sessions_per_user(&c), 64); /* a quarter of 256 */
    write_conf(path, "[server]\nlisten_backlog = 64\n"
                     "[limits]\nmax_sessions = 3\n"
                     "[policy]\nmax_sessions_per_user = 0\n"
                     "[user root]\nmax_sessions_per_user = 9\n"
                     "[group 0]\nmax_sessions_per_user = 2\nmax_inflight = 4\n");
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_uint_eq(c.listen_backlog, 64);
    ck_assert_uint_eq(policy_sessions_per_user(&c), 1); /* 3 / 4, at least 1 */
    ck_assert_int_eq(c.pol.nrules, 2);
    ck_assert_uint_eq(c.pol.rules[0].max_sessions_per_user, 9);
    ck_assert_uint_eq(c.pol.rules[1].max_sessions_per_user, 2);
    const char *flags[] = {"--listen-backlog=16",     "--config", path,
                           "--max-sessions-per-user", "5",        NULL};
    ck_assert_msg(load(&c, flags) == 0, "%s", c.error);
    ck_assert_uint_eq(c.listen_backlog, 16);
    ck_assert_uint_eq(c.pol.max_sessions_per_user, 5);
    ck_assert_uint_eq(policy_sessions_per_user(&c), 5);
    const char *bad_flag[] = {"--listen-backlog", "0", NULL};
    ck_assert_int_eq(load(&c, bad_flag), -1);
    ck_assert_msg(strstr(c.error, "--listen-backlog") && strstr(c.error, "1 .. 1048576"), "%s",
                  c.error);
    /* printed as the file spells them */
    char out[400];
    snprintf(out, sizeof out, "%s/printed.conf", dir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(load(&c, flags) == 0, "%s", c.error);
    config_print(&c, f);
    ck_assert_int_eq(fclose(f), 0);
    size_t len = 0;
    char *text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "\nlisten_backlog = 16\n"), "%s", text);
    ck_assert_msg(strstr(text, "\n[policy]\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nmax_sessions_per_user = 5\n"), "%s", text);
    ck_assert_msg(strstr(text, "[user root]\nmax_sessions_per_user = 9\n"), "%s", text);
    free(text);
    /* reload: listen_backlog needs a restart (warned, not counted); the
     * global value and a rule's are counted */
    config a, b;
    ck_assert_int_eq(load(&a, NULL), 0);
    ck_assert_int_eq(load(&b, NULL), 0);
    b.listen_backlog = 8;
    ck_assert_int_eq(config_log_changes(&a, &b), 0);
    b.pol.max_sessions_per_user = 2;
    ck_assert_int_eq(config_log_changes(&a, &b), 1);
    write_conf(path, "[user root]\nmax_sessions_per_user = 9\n");
    ck_assert_msg(load_file(&a, path) == 0, "%s", a.error);
    write_conf(path, "[user root]\nmax_sessions_per_user = 4\n");
    ck_assert_msg(load_file(&b, path) == 0, "%s", b.error);
    ck_assert_int_eq(config_log_changes(&a, &b), 1);
}
END_TEST

/* frame_min_rate and reply_timeout ([server], issue 30 item 5): defaults
 * (1M bytes/s, 30 s), the file, flags over the file, 0 (off), range
 * errors, the printed form and a reload. */
START_TEST(stall_bound_keys)
{
    config c;
    ck_assert_int_eq(load(&c, NULL), 0);
    ck_assert_uint_eq(c.frame_min_rate, 1u << 20);
    ck_assert(c.reply_timeout_s == 30.0);
    write_conf(path, "[server]\nframe_min_rate = 64K\nreply_timeout = 7.5\n");
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_uint_eq(c.frame_min_rate, 64u << 10);
    ck_assert(c.reply_timeout_s == 7.5);
    ck_assert(c.frame_timeout_s == 30.0); /* the others untouched */
    const char *flags[] = {"--frame-min-rate",  "100000", "--config", path,
                           "--reply-timeout=1", NULL};
    ck_assert_msg(load(&c, flags) == 0, "%s", c.error);
    ck_assert_uint_eq(c.frame_min_rate, 100000);
    ck_assert(c.reply_timeout_s == 1.0);
    const char *off[] = {"--frame-min-rate=0", "--reply-timeout", "0", NULL};
    ck_assert_msg(load(&c, off) == 0, "%s", c.error);
    ck_assert_uint_eq(c.frame_min_rate, 0);
    ck_assert(c.reply_timeout_s == 0.0);
    const char *bad_rt[] = {"--reply-timeout", "86401", NULL};
    ck_assert_int_eq(load(&c, bad_rt), -1);
    ck_assert_msg(strstr(c.error, "--reply-timeout") && strstr(c.error, "0 .. 86400"), "%s",
                  c.error);
    const char *neg_rt[] = {"--reply-timeout", "-0.5", NULL};
    ck_assert_int_eq(load(&c, neg_rt), -1);
    ck_assert_msg(strstr(c.error, "--reply-timeout") != NULL, "%s", c.error);
    const char *bad_rate[] = {"--frame-min-rate", "1X", NULL};
    ck_assert_int_eq(load(&c, bad_rate), -1);
    ck_assert_msg(strstr(c.error, "--frame-min-rate") && strstr(c.error, "bad size '1X'"), "%s",
                  c.error);
    /* printed, and loaded back */
    ck_assert_msg(load(&c, flags) == 0, "%s", c.error);
    char out[400];
    snprintf(out, sizeof out, "%s/printed.conf", dir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    config_print(&c, f);
    ck_assert_int_eq(fclose(f), 0);
    size_t len = 0;
    char *text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "\nframe_min_rate = 100000\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nreply_timeout = 1\n"), "%s", text);
    free(text);
    config b;
    ck_assert_msg(load_file(&b, out) == 0, "%s", b.error);
    assert_same(&c, &b);
    /* a reload counts each */
    config a;
    ck_assert_int_eq(load(&a, NULL), 0);
    ck_assert_int_eq(load(&b, NULL), 0);
    b.frame_min_rate = 1;
    ck_assert_int_eq(config_log_changes(&a, &b), 1);
    b.reply_timeout_s = 3;
    ck_assert_int_eq(config_log_changes(&a, &b), 2);
}
END_TEST

/* "[server]\nstate_dir = " and a path of n bytes (/ddd...) into text. */
static void state_dir_conf(char *text, size_t cap, size_t n, const char *sep)
{
    snprintf(text, cap, "[server]\nstate_dir%s/%0*d\n", sep, (int)n - 1, 0);
}

/* state_dir ([server], needs a restart): the default, the file, flags over
 * the file in either order, "" (no state directory: persistence off) from
 * both, the longest path ("state_dir = PATH" fills a config file line) and
 * one byte more, paths a config file cannot hold, and what print and a
 * reload do. */
START_TEST(state_dir_key)
{
    config c;
    ck_assert_int_eq(load(&c, NULL), 0);
    ck_assert_str_eq(c.state_dir, "/var/lib/gpuq");
    write_conf(path, "[server]\nstate_dir = /srv/gpuq/state   # comment\n");
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_str_eq(c.state_dir, "/srv/gpuq/state");
    ck_assert_str_eq(c.socket, ""); /* KIND_PATH by key: the socket untouched */
    const char *after[] = {"--config", path, "--state-dir", "/tmp/gpuq-st", NULL};
    const char *before[] = {"--state-dir=/tmp/gpuq-st", "--config", path, NULL};
    const char *const *orders[] = {after, before};
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(load(&c, orders[i]) == 0, "%s", c.error);
        ck_assert_str_eq(c.state_dir, "/tmp/gpuq-st");
    }
    const char *sock[] = {"--config", path, "--socket", "/tmp/gpuq-s.sock", NULL};
    ck_assert_msg(load(&c, sock) == 0, "%s", c.error);
    ck_assert_str_eq(c.socket, "/tmp/gpuq-s.sock");
    ck_assert_str_eq(c.state_dir, "/srv/gpuq/state"); /* --socket sets the socket only */
    /* empty: off, from the file, from a flag over the file, and --state-dir= */
    static const char *const empties[] = {"[server]\nstate_dir =\n", "[server]\nstate_dir=\n",
                                          "[server]\nstate_dir = # none\n"};
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
        write_conf(path, empties[i]);
        ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
        ck_assert_str_eq(c.state_dir, "");
    }
    write_conf(path, "[server]\nstate_dir = /srv/gpuq\n");
    const char *empty[] = {"--config", path, "--state-dir", "", NULL};
    ck_assert_msg(load(&c, empty) == 0, "%s", c.error);
    ck_assert_str_eq(c.state_dir, "");
    const char *empty_eq[] = {"--state-dir=", NULL};
    ck_assert_msg(load(&c, empty_eq) == 0, "%s", c.error);
    ck_assert_str_eq(c.state_dir, "");
    const char *back[] = {"--state-dir", "", "--config", path, "--state-dir", "/a", NULL};
    ck_assert_msg(load(&c, back) == 0, "%s", c.error); /* the last flag wins */
    ck_assert_str_eq(c.state_dir, "/a");
    /* the longest: 186 bytes, its printed line 198 characters */
    char text[5000], want[600];
    state_dir_conf(text, sizeof text, 186, " = ");
    ck_assert_int_eq(strlen(text), strlen("[server]\n") + CONFIG_LINE_MAX + 1);
    write_conf(path, text);
    ck_assert_msg(load_file(&c, path) == 0, "%s", c.error);
    ck_assert_uint_eq(strlen(c.state_dir), 186);
    /* 187: refused, from a file (a shorter line: no spaces) and a flag */
    state_dir_conf(text, sizeof text, 187, "=");
    write_conf(path, text);
    ck_assert_int_eq(load_file(&c, path), -1);
    snprintf(want, sizeof want,
             "%s:2: [server] state_dir: path longer than 186 bytes (\"state_dir = PATH\" must "
             "fit in a config file line of 198 characters)",
             path);
    ck_assert_str_eq(c.error, want);
    static const size_t lens[] = {187, 4095, 4096, 4500};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        state_dir_conf(text, sizeof text, lens[i], "=");
        char *arg = strchr(text, '/');
        arg[strlen(arg) - 1] = '\0';
        const char *flag[] = {"--state-dir", arg, NULL};
        ck_assert_int_eq(load(&c, flag), -1);
        ck_assert_str_eq(c.error, "--state-dir: path longer than 186 bytes (\"state_dir = PATH\" "
                                  "must fit in a config file line of 198 characters)");
    }
    /* a path the config file could not give back the same */
    static const char *const unprintable[] = {" /x", "/x ",   "/x\t",   "/a\nb", "#x",
                                              ";x",  "/a #b", "/a\t;b", "\t/x"};
    for (size_t i = 0; i < sizeof unprintable / sizeof unprintable[0]; i++) {
        const char *flag[] = {"--state-dir", unprintable[i], NULL};
        ck_assert_msg(load(&c, flag) == -1, "'%s' accepted", unprintable[i]);
        static const char lead[] = "--state-dir: a path with a space at either end";
        ck_assert_msg(!strncmp(c.error, lead, strlen(lead)) &&
                          strstr(c.error, "cannot be written in a config file"),
                      "%s", c.error);
    }
    static const char *const printable[] = {"/a;b", "/a#b", "/srv/gpuq state", "rel/dir", "/"};
    for (size_t i = 0; i < sizeof printable / sizeof printable[0]; i++) {
        const char *flag[] = {"--state-dir", printable[i], NULL};
        ck_assert_msg(load(&c, flag) == 0, "'%s': %s", printable[i], c.error);
        ck_assert_str_eq(c.state_dir, printable[i]);
    }
    /* printed, and loaded back: a path, and "" with its comment */
    char out[400];
    snprintf(out, sizeof out, "%s/printed.conf", dir);
    static const char *const values[] = {"/srv/gpuq state/x", ""};
    for (int i = 0; i < 2; i++) {
        const char *flag[] = {"--state-dir", values[i], NULL};
        config b;
        ck_assert_msg(load(&c, flag) == 0, "%s", c.error);
        FILE *f = fopen(out, "w");
        ck_assert_ptr_nonnull(f);
        config_print(&c, f);
        ck_assert_int_eq(fclose(f), 0);
        size_t len = 0;
        char *printed = tu_read_file(out, &len);
        ck_assert_ptr_nonnull(printed);
        snprintf(want, sizeof want, "\nstate_dir =%s%s\n", i ? "" : " ", values[i]);
        ck_assert_msg(strstr(printed, want), "%s", printed);
        ck_assert_msg(i == 0 || strstr(printed, "# state_dir: empty, so no state directory"), "%s",
                      printed);
        free(printed);
        ck_assert_msg(load_file(&b, out) == 0, "%s", b.error);
        assert_same(&c, &b);
        ck_assert_str_eq(b.state_dir, values[i]);
    }
    /* reload: needs a restart (warned, not counted) */
    config a, b;
    char log[2048];
    log_set_level(LOG_LVL_INFO);
    ck_assert_int_eq(load(&a, NULL), 0);
    const char *off[] = {"--state-dir=", NULL};
    ck_assert_int_eq(load(&b, off), 0);
    ck_assert_int_eq(log_changes_caught(&a, &b, log, sizeof log), 0);
    ck_assert_msg(strstr(log, "reload: state_dir /var/lib/gpuq -> (none) needs a restart; "
                              "ignored"),
                  "%s", log);
    ck_assert_int_eq(log_changes_caught(&b, &a, log, sizeof log), 0);
    ck_assert_msg(strstr(log, "reload: state_dir (none) -> /var/lib/gpuq needs a restart"), "%s",
                  log);
    ck_assert_int_eq(log_changes_caught(&a, &a, log, sizeof log), 0);
    ck_assert_msg(!strstr(log, "state_dir"), "%s", log);
    b.lim.max_inflight = 3; /* counted beside it */
    ck_assert_int_eq(log_changes_caught(&a, &b, log, sizeof log), 1);
    /* the key, its flag and its restart need, from the table */
    const config_key *k = config_key_find("server", "state_dir");
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(k->id, KEY_STATE_DIR);
    ck_assert_ptr_eq(config_key_find(NULL, "state_dir"), k);
    ck_assert_ptr_null(config_key_find("rule", "state_dir"));
    ck_assert(config_key_needs_restart(k));
    ck_assert(!config_key_is_server_number(k));
}
END_TEST

START_TEST(parse_priority)
{
    int p = 99;
    ck_assert_int_eq(config_parse_priority("low", &p), 0);
    ck_assert_int_eq(p, GPUQ_PRIO_LOW);
    ck_assert_int_eq(config_parse_priority("high", &p), 0);
    ck_assert_int_eq(p, GPUQ_PRIO_HIGH);
    ck_assert_int_eq(config_parse_priority("normal", &p), 0);
    ck_assert_int_eq(p, GPUQ_PRIO_NORMAL);
    static const struct {
        const char *s;
        int want;
    } ints[] = {{"-1", GPUQ_PRIO_LOW}, {"0", GPUQ_PRIO_NORMAL}, {"1", GPUQ_PRIO_HIGH}};
    for (int i = 0; i < 3; i++) {
        p = 99;
        ck_assert_int_eq(config_parse_priority(ints[i].s, &p), 0);
        ck_assert_int_eq(p, ints[i].want);
    }
    /* the old CUDA-number form is gone: nothing but the three levels */
    p = 99;
    static const char *const rejects[] = {"-5", "5", "-2", "2", "6", "", "2x", "+1", "urgent"};
    for (size_t i = 0; i < sizeof rejects / sizeof rejects[0]; i++)
        ck_assert_msg(config_parse_priority(rejects[i], &p) == -1, "'%s' accepted", rejects[i]);
    ck_assert_int_eq(p, 99);
}
END_TEST

/* ---- gpuqd --help, -h, -V, --name=VALUE ---- */

/* load(args) with stdout caught into a malloc'd string (*out); returns
 * load's result. */
static int load_caught(config *c, const char *const *args, char **out)
{
    char p[400];
    snprintf(p, sizeof p, "%s/stdout", dir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(saved >= 0 && fd >= 0);
    ck_assert_int_ge(dup2(fd, STDOUT_FILENO), 0);
    int rc = load(c, args);
    fflush(stdout);
    ck_assert_int_ge(dup2(saved, STDOUT_FILENO), 0);
    close(saved);
    close(fd);
    size_t len;
    *out = tu_read_file(p, &len);
    ck_assert_ptr_nonnull(*out);
    return rc;
}

/* The help text of flag "--name" as one line (its wrapped lines joined),
 * into buf; NULL when the help has no such option. */
static const char *help_of(const char *help, const char *flag, char *buf, size_t cap)
{
    char head[80];
    snprintf(head, sizeof head, "\n  %s", flag);
    const char *at = strstr(help, head);
    while (at && at[strlen(head)] != ' ' && at[strlen(head)] != '\n')
        at = strstr(at + 1, head);
    if (!at)
        return NULL;
    at += 3;
    size_t n = 0;
    for (const char *p = at; *p && n + 1 < cap; p++) {
        if (*p == '\n') {
            if (strncmp(p + 1, "        ", 8) != 0) /* not a continuation */
                break;
            while (p[1] == ' ')
                p++;
            buf[n++] = ' ';
            continue;
        }
        buf[n++] = *p;
    }
    buf[n] = '\0';
    return buf;
}

START_TEST(help_and_version)
{
    config c;
    char *out;
    static const char *const helps[] = {"--help", "-h"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"--max-inflight", "7", helps[i], NULL};
        ck_assert_int_eq(load_caught(&c, args, &out), 1);
        ck_assert_msg(strncmp(out, "usage: gpuqd", 12) == 0, "%s: %s", helps[i], out);
        /* every setting's flag, each with what it does and its default */
        for (int k = 0; k < KEY_COUNT; k++) {
            const config_key *key = config_key_by_id((enum config_key_id)k);
            if (!strcmp(key->section, "rule"))
                continue;
            char flag[48], line[1024];
            snprintf(flag, sizeof flag, "--%s", key->name);
            for (char *p = flag; *p; p++)
                if (*p == '_')
                    *p = '-';
            ck_assert_msg(help_of(out, flag, line, sizeof line), "--help lacks %s", flag);
            ck_assert_msg(strstr(line, " Default: ") != NULL, "%s has no default: %s", flag, line);
            ck_assert_msg(strlen(line) > strlen(flag) + 30, "%s says nothing: %s", flag, line);
        }
        static const char *const fixed[] = {"--config", "--check-config", "--reload", "--help",
                                            "--version"};
        for (int k = 0; k < 5; k++) {
            char line[1024];
            ck_assert_msg(help_of(out, fixed[k], line, sizeof line), "--help lacks %s", fixed[k]);
        }
        ck_assert_msg(strstr(out, "(also -h)") && strstr(out, "(also -V)"), "%s", out);
        ck_assert_msg(strstr(out, "--name=VALUE") && strstr(out, "examples:"), "%s", out);
        free(out);
    }
    static const char *const versions[] = {"--version", "-V"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {versions[i], NULL};
        ck_assert_int_eq(load_caught(&c, args, &out), 1);
        ck_assert_msg(strncmp(out, "gpuqd " GPUQ_VERSION " (", 8 + strlen(GPUQ_VERSION)) == 0,
                      "%s: %s", versions[i], out);
        free(out);
    }
    /* -h among bad flags: the bad flag is still an error when it comes first */
    const char *bad_first[] = {"--no-such-flag", "-h", NULL};
    ck_assert_int_eq(load(&c, bad_first), -1);
    const char *short_bad[] = {"-x", NULL};
    ck_assert_int_eq(load(&c, short_bad), -1);
    ck_assert_msg(strstr(c.error, "unknown option '-x'"), "%s", c.error);
}
END_TEST

/* The defaults --help states are the built-in values: each given back as
 * --name=DEFAULT changes nothing. */
START_TEST(help_defaults_are_defaults)
{
    config c, d;
    char *out;
    const char *hargs[] = {"--help", NULL};
    ck_assert_int_eq(load_caught(&c, hargs, &out), 1);
    ck_assert_int_eq(load(&d, NULL), 0);
    int checked = 0;
    for (int k = 0; k < KEY_COUNT; k++) {
        const config_key *key = config_key_by_id((enum config_key_id)k);
        if (!strcmp(key->section, "rule") || !strcmp(key->name, "socket") ||
            !strcmp(key->name, "admin_group") || !strcmp(key->name, "socket_group"))
            continue; /* their defaults are words: no value, root only, gpuqd's group */
        char flag[48], line[1024], arg[200];
        snprintf(flag, sizeof flag, "--%s", key->name);
        for (char *p = flag; *p; p++)
            if (*p == '_')
                *p = '-';
        ck_assert_ptr_nonnull(help_of(out, flag, line, sizeof line));
        const char *def = strstr(line, " Default: ");
        ck_assert_ptr_nonnull(def);
        def += 10;
        size_t n = strlen(def);
        ck_assert_msg(n > 1 && def[n - 1] == '.', "%s: %s", flag, line);
        snprintf(arg, sizeof arg, "%s=%.*s", flag, (int)(n - 1), def);
        const char *args[] = {arg, NULL};
        ck_assert_msg(load(&c, args) == 0, "%s: %s", arg, c.error);
        assert_same(&c, &d);
        checked++;
    }
    ck_assert_int_ge(checked, 20);
    free(out);
}
END_TEST

/* --name=VALUE is --name VALUE, for every kind of flag. */
START_TEST(flags_with_equals)
{
    write_conf(path, "[limits]\nmax_inflight = 5\n");
    char cfg[400];
    snprintf(cfg, sizeof cfg, "--config=%s", path);
    const char *eq[] = {cfg,
                        "--socket=/tmp/gpuq-eq.sock",
                        "--socket-mode=0600",
                        "--device=cpu",
                        "--log-level=debug",
                        "--drain-timeout=2.5",
                        "--max-payload=3M",
                        "--max-sessions=9",
                        "--max-priority=low",
                        "--admin-group=root",
                        "--idle-timeout=7",
                        NULL};
    const char *sp[] = {"--config",
                        path,
                        "--socket",
                        "/tmp/gpuq-eq.sock",
                        "--socket-mode",
                        "0600",
                        "--device",
                        "cpu",
                        "--log-level",
                        "debug",
                        "--drain-timeout",
                        "2.5",
                        "--max-payload",
                        "3M",
                        "--max-sessions",
                        "9",
                        "--max-priority",
                        "low",
                        "--admin-group",
                        "root",
                        "--idle-timeout",
                        "7",
                        NULL};
    config a, b;
    ck_assert_msg(load(&a, eq) == 0, "%s", a.error);
    ck_assert_msg(load(&b, sp) == 0, "%s", b.error);
    assert_same(&a, &b);
    ck_assert_str_eq(a.socket, "/tmp/gpuq-eq.sock");
    ck_assert_uint_eq(a.socket_mode, 0600);
    ck_assert_str_eq(a.device, "cpu");
    ck_assert_int_eq(a.log_level, LOG_LVL_DEBUG);
    ck_assert(a.drain_timeout_s == 2.5);
    ck_assert_uint_eq(a.lim.max_payload, 3u << 20);
    ck_assert_uint_eq(a.lim.max_sessions, 9);
    ck_assert_uint_eq(a.lim.max_inflight, 5); /* from the --config= file */
    ck_assert_int_eq(a.pol.max_priority, GPUQ_PRIO_LOW);
    ck_assert_str_eq(a.pol.admin_group, "root");
    ck_assert(a.idle_timeout_s == 7.0);
    /* --check-config=FILE and --reload=PID too */
    char chk[400];
    snprintf(chk, sizeof chk, "--check-config=%s", path);
    const char *check[] = {chk, NULL};
    char *out;
    ck_assert_int_eq(load_caught(&a, check, &out), 1);
    ck_assert_msg(strstr(out, "max_inflight = 5"), "%s", out);
    free(out);
    const char *reload[] = {"--reload=4242", NULL};
    ck_assert_int_eq(load(&a, reload), 0);
    ck_assert_int_eq(a.reload_pid, 4242);
    /* errors name the flag as with a space */
    const char *zero[] = {"--max-inflight=0", NULL};
    ck_assert_int_eq(load(&a, zero), -1);
    ck_assert_msg(strstr(a.error, "--max-inflight") && strstr(a.error, "1 .. 1048576"), "%s",
                  a.error);
    const char *empty[] = {"--log-level=", NULL};
    ck_assert_int_eq(load(&a, empty), -1);
    ck_assert_msg(strstr(a.error, "--log-level") && strstr(a.error, "empty value"), "%s", a.error);
    const char *flag_val[] = {"--help=yes", NULL};
    ck_assert_int_eq(load(&a, flag_val), -1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, every_key);
    tcase_add_test(tc, defaults_without_file);
    tcase_add_test(tc, flags_override_file);
    tcase_add_test(tc, flag_errors);
    tcase_add_loop_test(tc, file_errors, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, too_many_rules);
    tcase_add_test(tc, long_line);
    tcase_add_test(tc, root_ids);
    tcase_add_test(tc, example_is_defaults);
    tcase_add_test(tc, print_round_trip);
    tcase_add_test(tc, check_config_flag);
    tcase_add_test(tc, reload_flag);
    tcase_add_test(tc, log_changes_counts);
    tcase_add_test(tc, reload_rereads);
    tcase_add_test(tc, arena_rules);
    tcase_add_test(tc, arena_rules_print);
    tcase_add_test(tc, arena_rules_log_changes);
    tcase_add_test(tc, resident_keys);
    tcase_add_test(tc, session_caps_keys);
    tcase_add_test(tc, stall_bound_keys);
    tcase_add_test(tc, state_dir_key);
    tcase_add_test(tc, parse_priority);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, help_defaults_are_defaults);
    tcase_add_test(tc, flags_with_equals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
