/* SPDX-License-Identifier: Apache-2.0 */
/* connect.c - a connection's life: gpuq_connect opens the Unix socket
 * (sockpath.c tries the candidates), sends "hello" as a blocking call on the
 * request path (conn.c) and keeps the reply's info map (PROTOCOL.md 3.3,
 * "hello") as gpuq_server_info, with whether the session may open arenas
 * and send gated requests (stage.h; only with GPUQ_GATE=1 in the environment:
 * gating is opt-in);
 * gpuq_close unmaps the arenas and frees it all.
 *
 * Known keys of the wrong type make the info malformed; unknown keys are
 * skipped, so a newer gpuqd's additions do not break an older libgpuq. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena_map.h"
#include "conn.h"
#include "conn_defs.h"
#include "conn_err.h"
#include "conn_reply.h"
#include "mpread.h"
#include "sockpath.h"
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

/* Fill *si from the info map buf[0..len) (fields the map lacks keep their
 * values), *arenas from its "arenas" and *gate from its "gate" (each left
 * alone when absent: a gpuqd without arenas, or without gated input).
 * Returns 0 or GPUQ_E_BAD_HEADER. */
static int hello_info_parse(const uint8_t *buf, size_t len, gpuq_server_info *si, bool *arenas,
                            bool *gate)
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
        } else if (key_is(k, kl, "gate")) { /* absent (an older gpuqd): no gated requests */
            rc = gpuq_mpr_bool(&r, gate);
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

/* The hello of a connection just made: the client name (UTF-8, cut to
 * GPUQ_CLIENT_NAME_MAX on a character boundary), priority and device of o
 * (NULL: the defaults), one blocking call on c, and the reply's info into
 * *si and c's staging (whether it may open arenas, and gate). Returns 0 or the code (message set on
 * c): the server's, GPUQ_E_PROTOCOL for a reply without a readable info map, GPUQ_E_VERSION for
 * another protocol version; the caller then treats c as broken. */
static int hello_exchange(gpuq_conn *c, const gpuq_connect_opts *o, gpuq_server_info *si)
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
    int rc = conn_call(c, r, NULL, res); /* no arrays: nothing to stage */
    gpuq_req_free(r);
    if (rc)
        return rc;
    if (!res->info)
        return conn_set_err(c, GPUQ_E_PROTOCOL, "hello reply without info");
    if (hello_info_parse(res->info, res->info_len, si, &c->stage.offered, &c->stage.gate_offered))
        return conn_set_err(c, GPUQ_E_PROTOCOL, "malformed hello info");
    if (si->version != GPUQ_PROTO_VERSION)
        return conn_set_err(c, GPUQ_E_VERSION, "server protocol version differs");
    return 0;
}

int gpuq_connect(const gpuq_connect_opts *opts, gpuq_conn **out)
{
    *out = NULL;
    gpuq_conn *c = calloc(1, sizeof *c);
    if (!c)
        return GPUQ_E_NO_MEMORY;
    c->fd = -1;
    c->reply.rx_fd = c->tx_fd = -1;
    c->cancel.intr_fd = -1;
    c->next_id = 1;
    c->info.device = -1;
    const char *spin = getenv("GPUQ_WAIT_SPIN");
    c->spin_off = spin && strcmp(spin, "0") == 0;
    const char *gate = getenv("GPUQ_GATE");
    c->stage.gate_off = !(gate && strcmp(gate, "1") == 0); /* opt-in: stage.h */
    gpuq_limits_default(&c->info.limits);
    int rc;
    sockpath_list l;
    if (opts && opts->socket_path ? sockpath_single(&l, opts->socket_path)
                                  : sockpath_candidates(&l)) {
        rc = conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "socket path too long: %.200s...",
                          opts && opts->socket_path ? opts->socket_path : l.path[l.n]);
        goto err_after_alloc;
    }
    unsigned used = 0;
    rc = sockpath_connect(&l, &c->fd, &used, c->err, sizeof c->err);
    if (rc) {
        c->unreachable = true;
        goto err_after_alloc;
    }
    memcpy(c->path, l.path[used], sizeof c->path);
    rc = hello_exchange(c, opts, &c->info);
    if (rc)
        goto err_after_alloc;
    *out = c;
    return 0;

err_after_alloc:
    /* The caller may want the message: hand back the failed connection. */
    c->broken = c->broken ? c->broken : rc;
    *out = c;
    return rc;
}

void gpuq_close(gpuq_conn *c)
{
    if (!c)
        return;
    arena_unmap_all(c); /* the daemon frees its side when the session ends */
    if (c->fd >= 0)
        close(c->fd);
    conn_reply_release(&c->reply);
    result_reset(&c->scratch);
    free(c->q);
    free(c);
}
