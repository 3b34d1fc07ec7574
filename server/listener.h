/* listener.h - the listening Unix socket.
 *
 * Path: --socket, else $GPUQ_SOCKET, else $XDG_RUNTIME_DIR/gpuq/gpuqd.sock
 * (directory made 0700), else /run/gpuq/gpuqd.sock. A socket systemd passed
 * (socket activation, see sdnotify_listen_fd) is used as is and the path is
 * then only logged; a passed fd that is not one listening Unix stream socket
 * is an error. A stale socket file (connect refused) is replaced; a live one
 * means another gpuqd: error "already running".
 */
#ifndef GPUQ_SERVER_LISTENER_H
#define GPUQ_SERVER_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* Resolve the path into out[cap]. Returns 0 or -1 (message logged). */
int listener_resolve_path(const char *opt, char *out, size_t cap);
/* Init, bind (or adopt the systemd fd) and listen; a socket file it binds
 * gets mode (e.g. 0660). *owned tells whether the socket file is ours to
 * unlink at exit. Returns 0 or -1 (logged); on failure the handle, if
 * initialised, is closed with uv_close(NULL). */
int listener_open(uv_loop_t *loop, uv_pipe_t *pipe, const char *path, unsigned mode,
                  uv_connection_cb cb, bool *owned);

#endif
