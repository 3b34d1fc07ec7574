/* SPDX-License-Identifier: Apache-2.0 */
/* gen_corpus_npy.c - writes corpus_npy/, fuzz_npy's seed corpus and its
 * dictionary npy.dict (corpus_writer.h says how to run it).
 *
 * Valid files come from gpuqctl's own writer (npy_write: float32 and
 * float64, rank 1 and 2, empty arrays) and, for what it does not write, are
 * built the way numpy.lib.format does (versions 2.0 and 3.0, double quotes,
 * keys in another order, Python 2 longs, no trailing comma). Hostile files
 * break one thing each: dtypes gpuqctl does not take (big-endian, ints,
 * complex, object), Fortran order, rank 0 and 3 and 9, shapes that
 * overflow or do not fit the file, data one byte short or long, header
 * lengths past the end, missing, repeated and unknown keys, escapes, bad
 * magic and versions, truncation inside each field. The names carry no
 * .npy suffix (the repository ignores *.npy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "corpus_writer.h"
#include "npy.h"

static corpus *C;

/* An .npy of version major with header dict text (padded with spaces and a
 * newline to a 64-byte boundary when pad) and data bytes of a pattern. */
static void npyn(const char *name, int major, const char *dict, size_t dl, int pad, size_t data)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t hlen = dl + (pad ? 1 : 0);
    if (pad)
        hlen += (64 - (pre + hlen) % 64) % 64;
    uint8_t *b = malloc(pre + hlen + data + 1);
    if (!b)
        abort();
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    for (size_t k = 0; k < pre - 8; k++)
        b[8 + k] = (uint8_t)(hlen >> (8 * k));
    memcpy(b + pre, dict, dl);
    if (pad) {
        memset(b + pre + dl, ' ', hlen - dl - 1);
        b[pre + hlen - 1] = '\n';
    }
    for (size_t k = 0; k < data; k++)
        b[pre + hlen + k] = (uint8_t)(k * 37 + 11);
    corpus_add(C, name, b, pre + hlen + data);
    free(b);
}

static void npy(const char *name, int major, const char *dict, int pad, size_t data)
{
    npyn(name, major, dict, strlen(dict), pad, data);
}

/* What npy_write makes of the array, read back from a memfd. */
static void written(const char *name, gpuq_dtype dt, int ndim, uint64_t r, uint64_t c)
{
    uint64_t shape[2] = {r, c};
    size_t n = (size_t)(r * (ndim == 2 ? c : 1)), es = gpuq_dtype_size(dt);
    char path[64], err[256];
    uint8_t *data = malloc(n * es + 1), *file;
    int fd = memfd_create("gen_npy", 0);
    if (!data || fd < 0)
        abort();
    for (size_t k = 0; k < n; k++) {
        if (dt == GPUQ_DT_F32) {
            float v = (float)k * 0.5f - 1.0f;
            memcpy(data + 4 * k, &v, 4);
        } else {
            double v = (double)k / 3.0 - 1.0;
            memcpy(data + 8 * k, &v, 8);
        }
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (npy_write(path, dt, ndim, shape, data, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    off_t size = lseek(fd, 0, SEEK_END);
    file = malloc((size_t)size + 1);
    if (!file || pread(fd, file, (size_t)size, 0) != size)
        abort();
    corpus_add(C, name, file, (size_t)size);
    free(file);
    free(data);
    close(fd);
}

#define D(descr, order, shape)                                                                     \
    "{'descr': '" descr "', 'fortran_order': " order ", 'shape': " shape ", }"

static void gen_valid(void)
{
    written("w-f64-2d", GPUQ_DT_F64, 2, 3, 4);
    written("w-f32-2d", GPUQ_DT_F32, 2, 2, 5);
    written("w-f32-1d", GPUQ_DT_F32, 1, 7, 0);
    written("w-f64-1d", GPUQ_DT_F64, 1, 1, 0);
    written("w-f64-1d-empty", GPUQ_DT_F64, 1, 0, 0);
    written("w-f32-2d-0x3", GPUQ_DT_F32, 2, 0, 3);
    written("w-f64-2d-1x1", GPUQ_DT_F64, 2, 1, 1);

    npy("v2-f64-2d", 2, D("<f8", "False", "(2, 3)"), 1, 48);
    npy("v3-f32-1d", 3, D("<f4", "False", "(5,)"), 1, 20);
    npy("dq-keys", 1, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 2)}", 1, 16);
    npy("keys-reordered", 1, "{'shape': (4,), 'fortran_order': False, 'descr': '<f8'}", 1, 32);
    npy("py2-longs", 1, D("<f8", "False", "(2L, 1L)"), 1, 16);
    npy("no-trailing-comma", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", 1, 12);
    npy("tabs-newlines", 1, "{\t'descr' :\n'<f4' ,\r'fortran_order':False,'shape':( 1 , 2 , ) }", 1,
        8);
    npy("no-padding", 1, D("<f8", "False", "(1,)"), 0, 8);
    npy("shape-2x0", 1, D("<f8", "False", "(2, 0)"), 1, 0);
    npy("dup-descr", 1, "{'descr': '<i4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
        1, 4);
    npy("fortran-1d-false-after-true", 1,
        "{'descr': '<f4', 'fortran_order': True, 'fortran_order': False, 'shape': (2,)}", 1, 8);
}

static void gen_refused(void)
{
    static const struct {
        const char *name, *descr;
    } dtypes[] = {
        {"dt-be-f8", ">f8"}, {"dt-native-f8", "=f8"}, {"dt-i4", "<i4"}, {"dt-u1", "|u1"},
        {"dt-f2", "<f2"},    {"dt-c16", "<c16"},      {"dt-obj", "|O"}, {"dt-empty", ""},
        {"dt-f16", "<f16"},  {"dt-f4-space", "<f4 "},
    };
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }",
                 dtypes[k].descr);
        npy(dtypes[k].name, 1, dict, 1, 16);
    }
    npy("fortran-2d", 1, D("<f8", "True", "(2, 2)"), 1, 32);
    npy("fortran-1d", 1, D("<f4", "True", "(3,)"), 1, 12);
    npy("fortran-int", 1, D("<f4", "0", "(3,)"), 1, 12);
    /* converted types whose data is cut short or runs long, and a Fortran
     * shape far past the data (a stream's buffer follows the bytes that
     * come, not the shape: fuzz_npy found both) */
    npy("conv-i1-long", 1, D("<i1", "False", "(31,)"), 1, 120);
    npy("conv-u2-short", 1, D("<u2", "False", "(2, 40)"), 1, 100);
    npy("fortran-huge", 1, D("<f8", "True", "(2, 24294967296)"), 1, 64);
    /* a Fortran shape of no element whose rows are huge (fuzz_npy's
     * timeout: the transpose looped over 4e10 empty rows) */
    npy("fortran-rows-no-cols", 1, D("<f2", "True", "(42949672963, 0)"), 1, 0);
    npy("rank0", 1, D("<f8", "False", "()"), 1, 8);
    npy("rank3", 1, D("<f8", "False", "(2, 2, 2)"), 1, 64);
    npy("rank9", 1, D("<f8", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 1, 8);
    npy("rank8", 1, D("<f8", "False", "(1, 1, 1, 1, 1, 1, 1, 1)"), 1, 8);
    npy("shape-huge", 1, D("<f8", "False", "(9223372036854775808, 2)"), 1, 16);
    npy("shape-max", 1, D("<f4", "False", "(18446744073709551615,)"), 1, 16);
    npy("shape-digits-overflow", 1, D("<f8", "False", "(18446744073709551616,)"), 1, 8);
    npy("shape-product-overflow", 1, D("<f8", "False", "(4294967296, 4294967296)"), 1, 8);
    npy("shape-bytes-overflow", 1, D("<f8", "False", "(2305843009213693952,)"), 1, 8);
    npy("shape-negative", 1, D("<f8", "False", "(-1,)"), 1, 8);
    npy("shape-float", 1, D("<f8", "False", "(2.5,)"), 1, 8);
    npy("shape-list", 1, D("<f8", "False", "[2]"), 1, 16);
    npy("shape-int", 1, D("<f8", "False", "2"), 1, 16);
    npy("shape-empty-comma", 1, D("<f8", "False", "(,)"), 1, 8);
    npy("data-short", 1, D("<f8", "False", "(3,)"), 1, 23);
    npy("data-long", 1, D("<f8", "False", "(3,)"), 1, 25);
    npy("data-none", 1, D("<f4", "False", "(3, 2)"), 1, 0);
    npy("no-descr", 1, "{'fortran_order': False, 'shape': (1,), }", 1, 8);
    npy("no-order", 1, "{'descr': '<f8', 'shape': (1,), }", 1, 8);
    npy("no-shape", 1, "{'descr': '<f8', 'fortran_order': False, }", 1, 8);
    npy("unknown-key", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", 1, 8);
    npy("escaped-descr", 1, D("<f\\x38", "False", "(1,)"), 1, 8);
    npy("unclosed-string", 1, "{'descr': '<f8, 'fortran_order': False, 'shape': (1,), }", 1, 8);
    npy("unclosed-dict", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,)", 1, 8);
    npy("unclosed-shape", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, }", 1, 8);
    npy("not-a-dict", 1, "['descr', '<f8']", 1, 8);
    npy("empty-dict", 1, "{}", 1, 0);
    npy("empty-header", 1, "", 0, 0);
    static const char nul[] = "{'descr': '<f8',\0 'fortran_order': False, 'shape': (1,), }";
    npyn("nul-in-header", 1, nul, sizeof nul - 1, 1, 8);
    npy("bool-lowercase", 1, D("<f8", "false", "(1,)"), 1, 8);

    /* the prelude */
    static const struct {
        const char *name;
        const char *b;
        size_t n;
    } raw[] = {
        {"raw-empty", "", 0},
        {"raw-magic-only", "\x93NUMPY", 6},
        {"raw-bad-magic", "\x93NUMPX\x01\x00\x02\x00{}", 12},
        {"raw-version-4", "\x93NUMPY\x04\x00\x02\x00{}", 12},
        {"raw-version-0", "\x93NUMPY\x00\x00\x02\x00{}", 12},
        {"raw-v1-hlen-past-end", "\x93NUMPY\x01\x00\xff\xff{}", 12},
        {"raw-v2-hlen-64k1", "\x93NUMPY\x02\x00\x01\x00\x01\x00{}", 14},
        {"raw-v2-hlen-4g", "\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14},
        {"raw-v2-cut-in-length", "\x93NUMPY\x02\x00\x10", 9},
        {"raw-v1-cut-in-length", "\x93NUMPY\x01\x00\x10", 9},
    };
    for (size_t k = 0; k < sizeof raw / sizeof raw[0]; k++)
        corpus_add(C, raw[k].name, raw[k].b, raw[k].n);
}

static void gen_dict(void)
{
    static const char *const words[] = {
        "\x93NUMPY\x01\x00",
        "\x93NUMPY\x02\x00",
        "\x93NUMPY\x03\x00",
        "{'descr': ",
        "'descr'",
        "\"descr\"",
        "'fortran_order'",
        "'shape'",
        "'<f4'",
        "'<f8'",
        "'>f8'",
        "'|u1'",
        "True",
        "False",
        "()",
        "(0,)",
        "(1,)",
        "L",
        ", ",
        ": ",
        "}",
        "\n",
        "18446744073709551615",
        "9223372036854775807",
        "4294967296",
    };
    corpus_dict_comment(C, "fuzz_npy's libFuzzer dictionary, written by gen_corpus_npy");
    corpus_dict_comment(C, "(do not edit: rerun it)");
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        corpus_dict_word(C, words[k]);
}

static void gen(corpus *c)
{
    C = c;
    gen_dict();
    gen_valid();
    gen_refused();
}

int main(int argc, char **argv)
{
    return corpus_main(argc, argv, "fuzz_npy (tests/fuzz/corpus_npy)", gen);
}
