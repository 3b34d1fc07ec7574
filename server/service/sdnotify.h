/* SPDX-License-Identifier: Apache-2.0 */
/* sdnotify.h - the systemd glue: the listening socket systemd passes, and
 * the notifications gpuqd sends to the service manager.
 *
 * Happy path: listener_open asks sdnotify_listen_fd for a socket passed by
 * socket activation (one listening AF_UNIX stream socket). server_init calls
 * sdnotify_init, which starts a WATCHDOG=1 timer when systemd asked for one
 * (at half the interval, on the loop thread, so a stalled loop stops the
 * pings) and a STATUS= refresh timer; then sdnotify_ready once the listener
 * serves. server_shutdown sends STOPPING=1; server_finish closes the timers.
 * Both timers are unref'd: they never keep the loop alive.
 *
 * Failure: a passed fd that is not exactly one listening Unix stream socket
 * is an error (logged; gpuqd exits 1). A failing sd_notify is logged once
 * (a warning) and otherwise ignored: the daemon keeps serving.
 *
 * Without libsystemd (GPUQ_HAVE_SYSTEMD undefined) the same API does
 * nothing, except that sdnotify_listen_fd warns when $LISTEN_FDS is set.
 */
#ifndef GPUQ_SERVER_SDNOTIFY_H
#define GPUQ_SERVER_SDNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Writes the one-line state summary for STATUS= into buf[cap]. */
typedef void (*sdnotify_status_fn)(void *arg, char *buf, size_t cap);

typedef struct sdnotify {
    uv_timer_t watchdog;  /* WATCHDOG=1 every watchdog_ms */
    uv_timer_t refresh;   /* STATUS= again when the text changed */
    bool inited;          /* both timers initialised */
    bool notify;          /* $NOTIFY_SOCKET is set */
    bool stopping;        /* STOPPING=1 sent */
    bool warned;          /* a failed sd_notify was logged */
    uint64_t watchdog_ms; /* 0: no watchdog */
    sdnotify_status_fn status_fn;
    void *status_arg;      /* borrowed */
    char last_status[256]; /* the last STATUS= sent */
} sdnotify;

/* The STATUS= refresh period: counters change often, the text is sent at
 * most this often (and at once on ready, draining, device lost). */
#define SDNOTIFY_REFRESH_MS 5000

/* The listening socket systemd passed ($LISTEN_FDS, $LISTEN_PID; the
 * variables are unset). Returns 1 with *fd set (the socket is in listening
 * state and close-on-exec), 0 when none was passed (or libsystemd is not
 * built in), -1 when what was passed is not exactly one listening Unix
 * stream socket (logged). */
int sdnotify_listen_fd(int *fd);

/* Initialise n (borrowed; it must outlive the timers' close): the timers
 * on loop, the watchdog from $WATCHDOG_USEC/$WATCHDOG_PID. fn(arg) gives the
 * STATUS= text. Returns 0 or -1 (logged). */
int sdnotify_init(sdnotify *n, uv_loop_t *loop, sdnotify_status_fn fn, void *arg);
/* READY=1 with the current STATUS=. */
void sdnotify_ready(sdnotify *n);
/* STOPPING=1 (first call only) with the current STATUS=. */
void sdnotify_stopping(sdnotify *n);
/* Send STATUS= now if the text changed (a state change). */
void sdnotify_status(sdnotify *n);
/* Stop and close the timers (uv_close, no callback: they are embedded).
 * Idempotent; safe when sdnotify_init was not called on a zeroed n. */
void sdnotify_close(sdnotify *n);

#endif
