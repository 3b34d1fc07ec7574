/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_replay.c - see fuzz_replay.h. */
#include "fuzz_replay.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz: violation: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    abort();
}

void fuzz_replay_input(const uint8_t *b, size_t len, int all_prefixes)
{
    for (size_t k = all_prefixes ? 0 : len; k <= len; k++) {
        uint8_t *part = malloc(k ? k : 1);
        if (!part)
            fuzz_fail("out of memory");
        memcpy(part, b, k);
        LLVMFuzzerTestOneInput(part, k);
        free(part);
    }
}

int fuzz_replay_files(int argc, char **argv, size_t max_len, size_t prefix_max)
{
    uint8_t *buf = malloc(max_len + 1);
    if (!buf)
        fuzz_fail("out of memory");
    for (int a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) {
            perror(argv[a]);
            free(buf);
            return -1;
        }
        size_t len = fread(buf, 1, max_len + 1, f);
        int err = ferror(f);
        fclose(f);
        if (err || len > max_len) {
            fprintf(stderr, "%s: %s\n", argv[a],
                    err ? "read error" : "longer than the target's -max_len");
            free(buf);
            return -1;
        }
        fuzz_replay_input(buf, len, len <= prefix_max);
    }
    free(buf);
    return argc - 1;
}

void fuzz_put_file(int fd, const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0)
        fuzz_fail("ftruncate failed");
    for (size_t done = 0; done < size;) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        if (n <= 0)
            fuzz_fail("pwrite failed");
        done += (size_t)n;
    }
}

void fuzz_replay_builtin(const fuzz_input *in, size_t n)
{
    for (size_t k = 0; k < n; k++)
        fuzz_replay_input((const uint8_t *)in[k].b, in[k].len, 1);
}

int fuzz_take_corpus_flag(int *argc, char ***argv)
{
    if (*argc < 2 || strcmp((*argv)[1], "--corpus") != 0)
        return 0;
    (*argv)[1] = (*argv)[0];
    (*argc)--;
    (*argv)++;
    return 1;
}
