/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_paths.c - gpuqctl's file arguments, run as a user would run it
 * (client/cli/ctl_xfer.c, ctl_outfile.c, ctl_util.c, npy.c).
 *
 * Two outputs of one command that would be one file (the same name, another
 * spelling of it, a link to it) are a usage error (exit 2) naming both
 * options, and the file is left as it was; an output may be an input (the
 * input is read whole first) and /dev/null may take both. An empty file
 * argument (-o "", --indices "", an empty input) is a usage error too. A
 * .npy whose descr is not float32/float64 is named in the message as found,
 * a NUL or another unprintable byte escaped ('<f8\x00' is not '<f8'). An
 * input with no elements is refused with its file's name before anything is
 * sent. Every refusal leaves the output files that were there untouched.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e_util.h"
#include "npy.h"

/* dir/name in one of 8 buffers used in turn. */
static const char *dpath(const char *name)
{
    static char p[8][320];
    static int slot;
    char *s = p[slot++ % 8];
    snprintf(s, 320, "%s/%s", e2e_d.dir, name);
    return s;
}

/* gpuqctl --socket S args... (NULL-terminated), run in the daemon's dir. */
static tu_output ctl(const char *const *args)
{
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, NULL};
    return tu_capture(pre, args, e2e_d.dir, "ctl");
}
#define CTL(...) ctl((const char *const[]){__VA_ARGS__, NULL})

/* rows x cols float64 (cols 0: 1-D) into name. */
static void make_npy(const char *name, uint64_t rows, uint64_t cols)
{
    size_t n = rows * (cols ? cols : 1);
    double *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_rand_fill_f64(x, n, 0.5, 10);
    const uint64_t shape[2] = {rows, cols};
    char err[512];
    ck_assert_msg(npy_write(dpath(name), GPUQ_DT_F64, cols ? 2 : 1, shape, x, err, sizeof err) == 0,
                  "%s", err);
    free(x);
}

/* An .npy 1.0 file written byte by byte: descr (descr_len bytes, as they
 * go between the quotes), shape text "(3, 2)", then data_len zero bytes. */
static void make_raw_npy(const char *name, const char *descr, size_t descr_len, const char *shape,
                         size_t data_len)
{
    static const char head[] = "{'descr': '";
    char dict[512];
    size_t hlen = sizeof head - 1;
    ck_assert_uint_lt(descr_len, 128);
    memcpy(dict, head, hlen);
    memcpy(dict + hlen, descr, descr_len); /* a NUL too: not through printf */
    hlen += descr_len;
    int dl = snprintf(dict + hlen, sizeof dict - hlen, "', 'fortran_order': False, 'shape': %s, }",
                      shape);
    ck_assert(dl > 0 && hlen + (size_t)dl < sizeof dict - 64);
    hlen += (size_t)dl;
    while ((10 + hlen + 1) % 64)
        dict[hlen++] = ' ';
    dict[hlen++] = '\n';
    size_t total = 10 + hlen + data_len;
    uint8_t *buf = calloc(1, total);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, dict, hlen);
    ck_assert_int_eq(tu_write_file(dpath(name), buf, total), 0);
    free(buf);
}

/* A file's bytes (malloc'd), to compare after. */
static char *slurp(const char *path, size_t *len)
{
    char *s = tu_read_file(path, len);
    ck_assert_msg(s != NULL, "cannot read %s", path);
    return s;
}

/* path holds exactly bytes[len]. */
static void unchanged(const char *path, const char *bytes, size_t len)
{
    size_t l;
    char *now = slurp(path, &l);
    ck_assert_msg(l == len && memcmp(now, bytes, len) == 0, "%s was overwritten", path);
    free(now);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void fixture_files(void)
{
    make_npy("x.npy", 6, 3);
    make_npy("y.npy", 5, 3);
    make_npy("keep.npy", 4, 0); /* an output already there, which a refusal must not touch */
}

/* ---- two outputs, one file ---- */

typedef struct same_case {
    const char *what;
    const char *o_opt, *o_val, *i_opt, *i_val; /* i_opt "": o_val is "--output=VALUE" */
    const char *shown[2];                      /* the two options as the message names them */
} same_case;

/* Paths relative to the daemon's dir (the test chdirs there); "@" is its
 * absolute path. */
static const same_case same_cases[] = {
    {"the same name", "-o", "keep.npy", "-i", "keep.npy", {"-o 'keep.npy'", "-i 'keep.npy'"}},
    {"another spelling",
     "-o",
     "keep.npy",
     "-i",
     "./keep.npy",
     {"-o 'keep.npy'", "-i './keep.npy'"}},
    {"long options, absolute",
     "--output",
     "keep.npy",
     "--indices",
     "@/keep.npy",
     {"--output 'keep.npy'", "--indices '"}},
    {"--name=VALUE", "", "--output=keep.npy", "-i", "keep.npy", {"--output 'keep.npy'", "-i"}},
    {"a symbolic link to it",
     "-o",
     "link.npy",
     "-i",
     "keep.npy",
     {"-o 'link.npy'", "-i 'keep.npy'"}},
    {"a hard link to it", "-o", "keep.npy", "-i", "hard.npy", {"-o 'keep.npy'", "-i 'hard.npy'"}},
    {"a file not there yet", "-o", "new.npy", "-i", "sub/../new.npy", {"-o 'new.npy'", "-i"}},
};
#define NSAME (sizeof same_cases / sizeof same_cases[0])

START_TEST(same_output_refused)
{
    const same_case *sc = &same_cases[_i];
    fixture_files();
    ck_assert_int_eq(chdir(e2e_d.dir), 0);
    ck_assert_int_eq(symlink("keep.npy", "link.npy"), 0);
    ck_assert_int_eq(link("keep.npy", "hard.npy"), 0);
    ck_assert_int_eq(mkdir("sub", 0755), 0);
    size_t len;
    char *before = slurp("keep.npy", &len);
    char ival[320];
    if (sc->i_val[0] == '@')
        snprintf(ival, sizeof ival, "%s%s", e2e_d.dir, sc->i_val + 1);
    else
        snprintf(ival, sizeof ival, "%s", sc->i_val);
    tu_output r = sc->o_opt[0] ? CTL("distance", "knn", "--k", "2", "x.npy", "y.npy", sc->o_opt,
                                     sc->o_val, sc->i_opt, ival)
                               : CTL("distance", "knn", "--k", "2", "x.npy", "y.npy", sc->o_val,
                                     sc->i_opt, ival);
    ck_assert_msg(r.rc == 2, "%s: exit %d, stderr %s", sc->what, r.rc, r.err);
    ck_assert_msg(strstr(r.err, "gpuqctl: usage: ") && strstr(r.err, "name the same file"),
                  "%s: %s", sc->what, r.err);
    for (int k = 0; k < 2; k++)
        ck_assert_msg(strstr(r.err, sc->shown[k]), "%s: no \"%s\" in %s", sc->what, sc->shown[k],
                      r.err);
    ck_assert_str_eq(r.out, "");
    tu_output_free(&r);
    unchanged("keep.npy", before, len);
    ck_assert_msg(!exists("new.npy"), "%s: new.npy written", sc->what);
    e2e_no_temp_files();
    free(before);
}
END_TEST

/* The control: the same command with two files writes both; /dev/null
 * takes both outputs; an output may be an input. */
START_TEST(distinct_outputs_written)
{
    fixture_files();
    size_t len, l2;
    char *before = slurp(dpath("keep.npy"), &len);
    tu_output r = CTL("distance", "knn", "--k", "2", dpath("x.npy"), dpath("y.npy"), "-o",
                      dpath("keep.npy"), "-i", dpath("i.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    char *after = slurp(dpath("keep.npy"), &l2);
    ck_assert_msg(l2 != len || memcmp(before, after, len) != 0, "keep.npy not written");
    ck_assert(exists(dpath("i.npy")));
    free(after);
    free(before);

    r = CTL("distance", "knn", "--k", "2", dpath("x.npy"), dpath("y.npy"), "-o", "/dev/null", "-i",
            "/dev/null");
    ck_assert_msg(r.rc == 0, "/dev/null twice: exit %d: %s", r.rc, r.err);
    tu_output_free(&r);

    /* output = input: what writing it elsewhere gives */
    r = CTL("normalize", "--method", "l2", dpath("x.npy"), "-o", dpath("ref.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    r = CTL("normalize", "--method", "l2", dpath("x.npy"), "-o", dpath("x.npy"));
    ck_assert_msg(r.rc == 0, "in place: exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    char *ref = slurp(dpath("ref.npy"), &len);
    unchanged(dpath("x.npy"), ref, len);
    free(ref);
    /* knn's distances over its own X: read whole before it is replaced */
    make_npy("x.npy", 6, 3);
    r = CTL("distance", "knn", "--k", "2", dpath("x.npy"), dpath("y.npy"), "-o", dpath("ref.npy"),
            "-i", dpath("i.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    r = CTL("distance", "knn", "--k", "2", dpath("x.npy"), dpath("y.npy"), "-o", dpath("x.npy"),
            "-i", dpath("i.npy"));
    ck_assert_msg(r.rc == 0, "knn over X: exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    ref = slurp(dpath("ref.npy"), &len);
    unchanged(dpath("x.npy"), ref, len);
    free(ref);
    e2e_no_temp_files();
}
END_TEST

/* ---- empty file arguments ---- */

typedef struct empty_case {
    const char *args[12];
    const char *want; /* in the usage message */
} empty_case;

static const empty_case empty_cases[] = {
    {{"distance", "knn", "--k", "2", "X", "Y", "-o", "", "-i", "KEEP", NULL},
     "-o needs a value (-o DIST.npy), not an empty one"},
    {{"distance", "knn", "--k", "2", "X", "Y", "--output", "", "-i", "KEEP", NULL},
     "--output needs a value (--output DIST.npy), not an empty one"},
    {{"distance", "knn", "--k", "2", "X", "Y", "-o", "KEEP", "--indices", "", NULL},
     "--indices needs a value (--indices IDX.npy), not an empty one"},
    {{"normalize", "X", "-o", "", NULL}, "-o needs a value (-o OUT.npy), not an empty one"},
    {{"distance", "pairwise", "X", "", "-o", "KEEP", NULL},
     "an empty argument is not an .npy file"},
    {{"normalize", "X", "--output=", NULL}, "--output= needs a value"},
};
#define NEMPTY (sizeof empty_cases / sizeof empty_cases[0])

START_TEST(empty_path_is_usage)
{
    const empty_case *ec = &empty_cases[_i];
    fixture_files();
    const char *args[12];
    int n = 0;
    for (; ec->args[n]; n++) {
        const char *a = ec->args[n];
        args[n] = !strcmp(a, "X")      ? dpath("x.npy")
                  : !strcmp(a, "Y")    ? dpath("y.npy")
                  : !strcmp(a, "KEEP") ? dpath("keep.npy")
                                       : a;
    }
    args[n] = NULL;
    size_t len;
    char *before = slurp(dpath("keep.npy"), &len);
    tu_output r = ctl(args);
    ck_assert_msg(r.rc == 2, "case %d: exit %d, stderr %s", _i, r.rc, r.err);
    ck_assert_msg(strstr(r.err, "gpuqctl: usage: ") && strstr(r.err, ec->want),
                  "case %d: no \"%s\" in %s", _i, ec->want, r.err);
    tu_output_free(&r);
    unchanged(dpath("keep.npy"), before, len);
    free(before);
    e2e_no_temp_files();
}
END_TEST

/* ---- a descr gpuqctl does not take, shown as found ---- */

typedef struct descr_case {
    const char *descr; /* the bytes between the quotes */
    size_t len;
    const char *shown; /* in the message, quotes included */
} descr_case;

static const descr_case descr_cases[] = {
    {"<f8\0", 4, "dtype '<f8\\x00' is not supported"},    /* a NUL byte */
    {"<f8\\x00", 7, "dtype '<f8\\x00' is not supported"}, /* the same, as Python writes it */
    {"\xff<f8", 4, "dtype '\\xff<f8' is not supported"},  /* not ASCII */
    {"<f8\n", 4, "dtype '<f8\\x0a' is not supported"},    /* a newline stays on the line */
    {"<i8", 3, "dtype '<i8' is not supported"},           /* an ordinary one, as before */
    {"<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8", 36, "dtype '<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8<f...' is"},
};
#define NDESCR (sizeof descr_cases / sizeof descr_cases[0])

START_TEST(descr_shown_as_found)
{
    const descr_case *dc = &descr_cases[_i];
    fixture_files();
    make_raw_npy("odd.npy", dc->descr, dc->len, "(6, 3)", 6 * 3 * 8);
    size_t len;
    char *before = slurp(dpath("keep.npy"), &len);
    tu_output r = CTL("normalize", dpath("odd.npy"), "-o", dpath("keep.npy"));
    ck_assert_msg(r.rc == 1, "case %d: exit %d, stderr %s", _i, r.rc, r.err);
    char want[600];
    snprintf(want, sizeof want, "gpuqctl: bad_dtype: %s: %s", dpath("odd.npy"), dc->shown);
    ck_assert_msg(strstr(r.err, want), "case %d: no \"%s\" in %s", _i, want, r.err);
    ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "not one line: %s", r.err);
    tu_output_free(&r);
    unchanged(dpath("keep.npy"), before, len);
    free(before);
}
END_TEST

/* ---- inputs without elements ---- */

typedef struct zero_case {
    const char *args[12]; /* "Z": the empty file */
    const char *shape;    /* its shape text */
    const char *shown;    /* how the message shows it */
} zero_case;

static const zero_case zero_cases[] = {
    {{"normalize", "Z", "-o", "KEEP", NULL}, "(0, 3)", "shape (0, 3) has no elements"},
    {{"normalize", "Z", "-o", "KEEP", NULL}, "(0,)", "shape (0,) has no elements"},
    {{"distance", "haversine", "--to", "30,101", "Z", "-o", "KEEP", NULL},
     "(0, 2)",
     "shape (0, 2) has no elements"},
    {{"distance", "pairwise", "X", "Z", "-o", "KEEP", NULL},
     "(5, 0)",
     "shape (5, 0) has no elements"},
    {{"distance", "pairwise", "Z", "Y", "-o", "KEEP", NULL},
     "(0, 3)",
     "shape (0, 3) has no elements"},
    {{"distance", "knn", "--k", "1", "X", "Z", "-o", "KEEP", "-i", "I", NULL},
     "(0, 3)",
     "shape (0, 3) has no elements"},
};
#define NZERO (sizeof zero_cases / sizeof zero_cases[0])

START_TEST(empty_input_named)
{
    const zero_case *zc = &zero_cases[_i];
    fixture_files();
    make_raw_npy("zero.npy", "<f8", 3, zc->shape, 0);
    make_npy("i.npy", 2, 2);
    const char *args[12];
    int n = 0;
    for (; zc->args[n]; n++) {
        const char *a = zc->args[n];
        args[n] = !strcmp(a, "Z")      ? dpath("zero.npy")
                  : !strcmp(a, "X")    ? dpath("x.npy")
                  : !strcmp(a, "Y")    ? dpath("y.npy")
                  : !strcmp(a, "I")    ? dpath("i.npy")
                  : !strcmp(a, "KEEP") ? dpath("keep.npy")
                                       : a;
    }
    args[n] = NULL;
    size_t len, ilen;
    char *before = slurp(dpath("keep.npy"), &len), *ibefore = slurp(dpath("i.npy"), &ilen);
    long long errors = e2e_status_int("errors"); /* gpuqd's refusals */
    tu_output r = ctl(args);
    ck_assert_msg(r.rc == 1, "case %d: exit %d, stderr %s", _i, r.rc, r.err);
    char want[600];
    snprintf(want, sizeof want, "gpuqctl: empty: %s: %s; arrays must not be empty",
             dpath("zero.npy"), zc->shown);
    ck_assert_msg(strstr(r.err, want), "case %d: no \"%s\" in %s", _i, want, r.err);
    tu_output_free(&r);
    unchanged(dpath("keep.npy"), before, len);
    unchanged(dpath("i.npy"), ibefore, ilen);
    /* refused here, not by gpuqd */
    ck_assert_int_eq(e2e_status_int("errors"), errors);
    free(before);
    free(ibefore);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_paths");
    TCase *tc = tcase_create("paths");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, same_output_refused, 0, (int)NSAME);
    tcase_add_test(tc, distinct_outputs_written);
    tcase_add_loop_test(tc, empty_path_is_usage, 0, (int)NEMPTY);
    tcase_add_loop_test(tc, descr_shown_as_found, 0, (int)NDESCR);
    tcase_add_loop_test(tc, empty_input_named, 0, (int)NZERO);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
