/* SPDX-License-Identifier: Apache-2.0 */
/* limits.h - named protocol constants and the daemon's default limits.
 *
 * The only place numeric limits are spelled. The daemon may be configured with
 * other values (server/config), which it reports in the hello reply.
 */
#ifndef GPUQ_PROTO_GPUQ_LIMITS_H
#define GPUQ_PROTO_GPUQ_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUQ_PROTO_VERSION 1u
#define GPUQ_MAGIC0 'G'
#define GPUQ_MAGIC1 'P'
#define GPUQ_MAGIC2 'U'
#define GPUQ_MAGIC3 'Q'
#define GPUQ_PREFIX_SIZE 20u

/* Frame kinds (prefix byte 5). */
#define GPUQ_KIND_REQUEST 1u
#define GPUQ_KIND_REPLY 2u

/* Hard caps of the header decoder, independent of configuration. */
#define GPUQ_HDR_MAX_DEPTH 4u    /* nesting of maps/arrays */
#define GPUQ_HDR_MAX_ENTRIES 64u /* entries in any one map or array */
#define GPUQ_HDR_MAX_STR 256u    /* bytes in any string */
#define GPUQ_MAX_DIMS 2u
#define GPUQ_CLIENT_NAME_MAX 64u

/* Defaults of the configurable limits. */
#define GPUQ_DEFAULT_MAX_HEADER (16u * 1024u)
#define GPUQ_DEFAULT_MAX_PAYLOAD (1024ull * 1024ull * 1024ull)     /* 1 GiB per frame */
#define GPUQ_DEFAULT_MAX_INFLIGHT 64u                              /* per session */
#define GPUQ_DEFAULT_SESSION_STAGING (2048ull * 1024ull * 1024ull) /* 2 GiB */
#define GPUQ_DEFAULT_TOTAL_STAGING (4096ull * 1024ull * 1024ull)   /* 4 GiB */
#define GPUQ_DEFAULT_MAX_SESSIONS 256u
#define GPUQ_DEFAULT_MAX_OUTPUT (2048ull * 1024ull * 1024ull)      /* result bytes */
#define GPUQ_DEFAULT_SESSION_ARENA (4096ull * 1024ull * 1024ull)   /* 4 GiB of arenas */
#define GPUQ_DEFAULT_TOTAL_ARENA (16384ull * 1024ull * 1024ull)    /* 16 GiB */
#define GPUQ_DEFAULT_RESIDENT_BYTES (8192ull * 1024ull * 1024ull)  /* 8 GiB per uid */
#define GPUQ_DEFAULT_TOTAL_RESIDENT (32768ull * 1024ull * 1024ull) /* 32 GiB */
#define GPUQ_MAX_ARENAS 16u                                        /* arenas one session may hold */
#define GPUQ_MAX_DEADLINE_MS (86400ull * 1000ull) /* a request's deadline_ms: one day at most */

typedef struct gpuq_limits {
    uint32_t max_header;      /* header bytes per frame */
    uint64_t max_payload;     /* payload bytes per frame */
    uint32_t max_inflight;    /* requests in flight per session */
    uint64_t session_staging; /* staging (input + output) bytes per session */
    uint64_t total_staging;   /* staging bytes over all sessions */
    uint32_t max_sessions;    /* concurrent sessions */
    uint64_t max_output;      /* result bytes of one request */
    /* appended (the struct only grows at its end): shared-memory arenas */
    uint64_t session_arena; /* arena bytes per session (0: arenas off) */
    uint64_t total_arena;   /* arena bytes over all sessions */
    /* appended: resident arrays (PROTOCOL.md 3.5), kept by uid, not by session */
    uint64_t resident_bytes; /* resident array bytes one uid may own (0: it may store none) */
    uint64_t total_resident; /* resident array bytes over all uids */
} gpuq_limits;

#define GPUQ_LIMIT_NAME_MAX 31u
/* A resident array's name: 1..GPUQ_RES_NAME_MAX bytes of UTF-8 (PROTOCOL.md 3.5). */
#define GPUQ_RES_NAME_MAX 128u
/* Resident arrays that may exist at once. */
#define GPUQ_MAX_RESIDENT 65536u

/* Fill *l with the defaults above. */
void gpuq_limits_default(gpuq_limits *l);

/* Set the limit called name ("max_header", "max_payload", "max_inflight",
 * "session_staging", "total_staging", "max_sessions", "max_output",
 * "session_arena", "total_arena", "resident_bytes", "total_resident") to v,
 * checking its range (max_header 1..1G, max_inflight and max_sessions
 * 1..1048576, session_arena and resident_bytes >= 0, the others >= 1).
 * Returns 0, or -1 with a one-line reason in msg. *old (may be NULL) gets
 * the previous value. */
int gpuq_limits_set(gpuq_limits *l, const char *name, uint64_t v, uint64_t *old, char *msg,
                    size_t cap);
/* Value of the limit called name into *v; -1 for an unknown name. */
int gpuq_limits_get(const gpuq_limits *l, const char *name, uint64_t *v);
/* The range gpuq_limits_set accepts for name; -1 for an unknown name. */
int gpuq_limits_range(const char *name, uint64_t *min, uint64_t *max);

struct gpuq_mpw;
struct gpuq_mpr;
/* Write *l as a msgpack map of the eleven limits by name (the hello reply's
 * "limits"). */
void gpuq_limits_encode(const gpuq_limits *l, struct gpuq_mpw *w);
/* Read such a map into *l: known names are stored (a value too large for a
 * 32-bit field saturates), unknown keys and non-integer values skipped.
 * Returns 0 or GPUQ_E_BAD_HEADER. */
int gpuq_limits_decode(struct gpuq_mpr *r, gpuq_limits *l);

#ifdef __cplusplus
}
#endif

#endif
