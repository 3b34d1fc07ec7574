/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_fields.c - see fuzz_fields.h. */
#include "fuzz_fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_replay.h"

static char dump_buf[1 << 18];
static size_t dump_len;

int fuzz_dump_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dump_buf + dump_len, sizeof dump_buf - dump_len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof dump_buf - dump_len)
        fuzz_fail("__builtin_dump_struct output over %zu bytes", sizeof dump_buf);
    dump_len += (size_t)n;
    return n;
}

const char *fuzz_dump_take(void)
{
    dump_len = 0;
    return dump_buf;
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* The field names of the outermost struct in a __builtin_dump_struct
 * listing: lines "TYPE NAME : VALUE" (clang 14) or "TYPE NAME = VALUE"
 * (later clangs) one level inside "struct X {"; a line ending in '{' opens
 * a nested level, a line "}" closes one. Calls fn for each name. */
static void dump_names(const char *text, void (*fn)(const char *name, size_t len, void *arg),
                       void *arg)
{
    int depth = 0;
    const char *line = text;
    while (*line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *p = line, *end = line + len;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
            end--;
        if (end - p == 1 && *p == '}') {
            depth--;
        } else {
            if (depth == 1) {
                const char *sep = NULL;
                for (const char *q = p; q + 3 <= end; q++) {
                    if (q[0] == ' ' && (q[1] == ':' || q[1] == '=') && q[2] == ' ') {
                        sep = q;
                        break;
                    }
                }
                if (sep) {
                    const char *n0 = sep;
                    while (n0 > p && n0[-1] != ' ' && n0[-1] != '*')
                        n0--;
                    fn(n0, (size_t)(sep - n0), arg);
                }
            }
            if (end > p && end[-1] == '{')
                depth++;
        }
        line += len + (eol ? 1 : 0);
    }
}

struct name_match {
    const char *sname;
    const fuzz_field *t;
    size_t n;
    size_t seen;
};

static void match_one(const char *name, size_t len, void *arg)
{
    struct name_match *m = arg;
    for (size_t k = 0; k < m->n; k++) {
        if (strlen(m->t[k].name) == len && memcmp(m->t[k].name, name, len) == 0) {
            m->seen++;
            return;
        }
    }
    fuzz_fail("%s has a field \"%.*s\" that the fuzz target's table does not list: add it with "
              "its round-trip rule",
              m->sname, (int)len, name);
}

void fuzz_fields_check(const char *sname, size_t ssize, size_t salign, const fuzz_field *t,
                       size_t n, const char *dump)
{
    size_t end = 0;
    for (size_t k = 0; k < n; k++) {
        size_t want = align_up(end, t[k].align);
        if (t[k].off != want)
            fuzz_fail("%s: the table has \"%s\" at offset %zu, but the fields before it end at "
                      "%zu (%zu aligned): a field is missing from the table or out of order",
                      sname, t[k].name, t[k].off, end, want);
        end = t[k].off + t[k].size;
    }
    if (align_up(end, salign) != ssize)
        fuzz_fail("%s has %zu bytes but its table ends at %zu: a field is missing from the table",
                  sname, ssize, end);
    if (dump) {
        struct name_match m = {sname, t, n, 0};
        dump_names(dump, match_one, &m);
        if (m.seen != n)
            fuzz_fail("%s: the compiler lists %zu fields, the table %zu", sname, m.seen, n);
    }
}

int fuzz_field_eq(const fuzz_field *f, const void *a, const void *b)
{
    return memcmp((const char *)a + f->off, (const char *)b + f->off, f->size) == 0;
}
