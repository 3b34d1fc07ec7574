/* SPDX-License-Identifier: Apache-2.0 */
/* reply.c - reply headers: decode (client side) and encode (server side).
 *
 * The decoder is lenient where the request decoder is strict: unknown keys
 * are skipped (a newer server may add some), duplicates and wrong types are
 * errors. The encoder makes any message valid UTF-8 on one line. A reply
 * with two outputs names the second as "dtype_b"/"shape_b"; its payload is
 * output 0's bytes then output 1's, packed.
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "frame.h"
#include "hdr_util.h"
#include "header.h"
#include "mpread.h"
#include "mpwrite.h"
#include "utf8.h"

enum repkey {
    R_ID,
    R_STATUS,
    R_CODE,
    R_ERROR,
    R_MESSAGE,
    R_DTYPE,
    R_SHAPE,
    R_DTYPE_B,
    R_SHAPE_B,
    R_TIMING,
    R_INFO,
    R_COUNT
};
static const char *const rep_keys[R_COUNT] = {"id",      "status", "code",  "error",
                                              "message", "dtype",  "shape", "dtype_b",
                                              "shape_b", "timing", "info"};
static const char *const timing_keys[5] = {"queue_us", "h2d_us", "kernel_us", "d2h_us", "total_us"};

static int decode_timing(gpuq_mpr *r, gpuq_timing *t, char *msg, size_t cap)
{
    uint32_t n;
    double *slots[5] = {&t->queue_us, &t->h2d_us, &t->kernel_us, &t->d2h_us, &t->total_us};

    if (gpuq_mpr_map(r, &n) != 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "reply \"timing\" is not a map");
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t klen;
        if (gpuq_mpr_str(r, &key, &klen) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "reply \"timing\" key is not a string");
        int idx = hdr_lookup(timing_keys, 5, key, klen);
        if (idx < 0) {
            if (gpuq_mpr_skip(r) != 0)
                return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "reply \"timing\" value is malformed");
            continue;
        }
        if (gpuq_mpr_double(r, slots[idx]) != 0)
            return hdr_fail(msg, cap, GPUQ_E_BAD_HEADER, "reply timing \"%s\" is not a number",
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
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply header is not a msgpack map");
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t klen;
        if (gpuq_mpr_str(&r, &key, &klen) != 0)
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply key %u is not a string",
                            (unsigned)k);
        idx = hdr_lookup(rep_keys, R_COUNT, key, klen);
        if (idx < 0) { /* forward compatibility: ignore unknown keys */
            if (gpuq_mpr_skip(&r) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                                "reply value of \"%.*s\" is malformed", HDR_SHOWLEN(key, klen),
                                key);
            continue;
        }
        if (seen & (1u << idx))
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "duplicate reply key \"%s\"",
                            rep_keys[idx]);
        seen |= 1u << idx;
        int k_idx = idx;
        switch ((enum repkey)idx) {
        case R_ID:
            if (gpuq_mpr_uint(&r, &rep->id) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                                "reply \"id\" is not an unsigned int");
            break;
        case R_STATUS:
            if (gpuq_mpr_str(&r, &s, &slen) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"status\" is not a string");
            if (hdr_str_eq(s, slen, "ok"))
                is_error = false;
            else if (hdr_str_eq(s, slen, "error"))
                is_error = true;
            else if (hdr_str_eq(s, slen, "started")) /* a notice, not the reply (4.1) */
                rep->started = true;
            else
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                                "reply status \"%.*s\" is not ok, error or started",
                                HDR_SHOWLEN(s, slen), s);
            break;
        case R_CODE:
            if (gpuq_mpr_int(&r, &code) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"code\" is not an int");
            break;
        case R_ERROR:
            if (gpuq_mpr_str(&r, &s, &slen) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"error\" is not a string");
            name_code = gpuq_errcode(s, slen);
            break;
        case R_MESSAGE: {
            if (gpuq_mpr_str(&r, &s, &slen) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                                "reply \"message\" is not a string");
            size_t m = gpuq_utf8_cut(s, slen, sizeof(rep->message) - 1);
            memcpy(rep->message, s, m);
            rep->message[m] = '\0';
            break;
        }
        case R_DTYPE:
        case R_DTYPE_B:
            if (gpuq_mpr_str(&r, &s, &slen) != 0 || (idx = gpuq_dtype_parse(s, slen)) <= 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                                "reply \"%s\" is not f32, f64 or i64", rep_keys[k_idx]);
            *(k_idx == R_DTYPE ? &rep->dtype : &rep->dtype_b) = (gpuq_dtype)idx;
            break;
        case R_SHAPE:
        case R_SHAPE_B: {
            char tmp[1];
            bool b = k_idx == R_SHAPE_B;
            if (hdr_read_shape(&r, rep_keys[k_idx], b ? &rep->ndim_b : &rep->ndim,
                               b ? rep->shape_b : rep->shape, tmp, sizeof(tmp)) != 0)
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply \"%s\" is malformed",
                                rep_keys[k_idx]);
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
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER,
                                "reply \"info\" is malformed or too deep");
            rep->info = start;
            rep->info_len = (size_t)(r.p - start);
            break;
        }
        case R_COUNT:
            break;
        }
    }
    if (gpuq_mpr_left(&r) != 0)
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "%zu trailing bytes after the reply map",
                        gpuq_mpr_left(&r));
    if (!(seen & (1u << R_STATUS)))
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_HEADER, "reply lacks \"status\"");
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
    gpuq_mpw *w = hdr_begin_map(headroom);
    uint32_t n = 0;
    const char *s;

    if (!w)
        return GPUQ_E_NO_MEMORY;
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, rep->id);
    n++;
    if (rep->status != 0) {
        char m[sizeof(rep->message)];
        hdr_kv_str(w, &n, "status", "error");
        gpuq_mpw_str(w, "code");
        gpuq_mpw_int(w, rep->status);
        n++;
        hdr_kv_str(w, &n, "error", gpuq_errname(rep->status));
        reply_message(rep, m, sizeof m);
        hdr_kv_str(w, &n, "message", m[0] ? m : gpuq_strerror(rep->status));
    } else {
        hdr_kv_str(w, &n, "status", rep->started ? "started" : "ok");
        if (rep->ndim > 0) {
            if ((s = gpuq_dtype_name(rep->dtype)) != NULL)
                hdr_kv_str(w, &n, "dtype", s);
            hdr_kv_shape(w, &n, "shape", rep->ndim, rep->shape);
        }
        if (rep->ndim_b > 0) {
            if ((s = gpuq_dtype_name(rep->dtype_b)) != NULL)
                hdr_kv_str(w, &n, "dtype_b", s);
            hdr_kv_shape(w, &n, "shape_b", rep->ndim_b, rep->shape_b);
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
    return hdr_finish_map(w, n, headroom, out, outlen);
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
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = GPUQ_KIND_REPLY,
                     .flags = 0,
                     .header_len = (uint32_t)(*outlen - GPUQ_PREFIX_SIZE),
                     .payload_len = payload_len};
    gpuq_prefix_encode(&p, *out);
    return 0;
}
