/* corpus_writer.h - the checked-in seed corpora are made by programs
 * (gen_corpus_*.c) that build each input with the project's own encoders,
 * so a corpus can be rebuilt when the protocol or a format changes and a
 * test can tell when it has gone stale.
 *
 *   gen_corpus_X DIR          write every input into DIR (made if missing),
 *                             and delete files there that are neither
 *                             generated nor named found-* (inputs a fuzzer
 *                             found, added by hand)
 *   gen_corpus_X --check DIR  exit 1 unless DIR holds exactly those files
 *                             (found-* aside) with exactly those bytes
 *
 * A last argument DICT writes (or checks) the target's libFuzzer dictionary
 * too, for generators that make one (corpus_dict).
 */
#ifndef GPUQ_TESTS_FUZZ_CORPUS_WRITER_H
#define GPUQ_TESTS_FUZZ_CORPUS_WRITER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct corpus corpus;

/* One input called name ([a-z0-9-], unique; not found-*). */
void corpus_add(corpus *c, const char *name, const void *data, size_t len);
/* The same with a printf-made name. */
void corpus_addf(corpus *c, const void *data, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One dictionary entry: its bytes (escaped as libFuzzer wants them). Entries
 * repeated are written once. */
void corpus_dict(corpus *c, const void *data, size_t len);
/* The same for a NUL-terminated word. */
void corpus_dict_word(corpus *c, const char *word);
/* A comment line in the dictionary. */
void corpus_dict_comment(corpus *c, const char *text);

/* main() of a generator: parses the arguments above, runs gen, reports. */
int corpus_main(int argc, char **argv, const char *what, void (*gen)(corpus *c));

#endif
