/* main.c - gpuqd's entry: arguments, logging, SIGPIPE, then the server. */
#include <signal.h>
#include <stdio.h>

#include "config.h"
#include "log.h"
#include "server.h"

int main(int argc, char **argv)
{
    config cfg;
    int rc = config_load(&cfg, argc, argv);
    if (rc > 0)
        return 0;
    if (rc < 0)
        return 2;
    log_set_level(cfg.log_level);
    signal(SIGPIPE, SIG_IGN);
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
