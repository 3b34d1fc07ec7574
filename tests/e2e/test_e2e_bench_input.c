/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_bench_input.c - gpuqctl bench on the user's own arrays
 * (--input, --input-b and the op's options), over a range of concurrency
 * (--concurrency-range) and as CSV (--csv), against a real gpuqd.
 *
 * --input: normalize of the user's .npy (--method l2), knn of two files
 * (--k, --metric), pairwise of one against itself (--metric cosine, in
 * arenas): requests counted, no error, the shapes the files' echoed.
 * Arrays the op refuses (knn's two files of other widths, dtypes that
 * differ) and data it refuses (a zero row for l2: gpuqd's zero_norm, known
 * only from its reply) are one error line each, exit 1, nothing on stdout,
 * and the daemon still serves. --concurrency-range 1:3:1 --csv: the header
 * and three rows, concurrency 1, 2, 3, numbers sane (requests > 0, errors
 * 0, p50 <= p90 <= p99 <= max, bytes/s the request's bytes times req/s);
 * with --depth 2 the concurrency is clients x 2; --json an object a level;
 * the text a row a level in human units. Bad ranges and options that
 * exclude or need each other are usage errors (2) naming the option.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "npy.h"

typedef tu_output run_out;
#define run_free tu_output_free

static run_out bench_argv(const char *const *args)
{
    const char *pre[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, NULL};
    return tu_capture(pre, args, e2e_d.dir, "bench");
}

#define BENCH(...) bench_argv((const char *const[]){"bench", __VA_ARGS__, NULL})

/* rows x cols of dt, values from f(i, j), to dir/name; returns its path. */
static const char *save(const char *name, gpuq_dtype dt, int ndim, uint64_t rows, uint64_t cols,
                        double (*f)(uint64_t, uint64_t))
{
    uint64_t shape[2] = {rows, cols}, n = rows * cols;
    double *x = malloc(n * sizeof *x);
    float *y = malloc(n * sizeof *y);
    ck_assert(x && y);
    for (uint64_t i = 0; i < rows; i++)
        for (uint64_t j = 0; j < cols; j++) {
            x[i * cols + j] = f(i, j);
            y[i * cols + j] = (float)f(i, j);
        }
    char err[256];
    const char *p = e2e_dpath(name);
    ck_assert_msg(npy_write(p, dt, ndim, shape, dt == GPUQ_DT_F32 ? (void *)y : (void *)x, err,
                            sizeof err) == 0,
                  "%s", err);
    free(x);
    free(y);
    return p;
}

static double wave(uint64_t i, uint64_t j)
{
    return 1.0 + sin((double)(i * 7 + j * 3)) * 0.9; /* positive, never 0 */
}

static double with_zero_row(uint64_t i, uint64_t j)
{
    return i == 2 ? 0.0 : wave(i, j);
}

/* The number after "key": in js (no nesting needed: bench's keys are unique). */
static double jnum(const char *js, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(js, k);
    ck_assert_msg(p, "no %s in %s", key, js);
    return strtod(p + strlen(k), NULL);
}

static void assert_clean_json(run_out r)
{
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(jnum(r.out, "requests") > 0 && jnum(r.out, "errors") == 0, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"first_error\":null"), "%s", r.out);
}

/* One line on stderr, holding want; nothing on stdout. */
static void assert_one_error(run_out r, int rc, const char *want)
{
    ck_assert_msg(r.rc == rc, "exit %d, want %d: %s", r.rc, rc, r.err);
    ck_assert_msg(r.out[0] == '\0', "stdout: %s", r.out);
    ck_assert_msg(strstr(r.err, want), "no '%s' in: %s", want, r.err);
    ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "more than one line: %s",
                  r.err);
}

START_TEST(normalize_input)
{
    const char *x = save("x.npy", GPUQ_DT_F64, 2, 8, 100, wave);
    run_out r = BENCH("--json", "--input", x, "--method", "l2", "--clients", "2", "--depth", "2",
                      "--duration", "0.3", "--warmup", "0");
    assert_clean_json(r);
    ck_assert_msg(strstr(r.out, "\"op\":\"normalize\",\"size\":8,\"dtype\":\"f64\""), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"input_b\":null") && strstr(r.out, "x.npy\""), "%s", r.out);
    /* request bytes: 8 x 100 f64 in and out */
    double b = jnum(r.out, "mb_s") * 1e6 / jnum(r.out, "req_s");
    ck_assert_msg(fabs(b - 12800) < 20, "%g bytes a request: %s", b, r.out);
    run_free(&r);
    /* the text names the file, its shape and the method */
    r = BENCH("--input", x, "--method", "l2", "--duration", "0.2", "--warmup", "0");
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "op          normalize, ") && strstr(r.out, "x.npy [8, 100] f64") &&
                      strstr(r.out, ", method l2\n") &&
                      strstr(r.out, "\nduration    200 ms (no warm-up)\n"),
                  "%s", r.out);
    run_free(&r);
}
END_TEST

START_TEST(knn_two_files)
{
    const char *x = save("q.npy", GPUQ_DT_F32, 2, 20, 4, wave);
    const char *y = save("db.npy", GPUQ_DT_F32, 2, 300, 4, wave);
    run_out r = BENCH("--json", "--op", "knn", "--input", x, "--input-b", y, "--k", "3", "--metric",
                      "cityblock", "--depth", "3", "--duration", "0.3", "--warmup", "0");
    assert_clean_json(r);
    ck_assert_msg(jnum(r.out, "size") == 20 && jnum(r.out, "dim") == 4, "%s", r.out);
    /* in: 20x4 + 300x4 f32; out: 20x3 f32 distances and int64 indices */
    double b = jnum(r.out, "mb_s") * 1e6 / jnum(r.out, "req_s");
    ck_assert_msg(fabs(b - (320 * 4 * 4 + 60 * 4 + 60 * 8)) < 10, "%g: %s", b, r.out);
    run_free(&r);
    /* minkowski with --p, X against itself, k defaulting to min(10, rows) */
    r = BENCH("--op", "knn", "--input", x, "--metric", "minkowski", "--p", "3", "--duration", "0.2",
              "--warmup", "0");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(strstr(r.out, "q.npy [20, 4] f32, metric minkowski, k 10") &&
                      strstr(r.out, "\nerrors      0\n"),
                  "%s", r.out);
    run_free(&r);
    /* a p minkowski refuses: gpuqd's answer to the first request, once */
    r = BENCH("--op", "knn", "--input", x, "--metric", "minkowski", "--p", "0", "--duration",
              "0.2");
    assert_one_error(r, 1, "gpuqctl: bad_argument: --input ");
    ck_assert_msg(strstr(r.err, "q.npy: p=0: minkowski needs p"), "%s", r.err);
    run_free(&r);
    e2e_assert_serves();
}
END_TEST

START_TEST(pairwise_metric_shm)
{
    const char *x = save("p.npy", GPUQ_DT_F32, 2, 64, 16, wave);
    run_out r = BENCH("--json", "--transport", "shm", "--op", "pairwise", "--input", x, "--metric",
                      "cosine", "--clients", "2", "--duration", "0.3", "--warmup", "0");
    assert_clean_json(r);
    ck_assert_msg(strstr(r.out, "\"transport\":\"shm\""), "%s", r.out);
    run_free(&r);
}
END_TEST

/* Arrays or data the op refuses: the error once, exit 1. */
START_TEST(refused_once)
{
    const char *x = save("x4.npy", GPUQ_DT_F32, 2, 5, 4, wave);
    const char *y = save("y3.npy", GPUQ_DT_F32, 2, 10, 3, wave);
    run_out r = BENCH("--op", "knn", "--input", x, "--input-b", y, "--k", "2", "--duration", "0.3");
    assert_one_error(r, 1, "gpuqctl: bad_shape: --input ");
    ck_assert_msg(strstr(r.err, "x4.npy (x) and --input-b ") &&
                      strstr(r.err, "y3.npy (y): y has d=3, x has d=4\n"),
                  "%s", r.err);
    run_free(&r);
    const char *y64 = save("y64.npy", GPUQ_DT_F64, 2, 10, 4, wave);
    r = BENCH("--op", "pairwise", "--input", x, "--input-b", y64, "--duration", "0.3");
    assert_one_error(r, 1, "gpuqctl: bad_dtype: ");
    ck_assert_msg(strstr(r.err, "x4.npy (x) is f32, --input-b ") &&
                      strstr(r.err, "y64.npy (y) is f64"),
                  "%s", r.err);
    run_free(&r);
    /* a zero row: only gpuqd knows (its reply to the first request) */
    const char *z = save("z.npy", GPUQ_DT_F64, 2, 4, 6, with_zero_row);
    r = BENCH("--input", z, "--method", "l2", "--clients", "4", "--depth", "4", "--duration",
              "0.3");
    assert_one_error(r, 1, "gpuqctl: zero_norm: ");
    ck_assert_msg(strstr(r.err, "(the first request; nothing was measured)"), "%s", r.err);
    run_free(&r);
    r = BENCH("--input", e2e_dpath("missing.npy"), "--duration", "0.3");
    assert_one_error(r, 1, "missing.npy");
    run_free(&r);
    e2e_assert_serves();
}
END_TEST

/* The CSV's fields of row (0-based, after the header) into v[11]. */
static void csv_row(const char *csv, int row, double *v)
{
    const char *p = strchr(csv, '\n');
    for (int k = 0; k < row && p; k++)
        p = strchr(p + 1, '\n');
    ck_assert_msg(p && p[1], "no row %d in:\n%s", row, csv);
    p++;
    for (int k = 0; k < 11; k++) {
        char *end;
        v[k] = strtod(p, &end);
        ck_assert_msg(end != p && *end == (k < 10 ? ',' : '\n'), "row %d field %d in:\n%s", row, k,
                      csv);
        p = end + 1;
    }
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

START_TEST(range_csv)
{
    run_out r =
        BENCH("--concurrency-range", "1:3:1", "--csv", "--duration", "0.25", "--warmup", "0.05");
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    static const char header[] = "concurrency,clients,depth,requests,req_s,p50_us,p90_us,"
                                 "p99_us,max_us,errors,bytes_s\n";
    ck_assert_msg(strncmp(r.out, header, strlen(header)) == 0, "%s", r.out);
    ck_assert_msg(count_lines(r.out) == 4, "%s", r.out);
    for (int k = 0; k < 3; k++) {
        double v[11];
        csv_row(r.out, k, v);
        ck_assert_msg(v[0] == k + 1 && v[1] == k + 1 && v[2] == 1, "row %d:\n%s", k, r.out);
        ck_assert_msg(v[3] > 0 && v[4] > 0 && v[9] == 0, "row %d:\n%s", k, r.out);
        ck_assert_msg(fabs(v[4] - v[3] / 0.25) < 0.01 * v[4] + 1, "row %d req/s:\n%s", k, r.out);
        ck_assert_msg(v[5] > 0 && v[5] <= v[6] && v[6] <= v[7] && v[7] <= v[8] && v[8] < 5e6,
                      "row %d latencies:\n%s", k, r.out);
        /* normalize of 1024 f32: 4096 bytes in, 4096 out */
        ck_assert_msg(fabs(v[10] - v[4] * 8192) < 0.01 * v[10] + 10, "row %d bytes/s:\n%s", k,
                      r.out);
    }
    run_free(&r);
    /* --depth 2: concurrency is clients x depth; with --input too */
    const char *x = save("c.npy", GPUQ_DT_F32, 1, 500, 1, wave);
    r = BENCH("--input", x, "--concurrency-range", "1:3:2", "--depth", "2", "--csv", "--duration",
              "0.2", "--warmup", "0");
    ck_assert_msg(r.rc == 0 && count_lines(r.out) == 3, "exit %d: %s%s", r.rc, r.out, r.err);
    double v[11];
    csv_row(r.out, 0, v);
    ck_assert_msg(v[0] == 2 && v[1] == 1 && v[2] == 2 && v[3] > 0 && v[9] == 0, "%s", r.out);
    csv_row(r.out, 1, v);
    ck_assert_msg(v[0] == 6 && v[1] == 3 && v[2] == 2 && v[3] > 0 && v[9] == 0, "%s", r.out);
    run_free(&r);
    /* one run: the header and one row */
    r = BENCH("--csv", "--clients", "2", "--duration", "0.2", "--warmup", "0");
    ck_assert_msg(r.rc == 0 && count_lines(r.out) == 2, "%s", r.out);
    csv_row(r.out, 0, v);
    ck_assert_msg(v[0] == 2 && v[1] == 2 && v[3] > 0, "%s", r.out);
    run_free(&r);
}
END_TEST

START_TEST(range_json_and_text)
{
    run_out r =
        BENCH("--json", "--concurrency-range", "1:2:1", "--duration", "0.2", "--warmup", "0");
    ck_assert_msg(r.rc == 0 && count_lines(r.out) == 2, "exit %d: %s%s", r.rc, r.out, r.err);
    const char *second = strchr(r.out, '\n') + 1;
    ck_assert_msg(jnum(r.out, "concurrency") == 1 && jnum(r.out, "clients") == 1, "%s", r.out);
    ck_assert_msg(jnum(second, "concurrency") == 2 && jnum(second, "requests") > 0, "%s", r.out);
    run_free(&r);
    r = BENCH("--concurrency-range", "1:2:1", "--duration", "0.2", "--warmup", "0.1");
    ck_assert_msg(r.rc == 0, "%s", r.err);
    static const char *const must[] = {
        "clients     1 to 2, step 1, x depth 1 (a level each)\n",
        "duration    200 ms a level (after 100 ms of warm-up each)\n",
        ("concurrency clients depth  requests    throughput     bytes/s       p50       p90       "
         "p99       max errors\n"),
        " req/s ",
        "B/s ",
        "s      0\n"};
    for (size_t k = 0; k < sizeof must / sizeof must[0]; k++)
        ck_assert_msg(strstr(r.out, must[k]), "no '%s' in:\n%s", must[k], r.out);
    ck_assert_msg(strstr(r.out, "\n          1       1     1 ") &&
                      strstr(r.out, "\n          2       2     1 "),
                  "%s", r.out);
    run_free(&r);
}
END_TEST

static const struct {
    const char *args[6];
    const char *want;
} misuses[] = {
    {{"--concurrency-range", "5:1:1"}, "bad --concurrency-range '5:1:1'"},
    {{"--concurrency-range", "1:4:0"}, "bad --concurrency-range '1:4:0'"},
    {{"--concurrency-range", "1:4:-1"}, "bad --concurrency-range '1:4:-1'"},
    {{"--concurrency-range", "1:4:1:2"}, "bad --concurrency-range '1:4:1:2'"},
    {{"--concurrency-range", "1::1"}, "bad --concurrency-range '1::1'"},
    {{"--concurrency-range", "a:b:c"}, "bad --concurrency-range 'a:b:c'"},
    {{"--concurrency-range", "1:3"}, "bad --concurrency-range '1:3'"},
    {{"--concurrency-range", "0:3:1"}, "bad --concurrency-range '0:3:1'"},
    {{"--concurrency-range", "1:2000:1"}, "bad --concurrency-range '1:2000:1'"},
    {{"--concurrency-range", "1:3:1", "--clients", "2"}, "--concurrency-range sets the clients"},
    {{"--concurrency-range", "1:3:1", "--bulk", "1"}, "--concurrency-range: no --bulk"},
    {{"--csv", "--json"}, "--csv and --json"},
    {{"--metric", "cosine"}, "--metric needs --input"},
    {{"--k", "3", "--op", "knn"}, "--k needs --input"},
    {{"--input-b", "y.npy"}, "--input-b needs --input"},
    {{"--input", "x.npy", "--size", "10"}, "--size: with --input the shapes"},
    {{"--input", "x.npy", "--dtype", "f64"}, "--dtype: with --input"},
    {{"--input", "x.npy", "--op", "grid"}, "--op grid takes no input arrays"},
    {{"--input", "x.npy", "--op", "ping"}, "--op ping sends no arrays"},
    {{"--input", "x.npy", "--metric", "cosine"}, "--metric: --op normalize takes no \"metric\""},
    {{"--input", "x.npy", "--op", "pairwise", "--k", "2"}, "--k: --op pairwise takes no \"k\""},
    {{"--input", "x.npy", "--op", "knn", "--metric", "cosin"}, "did you mean cosine?"},
    {{"--input", "x.npy", "--method", "max"}, "bad --method 'max'"},
    {{"--input", "x.npy", "--op", "knn", "--k", "0"}, "bad --k '0'"},
    {{"--input", "x.npy", "--op", "knn", "--k", "two"}, "bad --k 'two'"},
    {{"--input", "x.npy", "--op", "pairwise", "--p", "x"}, "bad --p 'x'"},
    {{"--input", "x.npy", "--p", "3"}, "--p: --op normalize takes no \"p\""},
    {{"--p", "3"}, "--p needs --input"},
    {{"--input", "x.npy", "--op", "haversine", "--to", "30"}, "--to"},
};

START_TEST(usage_errors)
{
    const char *argv[10] = {"bench"};
    int n = 1;
    for (int k = 0; k < 6 && misuses[_i].args[k]; k++)
        argv[n++] = misuses[_i].args[k];
    argv[n] = NULL;
    run_out r = bench_argv(argv);
    ck_assert_msg(r.rc == 2, "exit %d: %s", r.rc, r.err);
    ck_assert_msg(r.out[0] == '\0', "stdout: %s", r.out);
    ck_assert_msg(strstr(r.err, misuses[_i].want), "no '%s' in: %s", misuses[_i].want, r.err);
    run_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_bench_input");
    TCase *tc = tcase_create("bench_input");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, normalize_input);
    tcase_add_test(tc, knn_two_files);
    tcase_add_test(tc, pairwise_metric_shm);
    tcase_add_test(tc, refused_once);
    tcase_add_test(tc, range_csv);
    tcase_add_test(tc, range_json_and_text);
    tcase_add_loop_test(tc, usage_errors, 0, (int)(sizeof misuses / sizeof misuses[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU on the CUDA run */
    return tu_run_suite(suite());
}
