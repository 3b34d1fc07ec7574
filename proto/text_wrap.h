/* SPDX-License-Identifier: Apache-2.0 */
/* text_wrap.h - help text wrapped to a width, for gpuqd's --help and
 * gpuqctl's help pages (one way of laying out an option's row for both). */
#ifndef GPUQ_PROTO_TEXT_WRAP_H
#define GPUQ_PROTO_TEXT_WRAP_H

#include <stdbool.h>
#include <stdio.h>

/* text from column col (the cursor is there), later lines indented to
 * indent, no line past width unless one word is longer; '\n' in text
 * breaks the line. groups: a bracketed group ("[--to LAT,LON]") is one
 * word. Ends the line. */
void text_wrap(FILE *f, int col, int indent, int width, const char *text, bool groups);

/* One option's row: left ("  --name ARG") then text from column text_col
 * (on the next line when left reaches it), wrapped to width. */
void text_wrap_row(FILE *f, const char *left, int text_col, int width, const char *text);

#endif
