/* SPDX-License-Identifier: Apache-2.0 */
/* test_policy.c - policy_caps_for: who is an admin and which caps apply,
 * from uid, primary gid, supplementary groups and the config's rules
 * (session_arena and resident_bytes, where a rule's 0 is a value, on their
 * own); and
 * policy_grant_priority, the cap applied to a hello's level; sessions per
 * user (the default, admins, rules) and the per-uid count. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "header.h"
#include "policy.h"
#include "testutil.h"

static config cfg;

static policy_rule *add_rule(bool is_group, uint32_t id, int prio, uint32_t infl, uint64_t stg)
{
    policy_rule *r = &cfg.pol.rules[cfg.pol.nrules++];
    memset(r, 0, sizeof *r);
    r->is_group = is_group;
    r->id = id;
    r->max_priority = prio;
    r->max_inflight = infl;
    r->session_staging = stg;
    return r;
}

static void setup(void)
{
    memset(&cfg, 0, sizeof cfg);
    gpuq_limits_default(&cfg.lim);
    cfg.pol.max_priority = GPUQ_PRIO_NORMAL;
    cfg.pol.admin_gid = (gid_t)-1;
}

START_TEST(admins)
{
    policy_caps c;
    policy_caps_for(&cfg, 0, 0, NULL, 0, &c);
    ck_assert(c.admin);
    ck_assert_int_eq(c.max_priority, GPUQ_PRIO_HIGH); /* not capped */
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert(!c.admin);
    ck_assert_int_eq(c.max_priority, GPUQ_PRIO_NORMAL);
    snprintf(cfg.pol.admin_group, sizeof cfg.pol.admin_group, "ops");
    cfg.pol.admin_gid = 2000;
    policy_caps_for(&cfg, 1000, 2000, NULL, 0, &c); /* primary group */
    ck_assert(c.admin);
    gid_t g[] = {5, 2000};
    policy_caps_for(&cfg, 1000, 1000, g, 2, &c); /* supplementary */
    ck_assert(c.admin);
    policy_caps_for(&cfg, 1000, 1000, g, 1, &c);
    ck_assert(!c.admin);
    policy_caps_for(&cfg, (uid_t)-1, 2000, NULL, 0, &c); /* unknown peer: nothing */
    ck_assert(!c.admin);
    ck_assert_uint_eq(c.max_inflight, cfg.lim.max_inflight);
}
END_TEST

START_TEST(rules_merge_by_field)
{
    policy_caps c;
    add_rule(true, 300, GPUQ_PRIO_LOW, 4, 0);         /* [group students] */
    add_rule(true, 301, GPUQ_PRIO_HIGH, 0, 1u << 20); /* [group labs] */
    add_rule(false, 1000, GPUQ_PRIO_UNSET, 16, 0);    /* [user alice] */
    gid_t both[] = {300, 301};
    /* alice in both groups: inflight from her user rule, priority from the
     * first group that sets it, staging from the first that sets it */
    policy_caps_for(&cfg, 1000, 1000, both, 2, &c);
    ck_assert_uint_eq(c.max_inflight, 16);
    ck_assert_int_eq(c.max_priority, GPUQ_PRIO_LOW);
    ck_assert_uint_eq(c.session_staging, 1u << 20);
    /* bob only in labs: high priority although the default cap is normal */
    gid_t labs[] = {301};
    policy_caps_for(&cfg, 1001, 1001, labs, 1, &c);
    ck_assert_int_eq(c.max_priority, GPUQ_PRIO_HIGH);
    ck_assert_uint_eq(c.max_inflight, cfg.lim.max_inflight);
    /* a rule never raises a cap above the global limit */
    cfg.lim.max_inflight = 8;
    policy_caps_for(&cfg, 1000, 1000, both, 2, &c);
    ck_assert_uint_eq(c.max_inflight, 8);
    /* primary gid counts as membership */
    policy_caps_for(&cfg, 1002, 300, NULL, 0, &c);
    ck_assert_int_eq(c.max_priority, GPUQ_PRIO_LOW);
    ck_assert_uint_eq(c.max_inflight, 4);
    /* nobody matched: globals */
    policy_caps_for(&cfg, 1003, 1003, NULL, 0, &c);
    ck_assert_int_eq(c.max_priority, GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(c.session_staging, cfg.lim.session_staging);
}
END_TEST

/* A rule asking more than the global limit is clamped to it (policy.h: a
 * rule never raises max_inflight or session_staging above the global
 * limit), whether it is a [user] or a [group] rule, and one below or equal
 * to the limit applies as written; each field on its own. */
START_TEST(rules_never_raise_limits)
{
    policy_caps c;
    cfg.lim.session_staging = 1u << 20;
    cfg.lim.max_inflight = 8;
    policy_rule *user = add_rule(false, 1000, GPUQ_PRIO_UNSET, 0, (1u << 20) + 1);
    policy_rule *grp = add_rule(true, 300, GPUQ_PRIO_UNSET, 0, 4u << 20);
    gid_t g300[] = {300};
    /* session_staging above the limit, one byte and four times over */
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.session_staging, 1u << 20);
    ck_assert_uint_eq(c.max_inflight, 8);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.session_staging, 1u << 20);
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c); /* the user rule wins, clamped */
    ck_assert_uint_eq(c.session_staging, 1u << 20);
    /* at the limit and one below: as written */
    user->session_staging = 1u << 20;
    grp->session_staging = (1u << 20) - 1;
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.session_staging, 1u << 20);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.session_staging, (1u << 20) - 1);
    /* the user rule wins even when it is higher than the group's (still
     * within the limit) */
    user->session_staging = (1u << 20) - 64;
    grp->session_staging = 4096;
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.session_staging, (1u << 20) - 64);
    /* max_inflight the same way: over is clamped, at and below as written */
    user->max_inflight = 9;
    grp->max_inflight = 1000;
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.max_inflight, 8);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.max_inflight, 8);
    user->max_inflight = 8;
    grp->max_inflight = 7;
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.max_inflight, 8);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.max_inflight, 7);
    /* admins too: root with a rule above the limits gets the limits */
    add_rule(false, 0, GPUQ_PRIO_UNSET, 64, 8u << 20);
    policy_caps_for(&cfg, 0, 0, NULL, 0, &c);
    ck_assert(c.admin);
    ck_assert_uint_eq(c.session_staging, 1u << 20);
    ck_assert_uint_eq(c.max_inflight, 8);
    /* an unknown peer: the limits, whatever the rules */
    policy_caps_for(&cfg, (uid_t)-1, 300, g300, 1, &c);
    ck_assert_uint_eq(c.session_staging, 1u << 20);
    ck_assert_uint_eq(c.max_inflight, 8);
}
END_TEST

static policy_rule *arena_rule(policy_rule *r, uint64_t bytes)
{
    r->has_session_arena = true;
    r->session_arena = bytes;
    return r;
}

/* session_arena rules: a [user] rule wins, else the first [group] rule in
 * file order (not in the order of the peer's groups) that sets it; a rule
 * that sets other fields but not this one is passed over; 0 from a rule
 * turns arenas off; unset everywhere gives the global limit. */
START_TEST(arena_precedence)
{
    policy_caps c;
    cfg.lim.session_arena = 8u << 20;
    arena_rule(add_rule(true, 300, GPUQ_PRIO_UNSET, 0, 0), 2u << 20); /* [group labs] 2M */
    arena_rule(add_rule(true, 301, GPUQ_PRIO_UNSET, 0, 0), 0);        /* [group guests] 0 */
    add_rule(true, 302, GPUQ_PRIO_LOW, 4, 1u << 20);                  /* [group other]: no arena */
    arena_rule(add_rule(false, 1000, GPUQ_PRIO_UNSET, 0, 0), 6u << 20); /* [user alice] 6M */
    arena_rule(add_rule(false, 1006, GPUQ_PRIO_UNSET, 0, 0), 0);        /* [user mallory] 0 */
    add_rule(false, 1007, GPUQ_PRIO_UNSET, 3, 0);                       /* [user bob]: no arena */
    gid_t labs_guests[] = {300, 301}, guests_labs[] = {301, 300};
    gid_t guests[] = {301}, other_guests[] = {302, 301}, other[] = {302}, labs[] = {300};
    /* the user rule beats both groups, also when it is higher than theirs */
    policy_caps_for(&cfg, 1000, 1000, labs_guests, 2, &c);
    ck_assert_uint_eq(c.session_arena, 6u << 20);
    policy_caps_for(&cfg, 1000, 301, NULL, 0, &c); /* guests as the primary group */
    ck_assert_uint_eq(c.session_arena, 6u << 20);
    /* the first group in file order, whatever order the peer lists them */
    policy_caps_for(&cfg, 1001, 1001, labs_guests, 2, &c);
    ck_assert_uint_eq(c.session_arena, 2u << 20);
    policy_caps_for(&cfg, 1001, 1001, guests_labs, 2, &c);
    ck_assert_uint_eq(c.session_arena, 2u << 20);
    policy_caps_for(&cfg, 1001, 301, labs, 1, &c); /* primary guests, supplementary labs */
    ck_assert_uint_eq(c.session_arena, 2u << 20);
    /* 0 from a group rule: arenas off; the other caps are untouched */
    policy_caps_for(&cfg, 1002, 1002, guests, 1, &c);
    ck_assert_uint_eq(c.session_arena, 0);
    ck_assert_uint_eq(c.session_staging, cfg.lim.session_staging);
    ck_assert_uint_eq(c.max_inflight, cfg.lim.max_inflight);
    /* a group that sets other fields but not session_arena is passed over */
    policy_caps_for(&cfg, 1003, 1003, other_guests, 2, &c);
    ck_assert_uint_eq(c.session_arena, 0);
    ck_assert_uint_eq(c.session_staging, 1u << 20); /* from [group other] */
    policy_caps_for(&cfg, 1004, 1004, other, 1, &c);
    ck_assert_uint_eq(c.session_arena, 8u << 20);
    /* 0 from a user rule beats a group's 2M */
    policy_caps_for(&cfg, 1006, 1006, labs, 1, &c);
    ck_assert_uint_eq(c.session_arena, 0);
    /* a user rule without session_arena leaves it to the groups */
    policy_caps_for(&cfg, 1007, 1007, labs, 1, &c);
    ck_assert_uint_eq(c.session_arena, 2u << 20);
    ck_assert_uint_eq(c.max_inflight, 3);
    policy_caps_for(&cfg, 1007, 1007, NULL, 0, &c);
    ck_assert_uint_eq(c.session_arena, 8u << 20);
    /* nobody matched, and an unknown peer whatever its groups: the global */
    policy_caps_for(&cfg, 1005, 1005, NULL, 0, &c);
    ck_assert_uint_eq(c.session_arena, 8u << 20);
    policy_caps_for(&cfg, (uid_t)-1, 301, guests, 1, &c);
    ck_assert_uint_eq(c.session_arena, 8u << 20);
    /* admins are capped by a rule that names them too */
    arena_rule(add_rule(true, 0, GPUQ_PRIO_UNSET, 0, 0), 0); /* [group root] 0 */
    policy_caps_for(&cfg, 0, 0, NULL, 0, &c);
    ck_assert(c.admin);
    ck_assert_uint_eq(c.session_arena, 0);
}
END_TEST

/* A session_arena rule above the global limit is clamped to it, at and
 * below it applies as written, and with the global limit 0 (arenas off for
 * everyone) no rule turns them back on. */
START_TEST(arena_never_above_limit)
{
    policy_caps c;
    cfg.lim.session_arena = 1u << 20;
    policy_rule *user = arena_rule(add_rule(false, 1000, GPUQ_PRIO_UNSET, 0, 0), (1u << 20) + 1);
    policy_rule *grp = arena_rule(add_rule(true, 300, GPUQ_PRIO_UNSET, 0, 0), UINT64_MAX);
    gid_t g300[] = {300};
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.session_arena, 1u << 20);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.session_arena, 1u << 20);
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.session_arena, 1u << 20);
    user->session_arena = 1u << 20;
    grp->session_arena = (1u << 20) - 4096;
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.session_arena, 1u << 20);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.session_arena, (1u << 20) - 4096);
    /* arenas off globally: every rule's cap is 0 */
    cfg.lim.session_arena = 0;
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.session_arena, 0);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.session_arena, 0);
    /* a rule's unset value is the flag, not the number: a stale number
     * without has_session_arena caps nothing */
    cfg.lim.session_arena = 1u << 20;
    user->has_session_arena = false;
    user->session_arena = 4096;
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.session_arena, 1u << 20);
}
END_TEST

static policy_rule *resident_rule(policy_rule *r, uint64_t bytes)
{
    r->has_resident_bytes = true;
    r->resident_bytes = bytes;
    return r;
}

/* resident_bytes: the global limit (8 GiB by default) without rules; a
 * [user] rule wins, else the first [group] rule in file order that sets
 * it; a rule that sets other fields (session_arena included) but not this
 * one is passed over; 0 from a rule means no resident arrays; it moves
 * apart from session_arena. */
START_TEST(resident_precedence)
{
    policy_caps c;
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.resident_bytes, GPUQ_DEFAULT_RESIDENT_BYTES);
    ck_assert_uint_eq(GPUQ_DEFAULT_RESIDENT_BYTES, 8ull << 30);
    cfg.lim.resident_bytes = 3000000;                                     /* not a power of two */
    resident_rule(add_rule(true, 300, GPUQ_PRIO_UNSET, 0, 0), 1000000);   /* [group labs] */
    resident_rule(add_rule(true, 301, GPUQ_PRIO_UNSET, 0, 0), 0);         /* [group guests] 0 */
    arena_rule(add_rule(true, 302, GPUQ_PRIO_UNSET, 0, 0), 4096);         /* [group other]: arena */
    resident_rule(add_rule(false, 1000, GPUQ_PRIO_UNSET, 0, 0), 2500000); /* [user alice] */
    resident_rule(add_rule(false, 1006, GPUQ_PRIO_UNSET, 0, 0), 0);       /* [user mallory] 0 */
    add_rule(false, 1007, GPUQ_PRIO_UNSET, 3, 0); /* [user bob]: no resident_bytes */
    gid_t labs_guests[] = {300, 301}, guests_labs[] = {301, 300};
    gid_t guests[] = {301}, other_guests[] = {302, 301}, other[] = {302}, labs[] = {300};
    /* the user rule beats both groups, also when it is higher than theirs */
    policy_caps_for(&cfg, 1000, 1000, labs_guests, 2, &c);
    ck_assert_uint_eq(c.resident_bytes, 2500000);
    ck_assert_uint_eq(c.session_arena, cfg.lim.session_arena); /* untouched */
    /* the first group in file order, whatever order the peer lists them */
    policy_caps_for(&cfg, 1001, 1001, labs_guests, 2, &c);
    ck_assert_uint_eq(c.resident_bytes, 1000000);
    policy_caps_for(&cfg, 1001, 1001, guests_labs, 2, &c);
    ck_assert_uint_eq(c.resident_bytes, 1000000);
    policy_caps_for(&cfg, 1001, 301, labs, 1, &c); /* primary guests, supplementary labs */
    ck_assert_uint_eq(c.resident_bytes, 1000000);
    /* 0 from a group rule: none; the other caps are untouched */
    policy_caps_for(&cfg, 1002, 1002, guests, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 0);
    ck_assert_uint_eq(c.session_arena, cfg.lim.session_arena);
    ck_assert_uint_eq(c.session_staging, cfg.lim.session_staging);
    /* a group that sets session_arena but not resident_bytes is passed
     * over for this one, and caps only the other */
    policy_caps_for(&cfg, 1003, 1003, other_guests, 2, &c);
    ck_assert_uint_eq(c.resident_bytes, 0);
    ck_assert_uint_eq(c.session_arena, 4096);
    policy_caps_for(&cfg, 1004, 1004, other, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    /* 0 from a user rule beats a group's cap */
    policy_caps_for(&cfg, 1006, 1006, labs, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 0);
    /* a user rule without resident_bytes leaves it to the groups */
    policy_caps_for(&cfg, 1007, 1007, labs, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 1000000);
    ck_assert_uint_eq(c.max_inflight, 3);
    policy_caps_for(&cfg, 1007, 1007, NULL, 0, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    /* an unknown peer, whatever its groups: the global */
    policy_caps_for(&cfg, (uid_t)-1, 301, guests, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    /* admins are capped by a rule that names them too */
    policy_caps_for(&cfg, 0, 0, NULL, 0, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    resident_rule(add_rule(true, 0, GPUQ_PRIO_UNSET, 0, 0), 0); /* [group root] 0 */
    policy_caps_for(&cfg, 0, 0, NULL, 0, &c);
    ck_assert(c.admin);
    ck_assert_uint_eq(c.resident_bytes, 0);
}
END_TEST

/* A resident_bytes rule above the global limit is clamped to it, at and
 * below it applies as written, with the global limit 0 no rule allows any,
 * and a stale number without has_resident_bytes caps nothing. */
START_TEST(resident_never_above_limit)
{
    policy_caps c;
    cfg.lim.resident_bytes = 3000000;
    policy_rule *user = resident_rule(add_rule(false, 1000, GPUQ_PRIO_UNSET, 0, 0), 3000001);
    policy_rule *grp = resident_rule(add_rule(true, 300, GPUQ_PRIO_UNSET, 0, 0), UINT64_MAX);
    gid_t g300[] = {300};
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    user->resident_bytes = 3000000;
    grp->resident_bytes = 2999999;
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 2999999);
    /* none globally: every rule's cap is 0 */
    cfg.lim.resident_bytes = 0;
    policy_caps_for(&cfg, 1000, 1000, g300, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 0);
    policy_caps_for(&cfg, 1001, 1001, g300, 1, &c);
    ck_assert_uint_eq(c.resident_bytes, 0);
    /* the flag, not the number, says whether a rule sets it */
    cfg.lim.resident_bytes = 3000000;
    user->has_resident_bytes = false;
    user->resident_bytes = 4096;
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.resident_bytes, 3000000);
}
END_TEST

/* Every level asked under every cap: the grant is the lower of the two on
 * the one scale low < normal < high, never more urgent than the cap. */
START_TEST(grant_is_capped)
{
    static const int levels[] = {GPUQ_PRIO_LOW, GPUQ_PRIO_NORMAL, GPUQ_PRIO_HIGH};
    for (int ci = 0; ci < 3; ci++)
        for (int ai = 0; ai < 3; ai++) {
            policy_caps c = {.max_priority = levels[ci]};
            int got = policy_grant_priority(&c, levels[ai]);
            int want = levels[ai < ci ? ai : ci];
            ck_assert_msg(got == want, "asked %s under cap %s: got %d, want %s",
                          gpuq_prio_name(levels[ai]), gpuq_prio_name(levels[ci]), got,
                          gpuq_prio_name(want));
        }
    /* the caps policy_caps_for computes are levels the grant can use:
     * an admin (not capped) asking high gets high, a low-capped rule low */
    policy_caps c;
    policy_caps_for(&cfg, 0, 0, NULL, 0, &c);
    ck_assert_int_eq(policy_grant_priority(&c, GPUQ_PRIO_HIGH), GPUQ_PRIO_HIGH);
    add_rule(false, 1000, GPUQ_PRIO_LOW, 0, 0);
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_int_eq(policy_grant_priority(&c, GPUQ_PRIO_HIGH), GPUQ_PRIO_LOW);
    ck_assert_int_eq(policy_grant_priority(&c, GPUQ_PRIO_NORMAL), GPUQ_PRIO_LOW);
    ck_assert_int_eq(policy_grant_priority(&c, GPUQ_PRIO_LOW), GPUQ_PRIO_LOW);
    policy_caps_for(&cfg, 1001, 1001, NULL, 0, &c); /* the global cap: normal */
    ck_assert_int_eq(policy_grant_priority(&c, GPUQ_PRIO_HIGH), GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(policy_grant_priority(&c, GPUQ_PRIO_LOW), GPUQ_PRIO_LOW);
}
END_TEST

/* max_sessions_per_user: a quarter of max_sessions (at least 1) by
 * default, or the global value; root and admins not capped; a [user] rule
 * beats the first [group] rule that sets it, and either may raise or lower
 * it (admins too). */
START_TEST(sessions_per_user)
{
    policy_caps c;
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.max_sessions_per_user, cfg.lim.max_sessions / 4);
    ck_assert_uint_eq(policy_sessions_per_user(&cfg), 64);
    cfg.lim.max_sessions = 7;
    ck_assert_uint_eq(policy_sessions_per_user(&cfg), 1);
    cfg.lim.max_sessions = 3; /* a quarter is 0: at least 1 */
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.max_sessions_per_user, 1);
    cfg.lim.max_sessions = 256;
    cfg.pol.max_sessions_per_user = 5;
    policy_caps_for(&cfg, 1000, 1000, NULL, 0, &c);
    ck_assert_uint_eq(c.max_sessions_per_user, 5);
    policy_caps_for(&cfg, 0, 0, NULL, 0, &c); /* root */
    ck_assert_uint_eq(c.max_sessions_per_user, UINT32_MAX);
    snprintf(cfg.pol.admin_group, sizeof cfg.pol.admin_group, "ops");
    cfg.pol.admin_gid = 2000;
    gid_t ops[] = {2000};
    policy_caps_for(&cfg, 1000, 1000, ops, 1, &c); /* an admin */
    ck_assert_uint_eq(c.max_sessions_per_user, UINT32_MAX);
    policy_caps_for(&cfg, (uid_t)-1, 1000, NULL, 0, &c); /* unknown: the global value */
    ck_assert_uint_eq(c.max_sessions_per_user, 5);
    add_rule(true, 300, GPUQ_PRIO_UNSET, 0, 0)->max_sessions_per_user = 2;  /* [group a] */
    add_rule(true, 301, GPUQ_PRIO_UNSET, 0, 0)->max_sessions_per_user = 40; /* [group b] */
    add_rule(false, 1001, GPUQ_PRIO_UNSET, 0, 0)->max_sessions_per_user = 9;
    add_rule(false, 1002, GPUQ_PRIO_UNSET, 4, 0); /* sets no session cap */
    gid_t ab[] = {300, 301}, ba[] = {301, 300}, b[] = {301};
    policy_caps_for(&cfg, 1000, 1000, ab, 2, &c); /* first group rule in file order */
    ck_assert_uint_eq(c.max_sessions_per_user, 2);
    policy_caps_for(&cfg, 1000, 1000, ba, 2, &c);
    ck_assert_uint_eq(c.max_sessions_per_user, 2);
    policy_caps_for(&cfg, 1000, 1000, b, 1, &c); /* raised above the global value */
    ck_assert_uint_eq(c.max_sessions_per_user, 40);
    policy_caps_for(&cfg, 1001, 1001, ab, 2, &c); /* the user rule wins */
    ck_assert_uint_eq(c.max_sessions_per_user, 9);
    policy_caps_for(&cfg, 1002, 1002, NULL, 0, &c); /* its rule sets no cap */
    ck_assert_uint_eq(c.max_sessions_per_user, 5);
    gid_t ops_a[] = {2000, 300};
    policy_caps_for(&cfg, 1003, 1003, ops_a, 2, &c); /* an admin named by a rule */
    ck_assert(c.admin);
    ck_assert_uint_eq(c.max_sessions_per_user, 2);
}
END_TEST

/* The per-uid count: add, drop back to none, many uids in any order. */
START_TEST(users_count)
{
    policy_users u = {0};
    ck_assert_uint_eq(policy_users_count(&u, 1000), 0);
    ck_assert_int_eq(policy_users_add(&u, 1000), 0);
    ck_assert_int_eq(policy_users_add(&u, 1000), 0);
    ck_assert_int_eq(policy_users_add(&u, 0), 0);
    ck_assert_uint_eq(policy_users_count(&u, 1000), 2);
    ck_assert_uint_eq(policy_users_count(&u, 0), 1);
    ck_assert_uint_eq(policy_users_count(&u, 999), 0);
    policy_users_drop(&u, 1000);
    ck_assert_uint_eq(policy_users_count(&u, 1000), 1);
    policy_users_drop(&u, 1000);
    ck_assert_uint_eq(policy_users_count(&u, 1000), 0);
    ck_assert_uint_eq(u.len, 1); /* a uid with none left is gone */
    /* more uids than the first allocation, added in a scrambled order */
    for (uint32_t i = 0; i < 100; i++)
        for (uint32_t k = 0; k <= i % 3; k++)
            ck_assert_int_eq(policy_users_add(&u, (uid_t)((i * 37) % 100 + 5000)), 0);
    for (uint32_t i = 0; i < 100; i++)
        ck_assert_uint_eq(policy_users_count(&u, (uid_t)((i * 37) % 100 + 5000)), i % 3 + 1);
    for (uint32_t i = 1; i < u.len; i++)
        ck_assert(u.v[i - 1].uid < u.v[i].uid);
    ck_assert_uint_eq(policy_users_count(&u, (uid_t)-1), 0);
    ck_assert_int_eq(policy_users_add(&u, (uid_t)-1), 0);
    ck_assert_uint_eq(policy_users_count(&u, (uid_t)-1), 1);
    ck_assert_uint_eq(policy_users_count(&u, 0), 1);
    policy_users_free(&u);
    ck_assert_uint_eq(policy_users_count(&u, 0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("policy");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, admins);
    tcase_add_test(tc, rules_merge_by_field);
    tcase_add_test(tc, rules_never_raise_limits);
    tcase_add_test(tc, arena_precedence);
    tcase_add_test(tc, arena_never_above_limit);
    tcase_add_test(tc, resident_precedence);
    tcase_add_test(tc, resident_never_above_limit);
    tcase_add_test(tc, grant_is_capped);
    tcase_add_test(tc, sessions_per_user);
    tcase_add_test(tc, users_count);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
