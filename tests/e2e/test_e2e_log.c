/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_log.c - gpuqd's log cannot be forged by a peer (issue 30, item 2).
 *
 * A real gpuqd (CPU backend, --log-level debug, stderr to a file: what
 * journald reads) gets a hello whose client name carries a newline, a line
 * that looks like one of gpuqd's, and a terminal escape, and a request whose
 * op name does the same; a libgpuq connection of that name is then killed
 * by an admin (the kill line, at info level, names the client too). The
 * log must have no line of the peer's making (every line starts with
 * gpuqd's own "<N>gpuqd" prefix, none with INJECTED-), no ESC, BEL or other
 * control byte but the newlines ending lines, and must be UTF-8; the peer's
 * strings are there, escaped. The daemon serves afterwards.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq.h"
#include "mpwrite.h"

#define EVIL_CLIENT "evil\nINJECTED-LINE fake error\x1b[31m"
#define EVIL_OP "x\r\nINJECTED-OP <3>gpuqd: forged\x1b]0;pwned\x07"

/* The daemon's log so far (malloc'd, NUL-ended). */
static char *read_log(size_t *len)
{
    char *log = tu_read_file(e2e_d.log, len);
    ck_assert_msg(log != NULL, "cannot read %s", e2e_d.log);
    return log;
}

/* Wait up to timeout_s for needle to appear in the log. */
static void wait_log(const char *needle, double timeout_s)
{
    double end = tu_now_s() + timeout_s;
    for (;;) {
        size_t len;
        char *log = read_log(&len);
        bool found = strstr(log, needle) != NULL;
        if (found) {
            free(log);
            return;
        }
        ck_assert_msg(tu_now_s() < end, "the log has no \"%s\" after %.0f s:\n%s", needle,
                      timeout_s, log);
        free(log);
        tu_sleep_s(0.02);
    }
}

START_TEST(peer_strings_cannot_forge_lines)
{
    uint8_t hb[4096];
    int fd = e2e_hello_socket(EVIL_CLIENT, hb, sizeof hb);

    /* an unknown op whose name is the attack: refused, and logged (debug) */
    gpuq_mpw *w = gpuq_mpw_new();
    ck_assert_ptr_nonnull(w);
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, 7);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, EVIL_OP);
    uint8_t *h;
    size_t hl;
    ck_assert_int_eq(gpuq_mpw_take(w, &h, &hl), 0);
    gpuq_mpw_free(w);
    e2e_send_frame(fd, h, (uint32_t)hl, 0, NULL, 0);
    free(h);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hb, sizeof hb), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_UNKNOWN_OP);
    ck_assert_uint_eq(rep.id, 7);
    close(fd);

    /* through libgpuq too, then killed by an admin: the kill line names the
     * client at info level (what a production log keeps) */
    gpuq_conn *victim = e2e_connect(EVIL_CLIENT, GPUQ_PRIO_NORMAL);
    gpuq_conn *adm = e2e_connect("admin", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_ping(victim), 0);
    ck_assert_int_eq(gpuq_kill_session(adm, gpuq_info(victim)->session_id), 0);
    gpuq_close(victim);

    wait_log("killed by session", 10);
    wait_log("INJECTED-OP <3>gpuqd: forged", 10);
    ck_assert_int_eq(gpuq_ping(adm), 0); /* the daemon serves */
    gpuq_close(adm);
    e2e_assert_serves();

    size_t len;
    char *log = read_log(&len);
    ck_assert_msg(tu_utf8_valid(log, len), "the log is not UTF-8");
    size_t lines = 0;
    for (char *p = log; p < log + len;) {
        char *nl = memchr(p, '\n', (size_t)(log + len - p));
        ck_assert_msg(nl != NULL, "the log's last line is not ended");
        *nl = '\0';
        ck_assert_msg(strncmp(p, "INJECTED-", 9) != 0, "a forged line: %s", p);
        ck_assert_msg(p[0] == '<' && isdigit((unsigned char)p[1]) && p[2] == '>' &&
                          strncmp(p + 3, "gpuqd", 5) == 0,
                      "a line that is not gpuqd's: %s", p);
        for (char *q = p; *q; q++)
            ck_assert_msg((unsigned char)*q >= 0x20 && *q != 0x7f, "control byte 0x%02x in: %s",
                          (unsigned)(unsigned char)*q, p);
        lines++;
        p = nl + 1;
    }
    ck_assert_uint_ge(lines, 3);
    free(log);
    log = read_log(&len);
    ck_assert_msg(memchr(log, 0x1b, len) == NULL, "an ESC byte in the log:\n%s", log);
    free(log);
    /* the peer's strings did reach the log, escaped, on gpuqd's lines */
    log = read_log(&len);
    ck_assert_msg(strstr(log, "hello from 'evil\\nINJECTED-LINE fake error\\x1B[31m'"), "%s", log);
    ck_assert_msg(strstr(log, "('evil\\nINJECTED-LINE fake error\\x1B[31m', pid"), "%s", log);
    free(log);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_log");
    TCase *tc = tcase_create("log");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, peer_strings_cannot_forge_lines);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
