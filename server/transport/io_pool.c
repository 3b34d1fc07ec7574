/* SPDX-License-Identifier: Apache-2.0 */
/* io_pool.c - see io_pool.h.
 *
 * One mutex guards every job's state, the threads' ready lists and the
 * list of done jobs; it is never held across a read or a write. A job is
 * IDLE (the caller's), READY (in its thread's list), RUNNING (its thread
 * moves a slice, unlocked), PARKED (its socket has nothing: the thread's
 * epoll set watches the fd) or DONE (waiting for the loop's async
 * callback). Only the job's thread changes its epoll set, and it deals with
 * a cancelled job only after the batch of events in hand, so an event never
 * points at a conn whose owner was let go.
 *
 * A thread that runs out of jobs polls (unlocked, on its ready count) for
 * GPUQ_IO_SPIN_US (IO_SPIN_US_DEFAULT, at most IO_SPIN_US_MAX; 0: never)
 * before it sleeps in epoll: under a stream of small jobs it is never
 * asleep when the next one comes, so the loop submits without writing its
 * eventfd and the thread starts without a wake-up. A busy thread still
 * looks at its epoll set (without waiting) every IO_POLL_EVERY jobs, so a
 * parked job whose socket is ready again is not kept waiting by a stream
 * of ready ones. */
#include "io_pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "uvx.h"

#define IO_SPIN_US_DEFAULT 50
#define IO_SPIN_US_MAX 10000000u /* 10 s: GPUQ_IO_SPIN_US above it is taken as it */
#define IO_POLL_EVERY 16         /* jobs a busy thread runs between looks at its epoll set */

enum { J_IDLE, J_READY, J_RUNNING, J_PARKED, J_DONE };
enum { SLICE_SPENT, SLICE_FINISHED, SLICE_AGAIN };

typedef struct io_worker {
    io_pool *p;
    pthread_t th;
    bool started, sleeping;
    _Atomic unsigned nready; /* jobs in its ready lists (read unlocked while it spins) */
    int epfd, evfd;
    io_job *head[IO_LEVELS], *tail[IO_LEVELS]; /* ready, FIFO per level */
} io_worker;

struct io_pool {
    uv_async_t async; /* done jobs: the loop runs their done */
    pthread_mutex_t mu;
    pthread_cond_t let_go; /* a cancelled job is idle again */
    io_job *done_head, *done_tail;
    uint64_t spin_ns;       /* GPUQ_IO_SPIN_US */
    _Atomic uint64_t wakes; /* eventfd writes that woke a sleeping thread */
    _Atomic bool stop;
    unsigned n;
    io_worker w[];
};

static io_worker *io_worker_of(io_pool *p, const io_conn *c)
{
    return &p->w[c->key % p->n];
}

static void io_wake(io_worker *w)
{
    if (!w->sleeping)
        return;
    atomic_fetch_add(&w->p->wakes, 1);
    uint64_t one = 1;
    ssize_t n;
    do
        n = write(w->evfd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
    /* EAGAIN: the counter is full, so the thread wakes anyway */
}

static void io_push(io_worker *w, io_job *j, bool front)
{
    int l = j->level;
    j->state = J_READY;
    atomic_fetch_add(&w->nready, 1);
    if (front) {
        j->next = w->head[l];
        w->head[l] = j;
        if (!w->tail[l])
            w->tail[l] = j;
        return;
    }
    j->next = NULL;
    if (w->tail[l])
        w->tail[l]->next = j;
    else
        w->head[l] = j;
    w->tail[l] = j;
}

static void io_unlink_ready(io_worker *w, io_job *j)
{
    int l = j->level;
    io_job **pp = &w->head[l], *prev = NULL;
    while (*pp && *pp != j) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = j->next;
    if (w->tail[l] == j)
        w->tail[l] = prev;
    j->next = NULL;
    atomic_fetch_sub(&w->nready, 1);
}

static io_job *io_pop(io_worker *w)
{
    for (int l = IO_LEVELS - 1; l >= 0; l--) {
        io_job *j = w->head[l];
        if (j) {
            w->head[l] = j->next;
            if (!w->head[l])
                w->tail[l] = NULL;
            j->next = NULL;
            atomic_fetch_sub(&w->nready, 1);
            return j;
        }
    }
    return NULL;
}

/* Make w's epoll set watch exactly what c's parked jobs wait for. Returns 0
 * or -errno. */
static int io_arm(io_worker *w, io_conn *c)
{
    uint32_t want =
        (c->rd.state == J_PARKED ? EPOLLIN : 0u) | (c->wr.state == J_PARKED ? EPOLLOUT : 0u);
    if (want == c->armed)
        return 0;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    int op = !want ? EPOLL_CTL_DEL : !c->armed ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (epoll_ctl(w->epfd, op, c->fd, &ev) < 0) {
        int e = errno;
        if (op != EPOLL_CTL_DEL) {
            log_error("io: epoll_ctl(fd %d): %s", c->fd, strerror(e));
            return -e;
        }
    }
    c->armed = want;
    return 0;
}

static void io_finish(io_pool *p, io_job *j)
{
    j->state = J_DONE;
    j->next = NULL;
    if (p->done_tail)
        p->done_tail->next = j;
    else
        p->done_head = j;
    p->done_tail = j;
    (void)uv_async_send(&p->async); /* fails only on a closing handle */
}

/* A cancelled job is idle again: what it armed is disarmed, its canceller
 * wakes. */
static void io_let_go(io_pool *p, io_worker *w, io_job *j)
{
    j->state = J_IDLE;
    (void)io_arm(w, j->conn);
    pthread_cond_broadcast(&p->let_go);
}

/* The socket has nothing for j now: the thread's epoll set waits for it. */
static void io_park(io_pool *p, io_worker *w, io_job *j)
{
    j->state = J_PARKED;
    int rc = io_arm(w, j->conn);
    if (rc < 0) {
        j->state = J_RUNNING;
        j->status = rc;
        io_finish(p, j);
    }
}

static void io_moved(io_job *j, uint64_t moved)
{
    atomic_store(&j->moved, moved);
    atomic_store(&j->offered, moved);
    atomic_store(&j->last_ns, uv_hrtime());
}

/* Move up to IO_SLICE bytes of j (unlocked: only j's thread touches its
 * bytes while it runs). */
static int io_slice(io_job *j)
{
    uint64_t moved = atomic_load(&j->moved), budget = IO_SLICE;
    int fd = j->conn->fd;
    while (moved < j->len && budget > 0) {
        ssize_t n;
        if (!j->write) {
            uint64_t want = j->len - moved < budget ? j->len - moved : budget;
            n = read(fd, j->bufs[0].base + moved, (size_t)want);
            if (n == 0) {
                j->status = UV_EOF;
                return SLICE_FINISHED;
            }
        } else {
            struct iovec iov[IO_MAX_BUFS];
            int niov = 0;
            uint64_t skip = moved, room = budget;
            for (unsigned i = 0; i < j->nbufs && room > 0; i++) {
                uint64_t len = j->bufs[i].len;
                if (skip >= len) {
                    skip -= len;
                    continue;
                }
                uint64_t take = len - skip < room ? len - skip : room;
                iov[niov++] = (struct iovec){j->bufs[i].base + skip, (size_t)take};
                room -= take;
                skip = 0;
            }
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
            atomic_store(&j->offered, moved + (budget - room));
            n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return SLICE_AGAIN;
            j->status = -errno;
            return SLICE_FINISHED;
        }
        moved += (uint64_t)n;
        budget = (uint64_t)n < budget ? budget - (uint64_t)n : 0;
        io_moved(j, moved);
    }
    if (moved < j->len)
        return SLICE_SPENT;
    j->status = 0;
    return SLICE_FINISHED;
}

/* An event of w's epoll set: the parked jobs it concerns are ready again. */
static void io_event(io_worker *w, io_conn *c, uint32_t ev)
{
    uint32_t bad = EPOLLHUP | EPOLLERR;
    if (c->rd.state == J_PARKED && (ev & (EPOLLIN | EPOLLRDHUP | bad)))
        io_push(w, &c->rd, false);
    if (c->wr.state == J_PARKED && (ev & (EPOLLOUT | bad)))
        io_push(w, &c->wr, false);
    if (io_arm(w, c) < 0) /* a DEL does not fail; a MOD that failed leaves it armed */
        log_error("io: cannot disarm fd %d", c->fd);
}

/* Wait up to timeout ms (-1: until woken; 0: only look) for w's epoll set,
 * unlocked; its events put parked jobs back in line. Called and returns
 * with the lock held. */
static void io_poll(io_pool *p, io_worker *w, int timeout)
{
    struct epoll_event ev[64];
    w->sleeping = timeout != 0;
    pthread_mutex_unlock(&p->mu);
    int n = epoll_wait(w->epfd, ev, (int)(sizeof ev / sizeof ev[0]), timeout);
    int e = errno;
    pthread_mutex_lock(&p->mu);
    w->sleeping = false;
    if (n < 0 && e != EINTR) {
        log_error("io: epoll_wait: %s", strerror(e));
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        if (!ev[i].data.ptr) {
            uint64_t v;
            ssize_t k = read(w->evfd, &v, sizeof v);
            (void)k; /* EAGAIN: another wake already drained it */
            continue;
        }
        io_event(w, ev[i].data.ptr, ev[i].events);
    }
}

static inline void io_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    sched_yield();
#endif
}

/* Out of jobs: watch w's ready count, unlocked, for the pool's spin. True
 * when a job (or the stop) came meanwhile. Called and returns locked. */
static bool io_spin(io_pool *p, io_worker *w)
{
    if (!p->spin_ns)
        return false;
    pthread_mutex_unlock(&p->mu);
    uint64_t t0 = uv_hrtime();
    bool came = false;
    for (unsigned i = 1;; i++) {
        if (atomic_load(&w->nready) || atomic_load(&p->stop)) {
            came = true;
            break;
        }
        if (i % 64 == 0 && uv_hrtime() - t0 >= p->spin_ns)
            break;
        io_relax();
    }
    pthread_mutex_lock(&p->mu);
    return came;
}

static void *io_worker_main(void *arg)
{
    io_worker *w = arg;
    io_pool *p = w->p;
    unsigned since_poll = 0;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        io_job *j = io_pop(w);
        if (j) {
            if (j->cancel) {
                io_let_go(p, w, j);
                continue;
            }
            j->state = J_RUNNING;
            pthread_mutex_unlock(&p->mu);
            int r = io_slice(j);
            pthread_mutex_lock(&p->mu);
            if (j->cancel)
                io_let_go(p, w, j);
            else if (r == SLICE_FINISHED)
                io_finish(p, j);
            else if (r == SLICE_AGAIN)
                io_park(p, w, j);
            else
                io_push(w, j, false);            /* behind the others of its level */
            if (++since_poll >= IO_POLL_EVERY) { /* parked ones may be ready */
                since_poll = 0;
                io_poll(p, w, 0);
            }
            continue;
        }
        /* a job pushed while the lock was let go is in the list now */
        if (io_spin(p, w) || atomic_load(&w->nready))
            continue;
        since_poll = 0;
        io_poll(p, w, -1);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void io_on_async(uv_async_t *h)
{
    io_pool *p = h->data;
    /* One at a time: a done may cancel another job of the list (its
     * session closes), which then must not be done too. */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        io_job *j = p->done_head;
        if (j) {
            p->done_head = j->next;
            if (!p->done_head)
                p->done_tail = NULL;
            j->next = NULL;
            j->state = J_IDLE;
        }
        pthread_mutex_unlock(&p->mu);
        if (!j)
            return;
        j->submitted = false;
        j->done(j); /* may free whatever holds j */
    }
}

static void io_pool_on_close(uv_handle_t *h)
{
    free(h->data);
}

/* Stop and join the threads that started, close their fds. */
static void io_pool_stop(io_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    for (unsigned i = 0; i < p->n; i++) {
        p->w[i].sleeping = true; /* wake it whatever it does */
        io_wake(&p->w[i]);
    }
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n; i++) {
        io_worker *w = &p->w[i];
        if (w->started) {
            int rc = pthread_join(w->th, NULL);
            if (rc)
                log_error("io: pthread_join: %s", strerror(rc));
        }
        w->started = false;
        if (w->epfd >= 0)
            close(w->epfd);
        if (w->evfd >= 0)
            close(w->evfd);
        w->epfd = w->evfd = -1;
    }
}

static int io_worker_start(io_worker *w)
{
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->epfd < 0 || w->evfd < 0) {
        log_error("io: epoll_create1/eventfd: %s", strerror(errno));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) < 0) {
        log_error("io: epoll_ctl(eventfd): %s", strerror(errno));
        return -1;
    }
    int rc = pthread_create(&w->th, NULL, io_worker_main, w);
    if (rc) {
        log_error("io: pthread_create: %s", strerror(rc));
        return -1;
    }
    w->started = true;
    return 0;
}

io_pool *io_pool_new(uv_loop_t *loop, unsigned nthreads)
{
    if (nthreads == 0)
        return NULL;
    io_pool *p = calloc(1, sizeof *p + nthreads * sizeof p->w[0]);
    if (!p) {
        log_error("io: out of memory for %u threads", nthreads);
        return NULL;
    }
    p->n = nthreads;
    const char *spin = getenv("GPUQ_IO_SPIN_US");
    uint64_t spin_us = spin && *spin ? strtoull(spin, NULL, 10) : IO_SPIN_US_DEFAULT;
    p->spin_ns = (spin_us < IO_SPIN_US_MAX ? spin_us : IO_SPIN_US_MAX) * 1000u;
    for (unsigned i = 0; i < nthreads; i++) {
        p->w[i].p = p;
        p->w[i].epfd = p->w[i].evfd = -1;
    }
    int rc = pthread_mutex_init(&p->mu, NULL);
    if (rc) {
        log_error("io: pthread_mutex_init: %s", strerror(rc));
        goto err_after_pool;
    }
    rc = pthread_cond_init(&p->let_go, NULL);
    if (rc) {
        log_error("io: pthread_cond_init: %s", strerror(rc));
        goto err_after_mutex;
    }
    rc = uv_async_init(loop, &p->async, io_on_async);
    if (rc < 0) {
        log_error("io: uv_async_init: %s", uv_strerror(rc));
        goto err_after_cond;
    }
    p->async.data = p;
    for (unsigned i = 0; i < nthreads; i++) {
        if (io_worker_start(&p->w[i]) < 0) {
            io_pool_stop(p);
            pthread_cond_destroy(&p->let_go);
            pthread_mutex_destroy(&p->mu);
            uvx_close((uv_handle_t *)&p->async, io_pool_on_close);
            return NULL;
        }
    }
    return p;
err_after_cond:
    pthread_cond_destroy(&p->let_go);
err_after_mutex:
    pthread_mutex_destroy(&p->mu);
err_after_pool:
    free(p);
    return NULL;
}

void io_pool_free(io_pool *p)
{
    if (!p)
        return;
    io_pool_stop(p);
    if (p->done_head)
        log_error("io: jobs done but not delivered at close");
    pthread_cond_destroy(&p->let_go);
    pthread_mutex_destroy(&p->mu);
    uvx_close((uv_handle_t *)&p->async, io_pool_on_close);
}

unsigned io_pool_threads(const io_pool *p)
{
    return p ? p->n : 0;
}

uint64_t io_pool_wakes(io_pool *p)
{
    return p ? atomic_load(&p->wakes) : 0;
}

void io_conn_init(io_conn *c, int fd, unsigned key)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->key = key;
    c->rd.conn = c->wr.conn = c;
    c->wr.write = true;
}

static int io_submit(io_pool *p, io_job *j, int level, io_done_fn done, void *owner)
{
    j->level = level < 0 ? 0 : level >= IO_LEVELS ? IO_LEVELS - 1 : level;
    j->done = done;
    j->owner = owner;
    j->status = 0;
    j->cancel = false;
    atomic_store(&j->moved, 0);
    atomic_store(&j->offered, 0);
    atomic_store(&j->last_ns, uv_hrtime());
    j->submitted = true;
    io_worker *w = io_worker_of(p, j->conn);
    pthread_mutex_lock(&p->mu);
    io_push(w, j, false);
    io_wake(w);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int io_read(io_pool *p, io_conn *c, void *buf, uint64_t len, int level, io_done_fn done,
            void *owner)
{
    io_job *j = &c->rd;
    j->bufs[0] = uv_buf_init(buf, 0);
    j->nbufs = 1;
    j->len = len;
    return io_submit(p, j, level, done, owner);
}

int io_write(io_pool *p, io_conn *c, const uv_buf_t *bufs, unsigned nbufs, int level,
             io_done_fn done, void *owner)
{
    io_job *j = &c->wr;
    j->len = 0;
    j->nbufs = nbufs < IO_MAX_BUFS ? nbufs : IO_MAX_BUFS;
    for (unsigned i = 0; i < j->nbufs; i++) {
        j->bufs[i] = bufs[i];
        j->len += bufs[i].len;
    }
    return io_submit(p, j, level, done, owner);
}

bool io_cancel(io_pool *p, io_job *j)
{
    if (!j->submitted)
        return false;
    j->submitted = false;
    pthread_mutex_lock(&p->mu);
    if (j->state == J_DONE) { /* done, not delivered: it never will be */
        io_job **pp = &p->done_head, *prev = NULL;
        while (*pp && *pp != j) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = j->next;
            if (p->done_tail == j)
                p->done_tail = prev;
        }
        j->state = J_IDLE;
    } else {
        io_worker *w = io_worker_of(p, j->conn);
        j->cancel = true;
        if (j->state == J_READY)
            io_unlink_ready(w, j);
        if (j->state == J_READY || j->state == J_PARKED)
            io_push(w, j, true); /* its thread lets it go next (epoll is its own) */
        io_wake(w);
        while (j->state != J_IDLE)
            pthread_cond_wait(&p->let_go, &p->mu);
    }
    j->cancel = false;
    j->next = NULL;
    pthread_mutex_unlock(&p->mu);
    return true;
}

bool io_busy(const io_job *j)
{
    return j->submitted;
}

uint64_t io_left(const io_job *j)
{
    return j->submitted ? j->len - atomic_load(&j->offered) : 0;
}
