/* SPDX-License-Identifier: Apache-2.0 */
/* text_wrap.c - see text_wrap.h. */
#include "text_wrap.h"

#include <string.h>

/* The length of the word at p: up to a space or line break, but a
 * bracketed group is one word when groups is set. */
static size_t word_len(const char *p, bool groups)
{
    int depth = 0;
    size_t w = 0;
    for (; p[w] && p[w] != '\n' && (p[w] != ' ' || (groups && depth > 0)); w++) {
        if (p[w] == '[' || p[w] == '(')
            depth++;
        else if ((p[w] == ']' || p[w] == ')') && depth > 0)
            depth--;
    }
    return w;
}

void text_wrap(FILE *f, int col, int indent, int width, const char *text, bool groups)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t w = word_len(p, groups);
        if (w == 0) {
            if (*p == '\n') { /* a forced break */
                fprintf(f, "\n%*s", indent, "");
                col = indent;
                p++;
            }
            continue;
        }
        if (col > indent && col + 1 + (int)w > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
    }
    fputc('\n', f);
}

void text_wrap_row(FILE *f, const char *left, int text_col, int width, const char *text)
{
    int col = fprintf(f, "%s", left);
    if (col >= text_col - 1)
        fprintf(f, "\n%*s", text_col, "");
    else
        fprintf(f, "%*s", text_col - col, "");
    text_wrap(f, text_col, text_col, width, text, false);
}
