/* SPDX-License-Identifier: Apache-2.0 */
/* bench_clients.c - many clients: client processes, each its own connection, by socket (throughput)
 * and from their own arenas (the shm ceiling). */
#include "bench_clients.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_harness.h"
#include "gpuq_kernels.h"
#include "bench_job.h"

/* What a client process tells the parent (one write, under PIPE_BUF). */
typedef struct client_report {
    int idx;
    long ok;
    char first[200]; /* its first error, "" when none */
} client_report;

/* One client process: nreq SMALL_N-float normalize requests, DEPTH in
 * flight, each reply checked against the CPU reference (computed here: the
 * parent's buffers may be pinned, which a forked child must not touch).
 * Fills rep: the number of successful replies, the first error. */
static void client_loop(const char *sock, const char *what, int nreq, client_report *rep)
{
    static float x[SMALL_N], want[SMALL_N], y[SLOTS][SMALL_N];
    row r = {.what = what, .quiet = true};
    rep->ok = 0;
    for (int i = 0; i < SMALL_N; i++)
        x[i] = 1.0f + (float)(i % 97);
    if (gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, 0, x, want, 1, SMALL_N) != GPUQ_K_OK) {
        row_error(&r, "client", "CPU reference failed");
        goto done;
    }
    gpuq_conn *c;
    char why[200];
    if (bench_connect(sock, &c, why, sizeof why)) {
        row_error(&r, "gpuq", why);
        goto done;
    }
    int sent = 0, got = 0;
    bool stop = false;
    for (;;) {
        while (!stop && sent < nreq && gpuq_pending(c) < DEPTH) {
            gpuq_request req;
            gpuq_request_init(&req);
            req.op = GPUQ_OP_NORMALIZE;
            req.dtype = GPUQ_DT_F32;
            req.ndim_a = 1;
            req.shape_a[0] = SMALL_N;
            memset(y[sent % SLOTS], 0xff, sizeof y[0]);
            int rc = gpuq_submit(c, &req, x, sizeof x, NULL, 0, y[sent % SLOTS], sizeof y[0], NULL);
            if (rc) {
                row_error(&r, "gpuq submit", gpuq_errmsg(c));
                stop = true; /* the connection is unusable or refuses: no more requests */
                break;
            }
            sent++;
        }
        unsigned before = gpuq_pending(c);
        if (before == 0)
            break;
        gpuq_reply rp;
        int rc = gpuq_wait(c, &rp);
        if (gpuq_pending(c) == before) { /* the stream broke: no reply will come */
            row_error(&r, "gpuq wait", gpuq_errmsg(c));
            break;
        }
        const float *out = y[got++ % SLOTS];
        size_t bad;
        if (rc) {
            row_error(&r, "gpuq", gpuq_errmsg(c));
        } else if (rp.dtype != GPUQ_DT_F32 || rp.ndim != 1 || rp.shape[0] != SMALL_N) {
            row_error(&r, "gpuq", "reply of the wrong dtype or shape");
        } else if (close_f32(out, want, SMALL_N, 1e-5, 0.0, &bad)) {
            snprintf(why, sizeof why, "wrong result: element %zu is %.9g, want %.9g", bad,
                     (double)out[bad], (double)want[bad]);
            row_error(&r, "gpuq", why);
        } else {
            rep->ok++;
        }
    }
    gpuq_close(c);
done:
    memcpy(rep->first, r.first, sizeof rep->first);
}

void bench_throughput(bench *b, int nclients, int nreq, job *small, int peer_reps)
{
    char what[80];
    snprintf(what, sizeof what, "normalize 4 KiB f32, %d client%s x %d in flight", nclients,
             nclients == 1 ? "" : "s", DEPTH);
    row r = {.what = what};
    pid_t pids[64];
    long ok_of[64];
    bool exited_ok[64];
    int failed = 0;
    if (nclients > 64)
        nclients = 64;
    int pfd[2];
    if (pipe(pfd) != 0) {
        fprintf(stderr, "bench: pipe: %s\n", strerror(errno));
        exit(1);
    }
    fflush(NULL);
    double t0 = now_s();
    for (int k = 0; k < nclients; k++) {
        ok_of[k] = 0;
        exited_ok[k] = false;
        pids[k] = fork();
        if (pids[k] == 0) {
            close(pfd[0]);
            client_report rep = {.idx = k};
            client_loop(b->sock, what, nreq, &rep);
            int wrc = io_full(pfd[1], &rep, sizeof rep, true);
            _exit(wrc == 0 && rep.ok == nreq ? 0 : 1);
        }
        if (pids[k] < 0)
            fprintf(stderr, "bench: %s: fork: %s\n", what, strerror(errno));
    }
    close(pfd[1]);
    /* Reports until every client has closed the pipe (exited), then reap. */
    client_report rep;
    while (io_full(pfd[0], &rep, sizeof rep, false) == 0) {
        if (rep.idx < 0 || rep.idx >= nclients)
            continue;
        ok_of[rep.idx] = rep.ok;
        rep.first[sizeof rep.first - 1] = 0;
        if (rep.first[0])
            row_note(&r, rep.first); /* its count is taken below */
    }
    close(pfd[0]);
    for (int k = 0; k < nclients; k++) {
        int st;
        if (pids[k] > 0 && waitpid(pids[k], &st, 0) == pids[k])
            exited_ok[k] = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    double dt = now_s() - t0;
    long done = 0;
    for (int k = 0; k < nclients; k++) {
        if (exited_ok[k] && ok_of[k] == nreq) {
            done += nreq;
        } else {
            /* at least one: a client that failed after all its replies (its report
             * lost, a crash on exit) still failed */
            long lost = nreq - ok_of[k];
            r.errors += lost > 0 ? lost : 1;
            failed++;
        }
    }
    if (failed)
        fprintf(stderr, "bench: %s: %d of %d clients failed; their requests are not counted\n",
                what, failed, nclients);
    /* the peer: the same op, one thread, back to back; one measurement, so
     * one error when any run of it fails */
    int np = 0;
    double tp = now_s();
    if (!b->peer)
        row_error(&r, "in-process", b->peer_why);
    else
        for (; np < peer_reps; np++)
            if (job_peer(b->peer, small)) {
                row_error(&r, "in-process", bench_peer_errmsg(b->peer));
                break;
            }
    tp = now_s() - tp;
    char so[64], sp[64], sr[16];
    double ours = done ? (double)done / dt : 0, peer = np == peer_reps ? (double)np / tp : 0;
    if (ours > 0)
        snprintf(so, sizeof so, "%.0f req/s", ours);
    else
        snprintf(so, sizeof so, "n/a");
    if (peer > 0)
        snprintf(sp, sizeof sp, "%.0f req/s, 1 thread", peer);
    else
        snprintf(sp, sizeof sp, "n/a");
    ratio_fmt(sr, sizeof sr, ours, peer);
    row_print(b, &r, so, sp, sr);
}

typedef struct shm_report {
    int idx;
    long ok;
    double t0, t1; /* CLOCK_MONOTONIC: its first submit, its last reply */
    char first[200];
} shm_report;

/* One shm client: an arena with depth slots of n floats in and out, nreq
 * flat sum normalizes with depth in flight, started when go_fd reads EOF.
 * The last result in each slot is checked against the CPU reference,
 * after the clock stops. */
static void shm_client(const char *sock, const char *what, uint64_t n, int depth, int nreq,
                       int ready_fd, int go_fd, shm_report *rep)
{
    row r = {.what = what, .quiet = true};
    gpuq_conn *c = NULL;
    gpuq_arena *a = NULL;
    float *want = NULL, *in[8] = {0}, *out[8] = {0};
    char why[200], ch = 'r';
    bool ready_sent;
    size_t bytes = n * sizeof(float);
    rep->ok = 0;
    if (bench_connect(sock, &c, why, sizeof why)) {
        row_error(&r, "gpuq", why);
        goto ready;
    }
    if (gpuq_arena_open(c, (uint64_t)depth * 2 * (bytes + 64), &a)) {
        row_error(&r, "gpuq arena", gpuq_errmsg(c));
        goto ready;
    }
    want = malloc(bytes);
    for (int s = 0; s < depth; s++) {
        in[s] = gpuq_arena_alloc(a, bytes);
        out[s] = gpuq_arena_alloc(a, bytes);
    }
    if (!want || !in[depth - 1] || !out[depth - 1]) {
        row_error(&r, "client", "out of memory");
        goto ready;
    }
    for (uint64_t i = 0; i < n; i++)
        in[0][i] = 1.0f + (float)(i % 997);
    for (int s = 1; s < depth; s++)
        memcpy(in[s], in[0], bytes);
    if (gpuq_cpu_normalize(GPUQ_K_F32, GPUQ_K_SUM, 0, in[0], want, 1, n) != GPUQ_K_OK)
        row_error(&r, "client", "CPU reference failed");
ready:
    ready_sent = io_full(ready_fd, &ch, 1, true) == 0;
    close(ready_fd); /* the parent's count of ready clients ends at EOF too */
    if (ready_sent && r.errors == 0 && read(go_fd, &ch, 1) == 0) { /* EOF: go */
        /* the builder: an array that lies in an arena of the connection goes
         * by reference (gpuq_submit's raw payload would copy it) */
        gpuq_req *req[8] = {0};
        gpuq_result *res = gpuq_result_new();
        uint64_t shape[1] = {n};
        for (int s = 0; s < depth; s++)
            if (!(req[s] = gpuq_req_new("normalize")) ||
                gpuq_req_set_input(req[s], 0, GPUQ_DT_F32, 1, shape, in[s], bytes) ||
                gpuq_req_set_output(req[s], 0, out[s], bytes)) {
                row_error(&r, "gpuq request", req[s] ? gpuq_req_errmsg(req[s]) : "out of memory");
                goto done_reqs;
            }
        if (!res) {
            row_error(&r, "client", "out of memory");
            goto done_reqs;
        }
        int sent = 0, got = 0;
        rep->t0 = now_s();
        while (got < nreq) {
            while (sent < nreq && sent - got < depth) {
                if (gpuq_submit_req(c, req[sent % depth], NULL)) {
                    row_error(&r, "gpuq submit", gpuq_errmsg(c));
                    goto done_reqs;
                }
                sent++;
            }
            unsigned before = gpuq_pending(c);
            int rc = gpuq_wait_req(c, res);
            if (gpuq_pending(c) == before) {
                row_error(&r, "gpuq wait", gpuq_errmsg(c));
                goto done_reqs;
            }
            got++;
            if (rc) {
                row_error(&r, "gpuq",
                          *gpuq_result_message(res) ? gpuq_result_message(res) : gpuq_errmsg(c));
            } else {
                rep->ok++;
            }
        }
        rep->t1 = now_s();
        /* each slot holds its last request's result: checked after the clock */
        for (int s = 0; s < depth && s < nreq; s++) {
            size_t bad;
            if (close_f32(out[s], want, n, 1e-5, 0.0, &bad)) {
                snprintf(why, sizeof why, "wrong result: element %zu is %.9g, want %.9g", bad,
                         (double)out[s][bad], (double)want[bad]);
                row_error(&r, "gpuq", why);
                rep->ok--;
            }
        }
    done_reqs:
        for (int s = 0; s < depth; s++)
            gpuq_req_free(req[s]);
        gpuq_result_free(res);
    }
    free(want);
    gpuq_close(c); /* closes the arena too */
    memcpy(rep->first, r.first, sizeof rep->first);
}

/* nclients processes, each depth requests of n floats in flight from its
 * own arena: the input rate of all of them together (bytes of the inputs
 * over the span from the first submit to the last reply), against what the
 * host can feed the device: the pinned H2D ceiling on CUDA, memcpy on the
 * CPU backend. */
void bench_shm_clients(bench *b, int nclients, int depth, uint64_t n, int nreq)
{
    char what[128];
    snprintf(what, sizeof what, "normalize f32 sum, n = %llu, %d clients x %d in flight, shm",
             (unsigned long long)n, nclients, depth);
    row r = {.what = what};
    enum { MAXC = 16 };
    if (nclients > MAXC)
        nclients = MAXC;
    if (depth > 8)
        depth = 8;
    pid_t pids[MAXC];
    int ready[2], go[2], rep_p[2];
    if (pipe(ready) || pipe(go) || pipe(rep_p)) {
        fprintf(stderr, "bench: pipe: %s\n", strerror(errno));
        exit(1);
    }
    fflush(NULL);
    for (int k = 0; k < nclients; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            close(ready[0]);
            close(go[1]);
            close(rep_p[0]);
            shm_report rep = {.idx = k};
            shm_client(b->sock, what, n, depth, nreq, ready[1], go[0], &rep);
            int wrc = io_full(rep_p[1], &rep, sizeof rep, true);
            _exit(wrc == 0 && rep.ok == nreq ? 0 : 1);
        }
        if (pids[k] < 0)
            fprintf(stderr, "bench: %s: fork: %s\n", what, strerror(errno));
    }
    close(ready[1]);
    close(go[0]);
    close(rep_p[1]);
    char ch;
    for (int k = 0; k < nclients; k++) /* each is connected, its arena filled */
        if (io_full(ready[0], &ch, 1, false))
            break;
    close(go[1]); /* go */
    close(ready[0]);
    double t0 = 0, t1 = 0;
    long done = 0;
    int failed = 0, reported = 0;
    shm_report rep;
    while (io_full(rep_p[0], &rep, sizeof rep, false) == 0) {
        if (rep.idx < 0 || rep.idx >= nclients)
            continue;
        reported++;
        rep.first[sizeof rep.first - 1] = 0;
        if (rep.first[0])
            row_note(&r, rep.first);
        if (rep.ok == nreq) {
            done += nreq;
            t0 = t0 == 0 || rep.t0 < t0 ? rep.t0 : t0;
            t1 = rep.t1 > t1 ? rep.t1 : t1;
        } else {
            r.errors += nreq - rep.ok > 0 ? nreq - rep.ok : 1;
            failed++;
        }
    }
    close(rep_p[0]);
    for (int k = 0; k < nclients; k++) { /* a failed client's report counts its errors */
        int st;
        if (pids[k] > 0)
            (void)waitpid(pids[k], &st, 0);
    }
    if (reported < nclients) {
        r.errors += (long)(nclients - reported) * nreq;
        failed += nclients - reported;
    }
    if (failed)
        fprintf(stderr, "bench: %s: %d of %d clients failed\n", what, failed, nclients);
    /* the ceiling */
    double ceil_gbs = 0;
    const char *ceil_what = "memcpy";
    if (b->peer && !strncmp(bench_peer_name(b->peer), "cuda", 4)) {
        bench_copy_rates cr;
        void *pinned = NULL;
        ceil_what = "pinned H2D";
        if (bench_peer_alloc(b->peer, n * sizeof(float), &pinned) == 0 &&
            bench_peer_copy_ceiling(b->peer, pinned, n * sizeof(float), 10, &cr) == 0)
            ceil_gbs = cr.pinned_h2d;
        else
            row_error(&r, "in-process", bench_peer_errmsg(b->peer));
        bench_peer_free(b->peer, pinned);
    } else {
        size_t bytes = n * sizeof(float);
        char *x = malloc(bytes), *y = malloc(bytes);
        if (x && y) {
            memset(x, 1, bytes);
            memset(y, 0, bytes);
            double best = 1e30;
            for (int i = 0; i < 5; i++) {
                double t = now_s();
                memcpy(y, x, bytes);
                t = now_s() - t;
                best = t < best ? t : best;
                x[i] = y[bytes - 1 - (size_t)i]; /* keep the copy */
            }
            ceil_gbs = (double)bytes / best / 1e9;
        } else {
            row_error(&r, "in-process", "out of memory");
        }
        free(x);
        free(y);
    }
    char so[64], sp[64], sr[16];
    double gbs = done && t1 > t0 ? (double)done * (double)(n * sizeof(float)) / (t1 - t0) / 1e9 : 0;
    if (failed == 0 && gbs > 0)
        snprintf(so, sizeof so, "%.1f GB/s", gbs);
    else
        snprintf(so, sizeof so, "n/a");
    if (ceil_gbs > 0)
        snprintf(sp, sizeof sp, "%.1f GB/s, %s", ceil_gbs, ceil_what);
    else
        snprintf(sp, sizeof sp, "n/a");
    ratio_fmt(sr, sizeof sr, failed ? 0 : gbs, ceil_gbs);
    row_print(b, &r, so, sp, sr);
}
