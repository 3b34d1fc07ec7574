/* npy.c - read and write NumPy .npy files (see npy.h).
 *
 * Layout: "\x93NUMPY", major, minor, header length (u16 for 1.0, u32 for
 * 2.0/3.0), then the dict text {'descr': '<f8', 'fortran_order': False,
 * 'shape': (3, 4), } padded with spaces and a newline, then the raw data.
 * npy_open reads and checks the header and keeps the file open; npy_load
 * then reads the data with pread(2) wherever the caller says (gpuqctl: a
 * shared-memory arena), and npy_read is the two into a malloc'd buffer.
 * Failure modes: unreadable file (GPUQ_E_IO), malformed header
 * (GPUQ_E_BAD_ARGUMENT), unsupported dtype (GPUQ_E_BAD_DTYPE), order or rank
 * (GPUQ_E_BAD_SHAPE), data size differing from the shape (GPUQ_E_SIZE_MISMATCH).
 */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"

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

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string literal without escapes; s/len point into the text. */
static bool read_str(cursor *c, const char **s, size_t *len)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\')
            return false;
        c->p++;
    }
    if (c->p >= c->end)
        return false;
    *s = start;
    *len = (size_t)(c->p - start);
    c->p++;
    return true;
}

static bool read_word(cursor *c, const char *w)
{
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* A tuple of up to 8 non-negative ints: (), (3,), (3, 4), (3, 4,) */
static bool read_shape(cursor *c, uint64_t *dims, int *ndim)
{
    if (!eat(c, '('))
        return false;
    *ndim = 0;
    for (;;) {
        skip_ws(c);
        if (eat(c, ')'))
            return true;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9' || *ndim >= 8)
            return false;
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            unsigned d = (unsigned)(*c->p - '0');
            if (v > (UINT64_MAX - d) / 10)
                return false;
            v = v * 10 + d;
            c->p++;
        }
        if (c->p < c->end && *c->p == 'L') /* Python 2 long */
            c->p++;
        dims[(*ndim)++] = v;
        if (!eat(c, ',')) {
            return eat(c, ')');
        }
    }
}

int npy_parse_header(const char *text, size_t len, const char *path, npy_array *a, char *err,
                     size_t errcap)
{
    cursor c = {text, text + len};
    const char *descr = NULL;
    size_t descr_len = 0;
    bool have_order = false, fortran = false, have_shape = false;
    uint64_t dims[8];
    int ndim = 0;
    if (!eat(&c, '{'))
        goto malformed;
    for (;;) {
        if (eat(&c, '}'))
            break;
        const char *k;
        size_t kl;
        if (!read_str(&c, &k, &kl) || !eat(&c, ':'))
            goto malformed;
        if (kl == 5 && memcmp(k, "descr", 5) == 0) {
            if (!read_str(&c, &descr, &descr_len))
                goto malformed;
        } else if (kl == 13 && memcmp(k, "fortran_order", 13) == 0) {
            if (read_word(&c, "True"))
                fortran = true;
            else if (read_word(&c, "False"))
                fortran = false;
            else
                goto malformed;
            have_order = true;
        } else if (kl == 5 && memcmp(k, "shape", 5) == 0) {
            if (!read_shape(&c, dims, &ndim))
                goto malformed;
            have_shape = true;
        } else {
            goto malformed;
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                goto malformed;
            break;
        }
    }
    if (!descr || !have_order || !have_shape)
        goto malformed;
    if (descr_len == 3 && memcmp(descr, "<f4", 3) == 0)
        a->dtype = GPUQ_DT_F32;
    else if (descr_len == 3 && memcmp(descr, "<f8", 3) == 0)
        a->dtype = GPUQ_DT_F64;
    else
        return fail(err, errcap, GPUQ_E_BAD_DTYPE,
                    "%s: dtype '%.*s' is not supported (float32/float64 only)", path,
                    (int)(descr_len > 32 ? 32 : descr_len), descr);
    if (fortran)
        return fail(err, errcap, GPUQ_E_BAD_SHAPE,
                    "%s: Fortran-order arrays are not supported (save a C-order copy)", path);
    if (ndim < 1 || ndim > 2)
        return fail(err, errcap, GPUQ_E_BAD_SHAPE,
                    "%s: %d-D arrays are not supported (1-D or 2-D only)", path, ndim);
    a->ndim = ndim;
    a->shape[0] = dims[0];
    a->shape[1] = ndim == 2 ? dims[1] : 1;
    return 0;

malformed:
    return fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: not a valid .npy header", path);
}

/* Read exactly len bytes at off of fd into dst. 0, or -1 (errno set; 0 for
 * a file shorter than that). */
static int pread_full(int fd, void *dst, uint64_t len, uint64_t off)
{
    uint8_t *p = dst;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = pread(fd, p, chunk, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = 0;
            return -1;
        }
        p += n;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

int npy_open(const char *path, npy_array *a, char *err, size_t errcap)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
    int rc;
    char *hdr = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
        goto err_after_open;
    }
    uint64_t fsize = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    uint8_t pre[12];
    if (fsize < 10 || pread_full(fd, pre, 10, 0) != 0 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        rc = fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: not a .npy file", path);
        goto err_after_open;
    }
    uint8_t major = pre[6];
    uint64_t hlen, off;
    if (major == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        off = 10;
    } else if (major == 2 || major == 3) {
        if (fsize < 12 || pread_full(fd, pre + 10, 2, 10) != 0) {
            rc = fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: truncated .npy header", path);
            goto err_after_open;
        }
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
               (uint64_t)pre[11] << 24;
        off = 12;
    } else {
        rc = fail(err, errcap, GPUQ_E_BAD_ARGUMENT,
                  "%s: .npy format version %u.%u is not supported", path, major, pre[7]);
        goto err_after_open;
    }
    if (hlen > NPY_MAX_HEADER || off + hlen > fsize) {
        rc = fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: .npy header length %llu out of bounds",
                  path, (unsigned long long)hlen);
        goto err_after_open;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        rc = fail(err, errcap, GPUQ_E_NO_MEMORY, "%s: out of memory", path);
        goto err_after_open;
    }
    if (pread_full(fd, hdr, hlen, off) != 0) {
        rc = fail(err, errcap, GPUQ_E_IO, "%s: short read", path);
        goto err_after_hdr;
    }
    rc = npy_parse_header(hdr, hlen, path, a, err, errcap);
    if (rc)
        goto err_after_hdr;
    uint64_t esize = gpuq_dtype_size(a->dtype);
    uint64_t have = fsize - off - hlen;
    uint64_t n = a->shape[0];
    if (a->shape[1] && n > UINT64_MAX / a->shape[1] / esize) {
        rc = fail(err, errcap, GPUQ_E_BAD_SHAPE, "%s: shape too large", path);
        goto err_after_hdr;
    }
    uint64_t need = n * a->shape[1] * esize;
    if (need != have) {
        rc = fail(err, errcap, GPUQ_E_SIZE_MISMATCH,
                  "%s: shape needs %llu data bytes but the file has %llu", path,
                  (unsigned long long)need, (unsigned long long)have);
        goto err_after_hdr;
    }
    if (need > SIZE_MAX) {
        rc = fail(err, errcap, GPUQ_E_TOO_LARGE, "%s: too large for this machine", path);
        goto err_after_hdr;
    }
    free(hdr);
    a->nbytes = (size_t)need;
    a->open = true;
    a->fd = fd;
    a->data_off = off + hlen;
    a->path = path;
    return 0;

err_after_hdr:
    free(hdr);
err_after_open:
    close(fd);
    a->fd = -1;
    return rc;
}

int npy_load(const npy_array *a, void *dst, char *err, size_t errcap)
{
    const char *path = a->path ? a->path : "(npy)";
    if (!a->open)
        return fail(err, errcap, GPUQ_E_INTERNAL, "%s: not open", path);
    if (pread_full(a->fd, dst, a->nbytes, a->data_off) != 0)
        return fail(err, errcap, GPUQ_E_IO, "%s: %s", path,
                    errno ? strerror(errno) : "short read (the file shrank)");
    return 0;
}

int npy_read(const char *path, npy_array *a, char *err, size_t errcap)
{
    int rc = npy_open(path, a, err, errcap);
    if (rc)
        return rc;
    void *data = malloc(a->nbytes ? a->nbytes : 1);
    if (!data) {
        rc = fail(err, errcap, GPUQ_E_NO_MEMORY, "%s: cannot allocate %llu bytes", path,
                  (unsigned long long)a->nbytes);
        goto err_after_open;
    }
    if ((rc = npy_load(a, data, err, errcap)) != 0) {
        free(data);
        goto err_after_open;
    }
    close(a->fd);
    a->fd = -1;
    a->open = false;
    a->path = NULL;
    a->data = data;
    return 0;

err_after_open:
    npy_free(a);
    return rc;
}

int npy_write(const char *path, gpuq_dtype dt, int ndim, const uint64_t *shape, const void *data,
              char *err, size_t errcap)
{
    char dict[256];
    const char *descr = dt == GPUQ_DT_F32 ? "<f4" : dt == GPUQ_DT_I64 ? "<i8" : "<f8";
    int n;
    if (ndim == 1)
        n = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%llu,), }", descr,
                     (unsigned long long)shape[0]);
    else
        n = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%llu, %llu), }", descr,
                     (unsigned long long)shape[0], (unsigned long long)shape[1]);
    if (n < 0 || (size_t)n > sizeof dict - 70)
        return fail(err, errcap, GPUQ_E_INTERNAL, "%s: header too long", path);
    /* Pad so the data starts on a 64-byte boundary; the header ends in '\n'. */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    uint8_t head[10 + sizeof dict];
    size_t hlen = (size_t)n + pad + 1;
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (uint8_t)(hlen & 0xff);
    head[9] = (uint8_t)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)n);
    memset(head + 10 + n, ' ', pad);
    head[10 + n + pad] = '\n';
    uint64_t count = shape[0] * (ndim == 2 ? shape[1] : 1);
    size_t bytes = (size_t)(count * gpuq_dtype_size(dt));
    FILE *f = fopen(path, "wb");
    if (!f)
        return fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
    bool ok = fwrite(head, 1, 10 + hlen, f) == 10 + hlen;
    ok = ok && (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok)
        return fail(err, errcap, GPUQ_E_IO, "%s: write failed: %s", path, strerror(e));
    return 0;
}

void npy_free(npy_array *a)
{
    free(a->data);
    a->data = NULL;
    if (a->open)
        close(a->fd);
    a->open = false;
    a->fd = -1;
}
