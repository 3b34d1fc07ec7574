/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_help.c - gpuqctl's help, version, option spellings, exit
 * statuses and diagnoses, run as a user would run it.
 *
 * Without a daemon: every command's page (help CMD, CMD --help, CMD -h: the
 * same text on stdout, exit 0) says what it does, lists each option with
 * its default and has an example; the overview lists every command and the
 * exit statuses; --version prints the project's version; usage errors exit
 * 2 with the right diagnosis ("--to 30 101" is a missing comma, a typo gets
 * "did you mean"). Against a daemon: the examples of every page run as
 * written; --name=VALUE gives what --name VALUE gives for every long
 * option; the stated defaults are what leaving the option out gives; the
 * metric aliases give their metric's bytes.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "npy.h"

static char nodir[256]; /* the no-daemon cases' temp dir */

static const char *workdir(void)
{
    return e2e_d.pid ? e2e_d.dir : nodir;
}

static const char *wpath(const char *name)
{
    static char p[8][320];
    static int slot;
    char *s = p[slot++ % 8];
    snprintf(s, 320, "%s/%s", workdir(), name);
    return s;
}

/* Whitespace runs as one space: wrapped text reads as one line. */
static char *squeeze(char *s)
{
    char *w = s;
    bool sp = false;
    for (char *r = s; *r; r++) {
        if (isspace((unsigned char)*r)) {
            sp = true;
            continue;
        }
        if (sp && w != s)
            *w++ = ' ';
        sp = false;
        *w++ = *r;
    }
    *w = '\0';
    return s;
}

typedef tu_output run_out;
#define run_free tu_output_free

/* gpuqctl args... (NULL-terminated, no --socket added). */
static run_out ctl_argv(const char *const *args)
{
    const char *pre[] = {GPUQCTL_PATH, NULL};
    return tu_capture(pre, args, workdir(), "ctl");
}

#define CTL(...) ctl_argv((const char *const[]){__VA_ARGS__, NULL})
/* With the fixture daemon's socket first. */
#define CTLS(...) ctl_argv((const char *const[]){"--socket", e2e_d.socket, __VA_ARGS__, NULL})

/* ---- pages ---- */

typedef struct page {
    const char *words[3]; /* the command, NULL-terminated */
    const char *must[12]; /* in the page (whitespace squeezed) */
} page;

static const page pages[] = {
    {{"ping", NULL}, {"-c, --count N", "Default: 1."}},
    {{"status", NULL}, {"--json"}},
    {{"normalize", NULL},
     {"-m, --method NAME", "Default: sum.", "zscore", "minmax", "--flat", "--timing",
      "-o, --output OUT.npy", "(required)"}},
    {{"distance", "haversine", NULL},
     {"--to LAT,LON", "--radius KM", "Default: 6371.0088.", "-o, --output OUT.npy"}},
    {{"distance", "grid", NULL},
     {"--lat START:STOP:N", "Default: -90:90:1000.", "--lon START:STOP:N",
      "Default: -180:180:1000.", "--to LAT,LON", "Default: 30,101.", "Default: 6371.0088.",
      "--dtype f32|f64", "Default: f64."}},
    {{"distance", "pairwise", NULL},
     {"--metric NAME", "Default: euclidean.", "sqeuclidean", "cosine", "manhattan", "cityblock",
      "l1", "l2"}},
    {{"distance", "knn", NULL},
     {"--k K", "--metric NAME", "Default: euclidean.", "cityblock", "-i, --indices IDX.npy",
      "-o, --output DIST.npy"}},
    {{"sessions", NULL}, {"--json"}},
    {{"metrics", NULL}, {"Prometheus"}},
    {{"drain", NULL}, {"admin"}},
    {{"shutdown", NULL}, {"admin"}},
    {{"kill-session", NULL}, {"ID", "admin"}},
    {{"set-limit", NULL}, {"NAME VALUE", "max_inflight", "admin"}},
    {{"put", NULL},
     {"NAME IN.npy", "--access private|all", "Default: private.", "@OTHER", "-o @NAME",
      "resident_bytes", "--timing"}},
    {{"get", NULL}, {"NAME -o OUT.npy", "-o, --output OUT.npy", "@OTHER", "not_found"}},
    {{"ls", NULL}, {"--json", "OWNER", "USERS", "sorted by name"}},
    {{"rm", NULL}, {"NAME", "Remove the resident array NAME"}},
    {{"slowlog", NULL}, {"--reset", "slowest first", "slowlog_len", "slowlog_min_us", "admin"}},
    {{"monitor", NULL}, {"monitor_queue", "dropped", "Ctrl-C", "--json"}},
    {{"bench", NULL},
     {"--op NAME", "Default: normalize.", "--size N", "Default: 1024.", "--dtype f32|f64",
      "Default: f32.", "--clients C", "--depth D", "--duration SEC", "Default: 5.", "--warmup SEC",
      "Default: 0.5."}},
};
#define NPAGES (sizeof pages / sizeof pages[0])

/* What every page says besides its own options. */
static const char *const on_every_page[] = {"--socket PATH",    "$GPUQ_SOCKET",
                                            "--json",           "--priority P",
                                            "Default: normal.", "--transport T",
                                            "Default: auto.",   "exit status:",
                                            "0 success",        "1 gpuqd refused",
                                            "2 usage error",    "3 cannot reach gpuqd",
                                            "example",          NULL};

START_TEST(every_page)
{
    const page *p = &pages[_i];
    const char *w0 = p->words[0], *w1 = p->words[1];
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", w0, w1 ? " " : "", w1 ? w1 : "");
    /* the three ways to ask, and help anywhere among the arguments */
    run_out a = w1 ? CTL("help", w0, w1) : CTL("help", w0);
    run_out b = w1 ? CTL(w0, w1, "--help") : CTL(w0, "--help");
    run_out c = w1 ? CTL(w0, w1, "-h") : CTL(w0, "-h");
    run_out d = w1 ? CTL("--priority", "low", w0, w1, "-o", "x.npy", "--help")
                   : CTL("--priority=low", w0, "--bogus", "--help");
    run_out *all[] = {&a, &b, &c, &d};
    for (int k = 0; k < 4; k++) {
        ck_assert_msg(all[k]->rc == 0, "%s form %d: exit %d: %s", name, k, all[k]->rc, all[k]->err);
        ck_assert_msg(all[k]->err[0] == '\0', "%s form %d: stderr %s", name, k, all[k]->err);
        ck_assert_str_eq(all[k]->out, a.out);
    }
    char head[96];
    snprintf(head, sizeof head, "usage: gpuqctl %s", name);
    ck_assert_msg(strncmp(a.out, head, strlen(head)) == 0, "%s", a.out);
    /* each line of 80 columns at most */
    for (const char *l = a.out; *l;) {
        size_t len = strcspn(l, "\n");
        ck_assert_msg(len <= 80, "%s: a line of %zu: %.*s", name, len, (int)len, l);
        l += len + (l[len] == '\n');
    }
    char *text = squeeze(a.out);
    for (int k = 0; k < 12 && p->must[k]; k++)
        ck_assert_msg(strstr(text, p->must[k]), "%s --help lacks \"%s\": %s", name, p->must[k],
                      text);
    for (int k = 0; on_every_page[k]; k++)
        ck_assert_msg(strstr(text, on_every_page[k]), "%s --help lacks \"%s\": %s", name,
                      on_every_page[k], text);
    char ex[96];
    snprintf(ex, sizeof ex, "gpuqctl %s", name);
    const char *exs = strstr(text, "example");
    ck_assert_msg(exs && strstr(exs, ex), "%s: no example command: %s", name, text);
    for (int k = 0; k < 4; k++)
        run_free(all[k]);
}
END_TEST

START_TEST(overview)
{
    run_out a = CTL("--help"), b = CTL("-h"), c = CTL("help"), none = CTL("--version");
    run_free(&none);
    run_out *all[] = {&a, &b, &c};
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(all[k]->rc == 0 && all[k]->err[0] == '\0', "form %d: %d %s", k, all[k]->rc,
                      all[k]->err);
        ck_assert_str_eq(all[k]->out, a.out);
    }
    ck_assert_msg(strncmp(a.out, "usage: gpuqctl", 14) == 0, "%s", a.out);
    char *text = squeeze(a.out);
    for (size_t k = 0; k < NPAGES; k++) {
        char line[80];
        snprintf(line, sizeof line, " %s%s%s ", pages[k].words[0], pages[k].words[1] ? " " : "",
                 pages[k].words[1] ? pages[k].words[1] : "");
        ck_assert_msg(strstr(text, line), "overview lacks \"%s\"", line);
    }
    static const char *const must[] = {"--socket PATH",
                                       "--json",
                                       "--priority P",
                                       "Default: normal.",
                                       "--transport T",
                                       "Default: auto.",
                                       "-h, --help",
                                       "-V, --version",
                                       "help [COMMAND]",
                                       "exit status:",
                                       "0 success",
                                       "1 gpuqd refused",
                                       "2 usage error",
                                       "3 cannot reach gpuqd",
                                       "gpuqctl help COMMAND",
                                       "--name=VALUE",
                                       "examples:"};
    for (size_t k = 0; k < sizeof must / sizeof must[0]; k++)
        ck_assert_msg(strstr(text, must[k]), "overview lacks \"%s\": %s", must[k], text);
    /* no command: the overview on stderr, a usage error */
    run_out n = CTL("--json");
    ck_assert_int_eq(n.rc, 2);
    ck_assert_msg(n.out[0] == '\0' && strstr(n.err, "usage: gpuqctl"), "%s", n.err);
    run_free(&n);
    /* a group's page */
    run_out g = CTL("help", "distance"), g2 = CTL("distance", "--help");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_int_eq(g2.rc, 0);
    ck_assert_str_eq(g.out, g2.out);
    static const char *const subs[] = {"distance haversine", "distance grid", "distance pairwise",
                                       "distance knn"};
    for (int k = 0; k < 4; k++)
        ck_assert_msg(strstr(g.out, subs[k]), "help distance lacks %s: %s", subs[k], g.out);
    run_free(&g);
    run_free(&g2);
    for (int k = 0; k < 3; k++)
        run_free(all[k]);
}
END_TEST

/* Every command the overview lists has a page with the global options
 * and an example, and is one of pages[] (whose checks a new command then
 * gets). */
START_TEST(every_command_listed)
{
    run_out o = CTL("--help");
    ck_assert_int_eq(o.rc, 0);
    const char *at = strstr(o.out, "\ncommands:\n");
    ck_assert_ptr_nonnull(at);
    at += 11;
    int seen = 0;
    while (strncmp(at, "  ", 2) == 0) {
        size_t len = strcspn(at, "\n");
        char line[160], name[64];
        snprintf(line, sizeof line, "%.*s", (int)len, at);
        at += len + 1;
        if (line[2] == ' ')
            continue; /* a wrapped line */
        char *end = strstr(line + 2, "  ");
        snprintf(name, sizeof name, "%.*s", end ? (int)(end - line - 2) : (int)strlen(line + 2),
                 line + 2);
        if (!strcmp(name, "help [COMMAND]"))
            continue;
        seen++;
        bool known = false;
        for (size_t k = 0; k < NPAGES && !known; k++) {
            char pn[64];
            snprintf(pn, sizeof pn, "%s%s%s", pages[k].words[0], pages[k].words[1] ? " " : "",
                     pages[k].words[1] ? pages[k].words[1] : "");
            known = !strcmp(pn, name);
        }
        ck_assert_msg(known, "'%s' is not in test_e2e_help's pages[]", name);
        char *sp = strchr(name, ' ');
        if (sp)
            *sp = '\0';
        run_out h = sp ? CTL("help", name, sp + 1) : CTL("help", name);
        ck_assert_msg(h.rc == 0 && strstr(h.out, "\nexample") && strstr(h.out, "--priority P"),
                      "help %s: %d %s", name, h.rc, h.out);
        run_free(&h);
    }
    ck_assert_int_eq(seen, (int)NPAGES);
    run_free(&o);
}
END_TEST

START_TEST(version)
{
    run_out a = CTL("--version"), b = CTL("-V");
    ck_assert_int_eq(a.rc, 0);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_str_eq(a.out, "gpuqctl " GPUQ_PROJECT_VERSION "\n");
    ck_assert_str_eq(b.out, a.out);
    ck_assert_str_eq(a.err, "");
    run_free(&a);
    run_free(&b);
    /* gpuqd says the same version */
    const char *argv[] = {GPUQD_PATH, "-V", NULL};
    ck_assert_int_eq(tu_run(argv, wpath("d.out"), NULL), 0);
    size_t len;
    char *d = tu_read_file(wpath("d.out"), &len);
    ck_assert_msg(
        d && strncmp(d, "gpuqd " GPUQ_PROJECT_VERSION " (", 8 + strlen(GPUQ_PROJECT_VERSION)) == 0,
        "%s", d);
    free(d);
}
END_TEST

/* ---- usage errors: exit 2, one line, the right diagnosis ---- */

typedef struct misuse {
    const char *args[14]; /* NULL-terminated */
    const char *say;      /* in stderr */
    const char *not_say;  /* not in stderr, or NULL */
} misuse;

static const misuse misuses[] = {
    {{"distance", "haversine", "--to", "30", "101", "x.npy", "-o", "y.npy"},
     "--to takes LAT,LON with a comma: --to 30,101",
     "points file"},
    {{"distance", "haversine", "x.npy", "--to", "30", "101", "-o", "y.npy"},
     "--to takes LAT,LON with a comma: --to 30,101",
     "points file"},
    {{"distance", "haversine", "--to=30", "101", "x.npy", "-o", "y.npy"},
     "--to takes LAT,LON with a comma: --to 30,101",
     NULL},
    {{"distance", "haversine", "--to", "30", "x.npy", "-o", "y.npy"},
     "--to takes LAT,LON with a comma, not '30'",
     NULL},
    {{"distance", "grid", "--to", "30", "101", "-o", "g.npy"},
     "--to takes LAT,LON with a comma: --to 30,101",
     "unexpected"},
    {{"distance", "grid", "--lat", "-90", "90", "100", "-o", "g.npy"},
     "--lat takes START:STOP:N with colons: --lat -90:90:100",
     NULL},
    {{"distance", "grid", "--to", "30;101", "-o", "g.npy"}, "bad --to '30;101'", NULL},
    {{"distance", "pairwise", "--metric", "-o", "d.npy", "x.npy", "y.npy"},
     "--metric needs a value (--metric NAME), not the option '-o'",
     NULL},
    {{"distance", "pairwise", "x.npy", "y.npy", "-o", "d.npy", "--metric"},
     "--metric needs a value",
     NULL},
    {{"distance", "pairwise", "--metric=hamming", "x.npy", "y.npy", "-o", "d.npy"},
     "bad --metric 'hamming' (euclidean|sqeuclidean|cosine|manhattan|chebyshev|minkowski; or "
     "cityblock, l1, l2, chebychev, pnorm)",
     NULL},
    {{"distance", "knn", "--k", "2", "--metric", "manhatan", "x.npy", "y.npy", "-o", "d", "-i",
      "i"},
     "did you mean manhattan?",
     NULL},
    {{"normalize", "--methd", "l2", "x.npy", "-o", "y.npy"},
     "unknown option '--methd' (did you mean --method?)",
     NULL},
    {{"normalize", "--method", "max", "x.npy", "-o", "y.npy"}, "bad --method 'max'", NULL},
    {{"normalize", "--flat=yes", "x.npy", "-o", "y.npy"}, "--flat takes no value", NULL},
    {{"normalize", "5", "-o", "y.npy"}, "'5' is a number, not an .npy file", NULL},
    {{"normalize", "x.npy"}, "-o OUT.npy is required", NULL},
    {{"normalize", "--method="}, "--method= needs a value", NULL},
    {{"distance", "knn", "--k=five", "x.npy", "y.npy", "-o", "d", "-i", "i"},
     "bad --k 'five'",
     NULL},
    {{"pign"}, "unknown command 'pign' (did you mean ping?)", NULL},
    {{"grid", "-o", "g.npy"}, "unknown command 'grid' (did you mean distance grid?)", NULL},
    {{"distance"}, "distance needs a subcommand: haversine, grid, pairwise, knn", NULL},
    {{"distance", "gird"}, "did you mean distance grid?", NULL},
    {{"help", "nosuch"}, "unknown command 'nosuch'", NULL},
    {{"help", "ping", "extra"}, "help takes one command", NULL},
    {{"--sockt", "x", "ping"}, "unknown option '--sockt' (did you mean --socket?)", NULL},
    {{"--priority=urgent", "ping"}, "bad priority 'urgent'", NULL},
    {{"ping", "--transport=pigeon"}, "bad transport 'pigeon'", NULL},
    {{"ping", "--count=0"}, "bad --count '0'", NULL},
    {{"ping", "--timing"}, "unknown option '--timing'", NULL},
    {{"ping", "extra"}, "unexpected argument 'extra'", NULL},
    {{"status", "--json=1"}, "--json takes no value", NULL},
    {{"kill-session"}, "kill-session takes 1 argument, got 0", NULL},
    {{"set-limit", "max_inflight"}, "set-limit takes 2 arguments, got 1", NULL},
};

START_TEST(usage_errors)
{
    const misuse *m = &misuses[_i];
    run_out r = ctl_argv(m->args);
    char cmd[256] = "";
    for (int k = 0; m->args[k]; k++)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " %s", m->args[k]);
    ck_assert_msg(r.rc == 2, "gpuqctl%s: exit %d: %s", cmd, r.rc, r.err);
    ck_assert_msg(strstr(r.err, m->say), "gpuqctl%s: stderr lacks \"%s\": %s", cmd, m->say, r.err);
    if (m->not_say)
        ck_assert_msg(!strstr(r.err, m->not_say), "gpuqctl%s: stderr says \"%s\": %s", cmd,
                      m->not_say, r.err);
    const char *nl = strchr(r.err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "gpuqctl%s: not one line: %s", cmd, r.err);
    ck_assert_msg(strncmp(r.err, "gpuqctl: usage: ", 16) == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
}
END_TEST

/* ---- against a daemon ---- */

static void save_npy(const char *name, gpuq_dtype dt, int ndim, uint64_t r, uint64_t c, double lo,
                     double hi)
{
    uint64_t n = r * (ndim == 2 ? c : 1);
    double *x = malloc(n * sizeof *x);
    float *f = malloc(n * sizeof *f);
    ck_assert(x && f);
    tu_rand_fill_f64(x, n, lo, hi);
    for (uint64_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    const uint64_t shape[2] = {r, c};
    char err[256];
    ck_assert_msg(npy_write(wpath(name), dt, ndim, shape, dt == GPUQ_DT_F32 ? (void *)f : (void *)x,
                            err, sizeof err) == 0,
                  "%s", err);
    free(x);
    free(f);
}

static void save_points(const char *name, uint64_t n)
{
    double *x = malloc(2 * n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_rand_fill_f64(x, 2 * n, -1, 1);
    for (uint64_t i = 0; i < n; i++)
        x[2 * i] *= 89, x[2 * i + 1] *= 180;
    const uint64_t shape[2] = {n, 2};
    char err[256];
    ck_assert_msg(npy_write(wpath(name), GPUQ_DT_F64, 2, shape, x, err, sizeof err) == 0, "%s",
                  err);
    free(x);
}

/* The inputs the pages' examples name. */
static void example_inputs(void)
{
    save_npy("in.npy", GPUQ_DT_F64, 2, 7, 13, 0.5, 10);
    save_npy("X.npy", GPUQ_DT_F32, 2, 9, 5, -1, 1);
    save_npy("Y.npy", GPUQ_DT_F32, 2, 40, 5, -1, 1);
    save_points("points.npy", 50);
    save_points("a.npy", 50);
    save_points("b.npy", 50);
}

static void same_bytes(const char *a, const char *b, const char *what)
{
    size_t la = 0, lb = 0;
    char *x = tu_read_file(wpath(a), &la), *y = tu_read_file(wpath(b), &lb);
    ck_assert_msg(x && y, "%s: cannot read %s or %s", what, a, b);
    ck_assert_msg(la == lb && la > 80 && memcmp(x, y, la) == 0, "%s: %s and %s differ", what, a, b);
    free(x);
    free(y);
}

static void ok(run_out r, const char *what)
{
    ck_assert_msg(r.rc == 0, "%s: exit %d: %s", what, r.rc, r.err);
    run_free(&r);
}

/* Every page's examples, run as written (in the work dir, with the
 * daemon's socket); those for an admin (sudo) or a pipe are skipped. */
START_TEST(examples_run)
{
    example_inputs();
    ck_assert_int_eq(chdir(e2e_d.dir), 0);
    int ran = 0;
    for (size_t k = 0; k < NPAGES; k++) {
        run_out h =
            ctl_argv(pages[k].words[1]
                         ? (const char *const[]){"help", pages[k].words[0], pages[k].words[1], NULL}
                         : (const char *const[]){"help", pages[k].words[0], NULL});
        ck_assert_int_eq(h.rc, 0);
        const char *ex = strstr(h.out, "\nexample");
        ck_assert_ptr_nonnull(ex);
        ex = strchr(ex + 1, '\n') + 1;
        while (*ex == ' ') {
            size_t len = strcspn(ex, "\n");
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)len, ex);
            ex += len + (ex[len] == '\n');
            char *l = line;
            while (*l == ' ')
                l++;
            if (strncmp(l, "sudo ", 5) == 0 || strchr(l, '|'))
                continue;
            ck_assert_msg(strncmp(l, "gpuqctl ", 8) == 0, "example: %s", l);
            const char *args[32] = {"--socket", e2e_d.socket};
            int n = 2;
            for (char *t = strtok(l + 8, " "); t && n < 31; t = strtok(NULL, " "))
                args[n++] = t;
            args[n] = NULL;
            run_out r = ctl_argv(args);
            ck_assert_msg(r.rc == 0, "example 'gpuqctl %s...': exit %d: %s", args[2], r.rc, r.err);
            run_free(&r);
            ran++;
        }
        run_free(&h);
    }
    ck_assert_int_ge(ran, 15);
}
END_TEST

/* --name=VALUE is --name VALUE, per command and global. */
START_TEST(equals_forms)
{
    example_inputs();
    ok(CTLS("normalize", "--method", "l2", "--flat", wpath("in.npy"), "-o", wpath("n1.npy")),
       "normalize space");
    ok(CTLS("normalize", "--method=l2", "--flat", wpath("in.npy"), "--output", wpath("n2.npy")),
       "normalize =");
    same_bytes("n1.npy", "n2.npy", "normalize --method=l2");
    ok(CTLS("distance", "grid", "--lat", "-45:60:31", "--lon", "10:170:17", "--to", "-10.5,20",
            "--radius", "1000", "--dtype", "f32", "-o", wpath("g1.npy")),
       "grid space");
    char geq[400];
    snprintf(geq, sizeof geq, "--output=%s", wpath("g2.npy"));
    ok(CTLS("distance", "grid", "--lat=-45:60:31", "--lon=10:170:17", "--to=-10.5,20",
            "--radius=1000", "--dtype=f32", geq),
       "grid =");
    same_bytes("g1.npy", "g2.npy", "grid --x=y");
    ok(CTLS("distance", "haversine", "--to", "30,101", "--radius", "3958.8", wpath("points.npy"),
            "-o", wpath("h1.npy")),
       "haversine space");
    char outeq[400];
    snprintf(outeq, sizeof outeq, "--output=%s", wpath("h2.npy"));
    ok(CTLS("distance", "haversine", "--to=30,101", "--radius=3958.8", wpath("points.npy"), outeq),
       "haversine =");
    same_bytes("h1.npy", "h2.npy", "haversine --x=y");
    ok(CTLS("distance", "knn", "--k", "4", "--metric", "cosine", wpath("X.npy"), wpath("Y.npy"),
            "-o", wpath("kd1.npy"), "-i", wpath("ki1.npy")),
       "knn space");
    char deq[400], ieq[400];
    snprintf(deq, sizeof deq, "--output=%s", wpath("kd2.npy"));
    snprintf(ieq, sizeof ieq, "--indices=%s", wpath("ki2.npy"));
    ok(CTLS("distance", "knn", "--k=4", "--metric=cosine", wpath("X.npy"), wpath("Y.npy"), deq,
            ieq),
       "knn =");
    same_bytes("kd1.npy", "kd2.npy", "knn distances --x=y");
    same_bytes("ki1.npy", "ki2.npy", "knn indices --x=y");
    /* global options, before and after the command */
    char sock[400];
    snprintf(sock, sizeof sock, "--socket=%s", e2e_d.socket);
    run_out p = CTL(sock, "--priority=high", "--transport=socket", "ping", "--count=3");
    ck_assert_msg(p.rc == 0 && strstr(p.out, "3 pings"), "%d %s %s", p.rc, p.out, p.err);
    run_free(&p);
    p = CTL("ping", "-c", "2", "--priority=low", sock, "--json", "--transport=shm");
    ck_assert_msg(p.rc == 0 && strstr(p.out, "\"count\":2"), "%d %s %s", p.rc, p.out, p.err);
    run_free(&p);
}
END_TEST

/* What the pages say the defaults are is what leaving the option out does. */
START_TEST(stated_defaults)
{
    example_inputs();
    ok(CTLS("distance", "grid", "-o", wpath("gd.npy")), "grid defaults");
    ok(CTLS("distance", "grid", "--lat=-90:90:1000", "--lon=-180:180:1000", "--to=30,101",
            "--radius=6371.0088", "--dtype=f64", "-o", wpath("ge.npy")),
       "grid stated defaults");
    same_bytes("gd.npy", "ge.npy", "grid's stated defaults");
    ok(CTLS("normalize", wpath("in.npy"), "-o", wpath("nd.npy")), "normalize default");
    ok(CTLS("normalize", "--method", "sum", wpath("in.npy"), "-o", wpath("ne.npy")),
       "normalize sum");
    same_bytes("nd.npy", "ne.npy", "normalize's stated default");
    ok(CTLS("distance", "pairwise", wpath("X.npy"), wpath("Y.npy"), "-o", wpath("pd.npy")),
       "pairwise default");
    ok(CTLS("distance", "pairwise", "--metric", "euclidean", wpath("X.npy"), wpath("Y.npy"), "-o",
            wpath("pe.npy")),
       "pairwise euclidean");
    same_bytes("pd.npy", "pe.npy", "pairwise's stated default");
    ok(CTLS("distance", "haversine", "--to", "30,101", wpath("points.npy"), "-o", wpath("hd.npy")),
       "haversine default radius");
    ok(CTLS("distance", "haversine", "--to", "30,101", "--radius", "6371.0088", wpath("points.npy"),
            "-o", wpath("he.npy")),
       "haversine stated radius");
    same_bytes("hd.npy", "he.npy", "haversine's stated radius");
}
END_TEST

/* scipy's and scikit-learn's metric names give their metric's bytes. */
START_TEST(metric_aliases)
{
    example_inputs();
    static const struct {
        const char *alias, *metric;
    } al[] = {{"cityblock", "manhattan"}, {"l1", "manhattan"}, {"l2", "euclidean"}};
    for (int k = 0; k < 3; k++) {
        ok(CTLS("distance", "pairwise", "--metric", al[k].metric, wpath("X.npy"), wpath("Y.npy"),
                "-o", wpath("pm.npy")),
           al[k].metric);
        ok(CTLS("distance", "pairwise", "--metric", al[k].alias, wpath("X.npy"), wpath("Y.npy"),
                "-o", wpath("pa.npy")),
           al[k].alias);
        same_bytes("pm.npy", "pa.npy", al[k].alias);
        ok(CTLS("distance", "knn", "--k", "3", "--metric", al[k].metric, wpath("X.npy"),
                wpath("Y.npy"), "-o", wpath("km.npy"), "-i", wpath("kmi.npy")),
           al[k].metric);
        ok(CTLS("distance", "knn", "--k", "3", "--metric", al[k].alias, wpath("X.npy"),
                wpath("Y.npy"), "-o", wpath("ka.npy"), "-i", wpath("kai.npy")),
           al[k].alias);
        same_bytes("km.npy", "ka.npy", al[k].alias);
        same_bytes("kmi.npy", "kai.npy", al[k].alias);
    }
    /* and they differ from the other metrics (the alias did choose) */
    ok(CTLS("distance", "pairwise", "--metric", "cityblock", wpath("X.npy"), wpath("Y.npy"), "-o",
            wpath("pa.npy")),
       "cityblock");
    ok(CTLS("distance", "pairwise", wpath("X.npy"), wpath("Y.npy"), "-o", wpath("pm.npy")),
       "euclidean");
    size_t la, lb;
    char *x = tu_read_file(wpath("pa.npy"), &la), *y = tu_read_file(wpath("pm.npy"), &lb);
    ck_assert(x && y && la == lb && memcmp(x, y, la) != 0);
    free(x);
    free(y);
}
END_TEST

/* Exit statuses: 1 for what gpuqd refuses or fails, 2 for usage; a daemon
 * that cannot be reached is not a usage error. */
START_TEST(exit_statuses)
{
    const double z[8] = {0};
    const uint64_t shape[1] = {8};
    char err[256];
    ck_assert_int_eq(npy_write(wpath("zeros.npy"), GPUQ_DT_F64, 1, shape, z, err, sizeof err), 0);
    run_out r = CTLS("normalize", wpath("zeros.npy"), "-o", wpath("o.npy"));
    ck_assert_msg(r.rc == 1 && strstr(r.err, "zero_norm"), "%d %s", r.rc, r.err);
    run_free(&r);
    r = CTLS("normalize", wpath("no-such.npy"), "-o", wpath("o.npy"));
    ck_assert_msg(r.rc == 1, "missing input: %d %s", r.rc, r.err);
    run_free(&r);
    r = CTLS("kill-session", "999999");
    ck_assert_msg(r.rc == 1, "kill-session of no session: %d %s", r.rc, r.err);
    run_free(&r);
    r = CTLS("kill-session", "x");
    ck_assert_msg(r.rc == 2, "kill-session x: %d %s", r.rc, r.err);
    run_free(&r);
    /* CTL_EXIT_UNREACHABLE (3) once ctl_connect tells it; never 0 or 2 */
    r = CTL("--socket", wpath("nobody.sock"), "ping");
    ck_assert_msg(r.rc == 1 || r.rc == 3, "no daemon: %d %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

static void nodaemon_setup(void)
{
    tu_tmpdir(nodir, sizeof nodir);
}

static void nodaemon_teardown(void)
{
    tu_rmtree(nodir);
}

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_help");
    TCase *tc = tcase_create("pages");
    tcase_add_checked_fixture(tc, nodaemon_setup, nodaemon_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, every_page, 0, (int)NPAGES);
    tcase_add_test(tc, overview);
    tcase_add_test(tc, every_command_listed);
    tcase_add_test(tc, version);
    tcase_add_loop_test(tc, usage_errors, 0, (int)(sizeof misuses / sizeof misuses[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("daemon");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, examples_run);
    tcase_add_test(tc, equals_forms);
    tcase_add_test(tc, stated_defaults);
    tcase_add_test(tc, metric_aliases);
    tcase_add_test(tc, exit_statuses);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
