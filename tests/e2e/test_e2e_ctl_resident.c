/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_ctl_resident.c - gpuqctl's resident arrays against a real
 * gpuqd: put, get, ls (table and --json), rm, and @NAME as an op's input
 * and -o / -i @NAME as its outputs.
 *
 * put then get gives the array back (dtype, shape, bytes), from a file or
 * stdin, to a file or stdout; ls shows it as a row (name, owner, access,
 * dtype, shape, size, device, users) and --json as an object with gpuqd's
 * keys; rm removes it and says so. An op with @NAME inputs (one, the other,
 * both) writes the same bytes as the one with the files, under every
 * transport; an op with -o @NAME keeps its result, which get writes as the
 * op would have (and as a double reference computed here says), and writes
 * no file of that name. Errors: a name with no array (get, rm, an op's
 * input) is not_found with exit status 1 and no output; a malformed name is
 * a usage error (2) that says why; two outputs kept under one name are a
 * usage error; gpuqd's bad_shape for a resident input that does not fit
 * comes through with exit status 1.
 */
#include <check.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "npy.h"

/* gpuqctl --socket S [--transport T] args...: rc, stdout, stderr. */
static tu_output ctl_t(const char *transport, const char *const *args)
{
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, transport ? "--transport" : NULL,
                         transport,    NULL};
    return tu_capture(pre, args, e2e_d.dir, "ctl");
}

#define CTL(...) ctl_t(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define CTLT(t, ...) ctl_t(t, (const char *const[]){__VA_ARGS__, NULL})

/* The command succeeded and printed nothing on stderr. */
static void ok_run(tu_output *o, const char *what)
{
    ck_assert_msg(o->rc == 0 && o->err[0] == '\0', "%s: exit %d: %s", what, o->rc, o->err);
}

/* It failed with status rc, stderr naming say, nothing on stdout. */
static void fails(tu_output *o, int rc, const char *say, const char *what)
{
    ck_assert_msg(o->rc == rc, "%s: exit %d (want %d): %s", what, o->rc, rc, o->err);
    ck_assert_msg(strstr(o->err, say), "%s: stderr lacks \"%s\": %s", what, say, o->err);
    ck_assert_msg(o->out[0] == '\0', "%s: stdout: %s", what, o->out);
    ck_assert_msg(strchr(o->err, '\n') == o->err + strlen(o->err) - 1, "%s: not one line: %s", what,
                  o->err);
}

/* n random values in [lo, hi) as dt, saved as name [r] or [r, cols]; the
 * float64 values into keep (may be NULL). */
static void make_npy(const char *name, gpuq_dtype dt, int ndim, uint64_t r, uint64_t cols,
                     double lo, double hi, double *keep)
{
    uint64_t n = r * (ndim == 2 ? cols : 1);
    double *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_rand_fill_f64(x, n, lo, hi);
    void *data = x;
    float *f = NULL;
    if (dt == GPUQ_DT_F32) {
        f = malloc(n * sizeof *f);
        ck_assert_ptr_nonnull(f);
        for (uint64_t i = 0; i < n; i++)
            f[i] = (float)x[i];
        data = f;
    }
    if (keep)
        memcpy(keep, x, n * sizeof *x);
    const uint64_t shape[2] = {r, cols};
    char err[512];
    ck_assert_msg(npy_write(e2e_dpath(name), dt, ndim, shape, data, err, sizeof err) == 0, "%s",
                  err);
    free(x);
    free(f);
}

/* Two .npy files hold the same array: dtype, shape and bytes (npy.c reads
 * int64 indices as float64, exact below 2^53, so they compare as arrays
 * too; a file it refuses is compared whole). */
static void same_array(const char *a, const char *b, const char *what)
{
    npy_array x, y;
    char err[512];
    if (npy_read(e2e_dpath(a), &x, err, sizeof err) != 0) {
        ck_assert_msg(strstr(err, "'<i8'"), "%s: %s", what, err);
        size_t la = 0, lb = 0;
        char *fa = tu_read_file(e2e_dpath(a), &la), *fb = tu_read_file(e2e_dpath(b), &lb);
        ck_assert_msg(fa && fb && la == lb && la > 128 && memcmp(fa, fb, la) == 0,
                      "%s: %s and %s differ", what, a, b);
        free(fa);
        free(fb);
        return;
    }
    ck_assert_msg(npy_read(e2e_dpath(b), &y, err, sizeof err) == 0, "%s: %s", what, err);
    ck_assert_msg(x.dtype == y.dtype && x.ndim == y.ndim && x.shape[0] == y.shape[0] &&
                      x.shape[1] == y.shape[1] && x.nbytes == y.nbytes &&
                      memcmp(x.data, y.data, x.nbytes) == 0,
                  "%s: %s and %s differ", what, a, b);
    npy_free(&x);
    npy_free(&y);
}

static const char *user_of_me(void)
{
    static char buf[64];
    struct passwd *pw = getpwuid(getuid());
    if (pw)
        snprintf(buf, sizeof buf, "%s", pw->pw_name);
    else
        snprintf(buf, sizeof buf, "%u", (unsigned)getuid());
    return buf;
}

/* The device column / key gpuqd gives its arrays here. */
static bool on_cpu(void)
{
    return strcmp(tu_test_device(), "cpu") == 0;
}

START_TEST(put_ls_get_rm)
{
    make_npy("base.npy", GPUQ_DT_F32, 2, 37, 13, -5, 7, NULL);
    tu_output o = CTL("put", "base", e2e_dpath("base.npy"));
    ok_run(&o, "put");
    ck_assert_str_eq(o.out, "put base: float32 (37, 13), 1.9 KiB, access private\n");
    tu_output_free(&o);

    o = CTL("ls");
    ok_run(&o, "ls");
    char *nl = strchr(o.out, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_msg(strncmp(o.out, "NAME ", 5) == 0, "%s", o.out);
    const char *head[] = {"NAME",  "OWNER",  "ACCESS", "DTYPE",  "SHAPE",
                          "BYTES", "DEVICE", "USERS",  "PERSIST"};
    const char *want[] = {"base", user_of_me(), "private", "float32", "(37,", "13)",
                          "1.9",  "KiB",        "cpu",     "0",       "no"};
    char *line = nl + 1, *save = NULL;
    *nl = '\0';
    char *t = strtok_r(o.out, " ", &save);
    for (int k = 0; k < 9; k++, t = strtok_r(NULL, " ", &save))
        ck_assert_msg(t && !strcmp(t, head[k]), "ls header: %s", t ? t : "(end)");
    char *end = strchr(line, '\n');
    ck_assert_msg(end && end[1] == '\0', "ls: one row: %s", line);
    *end = '\0';
    t = strtok_r(line, " ", &save);
    for (int k = 0; k < 11; k++, t = strtok_r(NULL, " ", &save)) {
        if (k == 8 && !on_cpu())
            continue; /* a device number */
        ck_assert_msg(t && !strcmp(t, want[k]), "ls row field %d: %s", k, t ? t : "(end)");
    }
    tu_output_free(&o);

    o = CTL("--json", "ls");
    ok_run(&o, "ls --json");
    char uid[64];
    snprintf(uid, sizeof uid, "\"owner\":%u", (unsigned)getuid());
    const char *keys[] = {"\"name\":\"base\"",
                          "\"dtype\":\"f32\"",
                          "\"shape\":[37,13]",
                          "\"bytes\":1924",
                          "\"access\":\"private\"",
                          "\"users\":0",
                          uid,
                          on_cpu() ? "\"device\":-1" : "\"device\":"};
    ck_assert_msg(strncmp(o.out, "[{", 2) == 0 && strcmp(o.out + strlen(o.out) - 3, "}]\n") == 0,
                  "%s", o.out);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        ck_assert_msg(strstr(o.out, keys[k]), "ls --json lacks %s: %s", keys[k], o.out);
    tu_output_free(&o);

    o = CTL("get", "base", "-o", e2e_dpath("back.npy"));
    ok_run(&o, "get");
    ck_assert_str_eq(o.out, "");
    tu_output_free(&o);
    same_array("base.npy", "back.npy", "get");

    o = CTL("rm", "base");
    ok_run(&o, "rm");
    ck_assert_str_eq(o.out, "removed base\n");
    tu_output_free(&o);
    o = CTL("ls");
    ok_run(&o, "ls after rm");
    ck_assert_msg(strncmp(o.out, "NAME ", 5) == 0 && strchr(o.out, '\n')[1] == '\0', "%s", o.out);
    tu_output_free(&o);
    o = CTL("--json", "ls");
    ok_run(&o, "ls --json after rm");
    ck_assert_str_eq(o.out, "[]\n");
    tu_output_free(&o);
}
END_TEST

START_TEST(json_forms)
{
    make_npy("v.npy", GPUQ_DT_F64, 1, 10, 1, -1, 1, NULL);
    tu_output o = CTL("--json", "put", "--access", "all", "vec", e2e_dpath("v.npy"));
    ok_run(&o, "put --json");
    ck_assert_msg(strncmp(o.out, "{\"command\":\"put\"", 16) == 0, "%s", o.out);
    ck_assert_msg(strstr(o.out, "\"path\":\"@vec\",\"resident\":\"vec\",\"shape\":[10]") &&
                      strstr(o.out, "\"bytes\":80") && strchr(o.out, '\n')[1] == '\0',
                  "%s", o.out);
    tu_output_free(&o);
    o = CTL("--json", "get", "vec", "-o", e2e_dpath("v2.npy"));
    ok_run(&o, "get --json");
    ck_assert_msg(strncmp(o.out, "{\"command\":\"get\"", 16) == 0, "%s", o.out);
    ck_assert_msg(strstr(o.out, "\"inputs\":[{\"path\":\"@vec\",\"resident\":\"vec\""), "%s",
                  o.out);
    tu_output_free(&o);
    same_array("v.npy", "v2.npy", "get --json");
    o = CTL("--json", "rm", "vec");
    ok_run(&o, "rm --json");
    ck_assert_str_eq(
        o.out, "{\"command\":\"rm\",\"ok\":true,\"name\":\"vec\",\"message\":\"removed vec\"}\n");
    tu_output_free(&o);
}
END_TEST

/* @NAME inputs give the files' bytes, under each transport (arrays large
 * enough for auto to take shared memory). */
START_TEST(at_inputs)
{
    static const char *const tr[3] = {"auto", "socket", "shm"};
    const char *T = tr[_i];
    make_npy("q.npy", GPUQ_DT_F32, 2, 300, 64, -1, 1, NULL);
    make_npy("base.npy", GPUQ_DT_F32, 2, 4096, 64, -1, 1, NULL);
    tu_output o = CTLT(T, "put", "base", e2e_dpath("base.npy"));
    ok_run(&o, "put base");
    tu_output_free(&o);
    o = CTLT(T, "put", "qq", e2e_dpath("q.npy"));
    ok_run(&o, "put qq");
    tu_output_free(&o);
    o = CTLT(T, "distance", "knn", "--k", "7", e2e_dpath("q.npy"), e2e_dpath("base.npy"), "-o",
             e2e_dpath("d_file.npy"), "-i", e2e_dpath("i_file.npy"));
    ok_run(&o, "knn files");
    tu_output_free(&o);
    o = CTLT(T, "distance", "knn", "--k", "7", e2e_dpath("q.npy"), "@base", "-o",
             e2e_dpath("d_res.npy"), "-i", e2e_dpath("i_res.npy"));
    ok_run(&o, "knn @base");
    tu_output_free(&o);
    same_array("d_file.npy", "d_res.npy", "knn @base distances");
    same_array("i_file.npy", "i_res.npy", "knn @base indices");
    o = CTLT(T, "distance", "knn", "--k", "7", "@qq", "@base", "-o", e2e_dpath("d_both.npy"), "-i",
             e2e_dpath("i_both.npy"));
    ok_run(&o, "knn @qq @base");
    tu_output_free(&o);
    same_array("d_file.npy", "d_both.npy", "knn both resident");
    same_array("i_file.npy", "i_both.npy", "knn both resident, indices");
    o = CTLT(T, "distance", "pairwise", "--metric", "cosine", "@qq", e2e_dpath("base.npy"), "-o",
             e2e_dpath("p_res.npy"));
    ok_run(&o, "pairwise @qq");
    tu_output_free(&o);
    o = CTLT(T, "distance", "pairwise", "--metric", "cosine", e2e_dpath("q.npy"),
             e2e_dpath("base.npy"), "-o", e2e_dpath("p_file.npy"));
    ok_run(&o, "pairwise files");
    tu_output_free(&o);
    same_array("p_file.npy", "p_res.npy", "pairwise @qq");
    o = CTLT(T, "normalize", "--method", "zscore", "@base", "-o", e2e_dpath("n_res.npy"));
    ok_run(&o, "normalize @base");
    tu_output_free(&o);
    o = CTLT(T, "normalize", "--method", "zscore", e2e_dpath("base.npy"), "-o",
             e2e_dpath("n_file.npy"));
    ok_run(&o, "normalize file");
    tu_output_free(&o);
    same_array("n_file.npy", "n_res.npy", "normalize @base");
    /* --json names the resident input */
    o = CTLT(T, "--json", "normalize", "@qq", "-o", e2e_dpath("n2.npy"));
    ok_run(&o, "normalize --json");
    ck_assert_msg(strstr(o.out, "\"inputs\":[{\"path\":\"@qq\",\"resident\":\"qq\","
                                "\"shape\":[300,64],\"dtype\":\"float32\",\"bytes\":76800}"),
                  "%s", o.out);
    tu_output_free(&o);
}
END_TEST

START_TEST(at_outputs)
{
    const uint64_t rows = 23, cols = 7;
    double x[23 * 7];
    make_npy("x.npy", GPUQ_DT_F64, 2, rows, cols, -3, 8, x);
    tu_output o = CTL("normalize", "--method", "l2", e2e_dpath("x.npy"), "-o", "@unit");
    ok_run(&o, "normalize -o @unit");
    ck_assert_str_eq(o.out, "");
    tu_output_free(&o);
    ck_assert(!e2e_exists("@unit") && !e2e_exists(e2e_dpath("@unit")));
    e2e_no_temp_files();
    o = CTL("get", "unit", "-o", e2e_dpath("u.npy"));
    ok_run(&o, "get unit");
    tu_output_free(&o);
    o = CTL("normalize", "--method", "l2", e2e_dpath("x.npy"), "-o", e2e_dpath("u_file.npy"));
    ok_run(&o, "normalize file");
    tu_output_free(&o);
    same_array("u_file.npy", "u.npy", "kept normalize");
    /* against a double reference of our own */
    npy_array u;
    char err[512];
    ck_assert_msg(npy_read(e2e_dpath("u.npy"), &u, err, sizeof err) == 0, "%s", err);
    double ref[23 * 7];
    for (uint64_t i = 0; i < rows; i++) {
        double s = 0;
        for (uint64_t j = 0; j < cols; j++)
            s += x[i * cols + j] * x[i * cols + j];
        for (uint64_t j = 0; j < cols; j++)
            ref[i * cols + j] = x[i * cols + j] / sqrt(s);
    }
    size_t worst;
    double e = tu_elem_err_f64(u.data, ref, rows * cols, &worst);
    ck_assert_msg(e <= 0x1p-50, "u[%zu]: %.17g, reference %.17g", worst,
                  ((const double *)u.data)[worst], ref[worst]);
    npy_free(&u);

    /* knn: the indices kept, the distances written; then both kept */
    make_npy("q.npy", GPUQ_DT_F64, 2, 9, 7, -3, 8, NULL);
    o = CTL("distance", "knn", "--k", "4", e2e_dpath("q.npy"), e2e_dpath("x.npy"), "-o",
            e2e_dpath("d1.npy"), "-i", e2e_dpath("i1.npy"));
    ok_run(&o, "knn files");
    tu_output_free(&o);
    o = CTL("distance", "knn", "--k", "4", e2e_dpath("q.npy"), e2e_dpath("x.npy"), "-o",
            e2e_dpath("d2.npy"), "-i", "@idx");
    ok_run(&o, "knn -i @idx");
    tu_output_free(&o);
    same_array("d1.npy", "d2.npy", "knn -i @idx distances");
    o = CTL("get", "idx", "-o", e2e_dpath("i2.npy"));
    ok_run(&o, "get idx");
    tu_output_free(&o);
    same_array("i1.npy", "i2.npy", "kept indices");
    o = CTL("distance", "knn", "--k", "4", e2e_dpath("q.npy"), "@unit", "-o", "@dd", "-i", "@ii");
    ok_run(&o, "knn all kept");
    ck_assert_str_eq(o.out, "");
    tu_output_free(&o);
    o = CTL("ls");
    ok_run(&o, "ls");
    const char *rows_want[] = {"\ndd ", "\nidx ", "\nii ", "\nunit "};
    for (int k = 0; k < 4; k++)
        ck_assert_msg(strstr(o.out, rows_want[k]), "ls lacks %s: %s", rows_want[k] + 1, o.out);
    ck_assert_msg(strstr(strstr(o.out, "\nii "), "int64"), "%s", o.out);
    ck_assert_msg(strstr(strstr(o.out, "\ndd "), "float64"), "%s", o.out);
    tu_output_free(&o);
    /* get to another name copies it */
    o = CTL("get", "unit", "-o", "@unit2");
    ok_run(&o, "get -o @unit2");
    tu_output_free(&o);
    o = CTL("get", "unit2", "-o", e2e_dpath("u2.npy"));
    ok_run(&o, "get unit2");
    tu_output_free(&o);
    same_array("u.npy", "u2.npy", "get -o @unit2");
}
END_TEST

START_TEST(stdin_stdout_and_copies)
{
    make_npy("base.npy", GPUQ_DT_F64, 2, 5, 3, -1, 1, NULL);
    char sh[1024];
    snprintf(sh, sizeof sh, "'%s' --socket '%s' put s - < '%s'", GPUQCTL_PATH, e2e_d.socket,
             e2e_dpath("base.npy"));
    const char *put[] = {"/bin/sh", "-c", sh, NULL};
    ck_assert_int_eq(tu_run(put, NULL, NULL), 0);
    snprintf(sh, sizeof sh, "'%s' --socket '%s' get s -o - > '%s'", GPUQCTL_PATH, e2e_d.socket,
             e2e_dpath("s.npy"));
    const char *get[] = {"/bin/sh", "-c", sh, NULL};
    ck_assert_int_eq(tu_run(get, NULL, NULL), 0);
    same_array("base.npy", "s.npy", "stdin to stdout");
    /* access all; a copy of a resident array by put */
    tu_output o = CTL("put", "--access=all", "shared", e2e_dpath("base.npy"));
    ok_run(&o, "put --access=all");
    ck_assert_str_eq(o.out, "put shared: float64 (5, 3), 120 B, access all\n");
    tu_output_free(&o);
    o = CTL("put", "copy", "@shared");
    ok_run(&o, "put @shared");
    tu_output_free(&o);
    o = CTL("get", "copy", "-o", e2e_dpath("c.npy"));
    ok_run(&o, "get copy");
    tu_output_free(&o);
    same_array("base.npy", "c.npy", "put @shared");
    o = CTL("ls");
    ck_assert_msg(strstr(strstr(o.out, "\nshared "), " all "), "%s", o.out);
    tu_output_free(&o);
    /* put again replaces */
    make_npy("other.npy", GPUQ_DT_F32, 1, 4, 1, -1, 1, NULL);
    o = CTL("put", "copy", e2e_dpath("other.npy"));
    ok_run(&o, "put replaces");
    tu_output_free(&o);
    o = CTL("get", "copy", "-o", e2e_dpath("c2.npy"));
    ok_run(&o, "get replaced");
    tu_output_free(&o);
    same_array("other.npy", "c2.npy", "replaced");
}
END_TEST

START_TEST(errors)
{
    make_npy("x.npy", GPUQ_DT_F32, 2, 6, 8, -1, 1, NULL);
    make_npy("base.npy", GPUQ_DT_F32, 2, 20, 64, -1, 1, NULL);
    tu_output o = CTL("put", "base", e2e_dpath("base.npy"));
    ok_run(&o, "put");
    tu_output_free(&o);
    /* no such array: exit 1, not_found, nothing written */
    o = CTL("get", "missing", "-o", e2e_dpath("m.npy"));
    fails(&o, 1, "gpuqctl: not_found: no resident array 'missing'", "get missing");
    tu_output_free(&o);
    ck_assert(!e2e_exists(e2e_dpath("m.npy")));
    o = CTL("--json", "get", "missing", "-o", e2e_dpath("m.npy"));
    fails(&o, 1, "not_found", "get missing --json");
    tu_output_free(&o);
    o = CTL("rm", "missing");
    fails(&o, 1, "gpuqctl: not_found: ", "rm missing");
    tu_output_free(&o);
    o = CTL("distance", "knn", "--k", "1", e2e_dpath("x.npy"), "@missing", "-o", e2e_dpath("a.npy"),
            "-i", e2e_dpath("b.npy"));
    fails(&o, 1, "gpuqctl: not_found: no resident array 'missing'", "knn @missing");
    tu_output_free(&o);
    ck_assert(!e2e_exists(e2e_dpath("a.npy")) && !e2e_exists(e2e_dpath("b.npy")));
    e2e_no_temp_files();
    /* malformed names: usage errors that say why */
    o = CTL("put", "a/b", e2e_dpath("x.npy"));
    fails(&o, 2, "bad NAME 'a/b': the name contains \"/\"", "put a/b");
    tu_output_free(&o);
    o = CTL("normalize", e2e_dpath("x.npy"), "-o", "@");
    fails(&o, 2, "'@' names no resident array: the name is empty", "-o @");
    tu_output_free(&o);
    o = CTL("normalize", "@x\ty", "-o", e2e_dpath("n.npy"));
    fails(&o, 2, "names no resident array: the name contains a control character", "tab");
    ck_assert_msg(!strchr(o.err, '\t'), "the name echoed: %s", o.err);
    tu_output_free(&o);
    char longname[GPUQ_RES_NAME_MAX + 2];
    memset(longname, 'z', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    o = CTL("rm", longname);
    fails(&o, 2, "129 bytes", "rm of 129 bytes");
    tu_output_free(&o);
    o = CTL("distance", "knn", "--k", "1", e2e_dpath("x.npy"), "@base", "-o", "@same", "-i",
            "@same");
    fails(&o, 2, "both outputs would be kept as '@same'", "two outputs one name");
    tu_output_free(&o);
    o = CTL("put", "--access", "public", "p", e2e_dpath("x.npy"));
    fails(&o, 2, "unknown --access 'public' (private|all)", "--access public");
    tu_output_free(&o);
    o = CTL("get", "base");
    fails(&o, 2, "-o OUT.npy is required", "get without -o");
    tu_output_free(&o);
    /* no file */
    o = CTL("put", "p", e2e_dpath("nofile.npy"));
    fails(&o, 1, "gpuqctl: io: ", "put nofile");
    tu_output_free(&o);
    /* d = 8 against base's 64: gpuqd's bad_shape */
    o = CTL("distance", "pairwise", e2e_dpath("x.npy"), "@base", "-o", e2e_dpath("p.npy"));
    fails(&o, 1, "gpuqctl: bad_shape: ", "pairwise d mismatch");
    tu_output_free(&o);
    ck_assert(!e2e_exists(e2e_dpath("p.npy")));
    /* and none of it changed base */
    o = CTL("get", "base", "-o", e2e_dpath("back.npy"));
    ok_run(&o, "get base");
    tu_output_free(&o);
    same_array("base.npy", "back.npy", "base after the errors");
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_ctl_resident");
    TCase *tc = tcase_create("ctl_resident");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, put_ls_get_rm);
    tcase_add_test(tc, json_forms);
    tcase_add_loop_test(tc, at_inputs, 0, 3);
    tcase_add_test(tc, at_outputs);
    tcase_add_test(tc, stdin_stdout_and_copies);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
