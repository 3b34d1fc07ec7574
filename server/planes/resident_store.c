/* SPDX-License-Identifier: Apache-2.0 */
/* resident_store.c - see resident_store.h. */
#include "resident_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "mpread.h"
#include "mpwrite.h"

#define STORE_MAGIC "GPUQRES1"
#define STORE_EXT ".gpuqa"
#define STORE_CHUNK ((size_t)16 << 20) /* bytes copied out of backend memory at a time */
#define STORE_META_MAX 4096u

/* ---- CRC-32C ---- */

static uint32_t crc_table[8][256];
static uv_once_t crc_once = UV_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
    }
    c = (uint32_t)c64;
    for (; n; n--, p++)
        c = __builtin_ia32_crc32qi(c, *p);
    return c;
}
#endif

uint32_t resident_crc32c(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return ~crc_hw(c, p, n);
#endif
    uv_once(&crc_once, crc_init);
    for (; n >= 8; n -= 8, p += 8) { /* slicing by 8 */
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    for (; n; n--, p++)
        c = (c >> 8) ^ crc_table[0][(c ^ *p) & 0xff];
    return ~c;
}

/* ---- file names ---- */

/* "<dir>/<base64url(name)><ext>" into path. */
static void file_path(const resident_store *st, const char *name, const char *ext, char *path,
                      size_t cap)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char enc[GPUQ_RES_NAME_MAX * 4 / 3 + 8];
    const uint8_t *s = (const uint8_t *)name;
    size_t n = strlen(name), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        enc[o++] = b64[v >> 18];
        enc[o++] = b64[(v >> 12) & 63];
        if (i + 1 < n)
            enc[o++] = b64[(v >> 6) & 63];
        if (i + 2 < n)
            enc[o++] = b64[v & 63];
    }
    enc[o] = '\0';
    snprintf(path, cap, "%s/%s%s", st->dir, enc, ext);
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* ---- writing (the store's thread) ---- */

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The header of job's file: magic, meta length, meta. Returns its length
 * in buf, or 0 when it does not fit. */
static size_t header_of(const resident_store_job *j, uint8_t *buf, size_t cap)
{
    gpuq_mpw *w = gpuq_mpw_new();
    if (!w)
        return 0;
    gpuq_mpw_map(w, 7);
    resident_write_desc(w, j->name, j->owner, j->access, j->dtype, j->ndim, j->shape, j->bytes,
                        j->device);
    uint8_t *meta = NULL;
    size_t mlen = 0;
    int rc = gpuq_mpw_take(w, &meta, &mlen);
    gpuq_mpw_free(w);
    if (rc != 0 || mlen > STORE_META_MAX || 12 + mlen > cap) {
        free(meta);
        return 0;
    }
    memcpy(buf, STORE_MAGIC, 8);
    uint32_t ml = (uint32_t)mlen;
    for (int k = 0; k < 4; k++)
        buf[8 + k] = (uint8_t)(ml >> (8 * k));
    memcpy(buf + 12, meta, mlen);
    free(meta);
    return 12 + mlen;
}

static void store_write_one(resident_store *st, resident_store_job *j)
{
    char tmp[4400], path[4400];
    file_path(st, j->name, ".tmp", tmp, sizeof tmp);
    file_path(st, j->name, STORE_EXT, path, sizeof path);
    uint8_t hdr[STORE_META_MAX + 16];
    size_t hlen = header_of(j, hdr, sizeof hdr);
    void *buf = malloc(STORE_CHUNK);
    int fd = -1, rc = 0;
    const char *step = "";
    if (!hlen || !buf) {
        rc = -ENOMEM;
        step = "out of memory";
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        step = "open";
        goto out;
    }
    uint32_t crc = resident_crc32c(0, hdr, hlen);
    if ((rc = write_all(fd, hdr, hlen)) < 0) {
        step = "write";
        goto out;
    }
    for (uint64_t at = 0; at < j->bytes;) {
        size_t n = j->bytes - at < STORE_CHUNK ? (size_t)(j->bytes - at) : STORE_CHUNK;
        char why[120] = "";
        if (st->b->ops->res_copy(st->b, j->device, buf, (const char *)j->mem + at, n, why,
                                 sizeof why) != 0) {
            snprintf(j->why, sizeof j->why, "cannot read resident array \"%.*s\" back: %s",
                     RESIDENT_SHOW(j->name), why);
            j->rc = GPUQ_E_STORAGE;
            close(fd);
            unlink(tmp);
            free(buf);
            return;
        }
        crc = resident_crc32c(crc, buf, n);
        if ((rc = write_all(fd, buf, n)) < 0) {
            step = "write";
            goto out;
        }
        at += n;
    }
    uint8_t tail[4];
    for (int k = 0; k < 4; k++)
        tail[k] = (uint8_t)(crc >> (8 * k));
    if ((rc = write_all(fd, tail, 4)) < 0) {
        step = "write";
        goto out;
    }
    if (fsync(fd) < 0) {
        rc = -errno;
        step = "fsync";
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        rc = -errno;
        step = "close";
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0) {
        rc = -errno;
        step = "rename";
        goto out;
    }
    if ((rc = fsync_dir(st->dir)) < 0)
        step = "fsync of the state directory";
out:
    free(buf);
    if (fd >= 0)
        close(fd);
    if (rc < 0) {
        if (strcmp(step, "fsync of the state directory") != 0)
            unlink(tmp);
        snprintf(j->why, sizeof j->why, "cannot persist resident array \"%.*s\": %s: %s",
                 RESIDENT_SHOW(j->name), step, strerror(-rc));
        j->rc = GPUQ_E_STORAGE;
        return;
    }
    j->rc = 0;
}

static void store_thread(void *arg)
{
    resident_store *st = arg;
    uv_mutex_lock(&st->mu);
    for (;;) {
        while (!st->todo && !st->stopping)
            uv_cond_wait(&st->cv, &st->mu);
        if (!st->todo)
            break;
        resident_store_job *j = st->todo;
        st->todo = j->next;
        if (!st->todo)
            st->todo_tail = NULL;
        uv_mutex_unlock(&st->mu);
        store_write_one(st, j);
        uv_mutex_lock(&st->mu);
        j->next = st->done_head;
        st->done_head = j;
        uv_async_send(&st->async);
    }
    uv_mutex_unlock(&st->mu);
}

static void store_on_done(uv_async_t *h)
{
    resident_store *st = h->data;
    uv_mutex_lock(&st->mu);
    resident_store_job *j = st->done_head;
    st->done_head = NULL;
    uv_mutex_unlock(&st->mu);
    /* newest first on the list: reverse into the order they finished */
    resident_store_job *rev = NULL;
    while (j) {
        resident_store_job *next = j->next;
        j->next = rev;
        rev = j;
        j = next;
    }
    for (j = rev; j;) {
        resident_store_job *next = j->next;
        if (j->rc) {
            st->write_errors++;
            log_warn("%s", j->why);
        } else {
            st->writes++;
        }
        j->done(j->arg, j->rc, j->why);
        j = next;
    }
}

int resident_store_open(resident_store *st, uv_loop_t *loop, backend *b, const char *dir)
{
    memset(st, 0, sizeof *st);
    st->b = b;
    st->loop = loop;
    if (!dir || !*dir) {
        log_info("resident arrays: no state directory; persist is off");
        return 0;
    }
    if (strlen(dir) >= sizeof st->dir - 300) {
        log_warn("resident arrays: state directory %s: path too long; persist is off", dir);
        return 0;
    }
    /* never made here: systemd's StateDirectory= (or whoever runs gpuqd)
     * does, so that a gpuqd started by hand or by a test leaves nothing */
    struct stat sb;
    errno = 0;
    if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        log_info("resident arrays: no state directory %s (%s); persist is off", dir,
                 errno ? strerror(errno) : "not a directory");
        return 0;
    }
    if (access(dir, W_OK | X_OK) < 0) {
        log_warn("resident arrays: state directory %s: %s; persist is off", dir, strerror(errno));
        return 0;
    }
    if (!b->ops->res_copy || !b->ops->res_alloc) {
        log_warn("resident arrays: the %s backend cannot persist them; persist is off",
                 b->ops->name);
        return 0;
    }
    snprintf(st->dir, sizeof st->dir, "%s", dir);
    int rc;
    if ((rc = uv_mutex_init(&st->mu)) < 0)
        goto err;
    if ((rc = uv_cond_init(&st->cv)) < 0)
        goto err_after_mutex;
    if ((rc = uv_async_init(loop, &st->async, store_on_done)) < 0)
        goto err_after_cond;
    st->async.data = st;
    if ((rc = uv_thread_create(&st->thread, store_thread, st)) < 0)
        goto err_after_async;
    st->started = true;
    st->on = true;
    log_info("resident arrays: persisted under %s", dir);
    return 0;
err_after_async:
    uv_close((uv_handle_t *)&st->async, NULL);
err_after_cond:
    uv_cond_destroy(&st->cv);
err_after_mutex:
    uv_mutex_destroy(&st->mu);
err:
    log_error("resident arrays: cannot start the store's thread: %s", uv_strerror(rc));
    st->dir[0] = '\0';
    return GPUQ_E_NO_MEMORY;
}

int resident_store_write(resident_store *st, resident_store_job *job)
{
    if (!st->on)
        return GPUQ_E_STORAGE;
    job->next = NULL;
    job->rc = 0;
    job->why[0] = '\0';
    uv_mutex_lock(&st->mu);
    if (st->todo_tail)
        st->todo_tail->next = job;
    else
        st->todo = job;
    st->todo_tail = job;
    uv_cond_signal(&st->cv);
    uv_mutex_unlock(&st->mu);
    return 0;
}

int resident_store_unlink(resident_store *st, const char *name, char *why, size_t cap)
{
    if (!st->on)
        return 0;
    char path[4400];
    file_path(st, name, STORE_EXT, path, sizeof path);
    if (unlink(path) < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, cap, "cannot remove the file of resident array \"%.*s\": %s",
                 RESIDENT_SHOW(name), strerror(errno));
        return GPUQ_E_STORAGE;
    }
    int rc = fsync_dir(st->dir);
    if (rc < 0)
        log_warn("resident arrays: fsync of %s: %s", st->dir, strerror(-rc));
    return 0;
}

void resident_store_close(resident_store *st)
{
    if (!st->started)
        return;
    uv_mutex_lock(&st->mu);
    st->stopping = true;
    uv_cond_signal(&st->cv);
    uv_mutex_unlock(&st->mu);
    uv_thread_join(&st->thread);
    st->started = false;
    st->on = false;
    store_on_done(&st->async); /* the last ones' done callbacks */
    uv_close((uv_handle_t *)&st->async, NULL);
    uv_cond_destroy(&st->cv);
    uv_mutex_destroy(&st->mu);
}

/* ---- loading (the loop, before sessions) ---- */

/* The description in meta[mlen] into j; 0 or -1 with why. */
static int parse_meta(const uint8_t *meta, size_t mlen, resident_store_job *j, char *why,
                      size_t cap)
{
    gpuq_mpr r;
    uint32_t n;
    gpuq_mpr_init(&r, meta, mlen);
    if (gpuq_mpr_map(&r, &n) != 0) {
        snprintf(why, cap, "description is not a map");
        return -1;
    }
    unsigned seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *k, *s;
        uint32_t kl, sl, cnt;
        uint64_t u;
        int64_t v;
        if (gpuq_mpr_str(&r, &k, &kl) != 0)
            goto bad;
        if (kl == 4 && !memcmp(k, "name", 4)) {
            if (gpuq_mpr_str(&r, &s, &sl) != 0 || gpuq_name_check(s, sl, why, cap) != 0)
                goto bad;
            memcpy(j->name, s, sl);
            j->name[sl] = '\0';
            seen |= 1;
        } else if (kl == 5 && !memcmp(k, "owner", 5)) {
            if (gpuq_mpr_uint(&r, &u) != 0 || u > UINT32_MAX)
                goto bad;
            j->owner = (uid_t)u;
            seen |= 2;
        } else if (kl == 6 && !memcmp(k, "access", 6)) {
            if (gpuq_mpr_str(&r, &s, &sl) != 0)
                goto bad;
            j->access = sl == 3 && !memcmp(s, "all", 3) ? GPUQ_ACCESS_ALL : GPUQ_ACCESS_PRIVATE;
            seen |= 4;
        } else if (kl == 5 && !memcmp(k, "dtype", 5)) {
            int dt;
            if (gpuq_mpr_str(&r, &s, &sl) != 0 || (dt = gpuq_dtype_parse(s, sl)) <= 0)
                goto bad;
            j->dtype = (gpuq_dtype)dt;
            seen |= 8;
        } else if (kl == 5 && !memcmp(k, "shape", 5)) {
            if (gpuq_mpr_array(&r, &cnt) != 0 || cnt < 1 || cnt > 2)
                goto bad;
            j->ndim = cnt;
            for (uint32_t d = 0; d < cnt; d++)
                if (gpuq_mpr_uint(&r, &j->shape[d]) != 0 || j->shape[d] == 0)
                    goto bad;
            seen |= 16;
        } else if (kl == 5 && !memcmp(k, "bytes", 5)) {
            if (gpuq_mpr_uint(&r, &j->bytes) != 0)
                goto bad;
            seen |= 32;
        } else if (kl == 6 && !memcmp(k, "device", 6)) {
            if (gpuq_mpr_int(&r, &v) != 0 || v < -1 || v > 1024)
                goto bad;
            j->device = (int)v;
            seen |= 64;
        } else if (gpuq_mpr_skip(&r) != 0) {
            goto bad;
        }
    }
    if (seen != 127) {
        snprintf(why, cap, "description lacks a key");
        return -1;
    }
    uint64_t want = gpuq_dtype_size(j->dtype);
    for (uint32_t d = 0; d < j->ndim; d++)
        if (__builtin_mul_overflow(want, j->shape[d], &want))
            goto bad;
    if (want != j->bytes) {
        snprintf(why, cap, "its shape and dtype make %llu bytes, not %llu",
                 (unsigned long long)want, (unsigned long long)j->bytes);
        return -1;
    }
    return 0;
bad:
    if (!why[0])
        snprintf(why, cap, "description is malformed");
    return -1;
}

/* Load one file into bk; 0, or -1 with why (the file is damaged). */
static int load_one(resident_store *st, resident_books *bk, const char *path, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "open: %s", strerror(errno));
        return -1;
    }
    struct stat sb;
    uint8_t hdr[12];
    uint8_t *meta = NULL, *buf = NULL;
    void *mem = NULL;
    resident_store_job j;
    memset(&j, 0, sizeof j);
    int rc = -1, device = -1;
    if (fstat(fd, &sb) < 0 || pread(fd, hdr, 12, 0) != 12 || memcmp(hdr, STORE_MAGIC, 8) != 0) {
        snprintf(why, cap, "not a resident array file (magic)");
        goto out;
    }
    uint32_t mlen = (uint32_t)hdr[8] | (uint32_t)hdr[9] << 8 | (uint32_t)hdr[10] << 16 |
                    (uint32_t)hdr[11] << 24;
    if (mlen == 0 || mlen > STORE_META_MAX || (uint64_t)sb.st_size < 12 + (uint64_t)mlen + 4) {
        snprintf(why, cap, "truncated");
        goto out;
    }
    meta = malloc(mlen);
    if (!meta || pread(fd, meta, mlen, 12) != (ssize_t)mlen) {
        snprintf(why, cap, "cannot read its description");
        goto out;
    }
    if (parse_meta(meta, mlen, &j, why, cap) != 0)
        goto out;
    if ((uint64_t)sb.st_size != 12 + (uint64_t)mlen + j.bytes + 4) {
        snprintf(why, cap, "%lld bytes long; its description makes %llu", (long long)sb.st_size,
                 (unsigned long long)(12 + mlen + j.bytes + 4));
        goto out;
    }
    int ndev = st->b->ops->ndevices(st->b);
    backend_device d0;
    st->b->ops->device_info(st->b, 0, &d0);
    device = d0.index < 0 ? -1 : (j.device >= 0 && j.device < ndev ? j.device : 0);
    char awhy[120] = "";
    if (st->b->ops->res_alloc(st->b, device, j.bytes, &mem, awhy, sizeof awhy) != 0) {
        snprintf(why, cap, "cannot allocate %llu bytes for it: %s", (unsigned long long)j.bytes,
                 awhy);
        mem = NULL;
        rc = -2; /* not damaged: set aside only when damaged */
        goto out;
    }
    buf = malloc(STORE_CHUNK);
    if (!buf) {
        snprintf(why, cap, "out of memory");
        rc = -2;
        goto out;
    }
    uint32_t crc = resident_crc32c(resident_crc32c(0, hdr, 12), meta, mlen);
    off_t at = 12 + (off_t)mlen;
    for (uint64_t done = 0; done < j.bytes;) {
        size_t n = j.bytes - done < STORE_CHUNK ? (size_t)(j.bytes - done) : STORE_CHUNK;
        if (pread(fd, buf, n, at) != (ssize_t)n) {
            snprintf(why, cap, "short read");
            goto out;
        }
        crc = resident_crc32c(crc, buf, n);
        if (st->b->ops->res_copy(st->b, device, (char *)mem + done, buf, n, awhy, sizeof awhy)) {
            snprintf(why, cap, "cannot copy it to the device: %s", awhy);
            rc = -2;
            goto out;
        }
        done += n;
        at += (off_t)n;
    }
    uint8_t tail[4];
    if (pread(fd, tail, 4, at) != 4 || ((uint32_t)tail[0] | (uint32_t)tail[1] << 8 |
                                        (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24) != crc) {
        snprintf(why, cap, "checksum mismatch");
        goto out;
    }
    char msg[200];
    bool replaced = false;
    resident_spec sp = {.name = j.name,
                        .uid = j.owner,
                        .admin = true,
                        .access = j.access,
                        .dtype = j.dtype,
                        .ndim = j.ndim,
                        .shape = j.shape,
                        .bytes = j.bytes,
                        .device = device,
                        .mem = mem};
    if (resident_reserve(bk, j.owner, j.name, j.bytes, UINT64_MAX, UINT64_MAX, msg, sizeof msg) !=
        0) {
        snprintf(why, cap, "%s", msg);
        rc = -2;
        goto out;
    }
    if (resident_commit(bk, &sp, &replaced, msg, sizeof msg) != 0) {
        resident_unreserve(bk, j.owner, j.bytes);
        snprintf(why, cap, "%s", msg);
        rc = -2;
        goto out;
    }
    resident *a = resident_find(bk, j.name);
    if (a)
        a->persisted = true;
    mem = NULL; /* the table's */
    rc = 0;
    log_info("resident arrays: loaded \"%.*s\" (%llu bytes, uid %u)", RESIDENT_SHOW(j.name),
             (unsigned long long)j.bytes, (unsigned)j.owner);
out:
    if (mem && st->b->ops->res_free)
        st->b->ops->res_free(st->b, device, mem);
    free(buf);
    free(meta);
    close(fd);
    return rc;
}

int resident_store_load(resident_store *st, resident_books *bk)
{
    if (!st->on)
        return 0;
    DIR *d = opendir(st->dir);
    if (!d) {
        log_warn("resident arrays: cannot read %s: %s", st->dir, strerror(errno));
        return 0;
    }
    int n = 0;
    struct dirent *e;
    char path[4400], why[200];
    size_t el = strlen(STORE_EXT);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        snprintf(path, sizeof path, "%s/%s", st->dir, e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".tmp")) { /* a write a kill cut short */
            if (unlink(path) == 0)
                log_info("resident arrays: removed %s (a write that did not finish)", path);
            continue;
        }
        if (len <= el || strcmp(e->d_name + len - el, STORE_EXT) != 0)
            continue;
        why[0] = '\0';
        int rc = load_one(st, bk, path, why, sizeof why);
        if (rc == 0) {
            n++;
            continue;
        }
        if (rc == -2) { /* a good file that does not fit now: left as it is */
            log_error("resident arrays: %s not loaded: %s", path, why);
            continue;
        }
        char aside[4420];
        snprintf(aside, sizeof aside, "%s.damaged", path);
        st->damaged++;
        if (rename(path, aside) == 0)
            log_error("resident arrays: %s is damaged (%s): set aside as %s", path, why, aside);
        else
            log_error("resident arrays: %s is damaged (%s); cannot set it aside: %s", path, why,
                      strerror(errno));
    }
    closedir(d);
    st->loaded = (uint64_t)n;
    if (n)
        log_info("resident arrays: %d loaded from %s", n, st->dir);
    return n;
}
