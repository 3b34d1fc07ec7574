/* SPDX-License-Identifier: Apache-2.0 */
/* req.h - libgpuq's request builder and reply result, shared by req.c and
 * conn.c.
 *
 * A gpuq_req is an op name, the header entries its setters wrote (msgpack,
 * in order), the input arrays and the output buffers. req_encode turns it
 * into a complete header for one id; conn.c then decodes and checks that
 * header with proto's own functions before sending it, so validity is decided
 * in one place. A gpuq_result is one reply, with what it owns (info, a
 * document payload) freed by result_reset.
 */
#ifndef GPUQ_CLIENT_REQ_H
#define GPUQ_CLIENT_REQ_H

#include "gpuq_internal.h"
#include "mpwrite.h"

#define REQ_MAX_IO 2u /* inputs A, B; outputs 0, 1 */

typedef struct req_input {
    bool set;
    const void *data; /* borrowed until the submit returns */
    size_t len;
    unsigned ndim;
    uint64_t shape[GPUQ_MAX_DIMS];
} req_input;

typedef struct req_output {
    void *buf; /* borrowed until the reply is waited for */
    size_t cap;
} req_output;

/* Where each array of one submit is ("in" / "out", PROTOCOL.md 3.4, 3.5):
 * entry k of in_kind / out_kind is GPUQ_REF_WIRE (carried: payload, or the
 * reply's payload), GPUQ_REF_ARENA (in[k] / out[k], [arena, offset,
 * length]: the caller's arena or the staging arena) or GPUQ_REF_NAME (the
 * resident array the request names: its in_name[k] / out_name[k]). nin and
 * nout are the request's inputs and outputs; the key is sent only when one
 * of its entries is not GPUQ_REF_WIRE. */
typedef struct req_refs {
    uint32_t nin, nout;
    uint8_t in_kind[REQ_MAX_IO], out_kind[REQ_MAX_IO];
    gpuq_ref in[REQ_MAX_IO], out[REQ_MAX_IO];
    /* no output goes to an arena: their sizes come with the reply (an input
     * is resident), or the op places its output itself (put's "name") */
    bool out_fixed;
} req_refs;

struct gpuq_req {
    char *op;      /* owned */
    gpuq_mpw *w;   /* entries written since the last req_encode */
    uint8_t *body; /* owned: all entries so far, n of them */
    size_t body_len;
    uint32_t n;
    bool has_deadline; /* a setter wrote "deadline_ms": the connection's is not added */
    bool has_gate;     /* a setter wrote "gate": the caller gates, staging does not */
    int dtype;         /* GPUQ_DT_NONE until an input or set_dtype gives it */
    req_input in[REQ_MAX_IO];
    req_output out[REQ_MAX_IO];
    /* resident arrays (PROTOCOL.md 3.5): input / output k is the array
     * in_name[k] / out_name[k] when in_res[k] / out_res[k] (then in[k] is
     * not set, out[k] has no buffer) */
    bool in_res[REQ_MAX_IO], out_res[REQ_MAX_IO];
    char in_name[REQ_MAX_IO][GPUQ_RES_NAME_MAX + 1];
    char out_name[REQ_MAX_IO][GPUQ_RES_NAME_MAX + 1];
    int err; /* first setter error, returned by submit */
    char errmsg[256];
};

struct gpuq_result {
    uint64_t id;
    int status;
    char message[256];
    unsigned nout;
    struct {
        int dtype;
        unsigned ndim;
        uint64_t shape[GPUQ_MAX_DIMS];
        size_t bytes;
    } out[REQ_MAX_IO];
    bool has_timing;
    gpuq_timing timing;
    uint8_t *info; /* owned copy of the reply's "info" value */
    size_t info_len;
    uint8_t *payload; /* owned: a payload read without output buffers */
    size_t payload_len;
};

/* Free what res owns and clear it. */
void result_reset(gpuq_result *res);
/* res reset, then what rep says (id, status, message, timing, a copy of
 * info, the outputs' dtypes and shapes; bytes 0). GPUQ_E_NO_MEMORY when
 * info cannot be copied (the outputs are then not set). */
int result_from_reply(gpuq_result *res, const gpuq_reply *rep);

/* The header of r for request id, malloc'd into *out (caller frees): "id",
 * "op", "dtype"/"shape"/"shape_b" from the carried inputs (a resident
 * input's shape is the server's), "in"/"out" from refs (may be NULL: none),
 * "deadline_ms": deadline when that is not 0 and no setter wrote the key,
 * then the setters' entries. Returns 0 or GPUQ_E_NO_MEMORY. */
int req_encode(gpuq_req *r, uint64_t id, const req_refs *refs, uint64_t deadline, uint8_t **out,
               size_t *len);
/* The input arrays r has, carried or resident: 0, 1 (A) or 2 (A, B). */
uint32_t req_inputs(const gpuq_req *r);
/* Does r name a resident output? */
bool req_has_resident_out(const gpuq_req *r);
/* refs for r's nin inputs and nout outputs with r's resident arrays as
 * GPUQ_REF_NAME entries and every other entry GPUQ_REF_WIRE. */
void req_refs_init(const gpuq_req *r, uint32_t nin, uint32_t nout, req_refs *refs);
/* Is any of kinds[0..n) not GPUQ_REF_WIRE (the key is sent)? Are all
 * GPUQ_REF_ARENA? */
bool req_refs_any(const uint8_t *kinds, uint32_t n);
bool req_refs_all_arena(const uint8_t *kinds, uint32_t n);

#endif
