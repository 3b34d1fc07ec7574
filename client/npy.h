/* npy.h - NumPy .npy files for gpuqctl: float32/float64, C order, 1-D or 2-D.
 *
 * Reads format versions 1.0, 2.0 and 3.0; writes 1.0. The header dict is
 * parsed as bounded Python-literal text, and the data size implied by the
 * shape is checked against the file's size before anything is allocated.
 * Errors return a GPUQ_E_* code with "PATH: reason" in err.
 */
#ifndef GPUQ_CLIENT_NPY_H
#define GPUQ_CLIENT_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "header.h"

#define NPY_MAX_HEADER (1u << 16)

typedef struct npy_array {
    gpuq_dtype dtype;
    int ndim;          /* 1 or 2 */
    uint64_t shape[2]; /* shape[1] is 1 for 1-D */
    void *data;        /* owned: npy_free */
    size_t nbytes;
} npy_array;

int npy_read(const char *path, npy_array *a, char *err, size_t errcap);
/* Write data (borrowed) as an .npy 1.0 file. */
int npy_write(const char *path, gpuq_dtype dt, int ndim, const uint64_t *shape, const void *data,
              char *err, size_t errcap);
void npy_free(npy_array *a);

/* Parse a header dict (text[len]) into dtype/ndim/shape; exposed for tests. */
int npy_parse_header(const char *text, size_t len, const char *path, npy_array *a, char *err,
                     size_t errcap);

#endif
