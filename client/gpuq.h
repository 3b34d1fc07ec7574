/* gpuq.h - libgpuq, the C client of gpuqd.
 *
 * A gpuq_conn is one session: connect, hello (done by gpuq_connect), then
 * either blocking calls (one per op) or pipelined submit/wait. No global
 * state; a connection is used from one thread at a time. Every function
 * returns 0 or a negative GPUQ_E_* code; gpuq_errmsg() gives the last error's
 * one-line message (the server's, when the server sent one).
 *
 * Arrays are C-order float32/float64 in host memory; results are written into
 * buffers the caller provides (sizes are computed by gpuq_result_size()).
 */
#ifndef GPUQ_H
#define GPUQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "header.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpuq_conn gpuq_conn;

typedef struct gpuq_connect_opts {
    const char *socket_path;  /* NULL: $GPUQ_SOCKET, $XDG_RUNTIME_DIR/gpuq/gpuqd.sock, /run/gpuq/gpuqd.sock */
    const char *client_name;  /* NULL: "libgpuq"; UTF-8 (else GPUQ_E_BAD_ARGUMENT), cut to 64 bytes
                                 on a character boundary */
    int priority;             /* GPUQ_PRIO_LOW/NORMAL/HIGH (-1/0/1); else bad_argument */
    int device;               /* -1: server chooses */
} gpuq_connect_opts;

/* What the server said in its hello reply. */
typedef struct gpuq_server_info {
    uint32_t version;
    char server[64];          /* "gpuqd 0.1.0" */
    char backend[16];         /* "cpu" or "cuda" */
    uint64_t session_id;
    int priority_granted;     /* level after the server's policy cap (GPUQ_PRIO_*) */
    int stream_priority;      /* its CUDA stream priority (lower = more urgent; 0 on CPU) */
    int device;               /* device index the session was placed on (-1: cpu) */
    bool admin;               /* the server counts this peer as an admin */
    gpuq_limits limits;       /* max_inflight and session_staging: this session's caps */
} gpuq_server_info;

/* Resolve the default socket path into buf. Returns 0 or GPUQ_E_TOO_LARGE. */
int gpuq_default_socket(char *buf, size_t cap);

/* Connect and do the hello exchange. *out is owned by the caller (gpuq_close).
 * On failure *out is NULL (out of memory) or a dead connection kept only so
 * gpuq_errmsg(*out) can explain ("cannot connect to PATH: ..."); close it too.
 * A connection the server refuses returns the server's code and message
 * (GPUQ_E_BUSY, "busy: 256 sessions open (the limit)"), also when the server
 * closed before the hello could be sent. */
int gpuq_connect(const gpuq_connect_opts *opts, gpuq_conn **out);
void gpuq_close(gpuq_conn *c);
const gpuq_server_info *gpuq_info(const gpuq_conn *c);
const char *gpuq_errmsg(const gpuq_conn *c);

/* ---- generic request (pipelined) ----
 * Fill a gpuq_request (gpuq_request_init, then op fields; id is assigned by
 * gpuq_submit). Payload: the input arrays' bytes, A then B, borrowed until
 * gpuq_submit returns. The result is written into out (borrowed until the
 * matching gpuq_wait returns; out_cap bytes). Replies come in request order. */
int gpuq_submit(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
                size_t b_len, void *out, size_t out_cap, uint64_t *id_out);
/* Wait for the oldest outstanding request. *rep gets its reply header
 * (rep->info is NULL: use gpuq_status_json for info); returns rep->status. */
int gpuq_wait(gpuq_conn *c, gpuq_reply *rep);
/* Number of submitted, not yet waited requests. */
unsigned gpuq_pending(const gpuq_conn *c);

/* ---- blocking calls ----
 * A blocking call needs gpuq_pending() == 0 (else GPUQ_E_BUSY). */

/* Submit req and wait for its reply: the generic blocking call. out_cap is
 * the exact result size; a successful reply of another size is
 * GPUQ_E_SIZE_MISMATCH. *rep (may be NULL) gets the reply header. */
int gpuq_call(gpuq_conn *c, gpuq_request *req, const void *a, size_t a_len, const void *b,
              size_t b_len, void *out, size_t out_cap, gpuq_reply *rep);

int gpuq_ping(gpuq_conn *c);
/* Status reply's "info" value as raw msgpack: *info points into c's buffer,
 * valid until the next call on c. */
int gpuq_status_info(gpuq_conn *c, const uint8_t **info, size_t *len);
/* Status as JSON text into buf. */
int gpuq_status_json(gpuq_conn *c, char *buf, size_t cap);

/* ---- observability ----
 * Documents whose size only the server knows: *doc / *text is malloc'd
 * (NUL-terminated; the caller frees it) and *len its length.
 * Sessions: a msgpack stream of maps, one per session (all sessions for an
 * admin, else the caller's uid's; PROTOCOL.md lists the keys); *count their
 * number. Metrics: the Prometheus text exposition format 0.0.4. */
int gpuq_sessions(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count);
int gpuq_metrics(gpuq_conn *c, char **text, size_t *len);

/* ---- administration (root or the admin group; else GPUQ_E_PERMISSION) ----
 * drain: no new sessions; gpuqd exits 0 when the open ones have closed.
 * shutdown: as SIGTERM; accepted requests are answered, then gpuqd exits 0.
 * kill_session: close another session (its in-flight work is dropped).
 * set_limit: change one limit by name (gpuq_limits field) until the next
 * restart or SIGHUP reload; *old (may be NULL) gets the previous value. */
int gpuq_drain(gpuq_conn *c);
int gpuq_shutdown(gpuq_conn *c);
int gpuq_kill_session(gpuq_conn *c, uint64_t session_id);
int gpuq_set_limit(gpuq_conn *c, const char *name, uint64_t value, uint64_t *old);

/* rows == 1 for a 1-D array; flat treats rows x cols as one array. */
int gpuq_normalize(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, bool flat,
                   const void *in, uint64_t rows, uint64_t cols, int ndim, void *out);
int gpuq_haversine_to(gpuq_conn *c, gpuq_dtype dt, const void *pts, uint64_t n, double lat,
                      double lon, double radius, void *out);
int gpuq_haversine_pair(gpuq_conn *c, gpuq_dtype dt, const void *a, const void *b, uint64_t n,
                        double radius, void *out);
int gpuq_grid(gpuq_conn *c, gpuq_dtype dt, double lat0, double lat1, uint64_t nlat, double lon0,
              double lon1, uint64_t nlon, double lat, double lon, double radius, void *out);
int gpuq_pairwise(gpuq_conn *c, gpuq_dtype dt, gpuq_metric metric, const void *x, const void *y,
                  uint64_t m, uint64_t n, uint64_t d, void *out);

/* ---- low level, for tests: raw frames ----
 * Send an arbitrary prefix+header+payload and read one reply frame. */
int gpuq_send_raw(gpuq_conn *c, const void *buf, size_t len);
int gpuq_recv_reply(gpuq_conn *c, gpuq_reply *rep, void *out, size_t out_cap);

#ifdef __cplusplus
}
#endif
#endif
