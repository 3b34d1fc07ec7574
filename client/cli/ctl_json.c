/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_json.c - JSON output pieces for gpuqctl (ctl_json.h). */
#include "ctl_json.h"

#include <math.h>
#include <stdlib.h>

void ctl_json_strn(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (ch < 0x20 || ch == 0x7f)
                fprintf(f, "\\u%04x", ch);
            else
                fputc(ch, f);
        }
    }
    fputc('"', f);
}

void ctl_json_str(FILE *f, const char *s)
{
    size_t n = 0;
    while (s && s[n])
        n++;
    ctl_json_strn(f, s ? s : "", n);
}

void ctl_json_num(FILE *f, double v)
{
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) { /* the shortest of these that reads back */
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}
