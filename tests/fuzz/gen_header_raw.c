/* SPDX-License-Identifier: Apache-2.0 */
/* gen_header_raw.c - gen_corpus_header's inputs written with the msgpack
 * writer rather than proto's request encoder: other encodings of the same
 * keys the decoder must take, every key with a wrong type or value, lengths,
 * caps and nesting, and replies. */
#include "gen_header_raw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "frame.h"
#include "gen_header_frames.h"
#include "gpuq_limits.h"
#include "header.h"
#include "mpwrite.h"
#include "../req_args.h"

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
    frame_put(name, kind, h, hlen, kind == GPUQ_KIND_REQUEST ? frame_implied(h, hlen) : 0);
    free(h);
}

static void end_bare(const char *name)
{
    uint8_t *h;
    size_t hlen;
    if (gpuq_mpw_take(W, &h, &hlen) != 0)
        abort();
    gpuq_mpw_free(W);
    corpus_add(frames_corpus, name, h, hlen);
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
        corpus_add(frames_corpus, bombs[k].name, bombs[k].b, bombs[k].n);

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
    corpus_add(frames_corpus, "rep-ok", b, n);
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
    corpus_add(frames_corpus, "rep-ok-array-timing", b, n);
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
    corpus_add(frames_corpus, "rep-hello-info", b, n);
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
        corpus_add(frames_corpus, name, b, n);
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

void gen_header_raw(void)
{
    gen_encodings();
    gen_hostile_keys();
    gen_msgpack();
    gen_replies();
}
