/* SPDX-License-Identifier: Apache-2.0 */
/* utf8.h - UTF-8 checks for the wire: every string gpuq sends or accepts is
 * UTF-8 (PROTOCOL.md 1.2).
 *
 * Validation is strict RFC 3629: shortest form only (no overlongs such as
 * C0 AF), no UTF-16 surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
 * NUL (U+0000) is valid UTF-8; callers that forbid it check it themselves.
 * Cutting and escaping keep a string valid when it must be shortened or when
 * bytes of unknown origin have to be shown.
 */
#ifndef GPUQ_PROTO_UTF8_H
#define GPUQ_PROTO_UTF8_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the longest valid UTF-8 prefix of s[0..len): len when all of it
 * is valid, else the offset of the first byte of the first bad sequence. */
size_t gpuq_utf8_valid_prefix(const char *s, size_t len);

/* s[0..len) is valid UTF-8. */
bool gpuq_utf8_valid(const char *s, size_t len);

/* The length of the longest prefix of s[0..len) of at most max bytes that
 * does not end inside a character: a trailing lead byte whose continuation
 * bytes lie beyond the cut is dropped with them. For valid input the prefix
 * is valid; cut(s, len, len) is len. */
size_t gpuq_utf8_cut(const char *s, size_t len, size_t max);

/* Bytes gpuq_utf8_escape writes when given unlimited room. */
size_t gpuq_utf8_escaped_len(const char *s, size_t len);

/* Copy s[0..len) into out[cap] as valid UTF-8: valid characters as they
 * are, each byte that does not start a valid sequence as the four ASCII
 * characters \xHH. Stops before the first character or escape that does not
 * fit (never half of one); always NUL-terminates when cap > 0. Returns the
 * bytes written, NUL excluded. */
size_t gpuq_utf8_escape(char *out, size_t cap, const char *s, size_t len);
/* The same, and with controls also every control character escaped: C0
 * controls and DEL (\n, \r and \t as such, the others \xHH) and C1 controls
 * (U+0080..U+009F, each of their two bytes \xHH), so that the result
 * cannot start a line of its own or move a terminal (gpuqd's log). */
size_t gpuq_utf8_escape_ctl(char *out, size_t cap, const char *s, size_t len, bool controls);

/* vsnprintf that, when it has to truncate, cuts on a character boundary
 * instead of leaving half a character at the end of buf. The return value
 * is vsnprintf's (the untruncated length, or negative on an output error). */
__attribute__((format(printf, 3, 0))) int gpuq_utf8_vsnprintf(char *buf, size_t cap,
                                                              const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif

#endif
