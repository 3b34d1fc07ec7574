/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_shm.c - shared-memory arenas (PROTOCOL.md 3.4) end to end.
 *
 * Against a real gpuqd (CPU backend here; the same suite runs on CUDA, where
 * gpuqd registers each arena with cudaHostRegister): every op with its
 * arrays in an arena, inputs and outputs by reference, gives byte for byte
 * what the same request over the socket gives; references alone ("in" only,
 * "out" only) too. Every bad reference is refused with its code and message
 * and the session serves on: an unknown arena, another session's, a closed
 * one, out of bounds, misaligned, overlapping, a length that is not the
 * array's. Quotas: session_arena (too_large), total_arena (busy), 0 (off).
 * arena_import: a sealed memfd is mapped (the daemon sees the client's
 * bytes), an unsealed one, none and two fds are refused; an fd sent with
 * any other request is closed by the daemon at once. A client that leaves
 * with arena work in flight leaves no arena behind and the daemon serves.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e_util.h"
#include "frame.h"
#include "gpuq.h"
#include "mpread.h"

static gpuq_conn *c;

static void shm_setup(void)
{
    e2e_setup();
    c = e2e_connect("shm", GPUQ_PRIO_NORMAL);
}

static void shm_teardown(void)
{
    gpuq_close(c);
    e2e_teardown();
}

static void fill(void *p, size_t n, int f64, unsigned seed, double lo, double hi)
{
    srand(seed);
    for (size_t i = 0; i < n; i++) {
        double v = lo + (hi - lo) * rand() / (double)RAND_MAX;
        if (f64)
            ((double *)p)[i] = v;
        else
            ((float *)p)[i] = (float)v;
    }
}

/* One op's request on inputs in[0..nin) (len bytes each), dims by op. */
typedef struct opcase {
    const char *name;
    const char *op;
    gpuq_dtype dt;
    unsigned nin;
    uint64_t shape[2][2];
    unsigned ndim;
    size_t out_len[2];
    unsigned nout;
} opcase;

static gpuq_req *build(const opcase *oc, void *const in[2])
{
    gpuq_req *r = gpuq_req_new(oc->op);
    ck_assert_ptr_nonnull(r);
    size_t es = oc->dt == GPUQ_DT_F32 ? 4 : 8;
    for (unsigned k = 0; k < oc->nin; k++) {
        size_t len = es;
        for (unsigned d = 0; d < oc->ndim; d++)
            len *= oc->shape[k][d];
        ck_assert_int_eq(gpuq_req_set_input(r, k, oc->dt, oc->ndim, oc->shape[k], in[k], len), 0);
    }
    if (!strcmp(oc->op, "normalize"))
        ck_assert_int_eq(gpuq_req_set_str(r, "method", "l2"), 0);
    if (!strcmp(oc->op, "haversine") && oc->nin == 1) {
        double to[2] = {12.5, -45.25};
        ck_assert_int_eq(gpuq_req_set_f64s(r, "to", to, 2), 0);
    }
    if (!strcmp(oc->op, "grid")) {
        ck_assert_int_eq(gpuq_req_set_dtype(r, oc->dt), 0);
        ck_assert_int_eq(gpuq_req_set_range(r, "lat", -60, 60, 37), 0);
        ck_assert_int_eq(gpuq_req_set_range(r, "lon", -170, 170, 101), 0);
    }
    if (!strcmp(oc->op, "pairwise") || !strcmp(oc->op, "knn"))
        ck_assert_int_eq(gpuq_req_set_str(r, "metric", "euclidean"), 0);
    if (!strcmp(oc->op, "knn"))
        ck_assert_int_eq(gpuq_req_set_u64(r, "k", 5), 0);
    return r;
}

static size_t in_len(const opcase *oc, unsigned k)
{
    size_t len = oc->dt == GPUQ_DT_F32 ? 4 : 8;
    for (unsigned d = 0; d < oc->ndim; d++)
        len *= oc->shape[k][d];
    return len;
}

static const opcase cases[] = {
    {"normalize rows", "normalize", GPUQ_DT_F32, 1, {{301, 77}}, 2, {301 * 77 * 4}, 1},
    {"haversine to", "haversine", GPUQ_DT_F64, 1, {{1001, 2}}, 2, {1001 * 8}, 1},
    {"haversine pair", "haversine", GPUQ_DT_F32, 2, {{513, 2}, {513, 2}}, 2, {513 * 4}, 1},
    {"grid", "grid", GPUQ_DT_F64, 0, {{0}}, 0, {37 * 101 * 8}, 1},
    {"pairwise", "pairwise", GPUQ_DT_F32, 2, {{65, 17}, {129, 17}}, 2, {65 * 129 * 4}, 1},
    {"knn", "knn", GPUQ_DT_F64, 2, {{33, 9}, {70, 9}}, 2, {33 * 5 * 8, 33 * 5 * 8}, 2},
};

/* mode bit 1: inputs in the arena; bit 2: outputs in the arena. */
static void run_case(const opcase *oc, gpuq_arena *a, int mode)
{
    void *sin[2] = {NULL, NULL}, *ain[2] = {NULL, NULL}, *sout[2] = {NULL, NULL},
         *aout[2] = {NULL, NULL};
    for (unsigned k = 0; k < oc->nin; k++) {
        size_t len = in_len(oc, k);
        sin[k] = malloc(len);
        ck_assert_ptr_nonnull(sin[k]);
        fill(sin[k], len / (oc->dt == GPUQ_DT_F32 ? 4 : 8), oc->dt == GPUQ_DT_F64, 7 + k, -60, 60);
        ain[k] = (mode & 1) ? gpuq_arena_alloc(a, len) : malloc(len);
        ck_assert_ptr_nonnull(ain[k]);
        memcpy(ain[k], sin[k], len);
    }
    for (unsigned k = 0; k < oc->nout; k++) {
        sout[k] = malloc(oc->out_len[k]);
        aout[k] = (mode & 2) ? gpuq_arena_alloc(a, oc->out_len[k]) : malloc(oc->out_len[k]);
        ck_assert_ptr_nonnull(sout[k]);
        ck_assert_ptr_nonnull(aout[k]);
        memset(sout[k], 0x11, oc->out_len[k]);
        memset(aout[k], 0x22, oc->out_len[k]);
    }
    gpuq_req *rs = build(oc, sin), *ra = build(oc, ain);
    for (unsigned k = 0; k < oc->nout; k++) {
        ck_assert_int_eq(gpuq_req_set_output(rs, k, sout[k], oc->out_len[k]), 0);
        ck_assert_int_eq(gpuq_req_set_output(ra, k, aout[k], oc->out_len[k]), 0);
    }
    gpuq_result *res = gpuq_result_new();
    ck_assert_msg(gpuq_call_req(c, rs, res) == 0, "%s socket: %s", oc->name, gpuq_errmsg(c));
    ck_assert_msg(gpuq_call_req(c, ra, res) == 0, "%s arena mode %d: %s", oc->name, mode,
                  gpuq_errmsg(c));
    ck_assert_uint_eq(gpuq_result_outputs(res), oc->nout);
    for (unsigned k = 0; k < oc->nout; k++) {
        ck_assert_uint_eq(gpuq_result_bytes(res, k), oc->out_len[k]);
        ck_assert_msg(memcmp(sout[k], aout[k], oc->out_len[k]) == 0,
                      "%s, mode %d: output %u differs from the socket path's", oc->name, mode, k);
    }
    gpuq_result_free(res);
    gpuq_req_free(rs), gpuq_req_free(ra);
    for (unsigned k = 0; k < 2; k++) {
        free(sin[k]), free(sout[k]);
        if (mode & 1)
            gpuq_arena_free(a, ain[k]);
        else
            free(ain[k]);
        if (mode & 2)
            gpuq_arena_free(a, aout[k]);
        else
            free(aout[k]);
    }
}

START_TEST(every_op_by_reference)
{
    gpuq_arena *a = NULL;
    ck_assert_msg(gpuq_arena_open(c, 1 << 20, &a) == 0, "%s", gpuq_errmsg(c));
    ck_assert_uint_eq(gpuq_arena_size(a), 1 << 20);
    ck_assert_uint_gt(gpuq_arena_id(a), 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int mode = 1; mode <= 3; mode++)
            if (cases[k].nin || mode & 2)
                run_case(&cases[k], a, mode);
    ck_assert_int_eq(gpuq_arena_close(a), 0);
    ck_assert_int_eq(gpuq_ping(c), 0);
}
END_TEST

/* A raw request with refs through the internal API; its status. */
static int call_refs(gpuq_request *q, char *msg, size_t cap)
{
    gpuq_reply rep;
    int rc = gpuq_call(c, q, NULL, 0, NULL, 0, NULL, 0, &rep);
    snprintf(msg, cap, "%s", gpuq_errmsg(c));
    return rc;
}

static gpuq_request norm_ref(uint64_t arena, uint64_t in_off, uint64_t out_off, uint64_t n)
{
    gpuq_request q = e2e_norm_req(n); /* f64, method sum */
    q.nin_ref = q.nout_ref = 1;
    q.in_ref[0] = (gpuq_ref){arena, in_off, n * 8};
    q.out_ref[0] = (gpuq_ref){arena, out_off, n * 8};
    return q;
}

static void expect_refused(gpuq_request q, int code, const char *needle)
{
    char msg[512];
    int rc = call_refs(&q, msg, sizeof msg);
    ck_assert_msg(rc == code, "got %d (%s), want %d", rc, msg, code);
    ck_assert_msg(strstr(msg, needle), "message \"%s\" lacks \"%s\"", msg, needle);
    ck_assert_int_eq(gpuq_ping(c), 0); /* the session serves on */
}

START_TEST(bad_references)
{
    gpuq_arena *a = NULL, *other_a = NULL;
    ck_assert_int_eq(gpuq_arena_open(c, 8192, &a), 0);
    uint64_t id = gpuq_arena_id(a);
    double *x = gpuq_arena_base(a);
    for (int i = 0; i < 16; i++)
        x[i] = i + 1;
    /* the good one first: sum-normalized in place of the second half */
    gpuq_request q = norm_ref(id, 0, 128, 16);
    char msg[512];
    ck_assert_msg(call_refs(&q, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_double_eq_tol(x[16 + 15], 16.0 / 136.0, 1e-15);
    expect_refused(norm_ref(id + 1000, 0, 128, 16), GPUQ_E_BAD_ARGUMENT, "no arena");
    expect_refused(norm_ref(id, 8192 - 64, 0, 16), GPUQ_E_BAD_ARGUMENT, "outside arena");
    expect_refused(norm_ref(id, UINT64_MAX - 8, 0, 16), GPUQ_E_BAD_ARGUMENT, "overflows");
    expect_refused(norm_ref(id, 4, 128, 16), GPUQ_E_BAD_ARGUMENT, "not a multiple of 8");
    expect_refused(norm_ref(id, 0, 64, 16), GPUQ_E_BAD_ARGUMENT, "overlaps");
    q = norm_ref(id, 0, 128, 16);
    q.in_ref[0].length = 120;
    expect_refused(q, GPUQ_E_SIZE_MISMATCH, "length");
    q = norm_ref(id, 0, 128, 16);
    q.nout_ref = 0;
    q.nin_ref = 1;
    { /* "in" with a payload too */
        gpuq_reply rep;
        double pl[16] = {0};
        int rc = gpuq_call(c, &q, pl, sizeof pl, NULL, 0, NULL, 0, &rep);
        ck_assert_int_eq(rc, GPUQ_E_SIZE_MISMATCH);
        ck_assert_int_eq(gpuq_ping(c), 0);
    }
    /* refs on a control op */
    gpuq_request p;
    gpuq_request_init(&p);
    p.op = GPUQ_OP_PING;
    p.nin_ref = 1;
    p.in_ref[0] = (gpuq_ref){id, 0, 8};
    expect_refused(p, GPUQ_E_BAD_ARGUMENT, "ping takes no");
    /* another session's arena */
    gpuq_conn *other = e2e_connect("other", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_arena_open(other, 4096, &other_a), 0);
    expect_refused(norm_ref(gpuq_arena_id(other_a), 0, 128, 16), GPUQ_E_BAD_ARGUMENT, "no arena");
    /* a closed one */
    gpuq_request cl;
    gpuq_request_init(&cl);
    cl.op = GPUQ_OP_ARENA_CLOSE;
    cl.has_arena = true;
    cl.arena = 424242;
    expect_refused(cl, GPUQ_E_BAD_ARGUMENT, "no arena 424242");
    ck_assert_int_eq(gpuq_arena_close(a), 0);
    expect_refused(norm_ref(id, 0, 128, 16), GPUQ_E_BAD_ARGUMENT, "no arena");
    ck_assert_int_eq(gpuq_arena_close(other_a), 0);
    gpuq_close(other);
    /* a buffer across an arena's edge: libgpuq refuses it before sending */
    ck_assert_int_eq(gpuq_arena_open(c, 4096, &a), 0);
    double out[8];
    uint8_t *edge = (uint8_t *)gpuq_arena_base(a) + 4096 - 32;
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, edge, 8, out),
                     GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_ping(c), 0);
    ck_assert_int_eq(gpuq_arena_close(a), 0);
}
END_TEST

START_TEST(quotas)
{
    gpuq_arena *a = NULL, *b = NULL;
    ck_assert_int_eq(gpuq_set_limit(c, "session_arena", 1 << 20, NULL), 0);
    ck_assert_int_eq(gpuq_set_limit(c, "total_arena", 3 << 19, NULL), 0);
    gpuq_conn *s2 = e2e_connect("quota", GPUQ_PRIO_NORMAL); /* caps apply at hello */
    ck_assert_int_eq(gpuq_arena_open(s2, (1 << 20) + 1, &a), GPUQ_E_TOO_LARGE);
    ck_assert_msg(strstr(gpuq_errmsg(s2), "session_arena"), "%s", gpuq_errmsg(s2));
    ck_assert_int_eq(gpuq_arena_open(s2, 1 << 20, &a), 0);
    ck_assert_int_eq(gpuq_arena_open(s2, 4096, &b), GPUQ_E_TOO_LARGE);
    gpuq_conn *s3 = e2e_connect("quota3", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_arena_open(s3, 1 << 20, &b), GPUQ_E_BUSY); /* total_arena */
    ck_assert_msg(strstr(gpuq_errmsg(s3), "total_arena"), "%s", gpuq_errmsg(s3));
    ck_assert_int_eq(gpuq_arena_close(a), 0);
    ck_assert_int_eq(gpuq_arena_open(s3, 1 << 20, &b), 0); /* freed: fits now */
    ck_assert_int_eq(gpuq_arena_close(b), 0);
    ck_assert_int_eq(gpuq_set_limit(c, "session_arena", 0, NULL), 0);
    gpuq_conn *s4 = e2e_connect("off", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_arena_open(s4, 4096, &b), GPUQ_E_TOO_LARGE);
    ck_assert_msg(strstr(gpuq_errmsg(s4), "off"), "%s", gpuq_errmsg(s4));
    ck_assert_int_eq(gpuq_ping(s4), 0);
    gpuq_close(s2), gpuq_close(s3), gpuq_close(s4);
}
END_TEST

static int memfd_with(const double *v, size_t n, unsigned seals)
{
    int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 8192), 0);
    ck_assert_int_eq(pwrite(fd, v, n * 8, 0), (ssize_t)(n * 8));
    if (seals)
        ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
    return fd;
}

static int count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* A frame with fds attached to its first byte, on a raw hello'd socket. */
static void send_with_fds(int fd, const gpuq_request *q, const int *fds, int nfds)
{
    uint8_t *hdr;
    size_t hlen;
    ck_assert_int_eq(gpuq_request_encode(q, &hdr, &hlen), 0);
    gpuq_prefix pre = {GPUQ_PROTO_VERSION, GPUQ_KIND_REQUEST, 0, (uint32_t)hlen, 0};
    uint8_t pb[GPUQ_PREFIX_SIZE];
    gpuq_prefix_encode(&pre, pb);
    struct iovec iov[2] = {{pb, sizeof pb}, {hdr, hlen}};
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(4 * sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    if (nfds) {
        mh.msg_control = cm.space;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(h), fds, (size_t)nfds * sizeof(int));
    }
    ck_assert_int_eq(sendmsg(fd, &mh, MSG_NOSIGNAL), (ssize_t)(sizeof pb + hlen));
    free(hdr);
}

START_TEST(import_and_stray_fds)
{
    double v[16];
    for (int i = 0; i < 16; i++)
        v[i] = 2 * i + 1;
    /* sealed against shrinking: mapped, the daemon reads the client's bytes */
    int fd = memfd_with(v, 16, F_SEAL_SHRINK);
    gpuq_arena *a = NULL;
    ck_assert_msg(gpuq_arena_import(c, fd, &a) == 0, "%s", gpuq_errmsg(c));
    ck_assert_uint_eq(gpuq_arena_size(a), 8192);
    double *x = gpuq_arena_base(a);
    ck_assert_double_eq(x[3], 7.0);
    gpuq_request q = norm_ref(gpuq_arena_id(a), 0, 256, 16);
    char msg[512];
    ck_assert_msg(call_refs(&q, msg, sizeof msg) == 0, "%s", msg);
    double back[16];
    ck_assert_int_eq(pread(fd, back, sizeof back, 256), (ssize_t)sizeof back);
    ck_assert_double_eq_tol(back[15], 31.0 / 256.0, 1e-15);
    ck_assert_int_eq(gpuq_arena_close(a), 0);
    close(fd);
    /* not sealed: refused */
    fd = memfd_with(v, 16, 0);
    ck_assert_int_eq(gpuq_arena_import(c, fd, &a), GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(gpuq_errmsg(c), "F_SEAL_SHRINK"), "%s", gpuq_errmsg(c));
    close(fd);
    /* not a memfd at all */
    int pp[2];
    ck_assert_int_eq(pipe(pp), 0);
    ck_assert_int_eq(gpuq_arena_import(c, pp[0], &a), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_ping(c), 0);
    /* raw: none, two, and an fd on a ping */
    uint8_t hb[4096];
    int s = e2e_hello_socket("raw-fds", hb, sizeof hb);
    pid_t pid = e2e_d.pid;
    int before = count_fds(pid);
    gpuq_request imp;
    gpuq_request_init(&imp);
    imp.op = GPUQ_OP_ARENA_IMPORT;
    imp.id = 5;
    gpuq_reply rep;
    send_with_fds(s, &imp, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(s, &rep, hb, sizeof hb), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(rep.message, "none"), "%s", rep.message);
    int sealed = memfd_with(v, 16, F_SEAL_SHRINK), two[2] = {sealed, pp[1]};
    imp.id = 6;
    send_with_fds(s, &imp, two, 2);
    ck_assert_int_eq(e2e_read_reply(s, &rep, hb, sizeof hb), 0);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(rep.message, "more than one"), "%s", rep.message);
    gpuq_request ping;
    gpuq_request_init(&ping);
    ping.op = GPUQ_OP_PING;
    for (int k = 0; k < 20; k++) {
        ping.id = 100 + (uint64_t)k;
        send_with_fds(s, &ping, two, 2);
        ck_assert_int_eq(e2e_read_reply(s, &rep, hb, sizeof hb), 0);
        ck_assert_int_eq(rep.status, 0);
    }
    ck_assert_int_eq(count_fds(pid), before); /* nothing kept */
    close(s), close(sealed), close(pp[0]), close(pp[1]);
    e2e_assert_serves();
}
END_TEST

/* The "size" of an ok arena reply's info, or -1. */
static long long reply_size(const gpuq_reply *rep)
{
    gpuq_mpr r;
    gpuq_mpr_init(&r, rep->info, rep->info ? rep->info_len : 0);
    uint32_t n;
    if (!rep->info || gpuq_mpr_map(&r, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        uint64_t v;
        if (gpuq_mpr_str(&r, &k, &kl))
            return -1;
        if (kl == 4 && !memcmp(k, "size", 4)) {
            if (gpuq_mpr_uint(&r, &v))
                return -1;
            return (long long)v;
        }
        if (gpuq_mpr_skip(&r))
            return -1;
    }
    return -1;
}

/* gpuqd reads many frames at once (into its session buffer). Frames sent
 * while the daemon is stopped arrive in a few reads, arena_imports among
 * plain frames, each import with its own fd (its first byte's sendmsg):
 * each import gets its own fd (told apart by the memfds' sizes), pings
 * with a stray fd in between leave nothing behind. */
START_TEST(imports_among_pipelined_frames)
{
    double v[16];
    for (int i = 0; i < 16; i++)
        v[i] = i + 1;
    int small = memfd_with(v, 16, F_SEAL_SHRINK); /* 8192 bytes */
    int big = memfd_with(v, 16, 0);
    ck_assert_int_eq(ftruncate(big, 3 * 8192), 0);
    ck_assert_int_eq(fcntl(big, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    int pp[2];
    ck_assert_int_eq(pipe(pp), 0);
    /* gpuqd's own pid (status): under a wrapper (compute-sanitizer) e2e_d.pid is the wrapper's */
    pid_t pid = (pid_t)e2e_status_int("pid");
    ck_assert_int_gt(pid, 0);
    int before = count_fds(pid);
    uint8_t hb[4096];
    int s = e2e_hello_socket("pipelined-fds", hb, sizeof hb);
    gpuq_request imp, ping;
    gpuq_request_init(&imp);
    imp.op = GPUQ_OP_ARENA_IMPORT;
    gpuq_request_init(&ping);
    ping.op = GPUQ_OP_PING;
    for (int round = 0; round < 3; round++) {
        ck_assert_int_eq(kill(pid, SIGSTOP), 0);
        ping.id = 1;
        send_with_fds(s, &ping, NULL, 0);
        imp.id = 2;
        send_with_fds(s, &imp, &small, 1);
        ping.id = 3;
        send_with_fds(s, &ping, &pp[0], 1); /* stray: closed */
        ping.id = 4;
        send_with_fds(s, &ping, NULL, 0);
        imp.id = 5;
        send_with_fds(s, &imp, &big, 1);
        ping.id = 6;
        send_with_fds(s, &ping, NULL, 0);
        ck_assert_int_eq(kill(pid, SIGCONT), 0);
        const long long want[6] = {-1, 8192, -1, -1, 3 * 8192, -1};
        for (int k = 0; k < 6; k++) {
            gpuq_reply rep;
            ck_assert_int_eq(e2e_read_reply(s, &rep, hb, sizeof hb), 0);
            ck_assert_int_eq(rep.id, k + 1);
            ck_assert_msg(rep.status == 0, "reply %d: %d %s", k + 1, rep.status, rep.message);
            if (want[k] > 0)
                ck_assert_int_eq(reply_size(&rep), want[k]);
        }
    }
    /* the arenas stay the session's until it closes: then nothing is left */
    close(s);
    e2e_assert_serves();
    for (int tries = 0; tries < 100 && count_fds(pid) > before; tries++)
        usleep(20000);
    ck_assert_int_le(count_fds(pid), before); /* the raw session's socket gone too */
    close(small), close(big), close(pp[0]), close(pp[1]);
}
END_TEST

START_TEST(leave_with_arena_work_in_flight)
{
    char js[16384];
    for (int round = 0; round < 4; round++) {
        gpuq_conn *l = e2e_connect("leaver", GPUQ_PRIO_NORMAL);
        enum { N = 1 << 18, K = 6 };
        gpuq_arena *a = NULL;
        ck_assert_int_eq(gpuq_arena_open(l, (uint64_t)2 * K * N * 8 + 4096, &a), 0);
        for (int k = 0; k < K; k++) {
            double *x = gpuq_arena_alloc(a, N * 8), *y = gpuq_arena_alloc(a, N * 8);
            ck_assert_ptr_nonnull(x);
            ck_assert_ptr_nonnull(y);
            for (int i = 0; i < N; i++)
                x[i] = 1.0 + i % 5;
            gpuq_req *r = gpuq_req_new("normalize");
            uint64_t sh[1] = {N}, id;
            ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, sh, x, N * 8), 0);
            ck_assert_int_eq(gpuq_req_set_output(r, 0, y, N * 8), 0);
            ck_assert_int_eq(gpuq_submit_req(l, r, &id), 0);
            gpuq_req_free(r);
        }
        gpuq_close(l); /* unmaps our side; the daemon keeps its own until the work is done */
        e2e_assert_serves();
    }
    for (int t = 0; t < 200; t++) {
        e2e_status(js, sizeof js);
        if (e2e_json_int(js, "arena_bytes") == 0)
            break;
        usleep(20000);
    }
    ck_assert_msg(e2e_json_int(js, "arena_bytes") == 0, "arenas left: %s", js);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_shm");
    TCase *tc = tcase_create("shm");
    tcase_add_checked_fixture(tc, shm_setup, shm_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_op_by_reference);
    tcase_add_test(tc, bad_references);
    tcase_add_test(tc, quotas);
    tcase_add_test(tc, import_and_stray_fds);
    tcase_add_test(tc, imports_among_pipelined_frames);
    tcase_add_test(tc, leave_with_arena_work_in_flight);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    return tu_run_suite(suite());
}
