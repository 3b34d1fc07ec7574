/* SPDX-License-Identifier: Apache-2.0 */
/* frame.c - encode and decode the 20-byte frame prefix.
 *
 * Decoding checks the bytes present so far in order (magic, version, kind,
 * flags) so a broken stream is detected as early as its first wrong byte;
 * a short but so-far-valid buffer is GPUQ_E_NEED_MORE.
 */
#include "frame.h"

#include "errors.h"
#include "gpuq_limits.h"

static void put_le(uint8_t *out, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *in, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)in[i] << (8 * i);
    return v;
}

void gpuq_prefix_encode(const gpuq_prefix *p, uint8_t *out)
{
    out[0] = GPUQ_MAGIC0;
    out[1] = GPUQ_MAGIC1;
    out[2] = GPUQ_MAGIC2;
    out[3] = GPUQ_MAGIC3;
    out[4] = p->version;
    out[5] = p->kind;
    put_le(out + 6, p->flags, 2);
    put_le(out + 8, p->header_len, 4);
    put_le(out + 12, p->payload_len, 8);
}

int gpuq_prefix_decode(const uint8_t *buf, size_t len, gpuq_prefix *p)
{
    static const uint8_t magic[4] = {GPUQ_MAGIC0, GPUQ_MAGIC1, GPUQ_MAGIC2, GPUQ_MAGIC3};

    for (size_t i = 0; i < 4 && i < len; i++) {
        if (buf[i] != magic[i])
            return GPUQ_E_PROTOCOL;
    }
    if (len > 4) {
        p->version = buf[4];
        if (buf[4] != GPUQ_PROTO_VERSION)
            return GPUQ_E_VERSION;
    }
    if (len > 5 && buf[5] != GPUQ_KIND_REQUEST && buf[5] != GPUQ_KIND_REPLY)
        return GPUQ_E_PROTOCOL;
    if (len > 6 && buf[6] != 0)
        return GPUQ_E_PROTOCOL;
    if (len > 7 && buf[7] != 0)
        return GPUQ_E_PROTOCOL;
    if (len < GPUQ_PREFIX_SIZE)
        return GPUQ_E_NEED_MORE;
    p->version = buf[4];
    p->kind = buf[5];
    p->flags = (uint16_t)get_le(buf + 6, 2);
    p->header_len = (uint32_t)get_le(buf + 8, 4);
    p->payload_len = get_le(buf + 12, 8);
    return 0;
}
