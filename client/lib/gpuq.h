/* SPDX-License-Identifier: Apache-2.0 */
/* gpuq.h - libgpuq, the C client of gpuqd.
 *
 * A gpuq_conn is one session: connect, hello (done by gpuq_connect), then
 * either blocking calls or pipelined submit/wait. No global state; a
 * connection is used from one thread at a time. Every function returns 0 or a
 * negative GPUQ_E_* code; gpuq_errmsg() gives the last error's one-line
 * message ("name: message", the server's when the server sent one).
 *
 * The ABI does not grow with ops. A request is an opaque gpuq_req built from
 * generic key/value setters (the keys are PROTOCOL.md's), so a new op adds at
 * most a convenience function, never a struct field. A reply is an opaque
 * gpuq_result read through accessors: new reply keys (a second output, more
 * timing) add accessors, and a struct whose size changes never crosses the
 * library boundary. (A versioned struct was the alternative; it still forces
 * every caller to recompile to see a new field, and getting the size field
 * wrong is a silent overrun.) The only public structs are the connection
 * options and the server's hello info, which do not depend on ops.
 *
 * Arrays are C-order in host memory; results are written into buffers the
 * caller provides.
 */
#ifndef GPUQ_H
#define GPUQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "gpuq_limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, normalize methods and metrics: the values are ABI and the
 * wire names (f32, l2, cosine, ...) are PROTOCOL.md's; libgpuq converts. The
 * daemon's sources get the same enums from proto/header.h (not installed),
 * included first, and this block steps aside for them. */
#ifndef GPUQ_PROTO_HEADER_H
typedef enum gpuq_dtype {
    GPUQ_DT_NONE = 0,
    GPUQ_DT_F32 = 1, /* "f32" */
    GPUQ_DT_F64 = 2, /* "f64" */
    GPUQ_DT_I64 = 3  /* "i64": index outputs (kNN); never an input */
} gpuq_dtype;

typedef enum gpuq_norm_method {
    GPUQ_NORM_SUM = 0, /* "sum" */
    GPUQ_NORM_L1,      /* "l1" */
    GPUQ_NORM_L2,      /* "l2" */
    GPUQ_NORM_MINMAX,  /* "minmax" */
    GPUQ_NORM_ZSCORE   /* "zscore" */
} gpuq_norm_method;

typedef enum gpuq_metric {
    GPUQ_METRIC_EUCLIDEAN = 0, /* "euclidean" */
    GPUQ_METRIC_SQEUCLIDEAN,   /* "sqeuclidean" */
    GPUQ_METRIC_COSINE,        /* "cosine" */
    GPUQ_METRIC_MANHATTAN,     /* "manhattan" */
    GPUQ_METRIC_CHEBYSHEV,     /* "chebyshev": max |x - y| */
    GPUQ_METRIC_MINKOWSKI      /* "minkowski": (sum |x - y|^p)^(1/p); p = 2 unless the
                                  request sets "p" (gpuq_req_set_f64(r, "p", 3)) */
} gpuq_metric;

/* Who may read a resident array (PROTOCOL.md 3.5, "access"): its owner
 * and admins ("private"), or every connection ("all"). */
typedef enum gpuq_access { GPUQ_ACCESS_PRIVATE = 0, GPUQ_ACCESS_ALL = 1 } gpuq_access;

/* Session priority: low < normal < high. */
#define GPUQ_PRIO_LOW (-1)
#define GPUQ_PRIO_NORMAL 0
#define GPUQ_PRIO_HIGH 1

#define GPUQ_EARTH_RADIUS_KM 6371.0088
#endif

/* ---- connection ---- */

typedef struct gpuq_conn gpuq_conn;

typedef struct gpuq_connect_opts {
    const char *socket_path; /* NULL: the default sockets (gpuq_default_socket) */
    const char *client_name; /* NULL: "libgpuq"; UTF-8 (else GPUQ_E_BAD_ARGUMENT), cut to 64 bytes
                                on a character boundary */
    int priority;            /* GPUQ_PRIO_LOW/NORMAL/HIGH (-1/0/1); else bad_argument */
    int device;              /* -1: server chooses */
} gpuq_connect_opts;

/* What the server said in its hello reply. */
typedef struct gpuq_server_info {
    uint32_t version;
    char server[64];  /* "gpuqd 0.1.0" */
    char backend[16]; /* "cpu" or "cuda" */
    uint64_t session_id;
    int priority_granted; /* level after the server's policy cap (GPUQ_PRIO_*) */
    int stream_priority;  /* its CUDA stream priority (lower = more urgent; 0 on CPU) */
    int device;           /* device index the session was placed on (-1: cpu) */
    bool admin;           /* the server counts this peer as an admin */
    gpuq_limits limits;   /* max_inflight and session_staging: this session's caps */
} gpuq_server_info;

/* The default sockets, tried in this order by gpuq_connect when
 * socket_path is NULL, the first that accepts kept:
 *   $GPUQ_SOCKET, alone, when it is set and not empty; else
 *   $XDG_RUNTIME_DIR/gpuq/gpuqd.sock (a per-user gpuqd), when
 *     XDG_RUNTIME_DIR is set and not empty, then
 *   /run/gpuq/gpuqd.sock (the system gpuqd, gpuqd.socket).
 * gpuq_default_socket writes the first of them into buf: the only one with
 * GPUQ_SOCKET set, else the per-user path (when XDG_RUNTIME_DIR is set),
 * else the system path. Returns 0 or GPUQ_E_TOO_LARGE. */
int gpuq_default_socket(char *buf, size_t cap);

/* Connect and do the hello exchange. *out is owned by the caller (gpuq_close).
 * On failure *out is NULL (out of memory) or a dead connection kept only so
 * gpuq_errmsg(*out) can explain; close it too. When no socket tried accepts,
 * the code is GPUQ_E_IO and the message names every path tried, what was
 * wrong there and what to do, on one line: "cannot connect to gpuqd: PATH:
 * directory DIR does not exist; PATH: no such file; is gpuqd running? ..."
 * (other reasons: "stale socket (...)", "permission denied: join group gpuq
 * (...)").
 * A connection the server refuses returns the server's code and message
 * (GPUQ_E_BUSY, "busy: 256 sessions open (the limit)"), also when the server
 * closed before the hello could be sent. */
int gpuq_connect(const gpuq_connect_opts *opts, gpuq_conn **out);
void gpuq_close(gpuq_conn *c);
const gpuq_server_info *gpuq_info(const gpuq_conn *c);
const char *gpuq_errmsg(const gpuq_conn *c);

/* ---- requests: a generic key/value builder ----
 * gpuq_req_new("pairwise") starts a request for an op (the name is copied);
 * the setters add header keys as PROTOCOL.md names them. The builder knows no
 * op: a request is checked when it is submitted, by the same decoder and
 * checks the daemon runs, so an unknown op, an unknown or duplicate key, a
 * value of the wrong type or range, or a size that does not add up fails
 * there with the code the server would give (unknown_op, bad_header,
 * bad_argument, bad_shape, size_mismatch, ...), before anything is sent; the
 * connection stays usable. "id" is the connection's to assign and "dtype",
 * "shape", "shape_b" come from gpuq_req_set_input / gpuq_req_set_dtype;
 * setting them by hand gives a duplicate key (bad_header).
 *
 * Setters return 0, GPUQ_E_BAD_ARGUMENT (NULL key, index out of range, ...),
 * GPUQ_E_SIZE_MISMATCH or GPUQ_E_NO_MEMORY; the first such error is also kept
 * in the request (gpuq_req_errmsg) and returned by its submit, so a chain of
 * setters may be checked once. A request may be submitted any number of
 * times (each gets a new id); it is not tied to a connection. */
typedef struct gpuq_req gpuq_req;

gpuq_req *gpuq_req_new(const char *op); /* NULL: out of memory (or op NULL) */
void gpuq_req_free(gpuq_req *r);        /* NULL is fine */
int gpuq_req_set_str(gpuq_req *r, const char *key, const char *val);
int gpuq_req_set_u64(gpuq_req *r, const char *key, uint64_t val);
int gpuq_req_set_i64(gpuq_req *r, const char *key, int64_t val);
int gpuq_req_set_f64(gpuq_req *r, const char *key, double val);
int gpuq_req_set_bool(gpuq_req *r, const char *key, bool val);
/* An array of n numbers ("to": [lat, lon]). */
int gpuq_req_set_f64s(gpuq_req *r, const char *key, const double *vals, size_t n);
/* A range [start, stop, n] ("lat", "lon" of grid). */
int gpuq_req_set_range(gpuq_req *r, const char *key, double start, double stop, uint64_t n);
/* "timing": the reply carries per-stage times (gpuq_result_timing). */
int gpuq_req_set_timing(gpuq_req *r, bool on);
/* "dtype" of an op without input arrays (grid). */
int gpuq_req_set_dtype(gpuq_req *r, gpuq_dtype dt);
/* Input array idx (0: A, "shape"; 1: B, "shape_b"), ndim 1..GPUQ_MAX_DIMS
 * dimensions of element type dt (f32 or f64; both inputs share one dtype,
 * the wire's "dtype"). len is data's size in bytes and must be the product of
 * shape times the element size (else GPUQ_E_SIZE_MISMATCH). data is borrowed
 * until the submit that sends it returns; B needs A. */
int gpuq_req_set_input(gpuq_req *r, unsigned idx, gpuq_dtype dt, unsigned ndim,
                       const uint64_t *shape, const void *data, size_t len);
/* Output buffer idx (0 or 1), cap bytes, borrowed until the reply to the
 * submit that uses it has been waited for. A reply's payload is output 0's
 * bytes then output 1's, sizes given by the reply's dtype/shape and
 * dtype_b/shape_b. Output 0 is required when the op has a result; a buffer
 * smaller than the result the request implies is GPUQ_E_TOO_LARGE at submit.
 * Without any output buffer the payload (a sessions or metrics document) is
 * kept in the gpuq_result (gpuq_result_payload). */
int gpuq_req_set_output(gpuq_req *r, unsigned idx, void *buf, size_t cap);
/* Resident arrays (PROTOCOL.md 3.5, and gpuq_put below) in a request.
 * Input idx (0: A, 1: B) is the resident array name instead of an array
 * of the caller's: the request's "in" names it, its shape key ("shape" or
 * "shape_b") is left out and so is "dtype" unless a carried input gives
 * it (gpuqd takes them from the array; a carried input's dtype must be
 * the array's). Output idx is kept by gpuqd as the resident array name
 * (created or replaced, owned by the caller, with the request's "access":
 * gpuq_req_set_access; default private) once the request succeeds, and
 * not returned: it needs no buffer, and the reply has its dtype and shape
 * (gpuq_result_dtype/_ndim/_dim) with gpuq_result_bytes 0. The other
 * inputs and outputs go as they would (socket, the caller's arena, or
 * the staging arena).
 * The name is checked at once (1..GPUQ_RES_NAME_MAX bytes of UTF-8, no
 * "/", no control character; else GPUQ_E_BAD_ARGUMENT saying why, kept
 * for the submit as the setters' errors are) and copied. Setting an
 * input or output again (gpuq_req_set_input, _output, _resident) replaces
 * what it was.
 * A request with a resident input has sizes that only gpuqd knows: libgpuq
 * checks its header as the daemon's decoder does, but not its shapes
 * (gpuqd does, and says bad_shape, not_found, permission_denied, ...),
 * and its carried outputs are read by the reply's own dtype and shape:
 * into output buffers of at least that size (a smaller one is
 * GPUQ_E_TOO_LARGE, the stream kept in step), or without any output
 * buffer kept in the gpuq_result (gpuq_result_payload, at most 256 MiB).
 * Such outputs come by socket: never staged or by reference, whatever
 * the transport (their size is not known before the reply); the carried
 * inputs are staged as ever. */
int gpuq_req_set_input_resident(gpuq_req *r, unsigned idx, const char *name);
int gpuq_req_set_output_resident(gpuq_req *r, unsigned idx, const char *name);
/* "access" of the arrays the request stores (put, kept outputs): the same
 * as gpuq_req_set_str(r, "access", "private" or "all"). */
int gpuq_req_set_access(gpuq_req *r, gpuq_access access);
/* The first setter error's message ("" when none). Valid until r changes. */
const char *gpuq_req_errmsg(const gpuq_req *r);

/* ---- shared-memory arenas (PROTOCOL.md 3.4) ----
 * An arena is memory the daemon and this process share: gpuqd creates it
 * (a sealed memfd, pinned for DMA), passes its fd over the socket, and
 * libgpuq maps it. Arrays placed in an arena travel by DMA straight between
 * it and the GPU; no byte crosses the socket. A request whose input or
 * output buffer (gpuq_req_set_input / gpuq_req_set_output) lies wholly
 * inside an arena of the connection it is submitted on names those bytes
 * instead of carrying them (for an output: the result is in place when the
 * reply has been waited for). The arena belongs to its connection: it is
 * unmapped by gpuq_arena_close or gpuq_close, and the daemon frees it after
 * the last GPU work that touches it. A session's arenas are capped by the
 * hello reply's limits.session_arena (and the daemon's total_arena). */
typedef struct gpuq_arena gpuq_arena;

/* Ask for an arena of at least bytes (rounded up to the page size) and map
 * it. *out is owned by c (gpuq_arena_close, or gpuq_close closes it). */
int gpuq_arena_open(gpuq_conn *c, uint64_t bytes, gpuq_arena **out);
/* Share a memfd of the caller's (memfd_create with MFD_ALLOW_SEALING,
 * sized, then sealed with at least F_SEAL_SHRINK, else GPUQ_E_BAD_ARGUMENT
 * from the daemon): the whole file becomes an arena. fd stays the caller's. */
int gpuq_arena_import(gpuq_conn *c, int fd, gpuq_arena **out);
/* Tell the daemon, unmap, free. Pointers into the arena die with it. NULL
 * is fine. Returns 0 or the daemon's error (the mapping goes anyway). */
int gpuq_arena_close(gpuq_arena *a);
void *gpuq_arena_base(const gpuq_arena *a);
uint64_t gpuq_arena_size(const gpuq_arena *a);
uint64_t gpuq_arena_id(const gpuq_arena *a); /* the daemon's id of it */
/* A block of bytes inside the arena, 64-byte aligned (first fit over a
 * free list); NULL when none is free. gpuq_arena_free gives it back (NULL
 * is fine; a pointer not from this arena is ignored). */
void *gpuq_arena_alloc(gpuq_arena *a, uint64_t bytes);
void gpuq_arena_free(gpuq_arena *a, void *p);

/* ---- transport of the blocking calls ----
 * Arrays the caller placed in an arena always go by reference. Others go
 * by socket, except in the blocking calls (gpuq_call_req and every
 * convenience call) under AUTO, the default: when the daemon offers arenas
 * and the arrays outside arenas (inputs plus results) come to at least
 * GPUQ_SHM_MIN_BYTES, libgpuq copies the inputs into a staging arena of the
 * connection, sends the request by reference, and copies the results out
 * when the reply has come. The results are the socket path's, byte for byte.
 *
 * The staging arena is opened on first use, grown (closed and reopened
 * larger) when a request needs more, never beyond limits.session_arena, and
 * kept until gpuq_close (or GPUQ_TRANSPORT_SOCKET). It counts against the
 * session's and the daemon's arena quotas like any other arena. When it
 * cannot be had (quota, total_arena busy, arenas off), AUTO sends by socket
 * and does not try that size or a larger one again on this connection.
 * Pipelined requests (gpuq_submit_req) never use it: a blocking call has at
 * most one request in flight, so one staging arena per connection is enough.
 *
 * GPUQ_TRANSPORT_SOCKET: never stage. GPUQ_TRANSPORT_SHM: stage arrays of
 * any size; a blocking call whose arrays cannot be staged fails (the
 * arena_open's code, the message says so) and nothing is sent.
 *
 * Gated input (PROTOCOL.md 3.4): when the hello said "gate" and the staged
 * inputs come to 2 MiB or more, the request is sent before they are
 * copied, with "gate": true; libgpuq then copies them in pieces (an eighth
 * of them, at least 1 MiB, at most 4 MiB; A's bytes then B's) and sends a
 * "ready" after each, so gpuqd moves one piece to the device while the
 * next is copied. The readies are libgpuq's own: gpuq_pending does not
 * count them, and the wait that reads the request's reply reads theirs
 * right after it (a ready gpuqd refused, a libgpuq bug, makes the call
 * fail with GPUQ_E_PROTOCOL unless the request failed itself). The copy
 * and the readies are not interrupted (gpuq_set_interrupt_fd): gpuqd waits
 * for them; a ready that cannot be sent breaks the connection.
 * Gating is opt-in: the environment's GPUQ_GATE=1 at gpuq_connect turns
 * it on for that connection (unset or anything else: the inputs are copied
 * whole before the send; gated calls measured slower on an H200 so far).
 * A builder request that sets "gate" itself (gpuq_req_set_bool) is never
 * gated by libgpuq: its inputs are copied whole before the send and its
 * own key goes as set (a caller that says true sends its own readies).
 *
 * The copies into and out of the staging arena are spread over a small
 * process-wide pool of threads, in chunks, when a side's arrays come to
 * 1 MiB or more (less: one memcpy on the calling thread). The pool starts
 * at the first such copy with min(16, usable CPUs - 2) threads that copy,
 * the calling thread counted (one per 512 KiB of a copy at most); the environment's
 * GPUQ_COPY_THREADS (1..64) read then overrides it, 1 meaning never a thread. Chunks are written
 * with streaming stores on x86-64 (GPUQ_COPY_NT=0: memcpy), and the
 * threads poll for the next copy for 300 us after one (GPUQ_COPY_SPIN_US,
 * 0: sleep at once). Its threads block all signals. A child after fork starts its own pool when it
 * needs one. When threads cannot be started, or another thread's copy has the pool, a copy is a
 * plain memcpy: the bytes are the same either way. */
typedef enum gpuq_transport {
    GPUQ_TRANSPORT_AUTO = 0,
    GPUQ_TRANSPORT_SOCKET = 1,
    GPUQ_TRANSPORT_SHM = 2
} gpuq_transport;

/* AUTO stages a blocking call whose arrays outside arenas (inputs plus
 * results) come to at least this many bytes: smaller calls, where the
 * socket costs little, hold no arena. */
#define GPUQ_SHM_MIN_BYTES (1u << 20)

/* Choose how c's blocking calls send arrays (above). GPUQ_E_BAD_ARGUMENT:
 * t is none of the three, or t is SHM and the daemon offers this session no
 * arenas (the hello's "arenas" false: session_arena 0, or a gpuqd without
 * them); the transport is then unchanged. SOCKET also closes the staging
 * arena when no request is outstanding. */
int gpuq_set_transport(gpuq_conn *c, gpuq_transport t);

/* ---- waiting for a reply ----
 * A request whose arrays all lie in arenas, inputs and outputs (no array
 * byte on the socket either way; the blocking calls' staged arrays count),
 * and come to at least 1 MiB takes a predictable time, mostly DMA. Its
 * wait does not just sleep until the reply comes: waking from a sleep of a
 * few milliseconds costs 50-150 us on a GPU VM, several percent of such a
 * request, which a process that spins on its own CUDA stream does not pay.
 * libgpuq guesses the request's time from its bytes at 60 GB/s, from the
 * send: at least its larger direction (input or output bytes: gpuqd moves
 * both at once where the op allows), at most both. It sleeps until 300 us
 * before the first guess, then polls the socket without sleeping until the
 * reply is there or 2 ms past the second, and only then blocks as usual.
 * The cost is CPU time of the waiting thread: at most the smaller
 * direction's bytes at 60 GB/s plus 2.3 ms per such request (the polling;
 * the sleep before it costs nothing), none for smaller requests or ones
 * with an array on the socket.
 * A pipelined request spins only while it is the oldest outstanding, in
 * its own window (from its own send: a request that waited behind others
 * may find its window over). The interrupt fd (gpuq_set_interrupt_fd) ends
 * the spin too.
 *
 * On by default; the environment's GPUQ_WAIT_SPIN=0 at gpuq_connect turns it
 * off for that connection. gpuq_set_wait_spin turns it on or off for c's
 * waits from now on (requests already sent included). Returns 0, or
 * GPUQ_E_BAD_ARGUMENT for a NULL c. */
int gpuq_set_wait_spin(gpuq_conn *c, bool on);

/* Progress (PROTOCOL.md 4.1). A compute request sent with progress on
 * (gpuq_request's progress = true; a builder's gpuq_req_set_bool(r,
 * "progress", true)) gets a "started" notice from gpuqd when it leaves
 * gpuqd's queue for the backend, before its reply. A wait for that request
 * (gpuq_wait, gpuq_wait_req, gpuq_call, gpuq_call_req) reads the notice and
 * calls fn(user, id) on the waiting thread, then waits on for the reply; an
 * interrupted wait leaves the request queued as ever, and the notice may
 * have come before or not. With fn NULL (the default) notices are read and
 * dropped. A request without progress never gets one. */
typedef void (*gpuq_started_fn)(void *user, uint64_t id);
void gpuq_set_started_fn(gpuq_conn *c, gpuq_started_fn fn, void *user);

/* ---- results ----
 * A gpuq_result receives one reply (status, message, output dtypes and
 * shapes, timing, info); reuse it for any number of calls. */
typedef struct gpuq_result gpuq_result;

typedef enum gpuq_timing_stage {
    GPUQ_TIMING_QUEUE = 0, /* "queue_us" */
    GPUQ_TIMING_H2D,       /* "h2d_us" */
    GPUQ_TIMING_KERNEL,    /* "kernel_us" */
    GPUQ_TIMING_D2H,       /* "d2h_us" */
    GPUQ_TIMING_TOTAL      /* "total_us" */
} gpuq_timing_stage;

gpuq_result *gpuq_result_new(void); /* NULL: out of memory */
void gpuq_result_free(gpuq_result *res);
uint64_t gpuq_result_id(const gpuq_result *res);
int gpuq_result_status(const gpuq_result *res);          /* 0 or GPUQ_E_* */
const char *gpuq_result_message(const gpuq_result *res); /* the server's, "" on success */
/* Outputs the reply described (0, 1 or 2), and per output idx its element
 * type (GPUQ_DT_NONE when absent), rank, extent of one axis (0 beyond the
 * rank) and the bytes written into its buffer. */
unsigned gpuq_result_outputs(const gpuq_result *res);
gpuq_dtype gpuq_result_dtype(const gpuq_result *res, unsigned idx);
unsigned gpuq_result_ndim(const gpuq_result *res, unsigned idx);
uint64_t gpuq_result_dim(const gpuq_result *res, unsigned idx, unsigned axis);
size_t gpuq_result_bytes(const gpuq_result *res, unsigned idx);
/* Microseconds of one stage; GPUQ_E_BAD_ARGUMENT when the reply had no
 * timing (not asked for, or an error reply). */
int gpuq_result_timing(const gpuq_result *res, gpuq_timing_stage stage, double *us);
/* The reply's "info" value as raw msgpack (status, admin ops), owned by res
 * until its next use; GPUQ_E_BAD_ARGUMENT when there was none. */
int gpuq_result_info(const gpuq_result *res, const uint8_t **info, size_t *len);
/* A payload read without output buffers (sessions, metrics documents),
 * NUL-terminated, owned by res until its next use; *len 0 when none. */
int gpuq_result_payload(const gpuq_result *res, const uint8_t **data, size_t *len);

/* ---- generic calls ----
 * Pipelined: gpuq_submit_req checks and sends r (nothing is sent when it
 * fails) and gives its id; gpuq_wait_req reads the reply of the oldest
 * outstanding request, which is always the next one to come: replies come in
 * request order. At most limits.max_inflight requests may be outstanding
 * (then GPUQ_E_BUSY, nothing sent: wait first). res may be NULL. Returns the
 * request's status (gpuq_result_status too); a reply whose payload does not
 * fit the output buffers is GPUQ_E_TOO_LARGE, one whose sizes differ from
 * what the request implies GPUQ_E_SIZE_MISMATCH, and the connection stays in
 * step either way. A reply with another id than the oldest outstanding
 * request's is GPUQ_E_PROTOCOL: nothing of it reaches the output buffers or
 * res (which says only that id and the error), and the connection is broken
 * (every later call returns it). */
int gpuq_submit_req(gpuq_conn *c, gpuq_req *r, uint64_t *id);
int gpuq_wait_req(gpuq_conn *c, gpuq_result *res);
/* Number of submitted, not yet waited requests. */
unsigned gpuq_pending(const gpuq_conn *c);
/* Blocking: submit and wait. Needs gpuq_pending() == 0 (else GPUQ_E_BUSY). */
int gpuq_call_req(gpuq_conn *c, gpuq_req *r, gpuq_result *res);

/* ---- deadlines, cancellation, interrupting a wait (PROTOCOL.md 2) ---- */

/* From now on every compute request c sends (the op calls below, and
 * builder requests of a compute op through gpuq_submit_req or
 * gpuq_call_req) carries "deadline_ms": ms. The daemon answers one that
 * has not finished within ms milliseconds of its header's arrival with
 * GPUQ_E_DEADLINE_EXCEEDED and no result (its work dropped when it had not
 * started); the connection serves on. 0, the default, turns it off. A
 * builder request that sets "deadline_ms" itself keeps its own value (no
 * second key is added); control requests (ping, status, ...) never carry
 * one; requests already sent keep theirs. GPUQ_E_BAD_ARGUMENT, nothing
 * changed: ms over GPUQ_MAX_DEADLINE_MS (a day). */
int gpuq_set_deadline_ms(gpuq_conn *c, uint64_t ms);

/* Send a "cancel" of c's outstanding request with id target (from
 * gpuq_submit_req, or gpuq_result_id of an interrupted gpuq_call_req)
 * without waiting; *id (may be NULL) gets the cancel's own id. Its reply
 * is read by gpuq_wait_req like any other, after the target's: replies
 * come in request order. The target is then answered GPUQ_E_CANCELLED at
 * once unless it had finished (a running one too: its work stops, on CUDA
 * at its kernels' next tile, PROTOCOL.md section 2, without delaying the
 * replies after it); the
 * cancel's reply is status 0 with the counts below. An id that matches
 * nothing is not an error (both counts 0). A cancel is no compute request:
 * it does not count against limits.max_inflight (the daemon does not count
 * it either), so it may be sent while that many requests are outstanding.
 * Returns 0, or the connection's error (nothing sent). */
int gpuq_submit_cancel(gpuq_conn *c, uint64_t target, uint64_t *id);
/* A cancel reply's counts: *dropped requests were dropped before they ran,
 * *running were running and are answered cancelled when their work ends
 * (either pointer may be NULL). GPUQ_E_BAD_ARGUMENT when res holds no such
 * reply (an error reply, another op's, a malformed info map). */
int gpuq_result_cancel_counts(const gpuq_result *res, uint64_t *dropped, uint64_t *running);

/* libgpuq's own return value, never on the wire (codes of -1000 and below
 * are libgpuq's; gpuq_errname calls them "unknown"): a wait for a reply was
 * interrupted (gpuq_set_interrupt_fd) and the request is still
 * outstanding. */
#define GPUQ_E_INTERRUPTED (-1000)

/* Make c's waits and sends interruptible: while fd (the caller's; libgpuq
 * never reads or closes it) is readable, at end of file or in error, they
 * return GPUQ_E_INTERRUPTED at once instead of blocking. A self-pipe that a
 * signal handler writes to is the intended use (the handler stays
 * async-signal-safe); an eventfd or timerfd also works. The caller drains
 * fd before going on. fd -1 (the default) turns it off. Returns 0, or
 * GPUQ_E_BAD_ARGUMENT for an fd under -1 (an fd that is not open makes
 * the calls fail with GPUQ_E_BAD_ARGUMENT).
 * A wait whose reply has not begun to arrive: the connection stays in
 * step, the request is still outstanding and a later wait reads its reply
 * (one that has begun to arrive is read whole). gpuq_wait_req: res's id
 * (gpuq_result_id) and status say which request and why; its buffers stay
 * borrowed until its reply is read.
 * A send (any submit or call): before its first byte, nothing was sent,
 * nothing is outstanding and the connection goes on; after, the request is
 * cut short, which the stream cannot recover from: the connection is
 * broken (every later call returns GPUQ_E_INTERRUPTED; close it, and
 * gpuqd drops the request).
 * A blocking call (gpuq_call_req and the op calls) interrupted in its wait
 * returns with its request outstanding (gpuq_pending() is 1; for
 * gpuq_call_req its id is gpuq_result_id(res)), given up by the call: the
 * caller's output buffers are free at once and are never written, and the
 * next gpuq_wait_req reads its reply (and a gated call's readies'),
 * payload dropped. Cancel it
 * (gpuq_submit_cancel) or close c: gpuqd drops the queued work of a
 * connection that closes. The calls libgpuq makes on its own (a staging
 * arena's arena_open) are not interrupted. */
int gpuq_set_interrupt_fd(gpuq_conn *c, int fd);

/* ---- convenience calls (blocking, each one request on the builder) ---- */

int gpuq_ping(gpuq_conn *c);
/* Status reply's "info" value as raw msgpack: *info points into c's buffer,
 * valid until the next call on c. */
int gpuq_status_info(gpuq_conn *c, const uint8_t **info, size_t *len);
/* Status as JSON text into buf. */
int gpuq_status_json(gpuq_conn *c, char *buf, size_t cap);

/* Observability. Documents whose size only the server knows: *doc / *text
 * is malloc'd (NUL-terminated; the caller frees it) and *len its length.
 * Sessions: a msgpack stream of maps, one per session (all sessions for an
 * admin, else the caller's uid's; PROTOCOL.md lists the keys); *count their
 * number. Metrics: the Prometheus text exposition format 0.0.4. */
int gpuq_sessions(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count);
int gpuq_metrics(gpuq_conn *c, char **text, size_t *len);

/* Watching requests (PROTOCOL.md 3.6). Slowlog: the slowest recent
 * requests gpuqd kept (slowlog_len, slowlog_min_us), slowest first, as a
 * msgpack stream of record maps (an admin sees every uid's, others their
 * own), *doc malloc'd as for gpuq_sessions; *count their number (may be
 * NULL). gpuq_slowlog_reset (admin) empties it; *cleared (may be NULL)
 * gets how many records it held.
 * gpuq_monitor: a blocking call that streams one record per finished
 * request the caller may see (admins: every session's; others: their
 * uid's; never this connection's own) to fn(user, rec, len), rec one
 * msgpack map (borrowed until fn returns; PROTOCOL.md 3.6 lists its keys,
 * "dropped" among them: records gpuqd dropped for this monitor since the
 * last one, because it read too slowly). It returns 0 once fn returned
 * nonzero, GPUQ_E_INTERRUPTED once the interrupt fd
 * (gpuq_set_interrupt_fd) became readable, or an error (a refusal, a
 * broken connection). After 0 or GPUQ_E_INTERRUPTED the monitor has
 * stopped and c is free for other calls. */
typedef int (*gpuq_monitor_fn)(void *user, const uint8_t *rec, size_t len);
int gpuq_slowlog(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count);
int gpuq_slowlog_reset(gpuq_conn *c, uint64_t *cleared);
int gpuq_monitor(gpuq_conn *c, gpuq_monitor_fn fn, void *user);

/* Administration (root or the admin group; else GPUQ_E_PERMISSION).
 * drain: no new sessions; gpuqd exits 0 when the open ones have closed.
 * shutdown: as SIGTERM; accepted requests are answered, then gpuqd exits 0.
 * kill_session: close another session (its in-flight work is dropped).
 * set_limit: change one limit by name (gpuq_limits field) until the next
 * restart or SIGHUP reload; *old (may be NULL) gets the previous value. */
int gpuq_drain(gpuq_conn *c);
int gpuq_shutdown(gpuq_conn *c);
int gpuq_kill_session(gpuq_conn *c, uint64_t session_id);
int gpuq_set_limit(gpuq_conn *c, const char *name, uint64_t value, uint64_t *old);

/* Ops. Inputs and outputs hold elements of dt (f32 or f64); out must hold
 * the result (sizes below), which is checked before sending.
 * normalize: a rows x cols array (wire shape [rows, cols]); each row is
 * normalized, or with flat all rows*cols values as one array (wire "flat":
 * true). gpuq_normalize_1d sends an n-element array (shape [n]), the same as
 * rows = 1 with or without flat. out: as in. */
int gpuq_normalize(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, bool flat, const void *in,
                   uint64_t rows, uint64_t cols, void *out);
int gpuq_normalize_1d(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, const void *in,
                      uint64_t n, void *out);
/* normalize along axis of a rows x cols array (wire "axis"): 1 or -1 each
 * row (as gpuq_normalize without flat), 0 or -2 each column (the rows of
 * the transposed array, bit for bit); any other value is refused by gpuqd
 * (GPUQ_E_BAD_ARGUMENT). With a request builder: gpuq_req_set_i64(r,
 * "axis", axis). */
int gpuq_normalize_axis(gpuq_conn *c, gpuq_dtype dt, gpuq_norm_method method, int axis,
                        const void *in, uint64_t rows, uint64_t cols, void *out);
/* haversine: pts n x 2 (lat, lon degrees); out n distances to (lat, lon), or
 * between a[i] and b[i], in radius's unit. */
int gpuq_haversine_to(gpuq_conn *c, gpuq_dtype dt, const void *pts, uint64_t n, double lat,
                      double lon, double radius, void *out);
int gpuq_haversine_pair(gpuq_conn *c, gpuq_dtype dt, const void *a, const void *b, uint64_t n,
                        double radius, void *out);
/* grid: out nlat x nlon distances from the grid's points to (lat, lon). */
int gpuq_grid(gpuq_conn *c, gpuq_dtype dt, double lat0, double lat1, uint64_t nlat, double lon0,
              double lon1, uint64_t nlon, double lat, double lon, double radius, void *out);
/* pairwise: x m x d, y n x d; out m x n distances. Minkowski's p (wire "p",
 * a number > 0, default 2) and cosine's "on_zero" ("error", "zero": 1.0,
 * "nan") are set with a request builder: gpuq_req_new("pairwise"),
 * gpuq_req_set_str(r, "metric", "minkowski"), gpuq_req_set_f64(r, "p", 3),
 * gpuq_req_set_str(r, "on_zero", "nan") (PROTOCOL.md 3.1). */
int gpuq_pairwise(gpuq_conn *c, gpuq_dtype dt, gpuq_metric metric, const void *x, const void *y,
                  uint64_t m, uint64_t n, uint64_t d, void *out);
/* knn: x m x d, y n x d; for each row of x the k nearest rows of y
 * (1 <= k <= n; the result must fit gpuqd's max_output), nearest first, exact ties by the lower
 * index, NaN distances last: out_dist m x k distances (elements of dt), out_idx m x k row indices
 * into y. A cosine zero vector is GPUQ_E_ZERO_NORM. The arguments in gpuq_pairwise's order, then k
 * (0.1 had k after metric). */
int gpuq_knn(gpuq_conn *c, gpuq_dtype dt, gpuq_metric metric, const void *x, const void *y,
             uint64_t m, uint64_t n, uint64_t d, uint64_t k, void *out_dist, int64_t *out_idx);

/* ---- resident arrays (PROTOCOL.md 3.5) ----
 * Arrays gpuqd keeps by name between requests, in device memory (host
 * memory on the CPU backend), for any connection to use: sent once, then
 * named as the input of many requests (gpuq_req_set_input_resident), or
 * made by one (gpuq_req_set_output_resident). They live until removed or
 * until gpuqd stops, not with the connection that stored them. A name is
 * 1..GPUQ_RES_NAME_MAX bytes of UTF-8 without "/" or control characters,
 * compared byte for byte, one namespace for all users; a bad one (or
 * NULL) is GPUQ_E_BAD_ARGUMENT before anything is sent, with the reason in
 * gpuq_errmsg. A name that is no array is GPUQ_E_NOT_FOUND; an array the
 * caller may not read (access private, another owner), replace or remove
 * (not its owner or an admin) GPUQ_E_PERMISSION; over the owner's
 * limits.resident_bytes GPUQ_E_TOO_LARGE, over the daemon's total
 * GPUQ_E_BUSY.
 *
 * put: store ndim (1 or 2) dimensions of dt (f32 or f64) at data (C
 * order, borrowed for the call) as name, replacing an array of that name
 * the caller owns. flags: GPUQ_ACCESS_PRIVATE (0: readable by its owner
 * and admins) or GPUQ_ACCESS_ALL (by everyone), or'd with GPUQ_PERSIST
 * (also written to gpuqd's state directory: it survives a restart;
 * GPUQ_E_STORAGE when gpuqd has none or its disk is full). The bytes go
 * as any blocking call's inputs (socket, or the staging arena:
 * gpuq_set_transport). */
#define GPUQ_PERSIST 0x100u
int gpuq_put(gpuq_conn *c, const char *name, gpuq_dtype dt, unsigned ndim, const uint64_t *shape,
             const void *data, unsigned flags);
/* get: the array name, by socket (its size is gpuqd's to say). res (may
 * be NULL when buf is not) gets the reply: gpuq_result_dtype(res, 0),
 * _ndim, _dim give the array's dtype and shape. With buf (cap bytes) the
 * bytes go there (gpuq_result_bytes(res, 0) of them): an array larger
 * than cap is GPUQ_E_TOO_LARGE (nothing written, the connection in step;
 * gpuq_list says sizes). With buf NULL they are kept in res
 * (gpuq_result_payload: owned by res until its next use; at most 256 MiB,
 * else GPUQ_E_TOO_LARGE). */
int gpuq_get(gpuq_conn *c, const char *name, void *buf, size_t cap, gpuq_result *res);
/* list: the arrays the caller may read (an admin: all), sorted by name, as
 * a msgpack stream of maps, one per array: "name" (str), "owner" (uint
 * uid), "access" ("private" or "all"), "dtype" (str), "shape" (array of
 * uint), "bytes" (uint), "device" (int; -1 on the CPU backend), "users"
 * (uint: requests using it now). *doc is malloc'd (NUL-terminated; the
 * caller frees it; empty when there are none), *len its length, *count
 * (may be NULL) the number of maps. gpuq_list_json writes the same as one
 * JSON array of objects into buf[cap] (GPUQ_E_TOO_LARGE when it does not
 * fit). */
int gpuq_list(gpuq_conn *c, uint8_t **doc, size_t *len, uint32_t *count);
int gpuq_list_json(gpuq_conn *c, char *buf, size_t cap);
/* remove: the name is gone at once; requests using the array finish with
 * it, and its memory is freed when the last has. */
int gpuq_remove(gpuq_conn *c, const char *name);

#ifdef __cplusplus
}
#endif
#endif
