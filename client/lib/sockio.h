/* SPDX-License-Identifier: Apache-2.0 */
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

struct gpuq_ref; /* proto/header.h's, not included here: gpuq.h may come first */

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
/* Wait until fd is ready for events (POLLIN, POLLOUT: 1) or intr_fd is
 * readable, at its end or in error, which wins when both are (0);
 * GPUQ_E_BAD_ARGUMENT when intr_fd is not open, GPUQ_E_IO when poll fails.
 * A signal just makes it look again. */
int sockio_wait_intr(int fd, short events, int intr_fd);
/* sockio_writev_full with send_fd (>= 0) attached to the first byte
 * (SCM_RIGHTS), interruptible when intr_fd >= 0: before each
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

/* The predictive spin of a reply wait. A request whose arrays all go by
 * reference into arenas (no payload on the socket either way) takes a
 * predictable time, mostly DMA; waking from a sleep of some milliseconds
 * costs 50-150 us on a GPU VM, which is what keeps a 16M-float request
 * (2.5-3 ms) behind a process that spins on its own stream. So the wait
 * sleeps until shortly before the guess, then polls without sleeping until
 * the reply is there or the window ends (gpuqd's own wait for the device
 * does the same, server/backends/cuda/backend_cuda_done.c). The guess is a range, from
 * the send: the larger of the input and output ref bytes at
 * SOCKIO_SPIN_BYTES_PER_NS (gpuqd pipelines a row-wise op's upload and
 * download at once) to their sum at that rate (a flat normalize, whose
 * download waits for its whole upload). Requests under
 * SOCKIO_SPIN_MIN_BYTES get no window: they are done in microseconds. */
#define SOCKIO_SPIN_MIN_BYTES (1u << 20)
#define SOCKIO_SPIN_BYTES_PER_NS 60u /* 60 GB/s: a little over pinned PCIe copies */
#define SOCKIO_SPIN_EARLY_NS 300000u /* start polling this long before the guess */
#define SOCKIO_SPIN_LATE_NS 2000000u /* and give up this long after it */
typedef struct sockio_spin {
    uint64_t from_ns, until_ns; /* CLOCK_MONOTONIC; until_ns 0: no window */
} sockio_spin;
/* *w: the window of a request sent now that names in[0..nin) and
 * out[0..nout) by reference and carries no payload either way: none
 * (until_ns 0) when they come to less than SOCKIO_SPIN_MIN_BYTES, else
 * from the range's start less SOCKIO_SPIN_EARLY_NS (not before now) until
 * its end plus SOCKIO_SPIN_LATE_NS. */
void sockio_spin_plan(sockio_spin *w, const struct gpuq_ref *in, uint32_t nin,
                      const struct gpuq_ref *out, uint32_t nout);
/* Before a blocking read of fd: within window w (until_ns 0: return at
 * once), sleep (ppoll, microseconds) until w->from_ns, then poll with a
 * zero timeout until w->until_ns, returning as soon as fd or intr_fd (-1:
 * none) is readable, at its end or in error. Reads nothing and reports
 * nothing: the caller's blocking wait then finds what is there (or what
 * went wrong) at once. A signal just looks again; a poll error ends it. */
void sockio_spin_wait(int fd, int intr_fd, const sockio_spin *w);

#endif
