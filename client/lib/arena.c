/* SPDX-License-Identifier: Apache-2.0 */
/* arena.c - gpuq_arena_open, gpuq_arena_import and gpuq_arena_close: the
 * arena ops as blocking calls on the connection's request path (conn.c),
 * the memfd of the reply mapped (arena_map.c keeps the mapping). Arena ops
 * carry no arrays, so they never stage. */
#include <string.h>
#include <unistd.h>

#include "arena_map.h"
#include "conn.h"
#include "conn_defs.h"
#include "conn_err.h"
#include "mpread.h"

/* {"arena": id, "size": bytes} from the reply's info. */
static int info_arena(const uint8_t *info, size_t len, uint64_t *id, uint64_t *size)
{
    gpuq_mpr r;
    uint32_t n;
    int got = 0;
    gpuq_mpr_init(&r, info, len);
    if (gpuq_mpr_map(&r, &n))
        return GPUQ_E_PROTOCOL;
    for (uint32_t k = 0; k < n; k++) {
        const char *key;
        uint32_t kl;
        if (gpuq_mpr_str(&r, &key, &kl))
            return GPUQ_E_PROTOCOL;
        if (kl == 5 && !memcmp(key, "arena", 5)) {
            if (gpuq_mpr_uint(&r, id))
                return GPUQ_E_PROTOCOL;
            got |= 1;
        } else if (kl == 4 && !memcmp(key, "size", 4)) {
            if (gpuq_mpr_uint(&r, size))
                return GPUQ_E_PROTOCOL;
            got |= 2;
        } else if (gpuq_mpr_skip(&r)) {
            return GPUQ_E_PROTOCOL;
        }
    }
    return got == 3 ? 0 : GPUQ_E_PROTOCOL;
}

/* Send an arena_open / arena_import; map what the reply describes. fd: the
 * memfd to attach (import), or -1 (open: the reply carries one). */
static int arena_make(gpuq_conn *c, const char *op, uint64_t bytes, int fd, gpuq_arena **out)
{
    *out = NULL;
    gpuq_req *r = gpuq_req_new(op);
    if (!r)
        return conn_set_err(c, GPUQ_E_NO_MEMORY, "out of memory");
    if (fd < 0)
        gpuq_req_set_u64(r, "size", bytes);
    gpuq_result *res = &c->scratch;
    if (fd >= 0)
        c->tx_fd = fd;
    int rc = conn_call(c, r, NULL, res);
    c->tx_fd = -1;
    gpuq_req_free(r);
    int rx = c->reply.rx_fd;
    c->reply.rx_fd = -1;
    if (rc) {
        if (rx >= 0)
            close(rx);
        return rc;
    }
    const uint8_t *info;
    size_t ilen;
    uint64_t id = 0, size = 0;
    if (gpuq_result_info(res, &info, &ilen) || info_arena(info, ilen, &id, &size)) {
        rc = conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: %s reply without arena and size", op);
        goto err_fd;
    }
    int map_fd = fd >= 0 ? fd : rx;
    if (map_fd < 0) {
        rc = conn_set_err(c, GPUQ_E_PROTOCOL, "protocol: arena_open reply without an fd");
        goto err_fd;
    }
    if ((rc = arena_map_add(c, id, size, map_fd, out)) != 0)
        goto err_fd;
    if (rx >= 0)
        close(rx); /* the mapping keeps the memory */
    return 0;

err_fd:
    if (rx >= 0)
        close(rx);
    /* the daemon holds an arena we cannot use: give it back */
    if (id) {
        gpuq_req *cr = gpuq_req_new("arena_close");
        if (cr && gpuq_req_set_u64(cr, "arena", id) == 0)
            (void)conn_call(c, cr, NULL, &c->scratch);
        gpuq_req_free(cr);
    }
    return rc;
}

int gpuq_arena_open(gpuq_conn *c, uint64_t bytes, gpuq_arena **out)
{
    return arena_make(c, "arena_open", bytes, -1, out);
}

int gpuq_arena_import(gpuq_conn *c, int fd, gpuq_arena **out)
{
    if (fd < 0) {
        *out = NULL;
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: fd %d", fd);
    }
    return arena_make(c, "arena_import", 0, fd, out);
}

int gpuq_arena_close(gpuq_arena *a)
{
    if (!a)
        return 0;
    gpuq_conn *c = a->c;
    int rc = GPUQ_E_NO_MEMORY;
    gpuq_req *r = gpuq_req_new("arena_close");
    if (r && gpuq_req_set_u64(r, "arena", a->id) == 0)
        rc = conn_call(c, r, NULL, &c->scratch);
    gpuq_req_free(r);
    arena_unmap(a);
    return rc;
}
