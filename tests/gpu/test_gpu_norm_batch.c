/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_norm_batch.c - gpuq_cuda_normalize_batch against gpuq_cuda_normalize, bit for bit.
 *
 * Each item of a batch is first normalized alone by gpuq_cuda_normalize on the same ctx (its
 * output and the ctx flag it leaves, the flag reset between items); the batch must write the
 * same bytes (memcmp, outputs poisoned with NaN first) and store the same flag at item.flag
 * (poisoned with -1 first, so a flag never stored shows). Items mix dtypes, methods, row
 * shapes (warp per row up to 128 columns, block per row above), one and several blocks,
 * zero_ok, inputs and outputs in device memory and in pinned host memory (zero-copy), and
 * numerically hard rows (testutil's kinds). Errors: an all-zero or constant row (ZERO) and a
 * float32/float64 sum that overflows the dtype (OVERFLOW) fail their item alone, in a block of
 * their own and in a block among others, next to fine items. One state serves every launch of
 * a run, launches back to back without a sync or memset between them: a later batch's flags
 * must not carry an earlier one's errors, and the state is all zero after each sync. Bad
 * arguments return GPUQ_K_E_ARG with nothing enqueued. A few items also against the float64
 * CPU reference (gpuq_cpu_normalize), per element, as test_gpu_kernels does.
 *
 * Flags compare exactly only where an item's rows can raise one kind of error (first error
 * wins in both calls, and which row is first is a race): the inputs here see to that.
 *
 * No GPU: exit 77 (ctest: Skipped) unless GPUQ_REQUIRE_GPU=1 (then a failure).
 */
#ifndef GPUQ_HAVE_CUDA
#define GPUQ_HAVE_CUDA 1
#endif
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"
#include "gpuq_kernels.h"
#include "testutil.h"

#define FLAG_ZERO (-GPUQ_K_E_ZERO)
#define FLAG_OVERFLOW (-GPUQ_K_E_OVERFLOW)
#define FLAG_POISON (-1)
/* As test_gpu_kernels: GPU and CPU each within a few ulps of the exact result. */
#define ELEM_TOL64 2e-15
#define ELEM_TOL32 6.0e-8

static cudaStream_t g_stream;
static gpuq_cuda_ctx *g_ctx;
static void *g_state;     /* gpuq_cuda_normalize_batch_state_bytes(), one for the whole run */
static int *g_flags;      /* pinned: the items' flags, FLAG_SLOTS of them */
static unsigned g_nflags; /* slots handed out so far (bt_new); reset by each test */
#define FLAG_SLOTS (8 * GPUQ_NORM_BATCH_MAX)

static size_t esz(int dt)
{
    return dt == GPUQ_K_F32 ? 4 : 8;
}

static unsigned rand_below(unsigned n)
{
    double u;
    tu_rand_fill_f64(&u, 1, 0.0, (double)n);
    unsigned k = (unsigned)u;
    return k < n ? k : n - 1;
}

/* ---- a batch and its per-item reference ---- */

typedef struct bt_item {
    gpuq_norm_item it;
    int in_pinned, out_pinned;
    size_t n;     /* rows * cols */
    void *h_in;   /* the input as given (malloc'd) */
    void *h_ref;  /* gpuq_cuda_normalize's output (malloc'd) */
    int ref_flag; /* the ctx flag it left */
} bt_item;

typedef struct bt_batch {
    bt_item items[GPUQ_NORM_BATCH_MAX];
    unsigned n;
} bt_batch;

static bt_batch *bt_new(void)
{
    bt_batch *b = calloc(1, sizeof *b);
    ck_assert_ptr_nonnull(b);
    return b;
}

static void *dev_or_pinned(size_t bytes, int pinned)
{
    void *p = NULL;
    if (pinned)
        CK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped));
    else
        CK(cudaMalloc(&p, bytes));
    return p;
}

static void free_dev_or_pinned(void *p, int pinned)
{
    if (pinned)
        CK(cudaFreeHost(p));
    else
        CK(cudaFree(p));
}

/* Append an item reading h_in (rows * cols values of dt, copied), its flag the next free slot of
 * g_flags. */
static bt_item *bt_add(bt_batch *b, int dt, int method, int zero_ok, uint64_t rows, uint64_t cols,
                       const void *h_in, int in_pinned, int out_pinned)
{
    ck_assert_uint_lt(b->n, GPUQ_NORM_BATCH_MAX);
    ck_assert_uint_lt(g_nflags, FLAG_SLOTS);
    bt_item *x = &b->items[b->n++];
    size_t n = (size_t)(rows * cols), bytes = n * esz(dt);
    x->n = n;
    x->in_pinned = in_pinned;
    x->out_pinned = out_pinned;
    x->h_in = malloc(bytes);
    x->h_ref = malloc(bytes);
    ck_assert(x->h_in && x->h_ref);
    memcpy(x->h_in, h_in, bytes);
    void *in = dev_or_pinned(bytes, in_pinned);
    if (in_pinned)
        memcpy(in, h_in, bytes);
    else
        CK_UPLOAD(in, h_in, bytes);
    /* cudaMemcpy from pageable memory may return before the DMA lands, and the legacy stream
     * does not order g_stream (non-blocking): finish it before a kernel reads the input */
    CK(cudaDeviceSynchronize());
    x->it.in = in;
    x->it.out = dev_or_pinned(bytes, out_pinned);
    x->it.flag = &g_flags[g_nflags++];
    x->it.rows = rows;
    x->it.cols = cols;
    x->it.dt = dt;
    x->it.method = method;
    x->it.zero_ok = zero_ok;
    return x;
}

static void bt_free(bt_batch *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        bt_item *x = &b->items[i];
        free_dev_or_pinned((void *)x->it.in, x->in_pinned);
        free_dev_or_pinned(x->it.out, x->out_pinned);
        free(x->h_in);
        free(x->h_ref);
    }
    free(b);
}

/* Values of dt from x (n float64 values, rounded for float32), malloc'd. */
static void *to_dt(int dt, const double *x, size_t n)
{
    void *v = malloc(n * esz(dt) + 1);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_K_F32)
            ((float *)v)[i] = (float)x[i];
        else
            ((double *)v)[i] = x[i];
    }
    return v;
}

/* rows x cols of input kind k: 0 U(-1.5, 1.5), else testutil's kind k - 1 (offset, mixed, wide,
 * cancel). */
enum { IN_UNIFORM, IN_KINDS = 1 + TU_NORM_KINDS };
static void *make_input(int dt, int kind, uint64_t rows, uint64_t cols)
{
    size_t n = (size_t)(rows * cols);
    double *x = malloc(n * sizeof *x + 1);
    ck_assert_ptr_nonnull(x);
    if (kind == IN_UNIFORM)
        tu_rand_fill_f64(x, n, -1.5, 1.5);
    else
        tu_norm_fill(kind - 1, dt == GPUQ_K_F32, x, rows, cols);
    void *v = to_dt(dt, x, n);
    free(x);
    return v;
}

static void set_value(int dt, void *v, size_t i, double a)
{
    if (dt == GPUQ_K_F32)
        ((float *)v)[i] = (float)a;
    else
        ((double *)v)[i] = a;
}

/* Each item alone through gpuq_cuda_normalize on g_ctx: its output into h_ref, the ctx flag it
 * leaves (reset before each) into ref_flag. */
static void bt_reference(bt_batch *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        bt_item *x = &b->items[i];
        size_t bytes = x->n * esz(x->it.dt);
        void *d_ref = NULL;
        CK(cudaMalloc(&d_ref, bytes));
        CK(cudaMemsetAsync(d_ref, 0xff, bytes, g_stream));
        CK(cudaMemsetAsync(gpuq_cuda_ctx_errflag(g_ctx), 0, sizeof(int), g_stream));
        ck_assert_int_eq(gpuq_cuda_normalize(g_ctx, x->it.dt, x->it.method, x->it.zero_ok, x->it.in,
                                             d_ref, x->it.rows, x->it.cols),
                         GPUQ_K_OK);
        CK(cudaStreamSynchronize(g_stream));
        CK(cudaMemcpy(x->h_ref, d_ref, bytes, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&x->ref_flag, gpuq_cuda_ctx_errflag(g_ctx), sizeof(int),
                      cudaMemcpyDeviceToHost));
        CK(cudaFree(d_ref));
    }
    CK(cudaMemsetAsync(gpuq_cuda_ctx_errflag(g_ctx), 0, sizeof(int), g_stream));
    CK(cudaStreamSynchronize(g_stream));
}

/* Outputs to NaN (all-ones bytes) and flags to FLAG_POISON, in stream order before what comes
 * next on g_stream (the host side: call it with the stream idle). */
static void bt_poison(bt_batch *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        bt_item *x = &b->items[i];
        size_t bytes = x->n * esz(x->it.dt);
        if (x->out_pinned)
            memset(x->it.out, 0xff, bytes);
        else
            CK(cudaMemsetAsync(x->it.out, 0xff, bytes, g_stream));
        *x->it.flag = FLAG_POISON;
    }
}

static int bt_launch(bt_batch *b, unsigned lo, unsigned cnt)
{
    gpuq_norm_item items[GPUQ_NORM_BATCH_MAX];
    ck_assert_uint_le(lo + cnt, b->n);
    for (unsigned i = 0; i < cnt; i++)
        items[i] = b->items[lo + i].it;
    return gpuq_cuda_normalize_batch(g_ctx, items, cnt, g_state);
}

static void check_state_zero(void)
{
    uint64_t bytes = gpuq_cuda_normalize_batch_state_bytes();
    unsigned char *h = malloc(bytes);
    ck_assert_ptr_nonnull(h);
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(h, g_state, bytes, cudaMemcpyDeviceToHost));
    for (uint64_t k = 0; k < bytes; k++)
        ck_assert_msg(h[k] == 0, "batch state byte %llu is %u after the launches",
                      (unsigned long long)k, h[k]);
    free(h);
}

/* The item's batch output on the host (malloc'd), after the stream's work. */
static void *bt_output(const bt_item *x)
{
    size_t bytes = x->n * esz(x->it.dt);
    void *h = malloc(bytes);
    ck_assert_ptr_nonnull(h);
    CK(cudaStreamSynchronize(g_stream));
    if (x->out_pinned)
        memcpy(h, x->it.out, bytes);
    else
        CK(cudaMemcpy(h, x->it.out, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static double value_at(int dt, const void *v, size_t i)
{
    return dt == GPUQ_K_F32 ? (double)((const float *)v)[i] : ((const double *)v)[i];
}

/* Every item's output and flag against its reference; then the state is zero. */
static void bt_check(const bt_batch *b, const char *what)
{
    for (unsigned i = 0; i < b->n; i++) {
        const bt_item *x = &b->items[i];
        const gpuq_norm_item *it = &x->it;
        void *got = bt_output(x);
        size_t es = esz(it->dt);
        if (memcmp(got, x->h_ref, x->n * es) != 0) {
            size_t k = 0;
            while (memcmp((char *)got + k * es, (char *)x->h_ref + k * es, es) == 0)
                k++;
            ck_abort_msg("%s: item %u (%s method %d zero_ok %d %llux%llu, in %s, out %s) element "
                         "%zu is %a, gpuq_cuda_normalize wrote %a",
                         what, i, it->dt == GPUQ_K_F32 ? "f32" : "f64", it->method, it->zero_ok,
                         (unsigned long long)it->rows, (unsigned long long)it->cols,
                         x->in_pinned ? "pinned" : "device", x->out_pinned ? "pinned" : "device", k,
                         value_at(it->dt, got, k), value_at(it->dt, x->h_ref, k));
        }
        ck_assert_msg(*it->flag == x->ref_flag,
                      "%s: item %u (%s method %d zero_ok %d %llux%llu): flag %d, "
                      "gpuq_cuda_normalize left %d",
                      what, i, it->dt == GPUQ_K_F32 ? "f32" : "f64", it->method, it->zero_ok,
                      (unsigned long long)it->rows, (unsigned long long)it->cols, *it->flag,
                      x->ref_flag);
        free(got);
    }
    check_state_zero();
}

/* ---- mixed batches ---- */

static const uint64_t COLS[] = {1, 7, 32, 128, 129, 1000, 4096};
#define NCOLS (sizeof COLS / sizeof COLS[0])

static void add_random_item(bt_batch *b, int dt, int method, uint64_t cols)
{
    uint64_t rows = 1 + rand_below(40);
    int kind = rand_below(3) ? IN_UNIFORM : 1 + (int)rand_below(TU_NORM_KINDS);
    void *in = make_input(dt, kind, rows, cols);
    /* zero_ok off on 1-column minmax/zscore: every row constant, ZERO */
    bt_add(b, dt, method, (int)rand_below(2), rows, cols, in, rand_below(3) == 0,
           rand_below(3) == 0);
    free(in);
}

/* 128 items: every (dtype, method, cols) once (70), the rest drawn; rows 1..40, zero_ok either,
 * input and output each pinned one time in three, a third of the inputs of testutil's hard
 * kinds; shuffled. Launched as the batches that _i's partition gives, back to back on one
 * state without a sync between them. */
START_TEST(test_batch_mixed)
{
    static const unsigned parts[3][7] = {{128, 0}, {1, 8, 9, 32, 33, 45, 0}, {70, 58, 0}};
    g_nflags = 0;
    bt_batch *b = bt_new();
    int combos[GPUQ_NORM_BATCH_MAX][3];
    unsigned nc = 0;
    for (int d = GPUQ_K_F32; d <= GPUQ_K_F64; d++)
        for (int m = 0; m < GPUQ_K_METHOD_COUNT; m++)
            for (unsigned c = 0; c < NCOLS; c++) {
                combos[nc][0] = d, combos[nc][1] = m, combos[nc][2] = (int)c;
                nc++;
            }
    while (nc < GPUQ_NORM_BATCH_MAX) {
        combos[nc][0] = 1 + (int)rand_below(2), combos[nc][1] = (int)rand_below(5);
        combos[nc][2] = (int)rand_below(NCOLS);
        nc++;
    }
    for (unsigned k = nc - 1; k > 0; k--) { /* Fisher-Yates */
        unsigned j = rand_below(k + 1);
        int t[3];
        memcpy(t, combos[k], sizeof t);
        memcpy(combos[k], combos[j], sizeof t);
        memcpy(combos[j], t, sizeof t);
    }
    for (unsigned k = 0; k < nc; k++)
        add_random_item(b, combos[k][0], combos[k][1], COLS[combos[k][2]]);
    bt_reference(b);
    bt_poison(b);
    unsigned lo = 0;
    for (const unsigned *p = parts[_i]; *p; p++) {
        ck_assert_int_eq(bt_launch(b, lo, *p), GPUQ_K_OK);
        lo += *p;
    }
    ck_assert_uint_eq(lo, b->n);
    char what[64];
    snprintf(what, sizeof what, "mixed batch, partition %d", _i);
    bt_check(b, what);
    bt_free(b);
}
END_TEST

/* ---- errors fail their item alone ---- */

/* An item of rows x cols U(-1.5, 1.5) whose row bad_row is all v (0: a zero row; else a
 * constant row); bad_row < 0: none. */
static bt_item *add_const_row(bt_batch *b, int dt, int method, int zero_ok, uint64_t rows,
                              uint64_t cols, long bad_row, double v, int pinned)
{
    void *in = make_input(dt, IN_UNIFORM, rows, cols);
    if (bad_row >= 0)
        for (uint64_t j = 0; j < cols; j++)
            set_value(dt, in, (size_t)bad_row * cols + j, v);
    bt_item *x = bt_add(b, dt, method, zero_ok, rows, cols, in, pinned, pinned);
    free(in);
    return x;
}

/* rows x cols, row bad_row (>= 0) one whose sum overflows the dtype from finite values (as
 * test_gpu_kernels' overflow case: +-big cancel, leaving a tiny sum), the others 1..97. */
static bt_item *add_overflow(bt_batch *b, int dt, int zero_ok, uint64_t rows, uint64_t cols,
                             long bad_row)
{
    size_t n = (size_t)(rows * cols);
    double *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t k = 0; k < n; k++)
        x[k] = 1.0 + (double)(k % 97);
    if (bad_row >= 0) {
        double *r = x + (size_t)bad_row * cols;
        for (uint64_t j = 0; j < cols; j++)
            r[j] = 0.0;
        r[0] = dt == GPUQ_K_F32 ? 1e38 : 1e300;
        r[1] = -r[0];
        r[2] = dt == GPUQ_K_F32 ? 1e-30 : 1e-300;
    }
    void *in = to_dt(dt, x, n);
    bt_item *it = bt_add(b, dt, GPUQ_K_SUM, zero_ok, rows, cols, in, 0, 0);
    free(x);
    free(in);
    return it;
}

/* The errors a batch of items can carry, with the flag each must get; fine items between. */
static void add_error_items(bt_batch *b, int dt, int errors, int *want, unsigned *nwant)
{
    /* (method, rows, cols, bad row): one block (warp rows, block row), several blocks with the
     * bad row in the middle block or the last */
    static const struct {
        int method;
        uint64_t rows, cols;
        long bad;
    } zs[] = {
        {GPUQ_K_SUM, 3, 7, 1},       {GPUQ_K_L1, 20, 32, 13},    {GPUQ_K_L2, 17, 128, 16},
        {GPUQ_K_L2, 1, 4096, 0},     {GPUQ_K_SUM, 5, 1000, 3},   {GPUQ_K_L1, 2, 129, 1},
        {GPUQ_K_MINMAX, 9, 3, 4},    {GPUQ_K_ZSCORE, 12, 64, 8}, {GPUQ_K_MINMAX, 4, 200, 2},
        {GPUQ_K_ZSCORE, 1, 1000, 0},
    };
    for (size_t k = 0; k < sizeof zs / sizeof zs[0]; k++) {
        int constant = zs[k].method == GPUQ_K_MINMAX || zs[k].method == GPUQ_K_ZSCORE;
        long bad = errors ? zs[k].bad : -1;
        int pinned = k % 3 == 1;
        /* zero_ok off: ZERO; on: no flag, that row zeros (the reference says which) */
        for (int zero_ok = 0; zero_ok < 2; zero_ok++) {
            add_const_row(b, dt, zs[k].method, zero_ok, zs[k].rows, zs[k].cols, bad,
                          constant ? 3.0 : 0.0, pinned);
            want[(*nwant)++] = errors && !zero_ok ? FLAG_ZERO : 0;
            add_const_row(b, dt, (int)(k % 5), 1, 1 + k, zs[k].cols, -1, 0.0, !pinned);
            want[(*nwant)++] = 0;
        }
    }
    /* OVERFLOW whatever zero_ok: warp rows (one block, the bad row last of two), block rows
     * (two blocks, the second bad) */
    static const uint64_t ocols[2] = {100, 4097};
    for (int c = 0; c < 2; c++)
        for (int zero_ok = 0; zero_ok < 2; zero_ok++) {
            add_overflow(b, dt, zero_ok, 2, ocols[c], errors ? 1 : -1);
            want[(*nwant)++] = errors ? FLAG_OVERFLOW : 0;
            add_overflow(b, dt, zero_ok, 3, ocols[c], -1);
            want[(*nwant)++] = 0;
        }
}

static void check_wanted_flags(const bt_batch *b, const int *want)
{
    for (unsigned i = 0; i < b->n; i++) {
        ck_assert_msg(b->items[i].ref_flag == want[i],
                      "item %u: gpuq_cuda_normalize left flag %d, the test meant %d", i,
                      b->items[i].ref_flag, want[i]);
        ck_assert_msg(*b->items[i].it.flag == want[i], "item %u: flag %d, want %d", i,
                      *b->items[i].it.flag, want[i]);
    }
}

/* _i: dtype. Zero and constant rows (zero_ok off: ZERO, on: 0), overflowing sums (OVERFLOW),
 * each in an item of one block and of several, next to fine items of every shape: each
 * erring item alone gets its flag, the others 0, every output as gpuq_cuda_normalize's. */
START_TEST(test_batch_fail_alone)
{
    int dt = _i ? GPUQ_K_F64 : GPUQ_K_F32;
    g_nflags = 0;
    bt_batch *b = bt_new();
    int want[GPUQ_NORM_BATCH_MAX];
    unsigned nwant = 0;
    add_error_items(b, dt, 1, want, &nwant);
    ck_assert_uint_eq(nwant, b->n);
    bt_reference(b);
    bt_poison(b);
    ck_assert_int_eq(bt_launch(b, 0, b->n), GPUQ_K_OK);
    bt_check(b, "errors fail alone");
    check_wanted_flags(b, want);
    bt_free(b);
}
END_TEST

/* One state, launches back to back with no sync or memset between: a batch full of errors, then
 * the same shapes without them (its own outputs and flags), in the order E, F, F, E, F. F's
 * flags must stay 0 (an error left in the state by E would show there), E's must be its
 * errors, and the state is zero at the end. */
START_TEST(test_batch_reuse_state)
{
    int dt = _i ? GPUQ_K_F64 : GPUQ_K_F32;
    g_nflags = 0;
    bt_batch *e = bt_new(), *f = bt_new();
    int want_e[GPUQ_NORM_BATCH_MAX], want_f[GPUQ_NORM_BATCH_MAX];
    unsigned ne = 0, nf = 0;
    add_error_items(e, dt, 1, want_e, &ne);
    add_error_items(f, dt, 0, want_f, &nf);
    ck_assert_uint_eq(e->n, f->n);
    bt_reference(e);
    bt_reference(f);
    bt_poison(e);
    bt_poison(f);
    const int order[5] = {0, 1, 1, 0, 1};
    for (int k = 0; k < 5; k++) {
        bt_batch *b = order[k] ? f : e;
        ck_assert_int_eq(bt_launch(b, 0, b->n), GPUQ_K_OK);
    }
    bt_check(e, "reused state: the batch with errors");
    check_wanted_flags(e, want_e);
    bt_check(f, "reused state: the batch without errors, after one with");
    check_wanted_flags(f, want_f);
    /* and once more after the sync, one item at a time (n = 1) */
    bt_poison(e);
    bt_poison(f);
    for (unsigned i = 0; i < e->n; i++) {
        ck_assert_int_eq(bt_launch(e, i, 1), GPUQ_K_OK);
        ck_assert_int_eq(bt_launch(f, i, 1), GPUQ_K_OK);
    }
    bt_check(e, "n = 1, the items with errors");
    check_wanted_flags(e, want_e);
    bt_check(f, "n = 1, the items without errors");
    check_wanted_flags(f, want_f);
    bt_free(e);
    bt_free(f);
}
END_TEST

/* n = 1 on each row shape and tier edge sizes 8, 9, 32, 33, 128 of one item repeated (its
 * outputs distinct): the parameter capacities 8, 32 and 128. */
START_TEST(test_batch_sizes)
{
    static const unsigned ns[] = {1, 8, 9, 32, 33, GPUQ_NORM_BATCH_MAX};
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        g_nflags = 0;
        bt_batch *b = bt_new();
        for (unsigned i = 0; i < ns[s]; i++) {
            int dt = (i + s) % 2 ? GPUQ_K_F64 : GPUQ_K_F32;
            uint64_t cols = COLS[(i + s) % NCOLS];
            add_random_item(b, dt, (int)((i + s) % 5), cols);
        }
        bt_reference(b);
        bt_poison(b);
        ck_assert_int_eq(bt_launch(b, 0, b->n), GPUQ_K_OK);
        char what[32];
        snprintf(what, sizeof what, "n = %u", ns[s]);
        bt_check(b, what);
        bt_free(b);
    }
}
END_TEST

/* A few items against the float64 CPU reference, per element (U(-1.5, 1.5), zero_ok on). */
START_TEST(test_batch_cpu_ref)
{
    static const uint64_t shapes[][2] = {{3, 7}, {9, 128}, {2, 129}, {3, 4096}};
    g_nflags = 0;
    bt_batch *b = bt_new();
    for (int d = GPUQ_K_F32; d <= GPUQ_K_F64; d++)
        for (int m = 0; m < GPUQ_K_METHOD_COUNT; m++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                add_const_row(b, d, m, 1, shapes[s][0], shapes[s][1], -1, 0.0, s % 2);
    bt_poison(b);
    ck_assert_int_eq(bt_launch(b, 0, b->n), GPUQ_K_OK);
    for (unsigned i = 0; i < b->n; i++) {
        const bt_item *x = &b->items[i];
        int dt = x->it.dt;
        void *cpu = malloc(x->n * esz(dt));
        ck_assert_ptr_nonnull(cpu);
        ck_assert_int_eq(
            gpuq_cpu_normalize(dt, x->it.method, 1, x->h_in, cpu, x->it.rows, x->it.cols),
            GPUQ_K_OK);
        void *got = bt_output(x);
        double *g = malloc(x->n * sizeof *g), *r = malloc(x->n * sizeof *r);
        ck_assert(g && r);
        for (size_t k = 0; k < x->n; k++) {
            g[k] = value_at(dt, got, k);
            r[k] = value_at(dt, cpu, k);
        }
        size_t w = 0;
        double err = tu_elem_err_f64(g, r, x->n, &w);
        double tol = dt == GPUQ_K_F32 ? 2 * ELEM_TOL32 : 2 * ELEM_TOL64;
        ck_assert_msg(err <= tol,
                      "item %u (%s method %d %llux%llu): element %zu is %.17g, CPU %.17g: rel "
                      "err %g > %g",
                      i, dt == GPUQ_K_F32 ? "f32" : "f64", x->it.method,
                      (unsigned long long)x->it.rows, (unsigned long long)x->it.cols, w, g[w], r[w],
                      err, tol);
        ck_assert_int_eq(*x->it.flag, 0);
        free(cpu), free(got), free(g), free(r);
    }
    check_state_zero();
    bt_free(b);
}
END_TEST

/* ---- bad arguments ---- */

START_TEST(test_batch_bad_args)
{
    g_nflags = 0;
    bt_batch *b = bt_new();
    add_const_row(b, GPUQ_K_F64, GPUQ_K_L2, 0, 2, 129, -1, 0.0, 0);
    add_const_row(b, GPUQ_K_F32, GPUQ_K_SUM, 0, 3, 7, -1, 0.0, 1);
    bt_poison(b);
    CK(cudaStreamSynchronize(g_stream));
    gpuq_norm_item items[GPUQ_NORM_BATCH_MAX + 1];
    for (unsigned i = 0; i <= GPUQ_NORM_BATCH_MAX; i++)
        items[i] = b->items[i % 2].it;
    char *st = g_state;

    ck_assert_int_eq(gpuq_cuda_normalize_batch(g_ctx, items, 0, st), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_normalize_batch(g_ctx, items, GPUQ_NORM_BATCH_MAX + 1, st),
                     GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_normalize_batch(NULL, items, 2, st), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_normalize_batch(g_ctx, NULL, 2, st), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_normalize_batch(g_ctx, items, 2, NULL), GPUQ_K_E_ARG);
    ck_assert_int_eq(gpuq_cuda_normalize_batch(g_ctx, items, 2, st + 1), GPUQ_K_E_ARG);

    /* item 1 bad in one way at a time; item 0 fine: nothing may be enqueued for it either */
    const gpuq_norm_item good = items[1];
    for (int k = 0; k < 16; k++) {
        gpuq_norm_item *q = &items[1];
        *q = good;
        switch (k) {
        case 0:
            q->cols = GPUQ_NORM_BATCH_MAX_COLS;
            q->rows = 1;
            break;
        case 1:
            q->rows = 0;
            break;
        case 2:
            q->cols = 0;
            break;
        case 3:
            q->method = GPUQ_K_METHOD_COUNT;
            break;
        case 4:
            q->method = -1;
            break;
        case 5:
            q->dt = 0;
            break;
        case 6:
            q->dt = 3;
            break;
        case 7:
            q->in = NULL;
            break;
        case 8:
            q->out = NULL;
            break;
        case 9:
            q->flag = NULL;
            break;
        case 10:
            q->flag = (int *)((char *)q->flag + 1);
            break;
        case 11: /* float64 values at a float32 boundary */
            q->dt = GPUQ_K_F64;
            q->in = (const char *)items[0].in + 4;
            break;
        case 12: /* rows * cols overflows */
            q->cols = 3;
            q->rows = UINT64_MAX / 2;
            break;
        case 13: /* 2^31 blocks of one row each: more than a launch holds */
            q->cols = 129;
            q->rows = (uint64_t)1 << 31;
            break;
        case 14: /* 2^31 - 1 blocks, but item 0 has some too */
            q->cols = 129;
            q->rows = ((uint64_t)1 << 31) - 1;
            break;
        default: /* 8 rows a block: 2^34 rows are 2^31 blocks */
            q->cols = 128;
            q->rows = (uint64_t)1 << 34;
            break;
        }
        ck_assert_msg(gpuq_cuda_normalize_batch(g_ctx, items, 2, st) == GPUQ_K_E_ARG,
                      "bad item %d accepted", k);
    }
    items[1] = good;
    CK(cudaStreamSynchronize(g_stream));
    ck_assert_int_eq(*items[0].flag, FLAG_POISON);
    ck_assert_int_eq(*items[1].flag, FLAG_POISON);
    /* the flag slots of a state are per item, whichever items come; any int is a zero_ok */
    items[1].zero_ok = 7;
    ck_assert_int_eq(gpuq_cuda_normalize_batch(g_ctx, items, 2, st), GPUQ_K_OK);
    CK(cudaStreamSynchronize(g_stream));
    ck_assert_int_eq(*items[0].flag, 0);
    ck_assert_int_eq(*items[1].flag, 0);
    check_state_zero();
    ck_assert_uint_eq(gpuq_cuda_normalize_batch_state_bytes() % sizeof(int), 0);
    bt_free(b);
}
END_TEST

static Suite *batch_suite(void)
{
    Suite *s = suite_create("gpu_norm_batch");
    TCase *tc = tcase_create("batch");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_batch_mixed, 0, 3);
    tcase_add_loop_test(tc, test_batch_fail_alone, 0, 2);
    tcase_add_loop_test(tc, test_batch_reuse_state, 0, 2);
    tcase_add_test(tc, test_batch_sizes);
    tcase_add_test(tc, test_batch_cpu_ref);
    tcase_add_test(tc, test_batch_bad_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int no_dev = gpu_test_no_device("test_gpu_norm_batch");
    if (no_dev >= 0)
        return no_dev;
    printf("test_gpu_norm_batch: seed %llu\n", (unsigned long long)tu_seed());
    /* One stream, ctx and state for the whole run; CK_FORK=no keeps them valid in the tests
     * (CUDA state does not survive fork). */
    setenv("CK_FORK", "no", 1);
    uint64_t state_bytes = gpuq_cuda_normalize_batch_state_bytes();
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess ||
        gpuq_cuda_ctx_create(g_stream, &g_ctx) != GPUQ_K_OK ||
        cudaMalloc(&g_state, state_bytes) != cudaSuccess ||
        cudaMemset(g_state, 0, state_bytes) != cudaSuccess ||
        cudaHostAlloc((void **)&g_flags, FLAG_SLOTS * sizeof(int), cudaHostAllocMapped) !=
            cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "test_gpu_norm_batch: cannot create stream/ctx/state\n");
        return EXIT_FAILURE;
    }
    int failed = gpu_test_run(batch_suite());
    cudaFreeHost(g_flags);
    cudaFree(g_state);
    gpuq_cuda_ctx_destroy(g_ctx);
    cudaStreamDestroy(g_stream);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
