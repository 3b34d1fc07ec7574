/* SPDX-License-Identifier: Apache-2.0 */
/* npy.c - read and write NumPy .npy files (see npy.h).
 *
 * Layout: "\x93NUMPY", major, minor, header length (u16 for 1.0, u32 for
 * 2.0/3.0), then the dict text {'descr': '<f8', 'fortran_order': False,
 * 'shape': (3, 4), } padded with spaces and a newline, then the raw data.
 * npy_open reads and checks the header and keeps the file open; npy_load
 * then reads the data with pread(2) wherever the caller says (gpuqctl: a
 * shared-memory arena), and npy_read is the two into a malloc'd buffer.
 * Element types other than the wire's (float16, bool, the integers) and
 * Fortran-order 2-D arrays are converted on the way: npy_load reads the
 * file's bytes into a temporary (1 MiB at a time; a Fortran array whole, as
 * its transpose needs all of it) and writes float32/float64 C order into
 * dst, the conversions NumPy's astype makes, so gpuqctl takes what the
 * Python client takes.
 * Standard input ("-") is a stream: the same header checks on bytes read in
 * order (read_header's npy_src), then npy_load reads the data once and
 * checks that the stream ends there, which is what a file's size told.
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
#include "npz.h"

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

/* A quoted string literal; s/len point into the text, escapes ('\x00')
 * left as written: no key or dtype gpuq takes has one, but a descr that
 * does is told apart from "<f8" in its message (descr_text). */
static bool read_str(cursor *c, const char **s, size_t *len)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' && ++c->p == c->end) /* the escaped character is skipped */
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

/* The first 32 bytes of a descr (s[len]) as found, for a message: a byte
 * outside printable ASCII as \xHH (so "<f8" and "<f8\0" read apart),
 * "..." after a longer one. */
static const char *descr_text(const char *s, size_t len, char *buf, size_t cap)
{
    size_t at = 0, n = len > 32 ? 32 : len;
    for (size_t k = 0; k < n && at + 5 <= cap; k++) {
        unsigned char ch = (unsigned char)s[k];
        if (ch >= 0x20 && ch < 0x7f)
            buf[at++] = (char)ch;
        else
            at += (size_t)snprintf(buf + at, cap - at, "\\x%02x", ch);
    }
    snprintf(buf + at, cap - at, "%s", n < len ? "..." : "");
    return buf;
}

/* The descrs read, with the element each holds and what it becomes on the
 * wire. The one-byte types have no byte order: NumPy writes '|', and '<',
 * '>' and '=' mean the same bytes. The wider ones are taken little-endian
 * only (what NumPy writes on every machine gpuq runs on). */
typedef struct elem_info {
    char kind; /* 'f', 'b', 'i' or 'u' */
    unsigned size;
    npy_elem elem;
    gpuq_dtype wire;
} elem_info;

static const elem_info elems[] = {
    {'f', 4, NPY_EL_F4, GPUQ_DT_F32}, {'f', 8, NPY_EL_F8, GPUQ_DT_F64},
    {'f', 2, NPY_EL_F2, GPUQ_DT_F32}, {'b', 1, NPY_EL_B1, GPUQ_DT_F64},
    {'i', 1, NPY_EL_I1, GPUQ_DT_F64}, {'u', 1, NPY_EL_U1, GPUQ_DT_F64},
    {'i', 2, NPY_EL_I2, GPUQ_DT_F64}, {'u', 2, NPY_EL_U2, GPUQ_DT_F64},
    {'i', 4, NPY_EL_I4, GPUQ_DT_F64}, {'u', 4, NPY_EL_U4, GPUQ_DT_F64},
    {'i', 8, NPY_EL_I8, GPUQ_DT_F64}, {'u', 8, NPY_EL_U8, GPUQ_DT_F64},
};

/* descr (s[len]) as one of elems: NULL when it is none of them. *big is
 * set when it would be one of them but for a big-endian '>', which is said
 * apart in the message. */
static const elem_info *find_elem(const char *s, size_t len, bool *big)
{
    *big = false;
    if (len != 3 || s[2] < '1' || s[2] > '8')
        return NULL;
    unsigned size = (unsigned)(s[2] - '0');
    for (size_t k = 0; k < sizeof elems / sizeof elems[0]; k++) {
        const elem_info *e = &elems[k];
        if (e->kind != s[1] || e->size != size)
            continue;
        if (s[0] == '<' || (size == 1 && (s[0] == '|' || s[0] == '>' || s[0] == '=')))
            return e;
        *big = s[0] == '>';
        return NULL;
    }
    return NULL;
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
    bool big;
    const elem_info *e = find_elem(descr, descr_len, &big);
    if (!e) {
        char shown[4 * 32 + 4];
        descr_text(descr, descr_len, shown, sizeof shown);
        if (big)
            return fail(err, errcap, GPUQ_E_BAD_DTYPE,
                        "%s: dtype '%s' is big-endian, which is not supported (save a "
                        "little-endian copy: a.astype(a.dtype.newbyteorder('<')))",
                        path, shown);
        return fail(err, errcap, GPUQ_E_BAD_DTYPE,
                    "%s: dtype '%s' is not supported (float16/32/64, integers or bool only)", path,
                    shown);
    }
    if (ndim < 1 || ndim > 2)
        return fail(err, errcap, GPUQ_E_BAD_SHAPE,
                    "%s: %d-D arrays are not supported (1-D or 2-D only)", path, ndim);
    a->dtype = e->wire;
    a->elem = e->elem;
    a->file_esize = e->size;
    /* a 1-D array is the same bytes in either order */
    a->fortran = fortran && ndim == 2;
    a->ndim = ndim;
    a->shape[0] = dims[0];
    a->shape[1] = ndim == 2 ? dims[1] : 1;
    return 0;

malformed:
    return fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: not a valid .npy header", path);
}

/* Where npy_open reads a header from: a file (pread at offsets, its size
 * known) or a stream (read in order, its size unknown: UINT64_MAX). */
typedef struct npy_src {
    int fd;
    bool stream;
    uint64_t size;
    uint64_t base; /* where the .npy starts in fd (an .npz member's offset) */
} npy_src;

static int src_read(const npy_src *s, void *dst, uint64_t len, uint64_t off)
{
    return s->stream ? npz_read_exact(s->fd, dst, len, NPZ_STREAM)
                     : npz_read_exact(s->fd, dst, len, s->base + off);
}

/* The header at the start of s, checked; on success a is filled (not yet
 * marked open) and *data_off is where the data starts. */
static int read_header(const npy_src *s, const char *path, npy_array *a, uint64_t *data_off,
                       char *err, size_t errcap)
{
    uint64_t fsize = s->size;
    uint8_t pre[12];
    if (fsize < 10 || src_read(s, pre, 10, 0) != 0 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: not a .npy file", path);
    uint8_t major = pre[6];
    uint64_t hlen, off;
    if (major == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        off = 10;
    } else if (major == 2 || major == 3) {
        if (fsize < 12 || src_read(s, pre + 10, 2, 10) != 0)
            return fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: truncated .npy header", path);
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
               (uint64_t)pre[11] << 24;
        off = 12;
    } else {
        return fail(err, errcap, GPUQ_E_BAD_ARGUMENT,
                    "%s: .npy format version %u.%u is not supported", path, major, pre[7]);
    }
    if (hlen > NPY_MAX_HEADER || off + hlen > fsize)
        return fail(err, errcap, GPUQ_E_BAD_ARGUMENT, "%s: .npy header length %llu out of bounds",
                    path, (unsigned long long)hlen);
    char *hdr = malloc(hlen + 1);
    if (!hdr)
        return fail(err, errcap, GPUQ_E_NO_MEMORY, "%s: out of memory", path);
    int rc = 0;
    if (src_read(s, hdr, hlen, off) != 0) {
        rc = fail(err, errcap, s->stream ? GPUQ_E_BAD_ARGUMENT : GPUQ_E_IO,
                  s->stream ? "%s: truncated .npy header" : "%s: short read", path);
        goto out_hdr;
    }
    if ((rc = npy_parse_header(hdr, hlen, path, a, err, errcap)) != 0)
        goto out_hdr;
    /* the file's data is shape times the file's element size; what
     * npy_load writes, shape times the wire's (larger for float16) */
    uint64_t esize = a->file_esize, wsize = gpuq_dtype_size(a->dtype);
    uint64_t n = a->shape[0];
    if (a->shape[1] && n > UINT64_MAX / a->shape[1] / (esize > wsize ? esize : wsize)) {
        rc = fail(err, errcap, GPUQ_E_BAD_SHAPE, "%s: shape too large", path);
        goto out_hdr;
    }
    uint64_t need = n * a->shape[1] * esize;
    uint64_t wire = n * a->shape[1] * wsize;
    if (!s->stream && need != fsize - off - hlen) {
        rc = fail(err, errcap, GPUQ_E_SIZE_MISMATCH,
                  "%s: shape needs %llu data bytes but the file has %llu", path,
                  (unsigned long long)need, (unsigned long long)(fsize - off - hlen));
        goto out_hdr;
    }
    if (need > SIZE_MAX || wire > SIZE_MAX) {
        rc = fail(err, errcap, GPUQ_E_TOO_LARGE, "%s: too large for this machine", path);
        goto out_hdr;
    }
    a->file_nbytes = need;
    a->nbytes = (size_t)wire;
    *data_off = s->base + off + hlen;
out_hdr:
    free(hdr);
    return rc;
}

int npy_open(const char *path, npy_array *a, char *err, size_t errcap)
{
    if (strcmp(path, "-") == 0)
        return npy_open_stream(STDIN_FILENO, NPY_STDIN_NAME, a, err, errcap);
    memset(a, 0, sizeof *a);
    a->fd = -1;
    int rc;
    npy_src s = {-1, false, 0, 0};
    if (npz_is_path(path)) { /* "X.npz:NAME": that member's bytes (npz.c) */
        npz_member m;
        if ((rc = npz_open(path, &m, err, errcap)) != 0)
            return rc;
        s = (npy_src){m.fd, false, m.size, m.off};
    } else {
        if ((s.fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            return fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
        struct stat st;
        if (fstat(s.fd, &st) != 0) {
            rc = fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
            goto err_after_open;
        }
        s.size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    }
    uint64_t data_off = 0;
    if ((rc = read_header(&s, path, a, &data_off, err, errcap)) != 0)
        goto err_after_open;
    a->open = true;
    a->fd = s.fd;
    a->data_off = data_off;
    a->path = path;
    return 0;

err_after_open:
    close(s.fd);
    a->fd = -1;
    return rc;
}

int npy_open_stream(int fd, const char *name, npy_array *a, char *err, size_t errcap)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    if (isatty(fd))
        return fail(err, errcap, GPUQ_E_BAD_ARGUMENT,
                    "%s is a terminal: pipe or redirect an .npy file into it", name);
    /* a descriptor of our own: npy_free closes it, never the caller's */
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (own < 0)
        return fail(err, errcap, GPUQ_E_IO, "%s: %s", name, strerror(errno));
    npy_src s = {own, true, UINT64_MAX, 0};
    uint64_t data_off = 0;
    int rc = read_header(&s, name, a, &data_off, err, errcap);
    if (rc) {
        close(own);
        return rc;
    }
    a->open = true;
    a->stream = true;
    a->fd = own;
    a->data_off = data_off;
    a->path = name;
    return 0;
}

/* The little-endian n-byte unsigned integer at p. */
static uint64_t le_bytes(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < n; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

/* An IEEE half as the float of the same value, from the bits: every half is
 * a float, so nothing rounds. A NaN keeps its payload (NumPy's way). */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13; /* inf, NaN */
    } else if (exp != 0) {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    } else if (man == 0) {
        bits = sign; /* +-0 */
    } else {
        /* subnormal, man * 2^-24: shift the leading 1 up to the implicit bit */
        uint32_t e = 127 - 15 + 1;
        while (!(man & 0x400)) {
            man <<= 1;
            e--;
        }
        bits = sign | e << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* One element at src (the file's, a->elem) as the wire's at dst. The casts
 * from int64 and uint64 to double round to nearest, as astype does. */
static void convert_one(npy_elem el, const uint8_t *src, uint8_t *dst)
{
    double d;
    switch (el) {
    case NPY_EL_F4:
        memcpy(dst, src, 4);
        return;
    case NPY_EL_F8:
        memcpy(dst, src, 8);
        return;
    case NPY_EL_F2: {
        float f = half_to_float((uint16_t)le_bytes(src, 2));
        memcpy(dst, &f, sizeof f);
        return;
    }
    case NPY_EL_B1:
        d = src[0] ? 1.0 : 0.0;
        break;
    case NPY_EL_I1:
        d = (int8_t)src[0];
        break;
    case NPY_EL_U1:
        d = src[0];
        break;
    case NPY_EL_I2:
        d = (int16_t)(uint16_t)le_bytes(src, 2);
        break;
    case NPY_EL_U2:
        d = (uint16_t)le_bytes(src, 2);
        break;
    case NPY_EL_I4:
        d = (int32_t)(uint32_t)le_bytes(src, 4);
        break;
    case NPY_EL_U4:
        d = (uint32_t)le_bytes(src, 4);
        break;
    case NPY_EL_I8:
        d = (double)(int64_t)le_bytes(src, 8);
        break;
    case NPY_EL_U8:
        d = (double)le_bytes(src, 8);
        break;
    default:
        abort(); /* npy_parse_header sets only the ones above */
    }
    memcpy(dst, &d, sizeof d);
}

/* The file's bytes len at file offset off (a stream: its next len bytes)
 * into dst. 0, or the error for a file that cannot be read, shrank, or (a
 * stream) ended early. */
static int load_bytes(const npy_array *a, const char *path, void *dst, uint64_t len, uint64_t off,
                      char *err, size_t errcap)
{
    if (!a->stream) {
        if (npz_read_exact(a->fd, dst, len, off) != 0)
            return fail(err, errcap, GPUQ_E_IO, "%s: %s", path,
                        errno ? strerror(errno) : "short read (the file shrank)");
        return 0;
    }
    if (npz_read_exact(a->fd, dst, len, NPZ_STREAM) != 0) {
        if (errno)
            return fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
        return fail(err, errcap, GPUQ_E_SIZE_MISMATCH,
                    "%s: ended before the %llu data bytes its shape needs", path,
                    (unsigned long long)a->file_nbytes);
    }
    return 0;
}

/* The file's data converted into dst, 1 MiB of file bytes at a time, in
 * order (a stream reads it once). */
static int load_converted(const npy_array *a, const char *path, uint8_t *dst, char *err,
                          size_t errcap)
{
    enum { CHUNK = 1u << 20 }; /* a multiple of every element size */
    uint64_t left = a->file_nbytes, off = a->data_off;
    size_t wsize = gpuq_dtype_size(a->dtype);
    uint8_t *tmp = malloc(left < CHUNK ? (left ? (size_t)left : 1) : CHUNK);
    if (!tmp)
        return fail(err, errcap, GPUQ_E_NO_MEMORY, "%s: out of memory", path);
    int rc = 0;
    while (left > 0) {
        size_t len = left < CHUNK ? (size_t)left : CHUNK;
        if ((rc = load_bytes(a, path, tmp, len, off, err, errcap)) != 0)
            break;
        for (size_t k = 0; k < len / a->file_esize; k++, dst += wsize)
            convert_one(a->elem, tmp + k * a->file_esize, dst);
        off += len;
        left -= len;
    }
    free(tmp);
    return rc;
}

/* A Fortran-order (column-major) rows x cols array read whole, then written
 * into dst in C order: element (i, j) is the file's j * rows + i. */
static int load_transposed(const npy_array *a, const char *path, uint8_t *dst, char *err,
                           size_t errcap)
{
    uint64_t rows = a->shape[0], cols = a->shape[1];
    size_t es = a->file_esize, wsize = gpuq_dtype_size(a->dtype);
    /* A file's size was checked against its shape; a stream's was not (its
     * header may claim any shape), so its buffer grows with the bytes that
     * actually come, 1 MiB first, doubling. */
    enum { FIRST = 1u << 20 };
    uint64_t cap = a->stream && a->file_nbytes > FIRST ? FIRST : a->file_nbytes, got = 0;
    uint8_t *tmp = malloc(cap ? (size_t)cap : 1);
    int rc = 0;
    while (tmp && rc == 0 && got < a->file_nbytes) {
        if (got == cap) {
            uint64_t more = cap * 2 < a->file_nbytes ? cap * 2 : a->file_nbytes;
            uint8_t *t = realloc(tmp, (size_t)more);
            if (!t) {
                free(tmp);
                tmp = NULL;
                break;
            }
            tmp = t;
            cap = more;
        }
        rc = load_bytes(a, path, tmp + got, cap - got, a->data_off + got, err, errcap);
        got = cap;
    }
    if (!tmp)
        return fail(err, errcap, GPUQ_E_NO_MEMORY, "%s: cannot allocate %llu bytes", path,
                    (unsigned long long)a->file_nbytes);
    if (rc == 0 && cols != 0) { /* (huge, 0): no element, and no loop over the rows */
        for (uint64_t i = 0; i < rows; i++)
            for (uint64_t j = 0; j < cols; j++, dst += wsize)
                convert_one(a->elem, tmp + (j * rows + i) * es, dst);
    }
    free(tmp);
    return rc;
}

int npy_load(const npy_array *a, void *dst, char *err, size_t errcap)
{
    const char *path = a->path ? a->path : "(npy)";
    if (!a->open)
        return fail(err, errcap, GPUQ_E_INTERNAL, "%s: not open", path);
    int rc;
    if (a->fortran)
        rc = load_transposed(a, path, dst, err, errcap);
    else if (a->elem != NPY_EL_F4 && a->elem != NPY_EL_F8)
        rc = load_converted(a, path, dst, err, errcap);
    else /* the wire's own: straight into dst */
        rc = load_bytes(a, path, dst, a->file_nbytes, a->data_off, err, errcap);
    if (rc || !a->stream)
        return rc;
    /* a stream: its data once, in order, then nothing more (as a file
     * holds exactly what its shape says) */
    uint8_t extra;
    ssize_t n;
    do
        n = read(a->fd, &extra, 1);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
    if (n > 0)
        return fail(err, errcap, GPUQ_E_SIZE_MISMATCH,
                    "%s: more bytes follow the %llu data bytes its shape needs", path,
                    (unsigned long long)a->file_nbytes);
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
    a->open = a->stream = false;
    a->path = NULL;
    a->data = data;
    return 0;

err_after_open:
    npy_free(a);
    return rc;
}

/* Write all of buf[len] to fd. 0 or -1 (errno set). */
static int write_full(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = write(fd, p, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int npy_write_fd(int fd, const char *name, gpuq_dtype dt, int ndim, const uint64_t *shape,
                 const void *data, char *err, size_t errcap)
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
        return fail(err, errcap, GPUQ_E_INTERNAL, "%s: header too long", name);
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
    if (write_full(fd, head, 10 + hlen) != 0 || (bytes && write_full(fd, data, bytes) != 0))
        return fail(err, errcap, GPUQ_E_IO, "%s: write failed: %s", name, strerror(errno));
    return 0;
}

int npy_write(const char *path, gpuq_dtype dt, int ndim, const uint64_t *shape, const void *data,
              char *err, size_t errcap)
{
    if (strcmp(path, "-") == 0)
        return npy_write_fd(STDOUT_FILENO, NPY_STDOUT_NAME, dt, ndim, shape, data, err, errcap);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return fail(err, errcap, GPUQ_E_IO, "%s: %s", path, strerror(errno));
    int rc = npy_write_fd(fd, path, dt, ndim, shape, data, err, errcap);
    if (close(fd) != 0 && rc == 0)
        rc = fail(err, errcap, GPUQ_E_IO, "%s: write failed: %s", path, strerror(errno));
    return rc;
}

void npy_free(npy_array *a)
{
    free(a->data);
    a->data = NULL;
    if (a->open)
        close(a->fd);
    a->open = a->stream = false;
    a->fd = -1;
}
