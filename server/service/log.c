/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - see log.h. One fprintf per line so lines never interleave.
 *
 * Every message is formatted first and then escaped (log_escape) before it
 * is written, so a peer-supplied string (a client name, a path, a limit
 * name) can never start a line of its own, forge a priority prefix or send
 * a terminal an escape sequence, whichever call site logged it. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "utf8.h"

static int g_level = LOG_LVL_INFO;

void log_set_level(int level)
{
    g_level = level;
}

int log_level_parse(const char *s)
{
    if (!strcmp(s, "error"))
        return LOG_LVL_ERROR;
    if (!strcmp(s, "warn"))
        return LOG_LVL_WARN;
    if (!strcmp(s, "info"))
        return LOG_LVL_INFO;
    if (!strcmp(s, "debug"))
        return LOG_LVL_DEBUG;
    return -1;
}

size_t log_escape(char *out, size_t cap, const char *s, size_t len)
{
    return gpuq_utf8_escape_ctl(out, cap, s, len, true);
}

void log_tagged(int level, const char *tag, const char *fmt, ...)
{
    if (level > g_level)
        return;
    char line[1024];
    char esc[4 * sizeof line]; /* every byte escaped as \xHH at worst */
    va_list ap;
    va_start(ap, fmt);
    int n = gpuq_utf8_vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    /* cut: up to the NUL gpuq_utf8_vsnprintf put on a character boundary */
    size_t len = (size_t)n < sizeof line ? (size_t)n : strlen(line);
    log_escape(esc, sizeof esc, line, len);
    fprintf(stderr, "<%d>%s: %s\n", level, tag ? tag : "gpuqd", esc);
    fflush(stderr);
}

void log_limited(log_limit *lim, int level, const char *fmt, ...)
{
    if (level > g_level)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned long long now =
        (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    if (lim->count == 0 || now - lim->window_start_ns >= LOG_LIMIT_WINDOW_S * 1000000000ull) {
        if (lim->dropped)
            log_tagged(level, NULL, "(%u similar lines suppressed in %d s)", lim->dropped,
                       LOG_LIMIT_WINDOW_S);
        lim->window_start_ns = now;
        lim->count = 0;
        lim->dropped = 0;
    }
    if (lim->count >= LOG_LIMIT_BURST) {
        lim->dropped++;
        return;
    }
    lim->count++;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    gpuq_utf8_vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_tagged(level, NULL, "%s", line);
}
