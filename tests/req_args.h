/* SPDX-License-Identifier: Apache-2.0 */
/* req_args.h - the op arguments of a gpuq_request under the names they had
 * as fields (method, flat, zero_ok, metric, to_lat, ...), for tests: thin
 * wrappers of gpuq_request_get_* / gpuq_request_set_* (which check the key
 * against the request's op, so set op first). */
#ifndef GPUQ_TESTS_REQ_ARGS_H
#define GPUQ_TESTS_REQ_ARGS_H

#include "header.h"

static inline int rq_method(const gpuq_request *r)
{
    return gpuq_request_get_enum(r, "method");
}
static inline void rq_set_method(gpuq_request *r, int m)
{
    gpuq_request_set_enum_index(r, "method", m);
}
static inline int rq_metric(const gpuq_request *r)
{
    return gpuq_request_get_enum(r, "metric");
}
static inline void rq_set_metric(gpuq_request *r, int m)
{
    gpuq_request_set_enum_index(r, "metric", m);
}
static inline bool rq_flat(const gpuq_request *r)
{
    return gpuq_request_get_bool(r, "flat");
}
static inline void rq_set_flat(gpuq_request *r, bool v)
{
    gpuq_request_set_bool(r, "flat", v);
}
static inline bool rq_zero_ok(const gpuq_request *r)
{
    return gpuq_request_get_enum(r, "on_zero") == 1;
}
static inline void rq_set_zero_ok(gpuq_request *r, bool v)
{
    gpuq_request_set_enum(r, "on_zero", v ? "zero" : "error");
}
static inline bool rq_has_to(const gpuq_request *r)
{
    return gpuq_request_isset(r, "to");
}
static inline void rq_set_has_to(gpuq_request *r, bool v)
{
    double la, lo;
    gpuq_request_get_pair(r, "to", &la, &lo);
    if (v)
        gpuq_request_set_pair(r, "to", la, lo);
    else
        gpuq_request_unset(r, "to");
}
static inline double rq_to_lat(const gpuq_request *r)
{
    double la, lo;
    gpuq_request_get_pair(r, "to", &la, &lo);
    return la;
}
static inline double rq_to_lon(const gpuq_request *r)
{
    double la, lo;
    gpuq_request_get_pair(r, "to", &la, &lo);
    return lo;
}
static inline void rq_set_to_lat(gpuq_request *r, double v)
{
    gpuq_request_set_pair(r, "to", v, rq_to_lon(r));
}
static inline void rq_set_to_lon(gpuq_request *r, double v)
{
    gpuq_request_set_pair(r, "to", rq_to_lat(r), v);
}
static inline double rq_radius(const gpuq_request *r)
{
    return gpuq_request_get_double(r, "radius");
}
static inline void rq_set_radius(gpuq_request *r, double v)
{
    gpuq_request_set_double(r, "radius", v);
}
#define RQ_RANGE_(name, key, field, type)                                                          \
    static inline type rq_##name(const gpuq_request *r)                                            \
    {                                                                                              \
        return gpuq_request_get_range(r, key).field;                                               \
    }                                                                                              \
    static inline void rq_set_##name(gpuq_request *r, type v)                                      \
    {                                                                                              \
        gpuq_arg_range g = gpuq_request_get_range(r, key);                                         \
        g.field = v;                                                                               \
        gpuq_request_set_range(r, key, g.start, g.stop, g.n);                                      \
    }
RQ_RANGE_(lat_start, "lat", start, double)
RQ_RANGE_(lat_stop, "lat", stop, double)
RQ_RANGE_(lat_n, "lat", n, uint64_t)
RQ_RANGE_(lon_start, "lon", start, double)
RQ_RANGE_(lon_stop, "lon", stop, double)
RQ_RANGE_(lon_n, "lon", n, uint64_t)
#undef RQ_RANGE_

#endif
