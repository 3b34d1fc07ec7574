/* SPDX-License-Identifier: Apache-2.0 */
/* log.h - stderr logging with syslog priority prefixes ("<6>gpuqd: ...").
 *
 * journald reads the <N> prefix as the priority (stderr is the only sink:
 * gpuqd calls neither syslog(3) nor sd_journal_*). Levels below the
 * configured one are dropped. Each message is escaped (log_escape) after
 * formatting, so strings a peer sent cannot forge lines, priorities or
 * terminal escapes, whatever the call site. Not thread-safe beyond what stdio
 * gives: loop thread only.
 */
#ifndef GPUQ_SERVER_LOG_H
#define GPUQ_SERVER_LOG_H

#include <stddef.h>

enum { LOG_LVL_ERROR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

void log_set_level(int level);
/* Parse "error|warn|info|debug"; returns -1 for others. */
int log_level_parse(const char *s);
/* Write "<level>tag: message\n" (tag "gpuqd" when NULL, else a string of
 * gpuqd's own; the message escaped by log_escape, cut at 1023 bytes on a
 * character boundary before escaping). */
void log_tagged(int level, const char *tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A rate limit for one kind of line (a static per call site): at most
 * LOG_LIMIT_BURST lines per LOG_LIMIT_WINDOW_S seconds; the first line after
 * a window that dropped some says how many. A hostile client must not be
 * able to flood the journal. */
#define LOG_LIMIT_BURST 10
#define LOG_LIMIT_WINDOW_S 10
typedef struct log_limit {
    unsigned long long window_start_ns;
    unsigned count, dropped;
} log_limit;
void log_limited(log_limit *lim, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copy s[0..len) into out[cap] as one line of printable UTF-8: valid
 * characters other than controls as they are; \n, \r and \t as the two
 * characters "\\n", "\\r", "\\t"; every other C0 control, DEL, each byte of a
 * C1 control (U+0080..U+009F) and each byte that does not start a valid
 * character as the four characters \xHH. A backslash stays as it is.
 * Stops before the first character whose escape does not fit (never half
 * of it); always NUL-terminates when cap > 0. Returns the bytes written,
 * NUL excluded. 4 * len + 1 bytes always suffice. */
size_t log_escape(char *out, size_t cap, const char *s, size_t len);

#define log_error(...) log_tagged(LOG_LVL_ERROR, NULL, __VA_ARGS__)
#define log_warn(...) log_tagged(LOG_LVL_WARN, NULL, __VA_ARGS__)
#define log_info(...) log_tagged(LOG_LVL_INFO, NULL, __VA_ARGS__)
#define log_debug(...) log_tagged(LOG_LVL_DEBUG, NULL, __VA_ARGS__)

#endif
