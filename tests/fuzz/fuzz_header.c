/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_header.c - libFuzzer target for everything in proto/ that reads
 * untrusted bytes: the frame prefix, request headers (decode + check),
 * reply headers, and the JSON renderer.
 *
 * An input is a frame (a valid 20-byte prefix, then the header; the payload
 * length is the prefix's) or else a bare header (payload length: its size).
 * Beyond "never crash" it checks, and aborts on a breach (fuzz_fail):
 *  - every decode and check failure has a one-line UTF-8 message and a code
 *    PROTOCOL.md lists for that step; a prefix re-encodes to its own bytes;
 *  - a request that decode + check accept (with the prefix's payload length,
 *    or else the one the header implies): its sizes equal an independent
 *    128-bit computation, and the limits are enforced exactly at the
 *    boundary; encoded, decoded and checked again it gives the same sizes,
 *    every field its op uses comes back equal and every other field as a
 *    bare {id, op} header leaves it (req_fields, proved complete at
 *    start-up by fuzz_fields_check), and encoding again gives the same
 *    bytes;
 *  - a reply that decodes round-trips the same way (rep_fields), and
 *    gpuq_reply_frame puts that header behind a matching prefix;
 *  - JSON output is always NUL-terminated UTF-8 and, when cut short by its
 *    buffer, a prefix of the whole rendering.
 *
 * Built with -DGPUQ_FUZZ_REPLAY (fuzz_header_replay, a unit test) it gets a
 * main() that replays built-in hostile inputs and the files named on the
 * command line, each cut at every byte; after --corpus it then fails unless
 * the files brought a request of every op through gpuq_request_check and
 * both kinds of reply through the reply round trip.
 */
#include "errors.h"
#include "frame.h"
#include "gpuq_limits.h"
#include "header.h"
#include "op_def.h"
#include "mpread.h"
#include "utf8.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_fields.h"
#include "fuzz_replay.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* What the inputs reached (the replay test's coverage floor). */
static unsigned long n_accepted[GPUQ_OP_COUNT];
static unsigned long n_reply_ok, n_reply_error;

#define MSGCAP 256

/* ---- messages and codes ---- */

static void check_msg(const char *step, int rc, const char *msg, const int *allowed)
{
    bool ok = false;
    for (const int *a = allowed; *a; a++)
        ok = ok || *a == rc;
    if (!ok)
        fuzz_fail("%s returned %d (%s), not a code of that step: %s", step, rc, gpuq_errname(rc),
                  msg);
    size_t len = strnlen(msg, MSGCAP);
    if (len == 0 || len == MSGCAP)
        fuzz_fail("%s: %s with %s message", step, gpuq_errname(rc),
                  len ? "an unterminated" : "an empty");
    if (strchr(msg, '\n') || !gpuq_utf8_valid(msg, len))
        fuzz_fail("%s: message is not one line of UTF-8: %s", step, msg);
}

static const int decode_codes[] = {GPUQ_E_BAD_HEADER,
                                   GPUQ_E_UNKNOWN_OP,
                                   GPUQ_E_BAD_ARGUMENT,
                                   GPUQ_E_BAD_DTYPE,
                                   GPUQ_E_BAD_SHAPE,
                                   GPUQ_E_VERSION,
                                   0};
/* Never GPUQ_E_UNKNOWN_OP: decode has refused a request without an op. */
static const int check_codes[] = {GPUQ_E_TOO_LARGE,    GPUQ_E_SIZE_MISMATCH, GPUQ_E_VERSION,
                                  GPUQ_E_BAD_ARGUMENT, GPUQ_E_BAD_SHAPE,     GPUQ_E_EMPTY,
                                  GPUQ_E_OUT_OF_RANGE, GPUQ_E_BAD_DTYPE,     0};
static const int reply_codes[] = {GPUQ_E_BAD_HEADER, 0};

/* ---- the request's fields and what a round trip keeps of each ---- */

#define OPB(x) (1u << GPUQ_OP_##x)
#define OPS_ALL (((1u << GPUQ_OP_COUNT) - 1u) & ~1u)
#define OPS_AB (OPB(HAVERSINE) | OPB(PAIRWISE) | OPB(KNN))
#define OPS_ARRAYS (OPB(NORMALIZE) | OPS_AB | OPB(PUT) | OPB(GET))
#define OPS_COMPUTE (OPS_ARRAYS | OPB(GRID))
#define OPS_TO (OPB(HAVERSINE) | OPB(GRID))

/* rule: the ops whose requests must keep the field through encode + decode
 * (PROTOCOL.md 3.1, "used by"); arg: ops for which the encoder may set it
 * anyhow. For every other op the field must come back as a bare {id, op}
 * header leaves it: the encoder sends only the keys an op uses. */
#define RQ(member, keep, any) FUZZ_FIELD(gpuq_request, member, keep, any)
static const fuzz_field req_fields[] = {
    RQ(id, OPS_ALL, 0),
    RQ(op, OPS_ALL, 0),
    RQ(dtype, OPS_COMPUTE, 0),
    RQ(ndim_a, OPS_ARRAYS, 0),
    RQ(shape_a, OPS_ARRAYS, 0),
    RQ(ndim_b, OPS_AB, 0),
    RQ(shape_b, OPS_AB, 0),
    /* op arguments: compared by value per key below (args_equal); the
     * encoder sends some defaults, so the set-mask may gain bits */
    RQ(args_set, 0, OPS_COMPUTE),
    RQ(args, 0, OPS_COMPUTE),
    /* shared-memory refs: encoded whenever set (the check refuses them on
     * an op that is not compute) */
    RQ(nin_ref, OPS_ALL, 0),
    RQ(nout_ref, OPS_ALL, 0),
    RQ(in_ref, OPS_ALL, 0),
    RQ(out_ref, OPS_ALL, 0),
    /* resident arrays (PROTOCOL.md 3.5): entries' kinds and names, and
     * "name" and "access", encoded whenever set; put's out and get's in
     * are its name (the decoder's expansion) both ways */
    RQ(in_kind, OPS_ALL, 0),
    RQ(out_kind, OPS_ALL, 0),
    RQ(in_name, OPS_ALL, 0),
    RQ(out_name, OPS_ALL, 0),
    RQ(name, OPS_ALL, 0),
    RQ(has_access, OPS_ALL, 0),
    RQ(access, OPS_ALL, 0),
    RQ(persist, OPS_ALL, 0),
    RQ(timing, OPS_ALL, 0),
    RQ(version, OPB(HELLO), 0),
    RQ(client, OPB(HELLO), 0),
    RQ(priority, OPB(HELLO), 0),
    RQ(device, OPB(HELLO), 0),
    RQ(has_session, OPB(KILL_SESSION), 0),
    RQ(session, OPB(KILL_SESSION), 0),
    RQ(limit, OPB(SET_LIMIT), 0),
    RQ(has_value, OPB(SET_LIMIT), 0),
    RQ(value, OPB(SET_LIMIT), 0),
    /* arena_open's size, arena_close's arena: encoded whenever set */
    RQ(has_size, OPS_ALL, 0),
    RQ(size, OPS_ALL, 0),
    RQ(has_arena, OPS_ALL, 0),
    RQ(arena, OPS_ALL, 0),
    /* deadline_ms and cancel's request: encoded whenever set */
    RQ(deadline_ms, OPS_ALL, 0),
    RQ(has_request, OPS_ALL, 0),
    RQ(request, OPS_ALL, 0),
    /* the gate and ready's bytes: encoded whenever set */
    RQ(gate, OPS_ALL, 0),
    /* progress (PROTOCOL.md 4.1): encoded whenever set */
    RQ(progress, OPS_ALL, 0),
    RQ(has_bytes, OPS_ALL, 0),
    RQ(bytes, OPS_ALL, 0),
};
#define N_REQ_FIELDS (sizeof req_fields / sizeof req_fields[0])

#if defined(__LP64__)
_Static_assert(sizeof(gpuq_request) == 1240,
               "gpuq_request changed: give the new field a row in req_fields (fuzz_header.c) "
               "saying which ops keep it, then update this size");
#endif

/* An accepted request's refs (PROTOCOL.md 3.4): one per array, each of its
 * exact length, element-aligned, and no output overlapping another ref. */
static void check_accepted_refs(const gpuq_request *q, const gpuq_sizes *want)
{
    if ((q->nin_ref || q->nout_ref) && !gpuq_op_is_compute(q->op))
        fuzz_fail("%s accepted with \"in\" or \"out\"", gpuq_op_name(q->op));
    if (q->nin_ref && q->nin_ref != want->nin)
        fuzz_fail("accepted %u input refs for %u arrays", q->nin_ref, want->nin);
    if (q->nout_ref && q->nout_ref != want->nout)
        fuzz_fail("accepted %u output refs for %u outputs", q->nout_ref, want->nout);
    const gpuq_ref *all[GPUQ_MAX_INPUTS + GPUQ_MAX_OUTPUTS];
    uint32_t n = 0;
    for (uint32_t k = 0; k < q->nin_ref; k++) {
        const gpuq_ref *r = &q->in_ref[k];
        if (q->in_kind[k] != GPUQ_REF_ARENA) /* a name (checked by the server) or nil */
            continue;
        if (r->length != want->in_bytes[k] || r->offset % gpuq_dtype_size(q->dtype) ||
            r->offset + r->length < r->offset)
            fuzz_fail("in[%u] accepted with length %llu (array %llu) at offset %llu", k,
                      (unsigned long long)r->length, (unsigned long long)want->in_bytes[k],
                      (unsigned long long)r->offset);
        all[n++] = r;
    }
    for (uint32_t k = 0; k < q->nout_ref; k++) {
        const gpuq_ref *r = &q->out_ref[k];
        if (q->out_kind[k] != GPUQ_REF_ARENA)
            continue;
        if (r->length != want->out[k].bytes || r->offset % gpuq_dtype_size(want->out[k].dtype) ||
            r->offset + r->length < r->offset)
            fuzz_fail("out[%u] accepted with length %llu (array %llu) at offset %llu", k,
                      (unsigned long long)r->length, (unsigned long long)want->out[k].bytes,
                      (unsigned long long)r->offset);
        for (uint32_t j = 0; j < n; j++)
            if (r->arena == all[j]->arena && r->length && all[j]->length &&
                r->offset < all[j]->offset + all[j]->length &&
                all[j]->offset < r->offset + r->length)
                fuzz_fail("out[%u] accepted overlapping another ref", k);
        all[n++] = r;
    }
}

/* ---- the reply's fields ---- */

enum rep_rule {
    REP_SAME,    /* comes back equal */
    REP_MESSAGE, /* error: the message, or gpuq_strerror when it is empty; ok: "" */
    REP_ARRAY,   /* ok with ndim > 0: equal; else as zero */
    REP_ARRAY_B, /* ok with ndim_b > 0: equal; else as zero (the second output) */
    REP_INFO,    /* the same bytes somewhere else (info, info_len) */
};
#define RP(member, rule) FUZZ_FIELD(gpuq_reply, member, rule, 0)
static const fuzz_field rep_fields[] = {
    RP(id, REP_SAME),         RP(status, REP_SAME),     RP(started, REP_SAME),
    RP(message, REP_MESSAGE), RP(dtype, REP_ARRAY),     RP(ndim, REP_ARRAY),
    RP(shape, REP_ARRAY),     RP(dtype_b, REP_ARRAY_B), RP(ndim_b, REP_ARRAY_B),
    RP(shape_b, REP_ARRAY_B), RP(has_timing, REP_SAME), RP(timing, REP_SAME),
    RP(info, REP_INFO),       RP(info_len, REP_INFO),
};
#define N_REP_FIELDS (sizeof rep_fields / sizeof rep_fields[0])

FUZZ_DEFINE_DUMP(gpuq_request, dump_request)
FUZZ_DEFINE_DUMP(gpuq_reply, dump_reply)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_fields_check("gpuq_request", sizeof(gpuq_request), _Alignof(gpuq_request), req_fields,
                      N_REQ_FIELDS, dump_request());
    fuzz_fields_check("gpuq_reply", sizeof(gpuq_reply), _Alignof(gpuq_reply), rep_fields,
                      N_REP_FIELDS, dump_reply());
    return 0;
}

/* ---- sizes, recomputed ---- */

typedef unsigned __int128 u128;

static u128 mul_sat(u128 a, u128 b)
{
    const u128 max = ~(u128)0;
    return a && b > max / a ? max : a * b;
}

/* Op key k has the same effective value (set or default) in a and b. */
static bool args_equal(const gpuq_key_def *kd, const gpuq_request *a, const gpuq_request *b,
                       unsigned k)
{
    double x1, y1, x2, y2;
    gpuq_arg_range r1, r2;
    switch (kd->type) {
    case GPUQ_ARG_BOOL:
        return gpuq_request_arg_bool(a, k) == gpuq_request_arg_bool(b, k);
    case GPUQ_ARG_UINT:
        return gpuq_request_arg_uint(a, k) == gpuq_request_arg_uint(b, k);
    case GPUQ_ARG_INT:
        return gpuq_request_arg_int(a, k) == gpuq_request_arg_int(b, k);
    case GPUQ_ARG_DOUBLE:
        x1 = gpuq_request_arg_double(a, k), x2 = gpuq_request_arg_double(b, k);
        return memcmp(&x1, &x2, sizeof x1) == 0;
    case GPUQ_ARG_ENUM:
        return gpuq_request_arg_enum(a, k) == gpuq_request_arg_enum(b, k) &&
               gpuq_request_arg_isset(a, k) <= gpuq_request_arg_isset(b, k);
    case GPUQ_ARG_PAIR:
        gpuq_request_arg_pair(a, k, &x1, &y1);
        gpuq_request_arg_pair(b, k, &x2, &y2);
        return memcmp(&x1, &x2, sizeof x1) == 0 && memcmp(&y1, &y2, sizeof y1) == 0 &&
               gpuq_request_arg_isset(a, k) <= gpuq_request_arg_isset(b, k);
    case GPUQ_ARG_RANGE:
        r1 = gpuq_request_arg_range(a, k), r2 = gpuq_request_arg_range(b, k);
        return memcmp(&r1.start, &r2.start, sizeof(double)) == 0 &&
               memcmp(&r1.stop, &r2.stop, sizeof(double)) == 0 && r1.n == r2.n;
    }
    return false;
}

/* What gpuq_request_check must have found for an accepted request, from
 * PROTOCOL.md 3.2 in 128 bits (saturating: no accepted request gets near). */
static void sizes_oracle(const gpuq_request *q, uint64_t payload_len, const gpuq_limits *lim,
                         const gpuq_sizes *sz)
{
    gpuq_sizes want;
    u128 in = 0, out = 0, out_b = 0, ds = gpuq_dtype_size(q->dtype);
    uint64_t knn_k = 0;
    memset(&want, 0, sizeof want);
    const uint64_t *a = q->shape_a, *b = q->shape_b;
    switch (q->op) {
    case GPUQ_OP_NORMALIZE:
        if (q->ndim_a < 1 || q->ndim_a > 2 || q->ndim_b != 0)
            fuzz_fail("normalize accepted with ranks %u, %u", q->ndim_a, q->ndim_b);
        want.out_ndim = q->ndim_a;
        want.out_shape[0] = a[0];
        want.out_shape[1] = q->ndim_a == 2 ? a[1] : 0;
        want.rows = q->ndim_a == 2 && !gpuq_request_get_bool(q, "flat") ? a[0] : 1;
        want.cols = q->ndim_a == 1 ? a[0] : gpuq_request_get_bool(q, "flat") ? a[0] * a[1] : a[1];
        in = out = mul_sat(a[0], q->ndim_a == 2 ? a[1] : 1);
        break;
    case GPUQ_OP_PUT:
    case GPUQ_OP_GET: /* one array copied (get's shape: the server's) */
        if (q->ndim_a < 1 || q->ndim_a > 2 || q->ndim_b != 0)
            fuzz_fail("%s accepted with ranks %u, %u", gpuq_op_name(q->op), q->ndim_a, q->ndim_b);
        if (!q->name[0])
            fuzz_fail("%s accepted without a name", gpuq_op_name(q->op));
        want.out_ndim = q->ndim_a;
        want.out_shape[0] = a[0];
        want.out_shape[1] = q->ndim_a == 2 ? a[1] : 0;
        want.rows = a[0];
        want.cols = q->ndim_a == 2 ? a[1] : 1;
        in = out = mul_sat(a[0], q->ndim_a == 2 ? a[1] : 1);
        break;
    case GPUQ_OP_HAVERSINE:
        if (q->ndim_a != 2 || a[1] != 2 || gpuq_request_isset(q, "to") == (q->ndim_b != 0))
            fuzz_fail("haversine accepted with shape rank %u, to %d, shape_b rank %u", q->ndim_a,
                      gpuq_request_isset(q, "to"), q->ndim_b);
        if (q->ndim_b && (q->ndim_b != 2 || b[0] != a[0] || b[1] != 2))
            fuzz_fail("haversine accepted with shape_b unlike shape");
        want.out_ndim = 1;
        want.out_shape[0] = want.n = a[0];
        in = mul_sat(a[0], q->ndim_b ? 4 : 2);
        out = a[0];
        break;
    case GPUQ_OP_GRID:
        if (q->ndim_a || q->ndim_b)
            fuzz_fail("grid accepted with a shape");
        want.out_ndim = 2;
        want.out_shape[0] = want.rows = gpuq_request_get_range(q, "lat").n;
        want.out_shape[1] = want.cols = gpuq_request_get_range(q, "lon").n;
        out = mul_sat(want.rows, want.cols);
        break;
    case GPUQ_OP_PAIRWISE:
        if (q->ndim_a != 2 || q->ndim_b != 2 || a[1] != b[1])
            fuzz_fail("pairwise accepted with shapes of ranks %u, %u", q->ndim_a, q->ndim_b);
        want.out_ndim = 2;
        want.out_shape[0] = want.m = a[0];
        want.out_shape[1] = want.n = b[0];
        want.d = a[1];
        in = mul_sat((u128)a[0] + b[0], a[1]);
        out = mul_sat(a[0], b[0]);
        break;
    case GPUQ_OP_KNN: /* distances [m, k] (dtype), then indices [m, k] (i64) */
        knn_k = gpuq_request_get_uint(q, "k");
        if (q->ndim_a != 2 || q->ndim_b != 2 || a[1] != b[1])
            fuzz_fail("knn accepted with shapes of ranks %u, %u", q->ndim_a, q->ndim_b);
        if (knn_k == 0 || knn_k > b[0] || knn_k > 1024)
            fuzz_fail("knn accepted with k=%llu, n=%llu", (unsigned long long)knn_k,
                      (unsigned long long)b[0]);
        want.out_ndim = 2;
        want.out_shape[0] = want.m = a[0];
        want.out_shape[1] = knn_k;
        want.n = b[0];
        want.d = a[1];
        in = mul_sat((u128)a[0] + b[0], a[1]);
        out = out_b = mul_sat(a[0], knn_k);
        break;
    default:
        ds = 0; /* no arrays: every size is 0 */
        break;
    }
    if (gpuq_op_is_compute(q->op)) {
        if (ds == 0)
            fuzz_fail("%s accepted without a dtype", gpuq_op_name(q->op));
        for (uint32_t k = 0; k < want.out_ndim; k++)
            if (want.out_shape[k] == 0)
                fuzz_fail("%s accepted with an empty dimension", gpuq_op_name(q->op));
        if ((q->op == GPUQ_OP_PAIRWISE || q->op == GPUQ_OP_KNN) && (b[0] == 0 || b[1] == 0))
            fuzz_fail("%s accepted with an empty shape_b", gpuq_op_name(q->op));
    }
    u128 pay = mul_sat(in, ds), res_a = mul_sat(out, ds), res = res_a + mul_sat(out_b, 8);
    if (pay > lim->max_payload || res > lim->max_output)
        fuzz_fail("%s accepted with %llu input / %llu result bytes over the limits",
                  gpuq_op_name(q->op), (unsigned long long)(pay > UINT64_MAX ? UINT64_MAX : pay),
                  (unsigned long long)(res > UINT64_MAX ? UINT64_MAX : res));
    want.payload = (uint64_t)pay;
    want.output = (uint64_t)res;
    if (gpuq_op_is_compute(q->op)) {
        want.nout = 1;
        want.out_dtype = q->dtype;
        want.out_bytes = (uint64_t)res_a;
    }
    if (out_b) {
        want.nout = 2;
        want.out[1].dtype = GPUQ_DT_I64;
        want.out[1].ndim = 2;
        want.out[1].shape[0] = a[0];
        want.out[1].shape[1] = knn_k;
        want.out[1].bytes = (uint64_t)mul_sat(out_b, 8);
    }
    /* a control op's shape keys (hello with "shape") are ignored: no inputs */
    want.nin = !gpuq_op_is_compute(q->op) || q->ndim_a == 0 ? 0 : q->ndim_b == 0 ? 1 : 2;
    if (want.nin == 1)
        want.in_bytes[0] = want.payload;
    if (want.nin == 2) {
        want.in_bytes[0] = (uint64_t)mul_sat(mul_sat(a[0], a[1]), ds);
        want.in_bytes[1] = want.payload - want.in_bytes[0];
    }
    uint64_t wire = 0; /* the inputs with no "in" entry or a nil one travel in the payload */
    for (uint32_t k = 0; k < want.nin; k++)
        if (!q->nin_ref || q->in_kind[k] == GPUQ_REF_WIRE)
            wire += want.in_bytes[k];
    if (payload_len != wire)
        fuzz_fail("%s accepted with payload_len %llu, implied %llu", gpuq_op_name(q->op),
                  (unsigned long long)payload_len, (unsigned long long)wire);
    check_accepted_refs(q, &want);
    if (memcmp(&want, sz, sizeof want) != 0)
        fuzz_fail("%s: gpuq_request_check sizes payload %llu output %llu ndim %u [%llu, %llu] "
                  "rows %llu cols %llu m %llu n %llu d %llu; the protocol says payload %llu "
                  "output %llu ndim %u [%llu, %llu] rows %llu cols %llu m %llu n %llu d %llu",
                  gpuq_op_name(q->op), (unsigned long long)sz->payload,
                  (unsigned long long)sz->output, sz->out_ndim,
                  (unsigned long long)sz->out_shape[0], (unsigned long long)sz->out_shape[1],
                  (unsigned long long)sz->rows, (unsigned long long)sz->cols,
                  (unsigned long long)sz->m, (unsigned long long)sz->n, (unsigned long long)sz->d,
                  (unsigned long long)want.payload, (unsigned long long)want.output, want.out_ndim,
                  (unsigned long long)want.out_shape[0], (unsigned long long)want.out_shape[1],
                  (unsigned long long)want.rows, (unsigned long long)want.cols,
                  (unsigned long long)want.m, (unsigned long long)want.n,
                  (unsigned long long)want.d);
}

/* max_payload and max_output are enforced at exactly the request's sizes. */
static void limits_boundary(const gpuq_request *q, uint64_t payload_len, const gpuq_sizes *sz)
{
    gpuq_limits lim;
    gpuq_sizes s2;
    char msg[MSGCAP];
    gpuq_limits_default(&lim);
    lim.max_payload = sz->payload;
    lim.max_output = sz->output;
    int rc = gpuq_request_check(q, payload_len, &lim, &s2, msg, sizeof msg);
    if (rc != 0)
        fuzz_fail("%s refused with max_payload = %llu, max_output = %llu, its own sizes: %s",
                  gpuq_op_name(q->op), (unsigned long long)sz->payload,
                  (unsigned long long)sz->output, msg);
    if (sz->payload > 0) {
        lim.max_payload = sz->payload - 1;
        rc = gpuq_request_check(q, payload_len, &lim, &s2, msg, sizeof msg);
        if (rc != GPUQ_E_TOO_LARGE)
            fuzz_fail("%s with max_payload one under its payload: %d, not too_large",
                      gpuq_op_name(q->op), rc);
        lim.max_payload = sz->payload;
    }
    if (sz->output > 0) {
        lim.max_output = sz->output - 1;
        rc = gpuq_request_check(q, payload_len, &lim, &s2, msg, sizeof msg);
        if (rc != GPUQ_E_TOO_LARGE)
            fuzz_fail("%s with max_output one under its result: %d, not too_large",
                      gpuq_op_name(q->op), rc);
    }
}

/* ---- request round trip ---- */

/* A request as the bare header {"id": 0, "op": NAME} decodes. */
static void bare_request(gpuq_op op, gpuq_request *out)
{
    const char *name = gpuq_op_name(op);
    size_t n = strlen(name);
    uint8_t b[64] = {0x82, 0xa2, 'i', 'd', 0x00, 0xa2, 'o', 'p', (uint8_t)(0xa0u | n)};
    char msg[MSGCAP];
    memcpy(b + 9, name, n);
    if (gpuq_request_decode(b, 9 + n, out, msg, sizeof msg) != 0)
        fuzz_fail("bare %s header does not decode: %s", name, msg);
}

static void request_roundtrip(const gpuq_request *q, uint64_t payload_len, const gpuq_sizes *sz)
{
    gpuq_request again, bare;
    gpuq_limits lim;
    gpuq_sizes s2;
    uint8_t *b1, *b2;
    size_t n1, n2;
    char msg[MSGCAP];
    const char *name = gpuq_op_name(q->op);

    if (gpuq_request_encode(q, &b1, &n1) != 0)
        fuzz_fail("%s: encode failed", name);
    if (gpuq_request_decode(b1, n1, &again, msg, sizeof msg) != 0)
        fuzz_fail("%s: re-encoded request does not decode: %s", name, msg);
    gpuq_limits_default(&lim);
    if (gpuq_request_check(&again, payload_len, &lim, &s2, msg, sizeof msg) != 0)
        fuzz_fail("%s: re-encoded request fails the check: %s", name, msg);
    if (memcmp(&s2, sz, sizeof s2) != 0)
        fuzz_fail("%s: re-encoded request has other sizes", name);
    bare_request(q->op, &bare);
    uint32_t bit = 1u << q->op;
    for (size_t k = 0; k < N_REQ_FIELDS; k++) {
        const fuzz_field *f = &req_fields[k];
        if (f->rule & bit) {
            if (!fuzz_field_eq(f, q, &again))
                fuzz_fail("%s: \"%s\" changed in encode + decode", name, f->name);
        } else if (!(f->arg & bit) && !fuzz_field_eq(f, &bare, &again)) {
            fuzz_fail("%s: encode sent \"%s\", which %s does not use", name, f->name, name);
        }
    }
    const gpuq_op_def *def = op_def_of(q->op);
    for (unsigned k = 0; def && k < def->nkeys; k++) {
        if (!args_equal(&def->keys[k], q, &again, k))
            fuzz_fail("%s: \"%s\" changed in encode + decode", name, def->keys[k].name);
    }
    if (gpuq_request_encode(&again, &b2, &n2) != 0)
        fuzz_fail("%s: second encode failed", name);
    if (n1 != n2 || memcmp(b1, b2, n1) != 0)
        fuzz_fail("%s: encoding the decoded request gives other bytes", name);
    free(b1);
    free(b2);
}

static void one_request(const uint8_t *h, size_t hlen, uint64_t payload_len)
{
    gpuq_request q;
    gpuq_sizes sz;
    gpuq_limits lim;
    char msg[MSGCAP];
    uint8_t *b;
    size_t n;

    int rc = gpuq_request_decode(h, hlen, &q, msg, sizeof msg);
    if (rc != 0) {
        check_msg("gpuq_request_decode", rc, msg, decode_codes);
        return;
    }
    /* whatever decodes, encodes (checked or not) */
    if (gpuq_request_encode(&q, &b, &n) != 0)
        fuzz_fail("encode of a decoded request failed");
    free(b);
    gpuq_limits_default(&lim);
    rc = gpuq_request_check(&q, payload_len, &lim, &sz, msg, sizeof msg);
    if (rc == GPUQ_E_SIZE_MISMATCH) { /* then with the length the header implies */
        payload_len = sz.payload;
        rc = gpuq_request_check(&q, payload_len, &lim, &sz, msg, sizeof msg);
    }
    if (rc != 0) {
        check_msg("gpuq_request_check", rc, msg, check_codes);
        return;
    }
    n_accepted[q.op]++;
    sizes_oracle(&q, payload_len, &lim, &sz);
    limits_boundary(&q, payload_len, &sz);
    request_roundtrip(&q, payload_len, &sz);
}

/* ---- replies ---- */

static void reply_roundtrip(const gpuq_reply *rep, uint64_t payload_len)
{
    gpuq_reply again;
    uint8_t *b1, *b2, *fr;
    size_t n1, n2, nf;
    char msg[MSGCAP];
    gpuq_prefix p;

    if (gpuq_reply_encode(rep, &b1, &n1) != 0)
        fuzz_fail("reply encode failed");
    if (gpuq_reply_decode(b1, n1, &again, msg, sizeof msg) != 0)
        fuzz_fail("re-encoded reply does not decode: %s", msg);
    bool array = rep->status == 0 && rep->ndim > 0;
    for (size_t k = 0; k < N_REP_FIELDS; k++) {
        const fuzz_field *f = &rep_fields[k];
        bool ok = true;
        switch ((enum rep_rule)f->rule) {
        case REP_SAME:
            ok = fuzz_field_eq(f, rep, &again);
            break;
        case REP_MESSAGE:
            if (rep->status == 0)
                ok = again.message[0] == '\0';
            else
                ok = strcmp(again.message,
                            rep->message[0] ? rep->message : gpuq_strerror(rep->status)) == 0;
            break;
        case REP_ARRAY: {
            static const gpuq_reply zero;
            ok = fuzz_field_eq(f, array ? rep : &zero, &again);
            break;
        }
        case REP_ARRAY_B: {
            static const gpuq_reply zero;
            bool array_b = rep->status == 0 && rep->ndim_b > 0;
            ok = fuzz_field_eq(f, array_b ? rep : &zero, &again);
            break;
        }
        case REP_INFO:
            ok = (rep->info == NULL) == (again.info == NULL) && rep->info_len == again.info_len &&
                 (!rep->info || memcmp(rep->info, again.info, rep->info_len) == 0);
            break;
        }
        if (!ok)
            fuzz_fail("reply: \"%s\" changed in encode + decode", f->name);
    }
    if (gpuq_reply_encode(&again, &b2, &n2) != 0)
        fuzz_fail("second reply encode failed");
    if (n1 != n2 || memcmp(b1, b2, n1) != 0)
        fuzz_fail("encoding the decoded reply gives other bytes");
    if (gpuq_reply_frame(rep, payload_len, &fr, &nf) != 0)
        fuzz_fail("reply frame failed");
    if (nf != GPUQ_PREFIX_SIZE + n1 || gpuq_prefix_decode(fr, nf, &p) != 0 ||
        p.kind != GPUQ_KIND_REPLY || p.header_len != n1 || p.payload_len != payload_len ||
        memcmp(fr + GPUQ_PREFIX_SIZE, b1, n1) != 0)
        fuzz_fail("gpuq_reply_frame is not prefix + gpuq_reply_encode");
    free(b1);
    free(b2);
    free(fr);
}

/* ---- JSON ---- */

static void json_one(const uint8_t *v, size_t len, char *out, size_t cap, int *rc, size_t *outlen)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, v, len);
    *rc = gpuq_mpr_to_json(&r, out, cap);
    if (*rc != 0 && *rc != GPUQ_E_BAD_HEADER && *rc != GPUQ_E_TOO_LARGE)
        fuzz_fail("gpuq_mpr_to_json returned %d", *rc);
    *outlen = strnlen(out, cap);
    if (*outlen == cap)
        fuzz_fail("JSON in %zu bytes is not NUL-terminated", cap);
    if (!gpuq_utf8_valid(out, *outlen))
        fuzz_fail("JSON in %zu bytes is not UTF-8: %s", cap, out);
}

static void json_invariants(const uint8_t *v, size_t len)
{
    /* enough for any value of len bytes: at most 6 characters per byte */
    size_t cap = 8 * len + 64, full_len, small_len;
    char *full = malloc(cap), small[64];
    int rc, rc_small;
    if (!full)
        fuzz_fail("out of memory");
    json_one(v, len, full, cap, &rc, &full_len);
    if (rc == GPUQ_E_TOO_LARGE)
        fuzz_fail("JSON of %zu bytes did not fit %zu", len, cap);
    if (rc == 0) {
        const size_t caps[] = {1, 2, 7, 16, 1 + len % 63};
        for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
            json_one(v, len, small, caps[k], &rc_small, &small_len);
            if (rc_small != (full_len < caps[k] ? 0 : GPUQ_E_TOO_LARGE))
                fuzz_fail("JSON of %zu characters into %zu bytes: %d", full_len, caps[k], rc_small);
            if (memcmp(small, full, small_len) != 0)
                fuzz_fail("JSON cut to %zu bytes is not a prefix of the whole:\n  %s\n  %s",
                          caps[k], small, full);
        }
    }
    free(full);
}

static void one_header(const uint8_t *h, size_t hlen, uint64_t payload_len)
{
    gpuq_reply rep;
    char msg[MSGCAP];
    gpuq_mpr r;

    one_request(h, hlen, payload_len);
    int rc = gpuq_reply_decode(h, hlen, &rep, msg, sizeof msg);
    if (rc != 0) {
        check_msg("gpuq_reply_decode", rc, msg, reply_codes);
    } else {
        if (rep.status == 0)
            n_reply_ok++;
        else
            n_reply_error++;
        if (rep.info)
            json_invariants(rep.info, rep.info_len);
        reply_roundtrip(&rep, payload_len);
    }
    json_invariants(h, hlen);
    gpuq_mpr_init(&r, h, hlen);
    (void)gpuq_mpr_skip(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gpuq_prefix p;
    uint8_t again[GPUQ_PREFIX_SIZE];
    int rc = gpuq_prefix_decode(data, size, &p);
    if (rc == 0) {
        gpuq_prefix_encode(&p, again);
        if (memcmp(again, data, GPUQ_PREFIX_SIZE) != 0)
            fuzz_fail("a prefix that decodes re-encodes to other bytes");
        /* a whole frame: the header is what follows the prefix */
        size_t rest = size - GPUQ_PREFIX_SIZE;
        size_t hlen = p.header_len < rest ? p.header_len : rest;
        one_header(data + GPUQ_PREFIX_SIZE, hlen, p.payload_len);
    } else {
        if (rc != GPUQ_E_NEED_MORE && rc != GPUQ_E_PROTOCOL && rc != GPUQ_E_VERSION)
            fuzz_fail("gpuq_prefix_decode returned %d", rc);
        if (rc == GPUQ_E_NEED_MORE && size >= GPUQ_PREFIX_SIZE)
            fuzz_fail("need_more for a whole prefix");
        /* a bare header; payload length taken from the size */
        one_header(data, size, size);
    }
    return 0;
}

#ifdef GPUQ_FUZZ_REPLAY

struct input {
    const char *name;
    uint8_t b[48];
    size_t len;
};

#define IN(nm, ...)                                                                                \
    {                                                                                              \
        nm, {__VA_ARGS__}, sizeof((uint8_t[]){__VA_ARGS__})                                        \
    }

static const struct input builtin[] = {
    IN("array32 huge", 0xdd, 0xff, 0x00, 0x00, 0x00),
    IN("array32 max", 0xdd, 0xff, 0xff, 0xff, 0xff),
    IN("map32 max", 0xdf, 0xff, 0xff, 0xff, 0xff),
    IN("str32 max", 0xdb, 0xff, 0xff, 0xff, 0xff),
    IN("bin32 max", 0xc6, 0xff, 0xff, 0xff, 0xff),
    IN("ext32 max", 0xc9, 0xff, 0xff, 0xff, 0xff),
    IN("reserved c1", 0xc1),
    IN("deep arrays", 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x01),
    IN("deep maps", 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0xc0),
    /* ping request frame: prefix + {"id":1,"op":"ping"} */
    IN("ping frame", 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x82,
       0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g'),
    /* ok reply frame: {"id":1,"status":"ok"} */
    IN("ok reply", 'G', 'P', 'U', 'Q', 1, 2, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x82, 0xa2,
       'i', 'd', 0x01, 0xa6, 's', 't', 'a', 't', 'u', 's', 0xa2, 'o', 'k'),
    /* header_len larger than the bytes present */
    IN("short header", 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0xa2, 'i', 'd'),
    /* {"id":1,"op":"grid","lat":[-90,90,2^64-1]} */
    IN("grid huge", 0x83, 0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa4, 'g', 'r', 'i', 'd', 0xa3, 'l',
       'a', 't', 0x93, 0xd0, 0xa6, 0x5a, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
    IN("bad magic", 'G', 'P', 'U', 'X'),
};

int main(int argc, char **argv)
{
    size_t n = sizeof(builtin) / sizeof(builtin[0]);
    LLVMFuzzerInitialize(&argc, &argv);
    for (size_t k = 0; k < n; k++)
        fuzz_replay_input(builtin[k].b, builtin[k].len, 1);
    memset(n_accepted, 0, sizeof n_accepted);
    n_reply_ok = n_reply_error = 0;
    bool corpus = fuzz_take_corpus_flag(&argc, &argv);
    int files = fuzz_replay_files(argc, argv, 4096, 4096);
    if (files < 0)
        return 1;
    int missing = 0;
    if (corpus) {
        for (int op = GPUQ_OP_NONE + 1; op < GPUQ_OP_COUNT; op++) {
            if (n_accepted[op] == 0) {
                fprintf(stderr,
                        "fuzz_header_replay: no input brought a %s request through "
                        "gpuq_request_check\n",
                        gpuq_op_name((gpuq_op)op));
                missing++;
            }
        }
        if (n_reply_ok == 0 || n_reply_error == 0) {
            fprintf(stderr, "fuzz_header_replay: the files hold no %s reply\n",
                    n_reply_ok ? "error" : "ok");
            missing++;
        }
    }
    printf("fuzz_header_replay: %zu built-in inputs and %d files: %s\n", n, files,
           missing ? "FAILED" : "ok");
    return missing ? 1 : 0;
}
#endif
