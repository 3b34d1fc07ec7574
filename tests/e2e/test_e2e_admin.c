/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_admin.c - sessions, metrics and the admin ops (drain, shutdown,
 * kill_session, set_limit) against a real gpuqd, as an admin and as a
 * non-admin; and the caps of [user]/[group] rules (priority, max_inflight,
 * session_staging, session_arena), also after a SIGHUP reload.
 *
 * Admin: root (CI runs as root), else the daemon is started with
 * --admin-group set to our primary group. Non-admin: as root, a forked child
 * that switches to the system user "gpuq-test-user" (created with useradd
 * when missing, removed at the end if we created it); otherwise ourselves
 * against a daemon with no admin group. The child reports failures on
 * stderr and through its exit status.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "req_args.h"
#include "e2e_util.h"
#include "frame.h"
#include "mpread.h"
#include "mpwrite.h"

#define TEST_USER "gpuq-test-user"

static bool created_user;
static char ctl_copy[400]; /* gpuqctl where the test user can run it */

/* ---- daemon and identities ---- */

/* Start a daemon where this process is an admin; extra flags appended. */
static void start_admin(const char *const *extra)
{
    const char *argv[16];
    int n = 0;
    static char group[64];
    if (getuid() != 0) {
        struct group *g = getgrgid(getgid());
        ck_assert_msg(g != NULL, "no name for gid %u", (unsigned)getgid());
        snprintf(group, sizeof group, "%s", g->gr_name);
        argv[n++] = "--admin-group";
        argv[n++] = group;
    }
    for (int i = 0; extra && extra[i] && n < 14; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    e2e_start(argv);
    /* Let another uid reach the socket (the temp dir is 0700). */
    ck_assert_int_eq(chmod(e2e_d.dir, 0755), 0);
    ck_assert_int_eq(chmod(e2e_d.socket, 0666), 0);
}

static void admin_setup(void)
{
    start_admin(NULL);
}

static void user_setup(void)
{
    if (getuid() != 0 || getpwnam(TEST_USER))
        return;
    const char *argv[] = {
        "/usr/sbin/useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
        TEST_USER,           NULL};
    int rc = tu_run(argv, NULL, NULL);
    if (rc != 0 && !getpwnam(TEST_USER)) {
        fprintf(stderr, "useradd %s failed (%d)\n", TEST_USER, rc);
        abort();
    }
    created_user = rc == 0;
}

static void user_teardown(void)
{
    if (!created_user)
        return;
    const char *argv[] = {"/usr/sbin/userdel", TEST_USER, NULL};
    (void)tu_run(argv, NULL, NULL);
}

/* In a non-admin child: become the test user when root. 0 or -1. */
static int drop_to_user(void)
{
    if (getuid() != 0)
        return 0;
    struct passwd *pw = getpwnam(TEST_USER);
    if (!pw)
        return -1;
    if (setgroups(0, NULL) || setgid(pw->pw_gid) || setuid(pw->pw_uid))
        return -1;
    return 0;
}

static int child_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "non-admin child: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

/* Run fn in a child as a non-admin; assert it returned 0. The build tree
 * may not be reachable for the test user (e.g. under /root): gpuqctl is
 * copied into the daemon's directory first. */
static void as_nonadmin(int (*fn)(void))
{
    snprintf(ctl_copy, sizeof ctl_copy, "%s/gpuqctl", e2e_d.dir);
    size_t len = 0;
    void *bin = tu_read_file(GPUQCTL_PATH, &len);
    ck_assert_ptr_nonnull(bin);
    ck_assert_int_eq(tu_write_file(ctl_copy, bin, len), 0);
    free(bin);
    ck_assert_int_eq(chmod(ctl_copy, 0755), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (drop_to_user())
            _exit(child_fail("cannot become %s", TEST_USER));
        _exit(fn());
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "non-admin child failed (status %d)", st);
}

static gpuq_conn *connect_plain(const char *name)
{
    gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                           .client_name = name,
                           .priority = GPUQ_PRIO_NORMAL,
                           .device = -1};
    gpuq_conn *c = NULL;
    if (gpuq_connect(&o, &c)) {
        gpuq_close(c);
        return NULL;
    }
    return c;
}

/* ---- reading the sessions document ---- */

typedef struct sess_row {
    uint64_t id;
    int64_t pid, uid;
    char client[80];
    char priority[16];
    bool self, admin;
    uint64_t requests, errors, in_flight;
} sess_row;

static int parse_sessions(const uint8_t *doc, size_t len, sess_row *rows, int cap)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    int n = 0;
    while (gpuq_mpr_left(&r) > 0) {
        uint32_t m;
        if (gpuq_mpr_map(&r, &m) || n >= cap)
            return -1;
        sess_row *row = &rows[n++];
        memset(row, 0, sizeof *row);
        for (uint32_t i = 0; i < m; i++) {
            const char *k, *s;
            uint32_t kl, sl;
            if (gpuq_mpr_str(&r, &k, &kl))
                return -1;
#define KEY(lit) (kl == sizeof(lit) - 1 && !memcmp(k, lit, kl))
            int rc;
            if (KEY("id"))
                rc = gpuq_mpr_uint(&r, &row->id);
            else if (KEY("pid"))
                rc = gpuq_mpr_int(&r, &row->pid);
            else if (KEY("uid"))
                rc = gpuq_mpr_int(&r, &row->uid);
            else if (KEY("requests"))
                rc = gpuq_mpr_uint(&r, &row->requests);
            else if (KEY("errors"))
                rc = gpuq_mpr_uint(&r, &row->errors);
            else if (KEY("in_flight"))
                rc = gpuq_mpr_uint(&r, &row->in_flight);
            else if (KEY("self"))
                rc = gpuq_mpr_bool(&r, &row->self);
            else if (KEY("admin"))
                rc = gpuq_mpr_bool(&r, &row->admin);
            else if (KEY("client")) {
                rc = gpuq_mpr_str(&r, &s, &sl);
                if (!rc)
                    snprintf(row->client, sizeof row->client, "%.*s", (int)sl, s);
            } else if (KEY("priority")) {
                rc = gpuq_mpr_str(&r, &s, &sl);
                if (!rc)
                    snprintf(row->priority, sizeof row->priority, "%.*s", (int)sl, s);
            } else
                rc = gpuq_mpr_skip(&r);
#undef KEY
            if (rc)
                return -1;
        }
    }
    return n;
}

static int fetch_sessions(gpuq_conn *c, sess_row *rows, int cap)
{
    uint8_t *doc = NULL;
    size_t len = 0;
    uint32_t count = 0;
    int rc = gpuq_sessions(c, &doc, &len, &count);
    if (rc) {
        free(doc);
        return -1;
    }
    int n = parse_sessions(doc, len, rows, cap);
    free(doc);
    return n == (int)count ? n : -1;
}

static const sess_row *find_client(const sess_row *rows, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].client, name))
            return &rows[i];
    return NULL;
}

/* ---- observability ---- */

START_TEST(sessions_lists_clients)
{
    gpuq_conn *a = e2e_connect("alpha", GPUQ_PRIO_NORMAL);
    gpuq_conn *b = e2e_connect("beta", GPUQ_PRIO_LOW);
    gpuq_conn *v = e2e_connect("viewer", GPUQ_PRIO_NORMAL);
    ck_assert(gpuq_info(v)->admin);
    double x[4] = {1, 2, 3, 4}, y[4];
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 4, y), 0);
    double z[2] = {0, 0};
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F64, GPUQ_NORM_SUM, z, 2, y), GPUQ_E_ZERO_NORM);
    sess_row rows[16];
    int n = fetch_sessions(v, rows, 16);
    ck_assert_int_eq(n, 3);
    const sess_row *ra = find_client(rows, n, "alpha"), *rb = find_client(rows, n, "beta"),
                   *rv = find_client(rows, n, "viewer");
    ck_assert(ra && rb && rv);
    ck_assert_int_eq(ra->pid, getpid());
    ck_assert_int_eq(ra->uid, getuid());
    ck_assert_uint_eq(ra->id, gpuq_info(a)->session_id);
    ck_assert_uint_eq(ra->requests, 3); /* hello + 2 normalize */
    ck_assert_uint_eq(ra->errors, 1);
    ck_assert(rv->self && !ra->self && !rb->self);
    gpuq_close(b);
    /* b's close is seen by the daemon asynchronously */
    for (int i = 0; i < 200; i++) {
        n = fetch_sessions(v, rows, 16);
        if (n == 2)
            break;
        usleep(10000);
    }
    ck_assert_int_eq(n, 2);
    ck_assert_ptr_null(find_client(rows, n, "beta"));
    gpuq_close(a);
    gpuq_close(v);
}
END_TEST

START_TEST(metrics_parse_as_prometheus)
{
    gpuq_conn *c = e2e_connect("metrics", GPUQ_PRIO_NORMAL);
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8], z[2] = {0, 0};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_L2, false, x, 2, 4, y), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, z, 2, y), GPUQ_E_ZERO_NORM);
    /* a header that does not decode: op "none", status bad_header */
    int fd = e2e_raw_socket();
    const uint8_t junk[] = {0x93, 1, 2, 3};
    e2e_send_frame(fd, junk, sizeof junk, 0, NULL, 0);
    gpuq_reply rep;
    uint8_t hb[4096];
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hb, sizeof hb), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
    close(fd);
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(gpuq_metrics(c, &text, &len), 0);
    ck_assert_uint_eq(strlen(text), len);
    char path[320];
    snprintf(path, sizeof path, "%s/metrics.txt", e2e_d.dir);
    ck_assert_int_eq(tu_write_file(path, text, len), 0);
    free(text);
    const char *args[] = {
        path, "gpuq_requests_total{op=normalize,status=ok}=5",
        "gpuq_requests_total{op=normalize,status=zero_norm}=1",
        "gpuq_requests_total{op=none,status=bad_header}=1",
        "gpuq_request_duration_seconds_count{op=normalize,status=ok}=5",
        "gpuq_requests_total{op=hello,status=ok}=1", "gpuq_sessions=>=1", "gpuq_in_flight=0",
        "gpuq_draining=0", "gpuq_pinned_bytes_in_use=0",
        "gpuq_device_in_flight{device=-1,name=cpu}=0", "gpuq_device_sessions{device=-1,name=cpu}=1",
        "gpuq_build_info{version=0.1.0,backend=cpu}=1",
        /* CUDA only: 0 here */
        "gpuq_pipelined_requests_total=0", "gpuq_pipeline_chunks_total=0",
        "gpuq_completions_seen_total{by=spin}=0", "gpuq_completions_seen_total{by=doorbell}=0",
        "gpuq_completions_seen_total{by=poll}=0", NULL};
    const char *const *a = args;
    if (strcmp(tu_test_device(), "cpu") != 0)
        args[10] = args[11] = args[12] = NULL; /* device labels differ on CUDA */
    char err[340];
    snprintf(err, sizeof err, "%s/prom_check.err", e2e_d.dir);
    setenv("GPUQ_TEST_PY_STDERR", err, 1);
    int prc = tu_python("ref/prom_check.py", a);
    unsetenv("GPUQ_TEST_PY_STDERR");
    if (prc != 0) {
        size_t elen = 0;
        char *etext = tu_read_file(err, &elen);
        ck_abort_msg("prom_check.py exit %d:\n%.*s", prc, (int)elen, etext ? etext : "");
    }
    /* the checker must reject what is not the format */
    ck_assert_int_eq(tu_write_file(path, "gpuq_x{a=\"1} 2\n", 15), 0);
    const char *bad[] = {path, NULL};
    ck_assert_int_ne(tu_python("ref/prom_check.py", bad), 0);
    gpuq_close(c);
}
END_TEST

/* gpuqctl sessions / metrics / status: exit 0 and their headings. */
START_TEST(ctl_observability)
{
    char out[320], err[320];
    snprintf(out, sizeof out, "%s/ctl.out", e2e_d.dir);
    snprintf(err, sizeof err, "%s/ctl.err", e2e_d.dir);
    const char *forms[][4] = {
        {"sessions", NULL}, {"--json", "sessions", NULL}, {"metrics", NULL}, {"status", NULL}};
    const char *want[] = {"gpuqctl*", "\"client\":\"gpuqctl\"", "gpuq_requests_total{", "DEVICE"};
    for (int f = 0; f < 4; f++) {
        const char *argv[8] = {GPUQCTL_PATH, "--socket", e2e_d.socket};
        int n = 3;
        for (int k = 0; forms[f][k]; k++)
            argv[n++] = forms[f][k];
        argv[n] = NULL;
        ck_assert_int_eq(tu_run(argv, out, err), 0);
        size_t len = 0;
        char *text = tu_read_file(out, &len);
        ck_assert_ptr_nonnull(text);
        ck_assert_msg(strstr(text, want[f]) != NULL, "%s output lacks '%s':\n%s", forms[f][0],
                      want[f], text);
        free(text);
    }
}
END_TEST

/* ---- admin ---- */

START_TEST(set_limit_applies)
{
    gpuq_conn *c = e2e_connect("admin", GPUQ_PRIO_NORMAL);
    uint64_t old = 0;
    ck_assert_int_eq(gpuq_set_limit(c, "max_inflight", 5, &old), 0);
    ck_assert_uint_eq(old, GPUQ_DEFAULT_MAX_INFLIGHT);
    gpuq_conn *d = e2e_connect("after", GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(gpuq_info(d)->limits.max_inflight, 5);
    ck_assert_int_eq(gpuq_set_limit(c, "max_payload", 1024, NULL), 0);
    double x[256], y[256];
    for (int i = 0; i < 256; i++)
        x[i] = i + 1;
    /* 2 KiB payload over the new 1 KiB limit: refused, the stream goes on */
    gpuq_request r = e2e_norm_req(256);
    uint8_t hb[8192];
    int fd = e2e_hello_socket("raw", hb, sizeof hb);
    gpuq_reply rep;
    r.id = 2;
    e2e_send_req(fd, &r, x, sizeof x);
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hb, sizeof hb), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_TOO_LARGE);
    close(fd);
    (void)y;
    /* bad names and values: bad_argument, nothing changed */
    ck_assert_int_eq(gpuq_set_limit(c, "max_nothing", 5, NULL), GPUQ_E_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gpuq_errmsg(c), "unknown limit"));
    ck_assert_int_eq(gpuq_set_limit(c, "max_inflight", 0, NULL), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_set_limit(c, "max_header", 1ull << 40, NULL), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_set_limit(c, "max_payload", 1 << 20, NULL), 0);
    gpuq_close(d);
    d = e2e_connect("after2", GPUQ_PRIO_NORMAL);
    ck_assert_uint_eq(gpuq_info(d)->limits.max_inflight, 5);
    ck_assert_uint_eq(gpuq_info(d)->limits.max_payload, 1 << 20);
    gpuq_close(d);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

START_TEST(kill_session_closes_it)
{
    gpuq_conn *victim = e2e_connect("victim", GPUQ_PRIO_NORMAL);
    gpuq_conn *adm = e2e_connect("admin", GPUQ_PRIO_NORMAL);
    uint64_t vid = gpuq_info(victim)->session_id;
    ck_assert_int_eq(gpuq_ping(victim), 0);
    ck_assert_int_eq(gpuq_kill_session(adm, 99999), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_kill_session(adm, gpuq_info(adm)->session_id), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_kill_session(adm, vid), 0);
    int rc = gpuq_ping(victim);
    ck_assert_msg(rc == GPUQ_E_CLOSED || rc == GPUQ_E_IO, "ping after kill: %d", rc);
    ck_assert_int_eq(gpuq_kill_session(adm, vid), GPUQ_E_BAD_ARGUMENT); /* gone */
    sess_row rows[8];
    int n = fetch_sessions(adm, rows, 8);
    ck_assert_int_eq(n, 1);
    /* a raw victim that sends nothing more: its connection is closed (EOF
     * within 5 s, told apart from one left open), with no reply */
    uint8_t hb[8192];
    int fd = e2e_hello_socket("raw-victim", hb, sizeof hb);
    n = fetch_sessions(adm, rows, 8);
    const sess_row *raw = find_client(rows, n, "raw-victim");
    ck_assert_ptr_nonnull(raw);
    ck_assert_int_eq(gpuq_kill_session(adm, raw->id), 0);
    e2e_expect_closed(fd, 5);
    close(fd);
    ck_assert_int_eq(fetch_sessions(adm, rows, 8), 1);
    gpuq_close(victim);
    gpuq_close(adm);
    e2e_assert_serves();
}
END_TEST

/* Killing a session with work in flight: no leak, status back to baseline. */
START_TEST(kill_session_in_flight)
{
    /* Work that is still running when the kill comes: the CPU backend's
     * slow hook, or on a GPU pairwise jobs of ~50 ms each. */
    bool cpu = strcmp(tu_test_device(), "cpu") == 0;
    tu_daemon_stop(&e2e_d);
    setenv("GPUQ_TEST_SLOW_MS", "300", 1);
    start_admin(NULL);
    unsetenv("GPUQ_TEST_SLOW_MS");
    gpuq_conn *victim = e2e_connect("victim", GPUQ_PRIO_NORMAL);
    enum { M = 4096, D = 256, NJOB = 6 };
    float *x = calloc((size_t)M * D, sizeof *x);
    size_t out_bytes = cpu ? 64 * sizeof(double) : (size_t)M * M * sizeof(float);
    void *y = malloc(out_bytes * NJOB);
    ck_assert(x && y);
    for (size_t i = 0; i < (size_t)M * D; i++)
        x[i] = (float)(i % 97);
    for (int k = 0; k < NJOB; k++) {
        gpuq_request r;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_PAIRWISE;
        r.dtype = GPUQ_DT_F32;
        rq_set_metric(&r, GPUQ_METRIC_EUCLIDEAN);
        uint64_t m = cpu ? 8 : M;
        r.ndim_a = r.ndim_b = 2;
        r.shape_a[0] = r.shape_b[0] = m;
        r.shape_a[1] = r.shape_b[1] = D;
        size_t in = (size_t)m * D * sizeof(float);
        size_t ob = cpu ? 8 * 8 * sizeof(float) : out_bytes;
        ck_assert_int_eq(gpuq_submit(victim, &r, x, in, x, in, (char *)y + k * out_bytes, ob, NULL),
                         0);
    }
    gpuq_conn *adm = e2e_connect("admin", GPUQ_PRIO_NORMAL);
    char js[8192];
    long long infl = 0;
    for (int i = 0; i < 100 && infl < 1; i++) { /* the daemon has read them */
        ck_assert_int_eq(gpuq_status_json(adm, js, sizeof js), 0);
        infl = e2e_json_int(js, "in_flight");
        usleep(5000);
    }
    ck_assert_int_ge(infl, 1);
    ck_assert_int_eq(gpuq_kill_session(adm, gpuq_info(victim)->session_id), 0);
    for (int i = 0; i < 400; i++) {
        ck_assert_int_eq(gpuq_status_json(adm, js, sizeof js), 0);
        if (e2e_json_int(js, "in_flight") == 0 && e2e_json_int(js, "staging_bytes") == 0 &&
            e2e_json_int(js, "sessions") == 1)
            break;
        usleep(10000);
    }
    ck_assert_int_eq(e2e_json_int(js, "in_flight"), 0);
    ck_assert_int_eq(e2e_json_int(js, "staging_bytes"), 0);
    ck_assert_int_eq(e2e_json_int(js, "sessions"), 1);
    gpuq_close(victim);
    gpuq_close(adm);
    free(x);
    free(y);
    e2e_assert_serves();
}
END_TEST

START_TEST(drain_finishes_open_sessions)
{
    gpuq_conn *a = e2e_connect("worker", GPUQ_PRIO_NORMAL);
    gpuq_conn *adm = e2e_connect("admin", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_drain(adm), 0);
    gpuq_close(adm);
    /* no new sessions */
    gpuq_conn *late = connect_plain("late");
    ck_assert_ptr_null(late);
    /* the open one still works */
    double x[3] = {1, 1, 2}, y[3];
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 3, y), 0);
    ck_assert_double_eq_tol(y[2], 0.5, 1e-15);
    ck_assert_int_eq(tu_daemon_wait_exit(&e2e_d, 0.3), -1); /* still up */
    gpuq_close(a);
    ck_assert_int_eq(tu_daemon_wait_exit(&e2e_d, 30), 0);
    start_admin(NULL); /* for the fixture's teardown */
}
END_TEST

START_TEST(ctl_shutdown_exits_zero)
{
    char out[320];
    snprintf(out, sizeof out, "%s/ctl.out", e2e_d.dir);
    const char *argv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "shutdown", NULL};
    ck_assert_int_eq(tu_run(argv, out, NULL), 0);
    ck_assert_int_eq(tu_daemon_wait_exit(&e2e_d, 30), 0);
    start_admin(NULL);
    const char *kill_argv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "kill-session", "x1", NULL};
    ck_assert_int_eq(tu_run(kill_argv, NULL, NULL), 2); /* usage */
    const char *lim_argv[] = {GPUQCTL_PATH,   "--socket", e2e_d.socket, "set-limit",
                              "max_inflight", "9",        NULL};
    ck_assert_int_eq(tu_run(lim_argv, out, NULL), 0);
    size_t len = 0;
    char *text = tu_read_file(out, &len);
    ck_assert_ptr_nonnull(strstr(text, "max_inflight: 64 -> 9"));
    free(text);
}
END_TEST

/* ---- non-admin ---- */

static int nonadmin_refused_body(void)
{
    gpuq_conn *c = connect_plain("plain");
    if (!c)
        return child_fail("connect failed");
    if (gpuq_info(c)->admin)
        return child_fail("hello says admin");
    struct {
        const char *what;
        int rc;
    } calls[4];
    calls[0].what = "drain";
    calls[0].rc = gpuq_drain(c);
    calls[1].what = "shutdown";
    calls[1].rc = gpuq_shutdown(c);
    calls[2].what = "kill_session";
    calls[2].rc = gpuq_kill_session(c, 1);
    calls[3].what = "set_limit";
    calls[3].rc = gpuq_set_limit(c, "max_inflight", 1, NULL);
    for (int i = 0; i < 4; i++) {
        if (calls[i].rc != GPUQ_E_PERMISSION)
            return child_fail("%s gave %d, not permission_denied", calls[i].what, calls[i].rc);
    }
    if (!strstr(gpuq_errmsg(c), "permission_denied") || !strstr(gpuq_errmsg(c), "set_limit"))
        return child_fail("message '%s'", gpuq_errmsg(c));
    /* the session and the daemon go on */
    if (gpuq_ping(c))
        return child_fail("ping after refusals: %s", gpuq_errmsg(c));
    /* only our own sessions are listed */
    sess_row rows[8];
    int n = fetch_sessions(c, rows, 8);
    if (n != 1 || !rows[0].self || rows[0].uid != (int64_t)getuid())
        return child_fail("sessions shows %d rows (want only ours)", n);
    gpuq_close(c);
    /* gpuqctl as well: exit 1 and the error name */
    char err[320];
    snprintf(err, sizeof err, "/tmp/gpuq-nonadmin-%d.err", (int)getpid());
    const char *argv[] = {ctl_copy, "--socket", e2e_d.socket, "shutdown", NULL};
    int rc = tu_run(argv, NULL, err);
    size_t len = 0;
    char *text = tu_read_file(err, &len);
    unlink(err);
    if (rc != 1 || !text || !strstr(text, "gpuqctl: permission_denied:"))
        return child_fail("gpuqctl shutdown: exit %d, stderr '%s'", rc, text ? text : "");
    free(text);
    return 0;
}

START_TEST(nonadmin_refused)
{
    gpuq_conn *adm = NULL;
    if (getuid() != 0) {
        /* no admin group: we are a plain user */
        tu_daemon_stop(&e2e_d);
        e2e_start(NULL);
    } else {
        adm = e2e_connect("root-session", GPUQ_PRIO_NORMAL); /* must stay hidden */
    }
    as_nonadmin(nonadmin_refused_body);
    gpuq_close(adm);
    e2e_assert_serves();
}
END_TEST

/* Caps from a config file: a [user] rule for the non-admin. */
static int caps_body(void)
{
    gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                           .client_name = "capped",
                           .priority = GPUQ_PRIO_HIGH,
                           .device = -1};
    gpuq_conn *c = NULL;
    if (gpuq_connect(&o, &c))
        return child_fail("connect: %s", c ? gpuq_errmsg(c) : "?");
    const gpuq_server_info *si = gpuq_info(c);
    if (si->priority_granted != GPUQ_PRIO_LOW)
        return child_fail("asked high, granted %d (want low)", si->priority_granted);
    if (si->limits.max_inflight != 2 || si->limits.session_staging != (1u << 20))
        return child_fail("caps in hello: max_inflight %u, session_staging %llu",
                          si->limits.max_inflight, (unsigned long long)si->limits.session_staging);
    /* a request needing more than 1 MiB of staging: too_large (by socket:
     * through an arena it would need no staging) */
    if (gpuq_set_transport(c, GPUQ_TRANSPORT_SOCKET))
        return child_fail("set_transport: %s", gpuq_errmsg(c));
    static double x[100000], y[100000];
    for (int i = 0; i < 100000; i++)
        x[i] = 1;
    int rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 100000, y);
    if (rc != GPUQ_E_TOO_LARGE)
        return child_fail("1.6 MB request: %d, want too_large", rc);
    rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 1000, y);
    if (rc || y[0] != 1e-3)
        return child_fail("small request after: %d", rc);
    gpuq_close(c);
    return 0;
}

/* Restart the daemon with a config file whose text is fmt with the test's
 * non-admin peer (gpuq-test-user under root, else this uid) as its one %s,
 * and this process an admin when it is root. Returns the config's directory
 * (static; the caller removes it). */
static const char *start_with_user_rule(const char *fmt)
{
    static char dir[256];
    char path[320], rule[64], text[512];
    tu_daemon_stop(&e2e_d);
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/gpuqd.conf", dir);
    if (getuid() == 0)
        snprintf(rule, sizeof rule, "%s", TEST_USER);
    else
        snprintf(rule, sizeof rule, "%u", (unsigned)getuid());
    int n = snprintf(text, sizeof text, fmt, rule);
    ck_assert_int_eq(tu_write_file(path, text, (size_t)n), 0);
    const char *extra[] = {"--config", path, NULL};
    if (getuid() == 0)
        start_admin(extra);
    else
        e2e_start(extra);
    return dir;
}

START_TEST(caps_from_config)
{
    const char *dir =
        start_with_user_rule("[policy]\nmax_priority = normal\n\n[user %s]\nmax_priority = low\n"
                             "max_inflight = 2\nsession_staging = 1M\n");
    as_nonadmin(caps_body);
    if (getuid() == 0) {
        /* root is an admin: not capped by max_priority, no rule names it */
        gpuq_conn *r = e2e_connect("root", GPUQ_PRIO_HIGH);
        ck_assert_int_eq(gpuq_info(r)->priority_granted, GPUQ_PRIO_HIGH);
        ck_assert_uint_eq(gpuq_info(r)->limits.max_inflight, GPUQ_DEFAULT_MAX_INFLIGHT);
        gpuq_close(r);
    }
    tu_rmtree(dir);
}
END_TEST

/* A [user] rule asking more than the global limits (session_staging 1M
 * over 64K, max_inflight 50 over 3): the hello reports the global limits,
 * and they hold at the byte: a 4096-element f64 normalize takes exactly
 * 65536 bytes of staging and runs, 4097 elements take 65608, class 81920:
 * too_large; the session goes on. */
static int caps_above_body(void)
{
    gpuq_conn *c = connect_plain("over-asked");
    if (!c)
        return child_fail("connect failed");
    const gpuq_server_info *si = gpuq_info(c);
    if (si->limits.session_staging != 65536 || si->limits.max_inflight != 3)
        return child_fail("a rule above the limits: hello says session_staging %llu, "
                          "max_inflight %u (want 65536, 3)",
                          (unsigned long long)si->limits.session_staging, si->limits.max_inflight);
    static double x[4097], y[4097];
    for (int i = 0; i < 4097; i++)
        x[i] = 1;
    int rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 4096, y);
    if (rc || y[0] != 1.0 / 4096)
        return child_fail("4096 elements (65536 bytes of staging): %d %s", rc, gpuq_errmsg(c));
    rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 4097, y);
    if (rc != GPUQ_E_TOO_LARGE || !strstr(gpuq_errmsg(c), "65608 bytes of staging (81920"))
        return child_fail("4097 elements: %d (%s), want too_large", rc, gpuq_errmsg(c));
    rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 4, y);
    if (rc || y[0] != 0.25)
        return child_fail("small request after: %d", rc);
    gpuq_close(c);
    return 0;
}

START_TEST(caps_never_above_limits)
{
    const char *dir = start_with_user_rule("[limits]\nsession_staging = 64K\nmax_inflight = 3\n\n"
                                           "[user %s]\nsession_staging = 1M\nmax_inflight = 50\n");
    as_nonadmin(caps_above_body);
    tu_rmtree(dir);
    e2e_assert_serves();
}
END_TEST

/* ---- priority: one scale, and a cap that holds ----
 * The helpers below run in the non-admin child: they report with
 * child_fail, never ck_assert. */

/* A priority as hello sends it: the string s, or else the int i. */
typedef struct prio_ask {
    const char *s;
    int64_t i;
} prio_ask;

static int child_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(e2e_d.socket);
    struct timeval tv = {.tv_sec = 30};
    if (len >= sizeof sa.sun_path) {
        close(fd);
        return -1;
    }
    memcpy(sa.sun_path, e2e_d.socket, len + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int child_io(int fd, void *buf, size_t len, bool out)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Send a hello asking *a on fd and decode its reply into *rep (its
 * strings and info point into hbuf[hcap]). 0 or -1. */
static int child_hello_reply(int fd, const prio_ask *a, uint8_t *hbuf, size_t hcap, gpuq_reply *rep)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return -1;
    gpuq_mpw_map(w, 5);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, 1);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, "hello");
    gpuq_mpw_str(w, "version");
    gpuq_mpw_uint(w, GPUQ_PROTO_VERSION);
    gpuq_mpw_str(w, "client");
    gpuq_mpw_str(w, "prio-cap");
    gpuq_mpw_str(w, "priority");
    if (a->s)
        gpuq_mpw_str(w, a->s);
    else
        gpuq_mpw_int(w, a->i);
    uint8_t *h = NULL;
    size_t hl = 0;
    int rc = gpuq_mpw_take(w, &h, &hl);
    gpuq_mpw_free(w);
    if (rc)
        return -1;
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = GPUQ_KIND_REQUEST,
                     .header_len = (uint32_t)hl,
                     .payload_len = 0};
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&p, pre);
    rc = child_io(fd, pre, sizeof pre, true) || child_io(fd, h, hl, true);
    free(h);
    if (rc || child_io(fd, pre, sizeof pre, false) || gpuq_prefix_decode(pre, sizeof pre, &p) ||
        p.kind != GPUQ_KIND_REPLY || p.header_len > hcap || p.payload_len != 0 ||
        child_io(fd, hbuf, p.header_len, false))
        return -1;
    char why[128];
    return gpuq_reply_decode(hbuf, p.header_len, rep, why, sizeof why) ? -1 : 0;
}

/* Send a hello asking *a on fd and read its reply: *status, the message,
 * and on success the granted level and stream priority. 0 or -1. */
static int child_hello(int fd, const prio_ask *a, int *status, char *msg, size_t cap, int64_t *prio,
                       int64_t *stream)
{
    uint8_t hbuf[8192];
    gpuq_reply rep;
    int rc;
    if (child_hello_reply(fd, a, hbuf, sizeof hbuf, &rep))
        return -1;
    *status = rep.status;
    snprintf(msg, cap, "%s", rep.message);
    *prio = *stream = INT64_MIN;
    if (rep.status != 0)
        return 0;
    gpuq_mpr r;
    gpuq_mpr_init(&r, rep.info, rep.info ? rep.info_len : 0);
    uint32_t n;
    if (!rep.info || gpuq_mpr_map(&r, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        if (gpuq_mpr_str(&r, &k, &kl))
            return -1;
        if (kl == 8 && !memcmp(k, "priority", 8))
            rc = gpuq_mpr_int(&r, prio);
        else if (kl == 15 && !memcmp(k, "stream_priority", 15))
            rc = gpuq_mpr_int(&r, stream);
        else
            rc = gpuq_mpr_skip(&r);
        if (rc)
            return -1;
    }
    return *prio == INT64_MIN || *stream == INT64_MIN ? -1 : 0;
}

static const char *ask_str(const prio_ask *a, char *buf, size_t cap)
{
    if (a->s)
        snprintf(buf, cap, "\"%s\"", a->s);
    else
        snprintf(buf, cap, "%lld", (long long)a->i);
    return buf;
}

/* The test user, capped at low by a [user] rule: every level it asks is
 * granted low, with low's stream priority; values off the scale are
 * bad_argument (and the same connection's next hello still works). */
static int prio_cap_body(void)
{
    static const prio_ask low = {"low", 0};
    int st, fd = child_socket();
    char msg[256], b[32];
    int64_t prio, low_stream;
    if (fd < 0 || child_hello(fd, &low, &st, msg, sizeof msg, &prio, &low_stream))
        return child_fail("hello \"low\": no reply");
    close(fd);
    if (st != 0 || prio != GPUQ_PRIO_LOW)
        return child_fail("asked low: status %d (%s), granted %lld", st, msg, (long long)prio);
    static const prio_ask asks[] = {{"high", 0}, {"normal", 0}, {"low", 0},
                                    {NULL, 1},   {NULL, 0},     {NULL, -1}};
    for (size_t k = 0; k < sizeof asks / sizeof asks[0]; k++) {
        int64_t stream;
        fd = child_socket();
        if (fd < 0 || child_hello(fd, &asks[k], &st, msg, sizeof msg, &prio, &stream))
            return child_fail("hello %s: no reply", ask_str(&asks[k], b, sizeof b));
        close(fd);
        if (st != 0)
            return child_fail("asked %s: %s: %s", ask_str(&asks[k], b, sizeof b), gpuq_errname(st),
                              msg);
        if (prio != GPUQ_PRIO_LOW || stream != low_stream)
            return child_fail("asked %s under a low cap: granted %lld, stream priority %lld "
                              "(low: %lld)",
                              ask_str(&asks[k], b, sizeof b), (long long)prio, (long long)stream,
                              (long long)low_stream);
    }
    /* Off the scale: the old CUDA-number form (-5 asked the most urgent
     * stream; 5 was granted high) and other values. */
    static const prio_ask bad[] = {{NULL, -5}, {NULL, 5}, {NULL, 2}, {NULL, -2}, {"urgent", 0}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int64_t stream;
        fd = child_socket();
        if (fd < 0 || child_hello(fd, &bad[k], &st, msg, sizeof msg, &prio, &stream))
            return child_fail("hello %s: no reply", ask_str(&bad[k], b, sizeof b));
        if (st != GPUQ_E_BAD_ARGUMENT || !strstr(msg, "priority"))
            return child_fail("asked %s: status %s (%s), want bad_argument",
                              ask_str(&bad[k], b, sizeof b), gpuq_errname(st), msg);
        static const prio_ask high = {"high", 0};
        if (child_hello(fd, &high, &st, msg, sizeof msg, &prio, &stream) || st != 0 ||
            prio != GPUQ_PRIO_LOW || stream != low_stream)
            return child_fail("hello after %s was refused: status %d, granted %lld",
                              ask_str(&bad[k], b, sizeof b), st, (long long)prio);
        close(fd);
    }
    /* libgpuq and the sessions document say the same */
    gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                           .client_name = "capped-lib",
                           .priority = GPUQ_PRIO_HIGH,
                           .device = -1};
    gpuq_conn *c = NULL;
    if (gpuq_connect(&o, &c))
        return child_fail("connect: %s", c ? gpuq_errmsg(c) : "?");
    if (gpuq_info(c)->priority_granted != GPUQ_PRIO_LOW ||
        gpuq_info(c)->stream_priority != low_stream)
        return child_fail("libgpuq asked high: granted %d, stream %d",
                          gpuq_info(c)->priority_granted, gpuq_info(c)->stream_priority);
    sess_row rows[8];
    int n = fetch_sessions(c, rows, 8);
    const sess_row *me = n > 0 ? find_client(rows, n, "capped-lib") : NULL;
    if (!me || strcmp(me->priority, "low"))
        return child_fail("sessions: %d rows, ours says priority '%s'", n, me ? me->priority : "?");
    gpuq_close(c);
    return 0;
}

START_TEST(priority_cap_holds)
{
    const char *dir = start_with_user_rule("[user %s]\nmax_priority = low\n");
    as_nonadmin(prio_cap_body);
    if (getuid() == 0) {
        /* root is an admin, no rule names it: high is granted high, with a
         * stream priority at least as urgent as low's (more on CUDA) */
        gpuq_conn *lo = e2e_connect("root-low", GPUQ_PRIO_LOW);
        gpuq_conn *hi = e2e_connect("root-high", GPUQ_PRIO_HIGH);
        ck_assert_int_eq(gpuq_info(lo)->priority_granted, GPUQ_PRIO_LOW);
        ck_assert_int_eq(gpuq_info(hi)->priority_granted, GPUQ_PRIO_HIGH);
        if (!strcmp(gpuq_info(hi)->backend, "cuda"))
            ck_assert_int_lt(gpuq_info(hi)->stream_priority, gpuq_info(lo)->stream_priority);
        else
            ck_assert_int_eq(gpuq_info(hi)->stream_priority, 0);
        gpuq_close(lo);
        gpuq_close(hi);
    }
    e2e_assert_serves();
    tu_rmtree(dir);
}
END_TEST

/* ---- session_arena from [user] and [group] rules ----
 * The helpers below run in the non-admin child and in the parent alike:
 * they report with child_fail, never ck_assert. */

/* A hello on a fresh socket: its limits.session_arena and info.arenas
 * (libgpuq keeps no "arenas"). 0 or -1. */
static int hello_arena_caps(uint64_t *session_arena, bool *arenas)
{
    static const prio_ask normal = {"normal", 0};
    uint8_t hbuf[8192];
    gpuq_reply rep;
    int fd = child_socket();
    if (fd < 0)
        return -1;
    int rc = child_hello_reply(fd, &normal, hbuf, sizeof hbuf, &rep);
    close(fd);
    if (rc || rep.status != 0 || !rep.info)
        return -1;
    bool got_sa = false, got_on = false;
    gpuq_mpr r;
    gpuq_mpr_init(&r, rep.info, rep.info_len);
    uint32_t n, m;
    if (gpuq_mpr_map(&r, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        if (gpuq_mpr_str(&r, &k, &kl))
            return -1;
        if (kl == 6 && !memcmp(k, "arenas", 6)) {
            rc = gpuq_mpr_bool(&r, arenas);
            got_on = true;
        } else if (kl == 6 && !memcmp(k, "limits", 6)) {
            rc = gpuq_mpr_map(&r, &m);
            for (uint32_t j = 0; !rc && j < m; j++) {
                if ((rc = gpuq_mpr_str(&r, &k, &kl)) != 0)
                    break;
                if (kl == 13 && !memcmp(k, "session_arena", 13)) {
                    rc = gpuq_mpr_uint(&r, session_arena);
                    got_sa = true;
                } else {
                    rc = gpuq_mpr_skip(&r);
                }
            }
        } else {
            rc = gpuq_mpr_skip(&r);
        }
        if (rc)
            return -1;
    }
    return got_sa && got_on ? 0 : -1;
}

/* A memfd of size bytes sealed against shrinking and growing, as
 * arena_import wants it; -1 on failure. */
static int sealed_memfd(size_t size)
{
    int fd = memfd_create("gpuq-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The session_arena the child's rule gives it (set before as_nonadmin; the
 * fork copies it). */
static uint64_t want_arena;

/* The child, capped at want_arena by a rule: the hello says so (limits and
 * "arenas"), and arena_open / arena_import are held to it with the errors
 * the global limit gives (arena.c): over the cap or with arenas off,
 * too_large; the session and the daemon go on. */
static int arena_cap_body(void)
{
    const uint64_t cap = want_arena;
    uint64_t sa = 0;
    bool on = false;
    if (hello_arena_caps(&sa, &on))
        return child_fail("raw hello: no session_arena/arenas in the reply");
    if (sa != cap || on != (cap > 0))
        return child_fail("hello: limits.session_arena %llu, arenas %d (want %llu, %d)",
                          (unsigned long long)sa, on, (unsigned long long)cap, cap > 0);
    gpuq_conn *c = connect_plain("arena-capped");
    if (!c)
        return child_fail("connect failed");
    if (gpuq_info(c)->limits.session_arena != cap)
        return child_fail("libgpuq: limits.session_arena %llu (want %llu)",
                          (unsigned long long)gpuq_info(c)->limits.session_arena,
                          (unsigned long long)cap);
    gpuq_arena *a = NULL, *b = NULL;
    char want[160];
    int rc, fd;
    if (cap == 0) {
        rc = gpuq_arena_open(c, 4096, &a);
        if (rc != GPUQ_E_TOO_LARGE || !strstr(gpuq_errmsg(c), "arenas are off (session_arena 0)"))
            return child_fail("arena_open with arenas off: %d (%s)", rc, gpuq_errmsg(c));
        if ((fd = sealed_memfd(8192)) < 0)
            return child_fail("memfd: %s", strerror(errno));
        rc = gpuq_arena_import(c, fd, &b);
        close(fd);
        if (rc != GPUQ_E_TOO_LARGE || !strstr(gpuq_errmsg(c), "arenas are off"))
            return child_fail("arena_import with arenas off: %d (%s)", rc, gpuq_errmsg(c));
    } else {
        /* one page over the cap (arenas are whole pages) */
        rc = gpuq_arena_open(c, cap + 1, &a);
        snprintf(want, sizeof want,
                 "arena of %llu bytes: the session holds 0 of session_arena %llu",
                 (unsigned long long)(cap + 4096), (unsigned long long)cap);
        if (rc != GPUQ_E_TOO_LARGE || !strstr(gpuq_errmsg(c), want))
            return child_fail("arena_open(cap + 1): %d (%s), want too_large '%s'", rc,
                              gpuq_errmsg(c), want);
        if ((rc = gpuq_arena_open(c, cap, &a)) != 0)
            return child_fail("arena_open(cap): %d (%s)", rc, gpuq_errmsg(c));
        rc = gpuq_arena_open(c, 4096, &b);
        snprintf(want, sizeof want, "the session holds %llu of session_arena %llu",
                 (unsigned long long)cap, (unsigned long long)cap);
        if (rc != GPUQ_E_TOO_LARGE || !strstr(gpuq_errmsg(c), want))
            return child_fail("a page over a full cap: %d (%s)", rc, gpuq_errmsg(c));
        /* the arena at the cap works */
        double *x = gpuq_arena_alloc(a, 16 * sizeof(double));
        double *y = gpuq_arena_alloc(a, 16 * sizeof(double));
        if (!x || !y)
            return child_fail("gpuq_arena_alloc failed");
        for (int i = 0; i < 16; i++)
            x[i] = 1;
        rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 16, y);
        if (rc || y[15] != 1.0 / 16)
            return child_fail("normalize in the arena: %d (%s)", rc, gpuq_errmsg(c));
        if (gpuq_arena_close(a))
            return child_fail("arena_close: %s", gpuq_errmsg(c));
        /* arena_import is held to the same cap: twice it is refused, a page fits */
        if ((fd = sealed_memfd((size_t)cap * 2)) < 0)
            return child_fail("memfd: %s", strerror(errno));
        rc = gpuq_arena_import(c, fd, &b);
        close(fd);
        snprintf(want, sizeof want,
                 "arena of %llu bytes: the session holds 0 of session_arena %llu",
                 (unsigned long long)cap * 2, (unsigned long long)cap);
        if (rc != GPUQ_E_TOO_LARGE || !strstr(gpuq_errmsg(c), want))
            return child_fail("arena_import(2 * cap): %d (%s)", rc, gpuq_errmsg(c));
        if ((fd = sealed_memfd(4096)) < 0)
            return child_fail("memfd: %s", strerror(errno));
        rc = gpuq_arena_import(c, fd, &b);
        close(fd);
        if (rc || gpuq_arena_close(b))
            return child_fail("arena_import of a page: %d (%s)", rc, gpuq_errmsg(c));
    }
    /* the session goes on */
    if (gpuq_ping(c))
        return child_fail("ping after: %s", gpuq_errmsg(c));
    static double x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = 1;
    rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 64, y);
    if (rc || y[0] != 1.0 / 64)
        return child_fail("normalize after: %d (%s)", rc, gpuq_errmsg(c));
    gpuq_close(c);
    return 0;
}

/* A [user] rule of 1M for the non-admin peer; a [group] rule of 0 for this
 * process's primary group. Run as root, the group rule names root's group:
 * root, an admin, is capped by it (arenas off) and the test user, not a
 * member, gets its 1M. Run as a plain user, both name this process: the
 * [user] rule wins. */
START_TEST(arena_cap_from_user_rule)
{
    char fmt[256];
    snprintf(fmt, sizeof fmt,
             "[limits]\nsession_arena = 8M\n\n[group %u]\nsession_arena = 0\n\n"
             "[user %%s]\nsession_arena = 1M\n",
             (unsigned)getgid());
    const char *dir = start_with_user_rule(fmt);
    want_arena = 1u << 20;
    as_nonadmin(arena_cap_body);
    if (getuid() == 0) {
        uint64_t sa = 1;
        bool on = true;
        ck_assert_int_eq(hello_arena_caps(&sa, &on), 0);
        ck_assert_uint_eq(sa, 0);
        ck_assert(!on);
        gpuq_conn *r = e2e_connect("root-arena", GPUQ_PRIO_NORMAL);
        ck_assert(gpuq_info(r)->admin);
        ck_assert_uint_eq(gpuq_info(r)->limits.session_arena, 0);
        gpuq_arena *a = NULL;
        ck_assert_int_eq(gpuq_arena_open(r, 4096, &a), GPUQ_E_TOO_LARGE);
        ck_assert_msg(strstr(gpuq_errmsg(r), "arenas are off (session_arena 0)"), "%s",
                      gpuq_errmsg(r));
        ck_assert_int_eq(gpuq_ping(r), 0);
        gpuq_close(r);
    }
    e2e_assert_serves();
    tu_rmtree(dir);
}
END_TEST

/* The daemon's log holds want within 10 s; fails the test otherwise. */
static void wait_daemon_log(const char *want)
{
    for (int i = 0; i < 200; i++) {
        size_t len = 0;
        char *text = tu_read_file(e2e_d.log, &len);
        bool found = text && strstr(text, want);
        free(text);
        if (found)
            return;
        usleep(50 * 1000);
    }
    ck_abort_msg("the daemon's log (%s) never said '%s'", e2e_d.log, want);
}

/* A [group] rule of 0 for the non-admin peer's primary group turns its
 * arenas off (its [user] rule sets only max_inflight, so the group's
 * session_arena applies); root, not a member, keeps the global limit. A
 * SIGHUP after the rule changed to 2M: new sessions get 2M, and the log
 * says what changed. */
START_TEST(arena_off_from_group_rule)
{
    gid_t gid = getgid();
    if (getuid() == 0) {
        struct passwd *pw = getpwnam(TEST_USER);
        ck_assert_ptr_nonnull(pw);
        gid = pw->pw_gid;
        ck_assert_uint_ne(gid, 0); /* else root would be a member too */
    }
    static const char text[] = "[limits]\nsession_arena = 8M\n\n[group %u]\nsession_arena = %s\n"
                               "\n[user %%s]\nmax_inflight = 4\n";
    char fmt[256];
    snprintf(fmt, sizeof fmt, text, (unsigned)gid, "0");
    const char *dir = start_with_user_rule(fmt);
    want_arena = 0;
    as_nonadmin(arena_cap_body);
    if (getuid() == 0) {
        uint64_t sa = 0;
        bool on = false;
        ck_assert_int_eq(hello_arena_caps(&sa, &on), 0);
        ck_assert_uint_eq(sa, 8u << 20);
        ck_assert(on);
        gpuq_conn *r = e2e_connect("root-arena", GPUQ_PRIO_NORMAL);
        gpuq_arena *a = NULL;
        ck_assert_msg(gpuq_arena_open(r, 8u << 20, &a) == 0, "%s", gpuq_errmsg(r));
        ck_assert_int_eq(gpuq_arena_close(a), 0);
        gpuq_close(r);
    }
    /* the rule changes to 2M; SIGHUP */
    char path[320], conf[512], rule[64], want[160];
    snprintf(path, sizeof path, "%s/gpuqd.conf", dir);
    if (getuid() == 0)
        snprintf(rule, sizeof rule, "%s", TEST_USER);
    else
        snprintf(rule, sizeof rule, "%u", (unsigned)getuid());
    snprintf(fmt, sizeof fmt, text, (unsigned)gid, "2M");
    int n = snprintf(conf, sizeof conf, fmt, rule);
    ck_assert_int_eq(tu_write_file(path, conf, (size_t)n), 0);
    tu_daemon_kill(&e2e_d, SIGHUP);
    snprintf(want, sizeof want, "reload: policy: [group %u] session_arena 0 -> 2097152",
             (unsigned)gid);
    wait_daemon_log(want);
    want_arena = 2u << 20;
    as_nonadmin(arena_cap_body);
    e2e_assert_serves();
    tu_rmtree(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_admin");
    TCase *obs = tcase_create("observe");
    tcase_add_checked_fixture(obs, admin_setup, e2e_teardown);
    tcase_set_timeout(obs, 60);
    tcase_add_test(obs, sessions_lists_clients);
    tcase_add_test(obs, metrics_parse_as_prometheus);
    tcase_add_test(obs, ctl_observability);
    suite_add_tcase(s, obs);
    TCase *adm = tcase_create("admin");
    tcase_add_checked_fixture(adm, admin_setup, e2e_teardown);
    tcase_set_timeout(adm, 60);
    tcase_add_test(adm, set_limit_applies);
    tcase_add_test(adm, kill_session_closes_it);
    tcase_add_test(adm, kill_session_in_flight);
    tcase_add_test(adm, drain_finishes_open_sessions);
    tcase_add_test(adm, ctl_shutdown_exits_zero);
    suite_add_tcase(s, adm);
    TCase *na = tcase_create("nonadmin");
    tcase_add_unchecked_fixture(na, user_setup, user_teardown);
    tcase_add_checked_fixture(na, admin_setup, e2e_teardown);
    tcase_set_timeout(na, 60);
    tcase_add_test(na, nonadmin_refused);
    tcase_add_test(na, caps_from_config);
    tcase_add_test(na, caps_never_above_limits);
    tcase_add_test(na, priority_cap_holds);
    tcase_add_test(na, arena_cap_from_user_rule);
    tcase_add_test(na, arena_off_from_group_rule);
    suite_add_tcase(s, na);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
