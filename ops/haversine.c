/* SPDX-License-Identifier: Apache-2.0 */
/* haversine.c - the haversine op: great-circle distances from points A
 * [n, 2] (lat, lon degrees) to one point "to", or pairwise to B [n, 2].
 * Output [n] in the input dtype, in the unit of "radius" (km by default).
 * A latitude beyond 90 or a non-finite coordinate is out_of_range.
 */
enum { K_TO, K_RADIUS, K_COUNT_ };

/* ---------------------------------------------------------------- proto */
#ifdef GPUQ_OP_PROTO
#include "errors.h"
#include "op_def.h"

static const gpuq_key_def keys[K_COUNT_] = {
    [K_TO] = {"to", GPUQ_ARG_PAIR, 0, {.pair = {30.0, 101.0}}, NULL, 0, NULL, 0},
    [K_RADIUS] = {"radius",
                  GPUQ_ARG_DOUBLE,
                  GPUQ_KEYF_ENCODE_DEFAULT,
                  {.d = GPUQ_EARTH_RADIUS_KM},
                  NULL,
                  0,
                  NULL,
                  0},
};

static int check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                 gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    int rc;
    bool has_to = gpuq_request_arg_isset(req, K_TO);
    double lat, lon;
    gpuq_request_arg_pair(req, K_TO, &lat, &lon);
    if ((rc = op_check_dtype(req, msg, cap)) != 0)
        return rc;
    if (req->ndim_a != 2 || req->shape_a[1] != 2)
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "haversine needs \"shape\" [n, 2] (lat, lon)");
    if (has_to && req->ndim_b != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "haversine takes either \"to\" or \"shape_b\", not both");
    if (!has_to && req->ndim_b == 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "haversine needs \"to\" or \"shape_b\"");
    if (req->ndim_b != 0 &&
        (req->ndim_b != 2 || req->shape_b[0] != req->shape_a[0] || req->shape_b[1] != 2))
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE,
                        "haversine \"shape_b\" must equal \"shape\" [%llu, 2]",
                        (unsigned long long)req->shape_a[0]);
    if (has_to && (rc = op_check_to(lat, lon, msg, cap)) != 0)
        return rc;
    if ((rc = op_check_radius(gpuq_request_arg_double(req, K_RADIUS), msg, cap)) != 0)
        return rc;
    if ((rc = op_check_nonempty("shape", 2, req->shape_a, msg, cap)) != 0)
        return rc;
    sz->n = req->shape_a[0];
    uint64_t per = req->ndim_b ? 4 : 2;
    if (!op_mul(sz->n, per, in_elems))
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape [%llu, 2] overflows",
                        (unsigned long long)sz->n);
    op_set_out(sz, 0, GPUQ_DT_NONE, 1, sz->n, 0);
    return 0;
}

const gpuq_op_def op_def_haversine = {.op = GPUQ_OP_HAVERSINE,
                                      .name = "haversine",
                                      .flags = GPUQ_OPF_COMPUTE | GPUQ_OPF_SHAPES,
                                      .keys = keys,
                                      .nkeys = K_COUNT_,
                                      .check = check};
#endif

/* -------------------------------------------------------------- backend */
#ifdef GPUQ_OP_BACKEND
#include "op_backend.h"

/* Points [r0, r0 + nr) (and B's, row-aligned), each on its own. */
static int run_cpu_rows(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h,
                        const op_rows *rw)
{
    double lat, lon, radius = gpuq_request_arg_double(r, K_RADIUS);
    int dt = op_kernel_dtype(r);
    size_t es = gpuq_dtype_size(r->dtype), at = (size_t)rw->r0 * es;
    (void)sz;
    gpuq_request_arg_pair(r, K_TO, &lat, &lon);
    if (gpuq_request_arg_isset(r, K_TO))
        return gpuq_cpu_haversine_to(dt, (const char *)h->a + 2 * at, rw->nr, lat, lon, radius,
                                     (char *)h->out[0] + at);
    return gpuq_cpu_haversine_pair(dt, (const char *)h->a + 2 * at, (const char *)h->b + 2 * at,
                                   rw->nr, radius, (char *)h->out[0] + at);
}

static int run_cpu(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h)
{
    op_rows all = {.r0 = 0, .nr = sz->n, .chunk = sz->n};
    return run_cpu_rows(r, sz, h, &all);
}

#ifdef GPUQ_HAVE_CUDA
static int launch_cuda(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                       const op_bufs *d)
{
    double lat, lon, radius = gpuq_request_arg_double(r, K_RADIUS);
    int dt = op_kernel_dtype(r);
    gpuq_request_arg_pair(r, K_TO, &lat, &lon);
    if (gpuq_request_arg_isset(r, K_TO))
        return gpuq_cuda_haversine_to(ctx, dt, d->a, sz->n, lat, lon, radius, d->out[0]);
    return gpuq_cuda_haversine_pair(ctx, dt, d->a, d->b, sz->n, radius, d->out[0]);
}

/* A range of points (and of B's, row-aligned with A): each distance is
 * computed on its own. */
static int launch_cuda_rows(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                            const op_bufs *d, const op_rows *rw)
{
    double lat, lon, radius = gpuq_request_arg_double(r, K_RADIUS);
    int dt = op_kernel_dtype(r);
    size_t es = gpuq_dtype_size(r->dtype), at = (size_t)rw->r0 * es;
    (void)sz;
    gpuq_request_arg_pair(r, K_TO, &lat, &lon);
    if (gpuq_request_arg_isset(r, K_TO))
        return gpuq_cuda_haversine_to(ctx, dt, (const char *)d->a + 2 * at, rw->nr, lat, lon,
                                      radius, (char *)d->out[0] + at);
    return gpuq_cuda_haversine_pair(ctx, dt, (const char *)d->a + 2 * at,
                                    (const char *)d->b + 2 * at, rw->nr, radius,
                                    (char *)d->out[0] + at);
}
#endif

/* Points are independent; B (pairs) goes up with A, chunk by chunk. */
static int cuda_split(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp)
{
    (void)r;
    return op_split_rows(sz, sz->n, 1, sp);
}

const op_backend_def op_backend_haversine = {
    .run_cpu = run_cpu,
    .run_cpu_rows = run_cpu_rows,
#ifdef GPUQ_HAVE_CUDA
    .launch_cuda = launch_cuda,
    .launch_cuda_rows = launch_cuda_rows,
#endif
    .cuda_split = cuda_split,
};
#endif

/* ------------------------------------------------------------------ ctl */
#ifdef GPUQ_OP_CTL
#include "op_ctl.h"

static int exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *to_s = NULL, *radius_s = NULL, *out_path = NULL;
    bool timing = false;
    const ctl_opt opts[] = {{"--to", &to_s, NULL},
                            {"--radius", &radius_s, NULL},
                            {"-o", &out_path, NULL},
                            {"--output", &out_path, NULL}};
    const char *pos[2];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 4, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!out_path)
        return ctl_usage_error(ctx, "-o OUT.npy is required");
    if ((rc = ctl_check_files(ctx, pos, npos)))
        return rc;
    if (npos == 1 && !to_s)
        return ctl_usage_error(ctx, "one points file needs --to LAT,LON");
    if (npos == 2 && to_s)
        return ctl_usage_error(ctx, "--to goes with one points file, not two (%s and %s)", pos[0],
                               pos[1]);
    double lat = 0, lon = 0, radius = GPUQ_EARTH_RADIUS_KM;
    if (to_s && op_ctl_parse_point(to_s, &lat, &lon))
        return ctl_usage_error(ctx, "bad --to '%s' (LAT,LON: two numbers, e.g. --to 30,101)", to_s);
    if (radius_s && ctl_parse_double(radius_s, &radius))
        return ctl_usage_error(ctx, "bad --radius '%s' (a number, e.g. 6371.0088)", radius_s);
    npy_array a, b;
    if ((rc = op_ctl_load(pos[0], &a)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_HAVERSINE;
    r.dtype = a.dtype;
    op_ctl_shape_a(&r, &a);
    gpuq_request_set_double(&r, "radius", radius);
    uint64_t out_shape[1] = {a.shape[0]};
    if (npos == 1) {
        gpuq_request_set_pair(&r, "to", lat, lon);
        rc = op_ctl_run(ctx, &r, &a, NULL, 1, out_shape, out_path, timing);
    } else {
        if ((rc = op_ctl_load(pos[1], &b)))
            goto out_a;
        if (b.dtype != a.dtype) {
            rc = ctl_failf(GPUQ_E_BAD_DTYPE, "%s and %s have different dtypes", pos[0], pos[1]);
        } else {
            op_ctl_shape_b(&r, &b);
            rc = op_ctl_run(ctx, &r, &a, &b, 1, out_shape, out_path, timing);
        }
        npy_free(&b);
    }
out_a:
    npy_free(&a);
    return rc;
}

static const ctl_optdoc opts_doc[] = {
    {"--to", NULL, "LAT,LON", NULL,
     "The point every distance is to, in degrees (latitude -90 .. 90); with one points file "
     "(required then), not with two."},
    {"--radius", NULL, "KM", "6371.0088",
     "The sphere's radius, in the unit the distances come in; the default is the Earth's "
     "mean radius in km."},
    {"--timing", NULL, NULL, NULL,
     "Print gpuqd's timing of the request on stderr: queue, copies to and from the device, "
     "kernel, total."},
    {"--output", "-o", "OUT.npy", NULL, "Where to write the distances [n] (required)."},
    {NULL, NULL, NULL, NULL, NULL},
};

static const ctl_entry entry = {
    .name = "distance haversine",
    .usage = "(--to LAT,LON POINTS.npy | A.npy B.npy) [--radius KM] [--timing] -o OUT.npy",
    .min_args = 1,
    .max_args = 2,
    .exec = exec,
    .help = "Great-circle distances from points to one point, or between pairs of points.",
    .desc = "Compute on gpuqd the great-circle (haversine) distance from each (lat, lon) row of "
            "POINTS.npy [n, 2] to the point --to, or from each row of A.npy [n, 2] to the same "
            "row of B.npy [n, 2], in degrees (float32 or float64), and write them, [n] in that "
            "dtype, to OUT.npy. A latitude beyond 90 or a coordinate that is not finite is the "
            "error out_of_range.",
    .opts = opts_doc,
    .example = "gpuqctl distance haversine --to 30,101 points.npy -o km.npy\n"
               "gpuqctl distance haversine --radius=3958.8 a.npy b.npy -o miles.npy",
};
const ctl_entry *const op_ctl_haversine = &entry;
#endif
