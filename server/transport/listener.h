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
 *
 * Accepting: a connection is first accepted into a small listener_conn
 * (a handle and the peer's credentials, a few hundred bytes), so that the
 * server can decide whether it becomes a session before one is made. A
 * refused one gets its reply written at once (listener_refuse: a
 * non-blocking write, which a fresh connection's empty socket buffer always
 * takes whole) and is closed; a burst of connections over max_sessions
 * costs no session struct (with its 32 KiB read buffer) each. An admitted
 * one moves into the session's own pipe (listener_conn_move).
 */
#ifndef GPUQ_SERVER_LISTENER_H
#define GPUQ_SERVER_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

/* A connection accepted, not (yet) a session. */
typedef struct listener_conn {
    uv_pipe_t pipe;
    pid_t pid; /* SO_PEERCRED; -1 and (uid_t)-1, (gid_t)-1 when unknown */
    uid_t uid;
    gid_t gid;
    gid_t *groups; /* owned: supplementary groups (SO_PEERGROUPS), may be NULL */
    int ngroups;
} listener_conn;

/* Who may use a socket gpuqd binds (borrowed for the call). */
typedef struct listener_perm {
    unsigned mode;     /* of the socket file, e.g. 0660 */
    gid_t gid;         /* its group and its directory's; (gid_t)-1: gpuqd's own */
    const char *group; /* gid's name as configured, for messages */
} listener_perm;

/* Resolve the path into out[cap], making (and, with a group, handing over)
 * a default path's directory. Returns 0 or -1 (message logged). */
int listener_resolve_path(const char *opt, const listener_perm *perm, char *out, size_t cap);
/* Init, bind (or adopt the systemd fd) and listen with that backlog
 * (listen(2); the kernel caps it at net.core.somaxconn; a passed socket
 * gets it too); a socket file it binds gets perm's mode and group. *owned
 * tells whether the socket file is ours to unlink at exit. Returns 0 or -1
 * (logged); on failure the handle, if initialised, is closed with
 * uv_close(NULL). */
int listener_open(uv_loop_t *loop, uv_pipe_t *pipe, const char *path, const listener_perm *perm,
                  int backlog, uv_connection_cb cb, bool *owned);

/* In the connection callback of ls: uv_accept into a new listener_conn
 * with the peer's credentials. Returns it (the caller's, to refuse or to
 * move), or NULL with the libuv error in *err (nothing to free). */
listener_conn *listener_accept(uv_stream_t *ls, int *err);
/* Write frame[len] (borrowed for the call) to c's peer now, without
 * waiting, then close c (freed in its close callback). Returns 0 when all
 * of it was written, else the libuv error (c is closed all the same). */
int listener_refuse(listener_conn *c, const void *frame, size_t len);
/* Move c's socket into to (initialised with uv_pipe_init, not yet open):
 * a duplicate of the fd is opened there, and c is closed and freed either
 * way. Returns 0 or the libuv error (to is left unopened). */
int listener_conn_move(listener_conn *c, uv_pipe_t *to);

#endif
