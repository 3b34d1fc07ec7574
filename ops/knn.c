/* SPDX-License-Identifier: Apache-2.0 */
/* knn.c - the knn op: for each row of X [m, d] the k nearest rows of Y
 * [n, d] under "metric" (pairwise's metrics, "p" and zero rule): distances
 * [m, k] in the input dtype, then indices [m, k] as int64, nearest first,
 * exact ties by the lower index, NaN distances last.
 *
 * The two outputs are packed, so the indices start at m*k*4 bytes for f32:
 * misaligned for int64 when m*k is odd. The CPU run then writes them into an
 * aligned temporary and copies; the CUDA run always has the kernel write
 * them into an aligned part of scratch and copies them device to device
 * (a few bytes per query, against an m x n distance walk).
 */
enum { K_METRIC, K_K, K_ON_ZERO, K_P, K_COUNT_ };

/* ---------------------------------------------------------------- proto */
#ifdef GPUQ_OP_PROTO
#include "errors.h"
#include "gpuq_kernel_enums.h"
#include "op_def.h"

/* gpuq_kernels.h's GPUQ_KNN_K_LIMIT (2^29); proto does not include the
 * kernels' header (it pulls in the CUDA runtime's), so the backend side
 * asserts that both agree. In practice max_output bounds k first. */
#define KNN_K_MAX 536870912ull

static const gpuq_key_def keys[K_COUNT_] = {
    [K_METRIC] = OP_METRIC_KEY_DEF,
    [K_K] = {"k", GPUQ_ARG_UINT, 0, {.u = 0}, NULL, 0, NULL, 0},
    [K_ON_ZERO] = OP_ON_ZERO_KEY_DEF,
    [K_P] = OP_P_KEY_DEF,
};

static int check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                 gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    int rc;
    uint64_t out;
    if ((rc = op_check_dtype(req, msg, cap)) != 0)
        return rc;
    if (!gpuq_request_arg_isset(req, K_METRIC)) /* required, as for pairwise */
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "knn needs \"metric\" (euclidean, sqeuclidean, cosine, manhattan, "
                        "chebyshev or minkowski)");
    if ((rc = op_check_metric_p(req, K_METRIC, K_P, msg, cap)) != 0)
        return rc;
    if (!gpuq_request_arg_isset(req, K_K))
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "knn needs \"k\" (1 .. n, the rows of y)");
    if ((rc = op_check_xy(req, sz, in_elems, msg, cap)) != 0)
        return rc;
    uint64_t k = gpuq_request_arg_uint(req, K_K);
    if (k == 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "k=0: knn needs k >= 1");
    if (k > sz->n)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "k=%llu is more than the n=%llu rows of y",
                        (unsigned long long)k, (unsigned long long)sz->n);
    if (k > KNN_K_MAX)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "k=%llu is more than %llu",
                        (unsigned long long)k, KNN_K_MAX);
    if (!op_mul(sz->m, k, &out) || sz->n > (uint64_t)INT64_MAX)
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "knn output [%llu, %llu] overflows",
                        (unsigned long long)sz->m, (unsigned long long)k);
    op_set_out(sz, 0, GPUQ_DT_NONE, 2, sz->m, k);
    op_set_out(sz, 1, GPUQ_DT_I64, 2, sz->m, k);
    return 0;
}

const gpuq_op_def op_def_knn = {.op = GPUQ_OP_KNN,
                                .name = "knn",
                                .flags = GPUQ_OPF_COMPUTE | GPUQ_OPF_SHAPES,
                                .keys = keys,
                                .nkeys = K_COUNT_,
                                .check = check};
#endif

/* -------------------------------------------------------------- backend */
#ifdef GPUQ_OP_BACKEND
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_backend.h"

_Static_assert(GPUQ_KNN_K_LIMIT == 536870912ull,
               "ops/knn.c's KNN_K_MAX differs from GPUQ_KNN_K_LIMIT");

/* Query rows [r0, r0 + nr): each row's neighbours are found on its own. */
static int run_cpu_rows(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h,
                        const op_rows *rw)
{
    int zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO); /* the on_zero mode */
    uint64_t k = gpuq_request_arg_uint(r, K_K);
    size_t es = gpuq_dtype_size(r->dtype), ib = (size_t)(rw->nr * k) * sizeof(int64_t);
    char *out_idx = (char *)h->out[1] + (size_t)(rw->r0 * k) * sizeof(int64_t);
    int64_t *idx = (int64_t *)(void *)out_idx, *tmp = NULL;
    if ((uintptr_t)idx % _Alignof(int64_t) != 0) { /* packed after an odd count of f32 */
        if (!(tmp = malloc(ib ? ib : 1)))
            return GPUQ_K_E_NOMEM;
        idx = tmp;
    }
    int kc = gpuq_cpu_knn(op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METRIC),
                          gpuq_request_arg_double(r, K_P), zero_ok,
                          (const char *)h->a + (size_t)(rw->r0 * sz->d) * es, h->b, rw->nr, sz->n,
                          sz->d, k, (char *)h->out[0] + (size_t)(rw->r0 * k) * es, idx);
    if (tmp) {
        if (kc == GPUQ_K_OK)
            memcpy(out_idx, tmp, ib);
        free(tmp);
    }
    return kc;
}

static int run_cpu(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h)
{
    op_rows all = {.r0 = 0, .nr = sz->m, .chunk = sz->m};
    return run_cpu_rows(r, sz, h, &all);
}

/* Scratch: the kernels' tile, then (at a 256-byte boundary) the indices. */
static uint64_t idx_offset(const gpuq_request *r, const gpuq_sizes *sz)
{
    uint64_t tile = gpuq_cuda_knn_scratch_bytes(op_kernel_dtype(r), sz->m, sz->n, sz->d,
                                                gpuq_request_arg_uint(r, K_K));
    return (tile + 255) & ~(uint64_t)255;
}

static uint64_t cuda_scratch(const gpuq_request *r, const gpuq_sizes *sz)
{
    return idx_offset(r, sz) + sz->out[1].bytes;
}

#ifdef GPUQ_HAVE_CUDA
static int launch_cuda(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                       const op_bufs *d)
{
    int zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO); /* the on_zero mode */
    int64_t *d_idx = (int64_t *)((char *)d->scratch + idx_offset(r, sz));
    int kc = gpuq_cuda_knn(ctx, op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METRIC),
                           gpuq_request_arg_double(r, K_P), zero_ok, d->a, d->b, sz->m, sz->n,
                           sz->d, gpuq_request_arg_uint(r, K_K), d->scratch, d->out[0], d_idx);
    if (kc != GPUQ_K_OK)
        return kc;
    cudaError_t e = cudaMemcpyAsync(d->out[1], d_idx, (size_t)sz->out[1].bytes,
                                    cudaMemcpyDeviceToDevice, gpuq_cuda_ctx_stream(ctx));
    return e == cudaSuccess ? GPUQ_K_OK : gpuq_cuda_error_code(e);
}

/* A split run's scratch: the indices of one chunk first (aligned), then
 * the kernels' tile for the larger of a whole chunk's and the last one's
 * (the tile's size is not monotonic in the rows). */
static uint64_t chunk_idx_bytes(const gpuq_request *r, uint64_t chunk)
{
    return (chunk * gpuq_request_arg_uint(r, K_K) * sizeof(int64_t) + 255) & ~(uint64_t)255;
}

static uint64_t cuda_chunk_scratch(const gpuq_request *r, const gpuq_sizes *sz, uint64_t chunk)
{
    int dt = op_kernel_dtype(r);
    uint64_t k = gpuq_request_arg_uint(r, K_K), last = sz->m - (sz->m - 1) / chunk * chunk;
    uint64_t t1 = gpuq_cuda_knn_scratch_bytes(dt, chunk, sz->n, sz->d, k);
    uint64_t t2 = gpuq_cuda_knn_scratch_bytes(dt, last, sz->n, sz->d, k);
    return chunk_idx_bytes(r, chunk) + (t1 > t2 ? t1 : t2);
}

/* Query rows [r0, r0 + nr) against all of Y: each row's top-k is exact
 * (every distance computed on its own, the order total), so it is the
 * whole run's whatever the tiling of a smaller m. The indices go through
 * scratch (out[1] may be misaligned) into their rows of out[1]. */
static int launch_cuda_rows(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                            const op_bufs *d, const op_rows *rw)
{
    int zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO); /* the on_zero mode */
    uint64_t k = gpuq_request_arg_uint(r, K_K);
    size_t es = gpuq_dtype_size(r->dtype), rows_k = (size_t)(rw->r0 * k);
    int64_t *d_idx = d->scratch;
    void *tile = (char *)d->scratch + chunk_idx_bytes(r, rw->chunk);
    int kc = gpuq_cuda_knn(ctx, op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METRIC),
                           gpuq_request_arg_double(r, K_P), zero_ok,
                           (const char *)d->a + (size_t)(rw->r0 * sz->d) * es, d->b, rw->nr, sz->n,
                           sz->d, k, tile, (char *)d->out[0] + rows_k * es, d_idx);
    if (kc != GPUQ_K_OK)
        return kc;
    cudaError_t e = cudaMemcpyAsync((char *)d->out[1] + rows_k * sizeof(int64_t), d_idx,
                                    (size_t)(rw->nr * k) * sizeof(int64_t),
                                    cudaMemcpyDeviceToDevice, gpuq_cuda_ctx_stream(ctx));
    return e == cudaSuccess ? GPUQ_K_OK : gpuq_cuda_error_code(e);
}
#endif

/* Cross-session row batches: each query row's top-k is exact, whatever
 * the other rows (launch_cuda_rows says why), on both backends. */
static int row_batch(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp, uint64_t key[4])
{
    key[0] = (uint64_t)gpuq_request_arg_enum(r, K_METRIC);
    key[1] = gpuq_request_arg_uint(r, K_K);
    key[2] = (uint64_t)gpuq_request_arg_enum(r, K_ON_ZERO);
    double p = gpuq_request_arg_double(r, K_P); /* minkowski's: equal p batch together */
    memcpy(&key[3], &p, sizeof p);
    return op_row_split(sz, sp);
}

/* X splits by query rows; Y goes up whole first. */
static int cuda_split(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp)
{
    (void)r;
    if (!op_split_rows(sz, sz->m, 0, sp))
        return 0;
    sp->fixed_chunks = 1; /* the scratch holds a chunk's indices and tile */
    return 1;
}

const op_backend_def op_backend_knn = {.run_cpu = run_cpu,
                                       .run_cpu_rows = run_cpu_rows,
#ifdef GPUQ_HAVE_CUDA
                                       .launch_cuda = launch_cuda,
                                       .cuda_chunk_scratch = cuda_chunk_scratch,
                                       .launch_cuda_rows = launch_cuda_rows,
#endif
                                       .cuda_split = cuda_split,
                                       .cuda_scratch = cuda_scratch,
                                       .row_batch = row_batch,
                                       .kernel_message = op_cosine_zero_message};
#endif

/* ------------------------------------------------------------------ ctl */
#ifdef GPUQ_OP_CTL
#include "op_ctl.h"

static int exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *metric_s = NULL, *k_s = NULL, *out_path = NULL, *idx_path = NULL;
    const char *p_s = NULL, *on_zero_s = NULL;
    bool timing = false;
    const ctl_opt opts[] = {{"--metric", &metric_s, NULL}, {"--k", &k_s, NULL},
                            {"-o", &out_path, NULL},       {"--output", &out_path, NULL},
                            {"-i", &idx_path, NULL},       {"--indices", &idx_path, NULL},
                            {"--p", &p_s, NULL},           {"--on-zero", &on_zero_s, NULL}};
    const char *pos[2];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 8, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!k_s)
        return ctl_usage_error(ctx, "--k K is required");
    if (!out_path || !idx_path)
        return ctl_usage_error(ctx, "-o DIST.npy and -i IDX.npy are required");
    uint64_t k;
    if (ctl_parse_u64(k_s, &k))
        return ctl_usage_error(ctx, "bad --k '%s' (a whole number, 1 .. n)", k_s);
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_KNN;
    if ((rc = ctl_check_files(ctx, pos, npos)))
        return rc;
    if ((rc = op_ctl_set_metric(ctx, &r, metric_s, p_s, on_zero_s)))
        return rc;
    gpuq_request_set_uint(&r, "k", k);
    npy_array x, y;
    if ((rc = op_ctl_load(pos[0], &x)))
        return rc;
    if ((rc = op_ctl_load(pos[1], &y)))
        goto out_x;
    if (x.dtype != y.dtype) {
        rc = ctl_failf(GPUQ_E_BAD_DTYPE, "%s and %s have different dtypes", pos[0], pos[1]);
        goto out_y;
    }
    r.dtype = x.dtype;
    op_ctl_shape_a(&r, &x);
    op_ctl_shape_b(&r, &y);
    const op_ctl_out outs[2] = {{x.dtype, 2, {x.shape[0], k}, out_path},
                                {GPUQ_DT_I64, 2, {x.shape[0], k}, idx_path}};
    rc = op_ctl_run_outs(ctx, &r, &x, &y, outs, 2, timing);
out_y:
    npy_free(&y);
out_x:
    npy_free(&x);
    return rc;
}

static const ctl_optdoc opts_doc[] = {
    {"--k", NULL, "K", NULL,
     "Neighbours per row of X, 1 .. n (the rows of Y) (required); the result, [m, K] "
     "distances and indices, must fit the server's max_output."},
    OP_METRIC_OPT_DOCS,
    {"--on-zero", NULL, "error|zero|nan", "error",
     "A zero row under cosine: the error zero_norm, distance 1 (zero) or NaN (nan: sorted "
     "last)."},
    {"--timing", NULL, NULL, NULL,
     "Print gpuqd's timing of the request on stderr: queue, copies to and from the device, "
     "kernel, total."},
    {"--output", "-o", "DIST.npy", NULL,
     "Where to write the distances [m, K], X's dtype, nearest first (required)."},
    {"--indices", "-i", "IDX.npy", NULL,
     "Where to write the indices [m, K], int64 row numbers of Y (required)."},
    {NULL, NULL, NULL, NULL, NULL},
};

static const ctl_entry entry = {
    .name = "distance knn",
    .usage = "--k K [--metric NAME] [--p P] [--on-zero error|zero|nan] [--timing] X.npy Y.npy "
             "-o DIST.npy -i IDX.npy",
    .min_args = 2,
    .max_args = 2,
    .exec = exec,
    .help = "For each row of X, the K nearest rows of Y: distances and indices.",
    .desc = "Find on gpuqd, for each row of X.npy [m, d], the K rows of Y.npy [n, d] nearest to "
            "it (float32 or float64, the same dtype and d), and write their distances (X's "
            "dtype) to DIST.npy and their row numbers in Y (int64) to IDX.npy, both [m, K], "
            "nearest first; equal distances come by the lower index, NaN distances last. The "
            "distances are those of 'distance pairwise' with the same metric.",
    .opts = opts_doc,
    .example = "gpuqctl distance knn --k 5 X.npy Y.npy -o D.npy -i I.npy\n"
               "gpuqctl distance knn --k=10 --metric=cosine X.npy Y.npy -o D.npy -i I.npy",
};
const ctl_entry *const op_ctl_knn = &entry;
#endif
