/* SPDX-License-Identifier: Apache-2.0 */
/* policy.c - see policy.h. */
#include "policy.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "errors.h"
#include "header.h"

int policy_peer_groups(int fd, gid_t **groups, int *n)
{
    socklen_t len = 64 * sizeof(gid_t);
    for (int tries = 0; tries < 3; tries++) {
        gid_t *g = malloc(len);
        if (!g)
            return ENOMEM;
        socklen_t got = len;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &got) == 0) {
            *groups = g;
            *n = (int)(got / sizeof(gid_t));
            return 0;
        }
        int err = errno;
        free(g);
        if (err != ERANGE || got <= len)
            return err;
        len = got;
    }
    return ERANGE;
}

static bool policy_in_group(gid_t want, gid_t gid, const gid_t *groups, int ngroups)
{
    if (gid == want)
        return true;
    for (int i = 0; i < ngroups; i++)
        if (groups[i] == want)
            return true;
    return false;
}

int policy_grant_priority(const policy_caps *caps, int asked)
{
    return asked > caps->max_priority ? caps->max_priority : asked;
}

void policy_caps_for(const config *cfg, uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                     policy_caps *out)
{
    const gpuq_policy *pol = &cfg->pol;
    bool known = uid != (uid_t)-1;
    out->admin = known && (uid == 0 || (pol->admin_group[0] &&
                                        policy_in_group(pol->admin_gid, gid, groups, ngroups)));
    out->max_priority = out->admin ? GPUQ_PRIO_HIGH : pol->max_priority;
    out->max_inflight = cfg->lim.max_inflight;
    out->session_staging = cfg->lim.session_staging;
    out->session_arena = cfg->lim.session_arena;
    out->resident_bytes = cfg->lim.resident_bytes;
    out->max_sessions_per_user = out->admin ? UINT32_MAX : policy_sessions_per_user(cfg);
    if (!known)
        return;
    const policy_rule *user = NULL;
    const policy_rule *prio = NULL, *infl = NULL, *stg = NULL, *arn = NULL, *res = NULL;
    const policy_rule *nses = NULL;
    for (int i = 0; i < pol->nrules; i++) {
        const policy_rule *r = &pol->rules[i];
        if (!r->is_group) {
            if (r->id == (uint32_t)uid)
                user = r;
            continue;
        }
        if (!policy_in_group((gid_t)r->id, gid, groups, ngroups))
            continue;
        if (!prio && r->max_priority != GPUQ_PRIO_UNSET)
            prio = r;
        if (!infl && r->max_inflight)
            infl = r;
        if (!stg && r->session_staging)
            stg = r;
        if (!arn && r->has_session_arena)
            arn = r;
        if (!res && r->has_resident_bytes)
            res = r;
        if (!nses && r->max_sessions_per_user)
            nses = r;
    }
    if (user && user->max_priority != GPUQ_PRIO_UNSET)
        prio = user;
    if (user && user->max_inflight)
        infl = user;
    if (user && user->session_staging)
        stg = user;
    if (user && user->has_session_arena)
        arn = user;
    if (user && user->has_resident_bytes)
        res = user;
    if (user && user->max_sessions_per_user)
        nses = user;
    if (prio)
        out->max_priority = prio->max_priority;
    if (infl && infl->max_inflight < out->max_inflight)
        out->max_inflight = infl->max_inflight;
    if (stg && stg->session_staging < out->session_staging)
        out->session_staging = stg->session_staging;
    if (arn && arn->session_arena < out->session_arena)
        out->session_arena = arn->session_arena; /* 0: arenas off for this peer */
    if (res && res->resident_bytes < out->resident_bytes)
        out->resident_bytes = res->resident_bytes; /* 0: no resident arrays for this peer */
    if (nses) /* replaces, admins too (max_sessions caps everyone anyway) */
        out->max_sessions_per_user = nses->max_sessions_per_user;
}

uint32_t policy_sessions_per_user(const config *cfg)
{
    if (cfg->pol.max_sessions_per_user)
        return cfg->pol.max_sessions_per_user;
    uint32_t q = cfg->lim.max_sessions / 4;
    return q ? q : 1;
}

/* The index of uid in u->v, or where it would go (*found false). */
static uint32_t policy_users_find(const policy_users *u, uid_t uid, bool *found)
{
    uint32_t lo = 0, hi = u->len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (u->v[mid].uid < uid)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < u->len && u->v[lo].uid == uid;
    return lo;
}

uint32_t policy_users_count(const policy_users *u, uid_t uid)
{
    bool found;
    uint32_t i = policy_users_find(u, uid, &found);
    return found ? u->v[i].n : 0;
}

int policy_users_add(policy_users *u, uid_t uid)
{
    bool found;
    uint32_t i = policy_users_find(u, uid, &found);
    if (found) {
        u->v[i].n++;
        return 0;
    }
    if (u->len == u->cap) {
        uint32_t ncap = u->cap ? u->cap * 2 : 16;
        policy_user_count *nv = realloc(u->v, ncap * sizeof *nv);
        if (!nv)
            return GPUQ_E_NO_MEMORY;
        u->v = nv;
        u->cap = ncap;
    }
    memmove(&u->v[i + 1], &u->v[i], (u->len - i) * sizeof u->v[0]);
    u->v[i] = (policy_user_count){.uid = uid, .n = 1};
    u->len++;
    return 0;
}

void policy_users_drop(policy_users *u, uid_t uid)
{
    bool found;
    uint32_t i = policy_users_find(u, uid, &found);
    assert(found && u->v[i].n > 0); /* counted by policy_users_add */
    if (!found)
        return;
    if (--u->v[i].n == 0) {
        memmove(&u->v[i], &u->v[i + 1], (u->len - i - 1) * sizeof u->v[0]);
        u->len--;
    }
}

void policy_users_free(policy_users *u)
{
    free(u->v);
    memset(u, 0, sizeof *u);
}
