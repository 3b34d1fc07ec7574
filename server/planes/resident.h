/* SPDX-License-Identifier: Apache-2.0 */
/* resident.h - resident arrays (PROTOCOL.md 3.5): named arrays gpuqd keeps
 * in backend memory (device memory on CUDA, host memory on the CPU) between
 * requests, for every session.
 *
 * Happy path: a request that keeps an output under a name reserves its bytes
 * against the owner's resident_bytes and total_resident when its header is
 * read (resident_reserve); the backend allocates the memory as it runs the
 * job; when the job succeeded the request commits it (resident_commit): the
 * name now means the new array, atomically, and an array it replaced lives
 * on while requests still use it. A request that names an array as an input
 * holds a reference from its header (resident_find + resident_ref) to its
 * end, so it finishes with the array it started with whatever happens to
 * the name meanwhile.
 *
 * Ownership: the table holds one reference per named array; each request
 * using one holds another. The last unref frees the memory through the
 * backend (res_free) and takes its bytes off the books. Bytes are counted
 * per uid (the uid that stored the array: its charge) and in total from the
 * reservation to the free, so quotas hold while replaced or removed arrays
 * are still in use.
 *
 * Failure: a reservation over a quota is refused (too_large for the uid's
 * resident_bytes or an array over total_resident alone, busy for a full
 * total_resident, too_large beyond GPUQ_MAX_RESIDENT arrays) with a message
 * naming the array; a commit of a name another uid took meanwhile is
 * permission_denied. Persisting them is resident_store.h's; the table itself lives in memory.
 */
#ifndef GPUQ_SERVER_RESIDENT_H
#define GPUQ_SERVER_RESIDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "backend.h"
#include "header.h"
#include "utf8.h"

/* printf arguments for "%.*s": a name as a message quotes it (its first 64
 * bytes, cut on a character boundary: PROTOCOL.md 3.2). */
#define RESIDENT_SHOW(n) (int)gpuq_utf8_cut((n), strlen(n), 64), (n)

typedef struct resident resident;
typedef struct resident_books resident_books;

struct resident {
    char name[GPUQ_RES_NAME_MAX + 1];
    uid_t owner;    /* may read it (private), replace and remove it */
    uid_t charge;   /* whose resident_bytes its bytes count against */
    uint8_t access; /* GPUQ_ACCESS_* */
    gpuq_dtype dtype;
    uint32_t ndim;
    uint64_t shape[GPUQ_MAX_DIMS];
    uint64_t bytes;
    int device;     /* the backend's device index (-1: CPU) */
    void *mem;      /* backend memory: res_alloc'd by a job, freed by res_free */
    int refs;       /* the table's (while named) + one per request using it */
    bool named;     /* in the table */
    bool persisted; /* its file is under the state directory (resident_store.h) */
    resident_books *books;
    resident *hnext; /* the table's bucket chain */
};

/* Bytes and arrays charged to one uid. */
typedef struct resident_owner {
    uid_t uid;
    uint32_t arrays; /* existing arrays charged to it (named or still used) */
    uint64_t bytes;  /* their bytes + its reservations */
} resident_owner;

#define RESIDENT_BUCKETS 4096u

/* The server's table and books (server_defs.h embeds it). */
struct resident_books {
    backend *b;                         /* frees the memory */
    resident *bucket[RESIDENT_BUCKETS]; /* named arrays by hash of name */
    uint32_t named;                     /* arrays in the table */
    uint32_t count;                     /* arrays alive + reservations (GPUQ_MAX_RESIDENT) */
    uint64_t bytes;                     /* bytes alive + reserved */
    resident_owner *owners;             /* owned, sorted by uid */
    uint32_t nowners, cap_owners;
};

/* An empty table whose arrays b frees. */
void resident_init(resident_books *bk, backend *b);
/* Unname every array and free those no request uses (shutdown: nothing is
 * in flight). */
void resident_close(resident_books *bk);

/* The named array, or NULL. */
resident *resident_find(resident_books *bk, const char *name);
/* May uid (an admin when admin) read a? Its owner, admins, or anyone when
 * access is all. */
bool resident_can_read(const resident *a, uid_t uid, bool admin);
void resident_ref(resident *a);
/* The last reference frees a's memory (backend res_free) and its books. */
void resident_unref(resident *a);

/* Reserve bytes for an array uid will store as name: its resident_bytes
 * (uid_cap) and total_resident (total_cap) and GPUQ_MAX_RESIDENT. 0, or
 * GPUQ_E_TOO_LARGE / GPUQ_E_BUSY with a one-line msg. */
int resident_reserve(resident_books *bk, uid_t uid, const char *name, uint64_t bytes,
                     uint64_t uid_cap, uint64_t total_cap, char *msg, size_t cap);
/* Give back a reservation that will not be committed. */
void resident_unreserve(resident_books *bk, uid_t uid, uint64_t bytes);

/* What a commit stores. */
typedef struct resident_spec {
    const char *name;
    uid_t uid; /* the caller (its reservation is the charge) */
    bool admin;
    uint8_t access;
    gpuq_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape;
    uint64_t bytes; /* exactly what was reserved */
    int device;
    void *mem; /* taken on success */
} resident_spec;

/* Name a new array from sp (its reservation becomes the array): an array
 * of that name is replaced (it lives on while used) if the caller owns it
 * or is an admin (the owner then stays the old array's). 0 with *replaced
 * set, or GPUQ_E_PERMISSION (another uid owns the name; msg says
 * whose) or GPUQ_E_NO_MEMORY, with nothing taken: the caller still owns
 * mem and the reservation. */
int resident_commit(resident_books *bk, const resident_spec *sp, bool *replaced, char *msg,
                    size_t cap);
/* Take a out of the table (remove): the name is free at once; a lives on
 * while requests use it. */
void resident_unname(resident *a);

/* The named arrays uid (admin: every one) may read, sorted by name, into
 * *out (malloc'd, the caller frees; NULL when none). Returns the count, or
 * -1 on out of memory. */
int resident_visible(resident_books *bk, uid_t uid, bool admin, resident ***out);
/* Two entries of a msgpack map into w: "dtype": dt and "shape": [...]
 * (the replies of put and list, and the store's file descriptions). */
struct gpuq_mpw;
void resident_write_kind(struct gpuq_mpw *w, gpuq_dtype dt, uint32_t ndim, const uint64_t *shape);
/* Seven entries: name, owner, access, dtype, shape, bytes, device (list's
 * maps and the store's file descriptions). */
void resident_write_desc(struct gpuq_mpw *w, const char *name, uid_t owner, uint8_t access,
                         gpuq_dtype dt, uint32_t ndim, const uint64_t *shape, uint64_t bytes,
                         int device);
/* Users of a: requests holding it now. */
uint32_t resident_users(const resident *a);

#endif
