/* SPDX-License-Identifier: Apache-2.0 */
/* npz.c - see npz.h. The ZIP format is PKWARE's APPNOTE.TXT (6.3): local
 * header 0x04034b50, central directory entry 0x02014b50, end of central
 * directory 0x06054b50, ZIP64 end record 0x06064b50 and its locator
 * 0x07064b50; all integers little-endian. */
#include "npz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "errors.h"

int npz_read_exact(int fd, void *dst, uint64_t len, uint64_t off)
{
    uint8_t *p = dst;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = off == NPZ_STREAM ? read(fd, p, chunk) : pread(fd, p, chunk, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = 0;
            return -1;
        }
        p += n;
        if (off != NPZ_STREAM)
            off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END 0x06054b50u
#define SIG_END64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define END_SIZE 22u   /* the end record without its comment */
#define LOC64_SIZE 20u /* the ZIP64 locator */
#define END64_SIZE 56u /* the ZIP64 end record's fixed part */
#define CENTRAL_SIZE 46u
#define LOCAL_SIZE 30u
#define U16_MAX 0xffffu
#define U32_MAX 0xffffffffu
/* Bytes read or inflated at a time. */
#define NPZ_CHUNK (1u << 20)

static int fail(char *err, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t cap, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return code;
}

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < n; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_fail(char *err, size_t cap, const char *label)
{
    if (errno)
        return fail(err, cap, GPUQ_E_IO, "%s: %s", label, strerror(errno));
    return fail(err, cap, GPUQ_E_IO, "%s: short read (the file shrank)", label);
}

/* A member's name as messages show it: at most 64 bytes, every byte
 * outside printable ASCII as '?'. */
static void shown_name(const uint8_t *s, size_t len, char *out, size_t cap)
{
    size_t n = len < 64 ? len : 64, k = 0;
    for (; k < n && k + 1 < cap; k++)
        out[k] = s[k] >= 0x20 && s[k] < 0x7f ? (char)s[k] : '?';
    out[k] = '\0';
}

/* ---- the central directory ---- */

typedef struct npz_dir {
    uint64_t off, size, count;
    uint64_t end; /* where the records after the directory start */
} npz_dir;

/* The ZIP64 end record that the locator before end_off names. */
static int find_dir64(int fd, uint64_t end_off, const char *label, npz_dir *d, char *err,
                      size_t cap)
{
    uint8_t loc[LOC64_SIZE], rec[END64_SIZE];
    if (end_off < LOC64_SIZE || npz_read_exact(fd, loc, sizeof loc, end_off - LOC64_SIZE) != 0 ||
        le(loc, 4) != SIG_LOC64)
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                    "%s: damaged ZIP archive (a ZIP64 field without its locator)", label);
    uint64_t rec_off = le(loc + 8, 8), loc_off = end_off - LOC64_SIZE;
    if (le(loc + 4, 4) != 0 || le(loc + 16, 4) > 1)
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: a ZIP archive of several disks", label);
    if (rec_off > loc_off || loc_off - rec_off < END64_SIZE ||
        npz_read_exact(fd, rec, sizeof rec, rec_off) != 0 || le(rec, 4) != SIG_END64)
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                    "%s: damaged ZIP archive (ZIP64 end record out of place)", label);
    if (le(rec + 16, 4) != 0 || le(rec + 20, 4) != 0 || le(rec + 24, 8) != le(rec + 32, 8))
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: a ZIP archive of several disks", label);
    d->count = le(rec + 32, 8);
    d->size = le(rec + 40, 8);
    d->off = le(rec + 48, 8);
    d->end = rec_off;
    return 0;
}

/* Where the central directory is, from the end record (the last one whose
 * comment reaches exactly to the end of the file). */
static int find_dir(int fd, uint64_t fsize, const char *label, npz_dir *d, char *err, size_t cap)
{
    if (fsize < END_SIZE)
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: not a ZIP (.npz) archive", label);
    size_t tail = fsize < END_SIZE + U16_MAX ? (size_t)fsize : END_SIZE + U16_MAX;
    uint8_t *buf = malloc(tail);
    if (!buf)
        return fail(err, cap, GPUQ_E_NO_MEMORY, "%s: out of memory", label);
    int rc = 0;
    if (npz_read_exact(fd, buf, tail, fsize - tail) != 0) {
        rc = read_fail(err, cap, label);
        goto out;
    }
    size_t pos = tail - END_SIZE;
    for (;; pos--) {
        if (le(buf + pos, 4) == SIG_END && pos + END_SIZE + le(buf + pos + 20, 2) == tail)
            break;
        if (pos == 0) {
            rc = fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                      "%s: not a ZIP (.npz) archive, or one cut short (no end of central "
                      "directory record)",
                      label);
            goto out;
        }
    }
    const uint8_t *e = buf + pos;
    uint64_t end_off = fsize - tail + pos;
    uint64_t disk = le(e + 4, 2), cd_disk = le(e + 6, 2), n_disk = le(e + 8, 2);
    d->count = le(e + 10, 2);
    d->size = le(e + 12, 4);
    d->off = le(e + 16, 4);
    d->end = end_off;
    if (d->count == U16_MAX || d->size == U32_MAX || d->off == U32_MAX) {
        if ((rc = find_dir64(fd, end_off, label, d, err, cap)) != 0)
            goto out;
    } else if (disk != 0 || cd_disk != 0 || n_disk != d->count) {
        rc = fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: a ZIP archive of several disks", label);
        goto out;
    }
    if (d->off > d->end || d->size > d->end - d->off) {
        rc = fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                  "%s: damaged ZIP archive (central directory outside the file)", label);
        goto out;
    }
    if (d->size > NPZ_MAX_CD) {
        rc = fail(err, cap, GPUQ_E_TOO_LARGE,
                  "%s: central directory of %llu bytes (more than %u: too many members)", label,
                  (unsigned long long)d->size, NPZ_MAX_CD);
        goto out;
    }
    if (d->count > d->size / CENTRAL_SIZE)
        rc = fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                  "%s: damaged ZIP archive (%llu members cannot fit its central directory)", label,
                  (unsigned long long)d->count);
out:
    free(buf);
    return rc;
}

/* One central directory entry. */
typedef struct npz_entry {
    const uint8_t *name;
    size_t name_len;
    unsigned flags, method;
    uint32_t crc;
    uint64_t csize, usize, loff;
} npz_entry;

/* The ZIP64 extra field (id 0x0001) of an entry: the 8-byte values of the
 * saturated fields, in the order usize, csize, loff (then a 4-byte disk). */
static bool entry_zip64(const uint8_t *x, size_t xlen, npz_entry *e, uint64_t *disk)
{
    for (size_t k = 0; xlen - k >= 4;) {
        size_t id = (size_t)le(x + k, 2), sz = (size_t)le(x + k + 2, 2);
        k += 4;
        if (sz > xlen - k)
            return false;
        if (id == 1) {
            const uint8_t *f = x + k;
            size_t left = sz;
            uint64_t *vals[3] = {&e->usize, &e->csize, &e->loff};
            for (int v = 0; v < 3; v++) {
                if (*vals[v] != U32_MAX)
                    continue;
                if (left < 8)
                    return false;
                *vals[v] = le(f, 8);
                f += 8;
                left -= 8;
            }
            if (*disk == U16_MAX) {
                if (left < 4)
                    return false;
                *disk = le(f, 4);
            }
            return true;
        }
        k += sz;
    }
    return true;
}

/* The entry at cd[*pos..len): 0 and *pos past it, or -1 (malformed). */
static int entry_next(const uint8_t *cd, size_t len, size_t *pos, npz_entry *e)
{
    if (len - *pos < CENTRAL_SIZE)
        return -1;
    const uint8_t *p = cd + *pos;
    if (le(p, 4) != SIG_CENTRAL)
        return -1;
    size_t nlen = (size_t)le(p + 28, 2), xlen = (size_t)le(p + 30, 2), clen = (size_t)le(p + 32, 2);
    if (nlen + xlen + clen > len - *pos - CENTRAL_SIZE)
        return -1;
    e->flags = (unsigned)le(p + 8, 2);
    e->method = (unsigned)le(p + 10, 2);
    e->crc = (uint32_t)le(p + 16, 4);
    e->csize = le(p + 20, 4);
    e->usize = le(p + 24, 4);
    e->loff = le(p + 42, 4);
    e->name = p + CENTRAL_SIZE;
    e->name_len = nlen;
    uint64_t disk = le(p + 34, 2);
    if (!entry_zip64(p + CENTRAL_SIZE + nlen, xlen, e, &disk) || disk != 0)
        return -1; /* a bad extra field, or on another disk */
    *pos += CENTRAL_SIZE + nlen + xlen + clen;
    return 0;
}

static bool name_is(const npz_entry *e, const char *want, size_t wlen, bool npy)
{
    size_t n = npy ? wlen + 4 : wlen;
    return e->name_len == n && memcmp(e->name, want, wlen) == 0 &&
           (!npy || memcmp(e->name + wlen, ".npy", 4) == 0);
}

/* "a, b, c" (each without its ".npy", as np.load's files shows them) into
 * out, cut with "..." when it does not fit. */
static void list_names(const uint8_t *cd, size_t len, uint64_t count, char *out, size_t cap)
{
    size_t pos = 0, used = 0;
    out[0] = '\0';
    npz_entry e;
    for (uint64_t k = 0; k < count && entry_next(cd, len, &pos, &e) == 0; k++) {
        size_t n = e.name_len;
        if (n >= 4 && memcmp(e.name + n - 4, ".npy", 4) == 0)
            n -= 4;
        char one[72];
        shown_name(e.name, n, one, sizeof one);
        size_t need = strlen(one) + (k ? 2 : 0);
        if (used + need + 4 >= cap) {
            snprintf(out + used, cap - used, "%s...", k ? ", " : "");
            return;
        }
        used += (size_t)snprintf(out + used, cap - used, "%s%s", k ? ", " : "", one);
    }
}

/* The entry called want (NULL: the only one) into *e. */
static int pick_entry(const uint8_t *cd, size_t len, uint64_t count, const char *label,
                      const char *want, npz_entry *e, char *err, size_t cap)
{
    char names[192];
    if (!want && count != 1) {
        list_names(cd, len, count, names, sizeof names);
        if (count == 0)
            return fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: the archive holds no arrays", label);
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                    "%s: the archive holds %llu arrays (%s): name one as %s:NAME", label,
                    (unsigned long long)count, names, label);
    }
    size_t wlen = want ? strlen(want) : 0;
    /* NAME.npy first, then NAME as it is (as np.load's [NAME] looks) */
    for (int pass = 0; pass < (want ? 2 : 1); pass++) {
        size_t pos = 0;
        for (uint64_t k = 0; k < count; k++) {
            if (entry_next(cd, len, &pos, e) != 0)
                return fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                            "%s: damaged ZIP archive (central directory entry %llu)", label,
                            (unsigned long long)k);
            if (!want || name_is(e, want, wlen, pass == 0))
                return 0;
        }
    }
    list_names(cd, len, count, names, sizeof names);
    return fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: no array \"%s\" in the archive; it holds %s",
                label, want, count ? names : "none");
}

/* ---- a member's bytes ---- */

static int damaged(char *err, size_t cap, const char *label, const char *what)
{
    return fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: damaged archive: %s", label, what);
}

/* A stored member's CRC-32, read in place. */
static int check_stored(int fd, uint64_t data, const npz_entry *e, const char *label, char *err,
                        size_t cap)
{
    uint8_t *buf = malloc(e->usize < NPZ_CHUNK ? (e->usize ? (size_t)e->usize : 1) : NPZ_CHUNK);
    if (!buf)
        return fail(err, cap, GPUQ_E_NO_MEMORY, "%s: out of memory", label);
    uLong crc = crc32(0L, Z_NULL, 0);
    int rc = 0;
    for (uint64_t got = 0; got < e->usize;) {
        size_t n = e->usize - got < NPZ_CHUNK ? (size_t)(e->usize - got) : NPZ_CHUNK;
        if (npz_read_exact(fd, buf, n, data + got) != 0) {
            rc = read_fail(err, cap, label);
            break;
        }
        crc = crc32(crc, buf, (uInt)n);
        got += n;
    }
    free(buf);
    if (rc == 0 && (uint32_t)crc != e->crc)
        rc = damaged(err, cap, label, "CRC-32 mismatch");
    return rc;
}

/* A deflated member inflated into a memfd of its own (m->fd). */
static int inflate_member(int fd, uint64_t data, const npz_entry *e, const char *label,
                          npz_member *m, char *err, size_t cap)
{
    /* deflate makes at most NPZ_MAX_RATIO bytes of one (plus a block's) */
    if (e->csize < 2 || e->usize / NPZ_MAX_RATIO > e->csize)
        return damaged(err, cap, label, "inflated size out of proportion to its compressed size");
    int mfd = memfd_create("gpuqctl-npz", MFD_CLOEXEC);
    if (mfd < 0)
        return fail(err, cap, GPUQ_E_IO, "%s: memfd_create: %s", label, strerror(errno));
    uint8_t *in = malloc(NPZ_CHUNK), *out = malloc(NPZ_CHUNK);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int rc = 0, zrc = Z_OK;
    if (!in || !out || inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
        rc = fail(err, cap, GPUQ_E_NO_MEMORY, "%s: out of memory", label);
        goto err_before_init;
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t left = e->csize, got = 0;
    while (zrc != Z_STREAM_END) {
        if (zs.avail_in == 0) {
            if (left == 0) {
                rc = damaged(err, cap, label, "deflate data ends early");
                goto err_after_init;
            }
            size_t n = left < NPZ_CHUNK ? (size_t)left : NPZ_CHUNK;
            if (npz_read_exact(fd, in, n, data + (e->csize - left)) != 0) {
                rc = read_fail(err, cap, label);
                goto err_after_init;
            }
            left -= n;
            zs.next_in = in;
            zs.avail_in = (uInt)n;
        }
        zs.next_out = out;
        zs.avail_out = NPZ_CHUNK;
        zrc = inflate(&zs, Z_NO_FLUSH);
        if (zrc == Z_MEM_ERROR) {
            rc = fail(err, cap, GPUQ_E_NO_MEMORY, "%s: out of memory", label);
            goto err_after_init;
        }
        if (zrc != Z_OK && zrc != Z_STREAM_END) {
            rc = damaged(err, cap, label, "bad deflate data");
            goto err_after_init;
        }
        size_t made = NPZ_CHUNK - zs.avail_out;
        if (made > e->usize - got) {
            rc = damaged(err, cap, label, "inflates past the size its directory entry gives");
            goto err_after_init;
        }
        if (made && write_all(mfd, out, made) != 0) {
            int code = errno == ENOSPC || errno == ENOMEM ? GPUQ_E_NO_MEMORY : GPUQ_E_IO;
            rc = fail(err, cap, code, "%s: cannot hold the inflated member (%llu bytes): %s", label,
                      (unsigned long long)e->usize, strerror(errno));
            goto err_after_init;
        }
        crc = crc32(crc, out, (uInt)made);
        got += made;
    }
    if (got != e->usize)
        rc = damaged(err, cap, label, "inflates to fewer bytes than its directory entry gives");
    else if (left != 0 || zs.avail_in != 0)
        rc = damaged(err, cap, label, "bytes after its deflate data");
    else if ((uint32_t)crc != e->crc)
        rc = damaged(err, cap, label, "CRC-32 mismatch");
err_after_init:
    inflateEnd(&zs);
err_before_init:
    free(in);
    free(out);
    if (rc) {
        close(mfd);
        return rc;
    }
    m->fd = mfd;
    m->own = true;
    m->off = 0;
    m->size = e->usize;
    return 0;
}

/* Entry e's data: its local header checked against it, then read in place
 * (stored) or inflated. limit: where the central directory starts. */
static int open_entry(int fd, uint64_t limit, const npz_entry *e, const char *label, npz_member *m,
                      char *err, size_t cap)
{
    if (e->flags & 1u)
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT, "%s: the member is encrypted", label);
    if (e->method != 0 && e->method != 8)
        return fail(err, cap, GPUQ_E_BAD_ARGUMENT,
                    "%s: the member is compressed with ZIP method %u (only stored and deflated "
                    "members, as np.savez and np.savez_compressed write, are read)",
                    label, e->method);
    uint8_t lh[LOCAL_SIZE];
    if (e->loff > limit || limit - e->loff < LOCAL_SIZE)
        return damaged(err, cap, label, "member header outside the file");
    if (npz_read_exact(fd, lh, sizeof lh, e->loff) != 0)
        return read_fail(err, cap, label);
    uint64_t nlen = le(lh + 26, 2), xlen = le(lh + 28, 2);
    uint64_t data = e->loff + LOCAL_SIZE + nlen + xlen;
    if (le(lh, 4) != SIG_LOCAL || nlen != e->name_len)
        return damaged(err, cap, label, "member header does not match its directory entry");
    if (data > limit || e->csize > limit - data)
        return damaged(err, cap, label, "member data outside the file");
    uint8_t name[U16_MAX];
    if (npz_read_exact(fd, name, (size_t)nlen, e->loff + LOCAL_SIZE) != 0)
        return read_fail(err, cap, label);
    if (memcmp(name, e->name, (size_t)nlen) != 0)
        return damaged(err, cap, label, "member header names another file");
    if (e->method == 8)
        return inflate_member(fd, data, e, label, m, err, cap);
    if (e->csize != e->usize)
        return damaged(err, cap, label, "stored member's sizes differ");
    int rc = check_stored(fd, data, e, label, err, cap);
    if (rc)
        return rc;
    m->fd = fd;
    m->own = false;
    m->off = data;
    m->size = e->usize;
    return 0;
}

int npz_open_fd(int fd, uint64_t fsize, const char *label, const char *name, npz_member *m,
                char *err, size_t errcap)
{
    m->fd = -1;
    m->own = false;
    m->off = m->size = 0;
    npz_dir d = {0, 0, 0, 0};
    int rc = find_dir(fd, fsize, label, &d, err, errcap);
    if (rc)
        return rc;
    uint8_t *cd = malloc(d.size ? (size_t)d.size : 1);
    if (!cd)
        return fail(err, errcap, GPUQ_E_NO_MEMORY, "%s: out of memory", label);
    npz_entry e;
    if (npz_read_exact(fd, cd, (size_t)d.size, d.off) != 0)
        rc = read_fail(err, errcap, label);
    else if ((rc = pick_entry(cd, (size_t)d.size, d.count, label, name, &e, err, errcap)) == 0)
        rc = open_entry(fd, d.off, &e, label, m, err, errcap);
    free(cd);
    return rc;
}

/* Where the archive's name ends in path ("X.npz" or "X.npz:NAME"), or 0. */
static size_t npz_name_end(const char *path)
{
    size_t len = strlen(path);
    for (const char *p = path; (p = strstr(p, ".npz")) != NULL; p++) {
        size_t end = (size_t)(p - path) + 4;
        if (end > 4 && (end == len || path[end] == ':'))
            return end;
    }
    return 0;
}

bool npz_is_path(const char *path)
{
    return npz_name_end(path) != 0;
}

int npz_open(const char *path, npz_member *m, char *err, size_t errcap)
{
    m->fd = -1;
    m->own = false;
    size_t end = npz_name_end(path);
    if (end == 0)
        return fail(err, errcap, GPUQ_E_INTERNAL, "%s: not an .npz path", path);
    const char *name = path[end] == ':' ? path + end + 1 : NULL;
    if (name && !*name)
        return fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: no array name after ':' (FILE.npz:NAME)",
                    path);
    char *file = strndup(path, end);
    if (!file)
        return fail(err, errcap, GPUQ_E_NO_MEMORY, "%s: out of memory", path);
    /* O_NONBLOCK: a FIFO named .npz opens at once, to be refused below
     * (a regular file's reads ignore it) */
    int rc = 0, fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0) {
        rc = fail(err, errcap, GPUQ_E_IO, "%s: %s", file, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) != 0) {
        rc = fail(err, errcap, GPUQ_E_IO, "%s: %s", file, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = fail(err, errcap, GPUQ_E_BAD_ARGUMENT,
                  "%s: an .npz archive is read from a regular file, not a pipe or device", file);
        goto out;
    }
    rc = npz_open_fd(fd, st.st_size > 0 ? (uint64_t)st.st_size : 0, path, name, m, err, errcap);
    if (rc == 0 && m->fd == fd)
        fd = -1; /* read in place: m's now */
    if (rc == 0)
        m->own = true;
out:
    if (fd >= 0)
        close(fd);
    free(file);
    return rc;
}

void npz_close(npz_member *m)
{
    if (m->own && m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    m->own = false;
}
