/* SPDX-License-Identifier: Apache-2.0 */
/* normalize.c - the normalize op: each row (or the whole array with "flat",
 * or each column with "axis" 0) scaled by its sum, L1 or L2 norm, or to
 * [0, 1] (minmax), or standardized (zscore). Input A [n] or [rows, cols]
 * f32/f64; output the same shape and dtype. A zero norm or constant row is
 * zero_norm unless "on_zero" is "zero" (that row all zeros) or "nan" (all
 * NaN); a result out of the dtype's range is

 * out_of_range; both name the row (the column).
 *
 * Columns ("axis" 0 of a 2-D array) are the rows of the transposed array,
 * normalized by the row code on the transposed values, so bit for bit what
 * the rows of A.T give: the CPU gathers blocks of columns into rows and
 * scatters the results back; CUDA transposes A into the output buffer,
 * normalizes its rows into scratch (rows * cols values) and transposes back
 * (two transposes: about 4 extra passes over the array's bytes). Neither
 * backend pipelines or batches a column run: it runs whole.
 */
enum { K_METHOD, K_FLAT, K_ON_ZERO, K_AXIS, K_COUNT_ };

/* Does the checked request normalize columns ("axis" 0 or -2, 2-D)? */
#define NORM_BY_COLS(r)                                                                            \
    ((r)->ndim_a == 2 && gpuq_request_arg_isset((r), K_AXIS) &&                                    \
     (gpuq_request_arg_int((r), K_AXIS) == 0 || gpuq_request_arg_int((r), K_AXIS) == -2))

/* ---------------------------------------------------------------- proto */
#ifdef GPUQ_OP_PROTO
#include "errors.h"
#include "gpuq_kernel_enums.h"
#include "op_def.h"

static const char *const method_names[GPUQ_K_METHOD_COUNT] = {[GPUQ_K_SUM] = "sum",
                                                              [GPUQ_K_L1] = "l1",
                                                              [GPUQ_K_L2] = "l2",
                                                              [GPUQ_K_MINMAX] = "minmax",
                                                              [GPUQ_K_ZSCORE] = "zscore"};
_Static_assert((int)GPUQ_NORM_COUNT == GPUQ_K_METHOD_COUNT && (int)GPUQ_NORM_SUM == GPUQ_K_SUM &&
                   (int)GPUQ_NORM_L1 == GPUQ_K_L1 && (int)GPUQ_NORM_L2 == GPUQ_K_L2 &&
                   (int)GPUQ_NORM_MINMAX == GPUQ_K_MINMAX && (int)GPUQ_NORM_ZSCORE == GPUQ_K_ZSCORE,
               "proto/header.h's GPUQ_NORM_* differ from the kernels' GPUQ_K_* methods");

static const gpuq_key_def keys[K_COUNT_] = {
    [K_METHOD] = {"method",
                  GPUQ_ARG_ENUM,
                  GPUQ_KEYF_ENCODE_DEFAULT,
                  {.e = GPUQ_K_SUM},
                  method_names,
                  GPUQ_K_METHOD_COUNT,
                  NULL,
                  0},
    [K_FLAT] = {"flat", GPUQ_ARG_BOOL, 0, {.b = false}, NULL, 0, NULL, 0},
    [K_ON_ZERO] = OP_ON_ZERO_KEY_DEF,
    [K_AXIS] = {"axis", GPUQ_ARG_INT, 0, {.i = -1}, NULL, 0, NULL, 0},
};

const char *gpuq_norm_method_name(gpuq_norm_method m)
{
    return (unsigned)m < GPUQ_K_METHOD_COUNT ? method_names[m] : NULL;
}

int gpuq_norm_method_parse(const char *s, size_t len)
{
    return hdr_lookup(method_names, GPUQ_K_METHOD_COUNT, s, len);
}

static int check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                 gpuq_sizes *sz, uint64_t *in_elems, char *msg, size_t cap)
{
    int rc;
    if ((rc = op_check_dtype(req, msg, cap)) != 0)
        return rc;
    if (req->ndim_a < 1 || req->ndim_a > 2)
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "normalize needs \"shape\" of rank 1 or 2");
    if (req->ndim_b != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "normalize takes no \"shape_b\"");
    if ((rc = op_check_nonempty("shape", req->ndim_a, req->shape_a, msg, cap)) != 0)
        return rc;
    if (gpuq_request_arg_isset(req, K_AXIS)) {
        int64_t ax = gpuq_request_arg_int(req, K_AXIS);
        if (gpuq_request_arg_bool(req, K_FLAT))
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                            "normalize takes \"axis\" or \"flat\", not both");
        if (req->ndim_a == 1 && ax != 0 && ax != -1)
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                            "axis=%lld is out of range for a 1-D array (0 or -1)", (long long)ax);
        if (req->ndim_a == 2 && (ax < -2 || ax > 1))
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                            "axis=%lld is out of range for a 2-D array (0, 1, -1 or -2)",
                            (long long)ax);
    }
    if (req->ndim_a == 1) {
        sz->rows = 1;
        sz->cols = req->shape_a[0];
    } else if (gpuq_request_arg_bool(req, K_FLAT)) {
        sz->rows = 1;
        if (!op_mul(req->shape_a[0], req->shape_a[1], &sz->cols))
            return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape [%llu, %llu] overflows",
                            (unsigned long long)req->shape_a[0],
                            (unsigned long long)req->shape_a[1]);
    } else if (NORM_BY_COLS(req)) { /* the rows of A.T */
        sz->rows = req->shape_a[1];
        sz->cols = req->shape_a[0];
    } else {
        sz->rows = req->shape_a[0];
        sz->cols = req->shape_a[1];
    }
    if (!op_mul(sz->rows, sz->cols, in_elems))
        return hdr_fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape [%llu, %llu] overflows",
                        (unsigned long long)sz->rows, (unsigned long long)sz->cols);
    op_set_out(sz, 0, GPUQ_DT_NONE, req->ndim_a, req->shape_a[0], req->shape_a[1]);
    return 0;
}

const gpuq_op_def op_def_normalize = {.op = GPUQ_OP_NORMALIZE,
                                      .name = "normalize",
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

/* Columns per block of the CPU column run: a block's gathered rows come to
 * about NORM_COL_BLOCK_BYTES (at least one column). */
#define NORM_COL_BLOCK_BYTES ((size_t)1 << 20)

/* v's column c of an nr x nc array of element size es into dst[nr]. */
static void norm_gather(const char *v, uint64_t nr, uint64_t nc, size_t es, uint64_t c, uint64_t nb,
                        char *dst)
{
    for (uint64_t i = 0; i < nr; i++)
        for (uint64_t j = 0; j < nb; j++)
            memcpy(dst + (size_t)(j * nr + i) * es, v + (size_t)(i * nc + c + j) * es, es);
}

/* Columns of A [R, C] (sz: rows C, cols R): blocks of columns gathered into
 * rows, normalized by the row code, scattered back. */
static int run_cpu_cols(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h)
{
    int zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO);
    size_t es = gpuq_dtype_size(r->dtype);
    uint64_t nr = sz->cols, nc = sz->rows, per = NORM_COL_BLOCK_BYTES / (nr * es);
    if (per < 1)
        per = 1;
    if (per > nc)
        per = nc;
    char *t_in = malloc((size_t)(per * nr) * es), *t_out = malloc((size_t)(per * nr) * es);
    int kc = t_in && t_out ? GPUQ_K_OK : GPUQ_K_E_NOMEM;
    for (uint64_t c = 0; kc == GPUQ_K_OK && c < nc; c += per) {
        uint64_t nb = nc - c < per ? nc - c : per;
        norm_gather(h->a, nr, nc, es, c, nb, t_in);
        kc = gpuq_cpu_normalize(op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METHOD), zero_ok,
                                t_in, t_out, nb, nr);
        for (uint64_t i = 0; kc == GPUQ_K_OK && i < nr; i++)
            for (uint64_t j = 0; j < nb; j++)
                memcpy((char *)h->out[0] + (size_t)(i * nc + c + j) * es,
                       t_out + (size_t)(j * nr + i) * es, es);
    }
    free(t_out);
    free(t_in);
    return kc;
}

/* Device scratch: a column run's transposed result (rows * cols values). */
static uint64_t cuda_scratch(const gpuq_request *r, const gpuq_sizes *sz)
{
    return NORM_BY_COLS(r) ? sz->rows * sz->cols * gpuq_dtype_size(r->dtype) : sz->scratch;
}

/* Rows [r0, r0 + nr) (each row is normalized on its own: the same bits as
 * the whole run's; a 1-D or flat array is one row: whole, or in pieces). */
static int run_cpu_rows(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h,
                        const op_rows *rw)
{
    int zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO);
    size_t off = (size_t)(rw->r0 * sz->cols) * gpuq_dtype_size(r->dtype);
    return gpuq_cpu_normalize(op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METHOD), zero_ok,
                              (const char *)h->a + off, (char *)h->out[0] + off, rw->nr, sz->cols);
}

/* A long 1-D or flat row on the CPU in pieces (op_backend.h: cpu_piece):
 * 2^16 values, 256 KiB of float32, a piece's pass in a core's L2. */
#define NORM_CPU_PIECE ((uint64_t)1 << 16)

static uint64_t cpu_scratch(const gpuq_request *r, const gpuq_sizes *sz)
{
    (void)r;
    return gpuq_cpu_normalize_flat_scratch_bytes(sz->cols, NORM_CPU_PIECE);
}

static int run_cpu_reduce(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h,
                          const op_rows *rw, int pass)
{
    return gpuq_cpu_normalize_flat_reduce(op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METHOD),
                                          pass, h->a, sz->cols, NORM_CPU_PIECE,
                                          rw->r0 / NORM_CPU_PIECE, h->scratch);
}

static int run_cpu_combine(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h, int pass,
                           int *more)
{
    return gpuq_cpu_normalize_flat_finish(op_kernel_dtype(r), gpuq_request_arg_enum(r, K_METHOD),
                                          gpuq_request_arg_enum(r, K_ON_ZERO), pass, sz->cols,
                                          NORM_CPU_PIECE, h->scratch, more);
}

static int run_cpu_scale(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h,
                         const op_rows *rw)
{
    return gpuq_cpu_normalize_flat_scale(op_kernel_dtype(r), h->a, h->out[0], sz->cols, rw->r0,
                                         rw->nr, h->scratch);
}

static int run_cpu(const gpuq_request *r, const gpuq_sizes *sz, const op_bufs *h)
{
    if (NORM_BY_COLS(r))
        return run_cpu_cols(r, sz, h);
    op_rows all = {.r0 = 0, .nr = sz->rows, .chunk = sz->rows};
    return run_cpu_rows(r, sz, h, &all);
}

/* Pipelined: rows split by rows (each row is normalized on its own, by a
 * launch shape that depends on cols only); one row (1-D or flat) splits by
 * values in two phases: the pieces' partial reductions run as they land,
 * then the combine, then the scaling of each piece (the kernels'
 * gpuq_cuda_normalize_flat_*). Split rows are bit for bit the whole run's,
 * except rows of 2^17 values or more once rows * cols passes 2^30 (the
 * long-row path then groups its partials by rows); flat values agree to
 * within the kernels' documented error (minmax exactly). */
static int cuda_split(const gpuq_request *r, const gpuq_sizes *sz, op_split *sp)
{
    if (NORM_BY_COLS(r)) /* a column is not contiguous: whole */
        return 0;
    if (sz->rows > 1)
        return op_split_rows(sz, sz->rows, 0, sp);
    if (!op_split_rows(sz, sz->cols, 0, sp))
        return 0;
    sp->two_phase = 1;
    return 1;
}

#ifdef GPUQ_HAVE_CUDA
static int launch_cuda(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                       const op_bufs *d)
{
    int zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO), dt = op_kernel_dtype(r), kc;
    if (!NORM_BY_COLS(r))
        return gpuq_cuda_normalize(ctx, dt, gpuq_request_arg_enum(r, K_METHOD), zero_ok, d->a,
                                   d->out[0], sz->rows, sz->cols);
    /* A [cols, rows] -> A.T [rows, cols] in out, its rows into scratch, back into out */
    if ((kc = gpuq_cuda_transpose(ctx, dt, d->a, d->out[0], sz->cols, sz->rows)) != GPUQ_K_OK ||
        (kc = gpuq_cuda_normalize(ctx, dt, gpuq_request_arg_enum(r, K_METHOD), zero_ok, d->out[0],
                                  d->scratch, sz->rows, sz->cols)) != GPUQ_K_OK)
        return kc;
    return gpuq_cuda_transpose(ctx, dt, d->scratch, d->out[0], sz->rows, sz->cols);
}

/* One item of a batched launch: rows of fewer than 2^17 values, the
 * launch shapes gpuq_cuda_normalize uses for them, so the same bits. */
static int cuda_batch_item(const gpuq_request *r, const gpuq_sizes *sz, const void *in, void *out,
                           gpuq_norm_item *it)
{
    if (sz->cols == 0 || sz->cols >= GPUQ_NORM_BATCH_MAX_COLS || sz->rows == 0 || NORM_BY_COLS(r))
        return 0;
    it->in = in;
    it->out = out;
    it->flag = NULL;
    it->rows = sz->rows;
    it->cols = sz->cols;
    it->dt = op_kernel_dtype(r);
    it->method = gpuq_request_arg_enum(r, K_METHOD);
    it->zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO);
    return 1;
}

static uint64_t cuda_chunk_scratch(const gpuq_request *r, const gpuq_sizes *sz, uint64_t chunk)
{
    if (sz->rows > 1)
        return op_scratch_bytes(r, sz);
    return gpuq_cuda_normalize_flat_scratch_bytes(op_kernel_dtype(r), sz->cols, chunk);
}

static int launch_cuda_rows(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                            const op_bufs *d, const op_rows *rw)
{
    int dt = op_kernel_dtype(r), zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO);
    if (sz->rows == 1)
        return gpuq_cuda_normalize_flat_scale(ctx, dt, d->a, d->out[0], sz->cols, rw->r0, rw->nr,
                                              d->scratch);
    size_t at = (size_t)(rw->r0 * sz->cols) * gpuq_dtype_size(r->dtype);
    return gpuq_cuda_normalize(ctx, dt, gpuq_request_arg_enum(r, K_METHOD), zero_ok,
                               (const char *)d->a + at, (char *)d->out[0] + at, rw->nr, sz->cols);
}

static int launch_cuda_reduce(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                              const op_bufs *d, const op_rows *rw)
{
    return gpuq_cuda_normalize_flat_reduce(ctx, op_kernel_dtype(r),
                                           gpuq_request_arg_enum(r, K_METHOD), d->a, sz->cols,
                                           rw->chunk, rw->r0 / rw->chunk, d->scratch);
}

static int launch_cuda_finish(gpuq_cuda_ctx *ctx, const gpuq_request *r, const gpuq_sizes *sz,
                              const op_bufs *d, const op_rows *rw)
{
    int zero_ok = gpuq_request_arg_enum(r, K_ON_ZERO);
    return gpuq_cuda_normalize_flat_finish(ctx, op_kernel_dtype(r),
                                           gpuq_request_arg_enum(r, K_METHOD), zero_ok, d->a,
                                           sz->cols, rw->chunk, d->scratch);
}
#endif

/* The row the kernel stopped at, found again by the CPU reference's rules
 * (error path only). */
static int kernel_message(const gpuq_request *r, const gpuq_sizes *sz, const void *h_in,
                          const void *h_b, int kcode, char *m, size_t cap)
{
    (void)h_b;
    int method = gpuq_request_arg_enum(r, K_METHOD);
    const char *mname = gpuq_norm_method_name((gpuq_norm_method)method);
    uint64_t row = 0;
    long long at = -1;
    if (kcode != GPUQ_K_E_ZERO && kcode != GPUQ_K_E_OVERFLOW)
        return 0;
    const char *what = NORM_BY_COLS(r) ? "column" : "row";
    if (h_in && NORM_BY_COLS(r)) { /* each column as one row, in order */
        size_t es = gpuq_dtype_size(r->dtype);
        char *col = malloc((size_t)sz->cols * es);
        for (uint64_t c = 0; col && at < 0 && c < sz->rows; c++) {
            norm_gather(h_in, sz->cols, sz->rows, es, c, 1, col);
            if (gpuq_cpu_normalize_find(op_kernel_dtype(r), method, col, 1, sz->cols, &row) ==
                kcode)
                at = (long long)c;
        }
        free(col);
    } else if (h_in && gpuq_cpu_normalize_find(op_kernel_dtype(r), method, h_in, sz->rows, sz->cols,
                                               &row) == kcode) {
        at = (long long)row;
    }
    if (kcode == GPUQ_K_E_ZERO) {
        int constant = method == GPUQ_K_MINMAX || method == GPUQ_K_ZSCORE;
        if (at >= 0 && constant)
            snprintf(m, cap, "%s %lld is constant (%s)", what, at, mname);
        else if (at >= 0)
            snprintf(m, cap, "%s %lld has zero %s norm", what, at, mname);
        else
            snprintf(m, cap, "zero %s norm in a %s", mname ? mname : "", what);
        return 1;
    }
    if (at < 0)
        return 0;
    snprintf(m, cap, "%s %lld: a %s result is too large for %s", what, at, mname,
             gpuq_dtype_name(r->dtype));
    return 1;
}

const op_backend_def op_backend_normalize = {.run_cpu = run_cpu,
                                             .run_cpu_rows = run_cpu_rows,
                                             .cpu_piece = NORM_CPU_PIECE,
                                             .cpu_scratch = cpu_scratch,
                                             .run_cpu_reduce = run_cpu_reduce,
                                             .run_cpu_combine = run_cpu_combine,
                                             .run_cpu_scale = run_cpu_scale,
                                             .batchable = 1,
#ifdef GPUQ_HAVE_CUDA
                                             .cuda_batch_item = cuda_batch_item,
                                             .launch_cuda = launch_cuda,
                                             .cuda_chunk_scratch = cuda_chunk_scratch,
                                             .launch_cuda_rows = launch_cuda_rows,
                                             .launch_cuda_reduce = launch_cuda_reduce,
                                             .launch_cuda_finish = launch_cuda_finish,
#endif
                                             .cuda_split = cuda_split,
                                             .cuda_scratch = cuda_scratch,
                                             .kernel_message = kernel_message};
#endif

/* ------------------------------------------------------------------ ctl */
#ifdef GPUQ_OP_CTL
#include <errno.h>
#include <stdlib.h>

#include "op_ctl.h"

static int exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *method_s = NULL, *out_path = NULL, *axis_s = NULL;
    bool flat = false, timing = false;
    const ctl_opt opts[] = {{"--method", &method_s, NULL}, {"-m", &method_s, NULL},
                            {"-o", &out_path, NULL},       {"--output", &out_path, NULL},
                            {"--flat", NULL, &flat},       {"--axis", &axis_s, NULL}};
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 6, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!out_path)
        return ctl_usage_error(ctx, "-o OUT.npy is required");
    long long axis = 0;
    if (axis_s) { /* the range is gpuqd's to check (it knows the rank) */
        char *end = NULL;
        errno = 0;
        axis = strtoll(axis_s, &end, 10);
        if (!*axis_s || *end || errno)
            return ctl_usage_error(ctx, "bad --axis '%s' (an integer: 0, 1, -1 or -2)", axis_s);
        if (flat)
            return ctl_usage_error(ctx, "--axis and --flat do not go together");
    }
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_NORMALIZE;
    if ((rc = ctl_check_files(ctx, pos, npos)))
        return rc;
    if (method_s && (rc = ctl_set_enum(ctx, &r, "method", "--method", method_s)))
        return rc;
    if (flat)
        gpuq_request_set_bool(&r, "flat", true);
    if (axis_s)
        gpuq_request_set_int(&r, "axis", axis);
    npy_array a;
    if ((rc = op_ctl_load(pos[0], &a)))
        return rc;
    r.dtype = a.dtype;
    op_ctl_shape_a(&r, &a);
    rc = op_ctl_run(ctx, &r, &a, NULL, a.ndim, a.shape, out_path, timing);
    npy_free(&a);
    return rc;
}

static const ctl_optdoc opts_doc[] = {
    {"--method", "-m", "NAME", "sum",
     "sum (x / sum(x)), l1 (x / sum(|x|)), l2 (x / sqrt(sum(x^2))), minmax ((x - min) / (max - "
     "min), into [0, 1]) or zscore ((x - mean) / std, numpy's std with ddof=0)."},
    {"--flat", NULL, NULL, NULL,
     "Normalize a 2-D array as one vector; without it each row is normalized on its own."},
    {"--axis", NULL, "N", "-1",
     "The axis to normalize along, as numpy's and scikit-learn's axis: 1 or -1 each row, 0 or "
     "-2 each column of a 2-D array (bit for bit the rows of its transpose); 0 or -1 for a 1-D "
     "array. Not with --flat."},
    {"--timing", NULL, NULL, NULL,
     "Print gpuqd's timing of the request on stderr: queue, copies to and from the device, "
     "kernel, total."},
    {"--output", "-o", "OUT.npy", NULL, "Where to write the result (required)."},
    {NULL, NULL, NULL, NULL, NULL},
};

static const ctl_entry entry = {
    .name = "normalize",
    .usage = "[--method NAME] [--flat | --axis N] [--timing] IN.npy -o OUT.npy",
    .min_args = 1,
    .max_args = 1,
    .exec = exec,
    .help = "Scale each row of an array by its sum or a norm, to [0, 1], or to z-scores.",
    .desc = "Normalize IN.npy (float32 or float64, 1-D or 2-D, C order) on gpuqd and write the "
            "result, of the same shape and dtype, to OUT.npy. Each row of a 2-D array is "
            "normalized on its own (each column with --axis 0, the whole array with --flat); a "
            "1-D array is one row. A row (column) whose denominator is 0 (a zero sum or norm, a "
            "constant row under minmax or zscore) is the error zero_norm, naming it.",
    .opts = opts_doc,
    .example = "gpuqctl normalize in.npy -o out.npy\n"
               "gpuqctl normalize --method=l2 --axis 0 in.npy -o out.npy\n"
               "gpuqctl normalize --method=zscore --flat in.npy -o out.npy",
};
const ctl_entry *const op_ctl_normalize = &entry;
#endif
