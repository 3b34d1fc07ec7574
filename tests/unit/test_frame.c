/* SPDX-License-Identifier: Apache-2.0 */
/* test_frame.c - the 20-byte frame prefix: round trip, byte-by-byte arrival
 * (NEED_MORE until complete), and every kind of broken prefix. */
#include "errors.h"
#include "frame.h"
#include "gpuq_limits.h"

#include <check.h>

#include "testutil.h"
#include <stdlib.h>
#include <string.h>

static void sample(uint8_t *out)
{
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = GPUQ_KIND_REQUEST,
                     .flags = 0,
                     .header_len = 0x01020304u,
                     .payload_len = 0x1122334455667788ull};
    gpuq_prefix_encode(&p, out);
}

START_TEST(test_roundtrip)
{
    uint8_t buf[GPUQ_PREFIX_SIZE];
    gpuq_prefix q;
    sample(buf);
    static const uint8_t want[GPUQ_PREFIX_SIZE] = {'G',  'P',  'U',  'Q',  1,    1,    0,
                                                   0,    0x04, 0x03, 0x02, 0x01, 0x88, 0x77,
                                                   0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
    ck_assert_mem_eq(buf, want, GPUQ_PREFIX_SIZE);
    ck_assert_int_eq(gpuq_prefix_decode(buf, sizeof(buf), &q), 0);
    ck_assert_uint_eq(q.version, 1);
    ck_assert_uint_eq(q.kind, GPUQ_KIND_REQUEST);
    ck_assert_uint_eq(q.flags, 0);
    ck_assert_uint_eq(q.header_len, 0x01020304u);
    ck_assert_uint_eq(q.payload_len, 0x1122334455667788ull);

    gpuq_prefix r = {.version = 1, .kind = GPUQ_KIND_REPLY, .header_len = 0, .payload_len = 0};
    gpuq_prefix_encode(&r, buf);
    ck_assert_int_eq(gpuq_prefix_decode(buf, sizeof(buf), &q), 0);
    ck_assert_uint_eq(q.kind, GPUQ_KIND_REPLY);
    ck_assert_uint_eq(q.header_len, 0);
    ck_assert_uint_eq(q.payload_len, 0);
    /* extra bytes after the prefix are the caller's */
    uint8_t longer[GPUQ_PREFIX_SIZE + 5] = {0};
    memcpy(longer, buf, GPUQ_PREFIX_SIZE);
    ck_assert_int_eq(gpuq_prefix_decode(longer, sizeof(longer), &q), 0);
}
END_TEST

/* _i = number of bytes available */
START_TEST(test_split)
{
    uint8_t buf[GPUQ_PREFIX_SIZE];
    gpuq_prefix q;
    sample(buf);
    /* copy into an exact-size heap buffer so ASan catches any over-read */
    uint8_t *part = malloc(_i ? (size_t)_i : 1);
    memcpy(part, buf, (size_t)_i);
    int rc = gpuq_prefix_decode(part, (size_t)_i, &q);
    if (_i < (int)GPUQ_PREFIX_SIZE)
        ck_assert_int_eq(rc, GPUQ_E_NEED_MORE);
    else
        ck_assert_int_eq(rc, 0);
    free(part);
}
END_TEST

/* _i = index of the corrupted magic byte */
START_TEST(test_bad_magic)
{
    uint8_t buf[GPUQ_PREFIX_SIZE];
    gpuq_prefix q;
    sample(buf);
    buf[_i] ^= 0x20;
    /* reported as soon as the bad byte is present */
    for (size_t len = (size_t)_i + 1; len <= GPUQ_PREFIX_SIZE; len++)
        ck_assert_int_eq(gpuq_prefix_decode(buf, len, &q), GPUQ_E_PROTOCOL);
    for (size_t len = 0; len <= (size_t)_i; len++)
        ck_assert_int_eq(gpuq_prefix_decode(buf, len, &q), GPUQ_E_NEED_MORE);
}
END_TEST

START_TEST(test_bad_kind)
{
    uint8_t buf[GPUQ_PREFIX_SIZE];
    gpuq_prefix q;
    const uint8_t kinds[] = {0, 3, 0x80, 0xff};
    for (size_t k = 0; k < sizeof(kinds); k++) {
        sample(buf);
        buf[5] = kinds[k];
        ck_assert_int_eq(gpuq_prefix_decode(buf, 6, &q), GPUQ_E_PROTOCOL);
        ck_assert_int_eq(gpuq_prefix_decode(buf, sizeof(buf), &q), GPUQ_E_PROTOCOL);
    }
}
END_TEST

START_TEST(test_bad_flags)
{
    uint8_t buf[GPUQ_PREFIX_SIZE];
    gpuq_prefix q;
    sample(buf);
    buf[6] = 1;
    ck_assert_int_eq(gpuq_prefix_decode(buf, 7, &q), GPUQ_E_PROTOCOL);
    ck_assert_int_eq(gpuq_prefix_decode(buf, sizeof(buf), &q), GPUQ_E_PROTOCOL);
    sample(buf);
    buf[7] = 0x80;
    ck_assert_int_eq(gpuq_prefix_decode(buf, 7, &q), GPUQ_E_NEED_MORE);
    ck_assert_int_eq(gpuq_prefix_decode(buf, sizeof(buf), &q), GPUQ_E_PROTOCOL);
}
END_TEST

START_TEST(test_bad_version)
{
    uint8_t buf[GPUQ_PREFIX_SIZE];
    gpuq_prefix q;
    const uint8_t versions[] = {0, 2, 0xff};
    for (size_t k = 0; k < sizeof(versions); k++) {
        sample(buf);
        buf[4] = versions[k];
        memset(&q, 0, sizeof(q));
        ck_assert_int_eq(gpuq_prefix_decode(buf, 5, &q), GPUQ_E_VERSION);
        ck_assert_int_eq(gpuq_prefix_decode(buf, sizeof(buf), &q), GPUQ_E_VERSION);
        ck_assert_uint_eq(q.version, versions[k]);
    }
    /* magic is checked before version */
    sample(buf);
    buf[0] = 'X';
    buf[4] = 9;
    ck_assert_int_eq(gpuq_prefix_decode(buf, sizeof(buf), &q), GPUQ_E_PROTOCOL);
}
END_TEST

START_TEST(test_errnames)
{
    for (int c = 0; c >= GPUQ_E_LAST; c--) {
        const char *n = gpuq_errname(c);
        ck_assert_str_ne(n, "unknown");
        ck_assert_int_eq(gpuq_errcode(n, (unsigned)strlen(n)), c);
        ck_assert_ptr_nonnull(gpuq_strerror(c));
    }
    ck_assert_str_eq(gpuq_errname(GPUQ_E_ZERO_NORM), "zero_norm");
    ck_assert_str_eq(gpuq_errname(GPUQ_E_LAST - 1), "unknown");
    ck_assert_str_eq(gpuq_errname(5), "unknown");
    ck_assert_int_eq(gpuq_errcode("nope", 4), GPUQ_E_INTERNAL);
}
END_TEST

static Suite *frame_suite(void)
{
    Suite *s = suite_create("frame");
    TCase *tc = tcase_create("prefix");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_loop_test(tc, test_split, 0, GPUQ_PREFIX_SIZE + 1);
    tcase_add_loop_test(tc, test_bad_magic, 0, 4);
    tcase_add_test(tc, test_bad_kind);
    tcase_add_test(tc, test_bad_flags);
    tcase_add_test(tc, test_bad_version);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_errnames);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(frame_suite());
}
