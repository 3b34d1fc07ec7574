/* backend_run.c - one job on the CPU reference kernels.
 *
 * Maps a checked request to gpuq_cpu_* with pointers into the staging slot
 * (h_in: A then B; h_out: result). Kernel codes become wire codes with a
 * message; for a zero norm the offending row is found again (error path only).
 */
#include "backend_run.h"

#include <math.h>
#include <stdio.h>

#include "errors.h"
#include "gpuq_kernels.h"

int backend_kernel_dtype(const gpuq_request *r)
{
    return r->dtype == GPUQ_DT_F32 ? GPUQ_K_F32 : GPUQ_K_F64;
}

size_t backend_b_offset(const gpuq_request *r)
{
    if (r->ndim_b == 0)
        return 0;
    return (size_t)(r->shape_a[0] * r->shape_a[1]) * gpuq_dtype_size(r->dtype);
}

static double at(const gpuq_request *r, const void *p, uint64_t i)
{
    return r->dtype == GPUQ_DT_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* First row of a normalize input whose norm is zero (or constant); -1 if none. */
static long long zero_row(const gpuq_job *job)
{
    const gpuq_request *r = job->req;
    const gpuq_sizes *sz = job->sz;
    for (uint64_t i = 0; i < sz->rows; i++) {
        double s = 0, l1 = 0, l2 = 0, mn = INFINITY, mx = -INFINITY;
        for (uint64_t j = 0; j < sz->cols; j++) {
            double v = at(r, job->h_in, i * sz->cols + j);
            s += v;
            l1 += fabs(v);
            l2 += v * v;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        int zero = 0;
        switch (r->method) {
        case GPUQ_NORM_SUM: zero = s == 0; break;
        case GPUQ_NORM_L1: zero = l1 == 0; break;
        case GPUQ_NORM_L2: zero = l2 == 0; break;
        default: zero = mn == mx; break;
        }
        if (zero)
            return (long long)i;
    }
    return -1;
}

int backend_map_kernel_error(gpuq_job *job, int kcode)
{
    const gpuq_request *r = job->req;
    char *m = job->message;
    size_t cap = sizeof job->message;
    switch (kcode) {
    case GPUQ_K_OK:
        return 0;
    case GPUQ_K_E_ZERO:
        if (r->op == GPUQ_OP_NORMALIZE) {
            const char *mname = gpuq_norm_method_name(r->method);
            int constant = r->method == GPUQ_NORM_MINMAX || r->method == GPUQ_NORM_ZSCORE;
            long long row = job->h_in ? zero_row(job) : -1;
            if (row >= 0 && constant)
                snprintf(m, cap, "row %lld is constant (%s)", row, mname);
            else if (row >= 0)
                snprintf(m, cap, "row %lld has zero %s norm", row, mname);
            else
                snprintf(m, cap, "zero %s norm in a row", mname ? mname : "");
        } else {
            snprintf(m, cap, "zero vector under cosine metric");
        }
        return GPUQ_E_ZERO_NORM;
    case GPUQ_K_E_RANGE:
        snprintf(m, cap, "latitude outside [-90, 90] or non-finite coordinate");
        return GPUQ_E_OUT_OF_RANGE;
    case GPUQ_K_E_ARG:
        snprintf(m, cap, "invalid argument for the kernel");
        return GPUQ_E_BAD_ARGUMENT;
    case GPUQ_K_E_NOMEM:
        snprintf(m, cap, "out of memory");
        return GPUQ_E_NO_MEMORY;
    case GPUQ_K_E_CUDA:
        snprintf(m, cap, "CUDA error");
        return GPUQ_E_DEVICE;
    case GPUQ_K_E_STICKY:
        snprintf(m, cap, "device lost");
        return GPUQ_E_DEVICE_LOST;
    default:
        snprintf(m, cap, "kernel returned %d", kcode);
        return GPUQ_E_INTERNAL;
    }
}

void backend_run_cpu(gpuq_job *job)
{
    const gpuq_request *r = job->req;
    const gpuq_sizes *sz = job->sz;
    const uint8_t *in = job->h_in;
    const uint8_t *in_b = in + backend_b_offset(r);
    int dt = backend_kernel_dtype(r), rc;
    switch (r->op) {
    case GPUQ_OP_NORMALIZE:
        rc = gpuq_cpu_normalize(dt, (int)r->method, r->zero_ok, in, job->h_out, sz->rows, sz->cols);
        break;
    case GPUQ_OP_HAVERSINE:
        if (r->has_to)
            rc = gpuq_cpu_haversine_to(dt, in, sz->n, r->to_lat, r->to_lon, r->radius, job->h_out);
        else
            rc = gpuq_cpu_haversine_pair(dt, in, in_b, sz->n, r->radius, job->h_out);
        break;
    case GPUQ_OP_GRID:
        rc = gpuq_cpu_grid(dt, r->lat_start, r->lat_stop, r->lat_n, r->lon_start, r->lon_stop,
                           r->lon_n, r->to_lat, r->to_lon, r->radius, job->h_out);
        break;
    case GPUQ_OP_PAIRWISE: /* the check requires shape_b */
        rc = gpuq_cpu_pairwise(dt, (int)r->metric, r->zero_ok, in, in_b, sz->m, sz->n, sz->d,
                               job->h_out);
        break;
    default:
        job->status = GPUQ_E_UNKNOWN_OP;
        snprintf(job->message, sizeof job->message, "op not runnable on a backend");
        return;
    }
    job->status = backend_map_kernel_error(job, rc);
}
