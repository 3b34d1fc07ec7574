/* backend_run.c - one job on the CPU reference kernels.
 *
 * Maps a checked request to gpuq_cpu_* with pointers into the staging slot
 * (h_in: A then B; h_out: result). Kernel codes become wire codes with a
 * message; for a zero norm or a result too large for the dtype the offending
 * row is found again by the CPU reference's rules (error path only).
 */
#include "backend_run.h"

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

/* The first failing row of a normalize input (the kernel's own rules, see
 * gpuq_cpu_normalize_find); -1 if none is found (error path only). */
static long long failing_row(const gpuq_job *job, int kcode)
{
    const gpuq_request *r = job->req;
    uint64_t row = 0;
    if (!job->h_in)
        return -1;
    int rc = gpuq_cpu_normalize_find(backend_kernel_dtype(r), (int)r->method, job->h_in,
                                     job->sz->rows, job->sz->cols, &row);
    return rc == kcode ? (long long)row : -1;
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
            long long row = failing_row(job, kcode);
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
    case GPUQ_K_E_OVERFLOW: {
        long long row = r->op == GPUQ_OP_NORMALIZE ? failing_row(job, kcode) : -1;
        const char *dt = gpuq_dtype_name(r->dtype);
        if (row >= 0)
            snprintf(m, cap, "row %lld: a %s result is too large for %s", row,
                     gpuq_norm_method_name(r->method), dt);
        else
            snprintf(m, cap, "a result is too large for %s", dt);
        return GPUQ_E_OUT_OF_RANGE;
    }
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
