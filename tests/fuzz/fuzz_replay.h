/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_replay.h - the main() side shared by the *_replay unit tests: each
 * libFuzzer target built without libFuzzer, run over built-in inputs and the
 * checked-in corpus files named on the command line, every input also cut
 * at every byte (an exact-size heap copy each time, so ASan sees any read
 * past the end), and the violation report the targets share.
 */
#ifndef GPUQ_TESTS_FUZZ_REPLAY_H
#define GPUQ_TESTS_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: print "fuzz: violation: ..." and abort(), which is
 * what libFuzzer reports as a crash and ctest as a failure. */
__attribute__((noreturn, format(printf, 1, 2))) void fuzz_fail(const char *fmt, ...);

/* Make the file behind fd hold exactly data[0..size) (a memfd the target
 * reads by path); fuzz_fail on an error. */
void fuzz_put_file(int fd, const uint8_t *data, size_t size);

/* The target over b[0..len) and, when all_prefixes, over each shorter
 * prefix too. */
void fuzz_replay_input(const uint8_t *b, size_t len, int all_prefixes);

/* The target over each file argv[1..argc) (at most max_len bytes of it; a
 * longer file is an error), every prefix of files up to prefix_max bytes.
 * Returns the number of files, or -1 after printing why a file could not be
 * read. */
int fuzz_replay_files(int argc, char **argv, size_t max_len, size_t prefix_max);

/* A built-in input of a replay main: FUZZ_IN("what it is", "its bytes"). */
typedef struct fuzz_input {
    const char *name;
    const char *b;
    size_t len;
} fuzz_input;
#define FUZZ_IN(nm, lit)                                                                           \
    {                                                                                              \
        nm, lit, sizeof(lit) - 1                                                                   \
    }

/* The target over each of in[0..n) and every prefix of it. */
void fuzz_replay_builtin(const fuzz_input *in, size_t n);

/* Takes a leading "--corpus" off argv (argv[0] kept): 1 when it was there. */
int fuzz_take_corpus_flag(int *argc, char ***argv);

#endif
