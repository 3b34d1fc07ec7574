/* SPDX-License-Identifier: Apache-2.0 */
/* uvx.h - libuv, wrapped once for what several server modules share.
 *
 * Each wrapper checks libuv's return code and logs the failure with what
 * the caller was doing (`what`), so callers only decide what a failure
 * means for them. Handles get their owner in handle->data at init, and are
 * closed through uvx_close, which is idempotent and never closes a handle
 * whose init did not run (the owning struct starts zeroed). A handle's
 * memory may be freed only in the close callback (libuv's rule): pass one
 * when the handle lives in memory that is freed afterwards.
 */
#ifndef GPUQ_SERVER_UVX_H
#define GPUQ_SERVER_UVX_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* Init a timer / idle / pipe handle on loop with h->data = owner. Return 0
 * or the libuv error (logged). */
int uvx_timer_init(uv_loop_t *loop, uv_timer_t *t, void *owner);
int uvx_idle_init(uv_loop_t *loop, uv_idle_t *h, void *owner);
int uvx_pipe_init(uv_loop_t *loop, uv_pipe_t *p, void *owner);
/* ipc 1: a pipe whose frames may carry fds (SCM_RIGHTS) both ways. */
int uvx_pipe_init_ipc(uv_loop_t *loop, uv_pipe_t *p, void *owner, int ipc);

/* Start (or restart) a timer; stop it. Return 0 or the libuv error (logged
 * with what). */
int uvx_timer_start(uv_timer_t *t, uv_timer_cb cb, uint64_t timeout_ms, uint64_t repeat_ms,
                    const char *what);
int uvx_idle_start(uv_idle_t *h, uv_idle_cb cb, const char *what);
int uvx_idle_stop(uv_idle_t *h);

/* Close h if its init ran and it is not closing yet; cb (may be NULL) runs
 * once the loop is done with it. Returns true when this call closed it. */
bool uvx_close(uv_handle_t *h, uv_close_cb cb);

/* Reading a stream: start/stop, logging failures under the stream owner's
 * label. Return 0 or the libuv error. */
int uvx_read_start(uv_stream_t *st, uv_alloc_cb alloc, uv_read_cb cb, const char *what);
int uvx_read_stop(uv_stream_t *st, const char *what);

/* Write nbufs buffers (borrowed until cb) with wr->data = owner. Returns 0
 * (cb will run) or the libuv error (cb will not run; logged at debug, since
 * a peer that went away is routine). */
int uvx_write(uv_write_t *wr, uv_stream_t *st, const uv_buf_t *bufs, unsigned nbufs, void *owner,
              uv_write_cb cb, const char *what);

/* Bytes queued on st for writing. */
size_t uvx_write_queue_size(const uv_stream_t *st);
/* uvx_write, with send's fd attached to the first byte (send NULL: plain
 * write); send must stay open until cb. */
int uvx_write2(uv_write_t *wr, uv_stream_t *st, const uv_buf_t *bufs, unsigned nbufs,
               uv_stream_t *send, void *owner, uv_write_cb cb, const char *what);
/* fd (taken: closed with the handle) as a pipe handle for uvx_write2; NULL
 * on failure (fd is then still the caller's). uvx_fd_handle_close closes
 * and frees it (NULL is fine). */
uv_pipe_t *uvx_fd_handle(uv_loop_t *loop, int fd);
void uvx_fd_handle_close(uv_pipe_t *p);
/* The oldest fd an IPC pipe received, as a new CLOEXEC fd owned by the
 * caller: -1 when none is pending, -2 when one was pending but could not be
 * taken (it is closed). */
int uvx_take_pending_fd(uv_pipe_t *ipc);

#endif
