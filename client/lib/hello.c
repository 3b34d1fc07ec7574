/* SPDX-License-Identifier: Apache-2.0 */
/* hello.c - the hello exchange of gpuq_connect, and the hello reply's info
 * map (PROTOCOL.md 3.3, "hello") into gpuq_server_info, and whether the
 * session may open arenas.
 *
 * Known keys of the wrong type make the info malformed; unknown keys are
 * skipped, so a newer gpuqd's additions do not break an older libgpuq. */
#include "hello.h"

#include <string.h>

#include "conn.h"
#include "conn_defs.h"
#include "mpread.h"
#include "utf8.h"

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

int hello_exchange(gpuq_conn *c, const gpuq_connect_opts *o, gpuq_server_info *si, bool *arenas)
{
    const char *name = o && o->client_name ? o->client_name : "libgpuq";
    size_t nlen = strlen(name);
    if (!gpuq_utf8_valid(name, nlen)) /* the server would refuse it: bad_header */
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "client name is not valid UTF-8");
    nlen = gpuq_utf8_cut(name, nlen, GPUQ_CLIENT_NAME_MAX); /* long names: whole characters */
    char client[GPUQ_CLIENT_NAME_MAX + 1];
    memcpy(client, name, nlen);
    client[nlen] = '\0';
    gpuq_req *r = gpuq_req_new("hello");
    if (!r)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory building the hello");
    gpuq_req_set_u64(r, "version", GPUQ_PROTO_VERSION);
    gpuq_req_set_str(r, "client", client);
    gpuq_req_set_i64(r, "priority", o ? o->priority : GPUQ_PRIO_NORMAL);
    gpuq_req_set_i64(r, "device", o ? o->device : -1);
    gpuq_result *res = &c->scratch;
    int rc = gpuq_call_req(c, r, res);
    gpuq_req_free(r);
    if (rc)
        return rc;
    if (!res->info)
        return conn_set_err(c, GPUQ_E_PROTOCOL, "hello reply without info");
    if (hello_info_parse(res->info, res->info_len, si, arenas))
        return conn_set_err(c, GPUQ_E_PROTOCOL, "malformed hello info");
    if (si->version != GPUQ_PROTO_VERSION)
        return conn_set_err(c, GPUQ_E_VERSION, "server protocol version differs");
    return 0;
}
