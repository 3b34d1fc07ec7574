/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_paths.c - gpuqctl's file arguments, run as a user would run it
 * (client/cli/ctl_xfer.c, ctl_outfile.c, ctl_util.c, npy.c).
 *
 * Two outputs of one command that would be one file (the same name, another
 * spelling of it, a link to it) are a usage error (exit 2) naming both
 * options, and the file is left as it was; an output may be an input (the
 * input is read whole first) and /dev/null may take both. An empty file
 * argument (-o "", --indices "", an empty input) is a usage error too. A
 * .npy whose descr gpuqctl does not take is named in the message as found,
 * a NUL or another unprintable byte escaped ('<f8\x00' is not '<f8'), a
 * big-endian one said to be so. The dtypes it converts (bool, the integers,
 * float16) and Fortran order read as NumPy's astype and a C-order copy
 * would give them, from a file and from a stream, and an int64 input to
 * gpuqctl gives what the same float64 input gives. An
 * input with no elements is refused with its file's name before anything is
 * sent. Every refusal leaves the output files that were there untouched.
 */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e_util.h"
#include "npy.h"

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
    ck_assert_msg(
        npy_write(e2e_dpath(name), GPUQ_DT_F64, cols ? 2 : 1, shape, x, err, sizeof err) == 0, "%s",
        err);
    free(x);
}

/* An .npy 1.0 file written byte by byte: descr (descr_len bytes, as they
 * go between the quotes), fortran_order, shape text "(3, 2)", then
 * data_len bytes of data (borrowed; NULL: zeros). */
static void make_npy_bytes(const char *name, const char *descr, size_t descr_len, bool fortran,
                           const char *shape, const void *data, size_t data_len)
{
    static const char head[] = "{'descr': '";
    char dict[512];
    size_t hlen = sizeof head - 1;
    ck_assert_uint_lt(descr_len, 128);
    memcpy(dict, head, hlen);
    memcpy(dict + hlen, descr, descr_len); /* a NUL too: not through printf */
    hlen += descr_len;
    int dl = snprintf(dict + hlen, sizeof dict - hlen, "', 'fortran_order': %s, 'shape': %s, }",
                      fortran ? "True" : "False", shape);
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
    if (data && data_len)
        memcpy(buf + 10 + hlen, data, data_len);
    ck_assert_int_eq(tu_write_file(e2e_dpath(name), buf, total), 0);
    free(buf);
}

static void make_raw_npy(const char *name, const char *descr, size_t descr_len, const char *shape,
                         size_t data_len)
{
    make_npy_bytes(name, descr, descr_len, false, shape, NULL, data_len);
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
    char *before = slurp(e2e_dpath("keep.npy"), &len);
    tu_output r = CTL("distance", "knn", "--k", "2", e2e_dpath("x.npy"), e2e_dpath("y.npy"), "-o",
                      e2e_dpath("keep.npy"), "-i", e2e_dpath("i.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    char *after = slurp(e2e_dpath("keep.npy"), &l2);
    ck_assert_msg(l2 != len || memcmp(before, after, len) != 0, "keep.npy not written");
    ck_assert(exists(e2e_dpath("i.npy")));
    free(after);
    free(before);

    r = CTL("distance", "knn", "--k", "2", e2e_dpath("x.npy"), e2e_dpath("y.npy"), "-o",
            "/dev/null", "-i", "/dev/null");
    ck_assert_msg(r.rc == 0, "/dev/null twice: exit %d: %s", r.rc, r.err);
    tu_output_free(&r);

    /* output = input: what writing it elsewhere gives */
    r = CTL("normalize", "--method", "l2", e2e_dpath("x.npy"), "-o", e2e_dpath("ref.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    r = CTL("normalize", "--method", "l2", e2e_dpath("x.npy"), "-o", e2e_dpath("x.npy"));
    ck_assert_msg(r.rc == 0, "in place: exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    char *ref = slurp(e2e_dpath("ref.npy"), &len);
    unchanged(e2e_dpath("x.npy"), ref, len);
    free(ref);
    /* knn's distances over its own X: read whole before it is replaced */
    make_npy("x.npy", 6, 3);
    r = CTL("distance", "knn", "--k", "2", e2e_dpath("x.npy"), e2e_dpath("y.npy"), "-o",
            e2e_dpath("ref.npy"), "-i", e2e_dpath("i.npy"));
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    r = CTL("distance", "knn", "--k", "2", e2e_dpath("x.npy"), e2e_dpath("y.npy"), "-o",
            e2e_dpath("x.npy"), "-i", e2e_dpath("i.npy"));
    ck_assert_msg(r.rc == 0, "knn over X: exit %d: %s", r.rc, r.err);
    tu_output_free(&r);
    ref = slurp(e2e_dpath("ref.npy"), &len);
    unchanged(e2e_dpath("x.npy"), ref, len);
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
        args[n] = !strcmp(a, "X")      ? e2e_dpath("x.npy")
                  : !strcmp(a, "Y")    ? e2e_dpath("y.npy")
                  : !strcmp(a, "KEEP") ? e2e_dpath("keep.npy")
                                       : a;
    }
    args[n] = NULL;
    size_t len;
    char *before = slurp(e2e_dpath("keep.npy"), &len);
    tu_output r = ctl(args);
    ck_assert_msg(r.rc == 2, "case %d: exit %d, stderr %s", _i, r.rc, r.err);
    ck_assert_msg(strstr(r.err, "gpuqctl: usage: ") && strstr(r.err, ec->want),
                  "case %d: no \"%s\" in %s", _i, ec->want, r.err);
    tu_output_free(&r);
    unchanged(e2e_dpath("keep.npy"), before, len);
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
    {"<c16", 4, "dtype '<c16' is not supported"},         /* an ordinary one, as before */
    {">f4", 3, "dtype '>f4' is big-endian, which is not supported"}, /* said apart */
    {">i8", 3, "dtype '>i8' is big-endian, which is not supported"},
    {"<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8", 36, "dtype '<f8<f8<f8<f8<f8<f8<f8<f8<f8<f8<f...' is"},
};
#define NDESCR (sizeof descr_cases / sizeof descr_cases[0])

START_TEST(descr_shown_as_found)
{
    const descr_case *dc = &descr_cases[_i];
    fixture_files();
    make_raw_npy("odd.npy", dc->descr, dc->len, "(6, 3)", 6 * 3 * 8);
    size_t len;
    char *before = slurp(e2e_dpath("keep.npy"), &len);
    tu_output r = CTL("normalize", e2e_dpath("odd.npy"), "-o", e2e_dpath("keep.npy"));
    ck_assert_msg(r.rc == 1, "case %d: exit %d, stderr %s", _i, r.rc, r.err);
    char want[600];
    snprintf(want, sizeof want, "gpuqctl: bad_dtype: %s: %s", e2e_dpath("odd.npy"), dc->shown);
    ck_assert_msg(strstr(r.err, want), "case %d: no \"%s\" in %s", _i, want, r.err);
    ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "not one line: %s", r.err);
    tu_output_free(&r);
    unchanged(e2e_dpath("keep.npy"), before, len);
    free(before);
}
END_TEST

/* ---- dtypes and Fortran order converted on load ---- */

/* v as n little-endian bytes at p. */
static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

/* got and want are the same value: bit for bit, NaN as any NaN. */
static bool same_value(double got, double want)
{
    if (isnan(want))
        return isnan(got);
    return got == want && signbit(got) == signbit(want);
}

/* name (descr, fortran, shape rows x cols, cols 0: 1-D, data[len]) read by
 * npy_read and as a stream (npy_open_stream + npy_load) holds want[] as dt
 * in C order. */
static void check_loaded(const char *what, const char *descr, bool fortran, uint64_t rows,
                         uint64_t cols, const void *data, size_t len, gpuq_dtype dt,
                         const double *want)
{
    char shape[64];
    if (cols)
        snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)rows,
                 (unsigned long long)cols);
    else
        snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)rows);
    make_npy_bytes("conv.npy", descr, strlen(descr), fortran, shape, data, len);
    size_t n = rows * (cols ? cols : 1), es = gpuq_dtype_size(dt);
    for (int pass = 0; pass < 2; pass++) {
        npy_array a;
        char err[512];
        void *got;
        int fd = -1;
        if (pass == 0) {
            ck_assert_msg(npy_read(e2e_dpath("conv.npy"), &a, err, sizeof err) == 0, "%s: %s", what,
                          err);
            got = a.data;
        } else {
            fd = open(e2e_dpath("conv.npy"), O_RDONLY | O_CLOEXEC);
            ck_assert_int_ge(fd, 0);
            ck_assert_msg(npy_open_stream(fd, "stream", &a, err, sizeof err) == 0, "%s: %s", what,
                          err);
            got = malloc(a.nbytes);
            ck_assert_ptr_nonnull(got);
            ck_assert_msg(npy_load(&a, got, err, sizeof err) == 0, "%s stream: %s", what, err);
        }
        ck_assert_msg(a.dtype == dt, "%s: dtype %d", what, (int)a.dtype);
        ck_assert_int_eq(a.ndim, cols ? 2 : 1);
        ck_assert_uint_eq(a.shape[0], rows);
        ck_assert_uint_eq(a.shape[1], cols ? cols : 1);
        ck_assert_uint_eq(a.nbytes, n * es);
        ck_assert_uint_eq(a.file_nbytes, len);
        for (size_t k = 0; k < n; k++) {
            double g;
            if (dt == GPUQ_DT_F32) {
                float f;
                memcpy(&f, (uint8_t *)got + k * 4, 4);
                g = f;
            } else {
                memcpy(&g, (uint8_t *)got + k * 8, 8);
            }
            ck_assert_msg(same_value(g, want[k]), "%s (%s) [%zu]: %.17g, want %.17g", what,
                          pass ? "stream" : "file", k, g, want[k]);
        }
        if (pass == 1) {
            free(got);
            close(fd);
        }
        npy_free(&a);
    }
}

START_TEST(converted_dtypes)
{
    uint8_t buf[64];
    /* bool: NumPy writes 0 and 1 */
    {
        const uint8_t b[] = {0, 1, 1, 0};
        const double w[] = {0, 1, 1, 0};
        check_loaded("bool", "|b1", false, 4, 0, b, sizeof b, GPUQ_DT_F64, w);
    }
    {
        const int8_t v[] = {-128, -1, 0, 127};
        const double w[] = {-128, -1, 0, 127};
        check_loaded("int8", "|i1", false, 4, 0, v, sizeof v, GPUQ_DT_F64, w);
    }
    {
        const uint8_t v[] = {0, 1, 200, 255};
        const double w[] = {0, 1, 200, 255};
        check_loaded("uint8", "|u1", false, 4, 0, v, sizeof v, GPUQ_DT_F64, w);
    }
    {
        const int64_t v[] = {-32768, -2, 7, 32767};
        const double w[] = {-32768, -2, 7, 32767};
        for (int k = 0; k < 4; k++)
            put_le(buf + 2 * k, (uint64_t)v[k], 2);
        check_loaded("int16", "<i2", false, 4, 0, buf, 8, GPUQ_DT_F64, w);
    }
    {
        const uint64_t v[] = {0, 65535, 1234};
        const double w[] = {0, 65535, 1234};
        for (int k = 0; k < 3; k++)
            put_le(buf + 2 * k, v[k], 2);
        check_loaded("uint16", "<u2", false, 3, 0, buf, 6, GPUQ_DT_F64, w);
    }
    {
        const int64_t v[] = {INT32_MIN, -1, 5, INT32_MAX};
        const double w[] = {-2147483648.0, -1, 5, 2147483647.0};
        for (int k = 0; k < 4; k++)
            put_le(buf + 4 * k, (uint64_t)v[k], 4);
        check_loaded("int32", "<i4", false, 4, 0, buf, 16, GPUQ_DT_F64, w);
    }
    {
        const uint64_t v[] = {0, UINT32_MAX, 3000000000u};
        const double w[] = {0, 4294967295.0, 3000000000.0};
        for (int k = 0; k < 3; k++)
            put_le(buf + 4 * k, v[k], 4);
        check_loaded("uint32", "<u4", false, 3, 0, buf, 12, GPUQ_DT_F64, w);
    }
    {
        /* above 2^53 to nearest, ties to even: 2^53+1 -> 2^53, 2^53+3 -> 2^53+4 */
        const int64_t v[] = {(INT64_C(1) << 53) + 1,
                             -((INT64_C(1) << 53) + 1),
                             (INT64_C(1) << 53) + 3,
                             -5,
                             INT64_MIN,
                             INT64_MAX};
        const double w[] = {ldexp(1, 53), -ldexp(1, 53), ldexp(1, 53) + 4,
                            -5,           -ldexp(1, 63), ldexp(1, 63)};
        for (int k = 0; k < 6; k++)
            put_le(buf + 8 * k, (uint64_t)v[k], 8);
        check_loaded("int64", "<i8", false, 6, 0, buf, 48, GPUQ_DT_F64, w);
    }
    {
        const uint64_t v[] = {UINT64_MAX, UINT64_C(1) << 63, 12345, (UINT64_C(1) << 53) + 1};
        const double w[] = {ldexp(1, 64), ldexp(1, 63), 12345, ldexp(1, 53)};
        for (int k = 0; k < 4; k++)
            put_le(buf + 8 * k, v[k], 8);
        check_loaded("uint64", "<u8", false, 4, 0, buf, 32, GPUQ_DT_F64, w);
    }
    {
        /* float16 bits: 2^-24 (the least subnormal), the largest subnormal,
         * the least normal, -0, inf, -inf, NaN, 65504 (the largest), 1, -2 */
        const uint16_t h[] = {0x0001, 0x03ff, 0x0400, 0x8000, 0x7c00,
                              0xfc00, 0x7e00, 0x7bff, 0x3c00, 0xc000};
        double w[10];
        for (int k = 0; k < 10; k++) {
            /* the value from the bits, as IEEE 754 defines binary16 */
            int sign = h[k] >> 15, e = (h[k] >> 10) & 0x1f, m = h[k] & 0x3ff;
            double v = e == 0    ? ldexp(m, -24)
                       : e == 31 ? (m ? NAN : INFINITY)
                                 : ldexp(m + 1024, e - 25);
            w[k] = sign ? -v : v;
            put_le(buf + 2 * k, h[k], 2);
        }
        ck_assert(w[0] == ldexp(1, -24) && w[7] == 65504.0 && signbit(w[3]) && w[3] == 0);
        check_loaded("float16", "<f2", false, 10, 0, buf, 20, GPUQ_DT_F32, w);
    }
    /* Fortran order, 3 x 5: element (i, j) is at j * 3 + i in the file */
    {
        float f[15];
        uint8_t i4[60];
        double wf[15], wi[15];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) {
                f[j * 3 + i] = (float)(i * 10 + j) + 0.5f;
                put_le(i4 + 4 * (j * 3 + i), (uint64_t)(int64_t)(-(i * 100 + j) - 1), 4);
                wf[i * 5 + j] = i * 10 + j + 0.5;
                wi[i * 5 + j] = -(i * 100 + j) - 1;
            }
        check_loaded("Fortran float32", "<f4", true, 3, 5, f, sizeof f, GPUQ_DT_F32, wf);
        check_loaded("Fortran int32", "<i4", true, 3, 5, i4, sizeof i4, GPUQ_DT_F64, wi);
        /* 1-D Fortran is the same bytes as C: the file's order */
        double w1[15];
        for (int k = 0; k < 15; k++)
            w1[k] = f[k];
        check_loaded("Fortran 1-D", "<f4", true, 15, 0, f, sizeof f, GPUQ_DT_F32, w1);
    }
}
END_TEST

/* The data's size is checked in the file's element size: a 3 x 4 int16 is
 * 24 bytes, not 96 (its float64 size) nor 48. */
START_TEST(short_data_refused)
{
    static const size_t lens[] = {23, 25, 48, 96};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        make_raw_npy("short.npy", "<i2", 3, "(3, 4)", lens[k]);
        npy_array a;
        char err[512], want[600];
        ck_assert_int_eq(npy_read(e2e_dpath("short.npy"), &a, err, sizeof err),
                         GPUQ_E_SIZE_MISMATCH);
        snprintf(want, sizeof want, "%s: shape needs 24 data bytes but the file has %zu",
                 e2e_dpath("short.npy"), lens[k]);
        ck_assert_msg(strcmp(err, want) == 0, "%s, want %s", err, want);
        ck_assert_ptr_null(a.data);
    }
    make_raw_npy("ok.npy", "<i2", 3, "(3, 4)", 24);
    npy_array a;
    char err[512];
    ck_assert_msg(npy_read(e2e_dpath("ok.npy"), &a, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(a.nbytes, 3 * 4 * 8);
    ck_assert_uint_eq(a.file_esize, 2);
    npy_free(&a);
    /* a stream that ends early is told in the file's bytes too */
    make_raw_npy("short.npy", "<i2", 3, "(3, 4)", 23);
    int fd = open(e2e_dpath("short.npy"), O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(npy_open_stream(fd, "stream", &a, err, sizeof err), 0);
    double out[12];
    ck_assert_int_eq(npy_load(&a, out, err, sizeof err), GPUQ_E_SIZE_MISMATCH);
    ck_assert_str_eq(err, "stream: ended before the 24 data bytes its shape needs");
    npy_free(&a);
    close(fd);
}
END_TEST

/* gpuqctl normalize of an int64 file gives what the same values as float64
 * give: the same output file, byte for byte. */
START_TEST(int64_input_as_float64)
{
    uint8_t ints[6 * 3 * 8];
    double dbl[6 * 3];
    for (int k = 0; k < 18; k++) {
        int64_t v = (k % 5 - 2) * 1000003 + k; /* negative ones too */
        put_le(ints + 8 * k, (uint64_t)v, 8);
        dbl[k] = (double)v;
    }
    make_npy_bytes("ints.npy", "<i8", 3, false, "(6, 3)", ints, sizeof ints);
    const uint64_t shape[2] = {6, 3};
    char err[512];
    ck_assert_msg(npy_write(e2e_dpath("dbl.npy"), GPUQ_DT_F64, 2, shape, dbl, err, sizeof err) == 0,
                  "%s", err);
    tu_output r =
        CTL("normalize", "--method", "l2", e2e_dpath("ints.npy"), "-o", e2e_dpath("oi.npy"));
    ck_assert_msg(r.rc == 0, "int64: exit %d, stderr %s", r.rc, r.err);
    tu_output_free(&r);
    r = CTL("normalize", "--method", "l2", e2e_dpath("dbl.npy"), "-o", e2e_dpath("od.npy"));
    ck_assert_msg(r.rc == 0, "float64: exit %d, stderr %s", r.rc, r.err);
    tu_output_free(&r);
    size_t li, ld;
    char *oi = slurp(e2e_dpath("oi.npy"), &li), *od = slurp(e2e_dpath("od.npy"), &ld);
    ck_assert_msg(li == ld && li > 128 && memcmp(oi, od, li) == 0, "outputs differ");
    free(oi);
    free(od);
    e2e_no_temp_files();
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
        args[n] = !strcmp(a, "Z")      ? e2e_dpath("zero.npy")
                  : !strcmp(a, "X")    ? e2e_dpath("x.npy")
                  : !strcmp(a, "Y")    ? e2e_dpath("y.npy")
                  : !strcmp(a, "I")    ? e2e_dpath("i.npy")
                  : !strcmp(a, "KEEP") ? e2e_dpath("keep.npy")
                                       : a;
    }
    args[n] = NULL;
    size_t len, ilen;
    char *before = slurp(e2e_dpath("keep.npy"), &len), *ibefore = slurp(e2e_dpath("i.npy"), &ilen);
    long long errors = e2e_status_int("errors"); /* gpuqd's refusals */
    tu_output r = ctl(args);
    ck_assert_msg(r.rc == 1, "case %d: exit %d, stderr %s", _i, r.rc, r.err);
    char want[600];
    snprintf(want, sizeof want, "gpuqctl: empty: %s: %s; arrays must not be empty",
             e2e_dpath("zero.npy"), zc->shown);
    ck_assert_msg(strstr(r.err, want), "case %d: no \"%s\" in %s", _i, want, r.err);
    tu_output_free(&r);
    unchanged(e2e_dpath("keep.npy"), before, len);
    unchanged(e2e_dpath("i.npy"), ibefore, ilen);
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
    tcase_add_test(tc, converted_dtypes);
    tcase_add_test(tc, short_data_refused);
    tcase_add_test(tc, int64_input_as_float64);
    tcase_add_loop_test(tc, empty_input_named, 0, (int)NZERO);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
