/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_batch.h - batched launches of small jobs in the CUDA backend.
 *
 * A job that may run in a batch (backend_batchable, its op's
 * cuda_batch_item, zero-copy, no test hooks on) is not launched by submit:
 * it waits on the pending list of its device's lane for its session's
 * priority level. A lane is a session of the backend's own (its stream of
 * that level's priority). In the loop's idle phase (an idle handle started
 * while jobs are pending, so the loop does not sleep on them) each lane's
 * pending jobs go to the device batch_max (at most GPUQ_NORM_BATCH_MAX) at
 * a time, each batch as one kernel launch that reads the jobs' inputs from
 * and writes their outputs and error flags to host memory (zero-copy), then
 * one event. So a batch costs two CUDA calls, whatever its size, and no copy
 * engine. A lane's FIFO holds batches; the completion path (doorbell, spin,
 * poll timer: backend_cuda_done.c) completes every job of a batch whose
 * event has fired, each with its own flag, through its own session.
 *
 * Sessions of one level on one device share the lane, so their jobs run in
 * one batch; jobs of one session may then run out of submission order with
 * its unbatched jobs (the protocol orders replies, not runs).
 */
/*
 * Row batches (backend.h, backend_row_batchable: knn and pairwise queries
 * against one resident array, from any sessions of a level) wait on their
 * lane's row list too. In the idle phase each kind (backend_row_same) with
 * no row batch in the lane's FIFO goes as one launch sequence on the
 * lane's stream: a copy-items kernel gathers the jobs' A rows from host
 * memory (zero-copy) into one device buffer, the op runs once over them
 * against the resident B, a second copy-items kernel scatters each job's
 * output rows and the run's error flag into the jobs' host memory, one
 * event. Later jobs of the kind wait for it (and then go together), so a
 * batch takes what arrived while the one before ran. A row batch whose
 * flag or event reports an error sends each of its jobs back through
 * submit to run alone (job->row_alone), so that a bad query fails alone,
 * with the message it gets alone.
 */
#ifndef GPUQ_SERVER_BACKEND_CUDA_BATCH_H
#define GPUQ_SERVER_BACKEND_CUDA_BATCH_H

#include "backend_cuda_defs.h"

/* The idle handle (b->flush); 0 or a libuv code. */
int cuda_batch_init(backend_cuda *b);
/* job (of session s, its jobx taken) joins a batch: 1, and it completes
 * through the lane; 0: it runs alone (submit goes on with it). */
int cuda_batch_take(backend_cuda *b, cuda_sess *s, gpuq_job *job);
/* The same for a row-batchable job (of session s, its jobx taken). */
int cuda_row_take(backend_cuda *b, cuda_sess *s, gpuq_job *job);
#endif
