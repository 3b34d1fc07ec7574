/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_client.h - the session fuzzer's clients, each with a model of how
 * the server must cut the bytes it sent into frames and answer them.
 *
 * A client is a non-blocking Unix socket to the server under test. The
 * script appends bytes (frames or raw) to its stream; the model reads them
 * as dispatch does (the same proto decoders: what is tested is the server's
 * state machine, not the decoding) and records, per frame, the reply it
 * must get: its id, a status where the frame alone decides it, whether it
 * may succeed and with which dtype, shape and result bytes, and the stream
 * offsets before which it cannot and after which it must be answered.
 *
 * Every reply read is checked against that record, in order; a breach
 * calls fuzz_violation, which aborts with a message.
 */
#ifndef GPUQ_TESTS_FUZZ_CLIENT_H
#define GPUQ_TESTS_FUZZ_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "gpuq_limits.h"
#include "header.h"

/* Over all inputs (the replay prints them: proof that the checks ran). */
typedef struct fuzz_counts {
    uint64_t inputs, replies, modelled, ok_compute, ok_other, errors, refused, eofs, syncs,
        sync_checked;
} fuzz_counts;

/* What the clients need to know of the world; the session harness keeps the
 * server's part up to date after every loop turn. */
typedef struct fuzz_env {
    const char *sock_path;
    uint32_t max_header;  /* the model cuts frames with this */
    uint64_t max_payload; /* a frame over it is answered and closes the session */
    bool model_valid;     /* false once the server's max_header or max_payload changed */
    bool allow_eof;       /* a kill_session went out: any session may close */
    bool server_closing;  /* draining or not accepting: sessions may close */
    bool drain_timed_out; /* the drain timeout closed sessions mid-write */
    bool trace;
    uint64_t progress; /* bumped by every client-side event */
    fuzz_counts count;
} fuzz_env;

/* One frame as the server must see it, and what its reply must be. */
typedef struct fuzz_expect {
    uint64_t id;
    int must_status;  /* nonzero: the reply has exactly this status */
    bool can_succeed; /* header decoded and checked: status 0 allowed */
    bool closes;      /* broken prefix: the session closes after it */
    gpuq_op op;
    gpuq_dtype dtype; /* as the reply names it */
    bool timing;
    gpuq_sizes sz;
    uint64_t in_hash; /* of the payload (fake_hash) */
    bool payload_done;
    uint64_t answer_off; /* stream bytes the server needs before it may answer */
    uint64_t end_off;    /* ... and after which it must have answered */
} fuzz_expect;

typedef struct fuzz_model {
    int st;
    uint8_t prefix[GPUQ_PREFIX_SIZE];
    uint32_t have;
    gpuq_prefix pre;
    uint8_t *hdr;
    size_t hcap;
    uint64_t left; /* header, payload or skip bytes left */
    uint64_t off;  /* stream bytes seen */
    size_t cur;    /* expect whose payload is being read */
} fuzz_model;

typedef struct fuzz_client {
    int fd;         /* -1: not connected */
    bool reading;   /* the script lets it read replies */
    bool wr_shut;   /* shutdown(SHUT_WR) done */
    bool send_dead; /* a send failed: the server closed */
    bool eof;       /* EOF or reset read */
    bool ended;     /* got its last reply (broken prefix, refusal) */
    bool refused;   /* that last reply was the max_sessions refusal */
    uint64_t next_id;
    /* the stream: out[0, sent) accepted by the kernel, [sent, want) to send
     * as the socket allows, [want, len) queued by the script */
    uint8_t *out;
    size_t len, cap, sent, want;
    fuzz_model m;
    fuzz_expect *exp;
    size_t nexp, expcap, next_exp;
    uint8_t *in;
    size_t in_len, in_cap;
    uint64_t nreplies;
} fuzz_client;

/* Run cleanup (when set; e.g. remove the socket directory), print
 * "invariant broken: ..." and abort. */
extern void (*fuzz_violation_cleanup)(void);
__attribute__((noreturn, format(printf, 1, 2))) void fuzz_violation(const char *fmt, ...);
/* realloc that aborts on failure (n 0 allowed). */
void *fuzz_xrealloc(void *p, size_t n);

/* Close and forget everything; c is then unconnected (fd -1). */
void fuzz_client_reset(fuzz_client *c);
/* Connect to env->sock_path unless connected (a client that saw EOF starts
 * over); a refused connect leaves it unconnected. */
void fuzz_client_connect(fuzz_env *env, fuzz_client *c);
/* Queue n bytes (the model reads them now); ignored when unconnected. */
void fuzz_client_append(fuzz_env *env, fuzz_client *c, const void *p, size_t n);
/* Send what is due and the socket takes; read and check replies if reading. */
void fuzz_client_io(fuzz_env *env, fuzz_client *c, int ci);
/* The same for cl[0..n), polling them all once first; recv false: send
 * only. */
void fuzz_clients_io(fuzz_env *env, fuzz_client *cl, int n, bool recv);
/* After quiescence: every frame sent whole has been answered. */
void fuzz_client_check_answered(const fuzz_client *c, int ci);

#endif
