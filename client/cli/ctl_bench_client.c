/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_bench_client.c - one client of gpuqctl bench (ctl_bench_client.h).
 *
 * Happy path: the slots form a ring of depth requests; the thread fills it
 * (gpuq_submit_req, each stamped with its submit time), reads the oldest
 * reply (gpuq_wait_req: replies come in order), checks it
 * (ctl_bench_op.h: every reply, one in 64 scanned whole when results are
 * large), and counts and times it if it was read inside the window, then
 * submits again into the freed slot. At the window's end it stops
 * submitting and reads what is outstanding (checked, not counted).
 *
 * A pinging client (no plan) calls gpuq_ping in a loop instead, each
 * round trip timed as a reply is.
 *
 * Failures: an error reply or a wrong result is an error, and the client
 * goes on. A submit libgpuq refuses (nothing was sent: the same request
 * would be refused again) ends the client; so does a broken connection,
 * whose outstanding requests all count as errors; so does a failed ping.
 * The first error's code, time and message are kept.
 */
#include "ctl_bench_client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_bench_input.h"

#define BENCH_HIST_SCALE 20.0 /* buckets per e-fold of microseconds: ~5 % wide */

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * BENCH_NS + ts.tv_nsec;
}

int bench_hist_bucket(double us)
{
    if (!(us > 1))
        return 0;
    double b = log(us) * BENCH_HIST_SCALE;
    return b >= BENCH_HIST_BUCKETS - 1 ? BENCH_HIST_BUCKETS - 1 : (int)b;
}

double bench_hist_value(int b)
{
    return exp(((double)b + 0.5) / BENCH_HIST_SCALE);
}

static void client_error(bench_client *cl, int code, int64_t t, const char *msg, uint64_t n)
{
    if (cl->errors == 0) {
        cl->first_code = code;
        cl->first_ns = t;
        snprintf(cl->first, sizeof cl->first, "%s", msg && *msg ? msg : gpuq_strerror(code));
    }
    cl->errors += n;
    atomic_fetch_add_explicit(&cl->live_err, n, memory_order_relaxed);
}

/* A successful reply read at t: counted when in the window. */
static void client_ok(bench_client *cl, int64_t t_sub, int64_t t)
{
    bench_run *run = cl->run;
    if (t < run->ws_ns || t >= atomic_load_explicit(&run->we_ns, memory_order_relaxed))
        return;
    double us = (double)(t - t_sub) / 1e3;
    bench_samples_add(&cl->lat, us);
    atomic_fetch_add_explicit(&cl->live_ok, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cl->hist[bench_hist_bucket(us)], 1, memory_order_relaxed);
}

static bool client_may_submit(const bench_client *cl)
{
    bench_run *run = cl->run;
    return !atomic_load_explicit(&run->stop, memory_order_relaxed) &&
           bench_now_ns() < atomic_load_explicit(&run->we_ns, memory_order_relaxed);
}

/* A pinging client: one gpuq_ping at a time until the window ends. */
static void client_pings(bench_client *cl)
{
    while (client_may_submit(cl)) {
        int64_t t0 = bench_now_ns();
        int rc = gpuq_ping(cl->c);
        int64_t t = bench_now_ns();
        if (rc) {
            client_error(cl, rc, t, gpuq_errmsg(cl->c), 1);
            break;
        }
        client_ok(cl, t0, t);
    }
}

/* depth requests of the plan in flight until the window ends. */
static void client_requests(bench_client *cl)
{
    const bench_plan *p = cl->plan;
    uint64_t sent = 0, got = 0;
    bool sending = true;
    char why[512];
    for (;;) {
        while (sending && sent - got < cl->depth) {
            if (!client_may_submit(cl)) {
                sending = false;
                break;
            }
            bench_slot *s = &cl->slots[sent % cl->depth];
            s->t_sub = bench_now_ns();
            int rc = gpuq_submit_req(cl->c, s->req, NULL);
            if (rc) { /* nothing sent; it would be refused again */
                client_error(cl, rc, s->t_sub, gpuq_errmsg(cl->c), 1);
                sending = false;
                break;
            }
            sent++;
        }
        if (got == sent)
            break;
        bench_slot *s = &cl->slots[got % cl->depth];
        unsigned before = gpuq_pending(cl->c);
        int rc = gpuq_wait_req(cl->c, cl->res);
        int64_t t = bench_now_ns();
        got++;
        if (rc) {
            client_error(cl, rc, t, gpuq_errmsg(cl->c), 1);
            if (gpuq_pending(cl->c) == before) { /* the connection broke: the rest with it */
                client_error(cl, rc, t, NULL, sent - got);
                break;
            }
            continue;
        }
        bool full = p->scan_every || cl->replies++ % 64 == 0;
        if (p->user ? bench_input_check(p, cl->res, s->out[0], s->out[1], full, why, sizeof why)
                    : bench_check(p, cl->res, s->out[0], s->out[1], full, why, sizeof why)) {
            client_error(cl, GPUQ_E_INTERNAL, t, why, 1);
            continue;
        }
        client_ok(cl, s->t_sub, t);
    }
}

/* One client's thread. */
void *bench_client_main(void *arg)
{
    bench_client *cl = arg;
    if (cl->plan)
        client_requests(cl);
    else
        client_pings(cl);
    if (!cl->bulk)
        atomic_fetch_sub(&cl->run->running, 1);
    return NULL;
}

/* ---- setting a client up ---- */

static uint64_t align64(uint64_t n)
{
    return (n + 63) / 64 * 64;
}

/* The arena for shm (or auto, when the arrays come to GPUQ_SHM_MIN_BYTES
 * and gpuqd offers arenas): inputs, then depth x outputs. 0, 1 (auto, no
 * arena to be had: the socket), or an error code (message in why). */
static int client_arena(bench_client *cl, int transport, const void **in, char *why, size_t cap)
{
    const bench_plan *p = cl->plan;
    const gpuq_server_info *si = gpuq_info(cl->c);
    uint64_t bytes = bench_plan_bytes(p);
    if (transport == GPUQ_TRANSPORT_SOCKET ||
        (transport == GPUQ_TRANSPORT_AUTO &&
         (si->limits.session_arena == 0 || bytes < GPUQ_SHM_MIN_BYTES)))
        return 1;
    uint64_t need = 4096, per = align64(p->out_bytes[0]) + align64(p->out_bytes[1]), all;
    if (__builtin_mul_overflow(per, (uint64_t)cl->depth, &all) ||
        __builtin_add_overflow(need, all, &need) ||
        __builtin_add_overflow(need, align64(p->in_bytes[0]) + align64(p->in_bytes[1]), &need)) {
        snprintf(why, cap, "too_large: the arena would overflow");
        return GPUQ_E_TOO_LARGE;
    }
    gpuq_arena *a = NULL;
    int rc = gpuq_arena_open(cl->c, need, &a);
    if (rc) {
        if (transport == GPUQ_TRANSPORT_AUTO)
            return 1;
        snprintf(why, cap, "transport shm: an arena of %llu bytes: %s", (unsigned long long)need,
                 gpuq_errmsg(cl->c));
        return rc;
    }
    cl->shm = true; /* c owns a and frees it at gpuq_close */
    for (unsigned k = 0; k < p->nin; k++) {
        void *d = gpuq_arena_alloc(a, p->in_bytes[k]);
        if (!d)
            goto err_full;
        memcpy(d, bench_plan_input(p, k), (size_t)p->in_bytes[k]);
        in[k] = d;
    }
    for (unsigned s = 0; s < cl->depth; s++) {
        for (unsigned o = 0; o < p->nout; o++)
            if (!(cl->slots[s].out[o] = gpuq_arena_alloc(a, p->out_bytes[o])))
                goto err_full;
    }
    return 0;

err_full:
    snprintf(why, cap, "no_memory: the arena of %llu bytes is full", (unsigned long long)need);
    return GPUQ_E_NO_MEMORY;
}

/* Buffers and requests of a connected client. 0 or an error code (message
 * in why). */
int bench_client_setup(bench_client *cl, int transport, size_t cap_max, uint64_t seed, char *why,
                       size_t cap)
{
    const bench_plan *p = cl->plan;
    bench_samples_init(&cl->lat, cap_max, seed);
    if (!p) /* it pings */
        return 0;
    if (!(cl->res = gpuq_result_new()) || !(cl->slots = calloc(cl->depth, sizeof *cl->slots))) {
        snprintf(why, cap, "out of memory");
        return GPUQ_E_NO_MEMORY;
    }
    const void *in[2] = {bench_plan_input(p, 0), bench_plan_input(p, 1)};
    int rc = client_arena(cl, transport, in, why, cap);
    if (rc < 0)
        return rc;
    for (unsigned s = 0; s < cl->depth; s++) {
        bench_slot *sl = &cl->slots[s];
        for (unsigned o = 0; !cl->shm && o < p->nout; o++) {
            if (!(sl->out[o] = malloc((size_t)p->out_bytes[o]))) {
                snprintf(why, cap, "cannot allocate %llu bytes of results",
                         (unsigned long long)p->out_bytes[o]);
                return GPUQ_E_NO_MEMORY;
            }
        }
        sl->req = p->user ? bench_input_req_make(p, in[0], in[1], sl->out[0], sl->out[1], why, cap)
                          : bench_req_make(p, in[0], in[1], sl->out[0], sl->out[1], why, cap);
        if (!sl->req)
            return GPUQ_E_NO_MEMORY;
    }
    return 0;
}

int bench_client_probe(bench_client *cl, char *why, size_t cap)
{
    bench_slot *s = &cl->slots[0];
    int rc = gpuq_submit_req(cl->c, s->req, NULL);
    if (!rc)
        rc = gpuq_wait_req(cl->c, cl->res);
    if (rc)
        snprintf(why, cap, "%s", gpuq_errmsg(cl->c));
    return rc;
}

void bench_client_free(bench_client *cl)
{
    for (unsigned s = 0; cl->slots && s < cl->depth; s++) {
        gpuq_req_free(cl->slots[s].req);
        if (!cl->shm) {
            free(cl->slots[s].out[0]);
            free(cl->slots[s].out[1]);
        }
    }
    free(cl->slots);
    gpuq_result_free(cl->res);
    gpuq_close(cl->c); /* and its arena */
    bench_samples_free(&cl->lat);
}

void bench_client_reset(bench_client *cl)
{
    bench_samples_clear(&cl->lat);
    cl->errors = 0;
    cl->first_code = 0;
    cl->first_ns = 0;
    cl->first[0] = '\0';
    atomic_store(&cl->live_ok, 0);
    atomic_store(&cl->live_err, 0);
    for (int b = 0; b < BENCH_HIST_BUCKETS; b++)
        atomic_store(&cl->hist[b], 0);
}
