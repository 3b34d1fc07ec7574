/* log.c - see log.h. One fprintf per line so lines never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_level = LOG_LVL_INFO;

void log_set_level(int level) { g_level = level; }
int log_level(void) { return g_level; }

int log_level_parse(const char *s)
{
    if (!strcmp(s, "error")) return LOG_LVL_ERROR;
    if (!strcmp(s, "warn")) return LOG_LVL_WARN;
    if (!strcmp(s, "info")) return LOG_LVL_INFO;
    if (!strcmp(s, "debug")) return LOG_LVL_DEBUG;
    return -1;
}

void log_tagged(int level, const char *tag, const char *fmt, ...)
{
    if (level > g_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "<%d>%s: %s\n", level, tag ? tag : "gpuqd", line);
    fflush(stderr);
}
