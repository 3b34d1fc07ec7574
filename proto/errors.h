/* SPDX-License-Identifier: Apache-2.0 */
/* errors.h - gpuq's stable error codes, shared by daemon, client and wire.
 *
 * Every function in gpuq returns 0 or a negative GPUQ_E_* code. The numeric
 * value and the name (gpuq_errname) are part of the wire protocol: they never
 * change meaning once released. gpuq_strerror gives a one-line description.
 */
#ifndef GPUQ_PROTO_ERRORS_H
#define GPUQ_PROTO_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GPUQ_OK = 0,
    GPUQ_E_PROTOCOL = -1,       /* broken frame prefix (bad magic/kind); connection closes */
    GPUQ_E_VERSION = -2,        /* unsupported protocol version */
    GPUQ_E_BAD_HEADER = -3,     /* header is not a valid msgpack map of known shape */
    GPUQ_E_UNKNOWN_OP = -4,     /* op name not known */
    GPUQ_E_BAD_ARGUMENT = -5,   /* missing/invalid argument (method, metric, ranges...) */
    GPUQ_E_BAD_DTYPE = -6,      /* dtype not f32/f64 */
    GPUQ_E_BAD_SHAPE = -7,      /* wrong rank, wrong columns, mismatched shapes, overflow */
    GPUQ_E_EMPTY = -8,          /* an array with zero elements */
    GPUQ_E_OUT_OF_RANGE = -9,   /* latitude beyond +-90 or similar value range error */
    GPUQ_E_ZERO_NORM = -10,     /* zero sum/norm, constant row, zero vector for cosine */
    GPUQ_E_TOO_LARGE = -11,     /* header or payload over a configured limit */
    GPUQ_E_SIZE_MISMATCH = -12, /* payload length differs from what the header implies */
    GPUQ_E_BUSY = -13,          /* too many requests in flight / staging full for this request */
    GPUQ_E_NO_MEMORY = -14,     /* host or device allocation failed */
    GPUQ_E_DEVICE = -15,        /* a device (CUDA) error that failed this request only */
    GPUQ_E_DEVICE_LOST = -16,   /* sticky device error: the daemon is going down */
    GPUQ_E_SHUTTING_DOWN = -17, /* daemon is draining; request not accepted */
    GPUQ_E_PERMISSION = -18,    /* peer not allowed to do this */
    GPUQ_E_NO_HELLO = -19,      /* a request came before the hello exchange */
    GPUQ_E_INTERNAL = -20,      /* a bug in gpuqd; please report */
    GPUQ_E_IO = -21,            /* client side: socket error */
    GPUQ_E_CLOSED = -22,        /* client side: server closed the connection */
    GPUQ_E_NEED_MORE = -23,     /* decoder: more bytes needed (never on the wire) */
    GPUQ_E_DUPLICATE_ID = -24,  /* request id already in flight on this session */
    GPUQ_E_TIMEOUT = -25,       /* the client was too slow (hello, idle, a stalled frame); closes */
    GPUQ_E_DEADLINE_EXCEEDED = -26, /* not finished within the request's deadline_ms */
    GPUQ_E_CANCELLED = -27,         /* cancelled by a cancel request (or the daemon) */
    GPUQ_E_NOT_FOUND = -28,         /* no resident array of that name */
    GPUQ_E_STORAGE = -29,           /* the state directory could not be written or read */
    GPUQ_E_LAST = -29
};

/* Stable snake_case name of a code ("zero_norm"); "unknown" for others. */
const char *gpuq_errname(int code);
/* One-line English description of a code. */
const char *gpuq_strerror(int code);
/* Reverse of gpuq_errname; returns GPUQ_E_INTERNAL for unknown names. */
int gpuq_errcode(const char *name, unsigned len);

#ifdef __cplusplus
}
#endif

#endif
