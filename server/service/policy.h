/* SPDX-License-Identifier: Apache-2.0 */
/* policy.h - who may do what: admin status and per-peer caps from the
 * peer's credentials (SO_PEERCRED uid/gid, SO_PEERGROUPS) and the config's
 * [policy], [user NAME] and [group NAME] sections.
 *
 * An admin is root, or a member (primary or supplementary group) of
 * policy.admin_group. Caps: for each of max_priority, max_inflight,
 * session_staging, session_arena and resident_bytes, a [user] section naming
 * the peer wins, else the first [group] section (in file order) the peer is
 * a member of that sets it, else the global value: the limits for
 * max_inflight, session_staging, session_arena and resident_bytes, and
 * policy.max_priority for non-admins (admins are not capped by it). A rule
 * never raises max_inflight, session_staging, session_arena or
 * resident_bytes above the global limit. A rule's session_arena 0 is a cap
 * like any other (arenas off for the peer); a rule that does not set it
 * (has_session_arena false) leaves it to the next. resident_bytes the same
 * way (0: the peer may store no resident arrays; has_resident_bytes).
 * An unknown peer (uid -1) gets the global values, whatever the rules.
 *
 * Sessions per user: a non-admin may hold max_sessions_per_user sessions
 * at once (policy.max_sessions_per_user; its default, 0, is a quarter of
 * max_sessions, at least 1: one user can fill at most a quarter of the
 * server, so three more can still get in while one hoards). Root and
 * admins are capped only by max_sessions. A [user] rule naming the peer,
 * else the first [group] rule it is a member of that sets it, replaces
 * the value (raising or lowering it; admins too), as for max_priority;
 * max_sessions caps everyone anyway. The server counts open sessions per
 * uid in a policy_users table: counted when a session starts, dropped when
 * it closes, and checked before a connection becomes a session.
 */
#ifndef GPUQ_SERVER_POLICY_H
#define GPUQ_SERVER_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

typedef struct policy_caps {
    bool admin;
    int max_priority;               /* highest level the session may get (GPUQ_PRIO_*) */
    uint32_t max_inflight;          /* requests in flight */
    uint64_t session_staging;       /* staging bytes */
    uint64_t session_arena;         /* arena bytes (0: arenas off); what arena_open/import check */
    uint64_t resident_bytes;        /* resident array bytes this uid may own (0: none) */
    uint32_t max_sessions_per_user; /* sessions of this uid at once; UINT32_MAX: no cap */
} policy_caps;

/* Open sessions per uid: a sorted array of the uids that have one. */
typedef struct policy_user_count {
    uid_t uid;
    uint32_t n;
} policy_user_count;
typedef struct policy_users {
    policy_user_count *v; /* owned */
    uint32_t len, cap;
} policy_users;

/* The peer: uid/gid from SO_PEERCRED (uid (uid_t)-1: unknown, no rights
 * beyond the defaults), groups (borrowed, may be NULL) its supplementary
 * groups. */
void policy_caps_for(const config *cfg, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                     policy_caps *out);
/* The supplementary groups of the peer of Unix socket fd (SO_PEERGROUPS,
 * Linux 4.13+) into *groups (malloc'd, the caller's) and *n: 0, or an
 * errno value with nothing set (then only the primary gid counts). */
int policy_peer_groups(int fd, gid_t **groups, int *n);
/* The level a session gets: the one it asked, lowered to caps->max_priority.
 * Both are levels of the one scale (GPUQ_PRIO_*), so this is a min(). */
int policy_grant_priority(const policy_caps *caps, int asked);

/* The global max_sessions_per_user in force: cfg->pol's, or for 0 a
 * quarter of lim.max_sessions, at least 1. */
uint32_t policy_sessions_per_user(const config *cfg);
/* Sessions uid holds (0 when none). */
uint32_t policy_users_count(const policy_users *u, uid_t uid);
/* One more session of uid. Returns 0 or GPUQ_E_NO_MEMORY (nothing counted). */
int policy_users_add(policy_users *u, uid_t uid);
/* One session of uid fewer (it was counted by policy_users_add). */
void policy_users_drop(policy_users *u, uid_t uid);
/* Free the table (it may be used again, empty). */
void policy_users_free(policy_users *u);

#endif
