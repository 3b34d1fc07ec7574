/* backend_run.h - backend_run_cpu (declared in backend.h) and the mapping of
 * kernel codes to wire codes, shared by the backends. */
#ifndef GPUQ_SERVER_BACKEND_RUN_H
#define GPUQ_SERVER_BACKEND_RUN_H

#include "backend.h"

/* Map a GPUQ_K_E_* code to GPUQ_E_* and write a one-line message for it into
 * job->message (job's request gives the context). */
int backend_map_kernel_error(gpuq_job *job, int kcode);

/* The kernels' dtype code (GPUQ_K_F32/F64) of a checked request. */
int backend_kernel_dtype(const gpuq_request *r);

/* Byte offset of array B in the job's input (A is 2-D whenever a B exists:
 * haversine [n,2] pairs, pairwise [m,d]); 0 when the request has no B. */
size_t backend_b_offset(const gpuq_request *r);

#endif
