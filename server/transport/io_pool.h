/* SPDX-License-Identifier: Apache-2.0 */
/* io_pool.h - the I/O threads: a session's bulk bytes (a large payload's
 * rest, a large reply group) move between its socket and staging on a
 * thread of this pool, never on the loop thread, so no session's array sits
 * between another session's frame and its reply (the model of Redis 6's
 * io-threads: the loop parses headers, schedules and answers; the threads
 * only move bytes).
 *
 * Happy path: the loop hands a job (an io_conn's read or write: the fd,
 * where the bytes go or come from, a priority level) to io_read/io_write and
 * stops touching those bytes. The conn's thread (one per conn, chosen by
 * its key, so one socket's reads and writes never race) moves them in
 * slices of IO_SLICE bytes, round robin among its ready jobs of the highest
 * level, so readers are served fairly and in priority order; a job whose
 * socket has nothing to give (a client that trickles) waits in the
 * thread's epoll set and costs the others nothing. When the job is done
 * its `done` runs on the loop thread (uv_async_send), exactly once. A
 * thread out of jobs spins a while (GPUQ_IO_SPIN_US) before it sleeps, so
 * under a stream of jobs a submit wakes nobody.
 *
 * Failure: a read that meets EOF ends with UV_EOF, a socket error with its
 * code (-errno, as libuv's); `moved` says how far it got. io_cancel takes a
 * job back synchronously (it waits at most for the slice in progress): after
 * it returns, no thread touches the job, its fd or its buffers and `done`
 * will not run, so the caller may close the fd and free the buffers. A pool
 * whose threads cannot start is not made (io_pool_new returns NULL) and the
 * caller moves its bytes on the loop as before.
 */
#ifndef GPUQ_SERVER_IO_POOL_H
#define GPUQ_SERVER_IO_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define IO_LEVELS 3         /* priority levels, 0 lowest (as the scheduler's) */
#define IO_MAX_BUFS 32      /* buffers of one write job */
#define IO_SLICE (1u << 20) /* bytes a job moves before the next ready job's turn */

typedef struct io_pool io_pool;
typedef struct io_job io_job;
typedef struct io_conn io_conn;

/* Runs on the loop thread when j is done (status set). */
typedef void (*io_done_fn)(io_job *j);

struct io_job {
    /* the caller's, set by io_read / io_write, unchanged while submitted */
    io_conn *conn;
    bool write;
    int level;
    uv_buf_t bufs[IO_MAX_BUFS]; /* borrowed until done or io_cancel */
    unsigned nbufs;
    uint64_t len; /* total bytes */
    io_done_fn done;
    void *owner;
    /* progress: set by the thread, read by anyone */
    _Atomic uint64_t moved; /* bytes moved so far */
    /* a write's bytes that may be with the peer: moved, plus those of the
     * system call in progress (the peer can read them before it returns) */
    _Atomic uint64_t offered;
    _Atomic uint64_t last_ns; /* uv_hrtime() when the last of them moved */
    int status;               /* in done: 0, UV_EOF or the socket's error */
    bool submitted;           /* the loop's: from io_read/io_write to done or io_cancel */
    /* the pool's (under its lock) */
    int state;
    bool cancel;
    io_job *next;
};

/* One socket's two jobs; embedded in its owner, which keeps it (and the fd
 * open) while a job is submitted. */
struct io_conn {
    int fd;
    unsigned key; /* picks the thread */
    io_job rd, wr;
    uint32_t armed; /* the pool's: events it waits for in its epoll set */
};

/* A pool of nthreads (>= 1) on loop; NULL (logged) when it cannot start. */
io_pool *io_pool_new(uv_loop_t *loop, unsigned nthreads);
/* Stop the threads and free the pool. Every job must have been done or
 * cancelled. The async handle is closed with the loop's next turn: call
 * while the loop still runs (or run it once more). */
void io_pool_free(io_pool *p);
unsigned io_pool_threads(const io_pool *p);
/* How many times a submit had to wake a sleeping thread (a thread that
 * still spins after its last job needs none: io_pool.c, GPUQ_IO_SPIN_US). */
uint64_t io_pool_wakes(io_pool *p);

void io_conn_init(io_conn *c, int fd, unsigned key);
/* Read exactly len bytes into buf (c->rd must be idle). Returns 0. */
int io_read(io_pool *p, io_conn *c, void *buf, uint64_t len, int level, io_done_fn done,
            void *owner);
/* Write bufs[0..nbufs) (nbufs <= IO_MAX_BUFS, c->wr idle). Returns 0. */
int io_write(io_pool *p, io_conn *c, const uv_buf_t *bufs, unsigned nbufs, int level,
             io_done_fn done, void *owner);
/* Take j back: returns true when it was submitted (its done will not run;
 * j->moved and j->status say how far it got), false when it was idle. */
bool io_cancel(io_pool *p, io_job *j);
bool io_busy(const io_job *j);
/* Bytes of a job still to move (0 when idle); for a write, those no system
 * call has offered yet: once the peer can have read a byte, it is not
 * counted here (what the peer read decides what it may send next). */
uint64_t io_left(const io_job *j);

#endif
