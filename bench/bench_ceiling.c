/* SPDX-License-Identifier: Apache-2.0 */
/* bench_ceiling.c - ping and the ceilings: what the socket and the copies allow (a socketpair echo
 * to a forked process, memcpy, the pinned device copies). */
#include "bench_ceiling.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_harness.h"
#include "bench_job.h"

/* One round trip of a request-sized message over a socketpair to a forked
 * process: in_bytes there (all read), then out_bytes back, as a request and
 * its reply go. reps round trips; lat[*n] in seconds. */
static int echo_bulk(size_t in_bytes, size_t out_bytes, int reps, double *lat, int *n, char *why,
                     size_t cap)
{
    int sv[2];
    *n = 0;
    size_t big = in_bytes > out_bytes ? in_bytes : out_bytes;
    char *buf = malloc(big ? big : 1);
    if (!buf) {
        snprintf(why, cap, "out of memory");
        return GPUQ_E_NO_MEMORY;
    }
    memset(buf, 1, big);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, cap, "socketpair: %s", strerror(errno));
        free(buf);
        return GPUQ_E_IO;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, cap, "fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        free(buf);
        return GPUQ_E_IO;
    }
    if (pid == 0) {
        close(sv[0]);
        int rc;
        while ((rc = io_full(sv[1], buf, in_bytes, false)) == 0)
            if (io_full(sv[1], buf, out_bytes, true))
                _exit(1);
        _exit(rc == GPUQ_E_CLOSED ? 0 : 1);
    }
    close(sv[1]);
    int rc = 0;
    for (int i = 0; i < reps && rc == 0; i++) {
        double t = now_s();
        if ((rc = io_full(sv[0], buf, in_bytes, true)) ||
            (rc = io_full(sv[0], buf, out_bytes, false)))
            snprintf(why, cap, "echo: %s", gpuq_strerror(rc));
        else
            lat[(*n)++] = now_s() - t;
    }
    close(sv[0]);
    free(buf);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (!rc)
            snprintf(why, cap, "echo process failed");
        rc = rc ? rc : GPUQ_E_IO;
    }
    return rc;
}

/* gpuq's request j over the socket against the socket's own round trip of
 * the same bytes: the ratio is the share of the ceiling gpuq reaches. */
void bench_socket_ceiling(bench *b, job *j, int reps)
{
    char what[96];
    snprintf(what, sizeof what, "normalize f32 sum, n = %llu, socket vs echo",
             (unsigned long long)j->n);
    row r = {.what = what};
    double *ours = samples_alloc(reps), *peer = samples_alloc(reps);
    int np = 0;
    char why[300];
    if (echo_bulk(j->in_bytes, j->out_bytes, reps, peer, &np, why, sizeof why))
        row_error(&r, "socketpair echo", why);
    int no = gpuq_samples(b, &r, j, reps, ours, false);
    char so[64], sp[64], sr[16];
    double o50, p50, gb = (double)(j->in_bytes + j->out_bytes) / 1e9;
    large_fmt(so, sizeof so, ours, no, gb, &o50);
    large_fmt(sp, sizeof sp, peer, np, gb, &p50);
    ratio_fmt(sr, sizeof sr, p50, o50);
    row_print(b, &r, so, sp, sr);
    free(ours);
    free(peer);
}

/* The copy ceilings of the CUDA peer: gpuqd's way (a registered memfd
 * mapping) against a pinned allocation, each direction. */
void bench_copy_ceiling(bench *b, size_t bytes)
{
    char w0[96], w1[96];
    snprintf(w0, sizeof w0, "copy %zu MiB host to device: arena memory vs pinned", bytes >> 20);
    snprintf(w1, sizeof w1, "copy %zu MiB device to host: arena memory vs pinned", bytes >> 20);
    row r0 = {.what = w0}, r1 = {.what = w1};
    bench_copy_rates cr;
    void *pinned = NULL;
    int rc = bench_peer_alloc(b->peer, bytes, &pinned);
    if (!rc) {
        memset(pinned, 1, bytes);
        rc = bench_peer_copy_ceiling(b->peer, pinned, bytes, 10, &cr);
    }
    bench_peer_free(b->peer, pinned);
    char a[64], p[64], q[16];
    if (rc) {
        row_error(&r0, "in-process", bench_peer_errmsg(b->peer));
        row_error(&r1, "in-process", bench_peer_errmsg(b->peer));
        row_print(b, &r0, "n/a", "n/a", "n/a");
        row_print(b, &r1, "n/a", "n/a", "n/a");
        return;
    }
    snprintf(a, sizeof a, "%.1f GB/s", cr.memfd_h2d);
    snprintf(p, sizeof p, "%.1f GB/s", cr.pinned_h2d);
    ratio_fmt(q, sizeof q, cr.memfd_h2d, cr.pinned_h2d);
    row_print(b, &r0, a, p, q);
    snprintf(a, sizeof a, "%.1f GB/s", cr.memfd_d2h);
    snprintf(p, sizeof p, "%.1f GB/s", cr.pinned_d2h);
    ratio_fmt(q, sizeof q, cr.memfd_d2h, cr.pinned_d2h);
    row_print(b, &r1, a, p, q);
    /* an upload and a download at once: the full-duplex pipelining's ceiling */
    char w2[96];
    snprintf(w2, sizeof w2, "copy %zu MiB both ways at once, each way vs pinned H2D alone",
             bytes >> 20);
    row r2 = {.what = w2};
    snprintf(a, sizeof a, "%.1f GB/s", cr.duplex);
    snprintf(p, sizeof p, "%.1f GB/s", cr.pinned_h2d);
    ratio_fmt(q, sizeof q, cr.duplex, cr.pinned_h2d);
    row_print(b, &r2, a, p, q);
}

/* What a shm client process tells the parent. */
/* ---- ping, and its peer: an echo over a socketpair ---- */

/* reps round trips of ECHO_BYTES to a forked echo process; lat[*n] in us. */
static int echo_peer(int reps, double *lat, int *n, char *why, size_t cap)
{
    int rc = echo_bulk(ECHO_BYTES, ECHO_BYTES, reps, lat, n, why, cap);
    for (int i = 0; i < *n; i++)
        lat[i] *= 1e6;
    return rc;
}

void bench_ping(bench *b, int reps)
{
    row r = {.what = "ping round trip"};
    double *ours = samples_alloc(reps), *peer = samples_alloc(reps);
    int no = 0, np = 0;
    for (int i = 0; i < reps; i++) {
        if (!b->c) {
            row_error(&r, "gpuq", b->conn_why);
            continue;
        }
        double t = now_s();
        int rc = gpuq_ping(b->c);
        double dt = (now_s() - t) * 1e6;
        if (rc)
            row_error(&r, "gpuq", gpuq_errmsg(b->c));
        else
            ours[no++] = dt;
    }
    char why[200];
    if (echo_peer(reps, peer, &np, why, sizeof why))
        row_error(&r, "socketpair echo", why);
    char so[64], sp[64], sr[16];
    double o50, p50;
    lat_us_fmt(so, sizeof so, ours, no, &o50);
    lat_us_fmt(sp, sizeof sp, peer, np, &p50);
    ratio_fmt(sr, sizeof sr, p50, o50);
    row_print(b, &r, so, sp, sr);
    free(ours);
    free(peer);
}
