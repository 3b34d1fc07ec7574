/* ctl_main.c - gpuqctl: global options and the command table.
 *
 * gpuqctl [--socket PATH] [--json] [--priority low|normal|high]
 *         [--transport auto|socket|shm] COMMAND ...
 * The command is looked up in the table (one- or two-word names), its
 * arguments are parsed by ctl_parse_args (ctl_util.c), and its exec does
 * the work.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "op_ctl.h"

static void usage(FILE *f)
{
    const ctl_entry *e;
    fprintf(f,
            "usage: gpuqctl [--socket PATH] [--json] [--priority low|normal|high]\n"
            "               [--transport auto|socket|shm] COMMAND ...\n"
            "options:\n"
            "  --socket PATH    gpuqd's socket (default: $GPUQ_SOCKET, "
            "$XDG_RUNTIME_DIR/gpuq/gpuqd.sock,\n"
            "                   /run/gpuq/gpuqd.sock)\n"
            "  --json           machine-readable output (ping, status, sessions)\n"
            "  --priority P     the session's priority: low, normal (default) or high\n"
            "  --transport T    how the ops' arrays reach gpuqd: auto (default: shared memory\n"
            "                   when gpuqd offers arenas and the arrays come to %u MiB or more,\n"
            "                   else the socket), shm (shared memory always; an error when\n"
            "                   gpuqd offers none) or socket (never shared memory)\n"
            "--json, --priority and --transport may also follow the command;\n"
            "--socket=PATH and --transport=T are the same as with a space.\n"
            "commands:\n",
            GPUQ_SHM_MIN_BYTES >> 20);
    for (unsigned i = 0; (e = op_ctl_at(i)) != NULL; i++) {
        fprintf(f, "  gpuqctl %s %s\n", e->name, e->usage);
        if (e->help)
            fprintf(f, "      %s\n", e->help);
    }
}

int main(int argc, char **argv)
{
    ctl_ctx ctx = {.socket = NULL,
                   .json = false,
                   .priority = GPUQ_PRIO_NORMAL,
                   .transport = GPUQ_TRANSPORT_AUTO,
                   .entry = NULL};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--socket") == 0) {
            if (++i >= argc)
                return ctl_usage_error(NULL, "--socket needs a path");
            ctx.socket = argv[i];
        } else if (strncmp(a, "--socket=", 9) == 0) {
            ctx.socket = a + 9;
        } else if (strcmp(a, "--json") == 0) {
            ctx.json = true;
        } else if (strcmp(a, "--priority") == 0) {
            if (++i >= argc)
                return ctl_usage_error(NULL, "--priority needs a value");
            if (ctl_parse_priority(argv[i], &ctx.priority))
                return ctl_usage_error(NULL, "bad priority '%s' (low|normal|high or -1|0|1)",
                                       argv[i]);
        } else if (strcmp(a, "--transport") == 0 || strncmp(a, "--transport=", 12) == 0) {
            const char *v = a[11] == '=' ? a + 12 : ++i < argc ? argv[i] : NULL;
            if (!v)
                return ctl_usage_error(NULL, "--transport needs auto, socket or shm");
            if (ctl_parse_transport(v, &ctx.transport))
                return ctl_usage_error(NULL, "bad transport '%s' (auto|socket|shm)", v);
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            return ctl_usage_error(NULL, "unknown option '%s'", a);
        }
    }
    if (i >= argc) {
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    const char *cmd = argv[i];
    const char *sub = i + 1 < argc ? argv[i + 1] : NULL;
    const ctl_entry *e;
    for (unsigned k = 0; (e = op_ctl_at(k)) != NULL; k++) {
        const char *sp = strchr(e->name, ' ');
        int words = 1;
        if (sp) {
            size_t l1 = (size_t)(sp - e->name);
            if (strlen(cmd) != l1 || strncmp(cmd, e->name, l1) != 0 || !sub ||
                strcmp(sub, sp + 1) != 0)
                continue;
            words = 2;
        } else if (strcmp(cmd, e->name) != 0) {
            continue;
        }
        ctx.entry = e;
        return e->exec(&ctx, argc - i - words, (const char **)argv + i + words);
    }
    if (strcmp(cmd, "distance") == 0 && !sub)
        return ctl_usage_error(NULL, "distance needs haversine, grid or pairwise");
    if (sub && strcmp(cmd, "distance") == 0)
        return ctl_usage_error(NULL, "unknown command '%s %s'", cmd, sub);
    return ctl_usage_error(NULL, "unknown command '%s'", cmd);
}
