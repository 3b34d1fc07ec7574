/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_session.h - the script language of the session fuzzer
 * (fuzz_session.c runs it; fuzz_session_replay.c writes the seed scripts).
 *
 * A script is two profile bytes, then commands. A command is one byte:
 * bits 7-6 the client (0..3), bit 5 "then run the loop once", bits 4-0 the
 * command (modulo FZ_CMD_COUNT), followed by its operand bytes. Bytes past
 * the end read as 0, so every byte string is a script.
 */
#ifndef GPUQ_TESTS_FUZZ_SESSION_H
#define GPUQ_TESTS_FUZZ_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "fuzz_client.h"

#define FZ_CLIENTS 4

/* Profile byte 1: limits and completion. */
#define FZ_P1_TOTAL(i) (i)           /* total_staging: 8K, 16K, 64K, 4M */
#define FZ_P1_SESSION(i) ((i) << 2)  /* session_staging: 4K, 8K, 32K, = total */
#define FZ_P1_INFLIGHT(i) ((i) << 4) /* max_inflight: 1, 2, 4, 64 */
#define FZ_P1_MAX_SESSIONS_3 0x40    /* else 256 */
#define FZ_P1_AUTO 0x80              /* every job finishes (ok) as it is submitted */
/* Profile byte 2. */
#define FZ_P2_DRAIN_TIMEOUT 0x01 /* the drain timeout expires at the next loop turn */
#define FZ_P2_NO_ADMIN 0x02      /* no admin group: admin ops refused unless root */

enum {
    FZ_CMD_FRAME,      /* sel flags a b: queue a frame (see FZ_F_*) */
    FZ_CMD_FRAME_SEND, /* the same, then send all queued */
    FZ_CMD_RAW,        /* len, len bytes: queue raw bytes */
    FZ_CMD_SEND,       /* n: send n more queued bytes (0: all) */
    FZ_CMD_RUN,        /* k: run the loop k % 16 + 1 times */
    FZ_CMD_FINISH,     /* idx mode: finish queued job idx with a status by mode */
    FZ_CMD_FINISH_ALL, /* mode */
    FZ_CMD_STOP_READ,  /* stop reading replies */
    FZ_CMD_START_READ,
    FZ_CMD_CLOSE,     /* close the client (mid-frame too) */
    FZ_CMD_SHUT_WR,   /* send what the socket takes, then half-close */
    FZ_CMD_CONNECT,   /* (re)connect */
    FZ_CMD_FAIL_NEXT, /* what: next submit / host_alloc / session_open fails */
    FZ_CMD_SYNC,      /* quiesce; require every whole frame answered */
    FZ_CMD_LIMITS,    /* which value: change a limit as SIGHUP would */
    FZ_CMD_SIGTERM,   /* server_shutdown(0), as the signal handler does */
    FZ_CMD_LOSE,      /* the device is lost */
    FZ_CMD_COUNT
};
#define FZ_AND_RUN 0x20
#define FZ_OP(client, cmd) ((uint8_t)(((client) << 6) | (cmd)))

/* FRAME operands: sel picks the op (sel % FZ_F_COUNT; with flag FZ_FL_ID
 * the id is sel >> 4, else the client's next id), flags, and a, b (sizes,
 * options). */
enum {
    FZ_F_HELLO,
    FZ_F_PING,
    FZ_F_STATUS,
    FZ_F_NORMALIZE,
    FZ_F_HAVERSINE,
    FZ_F_GRID,
    FZ_F_PAIRWISE,
    FZ_F_SESSIONS,
    FZ_F_METRICS,
    FZ_F_DRAIN,
    FZ_F_SHUTDOWN,
    FZ_F_KILL_SESSION,
    FZ_F_SET_LIMIT,
    FZ_F_COUNT
};
#define FZ_FL_TIMING 0x01
#define FZ_FL_F32 0x02
#define FZ_FL_ID 0x04
#define FZ_FL_WRONG 0x08   /* hello: version 2; others: one payload byte too many */
#define FZ_FL_VARIANT 0x10 /* normalize 1-D, haversine "to", grid 512x512 (b odd) */
/* bits 7-5: normalize method, pairwise d - 1; grid: bit 7 no dtype */

/* The counters of every input run in this process. */
const fuzz_counts *fuzz_session_counts(void);

#endif
