/* SPDX-License-Identifier: Apache-2.0 */
/* policy.c - see policy.h. */
#include "policy.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

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
    if (!known)
        return;
    const policy_rule *user = NULL;
    const policy_rule *prio = NULL, *infl = NULL, *stg = NULL, *arn = NULL;
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
    }
    if (user && user->max_priority != GPUQ_PRIO_UNSET)
        prio = user;
    if (user && user->max_inflight)
        infl = user;
    if (user && user->session_staging)
        stg = user;
    if (user && user->has_session_arena)
        arn = user;
    if (prio)
        out->max_priority = prio->max_priority;
    if (infl && infl->max_inflight < out->max_inflight)
        out->max_inflight = infl->max_inflight;
    if (stg && stg->session_staging < out->session_staging)
        out->session_staging = stg->session_staging;
    if (arn && arn->session_arena < out->session_arena)
        out->session_arena = arn->session_arena; /* 0: arenas off for this peer */
}
