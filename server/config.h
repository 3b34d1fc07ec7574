/* config.h - gpuqd's command line: limits and flags.
 *
 * config_parse fills a config from argv (defaults from proto/limits.h).
 * It prints --help/--version itself and reports bad options on stderr.
 */
#ifndef GPUQ_SERVER_CONFIG_H
#define GPUQ_SERVER_CONFIG_H

#include <stdint.h>

#include "gpuq_limits.h"

#define GPUQD_VERSION "0.1.0"

typedef struct config {
    const char *socket;        /* borrowed from argv; NULL: resolve (listener) */
    const char *device;        /* "auto", "cuda", "cpu" */
    gpuq_limits lim;
    int log_level;
    double drain_timeout_s;
    int max_priority;          /* cap for non-root peers (GPUQ_PRIO_*) */
} config;

/* Returns 0 to run, 1 to exit 0 (help/version printed), -1 on a bad option
 * (message printed; exit 2). */
int config_parse(config *c, int argc, char **argv);
/* "123", "4K", "16M", "2G" (binary units). Returns 0 or -1. */
int config_parse_size(const char *s, uint64_t *out);

#endif
