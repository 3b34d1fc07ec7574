/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_transport.c - libgpuq's transports (gpuq_set_transport) end to
 * end: the blocking calls' staging arena.
 *
 * Under AUTO (the default) a blocking call whose arrays outside arenas come
 * to GPUQ_SHM_MIN_BYTES goes through one staging arena of the connection
 * and gives the socket path's bytes (and the reference's); the daemon's
 * status shows the arena (arenas, arena_bytes, requests.arena_open) while
 * the connection lives, and not after gpuq_close or a switch to SOCKET.
 * Smaller calls, pipelined calls and SOCKET never open one; SHM opens one
 * for any size. The arena is reused, and grown by reopening. Every
 * convenience call and the internal gpuq_call (A and B packed, two outputs
 * packed with the second misaligned) agree with the socket. Arrays already
 * in a user arena go by reference and only the rest is staged. Without
 * arenas SHM is refused at once and the connection serves on, AUTO falls
 * back; without room (session_arena, a quota the user's own arenas fill)
 * SHM fails with too_large and a message that says so, sends nothing, and
 * AUTO falls back without asking again for that size.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "gpuq.h"

static long long stat_int(const char *key)
{
    char js[16384];
    e2e_status(js, sizeof js);
    return e2e_json_int(js, key);
}

static gpuq_conn *conn_with(const char *name, gpuq_transport t)
{
    gpuq_conn *c = e2e_connect(name, GPUQ_PRIO_NORMAL);
    ck_assert_msg(gpuq_set_transport(c, t) == 0, "%s", gpuq_errmsg(c));
    return c;
}

static float *rand_f32(size_t n, double lo, double hi)
{
    double *d = malloc(n * sizeof *d);
    float *f = malloc(n * sizeof *f);
    ck_assert(d && f);
    tu_rand_fill_f64(d, n, lo, hi);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    free(d);
    return f;
}

static double *rand_f64(size_t n, double lo, double hi)
{
    double *d = malloc(n * sizeof *d);
    ck_assert_ptr_nonnull(d);
    tu_rand_fill_f64(d, n, lo, hi);
    return d;
}

/* Points n x 2 (lat, lon), f64. */
static double *rand_points(size_t n)
{
    double *p = rand_f64(2 * n, -1, 1);
    for (size_t i = 0; i < n; i++)
        p[2 * i] *= 90, p[2 * i + 1] *= 180;
    return p;
}

enum { BIG = 2u << 20 }; /* 2M floats: 8 MB in, 8 MB out */

START_TEST(auto_large_normalize)
{
    float *x = rand_f32(BIG, -5, 5);
    float *ya = malloc(BIG * 4), *ys = malloc(BIG * 4), *yb = malloc(BIG * 4);
    ck_assert(ya && ys && yb);
    memset(ya, 0x5a, BIG * 4);
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL); /* AUTO by default */
    gpuq_conn *s = conn_with("socket", GPUQ_TRANSPORT_SOCKET);
    long long opens = stat_int("arena_open");
    ck_assert_int_eq(stat_int("arenas"), 0);
    ck_assert_msg(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_L2, x, BIG, ya) == 0, "%s",
                  gpuq_errmsg(a));
    ck_assert_int_eq(stat_int("arena_open"), opens + 1);
    ck_assert_int_eq(stat_int("arenas"), 1); /* the staging arena, while a lives */
    ck_assert_int_ge(stat_int("arena_bytes"), 2ll * BIG * 4);
    ck_assert_msg(gpuq_normalize_1d(s, GPUQ_DT_F32, GPUQ_NORM_L2, x, BIG, ys) == 0, "%s",
                  gpuq_errmsg(s));
    ck_assert_int_eq(stat_int("arena_open"), opens + 1); /* socket: none */
    ck_assert_msg(memcmp(ya, ys, BIG * 4) == 0, "AUTO's bytes differ from SOCKET's");
    /* the reference, in double */
    double ss = 0;
    for (size_t i = 0; i < BIG; i++)
        ss += (double)x[i] * x[i];
    double *ref = malloc(BIG * sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    for (size_t i = 0; i < BIG; i++)
        ref[i] = x[i] / sqrt(ss);
    ck_assert_double_lt(tu_rel_err_f32(ya, ref, BIG), 1e-6);
    /* reused: a second call opens nothing; in place (out = in) works too */
    memcpy(yb, x, BIG * 4);
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_L2, yb, BIG, yb), 0);
    ck_assert_int_eq(memcmp(yb, ys, BIG * 4), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens + 1);
    /* grown: a larger call reopens it once, larger */
    float *x2 = rand_f32(3 * BIG / 2, -5, 5), *y2a = malloc(6 * BIG), *y2s = malloc(6 * BIG);
    ck_assert(y2a && y2s);
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_SUM, x2, 3 * BIG / 2, y2a), 0);
    ck_assert_int_eq(gpuq_normalize_1d(s, GPUQ_DT_F32, GPUQ_NORM_SUM, x2, 3 * BIG / 2, y2s), 0);
    ck_assert_int_eq(memcmp(y2a, y2s, 6 * BIG), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens + 2);
    ck_assert_int_eq(stat_int("arena_close"), 1);
    ck_assert_int_eq(stat_int("arenas"), 1);
    ck_assert_int_ge(stat_int("arena_bytes"), 12ll * BIG);
    /* small calls stay on the socket */
    double sx[1000], sy[1000];
    for (int i = 0; i < 1000; i++)
        sx[i] = 1 + i % 7;
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F64, GPUQ_NORM_SUM, sx, 1000, sy), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens + 2);
    ck_assert_double_eq_tol(sy[6], 7.0 / 3997.0, 1e-15);
    /* SOCKET gives the staging arena back */
    ck_assert_int_eq(gpuq_set_transport(a, GPUQ_TRANSPORT_SOCKET), 0);
    ck_assert_int_eq(stat_int("arenas"), 0);
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_L2, x, BIG, ya), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens + 2);
    ck_assert_int_eq(memcmp(ya, ys, BIG * 4), 0);
    /* and gpuq_close does */
    ck_assert_int_eq(gpuq_set_transport(a, GPUQ_TRANSPORT_AUTO), 0);
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_L2, x, BIG, ya), 0);
    ck_assert_int_eq(stat_int("arenas"), 1);
    gpuq_close(a);
    for (int t = 0; t < 200 && stat_int("arena_bytes") != 0; t++)
        usleep(10000);
    ck_assert_int_eq(stat_int("arena_bytes"), 0);
    ck_assert_int_eq(stat_int("arenas"), 0);
    gpuq_close(s);
    free(x), free(ya), free(ys), free(yb), free(ref), free(x2), free(y2a), free(y2s);
}
END_TEST

/* Every convenience call, large, by c and by the socket connection s. */
static void every_call(gpuq_conn *c, gpuq_conn *s, const char *what)
{
    gpuq_conn *cs[2] = {c, s};
    /* normalize rows x cols, flat, f64 */
    enum { R = 700, C = 300 };
    double *n2 = rand_f64(R * C, -3, 10), *o2[2];
    /* haversine: to a point and pairwise, f64 */
    enum { NP = 100000 };
    double *pa = rand_points(NP), *pb = rand_points(NP), *h1[2], *h2[2];
    /* grid f32 */
    enum { GLAT = 600, GLON = 500 };
    float *g[2];
    /* pairwise f32 */
    enum { M = 301, N = 901, D = 16 };
    float *px = rand_f32(M * D, -1, 1), *py = rand_f32(N * D, -1, 1), *pd[2];
    /* knn f32, m * k odd */
    enum { KM = 201, KN = 20000, KD = 16, K = 5 };
    float *kx = rand_f32(KM * KD, -1, 1), *ky = rand_f32(KN * KD, -1, 1), *kd[2];
    int64_t *ki[2];
    for (int k = 0; k < 2; k++) {
        o2[k] = malloc(R * C * 8), h1[k] = malloc(NP * 8), h2[k] = malloc(NP * 8);
        g[k] = malloc(GLAT * GLON * 4), pd[k] = malloc(M * N * 4);
        kd[k] = malloc(KM * K * 4), ki[k] = malloc(KM * K * 8);
        ck_assert(o2[k] && h1[k] && h2[k] && g[k] && pd[k] && kd[k] && ki[k]);
        gpuq_conn *x = cs[k];
        ck_assert_msg(gpuq_normalize(x, GPUQ_DT_F64, GPUQ_NORM_ZSCORE, true, n2, R, C, o2[k]) == 0,
                      "%s", gpuq_errmsg(x));
        ck_assert_msg(
            gpuq_haversine_to(x, GPUQ_DT_F64, pa, NP, 30, 101, GPUQ_EARTH_RADIUS_KM, h1[k]) == 0,
            "%s", gpuq_errmsg(x));
        ck_assert_msg(
            gpuq_haversine_pair(x, GPUQ_DT_F64, pa, pb, NP, GPUQ_EARTH_RADIUS_KM, h2[k]) == 0, "%s",
            gpuq_errmsg(x));
        ck_assert_msg(gpuq_grid(x, GPUQ_DT_F32, -80, 80, GLAT, -170, 170, GLON, 30, 101,
                                GPUQ_EARTH_RADIUS_KM, g[k]) == 0,
                      "%s", gpuq_errmsg(x));
        ck_assert_msg(gpuq_pairwise(x, GPUQ_DT_F32, GPUQ_METRIC_COSINE, px, py, M, N, D, pd[k]) ==
                          0,
                      "%s", gpuq_errmsg(x));
        ck_assert_msg(gpuq_knn(x, GPUQ_DT_F32, GPUQ_METRIC_MANHATTAN, kx, ky, KM, KN, KD, K, kd[k],
                               ki[k]) == 0,
                      "%s", gpuq_errmsg(x));
    }
    ck_assert_msg(!memcmp(o2[0], o2[1], R * C * 8), "%s: normalize differs", what);
    ck_assert_msg(!memcmp(h1[0], h1[1], NP * 8), "%s: haversine to differs", what);
    ck_assert_msg(!memcmp(h2[0], h2[1], NP * 8), "%s: haversine pair differs", what);
    ck_assert_msg(!memcmp(g[0], g[1], GLAT * GLON * 4), "%s: grid differs", what);
    ck_assert_msg(!memcmp(pd[0], pd[1], M * N * 4), "%s: pairwise differs", what);
    ck_assert_msg(!memcmp(kd[0], kd[1], KM * K * 4), "%s: knn distances differ", what);
    ck_assert_msg(!memcmp(ki[0], ki[1], KM * K * 8), "%s: knn indices differ", what);
    for (int k = 0; k < 2; k++) {
        free(o2[k]), free(h1[k]), free(h2[k]), free(g[k]), free(pd[k]), free(kd[k]);
        free(ki[k]);
    }
    free(n2), free(pa), free(pb), free(px), free(py), free(kx), free(ky);
}

START_TEST(every_call_auto_and_shm)
{
    gpuq_conn *s = conn_with("socket", GPUQ_TRANSPORT_SOCKET);
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL);
    gpuq_conn *m = conn_with("shm", GPUQ_TRANSPORT_SHM);
    long long opens = stat_int("arena_open");
    every_call(a, s, "auto");
    long long after_auto = stat_int("arena_open");
    ck_assert_int_ge(after_auto, opens + 1); /* staged: one arena, grown as needed */
    ck_assert_int_le(after_auto, opens + 4);
    every_call(m, s, "shm");
    ck_assert_int_ge(stat_int("arena_open"), after_auto + 1);
    /* SHM stages small arrays too */
    double x[3] = {1, 2, 5}, y[3];
    gpuq_conn *m2 = conn_with("shm-small", GPUQ_TRANSPORT_SHM);
    long long before = stat_int("arena_open");
    ck_assert_int_eq(gpuq_normalize_1d(m2, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 3, y), 0);
    ck_assert_double_eq_tol(y[2], 0.625, 1e-15);
    ck_assert_int_eq(stat_int("arena_open"), before + 1);
    /* pings and status never stage */
    ck_assert_int_eq(gpuq_ping(m2), 0);
    ck_assert_int_eq(stat_int("arena_open"), before + 1);
    gpuq_close(m2), gpuq_close(m), gpuq_close(a), gpuq_close(s);
}
END_TEST

/* gpuq_call (gpuq_internal.h): A and B packed in one buffer; knn's two
 * outputs packed in one, the indices 4 bytes off an 8-byte boundary. */
START_TEST(internal_call_packed)
{
    enum { M = 201, N = 20000, D = 16, K = 5 };
    float *xy = rand_f32((M + N) * D, -1, 1);
    size_t out_bytes = M * K * 4 + M * K * 8;
    uint8_t *out[3];
    gpuq_conn *cs[3] = {conn_with("socket", GPUQ_TRANSPORT_SOCKET),
                        e2e_connect("auto", GPUQ_PRIO_NORMAL),
                        conn_with("shm", GPUQ_TRANSPORT_SHM)};
    long long opens = stat_int("arena_open");
    for (int k = 0; k < 3; k++) {
        gpuq_request r;
        gpuq_request_init(&r);
        r.op = GPUQ_OP_KNN;
        ck_assert_int_eq(gpuq_request_set_uint(&r, "k", K), 0);
        ck_assert_int_eq(gpuq_request_set_enum(&r, "metric", "euclidean"), 0);
        r.dtype = GPUQ_DT_F32;
        r.ndim_a = r.ndim_b = 2;
        r.shape_a[0] = M, r.shape_a[1] = D, r.shape_b[0] = N, r.shape_b[1] = D;
        out[k] = malloc(out_bytes);
        ck_assert_ptr_nonnull(out[k]);
        gpuq_reply rep;
        int rc = gpuq_call(cs[k], &r, xy, (M + N) * D * 4, NULL, 0, out[k], out_bytes, &rep);
        ck_assert_msg(rc == 0, "%d: %s", k, gpuq_errmsg(cs[k]));
        ck_assert_uint_eq(r.nin_ref + r.nout_ref, 0); /* the caller's request as it came */
        ck_assert_int_eq(rep.status, 0);
        ck_assert_uint_eq(rep.ndim_b, 2);
    }
    ck_assert_int_eq(stat_int("arena_open"), opens + 2);
    ck_assert_msg(!memcmp(out[0], out[1], out_bytes), "auto differs");
    ck_assert_msg(!memcmp(out[0], out[2], out_bytes), "shm differs");
    /* a result buffer of the wrong size: not staged, the socket's error */
    gpuq_request r = e2e_norm_req(BIG / 4);
    double *x = rand_f64(BIG / 4, 1, 2), *y = malloc(BIG * 2);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(gpuq_call(cs[2], &r, x, BIG * 2, NULL, 0, y, BIG * 2 - 8, NULL),
                     GPUQ_E_TOO_LARGE);
    ck_assert_int_eq(gpuq_ping(cs[2]), 0);
    for (int k = 0; k < 3; k++) {
        free(out[k]);
        gpuq_close(cs[k]);
    }
    free(xy), free(x), free(y);
}
END_TEST

/* Inputs in a user arena go by reference; only the output is staged. */
START_TEST(user_arena_inputs)
{
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL),
              *s = conn_with("s", GPUQ_TRANSPORT_SOCKET);
    gpuq_arena *ar = NULL;
    enum { M = 300, N = 1200, D = 8 };
    ck_assert_int_eq(gpuq_arena_open(a, (M + N) * D * 4 + 4096, &ar), 0);
    float *x = gpuq_arena_alloc(ar, M * D * 4), *y = gpuq_arena_alloc(ar, N * D * 4);
    ck_assert(x && y);
    float *rx = rand_f32(M * D, -1, 1), *ry = rand_f32(N * D, -1, 1);
    memcpy(x, rx, M * D * 4), memcpy(y, ry, N * D * 4);
    float *da = malloc(M * N * 4), *ds = malloc(M * N * 4); /* 1.4 MB: staged */
    ck_assert(da && ds);
    long long opens = stat_int("arena_open");
    ck_assert_int_eq(gpuq_pairwise(a, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, x, y, M, N, D, da), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens + 1);
    ck_assert_int_eq(stat_int("arenas"), 2);
    ck_assert_int_eq(gpuq_pairwise(s, GPUQ_DT_F32, GPUQ_METRIC_EUCLIDEAN, rx, ry, M, N, D, ds), 0);
    ck_assert_int_eq(memcmp(da, ds, M * N * 4), 0);
    ck_assert_int_eq(gpuq_arena_close(ar), 0);
    gpuq_close(a), gpuq_close(s);
    free(rx), free(ry), free(da), free(ds);
}
END_TEST

/* Pipelined requests never stage; a blocking call waits for them. */
START_TEST(pipelined_never_stage)
{
    gpuq_conn *a = e2e_connect("auto", GPUQ_PRIO_NORMAL);
    float *x = rand_f32(BIG, 1, 2), *y[3];
    long long opens = stat_int("arena_open");
    for (int k = 0; k < 3; k++) {
        y[k] = malloc(BIG * 4);
        ck_assert_ptr_nonnull(y[k]);
        gpuq_req *r = gpuq_req_new("normalize");
        uint64_t sh = BIG, id;
        ck_assert_int_eq(gpuq_req_set_input(r, 0, GPUQ_DT_F32, 1, &sh, x, BIG * 4), 0);
        ck_assert_int_eq(gpuq_req_set_output(r, 0, y[k], BIG * 4), 0);
        ck_assert_int_eq(gpuq_submit_req(a, r, &id), 0);
        gpuq_req_free(r);
    }
    float z;
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_SUM, x, 1, &z), GPUQ_E_BUSY);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(gpuq_wait_req(a, NULL), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens);
    float *ys = malloc(BIG * 4);
    ck_assert_ptr_nonnull(ys);
    ck_assert_int_eq(gpuq_normalize_1d(a, GPUQ_DT_F32, GPUQ_NORM_SUM, x, BIG, ys), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens + 1);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(memcmp(y[k], ys, BIG * 4), 0);
        free(y[k]);
    }
    gpuq_close(a);
    free(x), free(ys);
}
END_TEST

START_TEST(without_arenas)
{
    const char *off[] = {"--session-arena", "0", NULL};
    e2e_restart(off);
    gpuq_conn *c = e2e_connect("off", GPUQ_PRIO_NORMAL);
    ck_assert_int_eq(gpuq_set_transport(c, GPUQ_TRANSPORT_SHM), GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(gpuq_errmsg(c), "transport shm: gpuqd offers this session no "
                                         "shared-memory arenas"),
                  "%s", gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_set_transport(c, (gpuq_transport)7), GPUQ_E_BAD_ARGUMENT);
    ck_assert_int_eq(gpuq_ping(c), 0); /* serves on, AUTO still */
    float *x = rand_f32(BIG, 1, 2), *ya = malloc(BIG * 4), *ys = malloc(BIG * 4);
    ck_assert(ya && ys);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_L1, x, BIG, ya), 0);
    ck_assert_int_eq(gpuq_set_transport(c, GPUQ_TRANSPORT_SOCKET), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_L1, x, BIG, ys), 0);
    ck_assert_int_eq(memcmp(ya, ys, BIG * 4), 0);
    ck_assert_int_eq(stat_int("arena_open"), 0);
    gpuq_close(c);
    free(x), free(ya), free(ys);
}
END_TEST

START_TEST(without_room)
{
    const char *small[] = {"--session-arena", "12M", NULL};
    e2e_restart(small);
    gpuq_conn *c = conn_with("shm", GPUQ_TRANSPORT_SHM);
    enum { N = 4u << 20 }; /* 16 MB in, 16 MB out: over session_arena */
    float *x = rand_f32(N, 1, 2), *y = malloc(N * 4), *ys = malloc(N * 4);
    ck_assert(y && ys);
    memset(y, 0x77, N * 4);
    long long in0 = stat_int("bytes_in");
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, N, y), GPUQ_E_TOO_LARGE);
    ck_assert_msg(strstr(gpuq_errmsg(c), "too_large: shm transport: the arrays need a staging "
                                         "arena of 33554432 bytes, over this session's "
                                         "session_arena 12582912"),
                  "%s", gpuq_errmsg(c));
    ck_assert_int_lt(stat_int("bytes_in") - in0, 1 << 20); /* nothing sent but status */
    ck_assert_int_eq(((uint8_t *)y)[12345], 0x77);
    ck_assert_int_eq(gpuq_ping(c), 0);
    /* AUTO: by socket, and not asked again */
    ck_assert_int_eq(gpuq_set_transport(c, GPUQ_TRANSPORT_AUTO), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, N, y), 0);
    gpuq_conn *s = conn_with("socket", GPUQ_TRANSPORT_SOCKET);
    ck_assert_int_eq(gpuq_normalize_1d(s, GPUQ_DT_F32, GPUQ_NORM_SUM, x, N, ys), 0);
    ck_assert_int_eq(memcmp(y, ys, N * 4), 0);
    ck_assert_int_eq(stat_int("arena_open"), 0);
    /* a quota the user's own arena fills: the daemon refuses, AUTO falls
     * back and does not ask again for that size, SHM fails with its code */
    gpuq_arena *mine = NULL;
    ck_assert_int_eq(gpuq_arena_open(c, 8u << 20, &mine), 0);
    enum { H = 1u << 20 }; /* 4 MB in, 4 MB out */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, H, y), 0);
    ck_assert_int_eq(gpuq_normalize_1d(s, GPUQ_DT_F32, GPUQ_NORM_SUM, x, H, ys), 0);
    ck_assert_int_eq(memcmp(y, ys, H * 4), 0);
    long long opens = stat_int("arena_open");
    ck_assert_int_eq(opens, 2); /* mine, and the one refused */
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, H, y), 0);
    ck_assert_int_eq(stat_int("arena_open"), opens); /* remembered */
    ck_assert_int_eq(gpuq_set_transport(c, GPUQ_TRANSPORT_SHM), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, H, y), GPUQ_E_TOO_LARGE);
    ck_assert_msg(strstr(gpuq_errmsg(c), "too_large: shm transport: no staging arena of "), "%s",
                  gpuq_errmsg(c));
    ck_assert_msg(strstr(gpuq_errmsg(c), "session_arena"), "%s", gpuq_errmsg(c));
    /* room again: SHM gets its arena */
    ck_assert_int_eq(gpuq_arena_close(mine), 0);
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F32, GPUQ_NORM_SUM, x, H, y), 0);
    ck_assert_int_eq(memcmp(y, ys, H * 4), 0);
    gpuq_close(c), gpuq_close(s);
    free(x), free(y), free(ys);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_transport");
    TCase *tc = tcase_create("transport");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, auto_large_normalize);
    tcase_add_test(tc, every_call_auto_and_shm);
    tcase_add_test(tc, internal_call_packed);
    tcase_add_test(tc, user_arena_inputs);
    tcase_add_test(tc, pipelined_never_stage);
    tcase_add_test(tc, without_arenas);
    tcase_add_test(tc, without_room);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    return tu_run_suite(suite());
}
