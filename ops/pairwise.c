/* SPDX-License-Identifier: Apache-2.0 */
/* pairwise.c - the pairwise op: distances between every row of X [m, d] and
 * every row of Y [n, d] under "metric" (scipy cdist definitions), output
 * [m, n] in the input dtype; "p" is minkowski's exponent. A zero vector
 * under cosine is zero_norm unless "on_zero" is "zero" (then its distances
 * are 1) or "nan" (NaN, as scipy's cdist).
 */
enum { K_METRIC, K_ON_ZERO, K_P, K_COUNT_ };

/* ---------------------------------------------------------------- proto */
#ifdef GPUQ_OP_PROTO
#include "errors.h"
#include "gpuq_kernel_enums.h"
#include "op_def.h"

_Static_assert((int)GPUQ_METRIC_COUNT == GPUQ_K_METRIC_COUNT &&
                   (int)GPUQ_METRIC_EUCLIDEAN == GPUQ_K_EUCLIDEAN &&
                   (int)GPUQ_METRIC_SQEUCLIDEAN == GPUQ_K_SQEUCLIDEAN &&
                   (int)GPUQ_METRIC_COSINE == GPUQ_K_COSINE &&
                   (int)GPUQ_METRIC_MANHATTAN == GPUQ_K_MANHATTAN &&
                   (int)GPUQ_METRIC_CHEBYSHEV == GPUQ_K_CHEBYSHEV &&
                   (int)GPUQ_METRIC_MINKOWSKI == GPUQ_K_MINKOWSKI,
               "proto/header.h's GPUQ_METRIC_* differ from the kernels' GPUQ_K_* metrics");

/* Names other libraries give the metrics: scipy's cdist "cityblock",
 * "chebychev" and "pnorm", and scikit-learn's "l1" and "l2" (its
 * pairwise_distances also takes "cityblock"). Only whole words: scipy's
 * short forms ("c", "e", "cos", "cheb", "mi", ...) are not taken. */
const gpuq_enum_alias op_metric_aliases[OP_METRIC_NALIASES] = {
    {"cityblock", GPUQ_K_MANHATTAN}, {"l1", GPUQ_K_MANHATTAN},    {"l2", GPUQ_K_EUCLIDEAN},
    {"chebychev", GPUQ_K_CHEBYSHEV}, {"pnorm", GPUQ_K_MINKOWSKI},
};

static const gpuq_key_def keys[K_COUNT_] = {
    [K_METRIC] = OP_METRIC_KEY_DEF,
    [K_ON_ZERO] = OP_ON_ZERO_KEY_DEF,
    [K_P] = OP_P_KEY_DEF,
};

const char *gpuq_metric_name(gpuq_metric m)
{
    return (unsigned)m < GPUQ_K_METRIC_COUNT ? op_metric_names[m] : NULL;
}

int gpuq_metric_parse(const char *s, size_t len)
{
    return op_enum_lookup(&keys[K_METRIC], s, len);
}

static int check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                 gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    int rc;
    uint64_t out;
    if ((rc = op_check_dtype(req, msg, cap)) != 0)
        return rc;
    if (!gpuq_request_arg_isset(req, K_METRIC)) /* required: no default */
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "pairwise needs \"metric\" (euclidean, sqeuclidean, cosine, manhattan, "
                        "chebyshev or minkowski)");
    if ((rc = op_check_metric_p(req, K_METRIC, K_P, msg, cap)) != 0)
        return rc;
    if ((rc = op_check_xy(req, sz, in_elems, msg, cap)) != 0)
        return rc;
    if (!op_mul(sz->m, sz->n, &out))
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "pairwise output [%llu, %llu] overflows",
                        (unsigned long long)sz->m, (unsigned long long)sz->n);
    op_set_out(sz, 0, GPUQ_DT_NONE, 2, sz->m, sz->n);
    return 0;
}

const gpuq_op_def op_def_pairwise = {.op = GPUQ_OP_PAIRWISE,
                                     .name = "pairwise",
                                     .flags = GPUQ_OPF_COMPUTE | GPUQ_OPF_SHAPES,
                                     .keys = keys,
                                     .nkeys = K_COUNT_,
                                     .check = check};
#endif

/* -------------------------------------------------------------- backend */
#ifdef GPUQ_OP_BACKEND
#include <string.h>

#include "cpu_fast.h"
#include "op_backend.h"

/* Query rows [r0, r0 + nr) against all of Y (each distance on its own, by the
 * tiled kernel of kernels/cpu_fast.c). */
static int run_cpu_rows(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h,
                        const op_rows *rw)
{
    int on_zero = gpuq_request_arg_enum(r, K_ON_ZERO);
    double p = gpuq_request_arg_double(r, K_P);
    size_t es = gpuq_dtype_size(r->dtype);
    return gpuq_cpu_pairwise_fast(op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METRIC), p,
                                  on_zero, (const char *)h->a + (size_t)(rw->r0 * sz->d) * es, h->b,
                                  rw->nr, sz->n, sz->d,
                                  (char *)h->out[0] + (size_t)(rw->r0 * sz->n) * es);
}

static int run_cpu(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h)
{
    op_rows all = {.r0 = 0, .nr = sz->m, .chunk = sz->m};
    return run_cpu_rows(r, sz, h, &all);
}

#ifdef GPUQ_HAVE_CUDA
static int launch_cuda(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                       const op_bufs *d)
{
    return gpuq_cuda_pairwise(ctx, op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METRIC),
                              gpuq_request_arg_double(r, K_P), gpuq_request_arg_enum(r, K_ON_ZERO),
                              d->a, d->b, sz->m, sz->n, sz->d, d->out[0]);
}

/* Query rows [r0, r0 + nr) against all of Y: the rows' pointers, m = nr.
 * The tiled kernel computes each distance on its own (bit for bit the
 * whole run's); the float64 cosine GEMM route (cuBLAS) may choose another
 * algorithm for another m, so its values agree to within its bound. */
static int launch_cuda_rows(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                            const op_bufs *d, const op_rows *rw)
{
    int on_zero = gpuq_request_arg_enum(r, K_ON_ZERO);
    double p = gpuq_request_arg_double(r, K_P);
    size_t es = gpuq_dtype_size(r->dtype);
    return gpuq_cuda_pairwise(ctx, op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METRIC), p,
                              on_zero, (const char *)d->a + (size_t)(rw->r0 * sz->d) * es, d->b,
                              rw->nr, sz->n, sz->d,
                              (char *)d->out[0] + (size_t)(rw->r0 * sz->n) * es);
}
#endif

/* Cross-session row batches: the tiled kernel and the CPU reference
 * compute each distance on its own; float64 cosine may take the GEMM
 * route on CUDA (launch_cuda_rows), whose values depend on m, so it never
 * joins one (on either backend: one rule for both). */
static int row_batch(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp, uint64_t key[4])
{
    int metric = gpuq_request_arg_enum(r, K_METRIC);
    if (r->dtype == GPUQ_DT_F64 && metric == GPUQ_K_COSINE)
        return 0;
    double p = gpuq_request_arg_double(r, K_P);
    key[0] = (uint64_t)metric;
    key[1] = (uint64_t)gpuq_request_arg_enum(r, K_ON_ZERO);
    memcpy(&key[2], &p, sizeof p); /* minkowski's p: only equal p batch together */
    key[3] = 0;
    return op_row_split(sz, sp);
}

/* X splits by rows; Y goes up whole first (every row needs all of it). */
static int cuda_split(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp)
{
    (void)r;
    return op_split_rows(sz, sz->m, 0, sp);
}

const op_backend_def op_backend_pairwise = {.run_cpu = run_cpu,
                                            .run_cpu_rows = run_cpu_rows,
#ifdef GPUQ_HAVE_CUDA
                                            .launch_cuda = launch_cuda,
                                            .launch_cuda_rows = launch_cuda_rows,
#endif
                                            .cuda_split = cuda_split,
                                            .row_batch = row_batch,
                                            .kernel_message = op_cosine_zero_message};
#endif

/* ------------------------------------------------------------------ ctl */
#ifdef GPUQ_OP_CTL
#include "op_ctl.h"

static int exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *metric_s = NULL, *p_s = NULL, *on_zero_s = NULL, *out_path = NULL;
    bool timing = false;
    const ctl_opt opts[] = {{"--metric", &metric_s, NULL},
                            {"--p", &p_s, NULL},
                            {"--on-zero", &on_zero_s, NULL},
                            {"-o", &out_path, NULL},
                            {"--output", &out_path, NULL}};
    const char *pos[2];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 5, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!out_path)
        return ctl_usage_error(ctx, "-o OUT.npy is required");
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_PAIRWISE;
    if ((rc = ctl_check_files(ctx, pos, npos)))
        return rc;
    if ((rc = op_ctl_set_metric(ctx, &r, metric_s, p_s, on_zero_s)))
        return rc;
    npy_array x, y;
    if ((rc = op_ctl_load(pos[0], &x)))
        return rc;
    if ((rc = op_ctl_load(pos[1], &y)))
        goto out_x;
    if (x.dtype != y.dtype) {
        rc = ctl_failf(GPUQ_E_BAD_DTYPE, "%s and %s have different dtypes", pos[0], pos[1]);
        goto out_y;
    }
    r.dtype = x.dtype;
    op_ctl_shape_a(&r, &x);
    op_ctl_shape_b(&r, &y);
    uint64_t out_shape[2] = {x.shape[0], y.shape[0]};
    rc = op_ctl_run(ctx, &r, &x, &y, 2, out_shape, out_path, timing);
out_y:
    npy_free(&y);
out_x:
    npy_free(&x);
    return rc;
}

static const ctl_optdoc opts_doc[] = {
    OP_METRIC_OPT_DOCS,
    {"--on-zero", NULL, "error|zero|nan", "error",
     "A zero row under cosine: the error zero_norm, distance 1 (zero) or NaN (nan, as scipy)."},
    {"--timing", NULL, NULL, NULL,
     "Print gpuqd's timing of the request on stderr: queue, copies to and from the device, "
     "kernel, total."},
    {"--output", "-o", "OUT.npy", NULL, "Where to write the distances [m, n] (required)."},
    {NULL, NULL, NULL, NULL, NULL},
};

static const ctl_entry entry = {
    .name = "distance pairwise",
    .usage = "[--metric NAME] [--p P] [--on-zero error|zero|nan] [--timing] X.npy Y.npy -o "
             "OUT.npy",
    .min_args = 2,
    .max_args = 2,
    .exec = exec,
    .help = "Distances between every row of X and every row of Y (scipy's cdist).",
    .desc = "Compute on gpuqd the distance between every row of X.npy [m, d] and every row of "
            "Y.npy [n, d] (float32 or float64, the same dtype and d) and write them, [m, n] in "
            "that dtype, to OUT.npy: OUT[i, j] = dist(X[i], Y[j]), as "
            "scipy.spatial.distance.cdist(X, Y, metric) (minkowski: cdist(X, Y, 'minkowski', "
            "p=P)). A zero row under cosine is the error zero_norm unless --on-zero says "
            "otherwise.",
    .opts = opts_doc,
    .example = "gpuqctl distance pairwise X.npy Y.npy -o D.npy\n"
               "gpuqctl distance pairwise --metric=cityblock X.npy Y.npy -o D.npy\n"
               "gpuqctl distance pairwise --metric minkowski --p 3 X.npy Y.npy -o D.npy",
};
const ctl_entry *const op_ctl_pairwise = &entry;
#endif
