/* SPDX-License-Identifier: Apache-2.0 */
/* test_op_split.c - how each op says its CUDA run splits into row ranges
 * (op_backend_def.cuda_split, for the pipelined jobs of
 * server/backends/cuda/backend_cuda_pipe.c). Plain C, no GPU: runs everywhere.
 *
 * For every compute op and shapes that no power of two divides: the rows
 * are the op's independent units (normalize rows, or its values when there
 * is one row; haversine points; grid latitudes; pairwise/knn query rows),
 * rows times each per-row size is exactly that array's size, B is
 * row-aligned only for haversine's pairs, two phases only for one-row
 * normalize, and ops with nothing to split (one row, control ops) say so.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "header.h"
#include "op_backend.h"
#include "req_args.h"
#include "testutil.h"

static gpuq_sizes checked(gpuq_request *r, uint64_t payload)
{
    gpuq_limits lim;
    gpuq_sizes sz;
    char msg[256];
    gpuq_limits_default(&lim);
    lim.max_payload = lim.max_output = (uint64_t)1 << 40;
    memset(&sz, 0, sizeof sz);
    int rc = gpuq_request_check(r, payload, &lim, &sz, msg, sizeof msg);
    ck_assert_msg(rc == 0, "check: %s", msg);
    return sz;
}

/* The invariants every split keeps. */
static void check_sizes(const gpuq_sizes *sz, const op_split *sp)
{
    ck_assert_uint_ge(sp->rows, 2);
    ck_assert_uint_eq(sp->rows * sp->a_row, sz->nin > 0 ? sz->in_bytes[0] : 0);
    if (sp->b_row)
        ck_assert_uint_eq(sp->rows * sp->b_row, sz->in_bytes[1]);
    for (uint32_t k = 0; k < GPUQ_MAX_OUTPUTS; k++)
        ck_assert_uint_eq(sp->rows * sp->out_row[k], k < sz->nout ? sz->out[k].bytes : 0);
}

START_TEST(test_normalize_split)
{
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++) {
        uint64_t es = dt == GPUQ_DT_F32 ? 4 : 8;
        gpuq_request r;
        op_split sp;
        /* rows */
        gpuq_request_init(&r);
        r.op = GPUQ_OP_NORMALIZE;
        r.dtype = (gpuq_dtype)dt;
        r.ndim_a = 2;
        r.shape_a[0] = 1001;
        r.shape_a[1] = 37;
        gpuq_sizes sz = checked(&r, 1001 * 37 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.rows, 1001);
        ck_assert_uint_eq(sp.a_row, 37 * es);
        ck_assert_int_eq(sp.two_phase, 0);
        ck_assert_uint_eq(sp.b_row, 0);
        /* flat: every value, two phases */
        rq_set_flat(&r, true);
        sz = checked(&r, 1001 * 37 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.rows, 1001 * 37);
        ck_assert_int_eq(sp.two_phase, 1);
        /* one row of [1, n]: its values, two phases */
        rq_set_flat(&r, false);
        r.shape_a[0] = 1;
        r.shape_a[1] = 100003;
        sz = checked(&r, 100003 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.rows, 100003);
        ck_assert_int_eq(sp.two_phase, 1);
        /* 1-D */
        r.ndim_a = 1;
        r.shape_a[0] = 100003;
        r.shape_a[1] = 0;
        sz = checked(&r, 100003 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        ck_assert_uint_eq(sp.rows, 100003);
        ck_assert_uint_eq(sp.a_row, es);
        ck_assert_int_eq(sp.two_phase, 1);
        /* one value: nothing to split */
        r.shape_a[0] = 1;
        sz = checked(&r, es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 0);
    }
}
END_TEST

START_TEST(test_haversine_grid_split)
{
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++) {
        uint64_t es = dt == GPUQ_DT_F32 ? 4 : 8;
        gpuq_request r;
        op_split sp;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_HAVERSINE;
        r.dtype = (gpuq_dtype)dt;
        r.ndim_a = 2;
        r.shape_a[0] = 50001;
        r.shape_a[1] = 2;
        gpuq_request_set_pair(&r, "to", 1.0, 2.0);
        gpuq_sizes sz = checked(&r, 50001 * 2 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.rows, 50001);
        ck_assert_uint_eq(sp.a_row, 2 * es);
        ck_assert_uint_eq(sp.b_row, 0);
        /* pairs: B goes with A */
        gpuq_request_unset(&r, "to");
        r.ndim_b = 2;
        r.shape_b[0] = 50001;
        r.shape_b[1] = 2;
        sz = checked(&r, 50001 * 4 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.b_row, 2 * es);
        ck_assert_uint_eq(sp.out_row[0], es);
        /* grid: latitude rows, no input */
        gpuq_request_init(&r);
        r.op = GPUQ_OP_GRID;
        r.dtype = (gpuq_dtype)dt;
        gpuq_request_set_range(&r, "lat", -10, 10, 333);
        gpuq_request_set_range(&r, "lon", -10, 10, 257);
        sz = checked(&r, 0);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.rows, 333);
        ck_assert_uint_eq(sp.a_row, 0);
        ck_assert_uint_eq(sp.out_row[0], 257 * es);
    }
    /* grid's default dtype (f64) */
    gpuq_request r;
    op_split sp;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_GRID;
    gpuq_request_set_range(&r, "lat", -10, 10, 3);
    gpuq_request_set_range(&r, "lon", -10, 10, 5);
    gpuq_sizes sz = checked(&r, 0);
    ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
    ck_assert_uint_eq(sp.out_row[0], 5 * 8);
}
END_TEST

START_TEST(test_pairwise_knn_split)
{
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++) {
        uint64_t es = dt == GPUQ_DT_F32 ? 4 : 8;
        gpuq_request r;
        op_split sp;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_PAIRWISE;
        r.dtype = (gpuq_dtype)dt;
        r.ndim_a = r.ndim_b = 2;
        r.shape_a[0] = 301;
        r.shape_b[0] = 203;
        r.shape_a[1] = r.shape_b[1] = 7;
        rq_set_metric(&r, GPUQ_METRIC_COSINE);
        gpuq_sizes sz = checked(&r, (301 + 203) * 7 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.rows, 301);
        ck_assert_uint_eq(sp.b_row, 0); /* Y whole first */
        ck_assert_uint_eq(sp.out_row[0], 203 * es);
        r.op = GPUQ_OP_KNN;
        ck_assert_int_eq(gpuq_request_set_uint(&r, "k", 7), 0);
        sz = checked(&r, (301 + 203) * 7 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 1);
        check_sizes(&sz, &sp);
        ck_assert_uint_eq(sp.b_row, 0);
        ck_assert_uint_eq(sp.out_row[0], 7 * es);
        ck_assert_uint_eq(sp.out_row[1], 7 * 8);
        ck_assert_int_eq(sp.two_phase, 0);
        /* one query row: nothing to split */
        r.shape_a[0] = 1;
        sz = checked(&r, (1 + 203) * 7 * es);
        ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 0);
    }
    /* control ops have no split */
    gpuq_request r;
    gpuq_sizes sz;
    op_split sp;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_PING;
    memset(&sz, 0, sizeof sz);
    ck_assert_int_eq(op_cuda_split(&r, &sz, &sp), 0);
    ck_assert_uint_eq(sp.rows, 0);
}
END_TEST

static Suite *split_suite(void)
{
    Suite *s = suite_create("op_split");
    TCase *tc = tcase_create("split");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_normalize_split);
    tcase_add_test(tc, test_haversine_grid_split);
    tcase_add_test(tc, test_pairwise_knn_split);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(split_suite());
}
