/* SPDX-License-Identifier: Apache-2.0 */
/* session_fd.c - see session_fd.h. */
#include "session_fd.h"

#include <unistd.h>

#include "uvx.h"

/* Fds (SCM_RIGHTS). The kernel hands an fd over with the read that holds
 * the first byte of the frame it came with, and ends that read after the
 * message that carried it. So it belongs to a frame that begins in the
 * read's bytes: it waits in read_fd, is offered to each frame that begins
 * in them (rx_fd, from its prefix on; arena_import takes it, request.c
 * drops it for any other op, which passes it on to the next frame while
 * the read's bytes last), and is closed when they are all fed. A client
 * that attaches its fds as PROTOCOL.md says (each arena_import's own, with
 * its first byte; none with other frames) gets each to its own frame. An
 * fd that comes with a direct read (inside a payload) belongs to no frame:
 * closed at once. */
void session_take_pending_fds(session *s, bool direct)
{
    int fd;
    while ((fd = uvx_take_pending_fd(&s->pipe)) != -1) {
        if (fd < 0)
            continue; /* could not be taken: closed */
        if (!direct && s->read_fd < 0) {
            s->read_fd = fd;
            continue;
        }
        if (!direct)
            s->read_fd_extra = true;
        close(fd);
    }
}

int session_take_fd(session *s, bool *extra)
{
    int fd = s->rx_fd;
    *extra = s->rx_fd_extra;
    s->rx_fd = -1;
    s->rx_fd_extra = false;
    return fd;
}

void session_drop_fd(session *s)
{
    if (s->rx_fd >= 0 && s->read_fd < 0 && s->rx_off < s->rx_len && !s->closing) {
        /* a later frame in this read's bytes may be the fd's */
        s->read_fd = s->rx_fd;
        s->read_fd_extra = s->rx_fd_extra;
        s->rx_fd = -1;
        s->rx_fd_extra = false;
        return;
    }
    if (s->rx_fd >= 0)
        close(s->rx_fd);
    s->rx_fd = -1;
    s->rx_fd_extra = false;
}

void session_close_read_fd(session *s)
{
    if (s->read_fd >= 0)
        close(s->read_fd);
    s->read_fd = -1;
    s->read_fd_extra = false;
}

/* A frame begins: the previous frame's fd, never taken, is closed; this
 * read's fd (if any) is offered to it. */
void session_frame_start(session *s)
{
    s->frame_ns = s->rx_ns;
    s->frame_got = 0;
    if (s->rx_fd >= 0)
        close(s->rx_fd);
    s->rx_fd = s->read_fd;
    s->rx_fd_extra = s->read_fd_extra;
    s->read_fd = -1;
    s->read_fd_extra = false;
}
