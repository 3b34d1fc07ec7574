/* SPDX-License-Identifier: Apache-2.0 */
/* grid.c - the grid op: distances from every point of a lat x lon grid
 * (numpy.linspace ends included) to one point "to". No payload; output
 * [lat n, lon n] in "dtype" (f64 when absent).
 */
enum { K_LAT, K_LON, K_TO, K_RADIUS, K_COUNT_ };

/* ---------------------------------------------------------------- proto */
#ifdef GPUQ_OP_PROTO
#include <math.h>

#include "errors.h"
#include "op_def.h"

static const gpuq_key_def keys[K_COUNT_] = {
    [K_LAT] = {"lat",
               GPUQ_ARG_RANGE,
               GPUQ_KEYF_ENCODE_DEFAULT,
               {.range = {-90.0, 90.0, 1000}},
               NULL,
               0,
               NULL,
               0},
    [K_LON] = {"lon",
               GPUQ_ARG_RANGE,
               GPUQ_KEYF_ENCODE_DEFAULT,
               {.range = {-180.0, 180.0, 1000}},
               NULL,
               0,
               NULL,
               0},
    [K_TO] =
        {"to", GPUQ_ARG_PAIR, GPUQ_KEYF_ENCODE_DEFAULT, {.pair = {30.0, 101.0}}, NULL, 0, NULL, 0},
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
    gpuq_arg_range la = gpuq_request_arg_range(req, K_LAT);
    gpuq_arg_range lo = gpuq_request_arg_range(req, K_LON);
    double lat, lon;
    gpuq_request_arg_pair(req, K_TO, &lat, &lon);
    if (req->dtype != GPUQ_DT_NONE && (rc = op_check_dtype(req, msg, cap)) != 0)
        return rc;
    if (payload_len != 0)
        return hdr_fail(msg, cap, GPUQ_E_SIZE_MISMATCH, "grid takes no payload but got %llu bytes",
                        (unsigned long long)payload_len);
    if (req->ndim_a != 0 || req->ndim_b != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "grid takes no \"shape\" or \"shape_b\"");
    if (!isfinite(la.start) || !isfinite(la.stop) || la.start < -90.0 || la.start > 90.0 ||
        la.stop < -90.0 || la.stop > 90.0)
        return hdr_fail(msg, cap, GPUQ_E_OUT_OF_RANGE,
                        "grid lat range [%g, %g] is outside [-90, 90]", la.start, la.stop);
    if (!isfinite(lo.start) || !isfinite(lo.stop))
        return hdr_fail(msg, cap, GPUQ_E_OUT_OF_RANGE, "grid lon range [%g, %g] is not finite",
                        lo.start, lo.stop);
    if ((rc = op_check_to(lat, lon, msg, cap)) != 0)
        return rc;
    if ((rc = op_check_radius(gpuq_request_arg_double(req, K_RADIUS), msg, cap)) != 0)
        return rc;
    if (la.n == 0 || lo.n == 0)
        return hdr_fail(msg, cap, GPUQ_E_EMPTY,
                        "grid needs lat n >= 1 and lon n >= 1 (got %llu, %llu)",
                        (unsigned long long)la.n, (unsigned long long)lo.n);
    uint64_t cells;
    if (!op_mul(la.n, lo.n, &cells))
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "grid %llu x %llu overflows",
                        (unsigned long long)la.n, (unsigned long long)lo.n);
    sz->rows = la.n;
    sz->cols = lo.n;
    *in_elems = 0;
    op_set_out(sz, 0, GPUQ_DT_NONE, 2, la.n, lo.n);
    return 0;
}

const gpuq_op_def op_def_grid = {.op = GPUQ_OP_GRID,
                                 .name = "grid",
                                 .flags = GPUQ_OPF_COMPUTE,
                                 .keys = keys,
                                 .nkeys = K_COUNT_,
                                 .check = check,
                                 .default_dtype = GPUQ_DT_F64};
#endif

/* -------------------------------------------------------------- backend */
#ifdef GPUQ_OP_BACKEND
#include "op_backend.h"

static int run_cpu(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h)
{
    gpuq_arg_range la = gpuq_request_arg_range(r, K_LAT), lo = gpuq_request_arg_range(r, K_LON);
    double lat, lon;
    gpuq_request_arg_pair(r, K_TO, &lat, &lon);
    return gpuq_cpu_grid(op_kernel_dtype(r), la.start, la.stop, la.n, lo.start, lo.stop, lo.n, lat,
                         lon, gpuq_request_arg_double(r, K_RADIUS), h->out[0]);
}

#ifdef GPUQ_HAVE_CUDA
static int launch_cuda(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                       const op_bufs *d)
{
    gpuq_arg_range la = gpuq_request_arg_range(r, K_LAT), lo = gpuq_request_arg_range(r, K_LON);
    double lat, lon;
    gpuq_request_arg_pair(r, K_TO, &lat, &lon);
    return gpuq_cuda_grid(ctx, op_kernel_dtype(r), la.start, la.stop, la.n, lo.start, lo.stop, lo.n,
                          lat, lon, gpuq_request_arg_double(r, K_RADIUS), d->out[0]);
}

/* Latitude rows [r0, r0 + nr): the kernel places them in the whole grid. */
static int launch_cuda_rows(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                            const op_bufs *d, const op_rows *rw)
{
    gpuq_arg_range la = gpuq_request_arg_range(r, K_LAT), lo = gpuq_request_arg_range(r, K_LON);
    double lat, lon;
    gpuq_request_arg_pair(r, K_TO, &lat, &lon);
    size_t at = (size_t)(rw->r0 * sz->cols) * (sz->out[0].bytes / (sz->rows * sz->cols));
    return gpuq_cuda_grid_rows(ctx, op_kernel_dtype(r), la.start, la.stop, la.n, rw->r0, rw->nr,
                               lo.start, lo.stop, lo.n, lat, lon,
                               gpuq_request_arg_double(r, K_RADIUS), (char *)d->out[0] + at);
}
#endif

/* No input; the output splits by latitude rows, computed and downloaded
 * in turn. */
static int cuda_split(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp)
{
    (void)r;
    return op_split_rows(sz, sz->rows, 0, sp);
}

const op_backend_def op_backend_grid = {
    .run_cpu = run_cpu,
#ifdef GPUQ_HAVE_CUDA
    .launch_cuda = launch_cuda,
    .launch_cuda_rows = launch_cuda_rows,
#endif
    .cuda_split = cuda_split,
};
#endif

/* ------------------------------------------------------------------ ctl */
#ifdef GPUQ_OP_CTL
#include <string.h>

#include "op_ctl.h"

static int exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *lat_s = NULL, *lon_s = NULL, *to_s = NULL, *radius_s = NULL, *dtype_s = NULL,
               *out_path = NULL;
    bool timing = false;
    const ctl_opt opts[] = {{"--lat", &lat_s, NULL},      {"--lon", &lon_s, NULL},
                            {"--to", &to_s, NULL},        {"--radius", &radius_s, NULL},
                            {"--dtype", &dtype_s, NULL},  {"-o", &out_path, NULL},
                            {"--output", &out_path, NULL}};
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 7, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!out_path)
        return ctl_usage_error(ctx, "-o OUT.npy is required");
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_GRID;
    r.dtype = GPUQ_DT_F64;
    gpuq_arg_range la = gpuq_request_get_range(&r, "lat"), lo = gpuq_request_get_range(&r, "lon");
    double lat, lon, radius = GPUQ_EARTH_RADIUS_KM;
    gpuq_request_get_pair(&r, "to", &lat, &lon);
    if (lat_s && op_ctl_parse_range(lat_s, &la.start, &la.stop, &la.n))
        return ctl_usage_error(ctx, "bad --lat '%s' (START:STOP:N, e.g. --lat -90:90:1000)", lat_s);
    if (lon_s && op_ctl_parse_range(lon_s, &lo.start, &lo.stop, &lo.n))
        return ctl_usage_error(ctx, "bad --lon '%s' (START:STOP:N, e.g. --lon -180:180:1000)",
                               lon_s);
    if (to_s && op_ctl_parse_point(to_s, &lat, &lon))
        return ctl_usage_error(ctx, "bad --to '%s' (LAT,LON: two numbers, e.g. --to 30,101)", to_s);
    if (radius_s && ctl_parse_double(radius_s, &radius))
        return ctl_usage_error(ctx, "bad --radius '%s' (a number, e.g. 6371.0088)", radius_s);
    if (dtype_s) {
        if (strcmp(dtype_s, "f32") == 0 || strcmp(dtype_s, "float32") == 0)
            r.dtype = GPUQ_DT_F32;
        else if (strcmp(dtype_s, "f64") == 0 || strcmp(dtype_s, "float64") == 0)
            r.dtype = GPUQ_DT_F64;
        else
            return ctl_usage_error(ctx, "bad --dtype '%s' (f32|f64)", dtype_s);
    }
    gpuq_request_set_range(&r, "lat", la.start, la.stop, la.n);
    gpuq_request_set_range(&r, "lon", lo.start, lo.stop, lo.n);
    gpuq_request_set_pair(&r, "to", lat, lon);
    gpuq_request_set_double(&r, "radius", radius);
    uint64_t out_shape[2] = {la.n, lo.n};
    return op_ctl_run(ctx, &r, NULL, NULL, 2, out_shape, out_path, timing);
}

static const ctl_optdoc opts_doc[] = {
    {"--lat", NULL, "START:STOP:N", "-90:90:1000",
     "The grid's latitudes: N values from START to STOP, both included (numpy.linspace), "
     "within -90 .. 90."},
    {"--lon", NULL, "START:STOP:N", "-180:180:1000",
     "The grid's longitudes, the same way (any finite values)."},
    {"--to", NULL, "LAT,LON", "30,101", "The point every distance is to, in degrees."},
    {"--radius", NULL, "KM", "6371.0088",
     "The sphere's radius, in the unit the distances come in; the default is the Earth's "
     "mean radius in km."},
    {"--dtype", NULL, "f32|f64", "f64", "The result's element type (float32 or float64)."},
    {"--timing", NULL, NULL, NULL,
     "Print gpuqd's timing of the request on stderr: queue, copies to and from the device, "
     "kernel, total."},
    {"--output", "-o", "OUT.npy", NULL, "Where to write the distances [lat N, lon N] (required)."},
    {NULL, NULL, NULL, NULL, NULL},
};

static const ctl_entry entry = {
    .name = "distance grid",
    .usage = "[--lat START:STOP:N] [--lon START:STOP:N] [--to LAT,LON] [--radius KM] [--dtype "
             "f32|f64] [--timing] -o OUT.npy",
    .min_args = 0,
    .max_args = 0,
    .exec = exec,
    .help = "Great-circle distances from every point of a lat x lon grid to one point.",
    .desc = "Compute on gpuqd the great-circle (haversine) distance from every point of a "
            "latitude x longitude grid to the point --to, and write them to OUT.npy: "
            "OUT[i,j] is the distance from (lat[i], lon[j]), an array [lat N, lon N]. No "
            "input file: the grid is made on gpuqd.",
    .opts = opts_doc,
    .example = "gpuqctl distance grid -o grid.npy\n"
               "gpuqctl distance grid --lat=-45:60:106 --lon=10:170:161 --dtype f32 -o g.npy\n"
               "gpuqctl distance grid --to 48.85,2.35 --radius=3958.8 -o miles.npy",
};
const ctl_entry *const op_ctl_grid = &entry;
#endif
