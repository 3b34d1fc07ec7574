/* SPDX-License-Identifier: Apache-2.0 */
/* gen_header_frames.h - the frames gen_corpus_header writes (into
 * frames_corpus, which its gen sets). */
#ifndef GPUQ_TESTS_FUZZ_GEN_HEADER_FRAMES_H
#define GPUQ_TESTS_FUZZ_GEN_HEADER_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "corpus_writer.h"
#include "header.h"

extern corpus *frames_corpus;

/* A frame of kind: prefix (payload_len) then the header h[0..hlen). */
void frame_put(const char *name, uint8_t kind, const uint8_t *h, size_t hlen, uint64_t payload_len);
/* The payload length a request's header implies (0 when the check fails
 * for another reason than the length). */
uint64_t frame_implied(const uint8_t *h, size_t hlen);
/* A request frame of q as gpuq_request_encode writes it. */
void frame_req(const char *name, const gpuq_request *q);
/* The same header without a prefix. */
void frame_bare(const char *name, const gpuq_request *q);
/* q initialised as a request of op and dt (id 42). */
void frame_base(gpuq_request *q, gpuq_op op, gpuq_dtype dt);
/* s[0], s[1] = a, b and *nd = n. */
void frame_shape(uint64_t *s, uint32_t *nd, uint32_t n, uint64_t a, uint64_t b);

#endif
