/* sockio.c - blocking socket helpers (see sockio.h). */
#include "sockio.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "errors.h"

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

int sockio_read_full(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r == 0)
            return GPUQ_E_CLOSED;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno == ECONNRESET ? GPUQ_E_CLOSED : GPUQ_E_IO;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
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
    while (cnt > 0) {
        if (iov->iov_len == 0) {
            iov++;
            cnt--;
            continue;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)cnt;
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
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
