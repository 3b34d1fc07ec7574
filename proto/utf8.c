/* SPDX-License-Identifier: Apache-2.0 */
/* utf8.c - strict UTF-8 validation, cutting on character boundaries, and
 * escaping of bytes that are not UTF-8.
 *
 * Happy path: seq_len() reads one character (1 to 4 bytes) following the
 * table of well-formed sequences in RFC 3629 section 4 (which is what rules
 * out overlongs, surrogates and code points above U+10FFFF: the second byte's
 * range depends on the lead byte). Everything else builds on it. Nothing
 * here allocates or fails: a bad sequence is reported by position
 * (valid_prefix), shown as \xHH (escape), or dropped when it is a character
 * cut in half at the end (cut).
 */
#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the well-formed sequence at p[0..left) (left >= 1), or 0 when
 * the bytes there do not start one. */
static size_t seq_len(const uint8_t *p, size_t left)
{
    uint8_t c = p[0];
    uint8_t lo = 0x80, hi = 0xbf; /* range of the second byte */
    size_t n;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c == 0xe0) {
        n = 3;
        lo = 0xa0; /* below: overlong */
    } else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) {
        n = 3;
    } else if (c == 0xed) {
        n = 3;
        hi = 0x9f; /* above: surrogates U+D800..U+DFFF */
    } else if (c == 0xf0) {
        n = 4;
        lo = 0x90; /* below: overlong */
    } else if (c >= 0xf1 && c <= 0xf3) {
        n = 4;
    } else if (c == 0xf4) {
        n = 4;
        hi = 0x8f; /* above: beyond U+10FFFF */
    } else {
        return 0; /* continuation byte, C0/C1 (always overlong), F5..FF */
    }
    if (left < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
    }
    return n;
}

size_t gpuq_utf8_valid_prefix(const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        size_t n = seq_len(p + i, len - i);
        if (n == 0)
            return i;
        i += n;
    }
    return len;
}

bool gpuq_utf8_valid(const char *s, size_t len)
{
    return gpuq_utf8_valid_prefix(s, len) == len;
}

/* Bytes a sequence starting with lead byte c claims (1 for ASCII and for
 * bytes that cannot start one). Only the lead's shape counts here: cut()
 * must drop a half character without judging whether it was well formed. */
static size_t lead_claims(uint8_t c)
{
    if (c >= 0xc0 && c <= 0xdf)
        return 2;
    if (c >= 0xe0 && c <= 0xef)
        return 3;
    if (c >= 0xf0 && c <= 0xf7)
        return 4;
    return 1;
}

size_t gpuq_utf8_cut(const char *s, size_t len, size_t max)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t n = len < max ? len : max;

    /* Find the last lead byte (at most 3 continuation bytes back) and drop
     * it when its character does not end inside the prefix. */
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        uint8_t c = p[n - back];
        if ((c & 0xc0) == 0x80)
            continue;
        return lead_claims(c) > back ? n - back : n;
    }
    return n;
}

static const char hexdig[] = "0123456789ABCDEF";

size_t gpuq_utf8_escaped_len(const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0, out = 0;
    while (i < len) {
        size_t n = seq_len(p + i, len - i);
        if (n == 0) {
            out += 4;
            i++;
        } else {
            out += n;
            i += n;
        }
    }
    return out;
}

/* The escape of byte c at out[*o], when it fits before the NUL: \n, \r, \t
 * for those controls when controls, else \xHH. */
static bool put_escape(char *out, size_t cap, size_t *o, uint8_t c, bool controls)
{
    char e[4] = {'\\', 'x', hexdig[c >> 4], hexdig[c & 0x0f]};
    size_t n = 4;
    if (controls && (c == '\n' || c == '\r' || c == '\t')) {
        e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        n = 2;
    }
    if (cap - 1 - *o < n)
        return false;
    memcpy(out + *o, e, n);
    *o += n;
    return true;
}

size_t gpuq_utf8_escape_ctl(char *out, size_t cap, const char *s, size_t len, bool controls)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0, o = 0;

    if (cap == 0)
        return 0;
    while (i < len) {
        size_t n = seq_len(p + i, len - i);
        /* C0 controls and DEL; C1 controls (U+0080..U+009F, C2 80..C2 9F:
         * 0x9B is a CSI to some terminals) byte by byte, as is every byte
         * that does not start a valid character. */
        bool esc = n == 0 || (controls && (n == 1   ? p[i] < 0x20 || p[i] == 0x7f
                                           : n == 2 ? p[i] == 0xc2 && p[i + 1] < 0xa0
                                                    : false));
        if (!esc) {
            if (cap - 1 - o < n)
                break;
            memcpy(out + o, p + i, n);
            o += n;
            i += n;
            continue;
        }
        size_t k = n ? n : 1, o0 = o;
        for (size_t j = 0; j < k; j++)
            if (!put_escape(out, cap, &o, p[i + j], controls)) {
                o = o0; /* never half of a character's escapes */
                out[o] = '\0';
                return o;
            }
        i += k;
    }
    out[o] = '\0';
    return o;
}

size_t gpuq_utf8_escape(char *out, size_t cap, const char *s, size_t len)
{
    return gpuq_utf8_escape_ctl(out, cap, s, len, false);
}

int gpuq_utf8_vsnprintf(char *buf, size_t cap, const char *fmt, va_list ap)
{
    int n = vsnprintf(buf, cap, fmt, ap);
    if (n >= 0 && cap > 0 && (size_t)n >= cap)
        buf[gpuq_utf8_cut(buf, cap - 1, cap - 1)] = '\0';
    return n;
}
