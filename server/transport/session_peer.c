/* SPDX-License-Identifier: Apache-2.0 */
/* session_peer.c - see session_peer.h. */
#include "session_peer.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "policy.h"

/* "session N" for the log lines uvx writes. */
const char *session_label(const session *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "session %llu", (unsigned long long)s->id);
    return buf;
}

/* After EOF: did the client only shut its sending side (shutdown(SHUT_WR):
 * it still reads, so what it sent is answered) or close the connection
 * (then nobody will read a reply and its work is dropped)? A Unix socket
 * whose peer is gone polls POLLHUP; one that was half-closed does not. */
bool session_peer_reads(session *s)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&s->pipe, &fd) != 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* The peer's supplementary groups (SO_PEERGROUPS, Linux 4.13+) into
 * s->groups; without them only the primary gid counts for policy. */
static void session_read_groups(session *s, int fd)
{
    gid_t *g;
    int n, err = policy_peer_groups(fd, &g, &n);
    if (err) {
        log_debug("session %llu: SO_PEERGROUPS: %s", (unsigned long long)s->id, strerror(err));
        return;
    }
    free(s->groups);
    s->groups = g;
    s->ngroups = n;
}

void session_peer_read(session *s, int fd)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0) {
        s->pid = cr.pid;
        s->uid = cr.uid;
        s->gid = cr.gid;
        session_read_groups(s, fd);
    } else {
        log_warn("session %llu: SO_PEERCRED failed", (unsigned long long)s->id);
        s->uid = (uid_t)-1;
        s->gid = (gid_t)-1;
    }
}

void session_apply_policy(session *s)
{
    policy_caps_for(&s->srv->cfg, s->uid, s->gid, s->groups, s->ngroups, &s->caps);
}
