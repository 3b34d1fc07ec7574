/* ops.c - libgpuq's blocking op calls: build a request, gpuq_call, done.
 *
 * Sizes are computed here with overflow checks so a caller's buffer is never
 * written past rows*cols*dtype bytes; shape and range errors are the
 * server's to report (one place decides what is valid).
 */
#include <stdint.h>

#include "conn.h"

/* n1 * n2 * esize into *out, or GPUQ_E_BAD_SHAPE on overflow. */
static int mul_size(gpuq_conn *c, uint64_t n1, uint64_t n2, size_t esize, size_t *out)
{
    if (esize == 0)
        return conn_set_err(c, GPUQ_E_BAD_DTYPE, "dtype must be f32 or f64");
    if (n1 && n2 > SIZE_MAX / n1)
        return conn_set_err(c, GPUQ_E_BAD_SHAPE, "array size overflows");
    uint64_t n = n1 * n2;
    if (n && esize > SIZE_MAX / n)
        return conn_set_err(c, GPUQ_E_BAD_SHAPE, "array size overflows");
    *out = (size_t)(n * esize);
    return 0;
}

int gpuq_normalize(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, bool flat,
                   const void *in, uint64_t rows, uint64_t cols, int ndim, void *out)
{
    size_t bytes;
    int rc = mul_size(c, rows, cols, gpuq_dtype_size(dt), &bytes);
    if (rc)
        return rc;
    if (ndim != 1 && ndim != 2)
        return conn_set_err(c, GPUQ_E_BAD_SHAPE, "ndim must be 1 or 2");
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_NORMALIZE;
    r.dtype = dt;
    if (gpuq_request_set_enum_index(&r, "method", (int)method) != 0)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "unknown normalize method");
    if (flat)
        gpuq_request_set_bool(&r, "flat", true);
    r.ndim_a = (uint32_t)ndim;
    if (ndim == 1) {
        r.shape_a[0] = rows * cols;
    } else {
        r.shape_a[0] = rows;
        r.shape_a[1] = cols;
    }
    return gpuq_call(c, &r, in, bytes, NULL, 0, out, bytes, NULL);
}

int gpuq_haversine_to(gpuq_conn *c, gpuq_dtype dt, const void *pts, uint64_t n, double lat,
                      double lon, double radius, void *out)
{
    size_t in_bytes, out_bytes;
    int rc = mul_size(c, n, 2, gpuq_dtype_size(dt), &in_bytes);
    if (rc || (rc = mul_size(c, n, 1, gpuq_dtype_size(dt), &out_bytes)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_HAVERSINE;
    r.dtype = dt;
    r.ndim_a = 2;
    r.shape_a[0] = n;
    r.shape_a[1] = 2;
    gpuq_request_set_pair(&r, "to", lat, lon);
    gpuq_request_set_double(&r, "radius", radius);
    return gpuq_call(c, &r, pts, in_bytes, NULL, 0, out, out_bytes, NULL);
}

int gpuq_haversine_pair(gpuq_conn *c, gpuq_dtype dt, const void *a, const void *b, uint64_t n,
                        double radius, void *out)
{
    size_t in_bytes, out_bytes;
    int rc = mul_size(c, n, 2, gpuq_dtype_size(dt), &in_bytes);
    if (rc || (rc = mul_size(c, n, 1, gpuq_dtype_size(dt), &out_bytes)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_HAVERSINE;
    r.dtype = dt;
    r.ndim_a = r.ndim_b = 2;
    r.shape_a[0] = r.shape_b[0] = n;
    r.shape_a[1] = r.shape_b[1] = 2;
    gpuq_request_set_double(&r, "radius", radius);
    return gpuq_call(c, &r, a, in_bytes, b, in_bytes, out, out_bytes, NULL);
}

int gpuq_grid(gpuq_conn *c, gpuq_dtype dt, double lat0, double lat1, uint64_t nlat, double lon0,
              double lon1, uint64_t nlon, double lat, double lon, double radius, void *out)
{
    size_t out_bytes;
    int rc = mul_size(c, nlat, nlon, gpuq_dtype_size(dt), &out_bytes);
    if (rc)
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_GRID;
    r.dtype = dt;
    gpuq_request_set_range(&r, "lat", lat0, lat1, nlat);
    gpuq_request_set_range(&r, "lon", lon0, lon1, nlon);
    gpuq_request_set_pair(&r, "to", lat, lon);
    gpuq_request_set_double(&r, "radius", radius);
    return gpuq_call(c, &r, NULL, 0, NULL, 0, out, out_bytes, NULL);
}

int gpuq_pairwise(gpuq_conn *c, gpuq_dtype dt, gpuq_metric metric, const void *x, const void *y,
                  uint64_t m, uint64_t n, uint64_t d, void *out)
{
    size_t esize = gpuq_dtype_size(dt), xb, yb, ob;
    int rc = mul_size(c, m, d, esize, &xb);
    if (rc || (rc = mul_size(c, n, d, esize, &yb)) || (rc = mul_size(c, m, n, esize, &ob)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_PAIRWISE;
    r.dtype = dt;
    if (gpuq_request_set_enum_index(&r, "metric", (int)metric) != 0)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "unknown pairwise metric");
    r.ndim_a = r.ndim_b = 2;
    r.shape_a[0] = m;
    r.shape_a[1] = d;
    r.shape_b[0] = n;
    r.shape_b[1] = d;
    return gpuq_call(c, &r, x, xb, y, yb, out, ob, NULL);
}
