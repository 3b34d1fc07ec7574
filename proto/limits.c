/* SPDX-License-Identifier: Apache-2.0 */
/* limits.c - the configurable limits: defaults (values live in gpuq_limits.h)
 * and one table of their names, fields and ranges, which set_limit, the
 * config file and the hello reply (both ends) all go through. */
#include "gpuq_limits.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "mpread.h"
#include "mpwrite.h"

void gpuq_limits_default(gpuq_limits *l)
{
    l->max_header = GPUQ_DEFAULT_MAX_HEADER;
    l->max_payload = GPUQ_DEFAULT_MAX_PAYLOAD;
    l->max_inflight = GPUQ_DEFAULT_MAX_INFLIGHT;
    l->session_staging = GPUQ_DEFAULT_SESSION_STAGING;
    l->total_staging = GPUQ_DEFAULT_TOTAL_STAGING;
    l->max_sessions = GPUQ_DEFAULT_MAX_SESSIONS;
    l->max_output = GPUQ_DEFAULT_MAX_OUTPUT;
    l->session_arena = GPUQ_DEFAULT_SESSION_ARENA;
    l->total_arena = GPUQ_DEFAULT_TOTAL_ARENA;
    l->resident_bytes = GPUQ_DEFAULT_RESIDENT_BYTES;
    l->total_resident = GPUQ_DEFAULT_TOTAL_RESIDENT;
}

/* One limit: its name, where it lives, its width and range. */
typedef struct limit_def {
    const char *name;
    size_t off;
    int is32;
    uint64_t max;
    uint64_t min; /* 1 unless 0 means something (session_arena 0: arenas off; resident_bytes
                   * 0: no resident arrays) */
} limit_def;

static const limit_def limit_defs[] = {
    {"max_header", offsetof(gpuq_limits, max_header), 1, 1u << 30, 1},
    {"max_payload", offsetof(gpuq_limits, max_payload), 0, UINT64_MAX, 1},
    {"max_inflight", offsetof(gpuq_limits, max_inflight), 1, 1u << 20, 1},
    {"session_staging", offsetof(gpuq_limits, session_staging), 0, UINT64_MAX, 1},
    {"total_staging", offsetof(gpuq_limits, total_staging), 0, UINT64_MAX, 1},
    {"max_sessions", offsetof(gpuq_limits, max_sessions), 1, 1u << 20, 1},
    {"max_output", offsetof(gpuq_limits, max_output), 0, UINT64_MAX, 1},
    {"session_arena", offsetof(gpuq_limits, session_arena), 0, UINT64_MAX, 0},
    {"total_arena", offsetof(gpuq_limits, total_arena), 0, UINT64_MAX, 1},
    {"resident_bytes", offsetof(gpuq_limits, resident_bytes), 0, UINT64_MAX, 0},
    {"total_resident", offsetof(gpuq_limits, total_resident), 0, UINT64_MAX, 1},
};

static const limit_def *limit_find(const char *name)
{
    for (size_t i = 0; i < sizeof limit_defs / sizeof limit_defs[0]; i++)
        if (!strcmp(limit_defs[i].name, name))
            return &limit_defs[i];
    return NULL;
}

#define NLIMITS (sizeof limit_defs / sizeof limit_defs[0])

static uint64_t limit_load(const gpuq_limits *l, const limit_def *d)
{
    const char *base = (const char *)l + d->off;
    if (d->is32) {
        uint32_t x;
        memcpy(&x, base, sizeof x);
        return x;
    }
    uint64_t v;
    memcpy(&v, base, sizeof v);
    return v;
}

/* Store v (saturated to the field's width). */
static void limit_store(gpuq_limits *l, const limit_def *d, uint64_t v)
{
    char *base = (char *)l + d->off;
    if (d->is32) {
        uint32_t x = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
        memcpy(base, &x, sizeof x);
    } else {
        memcpy(base, &v, sizeof v);
    }
}

int gpuq_limits_get(const gpuq_limits *l, const char *name, uint64_t *v)
{
    const limit_def *d = limit_find(name);
    if (!d)
        return -1;
    *v = limit_load(l, d);
    return 0;
}

int gpuq_limits_range(const char *name, uint64_t *min, uint64_t *max)
{
    const limit_def *d = limit_find(name);
    if (!d)
        return -1;
    *min = d->min;
    *max = d->max;
    return 0;
}

void gpuq_limits_encode(const gpuq_limits *l, gpuq_mpw *w)
{
    gpuq_mpw_map(w, (uint32_t)NLIMITS);
    for (size_t i = 0; i < NLIMITS; i++) {
        gpuq_mpw_str(w, limit_defs[i].name);
        gpuq_mpw_uint(w, limit_load(l, &limit_defs[i]));
    }
}

int gpuq_limits_decode(gpuq_mpr *r, gpuq_limits *l)
{
    uint32_t n;
    if (gpuq_mpr_map(r, &n))
        return GPUQ_E_BAD_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        if (gpuq_mpr_str(r, &k, &kl))
            return GPUQ_E_BAD_HEADER;
        const limit_def *d = NULL;
        for (size_t j = 0; j < NLIMITS && !d; j++)
            if (strlen(limit_defs[j].name) == kl && !memcmp(limit_defs[j].name, k, kl))
                d = &limit_defs[j];
        gpuq_mp_type t = gpuq_mpr_peek(r);
        uint64_t v;
        if (d && (t == GPUQ_MP_UINT || t == GPUQ_MP_INT)) {
            if (gpuq_mpr_uint(r, &v))
                return GPUQ_E_BAD_HEADER;
            limit_store(l, d, v);
        } else if (gpuq_mpr_skip(r)) {
            return GPUQ_E_BAD_HEADER;
        }
    }
    return 0;
}

int gpuq_limits_set(gpuq_limits *l, const char *name, uint64_t v, uint64_t *old, char *msg,
                    size_t cap)
{
    const limit_def *d = limit_find(name);
    if (!d) {
        /* the eleven names no longer fit a reply's 160-byte message: point
         * to where they are listed instead of sending a cut list */
        snprintf(msg, cap, "unknown limit \"%.40s\" (gpuqd --help lists the limits under [limits])",
                 name);
        return -1;
    }
    if (v < d->min || v > d->max) {
        snprintf(msg, cap, "%s %llu is outside [%llu, %llu]", name, (unsigned long long)v,
                 (unsigned long long)d->min, (unsigned long long)d->max);
        return -1;
    }
    if (old)
        *old = limit_load(l, d);
    limit_store(l, d, v);
    return 0;
}
