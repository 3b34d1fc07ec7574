/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_fields.h - field tables for the fuzz targets' round-trip invariants.
 *
 * A round trip (request encode -> decode, config print -> parse) is checked
 * field by field from a table that names every field of the struct with a
 * rule for it. So that a field added to the struct later cannot be left out
 * of the comparison silently, fuzz_fields_check (run once per target, at
 * start-up) proves the table complete: its entries must tile the struct in
 * declaration order, each at the offset that alignment alone gives after the
 * previous one, and end where the struct ends; and where the compiler has
 * __builtin_dump_struct (clang: the fuzz builds), the names the compiler
 * lists for the struct must be exactly the table's. A field added where
 * padding was is caught by the second check; anywhere else by both.
 */
#ifndef GPUQ_TESTS_FUZZ_FIELDS_H
#define GPUQ_TESTS_FUZZ_FIELDS_H

#include <stddef.h>
#include <stdint.h>

typedef struct fuzz_field {
    const char *name;
    size_t off, size, align;
    uint32_t rule, arg; /* the table's own meaning */
} fuzz_field;

#define FUZZ_FIELD(type, member, rule, arg)                                                        \
    {                                                                                              \
#member, offsetof(type, member), sizeof(((type *)0)->member),                              \
            __alignof__(((type *)0)->member), (rule), (arg)                                        \
    }

#if defined(__has_builtin)
#if __has_builtin(__builtin_dump_struct)
#define FUZZ_HAVE_DUMP_STRUCT 1
#endif
#endif

/* printf-like sink for __builtin_dump_struct; the text collects in one
 * buffer that fuzz_dump_take returns (and resets). */
int fuzz_dump_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *fuzz_dump_take(void);

/* FUZZ_DEFINE_DUMP(gpuq_request, dump_request) defines
 * static const char *dump_request(void): the compiler's listing of a zeroed
 * gpuq_request, or NULL where the compiler has no __builtin_dump_struct. */
#ifdef FUZZ_HAVE_DUMP_STRUCT
#define FUZZ_DEFINE_DUMP(type, fn)                                                                 \
    static const char *fn(void)                                                                    \
    {                                                                                              \
        static type zero;                                                                          \
        (void)fuzz_dump_take();                                                                    \
        __builtin_dump_struct(&zero, &fuzz_dump_printf);                                           \
        return fuzz_dump_take();                                                                   \
    }
#else
#define FUZZ_DEFINE_DUMP(type, fn)                                                                 \
    static const char *fn(void)                                                                    \
    {                                                                                              \
        return NULL;                                                                               \
    }
#endif

/* Abort (fuzz_fail) unless t[0..n) covers the struct called sname of
 * ssize bytes and alignment salign, as described above; dump is the
 * compiler's listing or NULL. */
void fuzz_fields_check(const char *sname, size_t ssize, size_t salign, const fuzz_field *t,
                       size_t n, const char *dump);

/* Bytes of a and b at field f are equal. */
int fuzz_field_eq(const fuzz_field *f, const void *a, const void *b);

#endif
