/* limits.c - the default configurable limits (values live in gpuq_limits.h). */
#include "gpuq_limits.h"

void gpuq_limits_default(gpuq_limits *l)
{
    l->max_header = GPUQ_DEFAULT_MAX_HEADER;
    l->max_payload = GPUQ_DEFAULT_MAX_PAYLOAD;
    l->max_inflight = GPUQ_DEFAULT_MAX_INFLIGHT;
    l->session_staging = GPUQ_DEFAULT_SESSION_STAGING;
    l->total_staging = GPUQ_DEFAULT_TOTAL_STAGING;
    l->max_sessions = GPUQ_DEFAULT_MAX_SESSIONS;
    l->max_output = GPUQ_DEFAULT_MAX_OUTPUT;
}
