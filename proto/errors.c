/* SPDX-License-Identifier: Apache-2.0 */
/* errors.c - names and descriptions of the GPUQ_E_* codes.
 *
 * A table indexed by -code; names are part of the wire protocol.
 */
#include "errors.h"

#include <string.h>

struct errinfo {
    const char *name;
    const char *text;
};

static const struct errinfo errtab[] = {
    [0] = {"ok", "success"},
    [1] = {"protocol", "broken frame prefix (bad magic, kind or flags)"},
    [2] = {"version", "unsupported protocol version"},
    [3] = {"bad_header", "header is not a valid msgpack map of known shape"},
    [4] = {"unknown_op", "unknown operation"},
    [5] = {"bad_argument", "missing or invalid argument"},
    [6] = {"bad_dtype", "dtype must be f32 or f64"},
    [7] = {"bad_shape", "wrong rank, wrong columns, mismatched shapes or size overflow"},
    [8] = {"empty", "array has zero elements"},
    [9] = {"out_of_range", "value out of range (e.g. latitude beyond +-90)"},
    [10] = {"zero_norm", "zero sum or norm, constant row, or zero vector"},
    [11] = {"too_large", "header, payload or output over a configured limit"},
    [12] = {"size_mismatch", "payload length differs from what the header implies"},
    [13] = {"busy", "too many requests in flight or staging memory full"},
    [14] = {"no_memory", "host or device memory allocation failed"},
    [15] = {"device", "device error failed this request"},
    [16] = {"device_lost", "device lost; the daemon is going down"},
    [17] = {"shutting_down", "daemon is shutting down"},
    [18] = {"permission_denied", "permission denied: an admin-only operation"},
    [19] = {"no_hello", "request before the hello exchange"},
    [20] = {"internal", "internal error in gpuqd"},
    [21] = {"io", "socket I/O error"},
    [22] = {"closed", "connection closed by the server"},
    [23] = {"need_more", "more bytes needed"},
    [24] = {"duplicate_id", "request id already in flight on this session"},
    [25] = {"timeout", "connection closed: no hello, idle, or a frame stalled too long"},
    [26] = {"deadline_exceeded", "not finished within the request's deadline"},
    [27] = {"cancelled", "cancelled before it finished"},
    [28] = {"not_found", "no resident array of that name"},
    [29] = {"storage", "the state directory could not be written"},
};

#define NERR (sizeof(errtab) / sizeof(errtab[0]))

const char *gpuq_errname(int code)
{
    if (code > 0 || (unsigned)(-(long)code) >= NERR)
        return "unknown";
    return errtab[-code].name;
}

const char *gpuq_strerror(int code)
{
    if (code > 0 || (unsigned)(-(long)code) >= NERR)
        return "unknown error";
    return errtab[-code].text;
}

int gpuq_errcode(const char *name, unsigned len)
{
    for (unsigned i = 0; i < NERR; i++) {
        if (strlen(errtab[i].name) == len && memcmp(errtab[i].name, name, len) == 0)
            return -(int)i;
    }
    return GPUQ_E_INTERNAL;
}
