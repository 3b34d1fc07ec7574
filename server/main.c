/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - gpuqd's entry: arguments, logging, SIGPIPE, then the server;
 * or, with --reload PID, the SIGHUP that makes a running gpuqd reload. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "server.h"

/* --reload PID, the unit's ExecReload=: config_load has checked the
 * settings given (a bad file never reaches the daemon, and `systemctl
 * reload` fails with its FILE:LINE), so ask that gpuqd to re-read its own.
 * gpuqd itself sends the signal so that reloading needs nothing outside the
 * package (a minimal Debian has no /bin/kill). Exit 0, or 1 when the signal
 * could not be sent. */
static int reload_running(pid_t pid)
{
    if (kill(pid, SIGHUP) < 0) {
        log_error("--reload: SIGHUP to pid %ld: %s", (long)pid, strerror(errno));
        return 1;
    }
    log_info("--reload: sent SIGHUP to pid %ld", (long)pid);
    return 0;
}

int main(int argc, char **argv)
{
    config cfg;
    int rc = config_load(&cfg, argc, argv);
    if (rc > 0)
        return 0;
    if (rc < 0)
        return 2;
    log_set_level(cfg.log_level);
    if (cfg.reload_pid)
        return reload_running(cfg.reload_pid);
    signal(SIGPIPE, SIG_IGN);
    /* CUDA loads a kernel when it is first launched (lazy loading), and that
     * load waits for the work already on the device: an op's first request
     * would stall the loop, and every session, behind other sessions' jobs.
     * gpuqd has CUDA load its kernels at start instead (a CUDA_MODULE_LOADING
     * in the environment wins). */
    if (setenv("CUDA_MODULE_LOADING", "EAGER", 0) != 0)
        log_warn("setenv(CUDA_MODULE_LOADING): %s", strerror(errno));
    uv_loop_t loop;
    if ((rc = uv_loop_init(&loop)) < 0) {
        log_error("uv_loop_init: %s", uv_strerror(rc));
        return 1;
    }
    static server srv;
    int code = server_init(&srv, &loop, &cfg);
    if (code)
        return code;
    server_set_args(&srv, argc, argv);
    return server_run(&srv);
}
