/* SPDX-License-Identifier: Apache-2.0 */
/* backend_run.h - backend_run_cpu (declared in backend.h) and the mapping of
 * kernel codes to wire codes, shared by the backends. The ops' own hooks
 * (run, launch, messages, buffer layout) are in ops/op_backend.h. */
#ifndef GPUQ_SERVER_BACKEND_RUN_H
#define GPUQ_SERVER_BACKEND_RUN_H

#include "backend.h"

/* Map a GPUQ_K_E_* code to GPUQ_E_* and write a one-line message for it into
 * job->message (the op's kernel_message hook first, else a generic one). */
int backend_map_kernel_error(gpuq_job *job, int kcode);

#endif
