/* SPDX-License-Identifier: Apache-2.0 */
/* fake_backend.c - see fake_backend.h. */
#include "fake_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "errors.h"

#define FAKE_SESSION_MAGIC 0x66616b6573657373ull

typedef struct fake_alloc {
    uint8_t *p;
    size_t len;
    void *map; /* the mapping p lies in (with its guard page) */
    size_t maplen;
    struct fake_alloc *next;
} fake_alloc;

typedef struct fake_session {
    uint64_t magic;
    uint64_t jobs; /* submitted on it, not completed */
    struct fake_session *next;
} fake_session;

typedef struct fake_backend {
    backend b;
    fake_stats *st; /* borrowed */
    uv_async_t async;
    gpuq_job *queued, **queued_tail; /* submitted, not finished (submit order) */
    gpuq_job *done, **done_tail;     /* finished, waiting for the loop */
    size_t nqueued, ndone;
    fake_alloc *allocs;
    fake_session *sessions;
    bool autodone;
    bool fail[FAKE_FAIL_COUNT];
    uint64_t bytes;
} fake_backend;

static void fake_die(const char *what)
{
    fprintf(stderr, "fake_backend: contract broken: %s\n", what);
    abort();
}

uint64_t fake_hash(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* splitmix64's finaliser over (seed, word index) */
static uint64_t fake_word(uint64_t seed, uint64_t w)
{
    uint64_t x = seed ^ (w * 0xbf58476d1ce4e5b9ull);
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    return x;
}

void fake_fill_output(uint64_t id, uint64_t in_hash, uint8_t *out, uint64_t n)
{
    uint64_t seed = in_hash ^ (id * 0x9e3779b97f4a7c15ull);
    uint64_t w = 0;
    for (; 8 * w + 8 <= n; w++) {
        uint64_t x = fake_word(seed, w);
        memcpy(out + 8 * w, &x, 8);
    }
    if (8 * w < n) {
        uint64_t x = fake_word(seed, w);
        memcpy(out + 8 * w, &x, (size_t)(n - 8 * w));
    }
}

static fake_backend *fb_of(backend *b)
{
    return (fake_backend *)b;
}

static bool fake_in_alloc(fake_backend *fb, const void *p, uint64_t len)
{
    const uint8_t *q = p;
    if (len == 0)
        return true; /* no array: its pointer may be NULL */
    for (fake_alloc *a = fb->allocs; a; a = a->next)
        if (q >= a->p && q <= a->p + a->len && len <= (uint64_t)(a->p + a->len - q))
            return true;
    return false;
}

static bool fake_overlap(const void *a, uint64_t alen, const void *b, uint64_t blen)
{
    const uint8_t *x = a, *y = b;
    return alen && blen && x < y + blen && y < x + alen;
}

/* Job j's staging against every other unfinished job's (queued or done). */
static void fake_check_disjoint(fake_backend *fb, const gpuq_job *j)
{
    gpuq_job *lists[2] = {fb->queued, fb->done};
    for (int k = 0; k < 2; k++)
        for (gpuq_job *o = lists[k]; o; o = o->next) {
            if (o == j)
                fake_die("a job was submitted twice");
            if (fake_overlap(j->h_in[0], j->sz->payload, o->h_in[0], o->sz->payload) ||
                fake_overlap(j->h_in[0], j->sz->payload, o->h_out[0], o->sz->output) ||
                fake_overlap(j->h_out[0], j->sz->output, o->h_in[0], o->sz->payload) ||
                fake_overlap(j->h_out[0], j->sz->output, o->h_out[0], o->sz->output))
                fake_die("a job's staging overlaps an unfinished job's");
        }
    if (fake_overlap(j->h_in[0], j->sz->payload, j->h_out[0], j->sz->output))
        fake_die("a job's input overlaps its output");
}

static fake_session *fake_find_session(fake_backend *fb, void *bsess)
{
    for (fake_session *s = fb->sessions; s; s = s->next)
        if (s == bsess)
            return s;
    return NULL;
}

static void fake_on_async(uv_async_t *a)
{
    fake_backend *fb = a->data;
    /* Only the jobs done now: completing one may submit more (auto mode),
     * which wait for the next iteration, as a real backend's would. */
    size_t n = fb->ndone;
    while (n-- > 0 && fb->done) {
        gpuq_job *j = fb->done;
        fb->done = j->next;
        if (!fb->done)
            fb->done_tail = &fb->done;
        fb->ndone--;
        j->next = NULL;
        fake_session *s = fake_find_session(fb, j->bsess);
        if (!s)
            fake_die("a job's session was closed before the job completed");
        s->jobs--;
        if (j->status == 0) {
            uint64_t h = fake_hash(FAKE_HASH_INIT, j->h_in[0], j->sz->payload);
            fake_fill_output(j->req->id, h, j->h_out[0], j->sz->output);
            if (j->req->timing) {
                memset(&j->timing, 0, sizeof j->timing);
                j->timing.kernel_us = 1.0;
            }
        } else {
            snprintf(j->message, sizeof j->message, "fake backend: %s", gpuq_errname(j->status));
        }
        fb->st->completed++;
        fb->b.complete(j); /* j belongs to the server again (may be freed) */
    }
    if (fb->done && uv_async_send(&fb->async) < 0)
        fake_die("uv_async_send");
}

static void fake_move_done(fake_backend *fb, gpuq_job **pp, int status)
{
    gpuq_job *j = *pp;
    *pp = j->next;
    if (!*pp)
        fb->queued_tail = pp;
    fb->nqueued--;
    j->next = NULL;
    j->status = status;
    *fb->done_tail = j;
    fb->done_tail = &j->next;
    fb->ndone++;
    if (uv_async_send(&fb->async) < 0)
        fake_die("uv_async_send");
}

size_t fake_backend_queued(backend *b)
{
    return fb_of(b)->nqueued;
}

int fake_backend_finish(backend *b, size_t idx, int status)
{
    fake_backend *fb = fb_of(b);
    if (!fb->nqueued)
        return -1;
    idx %= fb->nqueued;
    gpuq_job **pp = &fb->queued;
    while (idx--)
        pp = &(*pp)->next;
    fake_move_done(fb, pp, status);
    return 0;
}

void fake_backend_finish_all(backend *b, int status)
{
    fake_backend *fb = fb_of(b);
    while (fb->queued)
        fake_move_done(fb, &fb->queued, status);
}

void fake_backend_set_auto(backend *b, bool on)
{
    fb_of(b)->autodone = on;
}

void fake_backend_fail_next(backend *b, int what)
{
    if (what >= 0 && what < FAKE_FAIL_COUNT)
        fb_of(b)->fail[what] = true;
}

void fake_backend_lose(backend *b, const char *reason)
{
    b->lost = 1;
    snprintf(b->lost_reason, sizeof b->lost_reason, "%s", reason);
}

static int fake_session_open(backend *b, int priority, int device, void **bsess,
                             backend_session_info *info)
{
    fake_backend *fb = fb_of(b);
    if (fb->fail[FAKE_FAIL_OPEN]) {
        fb->fail[FAKE_FAIL_OPEN] = false;
        return GPUQ_E_DEVICE;
    }
    if (device != -1 && device != 0)
        return GPUQ_E_BAD_ARGUMENT;
    if (priority < -5 || priority > 5)
        fake_die("session priority outside [-5, 5]");
    fake_session *s = calloc(1, sizeof *s);
    if (!s)
        return GPUQ_E_NO_MEMORY;
    s->magic = FAKE_SESSION_MAGIC;
    s->next = fb->sessions;
    fb->sessions = s;
    fb->st->sessions++;
    fb->st->opened++;
    *bsess = s;
    info->priority_granted = priority;
    info->device = 0;
    return 0;
}

static void fake_session_close(backend *b, void *bsess)
{
    fake_backend *fb = fb_of(b);
    fake_session **pp = &fb->sessions;
    while (*pp && *pp != bsess)
        pp = &(*pp)->next;
    if (!*pp)
        fake_die("session_close of a session that is not open");
    fake_session *s = *pp;
    if (s->magic != FAKE_SESSION_MAGIC)
        fake_die("session_close: bad session");
    if (s->jobs)
        fake_die("session_close while the session has jobs in flight");
    *pp = s->next;
    s->magic = 0;
    free(s);
    fb->st->sessions--;
}

static int fake_submit(backend *b, gpuq_job *job)
{
    fake_backend *fb = fb_of(b);
    if (!job->req || !job->sz || !job->owner || !gpuq_op_is_compute(job->req->op))
        fake_die("submit of a job that is not a checked compute request");
    fake_session *s = fake_find_session(fb, job->bsess);
    if (!s)
        fake_die("submit on a session that is not open");
    if (!fake_in_alloc(fb, job->h_in[0], job->sz->payload) ||
        !fake_in_alloc(fb, job->h_out[0], job->sz->output))
        fake_die("a job's input or output is not in staging memory of this backend");
    fake_check_disjoint(fb, job);
    if (fb->fail[FAKE_FAIL_SUBMIT]) {
        fb->fail[FAKE_FAIL_SUBMIT] = false;
        snprintf(job->message, sizeof job->message, "fake backend: submit refused");
        return GPUQ_E_NO_MEMORY;
    }
    job->next = NULL;
    job->status = 0;
    job->message[0] = '\0';
    gpuq_job **slot = fb->queued_tail;
    *fb->queued_tail = job;
    fb->queued_tail = &job->next;
    fb->nqueued++;
    s->jobs++;
    fb->st->submitted++;
    fb->bytes += job->sz->payload + job->sz->output;
    if (fb->autodone)
        fake_move_done(fb, slot, 0);
    return 0;
}

/* Mappings kept across inputs (one server per input would otherwise map
 * and unmap a 16 MiB chunk every time, which costs more than the rest of
 * a short input). A reused mapping holds the last input's bytes, as a
 * reused pinned buffer would: the server must not read staging it did not
 * write, and the result checks see it if it does. */
#define FAKE_MAP_CACHE 4
static struct {
    void *map;
    size_t maplen;
} fake_map_cache[FAKE_MAP_CACHE];

static void *fake_map(size_t maplen, size_t pg)
{
    for (int i = 0; i < FAKE_MAP_CACHE; i++) {
        if (fake_map_cache[i].map && fake_map_cache[i].maplen == maplen) {
            void *m = fake_map_cache[i].map;
            fake_map_cache[i].map = NULL;
            return m;
        }
    }
    uint8_t *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m + maplen - pg, pg, PROT_NONE) != 0)
        fake_die("mprotect of the guard page");
    return m;
}

static void fake_unmap(void *map, size_t maplen)
{
    for (int i = 0; i < FAKE_MAP_CACHE; i++) {
        if (!fake_map_cache[i].map) {
            fake_map_cache[i].map = map;
            fake_map_cache[i].maplen = maplen;
            return;
        }
    }
    munmap(map, maplen);
}

static void *fake_host_alloc(backend *b, size_t len)
{
    fake_backend *fb = fb_of(b);
    if (fb->fail[FAKE_FAIL_ALLOC]) {
        fb->fail[FAKE_FAIL_ALLOC] = false;
        return NULL;
    }
    fake_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    /* Its own mapping, as pinned memory would be, with a PROT_NONE page
     * after it: an overrun past the end faults. (malloc would do the same
     * under ASan, but poisoning 16 MiB chunks on every input costs most of
     * the fuzzer's time.) */
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = (len + pg - 1) / pg * pg;
    uint8_t *m = fake_map(body + pg, pg);
    if (!m) {
        free(a);
        return NULL;
    }
    a->p = m + ((body - len) & ~(size_t)63); /* its end within 64 bytes of the guard */
    a->map = m;
    a->maplen = body + pg;
    a->len = len;
    a->next = fb->allocs;
    fb->allocs = a;
    fb->st->host_bytes += len;
    fb->st->host_allocs++;
    return a->p;
}

static void fake_host_free(backend *b, void *p)
{
    fake_backend *fb = fb_of(b);
    fake_alloc **pp = &fb->allocs;
    while (*pp && (*pp)->p != p)
        pp = &(*pp)->next;
    if (!*pp)
        fake_die("host_free of memory host_alloc did not give");
    fake_alloc *a = *pp;
    *pp = a->next;
    fb->st->host_bytes -= a->len;
    fb->st->host_frees++;
    fake_unmap(a->map, a->maplen);
    free(a);
}

static int fake_ndevices(backend *b)
{
    return 1;
}

static void fake_device_info(backend *b, int i, backend_device *out)
{
    fake_backend *fb = fb_of(b);
    memset(out, 0, sizeof *out);
    out->index = 0;
    snprintf(out->name, sizeof out->name, "fake");
    out->total_memory = 1u << 30;
    out->sessions = (uint32_t)fb->st->sessions;
    out->in_flight = fb->nqueued + fb->ndone;
    out->bytes = fb->bytes;
}

static uint64_t fake_inflight(backend *b)
{
    return fb_of(b)->nqueued + fb_of(b)->ndone;
}

static void fake_on_close(uv_handle_t *h)
{
    fake_backend *fb = h->data;
    fb->st->closed = true;
    free(fb);
}

static void fake_destroy(backend *b)
{
    fake_backend *fb = fb_of(b);
    if (fb->nqueued || fb->ndone)
        fake_die("destroy with jobs in flight");
    if (fb->st->destroyed)
        fake_die("destroy called twice");
    fb->st->destroyed = true;
    /* Allocations still here are the server's leak; the caller sees them in
     * st->host_bytes. Free them so LeakSanitizer reports only one thing. */
    while (fb->allocs) {
        fake_alloc *a = fb->allocs;
        fb->allocs = a->next;
        fake_unmap(a->map, a->maplen);
        free(a);
    }
    while (fb->sessions) {
        fake_session *s = fb->sessions;
        fb->sessions = s->next;
        free(s);
    }
    uv_close((uv_handle_t *)&fb->async, fake_on_close);
}

static const backend_ops fake_ops = {
    .name = "fake",
    .session_open = fake_session_open,
    .session_close = fake_session_close,
    .submit = fake_submit,
    .host_alloc = fake_host_alloc,
    .host_free = fake_host_free,
    .ndevices = fake_ndevices,
    .device_info = fake_device_info,
    .inflight = fake_inflight,
    .destroy = fake_destroy,
};

backend *fake_backend_create(uv_loop_t *loop, backend_complete_fn done, fake_stats *st)
{
    fake_backend *fb = calloc(1, sizeof *fb);
    if (!fb)
        return NULL;
    if (uv_async_init(loop, &fb->async, fake_on_async) < 0) {
        free(fb);
        return NULL;
    }
    fb->async.data = fb;
    fb->b.ops = &fake_ops;
    fb->b.loop = loop;
    fb->b.complete = done;
    fb->st = st;
    fb->queued_tail = &fb->queued;
    fb->done_tail = &fb->done;
    return &fb->b;
}
