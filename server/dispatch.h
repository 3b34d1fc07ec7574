/* dispatch.h - what a frame becomes.
 *
 * Happy path: a complete prefix is checked (magic/kind/version, header and
 * payload limits), then the header is decoded and checked before a payload
 * byte is accepted; hello/ping/status are answered at once, compute ops get a
 * staging slot (input then output), their payload is read into it and the job
 * is submitted to the backend; completion queues the reply in order.
 *
 * Failure: a broken prefix gets one error reply and the session closes after
 * it; any other refusal gets an error reply and the payload is skipped. A
 * request that fits the staging limits but not now waits (reading stopped).
 */
#ifndef GPUQ_SERVER_DISPATCH_H
#define GPUQ_SERVER_DISPATCH_H

#include "server_defs.h"

void dispatch_prefix(session *s);       /* s->prefix complete */
void dispatch_header(session *s);       /* s->hbuf complete */
void dispatch_payload_done(session *s); /* s->cur's payload complete */
/* s->cur waits for staging: try again (called when slots were released). */
void dispatch_retry(session *s);
/* The backend's completion callback (loop thread). */
void dispatch_complete(gpuq_job *job);

#endif
