/* SPDX-License-Identifier: Apache-2.0 */
/* testutil.c - see testutil.h. Test-only code: failures abort the test via
 * Check's ck_abort_msg, never silently. */
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <iconv.h>
#include <math.h>
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GPUQD_PATH
#define GPUQD_PATH "gpuqd"
#endif

void tu_tmpdir(char *out, size_t cap)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    int n = snprintf(out, cap, "%s/gpuq-test-XXXXXX", base);
    ck_assert_msg(n > 0 && (size_t)n < cap, "tmpdir path too long");
    ck_assert_msg(mkdtemp(out) != NULL, "mkdtemp: %s", strerror(errno));
}

void tu_rmtree(const char *path)
{
    const char *argv[] = {"/bin/rm", "-rf", path, NULL};
    (void)tu_run(argv, NULL, NULL);
}

int tu_write_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(buf, 1, len, f);
    int rc = fclose(f);
    return (w == len && rc == 0) ? 0 : -1;
}

void *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long sz = ftell(f);
    rewind(f);
    char *buf = malloc(sz > 0 ? (size_t)sz + 1 : 1); /* NUL-terminated: text is searched */
    if (buf && sz > 0 && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[sz > 0 ? sz : 0] = '\0';
    fclose(f);
    if (buf)
        *len = (size_t)sz;
    return buf;
}

int tu_run(const char *const *argv, const char *out_path, const char *err_path)
{
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int fo = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 128 + WTERMSIG(st);
}

tu_output tu_capture(const char *const *pre, const char *const *args, const char *dir,
                     const char *name)
{
    const char *argv[48];
    int n = 0;
    for (int i = 0; pre && pre[i]; i++) {
        ck_assert_int_lt(n, 47);
        argv[n++] = pre[i];
    }
    for (int i = 0; args && args[i]; i++) {
        ck_assert_int_lt(n, 47);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    char o[512], e[512];
    snprintf(o, sizeof o, "%s/%s.out", dir, name);
    snprintf(e, sizeof e, "%s/%s.err", dir, name);
    tu_output r;
    r.rc = tu_run(argv, o, e);
    size_t len;
    r.out = tu_read_file(o, &len);
    r.err = tu_read_file(e, &len);
    ck_assert_msg(r.out && r.err, "cannot read %s or %s", o, e);
    return r;
}

void tu_output_free(tu_output *o)
{
    free(o->out);
    free(o->err);
    o->out = o->err = NULL;
}

int tu_python(const char *script, const char *const *args)
{
    const char *argv[64];
    char path[512];
    snprintf(path, sizeof path, "%s/%s", GPUQ_TESTS_DIR, script);
    size_t n = 0;
    argv[n++] = GPUQ_PYTHON;
    argv[n++] = path;
    for (size_t i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    const char *err = getenv("GPUQ_TEST_PY_STDERR");
    return tu_run(argv, NULL, err);
}

static uint64_t tu_seed_value;
static uint64_t tu_state;

uint64_t tu_seed(void)
{
    if (tu_seed_value == 0) {
        const char *s = getenv("TU_SEED");
        if (s && *s) {
            tu_seed_value = strtoull(s, NULL, 0);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            tu_seed_value = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid();
        }
        if (tu_seed_value == 0)
            tu_seed_value = 1;
        tu_state = tu_seed_value;
        fprintf(stderr, "testutil: random seed %llu (set TU_SEED to repeat)\n",
                (unsigned long long)tu_seed_value);
    }
    return tu_seed_value;
}

static uint64_t tu_next(void)
{
    (void)tu_seed();
    /* xorshift64* */
    tu_state ^= tu_state >> 12;
    tu_state ^= tu_state << 25;
    tu_state ^= tu_state >> 27;
    return tu_state * 2685821657736338717ull;
}

void tu_rand_fill_f64(double *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(tu_next() >> 11) / 9007199254740992.0;
        x[i] = lo + (hi - lo) * u;
    }
}

double tu_rel_err_f64(const double *a, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(ref[i]))
            return INFINITY;
        if (isnan(ref[i]))
            continue;
        double e = a[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    if (den == 0)
        return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

double tu_rel_err_f32(const float *a, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(ref[i]))
            return INFINITY;
        if (isnan(ref[i]))
            continue;
        double e = (double)a[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    if (den == 0)
        return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

/* Per-element error of one value against its float64 reference; floor is
 * the output dtype's smallest normal. */
static double tu_elem_err1(double v, double r, double floor)
{
    if (isnan(v) || isnan(r))
        return isnan(v) && isnan(r) ? 0.0 : INFINITY;
    if (isinf(v) || isinf(r))
        return v == r ? 0.0 : INFINITY;
    return fabs(v - r) / fmax(fabs(r), floor);
}

double tu_elem_err_f64(const double *a, const double *ref, size_t n, size_t *worst)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = tu_elem_err1(a[i], ref[i], 0x1p-1022);
        if (e > m || (i == 0 && worst)) {
            m = e > m ? e : m;
            if (worst)
                *worst = i;
        }
    }
    return m;
}

double tu_elem_err_f32(const float *a, const double *ref, size_t n, size_t *worst)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = tu_elem_err1((double)a[i], ref[i], 0x1p-126);
        if (e > m || (i == 0 && worst)) {
            m = e > m ? e : m;
            if (worst)
                *worst = i;
        }
    }
    return m;
}

/* ---- normalize inputs that plain sums get wrong ---- */

const char *const tu_norm_kind_names[TU_NORM_KINDS] = {"offset", "mixed", "wide", "cancel"};

/* sign * 10^U(lo, hi) */
static void tu_fill_log_uniform(double *x, size_t n, double lo, double hi)
{
    tu_rand_fill_f64(x, n, lo, hi);
    for (size_t i = 0; i < n; i++) {
        double sign;
        tu_rand_fill_f64(&sign, 1, -1.0, 1.0);
        x[i] = copysign(pow(10.0, x[i]), sign);
    }
}

double tu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

unsigned tu_thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    unsigned n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

void tu_sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

double tu_round_f32(double v)
{
    volatile float f = (float)v;
    return (double)f;
}

void tu_norm_fill(int kind, int f32, double *x, size_t rows, size_t cols)
{
    const double top = f32 ? 0x1.fffffep127 : 0x1.fffffffffffffp1023;
    for (size_t r = 0; r < rows; r++) {
        double *a = x + r * cols, off, sum = 0.0;
        switch (kind) {
        case TU_NORM_OFFSET: /* float32 keeps a spread below offsets of about 1e5 */
            tu_rand_fill_f64(a, cols, -1.0, 1.0);
            off = pow(10.0, f32 ? 1.0 + (double)(r % 4) : 3.0 + (double)(r % 7));
            off *= r % 2 ? -1.0 : 1.0;
            for (size_t j = 0; j < cols; j++)
                a[j] += off;
            break;
        case TU_NORM_MIXED:
            tu_fill_log_uniform(a, cols, -3.0, 3.0);
            break;
        case TU_NORM_WIDE:
            tu_fill_log_uniform(a, cols, f32 ? -44.0 : -300.0, f32 ? 38.0 : 300.0);
            off = top * (r % 2 ? -1.0 : 1.0);
            a[r % cols] = off * 0.75;
            a[(r + cols / 2) % cols] = off * 0.875;
            break;
        default: /* TU_NORM_CANCEL */
            tu_fill_log_uniform(a, cols, 0.0, 6.0);
            for (size_t j = 0; j + 1 < cols; j++) {
                if (f32)
                    a[j] = tu_round_f32(a[j]);
                sum += a[j];
            }
            a[cols - 1] = 0.5 - sum;
            break;
        }
    }
}

#define DMAX 0x1.fffffffffffffp1023
#define R2 0.70710678118654752440
const tu_norm_case tu_norm_extremes[] = {
    /* the issue: l2 of [1e-200, 1e-200] was zero_norm; sum of [1e308, 1e308] was [0, 0] */
    {2, 2, 2, {1e-200, 1e-200}, {R2, R2}},
    {2, 0, 2, {1e308, 1e308}, {0.5, 0.5}},
    /* l2 with squares below and above double's range, subnormals included */
    {2, 2, 2, {1e300, 1e300}, {R2, R2}},
    {2, 2, 2, {0x3p-1074, 0x4p-1074}, {0.6, 0.8}},
    {2, 2, 2, {0x3p1020, -0x4p1020}, {0.6, -0.8}},
    {2, 2, 2, {0x3p-600, 0x4p-600}, {0.6, 0.8}},
    {2, 2, 3, {0x3p-520, 0x4p-520, 0x1p-1074}, {0.6, 0.8, 0x1p-554 / 5.0}},
    {2, 2, 2, {1e-300, 1e300}, {0.0, 1.0}}, /* 1e-600 rounds to 0 */
    /* sums that overflow on the way or at the end */
    {2, 0, 4, {DMAX, DMAX, DMAX, -DMAX}, {0.5, 0.5, 0.5, -0.5}},
    {2, 0, 3, {DMAX, DMAX, -DMAX}, {1.0, 1.0, -1.0}},
    {2, 1, 4, {1e308, -1e308, 1e308, -1e308}, {0.25, -0.25, 0.25, -0.25}},
    {2, 0, 2, {0x1p-1074, 0x3p-1074}, {0.25, 0.75}},
    /* cancellation that a plain sum loses entirely */
    {2, 0, 4, {1e16, 1.0, -1e16, 1.0}, {5e15, 0.5, -5e15, 0.5}},
    /* minmax and zscore whose spread overflows or underflows */
    {2, 3, 3, {-DMAX, 0.0, DMAX}, {0.0, 0.5, 1.0}},
    {2, 4, 2, {-DMAX, DMAX}, {-1.0, 1.0}},
    {2, 4, 4, {DMAX, DMAX, -DMAX, -DMAX}, {1.0, 1.0, -1.0, -1.0}},
    {2, 4, 2, {0x1p-1074, 0x3p-1074}, {-1.0, 1.0}},
    {2, 4, 2, {1e-200, 3e-200}, {-1.0, 1.0}},
    /* float32: sums and squares that overflow float but not double */
    {1, 0, 2, {3e38, 3e38}, {0.5, 0.5}},
    {1, 1, 2, {3e38, -3e38}, {0.5, -0.5}},
    {1, 2, 2, {0x3p125, 0x4p125}, {0.6, 0.8}},
    {1, 2, 2, {0x3p-149, 0x4p-149}, {0.6, 0.8}},
    {1, 3, 3, {-3e38, 0.0, 3e38}, {0.0, 0.5, 1.0}},
    {1, 4, 2, {-3e38, 3e38}, {-1.0, 1.0}},
    /* a result as large as float allows is a result, not an error */
    {1, 0, 3, {0x1p127, -0x1p127, 1.0}, {0x1p127, -0x1p127, 1.0}},
};
const size_t tu_norm_n_extremes = sizeof tu_norm_extremes / sizeof tu_norm_extremes[0];

const char *tu_test_device(void)
{
    const char *d = getenv("GPUQ_TEST_DEVICE");
    return (d && *d) ? d : "cpu";
}

static int tu_can_connect(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path) {
        close(fd);
        return 0;
    }
    memcpy(sa.sun_path, path, len + 1);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

void tu_daemon_start(tu_daemon *d, const char *device, const char *const *extra)
{
    memset(d, 0, sizeof *d);
    tu_tmpdir(d->dir, sizeof d->dir);
    snprintf(d->socket, sizeof d->socket, "%s/s.sock", d->dir);
    snprintf(d->log, sizeof d->log, "%s/gpuqd.log", d->dir);
    const char *argv[64];
    size_t n = 0;
    /* GPUQ_TEST_DAEMON_WRAPPER: a command line (split at spaces) that runs the
     * daemon, e.g. "compute-sanitizer --tool memcheck --error-exitcode 9". */
    static char wrap[512];
    const char *w = getenv("GPUQ_TEST_DAEMON_WRAPPER");
    if (w && *w) {
        snprintf(wrap, sizeof wrap, "%s", w);
        for (char *save = NULL, *tok = strtok_r(wrap, " ", &save); tok && n < 16;
             tok = strtok_r(NULL, " ", &save))
            argv[n++] = tok;
    }
    argv[n++] = GPUQD_PATH;
    argv[n++] = "--device";
    argv[n++] = device;
    argv[n++] = "--socket";
    argv[n++] = d->socket;
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    /* its own state directory, gone with it (never /var/lib/gpuq); a test
     * that restarts with the same arrays passes its own after this */
    static char state[sizeof d->dir + 8];
    snprintf(state, sizeof state, "%s/state", d->dir);
    ck_assert_int_eq(mkdir(state, 0700), 0); /* gpuqd makes none */
    argv[n++] = "--state-dir";
    argv[n++] = state;
    for (size_t i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    d->pid = pid;
    for (int i = 0; i < 6000; i++) { /* up to 120 s: CUDA start-up under a sanitizer */
        if (tu_can_connect(d->socket))
            return;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            d->pid = 0;
            size_t len = 0;
            char *log = tu_read_file(d->log, &len);
            ck_abort_msg("gpuqd exited during start-up:\n%.*s", (int)len, log ? log : "");
        }
        usleep(20000);
    }
    ck_abort_msg("gpuqd did not start listening on %s", d->socket);
}

/* The descendant of pid (or pid itself) whose comm is "gpuqd"; 0 if none. */
static pid_t tu_find_gpuqd(pid_t pid, int depth)
{
    char path[96], buf[512];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = '\0';
        fclose(f);
        if (strncmp(buf, "gpuqd\n", 6) == 0)
            return pid;
    }
    if (depth > 4)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = '\0';
    fclose(f);
    for (char *save = NULL, *tok = strtok_r(buf, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save)) {
        pid_t found = tu_find_gpuqd((pid_t)atoi(tok), depth + 1);
        if (found > 0)
            return found;
    }
    return 0;
}

void tu_daemon_kill(tu_daemon *d, int sig)
{
    /* Under GPUQ_TEST_DAEMON_WRAPPER the daemon is a descendant of the
     * wrapper, and a wrapper such as compute-sanitizer does not forward
     * signals: signal the gpuqd process itself. */
    const char *w = getenv("GPUQ_TEST_DAEMON_WRAPPER");
    pid_t target = (w && *w) ? tu_find_gpuqd(d->pid, 0) : 0;
    kill(target > 0 ? target : d->pid, sig);
}

int tu_daemon_wait_exit(tu_daemon *d, double timeout_s)
{
    for (double t = 0; t < timeout_s && d->pid > 0; t += 0.02) {
        int st = 0;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(20000);
    }
    return -1;
}

int tu_daemon_stop(tu_daemon *d)
{
    int rc = -1;
    if (d->pid > 0) {
        tu_daemon_kill(d, SIGTERM);
        int st = 0;
        for (int i = 0; i < 3000; i++) { /* 60 s */
            pid_t r = waitpid(d->pid, &st, WNOHANG);
            if (r == d->pid) {
                rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                break;
            }
            usleep(20000);
        }
        if (rc < 0) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &st, 0);
            rc = 128 + SIGKILL;
        }
        d->pid = 0;
    }
    if (rc != 0) {
        size_t len = 0;
        char *log = tu_read_file(d->log, &len);
        fprintf(stderr, "gpuqd exit %d; log:\n%.*s\n", rc, (int)len, log ? log : "");
        free(log);
    }
    if (d->dir[0])
        tu_rmtree(d->dir);
    return rc;
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

int tu_utf8_valid(const void *s, size_t len)
{
    iconv_t cd = iconv_open("UTF-32LE", "UTF-8");
    if (cd == (iconv_t)-1)
        return 0;
    char out[4096];
    char *in = (char *)s;
    size_t il = len, ok = 1;
    while (il > 0) {
        char *o = out;
        size_t ol = sizeof out;
        if (iconv(cd, &in, &il, &o, &ol) == (size_t)-1 && errno != E2BIG) {
            ok = 0;
            break;
        }
    }
    iconv_close(cd);
    return (int)ok;
}

static long tu_obj_strings(const msgpack_object *o, int depth)
{
    long n = 0, k;
    if (depth > 64)
        return -1;
    switch (o->type) {
    case MSGPACK_OBJECT_STR:
        if (!tu_utf8_valid(o->via.str.ptr, o->via.str.size)) {
            fprintf(stderr, "msgpack str of %u bytes is not UTF-8: \"%.*s\"\n",
                    (unsigned)o->via.str.size, (int)o->via.str.size, o->via.str.ptr);
            return -1;
        }
        return 1;
    case MSGPACK_OBJECT_ARRAY:
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if ((k = tu_obj_strings(&o->via.array.ptr[i], depth + 1)) < 0)
                return -1;
            n += k;
        }
        return n;
    case MSGPACK_OBJECT_MAP:
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            if ((k = tu_obj_strings(&o->via.map.ptr[i].key, depth + 1)) < 0)
                return -1;
            n += k;
            if ((k = tu_obj_strings(&o->via.map.ptr[i].val, depth + 1)) < 0)
                return -1;
            n += k;
        }
        return n;
    default:
        return 0;
    }
}

long tu_msgpack_strings_utf8(const void *buf, size_t len)
{
    msgpack_unpacked u;
    size_t off = 0;
    long n = 0;
    msgpack_unpacked_init(&u);
    while (off < len) {
        msgpack_unpack_return r = msgpack_unpack_next(&u, buf, len, &off);
        if (r != MSGPACK_UNPACK_SUCCESS && r != MSGPACK_UNPACK_EXTRA_BYTES) {
            fprintf(stderr, "not msgpack at byte %zu (%d)\n", off, (int)r);
            n = -1;
            break;
        }
        long k = tu_obj_strings(&u.data, 0);
        if (k < 0) {
            n = -1;
            break;
        }
        n += k;
    }
    msgpack_unpacked_destroy(&u);
    return n;
}

int tu_recv_all(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

void tu_send_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}
