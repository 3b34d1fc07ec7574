/* ctl_xfer.c - an op command's arrays: .npy files in, one blocking
 * request, .npy files out (ctl_xfer.h).
 *
 * Happy path with shared memory: the arena layout is A, B, output 0,
 * output 1, each on a 64-byte boundary; gpuq_stage_area gives that many
 * bytes of the connection's staging arena when the transport says so (shm;
 * auto when gpuqd offers arenas and the arrays come to GPUQ_SHM_MIN_BYTES);
 * npy_load reads each input's data from its file into its place (one
 * read(2) copy, from the page cache to the shared pages); gpuq_call sends
 * the request with "in"/"out" references; npy_write writes the outputs from
 * the arena. By socket: inputs not yet read are read into the heap, the
 * result comes into a heap buffer, and libgpuq decides nothing more (the
 * same rules already said socket).
 *
 * Failures are one line each (ctl_fail) and an exit status of 1: the
 * transport's (shm without arenas: at connect; no staging arena to be had
 * under shm: here), a file that cannot be read or written, the server's.
 */
#include "ctl_xfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XFER_ALIGN 64u

static uint64_t align_up(uint64_t v)
{
    return (v + XFER_ALIGN - 1) / XFER_ALIGN * XFER_ALIGN;
}

static void print_timing(const gpuq_reply *rep)
{
    if (rep->has_timing)
        fprintf(stderr,
                "timing: queue %.1f us, h2d %.1f us, kernel %.1f us, d2h %.1f us, total %.1f us\n",
                rep->timing.queue_us, rep->timing.h2d_us, rep->timing.kernel_us, rep->timing.d2h_us,
                rep->timing.total_us);
}

/* outs[o] from out + off[o], o < nout. */
static int write_outs(const ctl_out *outs, unsigned nout, const uint8_t *out, const uint64_t *off)
{
    for (unsigned o = 0; o < nout; o++) {
        char err[512];
        int wrc = npy_write(outs[o].path, outs[o].dtype, outs[o].ndim, outs[o].shape, out + off[o],
                            err, sizeof err);
        if (wrc)
            return ctl_fail(wrc, err);
    }
    return 0;
}

/* The arrays in the staging arena at base (arena id): inputs at off[0..1],
 * outputs at off[2..3]. */
static int run_shm(gpuq_conn *c, gpuq_request *req, const npy_array *const in[2], uint8_t *base,
                   uint64_t id, const uint64_t *off, const ctl_out *outs, unsigned nout,
                   const uint64_t *out_bytes, bool timing)
{
    uint32_t nin = 0;
    for (unsigned k = 0; k < 2; k++) {
        if (!in[k])
            continue;
        char err[512];
        int lrc = 0;
        if (in[k]->data)
            memcpy(base + off[k], in[k]->data, in[k]->nbytes);
        else
            lrc = npy_load(in[k], base + off[k], err, sizeof err);
        if (lrc)
            return ctl_fail(lrc, err);
        req->in_ref[nin++] = (gpuq_ref){id, off[k], in[k]->nbytes};
    }
    req->nin_ref = nin;
    req->nout_ref = nout;
    for (unsigned o = 0; o < nout; o++)
        req->out_ref[o] = (gpuq_ref){id, off[2 + o], out_bytes[o]};
    req->timing = timing;
    gpuq_reply rep;
    int crc = gpuq_call(c, req, NULL, 0, NULL, 0, NULL, 0, &rep);
    req->nin_ref = req->nout_ref = 0;
    if (crc)
        return ctl_fail(crc, gpuq_errmsg(c));
    if (timing)
        print_timing(&rep);
    return write_outs(outs, nout, base, off + 2);
}

/* By socket: inputs not yet read into the heap, the result into the heap
 * (when it fits max_output; else no buffer and the server's error). */
static int run_socket(gpuq_conn *c, gpuq_request *req, const npy_array *const in[2],
                      const ctl_out *outs, unsigned nout, const uint64_t *out_bytes, bool timing)
{
    int rc = 0;
    void *heap[2] = {NULL, NULL}, *out = NULL;
    const void *data[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    for (unsigned k = 0; k < 2 && rc == 0; k++) {
        if (!in[k])
            continue;
        len[k] = in[k]->nbytes;
        data[k] = in[k]->data;
        if (data[k])
            continue;
        char err[512];
        heap[k] = malloc(len[k] ? len[k] : 1);
        int lrc = heap[k] ? npy_load(in[k], heap[k], err, sizeof err) : GPUQ_E_NO_MEMORY;
        if (lrc)
            rc = heap[k] ? ctl_fail(lrc, err)
                         : ctl_failf(lrc, "cannot allocate %zu input bytes", len[k]);
        data[k] = heap[k];
    }
    uint64_t total = out_bytes[0] + out_bytes[1];
    size_t cap = 0;
    if (rc == 0 && total <= gpuq_info(c)->limits.max_output && total <= SIZE_MAX) {
        cap = (size_t)total;
        if (!(out = malloc(cap ? cap : 1)))
            rc = ctl_failf(GPUQ_E_NO_MEMORY, "cannot allocate %llu result bytes",
                           (unsigned long long)total);
    }
    if (rc == 0) {
        req->timing = timing;
        gpuq_reply rep;
        int crc = gpuq_call(c, req, data[0], len[0], data[1], len[1], out, cap, &rep);
        if (crc) {
            rc = ctl_fail(crc, gpuq_errmsg(c));
        } else {
            if (timing)
                print_timing(&rep);
            const uint64_t off[2] = {0, out_bytes[0]};
            rc = write_outs(outs, nout, out, off);
        }
    }
    free(out);
    free(heap[0]);
    free(heap[1]);
    return rc;
}

int ctl_run_op(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
               const ctl_out *outs, unsigned nout, bool timing)
{
    const npy_array *const in[2] = {a, b};
    uint64_t out_bytes[2] = {0, 0}, total = 0;
    if (nout > 2)
        nout = 2;
    for (unsigned o = 0; o < nout; o++) {
        out_bytes[o] = gpuq_dtype_size(outs[o].dtype);
        for (int k = 0; k < outs[o].ndim && k < 2; k++) {
            if (__builtin_mul_overflow(out_bytes[o], outs[o].shape[k], &out_bytes[o]))
                return ctl_fail(GPUQ_E_TOO_LARGE, "result size overflows");
        }
        if (__builtin_add_overflow(total, out_bytes[o], &total))
            return ctl_fail(GPUQ_E_TOO_LARGE, "result size overflows");
    }
    /* the layout in shared memory: A, B, output 0, output 1 */
    uint64_t off[4], need = 0, bytes = total;
    for (unsigned k = 0; k < 4; k++) {
        uint64_t n = k < 2 ? (in[k] ? in[k]->nbytes : 0) : out_bytes[k - 2];
        off[k] = need;
        if (__builtin_add_overflow(need, align_up(n), &need) ||
            (k < 2 && __builtin_add_overflow(bytes, n, &bytes)))
            return ctl_fail(GPUQ_E_TOO_LARGE, "array sizes overflow");
    }
    gpuq_conn *c;
    int rc = ctl_connect(ctx, &c);
    if (rc)
        return rc;
    void *base = NULL;
    uint64_t id = 0;
    /* a result over max_output goes by socket, for the server's error */
    if (total <= gpuq_info(c)->limits.max_output) {
        int src = gpuq_stage_area(c, bytes, need, &base, &id);
        if (src) {
            rc = ctl_fail(src, gpuq_errmsg(c));
            goto out_close;
        }
    }
    if (base)
        rc = run_shm(c, req, in, base, id, off, outs, nout, out_bytes, timing);
    else
        rc = run_socket(c, req, in, outs, nout, out_bytes, timing);
out_close:
    gpuq_close(c);
    return rc;
}
