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
#include "gen_header_frames.h"
#include "gen_header_raw.h"
#include "errors.h"
#include "frame.h"
#include "gpuq_limits.h"
#include "header.h"
#include "../req_args.h"

/* ---- requests: every op through the encoder ---- */

static void gen_requests(void)
{
    gpuq_request q;
    char name[64];

    frame_base(&q, GPUQ_OP_HELLO, GPUQ_DT_NONE);
    frame_req("req-hello-min", &q);
    snprintf(q.client, sizeof q.client, "gen-corpus");
    q.priority = GPUQ_PRIO_LOW;
    q.device = 0;
    q.timing = true;
    frame_req("req-hello", &q);
    q.priority = GPUQ_PRIO_HIGH;
    q.device = -1;
    snprintf(q.client, sizeof q.client, "caf\xc3\xa9 \xf0\x9d\x84\x9e");
    frame_req("req-hello-utf8-high", &q);

    static const gpuq_op plain[] = {GPUQ_OP_PING,    GPUQ_OP_STATUS,        GPUQ_OP_SESSIONS,
                                    GPUQ_OP_METRICS, GPUQ_OP_DRAIN,         GPUQ_OP_SHUTDOWN,
                                    GPUQ_OP_SLOWLOG, GPUQ_OP_SLOWLOG_RESET, GPUQ_OP_MONITOR};
    for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++) {
        frame_base(&q, plain[k], GPUQ_DT_NONE);
        snprintf(name, sizeof name, "req-%s", gpuq_op_name(plain[k]));
        for (char *u = strchr(name, '_'); u; u = strchr(u, '_'))
            *u = '-'; /* corpus names: letters, digits and '-' */
        frame_req(name, &q);
    }
    frame_base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    q.timing = true;
    q.id = UINT64_MAX;
    frame_req("req-ping-timing", &q);

    for (int m = 0; m < GPUQ_NORM_COUNT; m++) {
        frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
        frame_shape(q.shape_a, &q.ndim_a, 2, 3, 4);
        rq_set_method(&q, (gpuq_norm_method)m);
        snprintf(name, sizeof name, "req-normalize-%s", gpuq_norm_method_name(rq_method(&q)));
        frame_req(name, &q);
    }
    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 2, 2, 5);
    rq_set_method(&q, GPUQ_NORM_ZSCORE);
    rq_set_flat(&q, true);
    rq_set_zero_ok(&q, true);
    q.timing = true;
    frame_req("req-normalize-flat-zero-f32", &q);
    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 1, 7, 0);
    rq_set_method(&q, GPUQ_NORM_L2);
    frame_req("req-normalize-rank1", &q);
    frame_bare("bare-normalize", &q);

    frame_base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F64);
    frame_shape(q.shape_a, &q.ndim_a, 2, 10, 2);
    rq_set_has_to(&q, true);
    rq_set_to_lat(&q, -12.5);
    rq_set_to_lon(&q, 179.25);
    rq_set_radius(&q, 3958.8);
    frame_req("req-haversine-to", &q);
    frame_base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 2, 4, 2);
    frame_shape(q.shape_b, &q.ndim_b, 2, 4, 2);
    frame_req("req-haversine-shape-b", &q);

    frame_base(&q, GPUQ_OP_GRID, GPUQ_DT_NONE);
    frame_req("req-grid-default", &q);
    frame_bare("bare-grid", &q);
    frame_base(&q, GPUQ_OP_GRID, GPUQ_DT_F32);
    rq_set_lat_start(&q, -10);
    rq_set_lat_stop(&q, 10.5);
    rq_set_lat_n(&q, 3);
    rq_set_lon_start(&q, 100);
    rq_set_lon_stop(&q, -100);
    rq_set_lon_n(&q, 1);
    rq_set_to_lat(&q, 89.5);
    rq_set_to_lon(&q, -720);
    rq_set_radius(&q, 1);
    frame_req("req-grid-f32", &q);

    for (int m = 0; m < GPUQ_METRIC_COUNT; m++) {
        frame_base(&q, GPUQ_OP_PAIRWISE, m % 2 ? GPUQ_DT_F32 : GPUQ_DT_F64);
        frame_shape(q.shape_a, &q.ndim_a, 2, 3, 4);
        frame_shape(q.shape_b, &q.ndim_b, 2, 5, 4);
        rq_set_metric(&q, (gpuq_metric)m);
        rq_set_zero_ok(&q, rq_metric(&q) == GPUQ_METRIC_COSINE);
        snprintf(name, sizeof name, "req-pairwise-%s", gpuq_metric_name(rq_metric(&q)));
        frame_req(name, &q);
    }
    /* knn: two outputs (distances, int64 indices); odd m*k, k = n */
    frame_base(&q, GPUQ_OP_KNN, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    frame_shape(q.shape_b, &q.ndim_b, 2, 5, 4);
    gpuq_request_set_enum(&q, "metric", "cosine");
    gpuq_request_set_uint(&q, "k", 5);
    gpuq_request_set_enum(&q, "on_zero", "zero");
    frame_req("req-knn-cosine", &q);
    frame_base(&q, GPUQ_OP_KNN, GPUQ_DT_F64);
    frame_shape(q.shape_a, &q.ndim_a, 2, 2, 3);
    frame_shape(q.shape_b, &q.ndim_b, 2, 7, 3);
    gpuq_request_set_enum(&q, "metric", "euclidean");
    gpuq_request_set_uint(&q, "k", 1);
    frame_req("req-knn-euclidean", &q);

    frame_base(&q, GPUQ_OP_KILL_SESSION, GPUQ_DT_NONE);
    q.has_session = true;
    q.session = 1234567890123ull;
    frame_req("req-kill-session", &q);
    static const struct {
        const char *name;
        uint64_t value;
    } limits[] = {{"max_header", 4096},   {"max_payload", 1ull << 20},   {"max_inflight", 1u << 20},
                  {"session_staging", 1}, {"total_staging", UINT64_MAX}, {"max_sessions", 1},
                  {"max_output", 12345}};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        frame_base(&q, GPUQ_OP_SET_LIMIT, GPUQ_DT_NONE);
        snprintf(q.limit, sizeof q.limit, "%s", limits[k].name);
        q.has_value = true;
        q.value = limits[k].value;
        snprintf(name, sizeof name, "req-set-limit-%s", limits[k].name);
        for (char *p = name; *p; p++)
            if (*p == '_')
                *p = '-';
        frame_req(name, &q);
    }
    frame_base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    frame_bare("bare-ping", &q);

    /* shared memory: arena ops, and compute requests naming arena bytes */
    frame_base(&q, GPUQ_OP_ARENA_OPEN, GPUQ_DT_NONE);
    q.has_size = true;
    q.size = 1u << 20;
    frame_req("req-arena-open", &q);
    frame_base(&q, GPUQ_OP_ARENA_IMPORT, GPUQ_DT_NONE);
    frame_req("req-arena-import", &q);
    frame_base(&q, GPUQ_OP_ARENA_CLOSE, GPUQ_DT_NONE);
    q.has_arena = true;
    q.arena = 3;
    frame_req("req-arena-close", &q);
    frame_base(&q, GPUQ_OP_CANCEL, GPUQ_DT_NONE);
    q.has_request = true;
    q.request = 7;
    frame_req("req-cancel", &q);
    frame_base(&q, GPUQ_OP_READY, GPUQ_DT_NONE);
    q.has_request = true;
    q.request = 7;
    q.has_bytes = true;
    q.bytes = 1u << 20;
    frame_req("req-ready", &q);
    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 1, 1024, 0);
    q.nin_ref = 1;
    q.in_ref[0] = (gpuq_ref){1, 0, 4096};
    q.gate = true;
    frame_req("req-normalize-gated", &q);
    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 1, 4, 0);
    q.deadline_ms = 250;
    frame_req("req-normalize-deadline", &q);
    frame_base(&q, GPUQ_OP_KNN, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    frame_shape(q.shape_b, &q.ndim_b, 2, 5, 4);
    gpuq_request_set_enum(&q, "metric", "euclidean");
    gpuq_request_set_uint(&q, "k", 2);
    q.nin_ref = 2;
    q.in_ref[0] = (gpuq_ref){1, 0, 48};
    q.in_ref[1] = (gpuq_ref){1, 64, 80};
    q.nout_ref = 2;
    q.out_ref[0] = (gpuq_ref){1, 192, 24};
    q.out_ref[1] = (gpuq_ref){2, 0, 48};
    frame_req("req-knn-shm", &q);
    frame_base(&q, GPUQ_OP_GRID, GPUQ_DT_F64);
    q.nout_ref = 1;
    q.out_ref[0] = (gpuq_ref){7, 4096, 8000000};
    frame_req("req-grid-shm-out", &q);
    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    frame_shape(q.shape_a, &q.ndim_a, 1, 4, 0);
    q.nin_ref = 1;
    q.in_ref[0] = (gpuq_ref){1, 8, 32};
    q.nout_ref = 1;
    q.out_ref[0] = (gpuq_ref){1, 24, 32}; /* overlaps in[0]: refused by the check */
    frame_req("req-normalize-shm-overlap", &q);

    /* resident arrays (PROTOCOL.md 3.5) */
    frame_base(&q, GPUQ_OP_PUT, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 2, 5, 4);
    snprintf(q.name, sizeof q.name, "base");
    q.has_access = true;
    q.access = GPUQ_ACCESS_ALL;
    frame_req("req-put", &q);
    frame_base(&q, GPUQ_OP_GET, GPUQ_DT_F32); /* with the shape the server would fill in */
    frame_shape(q.shape_a, &q.ndim_a, 2, 5, 4);
    snprintf(q.name, sizeof q.name, "base");
    frame_req("req-get", &q);
    frame_base(&q, GPUQ_OP_LIST, GPUQ_DT_NONE);
    frame_req("req-list", &q);
    frame_base(&q, GPUQ_OP_REMOVE, GPUQ_DT_NONE);
    snprintf(q.name, sizeof q.name, "base");
    frame_req("req-remove", &q);
    frame_base(&q, GPUQ_OP_KNN, GPUQ_DT_F32);
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    frame_shape(q.shape_b, &q.ndim_b, 2, 5, 4);
    gpuq_request_set_enum(&q, "metric", "cosine");
    gpuq_request_set_uint(&q, "k", 2);
    q.nin_ref = 2;
    q.in_kind[0] = GPUQ_REF_WIRE;
    q.in_kind[1] = GPUQ_REF_NAME;
    snprintf(q.in_name[1], sizeof q.in_name[1], "base");
    q.nout_ref = 2;
    q.out_kind[0] = GPUQ_REF_WIRE;
    q.out_kind[1] = GPUQ_REF_NAME;
    snprintf(q.out_name[1], sizeof q.out_name[1], "idx");
    frame_req("req-knn-resident", &q);
}

/* ---- requests the checks refuse, through the encoder ---- */

static void gen_refused(void)
{
    gpuq_request q;

    frame_base(&q, GPUQ_OP_HELLO, GPUQ_DT_NONE);
    q.version = 2;
    frame_req("chk-hello-version-2", &q);
    frame_base(&q, GPUQ_OP_PING, GPUQ_DT_NONE);
    frame_put(
        "chk-ping-payload", GPUQ_KIND_REQUEST,
        (const uint8_t[]){0x82, 0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g'}, 13,
        8);
    frame_base(&q, GPUQ_OP_SET_LIMIT, GPUQ_DT_NONE);
    snprintf(q.limit, sizeof q.limit, "max_inflight");
    q.has_value = true;
    q.value = 0;
    frame_req("chk-set-limit-zero", &q);
    snprintf(q.limit, sizeof q.limit, "max_speed");
    q.value = 1;
    frame_req("chk-set-limit-unknown", &q);

    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_NONE);
    frame_shape(q.shape_a, &q.ndim_a, 1, 4, 0);
    frame_req("chk-normalize-no-dtype", &q);
    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    frame_req("chk-normalize-no-shape", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 0);
    frame_req("chk-normalize-empty", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 3);
    frame_shape(q.shape_b, &q.ndim_b, 2, 3, 3);
    frame_req("chk-normalize-shape-b", &q);
    frame_base(&q, GPUQ_OP_NORMALIZE, GPUQ_DT_F64);
    frame_shape(q.shape_a, &q.ndim_a, 2, 1ull << 62, 8);
    frame_req("chk-normalize-overflow", &q);
    rq_set_flat(&q, true);
    frame_req("chk-normalize-flat-overflow", &q);
    rq_set_flat(&q, false);
    frame_shape(q.shape_a, &q.ndim_a, 2, 1ull << 61, 2);
    frame_req("chk-normalize-bytes-overflow", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, UINT64_MAX, UINT64_MAX);
    frame_req("chk-normalize-max-shape", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 1ull << 20, 1ull << 10);
    frame_req("chk-normalize-over-max-payload", &q);

    frame_base(&q, GPUQ_OP_HAVERSINE, GPUQ_DT_F64);
    frame_shape(q.shape_a, &q.ndim_a, 2, 5, 3);
    rq_set_has_to(&q, true);
    frame_req("chk-haversine-three-columns", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 5, 2);
    frame_shape(q.shape_b, &q.ndim_b, 2, 5, 2);
    frame_req("chk-haversine-to-and-shape-b", &q);
    rq_set_has_to(&q, false);
    frame_shape(q.shape_b, &q.ndim_b, 2, 6, 2);
    frame_req("chk-haversine-shape-b-differs", &q);
    q.ndim_b = 0;
    frame_req("chk-haversine-neither", &q);
    rq_set_has_to(&q, true);
    rq_set_to_lat(&q, 90.5);
    frame_req("chk-haversine-to-lat", &q);
    rq_set_to_lat(&q, 0);
    rq_set_to_lon(&q, INFINITY);
    frame_req("chk-haversine-to-lon-inf", &q);
    rq_set_to_lon(&q, 0);
    rq_set_radius(&q, 0);
    frame_req("chk-haversine-radius-0", &q);
    rq_set_radius(&q, NAN);
    frame_req("chk-haversine-radius-nan", &q);
    rq_set_radius(&q, 1);
    frame_shape(q.shape_a, &q.ndim_a, 2, 1ull << 63, 2);
    frame_req("chk-haversine-overflow", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 0, 2);
    frame_req("chk-haversine-empty", &q);
    q.dtype = GPUQ_DT_NONE;
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 2);
    frame_req("chk-haversine-no-dtype", &q);

    frame_base(&q, GPUQ_OP_GRID, GPUQ_DT_F64);
    rq_set_lat_stop(&q, 91);
    frame_req("chk-grid-lat-stop", &q);
    rq_set_lat_stop(&q, 90);
    rq_set_lon_start(&q, -INFINITY);
    frame_req("chk-grid-lon-inf", &q);
    rq_set_lon_start(&q, -180);
    rq_set_lat_n(&q, 0);
    frame_req("chk-grid-empty", &q);
    rq_set_lat_n(&q, UINT64_MAX);
    rq_set_lon_n(&q, 2);
    frame_req("chk-grid-overflow", &q);
    rq_set_lat_n(&q, 1ull << 20);
    rq_set_lon_n(&q, 1ull << 20);
    frame_req("chk-grid-over-max-output", &q);
    rq_set_lat_n(&q, 4);
    rq_set_lon_n(&q, 4);
    rq_set_to_lat(&q, -91);
    frame_req("chk-grid-to-lat", &q);
    rq_set_lat_n(&q, 1ull << 31); /* cells fit, bytes do not */
    rq_set_lon_n(&q, 1ull << 31);
    rq_set_to_lat(&q, 0);
    frame_req("chk-grid-bytes-overflow", &q);

    frame_base(&q, GPUQ_OP_PAIRWISE, GPUQ_DT_F64);
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    frame_shape(q.shape_b, &q.ndim_b, 2, 5, 4);
    frame_req("chk-pairwise-no-metric", &q);
    rq_set_metric(&q, GPUQ_METRIC_COSINE);
    q.dtype = GPUQ_DT_NONE;
    frame_req("chk-pairwise-no-dtype", &q);
    q.dtype = GPUQ_DT_F32;
    q.ndim_a = 0;
    frame_req("chk-pairwise-no-shape", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 3, 4);
    rq_set_metric(&q, GPUQ_METRIC_EUCLIDEAN);
    frame_shape(q.shape_b, &q.ndim_b, 2, 5, 3);
    frame_req("chk-pairwise-d-differs", &q);
    frame_shape(q.shape_b, &q.ndim_b, 1, 5, 0);
    frame_req("chk-pairwise-shape-b-rank1", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 1ull << 40, 1);
    frame_shape(q.shape_b, &q.ndim_b, 2, 1ull << 40, 1);
    frame_req("chk-pairwise-overflow", &q);
    frame_shape(q.shape_a, &q.ndim_a, 2, 0, 1);
    frame_shape(q.shape_b, &q.ndim_b, 2, 1, 1);
    frame_req("chk-pairwise-empty", &q);
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
        corpus_add(frames_corpus, broken[k].name, b, sizeof b);
    }
    gpuq_prefix_encode(&p, b);
    corpus_add(frames_corpus, "pfx-only", b, GPUQ_PREFIX_SIZE);
    corpus_add(frames_corpus, "pfx-half", b, GPUQ_PREFIX_SIZE / 2);
    p.header_len = UINT32_MAX;
    p.payload_len = UINT64_MAX;
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, ping, sizeof ping);
    corpus_add(frames_corpus, "pfx-header-len-max", b, sizeof b);
    p.header_len = 5;
    p.payload_len = 0;
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, ping, sizeof ping);
    corpus_add(frames_corpus, "pfx-header-len-short", b, sizeof b);
    p.header_len = sizeof ping;
    p.kind = GPUQ_KIND_REPLY;
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, ping, sizeof ping);
    corpus_add(frames_corpus, "pfx-request-as-reply", b, sizeof b);
}

/* ---- the dictionary (gpuq.dict) ---- */

/* word, and word as a msgpack fixstr (how it appears in a header) */
static void dict_str(const char *word)
{
    uint8_t b[40];
    size_t n = strlen(word);
    corpus_dict_word(frames_corpus, word);
    if (n < 32) {
        b[0] = (uint8_t)(0xa0u | n);
        memcpy(b + 1, word, n);
        corpus_dict(frames_corpus, b, n + 1);
    }
}

static void gen_dict(void)
{
    corpus_dict_comment(frames_corpus,
                        "fuzz_header's libFuzzer dictionary, written by gen_corpus_header");
    corpus_dict_comment(frames_corpus,
                        "(do not edit: rerun it). Each word as text and as a msgpack fixstr.");
    corpus_dict_comment(frames_corpus, "request keys (PROTOCOL.md 3.1)");
    static const char *const req_keys[] = {
        "id",      "op",     "dtype",    "shape",  "shape_b",     "method", "flat",
        "on_zero", "metric", "to",       "radius", "lat",         "lon",    "timing",
        "version", "client", "priority", "device", "session",     "limit",  "value",
        "in",      "out",    "size",     "arena",  "deadline_ms", "request"};
    for (size_t k = 0; k < sizeof req_keys / sizeof req_keys[0]; k++)
        dict_str(req_keys[k]);
    corpus_dict_comment(frames_corpus,
                        "ops, dtypes, methods, metrics, on_zero, priorities, limits");
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
    corpus_dict_comment(frames_corpus,
                        "replies (PROTOCOL.md 4): keys, status, timing keys, error names");
    static const char *const rep_keys[] = {"status",    "code",   "error",    "message",
                                           "info",      "ok",     "queue_us", "h2d_us",
                                           "kernel_us", "d2h_us", "total_us"};
    for (size_t k = 0; k < sizeof rep_keys / sizeof rep_keys[0]; k++)
        dict_str(rep_keys[k]);
    for (int code = -1; code >= GPUQ_E_LAST; code--)
        dict_str(gpuq_errname(code));
    corpus_dict_comment(frames_corpus, "frame prefixes: request, reply");
    corpus_dict(frames_corpus, "GPUQ\x01\x01\x00\x00", 8);
    corpus_dict(frames_corpus, "GPUQ\x01\x02\x00\x00", 8);
    corpus_dict_comment(frames_corpus, "msgpack type bytes and common heads");
    for (unsigned t = 0xc0; t <= 0xdf; t++) {
        uint8_t b = (uint8_t)t;
        corpus_dict(frames_corpus, &b, 1);
    }
    /* map and array heads, the empty string, fixints; NaN, +-Inf, big ints */
    static const char heads[] = "\x80\x81\x82\x83\x8f\x90\x91\x92\x93\xa0\x7f\xe0\xff";
    for (size_t k = 0; k + 1 < sizeof heads; k++)
        corpus_dict(frames_corpus, heads + k, 1);
    corpus_dict(frames_corpus, "\xcb\x7f\xf8", 3);
    corpus_dict(frames_corpus, "\xcb\x7f\xf0", 3);
    corpus_dict(frames_corpus, "\xcb\xff\xf0", 3);
    corpus_dict(frames_corpus, "\xcf\xff\xff\xff\xff", 5);
    corpus_dict(frames_corpus, "\xd3\x80", 2);
}

static void gen(corpus *c)
{
    frames_corpus = c;
    gen_dict();
    gen_requests();
    gen_refused();
    gen_header_raw();
    gen_prefixes();
}

int main(int argc, char **argv)
{
    return corpus_main(argc, argv, "fuzz_header (tests/fuzz/corpus_header)", gen);
}
