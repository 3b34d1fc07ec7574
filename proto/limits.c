/* limits.c - the configurable limits: defaults (values live in gpuq_limits.h)
 * and setting one by name, with its range, for set_limit and config files. */
#include "gpuq_limits.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

void gpuq_limits_default(gpuq_limits *l)
{
    l->max_header = GPUQ_DEFAULT_MAX_HEADER;
    l->max_payload = GPUQ_DEFAULT_MAX_PAYLOAD;
    l->max_inflight = GPUQ_DEFAULT_MAX_INFLIGHT;
    l->session_staging = GPUQ_DEFAULT_SESSION_STAGING;
    l->total_staging = GPUQ_DEFAULT_TOTAL_STAGING;
    l->max_sessions = GPUQ_DEFAULT_MAX_SESSIONS;
    l->max_output = GPUQ_DEFAULT_MAX_OUTPUT;
}

/* One limit: its name, where it lives, its width and range. */
typedef struct limit_def {
    const char *name;
    size_t off;
    int is32;
    uint64_t max;
} limit_def;

static const limit_def limit_defs[] = {
    {"max_header", offsetof(gpuq_limits, max_header), 1, 1u << 30},
    {"max_payload", offsetof(gpuq_limits, max_payload), 0, UINT64_MAX},
    {"max_inflight", offsetof(gpuq_limits, max_inflight), 1, 1u << 20},
    {"session_staging", offsetof(gpuq_limits, session_staging), 0, UINT64_MAX},
    {"total_staging", offsetof(gpuq_limits, total_staging), 0, UINT64_MAX},
    {"max_sessions", offsetof(gpuq_limits, max_sessions), 1, 1u << 20},
    {"max_output", offsetof(gpuq_limits, max_output), 0, UINT64_MAX},
};

static const limit_def *limit_find(const char *name)
{
    for (size_t i = 0; i < sizeof limit_defs / sizeof limit_defs[0]; i++)
        if (!strcmp(limit_defs[i].name, name))
            return &limit_defs[i];
    return NULL;
}

int gpuq_limits_get(const gpuq_limits *l, const char *name, uint64_t *v)
{
    const limit_def *d = limit_find(name);
    if (!d)
        return -1;
    const char *base = (const char *)l + d->off;
    if (d->is32) {
        uint32_t x;
        memcpy(&x, base, sizeof x);
        *v = x;
    } else {
        memcpy(v, base, sizeof *v);
    }
    return 0;
}

int gpuq_limits_set(gpuq_limits *l, const char *name, uint64_t v, uint64_t *old, char *msg,
                    size_t cap)
{
    const limit_def *d = limit_find(name);
    if (!d) {
        snprintf(msg, cap, "unknown limit \"%.40s\" (max_header, max_payload, max_inflight, "
                           "session_staging, total_staging, max_sessions, max_output)", name);
        return -1;
    }
    if (v < 1 || v > d->max) {
        snprintf(msg, cap, "%s %llu is outside [1, %llu]", name, (unsigned long long)v,
                 (unsigned long long)d->max);
        return -1;
    }
    uint64_t prev;
    (void)gpuq_limits_get(l, name, &prev);
    if (old)
        *old = prev;
    char *base = (char *)l + d->off;
    if (d->is32) {
        uint32_t x = (uint32_t)v;
        memcpy(base, &x, sizeof x);
    } else {
        memcpy(base, &v, sizeof v);
    }
    return 0;
}
