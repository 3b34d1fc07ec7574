/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_resident.h - gpuqctl's resident arrays (ctl_resident.c): the put,
 * get, ls and rm commands (ctl.h declares their entries), and "@NAME" as
 * an op command's input. */
#ifndef GPUQ_CLIENT_CTL_RESIDENT_H
#define GPUQ_CLIENT_CTL_RESIDENT_H

#include "ctl.h"
#include "npy.h"

/* arg "@NAME" as an op's input: *a gets the resident array's dtype, shape
 * and bytes from gpuqd (a list on a connection of its own, made with
 * ctx's socket and priority), a->resident its name and a->path arg (both
 * borrowed); no file, no data (npy_free is fine). A malformed name is a
 * usage error; a name gpuqd lists no array under (none, or none the
 * caller may read) is not_found. Returns an exit status (error printed). */
int ctl_resident_open(const ctl_ctx *ctx, const char *arg, npy_array *a);

#endif
