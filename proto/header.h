/* SPDX-License-Identifier: Apache-2.0 */
/* header.h - the msgpack request and reply headers.
 *
 * A request header is a msgpack map with string keys (PROTOCOL.md lists them).
 * gpuq_request_decode reads it with the bounded reader, rejecting unknown
 * types and over-cap lengths; gpuq_request_check then validates it against the
 * limits and computes the exact payload and output sizes, before the daemon
 * accepts one payload byte. Replies are encoded with msgpack-c's packer.
 */
#ifndef GPUQ_PROTO_HEADER_H
#define GPUQ_PROTO_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuq_limits.h"
#include "op_list.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One value per line of ops/op_list.h, in its order (1 .. COUNT - 1). */
#define GPUQ_OP_ENUM_(e, n) GPUQ_OP_##e,
typedef enum gpuq_op { GPUQ_OP_NONE = 0, GPUQ_OP_LIST(GPUQ_OP_ENUM_) GPUQ_OP_COUNT } gpuq_op;
#undef GPUQ_OP_ENUM_

/* Ops that carry arrays and run on a backend (flag GPUQ_OPF_COMPUTE of the
 * op's def in ops/). */
bool gpuq_op_is_compute(gpuq_op op);
/* Ops only an admin may send (flag GPUQ_OPF_ADMIN: drain, shutdown,
 * kill_session, set_limit). */
bool gpuq_op_is_admin(gpuq_op op);

/* i64 is an output dtype only (e.g. indices); a request saying dtype "i64"
 * is bad_dtype. */
typedef enum gpuq_dtype {
    GPUQ_DT_NONE = 0,
    GPUQ_DT_F32 = 1,
    GPUQ_DT_F64 = 2,
    GPUQ_DT_I64 = 3
} gpuq_dtype;

/* Public names of the kernels' method and metric codes (GPUQ_K_* in
 * kernels/gpuq_kernel_enums.h); ops/normalize.c and ops/pairwise.c assert at
 * compile time that both agree. */
typedef enum gpuq_norm_method {
    GPUQ_NORM_SUM = 0,
    GPUQ_NORM_L1,
    GPUQ_NORM_L2,
    GPUQ_NORM_MINMAX,
    GPUQ_NORM_ZSCORE,
    GPUQ_NORM_COUNT
} gpuq_norm_method;

typedef enum gpuq_metric {
    GPUQ_METRIC_EUCLIDEAN = 0,
    GPUQ_METRIC_SQEUCLIDEAN,
    GPUQ_METRIC_COSINE,
    GPUQ_METRIC_MANHATTAN,
    GPUQ_METRIC_CHEBYSHEV, /* max |x - y| */
    GPUQ_METRIC_MINKOWSKI, /* (sum |x - y|^p)^(1/p), the request's "p" */
    GPUQ_METRIC_COUNT
} gpuq_metric;

/* Priority: one ordered scale, low < normal < high (higher = more urgent).
 * On the wire (hello "priority"), in the config file and on gpuqctl's
 * command line a level is its name or its int -1, 0, 1; any other value is
 * not a priority (bad_argument). Policy caps compare levels as ints. Each
 * backend maps a level onto its own scale (CUDA: the device's least, middle
 * and greatest stream priority). */
#define GPUQ_PRIO_LOW (-1)
#define GPUQ_PRIO_NORMAL 0
#define GPUQ_PRIO_HIGH 1

#define GPUQ_EARTH_RADIUS_KM 6371.0088

/* The value of one op-specific argument ("method", "to", "lat", ...); which
 * member is live is the key's type in the op's key table (ops/). */
typedef enum gpuq_arg_type {
    GPUQ_ARG_BOOL,
    GPUQ_ARG_UINT,
    GPUQ_ARG_INT,
    GPUQ_ARG_DOUBLE,
    GPUQ_ARG_ENUM, /* a name on the wire, its index in the key's name list here */
    GPUQ_ARG_PAIR, /* [x, y] numbers ("to": lat, lon) */
    GPUQ_ARG_RANGE /* [start, stop, n] ("lat", "lon") */
} gpuq_arg_type;

typedef struct gpuq_arg_range {
    double start, stop;
    uint64_t n;
} gpuq_arg_range;

typedef union gpuq_arg {
    bool b;
    uint64_t u;
    int64_t i;
    double d;
    int e;
    double pair[2];
    gpuq_arg_range range;
} gpuq_arg;

#define GPUQ_MAX_OP_ARGS 8u
#define GPUQ_MAX_INPUTS 2u
#define GPUQ_MAX_OUTPUTS 2u

/* A reference to bytes of a shared-memory arena (PROTOCOL.md 3.4): the
 * wire's [arena, offset, length]. */
typedef struct gpuq_ref {
    uint64_t arena;  /* the id arena_open / arena_import gave */
    uint64_t offset; /* bytes from the arena's start */
    uint64_t length; /* bytes; exactly the array's */
} gpuq_ref;

/* What one entry of "in" / "out" is (PROTOCOL.md 3.4, 3.5). */
typedef enum gpuq_ref_kind {
    GPUQ_REF_ARENA = 0, /* [arena, offset, length]: the gpuq_ref */
    GPUQ_REF_NAME = 1,  /* a resident array's name */
    GPUQ_REF_WIRE = 2   /* nil: in the request's (reply's) payload */
} gpuq_ref_kind;

/* Who may read a resident array ("access"). */
typedef enum gpuq_access { GPUQ_ACCESS_PRIVATE = 0, GPUQ_ACCESS_ALL = 1 } gpuq_access;

typedef struct gpuq_request {
    uint64_t id;
    gpuq_op op;
    /* arrays (normalize, haversine, pairwise): A then, if nb > 0, B */
    gpuq_dtype dtype;
    uint32_t ndim_a;
    uint64_t shape_a[GPUQ_MAX_DIMS];
    uint32_t ndim_b; /* 0: no second array */
    uint64_t shape_b[GPUQ_MAX_DIMS];
    /* op-specific arguments: args[k] is key k of the op's key table, valid
     * when bit k of args_set is set (else the key's default applies). Read
     * them with gpuq_request_arg_* / gpuq_request_get_*, write them with
     * gpuq_request_set_* (after setting op). */
    uint32_t args_set;
    gpuq_arg args[GPUQ_MAX_OP_ARGS];
    /* shared memory (compute ops): nin_ref refs name the input arrays in
     * order (0: the payload carries them), nout_ref the outputs (0: the reply
     * carries them). */
    uint32_t nin_ref, nout_ref;
    gpuq_ref in_ref[GPUQ_MAX_INPUTS];
    gpuq_ref out_ref[GPUQ_MAX_OUTPUTS];
    /* each entry's kind (GPUQ_REF_ARENA unless set); a GPUQ_REF_NAME
     * entry's name is in_name[k] / out_name[k] */
    uint8_t in_kind[GPUQ_MAX_INPUTS], out_kind[GPUQ_MAX_OUTPUTS];
    char in_name[GPUQ_MAX_INPUTS][GPUQ_RES_NAME_MAX + 1];
    char out_name[GPUQ_MAX_OUTPUTS][GPUQ_RES_NAME_MAX + 1];
    /* put, get, remove: the resident array ("name"; "" unset). The decoder
     * turns put's into out = [name] and get's into in = [name]. */
    char name[GPUQ_RES_NAME_MAX + 1];
    /* put, kept outputs: "access" (GPUQ_ACCESS_*), and "persist": kept
     * under the server's state directory too */
    bool has_access;
    uint8_t access;
    bool persist;
    /* any op */
    bool timing; /* reply carries "timing" */
    /* hello */
    uint32_t version;
    char client[GPUQ_CLIENT_NAME_MAX + 1];
    int32_t priority;
    int32_t device; /* -1: server chooses */
    /* kill_session */
    bool has_session;
    uint64_t session; /* the session id to close */
    /* set_limit */
    char limit[GPUQ_LIMIT_NAME_MAX + 1]; /* a gpuq_limits field name ("" unset) */
    bool has_value;
    uint64_t value;
    /* arena_open: "size"; arena_close: "arena" */
    bool has_size;
    uint64_t size;
    bool has_arena;
    uint64_t arena;
    /* compute ops: answer deadline_exceeded unless finished within this
     * many ms of the header's arrival (0: no deadline; at most
     * GPUQ_MAX_DEADLINE_MS) */
    uint64_t deadline_ms;
    /* cancel, ready: the id of the request to cancel, or whose input is
     * announced ("request") */
    bool has_request;
    uint64_t request;
    /* compute ops: the inputs (in arenas) are in place only as far as
     * ready requests say ("gate"; PROTOCOL.md 3.4) */
    bool gate;
    /* compute ops: the server sends a "started" frame when the request
     * starts running ("progress"; PROTOCOL.md 4.1) */
    bool progress;
    /* ready: input bytes in place ("bytes") */
    bool has_bytes;
    uint64_t bytes;
} gpuq_request;

/* One output array of a checked request. */
typedef struct gpuq_out {
    gpuq_dtype dtype;
    uint32_t ndim;
    uint64_t shape[GPUQ_MAX_DIMS];
    uint64_t bytes;
} gpuq_out;

/* Sizes implied by a checked request. An op has up to two outputs; they
 * follow each other packed (out[1] at byte out[0].bytes) in the staging
 * slot and in the reply's payload. */
typedef struct gpuq_sizes {
    uint64_t payload;                   /* input bytes: A then B (in the payload, or in arenas) */
    uint32_t nin;                       /* input arrays: 0 (grid, control ops), 1 (A) or 2 (A, B) */
    uint64_t in_bytes[GPUQ_MAX_INPUTS]; /* A's bytes, B's bytes */
    uint64_t output;                    /* result bytes: out[0].bytes + out[1].bytes */
    uint32_t nout;                      /* outputs in use: 0 (control ops), 1 or 2 */
    union {
        gpuq_out out[GPUQ_MAX_OUTPUTS];
        struct { /* out[0] under its older names */
            gpuq_dtype out_dtype;
            uint32_t out_ndim;
            uint64_t out_shape[GPUQ_MAX_DIMS];
            uint64_t out_bytes;
        };
    };
    uint64_t scratch; /* device scratch bytes the op needs (CUDA) */
    /* op geometry: normalize rows x cols; haversine n; grid lat_n x lon_n;
     * pairwise m x n x d */
    uint64_t rows, cols, m, n, d;
} gpuq_sizes;

/* Reset *req: no op, no arguments set (each op key's default applies),
 * version GPUQ_PROTO_VERSION, priority normal, device -1. */
void gpuq_request_init(gpuq_request *req);

/* ---- op arguments ----
 * By index k into the op's key table (op code in ops/, which names its keys
 * with an enum): the value when set, else the key's default. The type must
 * be the key's (asserted). */
bool gpuq_request_arg_isset(const gpuq_request *req, unsigned k);
bool gpuq_request_arg_bool(const gpuq_request *req, unsigned k);
uint64_t gpuq_request_arg_uint(const gpuq_request *req, unsigned k);
int64_t gpuq_request_arg_int(const gpuq_request *req, unsigned k);
double gpuq_request_arg_double(const gpuq_request *req, unsigned k);
int gpuq_request_arg_enum(const gpuq_request *req, unsigned k);
void gpuq_request_arg_pair(const gpuq_request *req, unsigned k, double *x, double *y);
gpuq_arg_range gpuq_request_arg_range(const gpuq_request *req, unsigned k);

/* By key name, for clients, gpuqctl and tests; req->op must be set first.
 * Setters check the key against the op's table (the op takes that key, of
 * that type; an enum name or index is one of the key's) and return 0 or
 * GPUQ_E_BAD_ARGUMENT, leaving req unchanged on error. Getters return the
 * key's value or default; for a key the op does not take (or of another
 * type) they return 0 / false / -1 (enum). */
int gpuq_request_set_bool(gpuq_request *req, const char *key, bool v);
int gpuq_request_set_uint(gpuq_request *req, const char *key, uint64_t v);
int gpuq_request_set_int(gpuq_request *req, const char *key, int64_t v);
int gpuq_request_set_double(gpuq_request *req, const char *key, double v);
int gpuq_request_set_enum(gpuq_request *req, const char *key, const char *name);
int gpuq_request_set_enum_index(gpuq_request *req, const char *key, int idx);
int gpuq_request_set_pair(gpuq_request *req, const char *key, double x, double y);
int gpuq_request_set_range(gpuq_request *req, const char *key, double start, double stop,
                           uint64_t n);
/* Back to the default (and not encoded). 0 or GPUQ_E_BAD_ARGUMENT. */
int gpuq_request_unset(gpuq_request *req, const char *key);
bool gpuq_request_isset(const gpuq_request *req, const char *key);
bool gpuq_request_get_bool(const gpuq_request *req, const char *key);
uint64_t gpuq_request_get_uint(const gpuq_request *req, const char *key);
int64_t gpuq_request_get_int(const gpuq_request *req, const char *key);
double gpuq_request_get_double(const gpuq_request *req, const char *key);
int gpuq_request_get_enum(const gpuq_request *req, const char *key);
void gpuq_request_get_pair(const gpuq_request *req, const char *key, double *x, double *y);
gpuq_arg_range gpuq_request_get_range(const gpuq_request *req, const char *key);

/* Decode a header. On error returns a GPUQ_E_* code and writes a one-line
 * reason into msg[msgcap]. req->id is then still the header's "id" when the
 * map holds one as an unsigned int, before or after the bad key, so the
 * error reply names the request (0 if absent, not an unsigned int, or past
 * where the msgpack itself breaks). Unknown keys are an error; a key of
 * another op is bad_argument "<op> takes no \"<key>\"". The op's keys
 * depend on "op", which may come anywhere in the map: a first pass finds it,
 * the second decodes. */
int gpuq_request_decode(const uint8_t *buf, size_t len, gpuq_request *req, char *msg,
                        size_t msgcap);

/* Validate a decoded request: dtype, ranks, shapes (overflow-safe), method,
 * ranges of scalar arguments, and sizes against *lim. payload_len is the
 * prefix's. Fills *sz. Returns 0 or a code with msg. Data-dependent checks
 * (latitudes inside the payload, zero norms) are the ops'. */
int gpuq_request_check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                       gpuq_sizes *sz, char *msg, size_t msgcap);

/* Write key and refs[0..count) as [[arena, offset, length], ...] ("in",
 * "out": PROTOCOL.md 3.4) into w: the encoder's and libgpuq's. kinds and
 * names (NULL: every entry an arena range) make an entry a name (str) or
 * nil (GPUQ_REF_WIRE) instead. */
struct gpuq_mpw;
void gpuq_refs_write(struct gpuq_mpw *w, const char *key, const gpuq_ref *refs, uint32_t count,
                     const uint8_t *kinds, const char (*names)[GPUQ_RES_NAME_MAX + 1]);

/* Is s[len] a valid resident array name (PROTOCOL.md 3.5)? 0, or
 * GPUQ_E_BAD_ARGUMENT with the reason in msg ("name is empty", ...). */
int gpuq_name_check(const char *s, size_t len, char *msg, size_t cap);

/* Bytes of a checked request's inputs that travel in its payload (those
 * with no "in", or a nil entry), and of its outputs in the reply's
 * payload (no "out", or a nil entry). */
uint64_t gpuq_request_wire_in(const gpuq_request *req, const gpuq_sizes *sz);
uint64_t gpuq_request_wire_out(const gpuq_request *req, const gpuq_sizes *sz);
/* Entry k of "in" / "out" as a kind: GPUQ_REF_WIRE when the request has
 * no such key. */
gpuq_ref_kind gpuq_request_in_kind(const gpuq_request *req, unsigned k);
gpuq_ref_kind gpuq_request_out_kind(const gpuq_request *req, unsigned k);

/* Encode a request header with msgpack-c into a malloc'd buffer (owned by the
 * caller, free()). Returns 0 or GPUQ_E_NO_MEMORY. */
int gpuq_request_encode(const gpuq_request *req, uint8_t **out, size_t *outlen);

/* Names of ops/methods/metrics/dtypes on the wire; NULL for invalid. */
const char *gpuq_op_name(gpuq_op op);
const char *gpuq_dtype_name(gpuq_dtype dt);
const char *gpuq_norm_method_name(gpuq_norm_method m);
const char *gpuq_metric_name(gpuq_metric m);
size_t gpuq_dtype_size(gpuq_dtype dt);
/* Reverse lookups: return -1 for unknown names. */
int gpuq_op_parse(const char *s, size_t len);
/* Any dtype name, i64 included (a request's "dtype" also refuses i64). */
int gpuq_dtype_parse(const char *s, size_t len);
int gpuq_norm_method_parse(const char *s, size_t len);
/* A metric's name or one of its aliases ("cityblock", "l1": manhattan;
 * "l2": euclidean; PROTOCOL.md). */
int gpuq_metric_parse(const char *s, size_t len);
/* Priority levels: "low", "normal", "high"; NULL for an int that is not a
 * level. gpuq_prio_from_name takes a name of len bytes (the wire's string
 * form); gpuq_prio_parse a NUL-terminated name or int ("-1", "0", "1": the
 * config file's and gpuqctl's form). Both: 0 with *prio set, or
 * GPUQ_E_BAD_ARGUMENT. */
const char *gpuq_prio_name(int prio);
int gpuq_prio_from_name(const char *s, size_t len, int *prio);
int gpuq_prio_parse(const char *s, int *prio);

/* ---- replies ---- */

typedef struct gpuq_timing {
    double queue_us, h2d_us, kernel_us, d2h_us, total_us;
} gpuq_timing;

/* Decoded common part of a reply header; extra keys (hello/status "info") are
 * left for the caller: info/info_len point into the buffer at the msgpack value
 * of key "info" (or NULL). */
typedef struct gpuq_reply {
    uint64_t id;
    int status; /* 0 or GPUQ_E_* */
    /* status "started" (status 0): not the reply but the notice that
     * request id, sent with "progress", started running (PROTOCOL.md 4.1);
     * its reply follows */
    bool started;
    char message[256];
    gpuq_dtype dtype;
    uint32_t ndim;
    uint64_t shape[GPUQ_MAX_DIMS];
    /* the second output, when the op has one (ndim_b > 0): "dtype_b" and
     * "shape_b"; the payload is output 0's bytes then output 1's, packed */
    gpuq_dtype dtype_b;
    uint32_t ndim_b;
    uint64_t shape_b[GPUQ_MAX_DIMS];
    bool has_timing;
    gpuq_timing timing;
    const uint8_t *info;
    size_t info_len;
} gpuq_reply;

int gpuq_reply_decode(const uint8_t *buf, size_t len, gpuq_reply *rep, char *msg, size_t msgcap);

/* Encode a reply header: id, status, and on error "error" (name), "code",
 * "message"; on success dtype/shape when ndim > 0, dtype_b/shape_b when
 * ndim_b > 0, timing when has_timing,
 * and rep->info (a complete msgpack value, copied raw) under key "info".
 * *out is malloc'd and owned by the caller. */
int gpuq_reply_encode(const gpuq_reply *rep, uint8_t **out, size_t *outlen);
/* The same header behind its 20-byte frame prefix (kind reply, the given
 * payload_len), in one malloc'd buffer ready to write. */
int gpuq_reply_frame(const gpuq_reply *rep, uint64_t payload_len, uint8_t **out, size_t *outlen);

#ifdef __cplusplus
}
#endif

#endif
