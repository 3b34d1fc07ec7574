/* SPDX-License-Identifier: Apache-2.0 */
/* refbatch.h - many ref_ops.py references from one python process.
 *
 * Starting python with numpy/scipy costs about half a second, more than
 * most references take to compute; a suite that needs dozens queues them
 * here (inputs written to files as they are queued), runs them all with
 * `ref_ops.py batch` once, and reads every result. The batch lives in its own
 * temp directory. Failures (a file that cannot be written, python exiting
 * non-zero, a result of the wrong size) abort the current Check test, or
 * the unchecked fixture that ran them.
 */
#ifndef GPUQ_REFBATCH_H
#define GPUQ_REFBATCH_H

#include <stddef.h>

typedef struct rb_batch rb_batch;

/* A new, empty batch (its temp directory made now). */
rb_batch *rb_new(void);
/* Queue one ref_ops.py call: args (NULL-terminated, OUT left out: the batch
 * appends it) where an argument "@0" or "@1" stands for the float64 array
 * in0[n0] or in1[n1] (written to a file now; NULL when unused); nout: how
 * many float64 values the call writes. Returns the job's number. */
int rb_add(rb_batch *b, const char *const *args, const double *in0, size_t n0, const double *in1,
           size_t n1, size_t nout);
/* Run every job queued since the last run, in order, in one ref_ops.py, and
 * read their results. More jobs may be queued and run afterwards. */
void rb_run(rb_batch *b);
/* The nout results of a job that has run (owned by the batch). */
const double *rb_get(const rb_batch *b, int job);
/* Free the results and remove the temp directory; NULL is fine. */
void rb_free(rb_batch *b);

#endif
