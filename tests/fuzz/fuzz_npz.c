/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_npz.c - libFuzzer target for gpuqctl's .npz reader (client/cli/npz.c)
 * and its hook in the .npy reader (npy.c's npy_open of "X.npz:NAME"), which
 * parse archives a user names: the end of central directory record and
 * its ZIP64 twin, the central directory's entries and their ZIP64 extra
 * fields, a member's local header, and its data, stored or deflated.
 *
 * An input is a whole archive: it is written to a memfd, reached through a
 * symbolic link whose name ends in ".npz", and read four ways: npz_open_fd
 * of the only member and of the member "a", and npy_read of "X.npz" and
 * "X.npz:a". Beyond "never crash" it checks, and aborts on a breach
 * (fuzz_fail):
 *  - a refusal: a code of npz.h's and npy.h's list, a "LABEL: reason"
 *    message, nothing left open or allocated;
 *  - an accepted member: read in place (stored) lies inside the input and
 *    its bytes' CRC-32 is the one a directory entry of the input gives; an
 *    inflated one is exactly m.size bytes in a memfd of its own;
 *  - npy_read of an archive's member accepts it exactly when npy_read of
 *    the member's bytes as a file of their own does, as the same array
 *    (dtype, shape, data), and is refused with "X.npz: ..." otherwise.
 *
 * Built with -DGPUQ_FUZZ_REPLAY (fuzz_npz_replay, a unit test) it gets a
 * main() that replays built-in inputs and the files named on the command
 * line, each cut at every byte; after --corpus it then fails unless the
 * files reached an accepted stored and deflated member, one behind a ZIP64
 * end record, an array read through npy_read, and a refusal.
 */
#include "npz.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "errors.h"
#include "fuzz_replay.h"
#include "npy.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The input (a memfd behind link_path, "....npz") and a member's bytes. */
static int in_fd = -1, mem_fd = -1;
static char dir[64], link_path[96], sel_path[100], mem_path[64];

/* What the inputs reached (the replay test's floor). */
static unsigned long n_stored, n_inflated, n_zip64, n_array, n_refused;

static void cleanup(void)
{
    if (link_path[0])
        unlink(link_path);
    if (dir[0])
        rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    in_fd = memfd_create("fuzz_npz_in", 0);
    mem_fd = memfd_create("fuzz_npz_member", 0);
    if (in_fd < 0 || mem_fd < 0)
        fuzz_fail("memfd_create failed");
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fuzz_npz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        fuzz_fail("mkdtemp %s failed", dir);
    char target[64];
    snprintf(target, sizeof target, "/proc/self/fd/%d", in_fd);
    snprintf(link_path, sizeof link_path, "%s/in.npz", dir);
    snprintf(sel_path, sizeof sel_path, "%s:a", link_path);
    snprintf(mem_path, sizeof mem_path, "/proc/self/fd/%d", mem_fd);
    if (symlink(target, link_path) != 0)
        fuzz_fail("symlink %s failed", link_path);
    atexit(cleanup);
    return 0;
}

static void check_refusal(const char *label, int rc, const char *err)
{
    static const int codes[] = {GPUQ_E_BAD_ARGUMENT,  GPUQ_E_BAD_DTYPE, GPUQ_E_BAD_SHAPE,
                                GPUQ_E_SIZE_MISMATCH, GPUQ_E_TOO_LARGE, GPUQ_E_IO,
                                GPUQ_E_NO_MEMORY};
    bool known = false;
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++)
        known = known || rc == codes[k];
    if (!known)
        fuzz_fail("%s: refused with %d", label, rc);
    size_t pl = strlen(label);
    if (strncmp(err, label, pl) != 0 || strncmp(err + pl, ": ", 2) != 0 || !err[pl + 2])
        fuzz_fail("error is not \"%s: reason\": %s", label, err);
    n_refused++;
}

/* Does a central directory entry of data[0..size) give crc? (Its fixed
 * part: signature, then the CRC at byte 16.) */
static bool some_entry_has_crc(const uint8_t *data, size_t size, uint32_t crc)
{
    for (size_t k = 0; k + 20 <= size; k++)
        if (memcmp(data + k, "PK\x01\x02", 4) == 0 &&
            ((uint32_t)data[k + 16] | (uint32_t)data[k + 17] << 8 | (uint32_t)data[k + 18] << 16 |
             (uint32_t)data[k + 19] << 24) == crc)
            return true;
    return false;
}

/* The member m (of data[0..size)) copied into mem_fd, checked. */
static void check_member(const uint8_t *data, size_t size, const npz_member *m)
{
    uint8_t *buf = malloc(m->size ? (size_t)m->size : 1);
    if (!buf)
        fuzz_fail("out of memory");
    if (m->fd == in_fd) {
        if (m->own || m->off > size || m->size > size - m->off)
            fuzz_fail("a stored member [%llu, +%llu) outside an input of %zu bytes",
                      (unsigned long long)m->off, (unsigned long long)m->size, size);
        memcpy(buf, data + m->off, (size_t)m->size);
        n_stored++;
    } else {
        struct stat st;
        if (!m->own || m->off != 0 || fstat(m->fd, &st) != 0 || (uint64_t)st.st_size != m->size ||
            pread(m->fd, buf, (size_t)m->size, 0) != (ssize_t)m->size)
            fuzz_fail("an inflated member is not its %llu bytes in a file of its own",
                      (unsigned long long)m->size);
        n_inflated++;
    }
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)m->size);
    if (!some_entry_has_crc(data, size, crc))
        fuzz_fail("a member's CRC-32 %08x is no directory entry's", crc);
    if (memmem(data, size, "PK\x06\x06", 4))
        n_zip64++;
    fuzz_put_file(mem_fd, buf, (size_t)m->size);
    free(buf);
}

/* npy_read of path (the archive's member) against the member's bytes as a
 * file of their own (mem_path, or NULL when npz refused the member). */
static void check_npy(const char *path, bool have_member)
{
    npy_array a, b;
    char err[512], err2[512];
    int rc = npy_read(path, &a, err, sizeof err);
    int rc2 = have_member ? npy_read(mem_path, &b, err2, sizeof err2) : -1;
    if (rc != 0) {
        check_refusal(path, rc, err);
        if (a.data)
            fuzz_fail("npy_read refused %s and kept its data", path);
        if (rc2 == 0)
            fuzz_fail("%s refused (%s), its member's bytes accepted", path, err);
    } else {
        if (rc2 != 0)
            fuzz_fail("%s accepted, its member's bytes refused", path);
        if (a.dtype != b.dtype || a.ndim != b.ndim || a.shape[0] != b.shape[0] ||
            a.shape[1] != b.shape[1] || a.nbytes != b.nbytes ||
            memcmp(a.data, b.data, a.nbytes) != 0)
            fuzz_fail("%s gives another array than its member's bytes", path);
        n_array++;
    }
    if (rc == 0)
        npy_free(&a);
    if (rc2 == 0)
        npy_free(&b);
}

static void one_way(const uint8_t *data, size_t size, const char *name, const char *path)
{
    npz_member m;
    char err[512];
    const char *label = name ? "archive:a" : "archive";
    memset(&m, 0x5a, sizeof m);
    int rc = npz_open_fd(in_fd, size, label, name, &m, err, sizeof err);
    if (rc != 0) {
        check_refusal(label, rc, err);
        if (m.fd != -1 || m.own)
            fuzz_fail("npz_open_fd refused and left fd %d (own %d)", m.fd, (int)m.own);
    } else {
        check_member(data, size, &m);
        npz_close(&m);
        if (m.fd != -1)
            fuzz_fail("npz_close left fd %d", m.fd);
    }
    check_npy(path, rc == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (in_fd < 0)
        LLVMFuzzerInitialize(NULL, NULL);
    fuzz_put_file(in_fd, data, size);
    one_way(data, size, NULL, link_path);
    one_way(data, size, "a", sel_path);
    return 0;
}

#ifdef GPUQ_FUZZ_REPLAY

static const fuzz_input builtin[] = {
    FUZZ_IN("empty", ""),
    FUZZ_IN("an end record, no members", "PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
    FUZZ_IN("one member claimed, no directory", "PK\x05\x06\0\0\0\0\1\0\1\0\0\0\0\0\0\0\0\0\0\0"),
    FUZZ_IN("directory past the end", "PK\x05\x06\0\0\0\0\1\0\1\0\x2e\0\0\0\xff\xff\xff\x7f\0\0"),
    FUZZ_IN("comment past the end", "PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x10\0"),
    FUZZ_IN("ZIP64 fields, no locator",
            "PK\x05\x06\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\0\0"),
    FUZZ_IN("ZIP64 locator to nowhere",
            "PK\x06\x07\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\x7f\1\0\0\0"
            "PK\x05\x06\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\0\0"),
};

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    size_t n = sizeof builtin / sizeof builtin[0];
    fuzz_replay_builtin(builtin, n);
    n_stored = n_inflated = n_zip64 = n_array = n_refused = 0;
    bool corpus = fuzz_take_corpus_flag(&argc, &argv);
    int files = fuzz_replay_files(argc, argv, 1 << 20, 4096);
    if (files < 0)
        return 1;
    int missing = 0;
    if (corpus) {
        const struct {
            const char *what;
            unsigned long n;
        } floor[] = {{"a stored member accepted", n_stored},
                     {"a deflated member accepted", n_inflated},
                     {"a member behind a ZIP64 end record accepted", n_zip64},
                     {"an array read through npy_read", n_array},
                     {"a refusal", n_refused}};
        for (size_t k = 0; k < sizeof floor / sizeof floor[0]; k++)
            if (!floor[k].n) {
                fprintf(stderr, "fuzz_npz_replay: the corpus reached no %s\n", floor[k].what);
                missing++;
            }
    }
    printf("fuzz_npz_replay: %zu built-in inputs and %d files: %s\n", n, files,
           missing ? "FAILED" : "ok");
    return missing ? 1 : 0;
}
#endif
