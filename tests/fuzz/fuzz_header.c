/* fuzz_header.c - libFuzzer target for everything that reads untrusted bytes
 * in proto/: the frame prefix, request headers (decode + check), reply
 * headers, and the JSON renderer.
 *
 * Beyond "never crash", it checks two invariants and aborts on a breach:
 * a request that decodes re-encodes into a header that decodes again, and
 * the same for replies. Built with -DGPUQ_FUZZ_REPLAY it gets a main() that
 * runs the target over files named on the command line plus a built-in list
 * of hostile inputs (each also truncated at every byte), so the plain build
 * exercises the same code under ctest without libFuzzer.
 */
#include "errors.h"
#include "frame.h"
#include "header.h"
#include "gpuq_limits.h"
#include "mpread.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void request_invariant(const gpuq_request *req)
{
    uint8_t *buf;
    size_t len;
    gpuq_request again;
    char msg[256];
    if (gpuq_request_encode(req, &buf, &len) != 0)
        abort();
    if (gpuq_request_decode(buf, len, &again, msg, sizeof(msg)) != 0) {
        fprintf(stderr, "re-encoded request does not decode: %s\n", msg);
        abort();
    }
    if (again.id != req->id || again.op != req->op)
        abort();
    free(buf);
}

static void reply_invariant(const gpuq_reply *rep)
{
    uint8_t *buf;
    size_t len;
    gpuq_reply again;
    char msg[256];
    if (gpuq_reply_encode(rep, &buf, &len) != 0)
        abort();
    if (gpuq_reply_decode(buf, len, &again, msg, sizeof(msg)) != 0) {
        fprintf(stderr, "re-encoded reply does not decode: %s\n", msg);
        abort();
    }
    if (again.id != rep->id || again.status != rep->status || again.info_len != rep->info_len)
        abort();
    free(buf);
}

static void one_header(const uint8_t *h, size_t hlen, uint64_t payload_len)
{
    gpuq_request req;
    gpuq_reply rep;
    gpuq_sizes sz;
    gpuq_limits lim;
    char msg[256];
    char json[512];
    gpuq_mpr r;

    gpuq_limits_default(&lim);
    if (gpuq_request_decode(h, hlen, &req, msg, sizeof(msg)) == 0) {
        (void)gpuq_request_check(&req, payload_len, &lim, &sz, msg, sizeof(msg));
        (void)gpuq_request_check(&req, sz.payload, &lim, &sz, msg, sizeof(msg));
        request_invariant(&req);
    }
    if (gpuq_reply_decode(h, hlen, &rep, msg, sizeof(msg)) == 0) {
        if (rep.info) {
            gpuq_mpr_init(&r, rep.info, rep.info_len);
            (void)gpuq_mpr_to_json(&r, json, sizeof(json));
        }
        reply_invariant(&rep);
    }
    gpuq_mpr_init(&r, h, hlen);
    (void)gpuq_mpr_to_json(&r, json, sizeof(json));
    gpuq_mpr_init(&r, h, hlen);
    (void)gpuq_mpr_to_json(&r, json, 7);
    gpuq_mpr_init(&r, h, hlen);
    (void)gpuq_mpr_skip(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gpuq_prefix p;
    int rc = gpuq_prefix_decode(data, size, &p);
    if (rc == 0) {
        /* a whole frame: the header is what follows the prefix */
        size_t rest = size - GPUQ_PREFIX_SIZE;
        size_t hlen = p.header_len < rest ? p.header_len : rest;
        one_header(data + GPUQ_PREFIX_SIZE, hlen, p.payload_len);
    } else {
        /* a bare header; payload length taken from the size */
        one_header(data, size, size);
    }
    return 0;
}

#ifdef GPUQ_FUZZ_REPLAY

struct input {
    const char *name;
    uint8_t b[48];
    size_t len;
};

#define IN(nm, ...) {nm, {__VA_ARGS__}, sizeof((uint8_t[]){__VA_ARGS__})}

static const struct input builtin[] = {
    IN("array32 huge", 0xdd, 0xff, 0x00, 0x00, 0x00),
    IN("array32 max", 0xdd, 0xff, 0xff, 0xff, 0xff),
    IN("map32 max", 0xdf, 0xff, 0xff, 0xff, 0xff),
    IN("str32 max", 0xdb, 0xff, 0xff, 0xff, 0xff),
    IN("bin32 max", 0xc6, 0xff, 0xff, 0xff, 0xff),
    IN("ext32 max", 0xc9, 0xff, 0xff, 0xff, 0xff),
    IN("reserved c1", 0xc1),
    IN("deep arrays", 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x01),
    IN("deep maps", 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0xc0),
    /* ping request frame: prefix + {"id":1,"op":"ping"} */
    IN("ping frame", 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x82,
       0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g'),
    /* ok reply frame: {"id":1,"status":"ok"} */
    IN("ok reply", 'G', 'P', 'U', 'Q', 1, 2, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x82,
       0xa2, 'i', 'd', 0x01, 0xa6, 's', 't', 'a', 't', 'u', 's', 0xa2, 'o', 'k'),
    /* header_len larger than the bytes present */
    IN("short header", 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0xa2, 'i', 'd'),
    /* {"id":1,"op":"grid","lat":[-90,90,2^64-1]} */
    IN("grid huge", 0x83, 0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'p', 0xa4, 'g', 'r', 'i', 'd', 0xa3,
       'l', 'a', 't', 0x93, 0xd0, 0xa6, 0x5a, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff),
    IN("bad magic", 'G', 'P', 'U', 'X'),
};

static void run_all_prefixes(const uint8_t *b, size_t len)
{
    for (size_t k = 0; k <= len; k++) {
        uint8_t *part = malloc(k ? k : 1); /* exact size: ASan sees over-reads */
        if (!part)
            abort();
        memcpy(part, b, k);
        LLVMFuzzerTestOneInput(part, k);
        free(part);
    }
}

int main(int argc, char **argv)
{
    size_t n = sizeof(builtin) / sizeof(builtin[0]);
    for (size_t k = 0; k < n; k++)
        run_all_prefixes(builtin[k].b, builtin[k].len);
    for (int a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) {
            perror(argv[a]);
            return 1;
        }
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        run_all_prefixes(buf, len);
    }
    printf("fuzz_header_replay: %zu built-in inputs and %d files: ok\n", n, argc - 1);
    return 0;
}
#endif
