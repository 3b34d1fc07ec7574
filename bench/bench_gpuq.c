/* SPDX-License-Identifier: Apache-2.0 */
/* bench_gpuq.c - end-to-end latency and throughput of gpuqd, each row beside
 * an in-process peer of the same work measured in the same run.
 *
 * gpuq_bench [--gpuqd PATH] [--device cpu|cuda] [--socket PATH] [--quick]
 *
 * Starts its own gpuqd (--gpuqd, --device) on a temporary socket, or with
 * --socket uses a daemon already listening there. Rows: ping round trip;
 * 4 KiB float32 normalize one at a time; the same with 1, 16 and 64 client
 * processes each keeping 8 requests in flight; then the large rows, each
 * by socket and again with gpuq's arrays in an arena (", shm"): flat sum
 * normalize of 2^24 float32 (64 MiB), row-wise l2 normalize of 4096 x 4096
 * float32, haversine of 10^6 float64 points to one point, pairwise
 * euclidean (4096 x 4096, d = 64, float32), the grid (1000 x 1000 float64)
 * and kNN (m = 4096 queries, n = 10^6 rows, d = 64, k = 10, float32: a 256
 * MB payload, within the default max_payload of 1 GiB); the flat normalize
 * also as a plain call with libgpuq's default transport (", auto": its
 * staging arena and two copies). Ceilings: the flat
 * normalize by socket against a socketpair echo of the same bytes to a
 * forked process (request in, reply out: what the socket allows); 4 client
 * processes with 2 flat normalizes each in flight from their own arenas,
 * input GB/s against the pinned host-to-device copy (CUDA) or memcpy (CPU);
 * on CUDA, 64 MiB copies each way from memory registered as gpuqd
 * registers arenas against a pinned allocation. --quick shrinks counts and
 * sizes for CI; GPUQ_BENCH_SHM_ONLY=1 runs the shm rows and what follows
 * them only (for experiments), =clients the many-client row and the copy
 * ceiling only; GPUQ_BENCH_STAGES=1 adds the daemon's per-stage device
 * times of three runs of each shm row on stderr, =N (N > 1) the median of
 * N runs. bench/targets.py sets these rows beside the
 * PyTorch peer's (bench/peer_torch.py) and the targets.
 *
 * Output: a Markdown table, rows starting with '|': what, gpuq's figure, the
 * peer's figure, the speed ratio gpuq / peer (1.00: as fast; 0.25: four
 * times slower) and the row's error count. The peer (bench_peer.h) is the
 * same op in this process on the daemon's backend (CPU reference, or the
 * same CUDA kernels with copies from pinned memory); for ping it is a
 * 32-byte echo between two processes over a Unix socketpair, the floor under
 * any round trip; for throughput it is one thread back to back.
 *
 * Failure: any failed request - an error reply, a connect failure, a broken
 * or short reply stream, a reply of the wrong shape or with wrong values
 * (checked against the peer's result: a row's first and last runs whole,
 * the runs between, which go back to back, at 256 spread elements poisoned
 * before each), a client process that dies - counts
 * in its row's errors, and so does a failed in-process run. Latencies and
 * rates count successful requests only; a client with any failure counts
 * none of its requests as done; a row with no success prints n/a. The table
 * ends with a "bench:" line giving the total; the exit status is 1 when any
 * row has errors or the daemon it started exited non-zero, 2 on bad usage.
 * Details of the first errors of each row go to stderr.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_ceiling.h"
#include "bench_clients.h"
#include "bench_harness.h"
#include "bench_job.h"

/* ---- the daemon this program starts ---- */

/* Does a server accept connections at path? The socket file appears at
 * bind(), a moment before listen(): a connect in between is refused. */
static bool sock_listening(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return false;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool ok = connect(fd, (const struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static pid_t daemon_start(bench *b, const char *gpuqd, const char *device, char *dir)
{
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    snprintf(b->sock, sizeof b->sock, "%s/s.sock", dir);
    fflush(NULL);
    pid_t d = fork();
    if (d < 0) {
        fprintf(stderr, "bench: fork: %s\n", strerror(errno));
        return -1;
    }
    if (d == 0) {
        /* every client is this user: the per-user cap lifted to max_sessions */
        execl(gpuqd, gpuqd, "--device", device, "--socket", b->sock, "--log-level", "warn",
              "--max-sessions-per-user", "256", (char *)NULL);
        fprintf(stderr, "bench: exec %s: %s\n", gpuqd, strerror(errno));
        _exit(127);
    }
    for (int i = 0; i < 1000 && !sock_listening(b->sock); i++) {
        int st;
        if (waitpid(d, &st, WNOHANG) == d) {
            fprintf(stderr, "bench: gpuqd exited before listening (status %d)\n",
                    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            return 0; /* reaped: nothing to stop later */
        }
        usleep(20000);
    }
    return d;
}

/* SIGTERM and wait: 0 when it exited 0. */
static int daemon_stop(pid_t d)
{
    if (d <= 0)
        return d == 0 ? -1 : 0;
    if (kill(d, SIGTERM) != 0) {
        fprintf(stderr, "bench: kill gpuqd: %s\n", strerror(errno));
        return -1;
    }
    int st;
    if (waitpid(d, &st, 0) != d) {
        fprintf(stderr, "bench: waitpid gpuqd: %s\n", strerror(errno));
        return -1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench: gpuqd exited with status %d\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return -1;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: gpuq_bench [--gpuqd PATH] [--device cpu|cuda] [--socket PATH] "
                    "[--quick]\n");
}

int main(int argc, char **argv)
{
    const char *gpuqd = "gpuqd", *device = "cpu", *socket = NULL;
    static bench b;
    for (int i = 1; i < argc; i++) {
        bool has_val = i + 1 < argc;
        if (!strcmp(argv[i], "--quick"))
            b.quick = true;
        else if (!strcmp(argv[i], "--gpuqd") && has_val)
            gpuqd = argv[++i];
        else if (!strcmp(argv[i], "--device") && has_val)
            device = argv[++i];
        else if (!strcmp(argv[i], "--socket") && has_val)
            socket = argv[++i];
        else {
            usage();
            return 2;
        }
    }
    char dir[] = "/tmp/gpuq-bench-XXXXXX";
    pid_t d = -1; /* -1: none started; 0: started and already gone */
    if (socket)
        snprintf(b.sock, sizeof b.sock, "%s", socket);
    else if ((d = daemon_start(&b, gpuqd, device, dir)) < 0)
        return 1;

    /* b.c NULL on failure: every gpuq request of every row fails. Its
     * rows by socket go by socket: libgpuq's default (AUTO) would put large
     * arrays in its staging arena (the ", auto" row measures that). */
    if (bench_connect(b.sock, &b.c, b.conn_why, sizeof b.conn_why))
        fprintf(stderr, "bench: %s: %s\n", b.sock, b.conn_why);
    else if (gpuq_set_transport(b.c, GPUQ_TRANSPORT_SOCKET))
        fprintf(stderr, "bench: transport socket: %s\n", gpuq_errmsg(b.c));
    const gpuq_server_info *info = b.c ? gpuq_info(b.c) : NULL;
    const char *backend = info ? info->backend : device;
    int rc = bench_peer_open(!strcmp(backend, "cuda"), info ? info->device : -1, &b.peer,
                             b.peer_why, sizeof b.peer_why);
    if (rc)
        fprintf(stderr, "bench: in-process peer: %s\n", b.peer_why);

    char title[64], ours_h[64], peer_h[64];
    snprintf(title, sizeof title, "gpuq_bench%s", b.quick ? " --quick" : "");
    snprintf(ours_h, sizeof ours_h, "gpuq (%s)", backend);
    snprintf(peer_h, sizeof peer_h, "in-process (%s)", b.peer ? bench_peer_name(b.peer) : "none");
    printf("| %-46s | %-28s | %-28s | %5s | %6s |\n", title, ours_h, peer_h, "ratio", "errors");
    printf("|---|---|---|---:|---:|\n");
    fflush(stdout);

    bool q = b.quick, fatal = false;
    /* GPUQ_BENCH_SHM_ONLY=1 (experiments): the shared-memory rows alone;
     * =clients: the many-client row alone */
    const char *only = getenv("GPUQ_BENCH_SHM_ONLY");
    bool shm_only = only && (!strcmp(only, "1") || !strcmp(only, "clients"));
    bool clients_only = only && !strcmp(only, "clients");
    if (!shm_only) {
        bench_ping(&b, q ? 200 : 2000);
        job small;
        if (job_init(&b, &small, JOB_NORMALIZE, SMALL_N, 0, 0, 0)) {
            job_fail(&b, &small);
            fatal = true;
            goto err_after_connect;
        }
        bench_latency(&b, "normalize 4 KiB f32, 1 in flight", &small, q ? 200 : 2000, false);
        int counts[] = {1, 16, 64}, qcounts[] = {1, 4};
        for (int k = 0; k < (q ? 2 : 3); k++) {
            int n = q ? qcounts[k] : counts[k];
            bench_throughput(&b, n, q ? 300 : n >= 16 ? 2000 : 20000, &small, q ? 2000 : 20000);
        }
        job_free(&b, &small);
    }

    /* The target rows (bench/targets.py reads them): every large
     * row twice, by socket and with gpuq's arrays in an arena (", shm"). */
    struct {
        int op;
        uint64_t n, d;
        int reps;
        uint64_t ny, k, rows;
        int method;
    } large[] = {
        /* 25 runs of the data-plane rows (peer_torch.py's too): a p50 of 7
         * moved by up to 20% between runs on an H200 guest */
        {JOB_NORMALIZE, q ? 100000 : 16777216, 0, q ? 3 : 25, 0, 0, 1, GPUQ_NORM_SUM},
        {JOB_NORMALIZE, q ? 64 * 512 : 4096 * 4096, 0, q ? 3 : 25, 0, 0, q ? 64 : 4096,
         GPUQ_NORM_L2},
        {JOB_HAVERSINE, q ? 10000 : 1000000, 0, q ? 3 : 25, 0, 0, 1, 0},
        {JOB_PAIRWISE, q ? 256 : 4096, q ? 16 : 64, q ? 3 : 7, 0, 0, 1, 0},
        {JOB_GRID, q ? 200 : 1000, 0, q ? 3 : 25, 0, 0, 1, 0},
        {JOB_KNN, q ? 256 : 4096, q ? 16 : 64, 3, q ? 20000 : 1000000, 10, 1, 0},
    };
    for (size_t k = 0; !clients_only && k < sizeof large / sizeof large[0]; k++) {
        job j;
        char what[96];
        unsigned long long n = large[k].n, dim = large[k].d;
        if (large[k].op == JOB_NORMALIZE && large[k].rows == 1)
            snprintf(what, sizeof what, "normalize f32 sum, n = %llu", n);
        else if (large[k].op == JOB_NORMALIZE)
            snprintf(what, sizeof what, "normalize f32 l2 rows, %llux%llu",
                     (unsigned long long)large[k].rows, n / large[k].rows);
        else if (large[k].op == JOB_HAVERSINE)
            snprintf(what, sizeof what, "haversine f64 to a point, n = %llu", n);
        else if (large[k].op == JOB_PAIRWISE)
            snprintf(what, sizeof what, "pairwise euclidean f32, %llux%llu, d = %llu", n, n, dim);
        else if (large[k].op == JOB_KNN) /* peer_torch.py's row name */
            snprintf(what, sizeof what, "knn euclidean f32, m = %llu, n = %llu, d = %llu, k = %llu",
                     n, (unsigned long long)large[k].ny, dim, (unsigned long long)large[k].k);
        else
            snprintf(what, sizeof what, "grid f64, %llux%llu", n, n);
        if (job_init(&b, &j, large[k].op, large[k].n, large[k].d, large[k].ny, large[k].k)) {
            job_fail(&b, &j);
            fatal = true;
            goto err_after_connect;
        }
        j.rows = large[k].rows;
        j.method = large[k].method;
        if (!shm_only)
            bench_latency(&b, what, &j, large[k].reps, true);
        if (k == 0 && !shm_only) {
            /* the socket's own ceiling for the same bytes */
            bench_socket_ceiling(&b, &j, large[k].reps);
            /* a plain call with plain buffers, libgpuq choosing (AUTO): its
             * staging arena, a copy in and a copy out around the request */
            char what_auto[112];
            snprintf(what_auto, sizeof what_auto, "%s, auto", what);
            if (b.c && gpuq_set_transport(b.c, GPUQ_TRANSPORT_AUTO) == 0) {
                bench_latency(&b, what_auto, &j, large[k].reps, true);
                if (gpuq_set_transport(b.c, GPUQ_TRANSPORT_SOCKET))
                    fprintf(stderr, "bench: back to the socket: %s\n", gpuq_errmsg(b.c));
            } else {
                row r = {.what = what_auto};
                row_error(&r, "gpuq", b.c ? gpuq_errmsg(b.c) : b.conn_why);
                row_print(&b, &r, "n/a", "n/a", "n/a");
            }
        }
        /* the same with gpuq's arrays in an arena: no array byte on the socket */
        char what_shm[112];
        snprintf(what_shm, sizeof what_shm, "%s, shm", what);
        if (b.c && job_use_arena(b.c, &j) != 0) {
            row r = {.what = what_shm};
            row_error(&r, "gpuq", gpuq_errmsg(b.c));
            row_print(&b, &r, "n/a", "n/a", "n/a");
        } else {
            bench_latency(&b, what_shm, &j, large[k].reps, true);
            if (getenv("GPUQ_BENCH_STAGES") && b.c)
                job_stages(b.c, what_shm, &j);
        }
        job_free(&b, &j);
    }
    /* 48 requests a client: the first uploads (nothing to download yet)
     * and the last downloads (nothing left to upload), some 10 ms, are a
     * thirtieth of the span, not a tenth as with 16 */
    bench_shm_clients(&b, 4, 2, q ? 100000 : 16777216, q ? 4 : 48);
    if (b.peer && !strncmp(bench_peer_name(b.peer), "cuda", 4))
        bench_copy_ceiling(&b, (size_t)64 << 20);

err_after_connect:
    gpuq_close(b.c);
    bench_peer_close(b.peer);
    int daemon_rc = socket ? 0 : daemon_stop(d);
    if (!socket && rmdir(dir) != 0)
        fprintf(stderr, "bench: rmdir %s: %s\n", dir, strerror(errno));
    printf("bench: %ld errors in %d of %d rows%s%s\n", b.errors, b.rows_failed, b.rows,
           daemon_rc ? "; gpuqd did not exit cleanly" : "", fatal ? "; stopped early" : "");
    return b.errors || daemon_rc || fatal ? 1 : 0;
}
