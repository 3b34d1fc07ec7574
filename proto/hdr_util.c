/* SPDX-License-Identifier: Apache-2.0 */
/* hdr_util.c - helpers shared by the header codecs and the op checks.
 *
 * Messages: every error message is one line of UTF-8 even when it echoes a
 * client's string (control characters become \xHH, the text is cut on a
 * character boundary). Maps: entries are counted while written and the head
 * goes in last, so encoders need not know their key count up front.
 */
#include "hdr_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "header.h"
#include "mpread.h"

bool hdr_str_eq(const char *s, size_t len, const char *lit)
{
    /* byte by byte, so a lookup (hdr_lookup: every key of every header
     * against a table of names) mostly stops at the first byte instead of
     * measuring each name; never past lit's end */
    for (size_t i = 0; i < len; i++)
        if (lit[i] == '\0' || lit[i] != s[i])
            return false;
    return lit[len] == '\0';
}

int hdr_lookup(const char *const *names, int n, const char *s, size_t len)
{
    for (int k = 0; k < n; k++) {
        if (names[k] && hdr_str_eq(s, len, names[k]))
            return k;
    }
    return -1;
}

/* A message is one line even when it echoes a client's string, which may
 * hold a newline or another control character: each is shown as \xHH (as
 * the reply encoder shows bytes that are not UTF-8), in place, and what no
 * longer fits in msg[cap] is cut before the first character or escape that
 * does not fit. msg is UTF-8. */
void hdr_one_line(char *msg, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(msg), end = 0, out = 0;

    while (end < n) { /* how much of msg fits once escaped */
        uint8_t c = (uint8_t)msg[end];
        size_t adv = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        size_t w = c < 0x20 || c == 0x7f ? 4 : adv;
        if (adv > n - end || out + w > cap - 1)
            break;
        out += w;
        end += adv;
    }
    for (size_t i = end, o = out; i-- > 0;) { /* from the back: o >= i throughout */
        uint8_t c = (uint8_t)msg[i];
        if (c < 0x20 || c == 0x7f) {
            o -= 4;
            msg[o] = '\\';
            msg[o + 1] = 'x';
            msg[o + 2] = hex[c >> 4];
            msg[o + 3] = hex[c & 0x0f];
        } else {
            msg[--o] = (char)c;
        }
    }
    msg[out] = '\0';
}

int hdr_fail(char *msg, size_t cap, int code, const char *fmt, ...)
{
    if (msg && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        gpuq_utf8_vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
        hdr_one_line(msg, cap);
    }
    return code;
}

void hdr_kv_str(gpuq_mpw *w, uint32_t *n, const char *key, const char *val)
{
    gpuq_mpw_str(w, key);
    gpuq_mpw_str(w, val);
    (*n)++;
}

void hdr_kv_shape(gpuq_mpw *w, uint32_t *n, const char *key, uint32_t ndim, const uint64_t *shape)
{
    if (ndim > GPUQ_MAX_DIMS)
        ndim = GPUQ_MAX_DIMS;
    gpuq_mpw_str(w, key);
    gpuq_mpw_array(w, ndim);
    for (uint32_t k = 0; k < ndim; k++)
        gpuq_mpw_uint(w, shape[k]);
    (*n)++;
}

/* A map's entries are counted while they are written, so its head comes
 * last: begin_map leaves headroom bytes (for the caller) plus room for the
 * largest map head (5 bytes); finish_map writes the head in its real size
 * (fixmap, map16 or map32, as msgpack-c would) just before the body and
 * closes the gap. One buffer, no copy of the body into another. */
#define MAP_HEAD_MAX 5u
#define HEADROOM_MAX 32u

gpuq_mpw *hdr_begin_map(size_t headroom)
{
    static const uint8_t zeros[HEADROOM_MAX + MAP_HEAD_MAX];
    gpuq_mpw *w = gpuq_mpw_new();
    if (w)
        gpuq_mpw_raw(w, zeros, headroom + MAP_HEAD_MAX);
    return w;
}

int hdr_finish_map(gpuq_mpw *w, uint32_t n, size_t headroom, uint8_t **out, size_t *outlen)
{
    uint8_t *b = NULL;
    size_t len = 0;
    int rc = gpuq_mpw_take(w, &b, &len);
    gpuq_mpw_free(w);
    if (rc != 0)
        return rc;
    uint8_t head[MAP_HEAD_MAX];
    size_t h;
    if (n < 16) {
        head[0] = (uint8_t)(0x80u | n);
        h = 1;
    } else if (n <= 0xffffu) {
        head[0] = 0xde;
        head[1] = (uint8_t)(n >> 8);
        head[2] = (uint8_t)n;
        h = 3;
    } else {
        head[0] = 0xdf;
        for (int i = 0; i < 4; i++)
            head[1 + i] = (uint8_t)(n >> (24 - 8 * i));
        h = 5;
    }
    size_t body = len - headroom - MAP_HEAD_MAX;
    memcpy(b + headroom, head, h);
    memmove(b + headroom + h, b + headroom + MAP_HEAD_MAX, body);
    *out = b;
    *outlen = headroom + h + body;
    return 0;
}

int hdr_read_shape(gpuq_mpr *r, const char *key, uint32_t *ndim, uint64_t *shape, char *msg,
                   size_t cap)
{
    uint32_t n;
    if (gpuq_mpr_array(r, &n) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an array of unsigned ints",
                        key);
    if (n < 1 || n > GPUQ_MAX_DIMS)
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "\"%s\" has %u dimensions; 1 or 2 allowed", key,
                        (unsigned)n);
    for (uint32_t k = 0; k < n; k++) {
        if (gpuq_mpr_uint(r, &shape[k]) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\"[%u] is not an unsigned int", key,
                            (unsigned)k);
    }
    *ndim = n;
    return 0;
}
