/* npy.h - NumPy .npy files for gpuqctl: float32/float64, C order, 1-D or 2-D.
 *
 * Reads format versions 1.0, 2.0 and 3.0; writes 1.0. The header dict is
 * parsed as bounded Python-literal text, and the data size implied by the
 * shape is checked against the file's size before anything is allocated.
 * Errors return a GPUQ_E_* code with "PATH: reason" in err.
 */
#ifndef GPUQ_CLIENT_NPY_H
#define GPUQ_CLIENT_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "header.h"

#define NPY_MAX_HEADER (1u << 16)

typedef struct npy_array {
    gpuq_dtype dtype;
    int ndim;          /* 1 or 2 */
    uint64_t shape[2]; /* shape[1] is 1 for 1-D */
    void *data;        /* owned: npy_free (NULL after npy_open until the caller reads it) */
    size_t nbytes;     /* the data's size */
    /* npy_open: the file, open until npy_free, and where its data starts */
    bool open;
    int fd;
    uint64_t data_off;
    const char *path; /* borrowed, for messages */
} npy_array;

/* The whole file: header and data (malloc'd). */
int npy_read(const char *path, npy_array *a, char *err, size_t errcap);
/* The header only, checked as npy_read checks it (dtype, order, rank, and
 * the data size the shape implies equal to what the file holds); a->data
 * stays NULL and the file stays open (a->open) for npy_load. path is
 * borrowed until npy_free. On failure nothing is left open. */
int npy_open(const char *path, npy_array *a, char *err, size_t errcap);
/* An opened array's a->nbytes of data read(2) straight into dst (the
 * caller's memory: a shared-memory arena, say), with no copy in between.
 * GPUQ_E_IO when the file cannot be read or is shorter than it was. */
int npy_load(const npy_array *a, void *dst, char *err, size_t errcap);
/* Write data (borrowed) as an .npy 1.0 file. */
int npy_write(const char *path, gpuq_dtype dt, int ndim, const uint64_t *shape, const void *data,
              char *err, size_t errcap);
/* Free the data and close the file, whichever a holds. */
void npy_free(npy_array *a);

/* Parse a header dict (text[len]) into dtype/ndim/shape; exposed for tests. */
int npy_parse_header(const char *text, size_t len, const char *path, npy_array *a, char *err,
                     size_t errcap);

#endif
