/* SPDX-License-Identifier: Apache-2.0 */
/* test_ctl_args.c - gpuqctl's argument parser (client/cli/ctl_util.c) on its
 * own: a command's documented options in both spellings, the global ones
 * anywhere, flags, "--", the diagnoses by look (a point or a range split
 * into words, a missing value, a typo), the suggestion metric, enum values
 * with aliases, and the invariant that a command parses only what its
 * help lists (else abort). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "testutil.h"

static const ctl_optdoc docs[] = {
    {"--to", NULL, "LAT,LON", "30,101", "the point"},
    {"--lat", NULL, "START:STOP:N", NULL, "a range"},
    {"--method", "-m", "NAME", "sum", "the method"},
    {"--flat", NULL, NULL, NULL, "a flag"},
    {"--timing", NULL, NULL, NULL, "timing"},
    {"--output", "-o", "OUT.npy", NULL, "the output"},
    {NULL, NULL, NULL, NULL, NULL},
};

static int no_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    (void)ctx, (void)argc, (void)argv;
    return 0;
}

static const ctl_entry entry = {.name = "test cmd",
                                .usage = "[options] A [B]",
                                .min_args = 1,
                                .max_args = 2,
                                .exec = no_exec,
                                .help = "a test",
                                .opts = docs};

typedef struct parsed {
    const char *to, *lat, *method, *out, *pos[2];
    bool flat, timing;
    int npos;
    ctl_ctx ctx;
} parsed;

/* Parse args (NULL-terminated) as entry's exec would; stderr goes to
 * err_path. Returns ctl_parse_args's result. */
static int parse(const char *const *args, parsed *p)
{
    memset(p, 0, sizeof *p);
    p->ctx.entry = &entry;
    p->ctx.priority = GPUQ_PRIO_NORMAL;
    const ctl_opt opts[] = {{"--to", &p->to, NULL},         {"--lat", &p->lat, NULL},
                            {"--method", &p->method, NULL}, {"--flat", NULL, &p->flat},
                            {"-o", &p->out, NULL},          {"--output", &p->out, NULL}};
    int argc = 0;
    while (args[argc])
        argc++;
    return ctl_parse_args(&p->ctx, argc, (const char **)args, opts, 6, p->pos, &p->npos,
                          &p->timing);
}

/* The same with stderr caught into buf. */
static char errbuf[2048];
static int parse_err(const char *const *args, parsed *p)
{
    char path[] = "/tmp/test_ctl_args.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
    int rc = parse(args, p);
    fflush(stderr);
    ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    ssize_t n = pread(fd, errbuf, sizeof errbuf - 1, 0);
    errbuf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

START_TEST(both_spellings)
{
    parsed a, b;
    ck_assert_int_eq(parse(ARGS("--to", "1,2", "--lat", "-9:9:3", "-m", "l2", "--flat", "x.npy",
                                "--timing", "-o", "-", "y.npy"),
                           &a),
                     0);
    ck_assert_int_eq(parse(ARGS("--to=1,2", "--lat=-9:9:3", "--method=l2", "--flat", "x.npy",
                                "--timing", "--output=-", "y.npy"),
                           &b),
                     0);
    parsed *all[] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        parsed *p = all[k];
        ck_assert_str_eq(p->to, "1,2");
        ck_assert_str_eq(p->lat, "-9:9:3");
        ck_assert_str_eq(p->method, "l2");
        ck_assert_str_eq(p->out, "-");
        ck_assert(p->flat && p->timing);
        ck_assert_int_eq(p->npos, 2);
        ck_assert_str_eq(p->pos[0], "x.npy");
        ck_assert_str_eq(p->pos[1], "y.npy");
    }
    /* a value may contain '=' and start with '-' */
    ck_assert_int_eq(parse(ARGS("--method=a=b", "--to", "-1,-2", "x"), &a), 0);
    ck_assert_str_eq(a.method, "a=b");
    ck_assert_str_eq(a.to, "-1,-2");
    /* after "--" everything is positional */
    ck_assert_int_eq(parse(ARGS("--", "-m", "--flat"), &a), 0);
    ck_assert_int_eq(a.npos, 2);
    ck_assert_str_eq(a.pos[0], "-m");
    ck_assert(!a.flat && !a.method);
    /* "-" alone is positional (stdin) */
    ck_assert_int_eq(parse(ARGS("-"), &a), 0);
    ck_assert_str_eq(a.pos[0], "-");
}
END_TEST

START_TEST(globals_anywhere)
{
    parsed p;
    ck_assert_int_eq(
        parse(ARGS("x", "--socket=/s", "--json", "--priority=high", "--transport", "shm"), &p), 0);
    ck_assert_str_eq(p.ctx.socket, "/s");
    ck_assert(p.ctx.json);
    ck_assert_int_eq(p.ctx.priority, GPUQ_PRIO_HIGH);
    ck_assert_int_eq(p.ctx.transport, GPUQ_TRANSPORT_SHM);
    ck_assert_int_eq(
        parse(ARGS("--priority", "-1", "--socket", "/t", "--transport=socket", "x"), &p), 0);
    ck_assert_int_eq(p.ctx.priority, GPUQ_PRIO_LOW);
    ck_assert_str_eq(p.ctx.socket, "/t");
    ck_assert_int_eq(p.ctx.transport, GPUQ_TRANSPORT_SOCKET);
    ck_assert_uint_eq(p.ctx.deadline_ms, 0); /* none unless given */
    ck_assert_int_eq(parse(ARGS("x", "--deadline", "250"), &p), 0);
    ck_assert_uint_eq(p.ctx.deadline_ms, 250);
    ck_assert_int_eq(parse(ARGS("--deadline=86400000", "x"), &p), 0);
    ck_assert_uint_eq(p.ctx.deadline_ms, 86400000);
    ck_assert_int_eq(parse(ARGS("--deadline=7", "x", "--deadline=0"), &p), 0);
    ck_assert_uint_eq(p.ctx.deadline_ms, 0);
}
END_TEST

static const struct {
    const char *args[10];
    const char *say;
} bad[] = {
    {{"--to", "30", "101", "x"}, "--to takes LAT,LON with a comma: --to 30,101"},
    {{"x", "--to=30", "101"}, "--to takes LAT,LON with a comma: --to 30,101"},
    {{"--to", "30", "x"}, "--to takes LAT,LON with a comma, not '30'"},
    {{"--lat", "-90", "90", "5", "x"}, "--lat takes START:STOP:N with colons: --lat -90:90:5"},
    {{"--lat", "-90", "x"}, "--lat takes START:STOP:N with colons, not '-90'"},
    {{"--method", "-o", "y", "x"}, "--method needs a value (--method NAME), not the option '-o'"},
    {{"x", "--method"}, "--method needs a value (--method NAME)"},
    {{"x", "--method="}, "--method= needs a value (--method=NAME)"},
    {{"x", "--socket"}, "--socket needs a value (--socket PATH)"},
    {{"x", "--socket", "--json"}, "--socket needs a value (--socket PATH), not the option"},
    {{"x", "--flat=1"}, "--flat takes no value"},
    {{"x", "--timing=1"}, "--timing takes no value"},
    {{"x", "--json=yes"}, "--json takes no value"},
    {{"x", "--methd", "l2"}, "unknown option '--methd' (did you mean --method?)"},
    {{"x", "--outptu=y"}, "unknown option '--outptu' (did you mean --output?)"},
    {{"x", "--tm"}, "unknown option '--tm'"},
    {{"x", "-q"}, "unknown option '-q'"},
    {{"x", "--priority=9"}, "bad priority '9'"},
    {{"x", "--deadline=86400001"}, "bad deadline '86400001' (milliseconds, 0 .. 86400000)"},
    {{"x", "--deadline", "-5"}, "bad deadline '-5'"},
    {{"x", "--deadline", "1.5"}, "bad deadline '1.5'"},
    {{"x", "--deadline"}, "--deadline needs a value (--deadline MS)"},
    {{"a", "b", "c"}, "unexpected argument 'c'"},
    {{"-m", "l2"}, "test cmd takes 1 to 2 arguments, got 0"},
};

START_TEST(diagnoses)
{
    parsed p;
    int rc = parse_err(bad[_i].args, &p);
    ck_assert_int_eq(rc, CTL_EXIT_USAGE);
    ck_assert_msg(strstr(errbuf, bad[_i].say), "want \"%s\", got: %s", bad[_i].say, errbuf);
    ck_assert_msg(strncmp(errbuf, "gpuqctl: usage: ", 16) == 0, "%s", errbuf);
    const char *nl = strchr(errbuf, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: %s", errbuf);
}
END_TEST

START_TEST(suggest)
{
    static const char *const names[] = {"ping",      "status",   "sessions",
                                        "normalize", "--method", "--metric"};
    ck_assert_str_eq(ctl_suggest("pign", names, 6), "ping");
    ck_assert_str_eq(ctl_suggest("stauts", names, 6), "status");
    ck_assert_str_eq(ctl_suggest("sesions", names, 6), "sessions");
    ck_assert_str_eq(ctl_suggest("norm", names, 6), "normalize"); /* a prefix */
    ck_assert_str_eq(ctl_suggest("--metod", names, 6), "--method");
    ck_assert_str_eq(ctl_suggest("--metrc", names, 6), "--metric");
    ck_assert_ptr_null(ctl_suggest("x", names, 6));
    ck_assert_ptr_null(ctl_suggest("shutdown", names, 6));
    ck_assert_ptr_null(ctl_suggest("", names, 6));
}
END_TEST

START_TEST(enums)
{
    ctl_ctx ctx = {.entry = &entry};
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_PAIRWISE;
    ck_assert_int_eq(ctl_set_enum(&ctx, &r, "metric", "--metric", "cityblock"), 0);
    ck_assert_int_eq(gpuq_request_get_enum(&r, "metric"), GPUQ_METRIC_MANHATTAN);
    ck_assert_int_eq(ctl_set_enum(&ctx, &r, "metric", "--metric", "l2"), 0);
    ck_assert_int_eq(gpuq_request_get_enum(&r, "metric"), GPUQ_METRIC_EUCLIDEAN);
    fflush(stderr);
    ck_assert_int_eq(ctl_set_enum(&ctx, &r, "metric", "--metric", "cosin"), CTL_EXIT_USAGE);
    ck_assert_int_eq(gpuq_request_get_enum(&r, "metric"), GPUQ_METRIC_EUCLIDEAN);
    r.op = GPUQ_OP_NORMALIZE;
    ck_assert_int_eq(ctl_set_enum(&ctx, &r, "method", "--method", "zscore"), 0);
    ck_assert_int_eq(ctl_set_enum(&ctx, &r, "method", "--method", "cityblock"), CTL_EXIT_USAGE);
}
END_TEST

/* An option exec takes but the entry's help does not list: abort. */
START_TEST(undocumented_option_aborts)
{
    parsed p;
    memset(&p, 0, sizeof p);
    p.ctx.entry = &entry;
    const char *v = NULL;
    const ctl_opt opts[] = {{"--secret", &v, NULL}};
    const char *args[] = {"x"};
    ctl_parse_args(&p.ctx, 1, args, opts, 1, p.pos, &p.npos, NULL);
}
END_TEST

/* --timing taken (timing != NULL) by an entry that does not list it. */
static const ctl_optdoc no_timing_docs[] = {{NULL, NULL, NULL, NULL, NULL}};
static const ctl_entry no_timing = {.name = "t",
                                    .usage = "",
                                    .min_args = 0,
                                    .max_args = 0,
                                    .exec = no_exec,
                                    .opts = no_timing_docs};
START_TEST(undocumented_timing_aborts)
{
    ctl_ctx ctx = {.entry = &no_timing};
    bool timing = false;
    const char *pos[1];
    int npos;
    ctl_parse_args(&ctx, 0, NULL, NULL, 0, pos, &npos, &timing);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ctl_args");
    TCase *tc = tcase_create("ctl_args");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, both_spellings);
    tcase_add_test(tc, globals_anywhere);
    tcase_add_loop_test(tc, diagnoses, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, suggest);
    tcase_add_test(tc, enums);
    tcase_add_test_raise_signal(tc, undocumented_option_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, undocumented_timing_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
