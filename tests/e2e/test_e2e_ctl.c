/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_ctl.c - every gpuqctl form against a real gpuqd, checked against
 * numpy/scipy by tests/ref/ctl_check.py (which reports each failure), under
 * each --transport (auto, shm, socket); then the transports against each
 * other.
 *
 * Transports: every op form, with arrays small (auto: socket) and large
 * (>= GPUQ_SHM_MIN_BYTES, auto: shared memory), gives the same .npy bytes
 * by shm, socket and auto; the daemon's arena_open count says which went by
 * shared memory. Against a gpuqd without arenas (--session-arena 0), shm
 * exits 1 with one line saying so and the daemon serves on, while auto
 * falls back to the socket; with too small a session_arena, shm says
 * too_large and auto falls back. ctl_run_op (client/cli/ctl_xfer.c), which
 * reads .npy data straight into the staging arena, is driven directly too:
 * opened and read inputs, two outputs, a file that shrank after its header
 * was read.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl_xfer.h"
#include "e2e_util.h"
#include "npy.h"

/* ctl_check.py with gpuqctl, or with a wrapper that adds --transport T. */
static void check_forms(const char *transport)
{
    char ctl[320];
    snprintf(ctl, sizeof ctl, "%s", GPUQCTL_PATH);
    if (transport) {
        snprintf(ctl, sizeof ctl, "%s/gpuqctl-%s", e2e_d.dir, transport);
        char sh[1024];
        snprintf(sh, sizeof sh, "#!/bin/sh\nexec '%s' --transport %s \"$@\"\n", GPUQCTL_PATH,
                 transport);
        ck_assert_int_eq(tu_write_file(ctl, sh, strlen(sh)), 0);
        ck_assert_int_eq(chmod(ctl, 0755), 0);
    }
    char out[320];
    snprintf(out, sizeof out, "%s/ctl_check.log", e2e_d.dir);
    const char *argv[] = {
        GPUQ_PYTHON, GPUQ_TESTS_DIR "/ref/ctl_check.py", ctl, e2e_d.socket, e2e_d.dir, NULL};
    int rc = tu_run(argv, out, out);
    size_t len = 0;
    char *log = tu_read_file(out, &len);
    ck_assert_msg(rc == 0, "ctl_check.py (transport %s) failed (%d):\n%.*s",
                  transport ? transport : "default", rc, (int)len, log ? log : "");
    free(log);
}

/* The daemon's count of arena_open requests so far. */
static long long arena_opens(void)
{
    char js[16384];
    e2e_status(js, sizeof js);
    long long n = e2e_json_int(js, "arena_open");
    ck_assert_int_ge(n, 0);
    return n;
}

START_TEST(every_form)
{
    check_forms(NULL);
}
END_TEST

START_TEST(every_form_shm)
{
    long long before = arena_opens();
    check_forms("shm");
    /* every op run staged its arrays: one arena per gpuqctl that moved arrays */
    ck_assert_int_ge(arena_opens() - before, 50);
}
END_TEST

START_TEST(every_form_socket)
{
    long long before = arena_opens();
    check_forms("socket");
    ck_assert_int_eq(arena_opens(), before);
}
END_TEST

/* ---- the transports against each other ---- */

/* n values uniform in [lo, hi) as dt into name (a 1-D or 2-D .npy). */
static void make_npy(const char *name, gpuq_dtype dt, int ndim, uint64_t r, uint64_t cols,
                     double lo, double hi)
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
    const uint64_t shape[2] = {r, cols};
    char err[512];
    ck_assert_msg(npy_write(e2e_dpath(name), dt, ndim, shape, data, err, sizeof err) == 0, "%s",
                  err);
    free(x);
    free(f);
}

/* Points n x 2 (lat, lon) as dt into name. */
static void make_points(const char *name, gpuq_dtype dt, uint64_t n)
{
    double *x = malloc(n * 2 * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_rand_fill_f64(x, n * 2, -1, 1);
    for (uint64_t i = 0; i < n; i++)
        x[2 * i] *= 90, x[2 * i + 1] *= 180;
    void *data = x;
    float *f = NULL;
    if (dt == GPUQ_DT_F32) {
        f = malloc(n * 2 * sizeof *f);
        ck_assert_ptr_nonnull(f);
        for (uint64_t i = 0; i < 2 * n; i++)
            f[i] = (float)x[i];
        data = f;
    }
    const uint64_t shape[2] = {n, 2};
    char err[512];
    ck_assert_msg(npy_write(e2e_dpath(name), dt, 2, shape, data, err, sizeof err) == 0, "%s", err);
    free(x);
    free(f);
}

/* gpuqctl --socket S <pre...> <args...>, stderr into *err_text (malloc'd,
 * may be NULL); returns the exit status. */
static int ctl(const char *const *pre, const char *const *args, char **err_text)
{
    const char *argv[40];
    int n = 0;
    argv[n++] = GPUQCTL_PATH;
    argv[n++] = "--socket";
    argv[n++] = e2e_d.socket;
    for (int i = 0; pre && pre[i]; i++)
        argv[n++] = pre[i];
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    ck_assert_int_lt(n, 40);
    const char *errp = e2e_dpath("ctl.err");
    int rc = tu_run(argv, NULL, errp);
    size_t len;
    char *e = tu_read_file(errp, &len);
    if (err_text)
        *err_text = e;
    else
        free(e);
    return rc;
}

/* The bytes of two files are the same. */
static void same_file(const char *a, const char *b, const char *what)
{
    size_t la = 0, lb = 0;
    char *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
    ck_assert_msg(x && y, "%s: cannot read %s or %s", what, a, b);
    ck_assert_msg(la == lb && la > 128 && memcmp(x, y, la) == 0, "%s: %s and %s differ", what, a,
                  b);
    free(x);
    free(y);
}

/* One op form: args with "OUT" and "IDX" standing for the output paths. */
typedef struct form {
    const char *name;
    const char *args[16];
    bool large; /* arrays of GPUQ_SHM_MIN_BYTES or more: auto goes by shm */
} form;

static const form forms[] = {
    {"normalize 1-D small", {"normalize", "--method", "l2", "n1s.npy", "-o", "OUT", NULL}, false},
    {"normalize 1-D large", {"normalize", "--method", "l2", "n1l.npy", "-o", "OUT", NULL}, true},
    {"normalize rows", {"normalize", "--method", "zscore", "n2l.npy", "-o", "OUT", NULL}, true},
    {"normalize flat",
     {"normalize", "--flat", "--method", "minmax", "n2l.npy", "-o", "OUT", NULL},
     true},
    {"haversine to",
     {"distance", "haversine", "--to", "30,101", "pl.npy", "-o", "OUT", NULL},
     true},
    {"haversine pair", {"distance", "haversine", "pl.npy", "ql.npy", "-o", "OUT", NULL}, true},
    {"haversine pair small",
     {"distance", "haversine", "ps.npy", "qs.npy", "-o", "OUT", NULL},
     false},
    {"grid large",
     {"distance", "grid", "--lat", "-80:80:600", "--lon", "-170:170:500", "--to", "30,101", "-o",
      "OUT", NULL},
     true},
    {"grid small f32",
     {"distance", "grid", "--lat", "-80:80:30", "--lon", "-170:170:20", "--to", "30,101", "--dtype",
      "f32", "-o", "OUT", NULL},
     false},
    {"pairwise",
     {"distance", "pairwise", "--metric", "cosine", "xl.npy", "yl.npy", "-o", "OUT", NULL},
     true},
    {"knn",
     {"distance", "knn", "--k", "5", "--metric", "manhattan", "kx.npy", "ky.npy", "-o", "OUT", "-i",
      "IDX", NULL},
     true},
};

static void make_inputs(void)
{
    make_npy("n1s.npy", GPUQ_DT_F64, 1, 1000, 1, 0.5, 10);
    make_npy("n1l.npy", GPUQ_DT_F32, 1, 300001, 1, -3, 10); /* 1.2 MB in, 1.2 MB out */
    make_npy("n2l.npy", GPUQ_DT_F64, 2, 701, 301, -3, 10);  /* 1.7 MB each */
    make_points("pl.npy", GPUQ_DT_F64, 100003);             /* 1.6 MB + 0.8 MB */
    make_points("ql.npy", GPUQ_DT_F64, 100003);             /* 1.6 MB */
    make_points("ps.npy", GPUQ_DT_F32, 777);
    make_points("qs.npy", GPUQ_DT_F32, 777);
    make_npy("xl.npy", GPUQ_DT_F32, 2, 301, 16, -1, 1); /* out 301 x 901 f32: 1.08 MB */
    make_npy("yl.npy", GPUQ_DT_F32, 2, 901, 16, -1, 1);
    make_npy("kx.npy", GPUQ_DT_F32, 2, 201, 16, -1, 1);   /* m * k odd: indices 4 bytes off */
    make_npy("ky.npy", GPUQ_DT_F32, 2, 20000, 16, -1, 1); /* 1.28 MB */
}

/* Run form f with the transport options pre; outputs OUT-<tag>, IDX-<tag>. */
static int run_form(const form *f, const char *const *pre, const char *tag, char **err)
{
    const char *args[16];
    int n = 0;
    for (; f->args[n]; n++) {
        const char *a = f->args[n];
        char name[64];
        if (!strcmp(a, "OUT") || !strcmp(a, "IDX")) {
            snprintf(name, sizeof name, "%s-%s.npy", a, tag);
            a = e2e_dpath(name);
        } else if (strstr(a, ".npy")) {
            a = e2e_dpath(a);
        }
        args[n] = a;
    }
    args[n] = NULL;
    return ctl(pre, args, err);
}

START_TEST(transports_agree)
{
    make_inputs();
    /* each spelling once: global, global with '=', after the command */
    const char *shm[] = {"--transport=shm", NULL}, *sock[] = {"--transport", "socket", NULL};
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        const form *f = &forms[k];
        char *err = NULL;
        long long n0 = arena_opens();
        ck_assert_msg(run_form(f, sock, "socket", &err) == 0, "%s socket: %s", f->name, err);
        free(err);
        long long n1 = arena_opens();
        ck_assert_msg(run_form(f, shm, "shm", &err) == 0, "%s shm: %s", f->name, err);
        free(err);
        long long n2 = arena_opens();
        ck_assert_msg(run_form(f, NULL, "auto", &err) == 0, "%s auto: %s", f->name, err);
        free(err);
        long long n3 = arena_opens();
        ck_assert_msg(n1 == n0, "%s: socket opened %lld arenas", f->name, n1 - n0);
        ck_assert_msg(n2 == n1 + 1, "%s: shm opened %lld arenas, want 1", f->name, n2 - n1);
        ck_assert_msg(n3 == n2 + f->large, "%s: auto opened %lld arenas, want %d", f->name, n3 - n2,
                      f->large);
        same_file(e2e_dpath("OUT-socket.npy"), e2e_dpath("OUT-shm.npy"), f->name);
        same_file(e2e_dpath("OUT-socket.npy"), e2e_dpath("OUT-auto.npy"), f->name);
        if (!strcmp(f->name, "knn")) {
            same_file(e2e_dpath("IDX-socket.npy"), e2e_dpath("IDX-shm.npy"), "knn indices");
            same_file(e2e_dpath("IDX-socket.npy"), e2e_dpath("IDX-auto.npy"), "knn indices");
        }
    }
    /* --transport after the command, and its bad forms */
    const char *after[] = {
        "normalize", "--transport", "shm", e2e_dpath("n1s.npy"), "-o", e2e_dpath("OUT-after.npy"),
        NULL};
    long long n0 = arena_opens();
    ck_assert_int_eq(ctl(NULL, after, NULL), 0);
    ck_assert_int_eq(arena_opens(), n0 + 1);
    const char *bad[] = {"--transport=carrier-pigeon", "ping", NULL};
    char *err = NULL;
    ck_assert_int_eq(ctl(NULL, bad, &err), 2);
    ck_assert_msg(strstr(err, "bad transport 'carrier-pigeon' (auto|socket|shm)"), "%s", err);
    free(err);
    const char *none[] = {"ping", "--transport", NULL};
    ck_assert_int_eq(ctl(NULL, none, NULL), 2);
}
END_TEST

/* One line on stderr containing want. */
static void one_line(const char *err, const char *want)
{
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, want), "stderr lacks \"%s\": %s", want, err);
    const char *nl = strchr(err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: %s", err);
}

START_TEST(shm_without_arenas)
{
    const char *off[] = {"--session-arena", "0", NULL};
    e2e_restart(off);
    make_inputs();
    const char *shm[] = {"--transport", "shm", NULL}, *sock[] = {"--transport=socket", NULL};
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k += 3) {
        const form *f = &forms[k];
        char *err = NULL;
        ck_assert_msg(run_form(f, shm, "shm", &err) == 1, "%s: shm without arenas", f->name);
        one_line(err, "gpuqctl: bad_argument: transport shm: gpuqd offers this session no "
                      "shared-memory arenas");
        free(err);
        e2e_assert_serves();
        ck_assert_msg(run_form(f, sock, "socket", &err) == 0, "%s socket: %s", f->name, err);
        free(err);
        ck_assert_msg(run_form(f, NULL, "auto", &err) == 0, "%s auto: %s", f->name, err);
        free(err);
        same_file(e2e_dpath("OUT-socket.npy"), e2e_dpath("OUT-auto.npy"), f->name);
    }
    ck_assert_int_eq(arena_opens(), 0);
    /* commands without arrays: shm is still refused, the others serve */
    const char *ping[] = {"ping", NULL};
    char *err = NULL;
    ck_assert_int_eq(ctl(shm, ping, &err), 1);
    one_line(err, "offers this session no shared-memory arenas");
    free(err);
    ck_assert_int_eq(ctl(NULL, ping, NULL), 0);
}
END_TEST

START_TEST(shm_without_room)
{
    const char *small[] = {"--session-arena", "1M", NULL};
    e2e_restart(small);
    make_inputs();
    const form *f = &forms[2]; /* normalize rows: 3.4 MB of arrays */
    const char *shm[] = {"--transport", "shm", NULL};
    char *err = NULL;
    ck_assert_int_eq(run_form(f, shm, "shm", &err), 1);
    one_line(err, "gpuqctl: too_large: shm transport: the arrays need a staging arena of");
    free(err);
    e2e_assert_serves();
    ck_assert_msg(run_form(f, NULL, "auto", &err) == 0, "auto: %s", err);
    free(err);
    const char *sock[] = {"--transport", "socket", NULL};
    ck_assert_int_eq(run_form(f, sock, "socket", NULL), 0);
    same_file(e2e_dpath("OUT-socket.npy"), e2e_dpath("OUT-auto.npy"), "auto without room");
    ck_assert_int_eq(arena_opens(), 0); /* over session_arena: not even asked */
    /* small arrays fit the 1 MiB: shm works */
    ck_assert_int_eq(run_form(&forms[0], shm, "shm", NULL), 0);
    ck_assert_int_eq(arena_opens(), 1);
}
END_TEST

/* ---- ctl_run_op, driven directly ---- */

static int run_op(int transport, gpuq_request *req, const npy_array *a, const npy_array *b,
                  const ctl_out *outs, unsigned nout)
{
    ctl_ctx ctx = {.socket = e2e_d.socket,
                   .json = false,
                   .priority = GPUQ_PRIO_NORMAL,
                   .transport = transport,
                   .entry = NULL};
    return ctl_run_op(&ctx, req, a, b, outs, nout, false);
}

static void open_npy(const char *name, npy_array *a, bool whole)
{
    char err[512];
    int rc = whole ? npy_read(e2e_dpath(name), a, err, sizeof err)
                   : npy_open(e2e_dpath(name), a, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert(whole ? a->data != NULL && !a->open : a->data == NULL && a->open);
}

START_TEST(xfer_direct)
{
    make_inputs();
    static const char *const tags[] = {"auto", "socket", "shm"};
    /* normalize of a large opened input, and of a small read one */
    for (int big = 0; big < 2; big++) {
        for (int t = 0; t < 3; t++) {
            npy_array a;
            open_npy(big ? "n2l.npy" : "n1s.npy", &a, !big);
            gpuq_request r;
            gpuq_request_init(&r);
            r.op = GPUQ_OP_NORMALIZE;
            ck_assert_int_eq(gpuq_request_set_enum(&r, "method", "l1"), 0);
            r.dtype = a.dtype;
            r.ndim_a = (uint32_t)a.ndim;
            r.shape_a[0] = a.shape[0];
            r.shape_a[1] = a.ndim == 2 ? a.shape[1] : 0;
            char name[64];
            snprintf(name, sizeof name, "x-%s.npy", tags[t]);
            ctl_out o = {a.dtype, a.ndim, {a.shape[0], a.shape[1]}, e2e_dpath(name)};
            long long n0 = arena_opens();
            ck_assert_int_eq(run_op(t, &r, &a, NULL, &o, 1), 0);
            ck_assert_int_eq(r.nin_ref + r.nout_ref, 0); /* the request as it came */
            ck_assert_int_eq(arena_opens() - n0, t == GPUQ_TRANSPORT_SHM || (t == 0 && big));
            npy_free(&a);
        }
        same_file(e2e_dpath("x-socket.npy"), e2e_dpath("x-shm.npy"), "xfer normalize shm");
        same_file(e2e_dpath("x-socket.npy"), e2e_dpath("x-auto.npy"), "xfer normalize auto");
    }
    /* knn: two inputs, two outputs (indices 4 bytes past an 8-byte boundary
     * when packed: here each on its own 64 bytes) */
    for (int t = 0; t < 3; t++) {
        npy_array x, y;
        open_npy("kx.npy", &x, false);
        open_npy("ky.npy", &y, t == 1);
        gpuq_request r;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_KNN;
        ck_assert_int_eq(gpuq_request_set_uint(&r, "k", 5), 0);
        ck_assert_int_eq(gpuq_request_set_enum(&r, "metric", "sqeuclidean"), 0);
        r.dtype = x.dtype;
        r.ndim_a = r.ndim_b = 2;
        r.shape_a[0] = x.shape[0], r.shape_a[1] = x.shape[1];
        r.shape_b[0] = y.shape[0], r.shape_b[1] = y.shape[1];
        char d[64], i[64];
        snprintf(d, sizeof d, "kd-%s.npy", tags[t]);
        snprintf(i, sizeof i, "ki-%s.npy", tags[t]);
        ctl_out o[2] = {{x.dtype, 2, {x.shape[0], 5}, e2e_dpath(d)},
                        {GPUQ_DT_I64, 2, {x.shape[0], 5}, e2e_dpath(i)}};
        ck_assert_int_eq(run_op(t, &r, &x, &y, o, 2), 0);
        npy_free(&x);
        npy_free(&y);
    }
    same_file(e2e_dpath("kd-socket.npy"), e2e_dpath("kd-shm.npy"), "xfer knn distances");
    same_file(e2e_dpath("ki-socket.npy"), e2e_dpath("ki-shm.npy"), "xfer knn indices");
    same_file(e2e_dpath("kd-socket.npy"), e2e_dpath("kd-auto.npy"), "xfer knn distances auto");
    same_file(e2e_dpath("ki-socket.npy"), e2e_dpath("ki-auto.npy"), "xfer knn indices auto");
    /* a file that shrank between its header and its data: an error, no hang */
    for (int t = 1; t < 3; t++) {
        npy_array a;
        open_npy("n2l.npy", &a, false);
        ck_assert_int_eq(truncate(e2e_dpath("n2l.npy"), (off_t)(a.data_off + a.nbytes / 2)), 0);
        gpuq_request r;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_NORMALIZE;
        r.dtype = a.dtype;
        r.ndim_a = 2;
        r.shape_a[0] = a.shape[0], r.shape_a[1] = a.shape[1];
        ctl_out o = {a.dtype, 2, {a.shape[0], a.shape[1]}, e2e_dpath("shrunk.npy")};
        ck_assert_int_eq(run_op(t, &r, &a, NULL, &o, 1), 1);
        npy_free(&a);
        make_npy("n2l.npy", GPUQ_DT_F64, 2, 701, 301, -3, 10);
    }
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_ctl");
    TCase *tc = tcase_create("ctl");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_form);
    tcase_add_test(tc, every_form_shm);
    tcase_add_test(tc, every_form_socket);
    tcase_add_test(tc, transports_agree);
    tcase_add_test(tc, shm_without_arenas);
    tcase_add_test(tc, shm_without_room);
    tcase_add_test(tc, xfer_direct);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
