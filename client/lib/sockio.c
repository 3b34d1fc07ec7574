/* SPDX-License-Identifier: Apache-2.0 */
/* sockio.c - blocking socket helpers (see sockio.h). */
#include "sockio.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "gpuq_internal.h"

/* Bytes moved by every socket of this process (gpuq_io_counts). */
static _Atomic uint64_t io_sent, io_received;

static void count_received(ssize_t n)
{
    atomic_fetch_add_explicit(&io_received, (uint64_t)n, memory_order_relaxed);
}

void gpuq_io_counts(uint64_t *sent, uint64_t *received)
{
    *sent = atomic_load_explicit(&io_sent, memory_order_relaxed);
    *received = atomic_load_explicit(&io_received, memory_order_relaxed);
}

int sockio_connect(const char *path, int *fd)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return GPUQ_E_IO;
    }
    memcpy(sa.sun_path, path, len + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return GPUQ_E_IO;
    int rc;
    do
        rc = connect(s, (struct sockaddr *)&sa, sizeof sa);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int e = errno;
        close(s);
        errno = e;
        return GPUQ_E_IO;
    }
    *fd = s;
    return 0;
}

/* Wait until fd has bytes to read (or EOF, or an error the next receive
 * reports). A thread blocked in recv(2) on a Unix stream socket sits on the
 * socket's one wait queue, which the kernel also wakes whenever the peer
 * reads what this side sent (unix_write_space): gpuqd's loop, reading the
 * next request, would wake this thread for nothing, paying an interprocessor
 * wake-up (costly on a VM) each time. poll(2)'s wait is woken for POLLIN
 * only. 0, or -1 when poll itself fails (errno set; not EINTR). */
static int wait_readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, -1)) < 0 && errno == EINTR)
        ;
    return n < 0 ? -1 : 0;
}

int sockio_read_full(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r == 0)
            return GPUQ_E_CLOSED;
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (wait_readable(fd) < 0)
                    return GPUQ_E_IO; /* never a busy loop on a failing poll */
                continue;
            }
            if (errno == EINTR)
                continue;
            return errno == ECONNRESET ? GPUQ_E_CLOSED : GPUQ_E_IO;
        }
        count_received(r);
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int sockio_read_full_fd(int fd, void *buf, size_t n, int *rx_fd)
{
    *rx_fd = -1;
    if (n == 0)
        return 0;
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(8 * sizeof(int))];
    } cm;
    struct iovec iov = {buf, n};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.space;
    mh.msg_controllen = sizeof cm.space;
    ssize_t r;
    for (;;) {
        r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (r >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            break;
        if (errno != EINTR && wait_readable(fd) < 0)
            return GPUQ_E_IO;
    }
    if (r == 0)
        return GPUQ_E_CLOSED;
    if (r < 0)
        return errno == ECONNRESET ? GPUQ_E_CLOSED : GPUQ_E_IO;
    count_received(r);
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t k = 0; k < nfd; k++) {
            int got;
            memcpy(&got, CMSG_DATA(h) + k * sizeof(int), sizeof got);
            if (*rx_fd < 0)
                *rx_fd = got; /* one per frame; any other is closed */
            else
                close(got);
        }
    }
    int rc = sockio_read_full(fd, (uint8_t *)buf + r, n - (size_t)r);
    if (rc && *rx_fd >= 0) {
        close(*rx_fd);
        *rx_fd = -1;
    }
    return rc;
}

int sockio_discard(int fd, uint64_t n)
{
    uint8_t junk[16384];
    while (n > 0) {
        size_t k = n < sizeof junk ? (size_t)n : sizeof junk;
        int rc = sockio_read_full(fd, junk, k);
        if (rc)
            return rc;
        n -= k;
    }
    return 0;
}

int sockio_writev_full(int fd, struct iovec *iov, int cnt)
{
    return sockio_writev_full_intr(fd, iov, cnt, -1, -1, NULL);
}

int sockio_wait_intr(int fd, short events, int intr_fd)
{
    struct pollfd p[2] = {{.fd = intr_fd, .events = POLLIN}, {.fd = fd, .events = events}};
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return GPUQ_E_IO;
        if (p[0].revents & POLLNVAL)
            return GPUQ_E_BAD_ARGUMENT;
        if (p[0].revents)
            return 0;
        if (p[1].revents)
            return 1;
    }
}

int sockio_writev_full_intr(int fd, struct iovec *iov, int cnt, int send_fd, int intr_fd,
                            uint64_t *sent)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } cm;
    while (cnt > 0) {
        if (iov->iov_len == 0) {
            iov++;
            cnt--;
            continue;
        }
        /* at most SOCKIO_SEND_CHUNK bytes a call, so that io_sent moves
         * while a large array goes out (a blocking sendmsg on a Unix
         * stream socket returns only once it has sent everything) */
        struct iovec part[SOCKIO_MAX_IOV];
        size_t room = SOCKIO_SEND_CHUNK;
        int np = 0;
        for (int k = 0; k < cnt && np < SOCKIO_MAX_IOV && room > 0; k++) {
            size_t l = iov[k].iov_len < room ? iov[k].iov_len : room;
            part[np++] = (struct iovec){iov[k].iov_base, l};
            room -= l;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = part;
        mh.msg_iovlen = (size_t)np;
        if (send_fd >= 0) { /* with the frame's first byte, once */
            memset(&cm, 0, sizeof cm);
            mh.msg_control = cm.space;
            mh.msg_controllen = sizeof cm.space;
            struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &send_fd, sizeof(int));
        }
        if (intr_fd >= 0) { /* then each send takes only what fits (MSG_DONTWAIT) */
            int wr = sockio_wait_intr(fd, POLLOUT, intr_fd);
            if (wr <= 0)
                return wr == 0 ? GPUQ_E_INTERRUPTED : wr;
        }
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | (intr_fd >= 0 ? MSG_DONTWAIT : 0));
        if (w > 0) {
            send_fd = -1;
            atomic_fetch_add_explicit(&io_sent, (uint64_t)w, memory_order_relaxed);
            if (sent)
                *sent += (uint64_t)w;
        }
        if (w < 0) {
            if (errno == EINTR || (intr_fd >= 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
                continue;
            return (errno == EPIPE || errno == ECONNRESET) ? GPUQ_E_CLOSED : GPUQ_E_IO;
        }
        size_t left = (size_t)w;
        while (cnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

int sockio_wait_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc;
    /* A signal restarts the whole wait: bounded per signal, which is enough
     * for the short waits this is for. */
    do
        rc = poll(&p, 1, timeout_ms);
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return GPUQ_E_IO;
    return rc > 0 ? 1 : 0;
}

/* CLOCK_MONOTONIC in ns into *ns; -1 if the clock fails (then no spin). */
static int mono_ns(uint64_t *ns)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return -1;
    *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return 0;
}

void sockio_spin_plan(sockio_spin *w, const gpuq_ref *in, uint32_t nin, const gpuq_ref *out,
                      uint32_t nout)
{
    uint64_t up = 0, down = 0;
    for (uint32_t k = 0; k < nin; k++)
        up += in[k].length;
    for (uint32_t k = 0; k < nout; k++)
        down += out[k].length;
    uint64_t now, bytes = up + down;
    uint64_t lo = (up > down ? up : down) / SOCKIO_SPIN_BYTES_PER_NS;
    uint64_t hi = bytes / SOCKIO_SPIN_BYTES_PER_NS;
    memset(w, 0, sizeof *w);
    if (bytes < SOCKIO_SPIN_MIN_BYTES || mono_ns(&now) != 0)
        return;
    w->from_ns = now + (lo > SOCKIO_SPIN_EARLY_NS ? lo - SOCKIO_SPIN_EARLY_NS : 0);
    w->until_ns = now + hi + SOCKIO_SPIN_LATE_NS;
}

void sockio_spin_wait(int fd, int intr_fd, const sockio_spin *w)
{
    /* poll ignores an entry whose fd is negative: no interrupt fd */
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = intr_fd, .events = POLLIN}};
    uint64_t now;
    if (w->until_ns == 0)
        return;
    while (mono_ns(&now) == 0 && now < w->from_ns) {
        uint64_t left = w->from_ns - now;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        int n = ppoll(p, 2, &ts, NULL);
        if (n != 0 && !(n < 0 && errno == EINTR))
            return; /* something to read, or an error for the blocking wait to report */
    }
    while (mono_ns(&now) == 0 && now < w->until_ns) {
        int n = poll(p, 2, 0);
        if (n != 0 && !(n < 0 && errno == EINTR))
            return;
    }
}
