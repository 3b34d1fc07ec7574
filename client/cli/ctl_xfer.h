/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_xfer.h - how gpuqctl's op commands move their arrays (ctl_xfer.c). */
#ifndef GPUQ_CLIENT_CTL_XFER_H
#define GPUQ_CLIENT_CTL_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include "ctl.h"
#include "ctl_outfile.h"
#include "npy.h"

/* Connect (ctx's socket, priority and transport), send req with the
 * inputs a and b (either may be NULL; each read whole by npy_read, or only
 * opened by npy_open, in which case its data is read here: a file, or
 * stdin for "-"), and write each of the nout (1 or 2) outputs to its .npy
 * file ("-": stdout, at most one of them). When the transport puts the
 * arrays in shared memory (gpuq_stage_area), opened inputs are read
 * straight from their files into the connection's staging arena, the
 * request names them and the outputs by reference, and each output is
 * written to its file from the arena, where gpuqd put it: no array byte
 * on the socket and no copy in the heap. Otherwise the arrays go by socket
 * through the heap. A result over the server's max_output is sent without
 * a buffer, so the server's error is what the user sees, not a huge
 * allocation here. Each output file is written beside its destination and
 * renamed over it when complete, so a failure or an interrupt leaves none.
 * --timing prints the server's timing to stderr; ctx->json prints a
 * one-line JSON summary on stdout instead (command, transport, inputs and
 * outputs with path, shape, dtype and bytes, timing.wall_us and with
 * --timing timing.server), and is a usage error with an output "-". A
 * progress line (ctl_progress.h) shows on stderr while the op takes more
 * than a second. SIGINT, SIGTERM and SIGHUP are handled meanwhile
 * (ctl_outfile_signals_on); a SIGINT while gpuqd has the request first
 * sends gpuqd a cancel for it. Returns an exit status (errors printed). */
int ctl_run_op(ctl_ctx *ctx, gpuq_request *req, const npy_array *a, const npy_array *b,
               const ctl_out *outs, unsigned nout, bool timing);
/* Resident arrays in ctl_run_op (PROTOCOL.md 3.5): an input opened by
 * ctl_resident_open (a->resident set) is named in the request's "in" and
 * carries no byte; an output whose path is "@NAME" is kept by gpuqd as
 * the resident array NAME (named in "out") and written to no file. */

/* The resident array an argument names: "@NAME" gives NAME, anything else
 * (a path, "-") NULL. A file whose name starts with '@' is "./@...". */
const char *ctl_resident_name(const char *arg);
/* An "@NAME" argument whose NAME is no resident array's name (empty, too
 * long, not UTF-8, a '/' or a control character: gpuq_name_check) is a
 * usage error (printed; returns CTL_EXIT_USAGE); else 0. */
int ctl_resident_check(const ctl_ctx *ctx, const char *arg);

#endif
