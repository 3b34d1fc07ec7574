/* SPDX-License-Identifier: Apache-2.0 */
/* listener.c - see listener.h. */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "policy.h"
#include "sdnotify.h"
#include "socket_path.h"
#include "uvx.h"

/* The directory of a default socket path: made with mode dir_mode, or kept
 * as it is. With a socket group, a directory of ours gets that group and
 * mode 0750, so that the group's members may reach the socket in it (one
 * that is not ours is left alone, with a warning). Returns 0 or -1 (logged);
 * a directory that cannot be made is an error only when required. */
static int listener_make_dir(const char *dir, unsigned dir_mode, bool required,
                             const listener_perm *perm)
{
    if (mkdir(dir, (mode_t)dir_mode) < 0 && errno != EEXIST) {
        if (required) {
            log_error("mkdir %s: %s", dir, strerror(errno));
            return -1;
        }
        log_warn("mkdir %s: %s", dir, strerror(errno));
        return 0;
    }
    if (perm->gid == (gid_t)-1)
        return 0;
    struct stat sb;
    if (stat(dir, &sb) < 0) {
        log_error("stat %s: %s", dir, strerror(errno));
        return -1;
    }
    if (sb.st_uid != geteuid()) {
        log_warn("%s belongs to uid %u, not to gpuqd: its group and mode stay as they are "
                 "(socket_group %s)",
                 dir, (unsigned)sb.st_uid, perm->group);
        return 0;
    }
    if (chown(dir, (uid_t)-1, perm->gid) < 0) {
        log_error("socket_group %s: chown %s: %s", perm->group, dir, strerror(errno));
        return -1;
    }
    if (chmod(dir, 0750) < 0) {
        log_error("chmod 0750 %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int listener_resolve_path(const char *opt, const listener_perm *perm, char *out, size_t cap)
{
    const char *env = getenv(GPUQ_SOCKET_ENV);
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    const char *sys = gpuq_system_socket_dir();
    int n;
    if (opt && *opt) {
        n = snprintf(out, cap, "%s", opt);
    } else if (env && *env) {
        n = snprintf(out, cap, "%s", env);
    } else if (xdg && *xdg) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/" GPUQ_SOCKET_USER_SUBDIR, xdg);
        if (listener_make_dir(dir, 0700, true, perm) < 0)
            return -1;
        n = snprintf(out, cap, "%s/" GPUQ_SOCKET_FILE, dir);
    } else {
        if (listener_make_dir(sys, 0750, false, perm) < 0)
            return -1;
        n = snprintf(out, cap, "%s/" GPUQ_SOCKET_FILE, sys);
    }
    if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        log_error("socket path too long");
        return -1;
    }
    return 0;
}

/* 1: someone answers on path; 0: stale or absent (removed); -1: error. */
static int listener_probe(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return 0;
    if (!S_ISSOCK(sb.st_mode)) {
        log_error("%s exists and is not a socket", path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int err = errno;
    close(fd);
    if (rc == 0)
        return 1;
    if (err == ECONNREFUSED || err == ENOENT) {
        log_info("removing stale socket %s", path);
        if (unlink(path) < 0 && errno != ENOENT) {
            log_error("unlink %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    log_error("probe %s: %s", path, strerror(err));
    return -1;
}

/* Say which socket systemd passed; the resolved path is not used then. */
static void listener_log_passed(uv_pipe_t *pipe, int fd, const char *path)
{
    char name[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
    size_t len = sizeof name - 1;
    int rc = uv_pipe_getsockname(pipe, name, &len);
    bool named = rc == 0 && len > 0;
    if (named) {
        name[len] = '\0';
        if (name[0] == '\0')
            name[0] = '@'; /* abstract namespace */
    } else {
        snprintf(name, sizeof name, "unnamed");
    }
    if (named && strcmp(name, path) != 0)
        log_info("using the socket passed by systemd: fd %d, %s (not %s)", fd, name, path);
    else
        log_info("using the socket passed by systemd: fd %d, %s", fd, name);
}

int listener_open(uv_loop_t *loop, uv_pipe_t *pipe, const char *path, const listener_perm *perm,
                  int backlog, uv_connection_cb cb, bool *owned)
{
    int rc = uvx_pipe_init(loop, pipe, pipe->data);
    if (rc < 0)
        return -1;
    *owned = false;
    int fd = -1;
    int passed = sdnotify_listen_fd(&fd);
    if (passed < 0)
        goto err_after_init;
    if (passed) {
        if ((rc = uv_pipe_open(pipe, fd)) < 0) {
            log_error("uv_pipe_open(fd %d passed by systemd): %s", fd, uv_strerror(rc));
            close(fd);
            goto err_after_init;
        }
        listener_log_passed(pipe, fd, path);
        if (perm->gid != (gid_t)-1)
            log_info("socket_group %s: not applied to the socket systemd passed (its "
                     "SocketGroup= decides)",
                     perm->group);
    } else {
        int p = listener_probe(path);
        if (p == 1) {
            log_error("already running: another gpuqd answers on %s", path);
            goto err_after_init;
        }
        if (p < 0)
            goto err_after_init;
        if ((rc = uv_pipe_bind(pipe, path)) < 0) {
            log_error("bind %s: %s", path, uv_strerror(rc));
            goto err_after_init;
        }
        *owned = true;
        if (chmod(path, (mode_t)perm->mode) < 0)
            log_warn("chmod %s: %s", path, strerror(errno));
        if (perm->gid != (gid_t)-1 && chown(path, (uid_t)-1, perm->gid) < 0) {
            log_error("socket_group %s: chown %s: %s", perm->group, path, strerror(errno));
            goto err_after_bind;
        }
    }
    if ((rc = uv_listen((uv_stream_t *)pipe, backlog, cb)) < 0) {
        log_error("listen %s: %s", path, uv_strerror(rc));
        goto err_after_bind;
    }
    return 0;
err_after_bind:
    if (*owned)
        unlink(path);
    *owned = false;
err_after_init:
    uvx_close((uv_handle_t *)pipe, NULL);
    return -1;
}

static void listener_conn_free(uv_handle_t *h)
{
    listener_conn *c = h->data;
    free(c->groups);
    free(c);
}

/* The peer's credentials into c; unknown ones stay -1 (policy: no rights
 * beyond the defaults). */
static void listener_read_creds(listener_conn *c)
{
    uv_os_fd_t fd;
    int rc = uv_fileno((uv_handle_t *)&c->pipe, &fd);
    if (rc < 0)
        return;
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        return;
    c->pid = cr.pid;
    c->uid = cr.uid;
    c->gid = cr.gid;
    if (policy_peer_groups(fd, &c->groups, &c->ngroups) != 0) {
        c->groups = NULL; /* only the primary gid counts */
        c->ngroups = 0;
    }
}

listener_conn *listener_accept(uv_stream_t *ls, int *err)
{
    listener_conn *c = calloc(1, sizeof *c);
    if (!c) {
        *err = UV_ENOMEM;
        return NULL;
    }
    c->pid = -1;
    c->uid = (uid_t)-1;
    c->gid = (gid_t)-1;
    int rc = uv_pipe_init(ls->loop, &c->pipe, 0);
    if (rc < 0) {
        free(c);
        *err = rc;
        return NULL;
    }
    c->pipe.data = c;
    if ((rc = uv_accept(ls, (uv_stream_t *)&c->pipe)) < 0) {
        uv_close((uv_handle_t *)&c->pipe, listener_conn_free);
        *err = rc;
        return NULL;
    }
    listener_read_creds(c);
    return c;
}

int listener_refuse(listener_conn *c, const void *frame, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)frame, (unsigned)len);
    int rc = len ? uv_try_write((uv_stream_t *)&c->pipe, &b, 1) : 0;
    uv_close((uv_handle_t *)&c->pipe, listener_conn_free);
    if (rc < 0)
        return rc;
    return (size_t)rc == len ? 0 : UV_EAGAIN;
}

int listener_conn_move(listener_conn *c, uv_pipe_t *to)
{
    uv_os_fd_t fd;
    int rc = uv_fileno((uv_handle_t *)&c->pipe, &fd);
    int nfd = rc < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (rc == 0 && nfd < 0)
        rc = uv_translate_sys_error(errno);
    uv_close((uv_handle_t *)&c->pipe, listener_conn_free);
    if (rc < 0)
        return rc;
    if ((rc = uv_pipe_open(to, nfd)) < 0)
        close(nfd);
    return rc;
}
