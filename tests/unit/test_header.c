/* SPDX-License-Identifier: Apache-2.0 */
/* test_header.c - request/reply headers: encode -> decode round trips for
 * every op, each rule of gpuq_request_check (exact codes), overflow, limits,
 * strict decoding (unknown/duplicate keys, wrong types), truncation at every
 * byte, replies with timing and info, and UTF-8: strings that are not are
 * bad_header (naming the key), echoes and messages are cut on a character
 * boundary, and every reply's strings are UTF-8 (checked with msgpack-c and
 * iconv, independently of gpuq's reader). */
#include "errors.h"
#include "header.h"
#include "req_args.h"
#include "gpuq_limits.h"
#include "frame.h"
#include "hdr_util.h"
#include "mpread.h"
#include "mpwrite.h"

#include <check.h>

#include "testutil.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char msg[256];

/* encode req, decode it back into *out; returns decode's code */
static int roundtrip(const gpuq_request *req, gpuq_request *out)
{
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(gpuq_request_encode(req, &buf, &len), 0);
    uint8_t *exact = malloc(len);
    memcpy(exact, buf, len);
    free(buf);
    int rc = gpuq_request_decode(exact, len, out, msg, sizeof(msg));
    free(exact);
    return rc;
}

static int check_with(const gpuq_request *req, uint64_t payload, const gpuq_limits *lim,
                      gpuq_sizes *sz)
{
    msg[0] = '\0';
    int rc = gpuq_request_check(req, payload, lim, sz, msg, sizeof(msg));
    if (rc != 0) {
        ck_assert_msg(msg[0] != '\0', "error %d without message", rc);
        ck_assert_ptr_null(strchr(msg, '\n'));
    }
    return rc;
}

static int check(const gpuq_request *req, uint64_t payload, gpuq_sizes *sz)
{
    gpuq_limits lim;
    gpuq_limits_default(&lim);
    return check_with(req, payload, &lim, sz);
}

static void base(gpuq_request *r, gpuq_op op, gpuq_dtype dt)
{
    gpuq_request_init(r);
    r->id = 42;
    r->op = op;
    r->dtype = dt;
}

static void shape2(uint64_t *s, uint32_t *nd, uint64_t a, uint64_t b)
{
    s[0] = a;
    s[1] = b;
    *nd = 2;
}

/* ---- round trips ---- */

/* hdr_str_eq: a key (bytes, their length) against a name, exactly: not a
 * prefix, not longer, not with a NUL inside; hdr_lookup over a table with
 * holes. */
START_TEST(test_str_eq)
{
    ck_assert(hdr_str_eq("dtype", 5, "dtype"));
    ck_assert(!hdr_str_eq("dtyp", 4, "dtype"));
    ck_assert(!hdr_str_eq("dtypes", 6, "dtype"));
    ck_assert(!hdr_str_eq("dtype\0", 6, "dtype"));
    ck_assert(!hdr_str_eq("dt\0pe", 5, "dt"));
    ck_assert(!hdr_str_eq("Dtype", 5, "dtype"));
    ck_assert(!hdr_str_eq("dtypf", 5, "dtype"));
    ck_assert(hdr_str_eq("", 0, ""));
    ck_assert(!hdr_str_eq("", 0, "x"));
    ck_assert(!hdr_str_eq("x", 1, ""));
    const char *names[] = {"op", NULL, "id", "shape", "shape_b"};
    ck_assert_int_eq(hdr_lookup(names, 5, "shape_b", 7), 4);
    ck_assert_int_eq(hdr_lookup(names, 5, "shape", 5), 3);
    ck_assert_int_eq(hdr_lookup(names, 5, "shap", 4), -1);
    ck_assert_int_eq(hdr_lookup(names, 5, "id", 2), 2);
    ck_assert_int_eq(hdr_lookup(names, 5, "op\0", 3), -1);
}
END_TEST

START_TEST(test_rt_hello)
{
    gpuq_request q, d;
    base(&q, GPUQ_OP_HELLO, GPUQ_DT_NONE);
    q.id = UINT64_MAX;
    strcpy(q.client, "bench-client");
    q.priority = GPUQ_PRIO_LOW;
    q.device = 3;
    q.timing = true;
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert(d.id == UINT64_MAX);
    ck_assert_int_eq(d.op, GPUQ_OP_HELLO);
    ck_assert_uint_eq(d.version, GPUQ_PROTO_VERSION);
    ck_assert_str_eq(d.client, "bench-client");
    ck_assert_int_eq(d.priority, GPUQ_PRIO_LOW);
    ck_assert_int_eq(d.device, 3);
    ck_assert(d.timing);
    gpuq_sizes sz;
    ck_assert_int_eq(check(&d, 0, &sz), 0);
    ck_assert_int_eq(check(&d, 1, &sz), GPUQ_E_SIZE_MISMATCH);
    d.version = 2;
    ck_assert_int_eq(check(&d, 0, &sz), GPUQ_E_VERSION);
}
END_TEST

START_TEST(test_rt_ping_status)
{
    gpuq_request q, d;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_int_eq(d.op, GPUQ_OP_PING);
    ck_assert_uint_eq(d.id, 42);
    ck_assert_int_eq(check(&d, 0, &sz), 0);
    ck_assert_int_eq(check(&d, 8, &sz), GPUQ_E_SIZE_MISMATCH);
    base(&q, GPUQ_OP_STATUS, GPUQ_DT_NONE);
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_int_eq(d.op, GPUQ_OP_STATUS);
    ck_assert_int_eq(check(&d, 0, &sz), 0);
    ck_assert_int_eq(check(&d, 1, &sz), GPUQ_E_SIZE_MISMATCH);
}
END_TEST

START_TEST(test_rt_normalize)
{
    gpuq_request q, d;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    shape2(q.shape_a, &q.ndim_a, 3, 5);
    rq_set_method(&q, GPUQ_NORM_ZSCORE);
    rq_set_zero_ok(&q, true);
    rq_set_flat(&q, true);
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_int_eq(d.dtype, GPUQ_DT_F32);
    ck_assert_uint_eq(d.ndim_a, 2);
    ck_assert_uint_eq(d.shape_a[0], 3);
    ck_assert_uint_eq(d.shape_a[1], 5);
    ck_assert_int_eq(rq_method(&d), GPUQ_NORM_ZSCORE);
    ck_assert(rq_zero_ok(&d) && rq_flat(&d));
    ck_assert_int_eq(check(&d, 60, &sz), 0);
    ck_assert_uint_eq(sz.rows, 1);
    ck_assert_uint_eq(sz.cols, 15);
    ck_assert_uint_eq(sz.payload, 60);
    ck_assert_uint_eq(sz.output, 60);
    ck_assert_uint_eq(sz.out_ndim, 2);
    ck_assert_uint_eq(sz.out_shape[0], 3);
    ck_assert_uint_eq(sz.out_shape[1], 5);
    rq_set_flat(&d, false);
    ck_assert_int_eq(check(&d, 60, &sz), 0);
    ck_assert_uint_eq(sz.rows, 3);
    ck_assert_uint_eq(sz.cols, 5);
    /* rank 1 */
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    q.ndim_a = 1;
    q.shape_a[0] = 7;
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_int_eq(rq_method(&d), GPUQ_NORM_SUM);
    ck_assert(!rq_zero_ok(&d));
    ck_assert_int_eq(check(&d, 56, &sz), 0);
    ck_assert_uint_eq(sz.rows, 1);
    ck_assert_uint_eq(sz.cols, 7);
    ck_assert_uint_eq(sz.out_ndim, 1);
    ck_assert_uint_eq(sz.out_shape[0], 7);
}
END_TEST

START_TEST(test_rt_haversine)
{
    gpuq_request q, d;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F64);
    shape2(q.shape_a, &q.ndim_a, 10, 2);
    rq_set_has_to(&q, true);
    rq_set_to_lat(&q, -12.5);
    rq_set_to_lon(&q, 179.25);
    rq_set_radius(&q, 3958.8);
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert(rq_has_to(&d));
    ck_assert(rq_to_lat(&d) == -12.5 && rq_to_lon(&d) == 179.25 && rq_radius(&d) == 3958.8);
    ck_assert_uint_eq(d.ndim_b, 0);
    ck_assert_int_eq(check(&d, 160, &sz), 0);
    ck_assert_uint_eq(sz.n, 10);
    ck_assert_uint_eq(sz.output, 80);
    ck_assert_uint_eq(sz.out_ndim, 1);
    /* pairwise by row */
    base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F32);
    shape2(q.shape_a, &q.ndim_a, 10, 2);
    shape2(q.shape_b, &q.ndim_b, 10, 2);
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert(!rq_has_to(&d));
    ck_assert(rq_radius(&d) == GPUQ_EARTH_RADIUS_KM);
    ck_assert_int_eq(check(&d, 160, &sz), 0);
    ck_assert_uint_eq(sz.payload, 160);
    ck_assert_uint_eq(sz.output, 40);
}
END_TEST

START_TEST(test_rt_grid)
{
    gpuq_request q, d;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_GRID, GPUQ_DT_NONE);
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_int_eq(d.dtype, GPUQ_DT_F64); /* default */
    ck_assert(rq_lat_start(&d) == -90 && rq_lat_stop(&d) == 90 && rq_lat_n(&d) == 1000);
    ck_assert(rq_lon_start(&d) == -180 && rq_lon_stop(&d) == 180 && rq_lon_n(&d) == 1000);
    ck_assert(rq_to_lat(&d) == 30 && rq_to_lon(&d) == 101);
    ck_assert_int_eq(check(&d, 0, &sz), 0);
    ck_assert_uint_eq(sz.output, 8000000);
    ck_assert_uint_eq(sz.payload, 0);
    ck_assert_uint_eq(sz.out_shape[0], 1000);
    ck_assert_uint_eq(sz.out_shape[1], 1000);

    base(&q, GPUQ_OP_GRID, GPUQ_DT_F32);
    rq_set_lat_start(&q, 10);
    rq_set_lat_stop(&q, -10);
    rq_set_lat_n(&q, 3);
    rq_set_lon_n(&q, 1);
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_int_eq(d.dtype, GPUQ_DT_F32);
    ck_assert_int_eq(check(&d, 0, &sz), 0);
    ck_assert_uint_eq(sz.output, 12);
    ck_assert_uint_eq(sz.rows, 3);
    ck_assert_uint_eq(sz.cols, 1);
}
END_TEST

START_TEST(test_rt_pairwise)
{
    gpuq_request q, d;
    gpuq_sizes sz;
    for (int m = 0; m < GPUQ_METRIC_COUNT; m++) {
        base(&q, GPUQ_OP_PAIRWISE, GPUQ_DT_F64);
        shape2(q.shape_a, &q.ndim_a, 4, 3);
        shape2(q.shape_b, &q.ndim_b, 5, 3);
        rq_set_metric(&q, (gpuq_metric)m);
        rq_set_zero_ok(&q, m == GPUQ_METRIC_COSINE);
        ck_assert_int_eq(roundtrip(&q, &d), 0);
        ck_assert_int_eq(rq_metric(&d), m);
        ck_assert(rq_zero_ok(&d) == rq_zero_ok(&q));
        ck_assert_int_eq(check(&d, (12 + 15) * 8, &sz), 0);
        ck_assert_uint_eq(sz.m, 4);
        ck_assert_uint_eq(sz.n, 5);
        ck_assert_uint_eq(sz.d, 3);
        ck_assert_uint_eq(sz.output, 160);
    }
}
END_TEST

/* ---- check rules ---- */

START_TEST(test_check_normalize)
{
    gpuq_request q;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_NONE);
    q.ndim_a = 1;
    q.shape_a[0] = 4;
    ck_assert_int_eq(check(&q, 32, &sz), GPUQ_E_BAD_DTYPE);
    q.dtype = GPUQ_DT_F64;
    ck_assert_int_eq(check(&q, 32, &sz), 0);
    ck_assert_int_eq(check(&q, 31, &sz), GPUQ_E_SIZE_MISMATCH);
    ck_assert_int_eq(check(&q, 33, &sz), GPUQ_E_SIZE_MISMATCH);
    q.ndim_a = 0;
    ck_assert_int_eq(check(&q, 32, &sz), GPUQ_E_BAD_SHAPE);
    q.ndim_a = 1;
    shape2(q.shape_b, &q.ndim_b, 1, 1);
    ck_assert_int_eq(check(&q, 32, &sz), GPUQ_E_BAD_ARGUMENT);
    q.ndim_b = 0;
    /* a method out of range cannot be set (so cannot be sent) */
    ck_assert_int_eq(gpuq_request_set_enum_index(&q, "method", GPUQ_NORM_COUNT),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(rq_method(&q), GPUQ_NORM_SUM);
    rq_set_method(&q, GPUQ_NORM_L2);
    q.shape_a[0] = 0;
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_EMPTY);
    shape2(q.shape_a, &q.ndim_a, 3, 0);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_EMPTY);
    shape2(q.shape_a, &q.ndim_a, 0, 3);
    rq_set_flat(&q, true);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_EMPTY);
}
END_TEST

START_TEST(test_check_haversine)
{
    gpuq_request q;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F64);
    shape2(q.shape_a, &q.ndim_a, 5, 2);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_BAD_ARGUMENT); /* neither to nor shape_b */
    rq_set_has_to(&q, true);
    ck_assert_int_eq(check(&q, 80, &sz), 0);
    shape2(q.shape_b, &q.ndim_b, 5, 2);
    ck_assert_int_eq(check(&q, 160, &sz), GPUQ_E_BAD_ARGUMENT); /* both */
    rq_set_has_to(&q, false);
    ck_assert_int_eq(check(&q, 160, &sz), 0);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_SIZE_MISMATCH);
    q.shape_b[0] = 4;
    ck_assert_int_eq(check(&q, 144, &sz), GPUQ_E_BAD_SHAPE);
    q.shape_b[0] = 5;
    q.shape_a[1] = 3;
    ck_assert_int_eq(check(&q, 160, &sz), GPUQ_E_BAD_SHAPE);
    q.shape_a[1] = 2;
    q.ndim_a = 1;
    ck_assert_int_eq(check(&q, 160, &sz), GPUQ_E_BAD_SHAPE);
    q.ndim_a = 2;
    q.dtype = GPUQ_DT_NONE;
    ck_assert_int_eq(check(&q, 160, &sz), GPUQ_E_BAD_DTYPE);
    q.dtype = GPUQ_DT_F64;
    q.ndim_b = 0;
    rq_set_has_to(&q, true);
    rq_set_to_lat(&q, 90.5);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_to_lat(&q, NAN);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_to_lat(&q, -90);
    rq_set_to_lon(&q, INFINITY);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_to_lon(&q, 0);
    rq_set_radius(&q, 0);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_BAD_ARGUMENT);
    rq_set_radius(&q, -1);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_BAD_ARGUMENT);
    rq_set_radius(&q, INFINITY);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_BAD_ARGUMENT);
    rq_set_radius(&q, NAN);
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_BAD_ARGUMENT);
    rq_set_radius(&q, 1);
    q.shape_a[0] = 0;
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_EMPTY);
}
END_TEST

START_TEST(test_check_grid)
{
    gpuq_request q;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_GRID, GPUQ_DT_NONE);
    ck_assert_int_eq(check(&q, 0, &sz), 0);
    ck_assert_int_eq(check(&q, 8, &sz), GPUQ_E_SIZE_MISMATCH);
    rq_set_lat_n(&q, 0);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_EMPTY);
    rq_set_lat_n(&q, 1);
    rq_set_lon_n(&q, 0);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_EMPTY);
    rq_set_lon_n(&q, 1);
    ck_assert_int_eq(check(&q, 0, &sz), 0);
    rq_set_lat_start(&q, -90.01);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_lat_start(&q, -90);
    rq_set_lat_stop(&q, 91);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_lat_stop(&q, NAN);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_lat_stop(&q, 90);
    rq_set_lon_start(&q, -INFINITY);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_lon_start(&q, -180);
    rq_set_to_lat(&q, 100);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_OUT_OF_RANGE);
    rq_set_to_lat(&q, 30);
    rq_set_radius(&q, 0);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_ARGUMENT);
    rq_set_radius(&q, 1);
    q.ndim_a = 1;
    q.shape_a[0] = 2;
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_ARGUMENT);
    q.ndim_a = 0;
    /* overflow of lat_n * lon_n; then bytes */
    rq_set_lat_n(&q, 1ull << 40);
    rq_set_lon_n(&q, 1ull << 30);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_SHAPE);
    rq_set_lon_n(&q, 1ull << 22);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_TOO_LARGE);
    rq_set_lat_n(&q, 1ull << 20);
    rq_set_lon_n(&q, 1ull << 20);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_TOO_LARGE); /* 8 TiB output */
}
END_TEST

START_TEST(test_check_pairwise)
{
    gpuq_request q;
    gpuq_sizes sz;
    base(&q, GPUQ_OP_PAIRWISE, GPUQ_DT_F32);
    shape2(q.shape_a, &q.ndim_a, 2, 4);
    shape2(q.shape_b, &q.ndim_b, 3, 3);
    rq_set_metric(&q, GPUQ_METRIC_COSINE);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_SHAPE);
    ck_assert_str_eq(msg, "y has d=3, x has d=4");
    q.shape_b[1] = 4;
    ck_assert_int_eq(check(&q, 80, &sz), 0);
    ck_assert_uint_eq(sz.output, 24);
    ck_assert_int_eq(gpuq_request_unset(&q, "metric"), 0); /* metric is required */
    ck_assert_int_eq(check(&q, 80, &sz), GPUQ_E_BAD_ARGUMENT);
    rq_set_metric(&q, GPUQ_METRIC_MANHATTAN);
    q.ndim_b = 0;
    ck_assert_int_eq(check(&q, 32, &sz), GPUQ_E_BAD_SHAPE);
    q.ndim_b = 1;
    ck_assert_int_eq(check(&q, 32, &sz), GPUQ_E_BAD_SHAPE);
    shape2(q.shape_b, &q.ndim_b, 0, 4);
    ck_assert_int_eq(check(&q, 32, &sz), GPUQ_E_EMPTY);
    shape2(q.shape_a, &q.ndim_a, 2, 0);
    shape2(q.shape_b, &q.ndim_b, 2, 0);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_EMPTY);
    shape2(q.shape_a, &q.ndim_a, 1ull << 40, 1);
    shape2(q.shape_b, &q.ndim_b, 1ull << 40, 1);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_SHAPE); /* m*n overflows */
}
END_TEST

START_TEST(test_check_overflow_limits)
{
    gpuq_request q;
    gpuq_sizes sz;
    gpuq_limits lim;
    gpuq_limits_default(&lim);
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    shape2(q.shape_a, &q.ndim_a, 1ull << 62, 8);
    ck_assert_int_eq(check(&q, 64, &sz), GPUQ_E_BAD_SHAPE);
    rq_set_flat(&q, true);
    ck_assert_int_eq(check(&q, 64, &sz), GPUQ_E_BAD_SHAPE);
    rq_set_flat(&q, false);
    shape2(q.shape_a, &q.ndim_a, 1ull << 61, 2); /* elements fit, bytes don't */
    ck_assert_int_eq(check(&q, 64, &sz), GPUQ_E_TOO_LARGE);
    shape2(q.shape_a, &q.ndim_a, UINT64_MAX, UINT64_MAX);
    ck_assert_int_eq(check(&q, 64, &sz), GPUQ_E_BAD_SHAPE);

    /* max_payload: the declared payload first, then the implied one */
    lim.max_payload = 1000;
    shape2(q.shape_a, &q.ndim_a, 10, 10);
    ck_assert_int_eq(check_with(&q, 800, &lim, &sz), 0);
    ck_assert_int_eq(check_with(&q, 1001, &lim, &sz), GPUQ_E_TOO_LARGE);
    shape2(q.shape_a, &q.ndim_a, 20, 10);
    ck_assert_int_eq(check_with(&q, 800, &lim, &sz), GPUQ_E_TOO_LARGE);
    q.op = GPUQ_OP_PING; /* applies to every op */
    ck_assert_int_eq(check_with(&q, 1001, &lim, &sz), GPUQ_E_TOO_LARGE);

    /* max_output */
    gpuq_limits_default(&lim);
    lim.max_output = 100;
    base(&q, GPUQ_OP_PAIRWISE, GPUQ_DT_F32);
    rq_set_metric(&q, GPUQ_METRIC_EUCLIDEAN);
    shape2(q.shape_a, &q.ndim_a, 5, 1);
    shape2(q.shape_b, &q.ndim_b, 5, 1);
    ck_assert_int_eq(check_with(&q, 40, &lim, &sz), 0);
    q.shape_b[0] = 6;
    ck_assert_int_eq(check_with(&q, 44, &lim, &sz), GPUQ_E_TOO_LARGE);
    base(&q, GPUQ_OP_GRID, GPUQ_DT_F64);
    rq_set_lat_n(&q, 3);
    rq_set_lon_n(&q, 4);
    ck_assert_int_eq(check_with(&q, 0, &lim, &sz), 0);
    rq_set_lon_n(&q, 5);
    ck_assert_int_eq(check_with(&q, 0, &lim, &sz), GPUQ_E_TOO_LARGE);
    q.op = GPUQ_OP_NONE;
    ck_assert_int_eq(check_with(&q, 0, &lim, &sz), GPUQ_E_UNKNOWN_OP);
}
END_TEST

/* ---- strict decoding ---- */

typedef void (*build_fn)(gpuq_mpw *w);

static int decode_built(uint32_t nkeys, build_fn fn, gpuq_request *req)
{
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *b;
    size_t len;
    gpuq_mpw_map(w, nkeys);
    fn(w);
    ck_assert_int_eq(gpuq_mpw_take(w, &b, &len), 0);
    gpuq_mpw_free(w);
    msg[0] = '\0';
    int rc = gpuq_request_decode(b, len, req, msg, sizeof(msg));
    if (rc != 0)
        ck_assert(msg[0] != '\0');
    free(b);
    return rc;
}

#define KS(w, k, v) (gpuq_mpw_str(w, k), gpuq_mpw_str(w, v))
#define KU(w, k, v) (gpuq_mpw_str(w, k), gpuq_mpw_uint(w, v))

static void b_ok(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "ping");
}
static void b_unknown(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "ping");
    KU(w, "bogus", 1);
}
static void b_dup(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "ping");
    KU(w, "id", 8);
}
static void b_noid(gpuq_mpw *w)
{
    KS(w, "op", "ping");
}
static void b_noop(gpuq_mpw *w)
{
    KU(w, "id", 7);
}
static void b_badop(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "explode");
}
static void b_idstr(gpuq_mpw *w)
{
    KS(w, "id", "7");
    KS(w, "op", "ping");
}
static void b_idneg(gpuq_mpw *w)
{
    gpuq_mpw_str(w, "id");
    gpuq_mpw_int(w, -1);
    KS(w, "op", "ping");
}
static void b_opint(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KU(w, "op", 1);
}
static void b_dtype(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    KS(w, "dtype", "f16");
}
static void b_method(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    KS(w, "method", "max");
}
static void b_metric(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "pairwise");
    KS(w, "metric", "hamming");
}
static void b_onzero(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "pairwise");
    KS(w, "on_zero", "one");
}
static void b_foreign(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "grid");
    KS(w, "method", "l2");
}
static void b_oplast(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "method", "l2");
    KS(w, "op", "normalize");
}
static void b_i64(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    KS(w, "dtype", "i64");
}
static void b_flatint(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    KU(w, "flat", 1);
}
static void b_rank3(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 3);
    gpuq_mpw_uint(w, 1);
    gpuq_mpw_uint(w, 1);
    gpuq_mpw_uint(w, 1);
}
static void b_rank0(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 0);
}
static void b_shapeneg(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 1);
    gpuq_mpw_int(w, -3);
}
static void b_shapefloat(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "normalize");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 1);
    gpuq_mpw_double(w, 3.0);
}
static void b_to3(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "haversine");
    gpuq_mpw_str(w, "to");
    gpuq_mpw_array(w, 3);
    gpuq_mpw_double(w, 1);
    gpuq_mpw_double(w, 1);
    gpuq_mpw_double(w, 1);
}
static void b_toint(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "haversine");
    gpuq_mpw_str(w, "to");
    gpuq_mpw_array(w, 2);
    gpuq_mpw_int(w, -45);
    gpuq_mpw_uint(w, 10);
}
static void b_radiusstr(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "grid");
    KS(w, "radius", "1");
}
static void b_latn(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "grid");
    gpuq_mpw_str(w, "lat");
    gpuq_mpw_array(w, 3);
    gpuq_mpw_double(w, -10);
    gpuq_mpw_double(w, 10);
    gpuq_mpw_double(w, 5.5);
}
static void b_lat2(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "grid");
    gpuq_mpw_str(w, "lat");
    gpuq_mpw_array(w, 2);
    gpuq_mpw_double(w, -10);
    gpuq_mpw_double(w, 10);
}
static void b_client(gpuq_mpw *w)
{
    KU(w, "id", 7);
    KS(w, "op", "hello");
    KS(w, "client", "0123456789012345678901234567890123456789012345678901234567890123X");
}
static void b_prio_str(gpuq_mpw *w)
{
    KU(w, "id", 1);
    KS(w, "op", "hello");
    KS(w, "priority", "high");
}
static void b_prio_bad(gpuq_mpw *w)
{
    KU(w, "id", 1);
    KS(w, "op", "hello");
    KS(w, "priority", "urgent");
}
static void b_prio_big(gpuq_mpw *w)
{
    KU(w, "id", 1);
    KS(w, "op", "hello");
    KU(w, "priority", 6);
}
static void b_prio_neg(gpuq_mpw *w)
{
    KU(w, "id", 1);
    KS(w, "op", "hello");
    gpuq_mpw_str(w, "priority");
    gpuq_mpw_int(w, -6);
}
static void b_device(gpuq_mpw *w)
{
    KU(w, "id", 1);
    KS(w, "op", "hello");
    gpuq_mpw_str(w, "device");
    gpuq_mpw_int(w, -2);
}
static void b_keyint(gpuq_mpw *w)
{
    KU(w, "id", 1);
    gpuq_mpw_uint(w, 5);
    KS(w, "op", "ping");
}

/* ---- priority: one scale, the levels -1/0/1 and their names only ---- */

static int64_t prio_int; /* what b_prio_int sends */
static const char *prio_str;
static void b_prio_int(gpuq_mpw *w)
{
    KU(w, "id", 1);
    KS(w, "op", "hello");
    gpuq_mpw_str(w, "priority");
    if (prio_int >= 0)
        gpuq_mpw_uint(w, (uint64_t)prio_int); /* positive fixint/uint, as msgpack writers do */
    else
        gpuq_mpw_int(w, prio_int);
}
static void b_prio_text(gpuq_mpw *w)
{
    KU(w, "id", 1);
    KS(w, "op", "hello");
    KS(w, "priority", prio_str);
}

/* Every int from -10 to 10 (the loop index) as hello's priority: the three
 * levels decode to themselves, every other value is bad_argument. */
START_TEST(test_decode_priority_int)
{
    gpuq_request q;
    prio_int = _i;
    int rc = decode_built(3, b_prio_int, &q);
    if (_i >= -1 && _i <= 1) {
        ck_assert_msg(rc == 0, "priority %d: %s", _i, msg);
        ck_assert_int_eq(q.priority, _i);
    } else {
        ck_assert_msg(rc == GPUQ_E_BAD_ARGUMENT, "priority %d: rc %d", _i, rc);
        ck_assert_msg(strstr(msg, "not a level") != NULL, "priority %d: '%s'", _i, msg);
    }
    /* the edges of int64 too, once */
    if (_i == 0) {
        prio_int = INT64_MIN;
        ck_assert_int_eq(decode_built(3, b_prio_int, &q), GPUQ_E_BAD_ARGUMENT);
        prio_int = INT64_MAX;
        ck_assert_int_eq(decode_built(3, b_prio_int, &q), GPUQ_E_BAD_ARGUMENT);
    }
}
END_TEST

START_TEST(test_decode_priority_str)
{
    static const struct {
        const char *s;
        int want; /* a level, or 99: bad_argument */
    } cases[] = {
        {"low", GPUQ_PRIO_LOW},
        {"normal", GPUQ_PRIO_NORMAL},
        {"high", GPUQ_PRIO_HIGH},
        {"Low", 99},
        {"HIGH", 99},
        {"urgent", 99},
        {"", 99},
        {"lo", 99},
        {"lowx", 99},
        {"high ", 99},
        {"-1", 99},
        {"0", 99},
        {"1", 99},
        {"5", 99},
        {"-5", 99},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gpuq_request q;
        prio_str = cases[k].s;
        int rc = decode_built(3, b_prio_text, &q);
        if (cases[k].want == 99) {
            ck_assert_msg(rc == GPUQ_E_BAD_ARGUMENT, "\"%s\": rc %d", cases[k].s, rc);
            ck_assert_msg(strstr(msg, "not low, normal or high") != NULL, "'%s'", msg);
        } else {
            ck_assert_msg(rc == 0, "\"%s\": %s", cases[k].s, msg);
            ck_assert_int_eq(q.priority, cases[k].want);
        }
    }
}
END_TEST

static const char *on_zero_str;
static void b_on_zero(gpuq_mpw *w)
{
    KU(w, "id", 3);
    KS(w, "op", "normalize");
    KS(w, "on_zero", on_zero_str);
}

/* on_zero: the three values PROTOCOL.md defines decode to what they say,
 * anything else is bad_argument; left out, the default is "error". */
START_TEST(test_decode_on_zero)
{
    static const struct {
        const char *s;
        int want; /* the mode (GPUQ_K_ON_ZERO_*), or -1: bad_argument */
    } cases[] = {
        {"error", 0},  {"zero", 1}, {"Error", -1}, {"ZERO", -1}, {"", -1},
        {"zeros", -1}, {"err", -1}, {"nan", 2},    {"NaN", -1},  {"zero ", -1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gpuq_request q;
        on_zero_str = cases[k].s;
        int rc = decode_built(3, b_on_zero, &q);
        if (cases[k].want < 0) {
            ck_assert_msg(rc == GPUQ_E_BAD_ARGUMENT, "\"%s\": rc %d", cases[k].s, rc);
            ck_assert_msg(strstr(msg, "on_zero") != NULL, "'%s'", msg);
        } else {
            ck_assert_msg(rc == 0, "\"%s\": %s", cases[k].s, msg);
            ck_assert_int_eq(gpuq_request_get_enum(&q, "on_zero"), cases[k].want);
        }
    }
    gpuq_request q;
    ck_assert_int_eq(decode_built(2, b_ok, &q), 0);
    ck_assert(!rq_zero_ok(&q));
}
END_TEST

/* metric: the names and their aliases (PROTOCOL.md 3.1: scipy's
 * "cityblock", scikit-learn's "l1" and "l2") decode to the metric, for
 * pairwise and knn alike; near misses and scipy's short forms are refused
 * with the names-only message; set_enum and gpuq_metric_parse take the same
 * set; the encoder writes the name, never the alias. */
static const char *metric_op, *metric_str;
static void b_metric_alias(gpuq_mpw *w)
{
    KU(w, "id", 3);
    KS(w, "op", metric_op);
    KS(w, "metric", metric_str);
}

START_TEST(test_metric_aliases)
{
    static const struct {
        const char *s;
        int want; /* GPUQ_METRIC_*, or -1: bad_argument */
    } cases[] = {
        {"euclidean", GPUQ_METRIC_EUCLIDEAN},
        {"sqeuclidean", GPUQ_METRIC_SQEUCLIDEAN},
        {"cosine", GPUQ_METRIC_COSINE},
        {"manhattan", GPUQ_METRIC_MANHATTAN},
        {"cityblock", GPUQ_METRIC_MANHATTAN},
        {"l1", GPUQ_METRIC_MANHATTAN},
        {"l2", GPUQ_METRIC_EUCLIDEAN},
        {"CityBlock", -1},
        {"cityblock ", -1},
        {"city", -1},
        {"c", -1},
        {"e", -1},
        {"cos", -1},
        {"sqe", -1},
        {"chebyshev", GPUQ_METRIC_CHEBYSHEV},
        {"chebychev", GPUQ_METRIC_CHEBYSHEV},
        {"minkowski", GPUQ_METRIC_MINKOWSKI},
        {"pnorm", GPUQ_METRIC_MINKOWSKI},
        {"cheb", -1},
        {"mi", -1},
        {"L1", -1},
        {"l3", -1},
        {"", -1},
    };
    static const char *const ops[] = {"pairwise", "knn"};
    for (int o = 0; o < 2; o++) {
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            gpuq_request q;
            metric_op = ops[o];
            metric_str = cases[k].s;
            int rc = decode_built(3, b_metric_alias, &q);
            if (cases[k].want < 0) {
                ck_assert_msg(rc == GPUQ_E_BAD_ARGUMENT, "%s \"%s\": rc %d", ops[o], cases[k].s,
                              rc);
                char want[160];
                snprintf(want, sizeof want,
                         "metric \"%s\" is not euclidean, sqeuclidean, cosine, manhattan, "
                         "chebyshev or minkowski",
                         cases[k].s);
                ck_assert_str_eq(msg, want);
            } else {
                ck_assert_msg(rc == 0, "%s \"%s\": %s", ops[o], cases[k].s, msg);
                ck_assert_int_eq(rq_metric(&q), cases[k].want);
            }
            gpuq_request r;
            gpuq_request_init(&r);
            r.op = o ? GPUQ_OP_KNN : GPUQ_OP_PAIRWISE;
            int src = gpuq_request_set_enum(&r, "metric", cases[k].s);
            ck_assert_int_eq(src, cases[k].want < 0 ? GPUQ_E_BAD_ARGUMENT : 0);
            if (cases[k].want >= 0) {
                ck_assert_int_eq(gpuq_request_get_enum(&r, "metric"), cases[k].want);
                /* encoded under its name: what a server sends back or logs */
                r.id = 9;
                r.dtype = GPUQ_DT_F32;
                uint8_t *b;
                size_t len;
                ck_assert_int_eq(gpuq_request_encode(&r, &b, &len), 0);
                const char *name = gpuq_metric_name((gpuq_metric)cases[k].want);
                ck_assert_ptr_nonnull(memmem(b, len, name, strlen(name)));
                if (strcmp(name, cases[k].s) != 0)
                    ck_assert_ptr_null(memmem(b, len, cases[k].s, strlen(cases[k].s)));
                free(b);
            }
            ck_assert_int_eq(gpuq_metric_parse(cases[k].s, strlen(cases[k].s)), cases[k].want);
        }
    }
}
END_TEST

/* The helpers the config file, gpuqctl and the server's documents use. */
START_TEST(test_priority_names)
{
    for (int p = -10; p <= 10; p++) {
        const char *n = gpuq_prio_name(p);
        if (p < -1 || p > 1) {
            ck_assert_ptr_null(n);
            continue;
        }
        ck_assert_str_eq(n, p == -1 ? "low" : p == 0 ? "normal" : "high");
        int back = 99;
        ck_assert_int_eq(gpuq_prio_from_name(n, strlen(n), &back), 0);
        ck_assert_int_eq(back, p);
        back = 99;
        ck_assert_int_eq(gpuq_prio_parse(n, &back), 0);
        ck_assert_int_eq(back, p);
        char txt[8];
        snprintf(txt, sizeof txt, "%d", p);
        back = 99;
        ck_assert_int_eq(gpuq_prio_parse(txt, &back), 0);
        ck_assert_int_eq(back, p);
    }
    /* the scale's order is the ints' order */
    ck_assert_int_lt(GPUQ_PRIO_LOW, GPUQ_PRIO_NORMAL);
    ck_assert_int_lt(GPUQ_PRIO_NORMAL, GPUQ_PRIO_HIGH);
    static const char *const bad[] = {"-5", "5",  "2", "-2", "+1",  " 1",     "1 ",
                                      "01", "-0", "",  "1x", "LOW", "urgent", "0x1"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int p = 99;
        ck_assert_msg(gpuq_prio_parse(bad[k], &p) == GPUQ_E_BAD_ARGUMENT, "'%s' accepted", bad[k]);
        ck_assert_int_eq(p, 99);
    }
    int p = 99;
    ck_assert_int_eq(gpuq_prio_parse(NULL, &p), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_prio_from_name("low", 2, &p), GPUQ_E_BAD_ARGUMENT); /* "lo" */
    ck_assert_int_eq(p, 99);
}
END_TEST
static void b_opfirst(gpuq_mpw *w)
{
    KS(w, "op", "status");
    KU(w, "id", 99);
}

START_TEST(test_decode_strict)
{
    gpuq_request q;
    ck_assert_int_eq(decode_built(2, b_ok, &q), 0);
    ck_assert_uint_eq(q.id, 7);
    ck_assert_int_eq(decode_built(2, b_opfirst, &q), 0);
    ck_assert_uint_eq(q.id, 99);
    ck_assert_int_eq(q.op, GPUQ_OP_STATUS);

    ck_assert_int_eq(decode_built(3, b_unknown, &q), GPUQ_E_BAD_HEADER);
    ck_assert_uint_eq(q.id, 7); /* id known for the error reply */
    ck_assert_str_eq(msg, "unknown key \"bogus\"");
    ck_assert_int_eq(decode_built(3, b_dup, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(1, b_noid, &q), GPUQ_E_BAD_HEADER);
    ck_assert_uint_eq(q.id, 0);
    ck_assert_int_eq(decode_built(1, b_noop, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(2, b_badop, &q), GPUQ_E_UNKNOWN_OP);
    ck_assert_int_eq(decode_built(2, b_idstr, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(2, b_idneg, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(2, b_opint, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(3, b_dtype, &q), GPUQ_E_BAD_DTYPE);
    ck_assert_int_eq(decode_built(3, b_method, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_str_eq(msg, "method \"max\" is not sum, l1, l2, minmax or zscore");
    /* an op key of another op; op keys before "op"; i64 is output-only */
    ck_assert_int_eq(decode_built(3, b_foreign, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_str_eq(msg, "grid takes no \"method\"");
    ck_assert_int_eq(decode_built(3, b_oplast, &q), 0);
    ck_assert_int_eq(rq_method(&q), GPUQ_NORM_L2);
    ck_assert_int_eq(decode_built(3, b_i64, &q), GPUQ_E_BAD_DTYPE);
    ck_assert_int_eq(decode_built(3, b_metric, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_onzero, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_flatint, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(3, b_rank3, &q), GPUQ_E_BAD_SHAPE);
    ck_assert_int_eq(decode_built(3, b_rank0, &q), GPUQ_E_BAD_SHAPE);
    ck_assert_int_eq(decode_built(3, b_shapeneg, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(3, b_shapefloat, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(3, b_to3, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_toint, &q), 0);
    ck_assert(rq_has_to(&q) && rq_to_lat(&q) == -45 && rq_to_lon(&q) == 10);
    ck_assert_int_eq(decode_built(3, b_radiusstr, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(3, b_latn, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(3, b_lat2, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_client, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_prio_str, &q), 0);
    ck_assert_int_eq(q.priority, GPUQ_PRIO_HIGH);
    ck_assert_int_eq(decode_built(3, b_prio_bad, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_prio_big, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_prio_neg, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_device, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_keyint, &q), GPUQ_E_BAD_HEADER);
    /* map claims more entries than present */
    ck_assert_int_eq(decode_built(3, b_ok, &q), GPUQ_E_BAD_HEADER);
    /* fewer: trailing bytes */
    ck_assert_int_eq(decode_built(1, b_ok, &q), GPUQ_E_BAD_HEADER);

    /* not a map at all, and the 5-byte array32 bomb */
    static const uint8_t arr[] = {0x92, 0x01, 0x02};
    static const uint8_t bomb[] = {0xdd, 0xff, 0x00, 0x00, 0x00};
    static const uint8_t mbomb[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    ck_assert_int_eq(gpuq_request_decode(arr, sizeof(arr), &q, msg, sizeof(msg)),
                     GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(gpuq_request_decode(bomb, sizeof(bomb), &q, msg, sizeof(msg)),
                     GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(gpuq_request_decode(mbomb, sizeof(mbomb), &q, msg, sizeof(msg)),
                     GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(gpuq_request_decode(NULL, 0, &q, msg, sizeof(msg)), GPUQ_E_BAD_HEADER);
    /* msg may be NULL */
    ck_assert_int_eq(gpuq_request_decode(arr, sizeof(arr), &q, NULL, 0), GPUQ_E_BAD_HEADER);
}
END_TEST

/* ---- the id of a refused header, wherever "id" sits ---- */

/* {"op": "normalize", <bad key>, "id": 9}: the bad key before "id". */
static void id9(gpuq_mpw *w)
{
    KU(w, "id", 9);
}
static void l_method(gpuq_mpw *w)
{
    KS(w, "op", "normalize");
    KS(w, "method", "max");
    id9(w);
}
static void l_dtype(gpuq_mpw *w)
{
    KS(w, "op", "normalize");
    KS(w, "dtype", "f16");
    id9(w);
}
static void l_onzero(gpuq_mpw *w)
{
    KS(w, "op", "pairwise");
    KS(w, "on_zero", "one");
    id9(w);
}
static void l_shape_rank(gpuq_mpw *w)
{
    KS(w, "op", "normalize");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 3);
    for (int k = 0; k < 3; k++)
        gpuq_mpw_uint(w, 1);
    id9(w);
}
static void l_shape_type(gpuq_mpw *w)
{
    KS(w, "op", "normalize");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 1);
    gpuq_mpw_double(w, 3.0);
    id9(w);
}
static void l_unknown(gpuq_mpw *w)
{
    KS(w, "op", "normalize");
    KU(w, "bogus", 1);
    id9(w);
}
static void l_foreign(gpuq_mpw *w)
{
    KS(w, "op", "grid");
    KS(w, "method", "l2");
    id9(w);
}
static void l_badop(gpuq_mpw *w)
{
    KS(w, "op", "explode");
    KS(w, "method", "l2");
    id9(w);
}
static void l_nested(gpuq_mpw *w) /* an unknown key whose value is a map */
{
    KS(w, "op", "ping");
    gpuq_mpw_str(w, "extra");
    gpuq_mpw_map(w, 1);
    KU(w, "id", 5); /* not the header's id */
    id9(w);
}
static void l_keyint(gpuq_mpw *w)
{
    KS(w, "op", "ping");
    gpuq_mpw_uint(w, 5);
    gpuq_mpw_uint(w, 6);
    id9(w);
}
static void l_utf8_value(gpuq_mpw *w)
{
    static const uint8_t bad[] = {0xa3, 'f', 0xff, '4'}; /* str "f\xff4" */
    KS(w, "op", "normalize");
    gpuq_mpw_str(w, "dtype");
    gpuq_mpw_raw(w, bad, sizeof bad);
    id9(w);
}
static void l_utf8_key(gpuq_mpw *w)
{
    static const uint8_t bad[] = {0xa2, 0xff, 'x'}; /* key "\xffx" */
    KS(w, "op", "ping");
    gpuq_mpw_raw(w, bad, sizeof bad);
    gpuq_mpw_uint(w, 1);
    id9(w);
}
static void l_dup(gpuq_mpw *w) /* the first "id" counts */
{
    id9(w);
    KS(w, "op", "ping");
    KU(w, "id", 8);
}
static void l_idstr(gpuq_mpw *w) /* no valid id: 0 */
{
    KS(w, "op", "normalize");
    KS(w, "method", "max");
    KS(w, "id", "9");
}
static void l_noid(gpuq_mpw *w)
{
    KS(w, "op", "normalize");
    KS(w, "method", "max");
}

static const struct {
    const char *name;
    uint32_t nkeys;
    build_fn fn;
    int code;
    uint64_t id;
} id_cases[] = {
    {"method", 3, l_method, GPUQ_E_BAD_ARGUMENT, 9},
    {"dtype", 3, l_dtype, GPUQ_E_BAD_DTYPE, 9},
    {"on_zero", 3, l_onzero, GPUQ_E_BAD_ARGUMENT, 9},
    {"shape rank", 3, l_shape_rank, GPUQ_E_BAD_SHAPE, 9},
    {"shape type", 3, l_shape_type, GPUQ_E_BAD_HEADER, 9},
    {"unknown key", 3, l_unknown, GPUQ_E_BAD_HEADER, 9},
    {"key of another op", 3, l_foreign, GPUQ_E_BAD_ARGUMENT, 9},
    {"unknown op", 3, l_badop, GPUQ_E_UNKNOWN_OP, 9},
    {"nested id", 3, l_nested, GPUQ_E_BAD_HEADER, 9},
    {"int key", 3, l_keyint, GPUQ_E_BAD_HEADER, 9},
    {"value not UTF-8", 3, l_utf8_value, GPUQ_E_BAD_HEADER, 9},
    {"key not UTF-8", 3, l_utf8_key, GPUQ_E_BAD_HEADER, 9},
    {"duplicate id", 3, l_dup, GPUQ_E_BAD_HEADER, 9},
    {"map longer than said", 2, l_method, GPUQ_E_BAD_ARGUMENT, 0}, /* "id" is a trailing byte */
    {"map shorter than said", 4, l_method, GPUQ_E_BAD_ARGUMENT, 9},
    {"id a string", 3, l_idstr, GPUQ_E_BAD_ARGUMENT, 0},
    {"no id", 2, l_noid, GPUQ_E_BAD_ARGUMENT, 0},
};
#define NID_CASES ((int)(sizeof id_cases / sizeof id_cases[0]))

/* A header refused for a key before "id" still names its request (the
 * issue's order dependence: id 0 when "id" came last); _i picks the case.
 * The request struct starts dirty, so an id left over is seen too. */
START_TEST(test_decode_id_last)
{
    gpuq_request q;
    memset(&q, 0x5a, sizeof q);
    int rc = decode_built(id_cases[_i].nkeys, id_cases[_i].fn, &q);
    ck_assert_msg(rc == id_cases[_i].code, "%s: %s (%s), want %s", id_cases[_i].name,
                  gpuq_errname(rc), msg, gpuq_errname(id_cases[_i].code));
    ck_assert_msg(q.id == id_cases[_i].id, "%s: id %llu, want %llu (%s)", id_cases[_i].name,
                  (unsigned long long)q.id, (unsigned long long)id_cases[_i].id, msg);
}
END_TEST

/* _i selects the request to truncate at every byte */
START_TEST(test_decode_truncated)
{
    gpuq_request q, d;
    uint8_t *buf;
    size_t len;
    switch (_i) {
    case 0:
        base(&q, GPUQ_OP_HELLO, GPUQ_DT_NONE);
        strcpy(q.client, "truncation");
        q.timing = true;
        break;
    case 1:
        base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F32);
        shape2(q.shape_a, &q.ndim_a, 1ull << 40, 2);
        rq_set_has_to(&q, true);
        break;
    case 2:
        base(&q, GPUQ_OP_GRID, GPUQ_DT_F64);
        break;
    default:
        base(&q, GPUQ_OP_PAIRWISE, GPUQ_DT_F64);
        shape2(q.shape_a, &q.ndim_a, 70000, 300);
        shape2(q.shape_b, &q.ndim_b, 5, 300);
        rq_set_metric(&q, GPUQ_METRIC_SQEUCLIDEAN);
        rq_set_zero_ok(&q, true);
        break;
    }
    ck_assert_int_eq(gpuq_request_encode(&q, &buf, &len), 0);
    for (size_t k = 0; k < len; k++) {
        uint8_t *part = malloc(k ? k : 1);
        memcpy(part, buf, k);
        int rc = gpuq_request_decode(part, k, &d, msg, sizeof(msg));
        ck_assert_msg(rc != 0, "prefix of %zu/%zu bytes decoded", k, len);
        free(part);
    }
    ck_assert_int_eq(gpuq_request_decode(buf, len, &d, msg, sizeof(msg)), 0);
    free(buf);
}
END_TEST

START_TEST(test_names)
{
    for (int op = GPUQ_OP_HELLO; op < GPUQ_OP_COUNT; op++) {
        const char *n = gpuq_op_name((gpuq_op)op);
        ck_assert_int_eq(gpuq_op_parse(n, strlen(n)), op);
    }
    ck_assert_ptr_null(gpuq_op_name(GPUQ_OP_NONE));
    ck_assert_ptr_null(gpuq_op_name(GPUQ_OP_COUNT));
    ck_assert_int_eq(gpuq_op_parse("pin", 3), -1);
    ck_assert_int_eq(gpuq_norm_method_parse("zscore", 6), GPUQ_NORM_ZSCORE);
    ck_assert_int_eq(gpuq_metric_parse("cosine", 6), GPUQ_METRIC_COSINE);
    ck_assert_int_eq(gpuq_metric_parse("cos", 3), -1);
    ck_assert_str_eq(gpuq_dtype_name(GPUQ_DT_F32), "f32");
    ck_assert_uint_eq(gpuq_dtype_size(GPUQ_DT_F64), 8);
    ck_assert_uint_eq(gpuq_dtype_size(GPUQ_DT_NONE), 0);
    ck_assert_str_eq(gpuq_norm_method_name(GPUQ_NORM_MINMAX), "minmax");
    ck_assert_str_eq(gpuq_metric_name(GPUQ_METRIC_SQEUCLIDEAN), "sqeuclidean");
}
END_TEST

/* ---- admin and observability ops ---- */

static void b_kill_str(gpuq_mpw *w)
{
    KU(w, "id", 3);
    KS(w, "op", "kill_session");
    KS(w, "session", "4");
}
static void b_limit_long(gpuq_mpw *w)
{
    KU(w, "id", 3);
    KS(w, "op", "set_limit");
    KS(w, "limit", "a_limit_name_that_is_far_too_long_x");
}
static void b_value_neg(gpuq_mpw *w)
{
    KU(w, "id", 3);
    KS(w, "op", "set_limit");
    gpuq_mpw_str(w, "value");
    gpuq_mpw_int(w, -1);
}

START_TEST(test_admin_ops)
{
    gpuq_request q, d;
    gpuq_sizes sz;
    /* round trips */
    base(&q, GPUQ_OP_KILL_SESSION, GPUQ_DT_NONE);
    q.has_session = true;
    q.session = 1234567890123ull;
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_int_eq(d.op, GPUQ_OP_KILL_SESSION);
    ck_assert(d.has_session);
    ck_assert_uint_eq(d.session, 1234567890123ull);
    ck_assert_int_eq(check(&d, 0, &sz), 0);
    base(&q, GPUQ_OP_SET_LIMIT, GPUQ_DT_NONE);
    snprintf(q.limit, sizeof q.limit, "max_inflight");
    q.has_value = true;
    q.value = 9;
    ck_assert_int_eq(roundtrip(&q, &d), 0);
    ck_assert_str_eq(d.limit, "max_inflight");
    ck_assert(d.has_value && d.value == 9);
    ck_assert_int_eq(check(&d, 0, &sz), 0);
    for (int op = GPUQ_OP_SESSIONS; op <= GPUQ_OP_SHUTDOWN; op++) {
        base(&q, (gpuq_op)op, GPUQ_DT_NONE);
        ck_assert_int_eq(roundtrip(&q, &d), 0);
        ck_assert_int_eq(d.op, op);
        ck_assert_int_eq(check(&d, 0, &sz), 0);
        ck_assert_uint_eq(sz.output, 0);
        ck_assert_int_eq(check(&d, 8, &sz), GPUQ_E_SIZE_MISMATCH); /* no payload taken */
    }
    ck_assert(gpuq_op_is_admin(GPUQ_OP_DRAIN) && gpuq_op_is_admin(GPUQ_OP_SET_LIMIT));
    ck_assert(!gpuq_op_is_admin(GPUQ_OP_SESSIONS) && !gpuq_op_is_admin(GPUQ_OP_METRICS));
    ck_assert(gpuq_op_is_compute(GPUQ_OP_PAIRWISE) && !gpuq_op_is_compute(GPUQ_OP_SESSIONS));
    /* missing or bad arguments */
    base(&q, GPUQ_OP_KILL_SESSION, GPUQ_DT_NONE);
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_ARGUMENT);
    ck_assert_str_eq(msg, "kill_session needs \"session\"");
    base(&q, GPUQ_OP_SET_LIMIT, GPUQ_DT_NONE);
    snprintf(q.limit, sizeof q.limit, "max_inflight");
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_ARGUMENT); /* no value */
    q.has_value = true;
    q.value = 0;
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(msg, "outside [1, 1048576]"));
    snprintf(q.limit, sizeof q.limit, "max_speed");
    q.value = 1;
    ck_assert_int_eq(check(&q, 0, &sz), GPUQ_E_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(msg, "unknown limit \"max_speed\""));
    ck_assert_int_eq(decode_built(3, b_kill_str, &q), GPUQ_E_BAD_HEADER);
    ck_assert_int_eq(decode_built(3, b_limit_long, &q), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(decode_built(3, b_value_neg, &q), GPUQ_E_BAD_HEADER);
    /* the limits table */
    gpuq_limits l;
    gpuq_limits_default(&l);
    uint64_t old = 0, v = 0;
    ck_assert_int_eq(gpuq_limits_set(&l, "total_staging", 1ull << 33, &old, msg, sizeof msg), 0);
    ck_assert_uint_eq(old, GPUQ_DEFAULT_TOTAL_STAGING);
    ck_assert_uint_eq(l.total_staging, 1ull << 33);
    ck_assert_int_eq(gpuq_limits_set(&l, "max_header", 4096, NULL, msg, sizeof msg), 0);
    ck_assert_uint_eq(l.max_header, 4096);
    ck_assert_int_eq(gpuq_limits_get(&l, "max_header", &v), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(gpuq_limits_set(&l, "max_header", (1u << 30) + 1, NULL, msg, sizeof msg), -1);
    ck_assert_uint_eq(l.max_header, 4096);
    ck_assert_int_eq(gpuq_limits_get(&l, "nope", &v), -1);
    uint64_t lo = 0, hi = 0;
    ck_assert_int_eq(gpuq_limits_range("max_sessions", &lo, &hi), 0);
    ck_assert(lo == 1 && hi == 1u << 20);
    /* the resident array limits: resident_bytes may be 0 (none), total_resident not */
    ck_assert_uint_eq(l.resident_bytes, GPUQ_DEFAULT_RESIDENT_BYTES);
    ck_assert_uint_eq(l.total_resident, GPUQ_DEFAULT_TOTAL_RESIDENT);
    ck_assert_int_eq(gpuq_limits_set(&l, "resident_bytes", 0, NULL, msg, sizeof msg), 0);
    ck_assert_uint_eq(l.resident_bytes, 0);
    ck_assert_int_eq(gpuq_limits_set(&l, "total_resident", 0, NULL, msg, sizeof msg), -1);
    ck_assert_int_eq(gpuq_limits_set(&l, "total_resident", 12345, NULL, msg, sizeof msg), 0);
    ck_assert_int_eq(gpuq_limits_get(&l, "total_resident", &v), 0);
    ck_assert_uint_eq(v, 12345);
    ck_assert_int_eq(gpuq_limits_set(&l, "resident_bytes", 777, NULL, msg, sizeof msg), 0);
    /* the hello map: encode, then decode into zeros; unknown keys skipped,
     * a 32-bit field saturates */
    gpuq_mpw *w = gpuq_mpw_new();
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "limits");
    gpuq_limits_encode(&l, w);
    gpuq_mpw_str(w, "extra");
    gpuq_mpw_map(w, 3);
    gpuq_mpw_str(w, "max_inflight");
    gpuq_mpw_uint(w, 1ull << 40);
    gpuq_mpw_str(w, "future_limit");
    gpuq_mpw_uint(w, 3);
    gpuq_mpw_str(w, "max_output");
    gpuq_mpw_str(w, "big");
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(gpuq_mpw_take(w, &buf, &len), 0);
    gpuq_mpw_free(w);
    gpuq_mpr r;
    gpuq_mpr_init(&r, buf, len);
    uint32_t n;
    const char *k;
    uint32_t kl;
    ck_assert_int_eq(gpuq_mpr_map(&r, &n), 0);
    ck_assert_int_eq(gpuq_mpr_str(&r, &k, &kl), 0);
    gpuq_limits got;
    memset(&got, 0, sizeof got);
    ck_assert_int_eq(gpuq_limits_decode(&r, &got), 0);
    ck_assert(got.max_header == l.max_header && got.max_payload == l.max_payload &&
              got.max_inflight == l.max_inflight && got.session_staging == l.session_staging &&
              got.total_staging == l.total_staging && got.max_sessions == l.max_sessions &&
              got.max_output == l.max_output && got.session_arena == l.session_arena &&
              got.total_arena == l.total_arena && got.resident_bytes == 777 &&
              got.total_resident == 12345);
    ck_assert_int_eq(gpuq_mpr_str(&r, &k, &kl), 0);
    ck_assert_int_eq(gpuq_limits_decode(&r, &got), 0);
    ck_assert_uint_eq(got.max_inflight, UINT32_MAX);
    ck_assert_uint_eq(got.max_output, l.max_output); /* wrong type: skipped */
    ck_assert_uint_eq(gpuq_mpr_left(&r), 0);
    free(buf);
}
END_TEST

/* PROTOCOL.md section 7, byte for byte, and a framed reply. */
START_TEST(test_worked_example)
{
    static const uint8_t req_bytes[] = {0x82, 0xa2, 0x69, 0x64, 0x01, 0xa2, 0x6f,
                                        0x70, 0xa4, 0x70, 0x69, 0x6e, 0x67};
    static const uint8_t rep_frame[] = {0x47, 0x50, 0x55, 0x51, 0x01, 0x02, 0x00, 0x00, 0x0f,
                                        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                        0x00, 0x00, 0x82, 0xa2, 0x69, 0x64, 0x01, 0xa6, 0x73,
                                        0x74, 0x61, 0x74, 0x75, 0x73, 0xa2, 0x6f, 0x6b};
    gpuq_request q;
    base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    q.id = 1;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(gpuq_request_encode(&q, &buf, &len), 0);
    ck_assert_uint_eq(len, sizeof req_bytes);
    ck_assert_mem_eq(buf, req_bytes, len);
    free(buf);
    gpuq_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.id = 1;
    ck_assert_int_eq(gpuq_reply_frame(&rep, 0, &buf, &len), 0);
    ck_assert_uint_eq(len, sizeof rep_frame);
    ck_assert_mem_eq(buf, rep_frame, len);
    free(buf);
    /* with a payload length and an error: prefix + exactly gpuq_reply_encode's bytes */
    rep.status = GPUQ_E_ZERO_NORM;
    snprintf(rep.message, sizeof rep.message, "row 3 has zero sum norm");
    uint8_t *hdr;
    size_t hlen;
    ck_assert_int_eq(gpuq_reply_encode(&rep, &hdr, &hlen), 0);
    ck_assert_int_eq(gpuq_reply_frame(&rep, 4096, &buf, &len), 0);
    ck_assert_uint_eq(len, GPUQ_PREFIX_SIZE + hlen);
    gpuq_prefix p;
    ck_assert_int_eq(gpuq_prefix_decode(buf, GPUQ_PREFIX_SIZE, &p), 0);
    ck_assert_uint_eq(p.kind, GPUQ_KIND_REPLY);
    ck_assert_uint_eq(p.header_len, hlen);
    ck_assert_uint_eq(p.payload_len, 4096);
    ck_assert_mem_eq(buf + GPUQ_PREFIX_SIZE, hdr, hlen);
    free(buf);
    free(hdr);
}
END_TEST

/* ---- replies ---- */

START_TEST(test_reply_ok)
{
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *info, *buf;
    size_t info_len, len;
    gpuq_mpw_map(w, 2);
    gpuq_mpw_str(w, "version");
    gpuq_mpw_uint(w, 1);
    gpuq_mpw_str(w, "devices");
    gpuq_mpw_array(w, 1);
    gpuq_mpw_map(w, 1);
    gpuq_mpw_str(w, "name");
    gpuq_mpw_str(w, "H100");
    ck_assert_int_eq(gpuq_mpw_take(w, &info, &info_len), 0);
    gpuq_mpw_free(w);

    gpuq_reply rep, d;
    memset(&rep, 0, sizeof(rep));
    rep.id = 9;
    rep.dtype = GPUQ_DT_F32;
    rep.ndim = 2;
    rep.shape[0] = 3;
    rep.shape[1] = 4;
    rep.has_timing = true;
    rep.timing = (gpuq_timing){1.5, 2, 3.25, 4, 10.75};
    rep.info = info;
    rep.info_len = info_len;
    ck_assert_int_eq(gpuq_reply_encode(&rep, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof(msg)), 0);
    ck_assert_uint_eq(d.id, 9);
    ck_assert_int_eq(d.status, 0);
    ck_assert_int_eq(d.dtype, GPUQ_DT_F32);
    ck_assert_uint_eq(d.ndim, 2);
    ck_assert_uint_eq(d.shape[0], 3);
    ck_assert_uint_eq(d.shape[1], 4);
    ck_assert(d.has_timing);
    ck_assert(d.timing.queue_us == 1.5 && d.timing.h2d_us == 2 && d.timing.kernel_us == 3.25 &&
              d.timing.d2h_us == 4 && d.timing.total_us == 10.75);
    ck_assert_uint_eq(d.info_len, info_len);
    ck_assert_mem_eq(d.info, info, info_len);
    ck_assert(d.info >= buf && d.info + d.info_len <= buf + len);

    char json[128];
    gpuq_mpr r;
    gpuq_mpr_init(&r, d.info, d.info_len);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, json, sizeof(json)), 0);
    ck_assert_str_eq(json, "{\"version\":1,\"devices\":[{\"name\":\"H100\"}]}");

    /* truncated replies never decode */
    for (size_t k = 0; k < len; k++) {
        uint8_t *part = malloc(k ? k : 1);
        memcpy(part, buf, k);
        ck_assert_int_ne(gpuq_reply_decode(part, k, &d, msg, sizeof(msg)), 0);
        free(part);
    }
    free(buf);
    free(info);

    /* plain ok reply: no dtype, shape, timing, info */
    memset(&rep, 0, sizeof(rep));
    rep.id = 1;
    ck_assert_int_eq(gpuq_reply_encode(&rep, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof(msg)), 0);
    ck_assert_int_eq(d.status, 0);
    ck_assert_uint_eq(d.ndim, 0);
    ck_assert(!d.has_timing);
    ck_assert_ptr_null(d.info);
    free(buf);
}
END_TEST

START_TEST(test_reply_error)
{
    gpuq_reply rep, d;
    uint8_t *buf;
    size_t len;
    memset(&rep, 0, sizeof(rep));
    rep.id = 77;
    rep.status = GPUQ_E_ZERO_NORM;
    strcpy(rep.message, "row 3 sums to zero");
    ck_assert_int_eq(gpuq_reply_encode(&rep, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof(msg)), 0);
    ck_assert_uint_eq(d.id, 77);
    ck_assert_int_eq(d.status, GPUQ_E_ZERO_NORM);
    ck_assert_str_eq(d.message, "row 3 sums to zero");
    free(buf);

    /* the message defaults to strerror */
    rep.message[0] = '\0';
    rep.status = GPUQ_E_BUSY;
    ck_assert_int_eq(gpuq_reply_encode(&rep, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof(msg)), 0);
    ck_assert_int_eq(d.status, GPUQ_E_BUSY);
    ck_assert_str_eq(d.message, gpuq_strerror(GPUQ_E_BUSY));
    free(buf);
}
END_TEST

START_TEST(test_reply_forward_compat)
{
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *buf;
    size_t len;
    gpuq_reply d;
    /* unknown keys (nested too) are skipped; error name used when no code */
    gpuq_mpw_map(w, 5);
    KU(w, "id", 3);
    gpuq_mpw_str(w, "future");
    gpuq_mpw_map(w, 1);
    gpuq_mpw_str(w, "x");
    gpuq_mpw_array(w, 2);
    gpuq_mpw_nil(w);
    gpuq_mpw_double(w, 1);
    KS(w, "status", "error");
    KS(w, "error", "no_hello");
    KS(w, "message", "say hello first");
    ck_assert_int_eq(gpuq_mpw_take(w, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof(msg)), 0);
    ck_assert_int_eq(d.status, GPUQ_E_NO_HELLO);
    ck_assert_uint_eq(d.id, 3);
    free(buf);
    /* missing status */
    gpuq_mpw_map(w, 1);
    KU(w, "id", 3);
    ck_assert_int_eq(gpuq_mpw_take(w, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof(msg)), GPUQ_E_BAD_HEADER);
    free(buf);
    /* bad status value */
    gpuq_mpw_map(w, 2);
    KU(w, "id", 3);
    KS(w, "status", "maybe");
    ck_assert_int_eq(gpuq_mpw_take(w, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof(msg)), GPUQ_E_BAD_HEADER);
    free(buf);
    gpuq_mpw_free(w);
}
END_TEST

/* ---- UTF-8: refused in requests, cut on a boundary in messages ---- */

/* A msgpack str of n raw bytes (n < 256; the writer would escape bad ones). */
static void raw_str(gpuq_mpw *w, const char *s, size_t n)
{
    uint8_t h[2] = {0xd9, (uint8_t)n};
    ck_assert_uint_lt(n, 256);
    if (n < 32) {
        h[0] = (uint8_t)(0xa0u | n);
        gpuq_mpw_raw(w, h, 1);
    } else {
        gpuq_mpw_raw(w, h, 2);
    }
    gpuq_mpw_raw(w, s, n);
}

/* Decode {"id": 7, "op": op, key: val} (no third entry when key is NULL), all
 * strings raw; msg gets the message, at most msgcap bytes. */
static int decode_raw(const char *op, const char *key, size_t klen, const char *val, size_t vlen,
                      gpuq_request *q, size_t msgcap)
{
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *b;
    size_t len;
    gpuq_mpw_map(w, key ? 3 : 2);
    KU(w, "id", 7);
    gpuq_mpw_str(w, "op");
    raw_str(w, op, strlen(op));
    if (key) {
        raw_str(w, key, klen);
        raw_str(w, val, vlen);
    }
    ck_assert_int_eq(gpuq_mpw_take(w, &b, &len), 0);
    gpuq_mpw_free(w);
    memset(msg, 0x55, sizeof msg);
    msg[0] = '\0';
    int rc = gpuq_request_decode(b, len, q, msg, msgcap);
    free(b);
    return rc;
}

/* An error reply carrying msg: its header holds only UTF-8 strings (by
 * msgpack-c and iconv, not gpuq's reader) and decodes to the same message. */
static void assert_reply_carries(const char *m)
{
    gpuq_reply rep, d;
    uint8_t *buf;
    size_t len;
    memset(&rep, 0, sizeof rep);
    rep.id = 7;
    rep.status = GPUQ_E_BAD_HEADER;
    snprintf(rep.message, sizeof rep.message, "%s", m);
    ck_assert_int_eq(gpuq_reply_encode(&rep, &buf, &len), 0);
    ck_assert_int_ge(tu_msgpack_strings_utf8(buf, len), 5);
    char dm[128];
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, dm, sizeof dm), 0);
    ck_assert_str_eq(d.message, m);
    free(buf);
}

struct utf8_bad {
    const char *name, *op, *key, *val;
    const char *want; /* the exact message */
};

static const struct utf8_bad utf8_bads[] = {
    {"op latin-1", "p\xefng", NULL, NULL, "\"op\" is not valid UTF-8"},
    {"op overlong /", "\xc0\xaf", NULL, NULL, "\"op\" is not valid UTF-8"},
    {"op surrogate", "ping\xed\xa0\x80", NULL, NULL, "\"op\" is not valid UTF-8"},
    {"op half character", "ping\xc3", NULL, NULL, "\"op\" is not valid UTF-8"},
    {"client latin-1", "hello", "client", "caf\xe9", "\"client\" is not valid UTF-8"},
    {"client surrogate", "hello", "client", "a\xed\xb0\x80", "\"client\" is not valid UTF-8"},
    {"client overlong NUL", "hello", "client", "a\xc0\x80", "\"client\" is not valid UTF-8"},
    {"client above U+10FFFF", "hello", "client", "\xf4\x90\x80\x80",
     "\"client\" is not valid UTF-8"},
    {"client FF", "hello", "client", "\xff", "\"client\" is not valid UTF-8"},
    {"dtype", "normalize", "dtype", "f6\xb4", "\"dtype\" is not valid UTF-8"},
    {"method", "normalize", "method", "\xe9l2", "\"method\" is not valid UTF-8"},
    {"metric", "pairwise", "metric", "cos\xed\xa0\x80", "\"metric\" is not valid UTF-8"},
    {"on_zero", "pairwise", "on_zero", "zero\xc0\xb0", "\"on_zero\" is not valid UTF-8"},
    {"priority", "hello", "priority", "h\xefgh", "\"priority\" is not valid UTF-8"},
    {"limit", "set_limit", "limit", "max_\xff", "\"limit\" is not valid UTF-8"},
    {"unknown key latin-1", "ping", "bo\xefgus", "x", "header key 2 is not a valid UTF-8 string"},
    {"unknown key overlong", "ping", "\xc1\xbf", "x", "header key 2 is not a valid UTF-8 string"},
    {"key cut in half", "ping", "id\xc3", "x", "header key 2 is not a valid UTF-8 string"},
};
#define NUTF8_BADS ((int)(sizeof(utf8_bads) / sizeof(utf8_bads[0])))

START_TEST(test_utf8_refused)
{
    const struct utf8_bad *c = &utf8_bads[_i];
    gpuq_request q;
    int rc = decode_raw(c->op, c->key, c->key ? strlen(c->key) : 0, c->val,
                        c->val ? strlen(c->val) : 0, &q, sizeof msg);
    ck_assert_msg(rc == GPUQ_E_BAD_HEADER, "%s: %s (%s)", c->name, gpuq_errname(rc), msg);
    ck_assert_str_eq(msg, c->want);
    ck_assert_uint_eq(q.id, 7); /* the error reply names the request */
    ck_assert_str_eq(q.client, "");
    assert_reply_carries(msg);
}
END_TEST

/* A bad key before "id": refused all the same (the reply has id 0). */
START_TEST(test_utf8_key_first)
{
    static const uint8_t h[] = {0x82, 0xa2, 0xff, 'd', 0x07, 0xa2, 'o',
                                'p',  0xa4, 'p',  'i', 'n',  'g'};
    gpuq_request q;
    ck_assert_int_eq(gpuq_request_decode(h, sizeof h, &q, msg, sizeof msg), GPUQ_E_BAD_HEADER);
    ck_assert_str_eq(msg, "header key 0 is not a valid UTF-8 string");
    ck_assert_uint_eq(q.id, 0);
    /* valid UTF-8 that is no known key is still "unknown key" */
    ck_assert_int_eq(decode_raw("ping", "\xc3\xa9t\xc3\xa9", 6, "x", 1, &q, sizeof msg),
                     GPUQ_E_BAD_HEADER);
    ck_assert_str_eq(msg, "unknown key \"\xc3\xa9t\xc3\xa9\"");
    /* and a hello with a UTF-8 client name is fine */
    ck_assert_int_eq(
        decode_raw("hello", "client", 6, "caf\xc3\xa9 \xf0\x9d\x84\x9e", 10, &q, sizeof msg), 0);
    ck_assert_str_eq(q.client, "caf\xc3\xa9 \xf0\x9d\x84\x9e");
}
END_TEST

/* The largest character boundary <= max in a valid string. */
static size_t ref_boundary(const char *s, size_t len, size_t max)
{
    size_t j = len < max ? len : max;
    while (j > 0 && j < len && ((uint8_t)s[j] & 0xc0) == 0x80)
        j--;
    return j;
}

/* Echoes of 64 bytes: a long value made of 2-, 3- and 4-byte characters
 * behind 0..3 ASCII bytes, so the 64th byte falls on every position inside
 * a character. The message shows the longest prefix <= 64 bytes that ends on
 * a character boundary, for every key whose value is echoed. */
START_TEST(test_utf8_echo_cut)
{
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9d\x84\x9e"};
    static const struct {
        const char *op, *key, *fmt;
        int code;
    } sites[] = {
        {NULL, NULL, "unknown op \"%.*s\"", GPUQ_E_UNKNOWN_OP},
        {"normalize", "dtype", "dtype \"%.*s\" is not f32 or f64", GPUQ_E_BAD_DTYPE},
        {"normalize", "method", "method \"%.*s\" is not sum, l1, l2, minmax or zscore",
         GPUQ_E_BAD_ARGUMENT},
        {"pairwise", "on_zero", "on_zero \"%.*s\" is not error, zero or nan", GPUQ_E_BAD_ARGUMENT},
        {"pairwise", "metric",
         "metric \"%.*s\" is not euclidean, sqeuclidean, cosine, manhattan, chebyshev or minkowski",
         GPUQ_E_BAD_ARGUMENT},
        {"hello", "priority", "priority \"%.*s\" is not low, normal or high", GPUQ_E_BAD_ARGUMENT},
        {"set_limit", "limit", "limit name \"%.*s\" is not a limit", GPUQ_E_BAD_ARGUMENT},
        {"ping", NULL, "unknown key \"%.*s\"", GPUQ_E_BAD_HEADER},
    };
    for (size_t site = 0; site < sizeof sites / sizeof sites[0]; site++) {
        for (int c = 0; c < 3; c++) {
            for (int lead = 0; lead < 4; lead++) {
                char v[128];
                size_t len = 0;
                for (int k = 0; k < lead; k++)
                    v[len++] = 'x';
                while (len + strlen(chars[c]) <= 70 + (size_t)lead) {
                    memcpy(v + len, chars[c], strlen(chars[c]));
                    len += strlen(chars[c]);
                }
                v[len] = '\0';
                gpuq_request q;
                int rc;
                if (!sites[site].op)
                    rc = decode_raw(v, NULL, 0, NULL, 0, &q, sizeof msg);
                else if (!sites[site].key)
                    rc = decode_raw(sites[site].op, v, len, "x", 1, &q, sizeof msg);
                else
                    rc = decode_raw(sites[site].op, sites[site].key, strlen(sites[site].key), v,
                                    len, &q, sizeof msg);
                ck_assert_int_eq(rc, sites[site].code);
                size_t cut = ref_boundary(v, len, 64);
                ck_assert_uint_gt(cut, 60); /* as long as possible */
                char want[256];
                snprintf(want, sizeof want, sites[site].fmt, (int)cut, v);
                ck_assert_msg(strcmp(msg, want) == 0, "site %zu char %d lead %d:\n%s\n%s", site, c,
                              lead, msg, want);
                ck_assert(tu_utf8_valid(msg, strlen(msg)));
                assert_reply_carries(msg);
            }
        }
    }
    /* the 70 bytes of 'é' of the issue: 32 of them shown */
    char op[71];
    for (int k = 0; k < 35; k++)
        memcpy(op + 2 * k, "\xc3\xa9", 2);
    op[70] = '\0';
    gpuq_request q;
    ck_assert_int_eq(decode_raw(op, NULL, 0, NULL, 0, &q, sizeof msg), GPUQ_E_UNKNOWN_OP);
    ck_assert_uint_eq(strlen(msg), strlen("unknown op \"\"") + 64);
}
END_TEST

/* A message buffer too small for the message: cut on a character boundary
 * too (the decoder's own formatting), at every size. */
START_TEST(test_utf8_small_msg_buffer)
{
    const char *op = "x\xe2\x82\xac\xe2\x82\xac\xf0\x9d\x84\x9e\xc3\xa9\xe2\x82\xac\xc3\xa9";
    char full[128];
    snprintf(full, sizeof full, "unknown op \"%s\"", op);
    gpuq_request q;
    for (size_t cap = 1; cap <= strlen(full) + 1; cap++) {
        ck_assert_int_eq(decode_raw(op, NULL, 0, NULL, 0, &q, cap), GPUQ_E_UNKNOWN_OP);
        size_t n = strlen(msg);
        ck_assert_uint_eq(n, ref_boundary(full, strlen(full), cap - 1));
        ck_assert_int_eq(memcmp(msg, full, n), 0);
    }
}
END_TEST

/* gpuq_reply_encode puts a valid UTF-8 message on the wire whatever
 * rep->message holds, and keeps as much of it as fits in 255 bytes. */
START_TEST(test_utf8_reply_encode)
{
    static struct {
        char in[256];
        size_t in_len; /* bytes of in to use (256: no NUL at all) */
        char want[256];
    } cases[6];
    size_t k;
    memset(cases, 0, sizeof cases);
    /* 0: 'x' + 127 x 'é' = 255 bytes, valid: unchanged */
    cases[0].in[0] = 'x';
    for (k = 0; k < 127; k++)
        memcpy(cases[0].in + 1 + 2 * k, "\xc3\xa9", 2);
    memcpy(cases[0].want, cases[0].in, 256);
    /* 1: 127 x 'é' + half of one: the half is dropped */
    for (k = 0; k < 127; k++)
        memcpy(cases[1].in + 2 * k, "\xc3\xa9", 2);
    memcpy(cases[1].want, cases[1].in, 254);
    cases[1].in[254] = (char)0xc3;
    /* 2: raw client bytes in the middle are shown escaped */
    strcpy(cases[2].in, "unknown op \"\xff\xfe\xed\xa0\x80\"");
    strcpy(cases[2].want, "unknown op \"\\xFF\\xFE\\xED\\xA0\\x80\"");
    /* 3: 255 bad bytes: 63 escapes fit in 255 bytes */
    memset(cases[3].in, 0xff, 255);
    for (k = 0; k < 63; k++)
        memcpy(cases[3].want + 4 * k, "\\xFF", 4);
    /* 4: an escape that reaches the cap stops whole */
    memset(cases[4].in, 'a', 250);
    strcpy(cases[4].in + 250, "\377bcd");
    memset(cases[4].want, 'a', 250);
    strcpy(cases[4].want + 250, "\\xFFb");
    /* 5: no NUL in the 256 bytes: 128 x 'é', read up to 255 bytes */
    for (k = 0; k < 128; k++)
        memcpy(cases[5].in + 2 * k, "\xc3\xa9", 2);
    memcpy(cases[5].want, cases[5].in, 254);
    for (int i = 0; i < 6; i++) {
        gpuq_reply rep, d;
        uint8_t *buf;
        size_t len;
        memset(&rep, 0, sizeof rep);
        rep.id = 9;
        rep.status = GPUQ_E_UNKNOWN_OP;
        memcpy(rep.message, cases[i].in, sizeof rep.message);
        for (int framed = 0; framed < 2; framed++) {
            size_t off = framed ? GPUQ_PREFIX_SIZE : 0;
            if (framed)
                ck_assert_int_eq(gpuq_reply_frame(&rep, 0, &buf, &len), 0);
            else
                ck_assert_int_eq(gpuq_reply_encode(&rep, &buf, &len), 0);
            ck_assert_msg(tu_msgpack_strings_utf8(buf + off, len - off) >= 8, "case %d", i);
            ck_assert_int_eq(gpuq_reply_decode(buf + off, len - off, &d, msg, sizeof msg), 0);
            ck_assert_msg(strcmp(d.message, cases[i].want) == 0, "case %d: %s", i, d.message);
            ck_assert_uint_le(strlen(d.message), 255);
            free(buf);
        }
    }
}
END_TEST

/* libgpuq's side: a message longer than its 255-byte buffer is cut on a
 * boundary, and a reply with a string that is not UTF-8 is malformed. */
START_TEST(test_utf8_reply_decode)
{
    char m[257];
    for (int k = 0; k < 128; k++)
        memcpy(m + 2 * k, "\xc3\xa9", 2);
    m[256] = '\0';
    gpuq_mpw *w = gpuq_mpw_new();
    uint8_t *buf;
    size_t len;
    gpuq_reply d;
    gpuq_mpw_map(w, 3);
    KU(w, "id", 1);
    KS(w, "status", "error");
    KS(w, "message", m);
    ck_assert_int_eq(gpuq_mpw_take(w, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof msg), 0);
    ck_assert_uint_eq(strlen(d.message), 254);
    ck_assert_int_eq(memcmp(d.message, m, 254), 0);
    free(buf);
    gpuq_mpw_map(w, 3);
    KU(w, "id", 1);
    KS(w, "status", "error");
    gpuq_mpw_str(w, "message");
    raw_str(w, "caf\xe9", 4);
    ck_assert_int_eq(gpuq_mpw_take(w, &buf, &len), 0);
    ck_assert_int_eq(gpuq_reply_decode(buf, len, &d, msg, sizeof msg), GPUQ_E_BAD_HEADER);
    free(buf);
    gpuq_mpw_free(w);
}
END_TEST

/* max_payload at the byte: a payload of exactly the limit is allowed, one
 * byte over is too_large; the declared payload_len (step 1, any op) and the
 * bytes the header implies (step 3) each on their own. Limits not a power
 * of two or a multiple of 8, so the boundary is where the code puts it. */
START_TEST(test_check_max_payload_boundary)
{
    gpuq_request q;
    gpuq_sizes sz;
    gpuq_limits lim;
    gpuq_limits_default(&lim);

    /* step 1, on its own: a ping takes no payload, so any payload_len up
     * to the limit is size_mismatch and only one past it too_large */
    base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    lim.max_payload = 1001;
    ck_assert_int_eq(check_with(&q, 1000, &lim, &sz), GPUQ_E_SIZE_MISMATCH); /* limit - 1 */
    ck_assert_int_eq(check_with(&q, 1001, &lim, &sz), GPUQ_E_SIZE_MISMATCH); /* limit */
    ck_assert_int_eq(check_with(&q, 1002, &lim, &sz), GPUQ_E_TOO_LARGE);     /* limit + 1 */
    ck_assert_ptr_nonnull(strstr(msg, "payload of 1002 bytes is over max_payload 1001"));
    ck_assert_int_eq(check_with(&q, UINT64_MAX, &lim, &sz), GPUQ_E_TOO_LARGE);
    lim.max_payload = UINT64_MAX; /* nothing is over the largest limit */
    ck_assert_int_eq(check_with(&q, UINT64_MAX, &lim, &sz), GPUQ_E_SIZE_MISMATCH);

    /* a normalize whose payload is exactly the limit runs; a byte less
     * declared is size_mismatch, a byte more too_large */
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    q.ndim_a = 1;
    q.shape_a[0] = 100; /* 800 bytes */
    lim.max_payload = 800;
    ck_assert_int_eq(check_with(&q, 800, &lim, &sz), 0);
    ck_assert_uint_eq(sz.payload, 800);
    ck_assert_int_eq(check_with(&q, 799, &lim, &sz), GPUQ_E_SIZE_MISMATCH);
    ck_assert_int_eq(check_with(&q, 801, &lim, &sz), GPUQ_E_TOO_LARGE);
    lim.max_payload = 801; /* limit - 1 */
    ck_assert_int_eq(check_with(&q, 800, &lim, &sz), 0);

    /* step 3, on its own: the declared payload is within the limit, the
     * header implies 800 bytes: allowed at a limit of 800 (then the
     * declared size is wrong: size_mismatch), too_large at 799 */
    lim.max_payload = 800;
    ck_assert_int_eq(check_with(&q, 792, &lim, &sz), GPUQ_E_SIZE_MISMATCH);
    ck_assert_int_eq(check_with(&q, 0, &lim, &sz), GPUQ_E_SIZE_MISMATCH);
    lim.max_payload = 799;
    ck_assert_int_eq(check_with(&q, 792, &lim, &sz), GPUQ_E_TOO_LARGE);
    ck_assert_ptr_nonnull(strstr(msg, "input needs 800 bytes, over max_payload 799"));
    ck_assert_int_eq(check_with(&q, 0, &lim, &sz), GPUQ_E_TOO_LARGE);
    lim.max_payload = 801;
    ck_assert_int_eq(check_with(&q, 792, &lim, &sz), GPUQ_E_SIZE_MISMATCH);

    /* two arrays: A and B together are the payload (pairwise f32, 2x3 and
     * 4x3: 72 bytes) */
    base(&q, GPUQ_OP_PAIRWISE, GPUQ_DT_F32);
    rq_set_metric(&q, GPUQ_METRIC_EUCLIDEAN);
    shape2(q.shape_a, &q.ndim_a, 2, 3);
    shape2(q.shape_b, &q.ndim_b, 4, 3);
    lim.max_payload = 72;
    ck_assert_int_eq(check_with(&q, 72, &lim, &sz), 0);
    lim.max_payload = 71;
    ck_assert_int_eq(check_with(&q, 68, &lim, &sz), GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(check_with(&q, 72, &lim, &sz), GPUQ_E_TOO_LARGE);
}
END_TEST

START_TEST(test_reply_two_outputs)
{
    gpuq_reply rep, back;
    memset(&rep, 0, sizeof rep);
    rep.id = 5;
    rep.dtype = GPUQ_DT_F32;
    rep.ndim = 2;
    rep.shape[0] = 3;
    rep.shape[1] = 4;
    rep.dtype_b = GPUQ_DT_I64;
    rep.ndim_b = 2;
    rep.shape_b[0] = 3;
    rep.shape_b[1] = 4;
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_reply_encode(&rep, &h, &hl), 0);
    ck_assert_int_eq(gpuq_reply_decode(h, hl, &back, msg, sizeof msg), 0);
    free(h);
    ck_assert_int_eq(back.dtype, GPUQ_DT_F32);
    ck_assert_int_eq(back.dtype_b, GPUQ_DT_I64);
    ck_assert_uint_eq(back.ndim_b, 2);
    ck_assert_uint_eq(back.shape_b[0], 3);
    ck_assert_uint_eq(back.shape_b[1], 4);
    ck_assert_uint_eq(gpuq_dtype_size(GPUQ_DT_I64), 8);
    ck_assert_str_eq(gpuq_dtype_name(GPUQ_DT_I64), "i64");
    /* one output: no dtype_b */
    rep.ndim_b = 0;
    ck_assert_int_eq(gpuq_reply_encode(&rep, &h, &hl), 0);
    ck_assert_ptr_null(memmem(h, hl, "dtype_b", 7));
    free(h);
}
END_TEST

static Suite *header_suite(void)
{
    Suite *s = suite_create("header");
    TCase *tc = tcase_create("roundtrip");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_str_eq);
    tcase_add_test(tc, test_rt_hello);
    tcase_add_test(tc, test_admin_ops);
    tcase_add_test(tc, test_worked_example);
    tcase_add_test(tc, test_rt_ping_status);
    tcase_add_test(tc, test_rt_normalize);
    tcase_add_test(tc, test_rt_haversine);
    tcase_add_test(tc, test_rt_grid);
    tcase_add_test(tc, test_rt_pairwise);
    tcase_add_test(tc, test_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("check");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_check_normalize);
    tcase_add_test(tc, test_reply_two_outputs);
    tcase_add_test(tc, test_check_haversine);
    tcase_add_test(tc, test_check_grid);
    tcase_add_test(tc, test_check_pairwise);
    tcase_add_test(tc, test_check_overflow_limits);
    tcase_add_test(tc, test_check_max_payload_boundary);
    suite_add_tcase(s, tc);
    tc = tcase_create("decode");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_decode_strict);
    tcase_add_loop_test(tc, test_decode_truncated, 0, 4);
    tcase_add_loop_test(tc, test_decode_id_last, 0, NID_CASES);
    tcase_add_loop_test(tc, test_decode_priority_int, -10, 11);
    tcase_add_test(tc, test_decode_priority_str);
    tcase_add_test(tc, test_decode_on_zero);
    tcase_add_test(tc, test_metric_aliases);
    tcase_add_test(tc, test_priority_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("reply");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_reply_ok);
    tcase_add_test(tc, test_reply_error);
    tcase_add_test(tc, test_reply_forward_compat);
    suite_add_tcase(s, tc);
    tc = tcase_create("utf8");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_utf8_refused, 0, NUTF8_BADS);
    tcase_add_test(tc, test_utf8_key_first);
    tcase_add_test(tc, test_utf8_echo_cut);
    tcase_add_test(tc, test_utf8_small_msg_buffer);
    tcase_add_test(tc, test_utf8_reply_encode);
    tcase_add_test(tc, test_utf8_reply_decode);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(header_suite());
}
