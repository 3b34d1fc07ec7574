/* SPDX-License-Identifier: Apache-2.0 */
/* test_mpread.c - the bounded msgpack reader: every type and length variant,
 * truncation at every byte, declared lengths beyond the buffer (array32 /
 * map32 / str32 / bin32 claiming billions), caps, nesting, JSON output, and
 * strings that are not UTF-8 (refused by every read, nested too; escaped by
 * the writer). */
#include "errors.h"
#include "gpuq_limits.h"
#include "mpread.h"
#include "mpwrite.h"

#include <check.h>

#include "testutil.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sample {
    const char *name;
    uint8_t b[40];
    size_t len;
    gpuq_mp_type type;
};

#define S(nm, t, ...)                                                                              \
    {                                                                                              \
        nm, {__VA_ARGS__}, sizeof((uint8_t[]){__VA_ARGS__}), t                                     \
    }

static const struct sample samples[] = {
    S("nil", GPUQ_MP_NIL, 0xc0),
    S("false", GPUQ_MP_BOOL, 0xc2),
    S("true", GPUQ_MP_BOOL, 0xc3),
    S("posfixint", GPUQ_MP_UINT, 0x05),
    S("negfixint", GPUQ_MP_INT, 0xe0),
    S("uint8", GPUQ_MP_UINT, 0xcc, 0xff),
    S("uint16", GPUQ_MP_UINT, 0xcd, 0x01, 0x00),
    S("uint32", GPUQ_MP_UINT, 0xce, 0x00, 0x01, 0x00, 0x00),
    S("uint64", GPUQ_MP_UINT, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
    S("int8", GPUQ_MP_INT, 0xd0, 0x80),
    S("int16", GPUQ_MP_INT, 0xd1, 0xff, 0x00),
    S("int32", GPUQ_MP_INT, 0xd2, 0x80, 0x00, 0x00, 0x00),
    S("int64", GPUQ_MP_INT, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0),
    S("float32", GPUQ_MP_FLOAT, 0xca, 0x3f, 0xc0, 0x00, 0x00),
    S("float64", GPUQ_MP_FLOAT, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0),
    S("fixstr", GPUQ_MP_STR, 0xa3, 'a', 'b', 'c'),
    S("str8", GPUQ_MP_STR, 0xd9, 0x03, 'a', 'b', 'c'),
    S("str16", GPUQ_MP_STR, 0xda, 0x00, 0x03, 'a', 'b', 'c'),
    S("str32", GPUQ_MP_STR, 0xdb, 0x00, 0x00, 0x00, 0x03, 'a', 'b', 'c'),
    S("bin8", GPUQ_MP_BIN, 0xc4, 0x02, 0xaa, 0xbb),
    S("bin16", GPUQ_MP_BIN, 0xc5, 0x00, 0x02, 0xaa, 0xbb),
    S("bin32", GPUQ_MP_BIN, 0xc6, 0x00, 0x00, 0x00, 0x02, 0xaa, 0xbb),
    S("fixext1", GPUQ_MP_EXT, 0xd4, 0x01, 0xaa),
    S("fixext2", GPUQ_MP_EXT, 0xd5, 0x01, 0xaa, 0xbb),
    S("fixext4", GPUQ_MP_EXT, 0xd6, 0x01, 1, 2, 3, 4),
    S("fixext8", GPUQ_MP_EXT, 0xd7, 0x01, 1, 2, 3, 4, 5, 6, 7, 8),
    S("fixext16", GPUQ_MP_EXT, 0xd8, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
    S("ext8", GPUQ_MP_EXT, 0xc7, 0x02, 0x01, 0xaa, 0xbb),
    S("ext16", GPUQ_MP_EXT, 0xc8, 0x00, 0x02, 0x01, 0xaa, 0xbb),
    S("ext32", GPUQ_MP_EXT, 0xc9, 0x00, 0x00, 0x00, 0x02, 0x01, 0xaa, 0xbb),
    S("fixarray", GPUQ_MP_ARRAY, 0x92, 0x01, 0xa1, 'x'),
    S("array16", GPUQ_MP_ARRAY, 0xdc, 0x00, 0x02, 0x01, 0xa1, 'x'),
    S("array32", GPUQ_MP_ARRAY, 0xdd, 0x00, 0x00, 0x00, 0x02, 0x01, 0xa1, 'x'),
    S("fixmap", GPUQ_MP_MAP, 0x81, 0xa1, 'a', 0x01),
    S("map16", GPUQ_MP_MAP, 0xde, 0x00, 0x01, 0xa1, 'a', 0x92, 0xc0, 0xc3),
    S("map32", GPUQ_MP_MAP, 0xdf, 0x00, 0x00, 0x00, 0x01, 0xa1, 'a', 0x01),
    S("emptystr", GPUQ_MP_STR, 0xa0),
    S("emptyarray", GPUQ_MP_ARRAY, 0x90),
    S("emptymap", GPUQ_MP_MAP, 0x80),
};
#define NSAMPLES ((int)(sizeof(samples) / sizeof(samples[0])))

/* Copy into an exact-size heap buffer so ASan sees any over-read. */
static uint8_t *dup_exact(const void *b, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(p);
    if (len)
        memcpy(p, b, len);
    return p;
}

START_TEST(test_sample_whole)
{
    const struct sample *s = &samples[_i];
    uint8_t *b = dup_exact(s->b, s->len);
    gpuq_mpr r;
    char json[128];

    gpuq_mpr_init(&r, b, s->len);
    ck_assert_msg(gpuq_mpr_peek(&r) == s->type, "%s: peek", s->name);
    ck_assert_msg(gpuq_mpr_skip(&r) == 0, "%s: skip", s->name);
    ck_assert_uint_eq(gpuq_mpr_left(&r), 0);
    gpuq_mpr_init(&r, b, s->len);
    ck_assert_msg(gpuq_mpr_to_json(&r, json, sizeof(json)) == 0, "%s: json", s->name);
    ck_assert_uint_eq(gpuq_mpr_left(&r), 0);
    free(b);
}
END_TEST

/* _i = sample index; every strict prefix must fail, never crash */
START_TEST(test_sample_truncated)
{
    const struct sample *s = &samples[_i];
    char json[128];
    for (size_t len = 0; len < s->len; len++) {
        uint8_t *b = dup_exact(s->b, len);
        gpuq_mpr r;
        gpuq_mpr_init(&r, b, len);
        ck_assert_msg(gpuq_mpr_peek(&r) == GPUQ_MP_INVALID || s->type == GPUQ_MP_ARRAY ||
                          s->type == GPUQ_MP_MAP,
                      "%s: peek at %zu", s->name, len);
        ck_assert_msg(gpuq_mpr_skip(&r) == GPUQ_E_BAD_HEADER, "%s: skip at %zu", s->name, len);
        ck_assert_uint_eq(gpuq_mpr_left(&r), len); /* cursor unchanged */
        ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof(json)), GPUQ_E_BAD_HEADER);
        free(b);
    }
}
END_TEST

START_TEST(test_values)
{
    gpuq_mpr r;
    uint64_t u;
    int64_t i;
    double d;
    bool bv;
    const char *s;
    uint32_t n;
#define AT(idx) gpuq_mpr_init(&r, samples[idx].b, samples[idx].len)
    for (int k = 0; k < NSAMPLES; k++) {
        const struct sample *sp = &samples[k];
        gpuq_mpr_init(&r, sp->b, sp->len);
        if (!strcmp(sp->name, "uint64")) {
            ck_assert_int_eq(gpuq_mpr_uint(&r, &u), 0);
            ck_assert(u == UINT64_MAX);
            gpuq_mpr_init(&r, sp->b, sp->len);
            ck_assert_int_eq(gpuq_mpr_int(&r, &i), GPUQ_E_BAD_HEADER); /* > INT64_MAX */
            ck_assert_int_eq(gpuq_mpr_double(&r, &d), 0);
        } else if (!strcmp(sp->name, "uint8")) {
            ck_assert_int_eq(gpuq_mpr_uint(&r, &u), 0);
            ck_assert_uint_eq(u, 255);
        } else if (!strcmp(sp->name, "uint16")) {
            ck_assert_int_eq(gpuq_mpr_int(&r, &i), 0);
            ck_assert_int_eq(i, 256);
        } else if (!strcmp(sp->name, "uint32")) {
            ck_assert_int_eq(gpuq_mpr_uint(&r, &u), 0);
            ck_assert_uint_eq(u, 65536);
        } else if (!strcmp(sp->name, "negfixint")) {
            ck_assert_int_eq(gpuq_mpr_uint(&r, &u), GPUQ_E_BAD_HEADER);
            ck_assert_int_eq(gpuq_mpr_int(&r, &i), 0);
            ck_assert_int_eq(i, -32);
        } else if (!strcmp(sp->name, "int8")) {
            ck_assert_int_eq(gpuq_mpr_int(&r, &i), 0);
            ck_assert_int_eq(i, -128);
        } else if (!strcmp(sp->name, "int16")) {
            ck_assert_int_eq(gpuq_mpr_int(&r, &i), 0);
            ck_assert_int_eq(i, -256);
        } else if (!strcmp(sp->name, "int32")) {
            ck_assert_int_eq(gpuq_mpr_double(&r, &d), 0);
            ck_assert(d == -2147483648.0);
        } else if (!strcmp(sp->name, "int64")) {
            ck_assert_int_eq(gpuq_mpr_int(&r, &i), 0);
            ck_assert(i == INT64_MIN);
        } else if (!strcmp(sp->name, "float32") || !strcmp(sp->name, "float64")) {
            ck_assert_int_eq(gpuq_mpr_uint(&r, &u), GPUQ_E_BAD_HEADER);
            ck_assert_int_eq(gpuq_mpr_double(&r, &d), 0);
            ck_assert(d == 1.5);
        } else if (sp->type == GPUQ_MP_STR && sp->len > 1) {
            ck_assert_int_eq(gpuq_mpr_uint(&r, &u), GPUQ_E_BAD_HEADER);
            ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), 0);
            ck_assert_uint_eq(n, 3);
            ck_assert_mem_eq(s, "abc", 3);
        } else if (!strcmp(sp->name, "true")) {
            ck_assert_int_eq(gpuq_mpr_bool(&r, &bv), 0);
            ck_assert(bv);
        } else if (!strcmp(sp->name, "nil")) {
            ck_assert_int_eq(gpuq_mpr_bool(&r, &bv), GPUQ_E_BAD_HEADER);
            ck_assert_int_eq(gpuq_mpr_nil(&r), 0);
        } else if (sp->type == GPUQ_MP_ARRAY && sp->len > 1) {
            ck_assert_int_eq(gpuq_mpr_map(&r, &n), GPUQ_E_BAD_HEADER);
            ck_assert_int_eq(gpuq_mpr_array(&r, &n), 0);
            ck_assert_uint_eq(n, 2);
            ck_assert_int_eq(gpuq_mpr_uint(&r, &u), 0);
            ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), 0);
        } else if (sp->type == GPUQ_MP_MAP && sp->len > 1) {
            ck_assert_int_eq(gpuq_mpr_map(&r, &n), 0);
            ck_assert_uint_eq(n, 1);
            ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), 0);
            ck_assert_int_eq(gpuq_mpr_skip(&r), 0);
        } else {
            continue;
        }
        ck_assert_msg(gpuq_mpr_left(&r) == 0, "%s: left", sp->name);
    }
    /* the reserved byte 0xc1 */
    static const uint8_t c1[] = {0xc1};
    gpuq_mpr_init(&r, c1, 1);
    ck_assert_int_eq(gpuq_mpr_peek(&r), GPUQ_MP_INVALID);
    ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
    /* empty buffer */
    gpuq_mpr_init(&r, NULL, 0);
    ck_assert_int_eq(gpuq_mpr_peek(&r), GPUQ_MP_INVALID);
    ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
#undef AT
}
END_TEST

/* Huge declared lengths in 5 bytes: must fail at once, reading nothing beyond */
START_TEST(test_huge_lengths)
{
    static const uint8_t bad[][5] = {
        {0xdd, 0xff, 0xff, 0xff, 0xff}, {0xdd, 0xff, 0x00, 0x00, 0x00},
        {0xdf, 0xff, 0xff, 0xff, 0xff}, {0xdf, 0xff, 0x00, 0x00, 0x00},
        {0xdb, 0xff, 0xff, 0xff, 0xff}, {0xdb, 0x00, 0x00, 0x00, 0x04},
        {0xc6, 0xff, 0xff, 0xff, 0xff}, {0xc9, 0xff, 0xff, 0xff, 0xff},
        {0xdc, 0xff, 0xff, 0x01, 0x01}, {0xde, 0x00, 0x02, 0x01, 0x01},
    };
    char json[64];
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        uint8_t *b = dup_exact(bad[k], 5);
        gpuq_mpr r;
        uint32_t n = 12345;
        const char *s;
        gpuq_mpr_init(&r, b, 5);
        ck_assert_int_eq(gpuq_mpr_peek(&r), GPUQ_MP_INVALID);
        ck_assert_int_eq(gpuq_mpr_array(&r, &n), GPUQ_E_BAD_HEADER);
        ck_assert_int_eq(gpuq_mpr_map(&r, &n), GPUQ_E_BAD_HEADER);
        ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), GPUQ_E_BAD_HEADER);
        ck_assert_uint_eq(n, 12345); /* outputs untouched on failure */
        ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
        ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof(json)), GPUQ_E_BAD_HEADER);
        ck_assert_uint_eq(gpuq_mpr_left(&r), 5);
        free(b);
    }
}
END_TEST

START_TEST(test_caps)
{
    uint8_t buf[600];
    gpuq_mpr r;
    uint32_t n;
    const char *s;

    /* 64 entries ok, 65 not */
    buf[0] = 0xdc;
    buf[1] = 0;
    buf[2] = GPUQ_HDR_MAX_ENTRIES;
    memset(buf + 3, 0x01, 100);
    gpuq_mpr_init(&r, buf, 3 + GPUQ_HDR_MAX_ENTRIES);
    ck_assert_int_eq(gpuq_mpr_array(&r, &n), 0);
    ck_assert_uint_eq(n, GPUQ_HDR_MAX_ENTRIES);
    buf[2] = GPUQ_HDR_MAX_ENTRIES + 1;
    gpuq_mpr_init(&r, buf, 3 + GPUQ_HDR_MAX_ENTRIES + 1);
    ck_assert_int_eq(gpuq_mpr_array(&r, &n), GPUQ_E_BAD_HEADER);
    buf[0] = 0xde;
    gpuq_mpr_init(&r, buf, 3 + 2 * (GPUQ_HDR_MAX_ENTRIES + 1));
    ck_assert_int_eq(gpuq_mpr_map(&r, &n), GPUQ_E_BAD_HEADER);

    /* strings: 256 bytes ok, 257 not */
    buf[0] = 0xda;
    buf[1] = 0x01;
    buf[2] = 0x00;
    memset(buf + 3, 'x', 300);
    gpuq_mpr_init(&r, buf, 3 + 256);
    ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), 0);
    ck_assert_uint_eq(n, GPUQ_HDR_MAX_STR);
    buf[2] = 0x01;
    gpuq_mpr_init(&r, buf, 3 + 257);
    ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
}
END_TEST

START_TEST(test_depth)
{
    /* _i nested single-element arrays around a 1 */
    uint8_t buf[16];
    int depth = _i;
    for (int k = 0; k < depth; k++)
        buf[k] = 0x91;
    buf[depth] = 0x01;
    gpuq_mpr r;
    char json[64];
    gpuq_mpr_init(&r, buf, (size_t)depth + 1);
    int want = depth <= (int)GPUQ_HDR_MAX_DEPTH ? 0 : GPUQ_E_BAD_HEADER;
    ck_assert_int_eq(gpuq_mpr_skip(&r), want);
    gpuq_mpr_init(&r, buf, (size_t)depth + 1);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof(json)), want);
    /* same with maps */
    for (int k = 0; k < depth; k++) {
        buf[2 * k] = 0x81;
        buf[2 * k + 1] = 0xa0 | 0; /* key "" */
    }
    buf[2 * depth] = 0xc0;
    gpuq_mpr_init(&r, buf, 2 * (size_t)depth + 1);
    ck_assert_int_eq(gpuq_mpr_skip(&r), want);
}
END_TEST

START_TEST(test_json)
{
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *b;
    size_t len;
    static const uint8_t bin[] = {0xc4, 0x01, 0x00};
    gpuq_mpw_map(w, 5);
    gpuq_mpw_str(w, "a");
    gpuq_mpw_array(w, 5);
    gpuq_mpw_uint(w, 1);
    gpuq_mpw_int(w, -2);
    gpuq_mpw_double(w, 0.1);
    gpuq_mpw_str(w, "x\"y\\\n");
    gpuq_mpw_double(w, NAN);
    gpuq_mpw_str(w, "b");
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "c");
    gpuq_mpw_nil(w);
    gpuq_mpw_str(w, "d");
    gpuq_mpw_bool(w, true);
    gpuq_mpw_str(w, "e");
    gpuq_mpw_raw(w, bin, sizeof(bin));
    gpuq_mpw_str(w, "f");
    gpuq_mpw_array(w, 0);
    gpuq_mpw_str(w, "g");
    gpuq_mpw_uint(w, UINT64_MAX);
    ck_assert_int_eq(gpuq_mpw_take(w, &b, &len), 0);
    gpuq_mpw_free(w);

    const char *want = "{\"a\":[1,-2,0.10000000000000001,\"x\\\"y\\\\\\u000a\",null],"
                       "\"b\":{\"c\":null,\"d\":true},\"e\":null,\"f\":[],"
                       "\"g\":18446744073709551615}";
    char json[256];
    gpuq_mpr r;
    gpuq_mpr_init(&r, b, len);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof(json)), 0);
    ck_assert_str_eq(json, want);
    ck_assert_uint_eq(gpuq_mpr_left(&r), 0);

    /* too small: truncated, NUL-terminated, TOO_LARGE */
    char small[10];
    memset(small, 'Z', sizeof(small));
    gpuq_mpr_init(&r, b, len);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, small, sizeof(small)), GPUQ_E_TOO_LARGE);
    ck_assert_uint_lt(strlen(small), sizeof(small));
    ck_assert_int_eq(strncmp(small, want, strlen(small)), 0);
    free(b);
}
END_TEST

/* ---- UTF-8: every str the reader returns, skips or renders is UTF-8 ---- */

static const struct sample bad_strs[] = {
    S("half character", GPUQ_MP_STR, 0xa3, 'a', 'b', 0xc3),
    S("lone continuation", GPUQ_MP_STR, 0xa1, 0x80),
    S("overlong /", GPUQ_MP_STR, 0xa2, 0xc0, 0xaf),
    S("overlong NUL", GPUQ_MP_STR, 0xd9, 0x03, 0xe0, 0x80, 0x80),
    S("surrogate", GPUQ_MP_STR, 0xda, 0x00, 0x03, 0xed, 0xa0, 0x80),
    S("above U+10FFFF", GPUQ_MP_STR, 0xdb, 0x00, 0x00, 0x00, 0x04, 0xf4, 0x90, 0x80, 0x80),
    S("latin-1", GPUQ_MP_STR, 0xa4, 'c', 'a', 'f', 0xe9),
    S("FF", GPUQ_MP_STR, 0xa1, 0xff),
};
#define NBAD ((int)(sizeof(bad_strs) / sizeof(bad_strs[0])))

START_TEST(test_str_not_utf8)
{
    const struct sample *s = &bad_strs[_i];
    uint8_t *b = dup_exact(s->b, s->len);
    gpuq_mpr r;
    const char *str;
    uint32_t n;
    gpuq_mpr_init(&r, b, s->len);
    ck_assert_msg(gpuq_mpr_str(&r, &str, &n) == GPUQ_E_BAD_HEADER, "%s: read as a str", s->name);
    ck_assert_uint_eq(gpuq_mpr_left(&r), s->len); /* cursor unmoved */
    ck_assert_int_eq(gpuq_mpr_peek(&r), GPUQ_MP_INVALID);
    ck_assert(gpuq_mpr_bad_utf8(&r));
    ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
    char json[64];
    ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof json), GPUQ_E_BAD_HEADER);
    free(b);

    /* nested: as an array element, a map key, a value two levels down */
    uint8_t nest[64];
    size_t k = 0;
    nest[k++] = 0x92; /* [1, bad] */
    nest[k++] = 0x01;
    memcpy(nest + k, s->b, s->len);
    k += s->len;
    b = dup_exact(nest, k);
    gpuq_mpr_init(&r, b, k);
    ck_assert(!gpuq_mpr_bad_utf8(&r)); /* the array itself is no str */
    ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
    gpuq_mpr_init(&r, b, k);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof json), GPUQ_E_BAD_HEADER);
    free(b);
    k = 0;
    nest[k++] = 0x81; /* {bad: 1} */
    memcpy(nest + k, s->b, s->len);
    k += s->len;
    nest[k++] = 0x01;
    b = dup_exact(nest, k);
    gpuq_mpr_init(&r, b, k);
    ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(gpuq_mpr_map(&r, &n), 0);
    ck_assert_int_eq(gpuq_mpr_str(&r, &str, &n), GPUQ_E_BAD_HEADER);
    ck_assert(gpuq_mpr_bad_utf8(&r));
    free(b);
    k = 0;
    nest[k++] = 0x81; /* {"a": [[bad]]} */
    nest[k++] = 0xa1;
    nest[k++] = 'a';
    nest[k++] = 0x91;
    nest[k++] = 0x91;
    memcpy(nest + k, s->b, s->len);
    k += s->len;
    b = dup_exact(nest, k);
    gpuq_mpr_init(&r, b, k);
    ck_assert_int_eq(gpuq_mpr_skip(&r), GPUQ_E_BAD_HEADER);
    gpuq_mpr_init(&r, b, k);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof json), GPUQ_E_BAD_HEADER);
    free(b);
}
END_TEST

START_TEST(test_str_utf8_ok)
{
    /* "é€𝄞" as fixstr and str8; NUL is UTF-8 too */
    static const uint8_t fix[] = {0xa9, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9d, 0x84, 0x9e};
    static const uint8_t s8[] = {0xd9, 0x03, 'a', 0x00, 'b'};
    const uint8_t *ins[] = {fix, s8};
    size_t lens[] = {sizeof fix, sizeof s8};
    for (int i = 0; i < 2; i++) {
        gpuq_mpr r;
        const char *str;
        uint32_t n;
        gpuq_mpr_init(&r, ins[i], lens[i]);
        ck_assert(!gpuq_mpr_bad_utf8(&r));
        ck_assert_int_eq(gpuq_mpr_peek(&r), GPUQ_MP_STR);
        ck_assert_int_eq(gpuq_mpr_str(&r, &str, &n), 0);
        ck_assert_uint_eq(n, i == 0 ? 9 : 3);
        ck_assert_uint_eq(gpuq_mpr_left(&r), 0);
    }
    /* not a str, or a str cut short: not "bad UTF-8" (the read fails anyway) */
    static const uint8_t num[] = {0x05}, cut[] = {0xa3, 'a'};
    gpuq_mpr r;
    gpuq_mpr_init(&r, num, sizeof num);
    ck_assert(!gpuq_mpr_bad_utf8(&r));
    gpuq_mpr_init(&r, cut, sizeof cut);
    ck_assert(!gpuq_mpr_bad_utf8(&r));
    gpuq_mpr_init(&r, NULL, 0);
    ck_assert(!gpuq_mpr_bad_utf8(&r));

    /* JSON cut short by its buffer never ends inside a character */
    char json[32];
    for (size_t cap = 1; cap <= sizeof json; cap++) {
        gpuq_mpr_init(&r, fix, sizeof fix);
        int rc = gpuq_mpr_to_json(&r, json, cap);
        ck_assert(rc == 0 || rc == GPUQ_E_TOO_LARGE);
        ck_assert_msg(tu_utf8_valid(json, strlen(json)), "cap %zu: JSON not UTF-8", cap);
        ck_assert_int_eq(strncmp(json, "\"\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e\"", strlen(json)),
                         0);
    }
}
END_TEST

/* The writer never puts a str that is not UTF-8 on the wire: bad bytes are
 * escaped as \xHH, valid text goes out byte for byte. */
START_TEST(test_write_escapes)
{
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *b;
    size_t len;
    gpuq_mpw_array(w, 3);
    gpuq_mpw_str(w, "caf\xe9 \xed\xa0\x80!");
    gpuq_mpw_str(w, "caf\xc3\xa9 \xf0\x9d\x84\x9e");
    gpuq_mpw_str(w, "ends in half \xe2\x82");
    ck_assert_int_eq(gpuq_mpw_take(w, &b, &len), 0);
    gpuq_mpw_free(w);
    ck_assert_int_eq(tu_msgpack_strings_utf8(b, len), 3);
    /* ... and that independent check does see a raw one */
    static const uint8_t raw[] = {0x92, 0xa1, 'a', 0xa2, 0xed, 0xa0};
    ck_assert_int_eq(tu_msgpack_strings_utf8(raw, sizeof raw), -1);
    static const uint8_t rawkey[] = {0x81, 0xa1, 0xff, 0x01};
    ck_assert_int_eq(tu_msgpack_strings_utf8(rawkey, sizeof rawkey), -1);
    gpuq_mpr r;
    uint32_t n;
    const char *s;
    gpuq_mpr_init(&r, b, len);
    ck_assert_int_eq(gpuq_mpr_array(&r, &n), 0);
    ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), 0);
    ck_assert_int_eq(n, strlen("caf\\xE9 \\xED\\xA0\\x80!"));
    ck_assert_int_eq(memcmp(s, "caf\\xE9 \\xED\\xA0\\x80!", n), 0);
    ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), 0);
    ck_assert_int_eq(n, 10);
    ck_assert_int_eq(memcmp(s, "caf\xc3\xa9 \xf0\x9d\x84\x9e", n), 0);
    ck_assert_int_eq(gpuq_mpr_str(&r, &s, &n), 0);
    ck_assert_int_eq(memcmp(s, "ends in half \\xE2\\x82", n), 0);
    ck_assert_uint_eq(gpuq_mpr_left(&r), 0);
    free(b);
}
END_TEST

static Suite *mpread_suite(void)
{
    Suite *s = suite_create("mpread");
    TCase *tc = tcase_create("types");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_sample_whole, 0, NSAMPLES);
    tcase_add_loop_test(tc, test_sample_truncated, 0, NSAMPLES);
    tcase_add_test(tc, test_values);
    suite_add_tcase(s, tc);
    tc = tcase_create("bounds");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_huge_lengths);
    tcase_add_test(tc, test_caps);
    tcase_add_loop_test(tc, test_depth, 0, GPUQ_HDR_MAX_DEPTH + 3);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_json);
    suite_add_tcase(s, tc);
    tc = tcase_create("utf8");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_str_not_utf8, 0, NBAD);
    tcase_add_test(tc, test_str_utf8_ok);
    tcase_add_test(tc, test_write_escapes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(mpread_suite());
}
