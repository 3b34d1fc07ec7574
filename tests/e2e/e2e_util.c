/* SPDX-License-Identifier: Apache-2.0 */
/* e2e_util.c - see e2e_util.h. */
#include "e2e_util.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"

tu_daemon e2e_d;

void e2e_start(const char *const *extra)
{
    tu_daemon_start(&e2e_d, tu_test_device(), extra);
}

void e2e_restart(const char *const *extra)
{
    e2e_teardown();
    e2e_start(extra);
}

void e2e_setup(void)
{
    e2e_start(NULL);
}

void e2e_teardown(void)
{
    int rc = tu_daemon_stop(&e2e_d);
    ck_assert_int_eq(rc, 0);
}

gpuq_conn *e2e_connect(const char *name, int priority)
{
    gpuq_connect_opts o = {
        .socket_path = e2e_d.socket, .client_name = name, .priority = priority, .device = -1};
    gpuq_conn *c = NULL;
    int rc = gpuq_connect(&o, &c);
    ck_assert_msg(rc == 0, "connect: %s", gpuq_strerror(rc));
    return c;
}

int e2e_raw_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    ck_assert_uint_lt(strlen(e2e_d.socket), sizeof sa.sun_path);
    memcpy(sa.sun_path, e2e_d.socket, strlen(e2e_d.socket) + 1);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s",
                  strerror(errno));
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return; /* the daemon may close on us: that is what some tests check */
        p += w;
        len -= (size_t)w;
    }
}

/* 0, E2E_CLOSED (EOF, ECONNRESET) or E2E_TIMED_OUT (SO_RCVTIMEO expired);
 * any other error fails the test. */
static int recv_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t r = recv(fd, p, len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return E2E_CLOSED;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return E2E_TIMED_OUT;
        ck_assert_msg(r > 0, "recv from gpuqd: %s", strerror(errno));
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static void set_rcvtimeo(int fd, double seconds)
{
    struct timeval tv = {.tv_sec = (time_t)seconds,
                         .tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
}

void e2e_send_frame(int fd, const void *hdr, uint32_t hlen, uint64_t payload_len,
                    const void *payload, size_t plen)
{
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = GPUQ_KIND_REQUEST,
                     .header_len = hlen,
                     .payload_len = payload_len};
    uint8_t pre[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&p, pre);
    send_all(fd, pre, sizeof pre);
    send_all(fd, hdr, hlen);
    if (plen)
        send_all(fd, payload, plen);
}

void e2e_send_req(int fd, const gpuq_request *req, const void *payload, size_t plen)
{
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_request_encode(req, &h, &hl), 0);
    e2e_send_frame(fd, h, (uint32_t)hl, plen, payload, plen);
    free(h);
}

void e2e_append_req(uint8_t **buf, size_t *len, const gpuq_request *req, const void *payload,
                    size_t plen)
{
    uint8_t *h = NULL;
    size_t hl = 0;
    ck_assert_int_eq(gpuq_request_encode(req, &h, &hl), 0);
    gpuq_prefix p = {.version = GPUQ_PROTO_VERSION,
                     .kind = GPUQ_KIND_REQUEST,
                     .header_len = (uint32_t)hl,
                     .payload_len = plen};
    uint8_t *b = realloc(*buf, *len + GPUQ_PREFIX_SIZE + hl + plen);
    ck_assert_ptr_nonnull(b);
    gpuq_prefix_encode(&p, b + *len);
    memcpy(b + *len + GPUQ_PREFIX_SIZE, h, hl);
    if (plen)
        memcpy(b + *len + GPUQ_PREFIX_SIZE + hl, payload, plen);
    *buf = b;
    *len += GPUQ_PREFIX_SIZE + hl + plen;
    free(h);
}

int e2e_read_reply(int fd, gpuq_reply *rep, uint8_t *hdrbuf, size_t hdrcap)
{
    return e2e_read_reply_data(fd, rep, hdrbuf, hdrcap, NULL, 0, NULL);
}

int e2e_read_reply_data(int fd, gpuq_reply *rep, uint8_t *hdrbuf, size_t hdrcap, void *data,
                        size_t cap, size_t *len)
{
    uint8_t pre[GPUQ_PREFIX_SIZE];
    int rc = recv_all(fd, pre, sizeof pre);
    if (rc < 0)
        return rc;
    gpuq_prefix p;
    ck_assert_int_eq(gpuq_prefix_decode(pre, sizeof pre, &p), 0);
    ck_assert_int_eq(p.kind, GPUQ_KIND_REPLY);
    ck_assert_uint_le(p.header_len, hdrcap);
    if ((rc = recv_all(fd, hdrbuf, p.header_len)) < 0)
        return rc;
    /* every string the daemon sends is UTF-8, by a decoder that is not gpuq's */
    ck_assert_msg(tu_msgpack_strings_utf8(hdrbuf, p.header_len) >= 0,
                  "reply header with a string that is not UTF-8");
    char msg[128];
    ck_assert_msg(gpuq_reply_decode(hdrbuf, p.header_len, rep, msg, sizeof msg) == 0,
                  "reply decode: %s", msg);
    if (len)
        *len = (size_t)p.payload_len;
    if (data) {
        ck_assert_msg(p.payload_len <= cap, "reply payload of %llu bytes, room for %zu",
                      (unsigned long long)p.payload_len, cap);
        return p.payload_len ? recv_all(fd, data, (size_t)p.payload_len) : 0;
    }
    uint8_t junk[4096];
    uint64_t left = p.payload_len;
    while (left > 0) {
        size_t n = left < sizeof junk ? (size_t)left : sizeof junk;
        if ((rc = recv_all(fd, junk, n)) < 0)
            return rc;
        left -= n;
    }
    return 0;
}

int e2e_read_reply_within(int fd, gpuq_reply *rep, uint8_t *hdrbuf, size_t hdrcap, double seconds)
{
    struct timeval old;
    socklen_t olen = sizeof old;
    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &old, &olen), 0);
    set_rcvtimeo(fd, seconds);
    int rc = e2e_read_reply(fd, rep, hdrbuf, hdrcap);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &old, sizeof old), 0);
    return rc;
}

int e2e_hello_socket(const char *client, uint8_t *hbuf, size_t cap)
{
    int fd = e2e_raw_socket();
    gpuq_request h;
    gpuq_request_init(&h);
    h.op = GPUQ_OP_HELLO;
    h.id = 1;
    h.version = GPUQ_PROTO_VERSION;
    snprintf(h.client, sizeof h.client, "%s", client);
    e2e_send_req(fd, &h, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, cap), 0);
    ck_assert_int_eq(rep.status, 0);
    return fd;
}

gpuq_request e2e_norm_req(uint64_t n)
{
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_NORMALIZE;
    r.dtype = GPUQ_DT_F64;
    r.ndim_a = 1;
    r.shape_a[0] = n;
    return r;
}

void e2e_expect_closed(int fd, double seconds)
{
    set_rcvtimeo(fd, seconds);
    uint8_t b;
    int rc = recv_all(fd, &b, 1);
    ck_assert_msg(rc != 0, "expected the daemon to close the connection, got a byte (0x%02x)", b);
    ck_assert_msg(rc == E2E_CLOSED,
                  "expected the daemon to close the connection within %g s: timed out (still "
                  "open)",
                  seconds);
}

void e2e_expect_closed_promptly(int fd)
{
    double t0 = tu_now_s();
    e2e_expect_closed(fd, 5);
    double dt = tu_now_s() - t0;
    ck_assert_msg(dt < E2E_PROMPT_CLOSE_S,
                  "closed %.2f s after the final reply: by the linger, not right after the reply",
                  dt);
}

const char *e2e_expect_error_then_close(int fd, int code, uint64_t id)
{
    static uint8_t hb[65536];
    static char message[sizeof((gpuq_reply *)0)->message];
    gpuq_reply rep;
    int rc = e2e_read_reply_within(fd, &rep, hb, sizeof hb, 5);
    ck_assert_msg(rc == 0, "expected a %s reply before the close: %s", gpuq_errname(code),
                  rc == E2E_CLOSED ? "closed without it" : "nothing within 5 s (still open)");
    ck_assert_msg(rep.status == code, "got %s (%s), want %s", gpuq_errname(rep.status), rep.message,
                  gpuq_errname(code));
    ck_assert_uint_eq(rep.id, id);
    ck_assert_msg(rep.message[0] != '\0', "error reply without a message");
    snprintf(message, sizeof message, "%s", rep.message);
    e2e_expect_closed_promptly(fd);
    return message;
}

void e2e_assert_serves(void)
{
    gpuq_conn *c = e2e_connect("probe", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_ping(c), 0);
    double x[3] = {1, 2, 5}, y[3];
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 3, y), 0);
    ck_assert_double_eq_tol(y[2], 0.625, 1e-15);
    gpuq_close(c);
}

void e2e_status(char *buf, size_t cap)
{
    gpuq_conn *c = e2e_connect("status", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_status_json(c, buf, cap), 0);
    gpuq_close(c);
}

long long e2e_status_int(const char *key)
{
    static char js[65536];
    e2e_status(js, sizeof js);
    return e2e_json_int(js, key);
}

void e2e_wait_status(const char *key, long long want, double timeout_s)
{
    double end = tu_now_s() + timeout_s;
    long long v;
    while ((v = e2e_status_int(key)) != want) {
        ck_assert_msg(tu_now_s() < end, "status %s is %lld, not %lld after %.1f s", key, v, want,
                      timeout_s);
        tu_sleep_s(0.02);
    }
}

bool e2e_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

void e2e_no_temp_files(void)
{
    DIR *d = opendir(e2e_d.dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        ck_assert_msg(!strstr(e->d_name, ".gpuqctl-"), "left behind: %s", e->d_name);
    closedir(d);
}

int e2e_wait_exit(pid_t pid, double timeout_s)
{
    double end = tu_now_s() + timeout_s;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        ck_assert_int_eq(r, 0);
        if (tu_now_s() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            ck_abort_msg("child (pid %d) still running after %.1f s", (int)pid, timeout_s);
        }
        tu_sleep_s(0.01);
    }
}

void e2e_restart_slow(int ms, const char *const *extra)
{
    char v[32];
    snprintf(v, sizeof v, "%d", ms);
    e2e_teardown();
    setenv("GPUQ_TEST_SLOW_MS", v, 1);
    e2e_start(extra);
    unsetenv("GPUQ_TEST_SLOW_MS");
}

/* want_depth 1: the outermost object's keys only; 0: any depth. */
static long long e2e_json_find(const char *json, const char *key, int want_depth)
{
    size_t klen = strlen(key);
    int depth = 0;
    for (const char *p = json; *p; p++) {
        if (*p == '"') {
            const char *start = p + 1;
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (!*p)
                return -1;
            if ((!want_depth || depth == want_depth) && (size_t)(p - start) == klen &&
                !memcmp(start, key, klen) && p[1] == ':')
                return strtoll(p + 2, NULL, 10);
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
    }
    return -1;
}

long long e2e_json_int(const char *json, const char *key)
{
    /* Keys of the outermost object first: nested maps (devices) may use
     * the same names; then the first at any depth ("requests"."normalize"). */
    for (int want = 1; want >= 0; want--) {
        long long v = e2e_json_find(json, key, want);
        if (v != -1)
            return v;
    }
    return -1;
}

const char *e2e_write_f64(const char *name, const double *x, size_t n)
{
    static char paths[8][320];
    static int slot;
    char *path = paths[slot++ % 8];
    snprintf(path, 320, "%s/%s", e2e_d.dir, name);
    ck_assert_int_eq(tu_write_file(path, x, n * sizeof *x), 0);
    return path;
}

void e2e_ref(double *out, size_t n, const char *const *args)
{
    char path[320];
    snprintf(path, sizeof path, "%s/ref.out", e2e_d.dir);
    const char *argv[32];
    size_t k = 0;
    for (; args[k] && k < 30; k++)
        argv[k] = args[k];
    argv[k++] = path;
    argv[k] = NULL;
    int rc = tu_python("ref/ref_ops.py", argv);
    ck_assert_msg(rc == 0, "ref_ops.py %s failed (%d)", args[0], rc);
    size_t len = 0;
    double *r = tu_read_file(path, &len);
    ck_assert_msg(r && len == n * sizeof(double), "ref size %zu, want %zu", len, n * 8);
    memcpy(out, r, len);
    free(r);
}

/* Called first thing in main(), before Check forks anything: a skip is the
 * process's own exit status 77, which ctest (SKIP_RETURN_CODE 77 on the
 * gpu-labelled tests) reports as "Skipped", never "Passed"; it does not
 * return then. A run that goes ahead and fails exits 1 through
 * tu_run_suite, never 77. */
void e2e_skip_without_gpu(void)
{
    const char *req = getenv("GPUQ_REQUIRE_GPU");
    if (strcmp(tu_test_device(), "cpu") == 0 || (req && strcmp(req, "1") == 0) ||
        access("/dev/nvidiactl", F_OK) == 0)
        return;
    fprintf(stderr, "no GPU (/dev/nvidiactl) and GPUQ_REQUIRE_GPU!=1: skipped (exit 77)\n");
    fflush(NULL);
    exit(77);
}

gpuq_conn *e2e_conn_with(const char *name, gpuq_transport t)
{
    gpuq_conn *c = e2e_connect(name, GPUQ_PRIO_NORMAL);
    ck_assert_msg(gpuq_set_transport(c, t) == 0, "%s", gpuq_errmsg(c));
    return c;
}

void *e2e_rand_buf(size_t bytes, int f32)
{
    size_t n = bytes / (f32 ? 4 : 8);
    double *d = malloc(n * sizeof *d);
    void *b = malloc(bytes);
    ck_assert(d && b);
    tu_rand_fill_f64(d, n, -7, 11);
    for (size_t i = 0; i < n; i++) {
        if (f32)
            ((float *)b)[i] = (float)d[i];
        else
            ((double *)b)[i] = d[i];
    }
    free(d);
    return b;
}

const char *e2e_dpath(const char *name)
{
    static char p[16][512];
    static unsigned slot;
    char *s = p[slot++ % 16];
    snprintf(s, sizeof p[0], "%s/%s", e2e_d.dir, name);
    return s;
}

void *e2e_out_buf(size_t bytes)
{
    uint8_t *b = malloc(bytes + E2E_GUARD_BYTES);
    ck_assert_ptr_nonnull(b);
    memset(b, 0x3c, bytes);
    memset(b + bytes, 0xa5, E2E_GUARD_BYTES);
    return b;
}

void e2e_guard_intact(const void *buf, size_t bytes, const char *what)
{
    const uint8_t *g = (const uint8_t *)buf + bytes;
    for (size_t i = 0; i < E2E_GUARD_BYTES; i++)
        ck_assert_msg(g[i] == 0xa5, "%s: byte %zu past the output written", what, i);
}
