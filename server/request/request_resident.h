/* SPDX-License-Identifier: Apache-2.0 */
/* request_resident.h - a request's resident arrays (PROTOCOL.md 3.5): the
 * part of request.c's life that names them.
 *
 * Happy path: request_on_header resolves the arrays the inputs name
 * (request_resident_inputs: found, readable, on the session's device, the
 * shapes and dtype filled in or compared), the check runs, the outputs to
 * keep are reserved (request_resident_reserve: owner, quotas); the job reads
 * the arrays in place and the backend allocates the kept outputs; when it
 * succeeded request_complete stores them (request_resident_commit) just
 * before the reply. request_free gives back whatever was not committed
 * (request_resident_release): input references, reservations, memory.
 *
 * Each call that fails returns a GPUQ_E_* code with a one-line message
 * naming the array; what it had taken is given back by
 * request_resident_release, which every request passes.
 */
#ifndef GPUQ_SERVER_REQUEST_RESIDENT_H
#define GPUQ_SERVER_REQUEST_RESIDENT_H

#include <stddef.h>

#include "server_defs.h"

/* r's decoded compute request: each input named is found (not_found), may
 * be read by r's peer (permission_denied), lives on r's session's device
 * (bad_argument); its shape key and the dtype are filled in when absent and
 * compared when sent (bad_shape, bad_dtype). r holds a reference on each
 * (r->res_in). 0 or a code with msg. */
int request_resident_inputs(request *r, char *msg, size_t cap);
/* r's checked compute request: each output it keeps may be stored under its
 * name by r's peer (permission_denied) and fits the quotas (too_large,
 * busy); its bytes are reserved (r->keep_bytes) and the job told to keep it
 * (job.keep), and the resident inputs go to the job (job.res_in). 0 or a
 * code with msg. */
int request_resident_reserve(request *r, char *msg, size_t cap);
/* r's job succeeded: store each kept output under its name (a put's reply
 * info says what was stored). 0, or a code with r->message set (nothing
 * is kept then; request_resident_release frees it). */
int request_resident_commit(request *r);
/* r's job succeeded: its kept outputs are stored (request_resident_commit),
 * after their files are written when it asked to persist them. Returns 0
 * with r->status set (done now), or 1: r waits for the writes, and then(r)
 * runs on the loop once they ended, r->status set. */
int request_resident_finish(request *r, void (*then)(request *r));
/* Give back what r holds and did not commit (request_free; idempotent). */
void request_resident_release(request *r);

#endif
