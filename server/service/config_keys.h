/* SPDX-License-Identifier: Apache-2.0 */
/* config_keys.h - the settings gpuqd knows by name, shared by the config file
 * and the command line: a flag is the key with '-' for '_' (--max-inflight is
 * [limits] max_inflight), so both check a value the same way.
 *
 * Happy path: config_key_find("limits", "max_inflight") gives the key;
 * config_key_set parses the value, checks its range and stores it.
 *
 * Failure: config_key_set returns -1 with a one-line reason ("0 out of range
 * (1 .. 1048576)", "unknown group 'x'") and leaves the setting as it was.
 */
#ifndef GPUQ_SERVER_CONFIG_KEYS_H
#define GPUQ_SERVER_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The longest line the config file reader takes, in characters without the
 * line break: libinih reads into a buffer of INI_MAX_LINE bytes (200), and
 * config_file.c refuses a line that does not fit. A path key takes only
 * values whose "key = value" line fits, so that config_print's output reads
 * back. */
#define CONFIG_LINE_MAX 198

enum config_key_id {
    KEY_SOCKET,
    KEY_SOCKET_MODE,
    KEY_SOCKET_GROUP,
    KEY_STATE_DIR,
    KEY_LISTEN_BACKLOG,
    KEY_DEVICE,
    KEY_LOG_LEVEL,
    KEY_DRAIN_TIMEOUT,
    KEY_DEVICE_MEMORY_LIMIT,
    KEY_HELLO_TIMEOUT,
    KEY_IDLE_TIMEOUT,
    KEY_FRAME_TIMEOUT,
    KEY_FRAME_MIN_RATE,
    KEY_REPLY_TIMEOUT,
    KEY_STAGING_KEEP,
    KEY_STAGING_RELEASE_AFTER,
    KEY_STAGING_HEADROOM,
    KEY_DEVICE_WINDOW,
    KEY_BULK_WINDOW,
    KEY_PRIORITY_HOLD,
    KEY_BATCH_MAX,
    KEY_BATCH_BYTES,
    KEY_IO_THREADS,
    KEY_IO_BULK_MIN,
    KEY_SLOWLOG_LEN,
    KEY_SLOWLOG_MIN_US,
    KEY_MONITOR_QUEUE,
    KEY_MAX_HEADER,
    KEY_MAX_PAYLOAD,
    KEY_MAX_OUTPUT,
    KEY_MAX_INFLIGHT,
    KEY_SESSION_STAGING,
    KEY_TOTAL_STAGING,
    KEY_MAX_SESSIONS,
    KEY_SESSION_ARENA,
    KEY_TOTAL_ARENA,
    KEY_RESIDENT_BYTES,
    KEY_TOTAL_RESIDENT,
    KEY_ADMIN_GROUP,
    KEY_MAX_PRIORITY,
    KEY_MAX_SESSIONS_PER_USER,
    KEY_RULE_MAX_PRIORITY,
    KEY_RULE_MAX_INFLIGHT,
    KEY_RULE_SESSION_STAGING,
    KEY_RULE_SESSION_ARENA,
    KEY_RULE_RESIDENT_BYTES,
    KEY_RULE_MAX_SESSIONS_PER_USER,
    KEY_COUNT
};

typedef struct config_key {
    enum config_key_id id;
    const char *section; /* "server", "limits", "policy"; "rule": [user]/[group] */
    const char *name;
    int kind;          /* how the value is parsed (config_keys.c) */
    uint64_t min, max; /* numbers and sizes */
} config_key;

/* The key named name in section ("server", "limits", "policy", "rule"), or in
 * any of the global sections when section is NULL. NULL if there is none. */
const config_key *config_key_find(const char *section, const char *name);
const config_key *config_key_by_id(enum config_key_id id);

/* The field of c that a [server] seconds or size key sets (double * for
 * KIND_SECONDS, uint64_t * for KIND_SIZE), or NULL for other keys. Printing,
 * reloading and setting all go through it. */
void *config_key_field(config *c, const config_key *k);
const void *config_key_cfield(const config *c, const config_key *k);
/* True for keys whose change needs a restart (a reload warns and ignores). */
bool config_key_needs_restart(const config_key *k);
/* The value of a [server] seconds or size key as the config file spells it. */
const char *config_key_value_str(const config *c, const config_key *k, char *buf, size_t cap);
/* Is k a seconds or size key of the [server] section (config_key_field)? */
bool config_key_is_server_number(const config_key *k);

/* Parse value (borrowed) and store it in c, or in rule for "rule" keys.
 * Returns 0, or -1 with the reason in why[cap]. */
int config_key_set(config *c, policy_rule *rule, const config_key *k, const char *value, char *why,
                   size_t cap);

/* "123", "4K", "16M", "2G" (binary units). Returns 0 or -1. */
int config_parse_size(const char *s, uint64_t *out);
/* A priority level: "low", "normal", "high" or "-1", "0", "1" (nothing
 * else). Returns 0 or -1. */
int config_parse_priority(const char *s, int *prio);

/* Look up a user or group by name or number into *id. Returns 0 or -1. */
int config_resolve_id(const char *name, int is_group, uint32_t *id);

/* "low", "normal", "high" for the levels; any other int (a bug) in buf[cap]. */
const char *config_prio_str(int prio, char *buf, size_t cap);
/* "error", "warn", "info", "debug". */
const char *config_log_level_str(int level);
/* Seconds as the shortest decimal that reads back to the same double. */
const char *config_seconds_str(double s, char *buf, size_t cap);

#endif
