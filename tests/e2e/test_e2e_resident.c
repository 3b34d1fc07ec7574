/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_resident.c - resident arrays (PROTOCOL.md 3.5) through a real
 * gpuqd, on raw sockets (the wire as a client in any language writes it):
 *
 *  - put then get gives the same bytes back (f32 2-D, f64 1-D), a put of
 *    the name again replaces it (info "replaced"), list shows each field,
 *    remove makes the name not_found;
 *  - knn and pairwise with the base named (its shape and dtype left out,
 *    or sent) give exactly the bytes of the same request carrying the base;
 *    normalize kept under a name, then knn against it, the bytes of the
 *    carried chain;
 *  - a request that started with an array finishes with it while the name
 *    is replaced or removed (slow jobs), and the memory is given back after;
 *  - quotas: resident_bytes per uid (too_large), total_resident (busy, and
 *    too_large for one array over it), named in the message;
 *  - another uid: a private array is refused for get, put and remove, one
 *    with access "all" is readable and listed, not removable;
 *  - every bad input answered with its code, the connection serving on:
 *    names (empty, 129 bytes, "/", control characters, not UTF-8), a name
 *    that does not exist, a shape or dtype other than the array's, an
 *    output that keeps its own input, put with "out", get with "in", a
 *    failed request that keeps nothing.
 * The CUDA twin (label gpu) runs the same on the device: resident arrays
 * in device memory.
 */
#include <check.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <grp.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "e2e_util.h"
#include "mpread.h"
#include "mpwrite.h"

static uint8_t hbuf[1 << 16];
static uint64_t next_id = 100;

static void setup(void)
{
    e2e_setup();
}

static void teardown(void)
{
    e2e_teardown();
}

/* Send q with payload, read its reply into *rep (payload into data[cap],
 * *len; data may be NULL). Returns the reply's status. */
static int call(int fd, gpuq_request *q, const void *payload, size_t plen, gpuq_reply *rep,
                void *data, size_t cap, size_t *len)
{
    q->id = next_id++;
    e2e_send_req(fd, q, payload, plen);
    size_t got = 0;
    static uint8_t sink[1 << 20];
    int rc = e2e_read_reply_data(fd, rep, hbuf, sizeof hbuf, data ? data : sink,
                                 data ? cap : sizeof sink, &got);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(rep->id, q->id);
    if (len)
        *len = got;
    return rep->status;
}

/* The reply's info as JSON (static buffer). */
static const char *info_json(const gpuq_reply *rep)
{
    static char buf[1 << 16];
    ck_assert_ptr_nonnull(rep->info);
    gpuq_mpr r;
    gpuq_mpr_init(&r, rep->info, rep->info_len);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, buf, sizeof buf), 0);
    return buf;
}

/* list's payload (a msgpack stream of maps) as {"arrays":[...]} JSON
 * (static buffer), or NULL when the reply is not ok. */
static const char *list_json(int fd)
{
    static uint8_t doc[1 << 16];
    static char buf[1 << 17];
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_LIST;
    gpuq_reply rep;
    size_t len = 0;
    if (call(fd, &q, NULL, 0, &rep, doc, sizeof doc, &len) != 0)
        return NULL;
    size_t o = (size_t)snprintf(buf, sizeof buf, "{\"arrays\":[");
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    for (int i = 0; gpuq_mpr_left(&r) > 0; i++) {
        if (i)
            buf[o++] = ',';
        gpuq_mpr one = r;
        if (gpuq_mpr_to_json(&one, buf + o, sizeof buf - o - 4) != 0 || gpuq_mpr_skip(&r) != 0)
            return NULL;
        o += strlen(buf + o);
    }
    snprintf(buf + o, sizeof buf - o, "]}");
    return buf;
}

static gpuq_request put_req(const char *name, gpuq_dtype dt, uint32_t ndim, uint64_t d0,
                            uint64_t d1)
{
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_PUT;
    snprintf(q.name, sizeof q.name, "%s", name);
    q.dtype = dt;
    q.ndim_a = ndim;
    q.shape_a[0] = d0;
    q.shape_a[1] = d1;
    return q;
}

static gpuq_request name_req(gpuq_op op, const char *name)
{
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = op;
    snprintf(q.name, sizeof q.name, "%s", name);
    return q;
}

/* knn of m queries against n base rows of d, f32, euclidean, k; base
 * named (or carried when name is NULL). */
static gpuq_request knn_req(uint64_t m, uint64_t n, uint64_t d, uint64_t k, const char *name,
                            bool send_shape_b)
{
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_KNN;
    q.dtype = GPUQ_DT_F32;
    q.ndim_a = 2;
    q.shape_a[0] = m;
    q.shape_a[1] = d;
    if (!name || send_shape_b) {
        q.ndim_b = 2;
        q.shape_b[0] = n;
        q.shape_b[1] = d;
    }
    ck_assert_int_eq(gpuq_request_set_enum(&q, "metric", "euclidean"), 0);
    ck_assert_int_eq(gpuq_request_set_uint(&q, "k", k), 0);
    if (name) {
        q.nin_ref = 2;
        q.in_kind[0] = GPUQ_REF_WIRE;
        q.in_kind[1] = GPUQ_REF_NAME;
        snprintf(q.in_name[1], sizeof q.in_name[1], "%s", name);
    }
    return q;
}

static float *randf(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x + 1);
    ck_assert_ptr_nonnull(x);
    srand(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return x;
}

/* A bad request: code, needle in its message, and the connection serves. */
static void expect_refused(int fd, gpuq_request q, const void *payload, size_t plen, int code,
                           const char *needle)
{
    gpuq_reply rep;
    int rc = call(fd, &q, payload, plen, &rep, NULL, 0, NULL);
    ck_assert_msg(rc == code, "got %s (%s), want %s (%s)", gpuq_errname(rc), rep.message,
                  gpuq_errname(code), needle);
    ck_assert_msg(strstr(rep.message, needle), "message \"%s\" lacks \"%s\"", rep.message, needle);
    gpuq_request ping;
    gpuq_request_init(&ping);
    ping.op = GPUQ_OP_PING;
    ck_assert_int_eq(call(fd, &ping, NULL, 0, &rep, NULL, 0, NULL), 0);
}

static void put_ok(int fd, const char *name, gpuq_dtype dt, uint32_t ndim, uint64_t d0, uint64_t d1,
                   const void *data, bool replaced)
{
    gpuq_request q = put_req(name, dt, ndim, d0, d1);
    size_t bytes = (size_t)(d0 * (ndim == 2 ? d1 : 1) * gpuq_dtype_size(dt));
    gpuq_reply rep;
    int rc = call(fd, &q, data, bytes, &rep, NULL, 0, NULL);
    ck_assert_msg(rc == 0, "put %s: %s", name, rep.message);
    const char *j = info_json(&rep);
    ck_assert_msg(strstr(j, replaced ? "\"replaced\":true" : "\"replaced\":false"), "%s", j);
    char want[64];
    snprintf(want, sizeof want, "\"bytes\":%zu", bytes);
    ck_assert_msg(strstr(j, want), "%s lacks %s", j, want);
}

START_TEST(put_get_list_remove)
{
    int fd = e2e_hello_socket("resident", hbuf, sizeof hbuf);
    float *a = randf(6 * 5, 1);
    double b[7] = {1.5, -2, 3.25, 1e300, -0.0, 7, 8};
    put_ok(fd, "v1", GPUQ_DT_F32, 2, 6, 5, a, false);
    put_ok(fd, "vecteur-\xc3\xa9t\xc3\xa9", GPUQ_DT_F64, 1, 7, 0, b, false);
    /* get: the same bytes, dtype and shape */
    gpuq_request q = name_req(GPUQ_OP_GET, "v1");
    q.dtype = GPUQ_DT_F64; /* ignored: the array's */
    gpuq_reply rep;
    float got[30];
    size_t len = 0;
    ck_assert_int_eq(call(fd, &q, NULL, 0, &rep, got, sizeof got, &len), 0);
    ck_assert_uint_eq(len, sizeof got);
    ck_assert_int_eq(memcmp(got, a, sizeof got), 0);
    ck_assert_int_eq(rep.dtype, GPUQ_DT_F32);
    ck_assert_uint_eq(rep.ndim, 2);
    ck_assert_uint_eq(rep.shape[0], 6);
    ck_assert_uint_eq(rep.shape[1], 5);
    q = name_req(GPUQ_OP_GET, "vecteur-\xc3\xa9t\xc3\xa9");
    double gotb[7];
    ck_assert_int_eq(call(fd, &q, NULL, 0, &rep, gotb, sizeof gotb, &len), 0);
    ck_assert_int_eq(memcmp(gotb, b, sizeof b), 0);
    /* replaced */
    float *a2 = randf(6 * 5, 2);
    put_ok(fd, "v1", GPUQ_DT_F32, 2, 6, 5, a2, true);
    q = name_req(GPUQ_OP_GET, "v1");
    ck_assert_int_eq(call(fd, &q, NULL, 0, &rep, got, sizeof got, &len), 0);
    ck_assert_int_eq(memcmp(got, a2, sizeof got), 0);
    /* list: sorted by name, every field */
    const char *j = list_json(fd);
    ck_assert_ptr_nonnull(j);
    char want[256];
    snprintf(want, sizeof want,
             "{\"arrays\":[{\"name\":\"v1\",\"owner\":%u,\"access\":\"private\",\"dtype\":\"f32\","
             "\"shape\":[6,5],\"bytes\":120,\"device\":",
             (unsigned)getuid());
    ck_assert_msg(strncmp(j, want, strlen(want)) == 0, "%s\nwant %s", j, want);
    ck_assert_msg(strstr(j, "\"users\":0,\"persist\":false}"), "%s", j);
    ck_assert_msg(strstr(j, "\"shape\":[7],\"bytes\":56"), "%s", j);
    ck_assert_int_eq(e2e_status_int("resident_arrays"), 2);
    ck_assert_int_eq(e2e_status_int("resident_bytes"), 120 + 56);
    /* remove: gone */
    q = name_req(GPUQ_OP_REMOVE, "v1");
    ck_assert_int_eq(call(fd, &q, NULL, 0, &rep, NULL, 0, NULL), 0);
    ck_assert_msg(strstr(info_json(&rep), "\"bytes\":120"), "%s", info_json(&rep));
    expect_refused(fd, name_req(GPUQ_OP_GET, "v1"), NULL, 0, GPUQ_E_NOT_FOUND,
                   "no resident array \"v1\"");
    expect_refused(fd, name_req(GPUQ_OP_REMOVE, "v1"), NULL, 0, GPUQ_E_NOT_FOUND, "\"v1\"");
    ck_assert_int_eq(e2e_status_int("resident_bytes"), 56);
    close(fd);
    free(a);
    free(a2);
}
END_TEST

/* knn (and pairwise) against a named base: the bytes of the carried one. */
START_TEST(named_base_equals_carried)
{
    int fd = e2e_hello_socket("resident", hbuf, sizeof hbuf);
    const uint64_t m = 9, n = 1000, d = 16, k = 7;
    float *x = randf(m * d, 3), *y = randf(n * d, 4);
    put_ok(fd, "base", GPUQ_DT_F32, 2, n, d, y, false);
    size_t xb = m * d * 4, outb = m * k * 4 + m * k * 8;
    float *both = malloc(xb + n * d * 4);
    memcpy(both, x, xb);
    memcpy((char *)both + xb, y, n * d * 4);
    uint8_t *want = malloc(outb), *got = malloc(outb);
    gpuq_request q = knn_req(m, n, d, k, NULL, false);
    gpuq_reply rep;
    size_t len;
    ck_assert_int_eq(call(fd, &q, both, xb + n * d * 4, &rep, want, outb, &len), 0);
    ck_assert_uint_eq(len, outb);
    for (int shape = 0; shape < 2; shape++) {
        q = knn_req(m, n, d, k, "base", shape);
        memset(got, 0xee, outb);
        ck_assert_int_eq(call(fd, &q, x, xb, &rep, got, outb, &len), 0);
        ck_assert_uint_eq(len, outb);
        ck_assert_msg(memcmp(got, want, outb) == 0, "knn against the named base differs");
        ck_assert_int_eq(rep.dtype_b, GPUQ_DT_I64);
    }
    /* dtype left out: the array's */
    q = knn_req(m, n, d, k, "base", false);
    q.dtype = GPUQ_DT_NONE;
    ck_assert_int_eq(call(fd, &q, x, xb, &rep, got, outb, &len), 0);
    ck_assert_int_eq(memcmp(got, want, outb), 0);
    /* pairwise, both named */
    put_ok(fd, "queries", GPUQ_DT_F32, 2, m, d, x, false);
    gpuq_request p;
    gpuq_request_init(&p);
    p.op = GPUQ_OP_PAIRWISE;
    ck_assert_int_eq(gpuq_request_set_enum(&p, "metric", "cosine"), 0);
    p.dtype = GPUQ_DT_F32;
    p.ndim_a = p.ndim_b = 2;
    p.shape_a[0] = m;
    p.shape_b[0] = n;
    p.shape_a[1] = p.shape_b[1] = d;
    size_t pb = m * n * 4;
    float *pw = malloc(pb), *pg = malloc(pb);
    ck_assert_int_eq(call(fd, &p, both, xb + n * d * 4, &rep, pw, pb, &len), 0);
    p.ndim_a = p.ndim_b = 0;
    p.nin_ref = 2;
    p.in_kind[0] = p.in_kind[1] = GPUQ_REF_NAME;
    snprintf(p.in_name[0], sizeof p.in_name[0], "queries");
    snprintf(p.in_name[1], sizeof p.in_name[1], "base");
    ck_assert_int_eq(call(fd, &p, NULL, 0, &rep, pg, pb, &len), 0);
    ck_assert_uint_eq(len, pb);
    ck_assert_int_eq(memcmp(pw, pg, pb), 0);
    ck_assert_uint_eq(rep.shape[0], m);
    ck_assert_uint_eq(rep.shape[1], n);
    close(fd);
    free(x);
    free(y);
    free(both);
    free(want);
    free(got);
    free(pw);
    free(pg);
}
END_TEST

/* normalize kept as "nb", then knn against "nb": the carried chain's bytes;
 * knn's indices kept, its distances returned. */
START_TEST(kept_output_chain)
{
    int fd = e2e_hello_socket("resident", hbuf, sizeof hbuf);
    const uint64_t m = 5, n = 300, d = 8, k = 4;
    float *x = randf(m * d, 5), *y = randf(n * d, 6);
    gpuq_request nq;
    gpuq_request_init(&nq);
    nq.op = GPUQ_OP_NORMALIZE;
    nq.dtype = GPUQ_DT_F32;
    nq.ndim_a = 2;
    nq.shape_a[0] = n;
    nq.shape_a[1] = d;
    ck_assert_int_eq(gpuq_request_set_enum(&nq, "method", "l2"), 0);
    float *ny = malloc(n * d * 4);
    gpuq_reply rep;
    size_t len;
    ck_assert_int_eq(call(fd, &nq, y, n * d * 4, &rep, ny, n * d * 4, &len), 0);
    nq.nout_ref = 1;
    nq.out_kind[0] = GPUQ_REF_NAME;
    snprintf(nq.out_name[0], sizeof nq.out_name[0], "nb");
    ck_assert_int_eq(call(fd, &nq, y, n * d * 4, &rep, NULL, 0, &len), 0);
    ck_assert_uint_eq(len, 0); /* kept, not returned */
    ck_assert_int_eq(rep.dtype, GPUQ_DT_F32);
    ck_assert_uint_eq(rep.shape[0], n);
    gpuq_request g = name_req(GPUQ_OP_GET, "nb");
    float *kept = malloc(n * d * 4);
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, kept, n * d * 4, &len), 0);
    ck_assert_int_eq(memcmp(kept, ny, n * d * 4), 0);
    /* carried knn against the normalized base */
    size_t xb = m * d * 4, db = m * k * 4, ib = m * k * 8;
    float *both = malloc(xb + n * d * 4);
    memcpy(both, x, xb);
    memcpy((char *)both + xb, ny, n * d * 4);
    uint8_t *want = malloc(db + ib), *got = malloc(db + ib);
    gpuq_request q = knn_req(m, n, d, k, NULL, false);
    ck_assert_int_eq(call(fd, &q, both, xb + n * d * 4, &rep, want, db + ib, &len), 0);
    /* distances returned, indices kept */
    q = knn_req(m, n, d, k, "nb", false);
    q.nout_ref = 2;
    q.out_kind[0] = GPUQ_REF_WIRE;
    q.out_kind[1] = GPUQ_REF_NAME;
    snprintf(q.out_name[1], sizeof q.out_name[1], "idx");
    ck_assert_int_eq(call(fd, &q, x, xb, &rep, got, db + ib, &len), 0);
    ck_assert_uint_eq(len, db);
    ck_assert_int_eq(memcmp(got, want, db), 0);
    g = name_req(GPUQ_OP_GET, "idx");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, db + ib, &len), 0);
    ck_assert_uint_eq(len, ib);
    ck_assert_int_eq(rep.dtype, GPUQ_DT_I64);
    ck_assert_int_eq(memcmp(got, want + db, ib), 0);
    /* a failed request keeps nothing: a zero row under l2 */
    float zero[8] = {0};
    nq.shape_a[0] = 1;
    snprintf(nq.out_name[0], sizeof nq.out_name[0], "never");
    long long before = e2e_status_int("resident_bytes");
    expect_refused(fd, nq, zero, sizeof zero, GPUQ_E_ZERO_NORM, "zero");
    expect_refused(fd, name_req(GPUQ_OP_GET, "never"), NULL, 0, GPUQ_E_NOT_FOUND, "never");
    ck_assert_int_eq(e2e_status_int("resident_bytes"), before);
    close(fd);
    free(x);
    free(y);
    free(ny);
    free(kept);
    free(both);
    free(want);
    free(got);
}
END_TEST

/* {"id", "op": op, "name": name} as raw msgpack: refused bad_argument with
 * needle; the connection serves on. */
static void raw_name(int fd, const char *op, const char *name, int code, const char *needle)
{
    /* by hand: msgpack writers here escape bytes that are not UTF-8 */
    uint8_t hdr[512];
    size_t hlen = 0, ol = strlen(op), nl = strlen(name);
    ck_assert(ol < 32 && nl < 256);
    hdr[hlen++] = 0x83;
    memcpy(hdr + hlen, "\xa2id\x4d\xa2op", 7); /* "id": 77, "op" */
    hlen += 7;
    hdr[hlen++] = (uint8_t)(0xa0 | ol);
    memcpy(hdr + hlen, op, ol);
    hlen += ol;
    memcpy(hdr + hlen, "\xa4name\xd9", 6); /* "name", str8 */
    hlen += 6;
    hdr[hlen++] = (uint8_t)nl;
    memcpy(hdr + hlen, name, nl);
    hlen += nl;
    e2e_send_frame(fd, hdr, (uint32_t)hlen, 0, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_uint_eq(rep.id, 77);
    ck_assert_int_eq(rep.status, code);
    ck_assert_msg(strstr(rep.message, needle), "\"%s\" lacks \"%s\"", rep.message, needle);
    gpuq_request ping;
    gpuq_request_init(&ping);
    ping.op = GPUQ_OP_PING;
    ck_assert_int_eq(call(fd, &ping, NULL, 0, &rep, NULL, 0, NULL), 0);
}

/* {"id", "op": op, "name": "c", "dtype": "f32", "shape": [4], key: ["d"]}
 * refused bad_argument with needle (payload sent along). */
static void raw_refused(int fd, const char *op, const char *key, const void *payload, size_t plen,
                        const char *needle)
{
    gpuq_mpw *w = gpuq_mpw_new();
    ck_assert_ptr_nonnull(w);
    gpuq_mpw_map(w, 6);
    gpuq_mpw_str(w, "id");
    gpuq_mpw_uint(w, 78);
    gpuq_mpw_str(w, "op");
    gpuq_mpw_str(w, op);
    gpuq_mpw_str(w, "name");
    gpuq_mpw_str(w, "c");
    gpuq_mpw_str(w, "dtype");
    gpuq_mpw_str(w, "f32");
    gpuq_mpw_str(w, "shape");
    gpuq_mpw_array(w, 1);
    gpuq_mpw_uint(w, 4);
    gpuq_mpw_str(w, key);
    gpuq_mpw_array(w, 1);
    gpuq_mpw_str(w, "d");
    uint8_t *hdr;
    size_t hlen;
    ck_assert_int_eq(gpuq_mpw_take(w, &hdr, &hlen), 0);
    gpuq_mpw_free(w);
    e2e_send_frame(fd, hdr, (uint32_t)hlen, plen, payload, plen);
    free(hdr);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_uint_eq(rep.id, 78);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_ARGUMENT);
    ck_assert_msg(strstr(rep.message, needle), "\"%s\" lacks \"%s\"", rep.message, needle);
}

START_TEST(bad_inputs)
{
    int fd = e2e_hello_socket("resident", hbuf, sizeof hbuf);
    float v[4] = {1, 2, 3, 4};
    char long_name[GPUQ_RES_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    /* through the encoder (which escapes control characters and bytes that
     * are not UTF-8, and leaves an empty "name" out): as put's name and as a
     * name in "in" */
    const struct {
        const char *name;
        const char *needle;
    } names[] = {{"", "empty"}, {"a/b", "\"/\""}, {"/", "\"/\""}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        gpuq_request q = put_req("x", GPUQ_DT_F32, 1, 4, 0);
        memcpy(q.name, names[i].name, strlen(names[i].name) + 1);
        expect_refused(fd, q, v, sizeof v, GPUQ_E_BAD_ARGUMENT,
                       names[i].name[0] ? names[i].needle : "put needs");
        q = knn_req(1, 4, 4, 1, "x", false);
        memcpy(q.in_name[1], names[i].name, strlen(names[i].name) + 1);
        expect_refused(fd, q, v, sizeof v, GPUQ_E_BAD_ARGUMENT, names[i].needle);
    }
    /* control characters: C0, DEL, C1 */
    raw_name(fd, "remove", "tab\there", GPUQ_E_BAD_ARGUMENT, "control character (byte 3)");
    raw_name(fd, "get", "del\x7f", GPUQ_E_BAD_ARGUMENT, "control character");
    raw_name(fd, "remove", "c1\xc2\x85", GPUQ_E_BAD_ARGUMENT, "control character");
    raw_name(fd, "remove", "a\nb", GPUQ_E_BAD_ARGUMENT, "control character");
    /* on the wire as written: "name": "" and a name of 129 bytes, in a
     * remove and in a get's "in"-less form (gpuq_request holds at most 128) */
    raw_name(fd, "remove", "", GPUQ_E_BAD_ARGUMENT, "name: the name is empty");
    raw_name(fd, "get", long_name, GPUQ_E_BAD_ARGUMENT,
             "name: the name has 129 bytes; at most 128");
    /* not UTF-8: the header itself is bad (the encoder would escape it) */
    raw_name(fd, "remove", "bad\xff", GPUQ_E_BAD_HEADER, "UTF-8");
    /* 128 bytes is fine */
    long_name[GPUQ_RES_NAME_MAX] = '\0';
    put_ok(fd, long_name, GPUQ_DT_F32, 1, 4, 0, v, false);
    /* no name */
    gpuq_request q;
    expect_refused(fd, name_req(GPUQ_OP_GET, ""), NULL, 0, GPUQ_E_BAD_ARGUMENT, "get needs");
    expect_refused(fd, name_req(GPUQ_OP_REMOVE, ""), NULL, 0, GPUQ_E_BAD_ARGUMENT, "remove needs");
    q = put_req("", GPUQ_DT_F32, 1, 4, 0);
    expect_refused(fd, q, v, sizeof v, GPUQ_E_BAD_ARGUMENT, "put needs");
    /* a name that is no array, in a compute request: its payload skipped */
    q = knn_req(1, 4, 4, 1, "nothing", false);
    expect_refused(fd, q, v, sizeof v, GPUQ_E_NOT_FOUND, "no resident array \"nothing\"");
    /* shape and dtype other than the array's */
    float base[8] = {1, 0, 0, 1, 1, 1, 0, 0};
    put_ok(fd, "b", GPUQ_DT_F32, 2, 2, 4, base, false);
    q = knn_req(1, 3, 4, 1, "b", true);
    expect_refused(fd, q, v, sizeof v, GPUQ_E_BAD_SHAPE, "shape_b [3, 4] differs");
    q = knn_req(1, 2, 4, 1, "b", false);
    q.dtype = GPUQ_DT_F64;
    double vd[4] = {1, 2, 3, 4};
    expect_refused(fd, q, vd, sizeof vd, GPUQ_E_BAD_DTYPE, "dtype f64 differs");
    /* a payload that also carries the named input */
    q = knn_req(1, 2, 4, 1, "b", false);
    float v3[12] = {0};
    expect_refused(fd, q, v3, sizeof v3, GPUQ_E_SIZE_MISMATCH, "leaves to it");
    /* an output kept under its own input's name */
    gpuq_request nq;
    gpuq_request_init(&nq);
    nq.op = GPUQ_OP_NORMALIZE;
    nq.nin_ref = nq.nout_ref = 1;
    nq.in_kind[0] = nq.out_kind[0] = GPUQ_REF_NAME;
    snprintf(nq.in_name[0], sizeof nq.in_name[0], "b");
    snprintf(nq.out_name[0], sizeof nq.out_name[0], "b");
    expect_refused(fd, nq, NULL, 0, GPUQ_E_BAD_ARGUMENT, "keeps the array it reads");
    /* put with "out", get with "in" (the encoder writes neither) */
    raw_refused(fd, "put", "out", v, sizeof v, "put takes no \"out\"");
    raw_refused(fd, "get", "in", NULL, 0, "get takes no \"in\"");
    /* gate with a named input */
    q = knn_req(1, 2, 4, 1, "b", false);
    q.gate = true;
    expect_refused(fd, q, v, sizeof v, GPUQ_E_BAD_ARGUMENT, "\"gate\" needs every input");
    /* "in" on a control op */
    q = name_req(GPUQ_OP_PING, "");
    q.nin_ref = 1;
    q.in_kind[0] = GPUQ_REF_NAME;
    snprintf(q.in_name[0], sizeof q.in_name[0], "b");
    expect_refused(fd, q, NULL, 0, GPUQ_E_BAD_ARGUMENT, "ping takes no \"in\"");
    close(fd);
    e2e_assert_serves();
}
END_TEST

/* A knn that started with "base" finishes with it while the name is
 * replaced, then removed; later requests see the new array, then none. */
START_TEST(replace_and_remove_while_in_use)
{
    e2e_restart_slow(400, NULL);
    int fd1 = e2e_hello_socket("user", hbuf, sizeof hbuf);
    int fd2 = e2e_hello_socket("owner", hbuf, sizeof hbuf);
    const uint64_t m = 3, n = 64, d = 4, k = 2;
    float *x = randf(m * d, 7), *y1 = randf(n * d, 8), *y2 = randf(n * d, 9);
    size_t xb = m * d * 4, outb = m * k * 12;
    uint8_t *want1 = malloc(outb), *want2 = malloc(outb), *got = malloc(outb);
    put_ok(fd2, "base", GPUQ_DT_F32, 2, n, d, y1, false);
    gpuq_request q = knn_req(m, n, d, k, "base", false);
    gpuq_reply rep;
    size_t len;
    ck_assert_int_eq(call(fd1, &q, x, xb, &rep, want1, outb, &len), 0);
    /* the reference against y2: carried */
    float *both = malloc(xb + n * d * 4);
    memcpy(both, x, xb);
    memcpy((char *)both + xb, y2, n * d * 4);
    gpuq_request c = knn_req(m, n, d, k, NULL, false);
    ck_assert_int_eq(call(fd1, &c, both, xb + n * d * 4, &rep, want2, outb, &len), 0);
    ck_assert_msg(memcmp(want1, want2, outb) != 0, "the two bases give the same answer");
    /* knn with the old base in flight while the put replaces it */
    q = knn_req(m, n, d, k, "base", false);
    q.id = next_id++;
    e2e_send_req(fd1, &q, x, xb);
    tu_sleep_s(0.1);
    put_ok(fd2, "base", GPUQ_DT_F32, 2, n, d, y2, true);
    ck_assert_int_eq(e2e_read_reply_data(fd1, &rep, hbuf, sizeof hbuf, got, outb, &len), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_msg(memcmp(got, want1, outb) == 0, "the running knn saw the replacement");
    q = knn_req(m, n, d, k, "base", false);
    ck_assert_int_eq(call(fd1, &q, x, xb, &rep, got, outb, &len), 0);
    ck_assert_msg(memcmp(got, want2, outb) == 0, "a later knn did not see the replacement");
    /* removed while a knn runs: it finishes; the bytes go after it */
    q = knn_req(m, n, d, k, "base", false);
    q.id = next_id++;
    e2e_send_req(fd1, &q, x, xb);
    tu_sleep_s(0.1);
    gpuq_request r = name_req(GPUQ_OP_REMOVE, "base");
    ck_assert_int_eq(call(fd2, &r, NULL, 0, &rep, NULL, 0, NULL), 0);
    ck_assert_int_eq(e2e_status_int("resident_arrays"), 0);
    ck_assert_int_eq(e2e_status_int("resident_bytes"), (long long)(n * d * 4)); /* still used */
    ck_assert_int_eq(e2e_read_reply_data(fd1, &rep, hbuf, sizeof hbuf, got, outb, &len), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_int_eq(memcmp(got, want2, outb), 0);
    e2e_wait_status("resident_bytes", 0, 5);
    q = knn_req(m, n, d, k, "base", false);
    expect_refused(fd1, q, x, xb, GPUQ_E_NOT_FOUND, "base");
    close(fd1);
    close(fd2);
    free(x);
    free(y1);
    free(y2);
    free(both);
    free(want1);
    free(want2);
    free(got);
}
END_TEST

static void set_limit(const char *name, uint64_t v)
{
    int fd = e2e_hello_socket("admin", hbuf, sizeof hbuf);
    gpuq_request q;
    gpuq_request_init(&q);
    q.op = GPUQ_OP_SET_LIMIT;
    snprintf(q.limit, sizeof q.limit, "%s", name);
    q.value = v;
    q.has_value = true;
    gpuq_reply rep;
    ck_assert_msg(call(fd, &q, NULL, 0, &rep, NULL, 0, NULL) == 0, "set_limit %s: %s", name,
                  rep.message);
    close(fd);
}

START_TEST(quotas)
{
    set_limit("resident_bytes", 4096);
    set_limit("total_resident", 6000);
    int fd = e2e_hello_socket("quota", hbuf, sizeof hbuf); /* its caps: from now */
    static float v[1024];
    put_ok(fd, "q1", GPUQ_DT_F32, 1, 512, 0, v, false); /* 2048 */
    put_ok(fd, "q2", GPUQ_DT_F32, 1, 512, 0, v, false); /* 4096: the cap */
    gpuq_request q = put_req("q3", GPUQ_DT_F32, 1, 1, 0);
    expect_refused(fd, q, v, 4, GPUQ_E_TOO_LARGE, "over its resident_bytes 4096");
    /* replacing counts the new array beside the old until the old is gone */
    q = put_req("q2", GPUQ_DT_F32, 1, 512, 0);
    expect_refused(fd, q, v, 2048, GPUQ_E_TOO_LARGE, "\"q2\"");
    close(fd);
    set_limit("resident_bytes", 1 << 20);
    fd = e2e_hello_socket("quota", hbuf, sizeof hbuf);
    q = put_req("q3", GPUQ_DT_F32, 1, 1024, 0); /* 4096 + 4096 > 6000 */
    expect_refused(fd, q, v, 4096, GPUQ_E_BUSY, "total_resident 6000");
    q = put_req("big", GPUQ_DT_F32, 1, 2000, 0); /* 8000 > 6000 alone */
    static float big[2000];
    expect_refused(fd, q, big, sizeof big, GPUQ_E_TOO_LARGE, "by itself");
    /* a kept output counts the same */
    gpuq_request nq;
    gpuq_request_init(&nq);
    nq.op = GPUQ_OP_NORMALIZE;
    nq.dtype = GPUQ_DT_F32;
    nq.ndim_a = 1;
    nq.shape_a[0] = 1024;
    nq.nout_ref = 1;
    nq.out_kind[0] = GPUQ_REF_NAME;
    snprintf(nq.out_name[0], sizeof nq.out_name[0], "kept");
    for (int i = 0; i < 1024; i++)
        v[i] = 1;
    expect_refused(fd, nq, v, 4096, GPUQ_E_BUSY, "\"kept\"");
    gpuq_request r = name_req(GPUQ_OP_REMOVE, "q1");
    gpuq_reply rep;
    ck_assert_int_eq(call(fd, &r, NULL, 0, &rep, NULL, 0, NULL), 0);
    r = name_req(GPUQ_OP_REMOVE, "q2");
    ck_assert_int_eq(call(fd, &r, NULL, 0, &rep, NULL, 0, NULL), 0);
    ck_assert_int_eq(call(fd, &nq, v, 4096, &rep, NULL, 0, NULL), 0);
    ck_assert_int_eq(e2e_status_int("resident_bytes"), 4096);
    close(fd);
    /* resident_bytes 0: this uid may store nothing */
    set_limit("resident_bytes", 0);
    fd = e2e_hello_socket("quota", hbuf, sizeof hbuf);
    q = put_req("none", GPUQ_DT_F32, 1, 1, 0);
    expect_refused(fd, q, v, 4, GPUQ_E_TOO_LARGE, "resident_bytes 0");
    close(fd);
}
END_TEST

/* ---- another uid ---- */

static int other_fd(void)
{
    int fd = e2e_hello_socket("other", hbuf, sizeof hbuf);
    return fd;
}

/* In a child as nobody: a private array refused, a shared one readable. */
static int other_uid_child(void)
{
    int fd = other_fd();
    gpuq_reply rep;
    gpuq_request q = name_req(GPUQ_OP_GET, "mine");
    if (call(fd, &q, NULL, 0, &rep, NULL, 0, NULL) != GPUQ_E_PERMISSION ||
        !strstr(rep.message, "is private to uid 0"))
        return 10;
    float v[4] = {0};
    q = put_req("mine", GPUQ_DT_F32, 1, 4, 0);
    if (call(fd, &q, v, sizeof v, &rep, NULL, 0, NULL) != GPUQ_E_PERMISSION ||
        !strstr(rep.message, "belongs to uid 0"))
        return 11;
    q = name_req(GPUQ_OP_REMOVE, "mine");
    if (call(fd, &q, NULL, 0, &rep, NULL, 0, NULL) != GPUQ_E_PERMISSION)
        return 12;
    q = name_req(GPUQ_OP_REMOVE, "shared");
    if (call(fd, &q, NULL, 0, &rep, NULL, 0, NULL) != GPUQ_E_PERMISSION)
        return 13;
    float got[4];
    size_t len;
    q = name_req(GPUQ_OP_GET, "shared");
    if (call(fd, &q, NULL, 0, &rep, got, sizeof got, &len) != 0 || got[2] != 3.0f)
        return 14;
    const char *j = list_json(fd);
    if (!j)
        return 15;
    if (!strstr(j, "\"shared\"") || strstr(j, "\"mine\""))
        return 16;
    /* its own array, private to it */
    q = put_req("theirs", GPUQ_DT_F32, 1, 4, 0);
    if (call(fd, &q, v, sizeof v, &rep, NULL, 0, NULL) != 0)
        return 17;
    close(fd);
    return 0;
}

START_TEST(another_uid)
{
    if (getuid() != 0) {
        fprintf(stderr, "another_uid: not root; only the owner's side is checked\n");
        return;
    }
    ck_assert_int_eq(chmod(e2e_d.dir, 0755), 0);
    ck_assert_int_eq(chmod(e2e_d.socket, 0666), 0);
    int fd = e2e_hello_socket("root", hbuf, sizeof hbuf);
    float v[4] = {1, 2, 3, 4};
    put_ok(fd, "mine", GPUQ_DT_F32, 1, 4, 0, v, false);
    gpuq_request q = put_req("shared", GPUQ_DT_F32, 1, 4, 0);
    q.has_access = true;
    q.access = GPUQ_ACCESS_ALL;
    gpuq_reply rep;
    ck_assert_int_eq(call(fd, &q, v, sizeof v, &rep, NULL, 0, NULL), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        _exit(other_uid_child());
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other uid's child: status %d",
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    /* an admin reads and removes the other uid's private array */
    const char *lj = list_json(fd);
    ck_assert_msg(lj && strstr(lj, "\"name\":\"theirs\",\"owner\":65534"), "%s", lj);
    q = name_req(GPUQ_OP_REMOVE, "theirs");
    ck_assert_int_eq(call(fd, &q, NULL, 0, &rep, NULL, 0, NULL), 0);
    close(fd);
}
END_TEST

/* ---- persist (a state directory that outlives each daemon) ---- */

static char state_dir[256];
static const char *state_args[] = {"--state-dir", state_dir, NULL};

static void persist_setup(void)
{
    snprintf(state_dir, sizeof state_dir, "/tmp/gpuq-resident-state-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(state_dir));
    e2e_start(state_args);
}

static void persist_teardown(void)
{
    e2e_teardown();
    tu_rmtree(state_dir);
}

/* Stop (kill: SIGKILL at once, else SIGTERM) and start again on the same
 * state directory. */
static void restart(bool kill9)
{
    if (kill9) {
        tu_daemon_kill(&e2e_d, SIGKILL);
        int st;
        ck_assert_int_eq(waitpid(e2e_d.pid, &st, 0), e2e_d.pid);
        e2e_d.pid = 0;
        tu_rmtree(e2e_d.dir);
        e2e_start(state_args);
    } else {
        e2e_restart(state_args);
    }
}

static gpuq_request persist_put(const char *name, uint64_t n, bool persist)
{
    gpuq_request q = put_req(name, GPUQ_DT_F32, 1, n, 0);
    q.persist = persist;
    return q;
}

/* The files of the state directory with suffix, counted. */
static int count_files(const char *suffix)
{
    char cmd[512], out[64];
    snprintf(cmd, sizeof cmd, "ls -1 %s | grep -c -- '%s$'", state_dir, suffix);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int n = fgets(out, sizeof out, f) ? atoi(out) : -1;
    pclose(f);
    return n;
}

START_TEST(persist_restart)
{
    int fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    float *a = randf(4000, 11), *b = randf(300, 12);
    gpuq_reply rep;
    gpuq_request q = persist_put("p1", 4000, true);
    ck_assert_msg(call(fd, &q, a, 16000, &rep, NULL, 0, NULL) == 0, "%s", rep.message);
    q = persist_put("p2", 300, true);
    q.has_access = true;
    q.access = GPUQ_ACCESS_ALL;
    ck_assert_int_eq(call(fd, &q, b, 1200, &rep, NULL, 0, NULL), 0);
    q = persist_put("gone", 300, false);
    ck_assert_int_eq(call(fd, &q, b, 1200, &rep, NULL, 0, NULL), 0);
    /* a kept output, persisted */
    gpuq_request nq;
    gpuq_request_init(&nq);
    nq.op = GPUQ_OP_NORMALIZE;
    nq.dtype = GPUQ_DT_F32;
    nq.ndim_a = 1;
    nq.shape_a[0] = 300;
    nq.nout_ref = 1;
    nq.out_kind[0] = GPUQ_REF_NAME;
    snprintf(nq.out_name[0], sizeof nq.out_name[0], "kp");
    nq.persist = true;
    float *nb = malloc(1200);
    ck_assert_int_eq(call(fd, &nq, b, 1200, &rep, NULL, 0, NULL), 0);
    gpuq_request g = name_req(GPUQ_OP_GET, "kp");
    size_t len;
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, nb, 1200, &len), 0);
    const char *lj = list_json(fd);
    ck_assert_msg(lj && strstr(lj, "\"name\":\"gone\""), "%s", lj);
    ck_assert_msg(strstr(lj, "\"persist\":true"), "%s", lj);
    ck_assert_int_eq(count_files(".gpuqa"), 3);
    close(fd);
    restart(false);
    fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    float *got = malloc(16000);
    g = name_req(GPUQ_OP_GET, "p1");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, 16000, &len), 0);
    ck_assert_uint_eq(len, 16000);
    ck_assert_int_eq(memcmp(got, a, 16000), 0);
    g = name_req(GPUQ_OP_GET, "kp");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, 1200, &len), 0);
    ck_assert_int_eq(memcmp(got, nb, 1200), 0);
    lj = list_json(fd);
    ck_assert_ptr_nonnull(lj);
    char want[160];
    snprintf(want, sizeof want, "\"name\":\"p2\",\"owner\":%u,\"access\":\"all\"",
             (unsigned)getuid());
    ck_assert_msg(strstr(lj, want), "%s", lj);
    ck_assert_msg(!strstr(lj, "\"gone\""), "%s", lj);
    ck_assert_int_eq(e2e_status_int("resident_bytes"), 16000 + 1200 + 1200);
    /* removed, and replaced by an array that is not persisted: both gone
     * after the next restart */
    q = name_req(GPUQ_OP_REMOVE, "p1");
    ck_assert_int_eq(call(fd, &q, NULL, 0, &rep, NULL, 0, NULL), 0);
    q = persist_put("p2", 300, false);
    ck_assert_int_eq(call(fd, &q, b, 1200, &rep, NULL, 0, NULL), 0);
    ck_assert_int_eq(count_files(".gpuqa"), 1);
    close(fd);
    restart(false);
    fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    expect_refused(fd, name_req(GPUQ_OP_GET, "p1"), NULL, 0, GPUQ_E_NOT_FOUND, "p1");
    expect_refused(fd, name_req(GPUQ_OP_GET, "p2"), NULL, 0, GPUQ_E_NOT_FOUND, "p2");
    g = name_req(GPUQ_OP_GET, "kp");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, 1200, &len), 0);
    close(fd);
    free(a);
    free(b);
    free(nb);
    free(got);
}
END_TEST

/* A damaged file is logged and set aside, never served; a write a kill
 * cut short (.tmp) is deleted; the rest loads. */
START_TEST(persist_damaged)
{
    int fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    float *a = randf(2000, 13);
    gpuq_reply rep;
    const char *names[] = {"flip", "cut", "good"};
    for (int i = 0; i < 3; i++) {
        gpuq_request q = persist_put(names[i], 2000, true);
        ck_assert_int_eq(call(fd, &q, a, 8000, &rep, NULL, 0, NULL), 0);
    }
    close(fd);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    /* base64url: "flip" -> ZmxpcA, "cut" -> Y3V0 */
    char p[512];
    snprintf(p, sizeof p, "%s/ZmxpcA.gpuqa", state_dir);
    size_t len = 0;
    uint8_t *f = tu_read_file(p, &len);
    ck_assert_ptr_nonnull(f);
    f[len / 2] ^= 0x10; /* one bit of the data */
    ck_assert_int_eq(tu_write_file(p, f, len), 0);
    free(f);
    snprintf(p, sizeof p, "%s/Y3V0.gpuqa", state_dir);
    ck_assert_int_eq(truncate(p, 100), 0);
    snprintf(p, sizeof p, "%s/anVuaw.gpuqa", state_dir); /* "junk" */
    ck_assert_int_eq(tu_write_file(p, "not an array", 12), 0);
    snprintf(p, sizeof p, "%s/ZmxpcA.tmp", state_dir);
    ck_assert_int_eq(tu_write_file(p, "half", 4), 0);
    e2e_start(state_args);
    fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    expect_refused(fd, name_req(GPUQ_OP_GET, "flip"), NULL, 0, GPUQ_E_NOT_FOUND, "flip");
    expect_refused(fd, name_req(GPUQ_OP_GET, "cut"), NULL, 0, GPUQ_E_NOT_FOUND, "cut");
    float got[2000];
    gpuq_request g = name_req(GPUQ_OP_GET, "good");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, sizeof got, &len), 0);
    ck_assert_int_eq(memcmp(got, a, sizeof got), 0);
    ck_assert_int_eq(count_files(".damaged"), 3);
    ck_assert_int_eq(count_files(".tmp"), 0);
    size_t llen = 0;
    char *log = tu_read_file(e2e_d.log, &llen);
    ck_assert_msg(log && strstr(log, "checksum mismatch") && strstr(log, "set aside"), "%s",
                  log ? log : "");
    free(log);
    close(fd);
    free(a);
}
END_TEST

/* gpuqd killed (SIGKILL) at random points of a put replacing a persisted
 * array, and of a remove: after the restart the array is the old one or
 * the new one, whole, or (remove) gone; never a part. */
#define ROUNDS 8
START_TEST(persist_kill9)
{
    const uint64_t n = 4u << 20; /* 16 MiB of float32 */
    float *v1 = randf(n, 21), *v2 = randf(n, 22), *got = malloc(n * 4);
    gpuq_reply rep;
    size_t len;
    srand(2026);
    int seen_old = 0, seen_new = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
        gpuq_request q = persist_put("big", n, true);
        double t0 = tu_now_s();
        ck_assert_int_eq(call(fd, &q, v1, n * 4, &rep, NULL, 0, NULL), 0);
        double took = tu_now_s() - t0; /* a whole persisted put: the kill lands inside one */
        q = persist_put("big", n, true);
        q.id = next_id++;
        e2e_send_req(fd, &q, v2, n * 4);
        tu_sleep_s(took * (double)(round + 1) / (ROUNDS + 1)); /* spread over the put */
        restart(true);
        close(fd);
        fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
        gpuq_request g = name_req(GPUQ_OP_GET, "big");
        ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, n * 4, &len), 0);
        ck_assert_uint_eq(len, n * 4);
        bool old = memcmp(got, v1, n * 4) == 0, new = memcmp(got, v2, n * 4) == 0;
        ck_assert_msg(old || new, "round %d: the array after the kill is neither", round);
        seen_old += old;
        seen_new += new;
        ck_assert_int_eq(count_files(".tmp"), 0);
        /* a remove cut short: there, whole, or gone */
        gpuq_request r = name_req(GPUQ_OP_REMOVE, "big");
        r.id = next_id++;
        e2e_send_req(fd, &r, NULL, 0);
        tu_sleep_s((double)(rand() % 3) / 1000.0);
        restart(true);
        close(fd);
        fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
        g = name_req(GPUQ_OP_GET, "big");
        g.id = next_id++;
        e2e_send_req(fd, &g, NULL, 0);
        ck_assert_int_eq(e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, got, n * 4, &len), 0);
        ck_assert_msg(rep.status == GPUQ_E_NOT_FOUND ||
                          (rep.status == 0 && len == n * 4 &&
                           (memcmp(got, v1, n * 4) == 0 || memcmp(got, v2, n * 4) == 0)),
                      "round %d: after a remove cut short: %s", round, gpuq_errname(rep.status));
        close(fd);
    }
    fprintf(stderr, "persist_kill9: old %d, new %d of %d\n", seen_old, seen_new, ROUNDS);
    free(v1);
    free(v2);
    free(got);
}
END_TEST

/* A full disk: the put fails (storage), keeps nothing, the old file and
 * array stay; a small one still fits. As root (a 1 MiB tmpfs). */
START_TEST(persist_full_disk)
{
    if (getuid() != 0) {
        fprintf(stderr, "persist_full_disk: not root (no tmpfs to fill); skipped\n");
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=1m gpuq-test %s", state_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "persist_full_disk: cannot mount a tmpfs; skipped\n");
        return;
    }
    restart(false);
    int fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    float *a = randf(1 << 19, 31); /* 2 MiB */
    gpuq_reply rep;
    gpuq_request q = persist_put("small", 1000, true);
    ck_assert_int_eq(call(fd, &q, a, 4000, &rep, NULL, 0, NULL), 0);
    q = persist_put("huge", 1 << 19, true);
    expect_refused(fd, q, a, 2u << 20, GPUQ_E_STORAGE, "No space left on device");
    expect_refused(fd, name_req(GPUQ_OP_GET, "huge"), NULL, 0, GPUQ_E_NOT_FOUND, "huge");
    q = persist_put("small", 1 << 19, true); /* replacing: the old stays */
    expect_refused(fd, q, a, 2u << 20, GPUQ_E_STORAGE, "cannot persist");
    float got[1000];
    size_t len;
    gpuq_request g = name_req(GPUQ_OP_GET, "small");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, sizeof got, &len), 0);
    ck_assert_int_eq(memcmp(got, a, sizeof got), 0);
    ck_assert_int_eq(e2e_status_int("resident_bytes"), 4000);
    ck_assert_int_eq(count_files(".tmp"), 0);
    close(fd);
    ck_assert_int_eq(tu_daemon_stop(&e2e_d), 0);
    snprintf(cmd, sizeof cmd, "umount %s", state_dir);
    ck_assert_int_eq(system(cmd), 0);
    e2e_start(state_args);
    free(a);
}
END_TEST

/* A minimal .npy of n float64 at path. */
static void write_npy(const char *path, const double *x, size_t n)
{
    char hdr[128];
    int len =
        snprintf(hdr, sizeof hdr, "{'descr': '<f8', 'fortran_order': False, 'shape': (%zu,), }", n);
    while ((len + 10 + 1) % 64)
        hdr[len++] = ' ';
    hdr[len++] = '\n';
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)len, 0};
    ck_assert_uint_eq(fwrite(pre, 1, 10, f), 10);
    ck_assert_uint_eq(fwrite(hdr, 1, (size_t)len, f), (size_t)len);
    ck_assert_uint_eq(fwrite(x, sizeof *x, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* libgpuq's gpuq_put(GPUQ_PERSIST) and gpuqctl put --persist: both back
 * after a restart; ls says so. */
START_TEST(persist_clients)
{
    double v[5] = {1, 2, 3, 4, 5.5}, w[3] = {-1, 0.25, 9};
    gpuq_conn *c = e2e_connect("lib", GPUQ_PRIO_NORMAL);
    ck_assert_msg(gpuq_put(c, "from-lib", GPUQ_DT_F64, 1, (const uint64_t[]){5}, v,
                           GPUQ_ACCESS_ALL | GPUQ_PERSIST) == 0,
                  "%s", gpuq_errmsg(c));
    gpuq_close(c);
    char npy[512], out[512], err[512];
    snprintf(npy, sizeof npy, "%s/w.npy", e2e_d.dir);
    snprintf(out, sizeof out, "%s/ctl.out", e2e_d.dir);
    snprintf(err, sizeof err, "%s/ctl.err", e2e_d.dir);
    write_npy(npy, w, 3);
    const char *put[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "put",
                         "--persist",  "from-ctl", npy,          NULL};
    ck_assert_int_eq(tu_run(put, out, err), 0);
    size_t len = 0;
    char *txt = tu_read_file(out, &len);
    ck_assert_msg(txt && strstr(txt, "put from-ctl: float64 (3,), 24 B, access private, persisted"),
                  "%s", txt ? txt : "");
    free(txt);
    restart(false);
    snprintf(out, sizeof out, "%s/ls.out", e2e_d.dir);
    snprintf(err, sizeof err, "%s/ls.err", e2e_d.dir);
    const char *ls[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "ls", NULL};
    ck_assert_int_eq(tu_run(ls, out, err), 0);
    txt = tu_read_file(out, &len);
    ck_assert_msg(txt && strstr(txt, "PERSIST") && strstr(txt, "from-ctl") &&
                      strstr(txt, "from-lib"),
                  "%s", txt ? txt : "");
    ck_assert_msg(strstr(txt, " yes\n"), "%s", txt);
    free(txt);
    int fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    double got[5];
    gpuq_reply rep;
    gpuq_request g = name_req(GPUQ_OP_GET, "from-lib");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, sizeof got, &len), 0);
    ck_assert_int_eq(memcmp(got, v, sizeof v), 0);
    g = name_req(GPUQ_OP_GET, "from-ctl");
    ck_assert_int_eq(call(fd, &g, NULL, 0, &rep, got, sizeof got, &len), 0);
    ck_assert_uint_eq(len, sizeof w);
    ck_assert_int_eq(memcmp(got, w, sizeof w), 0);
    close(fd);
}
END_TEST

START_TEST(persist_without_state_dir)
{
    const char *off[] = {"--state-dir", "", NULL};
    e2e_restart(off);
    int fd = e2e_hello_socket("persist", hbuf, sizeof hbuf);
    float v[4] = {1, 2, 3, 4};
    gpuq_request q = persist_put("p", 4, true);
    expect_refused(fd, q, v, sizeof v, GPUQ_E_STORAGE, "no state directory");
    q = persist_put("p", 4, false);
    gpuq_reply rep;
    ck_assert_int_eq(call(fd, &q, v, sizeof v, &rep, NULL, 0, NULL), 0);
    close(fd);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_resident");
    TCase *tc = tcase_create("resident");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, put_get_list_remove);
    tcase_add_test(tc, named_base_equals_carried);
    tcase_add_test(tc, kept_output_chain);
    tcase_add_test(tc, bad_inputs);
    tcase_add_test(tc, replace_and_remove_while_in_use);
    tcase_add_test(tc, quotas);
    tcase_add_test(tc, another_uid);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("persist");
    tcase_add_checked_fixture(tp, persist_setup, persist_teardown);
    tcase_set_timeout(tp, 180);
    tcase_add_test(tp, persist_restart);
    tcase_add_test(tp, persist_damaged);
    tcase_add_test(tp, persist_kill9);
    tcase_add_test(tp, persist_full_disk);
    tcase_add_test(tp, persist_without_state_dir);
    tcase_add_test(tp, persist_clients);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu();
    return tu_run_suite(suite());
}
