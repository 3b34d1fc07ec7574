/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_ref.c - CPU reference implementations of the gpuq ops.
 *
 * These are the ground truth the CUDA kernels are tested against and the
 * backend of `gpuqd --device cpu`. Every op validates its arguments
 * (GPUQ_K_E_ARG), reads float32 or float64, accumulates in double and writes
 * the input dtype. Data errors: a zero denominator in normalize or a zero
 * vector under cosine -> GPUQ_K_E_ZERO unless zero_ok (the on_zero mode,
 * GPUQ_K_ON_ZERO_*: then zeros and cosine's 1.0, or NaN); a normalize result
 * too large for the dtype (finite input) -> GPUQ_K_E_OVERFLOW; a latitude
 * outside [-90, 90] or a non-finite coordinate -> GPUQ_K_E_RANGE. On error
 * the output may be partly written and is to be discarded.
 *
 * normalize's sums are compensated, binned against overflow and underflow,
 * and zscore is a corrected two-pass: the rules are in norm_math.h, shared
 * with normalize.cu. The other ops sum at most d terms in plain double;
 * pairwise in eight independent lanes added up at the end (the adds do not
 * wait on each other, and vectorize), cosine with each row's norm taken
 * once; chebyshev takes the lanes' max instead, minkowski sums |x-y|^p and
 * takes the root (metric_math.h, shared with the CUDA kernels).
 *
 * Thread-safe: no global state; no allocation but cosine pairwise's row
 * norms (without memory for them, per pair). Typed inner loops are stamped
 * out once per dtype by the CPU_REF_TYPED macro; the scalar math they share
 * lives in plain double helpers.
 */
#include "gpuq_kernels.h"
#include "metric_math.h"
#include "norm_math.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define DEG2RAD (3.14159265358979323846 / 180.0)

static int dt_valid(int dt)
{
    return dt == GPUQ_K_F32 || dt == GPUQ_K_F64;
}

/* a * b without wrapping; 0 on overflow or a zero factor. */
static uint64_t mul_size(uint64_t a, uint64_t b)
{
    if (a == 0 || b == 0 || a > UINT64_MAX / b)
        return 0;
    return a * b;
}

/* ---- haversine, all in double ---- */

static int lat_ok(double lat)
{
    return isfinite(lat) && fabs(lat) <= 90.0;
}

static int coord_ok(double lat, double lon)
{
    return lat_ok(lat) && isfinite(lon);
}

/* Great-circle distance from the precomputed parts of two points: radians
 * phi1/phi2 (with cos_phi1/cos_phi2) and the longitude difference dlam. */
static double hav_core(double phi1, double cos_phi1, double phi2, double cos_phi2, double dlam,
                       double radius)
{
    double sp = sin((phi2 - phi1) * 0.5);
    double sl = sin(dlam * 0.5);
    double a = sp * sp + cos_phi1 * cos_phi2 * sl * sl;
    return 2.0 * radius * asin(fmin(1.0, sqrt(a)));
}

static double hav_deg(double lat1, double lon1, double lat2, double lon2, double radius)
{
    double p1 = lat1 * DEG2RAD, p2 = lat2 * DEG2RAD;
    return hav_core(p1, cos(p1), p2, cos(p2), lon2 * DEG2RAD - lon1 * DEG2RAD, radius);
}

/* numpy.linspace point i of n from lo to hi (the last is exactly hi). */
static double linspace_at(double lo, double hi, uint64_t n, uint64_t i)
{
    if (n == 1)
        return lo;
    if (i == n - 1)
        return hi;
    return (double)i * ((hi - lo) / (double)(n - 1)) + lo;
}

/* ---- pairwise, accumulators in double ---- */

typedef struct pair_acc {
    double acc;    /* Σ(x-y)², Σ|x-y|, x·y, max|x-y| or Σ|x-y|^p */
    double nx, ny; /* Σx², Σy² (cosine only) */
} pair_acc;

/* Lanes of a pairwise sum (dot_*, pair_acc_*): eight partial sums a0..a7,
 * each its own variable (registers, and nothing for a sanitizer to check
 * on every add), stepped by LANES8(F) over x[k .. k+7] and y[k .. k+7] and
 * added in pairs at the end. */
#define PAIR_LANES 8
#define LANES8(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7)
#define LANE_ZERO(l) double a##l = 0.0;
#define LANE_DOT(l) a##l += (double)x[k + l] * (double)y[k + l];
#define LANE_ABS(l) a##l += fabs((double)x[k + l] - (double)y[k + l]);
#define LANE_SQ(l)                                                                                 \
    {                                                                                              \
        double t##l = (double)x[k + l] - (double)y[k + l];                                         \
        a##l += t##l * t##l;                                                                       \
    }
#define LANE_MAX(l) a##l = mm_max(a##l, fabs((double)x[k + l] - (double)y[k + l]));
#define LANE_POW(l) a##l += mm_term(fabs((double)x[k + l] - (double)y[k + l]), pw);
#define LANES_SUM (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))
#define LANES_MAX                                                                                  \
    mm_max(mm_max(mm_max(a0, a1), mm_max(a2, a3)), mm_max(mm_max(a4, a5), mm_max(a6, a7)))

/* Finish one distance (pw: minkowski's p); returns GPUQ_K_E_ZERO on a zero
 * vector under cosine with zero_ok (the on_zero mode) 0, else gives it 1.0
 * (GPUQ_K_ON_ZERO_ZERO) or NaN (GPUQ_K_ON_ZERO_NAN). */
static int pair_finish(int metric, double pw, int zero_ok, const pair_acc *p, double *d)
{
    switch (metric) {
    case GPUQ_K_EUCLIDEAN:
        *d = sqrt(p->acc);
        return GPUQ_K_OK;
    case GPUQ_K_MINKOWSKI:
        *d = mm_root(p->acc, pw);
        return GPUQ_K_OK;
    case GPUQ_K_COSINE:
        if (p->nx == 0.0 || p->ny == 0.0) {
            *d = zero_ok == GPUQ_K_ON_ZERO_NAN ? NAN : 1.0;
            return zero_ok ? GPUQ_K_OK : GPUQ_K_E_ZERO;
        }
        *d = 1.0 - p->acc / (sqrt(p->nx) * sqrt(p->ny));
        return GPUQ_K_OK;
    default: /* sqeuclidean, manhattan, chebyshev */
        *d = p->acc;
        return GPUQ_K_OK;
    }
}

/* ---- typed loops, one instance per dtype ---- */

/* One pass of normalize over a row (a, cols, bins, c, m0 in scope) into
 * *acc, in a constant MODE so that nm_acc_add inlines without its switch.
 * Four accumulators take every fourth element: the compensated sums are
 * latency-bound chains, and four of them run side by side; they merge at
 * the end (unused fields are identities). */
#define ROW_PASS_LOOP(MODE)                                                                        \
    do {                                                                                           \
        nm_acc q0_, q1_, q2_, q3_;                                                                 \
        uint64_t j_ = 0;                                                                           \
        nm_acc_init(&q0_);                                                                         \
        nm_acc_init(&q1_);                                                                         \
        nm_acc_init(&q2_);                                                                         \
        nm_acc_init(&q3_);                                                                         \
        for (; j_ + 4 <= cols; j_ += 4) {                                                          \
            nm_acc_add(&q0_, MODE, bins, (double)a[j_], c, m0);                                    \
            nm_acc_add(&q1_, MODE, bins, (double)a[j_ + 1], c, m0);                                \
            nm_acc_add(&q2_, MODE, bins, (double)a[j_ + 2], c, m0);                                \
            nm_acc_add(&q3_, MODE, bins, (double)a[j_ + 3], c, m0);                                \
        }                                                                                          \
        for (; j_ < cols; j_++)                                                                    \
            nm_acc_add(&q0_, MODE, bins, (double)a[j_], c, m0);                                    \
        nm_acc_merge(&q0_, &q1_, 3, 1);                                                            \
        nm_acc_merge(&q2_, &q3_, 3, 1);                                                            \
        nm_acc_merge(&q0_, &q2_, 3, 1);                                                            \
        *acc = q0_;                                                                                \
    } while (0)

#define CPU_REF_TYPED(T, SFX)                                                                      \
    /* One pass over a row in a mode; the switch is outside the loop so                            \
     * that each loop inlines nm_acc_add with a constant mode. */                                  \
    static void row_pass_##SFX(const T *a, uint64_t cols, int mode, double c, double m0,           \
                               nm_acc *acc)                                                        \
    {                                                                                              \
        const int bins = sizeof(T) == sizeof(double);                                              \
        switch (mode) {                                                                            \
        case NM_SUM:                                                                               \
            ROW_PASS_LOOP(NM_SUM);                                                                 \
            break;                                                                                 \
        case NM_ABS:                                                                               \
            ROW_PASS_LOOP(NM_ABS);                                                                 \
            break;                                                                                 \
        case NM_SQ:                                                                                \
            ROW_PASS_LOOP(NM_SQ);                                                                  \
            break;                                                                                 \
        case NM_MINMAX:                                                                            \
            ROW_PASS_LOOP(NM_MINMAX);                                                              \
            break;                                                                                 \
        case NM_ZS1:                                                                               \
            ROW_PASS_LOOP(NM_ZS1);                                                                 \
            break;                                                                                 \
        default:                                                                                   \
            ROW_PASS_LOOP(NM_ZS2);                                                                 \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static nm_affine row_affine_##SFX(int method, const T *a, uint64_t cols)                       \
    {                                                                                              \
        nm_acc acc;                                                                                \
        nm_affine f;                                                                               \
        row_pass_##SFX(a, cols, nm_first_mode(method), 1.0, 0.0, &acc);                            \
        if (method != GPUQ_K_ZSCORE)                                                               \
            return nm_finish(method, &acc);                                                        \
        if (!nm_zscore_stage0(&acc, cols, &f)) {                                                   \
            row_pass_##SFX(a, cols, NM_ZS2, f.pre, f.sh, &acc);                                    \
            nm_zscore_stage1(&acc, cols, &f);                                                      \
        }                                                                                          \
        return f;                                                                                  \
    }                                                                                              \
                                                                                                   \
    /* A finished row's values out (o NULL: only checked): a zero row (den                         \
     * 0, zero_ok) filled with zeros or NaN, else f applied to each value. */                      \
    static int row_apply_##SFX(const nm_affine *f, int zero_ok, const T *a, T *o, uint64_t n)      \
    {                                                                                              \
        if (f->den == 0.0) {                                                                       \
            for (uint64_t j = 0; o && j < n; j++) /* zeros, or NaN for "nan" */                    \
                o[j] = (T)(zero_ok == GPUQ_K_ON_ZERO_NAN ? NAN : 0.0);                             \
            return GPUQ_K_OK;                                                                      \
        }                                                                                          \
        for (uint64_t j = 0; j < n; j++) {                                                         \
            T v = (T)nm_apply(f, (double)a[j]);                                                    \
            if (f->check && isinf(v))                                                              \
                return GPUQ_K_E_OVERFLOW;                                                          \
            if (o)                                                                                 \
                o[j] = v;                                                                          \
        }                                                                                          \
        return GPUQ_K_OK;                                                                          \
    }                                                                                              \
                                                                                                   \
    /* out NULL: only find the first failing row (*bad_row). */                                    \
    static int normalize_##SFX(int method, int zero_ok, const T *in, T *out, uint64_t rows,        \
                               uint64_t cols, uint64_t *bad_row)                                   \
    {                                                                                              \
        for (uint64_t r = 0; r < rows; r++) {                                                      \
            nm_affine f = row_affine_##SFX(method, in + r * cols, cols);                           \
            *bad_row = r;                                                                          \
            if (f.den == 0.0 && !zero_ok)                                                          \
                return GPUQ_K_E_ZERO;                                                              \
            int rc =                                                                               \
                row_apply_##SFX(&f, zero_ok, in + r * cols, out ? out + r * cols : NULL, cols);    \
            if (rc != GPUQ_K_OK)                                                                   \
                return rc;                                                                         \
        }                                                                                          \
        return GPUQ_K_OK;                                                                          \
    }                                                                                              \
                                                                                                   \
    static int haversine_to_##SFX(const T *pts, uint64_t n, double lat, double lon, double radius, \
                                  T *out)                                                          \
    {                                                                                              \
        double p2 = lat * DEG2RAD, c2 = cos(p2), l2 = lon * DEG2RAD;                               \
        for (uint64_t i = 0; i < n; i++) {                                                         \
            double la = (double)pts[2 * i], lo = (double)pts[2 * i + 1];                           \
            if (!coord_ok(la, lo))                                                                 \
                return GPUQ_K_E_RANGE;                                                             \
            double p1 = la * DEG2RAD;                                                              \
            out[i] = (T)hav_core(p1, cos(p1), p2, c2, l2 - lo * DEG2RAD, radius);                  \
        }                                                                                          \
        return GPUQ_K_OK;                                                                          \
    }                                                                                              \
                                                                                                   \
    static int haversine_pair_##SFX(const T *a, const T *b, uint64_t n, double radius, T *out)     \
    {                                                                                              \
        for (uint64_t i = 0; i < n; i++) {                                                         \
            double la1 = (double)a[2 * i], lo1 = (double)a[2 * i + 1];                             \
            double la2 = (double)b[2 * i], lo2 = (double)b[2 * i + 1];                             \
            if (!coord_ok(la1, lo1) || !coord_ok(la2, lo2))                                        \
                return GPUQ_K_E_RANGE;                                                             \
            out[i] = (T)hav_deg(la1, lo1, la2, lo2, radius);                                       \
        }                                                                                          \
        return GPUQ_K_OK;                                                                          \
    }                                                                                              \
                                                                                                   \
    static void grid_##SFX(double lat0, double lat1, uint64_t nlat, double lon0, double lon1,      \
                           uint64_t nlon, double lat, double lon, double radius, T *out)           \
    {                                                                                              \
        double p2 = lat * DEG2RAD, c2 = cos(p2), l2 = lon * DEG2RAD;                               \
        for (uint64_t i = 0; i < nlat; i++) {                                                      \
            double p1 = linspace_at(lat0, lat1, nlat, i) * DEG2RAD, c1 = cos(p1);                  \
            T *o = out + i * nlon;                                                                 \
            for (uint64_t j = 0; j < nlon; j++) {                                                  \
                double l1 = linspace_at(lon0, lon1, nlon, j) * DEG2RAD;                            \
                o[j] = (T)hav_core(p1, c1, p2, c2, l2 - l1, radius);                               \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* x . y over d, in double, in PAIR_LANES lanes (see pair_acc_*). */                           \
    static double dot_##SFX(const T *x, const T *y, uint64_t d)                                    \
    {                                                                                              \
        LANES8(LANE_ZERO)                                                                          \
        uint64_t body = d - d % PAIR_LANES, k;                                                     \
        for (k = 0; k < body; k += PAIR_LANES) {                                                   \
            LANES8(LANE_DOT)                                                                       \
        }                                                                                          \
        for (; k < d; k++)                                                                         \
            a0 += (double)x[k] * (double)y[k];                                                     \
        return LANES_SUM;                                                                          \
    }                                                                                              \
                                                                                                   \
    /* The sums over d run in PAIR_LANES independent lanes, added up at the end: no add            \
     * waits for the one before, so the loop runs at the adder's throughput (and the compiler      \
     * may put the lanes in vector registers), in double all the same. */                          \
    static void pair_acc_##SFX(int metric, double pw, const T *x, const T *y, uint64_t d,          \
                               pair_acc *p)                                                        \
    {                                                                                              \
        LANES8(LANE_ZERO)                                                                          \
        uint64_t body = d - d % PAIR_LANES, k;                                                     \
        p->nx = p->ny = 0.0;                                                                       \
        switch (metric) {                                                                          \
        case GPUQ_K_CHEBYSHEV:                                                                     \
            for (k = 0; k < body; k += PAIR_LANES) {                                               \
                LANES8(LANE_MAX)                                                                   \
            }                                                                                      \
            for (; k < d; k++)                                                                     \
                a0 = mm_max(a0, fabs((double)x[k] - (double)y[k]));                                \
            p->acc = LANES_MAX;                                                                    \
            return;                                                                                \
        case GPUQ_K_MINKOWSKI:                                                                     \
            for (k = 0; k < body; k += PAIR_LANES) {                                               \
                LANES8(LANE_POW)                                                                   \
            }                                                                                      \
            for (; k < d; k++)                                                                     \
                a0 += mm_term(fabs((double)x[k] - (double)y[k]), pw);                              \
            break;                                                                                 \
        case GPUQ_K_COSINE:                                                                        \
            p->acc = dot_##SFX(x, y, d);                                                           \
            p->nx = dot_##SFX(x, x, d);                                                            \
            p->ny = dot_##SFX(y, y, d);                                                            \
            return;                                                                                \
        case GPUQ_K_MANHATTAN:                                                                     \
            for (k = 0; k < body; k += PAIR_LANES) {                                               \
                LANES8(LANE_ABS)                                                                   \
            }                                                                                      \
            for (; k < d; k++)                                                                     \
                a0 += fabs((double)x[k] - (double)y[k]);                                           \
            break;                                                                                 \
        default: /* euclidean, sqeuclidean */                                                      \
            for (k = 0; k < body; k += PAIR_LANES) {                                               \
                LANES8(LANE_SQ)                                                                    \
            }                                                                                      \
            for (; k < d; k++) {                                                                   \
                double t = (double)x[k] - (double)y[k];                                            \
                a0 += t * t;                                                                       \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
        p->acc = LANES_SUM;                                                                        \
    }                                                                                              \
                                                                                                   \
    /* Cosine takes each row's norm once (y's rows first, then one row of x at a time): the        \
     * same sums pair_acc_* makes per pair. Without memory for y's, per pair. */                   \
    static int pairwise_##SFX(int metric, double pw, int zero_ok, const T *x, const T *y,          \
                              uint64_t m, uint64_t n, uint64_t d, T *out)                          \
    {                                                                                              \
        double *yn = metric == GPUQ_K_COSINE ? malloc(n * sizeof *yn) : NULL;                      \
        for (uint64_t j = 0; yn && j < n; j++)                                                     \
            yn[j] = dot_##SFX(y + j * d, y + j * d, d);                                            \
        for (uint64_t i = 0; i < m; i++) {                                                         \
            const T *xi = x + i * d;                                                               \
            double xn = yn ? dot_##SFX(xi, xi, d) : 0.0;                                           \
            for (uint64_t j = 0; j < n; j++) {                                                     \
                pair_acc p;                                                                        \
                double dist;                                                                       \
                if (yn)                                                                            \
                    p = (pair_acc){dot_##SFX(xi, y + j * d, d), xn, yn[j]};                        \
                else                                                                               \
                    pair_acc_##SFX(metric, pw, xi, y + j * d, d, &p);                              \
                int rc = pair_finish(metric, pw, zero_ok, &p, &dist);                              \
                if (rc != GPUQ_K_OK) {                                                             \
                    free(yn);                                                                      \
                    return rc;                                                                     \
                }                                                                                  \
                out[i * n + j] = (T)dist;                                                          \
            }                                                                                      \
        }                                                                                          \
        free(yn);                                                                                  \
        return GPUQ_K_OK;                                                                          \
    }

CPU_REF_TYPED(float, f32)
CPU_REF_TYPED(double, f64)

#undef CPU_REF_TYPED
#undef ROW_PASS_LOOP

/* ---- public entry points: validate, then dispatch on dtype ---- */

int gpuq_cpu_normalize(int dt, int method, int zero_ok, const void *in, void *out, uint64_t rows,
                       uint64_t cols)
{
    if (!dt_valid(dt) || method < GPUQ_K_SUM || method > GPUQ_K_ZSCORE || !in || !out ||
        mul_size(rows, cols) == 0 || zero_ok < 0 || zero_ok >= GPUQ_K_ON_ZERO_COUNT)
        return GPUQ_K_E_ARG;
    uint64_t row;
    if (dt == GPUQ_K_F32)
        return normalize_f32(method, zero_ok, in, out, rows, cols, &row);
    return normalize_f64(method, zero_ok, in, out, rows, cols, &row);
}

int gpuq_cpu_normalize_find(int dt, int method, const void *in, uint64_t rows, uint64_t cols,
                            uint64_t *row)
{
    uint64_t r = 0;
    int rc;
    if (!dt_valid(dt) || method < GPUQ_K_SUM || method > GPUQ_K_ZSCORE || !in || !row ||
        mul_size(rows, cols) == 0)
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        rc = normalize_f32(method, 0, in, NULL, rows, cols, &r);
    else
        rc = normalize_f64(method, 0, in, NULL, rows, cols, &r);
    *row = r;
    return rc;
}

/* ---- one long row in pieces (gpuq_kernels.h: gpuq_cpu_normalize_flat_*) ---- */

/* The scratch: the row's affine (set by the last finish), the zero_ok it
 * fills a zero row with, then one pass accumulator per piece. */
typedef struct flat_head {
    nm_affine f;
    int zero_ok;
} flat_head;

static uint64_t flat_pieces(uint64_t n, uint64_t piece)
{
    return piece ? n / piece + (n % piece != 0) : 0;
}

static nm_acc *flat_accs(void *scratch)
{
    return (nm_acc *)((char *)scratch + sizeof(flat_head));
}

uint64_t gpuq_cpu_normalize_flat_scratch_bytes(uint64_t n, uint64_t piece)
{
    uint64_t np = flat_pieces(n, piece);
    if (n == 0 || piece == 0 || np > (UINT64_MAX - sizeof(flat_head)) / sizeof(nm_acc))
        return 0;
    return sizeof(flat_head) + np * sizeof(nm_acc);
}

int gpuq_cpu_normalize_flat_reduce(int dt, int method, int pass, const void *in, uint64_t n,
                                   uint64_t piece, uint64_t p, void *scratch)
{
    if (!dt_valid(dt) || method < GPUQ_K_SUM || method > GPUQ_K_ZSCORE || !in || !scratch ||
        n == 0 || p >= flat_pieces(n, piece) || pass < 0 || pass > (method == GPUQ_K_ZSCORE))
        return GPUQ_K_E_ARG;
    const flat_head *hd = scratch;
    int mode = pass ? NM_ZS2 : nm_first_mode(method);
    double c = pass ? hd->f.pre : 1.0, m0 = pass ? hd->f.sh : 0.0;
    uint64_t v0 = p * piece, nv = n - v0 < piece ? n - v0 : piece;
    if (dt == GPUQ_K_F32)
        row_pass_f32((const float *)in + v0, nv, mode, c, m0, &flat_accs(scratch)[p]);
    else
        row_pass_f64((const double *)in + v0, nv, mode, c, m0, &flat_accs(scratch)[p]);
    return GPUQ_K_OK;
}

int gpuq_cpu_normalize_flat_finish(int dt, int method, int zero_ok, int pass, uint64_t n,
                                   uint64_t piece, void *scratch, int *more)
{
    uint64_t np = flat_pieces(n, piece);
    if (!dt_valid(dt) || method < GPUQ_K_SUM || method > GPUQ_K_ZSCORE || !scratch || !more ||
        n == 0 || np == 0 || zero_ok < 0 || zero_ok >= GPUQ_K_ON_ZERO_COUNT || pass < 0 ||
        pass > (method == GPUQ_K_ZSCORE))
        return GPUQ_K_E_ARG;
    flat_head *hd = scratch;
    const nm_acc *acc = flat_accs(scratch);
    nm_acc q = acc[0];
    for (uint64_t i = 1; i < np; i++) /* in piece order: the same bits on any threads */
        nm_acc_merge(&q, &acc[i], 3, 1);
    *more = 0;
    if (pass == 1)
        nm_zscore_stage1(&q, n, &hd->f);
    else if (method != GPUQ_K_ZSCORE)
        hd->f = nm_finish(method, &q);
    else if (!nm_zscore_stage0(&q, n, &hd->f))
        *more = 1;
    hd->zero_ok = zero_ok;
    return !*more && hd->f.den == 0.0 && !zero_ok ? GPUQ_K_E_ZERO : GPUQ_K_OK;
}

int gpuq_cpu_normalize_flat_scale(int dt, const void *in, void *out, uint64_t n, uint64_t v0,
                                  uint64_t nv, const void *scratch)
{
    if (!dt_valid(dt) || !in || !out || !scratch || v0 > n || nv > n - v0)
        return GPUQ_K_E_ARG;
    const flat_head *hd = scratch;
    if (dt == GPUQ_K_F32)
        return row_apply_f32(&hd->f, hd->zero_ok, (const float *)in + v0, (float *)out + v0, nv);
    return row_apply_f64(&hd->f, hd->zero_ok, (const double *)in + v0, (double *)out + v0, nv);
}

static int radius_ok(double radius)
{
    return isfinite(radius) && radius > 0.0;
}

int gpuq_cpu_haversine_to(int dt, const void *pts, uint64_t n, double lat, double lon,
                          double radius, void *out)
{
    if (!dt_valid(dt) || !pts || !out || n == 0 || n > UINT64_MAX / 2 || !radius_ok(radius))
        return GPUQ_K_E_ARG;
    if (!coord_ok(lat, lon))
        return GPUQ_K_E_RANGE;
    if (dt == GPUQ_K_F32)
        return haversine_to_f32(pts, n, lat, lon, radius, out);
    return haversine_to_f64(pts, n, lat, lon, radius, out);
}

int gpuq_cpu_haversine_pair(int dt, const void *a, const void *b, uint64_t n, double radius,
                            void *out)
{
    if (!dt_valid(dt) || !a || !b || !out || n == 0 || n > UINT64_MAX / 2 || !radius_ok(radius))
        return GPUQ_K_E_ARG;
    if (dt == GPUQ_K_F32)
        return haversine_pair_f32(a, b, n, radius, out);
    return haversine_pair_f64(a, b, n, radius, out);
}

int gpuq_cpu_grid(int dt, double lat0, double lat1, uint64_t nlat, double lon0, double lon1,
                  uint64_t nlon, double lat, double lon, double radius, void *out)
{
    if (!dt_valid(dt) || !out || mul_size(nlat, nlon) == 0 || !radius_ok(radius))
        return GPUQ_K_E_ARG;
    if (!coord_ok(lat0, lon0) || !coord_ok(lat1, lon1) || !coord_ok(lat, lon))
        return GPUQ_K_E_RANGE;
    if (dt == GPUQ_K_F32)
        grid_f32(lat0, lat1, nlat, lon0, lon1, nlon, lat, lon, radius, out);
    else
        grid_f64(lat0, lat1, nlat, lon0, lon1, nlon, lat, lon, radius, out);
    return GPUQ_K_OK;
}

int gpuq_cpu_pairwise(int dt, int metric, double p, int on_zero, const void *x, const void *y,
                      uint64_t m, uint64_t n, uint64_t d, void *out)
{
    if (!dt_valid(dt) || !gpuq_metric_args_ok(metric, p, on_zero) || !x || !y || !out ||
        mul_size(m, d) == 0 || mul_size(n, d) == 0 || mul_size(m, n) == 0)
        return GPUQ_K_E_ARG;
    metric = gpuq_metric_resolve(metric, p);
    if (dt == GPUQ_K_F32)
        return pairwise_f32(metric, p, on_zero, x, y, m, n, d, out);
    return pairwise_f64(metric, p, on_zero, x, y, m, n, d, out);
}
