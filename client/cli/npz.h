/* SPDX-License-Identifier: Apache-2.0 */
/* npz.h - NumPy .npz archives for gpuqctl: one member of the ZIP file that
 * np.savez (members stored) or np.savez_compressed (members deflated)
 * writes, found so that npy.c reads it as it reads an .npy file.
 *
 * An input "FILE.npz:NAME" is the member NAME.npy (or NAME as is) of
 * FILE.npz; "FILE.npz" alone is its only member (an archive of several is
 * refused with their names). Happy path: the end of central directory
 * record (and, where a field is saturated, the ZIP64 one) gives the central
 * directory, which is read whole (at most NPZ_MAX_CD bytes) and walked
 * entry by entry; the chosen entry's local header gives where its data
 * starts. A stored member is read in place (its CRC-32 checked once, on
 * open); a deflated one is inflated (zlib) into an anonymous memory file
 * (memfd), its size and CRC-32 checked against the central directory, and
 * read from there. ZIP64 sizes and offsets (the 0x0001 extra field, which
 * np.savez writes), data descriptors (flag bit 3: the central directory's
 * sizes are used) and archive comments are handled.
 *
 * Failures (GPUQ_E_* with "PATH: reason" in err, PATH as the user wrote
 * it): not a ZIP archive, any offset or size outside the file or the
 * record holding it (checked before use, in 64 bits, without overflow), an
 * encrypted, multi-disk or otherwise compressed member (its method named),
 * a member whose CRC-32 or inflated size differs from the directory's
 * (damaged), no member of that name (the names it holds listed), and a
 * deflated member that cannot be held in memory (GPUQ_E_NO_MEMORY).
 * Nothing is allocated from a size the file claims without that size being
 * bounded first (the central directory by NPZ_MAX_CD and the file, an
 * inflated member by its compressed size times deflate's greatest ratio).
 */
#ifndef GPUQ_CLIENT_NPZ_H
#define GPUQ_CLIENT_NPZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest central directory read (1 MiB: about 10000 members). */
#define NPZ_MAX_CD (1u << 20)
/* Deflate's greatest compression ratio (RFC 1951: 258 bytes from a
 * 2-bit code, about 1032:1); an inflated size above it is damage. */
#define NPZ_MAX_RATIO 1032u

/* One member, opened: its bytes are fd's [off, off + size). */
typedef struct npz_member {
    int fd;        /* the archive (stored) or a memfd (inflated); -1 when closed */
    bool own;      /* fd is closed by npz_close */
    uint64_t off;  /* where the member's uncompressed bytes start in fd */
    uint64_t size; /* the member's uncompressed size */
} npz_member;

/* Does path name an .npz input ("X.npz" or "X.npz:NAME")? */
bool npz_is_path(const char *path);
/* Open the member path names (npz_is_path). path is borrowed for messages.
 * On failure nothing is left open. */
int npz_open(const char *path, npz_member *m, char *err, size_t errcap);
/* The same on an open archive fd (borrowed) of fsize bytes: the member
 * called name (NULL: the only one). label is for messages. A stored
 * member's m->fd is fd itself (m->own false); an inflated one's is a memfd
 * of its own (m->own true). */
int npz_open_fd(int fd, uint64_t fsize, const char *label, const char *name, npz_member *m,
                char *err, size_t errcap);
/* Close what m owns (idempotent). */
void npz_close(npz_member *m);

/* Read exactly len bytes of fd into dst, at offset off (pread(2)) or, with
 * off NPZ_STREAM, from the current position (read(2)); EINTR retried, any
 * length: 0, or -1 (errno set; 0 for a file shorter than that). npy.c's
 * reads too. */
#define NPZ_STREAM UINT64_MAX
int npz_read_exact(int fd, void *dst, uint64_t len, uint64_t off);

#endif
