/* SPDX-License-Identifier: Apache-2.0 */
/* backend.h - the interface between gpuqd's loop and whatever runs the ops.
 *
 * Contract: "submit now, complete later on the loop thread". submit() is called
 * on the loop thread with a job whose input is already in staging memory
 * (pinned host memory on CUDA, from backend host_alloc). The backend enqueues
 * the work and returns at once; when the job is finished (or failed) the
 * backend arranges for backend_complete_fn(job) to be called ON THE LOOP
 * THREAD (CPU: uv_queue_work's after_work; CUDA: a completion queue drained
 * by a uv_async). Jobs of one session may complete out of order; the session
 * layer restores request order.
 *
 * A backend session (per client session: a CUDA stream, scratch) is released
 * with session_close only after that session's last job completed.
 */
#ifndef GPUQ_SERVER_BACKEND_H
#define GPUQ_SERVER_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "header.h"

typedef struct gpuq_job gpuq_job;
typedef struct backend backend;

typedef void (*backend_complete_fn)(gpuq_job *job);

struct gpuq_job {
    /* set by the server, read-only for the backend */
    const gpuq_request *req; /* borrowed: lives as long as the job */
    const gpuq_sizes *sz;    /* borrowed */
    /* Host memory of the arrays: staging slot or a shared-memory arena
     * (pinned, or registered with CUDA, either way). h_in[k]: input k's
     * sz->in_bytes[k] bytes (A, B; NULL beyond sz->nin); h_out[k]: output
     * k's sz->out[k].bytes (NULL beyond sz->nout). The arrays need not be
     * adjacent. */
    const void *h_in[GPUQ_MAX_INPUTS];
    void *h_out[GPUQ_MAX_OUTPUTS];
    void *bsess;        /* the backend session it was submitted on */
    void *owner;        /* the server's request (opaque to backend) */
    uint64_t submit_ns; /* uv_hrtime() when it was queued for the device (scheduler.c) */
    /* Set by the scheduler: a higher priority level is active on the
     * job's device, so the job runs whole, not in pipelined chunks (a
     * chunked job costs the loop many more calls, which that level's
     * requests would wait behind). */
    int whole;
    /* Resident arrays (PROTOCOL.md 3.5), set by the server: res_in[k] is
     * input k's backend memory (device memory on CUDA, host on the CPU;
     * h_in[k] is then NULL), or NULL. keep[k]: output k is kept; the
     * backend allocates its memory (res_out[k], of sz->out[k].bytes) and
     * writes it there instead of h_out[k]. Whatever res_out holds at
     * completion, failed or not, is the server's (freed with res_free). */
    const void *res_in[GPUQ_MAX_INPUTS];
    uint8_t keep[GPUQ_MAX_OUTPUTS];
    void *res_out[GPUQ_MAX_OUTPUTS];
    /* Set by the backend: res_in[0] is host memory (the CPU backend), so a
     * kernel error's message may read it. */
    int res_host;
    /* Set by the server (loop thread, __atomic_store_n) once the job's
     * result will not be used: it was cancelled, its deadline passed or its
     * session closed, and its client was answered already. The backend
     * stops at its next block of rows (CPU: backend_run_cpu; read with
     * __atomic_load_n on any thread) or tile (CUDA: ops->stop, the kernels'
     * gate) and completes it as usual. */
    int stop;
    /* A gated job (job->req->gate, PROTOCOL.md 3.4): its input bytes in
     * place (h_in's, counted A's then B's) out of sz->payload; the loop
     * raises gate_ready (then calls ops->gate) as ready requests come. The
     * backend reads no input byte past it. */
    uint64_t gate_ready;
    /* set by the backend before completion */
    int status;         /* 0 or GPUQ_E_* */
    char message[160];  /* one line when status != 0 */
    gpuq_timing timing; /* filled when req->timing (total_us is the server's) */
    /* backend private */
    void *bpriv;
    int row_alone;  /* a row batch it was in failed: it runs alone now */
    gpuq_job *next; /* completion queue link */
};

typedef struct backend_session_info {
    int priority_granted; /* the level's CUDA stream priority; 0 on CPU */
    int device;           /* device index; -1 on CPU */
} backend_session_info;

/* One device as status, sessions and metrics show it (the CPU backend has
 * one, named "cpu", index -1, no device memory). */
typedef struct backend_device {
    int index;
    char name[256];
    uint64_t total_memory;  /* bytes; 0 on CPU */
    uint64_t memory_in_use; /* device bytes allocated from gpuq's pool */
    uint32_t sessions;
    uint64_t in_flight; /* jobs submitted, not completed */
    uint64_t bytes;     /* input + output bytes of jobs submitted so far */
} backend_device;

typedef struct backend_ops {
    const char *name; /* "cpu", "cuda" */
    /* Per-client session. priority: the client's level (GPUQ_PRIO_LOW,
     * NORMAL or HIGH, nothing else), already capped by policy; device: -1 =
     * backend chooses. */
    int (*session_open)(backend *b, int priority, int device, void **bsess,
                        backend_session_info *info);
    void (*session_close)(backend *b, void *bsess);
    int (*submit)(backend *b, gpuq_job *job);
    /* Optional (NULL: the backend reads job->stop itself, as the CPU one
     * does between blocks of rows): job, submitted and not completed, was
     * abandoned and job->stop is set; tell its work to stop early. It
     * completes as usual. */
    void (*stop)(backend *b, gpuq_job *job);
    /* Optional (NULL, or b->gate_ok 0: the server submits a gated job only
     * once its input is all in): job, submitted, gated and not completed,
     * has more input in place (job->gate_ready grew); its transfers waiting
     * for those bytes may go. The backend also releases every wait of a job
     * it is told to stop (the input no longer matters). */
    void (*gate)(backend *b, gpuq_job *job);
    /* Optional (NULL: the host memory calls below stay on the loop, as
     * the tests' fake backends want): called once on the thread that will
     * make them (planes/pinner.c), before any; CUDA makes a device
     * current there. 0, or a GPUQ_E_* code with why: gpuqd does not
     * start. */
    int (*host_thread_init)(backend *b, char *why, size_t cap);
    /* Staging host memory (pinned on CUDA). Large, rare calls, made on the
     * pinning thread once host_thread_init ran there (and on the loop
     * before the first session and at shutdown). */
    void *(*host_alloc)(backend *b, size_t len);
    void (*host_free)(backend *b, void *p);
    /* Optional (NULL: nothing to do, as on CPU): make memory the server
     * mapped (a shared-memory arena) usable for the backend's copies, once
     * per arena; 0 or a GPUQ_E_* code with why. Unregistered only after the
     * last job that touched it completed. */
    int (*host_register)(backend *b, void *p, size_t len, char *why, size_t cap);
    void (*host_unregister)(backend *b, void *p);
    /* Free a kept output's memory (a job's res_out) on device (the
     * session's device index; -1 on CPU), once nothing uses it (loop
     * thread). */
    void (*res_free)(backend *b, int device, void *p);
    /* Optional (NULL: resident arrays cannot be persisted): allocate a
     * resident array's memory outside a job (loading persisted arrays at
     * start, loop thread), and copy bytes between such memory and host
     * memory, either way, synchronously (any thread: the store's writes
     * them out). 0 or a GPUQ_E_* code with why. */
    int (*res_alloc)(backend *b, int device, uint64_t bytes, void **p, char *why, size_t cap);
    int (*res_copy)(backend *b, int device, void *dst, const void *src, size_t bytes, char *why,
                    size_t cap);
    /* Number of devices, and device i's figures. */
    int (*ndevices)(backend *b);
    void (*device_info)(backend *b, int i, backend_device *out);
    /* Jobs submitted but not completed. */
    uint64_t (*inflight)(backend *b);
    /* Close handles; called when no job is in flight. */
    void (*destroy)(backend *b);
} backend_ops;

struct backend {
    const backend_ops *ops;
    uv_loop_t *loop;
    backend_complete_fn complete;
    /* Set by a backend that met a sticky device error: the server fails
     * everything in flight with GPUQ_E_DEVICE_LOST and exits non-zero. */
    int lost;
    char lost_reason[160];
    /* ops->gate works here (CUDA: the driver's stream memory operations
     * were found); set by the backend at create. */
    int gate_ok;
    /* Batching, set by the server (config batch_max, batch_bytes; at start
     * and on reload). A job that backend_batchable accepts is not started
     * by submit: it waits until the loop's next idle phase (the end of the
     * loop turn that made it ready), where each device's (CUDA: and
     * priority level's) waiting batchable jobs start together, at most
     * batch_max at a time: one thread-pool work item on the CPU, one kernel
     * launch on CUDA. Each job still completes alone, with its own status.
     * batch_max 0: every job runs alone. */
    uint32_t batch_max;
    uint64_t batch_bytes;
    /* Counted by the backend: batches that carried two or more jobs, and
     * those jobs; jobs that ran in pipelined chunks, and their chunks; and
     * (CUDA) how finished jobs were noticed: by the loop's spin, by a
     * doorbell (a host function behind the job), by the poll timer. */
    uint64_t batches, batched;
    uint64_t pipelined, chunks;
    uint64_t seen_spin, seen_doorbell, seen_poll;
    /* Jobs that are not batchable (backend_batchable) the backend runs at
     * once; more would only wait inside it, where priority, cancel and
     * deadlines cannot reach them, so the scheduler holds them back in its
     * queue (the CPU backend: its thread pool's threads). 0: no limit of its
     * own (CUDA: device_window alone). */
    uint32_t slots;
    /* Pinning on the loop (issue 28): the loop thread, saved by
     * backend_mark_serving at the first hello, and the host memory calls
     * (host_alloc, host_free, host_register, host_unregister; CUDA's own
     * page-locked flags beyond its slab too) the backend made on it from
     * then on: status's loop_pins, 0 while the pinner does them all.
     * serving and loop_pins are read and written with __atomic builtins. */
    uv_thread_t loop_thread;
    int serving;
    uint64_t loop_pins;
};

/* Sessions are served from now on, on this (the loop) thread. */
static inline void backend_mark_serving(backend *b)
{
    if (__atomic_load_n(&b->serving, __ATOMIC_ACQUIRE))
        return;
    b->loop_thread = uv_thread_self();
    __atomic_store_n(&b->serving, 1, __ATOMIC_RELEASE);
}

/* A host memory call (pin or unpin) is made now: counted when it is made
 * on the loop thread while sessions are served. Any thread. */
static inline void backend_note_pin(backend *b)
{
    if (!__atomic_load_n(&b->serving, __ATOMIC_ACQUIRE))
        return;
    uv_thread_t self = uv_thread_self();
    if (uv_thread_equal(&self, &b->loop_thread))
        __atomic_add_fetch(&b->loop_pins, 1, __ATOMIC_RELAXED);
}

/* The count backend_note_pin keeps. */
static inline uint64_t backend_loop_pins(const backend *b)
{
    return b ? __atomic_load_n(&b->loop_pins, __ATOMIC_RELAXED) : 0;
}

/* May job run in a batch? Batching on, its op batchable (op_backend.h),
 * its input + output at most batch_bytes, no timing asked. */
int backend_batchable(const backend *b, const gpuq_job *job);
/* Count a batch of n jobs that started together. */
void backend_count_batch(backend *b, unsigned n);

/* Cross-session row batches (PROTOCOL.md 2, Batching): requests of an op
 * with a row_batch hook (op_backend.h: knn, pairwise) whose B is a
 * resident array and whose A is carried (payload or arena), no output
 * kept, no timing, no gate, A's and the outputs' bytes at most
 * batch_bytes, batching on, not a job that a failed row batch sends back
 * to run alone. Jobs for which backend_row_same holds (the same op,
 * dtype, resident B and op arguments) run as one job of their A rows one
 * after the other; each gets the bytes it would get alone (the hook's
 * promise). While a row batch of a kind runs on a lane (CUDA: a device and
 * priority level; CPU: the pool), later jobs of that kind wait and go
 * together when it ends: the batch grows with the load instead of each
 * turn of the loop launching its own. A batch whose run reports any
 * error (a kernel's data error, a failed allocation) runs each of its jobs
 * again alone, so that a bad request fails alone with its own message. */
int backend_row_batchable(const backend *b, const gpuq_job *job);
int backend_row_same(const gpuq_job *a, const gpuq_job *b);
/* At most this many jobs in one row batch (and batch_max). */
#define BACKEND_ROW_BATCH_MAX 128u
/* One row batch of n jobs (backend_row_batchable, pairwise
 * backend_row_same): the request and sizes of their concatenated A rows,
 * the rows' layout (sp: a_row, out_row), and job i's first row, row0[i]. */
typedef struct backend_row_plan {
    gpuq_request req;
    gpuq_sizes sz;
    uint64_t a_row, out_row[GPUQ_MAX_OUTPUTS];
    uint64_t out_at[GPUQ_MAX_OUTPUTS]; /* output k's offset in a packed output buffer */
    uint64_t row0[BACKEND_ROW_BATCH_MAX];
} backend_row_plan;
/* Fill *p for jobs[0..n) (1 <= n <= BACKEND_ROW_BATCH_MAX); 0, or -1 when
 * the rows overflow (the jobs then run alone). */
int backend_row_plan_make(gpuq_job *const *jobs, unsigned n, backend_row_plan *p);
/* Run a row batch on the CPU reference (a pool thread): the A rows
 * gathered into one buffer, the op run once over them (in blocks, on
 * several threads for a large one), each job's rows scattered back. Jobs
 * already no longer wanted, and every job of a batch whose run failed,
 * run alone (backend_run_cpu). Each job's status is set. */
void backend_run_row_batch(gpuq_job *const *jobs, unsigned n);

/* Create a backend. kind "cpu" or "cuda"; "auto" tries CUDA, then CPU.
 * On failure returns NULL and writes the reason into why. */
backend *backend_cpu_create(uv_loop_t *loop, backend_complete_fn done, char *why, size_t cap);
#ifdef GPUQ_HAVE_CUDA
/* Can CUDA be used here? Asked before backend_cuda_create so that the log
 * says plainly why not. BACKEND_CUDA_NO_DRIVER: no NVIDIA driver
 * (libcuda.so.1 cannot be loaded, or CUDA finds no driver behind it);
 * BACKEND_CUDA_NO_DEVICE: a driver, but no device CUDA can use (too old a
 * driver, no device, any other error). why[cap] gets a one-line reason
 * ("no NVIDIA driver (libcuda.so.1 not found)"). */
enum { BACKEND_CUDA_OK = 0, BACKEND_CUDA_NO_DRIVER, BACKEND_CUDA_NO_DEVICE };
int backend_cuda_probe(char *why, size_t cap);
/* mem_limit: device bytes gpuqd may hold per device (0: no limit). */
backend *backend_cuda_create(uv_loop_t *loop, backend_complete_fn done, uint64_t mem_limit,
                             char *why, size_t cap);
/* Load cuBLAS (on the loop thread, at startup) and log which float64
 * pairwise route it gives; called after the backend's own line, so that
 * the first log line names the backend. */
void backend_cuda_load_blas(void);
#endif

/* Does job read or write a resident array (res_in, keep)? */
static inline int backend_job_resident(const gpuq_job *job)
{
    for (unsigned k = 0; k < GPUQ_MAX_INPUTS; k++)
        if (job->res_in[k])
            return 1;
    for (unsigned k = 0; k < GPUQ_MAX_OUTPUTS; k++)
        if (job->keep[k])
            return 1;
    return 0;
}

/* Run one job's op on the CPU reference (used by the CPU backend and as the
 * CUDA backend's nothing-to-do cases). Fills job->status/message. Ops with
 * run_cpu_rows run in blocks of rows, and stop between two blocks once
 * job->stop is set (status GPUQ_E_CANCELLED). */
void backend_run_cpu(gpuq_job *job);

#endif
