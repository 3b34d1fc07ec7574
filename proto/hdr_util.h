/* SPDX-License-Identifier: Apache-2.0 */
/* hdr_util.h - what the header codecs (request_*.c, reply.c, names.c) and
 * the op checks in ops/ share: one-line messages, name lookup, and msgpack
 * map writing with the head written last. Internal to gpuq_proto. */
#ifndef GPUQ_PROTO_HDR_UTIL_H
#define GPUQ_PROTO_HDR_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mpread.h"
#include "mpwrite.h"
#include "utf8.h"

/* Format into msg[cap] (UTF-8; control characters shown as \xHH, so the
 * message is one line even when it echoes a client's string) and return
 * code. msg may be NULL. */
__attribute__((format(printf, 4, 5))) int hdr_fail(char *msg, size_t cap, int code, const char *fmt,
                                                   ...);
/* Escape msg in place into one line, cut to cap (what hdr_fail does). */
void hdr_one_line(char *msg, size_t cap);

/* Printable, bounded rendering of a wire string for messages: "%.*s" with
 * HDR_SHOWLEN(s, len), s shows at most 64 bytes, cut on a character boundary
 * so the message stays UTF-8 (the reader has checked s itself). */
#define HDR_SHOWLEN(s, len) ((int)gpuq_utf8_cut((s), (len), 64))

bool hdr_str_eq(const char *s, size_t len, const char *lit);
/* Index of s[len] in names[n] (NULL entries skipped), or -1. */
int hdr_lookup(const char *const *names, int n, const char *s, size_t len);

/* A map whose entry count is known only at the end: hdr_begin_map leaves
 * headroom bytes (<= 32) plus room for the largest map head; hdr_finish_map
 * writes the head in its real size just before the body and closes the gap
 * (one buffer, no copy into another). *out is malloc'd, owned by the caller;
 * finish frees w. */
gpuq_mpw *hdr_begin_map(size_t headroom);
int hdr_finish_map(gpuq_mpw *w, uint32_t n, size_t headroom, uint8_t **out, size_t *outlen);
/* key: value entries, counting into *n. */
void hdr_kv_str(gpuq_mpw *w, uint32_t *n, const char *key, const char *val);
void hdr_kv_shape(gpuq_mpw *w, uint32_t *n, const char *key, uint32_t ndim, const uint64_t *shape);

/* "shape"-like value: an array of 1..GPUQ_MAX_DIMS unsigned ints (bad_header
 * for a wrong type, bad_shape for a wrong rank, naming key). */
int hdr_read_shape(gpuq_mpr *r, const char *key, uint32_t *ndim, uint64_t *shape, char *msg,
                   size_t cap);

#endif
