/* SPDX-License-Identifier: Apache-2.0 */
/* scheduler.h - the scheduler between requests whose input is in place and the
 * devices that run them.
 *
 * Each device has a queue of compute requests, one FIFO per priority level
 * (low, normal, high); the highest level's first request goes next. A
 * request enters its device (srv->sched.run, request.c's submit) while:
 * - fewer than device_window requests run there (config), and
 * - no higher level is active, or the lower levels' bytes running there
 *   plus its own stay within bulk_window (or none run): a level is active
 *   while its requests wait or run there, and for priority_hold seconds
 *   after its last request was queued. So a high-priority request waits
 *   behind at most bulk_window bytes of lower-priority work, however much is
 *   queued, and lower levels are not held back when no higher one is about.
 * Strict priority: while the first request of the highest waiting level
 * cannot enter, nothing of a lower level does (it would delay that one).
 * The queue moves on sched_done (a request left the device), sched_enqueue
 * and a configuration change (sched_kick).
 *
 * Also here: every unanswered compute request of a session is on the
 * session's list (sched_track .. sched_untrack), which is what cancel
 * (sched_cancel) and a closing session (sched_drop_session) walk; and the
 * deadline watch: a request with a deadline is watched from its header
 * until it is answered (waiting for staging or its payload, queued,
 * running), and one timer (the earliest deadline) answers it
 * deadline_exceeded when its time has come (queued: dropped from the queue;
 * waiting for staging or its payload: srv->sched.expire_waiting; running:
 * srv->sched.abandon, which answers it at once and has its job stop).
 *
 * A backend with slots (backend.h: the CPU's thread pool) runs at most that
 * many jobs that are not batchable at once; the others wait here, in
 * priority order, where cancel and deadlines reach them.
 *
 * Calls up (answering a request, submitting it) go through the function
 * pointers request.c sets in srv->sched (server_defs.h), so this module
 * needs nothing above it.
 */
#ifndef GPUQ_SERVER_SCHEDULER_H
#define GPUQ_SERVER_SCHEDULER_H

#include "server_defs.h"

/* Set up the queues (one per backend device, up to SCHED_MAX_DEVS) and the
 * deadline timer. 0, or a libuv code. */
int sched_init(server *srv);
/* Close the timer (shutdown; idempotent). The queues stay usable: closing
 * sessions still drop their requests from them. */
void sched_close(server *srv);

/* r (a compute request of s) starts: onto s's list of unanswered requests,
 * with its level, device and deadline (from now) set. */
void sched_track(request *r);
/* r was answered or freed: off every list (idempotent). */
void sched_untrack(request *r);

/* Watch r's deadline while it waits outside the queue (for staging);
 * sched_unwatch when it stops waiting. No-op without a deadline. */
void sched_watch(request *r);
void sched_unwatch(request *r);

/* r's input is in place: queue it on its device and start what may start
 * (r may have been submitted, or answered, when this returns). */
void sched_enqueue(request *r);
/* r (gated) waits for its input outside the queue: held, its deadline
 * watched; cancel, a closing session and its deadline answer it as a
 * queued one. sched_release: its input is all in now, it is queued. */
void sched_hold(request *r);
void sched_release(request *r);
/* Answer r now with code, wherever it is (held or queued: dropped and
 * answered; running: abandoned, its job told to stop). */
void sched_fail(request *r, int code, const char *msg);
/* r, which ran, left its device: let the queue move. */
void sched_done(request *r);
/* The limits changed (reload): let every queue move. */
void sched_kick(server *srv);

/* Cancel s's unanswered requests with id: a queued one is dropped and
 * answered GPUQ_E_CANCELLED (*dropped counts them); a running one is
 * answered GPUQ_E_CANCELLED too and its job told to stop (sched.abandon;
 * *running counts them). */
void sched_cancel(session *s, uint64_t id, uint32_t *dropped, uint32_t *running);
/* s is closing: its queued requests are dropped (answered, which on a
 * closing session frees them at once, staging included), its running ones
 * abandoned (their jobs stop); all counted as cancelled. */
void sched_drop_session(session *s);

/* Requests waiting in the queues of device index i (-1 or the CPU's: 0),
 * and over all devices. */
uint32_t sched_queued(const server *srv, int i);
uint32_t sched_queued_all(const server *srv);

#endif
