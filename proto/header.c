/* header.c - request and reply headers: decode, check, encode.
 *
 * Decoding uses only the bounded reader (mpread.c), never msgpack-c's
 * unpacker, so a hostile header costs at most its own bytes. Happy path of a
 * request: gpuq_request_decode fills a gpuq_request from the map (unknown or
 * duplicate keys, wrong types, strings that are not UTF-8 and bad enum names
 * fail with a specific code and a one-line message), then gpuq_request_check
 * validates ranks, shapes, scalar ranges and the exact payload/output sizes
 * (overflow-safe) against the limits. Encoding goes through mpwrite.c and
 * emits only the keys that the op uses, so the strict decoder accepts what
 * the encoder writes. Every string either way is UTF-8: messages that echo a
 * client's string cut it on a character boundary, and the reply encoder
 * makes any message valid.
 */
#include "header.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "frame.h"
#include "mpread.h"
#include "mpwrite.h"
#include "utf8.h"

/* ---- names ---- */

static const char *const op_names[GPUQ_OP_COUNT] = {
    [GPUQ_OP_NONE] = NULL,          [GPUQ_OP_HELLO] = "hello",
    [GPUQ_OP_PING] = "ping",        [GPUQ_OP_STATUS] = "status",
    [GPUQ_OP_NORMALIZE] = "normalize", [GPUQ_OP_HAVERSINE] = "haversine",
    [GPUQ_OP_GRID] = "grid",        [GPUQ_OP_PAIRWISE] = "pairwise",
    [GPUQ_OP_SESSIONS] = "sessions", [GPUQ_OP_METRICS] = "metrics",
    [GPUQ_OP_DRAIN] = "drain",      [GPUQ_OP_SHUTDOWN] = "shutdown",
    [GPUQ_OP_KILL_SESSION] = "kill_session", [GPUQ_OP_SET_LIMIT] = "set_limit",
};
static const char *const method_names[GPUQ_NORM_COUNT] = {"sum", "l1", "l2", "minmax", "zscore"};
static const char *const metric_names[GPUQ_METRIC_COUNT] = {"euclidean", "sqeuclidean", "cosine",
                                                            "manhattan"};

static bool str_eq(const char *s, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

static int lookup(const char *const *names, int n, const char *s, size_t len)
{
    for (int k = 0; k < n; k++) {
        if (names[k] && str_eq(s, len, names[k]))
            return k;
    }
    return -1;
}

const char *gpuq_op_name(gpuq_op op)
{
    return (op > GPUQ_OP_NONE && op < GPUQ_OP_COUNT) ? op_names[op] : NULL;
}

bool gpuq_op_is_compute(gpuq_op op)
{
    return op >= GPUQ_OP_NORMALIZE && op <= GPUQ_OP_PAIRWISE;
}

bool gpuq_op_is_admin(gpuq_op op)
{
    return op >= GPUQ_OP_DRAIN && op <= GPUQ_OP_SET_LIMIT;
}

const char *gpuq_dtype_name(gpuq_dtype dt)
{
    return dt == GPUQ_DT_F32 ? "f32" : dt == GPUQ_DT_F64 ? "f64" : NULL;
}

const char *gpuq_norm_method_name(gpuq_norm_method m)
{
    return ((unsigned)m < GPUQ_NORM_COUNT) ? method_names[m] : NULL;
}

const char *gpuq_metric_name(gpuq_metric m)
{
    return ((unsigned)m < GPUQ_METRIC_COUNT) ? metric_names[m] : NULL;
}

size_t gpuq_dtype_size(gpuq_dtype dt)
{
    return dt == GPUQ_DT_F32 ? 4 : dt == GPUQ_DT_F64 ? 8 : 0;
}

int gpuq_op_parse(const char *s, size_t len)
{
    return lookup(op_names, GPUQ_OP_COUNT, s, len);
}

int gpuq_norm_method_parse(const char *s, size_t len)
{
    return lookup(method_names, GPUQ_NORM_COUNT, s, len);
}

int gpuq_metric_parse(const char *s, size_t len)
{
    return lookup(metric_names, GPUQ_METRIC_COUNT, s, len);
}

static const char *const prio_names[] = {"low", "normal", "high"}; /* from GPUQ_PRIO_LOW */

const char *gpuq_prio_name(int prio)
{
    return prio >= GPUQ_PRIO_LOW && prio <= GPUQ_PRIO_HIGH ? prio_names[prio - GPUQ_PRIO_LOW]
                                                           : NULL;
}

int gpuq_prio_from_name(const char *s, size_t len, int *prio)
{
    int k = lookup(prio_names, GPUQ_PRIO_HIGH - GPUQ_PRIO_LOW + 1, s, len);
    if (k < 0)
        return GPUQ_E_BAD_ARGUMENT;
    *prio = GPUQ_PRIO_LOW + k;
    return 0;
}

int gpuq_prio_parse(const char *s, int *prio)
{
    static const char *const ints[] = {"-1", "0", "1"}; /* from GPUQ_PRIO_LOW */
    if (!s)
        return GPUQ_E_BAD_ARGUMENT;
    size_t len = strlen(s);
    if (gpuq_prio_from_name(s, len, prio) == 0)
        return 0;
    int k = lookup(ints, 3, s, len);
    if (k < 0)
        return GPUQ_E_BAD_ARGUMENT;
    *prio = GPUQ_PRIO_LOW + k;
    return 0;
}

static int dtype_parse(const char *s, size_t len)
{
    if (str_eq(s, len, "f32"))
        return GPUQ_DT_F32;
    if (str_eq(s, len, "f64"))
        return GPUQ_DT_F64;
    return -1;
}

/* ---- messages ---- */

/* A message is one line even when it echoes a client's string, which may
 * hold a newline or another control character: each is shown as \xHH (as
 * the reply encoder shows bytes that are not UTF-8), in place, and what no
 * longer fits in msg[cap] is cut before the first character or escape that
 * does not fit. msg is UTF-8. */
static void one_line(char *msg, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(msg), end = 0, out = 0;

    while (end < n) { /* how much of msg fits once escaped */
        uint8_t c = (uint8_t)msg[end];
        size_t adv = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        size_t w = c < 0x20 || c == 0x7f ? 4 : adv;
        if (adv > n - end || out + w > cap - 1)
            break;
        out += w;
        end += adv;
    }
    for (size_t i = end, o = out; i-- > 0;) { /* from the back: o >= i throughout */
        uint8_t c = (uint8_t)msg[i];
        if (c < 0x20 || c == 0x7f) {
            o -= 4;
            msg[o] = '\\';
            msg[o + 1] = 'x';
            msg[o + 2] = hex[c >> 4];
            msg[o + 3] = hex[c & 0x0f];
        } else {
            msg[--o] = (char)c;
        }
    }
    msg[out] = '\0';
}

__attribute__((format(printf, 4, 5))) static int fail(char *msg, size_t cap, int code,
                                                      const char *fmt, ...)
{
    if (msg && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        gpuq_utf8_vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
        one_line(msg, cap);
    }
    return code;
}

/* Printable, bounded rendering of a wire string for messages: "%.*s" with
 * SHOWLEN(s, len), s shows at most 64 bytes, cut on a character boundary so
 * the message stays UTF-8 (the reader has checked s itself). */
#define SHOWLEN(s, len) ((int)gpuq_utf8_cut((s), (len), 64))

/* ---- request decode ---- */

enum reqkey {
    K_ID, K_OP, K_DTYPE, K_SHAPE, K_SHAPE_B, K_METHOD, K_FLAT, K_ON_ZERO, K_METRIC, K_TO,
    K_RADIUS, K_LAT, K_LON, K_TIMING, K_VERSION, K_CLIENT, K_PRIORITY, K_DEVICE, K_SESSION,
    K_LIMIT, K_VALUE, K_COUNT
};

static const char *const req_keys[K_COUNT] = {
    "id", "op", "dtype", "shape", "shape_b", "method", "flat", "on_zero", "metric", "to",
    "radius", "lat", "lon", "timing", "version", "client", "priority", "device", "session",
    "limit", "value",
};

void gpuq_request_init(gpuq_request *req)
{
    memset(req, 0, sizeof(*req));
    req->op = GPUQ_OP_NONE;
    req->dtype = GPUQ_DT_NONE;
    req->method = GPUQ_NORM_SUM;
    req->metric = GPUQ_METRIC_COUNT; /* unset: pairwise requires one */
    req->radius = GPUQ_EARTH_RADIUS_KM;
    req->to_lat = 30.0;
    req->to_lon = 101.0;
    req->lat_start = -90.0;
    req->lat_stop = 90.0;
    req->lat_n = 1000;
    req->lon_start = -180.0;
    req->lon_stop = 180.0;
    req->lon_n = 1000;
    req->version = GPUQ_PROTO_VERSION;
    req->priority = GPUQ_PRIO_NORMAL;
    req->device = -1;
}

static int read_shape(gpuq_mpr *r, const char *key, uint32_t *ndim, uint64_t *shape, char *msg,
                      size_t cap)
{
    uint32_t n;
    if (gpuq_mpr_array(r, &n) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an array of unsigned ints", key);
    if (n < 1 || n > GPUQ_MAX_DIMS)
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "\"%s\" has %u dimensions; 1 or 2 allowed", key,
                    (unsigned)n);
    for (uint32_t k = 0; k < n; k++) {
        if (gpuq_mpr_uint(r, &shape[k]) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\"[%u] is not an unsigned int", key,
                        (unsigned)k);
    }
    *ndim = n;
    return 0;
}

/* Read an array of exactly n numbers into v. */
static int read_numbers(gpuq_mpr *r, const char *key, double *v, uint32_t want, char *msg,
                        size_t cap)
{
    uint32_t n;
    if (gpuq_mpr_array(r, &n) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an array of numbers", key);
    if (n != want)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "\"%s\" has %u elements; %u expected", key,
                    (unsigned)n, (unsigned)want);
    for (uint32_t k = 0; k < n; k++) {
        if (gpuq_mpr_double(r, &v[k]) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\"[%u] is not a number", key,
                        (unsigned)k);
    }
    return 0;
}

/* "lat"/"lon": [start, stop, n] with n an unsigned int */
static int read_range(gpuq_mpr *r, const char *key, double *start, double *stop, uint64_t *n,
                      char *msg, size_t cap)
{
    uint32_t cnt;
    if (gpuq_mpr_array(r, &cnt) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an array [start, stop, n]", key);
    if (cnt != 3)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "\"%s\" has %u elements; [start, stop, n] expected",
                    key, (unsigned)cnt);
    if (gpuq_mpr_double(r, start) != 0 || gpuq_mpr_double(r, stop) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" start and stop must be numbers", key);
    if (gpuq_mpr_uint(r, n) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" n must be an unsigned int", key);
    return 0;
}

static int read_str(gpuq_mpr *r, const char *key, const char **s, uint32_t *len, char *msg,
                    size_t cap)
{
    if (gpuq_mpr_str(r, s, len) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be a string", key);
    return 0;
}

static int read_bool(gpuq_mpr *r, const char *key, bool *v, char *msg, size_t cap)
{
    if (gpuq_mpr_bool(r, v) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be a bool", key);
    return 0;
}

static int decode_value(gpuq_mpr *r, enum reqkey key, gpuq_request *req, char *msg, size_t cap)
{
    const char *name = req_keys[key];
    const char *s;
    uint32_t len;
    uint64_t u;
    int64_t i;
    double v[2];
    int rc, idx;

    switch (key) {
    case K_ID:
        if (gpuq_mpr_uint(r, &req->id) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"id\" must be an unsigned int");
        return 0;
    case K_OP:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        idx = gpuq_op_parse(s, len);
        if (idx <= 0)
            return fail(msg, cap, GPUQ_E_UNKNOWN_OP, "unknown op \"%.*s\"", SHOWLEN(s, len), s);
        req->op = (gpuq_op)idx;
        return 0;
    case K_DTYPE:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        idx = dtype_parse(s, len);
        if (idx < 0)
            return fail(msg, cap, GPUQ_E_BAD_DTYPE, "dtype \"%.*s\" is not f32 or f64",
                        SHOWLEN(s, len), s);
        req->dtype = (gpuq_dtype)idx;
        return 0;
    case K_SHAPE:
        return read_shape(r, name, &req->ndim_a, req->shape_a, msg, cap);
    case K_SHAPE_B:
        return read_shape(r, name, &req->ndim_b, req->shape_b, msg, cap);
    case K_METHOD:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        idx = gpuq_norm_method_parse(s, len);
        if (idx < 0)
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "method \"%.*s\" is not sum, l1, l2, minmax or zscore", SHOWLEN(s, len), s);
        req->method = (gpuq_norm_method)idx;
        return 0;
    case K_FLAT:
        return read_bool(r, name, &req->flat, msg, cap);
    case K_ON_ZERO:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        if (str_eq(s, len, "error"))
            req->zero_ok = false;
        else if (str_eq(s, len, "zero"))
            req->zero_ok = true;
        else
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "on_zero \"%.*s\" is not error or zero",
                        SHOWLEN(s, len), s);
        return 0;
    case K_METRIC:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        idx = gpuq_metric_parse(s, len);
        if (idx < 0)
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "metric \"%.*s\" is not euclidean, sqeuclidean, cosine or manhattan",
                        SHOWLEN(s, len), s);
        req->metric = (gpuq_metric)idx;
        return 0;
    case K_TO:
        if ((rc = read_numbers(r, name, v, 2, msg, cap)) != 0)
            return rc;
        req->has_to = true;
        req->to_lat = v[0];
        req->to_lon = v[1];
        return 0;
    case K_RADIUS:
        if (gpuq_mpr_double(r, &req->radius) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"radius\" must be a number");
        return 0;
    case K_LAT:
        return read_range(r, name, &req->lat_start, &req->lat_stop, &req->lat_n, msg, cap);
    case K_LON:
        return read_range(r, name, &req->lon_start, &req->lon_stop, &req->lon_n, msg, cap);
    case K_TIMING:
        return read_bool(r, name, &req->timing, msg, cap);
    case K_VERSION:
        if (gpuq_mpr_uint(r, &u) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"version\" must be an unsigned int");
        if (u > UINT32_MAX)
            return fail(msg, cap, GPUQ_E_VERSION, "version %llu is not supported",
                        (unsigned long long)u);
        req->version = (uint32_t)u;
        return 0;
    case K_CLIENT:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        if (len > GPUQ_CLIENT_NAME_MAX)
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "client name has %u bytes; at most %u",
                        (unsigned)len, GPUQ_CLIENT_NAME_MAX);
        if (memchr(s, '\0', len))
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "client name contains a NUL byte");
        memcpy(req->client, s, len);
        req->client[len] = '\0';
        return 0;
    case K_PRIORITY:
        if (gpuq_mpr_peek(r) == GPUQ_MP_STR) {
            int p;
            (void)gpuq_mpr_str(r, &s, &len);
            if (gpuq_prio_from_name(s, len, &p) != 0)
                return fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                            "priority \"%.*s\" is not low, normal or high", SHOWLEN(s, len), s);
            req->priority = p;
            return 0;
        }
        if (gpuq_mpr_int(r, &i) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"priority\" must be a string or an int");
        if (i < GPUQ_PRIO_LOW || i > GPUQ_PRIO_HIGH)
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "priority %lld is not a level (-1 low, 0 normal, 1 high)", (long long)i);
        req->priority = (int32_t)i;
        return 0;
    case K_DEVICE:
        if (gpuq_mpr_int(r, &i) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"device\" must be an int");
        if (i < -1 || i > INT32_MAX)
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "device %lld is invalid (-1 means any)",
                        (long long)i);
        req->device = (int32_t)i;
        return 0;
    case K_SESSION:
        if (gpuq_mpr_uint(r, &req->session) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"session\" must be an unsigned int");
        req->has_session = true;
        return 0;
    case K_LIMIT:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        if (len == 0 || len > GPUQ_LIMIT_NAME_MAX || memchr(s, '\0', len))
            return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "limit name \"%.*s\" is not a limit",
                        SHOWLEN(s, len), s);
        memcpy(req->limit, s, len);
        req->limit[len] = '\0';
        return 0;
    case K_VALUE:
        if (gpuq_mpr_uint(r, &req->value) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "\"value\" must be an unsigned int");
        req->has_value = true;
        return 0;
    case K_COUNT:
        break;
    }
    return fail(msg, cap, GPUQ_E_INTERNAL, "unhandled key");
}

int gpuq_request_decode(const uint8_t *buf, size_t len, gpuq_request *req, char *msg,
                        size_t msgcap)
{
    gpuq_mpr r;
    uint32_t n, seen = 0;
    int rc;

    gpuq_request_init(req);
    req->version = 0; /* hello must say it: absent is an error, not version 1 */
    if (msg && msgcap)
        msg[0] = '\0';
    gpuq_mpr_init(&r, buf, len);
    if (gpuq_mpr_map(&r, &n) != 0)
        return fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                    "header is not a msgpack map (or is truncated or over a cap)");
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t klen;
        if (gpuq_mpr_str(&r, &key, &klen) != 0)
            return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "header key %u is not a %s", (unsigned)k,
                        gpuq_mpr_bad_utf8(&r) ? "valid UTF-8 string" : "string");
        int idx = lookup(req_keys, K_COUNT, key, klen);
        if (idx < 0)
            return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "unknown key \"%.*s\"", SHOWLEN(key, klen),
                        key);
        if (seen & (1u << idx))
            return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "duplicate key \"%s\"", req_keys[idx]);
        seen |= 1u << idx;
        if (gpuq_mpr_bad_utf8(&r)) /* before decode_value can echo or judge it */
            return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "\"%s\" is not valid UTF-8", req_keys[idx]);
        if ((rc = decode_value(&r, (enum reqkey)idx, req, msg, msgcap)) != 0)
            return rc;
    }
    if (gpuq_mpr_left(&r) != 0)
        return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "%zu trailing bytes after the header map",
                    gpuq_mpr_left(&r));
    if (!(seen & (1u << K_ID)))
        return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "header lacks \"id\"");
    if (!(seen & (1u << K_OP)))
        return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "header lacks \"op\"");
    if (req->op == GPUQ_OP_GRID && req->dtype == GPUQ_DT_NONE)
        req->dtype = GPUQ_DT_F64;
    return 0;
}

/* ---- request check ---- */

/* a * b, or false on overflow */
static bool mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static int check_shape_nonempty(const char *key, uint32_t ndim, const uint64_t *shape, char *msg,
                                size_t cap)
{
    for (uint32_t k = 0; k < ndim; k++) {
        if (shape[k] == 0)
            return fail(msg, cap, GPUQ_E_EMPTY, "%s[%u] is 0; arrays must not be empty", key,
                        (unsigned)k);
    }
    return 0;
}

static int check_radius(const gpuq_request *req, char *msg, size_t cap)
{
    if (!isfinite(req->radius) || !(req->radius > 0))
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "radius %g must be finite and > 0",
                    req->radius);
    return 0;
}

static int check_to(const gpuq_request *req, char *msg, size_t cap)
{
    if (!isfinite(req->to_lat) || req->to_lat < -90.0 || req->to_lat > 90.0)
        return fail(msg, cap, GPUQ_E_OUT_OF_RANGE, "\"to\" latitude %g is outside [-90, 90]",
                    req->to_lat);
    if (!isfinite(req->to_lon))
        return fail(msg, cap, GPUQ_E_OUT_OF_RANGE, "\"to\" longitude %g is not finite",
                    req->to_lon);
    return 0;
}

static int check_dtype(const gpuq_request *req, char *msg, size_t cap)
{
    if (req->dtype != GPUQ_DT_F32 && req->dtype != GPUQ_DT_F64)
        return fail(msg, cap, GPUQ_E_BAD_DTYPE, "%s needs dtype f32 or f64",
                    gpuq_op_name(req->op));
    return 0;
}

static int check_normalize(const gpuq_request *req, gpuq_sizes *sz, uint64_t *in_elems,
                           char *msg, size_t cap)
{
    int rc;
    if ((rc = check_dtype(req, msg, cap)) != 0)
        return rc;
    if (req->ndim_a < 1 || req->ndim_a > 2)
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "normalize needs \"shape\" of rank 1 or 2");
    if (req->ndim_b != 0)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "normalize takes no \"shape_b\"");
    if ((unsigned)req->method >= GPUQ_NORM_COUNT)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "unknown normalize method %d",
                    (int)req->method);
    if ((rc = check_shape_nonempty("shape", req->ndim_a, req->shape_a, msg, cap)) != 0)
        return rc;
    if (req->ndim_a == 1) {
        sz->rows = 1;
        sz->cols = req->shape_a[0];
    } else if (req->flat) {
        sz->rows = 1;
        if (!mul(req->shape_a[0], req->shape_a[1], &sz->cols))
            return fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape [%llu, %llu] overflows",
                        (unsigned long long)req->shape_a[0], (unsigned long long)req->shape_a[1]);
    } else {
        sz->rows = req->shape_a[0];
        sz->cols = req->shape_a[1];
    }
    if (!mul(sz->rows, sz->cols, in_elems))
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape [%llu, %llu] overflows",
                    (unsigned long long)sz->rows, (unsigned long long)sz->cols);
    sz->out_ndim = req->ndim_a;
    sz->out_shape[0] = req->shape_a[0];
    sz->out_shape[1] = req->ndim_a == 2 ? req->shape_a[1] : 0;
    return 0;
}

static int check_haversine(const gpuq_request *req, gpuq_sizes *sz, uint64_t *in_elems,
                           char *msg, size_t cap)
{
    int rc;
    if ((rc = check_dtype(req, msg, cap)) != 0)
        return rc;
    if (req->ndim_a != 2 || req->shape_a[1] != 2)
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "haversine needs \"shape\" [n, 2] (lat, lon)");
    if (req->has_to && req->ndim_b != 0)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                    "haversine takes either \"to\" or \"shape_b\", not both");
    if (!req->has_to && req->ndim_b == 0)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "haversine needs \"to\" or \"shape_b\"");
    if (req->ndim_b != 0 &&
        (req->ndim_b != 2 || req->shape_b[0] != req->shape_a[0] || req->shape_b[1] != 2))
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "haversine \"shape_b\" must equal \"shape\" [%llu, 2]",
                    (unsigned long long)req->shape_a[0]);
    if (req->has_to && (rc = check_to(req, msg, cap)) != 0)
        return rc;
    if ((rc = check_radius(req, msg, cap)) != 0)
        return rc;
    if ((rc = check_shape_nonempty("shape", 2, req->shape_a, msg, cap)) != 0)
        return rc;
    sz->n = req->shape_a[0];
    uint64_t per = req->ndim_b ? 4 : 2;
    if (!mul(sz->n, per, in_elems))
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape [%llu, 2] overflows",
                    (unsigned long long)sz->n);
    sz->out_ndim = 1;
    sz->out_shape[0] = sz->n;
    return 0;
}

static int check_grid(const gpuq_request *req, uint64_t payload_len, gpuq_sizes *sz, char *msg,
                      size_t cap)
{
    int rc;
    if (req->dtype != GPUQ_DT_NONE && (rc = check_dtype(req, msg, cap)) != 0)
        return rc;
    if (payload_len != 0)
        return fail(msg, cap, GPUQ_E_SIZE_MISMATCH, "grid takes no payload but got %llu bytes",
                    (unsigned long long)payload_len);
    if (req->ndim_a != 0 || req->ndim_b != 0)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "grid takes no \"shape\" or \"shape_b\"");
    if (!isfinite(req->lat_start) || !isfinite(req->lat_stop) || req->lat_start < -90.0 ||
        req->lat_start > 90.0 || req->lat_stop < -90.0 || req->lat_stop > 90.0)
        return fail(msg, cap, GPUQ_E_OUT_OF_RANGE, "grid lat range [%g, %g] is outside [-90, 90]",
                    req->lat_start, req->lat_stop);
    if (!isfinite(req->lon_start) || !isfinite(req->lon_stop))
        return fail(msg, cap, GPUQ_E_OUT_OF_RANGE, "grid lon range [%g, %g] is not finite",
                    req->lon_start, req->lon_stop);
    if ((rc = check_to(req, msg, cap)) != 0)
        return rc;
    if ((rc = check_radius(req, msg, cap)) != 0)
        return rc;
    if (req->lat_n == 0 || req->lon_n == 0)
        return fail(msg, cap, GPUQ_E_EMPTY, "grid needs lat n >= 1 and lon n >= 1 (got %llu, %llu)",
                    (unsigned long long)req->lat_n, (unsigned long long)req->lon_n);
    uint64_t cells;
    if (!mul(req->lat_n, req->lon_n, &cells))
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "grid %llu x %llu overflows",
                    (unsigned long long)req->lat_n, (unsigned long long)req->lon_n);
    sz->rows = req->lat_n;
    sz->cols = req->lon_n;
    sz->out_ndim = 2;
    sz->out_shape[0] = req->lat_n;
    sz->out_shape[1] = req->lon_n;
    return 0;
}

static int check_pairwise(const gpuq_request *req, gpuq_sizes *sz, uint64_t *in_elems,
                          char *msg, size_t cap)
{
    int rc;
    uint64_t ea, eb;
    if ((rc = check_dtype(req, msg, cap)) != 0)
        return rc;
    if ((unsigned)req->metric >= GPUQ_METRIC_COUNT)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                    "pairwise needs \"metric\" (euclidean, sqeuclidean, cosine or manhattan)");
    if (req->ndim_a != 2)
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "pairwise needs \"shape\" [m, d]");
    if (req->ndim_b != 2)
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "pairwise needs \"shape_b\" [n, d]");
    if (req->shape_b[1] != req->shape_a[1])
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "shape_b has d=%llu but shape has d=%llu",
                    (unsigned long long)req->shape_b[1], (unsigned long long)req->shape_a[1]);
    if ((rc = check_shape_nonempty("shape", 2, req->shape_a, msg, cap)) != 0 ||
        (rc = check_shape_nonempty("shape_b", 2, req->shape_b, msg, cap)) != 0)
        return rc;
    sz->m = req->shape_a[0];
    sz->n = req->shape_b[0];
    sz->d = req->shape_a[1];
    uint64_t out;
    if (!mul(sz->m, sz->d, &ea) || !mul(sz->n, sz->d, &eb) ||
        __builtin_add_overflow(ea, eb, in_elems) || !mul(sz->m, sz->n, &out))
        return fail(msg, cap, GPUQ_E_BAD_SHAPE, "pairwise shapes [%llu, %llu] x [%llu, %llu] overflow",
                    (unsigned long long)sz->m, (unsigned long long)sz->d,
                    (unsigned long long)sz->n, (unsigned long long)sz->d);
    sz->out_ndim = 2;
    sz->out_shape[0] = sz->m;
    sz->out_shape[1] = sz->n;
    return 0;
}

int gpuq_request_check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                       gpuq_sizes *sz, char *msg, size_t msgcap)
{
    uint64_t in_elems = 0, out_elems = 1;
    int rc;

    memset(sz, 0, sizeof(*sz));
    if (msg && msgcap)
        msg[0] = '\0';
    if (payload_len > lim->max_payload)
        return fail(msg, msgcap, GPUQ_E_TOO_LARGE, "payload of %llu bytes is over max_payload %llu",
                    (unsigned long long)payload_len, (unsigned long long)lim->max_payload);

    switch (req->op) {
    case GPUQ_OP_HELLO:
        if (req->version == 0)
            return fail(msg, msgcap, GPUQ_E_VERSION, "hello needs \"version\" (the server speaks %u)",
                        GPUQ_PROTO_VERSION);
        if (req->version != GPUQ_PROTO_VERSION)
            return fail(msg, msgcap, GPUQ_E_VERSION,
                        "protocol version %u is not supported (server speaks %u)",
                        (unsigned)req->version, GPUQ_PROTO_VERSION);
        /* fall through */
    case GPUQ_OP_KILL_SESSION:
        if (req->op == GPUQ_OP_KILL_SESSION && !req->has_session)
            return fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "kill_session needs \"session\"");
        /* fall through */
    case GPUQ_OP_SET_LIMIT:
        if (req->op == GPUQ_OP_SET_LIMIT && (!req->limit[0] || !req->has_value))
            return fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "set_limit needs \"limit\" and \"value\"");
        if (req->op == GPUQ_OP_SET_LIMIT) {
            gpuq_limits tmp = *lim;
            if (gpuq_limits_set(&tmp, req->limit, req->value, NULL, msg, msgcap) != 0) {
                if (msg && msgcap > 0)
                    one_line(msg, msgcap); /* it quotes the client's limit name */
                return GPUQ_E_BAD_ARGUMENT;
            }
        }
        /* fall through */
    case GPUQ_OP_PING:
    case GPUQ_OP_STATUS:
    case GPUQ_OP_SESSIONS:
    case GPUQ_OP_METRICS:
    case GPUQ_OP_DRAIN:
    case GPUQ_OP_SHUTDOWN:
        if (payload_len != 0)
            return fail(msg, msgcap, GPUQ_E_SIZE_MISMATCH, "%s takes no payload but got %llu bytes",
                        gpuq_op_name(req->op), (unsigned long long)payload_len);
        return 0;
    case GPUQ_OP_NORMALIZE:
        rc = check_normalize(req, sz, &in_elems, msg, msgcap);
        break;
    case GPUQ_OP_HAVERSINE:
        rc = check_haversine(req, sz, &in_elems, msg, msgcap);
        break;
    case GPUQ_OP_GRID:
        rc = check_grid(req, payload_len, sz, msg, msgcap);
        break;
    case GPUQ_OP_PAIRWISE:
        rc = check_pairwise(req, sz, &in_elems, msg, msgcap);
        break;
    default:
        return fail(msg, msgcap, GPUQ_E_UNKNOWN_OP, "unknown op %d", (int)req->op);
    }
    if (rc != 0)
        return rc;

    size_t ds = gpuq_dtype_size(req->dtype == GPUQ_DT_NONE ? GPUQ_DT_F64 : req->dtype);
    for (uint32_t k = 0; k < sz->out_ndim; k++) {
        if (!mul(out_elems, sz->out_shape[k], &out_elems))
            return fail(msg, msgcap, GPUQ_E_BAD_SHAPE, "output shape overflows");
    }
    if (!mul(in_elems, ds, &sz->payload))
        return fail(msg, msgcap, GPUQ_E_TOO_LARGE, "input of %llu elements overflows a byte count",
                    (unsigned long long)in_elems);
    if (!mul(out_elems, ds, &sz->output))
        return fail(msg, msgcap, GPUQ_E_TOO_LARGE, "output of %llu elements overflows a byte count",
                    (unsigned long long)out_elems);
    if (sz->payload > lim->max_payload)
        return fail(msg, msgcap, GPUQ_E_TOO_LARGE, "input needs %llu bytes, over max_payload %llu",
                    (unsigned long long)sz->payload, (unsigned long long)lim->max_payload);
    if (sz->output > lim->max_output)
        return fail(msg, msgcap, GPUQ_E_TOO_LARGE, "output needs %llu bytes, over max_output %llu",
                    (unsigned long long)sz->output, (unsigned long long)lim->max_output);
    if (payload_len != sz->payload)
        return fail(msg, msgcap, GPUQ_E_SIZE_MISMATCH,
                    "payload has %llu bytes but the header implies %llu",
                    (unsigned long long)payload_len, (unsigned long long)sz->payload);
    return 0;
}

/* ---- request encode ---- */

static void kv_str(gpuq_mpw *w, uint32_t *n, const char *key, const char *val)
{
    gpuq_mpw_str(w, key);
    gpuq_mpw_str(w, val);
    (*n)++;
}

static void kv_shape(gpuq_mpw *w, uint32_t *n, const char *key, uint32_t ndim,
                     const uint64_t *shape)
{
    if (ndim > GPUQ_MAX_DIMS)
        ndim = GPUQ_MAX_DIMS;
    gpuq_mpw_str(w, key);
    gpuq_mpw_array(w, ndim);
    for (uint32_t k = 0; k < ndim; k++)
        gpuq_mpw_uint(w, shape[k]);
    (*n)++;
}

static void kv_range(gpuq_mpw *w, uint32_t *n, const char *key, double start, double stop,
                     uint64_t cnt)
{
    gpuq_mpw_str(w, key);
    gpuq_mpw_array(w, 3);
    gpuq_mpw_double(w, start);
    gpuq_mpw_double(w, stop);
    gpuq_mpw_uint(w, cnt);
    (*n)++;
}

static void kv_to(gpuq_mpw *w, uint32_t *n, const gpuq_request *req)
{
    gpuq_mpw_str(w, "to");
    gpuq_mpw_array(w, 2);
    gpuq_mpw_double(w, req->to_lat);
    gpuq_mpw_double(w, req->to_lon);
    (*n)++;
}

static void kv_double(gpuq_mpw *w, uint32_t *n, const char *key, double v)
{
    gpuq_mpw_str(w, key);
    gpuq_mpw_double(w, v);
    (*n)++;
}

/* A map's entries are counted while they are written, so its head comes
 * last: begin_map leaves headroom bytes (for the caller) plus room for the
 * largest map head (5 bytes); finish_map writes the head in its real size
 * (fixmap, map16 or map32, as msgpack-c would) just before the body and
 * closes the gap. One buffer, no copy of the body into another. */
#define MAP_HEAD_MAX 5u
#define HEADROOM_MAX 32u

static gpuq_mpw *begin_map(size_t headroom)
{
    static const uint8_t zeros[HEADROOM_MAX + MAP_HEAD_MAX];
    gpuq_mpw *w = gpuq_mpw_new();
    if (w)
        gpuq_mpw_raw(w, zeros, headroom + MAP_HEAD_MAX);
    return w;
}

static int finish_map(gpuq_mpw *w, uint32_t n, size_t headroom, uint8_t **out, size_t *outlen)
{
    uint8_t *b = NULL;
    size_t len = 0;
    int rc = gpuq_mpw_take(w, &b, &len);
    gpuq_mpw_free(w);
    if (rc != 0)
        return rc;
    uint8_t head[MAP_HEAD_MAX];
    size_t h;
    if (n < 16) {
        head[0] = (uint8_t)(0x80u | n);
        h = 1;
    } else if (n <= 0xffffu) {
        head[0] = 0xde;
        head[1] = (uint8_t)(n >> 8);
        head[2] = (uint8_t)n;
        h = 3;
    } else {
        head[0] = 0xdf;
        for (int i = 0; i < 4; i++)
            head[1 + i] = (uint8_t)(n >> (24 - 8 * i));
        h = 5;
    }
    size_t body = len - headroom - MAP_HEAD_MAX;
    memcpy(b + headroom, head, h);
    memmove(b + headroom + h, b + headroom + MAP_HEAD_MAX, body);
    *out = b;
    *outlen = headroom + h + body;
    return 0;
}

int gpuq_request_encode(const gpuq_request *req, uint8_t **out, size_t *outlen)
{
    gpuq_mpw *w = begin_map(0);
    uint32_t n = 0;
    const char *s;

    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, req->id);
    n++;
    if ((s = gpuq_op_name(req->op)) != NULL)
        kv_str(w, &n, "op", s);
    if (req->timing) {
        gpuq_mpw_str(w, "timing");
        gpuq_mpw_bool(w, true);
        n++;
    }
    if (gpuq_op_is_compute(req->op) && (s = gpuq_dtype_name(req->dtype)) != NULL)
        kv_str(w, &n, "dtype", s);

    switch (req->op) {
    case GPUQ_OP_HELLO:
        gpuq_mpw_str(w, "version");
        gpuq_mpw_uint(w, req->version);
        n++;
        if (req->client[0]) {
            char name[GPUQ_CLIENT_NAME_MAX + 1];
            memcpy(name, req->client, GPUQ_CLIENT_NAME_MAX);
            name[GPUQ_CLIENT_NAME_MAX] = '\0';
            kv_str(w, &n, "client", name);
        }
        gpuq_mpw_str(w, "priority");
        gpuq_mpw_int(w, req->priority);
        gpuq_mpw_str(w, "device");
        gpuq_mpw_int(w, req->device);
        n += 2;
        break;
    case GPUQ_OP_NORMALIZE:
        if (req->ndim_a)
            kv_shape(w, &n, "shape", req->ndim_a, req->shape_a);
        if (req->ndim_b)
            kv_shape(w, &n, "shape_b", req->ndim_b, req->shape_b);
        if ((s = gpuq_norm_method_name(req->method)) != NULL)
            kv_str(w, &n, "method", s);
        if (req->flat) {
            gpuq_mpw_str(w, "flat");
            gpuq_mpw_bool(w, true);
            n++;
        }
        if (req->zero_ok)
            kv_str(w, &n, "on_zero", "zero");
        break;
    case GPUQ_OP_HAVERSINE:
        if (req->ndim_a)
            kv_shape(w, &n, "shape", req->ndim_a, req->shape_a);
        if (req->ndim_b)
            kv_shape(w, &n, "shape_b", req->ndim_b, req->shape_b);
        if (req->has_to)
            kv_to(w, &n, req);
        kv_double(w, &n, "radius", req->radius);
        break;
    case GPUQ_OP_GRID:
        kv_range(w, &n, "lat", req->lat_start, req->lat_stop, req->lat_n);
        kv_range(w, &n, "lon", req->lon_start, req->lon_stop, req->lon_n);
        kv_to(w, &n, req);
        kv_double(w, &n, "radius", req->radius);
        break;
    case GPUQ_OP_PAIRWISE:
        if (req->ndim_a)
            kv_shape(w, &n, "shape", req->ndim_a, req->shape_a);
        if (req->ndim_b)
            kv_shape(w, &n, "shape_b", req->ndim_b, req->shape_b);
        if ((s = gpuq_metric_name(req->metric)) != NULL)
            kv_str(w, &n, "metric", s);
        if (req->zero_ok)
            kv_str(w, &n, "on_zero", "zero");
        break;
    case GPUQ_OP_KILL_SESSION:
        gpuq_mpw_str(w, "session");
        gpuq_mpw_uint(w, req->session);
        n++;
        break;
    case GPUQ_OP_SET_LIMIT: {
        char name[GPUQ_LIMIT_NAME_MAX + 1];
        memcpy(name, req->limit, GPUQ_LIMIT_NAME_MAX);
        name[GPUQ_LIMIT_NAME_MAX] = '\0';
        kv_str(w, &n, "limit", name);
        gpuq_mpw_str(w, "value");
        gpuq_mpw_uint(w, req->value);
        n++;
        break;
    }
    default:
        break;
    }
    return finish_map(w, n, 0, out, outlen);
}

/* ---- replies ---- */

enum repkey { R_ID, R_STATUS, R_CODE, R_ERROR, R_MESSAGE, R_DTYPE, R_SHAPE, R_TIMING, R_INFO,
              R_COUNT };
static const char *const rep_keys[R_COUNT] = {"id",    "status", "code",   "error", "message",
                                              "dtype", "shape",  "timing", "info"};
static const char *const timing_keys[5] = {"queue_us", "h2d_us", "kernel_us", "d2h_us",
                                           "total_us"};

static int decode_timing(gpuq_mpr *r, gpuq_timing *t, char *msg, size_t cap)
{
    uint32_t n;
    double *slots[5] = {&t->queue_us, &t->h2d_us, &t->kernel_us, &t->d2h_us, &t->total_us};

    if (gpuq_mpr_map(r, &n) != 0)
        return fail(msg, cap, GPUQ_E_BAD_HEADER, "reply \"timing\" is not a map");
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t klen;
        if (gpuq_mpr_str(r, &key, &klen) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "reply \"timing\" key is not a string");
        int idx = lookup(timing_keys, 5, key, klen);
        if (idx < 0) {
            if (gpuq_mpr_skip(r) != 0)
                return fail(msg, cap, GPUQ_E_BAD_HEADER, "reply \"timing\" value is malformed");
            continue;
        }
        if (gpuq_mpr_double(r, slots[idx]) != 0)
            return fail(msg, cap, GPUQ_E_BAD_HEADER, "reply timing \"%s\" is not a number",
                        timing_keys[idx]);
    }
    return 0;
}

int gpuq_reply_decode(const uint8_t *buf, size_t len, gpuq_reply *rep, char *msg, size_t msgcap)
{
    gpuq_mpr r;
    uint32_t n, seen = 0;
    bool is_error = false;
    int64_t code = 0;
    int name_code = GPUQ_E_INTERNAL;
    const char *s;
    uint32_t slen;
    int idx;

    memset(rep, 0, sizeof(*rep));
    if (msg && msgcap)
        msg[0] = '\0';
    gpuq_mpr_init(&r, buf, len);
    if (gpuq_mpr_map(&r, &n) != 0)
        return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply header is not a msgpack map");
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t klen;
        if (gpuq_mpr_str(&r, &key, &klen) != 0)
            return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply key %u is not a string",
                        (unsigned)k);
        idx = lookup(rep_keys, R_COUNT, key, klen);
        if (idx < 0) { /* forward compatibility: ignore unknown keys */
            if (gpuq_mpr_skip(&r) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply value of \"%.*s\" is malformed",
                            SHOWLEN(key, klen), key);
            continue;
        }
        if (seen & (1u << idx))
            return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "duplicate reply key \"%s\"",
                        rep_keys[idx]);
        seen |= 1u << idx;
        switch ((enum repkey)idx) {
        case R_ID:
            if (gpuq_mpr_uint(&r, &rep->id) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"id\" is not an unsigned int");
            break;
        case R_STATUS:
            if (gpuq_mpr_str(&r, &s, &slen) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"status\" is not a string");
            if (str_eq(s, slen, "ok"))
                is_error = false;
            else if (str_eq(s, slen, "error"))
                is_error = true;
            else
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                            "reply status \"%.*s\" is not ok or error", SHOWLEN(s, slen), s);
            break;
        case R_CODE:
            if (gpuq_mpr_int(&r, &code) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"code\" is not an int");
            break;
        case R_ERROR:
            if (gpuq_mpr_str(&r, &s, &slen) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"error\" is not a string");
            name_code = gpuq_errcode(s, slen);
            break;
        case R_MESSAGE: {
            if (gpuq_mpr_str(&r, &s, &slen) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"message\" is not a string");
            size_t m = gpuq_utf8_cut(s, slen, sizeof(rep->message) - 1);
            memcpy(rep->message, s, m);
            rep->message[m] = '\0';
            break;
        }
        case R_DTYPE:
            if (gpuq_mpr_str(&r, &s, &slen) != 0 || (idx = dtype_parse(s, slen)) < 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"dtype\" is not f32 or f64");
            rep->dtype = (gpuq_dtype)idx;
            break;
        case R_SHAPE: {
            char tmp[1];
            if (read_shape(&r, "shape", &rep->ndim, rep->shape, tmp, sizeof(tmp)) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"shape\" is malformed");
            break;
        }
        case R_TIMING: {
            int rc = decode_timing(&r, &rep->timing, msg, msgcap);
            if (rc != 0)
                return rc;
            rep->has_timing = true;
            break;
        }
        case R_INFO: {
            const uint8_t *start = r.p;
            if (gpuq_mpr_skip(&r) != 0)
                return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"info\" is malformed or too deep");
            rep->info = start;
            rep->info_len = (size_t)(r.p - start);
            break;
        }
        case R_COUNT:
            break;
        }
    }
    if (gpuq_mpr_left(&r) != 0)
        return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "%zu trailing bytes after the reply map",
                    gpuq_mpr_left(&r));
    if (!(seen & (1u << R_STATUS)))
        return fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply lacks \"status\"");
    if (is_error) {
        if (code < 0 && code >= GPUQ_E_LAST)
            rep->status = (int)code;
        else if (code < 0)
            rep->status = (int)(code < INT32_MIN ? INT32_MIN : code); /* newer server code */
        else
            rep->status = name_code;
        if (rep->status == 0)
            rep->status = GPUQ_E_INTERNAL;
    }
    return 0;
}

/* rep->message as it goes on the wire, into m[cap]: at most cap - 1 bytes
 * and valid UTF-8 whatever the message holds. Every reply passes here, so a
 * message formatted anywhere (cut by a buffer in the middle of a character,
 * or echoing bytes that are not UTF-8) cannot break a strict client: a
 * character cut at the end is dropped, other bad bytes are shown as \xHH,
 * and the result is cut on a character boundary. */
static void reply_message(const gpuq_reply *rep, char *m, size_t cap)
{
    size_t len = strnlen(rep->message, sizeof(rep->message) - 1);
    gpuq_utf8_escape(m, cap, rep->message, gpuq_utf8_cut(rep->message, len, len));
}

/* The reply header after headroom free bytes. */
static int reply_encode(const gpuq_reply *rep, size_t headroom, uint8_t **out, size_t *outlen)
{
    gpuq_mpw *w = begin_map(headroom);
    uint32_t n = 0;
    const char *s;

    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, rep->id);
    n++;
    if (rep->status != 0) {
        char m[sizeof(rep->message)];
        kv_str(w, &n, "status", "error");
        gpuq_mpw_str(w, "code");
        gpuq_mpw_int(w, rep->status);
        n++;
        kv_str(w, &n, "error", gpuq_errname(rep->status));
        reply_message(rep, m, sizeof m);
        kv_str(w, &n, "message", m[0] ? m : gpuq_strerror(rep->status));
    } else {
        kv_str(w, &n, "status", "ok");
        if (rep->ndim > 0) {
            if ((s = gpuq_dtype_name(rep->dtype)) != NULL)
                kv_str(w, &n, "dtype", s);
            kv_shape(w, &n, "shape", rep->ndim, rep->shape);
        }
    }
    if (rep->has_timing) {
        const double v[5] = {rep->timing.queue_us, rep->timing.h2d_us, rep->timing.kernel_us,
                             rep->timing.d2h_us, rep->timing.total_us};
        gpuq_mpw_str(w, "timing");
        gpuq_mpw_map(w, 5);
        for (int k = 0; k < 5; k++) {
            gpuq_mpw_str(w, timing_keys[k]);
            gpuq_mpw_double(w, v[k]);
        }
        n++;
    }
    if (rep->info && rep->info_len > 0) {
        gpuq_mpw_str(w, "info");
        gpuq_mpw_raw(w, rep->info, rep->info_len);
        n++;
    }
    return finish_map(w, n, headroom, out, outlen);
}

int gpuq_reply_encode(const gpuq_reply *rep, uint8_t **out, size_t *outlen)
{
    return reply_encode(rep, 0, out, outlen);
}

int gpuq_reply_frame(const gpuq_reply *rep, uint64_t payload_len, uint8_t **out, size_t *outlen)
{
    int rc = reply_encode(rep, GPUQ_PREFIX_SIZE, out, outlen);
    if (rc != 0)
        return rc;
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION, .kind = GPUQ_KIND_REPLY, .flags = 0,
                     .header_len = (uint32_t)(*outlen - GPUQ_PREFIX_SIZE),
                     .payload_len = payload_len};
    gpuq_prefix_encode(&p, *out);
    return 0;
}
