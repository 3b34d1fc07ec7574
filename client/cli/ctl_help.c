/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_help.c - gpuqctl's help pages, from the command table (ctl.h): each
 * entry's usage, description, options (name, argument, default, what it
 * does) and examples, and the global options; nothing is said twice. Text
 * is wrapped to 80 columns. Printing cannot fail in a way worth a status:
 * the pages go to stdout (or stderr after a usage error) as they are.
 */
#include "ctl_help.h"

#include <stdbool.h>
#include <string.h>

#include "text_wrap.h"

#define HELP_WIDTH 79
#define HELP_COL 26 /* where an option's text starts */

static void wrap_text(FILE *f, int col, int indent, const char *text, bool groups)
{
    text_wrap(f, col, indent, HELP_WIDTH, text, groups);
}

static void wrap(FILE *f, int col, int indent, const char *text)
{
    text_wrap(f, col, indent, HELP_WIDTH, text, false);
}

/* "  -o, --output OUT.npy   text Default: X." */
static void print_opt(FILE *f, const ctl_optdoc *d)
{
    char left[96];
    snprintf(left, sizeof left, "  %s%s%s%s%s", d->alias ? d->alias : "", d->alias ? ", " : "",
             d->name, d->arg ? " " : "", d->arg ? d->arg : "");
    char text[1024];
    if (d->def)
        snprintf(text, sizeof text, "%s Default: %s.", d->help, d->def);
    else
        snprintf(text, sizeof text, "%s", d->help);
    text_wrap_row(f, left, HELP_COL, HELP_WIDTH, text);
}

static void print_globals(FILE *f)
{
    for (int k = 0; ctl_global_opts[k].name; k++)
        print_opt(f, &ctl_global_opts[k]);
}

static const char *const exit_codes =
    "  0  success\n"
    "  1  gpuqd refused or failed the request (stderr names the error)\n"
    "  2  usage error: an unknown command or option, a bad or missing argument\n"
    "  3  cannot reach gpuqd: no daemon answers on the sockets tried\n";

/* What "@NAME" means wherever a command takes an .npy file (an op's input
 * or output, put's input, get's output): said once, here. */
static const char *const resident_note =
    "Any .npy file argument may be @NAME instead: the resident array NAME that "
    "gpuqd keeps (gpuqctl put, ls, rm). As an input it is not sent again; as an "
    "output (-o @NAME, -i @NAME) the result is kept in gpuqd under that name, and "
    "no file is written.";

/* "  name   one line" */
static void print_command_line(FILE *f, const ctl_entry *e)
{
    char left[64];
    snprintf(left, sizeof left, "  %s", e->name);
    text_wrap_row(f, left, HELP_COL, HELP_WIDTH, e->help ? e->help : "");
}

void ctl_help_overview(FILE *f, ctl_entry_at at)
{
    const ctl_entry *e;
    fprintf(f, "usage: gpuqctl [OPTIONS] COMMAND [ARGS...]\n"
               "       gpuqctl help COMMAND | gpuqctl COMMAND --help\n"
               "       gpuqctl --version\n"
               "\n"
               "gpuqctl talks to gpuqd, the GPU daemon: it runs ops on .npy files, shows\n"
               "the daemon's state and sends its admin commands.\n"
               "\n");
    wrap(f, 0, 0, resident_note);
    fprintf(f, "\n"
               "options (before the command or after it; --name=VALUE or --name VALUE):\n");
    print_globals(f);
    static const ctl_optdoc fixed[] = {
        {"--help", "-h", NULL, NULL, "Print this help (after a command: that command's) and exit."},
        {"--version", "-V", NULL, NULL, "Print gpuqctl's version and exit."},
    };
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++)
        print_opt(f, &fixed[k]);
    fprintf(f, "\ncommands:\n");
    /* in the table's order, a two-word command's group together where its
     * first one stands */
    for (unsigned i = 0; (e = at(i)) != NULL; i++) {
        const char *sp = strchr(e->name, ' ');
        size_t l1 = sp ? (size_t)(sp - e->name) : 0;
        bool first = true;
        for (unsigned j = 0; sp && j < i && first; j++)
            first = strncmp(at(j)->name, e->name, l1 + 1) != 0;
        if (!first)
            continue;
        print_command_line(f, e);
        for (unsigned j = i + 1; sp && at(j); j++)
            if (strncmp(at(j)->name, e->name, l1 + 1) == 0)
                print_command_line(f, at(j));
    }
    static const ctl_entry help = {.name = "help [COMMAND]",
                                   .help = "This help, or a command's options, defaults and "
                                           "examples."};
    print_command_line(f, &help);
    fprintf(f, "\nexit status:\n%s", exit_codes);
    fprintf(f, "\nexamples:\n"
               "  gpuqctl ping\n"
               "  gpuqctl normalize --method l2 in.npy -o out.npy\n"
               "  gpuqctl --json status\n"
               "\n"
               "'gpuqctl help COMMAND' (or 'gpuqctl COMMAND --help') shows a command's\n"
               "options with their defaults, and examples.\n");
}

void ctl_help_command(FILE *f, const ctl_entry *e)
{
    char head[96];
    int col = snprintf(head, sizeof head, "usage: gpuqctl %s", e->name);
    fprintf(f, "%s", head);
    if (e->usage && *e->usage) {
        fputc(' ', f);
        wrap_text(f, col + 1, col + 1, e->usage, true);
    } else {
        fputc('\n', f);
    }
    fputc('\n', f);
    wrap(f, 0, 0, e->desc ? e->desc : e->help ? e->help : "");
    if (e->usage && strstr(e->usage, ".npy")) {
        fputc('\n', f);
        wrap(f, 0, 0, resident_note);
    }
    if (e->opts && e->opts[0].name) {
        fprintf(f, "\noptions:\n");
        for (int k = 0; e->opts[k].name; k++)
            print_opt(f, &e->opts[k]);
    }
    fprintf(f, "\nglobal options (before or after the command):\n");
    print_globals(f);
    fprintf(f, "\nexit status:\n%s", exit_codes);
    if (e->example) {
        fprintf(f, "\nexample%s:\n", strchr(e->example, '\n') ? "s" : "");
        for (const char *p = e->example; *p;) {
            size_t l = strcspn(p, "\n");
            fprintf(f, "  %.*s\n", (int)l, p);
            p += l;
            if (*p)
                p++;
        }
    }
}

int ctl_help_group(FILE *f, const char *word, ctl_entry_at at)
{
    const ctl_entry *e;
    size_t wl = strlen(word);
    int n = 0;
    for (unsigned i = 0; (e = at(i)) != NULL; i++) {
        if (strncmp(e->name, word, wl) != 0 || e->name[wl] != ' ')
            continue;
        if (n++ == 0)
            fprintf(f, "usage: gpuqctl %s SUBCOMMAND ...\n\ncommands:\n", word);
        print_command_line(f, e);
    }
    if (n)
        fprintf(f,
                "\n'gpuqctl help %s SUBCOMMAND' shows a command's options, defaults and "
                "examples.\n",
                word);
    return n;
}
