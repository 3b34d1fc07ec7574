/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_op.c - gpuqctl bench's requests and checks, per op
 * (ctl_bench_op.h).
 *
 * Inputs are made once, deterministic and never degenerate: normalize's
 * values are 1 + (i % 1000), so a sum is never 0; haversine's points are
 * valid latitudes and longitudes spread over the globe; pairwise's and
 * knn's rows are small integers over 10. The values a check knows are
 * computed here in double from the inputs as stored (rounded to f32 when
 * the dtype is f32), so a right answer passes whatever the backend, and the
 * tolerances are those of f32 or f64 arithmetic, well under what a wrong
 * element, row or op would be off by.
 *
 * Failures: sizes whose bytes overflow (too_large), no memory.
 */
#include "ctl_bench_op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_op_names[BENCH_NOPS] = {
    [BENCH_NORMALIZE] = "normalize",
    [BENCH_HAVERSINE] = "haversine",
    [BENCH_PAIRWISE] = "pairwise",
    [BENCH_GRID] = "grid",
    [BENCH_KNN] = "knn",
};

#define BENCH_TO_LAT 30.0
#define BENCH_TO_LON 101.0
#define BENCH_KNN_QUERIES 1024u
#define BENCH_KNN_K 10u
/* results of at most this many elements are scanned whole on every reply */
#define BENCH_SCAN_EVERY_MAX 65536u

static const double deg2rad = 3.14159265358979323846 / 180.0;

static double hav(double lat1, double lon1, double lat2, double lon2)
{
    double p1 = lat1 * deg2rad, p2 = lat2 * deg2rad;
    double sp = sin((p2 - p1) / 2), sl = sin((lon2 - lon1) * deg2rad / 2);
    double a = sp * sp + cos(p1) * cos(p2) * sl * sl;
    return 2 * GPUQ_EARTH_RADIUS_KM * asin(sqrt(a < 1 ? a : 1));
}

/* Element i of an array of dt, as a double. */
static double get(const void *x, gpuq_dtype dt, uint64_t i)
{
    return dt == GPUQ_DT_F32 ? (double)((const float *)x)[i] : ((const double *)x)[i];
}

static void put(void *x, gpuq_dtype dt, uint64_t i, double v)
{
    if (dt == GPUQ_DT_F32)
        ((float *)x)[i] = (float)v;
    else
        ((double *)x)[i] = v;
}

/* bytes = a * b * c, 0 on overflow (every size here is at least 1). */
static uint64_t mul3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r))
        return 0;
    return r;
}

static double row_dist(const bench_plan *p, const void *x, uint64_t i, uint64_t j)
{
    double s = 0;
    for (uint64_t c = 0; c < p->dim; c++) {
        double d = get(x, p->dt, i * p->dim + c) - get(x, p->dt, j * p->dim + c);
        s += d * d;
    }
    return sqrt(s);
}

static void add_check(bench_plan *p, uint64_t at, double want)
{
    if (p->nchecks < BENCH_MAX_CHECKS) {
        p->check_at[p->nchecks] = at;
        p->want[p->nchecks++] = want;
    }
}

/* The inputs and the known values of each op. */
static void fill(bench_plan *p)
{
    bool f32 = p->dt == GPUQ_DT_F32;
    switch (p->op) {
    case BENCH_NORMALIZE: {
        double s = 0;
        for (uint64_t i = 0; i < p->n; i++) {
            put(p->in[0], p->dt, i, 1.0 + (double)(i % 1000));
            s += 1.0 + (double)(i % 1000);
        }
        add_check(p, 0, 1.0 / s);
        add_check(p, p->n / 2, get(p->in[0], p->dt, p->n / 2) / s);
        add_check(p, p->n - 1, get(p->in[0], p->dt, p->n - 1) / s);
        p->tol_rel = f32 ? 1e-4 : 1e-10;
        p->tol_abs = 0;
        p->max_value = 1.0;
        p->sum_of_ones_tol = f32 ? 1e-4 : 1e-9;
        break;
    }
    case BENCH_HAVERSINE: {
        for (uint64_t i = 0; i < p->n; i++) {
            put(p->in[0], p->dt, 2 * i, -89.5 + fmod((double)i * 37.3, 179.0));
            put(p->in[0], p->dt, 2 * i + 1, -179.5 + fmod((double)i * 61.7, 359.0));
        }
        uint64_t at[3] = {0, p->n / 2, p->n - 1};
        for (int k = 0; k < 3; k++)
            add_check(p, at[k],
                      hav(get(p->in[0], p->dt, 2 * at[k]), get(p->in[0], p->dt, 2 * at[k] + 1),
                          BENCH_TO_LAT, BENCH_TO_LON));
        p->tol_rel = f32 ? 1e-3 : 1e-9;
        p->tol_abs = f32 ? 1.0 : 1e-6; /* km */
        p->max_value = 3.14159265358979323846 * GPUQ_EARTH_RADIUS_KM + p->tol_abs;
        break;
    }
    case BENCH_GRID: {
        /* the poles: the same distance from every longitude */
        add_check(p, 0, hav(-90, -180, BENCH_TO_LAT, BENCH_TO_LON));
        if (p->n > 1)
            add_check(p, p->n * p->n - 1, hav(90, 180, BENCH_TO_LAT, BENCH_TO_LON));
        p->tol_rel = f32 ? 1e-3 : 1e-9;
        p->tol_abs = f32 ? 1.0 : 1e-6;
        p->max_value = 3.14159265358979323846 * GPUQ_EARTH_RADIUS_KM + p->tol_abs;
        break;
    }
    case BENCH_PAIRWISE:
    case BENCH_KNN: {
        double norm2 = 0;
        for (uint64_t i = 0; i < p->n; i++) {
            double r = 0;
            for (uint64_t c = 0; c < p->dim; c++) {
                double v = (double)((i * 7 + c * 13) % 101) / 10.0 - 5.0;
                put(p->in[0], p->dt, i * p->dim + c, v);
                r += v * v;
            }
            norm2 = r > norm2 ? r : norm2;
        }
        /* a row from itself: 0, but an f32 |x|^2 + |y|^2 - 2xy leaves some */
        double norm = sqrt(norm2);
        p->tol_rel = f32 ? 1e-3 : 1e-9;
        p->tol_abs = (f32 ? 2e-3 : 1e-6) * (norm > 1 ? norm : 1);
        p->max_value = 2 * norm * (1 + p->tol_rel) + p->tol_abs;
        add_check(p, 0, 0.0);
        if (p->op == BENCH_PAIRWISE && p->n > 1) {
            add_check(p, p->n - 1, row_dist(p, p->in[0], 0, p->n - 1));
            add_check(p, (p->n - 1) * p->n, row_dist(p, p->in[0], p->n - 1, 0));
            add_check(p, (p->n / 2) * p->n + 1, row_dist(p, p->in[0], p->n / 2, 1));
        }
        break;
    }
    default:
        break;
    }
}

int bench_plan_make(bench_plan *p, bench_op op, gpuq_dtype dt, uint64_t n, uint64_t dim, char *err,
                    size_t cap)
{
    memset(p, 0, sizeof *p);
    p->op = op;
    p->dt = dt;
    p->esize = dt == GPUQ_DT_F32 ? 4 : 8;
    p->n = n;
    p->dim = dim;
    p->nout = 1;
    uint64_t es = p->esize;
    switch (op) {
    case BENCH_NORMALIZE:
        p->nin = 1;
        p->in_ndim[0] = 1;
        p->in_shape[0][0] = n;
        p->in_bytes[0] = mul3(n, es, 1);
        p->out_ndim = 1;
        p->out_shape[0] = n;
        break;
    case BENCH_HAVERSINE:
        p->nin = 1;
        p->in_ndim[0] = 2;
        p->in_shape[0][0] = n;
        p->in_shape[0][1] = 2;
        p->in_bytes[0] = mul3(n, 2, es);
        p->out_ndim = 1;
        p->out_shape[0] = n;
        break;
    case BENCH_GRID:
        p->out_ndim = 2;
        p->out_shape[0] = p->out_shape[1] = n;
        break;
    case BENCH_PAIRWISE:
        p->nin = 2;
        for (unsigned k = 0; k < 2; k++) {
            p->in_ndim[k] = 2;
            p->in_shape[k][0] = n;
            p->in_shape[k][1] = dim;
            p->in_bytes[k] = mul3(n, dim, es);
        }
        p->out_ndim = 2;
        p->out_shape[0] = p->out_shape[1] = n;
        break;
    case BENCH_KNN:
        p->nin = 2;
        p->queries = n < BENCH_KNN_QUERIES ? n : BENCH_KNN_QUERIES;
        p->k = n < BENCH_KNN_K ? n : BENCH_KNN_K;
        p->in_ndim[0] = p->in_ndim[1] = 2;
        p->in_shape[0][0] = p->queries;
        p->in_shape[1][0] = n;
        p->in_shape[0][1] = p->in_shape[1][1] = dim;
        p->in_bytes[0] = mul3(p->queries, dim, es);
        p->in_bytes[1] = mul3(n, dim, es);
        p->nout = 2;
        p->out_ndim = 2;
        p->out_shape[0] = p->queries;
        p->out_shape[1] = p->k;
        break;
    default:
        snprintf(err, cap, "no such op");
        return GPUQ_E_BAD_ARGUMENT;
    }
    p->out_elems = mul3(p->out_shape[0], p->out_ndim == 2 ? p->out_shape[1] : 1, 1);
    p->out_bytes[0] = mul3(p->out_elems, es, 1);
    if (p->nout == 2)
        p->out_bytes[1] = mul3(p->out_elems, 8, 1); /* int64 indices */
    bool overflow = p->out_bytes[0] == 0 || (p->nout == 2 && p->out_bytes[1] == 0);
    for (unsigned k = 0; k < p->nin; k++)
        overflow |= p->in_bytes[k] == 0;
    if (overflow || p->out_bytes[0] > SIZE_MAX / 2 || p->in_bytes[0] > SIZE_MAX / 2 ||
        p->in_bytes[1] > SIZE_MAX / 2) {
        snprintf(err, cap, "--size %llu of %s: the arrays' bytes overflow", (unsigned long long)n,
                 bench_op_names[op]);
        return GPUQ_E_TOO_LARGE;
    }
    p->scan_every = p->out_elems <= BENCH_SCAN_EVERY_MAX;
    /* inputs: knn's queries are the first rows of its Y, pairwise's B is A */
    if (p->nin) {
        unsigned k = op == BENCH_KNN ? 1 : 0;
        p->in[0] = malloc((size_t)p->in_bytes[k]);
        if (!p->in[0]) {
            snprintf(err, cap, "cannot allocate %llu bytes of input",
                     (unsigned long long)p->in_bytes[k]);
            return GPUQ_E_NO_MEMORY;
        }
    }
    fill(p);
    return 0;
}

void bench_plan_free(bench_plan *p)
{
    for (unsigned k = 0; k < 2; k++) {
        free(p->in[k]);
        free(p->ref[k]);
        p->in[k] = p->ref[k] = NULL;
    }
}

uint64_t bench_plan_bytes(const bench_plan *p)
{
    return p->in_bytes[0] + p->in_bytes[1] + p->out_bytes[0] + p->out_bytes[1];
}

const void *bench_plan_input(const bench_plan *p, unsigned k)
{
    return k < p->nin ? (p->in[k] ? p->in[k] : p->in[0]) : NULL;
}

gpuq_req *bench_req_make(const bench_plan *p, const void *a, const void *b, void *out0, void *out1,
                         char *err, size_t cap)
{
    gpuq_req *r = gpuq_req_new(bench_op_names[p->op]);
    if (!r) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    const double to[2] = {BENCH_TO_LAT, BENCH_TO_LON};
    if (p->nin > 0)
        gpuq_req_set_input(r, 0, p->dt, p->in_ndim[0], p->in_shape[0], a, p->in_bytes[0]);
    if (p->nin > 1)
        gpuq_req_set_input(r, 1, p->dt, p->in_ndim[1], p->in_shape[1], b, p->in_bytes[1]);
    switch (p->op) {
    case BENCH_NORMALIZE:
        gpuq_req_set_str(r, "method", "sum");
        break;
    case BENCH_HAVERSINE:
        gpuq_req_set_f64s(r, "to", to, 2);
        gpuq_req_set_f64(r, "radius", GPUQ_EARTH_RADIUS_KM);
        break;
    case BENCH_GRID:
        gpuq_req_set_dtype(r, p->dt);
        gpuq_req_set_range(r, "lat", -90, 90, p->n);
        gpuq_req_set_range(r, "lon", -180, 180, p->n);
        gpuq_req_set_f64s(r, "to", to, 2);
        gpuq_req_set_f64(r, "radius", GPUQ_EARTH_RADIUS_KM);
        break;
    case BENCH_PAIRWISE:
        gpuq_req_set_str(r, "metric", "euclidean");
        break;
    case BENCH_KNN:
        gpuq_req_set_str(r, "metric", "euclidean");
        gpuq_req_set_u64(r, "k", p->k);
        break;
    default:
        break;
    }
    return bench_req_finish(r, p, out0, out1, err, cap);
}

gpuq_req *bench_req_finish(gpuq_req *r, const bench_plan *p, void *out0, void *out1, char *err,
                           size_t cap)
{
    gpuq_req_set_output(r, 0, out0, (size_t)p->out_bytes[0]);
    if (p->nout > 1)
        gpuq_req_set_output(r, 1, out1, (size_t)p->out_bytes[1]);
    if (gpuq_req_errmsg(r)[0]) { /* the first setter error sticks */
        snprintf(err, cap, "%s", gpuq_req_errmsg(r));
        gpuq_req_free(r);
        return NULL;
    }
    return r;
}

static bool near(double got, double want, double rel, double abs_tol)
{
    return fabs(got - want) <= rel * fabs(want) + abs_tol; /* false for NaN */
}

int bench_check(const bench_plan *p, const gpuq_result *res, const void *out0, const void *out1,
                bool full, char *err, size_t cap)
{
    const char *op = bench_op_names[p->op];
    if (gpuq_result_outputs(res) != p->nout || gpuq_result_dtype(res, 0) != p->dt ||
        gpuq_result_ndim(res, 0) != p->out_ndim || gpuq_result_dim(res, 0, 0) != p->out_shape[0] ||
        (p->out_ndim == 2 && gpuq_result_dim(res, 0, 1) != p->out_shape[1]) ||
        gpuq_result_bytes(res, 0) != p->out_bytes[0]) {
        snprintf(err, cap, "wrong result: %s reply of %u outputs, %s [%llu, %llu]", op,
                 gpuq_result_outputs(res), gpuq_dtype_name(gpuq_result_dtype(res, 0)),
                 (unsigned long long)gpuq_result_dim(res, 0, 0),
                 (unsigned long long)gpuq_result_dim(res, 0, 1));
        return -1;
    }
    if (p->nout == 2 && (gpuq_result_dtype(res, 1) != GPUQ_DT_I64 ||
                         gpuq_result_bytes(res, 1) != p->out_bytes[1])) {
        snprintf(err, cap, "wrong result: %s's second output is not %llu int64 indices", op,
                 (unsigned long long)p->out_elems);
        return -1;
    }
    for (unsigned k = 0; k < p->nchecks; k++) {
        double got = get(out0, p->dt, p->check_at[k]);
        if (!near(got, p->want[k], p->tol_rel, p->tol_abs)) {
            snprintf(err, cap, "wrong result: %s element %llu is %.9g, want %.9g", op,
                     (unsigned long long)p->check_at[k], got, p->want[k]);
            return -1;
        }
    }
    /* knn: row 0 nearest first, its indices rows of Y; every row when full */
    uint64_t rows = p->op == BENCH_KNN ? (full ? p->queries : 1) : 0;
    for (uint64_t q = 0; q < rows; q++) {
        for (uint64_t j = 0; j < p->k; j++) {
            int64_t ix = ((const int64_t *)out1)[q * p->k + j];
            double d = get(out0, p->dt, q * p->k + j);
            if (ix < 0 || (uint64_t)ix >= p->n ||
                (j > 0 && !(get(out0, p->dt, q * p->k + j - 1) <= d))) {
                snprintf(err, cap,
                         "wrong result: knn row %llu, neighbour %llu: index %lld, distance %.9g",
                         (unsigned long long)q, (unsigned long long)j, (long long)ix, d);
                return -1;
            }
        }
    }
    if (!full)
        return 0;
    double sum = 0;
    for (uint64_t i = 0; i < p->out_elems; i++) {
        double v = get(out0, p->dt, i);
        sum += v;
        if (!(v >= 0 && v <= p->max_value)) { /* NaN fails too */
            snprintf(err, cap, "wrong result: %s element %llu is %.9g, out of [0, %.9g]", op,
                     (unsigned long long)i, v, p->max_value);
            return -1;
        }
    }
    if (p->op == BENCH_NORMALIZE && !(fabs(sum - 1.0) <= p->sum_of_ones_tol)) {
        snprintf(err, cap, "wrong result: normalize's values sum to %.12g, not 1", sum);
        return -1;
    }
    return 0;
}
