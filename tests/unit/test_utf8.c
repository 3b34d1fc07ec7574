/* SPDX-License-Identifier: Apache-2.0 */
/* test_utf8.c - proto/utf8.c: strict validation against a table taken from
 * Markus Kuhn's UTF-8 decoder stress test (boundary cases, unexpected
 * continuation bytes, lonely and incomplete sequences, impossible bytes,
 * overlongs, surrogates, beyond U+10FFFF), cross-checked with glibc's
 * iconv(3) as an independent decoder (also on random byte strings); cuts at
 * every byte position against the character boundaries; escaping at every
 * output size; and the truncating vsnprintf. */
#include "utf8.h"

#include <check.h>
#include <iconv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

struct u8case {
    const char *name;
    const char *s;
    size_t len;
    bool valid;
    size_t bad_at; /* offset of the first bad sequence (invalid cases) */
};

/* clang-format off */
#define V(nm, lit) {nm, lit, sizeof(lit) - 1, true, 0}
#define X(nm, lit, at) {nm, lit, sizeof(lit) - 1, false, at}
/* clang-format on */

static const struct u8case cases[] = {
    /* 1: some correct UTF-8 text */
    V("empty", ""),
    V("kosme", "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"),
    V("ascii", "hello, world ~"),
    /* 2.1: first character of each length (U+0000 is valid UTF-8) */
    V("U+0000", "\x00"),
    V("U+0080", "\xc2\x80"),
    V("U+0800", "\xe0\xa0\x80"),
    V("U+10000", "\xf0\x90\x80\x80"),
    /* 2.2: last of each length */
    V("U+007F", "\x7f"),
    V("U+07FF", "\xdf\xbf"),
    V("U+FFFF", "\xef\xbf\xbf"),
    V("U+10FFFF", "\xf4\x8f\xbf\xbf"),
    /* 2.3: other boundaries */
    V("U+D7FF", "\xed\x9f\xbf"),
    V("U+E000", "\xee\x80\x80"),
    V("U+FFFD", "\xef\xbf\xbd"),
    V("U+FFFE (noncharacter, still UTF-8)", "\xef\xbf\xbe"),
    V("mixed", "a\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e z"),
    /* 2.x beyond U+10FFFF */
    X("U+110000", "\xf4\x90\x80\x80", 0),
    X("U+1FFFFF", "\xf7\xbf\xbf\xbf", 0),
    X("5 bytes U+200000", "\xf8\x88\x80\x80\x80", 0),
    X("6 bytes U+7FFFFFFF", "\xfd\xbf\xbf\xbf\xbf\xbf", 0),
    /* 3.1: unexpected continuation bytes */
    X("first continuation 0x80", "\x80", 0),
    X("last continuation 0xbf", "\xbf", 0),
    X("2 continuations", "\x80\xbf", 0),
    X("3 continuations", "\x80\xbf\x80", 0),
    X("continuation after ascii", "ab\x80", 2),
    X("continuation after a character", "\xc3\xa9\xa9", 2),
    /* 3.2: lonely start characters followed by a space */
    X("lonely C0", "\xc0 ", 0),
    X("lonely C2", "\xc2 ", 0),
    X("lonely E0", "\xe0 ", 0),
    X("lonely F0", "\xf0 ", 0),
    X("lonely F8", "\xf8 ", 0),
    X("lonely FC", "\xfc ", 0),
    /* 3.3: sequences with the last byte missing */
    X("2-byte missing 1", "\xdf", 0),
    X("3-byte missing 1", "\xef\xbf", 0),
    X("3-byte missing 2", "\xe0", 0),
    X("4-byte missing 1", "\xf4\x8f\xbf", 0),
    X("4-byte missing 2", "\xf0\x90", 0),
    X("cut after text", "abc\xe2\x82", 3),
    X("cut character in the middle", "ab\xc3z", 2),
    /* 3.4: concatenation of incomplete sequences */
    X("concatenated incomplete", "\xc2\xe0\xa0\xf0\x90\x80\xdf\xef\xbf\xf4\x8f\xbf", 0),
    /* 3.5: impossible bytes */
    X("FE", "\xfe", 0),
    X("FF", "\xff", 0),
    X("FE FE FF FF", "\xfe\xfe\xff\xff", 0),
    X("FF after text", "ok\xff", 2),
    /* 4.1: overlong ASCII '/' */
    X("overlong / 2", "\xc0\xaf", 0),
    X("overlong / 3", "\xe0\x80\xaf", 0),
    X("overlong / 4", "\xf0\x80\x80\xaf", 0),
    X("overlong / 5", "\xf8\x80\x80\x80\xaf", 0),
    X("overlong / 6", "\xfc\x80\x80\x80\x80\xaf", 0),
    /* 4.2: maximum overlongs */
    X("max overlong 2 (U+007F)", "\xc1\xbf", 0),
    X("max overlong 3 (U+07FF)", "\xe0\x9f\xbf", 0),
    X("max overlong 4 (U+FFFF)", "\xf0\x8f\xbf\xbf", 0),
    /* 4.3: overlong NUL */
    X("overlong NUL 2", "\xc0\x80", 0),
    X("overlong NUL 3", "\xe0\x80\x80", 0),
    X("overlong NUL 4", "\xf0\x80\x80\x80", 0),
    /* 5.1: single UTF-16 surrogates */
    X("U+D800", "\xed\xa0\x80", 0),
    X("U+DB7F", "\xed\xad\xbf", 0),
    X("U+DB80", "\xed\xae\x80", 0),
    X("U+DBFF", "\xed\xaf\xbf", 0),
    X("U+DC00", "\xed\xb0\x80", 0),
    X("U+DF80", "\xed\xbe\x80", 0),
    X("U+DFFF", "\xed\xbf\xbf", 0),
    X("surrogate after text", "x\xed\xa0\x80", 1),
    /* 5.2: paired surrogates */
    X("U+D800 U+DC00", "\xed\xa0\x80\xed\xb0\x80", 0),
    X("U+DBFF U+DFFF", "\xed\xaf\xbf\xed\xbf\xbf", 0),
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* The independent reference: glibc's UTF-8 decoder. Returns the bytes it
 * converted before stopping (len when all). */
static size_t iconv_valid_prefix(const char *s, size_t len)
{
    iconv_t cd = iconv_open("UTF-32LE", "UTF-8");
    ck_assert_msg(cd != (iconv_t)-1, "iconv_open UTF-8");
    static char out[4 * 1024];
    char *in = (char *)s, *o = out;
    size_t il = len, ol = sizeof out;
    ck_assert_uint_le(len, 1024);
    (void)iconv(cd, &in, &il, &o, &ol);
    iconv_close(cd);
    return (size_t)(in - s);
}

START_TEST(test_table)
{
    const struct u8case *c = &cases[_i];
    size_t want = c->valid ? c->len : c->bad_at;
    ck_assert_msg(gpuq_utf8_valid(c->s, c->len) == c->valid, "%s: valid should be %d", c->name,
                  c->valid);
    ck_assert_msg(gpuq_utf8_valid_prefix(c->s, c->len) == want, "%s: prefix %zu, want %zu", c->name,
                  gpuq_utf8_valid_prefix(c->s, c->len), want);
    /* the table itself agrees with iconv */
    ck_assert_msg(iconv_valid_prefix(c->s, c->len) == want, "%s: iconv stops at %zu, table %zu",
                  c->name, iconv_valid_prefix(c->s, c->len), want);
    /* escaping always yields valid UTF-8, unchanged when it was valid */
    char out[512];
    size_t n = gpuq_utf8_escape(out, sizeof out, c->s, c->len);
    ck_assert_uint_eq(n, gpuq_utf8_escaped_len(c->s, c->len));
    ck_assert_msg(gpuq_utf8_valid(out, n), "%s: escape is not UTF-8", c->name);
    ck_assert_uint_eq(iconv_valid_prefix(out, n), n);
    if (c->valid) {
        ck_assert_uint_eq(n, c->len);
        ck_assert_int_eq(memcmp(out, c->s, n), 0);
    } else {
        ck_assert_msg(n > c->len, "%s: nothing escaped", c->name);
        ck_assert_ptr_nonnull(strstr(out, "\\x"));
    }
}
END_TEST

/* Random byte strings drawn mostly from bytes that matter to a decoder:
 * gpuq_utf8_valid_prefix must agree with iconv on every one. */
START_TEST(test_random_vs_iconv)
{
    static const uint8_t alphabet[] = {0x00, 'a',  0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
                                       0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee,
                                       0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf8, 0xfe, 0xff};
    uint64_t seed = tu_seed();
    srand((unsigned)seed);
    char s[12];
    for (int it = 0; it < 200000; it++) {
        size_t len = (size_t)(rand() % (int)sizeof s) + 1;
        for (size_t k = 0; k < len; k++)
            s[k] = (char)alphabet[rand() % (int)sizeof alphabet];
        size_t want = iconv_valid_prefix(s, len);
        size_t got = gpuq_utf8_valid_prefix(s, len);
        if (got != want) {
            char hex[64] = "";
            for (size_t k = 0; k < len; k++)
                snprintf(hex + 3 * k, 4, "%02x ", (uint8_t)s[k]);
            ck_abort_msg("seed %llu: [%s] prefix %zu, iconv %zu", (unsigned long long)seed, hex,
                         got, want);
        }
    }
}
END_TEST

/* Character boundaries of a valid string: j == len, or s[j] is not a
 * continuation byte. The longest cut <= max is the last boundary <= max. */
static size_t ref_cut(const char *s, size_t len, size_t max)
{
    size_t j = len < max ? len : max;
    while (j > 0 && j < len && ((uint8_t)s[j] & 0xc0) == 0x80)
        j--;
    return j;
}

static void check_cuts(const char *name, const char *s, size_t len)
{
    for (size_t max = 0; max <= len + 2; max++) {
        size_t k = gpuq_utf8_cut(s, len, max);
        ck_assert_msg(k == ref_cut(s, len, max), "%s: cut at %zu gave %zu, want %zu", name, max, k,
                      ref_cut(s, len, max));
        ck_assert_msg(gpuq_utf8_valid(s, k), "%s: cut at %zu is not UTF-8", name, max);
    }
    ck_assert_uint_eq(gpuq_utf8_cut(s, len, len), len);
}

START_TEST(test_cut_every_byte)
{
    for (size_t i = 0; i < NCASES; i++) {
        if (cases[i].valid)
            check_cuts(cases[i].name, cases[i].s, cases[i].len);
    }
    /* long strings of 2-, 3- and 4-byte characters, each at every offset */
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9d\x84\x9e"};
    for (int c = 0; c < 3; c++) {
        for (int lead = 0; lead < 4; lead++) {
            char s[160];
            size_t len = 0;
            for (int k = 0; k < lead; k++)
                s[len++] = 'x';
            while (len + strlen(chars[c]) < sizeof s) {
                memcpy(s + len, chars[c], strlen(chars[c]));
                len += strlen(chars[c]);
            }
            check_cuts(chars[c], s, len);
        }
    }
    /* a half character at the end is dropped even when nothing follows */
    ck_assert_uint_eq(gpuq_utf8_cut("ab\xc3", 3, 3), 2);
    ck_assert_uint_eq(gpuq_utf8_cut("ab\xe2\x82", 4, 99), 2);
    ck_assert_uint_eq(gpuq_utf8_cut("ab\xf0\x9d\x84", 5, 5), 2);
    ck_assert_uint_eq(gpuq_utf8_cut("\xf0\x9d\x84\x9e", 4, 3), 0);
    ck_assert_uint_eq(gpuq_utf8_cut("", 0, 10), 0);
}
END_TEST

START_TEST(test_escape_sizes)
{
    /* valid characters, bad bytes and a surrogate, mixed */
    static const char in[] = "a\xc3\xa9\xff\xe2\x82\xac\xed\xa0\x80z\xf0\x9d\x84\x9e\xc3";
    const size_t len = sizeof in - 1;
    char full[128], out[128];
    size_t n = gpuq_utf8_escape(full, sizeof full, in, len);
    ck_assert_str_eq(full, "a\xc3\xa9\\xFF\xe2\x82\xac\\xED\\xA0\\x80z\xf0\x9d\x84\x9e\\xC3");
    ck_assert_uint_eq(n, strlen(full));
    ck_assert_uint_eq(gpuq_utf8_escaped_len(in, len), n);
    /* with less room: a prefix of the full escape, never half a unit */
    ck_assert_uint_eq(gpuq_utf8_escape(out, 0, in, len), 0);
    for (size_t cap = 1; cap <= n + 1; cap++) {
        memset(out, 0x55, sizeof out);
        size_t k = gpuq_utf8_escape(out, cap, in, len);
        ck_assert_uint_le(k, cap - 1);
        ck_assert_uint_eq(strlen(out), k);
        ck_assert_int_eq(memcmp(out, full, k), 0);
        ck_assert_msg(gpuq_utf8_valid(out, k), "cap %zu: not UTF-8", cap);
        /* maximal: the next unit of the full escape (a character or \xHH)
         * does not fit */
        if (k < n) {
            uint8_t c = (uint8_t)full[k];
            size_t unit = c == '\\' ? 4 : c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
            ck_assert_msg(k + unit > cap - 1, "cap %zu: stopped at %zu, next unit %zu fits", cap, k,
                          unit);
        } else {
            ck_assert_uint_eq(cap, n + 1);
        }
    }
}
END_TEST

static int fmt(char *buf, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = gpuq_utf8_vsnprintf(buf, cap, f, ap);
    va_end(ap);
    return n;
}

START_TEST(test_vsnprintf_cut)
{
    char word[64] = "x";
    for (int k = 0; k < 20; k++)
        strcat(word, "\xe2\x82\xac"); /* 1 + 60 bytes */
    char buf[80];
    for (size_t cap = 1; cap < sizeof buf; cap++) {
        memset(buf, 0x55, sizeof buf);
        int n = fmt(buf, cap, "op \"%s\"", word);
        ck_assert_int_eq(n, 5 + 61); /* vsnprintf's untruncated length */
        size_t got = strlen(buf);
        ck_assert_uint_le(got, cap - 1);
        ck_assert_msg(gpuq_utf8_valid(buf, got), "cap %zu: not UTF-8", cap);
        char full[80];
        snprintf(full, sizeof full, "op \"%s\"", word);
        ck_assert_uint_eq(got, ref_cut(full, strlen(full), cap - 1));
        ck_assert_int_eq(memcmp(buf, full, got), 0);
    }
    /* untruncated output is left as vsnprintf wrote it */
    ck_assert_int_eq(fmt(buf, sizeof buf, "%s", "\xc3\xa9t\xc3\xa9"), 5);
    ck_assert_str_eq(buf, "\xc3\xa9t\xc3\xa9");
}
END_TEST

static Suite *utf8_suite(void)
{
    Suite *s = suite_create("utf8");
    TCase *tc = tcase_create("validate");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_table, 0, (int)NCASES);
    tcase_add_test(tc, test_random_vs_iconv);
    suite_add_tcase(s, tc);
    tc = tcase_create("cut");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_cut_every_byte);
    tcase_add_test(tc, test_escape_sizes);
    tcase_add_test(tc, test_vsnprintf_cut);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(utf8_suite());
}
