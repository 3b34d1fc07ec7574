/* SPDX-License-Identifier: Apache-2.0 */
/* staging.h - the staging pool: host (pinned on CUDA) memory for payloads
 * and results.
 *
 * Happy path: a request's input+output size is rounded to a size class
 * (quarter steps between powers of two, at least 4 KiB); a free slot of that
 * class is reused, else one is carved from a 16 MiB chunk (classes up to
 * 1 MiB) or allocated on its own through backend->host_alloc. Memory is
 * allocated rarely and in large steps and kept for reuse.
 *
 * Accounting: bytes in use per session (a counter the caller owns) and in
 * total. Fairness: the last `headroom` bytes of the total may only be taken by
 * a session that holds no staging at all, so sessions that hog memory (a
 * header promising a huge payload and then silence, replies never read) can
 * never lock out a newcomer's small request. Memory given back: after a
 * burst, staging_release_idle frees unused slots and fully unused chunks down
 * to a floor; the caller decides when the pool has been idle long enough.
 *
 * Growth off the loop (issue 28): with a pinner (staging_set_pinner) the
 * pool never pins on the loop. A reservation that needs new memory starts
 * a grow on the pinning thread (or joins the one in flight for its chunk or
 * class) and gets GPUQ_E_BUSY with a ticket: the caller waits as for any
 * busy pool, and the finished grow (success or failure) calls the waker,
 * after which the caller reserves again with its ticket. When free chunk
 * room falls under STAGING_LOW_WATER, the next chunk is grown ahead of
 * need. Memory given back leaves the accounting at once and is freed on the
 * pinning thread. Without a pinner (the tests' fake backends) every grow and
 * free runs at once, on the caller's thread, as before.
 *
 * Failure: GPUQ_E_TOO_LARGE when the request alone can never fit a
 * limit; GPUQ_E_BUSY when it would fit but not now (the caller waits);
 * GPUQ_E_NO_MEMORY when host_alloc failed: at once without a pinner; with
 * one, for the waiter whose grow (or one started after it) failed, when it
 * reserves again with its ticket (staging_fail_msg says why). Later
 * reservations start new grows: a failure does not stick.
 */
#ifndef GPUQ_SERVER_STAGING_H
#define GPUQ_SERVER_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "pinner.h"

/* Free room in the newest chunk under which the next one is grown ahead. */
#define STAGING_LOW_WATER (4u << 20)

struct staging_chunk;
struct staging_grow;

typedef struct staging_slot {
    uint8_t *ptr;
    size_t size;                 /* class size */
    struct staging_chunk *chunk; /* carved from it (never freed alone), or NULL */
    struct staging_slot *next;   /* free list */
} staging_slot;

typedef struct staging_chunk {
    uint8_t *ptr;
    size_t size, used;
    uint32_t nslots, nfree; /* slots carved from it; how many are free */
    struct staging_chunk *next;
} staging_chunk;

typedef struct staging {
    backend *b; /* borrowed */
    uint64_t total_limit;
    uint64_t in_use;         /* class bytes reserved */
    uint64_t capacity;       /* bytes allocated from the backend */
    uint64_t headroom;       /* for sessions holding nothing (see above) */
    uint64_t reserves;       /* reservations so far: callers watch it for idleness */
    uint64_t released_total; /* bytes given back by staging_release_idle */
    staging_slot *free_list;
    staging_chunk *chunks;
    /* growth on the pinning thread (NULL pin: at once) */
    pinner *pin;             /* borrowed */
    void (*wake)(void *arg); /* a grow finished (loop thread) */
    void *wake_arg;
    struct staging_grow *grows; /* in flight */
    uint64_t growing;           /* their bytes */
    uint64_t grow_seq;          /* tickets: the last grow started */
    uint64_t fail_seq;          /* the last grow that failed (0: none) */
    char fail_msg[160];         /* why it failed */
    uint64_t grows_started, grows_ahead, grow_failures;
    bool closed; /* destroyed: grows that finish give their memory back */
} staging;

void staging_init(staging *st, backend *b, uint64_t total_limit);
size_t staging_class(size_t n);
/* Set the headroom: the last bytes of the total, which only a request of at
 * most that size from a session with *sess_used == 0 may use. At most half
 * the total limit takes effect; 0 after init. One request may therefore take
 * at most total_limit - headroom bytes (more is GPUQ_E_TOO_LARGE). */
void staging_set_headroom(staging *st, uint64_t headroom);
/* Grow on pin's thread from now on (borrowed; NULL: at once); wake(arg)
 * runs on the loop each time a grow finished, so waiters reserve again. */
void staging_set_pinner(staging *st, pinner *pin, void (*wake)(void *arg), void *arg);
/* Reserve a slot of at least n bytes; *sess_used is the session's counter.
 * *ticket (the caller's, 0 at first) is set while the caller waits for a
 * grow (GPUQ_E_BUSY) and cleared otherwise; pass it back on each retry. */
int staging_reserve_wait(staging *st, size_t n, uint64_t *sess_used, uint64_t sess_limit,
                         uint64_t *ticket, staging_slot **out);
/* staging_reserve_wait without a ticket (a failed grow is then only
 * tried again). */
int staging_reserve(staging *st, size_t n, uint64_t *sess_used, uint64_t sess_limit,
                    staging_slot **out);
/* Why the last grow failed (for the no_memory reply). */
const char *staging_fail_msg(const staging *st);
/* Give a slot back (owned again by the pool). */
void staging_release(staging *st, staging_slot *slot, uint64_t *sess_used);
/* Change the total limit (config reload). Lowering it frees unused
 * stand-alone slots down to the new limit but nothing in use; until use
 * drops under it, new reservations get GPUQ_E_BUSY as with a full pool (or
 * GPUQ_E_TOO_LARGE when they can never fit). */
void staging_set_capacity(staging *st, uint64_t total_limit);
/* Give back unused memory until capacity <= keep (or nothing unused is left):
 * stand-alone free slots, largest first, then chunks none of whose slots is in
 * use. Nothing in use moves. Returns the bytes freed. */
uint64_t staging_release_idle(staging *st, uint64_t keep);
/* Free everything; every slot must have been released. With a pinner the
 * memory is freed on its thread (pinner_close waits for it), and grows
 * still in flight free theirs when they finish. */
void staging_destroy(staging *st);

#endif
