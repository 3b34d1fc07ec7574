/* SPDX-License-Identifier: Apache-2.0 */
/* frame.h - the fixed 20-byte frame prefix.
 *
 * Layout (little-endian): magic "GPUQ" (4), version u8, kind u8, flags u16 (0),
 * header_len u32, payload_len u64. The prefix is checked on its own before any
 * header byte is read: a bad magic/kind/version is a broken stream.
 */
#ifndef GPUQ_PROTO_FRAME_H
#define GPUQ_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>

typedef struct gpuq_prefix {
    uint8_t version;
    uint8_t kind;
    uint16_t flags;
    uint32_t header_len;
    uint64_t payload_len;
} gpuq_prefix;

/* Write p into out[GPUQ_PREFIX_SIZE]. */
void gpuq_prefix_encode(const gpuq_prefix *p, uint8_t *out);

/* Decode buf[0..len). Returns 0 and fills *p; GPUQ_E_NEED_MORE when len is
 * shorter than the prefix (only the bytes present are checked, so a bad magic
 * is reported as early as its first byte); GPUQ_E_PROTOCOL for a bad magic,
 * kind or non-zero flags; GPUQ_E_VERSION for another version (p->version is
 * still filled). Limits on header/payload lengths are the caller's. */
int gpuq_prefix_decode(const uint8_t *buf, size_t len, gpuq_prefix *p);

#endif
