/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_main.c - gpuqctl: global options, help and the command table.
 *
 * gpuqctl [--socket PATH] [--json] [--priority P] [--transport T]
 *         [--deadline MS] COMMAND ...
 * The command is looked up in the table (one- or two-word names), its
 * arguments are parsed by ctl_parse_args (ctl_util.c), and its exec does
 * the work. --help / -h (anywhere before "--"), "help CMD" and --version
 * are answered here: they print to stdout and exit 0. An unknown command
 * is a usage error (2) that names the nearest one.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_help.h"
#include "gpuq_version.h"
#include "op_ctl.h"

/* Commands that are no op's, listed after the op table's. */
static const ctl_entry *const other_commands[] = {&ctl_bench_entry};

/* The i-th command: the op table's (op_ctl_at), then other_commands; NULL
 * past the end. */
static const ctl_entry *command_at(unsigned i)
{
    const ctl_entry *e = op_ctl_at(i);
    if (e)
        return e;
    unsigned nops = 0;
    while (op_ctl_at(nops))
        nops++;
    i -= nops;
    return i < sizeof other_commands / sizeof other_commands[0] ? other_commands[i] : NULL;
}

/* The command named by argv[0] (and argv[1] for a two-word name), or NULL;
 * *words says how many words it took. */
static const ctl_entry *find_command(int argc, const char **argv, int *words)
{
    const ctl_entry *e;
    for (unsigned k = 0; argc > 0 && (e = command_at(k)) != NULL; k++) {
        const char *sp = strchr(e->name, ' ');
        if (!sp) {
            if (strcmp(argv[0], e->name) == 0) {
                *words = 1;
                return e;
            }
            continue;
        }
        size_t l1 = (size_t)(sp - e->name);
        if (argc > 1 && strlen(argv[0]) == l1 && strncmp(argv[0], e->name, l1) == 0 &&
            strcmp(argv[1], sp + 1) == 0) {
            *words = 2;
            return e;
        }
    }
    return NULL;
}

/* "unknown command 'x'", with the nearest name (a word of a two-word
 * command too), or the group's commands when only its word was given. */
static int unknown_command(int argc, const char **argv)
{
    const char *names[64];
    char buf[64][48];
    int n = 0;
    const ctl_entry *e;
    bool group = false;
    for (unsigned k = 0; (e = command_at(k)) != NULL && n < 63; k++) {
        const char *sp = strchr(e->name, ' ');
        size_t l1 = sp ? (size_t)(sp - e->name) : strlen(e->name);
        if (sp && strlen(argv[0]) == l1 && strncmp(argv[0], e->name, l1) == 0)
            group = true;
        snprintf(buf[n], sizeof buf[n], "%s", e->name);
        names[n] = buf[n];
        n++;
    }
    names[n++] = "help";
    if (group) {
        char list[256] = "";
        size_t at = 0;
        size_t wl = strlen(argv[0]);
        for (int k = 0; k < n; k++) {
            if (strncmp(names[k], argv[0], wl) == 0 && names[k][wl] == ' ' && at < sizeof list) {
                int w = snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "",
                                 names[k] + wl + 1);
                at += w > 0 ? (size_t)w : 0;
            }
        }
        if (argc < 2 || argv[1][0] == '-')
            return ctl_usage_error(NULL, "%s needs a subcommand: %s", argv[0], list);
        /* the nearest subcommand */
        const char *subs[64];
        int ns = 0;
        for (int k = 0; k < n; k++)
            if (strncmp(names[k], argv[0], wl) == 0 && names[k][wl] == ' ')
                subs[ns++] = names[k] + wl + 1;
        const char *near = ctl_suggest(argv[1], subs, ns);
        if (near)
            return ctl_usage_error(NULL, "unknown command '%s %s' (did you mean %s %s?)", argv[0],
                                   argv[1], argv[0], near);
        return ctl_usage_error(NULL, "unknown command '%s %s' (%s takes %s)", argv[0], argv[1],
                               argv[0], list);
    }
    /* a two-word name typed as one ("grid" for "distance grid") */
    for (int k = 0; k < n; k++) {
        const char *sp = strchr(names[k], ' ');
        if (sp && strcmp(sp + 1, argv[0]) == 0)
            return ctl_usage_error(NULL, "unknown command '%s' (did you mean %s?)", argv[0],
                                   names[k]);
    }
    const char *near = ctl_suggest(argv[0], names, n);
    if (near)
        return ctl_usage_error(NULL, "unknown command '%s' (did you mean %s?)", argv[0], near);
    return ctl_usage_error(NULL, "unknown command '%s'", argv[0]);
}

/* gpuqctl help [COMMAND]: stdout, 0; an unknown COMMAND is a usage error. */
static int help_command(int argc, const char **argv)
{
    if (argc == 0) {
        ctl_help_overview(stdout, command_at);
        return 0;
    }
    int words = 0;
    const ctl_entry *e = find_command(argc, argv, &words);
    if (e && words == argc) {
        ctl_help_command(stdout, e);
        return 0;
    }
    if (!e && argc == 1 && ctl_help_group(stdout, argv[0], command_at) > 0)
        return 0;
    if (e) /* "help ping extra" */
        return ctl_usage_error(NULL, "help takes one command, not '%s'", argv[words]);
    if (argc == 1 && strcmp(argv[0], "help") == 0) {
        ctl_help_overview(stdout, command_at);
        return 0;
    }
    return unknown_command(argc, argv);
}

/* Is flag a (or b, may be NULL) among the arguments (before a "--")? */
static bool has_flag(int argc, const char **argv, const char *a, const char *b)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], a) == 0 || (b && strcmp(argv[i], b) == 0))
            return true;
    }
    return false;
}

static bool wants_help(int argc, const char **argv)
{
    return has_flag(argc, argv, "--help", "-h");
}

int main(int argc, char **argv_)
{
    const char **argv = (const char **)argv_;
    ctl_ctx ctx = {.socket = NULL,
                   .json = false,
                   .priority = GPUQ_PRIO_NORMAL,
                   .transport = GPUQ_TRANSPORT_AUTO,
                   .deadline_ms = 0,
                   .entry = NULL};
    int i = 1;
    /* --json with a help page is refused (the pages are text only); with
     * --version it is honoured. */
    bool json = has_flag(argc - 1, argv + 1, "--json", NULL);
    if (json && wants_help(argc - 1, argv + 1))
        return ctl_usage_error(NULL, "--json: the help pages are text only");
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            ctl_help_overview(stdout, command_at);
            return 0;
        }
        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            if (json)
                printf("{\"command\":\"version\",\"version\":\"%s\"}\n", GPUQ_VERSION);
            else
                printf("gpuqctl %s\n", GPUQ_VERSION);
            return 0;
        }
        int rc = ctl_parse_global(&ctx, argc, argv, &i);
        if (rc == 1)
            continue;
        if (rc)
            return rc;
        const char *names[8];
        int n = 0;
        for (int k = 0; ctl_global_opts[k].name && n < 6; k++)
            names[n++] = ctl_global_opts[k].name;
        names[n++] = "--help";
        names[n++] = "--version";
        char opt[64];
        snprintf(opt, sizeof opt, "%.*s", (int)strcspn(a, "="), a);
        const char *near = ctl_suggest(opt, names, n);
        if (near)
            return ctl_usage_error(NULL, "unknown option '%s' (did you mean %s?)", opt, near);
        return ctl_usage_error(NULL, "unknown option '%s'", opt);
    }
    if (i >= argc) {
        ctl_help_overview(stderr, command_at);
        return CTL_EXIT_USAGE;
    }
    int left = argc - i;
    const char **args = argv + i;
    if (strcmp(args[0], "help") == 0) {
        if (json)
            return ctl_usage_error(NULL, "--json: the help pages are text only");
        return help_command(left - 1, args + 1);
    }
    int words = 0;
    const ctl_entry *e = find_command(left, args, &words);
    if (!e) {
        if (left >= 2 && wants_help(left - 1, args + 1) &&
            ctl_help_group(stdout, args[0], command_at) > 0)
            return 0;
        return unknown_command(left, args);
    }
    if (wants_help(left - words, args + words)) {
        ctl_help_command(stdout, e);
        return 0;
    }
    ctx.entry = e;
    return e->exec(&ctx, left - words, args + words);
}
