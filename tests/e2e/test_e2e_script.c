/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_script.c - gpuqctl in scripts and in long work, against a real
 * gpuqd: '-' for stdin and stdout, --json on every command, output files
 * that are never left half-written, the progress line, and Ctrl-C.
 *
 * The numpy side (arrays through pipes, every command's JSON parsed) is
 * tests/ref/ctl_script.py; this file drives processes: a pseudo-terminal
 * for stderr (the progress line on a terminal), inputs that arrive late
 * (a pipe written after a pause), SIGINT while gpuqctl waits on stdin, on
 * the daemon and on a full stdout pipe. Slow work on the daemon is the CPU
 * backend's GPUQ_TEST_SLOW_MS (test cases that need it return early on
 * CUDA); a late input works on either backend.
 *
 * What gpuqd does with the work of a client that hung up, checked here:
 * the job already handed to the backend runs to its end, its result is
 * dropped unsent (bytes_out does not grow by it), its staging or arena is
 * freed then, and gpuqd serves on.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"
#include "npy.h"

/* ---- small helpers ---- */

/* dir/name in a buffer of the caller's, for paths kept across calls. */
#define DPATH(var, name)                                                                           \
    char var[320];                                                                                 \
    snprintf(var, sizeof var, "%s/%s", e2e_d.dir, name)

static bool is_cpu(void)
{
    return strcmp(tu_test_device(), "cpu") == 0;
}

/* rows x cols float64 in [0.5, 10) into name. */
static void make_npy(const char *name, uint64_t rows, uint64_t cols)
{
    double *x = malloc(rows * cols * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_rand_fill_f64(x, rows * cols, 0.5, 10);
    const uint64_t shape[2] = {rows, cols};
    char err[512];
    ck_assert_msg(npy_write(e2e_dpath(name), GPUQ_DT_F64, 2, shape, x, err, sizeof err) == 0, "%s",
                  err);
    free(x);
}

static char *slurp(const char *path, size_t *len)
{
    size_t l = 0;
    char *s = tu_read_file(path, &l);
    ck_assert_msg(s != NULL, "cannot read %s", path);
    if (len)
        *len = l;
    return s;
}

/* The same bytes in two files. */
static void same_file(const char *a, const char *b)
{
    size_t la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    ck_assert_msg(la == lb && la > 128 && memcmp(x, y, la) == 0, "%s and %s differ", a, b);
    free(x);
    free(y);
}

/* ---- running gpuqctl ---- */

/* argv for gpuqctl --socket S args... (static, one at a time). */
static const char **ctl_argv(const char *const *args)
{
    static const char *argv[40];
    int n = 0;
    argv[n++] = GPUQCTL_PATH;
    argv[n++] = "--socket";
    argv[n++] = e2e_d.socket;
    for (int i = 0; args[i]; i++) {
        ck_assert_int_lt(n, 38);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return argv;
}

/* RLIMIT_FSIZE for the next children (0: none): a write past it fails
 * with EFBIG (SIGXFSZ ignored), the way a full disk fails a write. */
static rlim_t child_fsize;

/* gpuqctl args, stdin from in_fd (-1: /dev/null), stdout and stderr into
 * files (NULL: /dev/null), env "NAME=VALUE" (may be NULL) set first;
 * returns the child's pid. */
static pid_t spawn(const char *const *args, int in_fd, const char *out, const char *err,
                   const char *env)
{
    const char **argv = ctl_argv(args);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fi = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
        int fo = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : open("/dev/null", O_WRONLY);
        int fe = err ? open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644) : open("/dev/null", O_WRONLY);
        if (fi < 0 || fo < 0 || fe < 0 || dup2(fi, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        if (env)
            putenv((char *)env);
        else
            unsetenv("GPUQ_PROGRESS");
        signal(SIGINT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        if (child_fsize) {
            struct rlimit rl = {child_fsize, child_fsize};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(126);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* gpuqctl args with stdin from a file (NULL: /dev/null), stdout and
 * stderr into files; the exit status. */
static int ctl_run(const char *const *args, const char *in, const char *out, const char *err)
{
    int fd = in ? open(in, O_RDONLY) : -1;
    ck_assert(!in || fd >= 0);
    pid_t pid = spawn(args, fd, out, err, NULL);
    if (fd >= 0)
        close(fd);
    return e2e_wait_exit(pid, 60);
}

/* stderr (the file) is one line containing want. */
static void one_line(const char *err_path, const char *want)
{
    char *e = slurp(err_path, NULL);
    ck_assert_msg(strstr(e, want), "stderr lacks \"%s\": %s", want, e);
    const char *nl = strchr(e, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: %s", e);
    free(e);
}

static void empty_file(const char *path)
{
    size_t len;
    char *s = slurp(path, &len);
    ck_assert_msg(len == 0, "%s is not empty: %s", path, s);
    free(s);
}

/* ctl_script.py MODE against the fixture's daemon. */
static void script(const char *mode)
{
    char log[320];
    snprintf(log, sizeof log, "%s/ctl_script.log", e2e_d.dir);
    const char *argv[] = {GPUQ_PYTHON,  GPUQ_TESTS_DIR "/ref/ctl_script.py",
                          mode,         GPUQCTL_PATH,
                          e2e_d.socket, e2e_d.dir,
                          NULL};
    int rc = tu_run(argv, log, log);
    char *text = slurp(log, NULL);
    if (rc != 0) { /* what gpuqd said and whether it still runs (on stderr:
                    * Check's messages are short) */
        int st = -1;
        pid_t gone = e2e_d.pid > 0 ? waitpid(e2e_d.pid, &st, WNOHANG) : 0;
        char *dlog = slurp(e2e_d.log, NULL);
        size_t dl = strlen(dlog);
        fprintf(stderr,
                "ctl_script.py %s failed (%d):\n%s\ngpuqd %s (status %d); the end of its "
                "log:\n%s\n",
                mode, rc, text,
                gone > 0    ? "has exited"
                : gone == 0 ? "still runs"
                            : "is not ours",
                st, dl > 8000 ? dlog + dl - 8000 : dlog);
        ck_abort_msg("ctl_script.py %s failed (%d): see above", mode, rc);
    }
    free(text);
}

/* A pipe whose write end gets the .npy file name: its first 128 bytes (the
 * header) now, the rest after delay_s, from a child; returns the read end
 * and the child's pid in *writer. */
static int late_input(const char *name, double delay_s, pid_t *writer)
{
    size_t len;
    char *data = slurp(e2e_dpath(name), &len);
    ck_assert_uint_gt(len, 128);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        signal(SIGPIPE, SIG_DFL);
        size_t off = 0;
        while (off < len) {
            if (off == 128)
                tu_sleep_s(delay_s);
            size_t n = off < 128 ? 128 - off : len - off;
            ssize_t w = write(p[1], data + off, n);
            if (w <= 0)
                _exit(1);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(p[1]);
    free(data);
    *writer = pid;
    return p[0];
}

/* ---- '-' and --json: the numpy side ---- */

START_TEST(pipes_round_trip)
{
    script("roundtrip");
    e2e_no_temp_files();
}
END_TEST

START_TEST(json_every_command)
{
    /* an admin daemon (root is one; else our group), for set-limit,
     * kill-session, drain and shutdown */
    const char *argv[3] = {NULL, NULL, NULL};
    char group[64];
    if (getuid() != 0) {
        snprintf(group, sizeof group, "%u", (unsigned)getgid());
        const char *getent[] = {"/usr/bin/id", "-gn", NULL};
        const char *out = e2e_dpath("group.txt");
        ck_assert_int_eq(tu_run(getent, out, NULL), 0);
        char *g = slurp(out, NULL);
        g[strcspn(g, "\n")] = '\0';
        snprintf(group, sizeof group, "%s", g);
        free(g);
        argv[0] = "--admin-group";
        argv[1] = group;
    }
    e2e_restart(argv);
    script("json"); /* ends with drain: the daemon exits */
    ck_assert_int_eq(tu_daemon_wait_exit(&e2e_d, 10), 0);
    tu_rmtree(e2e_d.dir);
    e2e_start(argv);
    script("shutdown");
    ck_assert_int_eq(tu_daemon_wait_exit(&e2e_d, 10), 0);
    tu_rmtree(e2e_d.dir);
    e2e_start(NULL); /* for the teardown */
}
END_TEST

/* ---- '-' misused, and what a failure leaves ---- */

START_TEST(dash_mistakes)
{
    make_npy("x.npy", 20, 5);
    DPATH(err, "err.txt");
    DPATH(out, "out.txt");
    /* two inputs from stdin; two outputs to stdout: usage, nothing read */
    const char *two_in[] = {"distance", "pairwise", "-", "-", "-o", e2e_dpath("o.npy"), NULL};
    ck_assert_int_eq(ctl_run(two_in, e2e_dpath("x.npy"), out, err), 2);
    one_line(err, "gpuqctl: usage: only one input may be '-' (stdin)");
    const char *two_out[] = {
        "distance", "knn", "--k", "2", e2e_dpath("x.npy"), e2e_dpath("x.npy"), "-o",
        "-",        "-i",  "-",   NULL};
    ck_assert_int_eq(ctl_run(two_out, NULL, out, err), 2);
    one_line(err, "gpuqctl: usage: only one output may be '-' (stdout)");
    empty_file(out);
    /* stdin that is not a whole .npy: short, too long, not one at all */
    size_t len;
    char *x = slurp(e2e_dpath("x.npy"), &len);
    ck_assert_int_eq(tu_write_file(e2e_dpath("short.npy"), x, len - 8), 0);
    char *longer = malloc(len + 8);
    ck_assert_ptr_nonnull(longer);
    memcpy(longer, x, len);
    memcpy(longer + len, "trailing", 8);
    ck_assert_int_eq(tu_write_file(e2e_dpath("long.npy"), longer, len + 8), 0);
    ck_assert_int_eq(tu_write_file(e2e_dpath("text.npy"), "hello\n", 6), 0);
    free(longer);
    free(x);
    static const struct {
        const char *in, *want;
    } bad[] = {
        {"short.npy", "gpuqctl: size_mismatch: stdin: ended before the 800 data bytes its shape "
                      "needs"},
        {"long.npy", "gpuqctl: size_mismatch: stdin: more bytes follow the 800 data bytes"},
        {"text.npy", "gpuqctl: bad_argument: stdin: not a .npy file"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        for (int t = 0; t < 2; t++) { /* by socket, and into a shared-memory arena */
            const char *args[] = {"--transport", t ? "shm" : "socket", "normalize", "-",
                                  "-o",          e2e_dpath("o.npy"),   NULL};
            ck_assert_int_eq(ctl_run(args, e2e_dpath(bad[k].in), out, err), 1);
            one_line(err, bad[k].want);
            ck_assert_msg(!e2e_exists(e2e_dpath("o.npy")), "%s left an output", bad[k].in);
        }
    }
    /* a file through stdin (not a pipe) works like the file */
    const char *viafile[] = {"normalize", "-", "-o", e2e_dpath("o1.npy"), NULL};
    ck_assert_int_eq(ctl_run(viafile, e2e_dpath("x.npy"), out, err), 0);
    const char *direct[] = {"normalize", e2e_dpath("x.npy"), "-o", e2e_dpath("o2.npy"), NULL};
    ck_assert_int_eq(ctl_run(direct, NULL, out, err), 0);
    same_file(e2e_dpath("o1.npy"), e2e_dpath("o2.npy"));
    e2e_no_temp_files();
    e2e_assert_serves();
}
END_TEST

START_TEST(outputs_whole_or_not_at_all)
{
    make_npy("x.npy", 20, 5);
    DPATH(err, "err.txt");
    /* a failing op leaves an existing output as it was, and no new one */
    double zero[12] = {0};
    const uint64_t shape[2] = {3, 4};
    char e[512];
    ck_assert_int_eq(npy_write(e2e_dpath("zero.npy"), GPUQ_DT_F64, 2, shape, zero, e, sizeof e), 0);
    ck_assert_int_eq(tu_write_file(e2e_dpath("keep.npy"), "precious", 8), 0);
    const char *fail_keep[] = {"normalize", e2e_dpath("zero.npy"), "-o", e2e_dpath("keep.npy"),
                               NULL};
    ck_assert_int_eq(ctl_run(fail_keep, NULL, NULL, err), 1);
    one_line(err, "gpuqctl: zero_norm:");
    size_t len;
    char *k = slurp(e2e_dpath("keep.npy"), &len);
    ck_assert(len == 8 && memcmp(k, "precious", 8) == 0);
    free(k);
    const char *fail_new[] = {"normalize", e2e_dpath("zero.npy"), "-o", e2e_dpath("new.npy"), NULL};
    ck_assert_int_eq(ctl_run(fail_new, NULL, NULL, err), 1);
    ck_assert(!e2e_exists(e2e_dpath("new.npy")));
    /* a replaced file keeps its permissions; a link stays a link */
    const char *ok_keep[] = {"normalize", e2e_dpath("x.npy"), "-o", e2e_dpath("keep.npy"), NULL};
    ck_assert_int_eq(chmod(e2e_dpath("keep.npy"), 0604), 0);
    ck_assert_int_eq(ctl_run(ok_keep, NULL, NULL, err), 0);
    struct stat st;
    ck_assert_int_eq(stat(e2e_dpath("keep.npy"), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0604);
    ck_assert_int_eq(symlink("keep.npy", e2e_dpath("link.npy")), 0);
    const char *via_link[] = {"normalize",           "--method", "l2", e2e_dpath("x.npy"), "-o",
                              e2e_dpath("link.npy"), NULL};
    ck_assert_int_eq(ctl_run(via_link, NULL, NULL, err), 0);
    ck_assert_int_eq(lstat(e2e_dpath("link.npy"), &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    const char *l2[] = {"normalize", "--method",          "l2", e2e_dpath("x.npy"),
                        "-o",        e2e_dpath("l2.npy"), NULL};
    ck_assert_int_eq(ctl_run(l2, NULL, NULL, err), 0);
    same_file(e2e_dpath("keep.npy"), e2e_dpath("l2.npy"));
    /* a device is written in place; a missing directory is an error */
    const char *devnull[] = {"normalize", e2e_dpath("x.npy"), "-o", "/dev/null", NULL};
    ck_assert_int_eq(ctl_run(devnull, NULL, NULL, err), 0);
    const char *nodir[] = {"normalize", e2e_dpath("x.npy"), "-o", e2e_dpath("no/such/dir.npy"),
                           NULL};
    ck_assert_int_eq(ctl_run(nodir, NULL, NULL, err), 1);
    one_line(err, "no/such/dir.npy: cannot create a file in");
    e2e_no_temp_files();
}
END_TEST

/* A write that fails midway (a full disk; here RLIMIT_FSIZE) leaves no
 * part of a file: not the new one, and the old one as it was; with two
 * outputs, neither when one fails. */
START_TEST(outputs_when_a_write_fails)
{
    make_npy("x.npy", 1000, 300); /* 2.4 MB out */
    DPATH(err, "err.txt");
    DPATH(keep, "keep.npy");
    ck_assert_int_eq(tu_write_file(keep, "precious", 8), 0);
    child_fsize = 1 << 20;
    for (int t = 0; t < 2; t++) {
        const char *args[] = {
            "--transport", t ? "shm" : "socket", "normalize", e2e_dpath("x.npy"), "-o", keep, NULL};
        ck_assert_int_eq(ctl_run(args, NULL, NULL, err), 1);
        one_line(err, "keep.npy: write failed: File too large");
        size_t len;
        char *k = slurp(keep, &len);
        ck_assert(len == 8 && memcmp(k, "precious", 8) == 0);
        free(k);
        const char *fresh[] = {"--transport", t ? "shm" : "socket", "normalize", e2e_dpath("x.npy"),
                               "-o",          e2e_dpath("new.npy"), NULL};
        ck_assert_int_eq(ctl_run(fresh, NULL, NULL, err), 1);
        ck_assert(!e2e_exists(e2e_dpath("new.npy")));
        e2e_no_temp_files();
    }
    /* knn: float32 distances (256 KB) fit, int64 indices (512 KB) do not */
    float *x = malloc(2000 * 4 * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i < 2000 * 4; i++)
        x[i] = (float)((i * 37) % 101) / 10.0f;
    char e[512];
    const uint64_t sx[2] = {1000, 4}, sy[2] = {2000, 4};
    ck_assert_int_eq(npy_write(e2e_dpath("kx.npy"), GPUQ_DT_F32, 2, sx, x, e, sizeof e), 0);
    ck_assert_int_eq(npy_write(e2e_dpath("ky.npy"), GPUQ_DT_F32, 2, sy, x, e, sizeof e), 0);
    free(x);
    child_fsize = 400 << 10;
    const char *knn[] = {"distance",
                         "knn",
                         "--k",
                         "64",
                         e2e_dpath("kx.npy"),
                         e2e_dpath("ky.npy"),
                         "-o",
                         e2e_dpath("d.npy"),
                         "-i",
                         e2e_dpath("i.npy"),
                         NULL};
    ck_assert_int_eq(ctl_run(knn, NULL, NULL, err), 1);
    one_line(err, "i.npy: write failed: File too large");
    ck_assert(!e2e_exists(e2e_dpath("d.npy")) && !e2e_exists(e2e_dpath("i.npy")));
    e2e_no_temp_files();
    child_fsize = 0;
    ck_assert_int_eq(ctl_run(knn, NULL, NULL, err), 0);
    ck_assert(e2e_exists(e2e_dpath("d.npy")) && e2e_exists(e2e_dpath("i.npy")));
}
END_TEST

/* ---- progress ---- */

/* gpuqctl normalize NAME with its data arriving after delay_s, stderr into
 * err, GPUQ_PROGRESS as env says; the output is checked against a plain
 * run's. */
static void late_run(const char *name, double delay_s, const char *env, const char *err)
{
    pid_t writer;
    int fd = late_input(name, delay_s, &writer);
    const char *args[] = {"normalize", "-", "-o", e2e_dpath("late.npy"), NULL};
    pid_t pid = spawn(args, fd, NULL, err, env);
    close(fd);
    ck_assert_int_eq(e2e_wait_exit(pid, 60), 0);
    ck_assert_int_eq(e2e_wait_exit(writer, 10), 0);
    const char *plain[] = {"normalize", e2e_dpath(name), "-o", e2e_dpath("plain.npy"), NULL};
    ck_assert_int_eq(ctl_run(plain, NULL, NULL, NULL), 0);
    same_file(e2e_dpath("late.npy"), e2e_dpath("plain.npy"));
}

START_TEST(progress_off_a_terminal)
{
    make_npy("x.npy", 300, 20);
    DPATH(err, "err.txt");
    /* nothing by default, nor with GPUQ_PROGRESS=0 */
    late_run("x.npy", 1.5, NULL, err);
    empty_file(err);
    late_run("x.npy", 1.5, "GPUQ_PROGRESS=0", err);
    empty_file(err);
    /* GPUQ_PROGRESS=1: after a second, lines rewritten with \r, ended with
     * a newline; waiting on stdin is "reading the inputs" */
    late_run("x.npy", 2.2, "GPUQ_PROGRESS=1", err);
    size_t len;
    char *e = slurp(err, &len);
    ck_assert_msg(strncmp(e, "\rgpuqctl: 1.", 12) == 0, "stderr: %s", e);
    ck_assert_msg(strstr(e, "s, reading the inputs"), "stderr: %s", e);
    ck_assert_msg(len > 0 && e[len - 1] == '\n' && !strchr(e, '\n')[1], "stderr: %s", e);
    ck_assert_msg(!strstr(e, "\033["), "escape codes off a terminal: %s", e);
    free(e);
    /* a fast op shows nothing, even forced */
    const char *fast[] = {"normalize", e2e_dpath("x.npy"), "-o", e2e_dpath("f.npy"), NULL};
    pid_t pid = spawn(fast, -1, NULL, err, "GPUQ_PROGRESS=1");
    ck_assert_int_eq(e2e_wait_exit(pid, 60), 0);
    empty_file(err);
}
END_TEST

START_TEST(progress_while_the_daemon_works)
{
    if (!is_cpu())
        return; /* GPUQ_TEST_SLOW_MS is the CPU backend's */
    e2e_restart_slow(2000, NULL);
    make_npy("x.npy", 300, 20);
    DPATH(err, "err.txt");
    for (int t = 0; t < 2; t++) {
        const char *args[] = {"--transport", t ? "shm" : "socket",  "normalize", e2e_dpath("x.npy"),
                              "-o",          e2e_dpath("slow.npy"), NULL};
        pid_t pid = spawn(args, -1, NULL, err, "GPUQ_PROGRESS=1");
        ck_assert_int_eq(e2e_wait_exit(pid, 60), 0);
        char *e = slurp(err, NULL);
        /* the inputs sent, gpuqd's job running (its started notice) */
        ck_assert_msg(strncmp(e, "\rgpuqctl: 1.", 12) == 0 && strstr(e, " s, running for ") &&
                          strstr(e, t ? " s (shared memory)" : " s (socket)") &&
                          !strstr(e, "queued"),
                      "stderr: %s", e);
        free(e);
        const char *again[] = {"normalize", e2e_dpath("x.npy"), "-o", e2e_dpath("plain.npy"), NULL};
        ck_assert_int_eq(ctl_run(again, NULL, NULL, err), 0);
        empty_file(err); /* not a terminal: nothing */
        same_file(e2e_dpath("slow.npy"), e2e_dpath("plain.npy"));
    }
}
END_TEST

/* A pseudo-terminal: its master, and the slave's path in name. */
static int open_pty(char *name, size_t cap)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(grantpt(m), 0);
    ck_assert_int_eq(unlockpt(m), 0);
    const char *s = ptsname(m);
    ck_assert_ptr_nonnull(s);
    snprintf(name, cap, "%s", s);
    return m;
}

/* Everything the master has to read within timeout_s of the child's end
 * (pid), into buf. */
static size_t drain_pty(int m, pid_t pid, char *buf, size_t cap, int *status)
{
    size_t n = 0;
    int flags = fcntl(m, F_GETFL);
    ck_assert_int_eq(fcntl(m, F_SETFL, flags | O_NONBLOCK), 0);
    double end = tu_now_s() + 60;
    bool done = false;
    while (!done || n == 0) {
        ssize_t r = read(m, buf + n, cap - 1 - n);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (done)
            break;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            done = true;
            tu_sleep_s(0.05); /* what the child wrote last */
            continue;
        }
        ck_assert_msg(tu_now_s() < end, "gpuqctl on a terminal did not end");
        tu_sleep_s(0.01);
    }
    buf[n] = '\0';
    return n;
}

START_TEST(progress_on_a_terminal)
{
    make_npy("x.npy", 300, 20);
    DPATH(err, "err.txt");
    char tty[128], buf[16384];
    int m = open_pty(tty, sizeof tty);
    for (int forced_off = 0; forced_off < 2; forced_off++) {
        pid_t writer;
        int fd = late_input("x.npy", 2.2, &writer);
        const char *args[] = {"normalize", "-", "-o", e2e_dpath("late.npy"), NULL};
        pid_t pid = spawn(args, fd, NULL, tty, forced_off ? "GPUQ_PROGRESS=0" : NULL);
        close(fd);
        int st = -1;
        size_t n = drain_pty(m, pid, buf, sizeof buf, &st);
        ck_assert_int_eq(st, 0);
        ck_assert_int_eq(e2e_wait_exit(writer, 10), 0);
        if (forced_off) {
            ck_assert_msg(n == 0, "GPUQ_PROGRESS=0 on a terminal: %s", buf);
            continue;
        }
        /* drawn in place, then erased: no newline at all */
        ck_assert_msg(strstr(buf, "\rgpuqctl: 1.") && strstr(buf, "reading the inputs\033[K"),
                      "terminal got: %s", buf);
        ck_assert_msg(n >= 4 && strcmp(buf + n - 4, "\r\033[K") == 0 && !strchr(buf, '\n'),
                      "not erased at the end: %s", buf);
    }
    /* a terminal is not read as stdin, nor written as stdout */
    int s = open(tty, O_RDWR | O_NOCTTY);
    ck_assert_int_ge(s, 0);
    const char *in[] = {"normalize", "-", "-o", e2e_dpath("t.npy"), NULL};
    pid_t pid = spawn(in, s, NULL, err, NULL);
    ck_assert_int_eq(e2e_wait_exit(pid, 10), 1);
    one_line(err, "gpuqctl: bad_argument: stdin is a terminal");
    close(s);
    const char *out[] = {"normalize", e2e_dpath("x.npy"), "-o", "-", NULL};
    pid = spawn(out, -1, tty, err, NULL);
    ck_assert_int_eq(e2e_wait_exit(pid, 10), 2);
    one_line(err, "gpuqctl: usage: '-' would write binary .npy data to a terminal");
    close(m);
}
END_TEST

/* ---- Ctrl-C ---- */

/* SIGINT (or sig) to pid: it ends by that signal within 1 s, saying
 * what in one line of stderr. */
static void interrupt(pid_t pid, int sig, const char *err, const char *line)
{
    double t0 = tu_now_s();
    ck_assert_int_eq(kill(pid, sig), 0);
    int st = e2e_wait_exit(pid, 10);
    ck_assert_msg(tu_now_s() - t0 < 1.0, "took %.2f s to stop", tu_now_s() - t0);
    ck_assert_int_eq(st, 128 + sig); /* 130 for SIGINT, as a shell shows it */
    char *e = slurp(err, NULL);
    ck_assert_msg(strcmp(e, line) == 0, "stderr: %s", e);
    free(e);
}

START_TEST(interrupt_waiting_on_stdin)
{
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    const char *lines[] = {"gpuqctl: interrupted\n", "gpuqctl: terminated\n", "gpuqctl: hangup\n"};
    make_npy("x.npy", 300, 20);
    DPATH(err, "err.txt");
    DPATH(o, "o.npy");
    for (int k = 0; k < 3; k++) {
        /* the header came, the data does not: gpuqctl is connected and
         * waits in its read of stdin */
        pid_t writer;
        int fd = late_input("x.npy", 30, &writer);
        const char *args[] = {"normalize", "-", "-o", o, NULL};
        pid_t pid = spawn(args, fd, NULL, err, NULL);
        close(fd);
        tu_sleep_s(0.3);
        interrupt(pid, sigs[k], err, lines[k]);
        kill(writer, SIGKILL);
        e2e_wait_exit(writer, 10);
        ck_assert(!e2e_exists(o));
    }
    e2e_no_temp_files();
    e2e_wait_status("sessions", 1, 5); /* the status call's own */
    e2e_assert_serves();
}
END_TEST

START_TEST(interrupt_writing_stdout)
{
    /* 2.4 MB of result into a pipe nobody reads: gpuqctl blocks in write */
    make_npy("x.npy", 1000, 300);
    DPATH(err, "err.txt");
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    char out[32];
    snprintf(out, sizeof out, "/dev/fd/%d", p[1]);
    const char *args[] = {"normalize", e2e_dpath("x.npy"), "-o", "-", NULL};
    pid_t pid = spawn(args, -1, out, err, NULL);
    close(p[1]);
    tu_sleep_s(1.0);
    ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0); /* still writing */
    interrupt(pid, SIGINT, err, "gpuqctl: interrupted\n");
    close(p[0]);
    e2e_assert_serves();
}
END_TEST

START_TEST(interrupt_while_the_daemon_works)
{
    if (!is_cpu())
        return; /* GPUQ_TEST_SLOW_MS is the CPU backend's */
    e2e_restart_slow(2500, NULL);
    make_npy("x.npy", 1000, 300); /* 2.4 MB each way */
    DPATH(err, "err.txt");
    DPATH(o, "o.npy");
    for (int t = 0; t < 2; t++) {
        long long out0 = e2e_status_int("bytes_out"), in0 = e2e_status_int("bytes_in");
        const char *args[] = {
            "--transport", t ? "shm" : "socket", "normalize", e2e_dpath("x.npy"), "-o", o, NULL};
        pid_t pid = spawn(args, -1, NULL, err, NULL);
        e2e_wait_status("in_flight", 1, 10); /* its header is in */
        /* by socket, the job is on the backend once all its 2.4 MB are in
         * (in flight counts from the header); by shm, from the header */
        double until = tu_now_s() + 10;
        while (!t && e2e_status_int("bytes_in") - in0 < 1000 * 300 * 8) {
            ck_assert_msg(tu_now_s() < until, "the payload did not arrive");
            tu_sleep_s(0.01);
        }
        double t0 = tu_now_s();
        interrupt(pid, SIGINT, err, "gpuqctl: interrupted\n");
        ck_assert(!e2e_exists(o));
        e2e_no_temp_files();
        /* gpuqd serves on at once */
        const char *ping[] = {"ping", NULL};
        ck_assert_int_eq(ctl_run(ping, NULL, NULL, NULL), 0);
        ck_assert_int_eq(e2e_status_int("sessions"), 1); /* the status call's own */
        /* the job was abandoned with its session (no longer in flight) and
         * stops at its next block, long before its 2.5 s: its result is
         * dropped, unsent, and its staging (socket) or arena (shm) is
         * given back */
        ck_assert_int_eq(e2e_status_int("in_flight"), 0);
        e2e_wait_status("staging_bytes", 0, 10);
        e2e_wait_status("arenas", 0, 10);
        ck_assert_msg(tu_now_s() - t0 < 1.5, "the job ran on for %.1f s after its client left",
                      tu_now_s() - t0);
        /* the status calls' replies, not the 2.4 MB */
        ck_assert_int_lt(e2e_status_int("bytes_out") - out0, 1000000);
    }
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_script");
    TCase *tc = tcase_create("script");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pipes_round_trip);
    tcase_add_test(tc, json_every_command);
    tcase_add_test(tc, dash_mistakes);
    tcase_add_test(tc, outputs_whole_or_not_at_all);
    tcase_add_test(tc, outputs_when_a_write_fails);
    tcase_add_test(tc, progress_off_a_terminal);
    tcase_add_test(tc, progress_while_the_daemon_works);
    tcase_add_test(tc, progress_on_a_terminal);
    tcase_add_test(tc, interrupt_waiting_on_stdin);
    tcase_add_test(tc, interrupt_writing_stdout);
    tcase_add_test(tc, interrupt_while_the_daemon_works);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
