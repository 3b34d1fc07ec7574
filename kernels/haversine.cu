/* SPDX-License-Identifier: Apache-2.0 */
/* haversine.cu - great-circle distances on the GPU: to one point, between
 * pairs, and over a lat/lon grid generated on the device.
 *
 * All arithmetic is in double for both dtypes (the CPU reference's formula,
 * 2 R asin(min(1, sqrt(a)))), so float32 results are the double result
 * rounded once. A coordinate with |lat| > 90 or a non-finite value sets the
 * ctx flag to RANGE (3) and yields NaN for that point; scalar arguments are
 * checked on the host and return GPUQ_K_E_RANGE before any launch.
 */
#include <math.h>

#include "cuda_check.h"

namespace
{

constexpr double DEG2RAD = 3.14159265358979323846 / 180.0;
constexpr unsigned BLOCK = 256;

__host__ __device__ __forceinline__ bool coord_ok(double lat, double lon)
{
    return isfinite(lat) && fabs(lat) <= 90.0 && isfinite(lon);
}

__device__ __forceinline__ double hav_core(double p1, double c1, double p2, double c2, double dlam,
                                           double radius)
{
    double sp = sin((p2 - p1) * 0.5);
    double sl = sin(dlam * 0.5);
    double a = sp * sp + c1 * c2 * sl * sl;
    return 2.0 * radius * asin(fmin(1.0, sqrt(a)));
}

template <typename T>
__global__ void hav_to_kernel(const T *pts, uint64_t n, double lat, double lon, double radius,
                              T *out, int *flag)
{
    double p2 = lat * DEG2RAD, c2 = cos(p2), l2 = lon * DEG2RAD;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        double la = (double)pts[2 * i], lo = (double)pts[2 * i + 1];
        if (!coord_ok(la, lo)) {
            gpuq_set_flag(flag, GPUQ_FLAG_RANGE);
            out[i] = (T)NAN;
            continue;
        }
        double p1 = la * DEG2RAD;
        out[i] = (T)hav_core(p1, cos(p1), p2, c2, l2 - lo * DEG2RAD, radius);
    }
}

template <typename T>
__global__ void hav_pair_kernel(const T *a, const T *b, uint64_t n, double radius, T *out,
                                int *flag)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        double la1 = (double)a[2 * i], lo1 = (double)a[2 * i + 1];
        double la2 = (double)b[2 * i], lo2 = (double)b[2 * i + 1];
        if (!coord_ok(la1, lo1) || !coord_ok(la2, lo2)) {
            gpuq_set_flag(flag, GPUQ_FLAG_RANGE);
            out[i] = (T)NAN;
            continue;
        }
        double p1 = la1 * DEG2RAD, p2 = la2 * DEG2RAD;
        out[i] = (T)hav_core(p1, cos(p1), p2, cos(p2), lo2 * DEG2RAD - lo1 * DEG2RAD, radius);
    }
}

/* numpy.linspace point i of n (the last is exactly hi). */
__device__ __forceinline__ double linspace_at(double lo, double hi, uint64_t n, uint64_t i)
{
    if (n == 1)
        return lo;
    if (i == n - 1)
        return hi;
    return (double)i * ((hi - lo) / (double)(n - 1)) + lo;
}

/* Rows [row0, row0 + nrows) of the nlat x nlon grid into out (row row0's
 * start); latitude i is linspace over the whole grid, so a range of rows
 * holds exactly the values the whole launch writes there. */
template <typename T>
__global__ void grid_kernel(double lat0, double lat1, uint64_t nlat, uint64_t row0, uint64_t nrows,
                            double lon0, double lon1, uint64_t nlon, double lat, double lon,
                            double radius, T *out)
{
    double p2 = lat * DEG2RAD, c2 = cos(p2), l2 = lon * DEG2RAD;
    uint64_t total = nrows * nlon;
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = row0 + k / nlon, j = k % nlon;
        double p1 = linspace_at(lat0, lat1, nlat, i) * DEG2RAD;
        double l1 = linspace_at(lon0, lon1, nlon, j) * DEG2RAD;
        out[k] = (T)hav_core(p1, cos(p1), p2, c2, l2 - l1, radius);
    }
}

bool radius_ok(double r)
{
    return isfinite(r) && r > 0.0;
}

} /* namespace */

extern "C" int gpuq_cuda_haversine_to(gpuq_cuda_ctx *ctx, int dt, const void *d_pts, uint64_t n,
                                      double lat, double lon, double radius, void *d_out)
{
    if (!ctx || !d_pts || !d_out || n == 0 || n > UINT64_MAX / 2 || !radius_ok(radius))
        return GPUQ_K_E_ARG;
    if (!coord_ok(lat, lon))
        return GPUQ_K_E_RANGE;
    unsigned g = gpuq_grid_for(n, BLOCK);
    if (dt == GPUQ_K_F32)
        hav_to_kernel<float><<<g, BLOCK, 0, ctx->stream>>>((const float *)d_pts, n, lat, lon,
                                                           radius, (float *)d_out, ctx->d_flag);
    else if (dt == GPUQ_K_F64)
        hav_to_kernel<double><<<g, BLOCK, 0, ctx->stream>>>((const double *)d_pts, n, lat, lon,
                                                            radius, (double *)d_out, ctx->d_flag);
    else
        return GPUQ_K_E_ARG;
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

extern "C" int gpuq_cuda_haversine_pair(gpuq_cuda_ctx *ctx, int dt, const void *d_a,
                                        const void *d_b, uint64_t n, double radius, void *d_out)
{
    if (!ctx || !d_a || !d_b || !d_out || n == 0 || n > UINT64_MAX / 2 || !radius_ok(radius))
        return GPUQ_K_E_ARG;
    unsigned g = gpuq_grid_for(n, BLOCK);
    if (dt == GPUQ_K_F32)
        hav_pair_kernel<float><<<g, BLOCK, 0, ctx->stream>>>(
            (const float *)d_a, (const float *)d_b, n, radius, (float *)d_out, ctx->d_flag);
    else if (dt == GPUQ_K_F64)
        hav_pair_kernel<double><<<g, BLOCK, 0, ctx->stream>>>(
            (const double *)d_a, (const double *)d_b, n, radius, (double *)d_out, ctx->d_flag);
    else
        return GPUQ_K_E_ARG;
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

extern "C" int gpuq_cuda_grid_rows(gpuq_cuda_ctx *ctx, int dt, double lat0, double lat1,
                                   uint64_t nlat, uint64_t row0, uint64_t nrows, double lon0,
                                   double lon1, uint64_t nlon, double lat, double lon,
                                   double radius, void *d_out)
{
    if (!ctx || !d_out || nlat == 0 || nlon == 0 || nlat > UINT64_MAX / nlon ||
        !radius_ok(radius) || nrows == 0 || row0 >= nlat || nrows > nlat - row0)
        return GPUQ_K_E_ARG;
    /* linspace between two valid latitudes stays valid: check the ends. */
    if (!coord_ok(lat0, lon0) || !coord_ok(lat1, lon1) || !coord_ok(lat, lon))
        return GPUQ_K_E_RANGE;
    unsigned g = gpuq_grid_for(nrows * nlon, BLOCK);
    if (dt == GPUQ_K_F32)
        grid_kernel<float><<<g, BLOCK, 0, ctx->stream>>>(lat0, lat1, nlat, row0, nrows, lon0, lon1,
                                                         nlon, lat, lon, radius, (float *)d_out);
    else if (dt == GPUQ_K_F64)
        grid_kernel<double><<<g, BLOCK, 0, ctx->stream>>>(lat0, lat1, nlat, row0, nrows, lon0, lon1,
                                                          nlon, lat, lon, radius, (double *)d_out);
    else
        return GPUQ_K_E_ARG;
    GPUQ_LAUNCH_CHECK(ctx);
    return GPUQ_K_OK;
}

extern "C" int gpuq_cuda_grid(gpuq_cuda_ctx *ctx, int dt, double lat0, double lat1, uint64_t nlat,
                              double lon0, double lon1, uint64_t nlon, double lat, double lon,
                              double radius, void *d_out)
{
    return gpuq_cuda_grid_rows(ctx, dt, lat0, lat1, nlat, 0, nlat, lon0, lon1, nlon, lat, lon,
                               radius, d_out);
}
