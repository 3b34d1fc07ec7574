/* log.h - stderr logging with syslog priority prefixes ("<6>gpuqd: ...").
 *
 * journald reads the <N> prefix as the priority. Levels below the configured
 * one are dropped. Not thread-safe beyond what stdio gives: loop thread only.
 */
#ifndef GPUQ_SERVER_LOG_H
#define GPUQ_SERVER_LOG_H

enum { LOG_LVL_ERROR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

void log_set_level(int level);
int log_level(void);
/* Parse "error|warn|info|debug"; returns -1 for others. */
int log_level_parse(const char *s);
/* Write "<level>tag: message\n" (tag "gpuqd" when NULL). */
void log_tagged(int level, const char *tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(...) log_tagged(LOG_LVL_ERROR, NULL, __VA_ARGS__)
#define log_warn(...) log_tagged(LOG_LVL_WARN, NULL, __VA_ARGS__)
#define log_info(...) log_tagged(LOG_LVL_INFO, NULL, __VA_ARGS__)
#define log_debug(...) log_tagged(LOG_LVL_DEBUG, NULL, __VA_ARGS__)

#endif
