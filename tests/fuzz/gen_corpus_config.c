/* SPDX-License-Identifier: Apache-2.0 */
/* gen_corpus_config.c - writes corpus_config/, fuzz_config's seed corpus
 * and its dictionary config.dict (corpus_writer.h says how to run it).
 * The example systemd/gpuqd.conf is a seed too (tests/fuzz/CMakeLists.txt
 * adds it), so the corpus follows it without a copy.
 *
 * Accepted files: every key of every section with a value other than its
 * default, each size spelling (K, KiB, KB, M, G, plain), seconds with
 * fractions and exponents, both priority spellings, both separators and
 * comment styles, a BOM, [user]/[group] rules by number and by the name
 * root (which every system has), 64 rules (the cap), a rule's
 * session_arena and resident_bytes at 0 (arenas off, no resident arrays),
 * at the global limit and above it, state_dir empty (persistence off) and
 * at its longest, and the file config_print writes for the defaults.
 * Refused files break one rule each:
 * every range edge just over, bad numbers and words, unknown sections and
 * keys, a key outside a section or in the wrong one, empty values, unknown
 * and repeated users and groups, 65 rules, names too long, a line too
 * long, a path too long or that a config file cannot hold, a section
 * header without its bracket.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_keys.h"
#include "corpus_writer.h"

static corpus *C;

static void conf(const char *name, const char *text)
{
    corpus_add(C, name, text, strlen(text));
}

static void gen_accepted(void)
{
    conf("ok-empty", "");
    conf("ok-comments-only", "# nothing\n; nothing either\n\n");
    conf("ok-every-key", "[server]\n"
                         "socket = /tmp/gpuq-fuzz/gpuqd.sock   ; comment\n"
                         "socket_mode = 0640\n"
                         "state_dir = /srv/gpuq-fuzz/state\n"
                         "device = cpu\n"
                         "log_level = debug   # comment\n"
                         "drain_timeout = 12.5\n"
                         "device_memory_limit = 3G\n"
                         "hello_timeout = 0\n"
                         "idle_timeout = 31536000\n"
                         "frame_timeout = 86400\n"
                         "staging_keep = 0\n"
                         "staging_release_after = 0.001\n"
                         "staging_headroom = 1M\n"
                         "device_window = 1\n"
                         "bulk_window = 0\n"
                         "priority_hold = 3600\n"
                         "\n"
                         "[limits]\n"
                         "  max_header = 8K\n"
                         "max_payload = 1M\n"
                         "max_output = 12345\n"
                         "max_inflight = 1048576\n"
                         "session_staging = 16M\n"
                         "total_staging = 64M\n"
                         "max_sessions = 1\n"
                         "session_arena = 32M\n"
                         "total_arena = 1G\n"
                         "resident_bytes = 64M\n"
                         "total_resident = 2G\n"
                         "\n"
                         "[policy]\n"
                         "admin_group = root\n"
                         "max_priority = normal\n"
                         "\n"
                         "[user root]\n"
                         "max_priority = high\n"
                         "max_inflight = 16\n"
                         "session_staging = 512M\n"
                         "session_arena = 8M\n"
                         "resident_bytes = 16M\n"
                         "\n"
                         "[group 0]\n"
                         "max_priority = -1\n"
                         "max_inflight = 1\n"
                         "session_arena = 0\n"
                         "resident_bytes = 0\n"
                         "\n"
                         "[user 4242]\n"
                         "session_staging = 1\n");
    conf("ok-sizes", "[limits]\nmax_payload = 4KiB\nmax_output = 4KB\nsession_staging = 1g\n"
                     "total_staging = 2Gi\n[server]\nstaging_keep = 7m\nstaging_headroom = "
                     "18446744073709551615\n"
                     "device_memory_limit = 17179869183G\n");
    conf("ok-seconds", "[server]\ndrain_timeout = 1e2\nhello_timeout = .5\nframe_timeout = 0.0\n"
                       "idle_timeout = 86400e0\nstaging_release_after = +3\n");
    conf("ok-priorities", "[policy]\nmax_priority = 0\n[group root]\nmax_priority = 1\n"
                          "[user 1]\nmax_priority = low\n");
    conf("ok-colon-separator", "[server]\nlog_level: warn\ndevice:auto\n");
    conf("ok-bom", "\xef\xbb\xbf[server]\nlog_level = error\n");
    conf("ok-spaces-in-headers", "  [ server ]  \n\tdevice = cuda\n[ user\t4243 ]\n");
    conf("ok-session-over-total", "[limits]\nsession_staging = 8G\ntotal_staging = 1G\n");
    conf("ok-arena-rules", "[limits]\nsession_arena = 1M\n[user root]\nsession_arena = 4G\n"
                           "[group root]\nsession_arena = 0\n[user 1]\nsession_arena = 1M\n"
                           "[group 1]\nsession_arena = 18446744073709551615\n"
                           "[user 2]\nsession_arena = 4KiB\nmax_inflight = 2\n");
    conf("ok-arena-off-globally", "[limits]\nsession_arena = 0\n[group 0]\nsession_arena = 1G\n");
    conf("ok-resident-rules", "[limits]\nresident_bytes = 1M\ntotal_resident = 1\n"
                              "[user root]\nresident_bytes = 4G\n[group root]\nresident_bytes = 0\n"
                              "[user 1]\nresident_bytes = 1M\nsession_arena = 0\n"
                              "[group 1]\nresident_bytes = 18446744073709551615\n");
    conf("ok-resident-off-globally",
         "[limits]\nresident_bytes = 0\n[group 0]\nresident_bytes = 1G\n");
    conf("ok-admin-group-empty", "[policy]\nadmin_group =\n");
    conf("ok-admin-group-number", "[policy]\nadmin_group = 4244\n");
    conf("ok-socket-mode-zero", "[server]\nsocket_mode = 0\n");
    conf("ok-socket-group-number", "[server]\nsocket_group = 0\n");
    conf("ok-socket-group-empty", "[server]\nsocket_group =\n");
    conf("ok-state-dir-empty", "[server]\nstate_dir =\n");
    conf("ok-state-dir-comment", "[server]\nstate_dir = # none: persistence off\n");
    conf("ok-state-dir-odd", "[server]\nstate_dir = relative/a;b#c d\n");
    conf("ok-repeated-keys", "[server]\nsocket = /tmp/a-much-longer-socket-path\nsocket = /x\n"
                             "[limits]\nmax_inflight = 3\n[limits]\nmax_inflight = 4\n");
    conf("ok-crlf", "[server]\r\nlog_level = info\r\n[user 9]\r\nmax_inflight = 2\r\n");
    conf("ok-default-print",
         "# gpuqd 0.1.0 settings: the defaults, then (no config file), then the flags.\n"
         "[server]\n"
         "# socket: not set\n"
         "socket_mode = 0660\n"
         "# socket_group: not set, so gpuqd's own group\n"
         "state_dir = /var/lib/gpuq\n"
         "device = auto\n"
         "log_level = info\n"
         "drain_timeout = 30\n"
         "device_memory_limit = 0\n"
         "hello_timeout = 10\n"
         "idle_timeout = 0\n"
         "frame_timeout = 30\n"
         "staging_keep = 64M\n"
         "staging_release_after = 5\n"
         "staging_headroom = 64M\n"
         "device_window = 256\n"
         "bulk_window = 8M\n"
         "priority_hold = 0.2\n"
         "\n[limits]\n"
         "max_header = 16384\n"
         "max_payload = 1073741824\n"
         "max_output = 2147483648\n"
         "max_inflight = 64\n"
         "session_staging = 2147483648\n"
         "total_staging = 4294967296\n"
         "max_sessions = 256\n"
         "session_arena = 4294967296\n"
         "total_arena = 17179869184\n"
         "resident_bytes = 8589934592\n"
         "total_resident = 34359738368\n"
         "\n[policy]\n"
         "admin_group =\n"
         "max_priority = high\n");

    char text[8192];
    size_t n = 0;
    for (int i = 0; i < 64; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "[%s %d]\nmax_inflight = %d\n",
                              i % 2 ? "group" : "user", 10000 + i, i + 1);
    conf("ok-64-rules", text);
    n += (size_t)snprintf(text + n, sizeof text - n, "[user 20000]\n");
    conf("bad-65-rules", text);
}

static void gen_refused(void)
{
    static const struct {
        const char *name, *text;
    } bad[] = {
        {"bad-unknown-section", "[servers]\ndevice = cpu\n"},
        {"bad-empty-unknown-section", "[foo]\n"},
        {"bad-unknown-key", "[server]\nmax_payload = 1\n"},
        {"bad-key-outside-section", "device = cpu\n"},
        {"bad-rule-key-in-global", "[policy]\nmax_inflight = 2\n"},
        {"bad-global-key-in-rule", "[user root]\nmax_payload = 1\n"},
        {"bad-no-equals", "[server]\ndevice\n"},
        {"bad-empty-value", "[server]\ndevice =\n"},
        {"bad-section-no-bracket", "[server\ndevice = cpu\n"},
        {"bad-socket-mode-8", "[server]\nsocket_mode = 0778\n"},
        {"bad-socket-mode-1000", "[server]\nsocket_mode = 1000\n"},
        {"bad-socket-mode-long", "[server]\nsocket_mode = 0000000000000\n"},
        {"bad-device", "[server]\ndevice = gpu\n"},
        {"bad-log-level", "[server]\nlog_level = verbose\n"},
        {"bad-drain-over", "[server]\ndrain_timeout = 86400.001\n"},
        {"bad-idle-over", "[server]\nidle_timeout = 31536001\n"},
        {"bad-hello-negative", "[server]\nhello_timeout = -1\n"},
        {"bad-frame-nan", "[server]\nframe_timeout = nan\n"},
        {"bad-frame-inf", "[server]\nframe_timeout = inf\n"},
        {"bad-release-huge", "[server]\nstaging_release_after = 1e400\n"},
        {"bad-seconds-suffix", "[server]\ndrain_timeout = 5s\n"},
        {"bad-size-negative", "[server]\nstaging_keep = -1\n"},
        {"bad-size-t", "[server]\nstaging_keep = 1T\n"},
        {"bad-size-over", "[server]\nstaging_keep = 18446744073709551616\n"},
        {"bad-size-shift-over", "[server]\ndevice_memory_limit = 17179869184G\n"},
        {"bad-size-kib-b", "[server]\nstaging_keep = 1KiBB\n"},
        {"bad-size-space", "[server]\nstaging_keep = 1 K\n"},
        {"bad-max-header-0", "[limits]\nmax_header = 0\n"},
        {"bad-max-header-over", "[limits]\nmax_header = 1073741825\n"},
        {"bad-max-inflight-over", "[limits]\nmax_inflight = 1048577\n"},
        {"bad-max-sessions-0", "[limits]\nmax_sessions = 0\n"},
        {"bad-max-payload-0", "[limits]\nmax_payload = 0\n"},
        {"bad-max-inflight-hex", "[limits]\nmax_inflight = 0x10\n"},
        {"bad-priority-word", "[policy]\nmax_priority = urgent\n"},
        {"bad-priority-2", "[policy]\nmax_priority = 2\n"},
        {"bad-rule-priority", "[group root]\nmax_priority = -5\n"},
        {"bad-rule-inflight-0", "[user root]\nmax_inflight = 0\n"},
        {"bad-rule-inflight-over", "[user root]\nmax_inflight = 1048577\n"},
        {"bad-rule-staging-0", "[user root]\nsession_staging = 0\n"},
        {"bad-rule-arena-negative", "[group root]\nsession_arena = -1\n"},
        {"bad-rule-arena-word", "[user root]\nsession_arena = off\n"},
        {"bad-rule-arena-over", "[user root]\nsession_arena = 18446744073709551616\n"},
        {"bad-rule-arena-shift-over", "[user root]\nsession_arena = 17179869184G\n"},
        {"bad-rule-arena-empty", "[group 0]\nsession_arena =\n"},
        {"bad-rule-arena-unset-word", "[group 0]\nsession_arena = unset\n"},
        {"bad-total-resident-0", "[limits]\ntotal_resident = 0\n"},
        {"bad-rule-resident-negative", "[user root]\nresident_bytes = -1\n"},
        {"bad-rule-resident-over", "[group 0]\nresident_bytes = 18446744073709551616\n"},
        {"bad-resident-in-policy", "[policy]\nresident_bytes = 1M\n"},
        {"bad-unknown-user", "[user no-such-user-gpuq]\n"},
        {"bad-unknown-group", "[group no-such-group-gpuq]\n"},
        {"bad-unknown-admin-group", "[policy]\nadmin_group = no-such-group-gpuq\n"},
        {"bad-unknown-socket-group", "[server]\nsocket_group = no-such-group-gpuq\n"},
        {"bad-state-dir-in-limits", "[limits]\nstate_dir = /x\n"},
        {"bad-state-dir-hash-first", "[server]\nstate_dir=#x\n"},
        {"bad-state-dir-semicolon-first", "[server]\nstate_dir=;x\n"},
        {"bad-user-no-name", "[user]\n"},
        {"bad-user-two-names", "[user root daemon]\n"},
        {"bad-user-id-max", "[user 4294967295]\n"},
        {"bad-user-twice", "[user root]\nmax_inflight = 2\n[user 0]\n"},
        {"bad-group-twice", "[group 0]\n[user 0]\n[group root]\n"},
        {"bad-user-name-64",
         "[user u123456789012345678901234567890123456789012345678901234567890123]\n"},
        {"bad-admin-group-64",
         "[policy]\nadmin_group = "
         "g123456789012345678901234567890123456789012345678901234567890123\n"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        conf(bad[k].name, bad[k].text);

    char line[400];
    snprintf(line, sizeof line, "[server]\nsocket = /%0300d\n", 0);
    conf("bad-line-too-long", line);
    snprintf(line, sizeof line, "[server]\nsocket = /tmp/%0102d\n", 0); /* 107 bytes: fits */
    conf("ok-socket-107", line);
    snprintf(line, sizeof line, "[server]\nsocket = /tmp/%0103d\n", 0);
    conf("bad-socket-108", line);
    /* state_dir: 186 bytes fill a line with "state_dir = "; 187 is refused
     * even where the line has room ("state_dir=") */
    snprintf(line, sizeof line, "[server]\nstate_dir = /%0185d\n", 0);
    conf("ok-state-dir-186", line);
    snprintf(line, sizeof line, "[server]\nstate_dir=/%0186d\n", 0);
    conf("bad-state-dir-187", line);
}

/* Inputs with flags (#ARGS) and a second file (#---): fuzz_config.c. */
static void gen_flags(void)
{
    conf("args-override", "#ARGS --max-inflight 3 --device cpu --log-level debug\n"
                          "[limits]\nmax_inflight = 5\n[server]\ndevice = cuda\n");
    conf("args-every-flag",
         "#ARGS --socket /tmp/s --socket-mode 0600 --device auto --log-level warn "
         "--drain-timeout 1 --max-header 4K --max-payload 1M --max-output 2M --max-inflight 2 "
         "--session-staging 8M --total-staging 4M --max-sessions 7\n"
         "[user 5]\nmax_inflight = 1\n");
    conf("args-more-flags",
         "#ARGS --device-memory-limit 1G --admin-group 0 --max-priority low --hello-timeout 2 "
         "--idle-timeout 3 --frame-timeout 4 --staging-keep 1M --staging-release-after 6 "
         "--staging-headroom 2M --session-arena 0 --total-arena 1G\n"
         "[user 6]\nsession_arena = 1M\n");
    conf("args-bad-value", "#ARGS --max-inflight 0\n[server]\ndevice = cpu\n");
    conf("args-state-dir", "#ARGS --state-dir /tmp/gpuq-st --socket /tmp/s\n"
                           "[server]\nstate_dir = /var/lib/elsewhere\n");
    conf("args-state-dir-empty", "#ARGS --state-dir=\n[server]\nstate_dir = /var/lib/gpuq\n");
    conf("args-state-dir-bad", "#ARGS --state-dir=/x\t\n");
    conf("args-unknown-flag", "#ARGS --max-speed 3\n");
    conf("args-missing-value", "#ARGS --device\n");
    conf("args-stray", "#ARGS stray\n");
    conf("args-help", "#ARGS --help\n");
    conf("args-config-dropped", "#ARGS --config /dev/stdin --check-config=/x\n");
    conf("two-files-rules-changed", "[user 1]\nmax_inflight = 2\n[group 2]\nmax_priority = low\n"
                                    "[user 3]\n\n#---\n"
                                    "[user 1]\nmax_inflight = 4\nmax_priority = high\n"
                                    "session_staging = 1M\n[user 4]\n[policy]\nadmin_group = 0\n"
                                    "max_priority = normal\n[limits]\nmax_header = 1K\n"
                                    "[server]\nsocket_mode = 0600\nstaging_keep = 1M\n"
                                    "state_dir =\n");
    conf("two-files-arena-rules", "[user 1]\nsession_arena = 0\n[group 2]\nsession_arena = 1M\n"
                                  "[user 3]\n[group 4]\nsession_arena = 2M\n#---\n"
                                  "[user 1]\nsession_arena = 1M\n[group 2]\n"
                                  "[user 3]\nsession_arena = 0\n[group 4]\nsession_arena = 2M\n");
    conf("two-files-second-bad", "#ARGS --device cpu\n[server]\nlog_level = warn\n#---\n"
                                 "[server]\nlog_level = loud\n");
}

/* Section and key names from gpuqd's own table (config_keys.c), so the
 * dictionary follows it; then values and syntax. */
static void gen_dict(void)
{
    static const char *const words[] = {
        "[server]",   "[limits]",   "[policy]",
        "[user ",     "[group ",    "]",
        " = ",        ": ",         "\n",
        " ; ",        " # ",        "\xef\xbb\xbf",
        "auto",       "cuda",       "cpu",
        "error",      "warn",       "info",
        "debug",      "low",        "normal",
        "high",       "-1",         "root",
        "0",          "4294967295", "18446744073709551615",
        "86400",      "31536000",   "1048576",
        "1073741824", "K",          "M",
        "G",          "KiB",        "e",
        "0777",       "#ARGS ",     "\n#---\n",
        "--help",     "--version",
    };
    corpus_dict_comment(C, "fuzz_config's libFuzzer dictionary, written by gen_corpus_config");
    corpus_dict_comment(C, "(do not edit: rerun it)");
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        corpus_dict_word(C, words[k]);
    corpus_dict_comment(C, "keys, and the flags of the global ones (--KEY with '-' for '_')");
    for (int i = 0; i < KEY_COUNT; i++) {
        const config_key *k = config_key_by_id((enum config_key_id)i);
        char flag[64];
        corpus_dict_word(C, k->name);
        if (!strcmp(k->section, "rule"))
            continue;
        snprintf(flag, sizeof flag, "--%s", k->name);
        for (char *p = flag; *p; p++)
            if (*p == '_')
                *p = '-';
        corpus_dict_word(C, flag);
    }
}

static void gen(corpus *c)
{
    C = c;
    gen_dict();
    gen_accepted();
    gen_refused();
    gen_flags();
}

int main(int argc, char **argv)
{
    return corpus_main(argc, argv, "fuzz_config (tests/fuzz/corpus_config)", gen);
}
