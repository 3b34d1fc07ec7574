/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_npy.c - libFuzzer target for gpuqctl's .npy reader (client/cli/npy.c),
 * which parses files a user names: the magic and version, the header
 * length, the header dict (descr, fortran_order, shape as Python literal
 * text), and the data size the shape implies against the file's size.
 *
 * An input is a whole file: it is written to a memfd and read through its
 * /proc/self/fd path, as gpuqctl reads a path. The bytes are also given to
 * npy_parse_header as dict text on their own. Beyond "never crash" it
 * checks, and aborts on a breach (fuzz_fail):
 *  - a refused file: a code of npy.h's list, a "PATH: reason" message, no
 *    data left allocated;
 *  - an accepted file: float32 or float64 on the wire, rank 1 or 2
 *    (shape[1] = 1 for rank 1), header inside the file, shape[0] *
 *    shape[1] * the file's element size (in 128 bits) = exactly the bytes
 *    after the header, nbytes the same in the wire's element size, and
 *    for float32/float64 in C order the data equal to those bytes (other
 *    element types and Fortran order are converted: test_e2e_paths checks
 *    their values);
 *  - npy_write of what was read makes a file (data on a 64-byte boundary)
 *    that npy_read reads back to the same dtype, rank, shape and data;
 *  - a dict npy_parse_header accepts has a supported dtype and rank;
 *  - the same bytes as a stream (npy_open_stream and npy_load, as gpuqctl
 *    reads stdin) are accepted exactly when the file is, as the same
 *    array; refused with a "stream: reason" message.
 *
 * Built with -DGPUQ_FUZZ_REPLAY (fuzz_npy_replay, a unit test) it gets a
 * main() that replays built-in inputs and the files named on the command
 * line, each cut at every byte; after --corpus it then fails unless the
 * files reached an accepted float32 and float64 file of rank 1 and 2 and
 * each class of refusal.
 */
#include "npy.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "errors.h"
#include "fuzz_replay.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The input file and the re-written one. */
static int in_fd = -1, out_fd = -1;
static char in_path[64], out_path[64];

/* What the inputs reached (the replay test's floor). */
static unsigned long n_ok[3][3]; /* [dtype][ndim] */
static unsigned long n_refused[32];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    in_fd = memfd_create("fuzz_npy_in", 0);
    out_fd = memfd_create("fuzz_npy_out", 0);
    if (in_fd < 0 || out_fd < 0)
        fuzz_fail("memfd_create failed");
    snprintf(in_path, sizeof in_path, "/proc/self/fd/%d", in_fd);
    snprintf(out_path, sizeof out_path, "/proc/self/fd/%d", out_fd);
    return 0;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static void refused(const char *path, int rc, const npy_array *a, const char *err)
{
    static const int codes[] = {GPUQ_E_BAD_ARGUMENT,  GPUQ_E_BAD_DTYPE, GPUQ_E_BAD_SHAPE,
                                GPUQ_E_SIZE_MISMATCH, GPUQ_E_TOO_LARGE, GPUQ_E_IO,
                                GPUQ_E_NO_MEMORY};
    bool known = false;
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++)
        known = known || rc == codes[k];
    if (!known)
        fuzz_fail("npy_read returned %d", rc);
    size_t pl = strlen(path);
    if (strncmp(err, path, pl) != 0 || strncmp(err + pl, ": ", 2) != 0 || !err[pl + 2])
        fuzz_fail("npy_read error is not \"PATH: reason\": %s", err);
    if (a->data)
        fuzz_fail("npy_read refused a file and kept its data");
    n_refused[-rc]++;
}

/* a is what npy_read made of data[0..size). */
static void accepted(const uint8_t *data, size_t size, const npy_array *a)
{
    typedef unsigned __int128 u128;
    if ((a->dtype != GPUQ_DT_F32 && a->dtype != GPUQ_DT_F64) || a->ndim < 1 || a->ndim > 2 ||
        (a->ndim == 1 && a->shape[1] != 1))
        fuzz_fail("accepted dtype %d, rank %d, shape[1] %llu", (int)a->dtype, a->ndim,
                  (unsigned long long)a->shape[1]);
    n_ok[a->dtype][a->ndim]++;
    if (size < 10 || memcmp(data, "\x93NUMPY", 6) != 0 || data[6] < 1 || data[6] > 3)
        fuzz_fail("accepted a file without the magic of version 1, 2 or 3");
    size_t off = data[6] == 1 ? 10 : 12;
    uint64_t hlen = le(data + 8, data[6] == 1 ? 2 : 4);
    if (size < off || hlen > size - off)
        fuzz_fail("accepted a header of %llu bytes in a file of %zu", (unsigned long long)hlen,
                  size);
    /* the file holds shape times its own element size; nbytes is the
     * converted (wire) size */
    u128 want = (u128)a->shape[0] * a->shape[1] * gpuq_dtype_size(a->dtype);
    u128 file = (u128)a->shape[0] * a->shape[1] * a->file_esize;
    if ((a->file_esize != 1 && a->file_esize != 2 && a->file_esize != 4 && a->file_esize != 8) ||
        want != a->nbytes || file != a->file_nbytes || a->file_nbytes != size - off - hlen)
        fuzz_fail("shape [%llu, %llu] of %u-byte elements (%zu on the wire), nbytes %zu, %llu "
                  "data bytes in the file",
                  (unsigned long long)a->shape[0], (unsigned long long)a->shape[1], a->file_esize,
                  gpuq_dtype_size(a->dtype), a->nbytes, (unsigned long long)(size - off - hlen));
    /* float32/float64 in C order are the file's bytes; the rest converted */
    bool as_is = !a->fortran && (a->elem == NPY_EL_F4 || a->elem == NPY_EL_F8);
    if (!a->data || (as_is && memcmp(a->data, data + off + hlen, a->nbytes) != 0))
        fuzz_fail("the data read differs from the file's");

    /* written back by npy_write, read again */
    char err[512];
    npy_array b;
    if (npy_write(out_path, a->dtype, a->ndim, a->shape, a->data, err, sizeof err) != 0)
        fuzz_fail("npy_write of an accepted array failed: %s", err);
    off_t out_size = lseek(out_fd, 0, SEEK_END);
    if (out_size < 0 || (size_t)out_size < a->nbytes || ((size_t)out_size - a->nbytes) % 64 != 0)
        fuzz_fail("npy_write: %lld bytes for %zu of data: not on a 64-byte boundary",
                  (long long)out_size, a->nbytes);
    int rc = npy_read(out_path, &b, err, sizeof err);
    if (rc != 0)
        fuzz_fail("npy_read of npy_write's file failed: %s", err);
    if (b.dtype != a->dtype || b.ndim != a->ndim || b.shape[0] != a->shape[0] ||
        b.shape[1] != a->shape[1] || b.nbytes != a->nbytes ||
        memcmp(b.data, a->data, a->nbytes) != 0)
        fuzz_fail("npy_write + npy_read gives another array");
    npy_free(&b);
}

/* The same bytes read as a stream (stdin's way: npy_open_stream, then
 * npy_load, in order, no size known ahead) are accepted exactly when the
 * file was (file_a, or NULL when refused), as the same array. */
static void as_stream(size_t size, const npy_array *file_a)
{
    npy_array s;
    char err[512];
    if (lseek(in_fd, 0, SEEK_SET) != 0)
        fuzz_fail("lseek on the input memfd failed");
    int rc = npy_open_stream(in_fd, "stream", &s, err, sizeof err);
    uint8_t *buf = NULL;
    if (rc == 0) {
        /* a header that claims more than the input holds: the load fails
         * after at most size file bytes, which convert to at most that
         * many elements of the wire's size (8 bytes for each 1-byte bool
         * or integer): room for those is enough */
        size_t most = (size / s.file_esize + 1) * gpuq_dtype_size(s.dtype);
        buf = malloc(s.nbytes <= most ? s.nbytes + 1 : most + 1);
        if (!buf)
            fuzz_fail("out of memory");
        rc = npy_load(&s, buf, err, sizeof err);
    }
    if (rc != 0 && strncmp(err, "stream: ", 8) != 0)
        fuzz_fail("stream error is not \"stream: reason\": %s", err);
    if ((rc == 0) != (file_a != NULL))
        fuzz_fail("the file was %s, the same bytes as a stream %s (%s)",
                  file_a ? "accepted" : "refused", rc ? "refused" : "accepted", err);
    if (rc == 0 && (s.dtype != file_a->dtype || s.ndim != file_a->ndim ||
                    s.shape[0] != file_a->shape[0] || s.shape[1] != file_a->shape[1] ||
                    s.nbytes != file_a->nbytes || memcmp(buf, file_a->data, s.nbytes) != 0))
        fuzz_fail("the stream gives another array than the file");
    free(buf);
    npy_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array a;
    char err[512];

    if (in_fd < 0)
        LLVMFuzzerInitialize(NULL, NULL);
    fuzz_put_file(in_fd, data, size);
    memset(&a, 0x5a, sizeof a);
    int rc = npy_read(in_path, &a, err, sizeof err);
    if (rc != 0)
        refused(in_path, rc, &a, err);
    else
        accepted(data, size, &a);
    as_stream(size, rc == 0 ? &a : NULL);
    npy_free(&a);

    /* the bytes as a header dict on their own */
    memset(&a, 0, sizeof a);
    rc = npy_parse_header((const char *)data, size, "dict", &a, err, sizeof err);
    if (rc == 0 && ((a.dtype != GPUQ_DT_F32 && a.dtype != GPUQ_DT_F64) || a.ndim < 1 ||
                    a.ndim > 2 || (a.ndim == 1 && a.shape[1] != 1)))
        fuzz_fail("npy_parse_header accepted dtype %d, rank %d", (int)a.dtype, a.ndim);
    return 0;
}

#ifdef GPUQ_FUZZ_REPLAY

static const fuzz_input builtin[] = {
    FUZZ_IN("empty", ""),
    FUZZ_IN("magic only", "\x93NUMPY"),
    FUZZ_IN("v1 hlen past the end", "\x93NUMPY\x01\x00\xff\xff{}"),
    FUZZ_IN("v2 hlen 4G", "\x93NUMPY\x02\x00\xff\xff\xff\xff{}"),
    FUZZ_IN("v3 cut in the length", "\x93NUMPY\x03\x00\x10"),
    FUZZ_IN("rank 1, 3 doubles",
            "\x93NUMPY\x01\x00\x3a\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n"
            "AAAAAAAABBBBBBBBCCCCCCCC"),
    FUZZ_IN("dict only", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}"),
};

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    size_t n = sizeof builtin / sizeof builtin[0];
    fuzz_replay_builtin(builtin, n);
    memset(n_ok, 0, sizeof n_ok);
    memset(n_refused, 0, sizeof n_refused);
    bool corpus = fuzz_take_corpus_flag(&argc, &argv);
    int files = fuzz_replay_files(argc, argv, 1 << 20, 4096);
    if (files < 0)
        return 1;
    int missing = 0;
    if (corpus) {
        for (int dt = GPUQ_DT_F32; dt <= GPUQ_DT_F64; dt++)
            for (int nd = 1; nd <= 2; nd++)
                if (!n_ok[dt][nd]) {
                    fprintf(stderr, "fuzz_npy_replay: no %s file of rank %d was accepted\n",
                            gpuq_dtype_name((gpuq_dtype)dt), nd);
                    missing++;
                }
        static const int classes[] = {GPUQ_E_BAD_ARGUMENT, GPUQ_E_BAD_DTYPE, GPUQ_E_BAD_SHAPE,
                                      GPUQ_E_SIZE_MISMATCH};
        for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++)
            if (!n_refused[-classes[k]]) {
                fprintf(stderr, "fuzz_npy_replay: no file was refused with %s\n",
                        gpuq_errname(classes[k]));
                missing++;
            }
    }
    printf("fuzz_npy_replay: %zu built-in inputs and %d files: %s\n", n, files,
           missing ? "FAILED" : "ok");
    return missing ? 1 : 0;
}
#endif
