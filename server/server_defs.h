/* SPDX-License-Identifier: Apache-2.0 */
/* server_defs.h - the types that server, session, request, control and stats
 * share (they would otherwise include each other). Types only.
 *
 * The lower layers call back up only through function pointers kept here:
 * the session (transport) hands what it read to session_events (the request
 * module's), and session, request and control reach the daemon as a whole
 * through server_hooks (server.c's). So no server module calls one that
 * calls it back (tests/lint/layers.py). */
#ifndef GPUQ_SERVER_DEFS_H
#define GPUQ_SERVER_DEFS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "arena.h"
#include "backend.h"
#include "config.h"
#include "frame.h"
#include "header.h"
#include "io_pool.h"
#include "metrics.h"
#include "policy.h"
#include "resident.h"
#include "resident_store.h"
#include "sdnotify.h"
#include "staging.h"
#include "stats.h"

typedef struct server server;
typedef struct session session;
typedef struct request request;
typedef struct request_log request_log; /* request/request_log.h */
typedef struct session_frame session_frame;

/* How a queued reply frame is written (the owner's functions). */
typedef struct session_frame_ops {
    /* Its turn came: fill bufs[0..*nbufs) (at most 2; borrowed until done).
     * Returns 0, or a negative code: the session then closes. */
    int (*encode)(session_frame *f, uv_buf_t bufs[2], unsigned *nbufs);
    /* Called exactly once: written (status 0), failed (< 0) or dropped
     * because the session closed (UV_ECANCELED). The owner frees f. */
    void (*done)(session_frame *f, int status);
} session_frame_ops;

/* A reply frame in a session's write queue, embedded in its owner. */
struct session_frame {
    const session_frame_ops *ops;
    uint64_t seq;     /* order of replies within the session */
    bool extra;       /* written in seq's place, before the frame of that seq, without
                         using seq up (a request's started notice, started.h) */
    bool close_after; /* close the session once written */
    /* a handle whose fd goes with the frame's first byte (SCM_RIGHTS); set
     * by encode; the owner keeps it open until done */
    uv_stream_t *send_handle;
    uv_write_t wr;
    session_frame *next; /* session's pending list */
};

/* One frame's request, from its header until its reply was written. Holds a
 * reference on its session. Owned by request.c (request.h). */
struct request {
    session *s;
    gpuq_request req;
    gpuq_sizes sz;
    gpuq_job job;
    staging_slot *slot; /* owned; NULL when none */
    size_t out_off;     /* result offset in the slot */
    /* the staging grow it waits for (staging.h: staging_reserve_wait), or 0 */
    uint64_t staging_ticket;
    int status;
    char message[160];
    uint8_t *info; /* owned msgpack value (hello/status) */
    size_t info_len;
    uint8_t *doc; /* owned reply payload of sessions/metrics */
    size_t doc_len;
    uint64_t t0_ns; /* when the request was read (metrics latency) */
    /* when it was submitted to the backend and when its job completed (0:
     * not yet), for request_log.c's queue_us and kernel_us */
    uint64_t run_ns, done_ns;
    bool compute; /* counts as in flight */
    bool in_backend;
    uint8_t *wbuf;  /* owned prefix+header while writing */
    arena *held[4]; /* arenas its refs name (in 0, 1, out 0, 1): one reference each */
    /* Resident arrays (PROTOCOL.md 3.5): those its inputs name (one
     * reference each, from its header to its end), and the bytes reserved
     * for each output it keeps (given back unless committed). */
    resident *res_in[GPUQ_MAX_INPUTS];
    uint64_t keep_bytes[GPUQ_MAX_OUTPUTS];
    /* "persist": the writes of its kept outputs (owned, NULL when none),
     * how many are still running, and the first failure */
    resident_store_job *store_jobs;
    int store_pending, store_rc;
    void (*store_then)(request *r);
    uv_pipe_t *fd_pipe; /* arena_open: the memfd to send, as a handle (owned) */
    session_frame out;  /* its reply in the session's write queue */
    /* A compute request whose reply is queued for writing is on its
     * session's wq until freed: wr_end is the session's bytes_out once that
     * reply is all written (request_inflight). */
    request *wnext;
    uint64_t wr_end;
    bool in_wq;
    /* scheduling (scheduler.c): a compute request from its header until it is
     * answered is on its session's list (lprev/lnext); once its input is in
     * place it waits in its device's queue (queued, qprev/qnext) until it
     * runs (running: counted in the device's window); one with a deadline
     * is watched (dprev/dnext) while it waits for staging or in the queue. */
    request *lprev, *lnext;
    request *qprev, *qnext;
    request *dprev, *dnext;
    bool listed, queued, running, watched;
    int level;            /* priority level index 0..SCHED_LEVELS-1 (low..high) */
    int dev;              /* device queue index */
    uint64_t deadline_ns; /* uv_hrtime() deadline; 0: none */
    /* Answered while its job still ran (cancelled, deadline passed, its
     * session closed: request.c's request_abandon), the job told to stop:
     * r lives on, staging and arenas held, until the job completed and the
     * reply was written or dropped (reply_done), whichever comes last. */
    bool early, reply_done;
    /* its started notice is queued (started.h) */
    bool started_sent;
    bool slot_held; /* running in one of the backend's slots (backend.h) */
    /* A gated request (PROTOCOL.md 3.4: "gate") whose input is not all in
     * while the backend cannot wait for it on the device (backend.h: gate)
     * waits outside the queue (gate_held; scheduler.c: sched_hold) until the last
     * ready. Its bytes in place so far are job.gate_ready. */
    bool gate_held;
};

enum session_rstate { RS_PREFIX, RS_HEADER, RS_PAYLOAD, RS_SKIP, RS_WAIT_STAGING };

/* The read buffer of a session (session.c: reads go there, except the
 * rest of a payload of at least this many bytes). */
#define SESSION_RX 32768
/* Bytes a session reads before it yields the loop: it stops reading and
 * starts again on the next loop turn (session_read_cb, session_on_turn), so
 * a large payload arriving fast never keeps other sessions waiting for more
 * than about one budget's copy (libuv would read up to 32 buffers of one
 * stream per turn, each as large as the socket has). */
#define SESSION_READ_BUDGET ((uint64_t)1 << 20)
#define SESSION_HDR_INLINE 512

struct session {
    uv_pipe_t pipe;
    server *srv;
    session *prev, *next; /* server's list */
    uint64_t id;
    int refs; /* pipe handle + each live request */
    bool closing, hello_done, reading, counted;
    bool user_counted; /* in srv->users under uid (server.c counts it; closing drops it) */
    bool broken;       /* bad prefix: stop reading, close after the error */
    bool yielded;      /* read SESSION_READ_BUDGET: reads again next turn */
    uint64_t read_run; /* bytes read since it last yielded */
    pid_t pid;
    uid_t uid;
    gid_t gid;
    gid_t *groups; /* owned: supplementary groups (SO_PEERGROUPS) */
    int ngroups;
    policy_caps caps; /* from credentials and config; see policy.h */
    uint64_t start_ns;
    uint64_t nrequests, nerrors, bytes_in, bytes_out;
    char client[GPUQ_CLIENT_NAME_MAX + 1];
    int priority;
    void *bsess;
    backend_session_info binfo;
    /* reading */
    enum session_rstate rstate;
    uint8_t prefix[GPUQ_PREFIX_SIZE];
    gpuq_prefix pre;
    uint64_t have; /* bytes of the current part read so far */
    uint8_t hdr_inline[SESSION_HDR_INLINE];
    uint8_t *hbuf; /* hdr_inline or malloc'd (owned) */
    uint64_t skip_left;
    uint8_t *payload_buf; /* RS_PAYLOAD: where the payload goes (borrowed) */
    uint64_t payload_len;
    request *cur;           /* request.c's: waiting for staging or its payload */
    uint8_t rx[SESSION_RX]; /* read, not yet fed: [rx_off, rx_len) */
    size_t rx_off, rx_len;
    bool feeding;      /* session_feed runs (not re-entered) */
    bool flush_listed; /* on srv->flush_head's list (holds a reference) */
    session *flush_next;
    /* replies */
    uint64_t next_seq, next_write_seq;
    session_frame *pending;     /* done, sorted by seq, waiting their turn */
    uint32_t inflight;          /* compute requests not yet answered */
    request *wq_head, *wq_tail; /* compute requests whose reply is queued, in write order */
    uint32_t live;              /* requests alive */
    uint64_t staging_used;
    arena_table arenas;  /* open shared-memory arenas */
    request *unanswered; /* compute requests not yet answered (scheduler.c's list) */
    int rx_fd;           /* the fd offered to the current frame (session.c), or -1 */
    bool rx_fd_extra;    /* more than one came: all but rx_fd were closed */
    int read_fd;         /* an fd of the last read, not yet offered to a frame, or -1 */
    bool read_fd_extra;
    /* timeouts (session_sweep) */
    uint64_t rx_ns;           /* last byte in, or reading (re)started */
    uint64_t active_ns;       /* last byte in or reply written */
    uint64_t frame_ns;        /* the current frame's rate clock (frame_min_rate) */
    uint64_t frame_got;       /* its bytes since frame_ns */
    uint64_t stop_ns;         /* reading stopped then (0: reading or never started) */
    uint64_t taken_seen;      /* reply bytes the client had taken at the last sweep */
    uint64_t taken_ns;        /* when it last took one, or had none to take */
    bool eof;                 /* the client shut its side down (half-close) */
    uint64_t linger_until_ns; /* closing after a final reply: hard close then */
    /* bulk bytes on the I/O threads (session.c, io_pool.h): a payload's
     * rest of at least cfg.io_bulk_min is read by io.rd, a reply group that
     * large written by io.wr; each holds a reference while submitted */
    io_conn io;
    bool io_on;              /* io holds the pipe's fd */
    uint64_t io_rd_seen;     /* bytes of io.rd already counted */
    session_frame *io_first; /* the group io.wr writes (linked by next) */
    session_frame *io_held;  /* encoded, waits for io.wr's group (then goes first) */
    uv_buf_t io_held_bufs[2];
    unsigned io_held_n;
    /* request/monitor.c: this connection's monitor (the `monitor` op), or
     * NULL; a monitoring session is not idle (session_sweep) */
    struct monitor_sub *monitor;
};

/* What the session (transport) hands up: the request module's functions
 * (request.h: request_session_events), set by server.c. */
typedef struct session_events {
    void (*prefix)(session *s, int rc); /* s->pre decoded (rc of gpuq_prefix_decode) */
    void (*header)(session *s);         /* s->hbuf holds s->pre.header_len bytes */
    void (*payload)(session *s);        /* the payload of session_expect_payload arrived */
    /* A timeout closes s: answer with a final reply carrying msg. */
    void (*timeout)(session *s, const char *msg);
    void (*closed)(session *s); /* s is closing: drop what the upper layer holds */
} session_events;

/* What the lower server modules ask of the daemon as a whole (server.c's
 * functions, see server.h), set by server_init. */
/* The scheduler (scheduler.c): per-device queues of compute requests whose
 * input is in place, ordered by priority level then arrival, and the window
 * of requests running on each device. */
#define SCHED_LEVELS 3 /* GPUQ_PRIO_LOW..GPUQ_PRIO_HIGH, as level + 1 */
typedef struct sched_dev {
    request *head[SCHED_LEVELS], *tail[SCHED_LEVELS]; /* queued, FIFO per level */
    uint32_t queued;
    uint32_t running;                     /* submitted to the backend, not completed */
    uint32_t running_slots;               /* of those, in the backend's slots */
    uint32_t running_n[SCHED_LEVELS];     /* of those, per level */
    uint64_t running_bytes[SCHED_LEVELS]; /* input + output bytes of those, per level */
    uint64_t seen_ns[SCHED_LEVELS];       /* last compute request of each level queued */
    bool pumping;
} sched_dev;

#define SCHED_MAX_DEVS 16 /* queues; device i uses queue i % SCHED_MAX_DEVS */
typedef struct sched {
    sched_dev devs[SCHED_MAX_DEVS];
    int ndev;         /* queues in use: min(devices, SCHED_MAX_DEVS) */
    uv_timer_t timer; /* the earliest deadline of a watched request */
    bool timer_init, timer_on;
    uint64_t timer_at;
    request *watch; /* requests with a deadline waiting for staging or queued */
    uint64_t cancelled, expired, dropped_closed;
    /* requests answered early whose work then stopped before its end
     * (request_complete: their job ended GPUQ_E_CANCELLED) */
    uint64_t stopped;
    /* request.c's (set by request_layer_init): submit r to the backend now
     * (0, or < 0: r was refused and answered); answer r, which is no longer
     * queued nor waiting, with code (the reply carries msg) */
    int (*run)(request *r);
    void (*answer)(request *r, int code, const char *msg);
    /* answer r, which runs, with code now, and have its job stop */
    void (*abandon)(request *r, int code, const char *msg);
    /* r waits for staging and its deadline passed */
    void (*expire_waiting)(request *r);
} sched;

typedef struct server_hooks {
    void (*shutdown)(server *srv, int code);
    void (*stop_accepting)(server *srv);
    void (*limits_changed)(server *srv);
    void (*check_drain)(server *srv); /* something was answered or closed */
    void (*session_freed)(server *srv);
} server_hooks;

/* Why the server closed a session on its own (metrics, status). */
enum session_timeout_kind {
    TIMEOUT_HELLO,
    TIMEOUT_IDLE,
    TIMEOUT_FRAME,
    TIMEOUT_REPLY,
    TIMEOUT_KINDS
};

struct server {
    uv_loop_t *loop;
    server_hooks hooks;
    const session_events *sev;
    uv_idle_t retry_idle; /* request.c: staging waits retried on the next turn */
    bool retry_pending;
    uv_idle_t turn_idle; /* session.c: sessions that yielded read again */
    bool turn_pending;
    uv_prepare_t flush_prep; /* session.c: listed sessions write their replies */
    bool flush_init, flush_on;
    session *flush_head;          /* sessions with replies to write (flush_next) */
    uint64_t read_yields;         /* times a session yielded after SESSION_READ_BUDGET */
    io_pool *io;                  /* session.c: the I/O threads; NULL: bulk on the loop */
    uint64_t io_reads, io_writes; /* payloads and reply groups they moved */
    config cfg;
    backend *b;
    char backend_why[256];
    staging st;
    /* planes/pinner.h: pins and unpins host memory off the loop */
    pinner pin;
    stats stats;
    metrics metrics;
    uv_pipe_t listener;
    bool listener_open, socket_owned;
    char socket_path[108];
    uv_signal_t sigint, sigterm, sighup;
    int argc; /* main's arguments (borrowed), re-read on SIGHUP */
    char **argv;
    uv_timer_t drain_timer;
    uv_timer_t sweep_timer; /* timeouts and giving staging back */
    uint64_t sweep_period_ms;
    uint64_t sweep_reserves; /* staging.reserves at the last sweep */
    uint64_t staging_idle_since_ns;
    uint64_t timeouts[TIMEOUT_KINDS]; /* sessions closed for each reason */
    sdnotify sd;                      /* systemd readiness, status, watchdog */
    bool draining, finishing, lost;
    bool accept_stopped; /* drain op: no new sessions; exit when none left */
    int exit_code;
    session *sessions;
    uint32_t nsessions; /* not closing */
    policy_users users; /* sessions not closing, per uid (max_sessions_per_user) */
    uint64_t next_session_id;
    uint64_t inflight;       /* compute requests accepted, not answered */
    arena_books arena_books; /* arena ids and bytes over all sessions */
    resident_books resident; /* resident arrays (PROTOCOL.md 3.5) */
    resident_store store;    /* the persisted ones' files */
    sched sched;
    uint64_t live;     /* requests alive over all sessions */
    request_log *rlog; /* request/request_log.c: the slowlog and the monitors */
    uint64_t start_ns;
};

#endif
