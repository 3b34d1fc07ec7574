/* SPDX-License-Identifier: Apache-2.0 */
/* gen_header_frames.c - the frames gen_corpus_header writes: a prefix and
 * a header into the corpus, a request as proto's encoder writes it, with the
 * payload length its header implies. */
#include "gen_header_frames.h"

#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "frame.h"
#include "gpuq_limits.h"

corpus *frames_corpus;

void frame_put(const char *name, uint8_t kind, const uint8_t *h, size_t hlen, uint64_t payload_len)
{
    uint8_t *b = malloc(GPUQ_PREFIX_SIZE + hlen);
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = kind,
                     .flags = 0,
                     .header_len = (uint32_t)hlen,
                     .payload_len = payload_len};
    if (!b)
        abort();
    gpuq_prefix_encode(&p, b);
    memcpy(b + GPUQ_PREFIX_SIZE, h, hlen);
    corpus_add(frames_corpus, name, b, GPUQ_PREFIX_SIZE + hlen);
    free(b);
}

/* The payload length a request's header implies (0 when the check fails
 * for another reason than the length). */
uint64_t frame_implied(const uint8_t *h, size_t hlen)
{
    gpuq_request q;
    gpuq_limits lim;
    gpuq_sizes sz;
    char msg[256];
    gpuq_limits_default(&lim);
    if (gpuq_request_decode(h, hlen, &q, msg, sizeof msg) != 0)
        return 0;
    int rc = gpuq_request_check(&q, 0, &lim, &sz, msg, sizeof msg);
    return rc == GPUQ_E_SIZE_MISMATCH ? gpuq_request_wire_in(&q, &sz) : 0;
}

/* A request frame of q as gpuq_request_encode writes it. */
void frame_req(const char *name, const gpuq_request *q)
{
    uint8_t *h;
    size_t hlen;
    if (gpuq_request_encode(q, &h, &hlen) != 0)
        abort();
    frame_put(name, GPUQ_KIND_REQUEST, h, hlen, frame_implied(h, hlen));
    free(h);
}

/* The same header without a prefix. */
void frame_bare(const char *name, const gpuq_request *q)
{
    uint8_t *h;
    size_t hlen;
    if (gpuq_request_encode(q, &h, &hlen) != 0)
        abort();
    corpus_add(frames_corpus, name, h, hlen);
    free(h);
}

void frame_base(gpuq_request *q, gpuq_op op, gpuq_dtype dt)
{
    gpuq_request_init(q);
    q->id = 42;
    q->op = op;
    q->dtype = dt;
}

void frame_shape(uint64_t *s, uint32_t *nd, uint32_t n, uint64_t a, uint64_t b)
{
    s[0] = a;
    s[1] = b;
    *nd = n;
}
