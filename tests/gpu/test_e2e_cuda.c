/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_cuda.c - what only the CUDA backend has: stream priorities per
 * session (the levels against the device's range as CUDA itself reports it,
 * and a policy cap that holds), device out-of-memory on one request, and a
 * sticky device error
 * (every in-flight request answered, then a non-zero exit). Faults are
 * injected through gpuqd's test-only hooks GPUQ_TEST_INJECT_OOM=N and
 * GPUQ_TEST_INJECT_STICKY=N. Then kNN on the daemon against the CPU
 * reference kernel in this process: odd m*k (the int64 indices land 4 bytes
 * off an 8-byte boundary in the packed output and go through scratch),
 * several query chunks and several Y blocks of the CUDA plan. No GPU:
 * skipped (exit 77), unless GPUQ_REQUIRE_GPU=1. */
#include <check.h>
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "req_args.h"
#include "e2e_util.h"
#include "gpuq_kernels.h"
#include "knn_check.h"
#include "mpread.h"
#include "numtol.h"

static void start_cuda(const char *env, const char *val)
{
    if (env)
        setenv(env, val, 1);
    tu_daemon_start(&e2e_d, "cuda", NULL);
    if (env)
        unsetenv(env);
}

/* The device's stream priority range, from CUDA in this process (an
 * independent reference for what gpuqd grants). */
static void device_range(int dev, int *least, int *greatest)
{
    ck_assert_int_eq(cudaSetDevice(dev), cudaSuccess);
    ck_assert_int_eq(cudaDeviceGetStreamPriorityRange(least, greatest), cudaSuccess);
    ck_assert_int_le(*greatest, *least);
}

START_TEST(priorities_per_session)
{
    start_cuda(NULL, NULL);
    gpuq_conn *lo = e2e_connect("lo", GPUQ_PRIO_LOW);
    gpuq_conn *no = e2e_connect("no", GPUQ_PRIO_NORMAL);
    gpuq_conn *hi = e2e_connect("hi", GPUQ_PRIO_HIGH);
    ck_assert_str_eq(gpuq_info(hi)->backend, "cuda");
    int plo = gpuq_info(lo)->stream_priority, pno = gpuq_info(no)->stream_priority,
        phi = gpuq_info(hi)->stream_priority;
    ck_assert_int_eq(gpuq_info(lo)->priority_granted, GPUQ_PRIO_LOW);
    ck_assert_int_eq(gpuq_info(no)->priority_granted, GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_info(hi)->priority_granted, GPUQ_PRIO_HIGH);
    /* CUDA: lower numbers are more urgent; the H100 range is [-5, 0]. low
     * is the least urgent, high the greatest, normal the middle rounded
     * toward least urgent (PROTOCOL.md). */
    int least, greatest;
    ck_assert_int_eq(gpuq_info(lo)->device, gpuq_info(hi)->device);
    device_range(gpuq_info(lo)->device, &least, &greatest);
    ck_assert_int_eq(plo, least);
    ck_assert_int_eq(phi, greatest);
    ck_assert_int_eq(pno, least - (least - greatest) / 2);
    ck_assert_int_lt(phi, pno);
    ck_assert_int_lt(pno, plo);
    /* Work in flight at once on all three streams. */
    enum { N = 16, LEN = 65536 };
    static double x[LEN], y[3][N][LEN];
    for (int j = 0; j < LEN; j++)
        x[j] = j + 1;
    gpuq_conn *cs[3] = {lo, no, hi};
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 3; k++) {
            gpuq_request r = e2e_norm_req(LEN);
            rq_set_method(&r, GPUQ_NORM_L1);
            uint64_t id;
            ck_assert_int_eq(
                gpuq_submit(cs[k], &r, x, sizeof x, NULL, 0, y[k][i], sizeof y[k][i], &id), 0);
        }
    double s = (double)LEN * (LEN + 1) / 2;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 3; k++) {
            gpuq_reply rep;
            ck_assert_int_eq(gpuq_wait(cs[k], &rep), 0);
            ck_assert_double_eq_tol(y[k][i][LEN - 1], LEN / s, 1e-15);
        }
    char js[16384];
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "sessions"), 4);
    gpuq_close(lo), gpuq_close(no), gpuq_close(hi);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}
END_TEST

/* A [user] rule caps this uid (root or not: a user rule applies to admins
 * too) at low: whatever it asks, the stream is never more urgent than what
 * a low hello gets, i.e. the device's least urgent priority; values off the
 * scale are bad_argument. */
START_TEST(priority_cap_holds_on_cuda)
{
    char dir[256], path[320], text[128];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/gpuqd.conf", dir);
    int n = snprintf(text, sizeof text, "[user %u]\nmax_priority = low\n", (unsigned)getuid());
    ck_assert_int_eq(tu_write_file(path, text, (size_t)n), 0);
    const char *extra[] = {"--config", path, NULL};
    tu_daemon_start(&e2e_d, "cuda", extra);
    gpuq_conn *lo = e2e_connect("lo", GPUQ_PRIO_LOW);
    int plo = gpuq_info(lo)->stream_priority, least, greatest;
    device_range(gpuq_info(lo)->device, &least, &greatest);
    ck_assert_int_eq(plo, least);
    static const int asks[] = {GPUQ_PRIO_HIGH, GPUQ_PRIO_NORMAL, GPUQ_PRIO_LOW};
    for (int k = 0; k < 3; k++) {
        gpuq_conn *c = e2e_connect("capped", asks[k]);
        ck_assert_int_eq(gpuq_info(c)->priority_granted, GPUQ_PRIO_LOW);
        ck_assert_msg(gpuq_info(c)->stream_priority >= plo,
                      "asked %d: stream priority %d more urgent than low's %d", asks[k],
                      gpuq_info(c)->stream_priority, plo);
        ck_assert_int_eq(gpuq_info(c)->stream_priority, least);
        gpuq_close(c);
    }
    /* the old CUDA-number form (-5: the most urgent stream) is refused */
    static const int off[] = {-5, 5, -2, 2};
    for (int k = 0; k < 4; k++) {
        gpuq_conn *c = NULL;
        gpuq_connect_opts o = {
            .socket_path = e2e_d.socket, .client_name = "off", .priority = off[k], .device = -1};
        ck_assert_int_eq(gpuq_connect(&o, &c), GPUQ_E_BAD_ARGUMENT);
        ck_assert_msg(strstr(gpuq_errmsg(c), "priority") != NULL, "%s", gpuq_errmsg(c));
        gpuq_close(c);
    }
    gpuq_close(lo);
    e2e_assert_serves();
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    tu_rmtree(dir);
}
END_TEST

/* Four normalizes of 64 values on one session, the daemon's n-th device
 * allocation failing (GPUQ_TEST_INJECT_OOM): with small jobs' kept buffers
 * and zero-copy off, every job allocates, so exactly one request (the one whose
 * allocation fails) gets no_memory; with them on (the default), the one
 * allocation is the kept buffer's, and its failure makes that job allocate
 * the usual way: every request succeeds. */
static void oom_round(const char *small, const char *nth, int want_oom)
{
    setenv("GPUQ_CUDA_SMALL_BYTES", small, 1);
    setenv("GPUQ_CUDA_ZERO_COPY_BYTES", small, 1); /* zero-copy jobs allocate nothing */
    start_cuda("GPUQ_TEST_INJECT_OOM", nth);
    unsetenv("GPUQ_CUDA_SMALL_BYTES");
    unsetenv("GPUQ_CUDA_ZERO_COPY_BYTES");
    gpuq_conn *c = e2e_connect("oom", GPUQ_PRIO_NORMAL);
    double x[64], y[64];
    for (int j = 0; j < 64; j++)
        x[j] = j + 1;
    int rcs[4];
    for (int i = 0; i < 4; i++)
        rcs[i] = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 64, y);
    int oom = 0, ok = 0;
    for (int i = 0; i < 4; i++) {
        oom += rcs[i] == GPUQ_E_NO_MEMORY;
        ok += rcs[i] == 0;
    }
    for (int j = 0; j < 64 && rcs[3] == 0; j++)
        ck_assert_double_eq_tol(y[j], (j + 1) / 2080.0, 1e-15);
    ck_assert_int_eq(oom, want_oom);
    ck_assert_int_eq(ok, 4 - want_oom);
    gpuq_close(c);
    e2e_assert_serves();
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}

START_TEST(out_of_memory_fails_one_request)
{
    oom_round("0", "2", 1);
    oom_round("65536", "1", 0);
}
END_TEST

/* A datagram socket for NOTIFY_SOCKET in a temp dir (path into out). */
static int notify_listen(char *dir, size_t dcap, char *out, size_t cap)
{
    tu_tmpdir(dir, dcap);
    snprintf(out, cap, "%s/notify", dir);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(out), sizeof sa.sun_path);
    memcpy(sa.sun_path, out, strlen(out) + 1);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

START_TEST(sticky_error_answers_all_then_exits)
{
    char ndir[256], npath[300];
    int nfd = notify_listen(ndir, sizeof ndir, npath, sizeof npath);
    setenv("NOTIFY_SOCKET", npath, 1);
    start_cuda("GPUQ_TEST_INJECT_STICKY", "3");
    unsetenv("NOTIFY_SOCKET");
    gpuq_conn *c = e2e_connect("sticky", GPUQ_PRIO_NORMAL);
    enum { N = 6 };
    static double x[4096], y[N][4096];
    for (int j = 0; j < 4096; j++)
        x[j] = 1;
    for (int i = 0; i < N; i++) {
        gpuq_request r = e2e_norm_req(4096);
        uint64_t id;
        ck_assert_int_eq(gpuq_submit(c, &r, x, sizeof x, NULL, 0, y[i], sizeof y[i], &id), 0);
    }
    int lost = 0, answered = 0;
    for (int i = 0; i < N; i++) {
        gpuq_reply rep;
        int rc = gpuq_wait(c, &rep);
        if (rc == GPUQ_E_CLOSED || rc == GPUQ_E_IO)
            break;
        answered++;
        lost += rc == GPUQ_E_DEVICE_LOST;
    }
    gpuq_close(c);
    /* Every accepted request got an answer, at least the faulting one is
     * device_lost, and the daemon exits non-zero by itself (exit 3). */
    ck_assert_int_eq(answered, N);
    ck_assert_int_ge(lost, 1);
    int st = 0;
    for (int i = 0; i < 1500 && waitpid(e2e_d.pid, &st, WNOHANG) == 0; i++)
        usleep(20000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "gpuqd status %d", st);
    e2e_d.pid = 0;
    tu_daemon_stop(&e2e_d);
    /* systemd heard STOPPING=1 and why before the non-zero exit */
    char all[8192] = "", msg[1024];
    ssize_t n;
    while ((n = recv(nfd, msg, sizeof msg - 1, 0)) > 0) {
        msg[n] = '\0';
        strncat(all, msg, sizeof all - strlen(all) - 2);
        strcat(all, "\n");
    }
    close(nfd);
    tu_rmtree(ndir);
#ifdef GPUQ_HAVE_SYSTEMD
    ck_assert_msg(strstr(all, "READY=1") && strstr(all, "STOPPING=1") &&
                      strstr(all, "STATUS=device lost"),
                  "notifications: %s", all);
#else
    (void)all;
#endif
}
END_TEST

/* A request larger than the device memory limit: no_memory for it alone;
 * the session, other sessions and the pool are fine afterwards. */
START_TEST(out_of_memory_real)
{
    const char *extra[] = {"--device-memory-limit", "64M", NULL};
    tu_daemon_start(&e2e_d, "cuda", extra);
    gpuq_conn *c = e2e_connect("big", GPUQ_PRIO_NORMAL);
    enum { BIG = 10 * 1000 * 1000 }; /* 80 MB in + 80 MB out on the device */
    double *x = malloc(BIG * sizeof *x), *y = malloc(BIG * sizeof *y);
    ck_assert(x && y);
    for (size_t i = 0; i < BIG; i++)
        x[i] = 1.0;
    int rc = gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, BIG, y);
    ck_assert_msg(rc == GPUQ_E_NO_MEMORY, "huge request: %d (%s)", rc, gpuq_errmsg(c));
    /* a request that fits still works, on the same session */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 1000, y), 0);
    ck_assert_double_eq_tol(y[999], 1e-3, 1e-15);
    free(x);
    free(y);
    gpuq_close(c);
    e2e_assert_serves();
    char js[16384];
    e2e_status(js, sizeof js);
    ck_assert_int_eq(e2e_json_int(js, "in_flight"), 0);
    ck_assert_int_eq(e2e_json_int(js, "staging_bytes"), 0);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}
END_TEST

/* Sessions spread over the devices (least loaded first), a named device,
 * and a device that does not exist. Meaningful with 2+ GPUs; with one it
 * still checks naming and the error. */
START_TEST(placement_over_devices)
{
    start_cuda(NULL, NULL);
    gpuq_conn *probe = e2e_connect("probe", GPUQ_PRIO_NORMAL);
    const uint8_t *info;
    size_t len;
    ck_assert_int_eq(gpuq_status_info(probe, &info, &len), 0);
    char js[16384];
    gpuq_mpr r;
    gpuq_mpr_init(&r, info, len);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, js, sizeof js), 0);
    int ndev = 0;
    for (const char *p = js; (p = strstr(p, "\"total_memory\"")); p++)
        ndev++;
    ck_assert_int_ge(ndev, 1);
    fprintf(stderr, "placement: %d devices\n", ndev);
    int base_dev = gpuq_info(probe)->device; /* probe took one slot on device 0 */
    ck_assert_int_eq(base_dev, 0);
    enum { PER = 2 };
    gpuq_conn *cs[16 * PER];
    int n = ndev * PER - 1 < 16 * PER ? ndev * PER - 1 : 16 * PER;
    int count[16] = {0};
    count[0] = 1;
    for (int i = 0; i < n; i++) {
        cs[i] = e2e_connect("spread", GPUQ_PRIO_NORMAL);
        int dv = gpuq_info(cs[i])->device;
        ck_assert_int_ge(dv, 0);
        ck_assert_int_lt(dv, ndev);
        count[dv]++;
        double x[4] = {1, 2, 3, 4}, y[4];
        ck_assert_int_eq(gpuq_normalize_1d(cs[i], GPUQ_DT_F64, GPUQ_NORM_SUM, x, 4, y), 0);
        ck_assert_double_eq_tol(y[3], 0.4, 1e-15);
    }
    for (int d = 0; d < ndev && d < 16; d++)
        ck_assert_msg(count[d] == PER, "device %d has %d sessions, want %d", d, count[d], PER);
    /* a named device */
    gpuq_connect_opts o = {.socket_path = e2e_d.socket,
                           .client_name = "named",
                           .priority = GPUQ_PRIO_NORMAL,
                           .device = ndev - 1};
    gpuq_conn *named = NULL;
    ck_assert_int_eq(gpuq_connect(&o, &named), 0);
    ck_assert_int_eq(gpuq_info(named)->device, ndev - 1);
    /* one that does not exist */
    o.device = ndev;
    gpuq_conn *bad = NULL;
    ck_assert_int_eq(gpuq_connect(&o, &bad), GPUQ_E_BAD_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gpuq_errmsg(bad), "does not exist"));
    gpuq_close(bad);
    /* +1 session for the status call itself; the refused one closes soon */
    for (int i = 0; i < 200; i++) {
        e2e_status(js, sizeof js);
        if (e2e_json_int(js, "sessions") == n + 3)
            break;
        usleep(10000);
    }
    ck_assert_int_eq(e2e_json_int(js, "sessions"), n + 3);
    for (int i = 0; i < n; i++)
        gpuq_close(cs[i]);
    gpuq_close(named);
    gpuq_close(probe);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}
END_TEST

/* ---- kNN on the device against gpuq_cpu_knn ---- */

static void *knn_as(int dt, double *x, size_t n)
{
    void *b = malloc(n * (dt == GPUQ_DT_F32 ? 4 : 8) + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++) {
        if (dt == GPUQ_DT_F32) {
            ((float *)b)[i] = (float)x[i];
            x[i] = ((float *)b)[i];
        } else {
            ((double *)b)[i] = x[i];
        }
    }
    return b;
}

static double knn_at(int dt, const void *p, size_t i)
{
    return dt == GPUQ_DT_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* m = 2049 > GPUQ_KNN_MB_MAX: two query chunks; n = 20000 at d = 8: two Y
 * blocks in f32 (128 MiB / (2048 * 4) = 16384 rows), three in f64; m*k
 * odd. And a small odd case. Every metric on f32, euclidean and cosine on
 * f64. Rows pass as valid top-k (knn_check.h) against the CPU kernel's
 * list and float64 distances of the rounded inputs. */
START_TEST(knn_matches_cpu)
{
    start_cuda(NULL, NULL);
    gpuq_conn *c = e2e_connect("knn", GPUQ_PRIO_NORMAL);
    static const struct {
        uint64_t m, n, d, k;
    } sh[] = {{7, 1000, 5, 3}, {2049, 20000, 8, 5}};
    for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
            for (int mt = 0; mt < GPUQ_METRIC_COUNT; mt++) {
                if (dt == GPUQ_DT_F64 && mt != GPUQ_METRIC_EUCLIDEAN && mt != GPUQ_METRIC_COSINE)
                    continue;
                uint64_t m = sh[s].m, n = sh[s].n, d = sh[s].d, k = sh[s].k;
                double *x = malloc(m * d * sizeof *x), *y = malloc(n * d * sizeof *y);
                ck_assert(x && y);
                nt_pw_fill(NT_PW_MIXED, x, m, y, n, d);
                for (uint64_t j = 0; j < d; j++) /* an exact tie: y rows 0 and n-1 */
                    x[j] = y[j], y[(n - 1) * d + j] = y[j];
                void *xi = knn_as(dt, x, m * d), *yi = knn_as(dt, y, n * d);
                size_t es = dt == GPUQ_DT_F32 ? 4 : 8;
                void *dist = malloc(m * k * es), *rd = malloc(m * k * es);
                int64_t *idx = malloc(m * k * sizeof *idx), *ri = malloc(m * k * sizeof *ri);
                double *full = malloc(n * sizeof *full), *gd = malloc(k * sizeof *gd),
                       *rdd = malloc(k * sizeof *rdd);
                unsigned char *seen = calloc(n, 1);
                ck_assert(dist && rd && idx && ri && full && gd && rdd && seen);
                int rc = gpuq_knn(c, dt, mt, xi, yi, m, n, d, k, dist, idx);
                ck_assert_msg(rc == 0, "cuda knn: %s", gpuq_errmsg(c));
                ck_assert_int_eq(gpuq_cpu_knn(dt, mt, 2.0, 0, xi, yi, m, n, d, k, rd, ri),
                                 GPUQ_K_OK);
                kc_params p = {dt, mt, 1, 2, n, d, k};
                for (uint64_t i = 0; i < m; i++) {
                    /* float64 distances of row i (the rounded inputs) */
                    ck_assert_int_eq(
                        gpuq_cpu_pairwise(GPUQ_K_F64, mt, 2.0, 0, x + i * d, y, 1, n, d, full),
                        GPUQ_K_OK);
                    for (uint64_t t = 0; t < k; t++) {
                        gd[t] = knn_at(dt, dist, i * k + t);
                        rdd[t] = knn_at(dt, rd, i * k + t);
                    }
                    char why[256];
                    int bad = kc_check_row(&p, gd, idx + i * k, full, ri + i * k, rdd, seen, why,
                                           sizeof why);
                    ck_assert_msg(!bad, "cuda knn metric %d dt %d m=%llu n=%llu row %llu: %s", mt,
                                  dt, (unsigned long long)m, (unsigned long long)n,
                                  (unsigned long long)i, why);
                }
                if (mt != GPUQ_METRIC_COSINE)
                    ck_assert(idx[0] == 0 && idx[1] == (int64_t)(n - 1));
                free(x), free(y), free(xi), free(yi), free(dist), free(rd), free(idx), free(ri),
                    free(full), free(gd), free(rdd), free(seen);
            }
    gpuq_close(c);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, priorities_per_session);
    tcase_add_test(tc, priority_cap_holds_on_cuda);
    tcase_add_test(tc, out_of_memory_fails_one_request);
    tcase_add_test(tc, sticky_error_answers_all_then_exits);
    tcase_add_test(tc, out_of_memory_real);
    tcase_add_test(tc, placement_over_devices);
    tcase_add_test(tc, knn_matches_cpu);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setenv("GPUQ_TEST_DEVICE", "cuda", 1);
    e2e_skip_without_gpu(); /* no GPU: exits 77 (ctest: Skipped) */
    return tu_run_suite(suite());
}
