/* SPDX-License-Identifier: Apache-2.0 */
/* arena.c - see arena.h. */
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "errors.h"
#include "log.h"

#define ARENA_PAGE 4096u

static int fail(char *msg, size_t cap, int code, const char *fmt, const char *a, int e)
{
    snprintf(msg, cap, fmt, a, strerror(e));
    return code;
}

/* A new memfd of size bytes, sealed against shrink, grow and further seals. */
static int arena_memfd(uint64_t size, int *fd_out, char *msg, size_t cap)
{
    int fd = memfd_create("gpuq-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return fail(msg, cap, GPUQ_E_NO_MEMORY, "%s: %s", "memfd_create", errno);
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        return fail(msg, cap, GPUQ_E_NO_MEMORY, "%s: %s", "ftruncate", e);
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int e = errno;
        close(fd);
        return fail(msg, cap, GPUQ_E_NO_MEMORY, "%s: %s", "F_ADD_SEALS", e);
    }
    *fd_out = fd;
    return 0;
}

/* A name for a file system that is not tmpfs, for the refusal's message. */
static const char *fs_name(unsigned long magic, char *buf, size_t cap)
{
    switch (magic) {
    case HUGETLBFS_MAGIC:
        return "on hugetlbfs (MFD_HUGETLB)";
    case PIPEFS_MAGIC:
        return "a pipe";
    case SOCKFS_MAGIC:
        return "a socket";
    default:
        snprintf(buf, cap, "on file system type 0x%lx", magic);
        return buf;
    }
}

/* The client's fd: a memfd on tmpfs, sealed against shrinking, and its size.
 * Each check keeps the daemon from faulting on the mapping later: a file
 * that can shrink turns our mapping into SIGBUS after a truncate, and a
 * hugetlbfs memfd (MFD_HUGETLB) does too once the client punches a hole
 * (its huge page reservation is gone) and the pool is empty. A tmpfs page
 * punched out is simply allocated again on the next fault. */
static int arena_import_check(int fd, uint64_t *size, char *msg, size_t cap)
{
    struct statfs sfs;
    if (fstatfs(fd, &sfs) != 0)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "arena_import: %s: %s", "fstatfs", errno);
    if ((unsigned long)sfs.f_type != TMPFS_MAGIC) {
        char buf[48];
        snprintf(msg, cap,
                 "arena_import: the fd is not a tmpfs memfd (it is %s); only memfds on "
                 "tmpfs are accepted",
                 fs_name((unsigned long)sfs.f_type, buf, sizeof buf));
        return GPUQ_E_BAD_ARGUMENT;
    }
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT,
                    "arena_import: the fd is not a sealable memfd (%s: %s)", "F_GET_SEALS", errno);
    if (!(seals & F_SEAL_SHRINK)) {
        snprintf(msg, cap,
                 "arena_import: the memfd is not sealed against shrinking "
                 "(F_SEAL_SHRINK)");
        return GPUQ_E_BAD_ARGUMENT;
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
        return fail(msg, cap, GPUQ_E_BAD_ARGUMENT, "arena_import: %s: %s", "fstat", errno);
    if (st.st_size <= 0) {
        snprintf(msg, cap, "arena_import: the memfd is empty");
        return GPUQ_E_BAD_ARGUMENT;
    }
    *size = (uint64_t)st.st_size;
    return 0;
}

static void arena_remove_at(arena_table *t, uint32_t k);

/* The pin of a pending arena finished (loop thread). The job's reference
 * keeps a alive through the caller's callback. */
static void arena_pin_done(pin_job *j)
{
    arena *a = (arena *)j;
    int rc = j->status;
    char why[sizeof j->why];
    snprintf(why, sizeof why, "%s", j->why[0] ? j->why : gpuq_strerror(rc));
    if (rc == 0) {
        a->registered = true;
        a->ready = true;
    } else if (a->table) {
        for (uint32_t k = 0; k < a->table->n; k++)
            if (a->table->a[k] == a) {
                arena_remove_at(a->table, k);
                break;
            }
    }
    arena_pinned_fn pinned = a->pinned;
    a->pinned = NULL;
    if (pinned)
        pinned(a->pinned_arg, a, rc, why);
    arena_unref(a); /* the job's */
}

int arena_create(arena_table *t, arena_books *bk, backend *b, pinner *pin, int fd, uint64_t size,
                 uint64_t session_cap, uint64_t total_cap, arena **out, int *fd_out, char *msg,
                 size_t cap, arena_pinned_fn pinned, void *arg)
{
    int rc, own_fd = -1;
    *out = NULL;
    if (fd_out)
        *fd_out = -1;
    if (fd >= 0) {
        if ((rc = arena_import_check(fd, &size, msg, cap)) != 0)
            return rc;
    } else {
        if (size > UINT64_MAX - ARENA_PAGE) {
            snprintf(msg, cap, "arena of %llu bytes is too large", (unsigned long long)size);
            return GPUQ_E_TOO_LARGE;
        }
        size = (size + ARENA_PAGE - 1) / ARENA_PAGE * ARENA_PAGE;
    }
    if (session_cap == 0) {
        snprintf(msg, cap, "arenas are off (session_arena 0)");
        return GPUQ_E_TOO_LARGE;
    }
    if (t->n >= GPUQ_MAX_ARENAS) {
        snprintf(msg, cap, "the session holds %u arenas (the limit)", GPUQ_MAX_ARENAS);
        return GPUQ_E_TOO_LARGE;
    }
    if (size > session_cap || t->bytes > session_cap - size) {
        snprintf(msg, cap, "arena of %llu bytes: the session holds %llu of session_arena %llu",
                 (unsigned long long)size, (unsigned long long)t->bytes,
                 (unsigned long long)session_cap);
        return GPUQ_E_TOO_LARGE;
    }
    if (size > total_cap || bk->bytes > total_cap - size) {
        snprintf(msg, cap, "arena of %llu bytes: %llu of total_arena %llu in use; try later",
                 (unsigned long long)size, (unsigned long long)bk->bytes,
                 (unsigned long long)total_cap);
        return size > total_cap ? GPUQ_E_TOO_LARGE : GPUQ_E_BUSY;
    }
    if (size > SIZE_MAX) {
        snprintf(msg, cap, "arena too large for this machine");
        return GPUQ_E_TOO_LARGE;
    }
    if (fd < 0) {
        if ((rc = arena_memfd(size, &own_fd, msg, cap)) != 0)
            return rc;
        fd = own_fd;
    }
    arena *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(msg, cap, "out of memory");
        rc = GPUQ_E_NO_MEMORY;
        goto err_fd;
    }
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        rc = fail(msg, cap, fd == own_fd ? GPUQ_E_NO_MEMORY : GPUQ_E_BAD_ARGUMENT, "%s: %s", "mmap",
                  errno);
        goto err_alloc;
    }
    a->base = p;
    a->size = size;
    a->b = b;
    a->pin = pin;
    bool pending = b && b->ops->host_register && pinner_on(pin);
    if (b && b->ops->host_register && !pending) {
        char why[128] = "";
        if (b->ops->host_register(b, p, (size_t)size, why, sizeof why) != 0) {
            snprintf(msg, cap, "cannot pin the arena for DMA: %s", why);
            rc = GPUQ_E_NO_MEMORY;
            goto err_map;
        }
        a->registered = true;
    }
    a->id = ++bk->next_id;
    a->refs = 1; /* the table's */
    a->books = bk;
    a->ready = !pending;
    a->table = t;
    bk->bytes += size;
    bk->count++;
    t->a[t->n++] = a;
    t->bytes += size;
    if (fd_out)
        *fd_out = own_fd;
    else if (own_fd >= 0)
        close(own_fd);
    *out = a;
    if (!pending)
        return 0;
    a->refs++; /* the pin job's */
    a->pinned = pinned;
    a->pinned_arg = arg;
    a->job.kind = PIN_REGISTER;
    a->job.ptr = a->base;
    a->job.len = (size_t)a->size;
    a->job.done = arena_pin_done;
    pinner_submit(pin, &a->job);
    return ARENA_PENDING;

err_map:
    munmap(p, (size_t)size);
err_alloc:
    free(a);
err_fd:
    if (own_fd >= 0)
        close(own_fd);
    return rc;
}

arena *arena_find(arena_table *t, uint64_t id)
{
    for (uint32_t k = 0; k < t->n; k++)
        if (t->a[k]->id == id && t->a[k]->ready)
            return t->a[k];
    return NULL;
}

void arena_ref(arena *a)
{
    a->refs++;
}

static void arena_release_done(pin_job *j)
{
    free((arena *)j);
}

void arena_unref(arena *a)
{
    if (--a->refs > 0)
        return;
    a->books->bytes -= a->size;
    a->books->count--;
    if (pinner_on(a->pin)) { /* unpinned and unmapped on the pinning thread */
        memset(&a->job, 0, sizeof a->job);
        a->job.kind = PIN_RELEASE;
        a->job.ptr = a->base;
        a->job.len = (size_t)a->size;
        a->job.registered = a->registered && a->b->ops->host_unregister;
        a->job.done = arena_release_done;
        pinner_submit(a->pin, &a->job);
        return;
    }
    if (a->registered && a->b->ops->host_unregister)
        a->b->ops->host_unregister(a->b, a->base);
    if (munmap(a->base, (size_t)a->size) != 0)
        log_error("arena %llu: munmap: %s", (unsigned long long)a->id, strerror(errno));
    free(a);
}

static void arena_remove_at(arena_table *t, uint32_t k)
{
    arena *a = t->a[k];
    a->table = NULL;
    t->bytes -= a->size;
    t->a[k] = t->a[--t->n];
    t->a[t->n] = NULL;
    arena_unref(a);
}

int arena_close(arena_table *t, uint64_t id)
{
    for (uint32_t k = 0; k < t->n; k++)
        if (t->a[k]->id == id && t->a[k]->ready) {
            arena_remove_at(t, k);
            return 0;
        }
    return GPUQ_E_BAD_ARGUMENT;
}

void arena_drop(arena_table *t, arena *a)
{
    a->pinned = NULL;
    for (uint32_t k = 0; k < t->n; k++)
        if (t->a[k] == a) {
            arena_remove_at(t, k);
            return;
        }
}

void arena_close_all(arena_table *t)
{
    while (t->n)
        arena_remove_at(t, t->n - 1);
}

void arena_refs_drop(arena *held[4])
{
    for (int k = 0; k < 4; k++)
        if (held[k]) {
            arena_unref(held[k]);
            held[k] = NULL;
        }
}

/* One ref: its arena open in t and the bytes inside it. */
static int resolve_one(arena_table *t, const char *key, unsigned k, const gpuq_ref *ref, arena **a,
                       char *msg, size_t cap)
{
    *a = arena_find(t, ref->arena);
    if (!*a) {
        snprintf(msg, cap, "%s[%u]: no arena %llu in this session", key, k,
                 (unsigned long long)ref->arena);
        return GPUQ_E_BAD_ARGUMENT;
    }
    if (ref->offset > (*a)->size || ref->length > (*a)->size - ref->offset) {
        snprintf(msg, cap, "%s[%u] (offset %llu, length %llu) is outside arena %llu of %llu bytes",
                 key, k, (unsigned long long)ref->offset, (unsigned long long)ref->length,
                 (unsigned long long)ref->arena, (unsigned long long)(*a)->size);
        return GPUQ_E_BAD_ARGUMENT;
    }
    return 0;
}

int arena_resolve(arena_table *t, const gpuq_request *req, arena *held[4], const void *in[2],
                  void *out[2], char *msg, size_t cap)
{
    arena *a[4] = {NULL, NULL, NULL, NULL};
    int rc;
    for (uint32_t k = 0; k < req->nin_ref && k < 2; k++) {
        if (req->in_kind[k] != GPUQ_REF_ARENA) /* a resident array's name, or the payload */
            continue;
        if ((rc = resolve_one(t, "in", k, &req->in_ref[k], &a[k], msg, cap)) != 0)
            return rc;
        in[k] = a[k]->base + req->in_ref[k].offset;
    }
    for (uint32_t k = 0; k < req->nout_ref && k < 2; k++) {
        if (req->out_kind[k] != GPUQ_REF_ARENA)
            continue;
        if ((rc = resolve_one(t, "out", k, &req->out_ref[k], &a[2 + k], msg, cap)) != 0)
            return rc;
        out[k] = a[2 + k]->base + req->out_ref[k].offset;
    }
    for (int k = 0; k < 4; k++) {
        held[k] = a[k];
        if (a[k])
            arena_ref(a[k]);
    }
    return 0;
}
