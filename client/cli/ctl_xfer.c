/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_xfer.c - an op command's arrays: .npy files (or stdin) in, one
 * blocking request, .npy files (or stdout) out (ctl_xfer.h).
 *
 * Happy path with shared memory: the arena layout is A, B, output 0,
 * output 1, each on a 64-byte boundary; gpuq_stage_area gives that many
 * bytes of the connection's staging arena when the transport says so (shm;
 * auto when gpuqd offers arenas and the arrays come to GPUQ_SHM_MIN_BYTES);
 * npy_load reads each input's data from its file (or stdin) into its place
 * (one read(2) copy, from the page cache or the pipe to the shared pages);
 * gpuq_call sends the request with "in"/"out" references; the outputs are
 * written from the arena (ctl_outfile.c: a temporary file each, renamed
 * into place). By socket: inputs not yet read are read into the heap, the
 * result comes into a heap buffer, and libgpuq decides nothing more (the
 * same rules already said socket). A progress line (ctl_progress.c) shows
 * while it takes more than a second; --json prints a summary at the end.
 * Ctrl-C while gpuqd has the request sends a cancel for it (call()).
 *
 * Resident arrays (PROTOCOL.md 3.5): an input "@NAME" (ctl_resident_open:
 * its dtype and shape are looked up with a list first, so the op's output
 * shapes are known as for files, and sent, so that gpuqd checks they still
 * hold) is named in the request's "in" and carries no byte; an output
 * "@NAME" is kept by gpuqd under that name, named in "out", and comes back
 * neither by socket nor in the arena (no file is written for it). The
 * other arrays go as above.
 *
 * Failures are one line each (ctl_fail), printed once the progress line
 * is gone, and an exit status of 1: the transport's (shm without arenas:
 * at connect; no staging arena to be had under shm: here), a file that
 * cannot be read or written, the server's, a resident array not there.
 * Misuse of "-" and --json, and a malformed "@NAME", is a usage error (2),
 * found before connecting.
 */
#include "ctl_xfer.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_json.h"
#include "ctl_outfile.h"
#include "ctl_progress.h"

#define XFER_ALIGN 64u

static uint64_t align_up(uint64_t v)
{
    return (v + XFER_ALIGN - 1) / XFER_ALIGN * XFER_ALIGN;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- resident arrays ---- */

const char *ctl_resident_name(const char *arg)
{
    return arg && arg[0] == '@' ? arg + 1 : NULL;
}

int ctl_resident_check(const ctl_ctx *ctx, const char *arg)
{
    const char *name = ctl_resident_name(arg);
    char why[128];
    if (!name || gpuq_name_check(name, strlen(name), why, sizeof why) == 0)
        return 0;
    bool printable = true; /* never a control character on the terminal */
    for (const char *p = arg; *p; p++)
        printable = printable && (unsigned char)*p >= 0x20 && *p != 0x7f;
    if (printable)
        return ctl_usage_error(ctx, "'%s' names no resident array: %s", arg, why);
    return ctl_usage_error(ctx, "an '@' argument names no resident array: %s", why);
}

/* ---- the request ---- */

/* One op's run, for its messages and summary. */
typedef struct xfer {
    gpuq_conn *c;
    gpuq_request *req;
    const npy_array *in[2];
    const ctl_out *outs;
    unsigned nout;
    uint64_t out_bytes[2]; /* each output's bytes */
    uint64_t out_wire[2];  /* the same, 0 for one kept resident: what comes back */
    bool timing;
    ctl_progress *prog;
    gpuq_reply rep;
    char err[1024]; /* the failure's message */
} xfer;

static int xfer_fail(xfer *x, int code, const char *msg)
{
    snprintf(x->err, sizeof x->err, "%s", msg ? msg : "");
    return code;
}

/* gpuq_call of x->req, with Ctrl-C made a cancel: the call is interrupted
 * (ctl_outfile_defer_sigint); if gpuqd has the request (the wait for its
 * reply was interrupted, not its send), gpuqd is sent a cancel for it; then
 * gpuqctl ends as an interrupt does, without waiting for an answer (gpuqd
 * reads the cancel before it sees the connection close). */
static int call(xfer *x, const void *a, size_t a_len, const void *b, size_t b_len, void *out,
                size_t cap)
{
    int ifd = ctl_outfile_defer_sigint();
    (void)gpuq_set_interrupt_fd(x->c, ifd); /* -1: Ctrl-C ends gpuqctl at once */
    int rc = gpuq_call(x->c, x->req, a, a_len, b, b_len, out, cap, &x->rep);
    (void)gpuq_set_interrupt_fd(x->c, -1);
    if (rc == GPUQ_E_INTERRUPTED) {
        if (gpuq_pending(x->c) > 0) /* best effort: we end either way */
            (void)gpuq_submit_cancel(x->c, x->rep.id, NULL);
        ctl_outfile_die(SIGINT);
    }
    ctl_outfile_undefer_sigint();
    return rc;
}

/* The outputs that go to files (not kept resident) into files[] with
 * their offsets: off[o] is output o's; returns their number. */
static unsigned file_outs(const xfer *x, const uint64_t *off, ctl_out *files, uint64_t *foff)
{
    unsigned n = 0;
    for (unsigned o = 0; o < x->nout; o++) {
        if (ctl_resident_name(x->outs[o].path))
            continue;
        files[n] = x->outs[o];
        foff[n++] = off[o];
    }
    return n;
}

/* Name input k (resident) or output o (kept) in req's "in" / "out". */
static void name_in(gpuq_request *req, unsigned k, const char *name)
{
    req->in_kind[k] = GPUQ_REF_NAME;
    snprintf(req->in_name[k], sizeof req->in_name[k], "%s", name);
}

static void name_out(gpuq_request *req, unsigned o, const char *name)
{
    req->out_kind[o] = GPUQ_REF_NAME;
    snprintf(req->out_name[o], sizeof req->out_name[o], "%s", name);
}

/* The arrays in the staging arena at base (arena id): inputs at off[0..1],
 * outputs at off[2..3]; resident ones named instead. */
static int run_shm(xfer *x, uint8_t *base, uint64_t id, const uint64_t *off)
{
    gpuq_request *req = x->req;
    uint32_t nin = 0;
    for (unsigned k = 0; k < 2; k++) {
        const npy_array *in = x->in[k];
        if (!in)
            continue;
        nin = k + 1;
        if (in->resident) {
            name_in(req, k, in->resident);
            continue;
        }
        int lrc = 0;
        if (in->data)
            memcpy(base + off[k], in->data, in->nbytes);
        else
            lrc = npy_load(in, base + off[k], x->err, sizeof x->err);
        if (lrc)
            return lrc;
        req->in_kind[k] = GPUQ_REF_ARENA;
        req->in_ref[k] = (gpuq_ref){id, off[k], in->nbytes};
    }
    req->nin_ref = nin;
    req->nout_ref = x->nout;
    for (unsigned o = 0; o < x->nout && o < GPUQ_MAX_OUTPUTS; o++) {
        const char *keep = ctl_resident_name(x->outs[o].path);
        if (keep) {
            name_out(req, o, keep);
        } else {
            req->out_kind[o] = GPUQ_REF_ARENA;
            req->out_ref[o] = (gpuq_ref){id, off[2 + o], x->out_bytes[o]};
        }
    }
    req->timing = x->timing;
    ctl_progress_phase(x->prog, CTL_PHASE_CALL);
    int crc = call(x, NULL, 0, NULL, 0, NULL, 0);
    req->nin_ref = req->nout_ref = 0;
    if (crc)
        return xfer_fail(x, crc, gpuq_errmsg(x->c));
    ctl_progress_phase(x->prog, CTL_PHASE_WRITE);
    ctl_out files[2];
    uint64_t foff[2];
    unsigned nf = file_outs(x, off + 2, files, foff);
    return ctl_outfile_write(files, nf, base, foff, x->err, sizeof x->err);
}

/* By socket: inputs not yet read into the heap, the result into the heap
 * (when it fits max_output; else no buffer and the server's error). */
static int run_socket(xfer *x)
{
    int rc = 0;
    void *heap[2] = {NULL, NULL}, *out = NULL;
    const void *data[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    gpuq_request *req = x->req;
    uint32_t nin = 0, named = 0;
    for (unsigned k = 0; k < 2 && rc == 0; k++) {
        const npy_array *in = x->in[k];
        if (!in)
            continue;
        nin = k + 1;
        req->in_kind[k] = GPUQ_REF_WIRE;
        if (in->resident) {
            name_in(req, k, in->resident);
            named++;
            continue;
        }
        len[k] = in->nbytes;
        data[k] = in->data;
        if (data[k])
            continue;
        heap[k] = malloc(len[k] ? len[k] : 1);
        if (!heap[k]) {
            snprintf(x->err, sizeof x->err, "cannot allocate %zu input bytes", len[k]);
            rc = GPUQ_E_NO_MEMORY;
        } else {
            rc = npy_load(in, heap[k], x->err, sizeof x->err);
        }
        data[k] = heap[k];
    }
    /* "in" / "out" only when they name a resident array: nil entries for
     * the rest, which travel as ever */
    req->nin_ref = named ? nin : 0;
    bool kept = false;
    for (unsigned o = 0; o < x->nout && o < GPUQ_MAX_OUTPUTS; o++) {
        const char *keep = ctl_resident_name(x->outs[o].path);
        req->out_kind[o] = GPUQ_REF_WIRE;
        if (keep)
            name_out(req, o, keep);
        kept = kept || keep;
    }
    req->nout_ref = kept ? x->nout : 0;
    uint64_t total = x->out_wire[0] + x->out_wire[1];
    size_t cap = 0;
    if (rc == 0 && total <= gpuq_info(x->c)->limits.max_output && total <= SIZE_MAX) {
        cap = (size_t)total;
        if (!(out = malloc(cap ? cap : 1))) {
            snprintf(x->err, sizeof x->err, "cannot allocate %llu result bytes",
                     (unsigned long long)total);
            rc = GPUQ_E_NO_MEMORY;
        }
    }
    if (rc == 0) {
        x->req->timing = x->timing;
        ctl_progress_phase(x->prog, CTL_PHASE_CALL);
        int crc = call(x, data[0], len[0], data[1], len[1], out, cap);
        if (crc) {
            rc = xfer_fail(x, crc, gpuq_errmsg(x->c));
        } else {
            ctl_progress_phase(x->prog, CTL_PHASE_WRITE);
            const uint64_t off[2] = {0, x->out_wire[0]}; /* the payload: carried outputs */
            ctl_out files[2];
            uint64_t foff[2];
            unsigned nf = file_outs(x, off, files, foff);
            rc = ctl_outfile_write(files, nf, out, foff, x->err, sizeof x->err);
        }
    }
    req->nin_ref = req->nout_ref = 0;
    free(out);
    free(heap[0]);
    free(heap[1]);
    return rc;
}

/* ---- what the user sees ---- */

static const char *numpy_dtype(gpuq_dtype dt)
{
    switch (dt) {
    case GPUQ_DT_F32:
        return "float32";
    case GPUQ_DT_F64:
        return "float64";
    case GPUQ_DT_I64:
        return "int64";
    default:
        return "?";
    }
}

static void json_array(FILE *f, const char *path, gpuq_dtype dt, int ndim, const uint64_t *shape,
                       uint64_t bytes)
{
    fputs("{\"path\":", f);
    ctl_json_str(f, path);
    const char *name = ctl_resident_name(path);
    if (name) {
        fputs(",\"resident\":", f);
        ctl_json_str(f, name);
    }
    fputs(",\"shape\":[", f);
    for (int k = 0; k < ndim && k < 2; k++)
        fprintf(f, "%s%llu", k ? "," : "", (unsigned long long)shape[k]);
    fprintf(f, "],\"dtype\":\"%s\",\"bytes\":%llu}", numpy_dtype(dt), (unsigned long long)bytes);
}

/* The one-line summary of a successful op (--json). */
static void print_json(const ctl_ctx *ctx, const xfer *x, bool shm, double wall_us)
{
    FILE *f = stdout;
    fputs("{\"command\":", f);
    ctl_json_str(f, ctx->entry ? ctx->entry->name : "");
    fprintf(f, ",\"transport\":\"%s\",\"inputs\":[", shm ? "shm" : "socket");
    unsigned n = 0;
    for (unsigned k = 0; k < 2; k++) {
        const npy_array *a = x->in[k];
        if (!a)
            continue;
        const char *path = a->stream ? "-" : a->path ? a->path : ""; /* stdin: as given */
        fputs(n++ ? "," : "", f);
        json_array(f, path, a->dtype, a->ndim, a->shape, a->nbytes);
    }
    fputs("],\"outputs\":[", f);
    for (unsigned o = 0; o < x->nout; o++) {
        fputs(o ? "," : "", f);
        json_array(f, x->outs[o].path, x->outs[o].dtype, x->outs[o].ndim, x->outs[o].shape,
                   x->out_bytes[o]);
    }
    fputs("],\"timing\":{\"wall_us\":", f);
    ctl_json_num(f, round(wall_us * 1e3) / 1e3); /* to the nanosecond: no 17-digit noise */
    if (x->rep.has_timing) {
        const gpuq_timing *t = &x->rep.timing;
        fputs(",\"server\":{\"queue_us\":", f);
        ctl_json_num(f, t->queue_us);
        fputs(",\"h2d_us\":", f);
        ctl_json_num(f, t->h2d_us);
        fputs(",\"kernel_us\":", f);
        ctl_json_num(f, t->kernel_us);
        fputs(",\"d2h_us\":", f);
        ctl_json_num(f, t->d2h_us);
        fputs(",\"total_us\":", f);
        ctl_json_num(f, t->total_us);
        fputc('}', f);
    }
    fputs("}}\n", f);
}

static void print_timing(const gpuq_reply *rep)
{
    if (!rep->has_timing)
        return;
    const gpuq_timing *t = &rep->timing;
    char q[32], h[32], k[32], d[32], all[32];
    fprintf(stderr, "timing: queue %s, h2d %s, kernel %s, d2h %s, total %s\n",
            ctl_fmt_us(t->queue_us, q, sizeof q), ctl_fmt_us(t->h2d_us, h, sizeof h),
            ctl_fmt_us(t->kernel_us, k, sizeof k), ctl_fmt_us(t->d2h_us, d, sizeof d),
            ctl_fmt_us(t->total_us, all, sizeof all));
}

/* "-" and --json, and two outputs that would be one file (the second
 * written over the first): found before anything is sent. An output may
 * be an input: the inputs are read whole before any output is opened, and
 * an output replaces its file only once complete. */
static int check_outs(const ctl_ctx *ctx, const ctl_out *outs, unsigned nout)
{
    unsigned dash = 0;
    int rc;
    for (unsigned o = 0; o < nout; o++) {
        dash += strcmp(outs[o].path, "-") == 0;
        if ((rc = ctl_resident_check(ctx, outs[o].path)))
            return rc;
    }
    for (unsigned o = 0; o < nout; o++) {
        for (unsigned p = o + 1; p < nout; p++) {
            const char *a = outs[o].path, *b = outs[p].path;
            const char *ra = ctl_resident_name(a), *rb = ctl_resident_name(b);
            if (ra && rb && strcmp(ra, rb) == 0)
                return ctl_usage_error(ctx,
                                       "both outputs would be kept as '%s': each output "
                                       "needs its own name",
                                       a);
            if (ra || rb)
                continue;
            if (!strcmp(a, "-") || !strcmp(b, "-") || !ctl_outfile_same(a, b))
                continue;
            char na[64], nb[64];
            return ctl_usage_error(ctx,
                                   "%s '%s' and %s '%s' name the same file: each output needs "
                                   "its own",
                                   ctl_opt_of(ctx, a, "-o", na, sizeof na), a,
                                   ctl_opt_of(ctx, b, "-i", nb, sizeof nb), b);
        }
    }
    if (dash > 1)
        return ctl_usage_error(ctx, "only one output may be '-' (stdout)");
    if (dash && ctx->json)
        return ctl_usage_error(ctx, "--json prints its summary on stdout, where the output '-' "
                                    "goes: use one or the other");
    if (dash && isatty(STDOUT_FILENO))
        return ctl_usage_error(ctx, "'-' would write binary .npy data to a terminal: redirect "
                                    "or pipe stdout");
    return 0;
}

/* gpuqd takes no array without elements: said here, with the file's name
 * (gpuqd's own message can only name "shape" or "shape_b"). */
static int check_ins(const npy_array *const *in)
{
    for (unsigned k = 0; k < 2; k++) {
        const npy_array *a = in[k];
        if (!a || a->resident || (a->shape[0] && (a->ndim < 2 || a->shape[1])))
            continue;
        char shape[64];
        if (a->ndim < 2)
            snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)a->shape[0]);
        else
            snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)a->shape[0],
                     (unsigned long long)a->shape[1]);
        const char *name = a->path ? a->path : k ? "the second input" : "the first input";
        return ctl_failf(GPUQ_E_EMPTY, "%s: shape %s has no elements; arrays must not be empty",
                         name, shape);
    }
    return 0;
}

int ctl_run_op(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
               const ctl_out *outs, unsigned nout, bool timing)
{
    double t0 = now_us();
    if (nout > 2)
        nout = 2;
    int rc = check_outs(ctx, outs, nout);
    if (rc)
        return rc;
    xfer x = {.req = req, .in = {a, b}, .outs = outs, .nout = nout, .timing = timing};
    if ((rc = check_ins(x.in)))
        return rc;
    uint64_t total = 0; /* the bytes that come back (not kept resident) */
    for (unsigned o = 0; o < nout; o++) {
        x.out_bytes[o] = gpuq_dtype_size(outs[o].dtype);
        for (int k = 0; k < outs[o].ndim && k < 2; k++) {
            if (__builtin_mul_overflow(x.out_bytes[o], outs[o].shape[k], &x.out_bytes[o]))
                return ctl_fail(GPUQ_E_TOO_LARGE, "result size overflows");
        }
        x.out_wire[o] = ctl_resident_name(outs[o].path) ? 0 : x.out_bytes[o];
        if (__builtin_add_overflow(total, x.out_wire[o], &total))
            return ctl_fail(GPUQ_E_TOO_LARGE, "result size overflows");
    }
    /* the layout in shared memory: A, B, output 0, output 1 (resident ones
     * take no room) */
    uint64_t off[4], need = 0, bytes = total;
    for (unsigned k = 0; k < 4; k++) {
        uint64_t n =
            k < 2 ? (x.in[k] && !x.in[k]->resident ? x.in[k]->nbytes : 0) : x.out_wire[k - 2];
        off[k] = need;
        if (__builtin_add_overflow(need, align_up(n), &need) ||
            (k < 2 && __builtin_add_overflow(bytes, n, &bytes)))
            return ctl_fail(GPUQ_E_TOO_LARGE, "array sizes overflow");
    }
    bool own_handlers = ctl_outfile_signals_on();
    if ((rc = ctl_connect(ctx, &x.c)))
        goto out_signals;
    void *base = NULL;
    uint64_t id = 0;
    /* a result over max_output goes by socket, for the server's error; so
     * does a request with no array to move (all resident) */
    if (total <= gpuq_info(x.c)->limits.max_output && need > 0) {
        int src = gpuq_stage_area(x.c, bytes, need, &base, &id);
        if (src) {
            rc = ctl_fail(src, gpuq_errmsg(x.c));
            goto out_close;
        }
    }
    x.prog = ctl_progress_start(bytes - total, total, base != NULL);
    /* a progress line asks gpuqd when the request starts (PROTOCOL.md 4.1) */
    req->progress = x.prog != NULL;
    gpuq_set_started_fn(x.c, x.prog ? ctl_progress_started : NULL, x.prog);
    int orc = base ? run_shm(&x, base, id, off) : run_socket(&x);
    ctl_progress_stop(x.prog); /* before any line of ours */
    if (orc) {
        rc = ctl_fail(orc, x.err);
    } else if (ctx->json) {
        print_json(ctx, &x, base != NULL, now_us() - t0);
        rc = fflush(stdout) == 0 ? 0 : ctl_fail(GPUQ_E_IO, "stdout: write failed");
    } else if (timing) {
        print_timing(&x.rep);
    }
out_close:
    gpuq_close(x.c);
out_signals:
    if (own_handlers)
        ctl_outfile_signals_off();
    return rc;
}
