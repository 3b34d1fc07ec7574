/* SPDX-License-Identifier: Apache-2.0 */
/* resident_store.h - persisted resident arrays (PROTOCOL.md 3.5, persist):
 * one file per array under the state directory, written off the loop,
 * loaded back at start.
 *
 * A file is "<base64url(name)>.gpuqa": the magic "GPUQRES1", a u32 (LE)
 * length and a msgpack map describing the array (name, owner, access,
 * dtype, shape, bytes, device), the array's bytes, and a CRC-32C of all
 * that (u32 LE). It is written to "<...>.tmp", fsynced, renamed over the
 * old file and the directory fsynced: a gpuqd killed at any moment leaves
 * either the old file or the new one, never a partial one under the name
 * (a stray .tmp is deleted at the next start).
 *
 * Happy path: resident_store_open (the directory there and writable) ->
 * resident_store_load (every file checked and its array stored through the
 * backend; a damaged one logged and renamed "<...>.damaged", never served)
 * -> resident_store_write per persisted array (on the store's thread: the
 * bytes copied from backend memory in chunks, written, checksummed; done
 * on the loop) -> resident_store_unlink when one is removed or replaced by
 * an array that is not persisted -> resident_store_close at shutdown (what
 * is queued is written first, then the thread is joined).
 *
 * Failure: no directory (state_dir "", or it cannot be used): the store is
 * off, gpuqd logs why and serves on, and persist requests are refused. A
 * write that fails (a full disk, an I/O error) leaves the old file and
 * reports GPUQ_E_STORAGE with the reason.
 */
#ifndef GPUQ_SERVER_RESIDENT_STORE_H
#define GPUQ_SERVER_RESIDENT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "backend.h"
#include "resident.h"

typedef struct resident_store_job resident_store_job;
/* A write finished (loop thread): rc 0, or GPUQ_E_STORAGE with why. */
typedef void (*resident_store_done)(void *arg, int rc, const char *why);

struct resident_store_job {
    /* set by the caller (borrowed memory lives until done) */
    char name[GPUQ_RES_NAME_MAX + 1];
    uid_t owner;
    uint8_t access;
    gpuq_dtype dtype;
    uint32_t ndim;
    uint64_t shape[GPUQ_MAX_DIMS];
    uint64_t bytes;
    int device;
    const void *mem; /* backend memory of device */
    resident_store_done done;
    void *arg;
    /* the store's */
    int rc;
    char why[160];
    resident_store_job *next;
};

typedef struct resident_store {
    char dir[4096]; /* "" when off */
    bool on;
    backend *b;
    uv_loop_t *loop;
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    uv_async_t async;
    bool started, stopping;
    resident_store_job *todo, *todo_tail; /* for the thread */
    resident_store_job *done_head;        /* back to the loop */
    uint64_t writes, write_errors, loaded, damaged;
} resident_store;

/* Use dir, which must exist and be writable ("" or anything else: off).
 * Returns 0 (on, or off with why logged), or a GPUQ_E_* code when the
 * thread or handles cannot be made. */
int resident_store_open(resident_store *st, uv_loop_t *loop, backend *b, const char *dir);
/* Load every persisted array into bk (on the backend's device of the
 * file, or the first one when the backend has no such device; -1 on CPU):
 * before sessions are served. Returns the count loaded. */
int resident_store_load(resident_store *st, resident_books *bk);
/* Queue job (its fields set; *job borrowed until done). 0, or
 * GPUQ_E_STORAGE when the store is off. */
int resident_store_write(resident_store *st, resident_store_job *job);
/* Remove name's file (and fsync the directory). 0 (also when there was
 * none) or GPUQ_E_STORAGE with why. */
int resident_store_unlink(resident_store *st, const char *name, char *why, size_t cap);
/* Write what is queued, join the thread, close the handle. */
void resident_store_close(resident_store *st);

/* CRC-32C (Castagnoli) of p[0..n) continuing from crc (0 to start). */
uint32_t resident_crc32c(uint32_t crc, const void *p, size_t n);

#endif
