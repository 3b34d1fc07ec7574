/* SPDX-License-Identifier: Apache-2.0 */
/* uvx.c - see uvx.h. */
#include "uvx.h"

#include <fcntl.h>
#include <stdlib.h>

#include "log.h"

int uvx_timer_init(uv_loop_t *loop, uv_timer_t *t, void *owner)
{
    int rc = uv_timer_init(loop, t);
    if (rc < 0) {
        log_error("uv_timer_init: %s", uv_strerror(rc));
        return rc;
    }
    t->data = owner;
    return 0;
}

int uvx_idle_init(uv_loop_t *loop, uv_idle_t *h, void *owner)
{
    int rc = uv_idle_init(loop, h);
    if (rc < 0) {
        log_error("uv_idle_init: %s", uv_strerror(rc));
        return rc;
    }
    h->data = owner;
    return 0;
}

int uvx_pipe_init(uv_loop_t *loop, uv_pipe_t *p, void *owner)
{
    return uvx_pipe_init_ipc(loop, p, owner, 0);
}

int uvx_pipe_init_ipc(uv_loop_t *loop, uv_pipe_t *p, void *owner, int ipc)
{
    int rc = uv_pipe_init(loop, p, ipc);
    if (rc < 0) {
        log_error("uv_pipe_init: %s", uv_strerror(rc));
        return rc;
    }
    p->data = owner;
    return 0;
}

int uvx_timer_start(uv_timer_t *t, uv_timer_cb cb, uint64_t timeout_ms, uint64_t repeat_ms,
                    const char *what)
{
    int rc = uv_timer_start(t, cb, timeout_ms, repeat_ms);
    if (rc < 0)
        log_error("uv_timer_start (%s): %s", what, uv_strerror(rc));
    return rc;
}

int uvx_idle_start(uv_idle_t *h, uv_idle_cb cb, const char *what)
{
    int rc = uv_idle_start(h, cb);
    if (rc < 0)
        log_error("uv_idle_start (%s): %s", what, uv_strerror(rc));
    return rc;
}

int uvx_idle_stop(uv_idle_t *h)
{
    return uv_idle_stop(h); /* documented to return 0 always */
}

bool uvx_close(uv_handle_t *h, uv_close_cb cb)
{
    if (!h->loop || uv_is_closing(h))
        return false;
    uv_close(h, cb);
    return true;
}

int uvx_read_start(uv_stream_t *st, uv_alloc_cb alloc, uv_read_cb cb, const char *what)
{
    int rc = uv_read_start(st, alloc, cb);
    if (rc < 0)
        log_warn("%s: uv_read_start: %s", what, uv_strerror(rc));
    return rc;
}

int uvx_read_stop(uv_stream_t *st, const char *what)
{
    int rc = uv_read_stop(st);
    if (rc < 0)
        log_warn("%s: uv_read_stop: %s", what, uv_strerror(rc));
    return rc;
}

int uvx_write(uv_write_t *wr, uv_stream_t *st, const uv_buf_t *bufs, unsigned nbufs, void *owner,
              uv_write_cb cb, const char *what)
{
    wr->data = owner;
    int rc = uv_write(wr, st, bufs, nbufs, cb);
    if (rc < 0)
        log_debug("%s: uv_write: %s", what, uv_strerror(rc));
    return rc;
}

int uvx_write2(uv_write_t *wr, uv_stream_t *st, const uv_buf_t *bufs, unsigned nbufs,
               uv_stream_t *send, void *owner, uv_write_cb cb, const char *what)
{
    if (!send)
        return uvx_write(wr, st, bufs, nbufs, owner, cb, what);
    wr->data = owner;
    int rc = uv_write2(wr, st, bufs, nbufs, send, cb);
    if (rc < 0)
        log_warn("%s: uv_write2: %s", what, uv_strerror(rc));
    return rc;
}

static void uvx_free_on_close(uv_handle_t *h)
{
    free(h);
}

uv_pipe_t *uvx_fd_handle(uv_loop_t *loop, int fd)
{
    uv_pipe_t *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    int rc = uv_pipe_init(loop, p, 0);
    if (rc < 0) {
        log_error("uv_pipe_init: %s", uv_strerror(rc));
        free(p);
        return NULL;
    }
    if ((rc = uv_pipe_open(p, fd)) < 0) {
        log_error("uv_pipe_open(fd %d): %s", fd, uv_strerror(rc));
        uv_close((uv_handle_t *)p, uvx_free_on_close); /* fd is still the caller's */
        return NULL;
    }
    return p;
}

void uvx_fd_handle_close(uv_pipe_t *p)
{
    if (p)
        uv_close((uv_handle_t *)p, uvx_free_on_close);
}

int uvx_take_pending_fd(uv_pipe_t *ipc)
{
    if (uv_pipe_pending_count(ipc) <= 0)
        return -1;
    uv_pipe_t *tmp = malloc(sizeof *tmp);
    if (!tmp || uv_pipe_init(ipc->loop, tmp, 0) < 0) {
        free(tmp);
        return -2;
    }
    int fd = -1, rc = uv_accept((uv_stream_t *)ipc, (uv_stream_t *)tmp);
    uv_os_fd_t got;
    if (rc == 0 && uv_fileno((uv_handle_t *)tmp, &got) == 0)
        fd = fcntl(got, F_DUPFD_CLOEXEC, 0);
    else if (rc < 0)
        log_warn("uv_accept (a passed fd): %s", uv_strerror(rc));
    uv_close((uv_handle_t *)tmp, uvx_free_on_close); /* closes the accepted fd itself */
    return fd < 0 ? -2 : fd;
}

size_t uvx_write_queue_size(const uv_stream_t *st)
{
    return uv_stream_get_write_queue_size(st);
}
