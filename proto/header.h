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

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpuq_op {
    GPUQ_OP_NONE = 0,
    GPUQ_OP_HELLO,
    GPUQ_OP_PING,
    GPUQ_OP_STATUS,
    GPUQ_OP_NORMALIZE,
    GPUQ_OP_HAVERSINE,
    GPUQ_OP_GRID,
    GPUQ_OP_PAIRWISE,
    /* observability: the reply's payload is a document (info "format") */
    GPUQ_OP_SESSIONS,
    GPUQ_OP_METRICS,
    /* admin only (root or the configured admin group) */
    GPUQ_OP_DRAIN,
    GPUQ_OP_SHUTDOWN,
    GPUQ_OP_KILL_SESSION,
    GPUQ_OP_SET_LIMIT,
    GPUQ_OP_COUNT
} gpuq_op;

/* Ops that carry arrays and run on a backend (normalize .. pairwise). */
bool gpuq_op_is_compute(gpuq_op op);
/* Ops only an admin may send (drain, shutdown, kill_session, set_limit). */
bool gpuq_op_is_admin(gpuq_op op);

typedef enum gpuq_dtype { GPUQ_DT_NONE = 0, GPUQ_DT_F32 = 1, GPUQ_DT_F64 = 2 } gpuq_dtype;

typedef enum gpuq_norm_method {
    GPUQ_NORM_SUM = 0, GPUQ_NORM_L1, GPUQ_NORM_L2, GPUQ_NORM_MINMAX, GPUQ_NORM_ZSCORE,
    GPUQ_NORM_COUNT
} gpuq_norm_method;

typedef enum gpuq_metric {
    GPUQ_METRIC_EUCLIDEAN = 0, GPUQ_METRIC_SQEUCLIDEAN, GPUQ_METRIC_COSINE, GPUQ_METRIC_MANHATTAN,
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

typedef struct gpuq_request {
    uint64_t id;
    gpuq_op op;
    /* arrays (normalize, haversine, pairwise): A then, if nb > 0, B */
    gpuq_dtype dtype;
    uint32_t ndim_a;
    uint64_t shape_a[GPUQ_MAX_DIMS];
    uint32_t ndim_b;            /* 0: no second array */
    uint64_t shape_b[GPUQ_MAX_DIMS];
    /* normalize */
    gpuq_norm_method method;
    bool flat;
    bool zero_ok;               /* "on_zero":"zero" -> zero output instead of error */
    /* pairwise */
    gpuq_metric metric;
    /* haversine / grid */
    bool has_to;
    double to_lat, to_lon;
    double radius;              /* default GPUQ_EARTH_RADIUS_KM */
    double lat_start, lat_stop, lon_start, lon_stop;
    uint64_t lat_n, lon_n;
    /* any op */
    bool timing;                /* reply carries "timing" */
    /* hello */
    uint32_t version;
    char client[GPUQ_CLIENT_NAME_MAX + 1];
    int32_t priority;
    int32_t device;             /* -1: server chooses */
    /* kill_session */
    bool has_session;
    uint64_t session;           /* the session id to close */
    /* set_limit */
    char limit[GPUQ_LIMIT_NAME_MAX + 1]; /* a gpuq_limits field name ("" unset) */
    bool has_value;
    uint64_t value;
} gpuq_request;

/* Sizes implied by a checked request. */
typedef struct gpuq_sizes {
    uint64_t payload;           /* exact input bytes expected */
    uint64_t output;            /* result bytes */
    uint32_t out_ndim;
    uint64_t out_shape[GPUQ_MAX_DIMS];
    /* op geometry: normalize rows x cols; haversine n; grid lat_n x lon_n;
     * pairwise m x n x d */
    uint64_t rows, cols, m, n, d;
} gpuq_sizes;

/* Reset *req to defaults (radius, grid defaults 1000x1000 to (30,101), device -1). */
void gpuq_request_init(gpuq_request *req);

/* Decode a header. On error returns a GPUQ_E_* code and writes a one-line
 * reason into msg[msgcap]. req->id is filled as soon as "id" is read, so the
 * error reply can name it (0 if absent). Unknown keys are an error. */
int gpuq_request_decode(const uint8_t *buf, size_t len, gpuq_request *req, char *msg,
                        size_t msgcap);

/* Validate a decoded request: dtype, ranks, shapes (overflow-safe), method,
 * ranges of scalar arguments, and sizes against *lim. payload_len is the
 * prefix's. Fills *sz. Returns 0 or a code with msg. Data-dependent checks
 * (latitudes inside the payload, zero norms) are the ops'. */
int gpuq_request_check(const gpuq_request *req, uint64_t payload_len, const gpuq_limits *lim,
                       gpuq_sizes *sz, char *msg, size_t msgcap);

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
int gpuq_norm_method_parse(const char *s, size_t len);
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
    int status;                 /* 0 or GPUQ_E_* */
    char message[256];
    gpuq_dtype dtype;
    uint32_t ndim;
    uint64_t shape[GPUQ_MAX_DIMS];
    bool has_timing;
    gpuq_timing timing;
    const uint8_t *info;
    size_t info_len;
} gpuq_reply;

int gpuq_reply_decode(const uint8_t *buf, size_t len, gpuq_reply *rep, char *msg, size_t msgcap);

/* Encode a reply header: id, status, and on error "error" (name), "code",
 * "message"; on success dtype/shape when ndim > 0, timing when has_timing,
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
