/* SPDX-License-Identifier: Apache-2.0 */
/* mpread.c - a bounded, allocation-free msgpack cursor.
 *
 * Happy path: read_head() decodes one type byte and its length or value
 * fields, checks every declared length against the bytes left (and the
 * GPUQ_HDR_MAX_* caps) before trusting it, checks that a str's body is
 * UTF-8, and advances past the head (and the body, for str/bin/ext). The
 * typed readers run it on a copy of the cursor and commit only on success,
 * so a failed read leaves the cursor where it was. Failure is always
 * GPUQ_E_BAD_HEADER: truncation, a declared length beyond the buffer or a
 * cap, the reserved byte 0xc1, a wrong type, a str whose bytes are not valid
 * UTF-8 (every string on the wire is UTF-8), or nesting deeper than
 * GPUQ_HDR_MAX_DEPTH.
 */
#include "mpread.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "gpuq_limits.h"
#include "utf8.h"

struct mphead {
    gpuq_mp_type type;
    bool b;              /* BOOL */
    uint64_t u;          /* UINT, and non-negative values of signed formats */
    int64_t i;           /* INT (negative values) */
    double d;            /* FLOAT */
    bool f32;            /* FLOAT came as float32 */
    uint32_t n;          /* STR/BIN/EXT body bytes; ARRAY/MAP entries */
    const uint8_t *body; /* STR/BIN/EXT body (for EXT: type byte + data) */
};

static uint64_t get_be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < n; k++)
        v = (v << 8) | p[k];
    return v;
}

/* Decode one head at r->p; advance r past it (and past str/bin/ext bodies).
 * A str's body is not looked at here (see read_head). */
static int read_head_bytes(gpuq_mpr *r, struct mphead *h)
{
    const uint8_t *p = r->p;
    size_t left = (size_t)(r->end - p);
    unsigned lenbytes = 0; /* width of a length field following the type byte */
    uint64_t len = 0;
    unsigned extra = 0; /* ext: the type byte counted into the body */

    memset(h, 0, sizeof(*h));
    if (left < 1)
        return GPUQ_E_BAD_HEADER;
    uint8_t c = *p++;
    left--;

    if (c <= 0x7f) {
        h->type = GPUQ_MP_UINT;
        h->u = c;
        goto done;
    }
    if (c >= 0xe0) {
        h->type = GPUQ_MP_INT;
        h->i = (int8_t)c;
        goto done;
    }
    if (c <= 0x8f) {
        h->type = GPUQ_MP_MAP;
        len = c & 0x0f;
        goto count;
    }
    if (c <= 0x9f) {
        h->type = GPUQ_MP_ARRAY;
        len = c & 0x0f;
        goto count;
    }
    if (c <= 0xbf) {
        h->type = GPUQ_MP_STR;
        len = c & 0x1f;
        goto body;
    }

    switch (c) {
    case 0xc0:
        h->type = GPUQ_MP_NIL;
        goto done;
    case 0xc2:
    case 0xc3:
        h->type = GPUQ_MP_BOOL;
        h->b = c == 0xc3;
        goto done;
    case 0xc4:
    case 0xc5:
    case 0xc6:
        h->type = GPUQ_MP_BIN;
        lenbytes = 1u << (c - 0xc4);
        break;
    case 0xc7:
    case 0xc8:
    case 0xc9:
        h->type = GPUQ_MP_EXT;
        lenbytes = 1u << (c - 0xc7);
        extra = 1;
        break;
    case 0xca:
    case 0xcb: {
        unsigned w = c == 0xca ? 4 : 8;
        if (left < w)
            return GPUQ_E_BAD_HEADER;
        uint64_t bits = get_be(p, w);
        p += w;
        h->type = GPUQ_MP_FLOAT;
        if (w == 4) {
            float f;
            uint32_t b32 = (uint32_t)bits;
            memcpy(&f, &b32, 4);
            h->d = f;
            h->f32 = true;
        } else {
            memcpy(&h->d, &bits, 8);
        }
        goto done;
    }
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: {
        unsigned w = 1u << (c - 0xcc);
        if (left < w)
            return GPUQ_E_BAD_HEADER;
        h->type = GPUQ_MP_UINT;
        h->u = get_be(p, w);
        p += w;
        goto done;
    }
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
        unsigned w = 1u << (c - 0xd0);
        if (left < w)
            return GPUQ_E_BAD_HEADER;
        uint64_t raw = get_be(p, w);
        p += w;
        int64_t v;
        if (w < 8 && (raw >> (8 * w - 1)) & 1)
            raw |= ~0ull << (8 * w); /* sign-extend */
        memcpy(&v, &raw, 8);
        if (v < 0) {
            h->type = GPUQ_MP_INT;
            h->i = v;
        } else {
            h->type = GPUQ_MP_UINT;
            h->u = (uint64_t)v;
        }
        goto done;
    }
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
        h->type = GPUQ_MP_EXT;
        len = (1u << (c - 0xd4)) + 1u; /* type byte + data */
        goto body;
    case 0xd9:
    case 0xda:
    case 0xdb:
        h->type = GPUQ_MP_STR;
        lenbytes = 1u << (c - 0xd9);
        break;
    case 0xdc:
    case 0xdd:
        h->type = GPUQ_MP_ARRAY;
        lenbytes = c == 0xdc ? 2 : 4;
        break;
    case 0xde:
    case 0xdf:
        h->type = GPUQ_MP_MAP;
        lenbytes = c == 0xde ? 2 : 4;
        break;
    default: /* 0xc1: never used */
        return GPUQ_E_BAD_HEADER;
    }

    /* a length field follows */
    if (left < lenbytes)
        return GPUQ_E_BAD_HEADER;
    len = get_be(p, lenbytes) + extra;
    p += lenbytes;
    left -= lenbytes;
    if (h->type == GPUQ_MP_ARRAY || h->type == GPUQ_MP_MAP)
        goto count;

body:
    /* str/bin/ext: the body must be inside the buffer, strings under the cap */
    if (len > left)
        return GPUQ_E_BAD_HEADER;
    if (h->type == GPUQ_MP_STR && len > GPUQ_HDR_MAX_STR)
        return GPUQ_E_BAD_HEADER;
    h->n = (uint32_t)len;
    h->body = p;
    p += len;
    goto done;

count:
    /* every element takes at least one byte, every map entry two */
    if (len > GPUQ_HDR_MAX_ENTRIES)
        return GPUQ_E_BAD_HEADER;
    if ((h->type == GPUQ_MP_MAP ? 2 * len : len) > left)
        return GPUQ_E_BAD_HEADER;
    h->n = (uint32_t)len;

done:
    r->p = p;
    return 0;
}

/* read_head_bytes, and a str's body must be valid UTF-8. Every reader
 * (typed reads, peek, skip, JSON) goes through here, so no string that is
 * not UTF-8 gets past this file, whatever key or nesting it sits in. */
static int read_head(gpuq_mpr *r, struct mphead *h)
{
    gpuq_mpr c = *r;
    if (read_head_bytes(&c, h) != 0)
        return GPUQ_E_BAD_HEADER;
    if (h->type == GPUQ_MP_STR && !gpuq_utf8_valid((const char *)h->body, h->n))
        return GPUQ_E_BAD_HEADER;
    *r = c;
    return 0;
}

void gpuq_mpr_init(gpuq_mpr *r, const void *buf, size_t len)
{
    r->p = buf;
    r->end = r->p + (buf ? len : 0);
}

size_t gpuq_mpr_left(const gpuq_mpr *r)
{
    return (size_t)(r->end - r->p);
}

gpuq_mp_type gpuq_mpr_peek(const gpuq_mpr *r)
{
    gpuq_mpr c = *r;
    struct mphead h;
    if (read_head(&c, &h) != 0)
        return GPUQ_MP_INVALID;
    return h.type;
}

bool gpuq_mpr_bad_utf8(const gpuq_mpr *r)
{
    gpuq_mpr c = *r;
    struct mphead h;
    return read_head_bytes(&c, &h) == 0 && h.type == GPUQ_MP_STR &&
           !gpuq_utf8_valid((const char *)h.body, h.n);
}

/* Read one head of type want (or fail without moving the cursor). */
static int read_typed(gpuq_mpr *r, gpuq_mp_type want, struct mphead *h)
{
    gpuq_mpr c = *r;
    if (read_head(&c, h) != 0 || h->type != want)
        return GPUQ_E_BAD_HEADER;
    *r = c;
    return 0;
}

int gpuq_mpr_map(gpuq_mpr *r, uint32_t *n)
{
    struct mphead h;
    int rc = read_typed(r, GPUQ_MP_MAP, &h);
    if (rc == 0)
        *n = h.n;
    return rc;
}

int gpuq_mpr_array(gpuq_mpr *r, uint32_t *n)
{
    struct mphead h;
    int rc = read_typed(r, GPUQ_MP_ARRAY, &h);
    if (rc == 0)
        *n = h.n;
    return rc;
}

int gpuq_mpr_str(gpuq_mpr *r, const char **s, uint32_t *len)
{
    struct mphead h;
    int rc = read_typed(r, GPUQ_MP_STR, &h);
    if (rc == 0) {
        *s = (const char *)h.body;
        *len = h.n;
    }
    return rc;
}

int gpuq_mpr_bool(gpuq_mpr *r, bool *v)
{
    struct mphead h;
    int rc = read_typed(r, GPUQ_MP_BOOL, &h);
    if (rc == 0)
        *v = h.b;
    return rc;
}

int gpuq_mpr_nil(gpuq_mpr *r)
{
    struct mphead h;
    return read_typed(r, GPUQ_MP_NIL, &h);
}

int gpuq_mpr_uint(gpuq_mpr *r, uint64_t *v)
{
    struct mphead h;
    int rc = read_typed(r, GPUQ_MP_UINT, &h);
    if (rc == 0)
        *v = h.u;
    return rc;
}

int gpuq_mpr_int(gpuq_mpr *r, int64_t *v)
{
    gpuq_mpr c = *r;
    struct mphead h;
    if (read_head(&c, &h) != 0)
        return GPUQ_E_BAD_HEADER;
    if (h.type == GPUQ_MP_INT)
        *v = h.i;
    else if (h.type == GPUQ_MP_UINT && h.u <= (uint64_t)INT64_MAX)
        *v = (int64_t)h.u;
    else
        return GPUQ_E_BAD_HEADER;
    *r = c;
    return 0;
}

int gpuq_mpr_double(gpuq_mpr *r, double *v)
{
    gpuq_mpr c = *r;
    struct mphead h;
    if (read_head(&c, &h) != 0)
        return GPUQ_E_BAD_HEADER;
    if (h.type == GPUQ_MP_FLOAT)
        *v = h.d;
    else if (h.type == GPUQ_MP_INT)
        *v = (double)h.i;
    else if (h.type == GPUQ_MP_UINT)
        *v = (double)h.u;
    else
        return GPUQ_E_BAD_HEADER;
    *r = c;
    return 0;
}

/* utf8: strings must be UTF-8 (gpuq_mpr_skip) or may be any bytes
 * (gpuq_mpr_skip_any, which hands none of them out). */
static int skip_at(gpuq_mpr *r, unsigned depth, bool utf8)
{
    struct mphead h;
    if ((utf8 ? read_head(r, &h) : read_head_bytes(r, &h)) != 0)
        return GPUQ_E_BAD_HEADER;
    if (h.type == GPUQ_MP_ARRAY || h.type == GPUQ_MP_MAP) {
        if (depth >= GPUQ_HDR_MAX_DEPTH)
            return GPUQ_E_BAD_HEADER;
        uint32_t k = h.type == GPUQ_MP_MAP ? 2 * h.n : h.n;
        for (uint32_t j = 0; j < k; j++) {
            if (skip_at(r, depth + 1, utf8) != 0)
                return GPUQ_E_BAD_HEADER;
        }
    }
    return 0;
}

static int skip(gpuq_mpr *r, bool utf8)
{
    gpuq_mpr c = *r;
    if (skip_at(&c, 0, utf8) != 0)
        return GPUQ_E_BAD_HEADER;
    *r = c;
    return 0;
}

int gpuq_mpr_skip(gpuq_mpr *r)
{
    return skip(r, true);
}

int gpuq_mpr_skip_any(gpuq_mpr *r)
{
    return skip(r, false);
}

int gpuq_mpr_find(gpuq_mpr *r, const char *key)
{
    uint32_t n;
    size_t want = strlen(key);
    if (gpuq_mpr_map(r, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        if (gpuq_mpr_str(r, &k, &kl))
            return -1;
        if (want == kl && memcmp(k, key, kl) == 0)
            return 0;
        if (gpuq_mpr_skip(r))
            return -1;
    }
    return -1;
}

int gpuq_mpr_map_uint(const void *buf, size_t len, const char *key, uint64_t *v)
{
    gpuq_mpr r;
    uint64_t u;
    if (!buf)
        return -1;
    gpuq_mpr_init(&r, buf, len);
    if (gpuq_mpr_find(&r, key) || gpuq_mpr_uint(&r, &u))
        return -1;
    *v = u;
    return 0;
}

/* ---- JSON rendering ---- */

struct jbuf {
    char *out;
    size_t cap, len;
    bool full;
};

static void jput(struct jbuf *j, const char *s, size_t n)
{
    if (j->full)
        return;
    if (j->cap == 0 || n > j->cap - 1 - j->len) {
        j->full = true;
        return;
    }
    memcpy(j->out + j->len, s, n);
    j->len += n;
    j->out[j->len] = '\0';
}

static void jputs(struct jbuf *j, const char *s)
{
    jput(j, s, strlen(s));
}

static void jstr(struct jbuf *j, const uint8_t *s, uint32_t len)
{
    jput(j, "\"", 1);
    for (uint32_t k = 0; k < len; k++) {
        uint8_t ch = s[k];
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            jput(j, esc, 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", ch);
            jput(j, esc, 6);
        } else if (ch < 0x80) {
            jput(j, (const char *)&ch, 1);
        } else {
            /* a whole character at a time (the reader checked it is UTF-8),
             * so output cut short by cap never ends in half of one */
            uint32_t n = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : 2;
            if (n > len - k)
                n = len - k;
            jput(j, (const char *)s + k, n);
            k += n - 1;
        }
    }
    jput(j, "\"", 1);
}

static int json_at(gpuq_mpr *r, struct jbuf *j, unsigned depth)
{
    struct mphead h;
    char num[40];

    if (read_head(r, &h) != 0)
        return GPUQ_E_BAD_HEADER;
    switch (h.type) {
    case GPUQ_MP_NIL:
    case GPUQ_MP_BIN:
    case GPUQ_MP_EXT:
        jputs(j, "null");
        return 0;
    case GPUQ_MP_BOOL:
        jputs(j, h.b ? "true" : "false");
        return 0;
    case GPUQ_MP_UINT:
        snprintf(num, sizeof(num), "%" PRIu64, h.u);
        jputs(j, num);
        return 0;
    case GPUQ_MP_INT:
        snprintf(num, sizeof(num), "%" PRId64, h.i);
        jputs(j, num);
        return 0;
    case GPUQ_MP_FLOAT:
        if (!isfinite(h.d))
            jputs(j, "null"); /* JSON has no NaN/Inf */
        else {
            snprintf(num, sizeof(num), h.f32 ? "%.9g" : "%.17g", h.d);
            jputs(j, num);
        }
        return 0;
    case GPUQ_MP_STR:
        jstr(j, h.body, h.n);
        return 0;
    case GPUQ_MP_ARRAY:
    case GPUQ_MP_MAP:
        break;
    default:
        return GPUQ_E_BAD_HEADER;
    }

    if (depth >= GPUQ_HDR_MAX_DEPTH)
        return GPUQ_E_BAD_HEADER;
    bool is_map = h.type == GPUQ_MP_MAP;
    jputs(j, is_map ? "{" : "[");
    for (uint32_t k = 0; k < h.n; k++) {
        if (k > 0)
            jputs(j, ",");
        if (is_map) {
            struct mphead key;
            if (read_head(r, &key) != 0)
                return GPUQ_E_BAD_HEADER;
            if (key.type == GPUQ_MP_STR) {
                jstr(j, key.body, key.n);
            } else if (key.type == GPUQ_MP_UINT) {
                snprintf(num, sizeof(num), "\"%" PRIu64 "\"", key.u);
                jputs(j, num);
            } else if (key.type == GPUQ_MP_INT) {
                snprintf(num, sizeof(num), "\"%" PRId64 "\"", key.i);
                jputs(j, num);
            } else {
                return GPUQ_E_BAD_HEADER; /* JSON keys are strings */
            }
            jputs(j, ":");
        }
        int rc = json_at(r, j, depth + 1);
        if (rc != 0)
            return rc;
    }
    jputs(j, is_map ? "}" : "]");
    return 0;
}

int gpuq_mpr_to_json(gpuq_mpr *r, char *out, size_t cap)
{
    struct jbuf j = {out, cap, 0, false};
    gpuq_mpr c = *r;

    if (cap > 0)
        out[0] = '\0';
    int rc = json_at(&c, &j, 0);
    if (rc != 0)
        return rc;
    *r = c;
    return j.full ? GPUQ_E_TOO_LARGE : 0;
}
