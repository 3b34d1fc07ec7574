/* SPDX-License-Identifier: Apache-2.0 */
/* mpwrite.c - msgpack writer over msgpack-c's sbuffer and packer.
 *
 * Only trusted, locally built values go through here. Any failed write (an
 * allocation failure in the sbuffer) sets a sticky flag: later calls are
 * no-ops and gpuq_mpw_take reports GPUQ_E_NO_MEMORY. Strings always go out
 * as UTF-8 (PROTOCOL.md 1.2): one that is not is written with its bad bytes
 * escaped as \xHH (utf8.h), so no caller can put a raw one on the wire.
 */
#include "mpwrite.h"

/* A writer's first buffer: msgpack-c's default is 8 KiB, which every reply
 * header (about 100 bytes) paid for in a fresh allocation; held while the
 * reply waits to be written, thousands of them made malloc grow and trim
 * its heap (page faults on the loop thread). Larger ones double as they grow. */
#define MSGPACK_SBUFFER_INIT_SIZE 256
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "utf8.h"

struct gpuq_mpw {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    bool failed;
};

gpuq_mpw *gpuq_mpw_new(void)
{
    gpuq_mpw *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    msgpack_sbuffer_init(&w->sb);
    msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
    return w;
}

void gpuq_mpw_free(gpuq_mpw *w)
{
    if (!w)
        return;
    msgpack_sbuffer_destroy(&w->sb);
    free(w);
}

#define MPW_DO(w, call)                                                                            \
    do {                                                                                           \
        if (!(w)->failed && (call) != 0)                                                           \
            (w)->failed = true;                                                                    \
    } while (0)

void gpuq_mpw_map(gpuq_mpw *w, uint32_t n)
{
    MPW_DO(w, msgpack_pack_map(&w->pk, n));
}

void gpuq_mpw_array(gpuq_mpw *w, uint32_t n)
{
    MPW_DO(w, msgpack_pack_array(&w->pk, n));
}

void gpuq_mpw_str(gpuq_mpw *w, const char *s)
{
    size_t n = strlen(s);
    char *esc = NULL;
    if (!gpuq_utf8_valid(s, n)) {
        /* Rare (a name that came from outside): written escaped, never raw. */
        size_t e = gpuq_utf8_escaped_len(s, n);
        esc = malloc(e + 1);
        if (!esc) {
            w->failed = true;
            return;
        }
        n = gpuq_utf8_escape(esc, e + 1, s, n);
        s = esc;
    }
    MPW_DO(w, msgpack_pack_str(&w->pk, n));
    MPW_DO(w, msgpack_pack_str_body(&w->pk, s, n));
    free(esc);
}

void gpuq_mpw_uint(gpuq_mpw *w, uint64_t v)
{
    MPW_DO(w, msgpack_pack_uint64(&w->pk, v));
}

void gpuq_mpw_int(gpuq_mpw *w, int64_t v)
{
    MPW_DO(w, msgpack_pack_int64(&w->pk, v));
}

void gpuq_mpw_double(gpuq_mpw *w, double v)
{
    MPW_DO(w, msgpack_pack_double(&w->pk, v));
}

void gpuq_mpw_bool(gpuq_mpw *w, bool v)
{
    MPW_DO(w, v ? msgpack_pack_true(&w->pk) : msgpack_pack_false(&w->pk));
}

void gpuq_mpw_nil(gpuq_mpw *w)
{
    MPW_DO(w, msgpack_pack_nil(&w->pk));
}

void gpuq_mpw_raw(gpuq_mpw *w, const void *buf, size_t len)
{
    if (len == 0)
        return;
    MPW_DO(w, msgpack_sbuffer_write(&w->sb, buf, len));
}

int gpuq_mpw_take(gpuq_mpw *w, uint8_t **out, size_t *len)
{
    if (w->failed) {
        msgpack_sbuffer_destroy(&w->sb);
        msgpack_sbuffer_init(&w->sb);
        w->failed = false;
        return GPUQ_E_NO_MEMORY;
    }
    size_t n = w->sb.size;
    char *data = msgpack_sbuffer_release(&w->sb);
    if (!data) {
        data = malloc(1); /* an empty buffer is still a buffer the caller frees */
        if (!data)
            return GPUQ_E_NO_MEMORY;
    }
    *out = (uint8_t *)data;
    *len = n;
    return 0;
}
