/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - gpuqd's settings: defaults, then the INI config file, then the
 * command line (flags override the file).
 *
 * Happy path: config_load(c, argc, argv) starts from the defaults
 * (proto/gpuq_limits.h), reads the file named by --config (parsed with
 * libinih), then applies the flags. config_reload does the same again for
 * SIGHUP; the server applies what may change at run time (limits, log level,
 * drain timeout, policy) and says what it did.
 *
 * Failure: an unknown section or key, a bad number, a value out of range or
 * an unknown user/group is an error naming the file and line
 * ("gpuqd.conf:12: ..."); the message goes into c->error (and, from
 * config_load, to stderr). A reload that fails keeps the old settings.
 */
#ifndef GPUQ_SERVER_CONFIG_H
#define GPUQ_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "gpuq_limits.h"
#include "gpuq_version.h"

#define GPUQD_VERSION GPUQ_VERSION
#define GPUQ_POLICY_MAX_RULES 64
#define GPUQ_NAME_MAX 64

/* Caps for the peers a [user NAME] or [group NAME] section names. A field
 * left unset keeps the global value (max_priority: PRIO_UNSET; max_inflight,
 * session_staging: 0). session_arena 0 is a value (arenas off), so whether
 * it is set is its own flag: has_session_arena false means unset, whatever
 * session_arena holds (a rule zeroed with memset is a rule with nothing set).
 * resident_bytes likewise (0: no resident arrays; has_resident_bytes). */
#define GPUQ_PRIO_UNSET (-100)
typedef struct policy_rule {
    bool is_group;                  /* [group NAME] (else [user NAME]) */
    uint32_t id;                    /* uid or gid, resolved when the file is read */
    char name[GPUQ_NAME_MAX];       /* as written in the section header */
    int max_priority;               /* a level (GPUQ_PRIO_*) or GPUQ_PRIO_UNSET */
    uint32_t max_inflight;          /* 0: unset */
    uint64_t session_staging;       /* 0: unset */
    bool has_session_arena;         /* session_arena is set */
    uint64_t session_arena;         /* arena bytes (0: arenas off), if has_session_arena */
    bool has_resident_bytes;        /* resident_bytes is set */
    uint64_t resident_bytes;        /* resident array bytes of the uid (0: none), if set */
    uint32_t max_sessions_per_user; /* 0: unset */
    int line;                       /* line of the section header */
} policy_rule;

typedef struct gpuq_policy {
    /* Admins: root, and members of admin_group (primary or supplementary). */
    char admin_group[GPUQ_NAME_MAX]; /* "" : root only */
    gid_t admin_gid;                 /* (gid_t)-1 when admin_group is "" */
    int max_priority;                /* cap for non-admins without a rule (GPUQ_PRIO_*) */
    /* Sessions one uid may hold at once, for non-admins without a rule
     * (policy.h); 0: a quarter of lim.max_sessions, at least 1
     * (policy_sessions_per_user). */
    uint32_t max_sessions_per_user;
    int nrules;
    policy_rule rules[GPUQ_POLICY_MAX_RULES];
} gpuq_policy;

typedef struct config {
    char config_path[4096]; /* the --config file; "" : none */
    char socket[108];       /* "" : resolve ($GPUQ_SOCKET, XDG, /run/gpuq) */
    unsigned socket_mode;   /* of a socket gpuqd binds itself (default 0660) */
    /* Group of the socket gpuqd binds and of the directory it makes for it
     * (then 0750): "" (socket_gid (gid_t)-1) leaves both to gpuqd's own. */
    char socket_group[GPUQ_NAME_MAX];
    gid_t socket_gid;
    /* Where gpuqd persists resident arrays (PROTOCOL.md 3.5); "" : nowhere
     * (persistence off). Default /var/lib/gpuq, the unit's StateDirectory=.
     * A path config_print can write back as one config file line, so at
     * most CONFIG_LINE_MAX - strlen("state_dir = ") bytes (config_keys.h).
     * Needs a restart. */
    char state_dir[4096];
    /* listen(2)'s backlog: connections the kernel queues before gpuqd
     * accepts them (capped by net.core.somaxconn); also set on a socket
     * systemd passed. Needs a restart. */
    uint64_t listen_backlog;
    char device[8]; /* "auto", "cuda", "cpu" */
    gpuq_limits lim;
    uint64_t device_memory_limit; /* device bytes per GPU for gpuqd's pool; 0: none */
    int log_level;                /* LOG_LVL_* */
    double drain_timeout_s;
    /* Slow clients (0: off). A connection without hello after hello_timeout,
     * a session with nothing in flight and no byte for idle_timeout, and a
     * frame whose bytes stop for frame_timeout are closed (GPUQ_E_TIMEOUT).
     * So is a frame that arrives slower than frame_min_rate bytes per second
     * on average, counted from its first byte (or from when its staging was
     * granted) once frame_timeout has passed: a client trickling a large
     * payload cannot hold its staging for long. And a session whose replies
     * the client does not read: its write queue took no byte for
     * reply_timeout. Both give their staging back at once. */
    double hello_timeout_s;
    double idle_timeout_s;
    double frame_timeout_s;
    uint64_t frame_min_rate;
    double reply_timeout_s;
    /* Staging memory: bytes kept allocated when idle (the rest is given back
     * once no reservation came for staging_release_after seconds), and the
     * headroom only sessions holding no staging may use (staging.h). */
    uint64_t staging_keep;
    double staging_release_s;
    uint64_t staging_headroom;
    /* The scheduler (scheduler.c): requests running on one device at once;
     * lower-priority bytes running while a higher level is active; how long
     * a level stays active after its last compute request. */
    uint64_t device_window;
    uint64_t bulk_window;
    double priority_hold_s;
    /* Batching (backend.h): at most batch_max small requests (input +
     * output at most batch_bytes) of a batchable op that are ready in one
     * loop turn run together; 0: every request runs alone. */
    uint64_t batch_max;
    uint64_t batch_bytes;
    /* The I/O threads (transport/io_pool.h): how many (0: none, every byte
     * moves on the loop thread; needs a restart), and the payload rest or
     * reply size from which they move a session's bytes. */
    uint64_t io_threads;
    uint64_t io_bulk_min;
    /* Watching requests (request/request_log.h): the slowlog keeps the
     * slowlog_len slowest requests (0: off) of at least slowlog_min_us
     * microseconds; a monitor connection holds at most monitor_queue bytes
     * of record frames unread, then drops records (and counts them). */
    uint64_t slowlog_len;
    uint64_t slowlog_min_us;
    uint64_t monitor_queue;
    gpuq_policy pol;
    bool check_only;  /* --check-config FILE: print and exit */
    pid_t reload_pid; /* --reload PID: SIGHUP to that gpuqd and exit; 0: none */
    char error[512];  /* last error, one line */
} config;

/* Defaults, then --config FILE (or --check-config FILE), then the flags.
 * Returns 0 to run (or, with c->reload_pid set, to signal that gpuqd: the
 * settings given are valid), 1 to exit 0 (--help/--version printed, or
 * --check-config printed the effective settings), -1 on an error (message on
 * stderr and in c->error; exit 2). argv is not kept. */
int config_load(config *c, int argc, char **argv);

/* Re-read for SIGHUP: the same file and flags. Returns 0 or -1 (c->error). */
int config_reload(config *c, int argc, char **argv);

/* Print the effective settings as a config file gpuqd would accept. */
void config_print(const config *c, FILE *f);

/* Log (info) each run-time setting that differs between old and new, in the
 * form "reload: max_inflight 64 -> 32"; warn for settings that need a restart
 * (socket, socket_mode, socket_group, state_dir, device, listen_backlog, ...:
 * "... needs a restart; ignored"). Returns the
 * number of run-time changes (the ones the server applies; not the warnings). */
int config_log_changes(const config *old_cfg, const config *new_cfg);

#endif
