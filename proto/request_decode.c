/* SPDX-License-Identifier: Apache-2.0 */
/* request_decode.c - a request header from msgpack into gpuq_request.
 *
 * Only the bounded reader (mpread.c) is used, never msgpack-c's unpacker, so
 * a hostile header costs at most its own bytes. Keys are of two kinds: the
 * protocol's own (id, op, dtype, shape, shape_b, timing and the hello and
 * admin fields), taken by every op, and the op's (its key table in ops/),
 * which depend on "op". Map keys come in any order, so a first pass looks
 * for "op" only (stopping quietly at anything malformed) and the second
 * decodes every key in order, with the error the first bad key earns:
 * unknown or duplicate keys, wrong types, strings that are not UTF-8, bad
 * enum names, a key of another op (bad_argument "<op> takes no "<key>"").
 * A header refused so still names its request: the error reply carries the
 * map's "id" wherever it sits, even after the bad key (find_id).
 */
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "hdr_util.h"
#include "header.h"
#include "mpread.h"
#include "op_def.h"

enum reqkey {
    K_ID,
    K_OP,
    K_DTYPE,
    K_SHAPE,
    K_SHAPE_B,
    K_TIMING,
    K_VERSION,
    K_CLIENT,
    K_PRIORITY,
    K_DEVICE,
    K_SESSION,
    K_LIMIT,
    K_VALUE,
    K_IN,
    K_OUT,
    K_SIZE,
    K_ARENA,
    K_DEADLINE_MS,
    K_REQUEST,
    K_GATE,
    K_BYTES,
    K_NAME,
    K_ACCESS,
    K_PERSIST,
    K_PROGRESS,
    K_COUNT
};

static const char *const req_keys[K_COUNT] = {
    "id",     "op",       "dtype",   "shape",       "shape_b", "timing", "version",
    "client", "priority", "device",  "session",     "limit",   "value",  "in",
    "out",    "size",     "arena",   "deadline_ms", "request", "gate",   "bytes",
    "name",   "access",   "persist", "progress",
};

/* Op keys take seen-bits from here up. */
#define OPKEY_BIT0 32u
_Static_assert(K_COUNT <= OPKEY_BIT0 && OPKEY_BIT0 + GPUQ_MAX_OP_ARGS <= 64,
               "seen bits of common and op keys overlap");

/* Read an array of exactly n numbers into v. */
static int read_numbers(gpuq_mpr *r, const char *key, double *v, uint32_t want, char *msg,
                        size_t cap)
{
    uint32_t n;
    if (gpuq_mpr_array(r, &n) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an array of numbers", key);
    if (n != want)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "\"%s\" has %u elements; %u expected", key,
                        (unsigned)n, (unsigned)want);
    for (uint32_t k = 0; k < n; k++) {
        if (gpuq_mpr_double(r, &v[k]) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\"[%u] is not a number", key,
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
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an array [start, stop, n]",
                        key);
    if (cnt != 3)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "\"%s\" has %u elements; [start, stop, n] expected", key, (unsigned)cnt);
    if (gpuq_mpr_double(r, start) != 0 || gpuq_mpr_double(r, stop) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" start and stop must be numbers", key);
    if (gpuq_mpr_uint(r, n) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" n must be an unsigned int", key);
    return 0;
}

/* A resident array's name s[len] into dst (GPUQ_RES_NAME_MAX + 1 bytes);
 * what gives the name ("name", "in[1]") leads the message. */
static int read_name(const char *what, const char *s, uint32_t len, char *dst, char *msg,
                     size_t cap)
{
    char why[96];
    if (gpuq_name_check(s, len, why, sizeof why) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "%s: %s", what, why);
    memcpy(dst, s, len);
    dst[len] = '\0';
    return 0;
}

/* "in" / "out": an array of 1..max entries, each [arena, offset, length]
 * of unsigned ints, a resident array's name, or nil (on the wire). */
static int read_refs(gpuq_mpr *r, const char *key, gpuq_ref *refs, uint8_t *kinds,
                     char (*names)[GPUQ_RES_NAME_MAX + 1], uint32_t max, uint32_t *count, char *msg,
                     size_t cap)
{
    uint32_t n, three;
    if (gpuq_mpr_array(r, &n) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER,
                        "\"%s\" must be an array of [arena, offset, length], names or nil", key);
    if (n == 0 || n > max)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "\"%s\" has %u entries; 1 to %u expected",
                        key, (unsigned)n, (unsigned)max);
    for (uint32_t k = 0; k < n; k++) {
        gpuq_mp_type t = gpuq_mpr_peek(r);
        if (t == GPUQ_MP_NIL) {
            (void)gpuq_mpr_nil(r);
            kinds[k] = GPUQ_REF_WIRE;
            continue;
        }
        if (t == GPUQ_MP_STR) {
            const char *s;
            uint32_t len;
            char what[16];
            (void)gpuq_mpr_str(r, &s, &len);
            snprintf(what, sizeof what, "%s[%u]", key, (unsigned)k);
            int rc = read_name(what, s, len, names[k], msg, cap);
            if (rc != 0)
                return rc;
            kinds[k] = GPUQ_REF_NAME;
            continue;
        }
        if (gpuq_mpr_array(r, &three) != 0 || three != 3 || gpuq_mpr_uint(r, &refs[k].arena) != 0 ||
            gpuq_mpr_uint(r, &refs[k].offset) != 0 || gpuq_mpr_uint(r, &refs[k].length) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER,
                            "\"%s\"[%u] must be [arena, offset, length] of unsigned ints, a name "
                            "or nil",
                            key, (unsigned)k);
        kinds[k] = GPUQ_REF_ARENA;
    }
    *count = n;
    return 0;
}

static int read_str(gpuq_mpr *r, const char *key, const char **s, uint32_t *len, char *msg,
                    size_t cap)
{
    if (gpuq_mpr_str(r, s, len) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be a string", key);
    return 0;
}

static int read_bool(gpuq_mpr *r, const char *key, bool *v, char *msg, size_t cap)
{
    if (gpuq_mpr_bool(r, v) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be a bool", key);
    return 0;
}

/* "<key> \"<s>\" is not a, b or c" for an enum key. */
static int bad_enum(const gpuq_key_def *kd, const char *s, uint32_t len, char *msg, size_t cap)
{
    char list[256] = "";
    size_t at = 0;
    for (int k = 0; k < kd->nnames && at < sizeof list; k++) {
        const char *sep = k == 0 ? "" : k + 1 == kd->nnames ? " or " : ", ";
        int w = snprintf(list + at, sizeof list - at, "%s%s", sep, kd->names[k]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
    return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "%s \"%.*s\" is not %s", kd->name,
                    HDR_SHOWLEN(s, len), s, list);
}

/* The value of op key kd into *v (per its type). */
static int decode_arg(gpuq_mpr *r, const gpuq_key_def *kd, gpuq_arg *v, char *msg, size_t cap)
{
    const char *name = kd->name, *s;
    uint32_t len;
    int rc, idx;

    switch (kd->type) {
    case GPUQ_ARG_BOOL:
        return read_bool(r, name, &v->b, msg, cap);
    case GPUQ_ARG_UINT:
        if (gpuq_mpr_uint(r, &v->u) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an unsigned int", name);
        return 0;
    case GPUQ_ARG_INT:
        if (gpuq_mpr_int(r, &v->i) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be an int", name);
        return 0;
    case GPUQ_ARG_DOUBLE:
        if (gpuq_mpr_double(r, &v->d) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"%s\" must be a number", name);
        return 0;
    case GPUQ_ARG_ENUM:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        if ((idx = op_enum_lookup(kd, s, len)) < 0)
            return bad_enum(kd, s, len, msg, cap);
        v->e = idx;
        return 0;
    case GPUQ_ARG_PAIR:
        return read_numbers(r, name, v->pair, 2, msg, cap);
    case GPUQ_ARG_RANGE:
        return read_range(r, name, &v->range.start, &v->range.stop, &v->range.n, msg, cap);
    }
    return hdr_fail(msg, cap, GPUQ_E_INTERNAL, "unhandled key type");
}

/* Is key an op key of any op? */
static bool any_op_key(const char *key, uint32_t klen)
{
    for (int op = 1; op < GPUQ_OP_COUNT; op++) {
        const gpuq_op_def *d = op_def_of((gpuq_op)op);
        if (d && op_key_index(d, key, klen) >= 0)
            return true;
    }
    return false;
}

static int decode_value(gpuq_mpr *r, enum reqkey key, gpuq_request *req, char *msg, size_t cap)
{
    const char *name = req_keys[key];
    const char *s;
    uint32_t len;
    uint64_t u;
    int64_t i;
    int rc, idx;

    switch (key) {
    case K_ID:
        if (gpuq_mpr_uint(r, &req->id) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"id\" must be an unsigned int");
        return 0;
    case K_OP:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        idx = gpuq_op_parse(s, len);
        if (idx <= 0)
            return hdr_fail(msg, cap, GPUQ_E_UNKNOWN_OP, "unknown op \"%.*s\"", HDR_SHOWLEN(s, len),
                            s);
        req->op = (gpuq_op)idx;
        return 0;
    case K_DTYPE:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        idx = gpuq_dtype_parse(s, len);
        if (idx != GPUQ_DT_F32 && idx != GPUQ_DT_F64)
            return hdr_fail(msg, cap, GPUQ_E_BAD_DTYPE, "dtype \"%.*s\" is not f32 or f64",
                            HDR_SHOWLEN(s, len), s);
        req->dtype = (gpuq_dtype)idx;
        return 0;
    case K_SHAPE:
        return hdr_read_shape(r, name, &req->ndim_a, req->shape_a, msg, cap);
    case K_SHAPE_B:
        return hdr_read_shape(r, name, &req->ndim_b, req->shape_b, msg, cap);
    case K_TIMING:
        return read_bool(r, name, &req->timing, msg, cap);
    case K_VERSION:
        if (gpuq_mpr_uint(r, &u) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"version\" must be an unsigned int");
        if (u > UINT32_MAX)
            return hdr_fail(msg, cap, GPUQ_E_VERSION, "version %llu is not supported",
                            (unsigned long long)u);
        req->version = (uint32_t)u;
        return 0;
    case K_CLIENT:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        if (len > GPUQ_CLIENT_NAME_MAX)
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "client name has %u bytes; at most %u",
                            (unsigned)len, GPUQ_CLIENT_NAME_MAX);
        if (memchr(s, '\0', len))
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "client name contains a NUL byte");
        memcpy(req->client, s, len);
        req->client[len] = '\0';
        return 0;
    case K_PRIORITY:
        if (gpuq_mpr_peek(r) == GPUQ_MP_STR) {
            int p;
            (void)gpuq_mpr_str(r, &s, &len);
            if (gpuq_prio_from_name(s, len, &p) != 0)
                return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                                "priority \"%.*s\" is not low, normal or high", HDR_SHOWLEN(s, len),
                                s);
            req->priority = p;
            return 0;
        }
        if (gpuq_mpr_int(r, &i) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"priority\" must be a string or an int");
        if (i < GPUQ_PRIO_LOW || i > GPUQ_PRIO_HIGH)
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                            "priority %lld is not a level (-1 low, 0 normal, 1 high)",
                            (long long)i);
        req->priority = (int32_t)i;
        return 0;
    case K_DEVICE:
        if (gpuq_mpr_int(r, &i) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"device\" must be an int");
        if (i < -1 || i > INT32_MAX)
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "device %lld is invalid (-1 means any)",
                            (long long)i);
        req->device = (int32_t)i;
        return 0;
    case K_SESSION:
        if (gpuq_mpr_uint(r, &req->session) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"session\" must be an unsigned int");
        req->has_session = true;
        return 0;
    case K_LIMIT:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        if (len == 0 || len > GPUQ_LIMIT_NAME_MAX || memchr(s, '\0', len))
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "limit name \"%.*s\" is not a limit",
                            HDR_SHOWLEN(s, len), s);
        memcpy(req->limit, s, len);
        req->limit[len] = '\0';
        return 0;
    case K_VALUE:
        if (gpuq_mpr_uint(r, &req->value) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"value\" must be an unsigned int");
        req->has_value = true;
        return 0;
    case K_IN:
        return read_refs(r, name, req->in_ref, req->in_kind, req->in_name, GPUQ_MAX_INPUTS,
                         &req->nin_ref, msg, cap);
    case K_OUT:
        return read_refs(r, name, req->out_ref, req->out_kind, req->out_name, GPUQ_MAX_OUTPUTS,
                         &req->nout_ref, msg, cap);
    case K_NAME:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        return read_name("name", s, len, req->name, msg, cap);
    case K_PERSIST:
        return read_bool(r, name, &req->persist, msg, cap);
    case K_ACCESS:
        if ((rc = read_str(r, name, &s, &len, msg, cap)) != 0)
            return rc;
        if (hdr_str_eq(s, len, "private"))
            req->access = GPUQ_ACCESS_PRIVATE;
        else if (hdr_str_eq(s, len, "all"))
            req->access = GPUQ_ACCESS_ALL;
        else
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "access \"%.*s\" is not private or all",
                            HDR_SHOWLEN(s, len), s);
        req->has_access = true;
        return 0;
    case K_SIZE:
        if (gpuq_mpr_uint(r, &req->size) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"size\" must be an unsigned int");
        req->has_size = true;
        return 0;
    case K_ARENA:
        if (gpuq_mpr_uint(r, &req->arena) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"arena\" must be an unsigned int");
        req->has_arena = true;
        return 0;
    case K_DEADLINE_MS:
        if (gpuq_mpr_uint(r, &req->deadline_ms) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"deadline_ms\" must be an unsigned int");
        return 0;
    case K_REQUEST:
        if (gpuq_mpr_uint(r, &req->request) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"request\" must be an unsigned int");
        req->has_request = true;
        return 0;
    case K_GATE:
        return read_bool(r, name, &req->gate, msg, cap);
    case K_PROGRESS:
        return read_bool(r, name, &req->progress, msg, cap);
    case K_BYTES:
        if (gpuq_mpr_uint(r, &req->bytes) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "\"bytes\" must be an unsigned int");
        req->has_bytes = true;
        return 0;
    case K_COUNT:
        break;
    }
    return hdr_fail(msg, cap, GPUQ_E_INTERNAL, "unhandled key");
}

/* put's "name" is its output kept (out = [name]), get's its input (in =
 * [name]): the server then treats them as any request with named arrays. */
static int expand_name(gpuq_request *req, char *msg, size_t cap)
{
    if (req->op != GPUQ_OP_PUT && req->op != GPUQ_OP_GET)
        return 0;
    if (!req->name[0])
        return 0; /* refused by the op's check ("put needs "name"") */
    if (req->op == GPUQ_OP_PUT) {
        if (req->nout_ref)
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                            "put takes no \"out\" (its output is the array \"name\")");
        req->nout_ref = 1;
        req->out_kind[0] = GPUQ_REF_NAME;
        memcpy(req->out_name[0], req->name, sizeof req->name);
        return 0;
    }
    if (req->nin_ref)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                        "get takes no \"in\" (its input is the array \"name\")");
    req->nin_ref = 1;
    req->in_kind[0] = GPUQ_REF_NAME;
    memcpy(req->in_name[0], req->name, sizeof req->name);
    return 0; /* its dtype and shape: the array's (the server sets them) */
}

/* Pass 1: the op named by the first "op" key, or GPUQ_OP_NONE (absent, not
 * a known op, or the map is malformed before it: pass 2 says which). */
static gpuq_op find_op(const uint8_t *buf, size_t len)
{
    gpuq_mpr r;
    uint32_t n;
    gpuq_mpr_init(&r, buf, len);
    if (gpuq_mpr_map(&r, &n) != 0)
        return GPUQ_OP_NONE;
    for (uint32_t k = 0; k < n; k++) {
        const char *key, *s;
        uint32_t klen, slen;
        if (gpuq_mpr_str(&r, &key, &klen) != 0)
            return GPUQ_OP_NONE;
        if (hdr_str_eq(key, klen, "op")) {
            if (gpuq_mpr_str(&r, &s, &slen) != 0)
                return GPUQ_OP_NONE;
            int op = gpuq_op_parse(s, slen);
            return op > 0 ? (gpuq_op)op : GPUQ_OP_NONE;
        }
        if (gpuq_mpr_skip(&r) != 0)
            return GPUQ_OP_NONE;
    }
    return GPUQ_OP_NONE;
}

/* For a header that failed to decode: the value of its first "id" key when
 * that is an unsigned int, wherever it sits (before or after the bad key),
 * so that the error reply names the request. Other values are skipped by
 * structure alone (gpuq_mpr_skip_any: a string that is not UTF-8 is the
 * error being answered, not a reason to lose the id); false when there is
 * no such "id" or the msgpack itself breaks before it. */
static bool find_id(const uint8_t *buf, size_t len, uint64_t *id)
{
    gpuq_mpr r;
    uint32_t n;
    gpuq_mpr_init(&r, buf, len);
    if (gpuq_mpr_map(&r, &n) != 0)
        return false;
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t klen;
        if (gpuq_mpr_str(&r, &key, &klen) == 0) {
            if (hdr_str_eq(key, klen, "id"))
                return gpuq_mpr_uint(&r, id) == 0;
        } else if (gpuq_mpr_skip_any(&r) != 0) { /* a key that is no string */
            return false;
        }
        if (gpuq_mpr_skip_any(&r) != 0) /* its value */
            return false;
    }
    return false;
}

static int decode_map(const uint8_t *buf, size_t len, gpuq_request *req, char *msg, size_t msgcap)
{
    gpuq_mpr r;
    uint32_t n;
    uint64_t seen = 0; /* a bit per common key, then per op key (OPKEY_BIT0) */
    int rc;

    gpuq_request_init(req);
    req->version = 0; /* hello must say it: absent is an error, not version 1 */
    if (msg && msgcap)
        msg[0] = '\0';
    const gpuq_op_def *def = op_def_of(find_op(buf, len));
    gpuq_mpr_init(&r, buf, len);
    if (gpuq_mpr_map(&r, &n) != 0)
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                        "header is not a msgpack map (or is truncated or over a cap)");
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t klen;
        uint64_t bit;
        int idx, ok = -1;
        if (gpuq_mpr_str(&r, &key, &klen) != 0)
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "header key %u is not a %s",
                            (unsigned)k, gpuq_mpr_bad_utf8(&r) ? "valid UTF-8 string" : "string");
        idx = hdr_lookup(req_keys, K_COUNT, key, klen);
        if (idx < 0 && def)
            ok = op_key_index(def, key, klen);
        if (idx < 0 && ok < 0) {
            if (!any_op_key(key, klen))
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "unknown key \"%.*s\"",
                                HDR_SHOWLEN(key, klen), key);
            if (def)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "%s takes no \"%.*s\"", def->name,
                                HDR_SHOWLEN(key, klen), key);
            /* no known op yet: the "op" key (or its absence) is the error */
            if (gpuq_mpr_skip(&r) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "value of \"%.*s\" is malformed",
                                HDR_SHOWLEN(key, klen), key);
            continue;
        }
        const char *kname = idx >= 0 ? req_keys[idx] : def->keys[ok].name;
        bit = idx >= 0 ? (uint64_t)1 << idx : (uint64_t)1 << (OPKEY_BIT0 + (uint32_t)ok);
        if (seen & bit)
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "duplicate key \"%s\"", kname);
        seen |= bit;
        if (gpuq_mpr_bad_utf8(&r)) /* before the value is decoded, echoed or judged */
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "\"%s\" is not valid UTF-8", kname);
        if (idx >= 0)
            rc = decode_value(&r, (enum reqkey)idx, req, msg, msgcap);
        else if ((rc = decode_arg(&r, &def->keys[ok], &req->args[ok], msg, msgcap)) == 0)
            req->args_set |= 1u << ok;
        if (rc != 0)
            return rc;
    }
    if (gpuq_mpr_left(&r) != 0)
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "%zu trailing bytes after the header map",
                        gpuq_mpr_left(&r));
    if (!(seen & ((uint64_t)1 << K_ID)))
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "header lacks \"id\"");
    if (!(seen & ((uint64_t)1 << K_OP)))
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "header lacks \"op\"");
    if (req->dtype == GPUQ_DT_NONE && def)
        req->dtype = def->default_dtype;
    return expand_name(req, msg, msgcap);
}

int gpuq_request_decode(const uint8_t *buf, size_t len, gpuq_request *req, char *msg, size_t msgcap)
{
    int rc = decode_map(buf, len, req, msg, msgcap);
    uint64_t id;
    if (rc != 0 && find_id(buf, len, &id))
        req->id = id;
    return rc;
}
