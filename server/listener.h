/* SPDX-License-Identifier: Apache-2.0 */
/* listener.h - the listening Unix socket.
 *
 * Path: --socket, else $GPUQ_SOCKET, else $XDG_RUNTIME_DIR/gpuq/gpuqd.sock
 * (directory made 0700), else /run/gpuq/gpuqd.sock (directory made 0750;
 * proto/socket_path.h). With a socket group (--socket-group), the socket
 * gpuqd binds gets that group, and so does the directory of a default path
 * when it is gpuqd's, with mode 0750: members of the group may connect when
 * root runs gpuqd by hand; a path the user named keeps its directory as it
 * is. A socket that cannot be given the group is an error. A socket systemd passed
 * (socket activation, see sdnotify_listen_fd) is used as is and the path is
 * then only logged; a passed fd that is not one listening Unix stream socket
 * is an error. A stale socket file (connect refused) is replaced; a live one
 * means another gpuqd: error "already running".
 */
#ifndef GPUQ_SERVER_LISTENER_H
#define GPUQ_SERVER_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

/* Who may use a socket gpuqd binds (borrowed for the call). */
typedef struct listener_perm {
    unsigned mode;     /* of the socket file, e.g. 0660 */
    gid_t gid;         /* its group and its directory's; (gid_t)-1: gpuqd's own */
    const char *group; /* gid's name as configured, for messages */
} listener_perm;

/* Resolve the path into out[cap], making (and, with a group, handing over)
 * a default path's directory. Returns 0 or -1 (message logged). */
int listener_resolve_path(const char *opt, const listener_perm *perm, char *out, size_t cap);
/* Init, bind (or adopt the systemd fd) and listen; a socket file it binds
 * gets perm's mode and group. *owned tells whether the socket file is ours
 * to unlink at exit. Returns 0 or -1 (logged); on failure the handle, if
 * initialised, is closed with uv_close(NULL). */
int listener_open(uv_loop_t *loop, uv_pipe_t *pipe, const char *path, const listener_perm *perm,
                  uv_connection_cb cb, bool *owned);

#endif
