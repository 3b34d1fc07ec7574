/* SPDX-License-Identifier: Apache-2.0 */
/* npy.h - NumPy .npy files for gpuqctl: 1-D or 2-D arrays of float32/float64
 * on the wire, converted on load from what the Python client converts.
 *
 * Reads format versions 1.0, 2.0 and 3.0; writes 1.0 (float32/float64, C
 * order). Little-endian float32 and float64 in C order are read as they
 * are, straight into the caller's memory; the rest is converted as NumPy's
 * astype does: float16 to float32 (exactly), bool and 8- to 64-bit signed
 * and unsigned integers to float64 (above 2^53 rounded to nearest), and a
 * Fortran-order 2-D array transposed into C order. Big-endian, complex and
 * the other dtypes are refused (GPUQ_E_BAD_DTYPE). The header dict is
 * parsed as bounded Python-literal text, and the data size implied by the
 * shape (in the file's element size) is checked against the file's size
 * before anything is allocated.
 * The path "-" is standard input (read) or standard output (write): a
 * stream, whose size is not known ahead, so its data is checked as it is
 * read instead (npy_load: exactly the bytes the shape needs, then EOF).
 * Errors return a GPUQ_E_* code with "PATH: reason" in err ("stdin: ...").
 */
#ifndef GPUQ_CLIENT_NPY_H
#define GPUQ_CLIENT_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "header.h"

#define NPY_MAX_HEADER (1u << 16)
/* The names "-" goes by in messages. */
#define NPY_STDIN_NAME "stdin"
#define NPY_STDOUT_NAME "stdout"

/* An element type as the file holds it (its descr). */
typedef enum npy_elem {
    NPY_EL_F4, /* '<f4': the wire's float32, read as is */
    NPY_EL_F8, /* '<f8': the wire's float64, read as is */
    NPY_EL_F2, /* '<f2' -> float32 */
    NPY_EL_B1, /* '|b1' -> float64 0.0 or 1.0 (any nonzero byte is True) */
    NPY_EL_I1,
    NPY_EL_U1,
    NPY_EL_I2,
    NPY_EL_U2,
    NPY_EL_I4,
    NPY_EL_U4,
    NPY_EL_I8,
    NPY_EL_U8, /* the integers -> float64 */
} npy_elem;

typedef struct npy_array {
    gpuq_dtype dtype;  /* on the wire: GPUQ_DT_F32 or GPUQ_DT_F64 */
    int ndim;          /* 1 or 2 */
    uint64_t shape[2]; /* shape[1] is 1 for 1-D */
    void *data;        /* owned: npy_free (NULL after npy_open until the caller reads it) */
    size_t nbytes;     /* the data's size as dtype (what npy_load writes) */
    /* the data as the file holds it: npy_load converts it into dtype */
    npy_elem elem;
    unsigned file_esize;  /* bytes per element in the file (1, 2, 4 or 8) */
    bool fortran;         /* 2-D in Fortran order: transposed on load */
    uint64_t file_nbytes; /* the file's data bytes: shape times file_esize */
    /* npy_open: the file, open until npy_free, and where its data starts */
    bool open;
    bool stream; /* fd is a pipe or the like: its data read once, in order */
    int fd;
    uint64_t data_off;
    const char *path; /* borrowed, for messages */
    /* an op's input "@NAME" (ctl_resident_open): the resident array's name
     * (borrowed), its dtype and shape gpuqd's; no file and no data */
    const char *resident;
} npy_array;

/* The whole file: header and data (malloc'd). */
int npy_read(const char *path, npy_array *a, char *err, size_t errcap);
/* The header only, checked as npy_read checks it (dtype, order, rank, and
 * the data size the shape implies equal to what the file holds); a->data
 * stays NULL and the file stays open (a->open) for npy_load. path is
 * borrowed until npy_free. On failure nothing is left open. "-" is
 * npy_open_stream(STDIN_FILENO, "stdin", ...). */
int npy_open(const char *path, npy_array *a, char *err, size_t errcap);
/* The header of an .npy stream on fd (borrowed; a duplicate of it is kept
 * until npy_free), read in order; the data size cannot be checked yet, so
 * npy_load does it. A terminal is refused (GPUQ_E_BAD_ARGUMENT) rather than
 * waited on. name (borrowed, static) is for messages. */
int npy_open_stream(int fd, const char *name, npy_array *a, char *err, size_t errcap);
/* An opened array's data, a->nbytes of it as a->dtype, into dst (the
 * caller's memory: a shared-memory arena, say). Float32/float64 in C order
 * are read(2) straight into dst, with no copy in between; other element
 * types go through a temporary buffer of at most 1 MiB and are converted
 * into dst, and a Fortran-order 2-D array is read whole into a temporary
 * (GPUQ_E_NO_MEMORY when it cannot be had) and transposed into dst.
 * GPUQ_E_IO when the file cannot be read or is shorter than it was. A
 * stream is read once: GPUQ_E_SIZE_MISMATCH when it ends early or has
 * bytes after the data (read to its end to know). */
int npy_load(const npy_array *a, void *dst, char *err, size_t errcap);
/* Write data (borrowed) as an .npy 1.0 file ("-": standard output). The
 * file is created or truncated in place; gpuqctl's outputs go through a
 * temporary file and a rename instead (ctl_xfer.c). */
int npy_write(const char *path, gpuq_dtype dt, int ndim, const uint64_t *shape, const void *data,
              char *err, size_t errcap);
/* The same to an open descriptor (borrowed); name is for messages. */
int npy_write_fd(int fd, const char *name, gpuq_dtype dt, int ndim, const uint64_t *shape,
                 const void *data, char *err, size_t errcap);
/* Free the data and close the file, whichever a holds. */
void npy_free(npy_array *a);

/* Parse a header dict (text[len]) into dtype/elem/file_esize/fortran/
 * ndim/shape; exposed for tests. */
int npy_parse_header(const char *text, size_t len, const char *path, npy_array *a, char *err,
                     size_t errcap);

#endif
