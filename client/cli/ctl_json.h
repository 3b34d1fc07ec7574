/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_json.h - the pieces of gpuqctl's --json output (ctl_json.c): strings
 * escaped as JSON wants, numbers that stay valid JSON.
 *
 * Every --json output is one JSON value on one line of stdout; errors stay
 * one line on stderr with no JSON on stdout (ctl.h).
 */
#ifndef GPUQ_CLIENT_CTL_JSON_H
#define GPUQ_CLIENT_CTL_JSON_H

#include <stddef.h>
#include <stdio.h>

/* s as a quoted JSON string: '"', '\\' and control characters escaped,
 * other bytes as they are (UTF-8 passes through). */
void ctl_json_str(FILE *f, const char *s);
/* The same for s[len] (which may hold NUL bytes: escaped). */
void ctl_json_strn(FILE *f, const char *s, size_t len);
/* A number: finite values in the shortest form that reads back the same
 * (%.17g at most), NaN and infinities as null (JSON has neither). */
void ctl_json_num(FILE *f, double v);

#endif
