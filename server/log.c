/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - see log.h. One fprintf per line so lines never interleave.
 *
 * Every message is formatted first and then escaped (log_escape) before it
 * is written, so a peer-supplied string (a client name, a path, a limit
 * name) can never start a line of its own, forge a priority prefix or send
 * a terminal an escape sequence, whichever call site logged it. */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "utf8.h"

static int g_level = LOG_LVL_INFO;

void log_set_level(int level)
{
    g_level = level;
}
int log_level(void)
{
    return g_level;
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

static const char hexdig[] = "0123456789ABCDEF";

/* Append the escape of byte c ("\\n", "\\r", "\\t" or "\\xHH") at out[*o];
 * false (nothing written) when it does not fit before the NUL. */
static bool put_escape(char *out, size_t cap, size_t *o, uint8_t c)
{
    char e[4] = {'\\', 'x', hexdig[c >> 4], hexdig[c & 0x0f]};
    size_t n = 4;
    if (c == '\n' || c == '\r' || c == '\t') {
        e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        n = 2;
    }
    if (cap - 1 - *o < n)
        return false;
    memcpy(out + *o, e, n);
    *o += n;
    return true;
}

size_t log_escape(char *out, size_t cap, const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0, o = 0;

    if (cap == 0)
        return 0;
    while (i < len) {
        size_t n = gpuq_utf8_char_len(s + i, len - i);
        /* C0 controls and DEL; C1 controls (U+0080..U+009F, C2 80..C2 9F:
         * 0x9B is a CSI to some terminals) byte by byte, as is every byte
         * that does not start a valid character. */
        bool ctl = n == 1 ? p[i] < 0x20 || p[i] == 0x7f : n == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0;
        if (n == 0 || ctl) {
            size_t k = n ? n : 1, o0 = o;
            for (size_t j = 0; j < k; j++)
                if (!put_escape(out, cap, &o, p[i + j])) {
                    out[o0] = '\0'; /* never half of a character's escapes */
                    return o0;
                }
            i += k;
            continue;
        }
        if (cap - 1 - o < n)
            break;
        memcpy(out + o, p + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    return o;
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
