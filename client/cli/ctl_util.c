/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_util.c - what every gpuqctl command shares: argument parsing, the
 * one-line error, connecting (with the --transport and --deadline the user
 * chose).
 *
 * Parsing: a command's options are its entry's opts (ctl.h), plus the
 * global ones; "--name=VALUE" is "--name VALUE" for every long option.
 * Mistakes are told by what they look like, before the checks they would
 * trip later ("--to 30 101" is a point missing its comma, not a second
 * points file).
 */
#include <errno.h>
#include <pwd.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "op_def.h"

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

void ctl_write_stderr(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* stderr gone: nothing to be done about it */
        s += w;
        n -= (size_t)w;
    }
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
    if (rc == 0)
        rc = gpuq_set_deadline_ms(*c, ctx->deadline_ms);
    if (rc) {
        /* no daemon at all (every socket tried named in the message): 3 */
        int st = gpuq_unreachable(*c) ? CTL_EXIT_UNREACHABLE : CTL_EXIT_FAIL;
        ctl_fail(rc, *c ? gpuq_errmsg(*c) : NULL);
        gpuq_close(*c);
        *c = NULL;
        return st;
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

int ctl_parse_deadline(const char *s, uint64_t *ms)
{
    uint64_t v;
    if (ctl_parse_u64(s, &v) || v > GPUQ_MAX_DEADLINE_MS)
        return -1;
    *ms = v;
    return 0;
}

const char *ctl_opt_of(const ctl_ctx *ctx, const char *val, const char *fallback, char *buf,
                       size_t cap)
{
    for (int i = 0; i < ctx->argc; i++) {
        const char *a = ctx->argv[i];
        if (a[0] != '-')
            continue;
        if (i + 1 < ctx->argc && ctx->argv[i + 1] == val)
            return a;
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        if (eq && eq + 1 == val) {
            snprintf(buf, cap, "%.*s", (int)(eq - a), a);
            return buf;
        }
    }
    return fallback;
}

/* ---- global options ---- */

_Static_assert(GPUQ_SHM_MIN_BYTES == 1u << 20, "--transport's help says 1 MiB");
_Static_assert(GPUQ_MAX_DEADLINE_MS == 86400000ull, "--deadline's help says 86400000");

const ctl_optdoc ctl_global_opts[] = {
    {"--socket", NULL, "PATH", NULL,
     "gpuqd's socket. Default: $GPUQ_SOCKET if set, else the first that answers of "
     "$XDG_RUNTIME_DIR/gpuq/gpuqd.sock and /run/gpuq/gpuqd.sock."},
    {"--json", NULL, NULL, NULL,
     "Print one line of JSON on stdout instead of text: every command (an op: a summary of its "
     "outputs and timing); refused with help pages and with an output of '-'."},
    {"--priority", NULL, "P", "normal",
     "The session's priority: low, normal or high (or -1, 0, 1); gpuqd caps it by its policy."},
    {"--transport", NULL, "T", "auto",
     "How an op's arrays reach gpuqd: auto (shared memory when gpuqd offers arenas and the "
     "arrays come to 1 MiB or more, else the socket), shm (shared memory always; an error when "
     "gpuqd offers none) or socket."},
    {"--deadline", NULL, "MS", "0",
     "Give each op's request a deadline: gpuqd answers deadline_exceeded (exit status 1) when "
     "it has not finished within MS milliseconds of reaching gpuqd, and drops its work if it "
     "has not started. 1 .. 86400000 (a day); 0: none."},
    {NULL, NULL, NULL, NULL, NULL},
};

/* "--name=VALUE": the name's length and the value; else the whole of a. */
static size_t opt_name_len(const char *a, const char **eqval)
{
    const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
    *eqval = eq ? eq + 1 : NULL;
    return eq ? (size_t)(eq - a) : strlen(a);
}

static bool name_is(const char *a, size_t len, const char *name)
{
    return name && strlen(name) == len && strncmp(a, name, len) == 0;
}

/* The value of option a (name len bytes): its "=VALUE", or the next
 * argument, which must not itself be an option (checked by is_opt). */
static int opt_value(const ctl_ctx *ctx, int argc, const char **argv, int *i, size_t len,
                     const char *eqval, const char *argname,
                     bool (*is_opt)(const ctl_ctx *, const char *), const char **val)
{
    const char *a = argv[*i];
    if (eqval) {
        if (!*eqval)
            return ctl_usage_error(ctx, "%.*s= needs a value (%.*s=%s)", (int)len, a, (int)len, a,
                                   argname);
        *val = eqval;
        return 0;
    }
    if (*i + 1 >= argc)
        return ctl_usage_error(ctx, "%s needs a value (%s %s)", a, a, argname);
    if (is_opt(ctx, argv[*i + 1]))
        return ctl_usage_error(ctx, "%s needs a value (%s %s), not the option '%s'", a, a, argname,
                               argv[*i + 1]);
    if (!argv[*i + 1][0]) /* -o "": as --output= is */
        return ctl_usage_error(ctx, "%s needs a value (%s %s), not an empty one", a, a, argname);
    *val = argv[++*i];
    return 0;
}

static const ctl_optdoc *find_doc(const ctl_optdoc *docs, const char *a, size_t len)
{
    for (int k = 0; docs && docs[k].name; k++)
        if (name_is(a, len, docs[k].name) || name_is(a, len, docs[k].alias))
            return &docs[k];
    return NULL;
}

/* Is s an option gpuqctl knows here (the command's, a global one, --help)? */
static bool is_known_opt(const ctl_ctx *ctx, const char *s)
{
    const char *eqval;
    size_t len = opt_name_len(s, &eqval);
    if (s[0] != '-' || len < 2)
        return false;
    return find_doc(ctl_global_opts, s, len) ||
           (ctx && ctx->entry && find_doc(ctx->entry->opts, s, len)) ||
           name_is(s, len, "--timing") || name_is(s, len, "--help") || name_is(s, len, "-h") ||
           name_is(s, len, "--version") || name_is(s, len, "-V");
}

int ctl_parse_global(ctl_ctx *ctx, int argc, const char **argv, int *i)
{
    const char *a = argv[*i], *eqval, *v = NULL;
    size_t len = opt_name_len(a, &eqval);
    const ctl_optdoc *d = find_doc(ctl_global_opts, a, len);
    if (!d)
        return 0;
    if (!d->arg) {
        if (eqval)
            return ctl_usage_error(ctx, "%s takes no value", d->name);
        ctx->json = true; /* --json, the one global flag */
        return 1;
    }
    int rc = opt_value(ctx, argc, argv, i, len, eqval, d->arg, is_known_opt, &v);
    if (rc)
        return rc;
    if (!strcmp(d->name, "--socket")) {
        ctx->socket = v;
    } else if (!strcmp(d->name, "--priority")) {
        if (ctl_parse_priority(v, &ctx->priority))
            return ctl_usage_error(ctx, "bad priority '%s' (low|normal|high or -1|0|1)", v);
    } else if (!strcmp(d->name, "--transport")) {
        if (ctl_parse_transport(v, &ctx->transport))
            return ctl_usage_error(ctx, "bad transport '%s' (auto|socket|shm)", v);
    } else if (!strcmp(d->name, "--deadline")) {
        if (ctl_parse_deadline(v, &ctx->deadline_ms))
            return ctl_usage_error(ctx, "bad deadline '%s' (milliseconds, 0 .. %llu)", v,
                                   (unsigned long long)GPUQ_MAX_DEADLINE_MS);
    }
    return 1;
}

/* ---- suggestions ---- */

/* printf at buf + *at, never past cap (a cut text stays terminated). */
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t cap, size_t *at,
                                                         const char *fmt, ...)
{
    if (*at >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *at, cap - *at, fmt, ap);
    va_end(ap);
    if (w > 0)
        *at += (size_t)w;
}

/* Edit distance of a and b (insert, delete, replace, swap two neighbours:
 * "pign" is one from "ping"); both at most 63 bytes, else large. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 1000;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

const char *ctl_suggest(const char *s, const char *const *names, int n)
{
    const char *best = NULL;
    int bd = 1000;
    size_t ls = strlen(s);
    for (int k = 0; k < n; k++) {
        if (!names[k])
            continue;
        size_t ln = strlen(names[k]);
        /* a typo (up to a third of the name wrong), or a prefix of it */
        int d = edit_distance(s, names[k]);
        if (ls >= 3 && ln > ls && strncmp(s, names[k], ls) == 0)
            d = 1;
        if (d < bd && d * 3 <= (int)(ln > ls ? ln : ls)) {
            bd = d;
            best = names[k];
        }
    }
    return best;
}

/* "unknown option 'a'", with the nearest option this command takes. */
static int unknown_option(const ctl_ctx *ctx, const char *a, size_t len)
{
    const char *names[64];
    int n = 0;
    for (int k = 0; ctl_global_opts[k].name && n < 64; k++)
        names[n++] = ctl_global_opts[k].name;
    for (int k = 0; ctx->entry->opts && ctx->entry->opts[k].name && n < 62; k++) {
        names[n++] = ctx->entry->opts[k].name;
        names[n++] = ctx->entry->opts[k].alias;
    }
    char opt[64];
    snprintf(opt, sizeof opt, "%.*s", (int)(len < 63 ? len : 63), a);
    const char *near = ctl_suggest(opt, names, n);
    if (near)
        return ctl_usage_error(ctx, "unknown option '%s' (did you mean %s?)", opt, near);
    return ctl_usage_error(ctx, "unknown option '%s'", opt);
}

/* ---- a command's arguments ---- */

static bool is_number(const char *s)
{
    double v;
    return ctl_parse_double(s, &v) == 0;
}

/* A value of an option whose argument has parts (LAT,LON; START:STOP:N)
 * given as separate words: "--to 30 101". next is the argument after the
 * value (NULL at the end). */
static int split_value(const ctl_ctx *ctx, const ctl_optdoc *d, const char *v, const char *next,
                       const char *next2)
{
    char sep = strchr(d->arg, ',') ? ',' : strchr(d->arg, ':') ? ':' : '\0';
    if (!sep || strchr(v, sep) || !is_number(v))
        return 0;
    const char *word = sep == ',' ? "a comma" : "colons";
    char want[160];
    if (sep == ',' && next && is_number(next))
        snprintf(want, sizeof want, "%s %s,%s", d->name, v, next);
    else if (sep == ':' && next && next2 && is_number(next) && is_number(next2))
        snprintf(want, sizeof want, "%s %s:%s:%s", d->name, v, next, next2);
    else
        return ctl_usage_error(ctx, "%s takes %s with %s, not '%s'", d->name, d->arg, word, v);
    return ctl_usage_error(ctx, "%s takes %s with %s: %s", d->name, d->arg, word, want);
}

/* The command being run, as ctl_parse_args saw it (ctl_current). */
static const ctl_ctx *current_ctx;

const ctl_ctx *ctl_current(void)
{
    return current_ctx;
}

int ctl_parse_args(ctl_ctx *ctx, int argc, const char **argv, const ctl_opt *opts, int nopts,
                   const char **pos, int *npos, bool *timing)
{
    current_ctx = ctx;
    const ctl_entry *e = ctx->entry;
    enum { MAXDOC = 32 };
    const char *val[MAXDOC]; /* each documented option's value */
    int val_at[MAXDOC];      /* the argv index that gave it, or -1 */
    int ndoc = 0;
    for (; e->opts && e->opts[ndoc].name; ndoc++)
        if (ndoc < MAXDOC)
            val_at[ndoc] = -1;
    for (int k = 0; k < nopts; k++) { /* every option parsed is documented */
        size_t l = strlen(opts[k].name);
        if (!find_doc(e->opts, opts[k].name, l)) {
            fprintf(stderr, "gpuqctl: internal: %s takes %s but its help does not list it\n",
                    e->name, opts[k].name);
            abort();
        }
    }
    if (ndoc > MAXDOC || (timing && !find_doc(e->opts, "--timing", 8))) {
        fprintf(stderr, "gpuqctl: internal: %s's option table\n", e->name);
        abort();
    }
    int n = 0, extra = -1, stdin_args = 0;
    bool only_pos = false;
    ctx->argc = argc;
    ctx->argv = argv;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eqval, *v = NULL;
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (n < e->max_args && strcmp(a, "-") == 0 && ++stdin_args > 1)
                return ctl_usage_error(ctx, "only one input may be '-' (stdin)");
            if (n < e->max_args)
                pos[n++] = a;
            else if (extra < 0)
                extra = i;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        int rc = ctl_parse_global(ctx, argc, argv, &i);
        if (rc == 1)
            continue;
        if (rc)
            return rc;
        size_t len = opt_name_len(a, &eqval);
        const ctl_optdoc *d = find_doc(e->opts, a, len);
        if (!d)
            return unknown_option(ctx, a, len);
        if (timing && !strcmp(d->name, "--timing")) {
            if (eqval)
                return ctl_usage_error(ctx, "--timing takes no value");
            *timing = true;
            continue;
        }
        int k = 0;
        for (; k < nopts; k++)
            if (!strcmp(opts[k].name, d->name) || (d->alias && !strcmp(opts[k].name, d->alias)))
                break;
        if (k == nopts) {
            fprintf(stderr, "gpuqctl: internal: %s lists %s but does not take it\n", e->name,
                    d->name);
            abort();
        }
        if (!d->arg) {
            if (eqval)
                return ctl_usage_error(ctx, "%s takes no value", d->name);
            *opts[k].flag = true;
            continue;
        }
        if ((rc = opt_value(ctx, argc, argv, &i, len, eqval, d->arg, is_known_opt, &v)))
            return rc;
        *opts[k].val = v;
        val[d - e->opts] = v;
        val_at[d - e->opts] = i;
    }
    /* "--to 30 101": before the extra or missing arguments it causes */
    for (int k = 0; k < ndoc; k++) {
        int at = val_at[k];
        if (at < 0)
            continue;
        const char *next = at + 1 < argc ? argv[at + 1] : NULL;
        const char *next2 = at + 2 < argc ? argv[at + 2] : NULL;
        int rc = split_value(ctx, &e->opts[k], val[k], next, next2);
        if (rc)
            return rc;
    }
    if (extra >= 0)
        return ctl_usage_error(ctx, "unexpected argument '%s'", argv[extra]);
    if (n < e->min_args) {
        if (e->min_args == e->max_args)
            return ctl_usage_error(ctx, "%s takes %d argument%s, got %d", e->name, e->min_args,
                                   e->min_args == 1 ? "" : "s", n);
        return ctl_usage_error(ctx, "%s takes %d to %d arguments, got %d", e->name, e->min_args,
                               e->max_args, n);
    }
    *npos = n;
    return 0;
}

int ctl_set_enum(const ctl_ctx *ctx, gpuq_request *req, const char *key, const char *opt,
                 const char *s)
{
    if (gpuq_request_set_enum(req, key, s) == 0)
        return 0;
    const gpuq_op_def *d = op_def_of(req->op);
    int k = d ? op_key_index(d, key, strlen(key)) : -1;
    if (k < 0 || d->keys[k].type != GPUQ_ARG_ENUM)
        return ctl_usage_error(ctx, "bad %s '%s'", opt, s);
    const gpuq_key_def *kd = &d->keys[k];
    const char *names[32];
    int n = 0;
    char list[512] = "";
    size_t at = 0;
    for (int i = 0; i < kd->nnames && n < 32; i++) {
        names[n++] = kd->names[i];
        append(list, sizeof list, &at, "%s%s", i ? "|" : "", kd->names[i]);
    }
    for (int i = 0; i < kd->naliases && n < 32; i++) {
        names[n++] = kd->aliases[i].name;
        append(list, sizeof list, &at, "%s%s", i ? ", " : "; or ", kd->aliases[i].name);
    }
    const char *near = ctl_suggest(s, names, n);
    if (near)
        return ctl_usage_error(ctx, "bad %s '%s': did you mean %s? (%s)", opt, s, near, list);
    return ctl_usage_error(ctx, "bad %s '%s' (%s)", opt, s, list);
}

int ctl_check_files(const ctl_ctx *ctx, const char *const *pos, int n)
{
    for (int k = 0; k < n; k++) {
        if (!pos[k][0])
            return ctl_usage_error(ctx, "an empty argument is not an .npy file");
        if (is_number(pos[k]) && access(pos[k], F_OK) != 0)
            return ctl_usage_error(ctx, "'%s' is a number, not an .npy file", pos[k]);
    }
    return 0;
}

int ctl_stream_json(const uint8_t *doc, size_t len, int code, const char *what)
{
    size_t cap = 64 + len * 4;
    char *one = malloc(cap), *buf = NULL;
    size_t blen = 0;
    FILE *f = one ? open_memstream(&buf, &blen) : NULL;
    if (!f) {
        free(one);
        return ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
    }
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    int bad = 0;
    fputc('[', f);
    for (int i = 0; gpuq_mpr_left(&r) > 0 && !bad; i++) {
        bad = gpuq_mpr_to_json(&r, one, cap) != 0;
        if (!bad)
            fprintf(f, "%s%s", i ? "," : "", one);
    }
    fputs("]\n", f);
    int rc = 0;
    if (fclose(f) != 0)
        rc = ctl_fail(GPUQ_E_NO_MEMORY, "out of memory");
    else if (bad)
        rc = ctl_fail(code, what);
    else
        fwrite(buf, 1, blen, stdout);
    free(buf);
    free(one);
    return rc;
}

void ctl_user_name(double uid, char *buf, size_t cap)
{
    struct passwd *pw = uid >= 0 ? getpwuid((uid_t)uid) : NULL;
    if (pw)
        snprintf(buf, cap, "%s", pw->pw_name);
    else
        snprintf(buf, cap, "%.0f", uid);
}
