/* SPDX-License-Identifier: Apache-2.0 */
/* mpread.h - a bounded msgpack reader.
 *
 * msgpack-c's unpacker trusts declared lengths (an array32 claiming 2^32-1
 * elements makes it allocate ~96 GB, msgpack-c issue 1013), so gpuq never feeds
 * untrusted bytes to it. This cursor reads one value at a time, checks every
 * declared length against the bytes left and against GPUQ_HDR_MAX_* caps, and
 * allocates nothing. Encoding uses msgpack-c's packer (trusted data).
 *
 * All functions return 0 or GPUQ_E_BAD_HEADER (truncated, wrong type, over a cap,
 * or a str that is not valid UTF-8: no reader, peek or skip included, lets
 * such a string through, wherever it is nested).
 */
#ifndef GPUQ_PROTO_MPREAD_H
#define GPUQ_PROTO_MPREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gpuq_mpr {
    const uint8_t *p;
    const uint8_t *end;
} gpuq_mpr;

typedef enum {
    GPUQ_MP_NIL,
    GPUQ_MP_BOOL,
    GPUQ_MP_UINT,
    GPUQ_MP_INT,
    GPUQ_MP_FLOAT,
    GPUQ_MP_STR,
    GPUQ_MP_BIN,
    GPUQ_MP_ARRAY,
    GPUQ_MP_MAP,
    GPUQ_MP_EXT,
    GPUQ_MP_INVALID
} gpuq_mp_type;

void gpuq_mpr_init(gpuq_mpr *r, const void *buf, size_t len);
size_t gpuq_mpr_left(const gpuq_mpr *r);
/* Type of the next value; GPUQ_MP_INVALID when it cannot be read (a str
 * that is not UTF-8 included). */
gpuq_mp_type gpuq_mpr_peek(const gpuq_mpr *r);
/* True when the next value is a str, inside the buffer and under the cap,
 * whose bytes are not valid UTF-8: lets a caller whose read failed say why. */
bool gpuq_mpr_bad_utf8(const gpuq_mpr *r);
int gpuq_mpr_map(gpuq_mpr *r, uint32_t *n);   /* n <= GPUQ_HDR_MAX_ENTRIES */
int gpuq_mpr_array(gpuq_mpr *r, uint32_t *n); /* n <= GPUQ_HDR_MAX_ENTRIES */
/* str: *s points into the buffer (not NUL-terminated); len <= GPUQ_HDR_MAX_STR */
int gpuq_mpr_str(gpuq_mpr *r, const char **s, uint32_t *len);
int gpuq_mpr_bool(gpuq_mpr *r, bool *v);
int gpuq_mpr_uint(gpuq_mpr *r, uint64_t *v); /* accepts non-negative ints */
int gpuq_mpr_int(gpuq_mpr *r, int64_t *v);   /* accepts uints <= INT64_MAX */
int gpuq_mpr_double(gpuq_mpr *r, double *v); /* accepts float32/64 and ints */
int gpuq_mpr_nil(gpuq_mpr *r);
/* Skip one value of any type, nested at most GPUQ_HDR_MAX_DEPTH deep. */
int gpuq_mpr_skip(gpuq_mpr *r);
/* The same, by structure alone: strings inside may be any bytes (nothing
 * skipped is handed out, so no string that is not UTF-8 gets through). For
 * finding one key in a map already refused (the request id of an error
 * reply). */
int gpuq_mpr_skip_any(gpuq_mpr *r);

/* Move r from the map it is at to the value of key in it: 0, or -1 when
 * the map has no such key or is malformed (r is then anywhere). */
int gpuq_mpr_find(gpuq_mpr *r, const char *key);
/* The unsigned int under key in the map buf[len] into *v: 0, or -1 (no
 * such key, not an unsigned int, not a map; *v left alone). */
int gpuq_mpr_map_uint(const void *buf, size_t len, const char *key, uint64_t *v);

/* Render one value as JSON into out (always NUL-terminated, truncated to cap).
 * Used by clients to print status replies. Returns 0, GPUQ_E_BAD_HEADER, or
 * GPUQ_E_TOO_LARGE if cap was too small. */
int gpuq_mpr_to_json(gpuq_mpr *r, char *out, size_t cap);

#endif
