/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_outfile.h - gpuqctl's output .npy files, written whole or not at all,
 * and the signal handlers that keep it so (ctl_outfile.c).
 */
#ifndef GPUQ_CLIENT_CTL_OUTFILE_H
#define GPUQ_CLIENT_CTL_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npy.h"

/* One output of a command: its dtype, shape and .npy file ("-": stdout). */
typedef struct ctl_out {
    gpuq_dtype dtype;
    int ndim;
    uint64_t shape[2];
    const char *path;
} ctl_out;

/* Write outs[o] (o < nout, at most 2) from out + off[o] (borrowed): each
 * to a temporary file beside its path, renamed over it once written (see
 * ctl_outfile.c for links, devices and stdout). When a write fails none of
 * the outputs is renamed into place and the temporary files are removed.
 * 0, or GPUQ_E_IO with "PATH: reason" in err. */
int ctl_outfile_write(const ctl_out *outs, unsigned nout, const uint8_t *out, const uint64_t *off,
                      char *err, size_t cap);

/* Would outputs a and b (neither "-") end up as one file? An existing
 * path is its file (links followed: same device and inode), one not there
 * yet is the name its rename would make (the same directory, by device and
 * inode, and the same last component); a directory that cannot be
 * looked at compares by the path's text. A character device (/dev/null)
 * takes any number of outputs and is never "the same". */
bool ctl_outfile_same(const char *a, const char *b);

/* From now on SIGINT, SIGTERM and SIGHUP remove the unfinished output
 * files, print "gpuqctl: interrupted" (terminated, hangup) and end the
 * process by that signal (exit status 128 + signal in a shell: 130 for
 * Ctrl-C); a signal already ignored stays ignored. Returns true when it
 * installed the handlers, false when they were already on.
 * ctl_outfile_signals_off puts back what was there before. */
bool ctl_outfile_signals_on(void);
void ctl_outfile_signals_off(void);

/* While an op sends its request or waits for gpuqd's reply: the first
 * SIGINT does not end the process but makes the returned fd readable (a
 * self-pipe, for gpuq_set_interrupt_fd), so that the op can cancel its
 * request and then end by ctl_outfile_die(SIGINT). A second SIGINT, SIGTERM and SIGHUP end
 * it at once as before. -1 when the handlers are not on or no pipe can be
 * had (SIGINT then ends the process at once, as before).
 * ctl_outfile_undefer_sigint goes back to that, and ends the process by
 * SIGINT if one came meanwhile (after the wait, before this call). */
int ctl_outfile_defer_sigint(void);
void ctl_outfile_undefer_sigint(void);
/* What the handlers do, from the op's thread: remove the unfinished output
 * files, print "gpuqctl: interrupted" (terminated, hangup) and end the
 * process by sig. */
_Noreturn void ctl_outfile_die(int sig);

#endif
