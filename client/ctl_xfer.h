/* ctl_xfer.h - how gpuqctl's op commands move their arrays (ctl_xfer.c). */
#ifndef GPUQ_CLIENT_CTL_XFER_H
#define GPUQ_CLIENT_CTL_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include "ctl.h"
#include "npy.h"

/* One output of a command: its dtype, shape and .npy file. */
typedef struct ctl_out {
    gpuq_dtype dtype;
    int ndim;
    uint64_t shape[2];
    const char *path;
} ctl_out;

/* Connect (ctx's socket, priority and transport), send req with the
 * inputs a and b (either may be NULL; each read whole by npy_read, or only
 * opened by npy_open, in which case its data is read here), and write each
 * of the nout (1 or 2) outputs to its .npy file. When the transport puts
 * the arrays in shared memory (gpuq_stage_area), opened inputs are read
 * straight from their files into the connection's staging arena, the
 * request names them and the outputs by reference, and each output is
 * written to its file from the arena, where gpuqd put it: no array byte
 * on the socket and no copy in the heap. Otherwise the arrays go by socket
 * through the heap. A result over the server's max_output is sent without
 * a buffer, so the server's error is what the user sees, not a huge
 * allocation here. --timing prints the server's timing to stderr. Returns
 * an exit status (errors printed). */
int ctl_run_op(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
               const ctl_out *outs, unsigned nout, bool timing);

#endif
