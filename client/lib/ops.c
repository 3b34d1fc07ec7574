/* SPDX-License-Identifier: Apache-2.0 */
/* ops.c - libgpuq's convenience calls: each builds one request with the
 * public builder (gpuq_req_*) and makes a blocking gpuq_call_req; and
 * gpuq_submit_cancel, the cancel op submitted on the pipelined path.
 *
 * They add no checks of their own: shapes, ranges and sizes are checked by
 * the submit (proto's decoder and checks, the daemon's) before anything is
 * sent, so a caller's buffer is never written past what the request implies.
 * Each call's output buffer is given the size its arguments imply, computed
 * here with overflow checks, and the submit refuses a request whose result
 * would be larger.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "conn_defs.h"
#include "conn_err.h"
#include "mpread.h"

/* n1 * n2 * esize into *out, or GPUQ_E_BAD_SHAPE on overflow. */
static int mul_size(gpuq_conn *c, uint64_t n1, uint64_t n2, size_t esize, size_t *out)
{
    if (esize == 0)
        return conn_set_err(c, GPUQ_E_BAD_DTYPE, "bad_dtype: dtype must be f32 or f64");
    uint64_t n;
    if (__builtin_mul_overflow(n1, n2, &n) || __builtin_mul_overflow(n, esize, &n) || n > SIZE_MAX)
        return conn_set_err(c, GPUQ_E_BAD_SHAPE, "bad_shape: array size overflows");
    *out = (size_t)n;
    return 0;
}

/* Element size of an input dtype (f32, f64; 0 for others). */
static size_t in_size(gpuq_dtype dt)
{
    return gpuq_dtype_size(dt);
}

/* A new request, or NULL with c's error set. */
static gpuq_req *req_begin(gpuq_conn *c, const char *op)
{
    gpuq_req *r = gpuq_req_new(op);
    if (!r)
        conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory building a request");
    return r;
}

/* Blocking call of r into c's scratch result; r is freed. */
static int req_finish(gpuq_conn *c, gpuq_req *r)
{
    int rc = gpuq_call_req(c, r, &c->scratch);
    gpuq_req_free(r);
    return rc;
}

int gpuq_ping(gpuq_conn *c)
{
    gpuq_req *r = req_begin(c, "ping");
    return r ? req_finish(c, r) : GPUQ_E_NO_MEMORY;
}

int gpuq_status_info(gpuq_conn *c, const uint8_t **info, size_t *len)
{
    gpuq_req *r = req_begin(c, "status");
    int rc = r ? req_finish(c, r) : GPUQ_E_NO_MEMORY;
    if (rc)
        return rc;
    if (gpuq_result_info(&c->scratch, info, len))
        return conn_set_err(c, GPUQ_E_PROTOCOL, "status reply without info");
    return 0;
}

int gpuq_status_json(gpuq_conn *c, char *buf, size_t cap)
{
    const uint8_t *info;
    size_t len;
    int rc = gpuq_status_info(c, &info, &len);
    if (rc)
        return rc;
    gpuq_mpr r;
    gpuq_mpr_init(&r, info, len);
    rc = gpuq_mpr_to_json(&r, buf, cap);
    if (rc == GPUQ_E_TOO_LARGE)
        return conn_set_err(c, rc, "status JSON does not fit %zu bytes", cap);
    if (rc)
        return conn_set_err(c, rc, "status info is not valid msgpack");
    return 0;
}

/* Unsigned int "key" of the scratch result's info map into *v (left alone
 * when absent). */
static void info_uint(gpuq_conn *c, const char *key, uint64_t *v)
{
    const uint8_t *info;
    size_t len;
    if (gpuq_result_info(&c->scratch, &info, &len) == 0)
        (void)gpuq_mpr_map_uint(info, len, key, v);
}

/* A document op (sessions, metrics): the payload the scratch result kept,
 * copied into *doc (malloc'd, NUL-terminated, owned by the caller). */
static int call_doc(gpuq_conn *c, const char *op, uint8_t **doc, size_t *len, uint32_t *count)
{
    *doc = NULL;
    *len = 0;
    gpuq_req *r = req_begin(c, op);
    int rc = r ? req_finish(c, r) : GPUQ_E_NO_MEMORY;
    if (rc)
        return rc;
    const uint8_t *data;
    size_t dlen;
    gpuq_result_payload(&c->scratch, &data, &dlen);
    uint8_t *d = malloc(dlen + 1);
    if (!d)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory");
    if (dlen)
        memcpy(d, data, dlen);
    d[dlen] = '\0';
    *doc = d;
    *len = dlen;
    if (count) {
        uint64_t v = 0;
        info_uint(c, "count", &v);
        *count = (uint32_t)v;
    }
    return 0;
}

int gpuq_sessions(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count)
{
    return call_doc(c, "sessions", doc, len, count);
}

int gpuq_metrics(gpuq_conn *c, char **text, size_t *len)
{
    uint8_t *d = NULL;
    int rc = call_doc(c, "metrics", &d, len, NULL);
    *text = (char *)d;
    return rc;
}

int gpuq_drain(gpuq_conn *c)
{
    gpuq_req *r = req_begin(c, "drain");
    return r ? req_finish(c, r) : GPUQ_E_NO_MEMORY;
}

int gpuq_shutdown(gpuq_conn *c)
{
    gpuq_req *r = req_begin(c, "shutdown");
    return r ? req_finish(c, r) : GPUQ_E_NO_MEMORY;
}

int gpuq_kill_session(gpuq_conn *c, uint64_t session_id)
{
    gpuq_req *r = req_begin(c, "kill_session");
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_u64(r, "session", session_id);
    return req_finish(c, r);
}

int gpuq_set_limit(gpuq_conn *c, const char *name, uint64_t value, uint64_t *old)
{
    if (!name)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: limit name missing");
    gpuq_req *r = req_begin(c, "set_limit");
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_str(r, "limit", name);
    gpuq_req_set_u64(r, "value", value);
    int rc = req_finish(c, r);
    if (rc == 0 && old)
        info_uint(c, "old", old);
    return rc;
}

/* One normalize of shape[0..ndim); axis sent unless NORM_NO_AXIS. */
#define NORM_NO_AXIS (-100)
static int normalize(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, bool flat, int axis,
                     const void *in, unsigned ndim, const uint64_t *shape, void *out)
{
    size_t bytes = 0;
    int rc = mul_size(c, shape[0], ndim == 2 ? shape[1] : 1, in_size(dt), &bytes);
    if (rc)
        return rc;
    const char *mname = gpuq_norm_method_name(method); /* proto's wire names */
    if (!mname)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: unknown normalize method %d",
                            (int)method);
    gpuq_req *r = req_begin(c, "normalize");
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_input(r, 0, dt, ndim, shape, in, bytes);
    gpuq_req_set_str(r, "method", mname);
    if (flat)
        gpuq_req_set_bool(r, "flat", true);
    if (axis != NORM_NO_AXIS) /* gpuqd checks it (PROTOCOL.md 3.1 "axis") */
        gpuq_req_set_i64(r, "axis", axis);
    gpuq_req_set_output(r, 0, out, bytes);
    return req_finish(c, r);
}

int gpuq_normalize(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, bool flat, const void *in,
                   uint64_t rows, uint64_t cols, void *out)
{
    const uint64_t shape[2] = {rows, cols};
    return normalize(c, dt, method, flat, NORM_NO_AXIS, in, 2, shape, out);
}

int gpuq_normalize_axis(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, int axis,
                        const void *in, uint64_t rows, uint64_t cols, void *out)
{
    const uint64_t shape[2] = {rows, cols};
    return normalize(c, dt, method, false, axis, in, 2, shape, out);
}

int gpuq_normalize_1d(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, const void *in,
                      uint64_t n, void *out)
{
    return normalize(c, dt, method, false, NORM_NO_AXIS, in, 1, &n, out);
}

/* A haversine of n points against "to" (b NULL) or against b. */
static int haversine(gpuq_conn *c, gpuq_dtype dt, const void *a, const void *b, uint64_t n,
                     const double *to, double radius, void *out)
{
    size_t in_bytes = 0, out_bytes = 0;
    int rc = mul_size(c, n, 2, in_size(dt), &in_bytes);
    if (rc || (rc = mul_size(c, n, 1, in_size(dt), &out_bytes)))
        return rc;
    const uint64_t shape[2] = {n, 2};
    gpuq_req *r = req_begin(c, "haversine");
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_input(r, 0, dt, 2, shape, a, in_bytes);
    if (b)
        gpuq_req_set_input(r, 1, dt, 2, shape, b, in_bytes);
    else
        gpuq_req_set_f64s(r, "to", to, 2);
    gpuq_req_set_f64(r, "radius", radius);
    gpuq_req_set_output(r, 0, out, out_bytes);
    return req_finish(c, r);
}

int gpuq_haversine_to(gpuq_conn *c, gpuq_dtype dt, const void *pts, uint64_t n, double lat,
                      double lon, double radius, void *out)
{
    const double to[2] = {lat, lon};
    return haversine(c, dt, pts, NULL, n, to, radius, out);
}

int gpuq_haversine_pair(gpuq_conn *c, gpuq_dtype dt, const void *a, const void *b, uint64_t n,
                        double radius, void *out)
{
    return haversine(c, dt, a, b, n, NULL, radius, out);
}

int gpuq_grid(gpuq_conn *c, gpuq_dtype dt, double lat0, double lat1, uint64_t nlat, double lon0,
              double lon1, uint64_t nlon, double lat, double lon, double radius, void *out)
{
    size_t out_bytes = 0;
    int rc = mul_size(c, nlat, nlon, in_size(dt), &out_bytes);
    if (rc)
        return rc;
    const double to[2] = {lat, lon};
    gpuq_req *r = req_begin(c, "grid");
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_dtype(r, dt);
    gpuq_req_set_range(r, "lat", lat0, lat1, nlat);
    gpuq_req_set_range(r, "lon", lon0, lon1, nlon);
    gpuq_req_set_f64s(r, "to", to, 2);
    gpuq_req_set_f64(r, "radius", radius);
    gpuq_req_set_output(r, 0, out, out_bytes);
    return req_finish(c, r);
}

int gpuq_pairwise(gpuq_conn *c, gpuq_dtype dt, gpuq_metric metric, const void *x, const void *y,
                  uint64_t m, uint64_t n, uint64_t d, void *out)
{
    size_t esize = in_size(dt), xb = 0, yb = 0, ob = 0;
    int rc = mul_size(c, m, d, esize, &xb);
    if (rc || (rc = mul_size(c, n, d, esize, &yb)) || (rc = mul_size(c, m, n, esize, &ob)))
        return rc;
    const char *mname = gpuq_metric_name(metric);
    if (!mname)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: unknown metric %d", (int)metric);
    const uint64_t xs[2] = {m, d}, ys[2] = {n, d};
    gpuq_req *r = req_begin(c, "pairwise");
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_input(r, 0, dt, 2, xs, x, xb);
    gpuq_req_set_input(r, 1, dt, 2, ys, y, yb);
    gpuq_req_set_str(r, "metric", mname);
    gpuq_req_set_output(r, 0, out, ob);
    return req_finish(c, r);
}

int gpuq_knn(gpuq_conn *c, gpuq_dtype dt, gpuq_metric metric, const void *x, const void *y,
             uint64_t m, uint64_t n, uint64_t d, uint64_t k, void *out_dist, int64_t *out_idx)
{
    size_t esize = in_size(dt), xb = 0, yb = 0, db = 0, ib = 0;
    int rc = mul_size(c, m, d, esize, &xb);
    if (rc || (rc = mul_size(c, n, d, esize, &yb)) || (rc = mul_size(c, m, k, esize, &db)) ||
        (rc = mul_size(c, m, k, sizeof(int64_t), &ib)))
        return rc;
    const char *mname = gpuq_metric_name(metric);
    if (!mname)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: unknown metric %d", (int)metric);
    const uint64_t xs[2] = {m, d}, ys[2] = {n, d};
    gpuq_req *r = req_begin(c, "knn");
    if (!r)
        return GPUQ_E_NO_MEMORY;
    gpuq_req_set_input(r, 0, dt, 2, xs, x, xb);
    gpuq_req_set_input(r, 1, dt, 2, ys, y, yb);
    gpuq_req_set_str(r, "metric", mname);
    gpuq_req_set_u64(r, "k", k);
    gpuq_req_set_output(r, 0, out_dist, db);
    gpuq_req_set_output(r, 1, out_idx, ib);
    return req_finish(c, r);
}

int gpuq_submit_cancel(gpuq_conn *c, uint64_t target, uint64_t *id)
{
    gpuq_req *r = gpuq_req_new("cancel");
    if (!r)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "no_memory: out of memory building a cancel");
    gpuq_req_set_u64(r, "request", target);
    int rc = conn_submit_req(c, r, NULL, false, id); /* not counted, as gpuqd does not */
    gpuq_req_free(r);
    return rc;
}
