/* SPDX-License-Identifier: Apache-2.0 */
/* config_file.c - see config_file.h.
 *
 * libinih parses; this file decides what the sections and keys mean. inih
 * tells the handler neither the line number nor where a section begins, so
 * it reads through config_file_reader, which counts lines and handles each
 * "[section]" line itself: that gives every error its line, catches empty
 * sections (an unknown [foo] or [user nobody-here] with no keys) and records
 * the line of each rule's header.
 *
 * Debian's libinih (55) makes its compile-time options run-time globals;
 * config_file_read sets them before each parse: no multi-line values (an
 * indented "key = value" is a key, not a continuation of the previous value),
 * stop at the first error, and ';' or '#' start a comment anywhere after
 * whitespace.
 */
#include "config_file.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_keys.h"

enum file_section { SEC_NONE, SEC_GLOBAL, SEC_RULE };

typedef struct config_file {
    config *c;        /* borrowed */
    const char *path; /* borrowed */
    FILE *f;
    int line; /* of the line inih is handling */
    enum file_section sec;
    char section[GPUQ_NAME_MAX + 8]; /* "limits", "user alice" */
    policy_rule *rule;               /* in c->pol.rules when sec == SEC_RULE */
    bool failed;
} config_file;

static void config_file_fail(config_file *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Keep the first error only, as "PATH:LINE: message". */
static void config_file_fail(config_file *x, const char *fmt, ...)
{
    if (x->failed)
        return;
    x->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(x->c->error, sizeof x->c->error, "%s:%d: %s", x->path, x->line, msg);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* A [user NAME] or [group NAME] header: a new rule. */
static void config_file_rule(config_file *x, bool is_group, const char *name)
{
    const char *what = is_group ? "group" : "user";
    gpuq_policy *pol = &x->c->pol;
    uint32_t id;
    if (!*name || strpbrk(name, " \t")) {
        config_file_fail(x, "[%s] needs one %s name or number: [%s NAME]", what, what, what);
        return;
    }
    if (strlen(name) >= GPUQ_NAME_MAX) {
        config_file_fail(x, "%s name '%s' longer than %d bytes", what, name, GPUQ_NAME_MAX - 1);
        return;
    }
    if (config_resolve_id(name, is_group, &id) < 0) {
        config_file_fail(x, "unknown %s '%s'", what, name);
        return;
    }
    for (int i = 0; i < pol->nrules; i++) {
        const policy_rule *r = &pol->rules[i];
        if (r->is_group == is_group && r->id == id) {
            config_file_fail(x, "%s %s named twice (%cid %u, first at line %d as [%s %s])", what,
                             name, is_group ? 'g' : 'u', (unsigned)id, r->line, what, r->name);
            return;
        }
    }
    if (pol->nrules >= GPUQ_POLICY_MAX_RULES) {
        config_file_fail(x, "more than %d [user]/[group] sections", GPUQ_POLICY_MAX_RULES);
        return;
    }
    policy_rule *r = &pol->rules[pol->nrules++];
    memset(r, 0, sizeof *r);
    r->is_group = is_group;
    r->id = id;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->max_priority = GPUQ_PRIO_UNSET;
    r->line = x->line;
    x->rule = r;
    x->sec = SEC_RULE;
    snprintf(x->section, sizeof x->section, "%s %s", what, name);
}

/* The line after '[': decide which section starts. A line without ']' is
 * left to inih, which reports it. */
static void config_file_section(config_file *x, const char *after_bracket)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", after_bracket);
    char *end = strchr(buf, ']');
    if (!end)
        return;
    *end = '\0';
    char *name = trim(buf);
    x->sec = SEC_NONE;
    x->rule = NULL;
    if (!strcmp(name, "server") || !strcmp(name, "limits") || !strcmp(name, "policy")) {
        x->sec = SEC_GLOBAL;
        snprintf(x->section, sizeof x->section, "%s", name);
        return;
    }
    size_t word = strcspn(name, " \t");
    if ((word == 4 && !strncmp(name, "user", 4)) || (word == 5 && !strncmp(name, "group", 5))) {
        config_file_rule(x, word == 5, trim(name + word));
        return;
    }
    config_file_fail(x, "unknown section [%s] (server, limits, policy, user NAME, group NAME)",
                     name);
}

/* fgets for inih: counts lines, refuses over-long ones (inih would split
 * them into two), and sees section headers. NULL ends the parse. */
static char *config_file_reader(char *str, int num, void *stream)
{
    config_file *x = stream;
    if (x->failed || !fgets(str, num, x->f))
        return NULL;
    x->line++;
    size_t len = strlen(str);
    if (len == (size_t)num - 1 && str[len - 1] != '\n') {
        int ch = getc(x->f);
        if (ch != EOF) {
            config_file_fail(x, "line longer than %d characters", num - 2);
            return NULL;
        }
    }
    const char *p = str;
    if (x->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3))
        p += 3;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '[')
        config_file_section(x, p + 1);
    return x->failed ? NULL : str;
}

static int config_file_handler(void *user, const char *section, const char *name, const char *value)
{
    config_file *x = user;
    char why[300];
    (void)section; /* x->section, from config_file_section, is the same text trimmed */
    if (x->failed)
        return 0;
    if (x->sec == SEC_NONE) {
        config_file_fail(x, "'%s' outside a section ([server], [limits], [policy], ...)", name);
        return 0;
    }
    const config_key *k = config_key_find(x->sec == SEC_RULE ? "rule" : x->section, name);
    if (!k) {
        config_file_fail(x, "unknown key '%s' in [%s]", name, x->section);
        return 0;
    }
    if (config_key_set(x->c, x->rule, k, value, why, sizeof why) < 0) {
        config_file_fail(x, "[%s] %s: %s", x->section, name, why);
        return 0;
    }
    return 1;
}

int config_file_read(config *c, const char *path)
{
    static char comment_prefixes[] = ";#";
    config_file x = {.c = c, .path = path, .sec = SEC_NONE};
    x.f = fopen(path, "r");
    if (!x.f) {
        snprintf(c->error, sizeof c->error, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    ini_allow_multiline = false;
    ini_stop_on_first_error = true;
    ini_allow_inline_comments = true;
    ini_inline_comment_prefixes = comment_prefixes;
    ini_allow_no_value = false;
    int rc = ini_parse_stream(config_file_reader, &x, config_file_handler, &x);
    int read_err = ferror(x.f) ? errno : 0;
    fclose(x.f);
    if (x.failed)
        return -1;
    if (read_err) {
        snprintf(c->error, sizeof c->error, "cannot read %s: %s", path, strerror(read_err));
        return -1;
    }
    if (rc > 0) { /* inih's own: a line that is no section, key = value or comment */
        snprintf(c->error, sizeof c->error,
                 "%s:%d: syntax error (expected [section], key = value or a comment)", path, rc);
        return -1;
    }
    if (rc < 0) {
        snprintf(c->error, sizeof c->error, "cannot parse %s (inih error %d)", path, rc);
        return -1;
    }
    return 0;
}
