/* ctl_ops.c - gpuqctl normalize and distance {haversine, grid, pairwise}.
 *
 * Each command reads its .npy inputs, builds one request, sends it with
 * gpuq_call and writes the result as .npy (dtype of the input; grid:
 * --dtype). --timing prints the server's timing to stderr. The output
 * buffer is allocated only when the result fits the server's max_output, so
 * an oversized request gets the server's error, not a huge malloc here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "npy.h"

/* Connect, send req with inputs a/b, write the result to out_path. */
static int run_op(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
                  uint64_t out_rows, uint64_t out_cols, int out_ndim, const char *out_path,
                  bool timing)
{
    size_t esize = gpuq_dtype_size(req->dtype);
    if (out_cols && out_rows > UINT64_MAX / out_cols / esize)
        return ctl_fail(GPUQ_E_TOO_LARGE, "result size overflows");
    uint64_t out_bytes = out_rows * out_cols * esize;
    gpuq_conn *c;
    int rc = ctl_connect(ctx, &c);
    if (rc)
        return rc;
    void *out = NULL;
    size_t cap = 0;
    if (out_bytes <= gpuq_info(c)->limits.max_output && out_bytes <= SIZE_MAX) {
        out = malloc(out_bytes ? (size_t)out_bytes : 1);
        if (!out) {
            rc = ctl_failf(GPUQ_E_NO_MEMORY, "cannot allocate %llu result bytes",
                           (unsigned long long)out_bytes);
            goto out_close;
        }
        cap = (size_t)out_bytes;
    }
    req->timing = timing;
    gpuq_reply rep;
    int crc = gpuq_call(c, req, a ? a->data : NULL, a ? a->nbytes : 0, b ? b->data : NULL,
                        b ? b->nbytes : 0, out, cap, &rep);
    if (crc) {
        rc = ctl_fail(crc, gpuq_errmsg(c));
        goto out_free;
    }
    if (timing && rep.has_timing)
        fprintf(stderr, "timing: queue %.1f us, h2d %.1f us, kernel %.1f us, d2h %.1f us, total %.1f us\n",
                rep.timing.queue_us, rep.timing.h2d_us, rep.timing.kernel_us, rep.timing.d2h_us,
                rep.timing.total_us);
    uint64_t shape[2] = {out_ndim == 1 ? out_rows * out_cols : out_rows, out_cols};
    char err[512];
    int wrc = npy_write(out_path, req->dtype, out_ndim, shape, out, err, sizeof err);
    if (wrc)
        rc = ctl_fail(wrc, err);
out_free:
    free(out);
out_close:
    gpuq_close(c);
    return rc;
}

static int load(const char *path, npy_array *a)
{
    char err[512];
    int rc = npy_read(path, a, err, sizeof err);
    if (rc)
        return ctl_fail(rc, err);
    return 0;
}

static int normalize_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *method_s = NULL, *out_path = NULL;
    bool flat = false, timing = false;
    const ctl_opt opts[] = {{"--method", &method_s, NULL}, {"-m", &method_s, NULL},
                            {"-o", &out_path, NULL},      {"--output", &out_path, NULL},
                            {"--flat", NULL, &flat}};
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 5, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!out_path)
        return ctl_usage_error(ctx, "-o OUT.npy is required");
    int method = GPUQ_NORM_SUM;
    if (method_s && (method = gpuq_norm_method_parse(method_s, strlen(method_s))) < 0)
        return ctl_failf(GPUQ_E_BAD_ARGUMENT, "unknown method '%s' (sum|l1|l2|minmax|zscore)",
                         method_s);
    npy_array a;
    if ((rc = load(pos[0], &a)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_NORMALIZE;
    r.dtype = a.dtype;
    r.method = (gpuq_norm_method)method;
    r.flat = flat;
    r.ndim_a = (uint32_t)a.ndim;
    r.shape_a[0] = a.shape[0];
    r.shape_a[1] = a.ndim == 2 ? a.shape[1] : 0;
    rc = run_op(ctx, &r, &a, NULL, a.shape[0], a.shape[1], a.ndim, out_path, timing);
    npy_free(&a);
    return rc;
}

/* "LAT,LON" */
static int parse_point(const char *s, double *lat, double *lon)
{
    const char *comma = strchr(s, ',');
    if (!comma || (size_t)(comma - s) >= 64)
        return -1;
    char first[64];
    memcpy(first, s, (size_t)(comma - s));
    first[comma - s] = '\0';
    return ctl_parse_double(first, lat) || ctl_parse_double(comma + 1, lon) ? -1 : 0;
}

/* "START:STOP:N" */
static int parse_range(const char *s, double *start, double *stop, uint64_t *n)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    char *c1 = strchr(buf, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c1 || !c2)
        return -1;
    *c1 = *c2 = '\0';
    return ctl_parse_double(buf, start) || ctl_parse_double(c1 + 1, stop) ||
                   ctl_parse_u64(c2 + 1, n)
               ? -1
               : 0;
}

static int parse_radius(ctl_ctx *ctx, const char *s, double *radius)
{
    *radius = GPUQ_EARTH_RADIUS_KM;
    if (s && ctl_parse_double(s, radius))
        return ctl_usage_error(ctx, "bad --radius '%s'", s);
    return 0;
}

static int haversine_exec(ctl_ctx *ctx, int argc, const char **argv)
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
    if (npos == 1 && !to_s)
        return ctl_usage_error(ctx, "one points file needs --to LAT,LON");
    if (npos == 2 && to_s)
        return ctl_usage_error(ctx, "--to goes with one points file, not two");
    double lat = 0, lon = 0, radius;
    if (to_s && parse_point(to_s, &lat, &lon))
        return ctl_usage_error(ctx, "bad --to '%s' (LAT,LON)", to_s);
    if ((rc = parse_radius(ctx, radius_s, &radius)))
        return rc;
    npy_array a, b;
    if ((rc = load(pos[0], &a)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_HAVERSINE;
    r.dtype = a.dtype;
    r.ndim_a = (uint32_t)a.ndim;
    r.shape_a[0] = a.shape[0];
    r.shape_a[1] = a.ndim == 2 ? a.shape[1] : 0;
    r.radius = radius;
    if (npos == 1) {
        r.has_to = true;
        r.to_lat = lat;
        r.to_lon = lon;
        rc = run_op(ctx, &r, &a, NULL, a.shape[0], 1, 1, out_path, timing);
    } else {
        if ((rc = load(pos[1], &b)))
            goto out_a;
        if (b.dtype != a.dtype) {
            rc = ctl_failf(GPUQ_E_BAD_DTYPE, "%s and %s have different dtypes", pos[0], pos[1]);
        } else {
            r.ndim_b = (uint32_t)b.ndim;
            r.shape_b[0] = b.shape[0];
            r.shape_b[1] = b.ndim == 2 ? b.shape[1] : 0;
            rc = run_op(ctx, &r, &a, &b, a.shape[0], 1, 1, out_path, timing);
        }
        npy_free(&b);
    }
out_a:
    npy_free(&a);
    return rc;
}

static int grid_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *lat_s = NULL, *lon_s = NULL, *to_s = NULL, *radius_s = NULL, *dtype_s = NULL,
               *out_path = NULL;
    bool timing = false;
    const ctl_opt opts[] = {{"--lat", &lat_s, NULL},       {"--lon", &lon_s, NULL},
                            {"--to", &to_s, NULL},         {"--radius", &radius_s, NULL},
                            {"--dtype", &dtype_s, NULL},   {"-o", &out_path, NULL},
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
    r.lat_start = -90, r.lat_stop = 90, r.lat_n = 1000;
    r.lon_start = -180, r.lon_stop = 180, r.lon_n = 1000;
    r.to_lat = 30, r.to_lon = 101;
    r.has_to = true;
    if (lat_s && parse_range(lat_s, &r.lat_start, &r.lat_stop, &r.lat_n))
        return ctl_usage_error(ctx, "bad --lat '%s' (START:STOP:N)", lat_s);
    if (lon_s && parse_range(lon_s, &r.lon_start, &r.lon_stop, &r.lon_n))
        return ctl_usage_error(ctx, "bad --lon '%s' (START:STOP:N)", lon_s);
    if (to_s && parse_point(to_s, &r.to_lat, &r.to_lon))
        return ctl_usage_error(ctx, "bad --to '%s' (LAT,LON)", to_s);
    if ((rc = parse_radius(ctx, radius_s, &r.radius)))
        return rc;
    if (dtype_s) {
        if (strcmp(dtype_s, "f32") == 0 || strcmp(dtype_s, "float32") == 0)
            r.dtype = GPUQ_DT_F32;
        else if (strcmp(dtype_s, "f64") == 0 || strcmp(dtype_s, "float64") == 0)
            r.dtype = GPUQ_DT_F64;
        else
            return ctl_usage_error(ctx, "bad --dtype '%s' (f32|f64)", dtype_s);
    }
    return run_op(ctx, &r, NULL, NULL, r.lat_n, r.lon_n, 2, out_path, timing);
}

static int pairwise_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *metric_s = NULL, *out_path = NULL;
    bool timing = false;
    const ctl_opt opts[] = {{"--metric", &metric_s, NULL},
                            {"-o", &out_path, NULL},
                            {"--output", &out_path, NULL}};
    const char *pos[2];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 3, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!out_path)
        return ctl_usage_error(ctx, "-o OUT.npy is required");
    int metric = GPUQ_METRIC_EUCLIDEAN;
    if (metric_s && (metric = gpuq_metric_parse(metric_s, strlen(metric_s))) < 0)
        return ctl_failf(GPUQ_E_BAD_ARGUMENT,
                         "unknown metric '%s' (euclidean|sqeuclidean|cosine|manhattan)", metric_s);
    npy_array x, y;
    if ((rc = load(pos[0], &x)))
        return rc;
    if ((rc = load(pos[1], &y)))
        goto out_x;
    if (x.dtype != y.dtype) {
        rc = ctl_failf(GPUQ_E_BAD_DTYPE, "%s and %s have different dtypes", pos[0], pos[1]);
        goto out_y;
    }
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_PAIRWISE;
    r.dtype = x.dtype;
    r.metric = (gpuq_metric)metric;
    r.ndim_a = (uint32_t)x.ndim;
    r.shape_a[0] = x.shape[0];
    r.shape_a[1] = x.ndim == 2 ? x.shape[1] : 0;
    r.ndim_b = (uint32_t)y.ndim;
    r.shape_b[0] = y.shape[0];
    r.shape_b[1] = y.ndim == 2 ? y.shape[1] : 0;
    rc = run_op(ctx, &r, &x, &y, x.shape[0], y.shape[0], 2, out_path, timing);
out_y:
    npy_free(&y);
out_x:
    npy_free(&x);
    return rc;
}

const ctl_entry ctl_normalize_entry = {
    "normalize", "[--method sum|l1|l2|minmax|zscore] [--flat] [--priority low|normal|high] "
                 "[--timing] IN.npy -o OUT.npy", 1, 1, normalize_exec};
const ctl_entry ctl_haversine_entry = {
    "distance haversine", "(--to LAT,LON [--radius KM] POINTS.npy | A.npy B.npy) [--timing] -o OUT.npy",
    1, 2, haversine_exec};
const ctl_entry ctl_grid_entry = {
    "distance grid", "[--lat START:STOP:N] [--lon START:STOP:N] [--to LAT,LON] [--radius KM] "
                     "[--dtype f32|f64] [--timing] -o OUT.npy", 0, 0, grid_exec};
const ctl_entry ctl_pairwise_entry = {
    "distance pairwise", "--metric euclidean|sqeuclidean|cosine|manhattan X.npy Y.npy [--timing] "
                         "-o OUT.npy", 2, 2, pairwise_exec};
