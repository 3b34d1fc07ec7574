/* hello.c - the hello reply's info map (PROTOCOL.md 3.3, "hello") into
 * gpuq_server_info, and whether the session may open arenas.
 *
 * Known keys of the wrong type make the info malformed; unknown keys are
 * skipped, so a newer gpuqd's additions do not break an older libgpuq. */
#include "hello.h"

#include <string.h>

#include "mpread.h"

static int key_is(const char *k, uint32_t klen, const char *want)
{
    return strlen(want) == klen && memcmp(k, want, klen) == 0;
}

static void copy_str(char *dst, size_t cap, const char *s, uint32_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

int hello_info_parse(const uint8_t *buf, size_t len, gpuq_server_info *si, bool *arenas)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, buf, len);
    uint32_t n;
    if (gpuq_mpr_map(&r, &n))
        return GPUQ_E_BAD_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        const char *k, *s;
        uint32_t kl, sl;
        uint64_t u;
        int64_t v;
        int rc;
        if (gpuq_mpr_str(&r, &k, &kl))
            return GPUQ_E_BAD_HEADER;
        if (key_is(k, kl, "version")) {
            rc = gpuq_mpr_uint(&r, &u);
            si->version = (uint32_t)u;
        } else if (key_is(k, kl, "server") && !(rc = gpuq_mpr_str(&r, &s, &sl))) {
            copy_str(si->server, sizeof si->server, s, sl);
        } else if (key_is(k, kl, "backend") && !(rc = gpuq_mpr_str(&r, &s, &sl))) {
            copy_str(si->backend, sizeof si->backend, s, sl);
        } else if (key_is(k, kl, "session")) {
            rc = gpuq_mpr_uint(&r, &si->session_id);
        } else if (key_is(k, kl, "priority")) {
            rc = gpuq_mpr_int(&r, &v);
            si->priority_granted = (int)v;
        } else if (key_is(k, kl, "stream_priority")) {
            rc = gpuq_mpr_int(&r, &v);
            si->stream_priority = (int)v;
        } else if (key_is(k, kl, "device")) {
            rc = gpuq_mpr_int(&r, &v);
            si->device = (int)v;
        } else if (key_is(k, kl, "admin")) {
            rc = gpuq_mpr_bool(&r, &si->admin);
        } else if (key_is(k, kl, "limits")) {
            rc = gpuq_limits_decode(&r, &si->limits);
        } else if (key_is(k, kl, "arenas")) { /* absent (an older gpuqd): none */
            rc = gpuq_mpr_bool(&r, arenas);
        } else if (key_is(k, kl, "server") || key_is(k, kl, "backend")) {
            /* wrong type: rc already set by the failed gpuq_mpr_str */
        } else {
            rc = gpuq_mpr_skip(&r);
        }
        if (rc)
            return GPUQ_E_BAD_HEADER;
    }
    return 0;
}
