/* test_cpu_ref.c - the CPU reference ops against numpy/scipy.
 *
 * Each case draws fresh random input (seed printed by testutil; TU_SEED
 * repeats it), runs gpuq_cpu_* in float32 and float64, runs
 * tests/ref/ref_ops.py on the same values (rounded to float32 first when
 * testing float32) and compares ||out - ref|| / ||ref||. Then hand-computed
 * distances, and the error contract: GPUQ_K_E_ZERO, zero_ok, GPUQ_K_E_RANGE,
 * GPUQ_K_E_ARG, NaN propagation.
 *
 * Numerics: normalize against ref_ops.py normalize_exact (exact rational
 * arithmetic, one final rounding) element by element, on inputs that plain
 * sums get wrong (large offsets, cancellation, magnitudes from 1e-300 to
 * 1e300), the zscore of 1000 + N(0,1), rows whose sums or squares
 * leave double's or float's range, and results too large for the dtype
 * (GPUQ_K_E_OVERFLOW).
 */
#include "gpuq_kernels.h"
#include "norm_math.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const method_names[] = {"sum", "l1", "l2", "minmax", "zscore"};
static const char *const metric_names[] = {"euclidean", "sqeuclidean", "cosine", "manhattan"};
static const int dts[] = {GPUQ_K_F32, GPUQ_K_F64};

#define R_EARTH 6371.0088
#define PI 3.14159265358979323846

/* ---- fixture: one temp dir per test ---- */

static char tmp[256];

static void setup(void)
{
    tu_tmpdir(tmp, sizeof tmp);
}

static void teardown(void)
{
    tu_rmtree(tmp);
}

/* ---- helpers ---- */

static size_t dt_size(int dt)
{
    return dt == GPUQ_K_F32 ? sizeof(float) : sizeof(double);
}

/* Round x to dt in place (so the reference sees what the op sees), and
 * return a malloc'd copy in dt. */
static void *to_dtype(int dt, double *x, size_t n)
{
    void *buf = malloc(n * dt_size(dt) + 1);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_K_F32) {
            ((float *)buf)[i] = (float)x[i];
            x[i] = ((float *)buf)[i];
        } else {
            ((double *)buf)[i] = x[i];
        }
    }
    return buf;
}

static double out_at(int dt, const void *out, size_t i)
{
    return dt == GPUQ_K_F32 ? (double)((const float *)out)[i] : ((const double *)out)[i];
}

static const char *write_input(const char *name, const double *x, size_t n)
{
    static char paths[4][320];
    static int slot;
    char *p = paths[slot++ % 4];
    snprintf(p, 320, "%s/%s", tmp, name);
    ck_assert_int_eq(tu_write_file(p, x, n * sizeof *x), 0);
    return p;
}

/* Run ref_ops.py with args (NULL-terminated, OUT appended) and read n doubles. */
static void reference(double *ref, size_t n, const char *const *args)
{
    char out[320];
    const char *argv[24];
    size_t k = 0;
    snprintf(out, sizeof out, "%s/ref.out", tmp);
    for (; args[k] && k < 22; k++)
        argv[k] = args[k];
    argv[k++] = out;
    argv[k] = NULL;
    int rc = tu_python("ref/ref_ops.py", argv);
    ck_assert_msg(rc == 0, "ref_ops.py %s exited %d", args[0], rc);
    size_t len = 0;
    double *r = tu_read_file(out, &len);
    ck_assert_msg(r && len == n * sizeof(double), "ref_ops.py %s: %zu bytes, want %zu", args[0],
                  len, n * sizeof(double));
    memcpy(ref, r, len);
    free(r);
}

static void check_close(int dt, const void *out, const double *ref, size_t n, double tol32,
                        double tol64, const char *what)
{
    double err = dt == GPUQ_K_F32 ? tu_rel_err_f32(out, ref, n) : tu_rel_err_f64(out, ref, n);
    double tol = dt == GPUQ_K_F32 ? tol32 : tol64;
    ck_assert_msg(err <= tol, "%s (%s): rel err %g > %g", what,
                  dt == GPUQ_K_F32 ? "f32" : "f64", err, tol);
}

static void u64s(char *buf, uint64_t v)
{
    snprintf(buf, 32, "%llu", (unsigned long long)v);
}

/* ---- normalize vs numpy ---- */

static const struct {
    uint64_t rows, cols;
} norm_shapes[] = {{1, 1}, {1, 31}, {1, 1023}, {5, 7}, {64, 1}};
#define N_SHAPES (sizeof norm_shapes / sizeof norm_shapes[0])

/* _i enumerates method x dtype x shape. */
START_TEST(normalize_vs_numpy)
{
    int method = _i % 5, dt = dts[(_i / 5) % 2];
    uint64_t rows = norm_shapes[_i / 10].rows, cols = norm_shapes[_i / 10].cols;
    size_t n = rows * cols;
    double *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref);
    /* sum: positive values, so Σa is far from 0 and the result well conditioned */
    tu_rand_fill_f64(x, n, method == GPUQ_K_SUM ? 0.5 : -10.0, 10.0);
    void *in = to_dtype(dt, x, n), *out = malloc(n * dt_size(dt));

    int rc = gpuq_cpu_normalize(dt, method, 0, in, out, rows, cols);
    if (cols == 1 && (method == GPUQ_K_MINMAX || method == GPUQ_K_ZSCORE)) {
        /* one-value rows are constant: no spread to divide by */
        ck_assert_int_eq(rc, GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 1, in, out, rows, cols), GPUQ_K_OK);
        for (size_t i = 0; i < n; i++)
            ck_assert(out_at(dt, out, i) == 0.0);
    } else {
        ck_assert_int_eq(rc, GPUQ_K_OK);
        char r[32], c[32];
        u64s(r, rows), u64s(c, cols);
        const char *args[] = {"normalize", method_names[method], r, c, write_input("x", x, n),
                              NULL};
        reference(ref, n, args);
        check_close(dt, out, ref, n, 1e-6, 1e-12, method_names[method]);
    }
    free(x), free(ref), free(in), free(out);
}
END_TEST

/* ---- normalize numerics: per element against the exact reference ---- */

/* Per-element tolerances against ref_ops.py normalize_exact (the exact
 * result rounded once): float64 a few units in the last place (2^-53 =
 * 1.1e-16), float32 the final rounding to float (up to 2^-24) and no more. */
#define ELEM_TOL64 2e-15
#define ELEM_TOL32 6.0e-8

static void check_elems(int dt, const void *out, const double *ref, size_t n, double tol32,
                        double tol64, const char *what)
{
    size_t w = 0;
    double err =
        dt == GPUQ_K_F32 ? tu_elem_err_f32(out, ref, n, &w) : tu_elem_err_f64(out, ref, n, &w);
    double tol = dt == GPUQ_K_F32 ? tol32 : tol64;
    ck_assert_msg(err <= tol, "%s (%s): element %zu is %.17g, exact %.17g: rel err %g > %g", what,
                  dt == GPUQ_K_F32 ? "f32" : "f64", w, out_at(dt, out, w), ref[w], err, tol);
}

/* Exact reference of normalize METHOD over rows x cols of x. */
static void exact_reference(double *ref, int method, const double *x, uint64_t rows, uint64_t cols)
{
    char r[32], c[32];
    u64s(r, rows), u64s(c, cols);
    const char *args[] = {
        "normalize_exact", method_names[method], r, c, write_input("x", x, rows * cols), NULL};
    reference(ref, rows * cols, args);
}

static const struct {
    uint64_t rows, cols;
} exact_shapes[] = {{1, 1031}, {7, 129}};

/* _i enumerates method x dtype x kind x shape. */
START_TEST(normalize_vs_exact)
{
    int method = _i % 5, dt = dts[(_i / 5) % 2], kind = (_i / 10) % TU_NORM_KINDS;
    uint64_t rows = exact_shapes[_i / (10 * TU_NORM_KINDS)].rows;
    uint64_t cols = exact_shapes[_i / (10 * TU_NORM_KINDS)].cols;
    size_t n = rows * cols;
    double *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref);
    tu_norm_fill(kind, dt == GPUQ_K_F32, x, rows, cols);
    void *in = to_dtype(dt, x, n), *out = malloc(n * dt_size(dt));
    ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, in, out, rows, cols), GPUQ_K_OK);
    exact_reference(ref, method, x, rows, cols);
    char what[96];
    snprintf(what, sizeof what, "%s of %s %llux%llu", method_names[method],
             tu_norm_kind_names[kind], (unsigned long long)rows, (unsigned long long)cols);
    check_elems(dt, out, ref, n, ELEM_TOL32, ELEM_TOL64, what);
    free(x), free(ref), free(in), free(out);
}
END_TEST

/* The case: zscore of 1000 + N(0,1), 4097 values of numpy's
 * default_rng(0). Plain sums leave the mean ~3e-12 off relative to the
 * spread; here every element must be within ELEM_TOL64 (1e-13 asked),
 * including those next to the mean. Flat, and as row 0 of three rows whose
 * other rows are the same values scaled by 2^-1000 and -1e250. */
START_TEST(zscore_offset_normal)
{
    const uint64_t n = 4097;
    double *x = malloc(3 * n * sizeof *x), *ref = malloc(3 * n * sizeof *ref);
    const char *gen[] = {"randn_offset", "4097", "0", "1000", NULL};
    reference(x, n, gen);
    for (uint64_t j = 0; j < n; j++) {
        x[n + j] = ldexp(x[j], -1000);
        x[2 * n + j] = x[j] * -1e250;
    }
    for (int k = 1; k >= 0; k--) { /* f64 first: to_dtype rounds x to f32 in place */
        int dt = dts[k];
        uint64_t rows = dt == GPUQ_K_F64 ? 3 : 1; /* f32 cannot hold the other rows */
        void *in = to_dtype(dt, x, rows * n), *out = malloc(rows * n * dt_size(dt));
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 0, in, out, 1, n), GPUQ_K_OK);
        exact_reference(ref, GPUQ_K_ZSCORE, x, 1, n);
        check_elems(dt, out, ref, n, ELEM_TOL32, ELEM_TOL64, "zscore 1000 + N(0,1) flat");
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 0, in, out, rows, n), GPUQ_K_OK);
        exact_reference(ref, GPUQ_K_ZSCORE, x, rows, n);
        check_elems(dt, out, ref, rows * n, ELEM_TOL32, ELEM_TOL64, "zscore 1000 + N(0,1) rows");
        free(in), free(out);
    }
    free(x), free(ref);
}
END_TEST

/* Rows whose sums or squares leave double's (or float's) range, with the
 * results known exactly (testutil's table); each must come out within one
 * rounding (l2: the square root's too). */
START_TEST(normalize_extremes)
{
    int dt = tu_norm_extremes[_i].dt, method = tu_norm_extremes[_i].method;
    uint64_t n = (uint64_t)tu_norm_extremes[_i].n;
    const double *want = tu_norm_extremes[_i].want;
    double x[4];
    memcpy(x, tu_norm_extremes[_i].x, sizeof x);
    double tol = dt == GPUQ_K_F32 ? 0x1p-24 : 0x1p-52;
    void *in = to_dtype(dt, x, n), *out = malloc(n * 8);
    int rc = gpuq_cpu_normalize(dt, method, 0, in, out, 1, n);
    ck_assert_msg(rc == GPUQ_K_OK, "case %d, %s of %g.. (%s): rc %d", _i, method_names[method],
                  x[0], dt == GPUQ_K_F32 ? "f32" : "f64", rc);
    for (uint64_t j = 0; j < n; j++) {
        double v = out_at(dt, out, j);
        ck_assert_msg(fabs(v - want[j]) <= tol * fabs(want[j]),
                      "case %d, %s of %g.. (%s) [%llu] = %.17g, want %.17g", _i,
                      method_names[method], x[0], dt == GPUQ_K_F32 ? "f32" : "f64",
                      (unsigned long long)j, v, want[j]);
    }
    free(in), free(out);
}
END_TEST

/* A result that the dtype cannot hold, from finite input, is an error
 * (zero_ok or not), found in the right row; underflow is not an error. */
START_TEST(normalize_overflow)
{
    double x64[6] = {1, 2, 3, 1e300, -1e300, 1e-300}, o[6];
    float x32[6] = {1, 2, 3, 1e38f, -1e38f, 1e-30f}, o32[6];
    uint64_t row = 99;
    for (int zero_ok = 0; zero_ok < 2; zero_ok++) {
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, zero_ok, x64, o, 2, 3),
                         GPUQ_K_E_OVERFLOW);
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, zero_ok, x32, o32, 2, 3),
                         GPUQ_K_E_OVERFLOW);
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, zero_ok, x64 + 3, o, 1, 3),
                         GPUQ_K_E_OVERFLOW);
    }
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, GPUQ_K_SUM, x64, 2, 3, &row),
                     GPUQ_K_E_OVERFLOW);
    ck_assert_int_eq(row, 1);
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F32, GPUQ_K_SUM, x32, 2, 3, &row),
                     GPUQ_K_E_OVERFLOW);
    ck_assert_int_eq(row, 1);
    /* the other methods are bounded: the same rows are fine */
    for (int m = GPUQ_K_L1; m <= GPUQ_K_ZSCORE; m++) {
        ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, m, 0, x64, o, 2, 3), GPUQ_K_OK);
        ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F32, m, x32, 2, 3, &row), GPUQ_K_OK);
    }
    /* float32: 1e38 / 1e-30 overflows float; as float64 input it is fine */
    double x32as64[3] = {1e38, -1e38, 1e-30};
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x32as64, o, 1, 3), GPUQ_K_OK);
    ck_assert(fabs(o[0] - 1e68) <= 1e-15 * 1e68);
    /* underflow rounds to zero: 1e-300 / 1e300 */
    double u[2] = {1e-300, 1e300};
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, u, o, 1, 2), GPUQ_K_OK);
    ck_assert(o[0] == 0.0 && o[1] == 1.0);
    /* find: a zero row, its index; no failing row */
    double z[6] = {1, 2, 3, 0, 0, 0};
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, GPUQ_K_L2, z, 2, 3, &row), GPUQ_K_E_ZERO);
    ck_assert_int_eq(row, 1);
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, GPUQ_K_L2, z, 1, 3, &row), GPUQ_K_OK);
    ck_assert_int_eq(gpuq_cpu_normalize_find(GPUQ_K_F64, 7, z, 1, 3, &row), GPUQ_K_E_ARG);
}
END_TEST

/* ---- normalize.cu's merge orders, replayed on the host ---- */

/* The CPU reference adds a row into one accumulator; normalize.cu merges
 * partial ones: each of nt threads sums elements t, t + nt, ...; a warp
 * merges by xor butterfly (shuffling only the fields the pass uses), a
 * block merges its warps in order, and long rows merge per-block partials
 * in a finalize block. This replays those orders with the same norm_math.h
 * functions, so that a wrong merge shows without a GPU, and checks that
 * every lane of a butterfly ends with the same bits. */

/* Merge of nt (a multiple of 32) thread accumulators as BlockRed does. */
static nm_acc emu_block_merge(nm_acc *acc, unsigned nt, int np, int mm)
{
    nm_acc prev[32];
    for (unsigned w = 0; w < nt / 32; w++) {
        nm_acc *lane = acc + 32 * w;
        for (unsigned off = 16; off > 0; off >>= 1) {
            memcpy(prev, lane, sizeof prev);
            for (unsigned l = 0; l < 32; l++) {
                nm_acc o = prev[l]; /* __shfl_xor_sync of the fields in use */
                for (int i = 0; i < np; i++)
                    o.p[i] = prev[l ^ off].p[i];
                if (mm) {
                    o.mn = prev[l ^ off].mn;
                    o.mx = prev[l ^ off].mx;
                }
                nm_acc_merge(&lane[l], &o, np, mm);
            }
        }
        for (unsigned l = 1; l < 32; l++)
            for (int i = 0; i < np; i++)
                ck_assert_msg(lane[l].p[i].s == lane[0].p[i].s && lane[l].p[i].c == lane[0].p[i].c,
                              "butterfly lanes 0 and %u differ", l);
    }
    nm_acc r = acc[0];
    for (unsigned w = 1; w < nt / 32; w++)
        nm_acc_merge(&r, &acc[32 * w], np, mm);
    return r;
}

/* A group of nt threads over x[lo, hi) in a pass mode. */
static nm_acc emu_group(int mode, int bins, const double *x, uint64_t lo, uint64_t hi, unsigned nt,
                        double c, double m0)
{
    nm_acc *acc = malloc(nt * sizeof *acc);
    ck_assert_ptr_nonnull(acc);
    for (unsigned t = 0; t < nt; t++) {
        nm_acc_init(&acc[t]);
        for (uint64_t j = lo + t; j < hi; j += nt)
            nm_acc_add(&acc[t], mode, bins, x[j], c, m0);
    }
    nm_acc r = emu_block_merge(acc, nt, nm_mode_pairs(mode, bins), nm_mode_minmax(mode));
    free(acc);
    return r;
}

/* One pass over a row as launched: nt = 32 (warp), 256 (block), or bpr
 * blocks of 256 whose partials a 256-thread finalize merges. */
static nm_acc emu_pass(int mode, int bins, const double *x, uint64_t cols, unsigned nt,
                       unsigned bpr, double c, double m0)
{
    if (bpr == 0)
        return emu_group(mode, bins, x, 0, cols, nt, c, m0);
    int np = nm_mode_pairs(mode, bins), mm = nm_mode_minmax(mode);
    uint64_t chunk = (cols + bpr - 1) / bpr;
    nm_acc *part = malloc(bpr * sizeof *part), fin[256];
    ck_assert_ptr_nonnull(part);
    for (unsigned b = 0; b < bpr; b++) {
        uint64_t lo = b * chunk, hi = lo + chunk < cols ? lo + chunk : cols;
        part[b] = emu_group(mode, bins, x, lo, hi, 256, c, m0);
    }
    for (unsigned t = 0; t < 256; t++) {
        nm_acc_init(&fin[t]);
        for (unsigned b = t; b < bpr; b += 256)
            nm_acc_merge(&fin[t], &part[b], np, mm);
    }
    free(part);
    return emu_block_merge(fin, 256, np, mm);
}

/* normalize of one row the GPU's way (x as double; bins for float64);
 * returns the GPU's flag as a kernel code. */
static int emu_normalize(int dt, int method, const double *x, double *out, uint64_t cols,
                         unsigned nt, unsigned bpr)
{
    int bins = dt == GPUQ_K_F64, mode = nm_first_mode(method);
    nm_acc a = emu_pass(mode, bins, x, cols, nt, bpr, 1.0, 0.0);
    nm_affine f;
    if (method == GPUQ_K_ZSCORE) {
        if (!nm_zscore_stage0(&a, cols, &f)) {
            nm_acc b = emu_pass(NM_ZS2, bins, x, cols, nt, bpr, f.pre, f.sh);
            nm_zscore_stage1(&b, cols, &f);
        }
    } else {
        f = nm_finish(method, &a);
    }
    if (f.den == 0.0)
        return GPUQ_K_E_ZERO;
    for (uint64_t j = 0; j < cols; j++) {
        double v = nm_apply(&f, x[j]);
        out[j] = dt == GPUQ_K_F32 ? (double)(float)v : v;
        if (f.check && isinf(out[j]))
            return GPUQ_K_E_OVERFLOW;
    }
    return GPUQ_K_OK;
}

static const struct {
    uint64_t cols;
    unsigned nt, bpr; /* the launch normalize.cu picks for cols */
} emu_shapes[] = {{100, 32, 0}, {4097, 256, 0}, {(1u << 17) + 5, 256, 33}};

/* _i enumerates method x dtype x kind x shape: the replay against the CPU
 * reference, per element (both within ELEM_TOL of exact, see
 * normalize_vs_exact), and the same error code. */
START_TEST(normalize_merge_orders)
{
    int method = _i % 5, dt = dts[(_i / 5) % 2], kind = (_i / 10) % TU_NORM_KINDS;
    uint64_t cols = emu_shapes[_i / (10 * TU_NORM_KINDS)].cols;
    unsigned nt = emu_shapes[_i / (10 * TU_NORM_KINDS)].nt,
             bpr = emu_shapes[_i / (10 * TU_NORM_KINDS)].bpr;
    double *x = malloc(cols * sizeof *x), *emu = malloc(cols * sizeof *emu);
    tu_norm_fill(kind, dt == GPUQ_K_F32, x, 1, cols);
    void *in = to_dtype(dt, x, cols), *out = malloc(cols * dt_size(dt));
    int rc = gpuq_cpu_normalize(dt, method, 0, in, out, 1, cols);
    ck_assert_int_eq(emu_normalize(dt, method, x, emu, cols, nt, bpr), rc);
    if (rc == GPUQ_K_OK) {
        char what[96];
        snprintf(what, sizeof what, "replay: %s of %s, %llu cols", method_names[method],
                 tu_norm_kind_names[kind], (unsigned long long)cols);
        double *cpu = malloc(cols * sizeof *cpu);
        for (uint64_t j = 0; j < cols; j++)
            cpu[j] = out_at(dt, out, j);
        size_t w = 0;
        double err = tu_elem_err_f64(emu, cpu, cols, &w);
        double tol = dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64;
        ck_assert_msg(err <= tol, "%s (%s): element %zu is %.17g, CPU %.17g: rel err %g > %g", what,
                      dt == GPUQ_K_F32 ? "f32" : "f64", w, emu[w], cpu[w], err, tol);
        free(cpu);
    }
    free(x), free(emu), free(in), free(out);
}
END_TEST

/* The extreme rows, replayed: spread over a long row (each value repeated)
 * the result of each copy is the short row's divided by the repeat count
 * (sum, l1), its square root (l2), or unchanged (minmax, zscore). */
START_TEST(normalize_merge_extremes)
{
    int dt = tu_norm_extremes[_i].dt, method = tu_norm_extremes[_i].method,
        n = tu_norm_extremes[_i].n;
    for (size_t s = 0; s < sizeof emu_shapes / sizeof emu_shapes[0]; s++) {
        uint64_t rep = emu_shapes[s].cols / (uint64_t)n, cols = rep * (uint64_t)n;
        double *x = malloc(cols * sizeof *x), *emu = malloc(cols * sizeof *emu);
        for (uint64_t j = 0; j < cols; j++)
            x[j] = dt == GPUQ_K_F32 ? (double)(float)tu_norm_extremes[_i].x[j % (uint64_t)n]
                                    : tu_norm_extremes[_i].x[j % (uint64_t)n];
        int rc = emu_normalize(dt, method, x, emu, cols, emu_shapes[s].nt,
                               emu_shapes[s].bpr ? emu_shapes[s].bpr : 0);
        ck_assert_msg(rc == GPUQ_K_OK, "case %d, %llu cols: rc %d", _i, (unsigned long long)cols,
                      rc);
        double k = method == GPUQ_K_SUM || method == GPUQ_K_L1 ? (double)rep
                   : method == GPUQ_K_L2                       ? sqrt((double)rep)
                                                               : 1.0;
        double tol = dt == GPUQ_K_F32 ? 0x1p-23 : 0x1p-50;
        for (uint64_t j = 0; j < cols; j++) {
            double want = tu_norm_extremes[_i].want[j % (uint64_t)n] / k;
            if (dt == GPUQ_K_F32)
                want = (double)(float)want;
            ck_assert_msg(fabs(emu[j] - want) <= tol * fabs(want) ||
                              fabs(emu[j] - want) < 0x1p-1060,
                          "case %d, %llu cols [%llu] = %.17g, want %.17g", _i,
                          (unsigned long long)cols, (unsigned long long)j, emu[j], want);
        }
        free(x), free(emu);
    }
}
END_TEST

/* ---- pairwise vs scipy cdist ---- */

/* _i enumerates metric x dtype x d. */
START_TEST(pairwise_vs_cdist)
{
    int metric = _i % 4, dt = dts[(_i / 4) % 2];
    uint64_t m = 37, n = 53, d = (_i / 8) ? 64 : 3;
    double *x = malloc(m * d * sizeof *x), *y = malloc(n * d * sizeof *y);
    double *ref = malloc(m * n * sizeof *ref);
    tu_rand_fill_f64(x, m * d, -1.0, 1.0);
    tu_rand_fill_f64(y, n * d, -1.0, 1.0);
    void *xi = to_dtype(dt, x, m * d), *yi = to_dtype(dt, y, n * d);
    void *out = malloc(m * n * dt_size(dt));

    ck_assert_int_eq(gpuq_cpu_pairwise(dt, metric, 0, xi, yi, m, n, d, out), GPUQ_K_OK);
    char ms[32], ns[32], ds[32];
    u64s(ms, m), u64s(ns, n), u64s(ds, d);
    const char *args[] = {"pairwise", metric_names[metric], ms, ns, ds,
                          write_input("x", x, m * d), write_input("y", y, n * d), NULL};
    reference(ref, m * n, args);
    check_close(dt, out, ref, m * n, 1e-5, 1e-12, metric_names[metric]);
    free(x), free(y), free(ref), free(xi), free(yi), free(out);
}
END_TEST

/* ---- haversine and grid vs numpy ---- */

static void random_points(double *p, size_t n)
{
    tu_rand_fill_f64(p, 2 * n, 0.0, 1.0);
    for (size_t i = 0; i < n; i++) {
        p[2 * i] = p[2 * i] * 180.0 - 90.0;
        p[2 * i + 1] = p[2 * i + 1] * 360.0 - 180.0;
    }
}

START_TEST(haversine_vs_numpy)
{
    int dt = dts[_i];
    size_t n = 1000;
    double *a = malloc(2 * n * sizeof *a), *b = malloc(2 * n * sizeof *b);
    double *ref = malloc(n * sizeof *ref);
    random_points(a, n);
    random_points(b, n);
    void *ai = to_dtype(dt, a, 2 * n), *bi = to_dtype(dt, b, 2 * n), *out = malloc(n * 8);
    char ns[32];
    u64s(ns, n);

    ck_assert_int_eq(gpuq_cpu_haversine_to(dt, ai, n, 30.0, 101.0, R_EARTH, out), GPUQ_K_OK);
    const char *args[] = {"haversine_to", ns, "30", "101", "6371.0088",
                          write_input("a", a, 2 * n), NULL};
    reference(ref, n, args);
    check_close(dt, out, ref, n, 1e-6, 1e-12, "haversine_to");

    ck_assert_int_eq(gpuq_cpu_haversine_pair(dt, ai, bi, n, 1000.0, out), GPUQ_K_OK);
    const char *args2[] = {"haversine_pair", ns, "1000.0", write_input("a", a, 2 * n),
                           write_input("b", b, 2 * n), NULL};
    reference(ref, n, args2);
    check_close(dt, out, ref, n, 1e-6, 1e-12, "haversine_pair");
    free(a), free(b), free(ref), free(ai), free(bi), free(out);
}
END_TEST

static void grid_case(int dt, const char *lat0, const char *lat1, uint64_t nlat,
                      const char *lon0, const char *lon1, uint64_t nlon, double tol64)
{
    size_t n = nlat * nlon;
    double *ref = malloc(n * sizeof *ref);
    void *out = malloc(n * dt_size(dt));
    int rc = gpuq_cpu_grid(dt, atof(lat0), atof(lat1), nlat, atof(lon0), atof(lon1), nlon, 30.0,
                           101.0, R_EARTH, out);
    ck_assert_int_eq(rc, GPUQ_K_OK);
    char a[32], b[32];
    u64s(a, nlat), u64s(b, nlon);
    const char *args[] = {"grid", lat0, lat1, a, lon0, lon1, b, "30", "101", "6371.0088", NULL};
    reference(ref, n, args);
    check_close(dt, out, ref, n, 1e-6, tol64, "grid");
    free(ref), free(out);
}

START_TEST(grid_vs_numpy)
{
    int dt = dts[_i];
    grid_case(dt, "-60", "75", 101, "-170", "165", 203, 1e-12);
    grid_case(dt, "80", "-80", 7, "10", "10", 1, 1e-12);   /* descending, one column */
    grid_case(dt, "12.5", "40", 1, "-180", "180", 33, 1e-12); /* one row: lat0 */
    if (dt == GPUQ_K_F64) /* the default grid, checked to 1e-9 */
        grid_case(dt, "-90", "90", 1000, "-180", "180", 1000, 1e-9);
}
END_TEST

/* ---- hand-computed values ---- */

START_TEST(haversine_hand)
{
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        double d64[4];
        float d32[4];
        void *out = dt == GPUQ_K_F32 ? (void *)d32 : (void *)d64;
        double tol = dt == GPUQ_K_F32 ? 1e-6 : 1e-12;
        double p64[8] = {0, 0, 90, 0, -90, 45, 0, 180};
        float p32[8] = {0, 0, 90, 0, -90, 45, 0, 180};
        const void *p = dt == GPUQ_K_F32 ? (const void *)p32 : (const void *)p64;
        /* to (0, 90): a quarter of the equator; a pole is a quarter meridian away;
         * (0, 180) is antipodal */
        ck_assert_int_eq(gpuq_cpu_haversine_to(dt, p, 4, 0.0, 90.0, R_EARTH, out), GPUQ_K_OK);
        double want[4] = {R_EARTH * PI / 2, R_EARTH * PI / 2, R_EARTH * PI / 2, R_EARTH * PI / 2};
        for (int i = 0; i < 4; i++)
            ck_assert_msg(fabs(out_at(dt, out, i) - want[i]) <= tol * want[i], "to[%d] = %.17g",
                          i, out_at(dt, out, i));
        /* pair: (0,0)-(-90,45) and (90,0)-(0,180) are quarter circles; R = 2 */
        ck_assert_int_eq(gpuq_cpu_haversine_pair(dt, p, (const char *)p + 4 * dt_size(dt), 2,
                                                 2.0, out),
                         GPUQ_K_OK);
        ck_assert(fabs(out_at(dt, out, 0) - PI) <= tol * PI);
        ck_assert(fabs(out_at(dt, out, 1) - PI) <= tol * PI);
        /* antipodes: asin(min(1, sqrt(a))) stays finite */
        ck_assert_int_eq(gpuq_cpu_haversine_to(dt, (const char *)p + 6 * dt_size(dt), 1, 0.0,
                                               0.0, 1.0, out),
                         GPUQ_K_OK);
        ck_assert(fabs(out_at(dt, out, 0) - PI) <= tol * PI);
    }
    /* grid ends are exactly the linspace stops */
    double g[3];
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, -90, 90, 3, 0, 0, 1, 0, 0, 1.0, g), GPUQ_K_OK);
    ck_assert(fabs(g[0] - PI / 2) < 1e-15 && g[1] == 0.0 && fabs(g[2] - PI / 2) < 1e-15);
}
END_TEST

START_TEST(normalize_hand)
{
    double x[4] = {1, 2, 3, 4}, o[4];
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, 1, 4), GPUQ_K_OK);
    ck_assert(o[0] == 0.1 && o[3] == 0.4);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_MINMAX, 0, x, o, 1, 4), GPUQ_K_OK);
    ck_assert(o[0] == 0.0 && fabs(o[1] - 1.0 / 3) < 1e-16 && o[3] == 1.0);
    /* zscore of 1..4: mean 2.5, population std sqrt(1.25) */
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_ZSCORE, 0, x, o, 1, 4), GPUQ_K_OK);
    ck_assert(fabs(o[0] + 1.5 / sqrt(1.25)) < 1e-15);
    double y[2] = {3, -4};
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_L2, 0, y, o, 1, 2), GPUQ_K_OK);
    ck_assert(o[0] == 0.6 && o[1] == -0.8);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_L1, 0, y, o, 1, 2), GPUQ_K_OK);
    ck_assert(fabs(o[0] - 3.0 / 7) < 1e-16 && fabs(o[1] + 4.0 / 7) < 1e-16);
}
END_TEST

/* ---- errors ---- */

START_TEST(normalize_zero)
{
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        /* row 0 fine; row 1: Σa = 0, Σ|a| > 0; row 2: all zero; row 3: constant */
        double x[12] = {1, 2, 3, -1, 2, -1, 0, 0, 0, 5, 5, 5};
        void *in = to_dtype(dt, x, 12), *out = malloc(12 * 8);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_L1, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_L2, 0, in, out, 4, 3), GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_MINMAX, 0, in, out, 4, 3),
                         GPUQ_K_E_ZERO);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 0, in, out, 4, 3),
                         GPUQ_K_E_ZERO);
        /* l1 on rows 0-1 and row 3 is fine */
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_L1, 0, in, out, 2, 3), GPUQ_K_OK);
        /* zero_ok: the bad row is zeros, the rest normalized */
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 1, in, out, 4, 3), GPUQ_K_OK);
        ck_assert(fabs(out_at(dt, out, 0) - 1.0 / 6) < 1e-7);
        for (int i = 3; i < 9; i++)
            ck_assert(out_at(dt, out, i) == 0.0);
        ck_assert(fabs(out_at(dt, out, 9) - 1.0 / 3) < 1e-7);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_ZSCORE, 1, in, out, 4, 3), GPUQ_K_OK);
        for (int i = 6; i < 12; i++)
            ck_assert(out_at(dt, out, i) == 0.0);
        ck_assert(fabs(out_at(dt, out, 0) + sqrt(1.5)) < 1e-6);
        free(in), free(out);
    }
}
END_TEST

START_TEST(normalize_nan)
{
    /* A NaN in a row makes every denominator NaN (not zero): the row is NaN,
     * the call succeeds, other rows are unaffected. */
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        for (int method = GPUQ_K_SUM; method <= GPUQ_K_ZSCORE; method++) {
            double x[6] = {1, NAN, 3, 1, 2, 4};
            void *in = to_dtype(dt, x, 6), *out = malloc(6 * 8);
            ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, in, out, 2, 3), GPUQ_K_OK);
            for (int i = 0; i < 3; i++)
                ck_assert_msg(isnan(out_at(dt, out, i)), "%s [%d]", method_names[method], i);
            for (int i = 3; i < 6; i++)
                ck_assert(isfinite(out_at(dt, out, i)));
            free(in), free(out);
        }
    }
}
END_TEST

/* Inf is not an error either: the denominator becomes +-Inf or NaN by IEEE
 * rules and the row follows (finite / Inf = 0, Inf / Inf = NaN), as numpy. */
START_TEST(normalize_inf)
{
    for (int k = 0; k < 2; k++) {
        int dt = dts[k];
        double x[6] = {1, INFINITY, 2, 1, 2, 4};
        void *in = to_dtype(dt, x, 6), *out = malloc(6 * 8);
        const double want[5][3] = {
            {0, NAN, 0},     /* sum: 1 / Inf, Inf / Inf */
            {0, NAN, 0},     /* l1 */
            {0, NAN, 0},     /* l2 */
            {0, NAN, 0},     /* minmax: (1 - 1) / Inf, (Inf - 1) / Inf, (2 - 1) / Inf */
            {NAN, NAN, NAN}, /* zscore: mean Inf */
        };
        for (int method = GPUQ_K_SUM; method <= GPUQ_K_ZSCORE; method++) {
            ck_assert_int_eq(gpuq_cpu_normalize(dt, method, 0, in, out, 2, 3), GPUQ_K_OK);
            for (int i = 0; i < 3; i++) {
                double v = out_at(dt, out, i), w = want[method][i];
                ck_assert_msg(isnan(w) ? isnan(v) : v == w, "%s [%d] = %g", method_names[method], i,
                              v);
            }
            for (int i = 3; i < 6; i++)
                ck_assert(isfinite(out_at(dt, out, i)));
        }
        /* +Inf and -Inf: sum is NaN, the whole row NaN */
        double y[2] = {INFINITY, -INFINITY};
        void *yin = to_dtype(dt, y, 2);
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 0, yin, out, 1, 2), GPUQ_K_OK);
        ck_assert(isnan(out_at(dt, out, 0)) && isnan(out_at(dt, out, 1)));
        free(in), free(yin), free(out);
    }
}
END_TEST

START_TEST(pairwise_zero_vector)
{
    double x[6] = {1, 2, 3, 0, 0, 0}, y[6] = {3, 2, 1, 1, 1, -1}, o[4];
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 0, x, y, 2, 2, 3, o),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 0, y, x, 2, 2, 3, o),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 1, x, y, 2, 2, 3, o),
                     GPUQ_K_OK);
    ck_assert(fabs(o[0] - (1.0 - 10.0 / 14.0)) < 1e-15);
    ck_assert(fabs(o[1] - 1.0) < 1e-15); /* orthogonal */
    ck_assert(o[2] == 1.0 && o[3] == 1.0);
    /* other metrics have no trouble with a zero vector */
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_EUCLIDEAN, 0, x, y, 2, 2, 3, o),
                     GPUQ_K_OK);
    ck_assert(fabs(o[3] - sqrt(3.0)) < 1e-15);
    float xf[6] = {1, 2, 3, 0, 0, 0}, yf[6] = {3, 2, 1, 1, 1, -1}, of[4];
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F32, GPUQ_K_COSINE, 0, xf, yf, 2, 2, 3, of),
                     GPUQ_K_E_ZERO);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F32, GPUQ_K_COSINE, 1, xf, yf, 2, 2, 3, of),
                     GPUQ_K_OK);
    ck_assert(of[2] == 1.0f && of[3] == 1.0f);
}
END_TEST

START_TEST(haversine_range)
{
    double p[4] = {10, 20, 90.0001, 0}, o[2];
    float pf[4] = {10, 20, 90.0001f, 0}, of[2];
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 2, 0, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F32, pf, 2, 0, 0, 1, of), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, 90.0001, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, -90.0001, 0, 1, o),
                     GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, NAN, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, 0, INFINITY, 1, o),
                     GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, p, 1, 90, 0, 1, o), GPUQ_K_OK);
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, p, p + 2, 1, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, p + 2, p, 1, 1, o), GPUQ_K_E_RANGE);
    double q[2] = {NAN, 0}, r[2] = {0, NAN};
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, q, 1, 0, 0, 1, o), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, r, 1, 0, 0, 1, o), GPUQ_K_E_RANGE);
    float qf[2] = {NAN, 0};
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F32, pf, qf, 1, 1, of), GPUQ_K_E_RANGE);
    double g[4];
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, -90.5, 0, 2, 0, 1, 2, 0, 0, 1, g),
                     GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 91, 2, 0, 1, 2, 0, 0, 1, g), GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, NAN, 2, 0, 0, 1, g),
                     GPUQ_K_E_RANGE);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, 1, 2, 95, 0, 1, g), GPUQ_K_E_RANGE);
}
END_TEST

START_TEST(bad_args)
{
    double x[4] = {1, 2, 3, 4}, o[4];
    for (int dt = -1; dt <= 4; dt++) {
        if (dt == GPUQ_K_F32 || dt == GPUQ_K_F64)
            continue;
        ck_assert_int_eq(gpuq_cpu_normalize(dt, GPUQ_K_SUM, 0, x, o, 1, 4), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_haversine_to(dt, x, 2, 0, 0, 1, o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_haversine_pair(dt, x, x, 2, 1, o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_grid(dt, 0, 1, 2, 0, 1, 2, 0, 0, 1, o), GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_pairwise(dt, GPUQ_K_EUCLIDEAN, 0, x, x, 2, 2, 2, o),
                         GPUQ_K_E_ARG);
    }
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, -1, 0, x, o, 1, 4), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, 5, 0, x, o, 1, 4), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, 0, 4), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, 1, 0), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, NULL, o, 1, 4),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_normalize(GPUQ_K_F64, GPUQ_K_SUM, 0, x, o, UINT64_MAX, 3),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, -1, 0, x, x, 2, 2, 2, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, 4, 0, x, x, 2, 2, 2, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 0, x, x, 0, 2, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 0, x, x, 2, 0, 2, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_pairwise(GPUQ_K_F64, GPUQ_K_COSINE, 0, x, x, 2, 2, 0, o),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, x, 0, 0, 0, 1, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, x, x, 0, 1, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 0, 0, 1, 2, 0, 0, 1, o), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, 1, 0, 0, 0, 1, o), GPUQ_K_E_ARG);
    const double radii[] = {0.0, -1.0, NAN, INFINITY};
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(gpuq_cpu_haversine_to(GPUQ_K_F64, x, 2, 0, 0, radii[k], o),
                         GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_haversine_pair(GPUQ_K_F64, x, x, 2, radii[k], o),
                         GPUQ_K_E_ARG);
        ck_assert_int_eq(gpuq_cpu_grid(GPUQ_K_F64, 0, 1, 2, 0, 1, 2, 0, 0, radii[k], o),
                         GPUQ_K_E_ARG);
    }
}
END_TEST

static Suite *cpu_ref_suite(void)
{
    Suite *s = suite_create("cpu_ref");
    TCase *tc = tcase_create("vs_reference");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, normalize_vs_numpy, 0, (int)(10 * N_SHAPES));
    tcase_add_loop_test(tc, pairwise_vs_cdist, 0, 16);
    tcase_add_loop_test(tc, haversine_vs_numpy, 0, 2);
    tcase_add_loop_test(tc, grid_vs_numpy, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("numerics");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, normalize_vs_exact, 0, (int)(10 * TU_NORM_KINDS * 2));
    tcase_add_test(tc, zscore_offset_normal);
    tcase_add_loop_test(tc, normalize_extremes, 0, (int)tu_norm_n_extremes);
    tcase_add_test(tc, normalize_overflow);
    tcase_add_loop_test(tc, normalize_merge_orders, 0, (int)(10 * TU_NORM_KINDS * 3));
    tcase_add_loop_test(tc, normalize_merge_extremes, 0, (int)tu_norm_n_extremes);
    suite_add_tcase(s, tc);

    tc = tcase_create("hand");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, haversine_hand);
    tcase_add_test(tc, normalize_hand);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, normalize_zero);
    tcase_add_test(tc, normalize_nan);
    tcase_add_test(tc, normalize_inf);
    tcase_add_test(tc, pairwise_zero_vector);
    tcase_add_test(tc, haversine_range);
    tcase_add_test(tc, bad_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tu_seed(); /* print the seed once, before any fork */
    return tu_run_suite(cpu_ref_suite());
}
