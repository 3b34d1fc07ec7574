/* sockio.h - blocking Unix-socket I/O for libgpuq.
 *
 * Every function loops over EINTR and short transfers. Sends use MSG_NOSIGNAL
 * so a closed peer gives GPUQ_E_CLOSED instead of SIGPIPE. Returns 0,
 * GPUQ_E_CLOSED (peer gone: EOF, EPIPE, ECONNRESET) or GPUQ_E_IO (errno kept).
 * Every byte sent or received is counted, for the whole process
 * (gpuq_io_counts, gpuq_internal.h).
 */
#ifndef GPUQ_CLIENT_SOCKIO_H
#define GPUQ_CLIENT_SOCKIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* A send passes at most this many bytes to one sendmsg, and at most
 * SOCKIO_MAX_IOV pieces (the rest go in the next call). */
#define SOCKIO_SEND_CHUNK (4u << 20)
#define SOCKIO_MAX_IOV 8

/* Connect a blocking SOCK_STREAM socket to path. *fd owned by the caller. */
int sockio_connect(const char *path, int *fd);
/* Read exactly n bytes. EOF before n bytes -> GPUQ_E_CLOSED. */
int sockio_read_full(int fd, void *buf, size_t n);
/* Read and drop n bytes. */
int sockio_discard(int fd, uint64_t n);
/* Write all of iov[0..cnt); iov is modified (borrowed, scratch). */
int sockio_writev_full(int fd, struct iovec *iov, int cnt);
/* The same with send_fd (>= 0) attached to the first byte (SCM_RIGHTS). */
int sockio_writev_full_fd(int fd, struct iovec *iov, int cnt, int send_fd);
/* Wait until fd is ready for events (POLLIN, POLLOUT: 1) or intr_fd is
 * readable, at its end or in error, which wins when both are (0);
 * GPUQ_E_BAD_ARGUMENT when intr_fd is not open, GPUQ_E_IO when poll fails.
 * A signal just makes it look again. */
int sockio_wait_intr(int fd, short events, int intr_fd);
/* sockio_writev_full_fd, interruptible when intr_fd >= 0: before each
 * piece it waits for fd to take bytes or intr_fd to be readable (or at its
 * end), and returns GPUQ_E_INTERRUPTED at once when intr_fd is, whether or
 * not fd could take more; GPUQ_E_BAD_ARGUMENT when intr_fd is not open.
 * *sent (may be NULL; not reset here) grows by the bytes sent, so the
 * caller knows whether the stream got a part of what it wrote. */
int sockio_writev_full_intr(int fd, struct iovec *iov, int cnt, int send_fd, int intr_fd,
                            uint64_t *sent);
/* sockio_read_full, also receiving an fd that comes with the first byte
 * (*rx_fd, owned by the caller; -1 when none; extra fds are closed). */
int sockio_read_full_fd(int fd, void *buf, size_t n, int *rx_fd);
/* Wait up to timeout_ms for fd to have bytes to read (or EOF). 1 when it
 * has, 0 on timeout, GPUQ_E_IO on a poll error. */
int sockio_wait_readable(int fd, int timeout_ms);

#endif
