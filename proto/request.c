/* SPDX-License-Identifier: Apache-2.0 */
/* request.c - a request's op arguments and its check.
 *
 * Op-specific header keys are not fields of gpuq_request: args[k] holds key
 * k of the op's key table (ops/<op>.c) when bit k of args_set is set, and
 * the key's default applies otherwise. Getters by index serve op code;
 * setters and getters by name serve clients and tests, and refuse a key the
 * op does not take. gpuq_request_check runs the common limits, then the
 * op's own check, then turns element counts into byte counts overflow-safe.
 */
#include <assert.h>
#include <string.h>

#include "errors.h"
#include "hdr_util.h"
#include "header.h"
#include "op_def.h"
#include "utf8.h"

void gpuq_request_init(gpuq_request *req)
{
    memset(req, 0, sizeof(*req));
    req->op = GPUQ_OP_NONE;
    req->dtype = GPUQ_DT_NONE;
    req->version = GPUQ_PROTO_VERSION;
    req->priority = GPUQ_PRIO_NORMAL;
    req->device = -1;
}

/* ---- by index ---- */

static const gpuq_arg *arg_at(const gpuq_request *req, unsigned k, gpuq_arg_type type)
{
    const gpuq_op_def *d = op_def_of(req->op);
    assert(d && k < d->nkeys && d->keys[k].type == type);
    (void)type;
    return (req->args_set & (1u << k)) ? &req->args[k] : &d->keys[k].def;
}

bool gpuq_request_arg_isset(const gpuq_request *req, unsigned k)
{
    return k < GPUQ_MAX_OP_ARGS && (req->args_set & (1u << k));
}

bool gpuq_request_arg_bool(const gpuq_request *req, unsigned k)
{
    return arg_at(req, k, GPUQ_ARG_BOOL)->b;
}

uint64_t gpuq_request_arg_uint(const gpuq_request *req, unsigned k)
{
    return arg_at(req, k, GPUQ_ARG_UINT)->u;
}

int64_t gpuq_request_arg_int(const gpuq_request *req, unsigned k)
{
    return arg_at(req, k, GPUQ_ARG_INT)->i;
}

double gpuq_request_arg_double(const gpuq_request *req, unsigned k)
{
    return arg_at(req, k, GPUQ_ARG_DOUBLE)->d;
}

int gpuq_request_arg_enum(const gpuq_request *req, unsigned k)
{
    return arg_at(req, k, GPUQ_ARG_ENUM)->e;
}

void gpuq_request_arg_pair(const gpuq_request *req, unsigned k, double *x, double *y)
{
    const gpuq_arg *a = arg_at(req, k, GPUQ_ARG_PAIR);
    *x = a->pair[0];
    *y = a->pair[1];
}

gpuq_arg_range gpuq_request_arg_range(const gpuq_request *req, unsigned k)
{
    return arg_at(req, k, GPUQ_ARG_RANGE)->range;
}

/* ---- by name ---- */

/* Index of key in req's op, of that type; -1 if the op does not take it. */
static int key_of(const gpuq_request *req, const char *key, gpuq_arg_type type)
{
    const gpuq_op_def *d = op_def_of(req->op);
    if (!d || !key)
        return -1;
    int k = op_key_index(d, key, strlen(key));
    return k >= 0 && d->keys[k].type == type ? k : -1;
}

static int set_arg(gpuq_request *req, const char *key, gpuq_arg_type type, gpuq_arg v)
{
    int k = key_of(req, key, type);
    if (k < 0)
        return GPUQ_E_BAD_ARGUMENT;
    req->args[k] = v;
    req->args_set |= 1u << k;
    return 0;
}

int gpuq_request_set_bool(gpuq_request *req, const char *key, bool v)
{
    return set_arg(req, key, GPUQ_ARG_BOOL, (gpuq_arg){.b = v});
}

int gpuq_request_set_uint(gpuq_request *req, const char *key, uint64_t v)
{
    return set_arg(req, key, GPUQ_ARG_UINT, (gpuq_arg){.u = v});
}

int gpuq_request_set_int(gpuq_request *req, const char *key, int64_t v)
{
    return set_arg(req, key, GPUQ_ARG_INT, (gpuq_arg){.i = v});
}

int gpuq_request_set_double(gpuq_request *req, const char *key, double v)
{
    return set_arg(req, key, GPUQ_ARG_DOUBLE, (gpuq_arg){.d = v});
}

int gpuq_request_set_enum_index(gpuq_request *req, const char *key, int idx)
{
    int k = key_of(req, key, GPUQ_ARG_ENUM);
    if (k < 0 || idx < 0 || idx >= op_def_of(req->op)->keys[k].nnames)
        return GPUQ_E_BAD_ARGUMENT;
    return set_arg(req, key, GPUQ_ARG_ENUM, (gpuq_arg){.e = idx});
}

int gpuq_request_set_enum(gpuq_request *req, const char *key, const char *name)
{
    int k = key_of(req, key, GPUQ_ARG_ENUM);
    if (k < 0 || !name)
        return GPUQ_E_BAD_ARGUMENT;
    const gpuq_key_def *kd = &op_def_of(req->op)->keys[k];
    return gpuq_request_set_enum_index(req, key, op_enum_lookup(kd, name, strlen(name)));
}

int gpuq_request_set_pair(gpuq_request *req, const char *key, double x, double y)
{
    return set_arg(req, key, GPUQ_ARG_PAIR, (gpuq_arg){.pair = {x, y}});
}

int gpuq_request_set_range(gpuq_request *req, const char *key, double start, double stop,
                           uint64_t n)
{
    return set_arg(req, key, GPUQ_ARG_RANGE, (gpuq_arg){.range = {start, stop, n}});
}

static int key_any(const gpuq_request *req, const char *key)
{
    const gpuq_op_def *d = op_def_of(req->op);
    return d && key ? op_key_index(d, key, strlen(key)) : -1;
}

int gpuq_request_unset(gpuq_request *req, const char *key)
{
    int k = key_any(req, key);
    if (k < 0)
        return GPUQ_E_BAD_ARGUMENT;
    req->args_set &= ~(1u << k);
    memset(&req->args[k], 0, sizeof req->args[k]);
    return 0;
}

bool gpuq_request_isset(const gpuq_request *req, const char *key)
{
    int k = key_any(req, key);
    return k >= 0 && (req->args_set & (1u << k));
}

bool gpuq_request_get_bool(const gpuq_request *req, const char *key)
{
    int k = key_of(req, key, GPUQ_ARG_BOOL);
    return k >= 0 && gpuq_request_arg_bool(req, (unsigned)k);
}

uint64_t gpuq_request_get_uint(const gpuq_request *req, const char *key)
{
    int k = key_of(req, key, GPUQ_ARG_UINT);
    return k >= 0 ? gpuq_request_arg_uint(req, (unsigned)k) : 0;
}

int64_t gpuq_request_get_int(const gpuq_request *req, const char *key)
{
    int k = key_of(req, key, GPUQ_ARG_INT);
    return k >= 0 ? gpuq_request_arg_int(req, (unsigned)k) : 0;
}

double gpuq_request_get_double(const gpuq_request *req, const char *key)
{
    int k = key_of(req, key, GPUQ_ARG_DOUBLE);
    return k >= 0 ? gpuq_request_arg_double(req, (unsigned)k) : 0.0;
}

int gpuq_request_get_enum(const gpuq_request *req, const char *key)
{
    int k = key_of(req, key, GPUQ_ARG_ENUM);
    return k >= 0 ? gpuq_request_arg_enum(req, (unsigned)k) : -1;
}

void gpuq_request_get_pair(const gpuq_request *req, const char *key, double *x, double *y)
{
    int k = key_of(req, key, GPUQ_ARG_PAIR);
    *x = *y = 0.0;
    if (k >= 0)
        gpuq_request_arg_pair(req, (unsigned)k, x, y);
}

gpuq_arg_range gpuq_request_get_range(const gpuq_request *req, const char *key)
{
    int k = key_of(req, key, GPUQ_ARG_RANGE);
    return k >= 0 ? gpuq_request_arg_range(req, (unsigned)k) : (gpuq_arg_range){0, 0, 0};
}

/* ---- check ---- */

/* Byte counts of a checked op: output shapes, then input, then outputs;
 * then the limits and the prefix's payload length. */
static int check_bytes(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                       gpuq_sizes *sz, uint64_t in_elems, char *msg, size_t msgcap)
{
    uint64_t out_elems[GPUQ_MAX_OUTPUTS] = {1, 1};
    gpuq_dtype in_dt = req->dtype == GPUQ_DT_NONE ? GPUQ_DT_F64 : req->dtype;

    for (uint32_t o = 0; o < sz->nout; o++) {
        for (uint32_t k = 0; k < sz->out[o].ndim; k++) {
            if (!op_mul(out_elems[o], sz->out[o].shape[k], &out_elems[o]))
                return hdr_fail(msg, msgcap, GPUQ_E_BAD_SHAPE, "output shape overflows");
        }
    }
    if (!op_mul(in_elems, gpuq_dtype_size(in_dt), &sz->payload))
        return hdr_fail(msg, msgcap, GPUQ_E_TOO_LARGE,
                        "input of %llu elements overflows a byte count",
                        (unsigned long long)in_elems);
    sz->output = 0;
    for (uint32_t o = 0; o < sz->nout; o++) {
        if (sz->out[o].dtype == GPUQ_DT_NONE)
            sz->out[o].dtype = in_dt;
        if (!op_mul(out_elems[o], gpuq_dtype_size(sz->out[o].dtype), &sz->out[o].bytes) ||
            __builtin_add_overflow(sz->output, sz->out[o].bytes, &sz->output))
            return hdr_fail(msg, msgcap, GPUQ_E_TOO_LARGE,
                            "output of %llu elements overflows a byte count",
                            (unsigned long long)out_elems[o]);
    }
    if (sz->payload > lim->max_payload)
        return hdr_fail(msg, msgcap, GPUQ_E_TOO_LARGE,
                        "input needs %llu bytes, over max_payload %llu",
                        (unsigned long long)sz->payload, (unsigned long long)lim->max_payload);
    if (sz->output > lim->max_output)
        return hdr_fail(msg, msgcap, GPUQ_E_TOO_LARGE,
                        "output needs %llu bytes, over max_output %llu",
                        (unsigned long long)sz->output, (unsigned long long)lim->max_output);
    /* the input arrays: A, then B (A is the whole input without B) */
    sz->nin = req->ndim_a == 0 ? 0 : req->ndim_b == 0 ? 1 : 2;
    if (sz->nin == 1) {
        sz->in_bytes[0] = sz->payload;
    } else if (sz->nin == 2) {
        uint64_t a = 1;
        for (uint32_t k = 0; k < req->ndim_a; k++)
            a *= req->shape_a[k]; /* A's count is a part of in_elems: no overflow */
        sz->in_bytes[0] = a * gpuq_dtype_size(in_dt);
        sz->in_bytes[1] = sz->payload - sz->in_bytes[0];
    }
    return 0;
}

gpuq_ref_kind gpuq_request_in_kind(const gpuq_request *req, unsigned k)
{
    return k < req->nin_ref && k < GPUQ_MAX_INPUTS ? (gpuq_ref_kind)req->in_kind[k] : GPUQ_REF_WIRE;
}

gpuq_ref_kind gpuq_request_out_kind(const gpuq_request *req, unsigned k)
{
    return k < req->nout_ref && k < GPUQ_MAX_OUTPUTS ? (gpuq_ref_kind)req->out_kind[k]
                                                     : GPUQ_REF_WIRE;
}

uint64_t gpuq_request_wire_in(const gpuq_request *req, const gpuq_sizes *sz)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < sz->nin && k < GPUQ_MAX_INPUTS; k++)
        if (gpuq_request_in_kind(req, k) == GPUQ_REF_WIRE)
            n += sz->in_bytes[k];
    return n;
}

uint64_t gpuq_request_wire_out(const gpuq_request *req, const gpuq_sizes *sz)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < sz->nout && k < GPUQ_MAX_OUTPUTS; k++)
        if (gpuq_request_out_kind(req, k) == GPUQ_REF_WIRE)
            n += sz->out[k].bytes;
    return n;
}

int gpuq_name_check(const char *s, size_t len, char *msg, size_t cap)
{
    if (len == 0)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "the name is empty");
    if (len > GPUQ_RES_NAME_MAX)
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "the name has %zu bytes; at most %u", len,
                        GPUQ_RES_NAME_MAX);
    if (!gpuq_utf8_valid(s, len)) /* (the decoder refuses such a string first: bad_header) */
        return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "the name is not valid UTF-8");
    for (size_t k = 0; k < len; k++) {
        uint8_t c = (uint8_t)s[k];
        if (c == '/')
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "the name contains \"/\" (byte %zu)", k);
        /* C0, DEL, and C1 (U+0080..U+009F: C2 80..C2 9F in valid UTF-8) */
        if (c < 0x20 || c == 0x7f || (c == 0xc2 && k + 1 < len && (uint8_t)s[k + 1] < 0xa0))
            return hdr_fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                            "the name contains a control character (byte %zu)", k);
    }
    return 0;
}

static bool ref_overlap(const gpuq_ref *x, const gpuq_ref *y)
{
    return x->arena == y->arena && x->length && y->length && x->offset < y->offset + y->length &&
           y->offset < x->offset + x->length;
}

/* One ref against its array: exact length, element alignment, no wrap. */
static int check_ref(const char *key, unsigned k, const gpuq_ref *ref, uint64_t bytes,
                     gpuq_dtype dt, char *msg, size_t msgcap)
{
    size_t es = gpuq_dtype_size(dt);
    if (ref->length != bytes)
        return hdr_fail(msg, msgcap, GPUQ_E_SIZE_MISMATCH,
                        "%s[%u] has length %llu but the array has %llu bytes", key, k,
                        (unsigned long long)ref->length, (unsigned long long)bytes);
    if (ref->offset > UINT64_MAX - ref->length)
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "%s[%u]: offset + length overflows", key,
                        k);
    if (es && ref->offset % es != 0)
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT,
                        "%s[%u] offset %llu is not a multiple of %zu (its element size)", key, k,
                        (unsigned long long)ref->offset, es);
    return 0;
}

/* "in" and "out" (PROTOCOL.md 3.4, 3.5): what can be judged without the
 * session's arenas and the server's resident arrays (the server checks
 * ids, bounds, names and owners); and the payload's length against what
 * travels in it. */
static int check_refs(const gpuq_request *req, const gpuq_op_def *d, uint64_t payload_len,
                      const gpuq_sizes *sz, char *msg, size_t msgcap)
{
    int rc;
    if (req->gate) {
        bool all_arena = req->nin_ref > 0;
        for (uint32_t k = 0; k < req->nin_ref && k < GPUQ_MAX_INPUTS; k++)
            all_arena = all_arena && req->in_kind[k] == GPUQ_REF_ARENA;
        if (!all_arena)
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT,
                            req->nin_ref ? "\"gate\" needs every input in an arena"
                                         : "\"gate\" needs \"in\"");
    }
    if (!(d->flags & GPUQ_OPF_COMPUTE)) {
        if (req->nin_ref || req->nout_ref)
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "%s takes no \"%s\"", d->name,
                            req->nin_ref ? "in" : "out");
        return 0;
    }
    if (!req->nin_ref && payload_len != sz->payload)
        return hdr_fail(msg, msgcap, GPUQ_E_SIZE_MISMATCH,
                        "payload has %llu bytes but the header implies %llu",
                        (unsigned long long)payload_len, (unsigned long long)sz->payload);
    if (!req->nin_ref && !req->nout_ref)
        return 0;
    gpuq_dtype in_dt = req->dtype == GPUQ_DT_NONE ? GPUQ_DT_F64 : req->dtype;
    if (req->nin_ref) {
        if (req->nin_ref != sz->nin)
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT,
                            "\"in\" has %u entries but the request has %u input arrays",
                            (unsigned)req->nin_ref, (unsigned)sz->nin);
        uint64_t wire = gpuq_request_wire_in(req, sz);
        if (payload_len != wire && wire == 0)
            return hdr_fail(msg, msgcap, GPUQ_E_SIZE_MISMATCH,
                            "payload has %llu bytes but \"in\" names the inputs (expected 0)",
                            (unsigned long long)payload_len);
        if (payload_len != wire)
            return hdr_fail(msg, msgcap, GPUQ_E_SIZE_MISMATCH,
                            "payload has %llu bytes but the inputs \"in\" leaves to it have %llu",
                            (unsigned long long)payload_len, (unsigned long long)wire);
        for (uint32_t k = 0; k < req->nin_ref; k++)
            if (req->in_kind[k] == GPUQ_REF_ARENA &&
                (rc = check_ref("in", k, &req->in_ref[k], sz->in_bytes[k], in_dt, msg, msgcap)))
                return rc;
    }
    if (req->nout_ref) {
        if (req->nout_ref != sz->nout)
            return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT,
                            "\"out\" has %u entries but %s gives %u outputs",
                            (unsigned)req->nout_ref, d->name, (unsigned)sz->nout);
        for (uint32_t k = 0; k < req->nout_ref; k++) {
            if (req->out_kind[k] == GPUQ_REF_NAME) {
                for (uint32_t j = 0; j < req->nin_ref; j++)
                    if (req->in_kind[j] == GPUQ_REF_NAME &&
                        strcmp(req->out_name[k], req->in_name[j]) == 0)
                        return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT,
                                        "out[%u] keeps the array it reads as in[%u]", (unsigned)k,
                                        (unsigned)j);
                for (uint32_t j = 0; j < k; j++)
                    if (req->out_kind[j] == GPUQ_REF_NAME &&
                        strcmp(req->out_name[k], req->out_name[j]) == 0)
                        return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT,
                                        "out[%u] and out[%u] keep the same name", (unsigned)j,
                                        (unsigned)k);
                continue;
            }
            if (req->out_kind[k] != GPUQ_REF_ARENA)
                continue;
            if ((rc = check_ref("out", k, &req->out_ref[k], sz->out[k].bytes, sz->out[k].dtype, msg,
                                msgcap)))
                return rc;
            for (uint32_t j = 0; j < req->nin_ref; j++)
                if (req->in_kind[j] == GPUQ_REF_ARENA &&
                    ref_overlap(&req->out_ref[k], &req->in_ref[j]))
                    return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "out[%u] overlaps in[%u]",
                                    (unsigned)k, (unsigned)j);
            for (uint32_t j = 0; j < k; j++)
                if (req->out_kind[j] == GPUQ_REF_ARENA &&
                    ref_overlap(&req->out_ref[k], &req->out_ref[j]))
                    return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "out[%u] overlaps out[%u]",
                                    (unsigned)k, (unsigned)j);
        }
    }
    return 0;
}

int gpuq_request_check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                       gpuq_sizes *sz, char *msg, size_t msgcap)
{
    uint64_t in_elems = 0;
    int rc;

    memset(sz, 0, sizeof(*sz));
    if (msg && msgcap)
        msg[0] = '\0';
    if (payload_len > lim->max_payload)
        return hdr_fail(msg, msgcap, GPUQ_E_TOO_LARGE,
                        "payload of %llu bytes is over max_payload %llu",
                        (unsigned long long)payload_len, (unsigned long long)lim->max_payload);
    const gpuq_op_def *d = op_def_of(req->op);
    if (!d)
        return hdr_fail(msg, msgcap, GPUQ_E_UNKNOWN_OP, "unknown op %d", (int)req->op);
    if (d->check && (rc = d->check(req, payload_len, lim, sz, &in_elems, msg, msgcap)) != 0)
        return rc;
    if (req->deadline_ms > GPUQ_MAX_DEADLINE_MS)
        return hdr_fail(msg, msgcap, GPUQ_E_BAD_ARGUMENT, "deadline_ms %llu is over %llu (one day)",
                        (unsigned long long)req->deadline_ms,
                        (unsigned long long)GPUQ_MAX_DEADLINE_MS);
    if (d->flags & GPUQ_OPF_NO_PAYLOAD) {
        if (payload_len != 0)
            return hdr_fail(msg, msgcap, GPUQ_E_SIZE_MISMATCH,
                            "%s takes no payload but got %llu bytes", d->name,
                            (unsigned long long)payload_len);
        return check_refs(req, d, payload_len, sz, msg, msgcap);
    }
    if ((rc = check_bytes(req, payload_len, lim, sz, in_elems, msg, msgcap)) != 0)
        return rc;
    return check_refs(req, d, payload_len, sz, msg, msgcap);
}
