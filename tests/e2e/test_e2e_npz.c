/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_npz.c - gpuqctl's .npz inputs (client/cli/npz.c through npy.c),
 * on archives numpy wrote (tests/ref/npz_make.py), run as a user runs it.
 *
 * A member named as FILE.npz:NAME (or NAME.npy), or a one-member archive
 * named alone, gives the bytes gpuqctl gives for the same array as a plain
 * .npy: stored (np.savez) and deflated (np.savez_compressed) members, data
 * descriptors, ZIP64 records, an int64 member (converted as .npy is), one
 * input of each kind to a two-input op. Every refusal (several members and
 * no name, no such member: the names listed; not a ZIP or cut short; CRC
 * mismatch stored and deflated; encrypted; another method; a ZIP64 field
 * without its locator; data past the end; a member shorter than its header
 * says; a FIFO; an empty name; no file) is exit 1 with "gpuqctl: CODE:
 * ARG: reason", writes no output, reaches no gpuqd (its error count stays),
 * and gpuqd serves on. gpuqctl bench takes members as --input and
 * --input-b the same way (issue 31).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e_util.h"

static tu_output ctl(const char *const *args)
{
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, NULL};
    return tu_capture(pre, args, e2e_d.dir, "ctl");
}
#define CTL(...) ctl((const char *const[]){__VA_ARGS__, NULL})

static char *slurp(const char *path, size_t *len)
{
    char *buf = tu_read_file(path, len);
    ck_assert_msg(buf != NULL, "cannot read %s", path);
    return buf;
}

/* The archives and their arrays as plain .npy files, made by numpy. */
static void setup(void)
{
    e2e_setup();
    const char *args[] = {e2e_d.dir, NULL};
    ck_assert_int_eq(tu_python("ref/npz_make.py", args), 0);
}

static void same_files(const char *a, const char *b, const char *what)
{
    size_t la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    ck_assert_msg(la == lb && la > 128 && memcmp(x, y, la) == 0, "%s: outputs differ", what);
    free(x);
    free(y);
}

/* ---- members read as their .npy ---- */

typedef struct member_case {
    const char *arg; /* relative to the test dir */
    const char *ref; /* the same array as .npy */
} member_case;

static const member_case members[] = {
    {"ab.npz:x", "x.npy"},      {"ab.npz:y", "y.npy"},     {"ab.npz:x.npy", "x.npy"},
    {"abc.npz:x", "x.npy"},     {"abc.npz:y", "y.npy"},    {"one.npz", "x.npy"},
    {"one.npz:arr_0", "x.npy"}, {"dd.npz:x", "x.npy"},     {"dd.npz:y", "y.npy"},
    {"z64.npz:x", "x.npy"},     {"z64c.npz:y", "y.npy"},   {"int.npz", "i.npy"},
    {"int.npz:i", "i.npy"},     {"notnpy.npz:x", "x.npy"}, {"short.npz:y", "y.npy"},
};
#define NMEMBERS (sizeof members / sizeof members[0])

START_TEST(member_as_npy)
{
    const member_case *mc = &members[_i];
    char arg[400];
    snprintf(arg, sizeof arg, "%s/%s", e2e_d.dir, mc->arg);
    tu_output r = CTL("normalize", "--method", "l2", arg, "-o", e2e_dpath("a.npy"));
    ck_assert_msg(r.rc == 0, "%s: exit %d, stderr %s", mc->arg, r.rc, r.err);
    tu_output_free(&r);
    r = CTL("normalize", "--method", "l2", e2e_dpath(mc->ref), "-o", e2e_dpath("b.npy"));
    ck_assert_msg(r.rc == 0, "%s: exit %d, stderr %s", mc->ref, r.rc, r.err);
    tu_output_free(&r);
    same_files(e2e_dpath("a.npy"), e2e_dpath("b.npy"), mc->arg);
}
END_TEST

/* Two inputs, one stored and one deflated, as their .npy files. */
START_TEST(two_members_of_two_archives)
{
    tu_output r = CTL("distance", "pairwise", e2e_dpath("ab.npz:x"), e2e_dpath("abc.npz:y"), "-o",
                      e2e_dpath("a.npy"));
    ck_assert_msg(r.rc == 0, "exit %d, stderr %s", r.rc, r.err);
    tu_output_free(&r);
    r = CTL("distance", "pairwise", e2e_dpath("x.npy"), e2e_dpath("y.npy"), "-o",
            e2e_dpath("b.npy"));
    ck_assert_msg(r.rc == 0, "exit %d, stderr %s", r.rc, r.err);
    tu_output_free(&r);
    same_files(e2e_dpath("a.npy"), e2e_dpath("b.npy"), "pairwise");
}
END_TEST

/* ---- refusals ---- */

typedef struct refusal {
    const char *arg;  /* relative to the test dir ("" : none) */
    const char *code; /* gpuq_errname */
    const char *why;  /* after "ARG: " */
} refusal;

static const refusal refusals[] = {
    {"ab.npz", "bad_argument", "the archive holds 2 arrays (x, y): name one as "},
    {"ab.npz:q", "bad_argument", "no array \"q\" in the archive; it holds x, y"},
    {"notnpy.npz", "bad_argument", "the archive holds 2 arrays (readme.txt, x)"},
    {"notnpy.npz:readme.txt", "bad_argument", "not a .npy file"},
    {"empty.npz", "bad_argument", "the archive holds no arrays"},
    {"trunc.npz", "bad_argument", "not a ZIP (.npz) archive, or one cut short"},
    {"notzip.npz", "bad_argument", "not a ZIP (.npz) archive, or one cut short"},
    {"badcrc.npz:x", "bad_argument", "damaged archive: CRC-32 mismatch"},
    {"badcrcc.npz:x", "bad_argument", "damaged archive: CRC-32 mismatch"},
    {"enc.npz:x", "bad_argument", "the member is encrypted"},
    {"bzip.npz", "bad_argument", "the member is compressed with ZIP method 12"},
    {"noloc.npz:x", "bad_argument", "damaged ZIP archive (a ZIP64 field without its locator)"},
    {"farcsize.npz:x", "bad_argument", "damaged archive: member data outside the file"},
    {"short.npz:x", "size_mismatch", "shape needs 168 data bytes but the file has 152"},
    {"fifo.npz", "bad_argument", "an .npz archive is read from a regular file"},
    {"abc.npz:", "bad_argument", "no array name after ':' (FILE.npz:NAME)"},
    {"missing.npz", "io", "No such file or directory"},
};
#define NREFUSALS (sizeof refusals / sizeof refusals[0])

START_TEST(refused_by_name)
{
    const refusal *rf = &refusals[_i];
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && mkfifo '%s'", e2e_dpath("x.npy"),
             e2e_dpath("notzip.npz"), e2e_dpath("fifo.npz"));
    ck_assert_int_eq(system(cmd), 0);
    long long errors = e2e_status_int("errors");
    const char *arg = e2e_dpath(rf->arg);
    tu_output r = CTL("normalize", arg, "-o", e2e_dpath("out.npy"));
    ck_assert_msg(r.rc == 1, "%s: exit %d, stderr %s", rf->arg, r.rc, r.err);
    char want[800];
    snprintf(want, sizeof want, "gpuqctl: %s: %s: %s", rf->code, arg, rf->why);
    ck_assert_msg(strstr(r.err, want), "%s: no \"%s\" in %s", rf->arg, want, r.err);
    ck_assert_msg(!strchr(r.err, '\n') || !strchr(r.err, '\n')[1], "more than a line: %s", r.err);
    tu_output_free(&r);
    ck_assert(!e2e_exists(e2e_dpath("out.npy")));
    e2e_no_temp_files();
    ck_assert_int_eq(e2e_status_int("errors"), errors); /* refused here, not by gpuqd */
    e2e_assert_serves();
}
END_TEST

/* gpuqctl bench on archive members: knn of ab.npz:x (stored) against
 * abc.npz:y (deflated), normalize of int.npz's int64 member (as float64,
 * as every command reads it): requests made, none failed, the members'
 * shapes and dtype echoed, each request's bytes those of the arrays; a
 * member that is not there is one error line naming it, exit 1. */
START_TEST(bench_on_members)
{
    tu_output r =
        CTL("bench", "--json", "--op", "knn", "--input", e2e_dpath("ab.npz:x"), "--input-b",
            e2e_dpath("abc.npz:y"), "--k", "2", "--duration", "0.3", "--warmup", "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(strstr(r.out, "\"op\":\"knn\",\"size\":7,\"dim\":3,\"dtype\":\"f64\"") &&
                      strstr(r.out, "\"errors\":0,") && strstr(r.out, "ab.npz:x\"") &&
                      strstr(r.out, "abc.npz:y\""),
                  "%s", r.out);
    const char *rq = strstr(r.out, "\"requests\":"), *rs = strstr(r.out, "\"req_s\":"),
               *mb = strstr(r.out, "\"mb_s\":");
    ck_assert_msg(rq && rs && mb && strtod(rq + 11, NULL) > 0, "%s", r.out);
    /* 7x3 + 5x3 f64 in; 7x2 f64 distances and 7x2 int64 indices out */
    double b = strtod(mb + 7, NULL) * 1e6 / strtod(rs + 8, NULL);
    ck_assert_msg(b > 511 && b < 513, "%g bytes a request: %s", b, r.out);
    tu_output_free(&r);
    r = CTL("bench", "--input", e2e_dpath("int.npz:i"), "--method", "l1", "--duration", "0.2",
            "--warmup", "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(strstr(r.out, "int.npz:i [7, 3] f64, method l1") &&
                      strstr(r.out, "\nerrors      0\n"),
                  "%s", r.out);
    tu_output_free(&r);
    r = CTL("bench", "--input", e2e_dpath("ab.npz:q"), "--duration", "0.2");
    ck_assert_msg(r.rc == 1 && r.out[0] == '\0', "exit %d: %s%s", r.rc, r.out, r.err);
    ck_assert_msg(strstr(r.err, "ab.npz:q: no array \"q\" in the archive; it holds x, y") &&
                      strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
                  "%s", r.err);
    tu_output_free(&r);
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_npz");
    TCase *tc = tcase_create("npz");
    tcase_add_checked_fixture(tc, setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, member_as_npy, 0, (int)NMEMBERS);
    tcase_add_test(tc, two_members_of_two_archives);
    tcase_add_loop_test(tc, refused_by_name, 0, (int)NREFUSALS);
    tcase_add_test(tc, bench_on_members);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
