/* SPDX-License-Identifier: Apache-2.0 */
/* resident.c - the resident-array ops (PROTOCOL.md 3.5): put and get, two
 * compute ops that copy one array (put: the request's array kept under
 * "name"; get: the array "name" returned, or kept again under another
 * name), and list and remove, two control ops. The decoder turns put's
 * "name" into its one output kept (out = [name]) and get's into its one
 * input named (in = [name]); the server resolves names, owners and quotas
 * (server/planes/resident.c, server/request/request.c), so here a put or a
 * get is an array copied to its output, byte for byte.
 */

/* ---------------------------------------------------------------- proto */
#ifdef GPUQ_OP_PROTO
#include "errors.h"
#include "op_def.h"

/* One array of rank 1 or 2 in, the same array out. dtype: put's f32 or f64
 * (a request's); get's also i64 (a kept knn index, as the server filled
 * it in from the array). */
static int check_copy(const gpuq_request *req, const char *op, bool any_dtype, gpuq_sizes *sz,
                      uint64_t *in_elems, char *msg, size_t cap)
{
    int rc;
    if (!any_dtype || req->dtype != GPUQ_DT_I64) {
        if ((rc = op_check_dtype(req, msg, cap)) != 0)
            return rc;
    }
    if (req->ndim_a < 1 || req->ndim_a > 2)
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "%s needs \"shape\" of rank 1 or 2", op);
    if (req->ndim_b != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "%s takes no \"shape_b\"", op);
    if ((rc = op_check_nonempty("shape", req->ndim_a, req->shape_a, msg, cap)) != 0)
        return rc;
    uint64_t d1 = req->ndim_a == 2 ? req->shape_a[1] : 1;
    if (!op_mul(req->shape_a[0], d1, in_elems))
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape [%llu, %llu] overflows",
                        (unsigned long long)req->shape_a[0], (unsigned long long)d1);
    sz->rows = req->shape_a[0];
    sz->cols = d1;
    op_set_out(sz, 0, GPUQ_DT_NONE, req->ndim_a, req->shape_a[0], req->shape_a[1]);
    return 0;
}

static int check_put(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                     gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    (void)payload_len;
    (void)lim;
    if (!req->name[0])
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "put needs \"name\"");
    return check_copy(req, "put", false, sz, in_elems, msg, cap);
}

static int check_get(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                     gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    (void)payload_len;
    (void)lim;
    if (!req->name[0])
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "get needs \"name\"");
    if (req->ndim_a == 0) /* the server fills the array's in before the check */
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE,
                        "get has no shape (the server gives it the array's)");
    return check_copy(req, "get", true, sz, in_elems, msg, cap);
}

static int check_remove(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                        gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    (void)payload_len;
    (void)lim;
    (void)sz;
    (void)in_elems;
    if (!req->name[0])
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "remove needs \"name\"");
    return 0;
}

const gpuq_op_def op_def_put = {.op = GPUQ_OP_PUT,
                                .name = "put",
                                .flags = GPUQ_OPF_COMPUTE | GPUQ_OPF_SHAPES,
                                .check = check_put};
/* (its shape is encoded when set: a client may say what it expects; the
 * server uses the array's) */
const gpuq_op_def op_def_get = {.op = GPUQ_OP_GET,
                                .name = "get",
                                .flags = GPUQ_OPF_COMPUTE | GPUQ_OPF_SHAPES,
                                .check = check_get};
const gpuq_op_def op_def_list = {
    .op = GPUQ_OP_LIST, .name = "list", .flags = GPUQ_OPF_NO_PAYLOAD, .check = NULL};
const gpuq_op_def op_def_remove = {
    .op = GPUQ_OP_REMOVE, .name = "remove", .flags = GPUQ_OPF_NO_PAYLOAD, .check = check_remove};
#endif

/* -------------------------------------------------------------- backend */
#ifdef GPUQ_OP_BACKEND
#include <string.h>

#include "op_backend.h"

static int run_cpu(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h)
{
    (void)r;
    memcpy(h->out[0], h->a, (size_t)sz->in_bytes[0]);
    return GPUQ_K_OK;
}

#ifdef GPUQ_HAVE_CUDA
static int launch_cuda(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                       const op_bufs *d)
{
    (void)r;
    return gpuq_cuda_copy(ctx, d->out[0], d->a, (size_t)sz->in_bytes[0]);
}
#endif

#ifdef GPUQ_HAVE_CUDA
#define RESIDENT_COPY_                                                                             \
    {                                                                                              \
        .run_cpu = run_cpu, .launch_cuda = launch_cuda                                             \
    }
#else
#define RESIDENT_COPY_                                                                             \
    {                                                                                              \
        .run_cpu = run_cpu                                                                         \
    }
#endif
const op_backend_def op_backend_put = RESIDENT_COPY_;
const op_backend_def op_backend_get = RESIDENT_COPY_;
#undef RESIDENT_COPY_
/* list and remove never reach a backend */
const op_backend_def op_backend_list, op_backend_remove;
#endif

/* ------------------------------------------------------------------ ctl */
#ifdef GPUQ_OP_CTL
#include "op_ctl.h"

/* gpuqctl put, get, ls, rm: client/cli/ctl_resident.c (an op command's
 * "@NAME" inputs and outputs: client/cli/ctl_xfer.c) */
const ctl_entry *const op_ctl_put = &ctl_put_entry;
const ctl_entry *const op_ctl_get = &ctl_get_entry;
const ctl_entry *const op_ctl_list = &ctl_ls_entry;
const ctl_entry *const op_ctl_remove = &ctl_rm_entry;
#endif
