/* SPDX-License-Identifier: Apache-2.0 */
/* sdnotify.c - see sdnotify.h. */
#include "sdnotify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "uvx.h"

#ifdef GPUQ_HAVE_SYSTEMD

#include <sys/socket.h>
#include <systemd/sd-daemon.h>

int sdnotify_listen_fd(int *fd)
{
    int n = sd_listen_fds(1);
    if (n < 0) {
        log_error("sockets passed by systemd: %s", strerror(-n));
        return -1;
    }
    if (n == 0)
        return 0;
    if (n != 1) {
        log_error("systemd passed %d sockets; gpuqd expects exactly one listening Unix "
                  "stream socket (one ListenStream= in gpuqd.socket)",
                  n);
        return -1;
    }
    int r = sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0);
    if (r < 0) {
        log_error("fd %d passed by systemd: %s", SD_LISTEN_FDS_START, strerror(-r));
        return -1;
    }
    if (r == 0) {
        log_error("fd %d passed by systemd is not a listening Unix stream socket "
                  "(gpuqd.socket needs ListenStream=/path and Accept=no)",
                  SD_LISTEN_FDS_START);
        return -1;
    }
    *fd = SD_LISTEN_FDS_START;
    return 1;
}

/* sd_notify(state); a failure is logged the first time only, since the
 * watchdog would repeat it every few seconds. */
static void sdnotify_send(sdnotify *n, const char *state)
{
    int r = sd_notify(0, state);
    if (r < 0 && !n->warned) {
        n->warned = true;
        log_warn("sd_notify to $NOTIFY_SOCKET: %s (further failures not logged)", strerror(-r));
    }
}

/* The current status text, on one line (a reason may hold a newline, which
 * would start another assignment in the datagram). */
static void sdnotify_status_text(sdnotify *n, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (n->status_fn)
        n->status_fn(n->status_arg, buf, cap);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* Send "<prefix>STATUS=<text>" and remember the text. */
static void sdnotify_send_status(sdnotify *n, const char *prefix, const char *text)
{
    char msg[sizeof n->last_status + 64];
    snprintf(msg, sizeof msg, "%sSTATUS=%s", prefix, text);
    sdnotify_send(n, msg);
    snprintf(n->last_status, sizeof n->last_status, "%s", text);
}

static void sdnotify_on_watchdog(uv_timer_t *t)
{
    sdnotify_send(t->data, "WATCHDOG=1");
}

static void sdnotify_on_refresh(uv_timer_t *t)
{
    sdnotify_status(t->data);
}

int sdnotify_init(sdnotify *n, uv_loop_t *loop, sdnotify_status_fn fn, void *arg)
{
    memset(n, 0, sizeof *n);
    n->status_fn = fn;
    n->status_arg = arg;
    const char *sock = getenv("NOTIFY_SOCKET");
    n->notify = sock && *sock;
    if (uvx_timer_init(loop, &n->watchdog, n) < 0)
        return -1;
    if (uvx_timer_init(loop, &n->refresh, n) < 0) {
        uvx_close((uv_handle_t *)&n->watchdog, NULL);
        return -1;
    }
    n->inited = true;
    uv_unref((uv_handle_t *)&n->watchdog);
    uv_unref((uv_handle_t *)&n->refresh);

    uint64_t usec = 0;
    int r = sd_watchdog_enabled(0, &usec);
    if (r < 0) {
        /* A malformed $WATCHDOG_USEC/$WATCHDOG_PID: run without pings; the
         * service manager will say so when it kills us. */
        log_error("systemd watchdog settings: %s; not sending WATCHDOG=1", strerror(-r));
    } else if (r > 0) {
        /* Half the interval, as sd_watchdog_enabled(3) recommends. */
        n->watchdog_ms = usec / 2000 ? usec / 2000 : 1;
        if (uvx_timer_start(&n->watchdog, sdnotify_on_watchdog, n->watchdog_ms, n->watchdog_ms,
                            "watchdog") < 0)
            return -1;
        log_info("systemd watchdog: %llu ms; WATCHDOG=1 every %llu ms",
                 (unsigned long long)(usec / 1000), (unsigned long long)n->watchdog_ms);
    }
    if (n->notify && uvx_timer_start(&n->refresh, sdnotify_on_refresh, SDNOTIFY_REFRESH_MS,
                                     SDNOTIFY_REFRESH_MS, "status") < 0)
        return -1;
    return 0;
}

void sdnotify_ready(sdnotify *n)
{
    if (!n->notify)
        return;
    char text[sizeof n->last_status];
    sdnotify_status_text(n, text, sizeof text);
    sdnotify_send_status(n, "READY=1\n", text);
}

void sdnotify_stopping(sdnotify *n)
{
    if (!n->notify || n->stopping)
        return;
    n->stopping = true;
    char text[sizeof n->last_status];
    sdnotify_status_text(n, text, sizeof text);
    sdnotify_send_status(n, "STOPPING=1\n", text);
}

void sdnotify_status(sdnotify *n)
{
    if (!n->notify)
        return;
    char text[sizeof n->last_status];
    sdnotify_status_text(n, text, sizeof text);
    if (strcmp(text, n->last_status) != 0)
        sdnotify_send_status(n, "", text);
}

void sdnotify_close(sdnotify *n)
{
    if (!n->inited)
        return;
    uvx_close((uv_handle_t *)&n->watchdog, NULL);
    uvx_close((uv_handle_t *)&n->refresh, NULL);
}

#else /* !GPUQ_HAVE_SYSTEMD */

int sdnotify_listen_fd(int *fd)
{
    (void)fd;
    /* Only when they are meant for this process, as sd_listen_fds decides. */
    const char *lpid = getenv("LISTEN_PID");
    if (getenv("LISTEN_FDS") && lpid && strtol(lpid, NULL, 10) == (long)getpid())
        log_warn("$LISTEN_FDS is set, but socket activation needs libsystemd and gpuqd "
                 "was built without it: binding the socket itself");
    return 0;
}

int sdnotify_init(sdnotify *n, uv_loop_t *loop, sdnotify_status_fn fn, void *arg)
{
    (void)loop;
    memset(n, 0, sizeof *n);
    n->status_fn = fn;
    n->status_arg = arg;
    return 0;
}

void sdnotify_ready(sdnotify *n)
{
    (void)n;
}

void sdnotify_stopping(sdnotify *n)
{
    (void)n;
}

void sdnotify_status(sdnotify *n)
{
    (void)n;
}

void sdnotify_close(sdnotify *n)
{
    (void)n;
}

#endif
