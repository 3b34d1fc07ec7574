/* ctl_util.c - what every gpuqctl command shares: argument parsing, the
 * one-line error, connecting (with the --transport the user chose).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

int ctl_usage_error(const ctl_ctx *ctx, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx && ctx->entry)
        fprintf(stderr, "gpuqctl: usage: %s (gpuqctl %s %s)\n", msg, ctx->entry->name,
                ctx->entry->usage);
    else
        fprintf(stderr, "gpuqctl: usage: %s (gpuqctl --help lists commands)\n", msg);
    return CTL_EXIT_USAGE;
}

int ctl_fail(int code, const char *msg)
{
    const char *name = gpuq_errname(code);
    size_t nl = strlen(name);
    if (msg && strncmp(msg, name, nl) == 0 && msg[nl] == ':' && msg[nl + 1] == ' ')
        msg += nl + 2;
    if (!msg || !*msg)
        msg = gpuq_strerror(code);
    /* keep it one line */
    char line[1024];
    snprintf(line, sizeof line, "%s", msg);
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "gpuqctl: %s: %s\n", name, line);
    return CTL_EXIT_FAIL;
}

int ctl_failf(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ctl_fail(code, msg);
}

int ctl_connect(const ctl_ctx *ctx, gpuq_conn **c)
{
    gpuq_connect_opts o = {.socket_path = ctx->socket,
                           .client_name = "gpuqctl",
                           .priority = ctx->priority,
                           .device = -1};
    int rc = gpuq_connect(&o, c);
    if (rc == 0)
        rc = gpuq_set_transport(*c, (gpuq_transport)ctx->transport);
    if (rc) {
        ctl_fail(rc, *c ? gpuq_errmsg(*c) : NULL);
        gpuq_close(*c);
        *c = NULL;
        return CTL_EXIT_FAIL;
    }
    return 0;
}

int ctl_connect_bare(ctl_ctx *ctx, int argc, const char **argv, gpuq_conn **c)
{
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, NULL, 0, pos, &npos, NULL);
    return rc ? rc : ctl_connect(ctx, c);
}

int ctl_parse_double(const char *s, double *v)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (*end || errno == ERANGE || !isfinite(d))
        return -1;
    *v = d;
    return 0;
}

int ctl_parse_u64(const char *s, uint64_t *v)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(s, &end, 10);
    if (*end || errno == ERANGE)
        return -1;
    *v = u;
    return 0;
}

int ctl_parse_priority(const char *s, int *prio)
{
    return gpuq_prio_parse(s, prio) == 0 ? 0 : -1;
}

int ctl_parse_transport(const char *s, int *t)
{
    static const char *const names[] = {[GPUQ_TRANSPORT_AUTO] = "auto",
                                        [GPUQ_TRANSPORT_SOCKET] = "socket",
                                        [GPUQ_TRANSPORT_SHM] = "shm"};
    for (int k = 0; s && k < (int)(sizeof names / sizeof names[0]); k++) {
        if (strcmp(s, names[k]) == 0) {
            *t = k;
            return 0;
        }
    }
    return -1;
}

int ctl_parse_args(ctl_ctx *ctx, int argc, const char **argv, const ctl_opt *opts, int nopts,
                   const char **pos, int *npos, bool *timing)
{
    int n = 0, stdin_args = 0;
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (n >= ctx->entry->max_args)
                return ctl_usage_error(ctx, "unexpected argument '%s'", a);
            if (strcmp(a, "-") == 0 && ++stdin_args > 1) /* "-" is stdin (npy.h) */
                return ctl_usage_error(ctx, "only one input may be '-' (stdin)");
            pos[n++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            ctx->json = true;
            continue;
        }
        if (timing && strcmp(a, "--timing") == 0) {
            *timing = true;
            continue;
        }
        if (strcmp(a, "--priority") == 0) {
            if (i + 1 >= argc)
                return ctl_usage_error(ctx, "--priority needs a value");
            if (ctl_parse_priority(argv[++i], &ctx->priority))
                return ctl_usage_error(ctx, "bad priority '%s' (low|normal|high or -1|0|1)",
                                       argv[i]);
            continue;
        }
        if (strcmp(a, "--transport") == 0 || strncmp(a, "--transport=", 12) == 0) {
            const char *v = a[11] == '=' ? a + 12 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return ctl_usage_error(ctx, "--transport needs auto, socket or shm");
            if (ctl_parse_transport(v, &ctx->transport))
                return ctl_usage_error(ctx, "bad transport '%s' (auto|socket|shm)", v);
            continue;
        }
        int k = 0;
        for (; k < nopts; k++)
            if (strcmp(a, opts[k].name) == 0)
                break;
        if (k == nopts)
            return ctl_usage_error(ctx, "unknown option '%s'", a);
        if (opts[k].val) {
            if (i + 1 >= argc)
                return ctl_usage_error(ctx, "%s needs a value", a);
            *opts[k].val = argv[++i];
        } else {
            *opts[k].flag = true;
        }
    }
    if (n < ctx->entry->min_args)
        return ctl_usage_error(ctx, "missing arguments");
    *npos = n;
    return 0;
}
