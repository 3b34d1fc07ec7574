/* SPDX-License-Identifier: Apache-2.0 */
/* backend_cuda_defs.h - the types the CUDA backend's files share
 * (backend_cuda.c: submit, create, destroy; backend_cuda_dev.c: devices,
 * sessions, per-job state, host memory; backend_cuda_done.c: the completion
 * path). Types only; see backend_cuda.c for how they work together. */
#ifndef GPUQ_SERVER_BACKEND_CUDA_DEFS_H
#define GPUQ_SERVER_BACKEND_CUDA_DEFS_H

#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "gpuq_kernels.h"

#define CUDA_POLL_MS 100
#define CUDA_SPIN_US_DEFAULT 50
/* The predictive spin (backend_cuda_done.c, cuda_wake_plan): a job's
 * device time is guessed from its bytes at CUDA_EST_GBPS (GPUQ_CUDA_EST_GBPS;
 * faster than any copy, so the guess errs early), and the loop spins from
 * CUDA_WAKE_LEAD_US before that until CUDA_WAKE_TAIL_US after it
 * (GPUQ_CUDA_WAKE_TAIL_US; 0 turns the predictive spin off). */
#define CUDA_EST_GBPS 60
#define CUDA_WAKE_LEAD_US 300
#define CUDA_WAKE_TAIL_US 2000
/* Resident arrays (PROTOCOL.md 3.5) are read and written in device memory,
 * not over PCIe: their bytes count 1/CUDA_EST_DEVICE_SCALE in a job's
 * guess (64 x 60 GB/s: faster than the device's memory, so the guess errs
 * early, as for copies). A kNN against a 512 MB base guessed at 8.9 ms
 * waited for its doorbell (queue 242 us of 665 on an H200). */
#define CUDA_EST_DEVICE_SCALE 64
/* Pipelined jobs (backend_cuda_pipe.c): a job of more input + output bytes
 * than this goes in chunks of about this many bytes each way, at most
 * CUDA_PIPE_MAX_CHUNKS of them, the end ones smaller (CUDA_PIPE_RAMP of
 * them, halving) (GPUQ_CUDA_CHUNK_BYTES; 0: never). */
#define CUDA_CHUNK_BYTES_DEFAULT ((uint64_t)8 << 20)
/* Small jobs (backend_cuda.c): a job whose input, output and scratch fit in
 * this many bytes (each part 256-byte aligned) uses a device buffer its
 * per-job state keeps from job to job, instead of three stream-ordered pool
 * allocations and frees (GPUQ_CUDA_SMALL_BYTES; 0: never). */
#define CUDA_SMALL_BYTES_DEFAULT ((uint64_t)64 << 10)
/* Zero-copy jobs (backend_cuda.c): a job of at most this many input +
 * output bytes whose host arrays the device can address runs its kernels
 * on them, without copies (GPUQ_CUDA_ZERO_COPY_BYTES; 0: never). */
#define CUDA_ZERO_COPY_BYTES_DEFAULT ((uint64_t)64 << 10)
/* Pinned error flags (backend_cuda_dev.c): one slab of this many, shared
 * by every session's per-job state (more come one by one). */
#define CUDA_FLAG_SLOTS 16384u
/* ints of one slot: the error flag, the stop gate, the input gate's word
 * (a gated job's announced units), one spare */
#define CUDA_FLAG_INTS 4
/* Gated jobs (backend_cuda_gate.c): at most CUDA_PIPE_MAX_CHUNKS units of
 * input; the word is released past any unit with this value (a wait's
 * comparison is (int32_t)(word - value) >= 0). */
#define CUDA_GATE_RELEASE 0x40000000u
/* Jobs of more input + output bytes than this give their kernels a stop
 * gate (cuda_submit): their long kernels end at their next tile once the
 * job is abandoned. Below it a job's kernels take microseconds, and the
 * gate's load from host memory by the first block (about a microsecond)
 * would be a visible part of that. */
#define CUDA_GATE_BYTES ((uint64_t)1 << 20)
#define CUDA_PIPE_MAX_CHUNKS 32
#define CUDA_PIPE_RAMP 4
/* Two-phase ops (flat normalize) upload in chunks this many times the
 * nominal size: their reduction keeps up with any chunk, and each copy
 * costs a few microseconds of its own (backend_cuda_pipe.c). A 16M f32
 * normalize then goes up in two; in one it was no faster for four clients
 * and its kernel span 11 us longer alone (H100, 2026-11-26). */
#define CUDA_PIPE_TWO_PHASE_SCALE 4
/* Priority levels (GPUQ_PRIO_LOW .. HIGH): a device's batch lanes. */
#define CUDA_LEVELS 3
struct cuda_sess;

/* One batched launch in flight on a lane (backend_cuda_batch.c): its jobs
 * (linked by job->next), the launch's state (per-job flags and block
 * counters; zero whenever no launch uses it) and its completion event. Kept
 * on the lane's free list after use. */
typedef struct cuda_batch {
    struct cuda_batch *next;
    cudaEvent_t done;
    void *d_state;
    gpuq_job *jobs;
    uint32_t n;
    int row; /* a row batch (backend.h): its jobs' flags hold the run's */
} cuda_batch;

typedef struct cuda_dev {
    int index;
    char name[256];
    uint64_t total_mem;
    int prio_least, prio_greatest; /* cudaDeviceGetStreamPriorityRange */
    cudaMemPool_t pool;
    int own_pool;    /* created (with a size limit), destroyed by us */
    int reuse_local; /* pool reuse without cross-stream waits (dev_alloc) */
    int host_ptr_ok; /* reaches pinned and registered host memory at host pointers */
    int sessions;
    uint64_t in_flight;
    uint64_t bytes; /* input + output bytes submitted */
    /* the guessed device time (cuda_wake_plan) of the jobs in flight, per
     * level: what a new job of that level or lower may wait behind */
    uint64_t est_ns[CUDA_LEVELS];
    struct cuda_sess *lane[CUDA_LEVELS]; /* batch lanes, opened at first use */
} cuda_dev;

/* Per-job CUDA state, reused through a per-session free list. */
typedef struct cuda_jobx {
    struct cuda_jobx *next_free;
    cudaEvent_t done; /* completion, cudaEventDisableTiming */
    cudaEvent_t t[4]; /* start, after H2D, after kernel, after D2H */
    int has_timing_events;
    int *h_flag;     /* pinned copy of the ctx errflag (the backend's slab, or own) */
    int flag_own;    /* h_flag is its own cudaHostAlloc (the slab was full) */
    void *d_small;   /* small jobs' device buffer (b->small_bytes, from the pool), kept */
    int timing;      /* this job recorded t[] */
    uint64_t pc;     /* predicted completion (uv_hrtime ns); 0: none, or spun for */
    uint64_t pq;     /* how much later it may end: the jobs ahead of it (ns) */
    uint64_t est_ns; /* its guessed device time, counted in its session's level's dev->est_ns */
    int status;      /* preset failure, 0 if none */
    char message[160];
    /* A gated job (backend_cuda_gate.c): gate_n units of input (0: not
     * gated), unit k in place once the first gate_end[k] input bytes are;
     * d_ready: the device's address of its word (cuda_jobx_ready). */
    uint32_t gate_n;
    uint64_t gate_end[CUDA_PIPE_MAX_CHUNKS];
    uint64_t d_ready;
} cuda_jobx;

typedef struct cuda_sess {
    struct backend_cuda *b;
    cuda_dev *dev;
    cudaStream_t stream;
    gpuq_cuda_ctx *kctx;
    /* Pipelined jobs (backend_cuda_pipe.c): the copy streams, of the
     * compute stream's priority, and the events that order the three
     * (cudaEventDisableTiming, reused chunk after chunk: a wait takes the
     * event's state when it is enqueued). */
    cudaStream_t copy_in, copy_out;
    cudaEvent_t ev_in, ev_comp, ev_out;
    gpuq_job *head, *tail; /* in-flight FIFO (job->next) */
    uint64_t nflight;
    int armed; /* a doorbell is enqueued and has not been handled */
    int closing;
    struct cuda_sess *wake_next;   /* wake list link (under b->mu) */
    struct cuda_sess *prev, *next; /* all sessions of the backend */
    cuda_jobx *free_x;
    int level; /* GPUQ_PRIO_* the session was opened with */
    /* A batch lane (backend_cuda_batch.c): the backend's own session, one
     * per device and level, whose stream runs batched launches of client
     * sessions' jobs. Its in-flight FIFO is of batches (bhead), not jobs;
     * pend: batchable jobs waiting for the idle phase; pend_next links the
     * lanes that have some. */
    int lane;
    cuda_batch *bhead, *btail, *bfree;
    gpuq_job *pend_head, *pend_tail;
    uint32_t npend;
    gpuq_job *rpend_head, *rpend_tail; /* row-batchable jobs waiting (backend_row_batchable) */
    struct cuda_sess *pend_next;
    int pend_listed;
} cuda_sess;

typedef struct backend_cuda {
    backend base;
    int ndev;
    cuda_dev *devs;
    int cur_dev;
    uv_async_t async;
    uv_timer_t timer;
    uv_idle_t spin;  /* polls events for spin_ns after activity */
    uv_timer_t wake; /* starts the spin shortly before a job's predicted end */
    int handles_open;
    int timer_on, spin_on, wake_on;
    uint64_t spin_ns, spin_until;                  /* spin_ns 0: doorbells only */
    uint64_t est_gbps, wake_lead_ns, wake_tail_ns; /* wake_tail_ns 0: no predictive spin */
    int wake_queue;   /* windows reach past the jobs ahead (GPUQ_CUDA_WAKE_QUEUE) */
    uint64_t wake_at; /* when wake fires (wake_on) */
    pthread_mutex_t mu;
    cuda_sess *wake_head;          /* under mu: sessions whose doorbell rang */
    gpuq_job *imm_head, *imm_tail; /* loop only: jobs to complete without waiting */
    cuda_sess *sessions;
    uint64_t inflight;
    int walking;    /* >0 while a loop callback walks sessions */
    uint64_t *seen; /* what counts the jobs this walk finds done (base.seen_*) */
    uint64_t submits, allocs;
    uint64_t inject_sticky, inject_oom;
    uint64_t slow_ms;        /* GPUQ_TEST_SLOW_MS: each job first waits that long on the GPU */
    uint64_t chunk_bytes;    /* GPUQ_CUDA_CHUNK_BYTES (0: no pipelining) */
    uint64_t small_bytes;    /* GPUQ_CUDA_SMALL_BYTES (0: pool allocations for every job) */
    uint64_t small_jobs;     /* jobs that ran in a kept small buffer */
    uint64_t zc_bytes;       /* GPUQ_CUDA_ZERO_COPY_BYTES (0: every job copies) */
    int *flag_slab;          /* CUDA_FLAG_SLOTS pinned pairs of ints: flag, gate (cudaHostAlloc) */
    uint32_t *flag_next;     /* free list of the slab: next index */
    uint32_t flag_head;      /* first free slot; CUDA_FLAG_SLOTS: none */
    uint64_t zero_copy_jobs; /* jobs whose kernels used the host arrays */
    uint64_t inject_pipe;    /* GPUQ_TEST_INJECT_PIPE */
    uv_idle_t flush;         /* starts the lanes' pending jobs (flush_on) */
    uv_idle_cb flush_cb;     /* its callback (backend_cuda_batch.c) */
    int flush_on;
    cuda_sess *pend_lanes; /* lanes with pending jobs (pend_next) */
    /* cuStreamWaitValue32 (the driver's, by cudaGetDriverEntryPointByVersion;
     * NULL: none, gated jobs are held by the server until their input is
     * in) */
    void *wait_value32;
} backend_cuda;

#endif
