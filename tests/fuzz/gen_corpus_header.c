/* SPDX-License-Identifier: Apache-2.0 */
/* gen_corpus_header.c - writes corpus_header/, fuzz_header's seed corpus
 * (corpus_writer.h says how to run it).
 *
 * Valid inputs come from proto's own encoders (gpuq_request_encode,
 * gpuq_reply_frame, gpuq_prefix_encode, the msgpack writer), so they move
 * with the protocol: a request frame of every op (each normalize method,
 * each pairwise metric, each limit set_limit names, hello and grid with
 * and without their optional keys), replies ok, with an array result,
 * timing and info, and errors, plus other msgpack encodings of the same
 * keys the decoder must take (string priority, float32 and int numbers,
 * map16). Hostile inputs are those the unit tests build (test_header.c,
 * test_frame.c, test_mpread.c): every key with a wrong type or value,
 * unknown, duplicate and missing keys, strings that are not UTF-8, caps and
 * 5-byte length bombs, every rule of gpuq_request_check broken once,
 * overflowing shapes, broken prefixes. A frame's payload_len is the one its
 * header implies, and the payload itself is left out (the target reads
 * only prefix and header).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_writer.h"
#include "errors.h"
#include "frame.h"
#include "gpuq_limits.h"
#include "header.h"
#include "../req_args.h"
#include "mpwrite.h"

static corpus *C;

static void put_frame(const char *name, uint8_t kind, const uint8_t *h, size_t hlen,
                      uint64_t payload_len)
{
    uint8_t *b = malloc(GPUQ_PREFIX_SIZE + hlen);
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = kind,
                     .flags = 0,
                     .header_len = (uint32_t)hlen,
                     .payload_len = payload_len};
    if (!b)
        abort();
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, h, hlen);
    corpus_add(C, name, b, GPUQ_PREFIX_SIZE + hlen);
    free(b);
}

/* The payload length a request's header implies (0 when the check fails
 * for another reason than the length). */
static uint64_t implied(const uint8_t *h, size_t hlen)
{
    gpuq_request q;
    gpuq_limits lim;
    gpuq_sizes sz;
    char msg[256];
    gpuq_limits_default(&lim);
    if (gpuq_request_decode(h, hlen, &q, msg, sizeof msg) != 0)
        return 0;
    int rc = gpuq_request_check(&q, 0, &lim, &sz, msg, sizeof msg);
    return rc == GPUQ_E_SIZE_MISMATCH ? sz.payload : 0;
}

/* A request frame of q as gpuq_request_encode writes it. */
static void req(const char *name, const gpuq_request *q)
{
    uint8_t *h;
    size_t hlen;
    if (gpuq_request_encode(q, &h, &hlen) != 0)
        abort();
    put_frame(name, GPUQ_KIND_REQUEST, h, hlen, implied(h, hlen));
    free(h);
}

/* The same header without a prefix. */
static void bare(const char *name, const gpuq_request *q)
{
    uint8_t *h;
    size_t hlen;
    if (gpuq_request_encode(q, &h, &hlen) != 0)
        abort();
    corpus_add(C, name, h, hlen);
    free(h);
}

static void base(gpuq_request *q, gpuq_op op, gpuq_dtype dt)
{
    gpuq_request_init(q);
    q->id = 42;
    q->op = op;
    q->dtype = dt;
}

static void shape(uint64_t *s, uint32_t *nd, uint32_t n, uint64_t a, uint64_t b)
{
    s[0] = a;
    s[1] = b;
    *nd = n;
}

/* ---- requests: every op through the encoder ---- */

static void gen_requests(void)
{
    gpuq_request q;
    char name[64];

    base(&q, GPUQ_OP_HELLO, GPUQ_DT_NONE);
    req("req-hello-min", &q);
    snprintf(q.client, sizeof q.client, "gen-corpus");
    q.priority = GPUQ_PRIO_LOW;
    q.device = 0;
    q.timing = true;
    req("req-hello", &q);
    q.priority = GPUQ_PRIO_HIGH;
    q.device = -1;
    snprintf(q.client, sizeof q.client, "caf\xc3\xa9 \xf0\x9d\x84\x9e");
    req("req-hello-utf8-high", &q);

    static const gpuq_op plain[] = {GPUQ_OP_PING,    GPUQ_OP_STATUS, GPUQ_OP_SESSIONS,
                                    GPUQ_OP_METRICS, GPUQ_OP_DRAIN,  GPUQ_OP_SHUTDOWN};
    for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++) {
        base(&q, plain[k], GPUQ_DT_NONE);
        snprintf(name, sizeof name, "req-%s", gpuq_op_name(plain[k]));
        req(name, &q);
    }
    base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    q.timing = true;
    q.id = UINT64_MAX;
    req("req-ping-timing", &q);

    for (int m = 0; m < GPUQ_NORM_COUNT; m++) {
        base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
        shape(q.shape_a, &q.ndim_a, 2, 3, 4);
        rq_set_method(&q, (gpuq_norm_method)m);
        snprintf(name, sizeof name, "req-normalize-%s", gpuq_norm_method_name(rq_method(&q)));
        req(name, &q);
    }
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    shape(q.shape_a, &q.ndim_a, 2, 2, 5);
    rq_set_method(&q, GPUQ_NORM_ZSCORE);
    rq_set_flat(&q, true);
    rq_set_zero_ok(&q, true);
    q.timing = true;
    req("req-normalize-flat-zero-f32", &q);
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    shape(q.shape_a, &q.ndim_a, 1, 7, 0);
    rq_set_method(&q, GPUQ_NORM_L2);
    req("req-normalize-rank1", &q);
    bare("bare-normalize", &q);

    base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F64);
    shape(q.shape_a, &q.ndim_a, 2, 10, 2);
    rq_set_has_to(&q, true);
    rq_set_to_lat(&q, -12.5);
    rq_set_to_lon(&q, 179.25);
    rq_set_radius(&q, 3958.8);
    req("req-haversine-to", &q);
    base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F32);
    shape(q.shape_a, &q.ndim_a, 2, 4, 2);
    shape(q.shape_b, &q.ndim_b, 2, 4, 2);
    req("req-haversine-shape-b", &q);

    base(&q, GPUQ_OP_GRID, GPUQ_DT_NONE);
    req("req-grid-default", &q);
    bare("bare-grid", &q);
    base(&q, GPUQ_OP_GRID, GPUQ_DT_F32);
    rq_set_lat_start(&q, -10);
    rq_set_lat_stop(&q, 10.5);
    rq_set_lat_n(&q, 3);
    rq_set_lon_start(&q, 100);
    rq_set_lon_stop(&q, -100);
    rq_set_lon_n(&q, 1);
    rq_set_to_lat(&q, 89.5);
    rq_set_to_lon(&q, -720);
    rq_set_radius(&q, 1);
    req("req-grid-f32", &q);

    for (int m = 0; m < GPUQ_METRIC_COUNT; m++) {
        base(&q, GPUQ_OP_PAIRWISE, m % 2 ? GPUQ_DT_F32 : GPUQ_DT_F64);
        shape(q.shape_a, &q.ndim_a, 2, 3, 4);
        shape(q.shape_b, &q.ndim_b, 2, 5, 4);
        rq_set_metric(&q, (gpuq_metric)m);
        rq_set_zero_ok(&q, rq_metric(&q) == GPUQ_METRIC_COSINE);
        snprintf(name, sizeof name, "req-pairwise-%s", gpuq_metric_name(rq_metric(&q)));
        req(name, &q);
    }
    /* knn: two outputs (distances, int64 indices); odd m*k, k = n */
    base(&q, GPUQ_OP_KNN, GPUQ_DT_F32);
    shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    shape(q.shape_b, &q.ndim_b, 2, 5, 4);
    gpuq_request_set_enum(&q, "metric", "cosine");
    gpuq_request_set_uint(&q, "k", 5);
    gpuq_request_set_enum(&q, "on_zero", "zero");
    req("req-knn-cosine", &q);
    base(&q, GPUQ_OP_KNN, GPUQ_DT_F64);
    shape(q.shape_a, &q.ndim_a, 2, 2, 3);
    shape(q.shape_b, &q.ndim_b, 2, 7, 3);
    gpuq_request_set_enum(&q, "metric", "euclidean");
    gpuq_request_set_uint(&q, "k", 1);
    req("req-knn-euclidean", &q);

    base(&q, GPUQ_OP_KILL_SESSION, GPUQ_DT_NONE);
    q.has_session = true;
    q.session = 1234567890123ull;
    req("req-kill-session", &q);
    static const struct {
        const char *name;
        uint64_t value;
    } limits[] = {{"max_header", 4096},   {"max_payload", 1ull << 20},   {"max_inflight", 1u << 20},
                  {"session_staging", 1}, {"total_staging", UINT64_MAX}, {"max_sessions", 1},
                  {"max_output", 12345}};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        base(&q, GPUQ_OP_SET_LIMIT, GPUQ_DT_NONE);
        snprintf(q.limit, sizeof q.limit, "%s", limits[k].name);
        q.has_value = true;
        q.value = limits[k].value;
        snprintf(name, sizeof name, "req-set-limit-%s", limits[k].name);
        for (char *p = name; *p; p++)
            if (*p == '_')
                *p = '-';
        req(name, &q);
    }
    base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    bare("bare-ping", &q);

    /* shared memory: arena ops, and compute requests naming arena bytes */
    base(&q, GPUQ_OP_ARENA_OPEN, GPUQ_DT_NONE);
    q.has_size = true;
    q.size = 1u << 20;
    req("req-arena-open", &q);
    base(&q, GPUQ_OP_ARENA_IMPORT, GPUQ_DT_NONE);
    req("req-arena-import", &q);
    base(&q, GPUQ_OP_ARENA_CLOSE, GPUQ_DT_NONE);
    q.has_arena = true;
    q.arena = 3;
    req("req-arena-close", &q);
    base(&q, GPUQ_OP_CANCEL, GPUQ_DT_NONE);
    q.has_request = true;
    q.request = 7;
    req("req-cancel", &q);
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    shape(q.shape_a, &q.ndim_a, 1, 4, 0);
    q.deadline_ms = 250;
    req("req-normalize-deadline", &q);
    base(&q, GPUQ_OP_KNN, GPUQ_DT_F32);
    shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    shape(q.shape_b, &q.ndim_b, 2, 5, 4);
    gpuq_request_set_enum(&q, "metric", "euclidean");
    gpuq_request_set_uint(&q, "k", 2);
    q.nin_ref = 2;
    q.in_ref[0] = (gpuq_ref){1, 0, 48};
    q.in_ref[1] = (gpuq_ref){1, 64, 80};
    q.nout_ref = 2;
    q.out_ref[0] = (gpuq_ref){1, 192, 24};
    q.out_ref[1] = (gpuq_ref){2, 0, 48};
    req("req-knn-shm", &q);
    base(&q, GPUQ_OP_GRID, GPUQ_DT_F64);
    q.nout_ref = 1;
    q.out_ref[0] = (gpuq_ref){7, 4096, 8000000};
    req("req-grid-shm-out", &q);
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    shape(q.shape_a, &q.ndim_a, 1, 4, 0);
    q.nin_ref = 1;
    q.in_ref[0] = (gpuq_ref){1, 8, 32};
    q.nout_ref = 1;
    q.out_ref[0] = (gpuq_ref){1, 24, 32}; /* overlaps in[0]: refused by the check */
    req("req-normalize-shm-overlap", &q);
}

/* ---- requests the checks refuse, through the encoder ---- */

static void gen_refused(void)
{
    gpuq_request q;

    base(&q, GPUQ_OP_HELLO, GPUQ_DT_NONE);
    q.version = 2;
    req("chk-hello-version-2", &q);
    base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    put_frame(
        "chk-ping-payload", GPUQ_KIND_REQUEST,
        (const uint8_t[]){0x82, 0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g'}, 13,
        8);
    base(&q, GPUQ_OP_SET_LIMIT, GPUQ_DT_NONE);
    snprintf(q.limit, sizeof q.limit, "max_inflight");
    q.has_value = true;
    q.value = 0;
    req("chk-set-limit-zero", &q);
    snprintf(q.limit, sizeof q.limit, "max_speed");
    q.value = 1;
    req("chk-set-limit-unknown", &q);

    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_NONE);
    shape(q.shape_a, &q.ndim_a, 1, 4, 0);
    req("chk-normalize-no-dtype", &q);
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    req("chk-normalize-no-shape", &q);
    shape(q.shape_a, &q.ndim_a, 2, 3, 0);
    req("chk-normalize-empty", &q);
    shape(q.shape_a, &q.ndim_a, 2, 3, 3);
    shape(q.shape_b, &q.ndim_b, 2, 3, 3);
    req("chk-normalize-shape-b", &q);
    base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    shape(q.shape_a, &q.ndim_a, 2, 1ull << 62, 8);
    req("chk-normalize-overflow", &q);
    rq_set_flat(&q, true);
    req("chk-normalize-flat-overflow", &q);
    rq_set_flat(&q, false);
    shape(q.shape_a, &q.ndim_a, 2, 1ull << 61, 2);
    req("chk-normalize-bytes-overflow", &q);
    shape(q.shape_a, &q.ndim_a, 2, UINT64_MAX, UINT64_MAX);
    req("chk-normalize-max-shape", &q);
    shape(q.shape_a, &q.ndim_a, 2, 1ull << 20, 1ull << 10);
    req("chk-normalize-over-max-payload", &q);

    base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F64);
    shape(q.shape_a, &q.ndim_a, 2, 5, 3);
    rq_set_has_to(&q, true);
    req("chk-haversine-three-columns", &q);
    shape(q.shape_a, &q.ndim_a, 2, 5, 2);
    shape(q.shape_b, &q.ndim_b, 2, 5, 2);
    req("chk-haversine-to-and-shape-b", &q);
    rq_set_has_to(&q, false);
    shape(q.shape_b, &q.ndim_b, 2, 6, 2);
    req("chk-haversine-shape-b-differs", &q);
    q.ndim_b = 0;
    req("chk-haversine-neither", &q);
    rq_set_has_to(&q, true);
    rq_set_to_lat(&q, 90.5);
    req("chk-haversine-to-lat", &q);
    rq_set_to_lat(&q, 0);
    rq_set_to_lon(&q, INFINITY);
    req("chk-haversine-to-lon-inf", &q);
    rq_set_to_lon(&q, 0);
    rq_set_radius(&q, 0);
    req("chk-haversine-radius-0", &q);
    rq_set_radius(&q, NAN);
    req("chk-haversine-radius-nan", &q);
    rq_set_radius(&q, 1);
    shape(q.shape_a, &q.ndim_a, 2, 1ull << 63, 2);
    req("chk-haversine-overflow", &q);
    shape(q.shape_a, &q.ndim_a, 2, 0, 2);
    req("chk-haversine-empty", &q);
    q.dtype = GPUQ_DT_NONE;
    shape(q.shape_a, &q.ndim_a, 2, 3, 2);
    req("chk-haversine-no-dtype", &q);

    base(&q, GPUQ_OP_GRID, GPUQ_DT_F64);
    rq_set_lat_stop(&q, 91);
    req("chk-grid-lat-stop", &q);
    rq_set_lat_stop(&q, 90);
    rq_set_lon_start(&q, -INFINITY);
    req("chk-grid-lon-inf", &q);
    rq_set_lon_start(&q, -180);
    rq_set_lat_n(&q, 0);
    req("chk-grid-empty", &q);
    rq_set_lat_n(&q, UINT64_MAX);
    rq_set_lon_n(&q, 2);
    req("chk-grid-overflow", &q);
    rq_set_lat_n(&q, 1ull << 20);
    rq_set_lon_n(&q, 1ull << 20);
    req("chk-grid-over-max-output", &q);
    rq_set_lat_n(&q, 4);
    rq_set_lon_n(&q, 4);
    rq_set_to_lat(&q, -91);
    req("chk-grid-to-lat", &q);
    rq_set_lat_n(&q, 1ull << 31); /* cells fit, bytes do not */
    rq_set_lon_n(&q, 1ull << 31);
    rq_set_to_lat(&q, 0);
    req("chk-grid-bytes-overflow", &q);

    base(&q, GPUQ_OP_PAIRWISE, GPUQ_DT_F64);
    shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    shape(q.shape_b, &q.ndim_b, 2, 5, 4);
    req("chk-pairwise-no-metric", &q);
    rq_set_metric(&q, GPUQ_METRIC_COSINE);
    q.dtype = GPUQ_DT_NONE;
    req("chk-pairwise-no-dtype", &q);
    q.dtype = GPUQ_DT_F32;
    q.ndim_a = 0;
    req("chk-pairwise-no-shape", &q);
    shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    rq_set_metric(&q, GPUQ_METRIC_EUCLIDEAN);
    shape(q.shape_b, &q.ndim_b, 2, 5, 3);
    req("chk-pairwise-d-differs", &q);
    shape(q.shape_b, &q.ndim_b, 1, 5, 0);
    req("chk-pairwise-shape-b-rank1", &q);
    shape(q.shape_a, &q.ndim_a, 2, 1ull << 40, 1);
    shape(q.shape_b, &q.ndim_b, 2, 1ull << 40, 1);
    req("chk-pairwise-overflow", &q);
    shape(q.shape_a, &q.ndim_a, 2, 0, 1);
    shape(q.shape_b, &q.ndim_b, 2, 1, 1);
    req("chk-pairwise-empty", &q);
}

/* ---- other encodings and hostile headers, through the msgpack writer ---- */

static gpuq_mpw *W;

#define KS(k, v) (gpuq_mpw_str(W, k), gpuq_mpw_str(W, v))
#define KU(k, v) (gpuq_mpw_str(W, k), gpuq_mpw_uint(W, v))
#define KI(k, v) (gpuq_mpw_str(W, k), gpuq_mpw_int(W, v))
#define KD(k, v) (gpuq_mpw_str(W, k), gpuq_mpw_double(W, v))

static void raw(const void *b, size_t n)
{
    gpuq_mpw_raw(W, b, n);
}
#define RAW(...) raw((const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__}))

/* A msgpack str of n raw bytes (n < 256), which the writer would escape. */
static void raw_str(const char *s, size_t n)
{
    if (n < 32) {
        RAW((uint8_t)(0xa0u | n));
    } else {
        RAW(0xd9, (uint8_t)n);
    }
    raw(s, n);
}

static void begin(uint32_t nkeys)
{
    W = gpuq_mpw_new();
    if (!W)
        abort();
    if (nkeys != UINT32_MAX)
        gpuq_mpw_map(W, nkeys);
}

/* The built header as a frame of kind (payload_len as implied). */
static void end_frame(const char *name, uint8_t kind)
{
    uint8_t *h;
    size_t hlen;
    if (gpuq_mpw_take(W, &h, &hlen) != 0)
        abort();
    gpuq_mpw_free(W);
    put_frame(name, kind, h, hlen, kind == GPUQ_KIND_REQUEST ? implied(h, hlen) : 0);
    free(h);
}

static void end_bare(const char *name)
{
    uint8_t *h;
    size_t hlen;
    if (gpuq_mpw_take(W, &h, &hlen) != 0)
        abort();
    gpuq_mpw_free(W);
    corpus_add(C, name, h, hlen);
    free(h);
}

static void id_op(uint64_t id, const char *op)
{
    KU("id", id);
    KS("op", op);
}

static void gen_encodings(void)
{
    begin(6);
    id_op(1, "hello");
    KU("version", 1);
    KS("priority", "high");
    KS("client", "c");
    KI("device", -1);
    KS("timing", "x"); /* wrong type: the only refused key here */
    end_frame("enc-hello-timing-str", GPUQ_KIND_REQUEST);
    begin(4);
    id_op(1, "hello");
    KU("version", 1);
    KS("priority", "low");
    end_frame("enc-hello-priority-str", GPUQ_KIND_REQUEST);
    begin(4);
    id_op(1, "hello");
    RAW(0xa7, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0xcf, 0, 0, 0, 0, 0, 0, 0, 1); /* uint64 1 */
    RAW(0xa8, 'p', 'r', 'i', 'o', 'r', 'i', 't', 'y', 0xd0, 0xff);              /* int8 -1 */
    end_frame("enc-hello-wide-ints", GPUQ_KIND_REQUEST);

    /* haversine: "to" as float32 and ints, radius as an int, map16 head */
    begin(UINT32_MAX);
    RAW(0xde, 0x00, 0x06);
    id_op(7, "haversine");
    KS("dtype", "f32");
    gpuq_mpw_str(W, "shape");
    gpuq_mpw_array(W, 2);
    RAW(0xcd, 0x00, 0x03); /* uint16 3 */
    RAW(0xd0, 0x02);       /* int8 2: a non-negative int as uint */
    gpuq_mpw_str(W, "to");
    gpuq_mpw_array(W, 2);
    RAW(0xca, 0x41, 0x48, 0x00, 0x00); /* float32 12.5 */
    RAW(0xd1, 0xff, 0x38);             /* int16 -200 */
    gpuq_mpw_str(W, "radius");
    RAW(0xcc, 0xc8); /* uint8 200 */
    end_frame("enc-haversine-mixed-numbers", GPUQ_KIND_REQUEST);

    begin(6);
    KS("op", "grid");
    gpuq_mpw_str(W, "lon");
    gpuq_mpw_array(W, 3);
    gpuq_mpw_int(W, -5);
    RAW(0xca, 0x40, 0xa0, 0x00, 0x00); /* float32 5 */
    gpuq_mpw_uint(W, 11);
    gpuq_mpw_str(W, "lat");
    gpuq_mpw_array(W, 3);
    gpuq_mpw_double(W, -0.0);
    gpuq_mpw_double(W, 1e-300);
    gpuq_mpw_uint(W, 2);
    KU("id", 3);
    KS("dtype", "f64");
    KD("radius", 6378.137);
    end_frame("enc-grid-keys-reordered", GPUQ_KIND_REQUEST);

    begin(7);
    id_op(9, "normalize");
    KS("dtype", "f64");
    KS("method", "minmax");
    KS("on_zero", "error");
    gpuq_mpw_str(W, "flat");
    gpuq_mpw_bool(W, false);
    gpuq_mpw_str(W, "shape");
    gpuq_mpw_array(W, 1);
    gpuq_mpw_uint(W, 1);
    end_frame("enc-normalize-explicit-defaults", GPUQ_KIND_REQUEST);

    /* requests the encoder cannot make: keys the op needs missing, keys
     * it refuses present */
    begin(2);
    id_op(6, "kill_session");
    end_frame("chk-kill-session-no-session", GPUQ_KIND_REQUEST);
    begin(3);
    id_op(6, "set_limit");
    KU("value", 5);
    end_frame("chk-set-limit-no-limit", GPUQ_KIND_REQUEST);
    begin(3);
    id_op(6, "grid");
    gpuq_mpw_str(W, "shape");
    gpuq_mpw_array(W, 1);
    gpuq_mpw_uint(W, 3);
    end_frame("chk-grid-shape", GPUQ_KIND_REQUEST);
    begin(2);
    id_op(6, "hello");
    end_frame("chk-hello-no-version", GPUQ_KIND_REQUEST);

    /* keys an op does not use are ignored */
    begin(8);
    id_op(5, "ping");
    KS("metric", "cosine");
    KS("method", "l1");
    KU("session", 3);
    KS("limit", "max_header");
    KU("value", 9);
    KI("device", 2);
    end_frame("enc-ping-unused-keys", GPUQ_KIND_REQUEST);
}

struct hostile {
    const char *name;
    const char *op; /* with "id": 7 */
    const char *key;
    int type; /* of the value: 's' str, 'u' uint, 'i' int, 'd' double, 'b' bool */
    const char *s;
    double v;
};

static const struct hostile hostiles[] = {
    {"bad-unknown-key", "ping", "bogus", 'u', NULL, 1},
    {"bad-dup-id", "ping", "id", 'u', NULL, 8},
    {"bad-op-unknown", NULL, "op", 's', "explode", 0},
    {"bad-op-int", NULL, "op", 'u', NULL, 1},
    {"bad-dtype-f16", "normalize", "dtype", 's', "f16", 0},
    {"bad-method-max", "normalize", "method", 's', "max", 0},
    {"bad-metric-hamming", "pairwise", "metric", 's', "hamming", 0},
    {"bad-on-zero-nan", "pairwise", "on_zero", 's', "nan", 0},
    {"bad-flat-int", "normalize", "flat", 'u', NULL, 1},
    {"bad-timing-int", "ping", "timing", 'u', NULL, 1},
    {"bad-radius-str", "grid", "radius", 's', "1", 0},
    {"bad-version-str", "hello", "version", 's', "1", 0},
    {"bad-version-huge", "hello", "version", 'u', NULL, 1e10},
    {"bad-client-long", "hello", "client", 's',
     "0123456789012345678901234567890123456789012345678901234567890123X", 0},
    {"bad-priority-str", "hello", "priority", 's', "urgent", 0},
    {"bad-priority-big", "hello", "priority", 'u', NULL, 6},
    {"bad-priority-neg", "hello", "priority", 'i', NULL, -6},
    {"bad-priority-float", "hello", "priority", 'd', NULL, 1},
    {"bad-device-neg", "hello", "device", 'i', NULL, -2},
    {"bad-device-huge", "hello", "device", 'u', NULL, 4294967296.0},
    {"bad-device-bool", "hello", "device", 'b', NULL, 1},
    {"bad-session-str", "kill_session", "session", 's', "4", 0},
    {"bad-session-neg", "kill_session", "session", 'i', NULL, -4},
    {"bad-limit-long", "set_limit", "limit", 's', "a_limit_name_that_is_far_too_long_x", 0},
    {"bad-limit-empty", "set_limit", "limit", 's', "", 0},
    {"bad-value-neg", "set_limit", "value", 'i', NULL, -1},
    {"bad-shape-str", "normalize", "shape", 's', "3", 0},
    {"bad-to-str", "haversine", "to", 's', "0,0", 0},
    {"bad-lat-num", "grid", "lat", 'd', NULL, 1},
};

static void gen_hostile_keys(void)
{
    for (size_t k = 0; k < sizeof hostiles / sizeof hostiles[0]; k++) {
        const struct hostile *h = &hostiles[k];
        begin(h->op ? 3 : 2);
        KU("id", 7);
        if (h->op)
            KS("op", h->op);
        gpuq_mpw_str(W, h->key);
        switch (h->type) {
        case 's':
            gpuq_mpw_str(W, h->s);
            break;
        case 'u':
            gpuq_mpw_uint(W, (uint64_t)h->v);
            break;
        case 'i':
            gpuq_mpw_int(W, (int64_t)h->v);
            break;
        case 'd':
            gpuq_mpw_double(W, h->v);
            break;
        default:
            gpuq_mpw_bool(W, h->v != 0);
            break;
        }
        end_frame(h->name, GPUQ_KIND_REQUEST);
    }

    begin(1);
    KS("op", "ping");
    end_frame("bad-no-id", GPUQ_KIND_REQUEST);
    begin(1);
    KU("id", 7);
    end_frame("bad-no-op", GPUQ_KIND_REQUEST);
    begin(2);
    KS("id", "7");
    KS("op", "ping");
    end_frame("bad-id-str", GPUQ_KIND_REQUEST);
    begin(2);
    KI("id", -1);
    KS("op", "ping");
    end_frame("bad-id-neg", GPUQ_KIND_REQUEST);
    begin(3);
    id_op(1, "ping");
    gpuq_mpw_uint(W, 5); /* an int key */
    gpuq_mpw_uint(W, 5);
    end_frame("bad-key-int", GPUQ_KIND_REQUEST);
    begin(3);
    id_op(7, "ping");
    end_frame("bad-map-claims-more", GPUQ_KIND_REQUEST);
    begin(1);
    id_op(7, "ping");
    end_frame("bad-trailing-bytes", GPUQ_KIND_REQUEST);

    static const struct {
        const char *name;
        int n; /* array length */
        char type;
        double v[3];
    } arrays[] = {
        {"bad-shape-rank3", 3, 'u', {1, 1, 1}}, {"bad-shape-rank0", 0, 'u', {0}},
        {"bad-shape-neg", 1, 'i', {-3}},        {"bad-shape-float", 1, 'd', {3}},
        {"bad-to-three", 3, 'd', {1, 1, 1}},    {"bad-lat-n-float", 3, 'd', {-10, 10, 5.5}},
        {"bad-lat-two", 2, 'd', {-10, 10}},     {"bad-to-str-elem", 2, 's', {0}},
    };
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
        const char *key = strstr(arrays[k].name, "shape") ? "shape"
                          : strstr(arrays[k].name, "to")  ? "to"
                                                          : "lat";
        begin(3);
        id_op(7, !strcmp(key, "shape") ? "normalize" : !strcmp(key, "to") ? "haversine" : "grid");
        gpuq_mpw_str(W, key);
        gpuq_mpw_array(W, (uint32_t)arrays[k].n);
        for (int i = 0; i < arrays[k].n; i++) {
            if (arrays[k].type == 'u')
                gpuq_mpw_uint(W, (uint64_t)arrays[k].v[i]);
            else if (arrays[k].type == 'i')
                gpuq_mpw_int(W, (int64_t)arrays[k].v[i]);
            else if (arrays[k].type == 'd')
                gpuq_mpw_double(W, arrays[k].v[i]);
            else
                gpuq_mpw_str(W, "0");
        }
        end_frame(arrays[k].name, GPUQ_KIND_REQUEST);
    }

    /* strings that are not UTF-8, as keys and as values (test_header.c) */
    static const struct {
        const char *name, *op, *key, *val;
    } utf8[] = {
        {"utf8-op-latin1", "p\xefng", NULL, NULL},
        {"utf8-op-overlong", "\xc0\xaf", NULL, NULL},
        {"utf8-op-surrogate", "ping\xed\xa0\x80", NULL, NULL},
        {"utf8-op-half", "ping\xc3", NULL, NULL},
        {"utf8-client-latin1", "hello", "client", "caf\xe9"},
        {"utf8-client-surrogate", "hello", "client", "a\xed\xb0\x80"},
        {"utf8-client-overlong-nul", "hello", "client", "a\xc0\x80"},
        {"utf8-client-above-max", "hello", "client", "\xf4\x90\x80\x80"},
        {"utf8-client-ff", "hello", "client", "\xff"},
        {"utf8-dtype", "normalize", "dtype", "f6\xb4"},
        {"utf8-method", "normalize", "method", "\xe9l2"},
        {"utf8-metric", "pairwise", "metric", "cos\xed\xa0\x80"},
        {"utf8-on-zero", "pairwise", "on_zero", "zero\xc0\xb0"},
        {"utf8-priority", "hello", "priority", "h\xefgh"},
        {"utf8-limit", "set_limit", "limit", "max_\xff"},
        {"utf8-key-latin1", "ping", "bo\xefgus", "x"},
        {"utf8-key-overlong", "ping", "\xc1\xbf", "x"},
        {"utf8-key-half", "ping", "id\xc3", "x"},
    };
    for (size_t k = 0; k < sizeof utf8 / sizeof utf8[0]; k++) {
        begin(utf8[k].key ? 3 : 2);
        KU("id", 7);
        gpuq_mpw_str(W, "op");
        raw_str(utf8[k].op, strlen(utf8[k].op));
        if (utf8[k].key) {
            raw_str(utf8[k].key, strlen(utf8[k].key));
            raw_str(utf8[k].val, strlen(utf8[k].val));
        }
        end_frame(utf8[k].name, GPUQ_KIND_REQUEST);
    }
    begin(2);
    RAW(0xa2, 0xff, 'd', 0x07); /* the first key is not UTF-8 */
    KS("op", "ping");
    end_frame("utf8-first-key", GPUQ_KIND_REQUEST);
    begin(3);
    id_op(7, "hello");
    KU("version", 1);
    gpuq_mpw_str(W, "client");
    raw_str("a\0b", 3); /* UTF-8, but a NUL */
    end_frame("bad-client-nul", GPUQ_KIND_REQUEST);
}

/* Lengths, caps and nesting (test_mpread.c), as bare headers. */
static void gen_msgpack(void)
{
    static const struct {
        const char *name;
        uint8_t b[12];
        size_t n;
    } bombs[] = {
        {"mp-array32-max", {0xdd, 0xff, 0xff, 0xff, 0xff}, 5},
        {"mp-array32-huge", {0xdd, 0xff, 0x00, 0x00, 0x00}, 5},
        {"mp-map32-max", {0xdf, 0xff, 0xff, 0xff, 0xff}, 5},
        {"mp-map32-huge", {0xdf, 0xff, 0x00, 0x00, 0x00}, 5},
        {"mp-str32-max", {0xdb, 0xff, 0xff, 0xff, 0xff}, 5},
        {"mp-str32-short", {0xdb, 0x00, 0x00, 0x00, 0x04}, 5},
        {"mp-bin32-max", {0xc6, 0xff, 0xff, 0xff, 0xff}, 5},
        {"mp-ext32-max", {0xc9, 0xff, 0xff, 0xff, 0xff}, 5},
        {"mp-array16-huge", {0xdc, 0xff, 0xff, 0x01, 0x01}, 5},
        {"mp-map16-short", {0xde, 0x00, 0x02, 0x01, 0x01}, 5},
        {"mp-reserved-c1", {0xc1}, 1},
        {"mp-not-a-map", {0x92, 0x01, 0x02}, 3},
        {"mp-deep-arrays", {0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x01}, 7},
        {"mp-deep-maps", {0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0xc0}, 11},
    };
    for (size_t k = 0; k < sizeof bombs / sizeof bombs[0]; k++)
        corpus_add(C, bombs[k].name, bombs[k].b, bombs[k].n);

    /* every msgpack type once, under a key the decoder does not know; a
     * reply decoder skips it (forward compatibility) */
    begin(3);
    KU("id", 1);
    KS("status", "ok");
    gpuq_mpw_str(W, "future");
    gpuq_mpw_array(W, 15);
    RAW(0xc0);                                          /* nil */
    RAW(0xc3);                                          /* true */
    RAW(0xcd, 0x01, 0x00);                              /* uint16 */
    RAW(0xce, 0x00, 0x01, 0x00, 0x00);                  /* uint32 */
    RAW(0xd2, 0x80, 0x00, 0x00, 0x00);                  /* int32 */
    RAW(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0);               /* int64 min */
    RAW(0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0);            /* NaN */
    RAW(0xda, 0x00, 0x03, 'a', 'b', 'c');               /* str16 */
    RAW(0xc4, 0x02, 0xaa, 0xbb);                        /* bin8 */
    RAW(0xc5, 0x00, 0x01, 0x00);                        /* bin16 */
    RAW(0xd4, 0x01, 0xaa);                              /* fixext1 */
    RAW(0xc7, 0x02, 0x01, 0xaa, 0xbb);                  /* ext8 */
    RAW(0xdf, 0x00, 0x00, 0x00, 0x01, 0xa1, 'a', 0x01); /* map32 */
    RAW(0xdd, 0x00, 0x00, 0x00, 0x01, 0xa0);            /* array32 */
    RAW(0x81, 0x01, 0x81, 0xd0, 0xfe, 0x90);            /* int keys */
    end_frame("mp-every-type", GPUQ_KIND_REPLY);

    /* 64 entries (the cap) and 65 */
    for (int n = 64; n <= 65; n++) {
        begin(UINT32_MAX);
        gpuq_mpw_array(W, (uint32_t)n);
        for (int i = 0; i < n; i++)
            gpuq_mpw_uint(W, (uint64_t)i);
        end_bare(n == 64 ? "mp-array-64" : "mp-array-65");
    }
    /* 256-byte string (the cap) and 257, as the op */
    char s[258];
    memset(s, 'x', sizeof s);
    for (size_t n = 256; n <= 257; n++) {
        begin(2);
        KU("id", 1);
        gpuq_mpw_str(W, "op");
        RAW(0xda, (uint8_t)(n >> 8), (uint8_t)n);
        raw(s, n);
        end_frame(n == 256 ? "mp-str-256" : "mp-str-257", GPUQ_KIND_REQUEST);
    }
}

/* ---- replies ---- */

static void gen_replies(void)
{
    gpuq_reply rep;
    uint8_t *b, *info;
    size_t n, info_len;

    memset(&rep, 0, sizeof rep);
    rep.id = 1;
    if (gpuq_reply_frame(&rep, 0, &b, &n) != 0)
        abort();
    corpus_add(C, "rep-ok", b, n);
    free(b);

    rep.id = 9;
    rep.dtype = GPUQ_DT_F32;
    rep.ndim = 2;
    rep.shape[0] = 3;
    rep.shape[1] = 4;
    rep.has_timing = true;
    rep.timing = (gpuq_timing){1.5, 2, 3.25, 4, 10.75};
    if (gpuq_reply_frame(&rep, 48, &b, &n) != 0)
        abort();
    corpus_add(C, "rep-ok-array-timing", b, n);
    free(b);

    /* a hello reply's info */
    gpuq_limits lim;
    gpuq_limits_default(&lim);
    W = gpuq_mpw_new();
    gpuq_mpw_map(W, 5);
    KU("version", 1);
    KS("backend", "cpu");
    KI("priority", -1);
    gpuq_mpw_str(W, "limits");
    gpuq_limits_encode(&lim, W);
    gpuq_mpw_str(W, "devices");
    gpuq_mpw_array(W, 1);
    gpuq_mpw_map(W, 3);
    KI("index", -1);
    KS("name", "H100 \xc3\xa9");
    KD("uptime_s", 0.25);
    if (gpuq_mpw_take(W, &info, &info_len) != 0)
        abort();
    gpuq_mpw_free(W);
    memset(&rep, 0, sizeof rep);
    rep.id = 0;
    rep.info = info;
    rep.info_len = info_len;
    if (gpuq_reply_frame(&rep, 0, &b, &n) != 0)
        abort();
    corpus_add(C, "rep-hello-info", b, n);
    free(b);
    free(info);

    static const int codes[] = {GPUQ_E_BAD_HEADER, GPUQ_E_ZERO_NORM, GPUQ_E_BUSY, GPUQ_E_TIMEOUT};
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++) {
        memset(&rep, 0, sizeof rep);
        rep.id = 77;
        rep.status = codes[k];
        if (k % 2 == 0)
            snprintf(rep.message, sizeof rep.message, "row %zu sums to zero \xe2\x82\xac", k);
        if (gpuq_reply_frame(&rep, 0, &b, &n) != 0)
            abort();
        char name[64];
        snprintf(name, sizeof name, "rep-error-%s", gpuq_errname(codes[k]));
        for (char *p = name; *p; p++)
            if (*p == '_')
                *p = '-';
        corpus_add(C, name, b, n);
        free(b);
    }

    /* an error by name only; a newer server's code; a bad status */
    begin(4);
    KU("id", 3);
    KS("status", "error");
    KS("error", "no_hello");
    KS("message", "say hello first");
    end_frame("rep-error-name-only", GPUQ_KIND_REPLY);
    begin(5);
    KU("id", 3);
    KS("status", "error");
    KI("code", -99);
    KS("error", "from_the_future");
    KS("message", "");
    end_frame("rep-error-newer-code", GPUQ_KIND_REPLY);
    begin(3);
    KU("id", 3);
    KS("status", "error");
    KS("error", "ok"); /* an error without a code, named ok */
    end_frame("rep-error-named-ok", GPUQ_KIND_REPLY);
    begin(3);
    KU("id", 3);
    KS("status", "maybe");
    KI("code", 1);
    end_frame("rep-bad-status", GPUQ_KIND_REPLY);
    begin(1);
    KU("id", 3);
    end_frame("rep-no-status", GPUQ_KIND_REPLY);
    begin(3);
    KS("status", "ok");
    gpuq_mpw_str(W, "timing");
    gpuq_mpw_map(W, 3);
    KD("kernel_us", 1);
    KS("future_us", "x");
    KS("total_us", "x");
    KU("id", 5);
    end_frame("rep-bad-timing", GPUQ_KIND_REPLY);
}

/* ---- prefixes (test_frame.c) ---- */

static void gen_prefixes(void)
{
    static const uint8_t ping[] = {0x82, 0xa2, 'i', 'd', 0x01, 0xa2, 'o',
                                   'p',  0xa4, 'p', 'i', 'n',  'g'};
    uint8_t b[GPUQ_PREFIX_SIZE + sizeof ping];
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = GPUQ_KIND_REQUEST,
                     .header_len = sizeof ping,
                     .payload_len = 0};
    static const struct {
        const char *name;
        size_t at;
        uint8_t v;
    } broken[] = {
        {"pfx-bad-magic", 3, 'X'}, {"pfx-version-0", 4, 0}, {"pfx-version-2", 4, 2},
        {"pfx-kind-0", 5, 0},      {"pfx-kind-3", 5, 3},    {"pfx-flags-lo", 6, 1},
        {"pfx-flags-hi", 7, 0x80},
    };
    for (size_t k = 0; k < sizeof broken / sizeof broken[0]; k++) {
        gpuq_prefix_encode(&p, b);
        memcpy(b + GPUQ_PREFIX_SIZE, ping, sizeof ping);
        b[broken[k].at] = broken[k].v;
        corpus_add(C, broken[k].name, b, sizeof b);
    }
    gpuq_prefix_encode(&p, b);
    corpus_add(C, "pfx-only", b, GPUQ_PREFIX_SIZE);
    corpus_add(C, "pfx-half", b, GPUQ_PREFIX_SIZE / 2);
    p.header_len = UINT32_MAX;
    p.payload_len = UINT64_MAX;
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, ping, sizeof ping);
    corpus_add(C, "pfx-header-len-max", b, sizeof b);
    p.header_len = 5;
    p.payload_len = 0;
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, ping, sizeof ping);
    corpus_add(C, "pfx-header-len-short", b, sizeof b);
    p.header_len = sizeof ping;
    p.kind = GPUQ_KIND_REPLY;
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, ping, sizeof ping);
    corpus_add(C, "pfx-request-as-reply", b, sizeof b);
}

/* ---- the dictionary (gpuq.dict) ---- */

/* word, and word as a msgpack fixstr (how it appears in a header) */
static void dict_str(const char *word)
{
    uint8_t b[40];
    size_t n = strlen(word);
    corpus_dict_word(C, word);
    if (n < 32) {
        b[0] = (uint8_t)(0xa0u | n);
        memcpy(b + 1, word, n);
        corpus_dict(C, b, n + 1);
    }
}

static void gen_dict(void)
{
    corpus_dict_comment(C, "fuzz_header's libFuzzer dictionary, written by gen_corpus_header");
    corpus_dict_comment(C, "(do not edit: rerun it). Each word as text and as a msgpack fixstr.");
    corpus_dict_comment(C, "request keys (PROTOCOL.md 3.1)");
    static const char *const req_keys[] = {
        "id",      "op",     "dtype",    "shape",  "shape_b",     "method", "flat",
        "on_zero", "metric", "to",       "radius", "lat",         "lon",    "timing",
        "version", "client", "priority", "device", "session",     "limit",  "value",
        "in",      "out",    "size",     "arena",  "deadline_ms", "request"};
    for (size_t k = 0; k < sizeof req_keys / sizeof req_keys[0]; k++)
        dict_str(req_keys[k]);
    corpus_dict_comment(C, "ops, dtypes, methods, metrics, on_zero, priorities, limits");
    for (int op = GPUQ_OP_NONE + 1; op < GPUQ_OP_COUNT; op++)
        dict_str(gpuq_op_name((gpuq_op)op));
    dict_str(gpuq_dtype_name(GPUQ_DT_F32));
    dict_str(gpuq_dtype_name(GPUQ_DT_F64));
    for (int m = 0; m < GPUQ_NORM_COUNT; m++)
        dict_str(gpuq_norm_method_name((gpuq_norm_method)m));
    for (int m = 0; m < GPUQ_METRIC_COUNT; m++)
        dict_str(gpuq_metric_name((gpuq_metric)m));
    dict_str("cityblock"); /* a metric alias; l1 and l2 are methods' names too */
    dict_str("error");
    dict_str("zero");
    for (int p = GPUQ_PRIO_LOW; p <= GPUQ_PRIO_HIGH; p++)
        dict_str(gpuq_prio_name(p));
    static const char *const limits[] = {"max_header",      "max_payload",   "max_inflight",
                                         "session_staging", "total_staging", "max_sessions",
                                         "max_output"};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        uint64_t v;
        gpuq_limits lim;
        gpuq_limits_default(&lim);
        if (gpuq_limits_get(&lim, limits[k], &v) != 0)
            abort(); /* not a limit any more: update the list */
        dict_str(limits[k]);
    }
    corpus_dict_comment(C, "replies (PROTOCOL.md 4): keys, status, timing keys, error names");
    static const char *const rep_keys[] = {"status",    "code",   "error",    "message",
                                           "info",      "ok",     "queue_us", "h2d_us",
                                           "kernel_us", "d2h_us", "total_us"};
    for (size_t k = 0; k < sizeof rep_keys / sizeof rep_keys[0]; k++)
        dict_str(rep_keys[k]);
    for (int code = -1; code >= GPUQ_E_LAST; code--)
        dict_str(gpuq_errname(code));
    corpus_dict_comment(C, "frame prefixes: request, reply");
    corpus_dict(C, "GPUQ\x01\x01\x00\x00", 8);
    corpus_dict(C, "GPUQ\x01\x02\x00\x00", 8);
    corpus_dict_comment(C, "msgpack type bytes and common heads");
    for (unsigned t = 0xc0; t <= 0xdf; t++) {
        uint8_t b = (uint8_t)t;
        corpus_dict(C, &b, 1);
    }
    /* map and array heads, the empty string, fixints; NaN, +-Inf, big ints */
    static const char heads[] = "\x80\x81\x82\x83\x8f\x90\x91\x92\x93\xa0\x7f\xe0\xff";
    for (size_t k = 0; k + 1 < sizeof heads; k++)
        corpus_dict(C, heads + k, 1);
    corpus_dict(C, "\xcb\x7f\xf8", 3);
    corpus_dict(C, "\xcb\x7f\xf0", 3);
    corpus_dict(C, "\xcb\xff\xf0", 3);
    corpus_dict(C, "\xcf\xff\xff\xff\xff", 5);
    corpus_dict(C, "\xd3\x80", 2);
}

static void gen(corpus *c)
{
    C = c;
    gen_dict();
    gen_requests();
    gen_refused();
    gen_encodings();
    gen_hostile_keys();
    gen_msgpack();
    gen_replies();
    gen_prefixes();
}

int main(int argc, char **argv)
{
    return corpus_main(argc, argv, "fuzz_header (tests/fuzz/corpus_header)", gen);
}
