/* SPDX-License-Identifier: Apache-2.0 */
/* test_log.c - server/service/log.c: the escaping that keeps peer strings from
 * forging log lines (issue 30, item 2).
 *
 * log_escape against a table (controls, DEL, C1 controls, invalid UTF-8,
 * valid characters of every length kept), at every output size (a prefix of
 * the full escape, cut between escapes, NUL-terminated), and on random bytes
 * (the result is UTF-8 by iconv and holds no control byte); then the logger
 * itself, stderr captured: a message with a newline, an ESC and a forged
 * priority prefix comes out as one line, through log_tagged and
 * log_limited alike, and a message over the line size is cut on a character
 * boundary.
 */
#include "log.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

struct esc_case {
    const char *name;
    const char *s;
    size_t len;
    const char *want;
};

/* clang-format off */
#define E(nm, lit, w) {nm, lit, sizeof(lit) - 1, w}
/* clang-format on */

static const struct esc_case cases[] = {
    E("empty", "", ""),
    E("ascii", "hello, world ~ 'x' \"y\"", "hello, world ~ 'x' \"y\""),
    E("backslash kept", "a\\nb", "a\\nb"),
    E("issue 30", "evil\nINJECTED-LINE fake error\x1b[31m",
      "evil\\nINJECTED-LINE fake error\\x1B[31m"),
    E("cr lf tab", "a\r\nb\tc", "a\\r\\nb\\tc"),
    E("NUL", "a\0b", "a\\x00b"),
    E("C0 ends", "\x01\x1f", "\\x01\\x1F"),
    E("DEL", "a\x7f", "a\\x7F"),
    E("forged priority", "x\n<3>gpuqd: fake", "x\\n<3>gpuqd: fake"),
    E("C1 CSI", "a\xc2\x9b[31m", "a\\xC2\\x9B[31m"),
    E("C1 first, last", "\xc2\x80\xc2\x9f", "\\xC2\\x80\\xC2\\x9F"),
    E("U+00A0 kept", "\xc2\xa0", "\xc2\xa0"),
    E("2..4 bytes kept", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
      "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
    E("U+2028 kept", "\xe2\x80\xa8", "\xe2\x80\xa8"),
    E("lone continuation", "a\x80z", "a\\x80z"),
    E("0xff", "\xff", "\\xFF"),
    E("overlong", "\xc0\xaf", "\\xC0\\xAF"),
    E("surrogate", "\xed\xa0\x80", "\\xED\\xA0\\x80"),
    E("above U+10FFFF", "\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80"),
    E("cut at the end", "ok\xe2\x82", "ok\\xE2\\x82"),
    E("cut then control", "\xe2\x82\n", "\\xE2\\x82\\n"),
};
#define NCASES (sizeof cases / sizeof cases[0])

START_TEST(test_table)
{
    const struct esc_case *c = &cases[_i];
    char out[256];
    size_t n = log_escape(out, sizeof out, c->s, c->len);
    ck_assert_msg(strcmp(out, c->want) == 0, "%s: got \"%s\", want \"%s\"", c->name, out, c->want);
    ck_assert_uint_eq(n, strlen(c->want));
}
END_TEST

/* At every cap: a prefix of the full escape that ends between two escapes
 * or characters (one of the full escape's boundaries), NUL-terminated. */
START_TEST(test_every_cap)
{
    const char in[] = "a\n\xc3\xa9\xff\x1b[\xe2\x82\xac\xc2\x9b\x7f\xf0\x9f\x98\x80z";
    size_t len = sizeof in - 1;
    char full[128];
    size_t fn = log_escape(full, sizeof full, in, len);
    ck_assert_str_eq(full, "a\\n\xc3\xa9\\xFF\\x1B[\xe2\x82\xac\\xC2\\x9B\\x7F\xf0\x9f\x98\x80z");
    /* the boundaries of the full escape */
    static const size_t bounds[] = {0, 1, 3, 5, 9, 13, 14, 17, 25, 29, 33, 34};
    ck_assert_uint_eq(bounds[sizeof bounds / sizeof bounds[0] - 1], fn);
    char out[128];
    out[0] = 'X';
    ck_assert_uint_eq(log_escape(out, 0, in, len), 0);
    ck_assert_int_eq(out[0], 'X'); /* cap 0: nothing written */
    for (size_t cap = 1; cap <= fn + 1; cap++) {
        memset(out, 'X', sizeof out);
        size_t n = log_escape(out, cap, in, len);
        size_t want = 0;
        for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++)
            if (bounds[k] <= cap - 1)
                want = bounds[k];
        ck_assert_msg(n == want, "cap %zu: %zu bytes, want %zu", cap, n, want);
        ck_assert_int_eq(out[n], '\0');
        ck_assert_int_eq(memcmp(out, full, n), 0);
    }
}
END_TEST

/* Random bytes (ASCII controls and high bytes over-represented): the escape
 * is UTF-8 by glibc's iconv, has no control byte, and fits in 4 * len + 1. */
START_TEST(test_random)
{
    uint64_t seed = tu_seed();
    srand((unsigned)seed);
    for (int round = 0; round < 2000; round++) {
        char in[64];
        size_t len = (size_t)(rand() % 64);
        for (size_t k = 0; k < len; k++) {
            int r = rand() % 4;
            in[k] = (char)(r == 0 ? rand() % 0x20 : r == 1 ? 0x80 + rand() % 0x80 : rand() % 256);
        }
        char out[4 * 64 + 1];
        size_t n = log_escape(out, 4 * len + 1, in, len);
        ck_assert_uint_le(n, 4 * len);
        ck_assert_msg(tu_utf8_valid(out, n), "seed %llu round %d: not UTF-8",
                      (unsigned long long)seed, round);
        for (size_t k = 0; k < n; k++) {
            unsigned char b = (unsigned char)out[k];
            ck_assert_msg(b >= 0x20 && b != 0x7f, "seed %llu round %d: byte 0x%02x at %zu",
                          (unsigned long long)seed, round, b, k);
        }
        /* nothing dropped: the escape of the whole input fits in 4 * len + 1 */
        char big[4 * 64 + 64];
        ck_assert_uint_eq(log_escape(big, sizeof big, in, len), n);
    }
}
END_TEST

/* Run fn with stderr going to a file; returns what it wrote (malloc'd). */
static char *capture_stderr(void (*fn)(void), size_t *len)
{
    char dir[256], path[300];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/stderr", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(fd, 2), 2);
    close(fd);
    fn();
    fflush(stderr);
    ck_assert_int_eq(dup2(saved, 2), 2);
    close(saved);
    char *got = tu_read_file(path, len);
    ck_assert_ptr_nonnull(got);
    tu_rmtree(dir);
    return got;
}

#define EVIL "evil\nINJECTED-LINE fake error\x1b[31m"

static void log_evil(void)
{
    log_set_level(LOG_LVL_DEBUG);
    log_info("session 1: hello from '%s'", EVIL);
    static log_limit lim;
    log_limited(&lim, LOG_LVL_WARN, "closed: '%s'", "x\r\n<3>gpuqd: forged\x7f");
    log_tagged(LOG_LVL_ERROR, "gpuqd test", "%s%c", "nul:", 0);
    log_debug("bad utf-8 \xff\xfe end");
}

START_TEST(test_logger_escapes)
{
    size_t len;
    char *got = capture_stderr(log_evil, &len);
    ck_assert_str_eq(got,
                     "<6>gpuqd: session 1: hello from 'evil\\nINJECTED-LINE fake error\\x1B[31m'\n"
                     "<4>gpuqd: closed: 'x\\r\\n<3>gpuqd: forged\\x7F'\n"
                     "<3>gpuqd test: nul:\\x00\n"
                     "<7>gpuqd: bad utf-8 \\xFF\\xFE end\n");
    ck_assert_uint_eq(len, strlen(got));
    free(got);
}
END_TEST

static void log_long(void)
{
    /* 600 two-byte characters (1200 bytes) then a newline: cut at 1023 bytes
     * on a character boundary (1022), before the newline */
    char big[1300];
    size_t o = 0;
    for (int k = 0; k < 600; k++) {
        big[o++] = (char)0xc3;
        big[o++] = (char)0xa9;
    }
    memcpy(big + o, "\nINJECTED-LINE", 15);
    log_set_level(LOG_LVL_INFO);
    log_info("%s", big);
    log_debug("dropped");
}

START_TEST(test_logger_long_line)
{
    size_t len;
    char *got = capture_stderr(log_long, &len);
    const char *prefix = "<6>gpuqd: ";
    ck_assert_int_eq(strncmp(got, prefix, strlen(prefix)), 0);
    ck_assert_uint_eq(len, strlen(prefix) + 1022 + 1);
    ck_assert_int_eq(got[len - 1], '\n');
    ck_assert_ptr_eq(memchr(got, '\n', len), got + len - 1);
    ck_assert(tu_utf8_valid(got, len));
    free(got);
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("escape");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_table, 0, (int)NCASES);
    tcase_add_test(tc, test_every_cap);
    tcase_add_test(tc, test_random);
    suite_add_tcase(s, tc);
    tc = tcase_create("logger");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_logger_escapes);
    tcase_add_test(tc, test_logger_long_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(log_suite());
}
