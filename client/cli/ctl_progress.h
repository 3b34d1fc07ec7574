/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_progress.h - gpuqctl's progress line for an op that takes a while
 * (ctl_progress.c).
 *
 * On a terminal (isatty(2)), an op that has not finished within
 * CTL_PROGRESS_DELAY_MS shows one line on stderr, rewritten in place (\r)
 * every CTL_PROGRESS_PERIOD_MS: the time since the op began and where the
 * op is: reading the inputs, then sending (the bytes left), queued (in
 * gpuqd, not yet running), running (since gpuqd's started notice, which
 * the request asks for with "progress": PROTOCOL.md 4.1), receiving (the
 * bytes left), writing the results, e.g.
 *   gpuqctl: 2.5 s, sending, 40.0 MiB of 64.0 MiB left (socket)
 *   gpuqctl: 4.0 s, queued (socket)
 *   gpuqctl: 6.1 s, running for 2.1 s (shared memory)
 *   gpuqctl: 9.0 s, receiving, 12.0 MiB of 64.0 MiB left (socket)
 * When the op ends (or fails: before its error is printed) the line is
 * erased; off a terminal it is ended with a newline instead. Off a
 * terminal nothing is shown unless GPUQ_PROGRESS=1; GPUQ_PROGRESS=0 turns
 * it off everywhere.
 *
 * A thread of its own draws the line while the op's thread blocks in
 * libgpuq; it reads the socket's byte counts (gpuq_io_counts) and the
 * op's phase, and has SIGINT, SIGTERM and SIGHUP blocked, so that those
 * signals are handled on the op's thread (ctl_xfer.c).
 */
#ifndef GPUQ_CLIENT_CTL_PROGRESS_H
#define GPUQ_CLIENT_CTL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#define CTL_PROGRESS_DELAY_MS 1000
#define CTL_PROGRESS_PERIOD_MS 250

/* Where the op is: its inputs being read (from files or stdin), the
 * request in flight, the results being written. */
typedef enum ctl_phase { CTL_PHASE_READ, CTL_PHASE_CALL, CTL_PHASE_WRITE } ctl_phase;

typedef struct ctl_progress ctl_progress;

/* Whether a progress line is wanted at all: GPUQ_PROGRESS=1 yes, =0 no,
 * else whether stderr is a terminal (gpuqctl bench's live line too). */
bool ctl_progress_wanted(void);

/* Start showing progress for an op whose arrays come to in_bytes and
 * out_bytes, sent by shared memory (shm) or the socket. NULL when there is
 * nothing to show (not a terminal, GPUQ_PROGRESS=0) or the thread cannot
 * be had: the op runs the same either way. */
ctl_progress *ctl_progress_start(uint64_t in_bytes, uint64_t out_bytes, bool shm);
/* The op moved on (p may be NULL). */
void ctl_progress_phase(ctl_progress *p, ctl_phase ph);
/* A gpuq_started_fn (user: the ctl_progress, may be NULL): gpuqd started
 * the request; called on the op's thread while it waits. */
void ctl_progress_started(void *user, uint64_t id);
/* Stop the thread, end or erase the line if one is shown, free p (may be
 * NULL). */
void ctl_progress_stop(ctl_progress *p);
/* From a signal handler (async-signal-safe): end a line that is shown, so
 * that a message after it starts on a line of its own. */
void ctl_progress_end_line_signal(void);

#endif
