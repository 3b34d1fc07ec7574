/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_batch.c - gpuqd's batching of small normalize requests (CPU and
 * CUDA backends): requests that become ready in one loop iteration run as
 * one work item (CPU) or one launch (CUDA), each still answered alone with
 * its own result or error.
 *
 * A burst is the frames of several small normalize requests written to the
 * daemon in one send() on a raw socket, so that they arrive together; the
 * replies are read in request order. Inputs are multiples of 2^-10 within
 * about [-10, 10] (exact in float32), so the references are computed here
 * from the inputs as integers (sums, squares and deviations exact in int64)
 * with one or two roundings in long double: the exact results to within a
 * rounding to double. gpuqd promises a few units in the last place of the
 * exact result (gpuq_kernels.h); the bound is numtol.h's with 16 of them.
 *
 * Cases: a mixed burst (f32, f64, every method, 1-D, 2-D with cols <= 128
 * and > 128, flat, on_zero both ways with zero and constant rows) against
 * the exact results, and status `batches` / `batched`; a zero-sum row that
 * fails alone inside a burst; a burst equal bit for bit to the same
 * requests sent one at a time to a daemon with --batch-max 0; --batch-max
 * bounding a batch; `timing` and requests over --batch-bytes running alone;
 * a client that leaves right after its burst. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e_util.h"
#include "numtol.h"

_Static_assert(NT_F32 == GPUQ_DT_F32 && NT_F64 == GPUQ_DT_F64,
               "numtol.h numbers dtypes as the wire");
#if LDBL_MANT_DIG < 64
#error "the references need a long double of at least 64 bits of mantissa"
#endif

enum {
    MAXV = 1024,      /* values of one request */
    MAXJ = 24,        /* requests of one burst */
    ID0 = 1000,       /* the id of request k is ID0 + k */
    BURST_MAX = 32768 /* bytes: one send() stays one socket buffer (skb) */
};

/* One request of a burst: shape [cols] (rows 0) or [rows, cols]; plant >= 0
 * makes that row (of the rows as normalized: 1-D and flat have one) zero
 * (l1, l2), zero-sum with non-zero values (sum) or constant (minmax,
 * zscore): a zero_norm error, or zeros with on_zero "zero". */
typedef struct spec {
    gpuq_dtype dt;
    int method;
    uint32_t rows, cols;
    bool flat, zero_ok, timing;
    int plant;
} spec;

typedef struct job {
    spec s;
    uint64_t id;
    int32_t x[MAXV]; /* the input values times 1024 */
} job;

/* A reply as it came. */
typedef struct answer {
    int status;
    char message[256];
    bool has_timing;
    size_t len;
    uint8_t out[MAXV * sizeof(double)];
} answer;

static job jobs[MAXJ];
static answer ans[MAXJ], ans1[MAXJ];
static uint8_t hbuf[65536];

#define F32 GPUQ_DT_F32
#define F64 GPUQ_DT_F64
#define SUM GPUQ_NORM_SUM
#define L1 GPUQ_NORM_L1
#define L2 GPUQ_NORM_L2
#define MINMAX GPUQ_NORM_MINMAX
#define ZSCORE GPUQ_NORM_ZSCORE

/* The mixed burst: every method and dtype, 1-D and 2-D, cols <= 128 and
 * > 128, flat, on_zero "zero" with a zero, zero-sum or constant row. */
static const spec mixed[] = {
    {F32, SUM, 0, 16, false, false, false, -1},    {F64, L1, 0, 64, false, false, false, -1},
    {F32, L2, 3, 20, false, false, false, -1},     {F64, MINMAX, 2, 130, false, false, false, -1},
    {F32, ZSCORE, 4, 16, false, false, false, -1}, {F64, SUM, 3, 20, false, true, false, 1},
    {F32, L1, 2, 130, false, true, false, 0},      {F64, L2, 0, 33, false, true, false, -1},
    {F32, MINMAX, 3, 11, true, false, false, -1},  {F64, ZSCORE, 0, 129, false, false, false, -1},
    {F64, SUM, 2, 130, false, false, false, -1},   {F32, SUM, 3, 11, true, true, false, -1},
    {F64, L1, 4, 16, false, false, false, -1},     {F32, L2, 0, 200, false, false, false, -1},
    {F64, MINMAX, 5, 24, false, true, false, 3},   {F32, ZSCORE, 3, 20, false, true, false, 2},
    {F32, MINMAX, 0, 48, false, false, false, -1}, {F64, ZSCORE, 2, 130, false, false, false, -1},
    {F64, L2, 4, 16, false, true, false, 0},       {F32, SUM, 2, 129, false, true, false, 1},
};
#define NMIXED ((int)(sizeof mixed / sizeof mixed[0]))

/* The bad request: row 1 of 3 sums to zero, method sum, on_zero left at
 * its default (error). */
static const spec bad = {F64, SUM, 3, 16, false, false, false, 1};

static size_t spec_n(const spec *s)
{
    return (size_t)(s->rows ? s->rows : 1) * s->cols;
}

/* Rows and columns as normalized (1-D and flat: one row). */
static size_t norm_rows(const spec *s)
{
    return s->rows && !s->flat ? s->rows : 1;
}

static size_t norm_cols(const spec *s)
{
    return spec_n(s) / norm_rows(s);
}

/* Random multiples of 2^-10 in [-10, 10]; rows that would fail by chance
 * (a zero sum, a constant row) are nudged; then the planted row. */
static void make_job(job *j, const spec *s, int k)
{
    size_t n = spec_n(s), rows = norm_rows(s), cols = norm_cols(s);
    ck_assert_uint_le(n, MAXV);
    j->s = *s;
    j->id = ID0 + (uint64_t)k;
    double v[MAXV];
    tu_rand_fill_f64(v, n, -10.0, 10.0);
    for (size_t i = 0; i < n; i++)
        j->x[i] = (int32_t)lround(v[i] * 1024.0);
    for (size_t r = 0; r < rows; r++) {
        int32_t *x = j->x + r * cols;
        int64_t sum = 0;
        bool constant = true;
        for (size_t c = 0; c < cols; c++) {
            sum += x[c];
            constant = constant && x[c] == x[0];
        }
        if (sum == 0 || (constant && cols > 1))
            x[0] += 1;
    }
    if (s->plant < 0)
        return;
    ck_assert_uint_lt((size_t)s->plant, rows);
    int32_t *x = j->x + (size_t)s->plant * cols;
    for (size_t c = 0; c < cols; c++) {
        if (s->method == SUM) /* pairs +a, -a (an odd last one 0): non-zero, summing to 0 */
            x[c] = c % 2 ? -x[c - 1] : (c + 1 < cols ? x[c] | 1 : 0);
        else if (s->method == MINMAX || s->method == ZSCORE)
            x[c] = x[0] | 1;
        else
            x[c] = 0;
    }
}

static void make_jobs(const spec *s, int count)
{
    ck_assert_int_le(count, MAXJ);
    for (int k = 0; k < count; k++)
        make_job(&jobs[k], &s[k], k);
}

/* "f64 zscore [3, 20] flat on_zero=zero timing" (a static buffer). */
static const char *describe(const job *j)
{
    static const char *const methods[] = {"sum", "l1", "l2", "minmax", "zscore"};
    static char d[96];
    char shape[48];
    if (j->s.rows)
        snprintf(shape, sizeof shape, "[%u, %u]", j->s.rows, j->s.cols);
    else
        snprintf(shape, sizeof shape, "[%u]", j->s.cols);
    snprintf(d, sizeof d, "%s %s %s%s%s%s", gpuq_dtype_name(j->s.dt), methods[j->s.method], shape,
             j->s.flat ? " flat" : "", j->s.zero_ok ? " on_zero=zero" : "",
             j->s.timing ? " timing" : "");
    return d;
}

static bool expect_error(const job *j)
{
    return j->s.plant >= 0 && !j->s.zero_ok;
}

/* The request and its payload (the input in its dtype) into pay. */
static gpuq_request job_req(const job *j, void *pay, size_t *plen)
{
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_NORMALIZE;
    r.id = j->id;
    r.dtype = j->s.dt;
    if (j->s.rows == 0) {
        r.ndim_a = 1;
        r.shape_a[0] = j->s.cols;
    } else {
        r.ndim_a = 2;
        r.shape_a[0] = j->s.rows;
        r.shape_a[1] = j->s.cols;
    }
    ck_assert_int_eq(gpuq_request_set_enum_index(&r, "method", j->s.method), 0);
    if (j->s.flat)
        ck_assert_int_eq(gpuq_request_set_bool(&r, "flat", true), 0);
    if (j->s.zero_ok)
        ck_assert_int_eq(gpuq_request_set_enum(&r, "on_zero", "zero"), 0);
    r.timing = j->s.timing;
    size_t n = spec_n(&j->s);
    for (size_t i = 0; i < n; i++) {
        double v = ldexp((double)j->x[i], -10);
        if (j->s.dt == F32)
            ((float *)pay)[i] = (float)v;
        else
            ((double *)pay)[i] = v;
    }
    *plen = n * gpuq_dtype_size(j->s.dt);
    return r;
}

/* jobs[first, first + count) in one send(). */
static void send_burst(int fd, int first, int count)
{
    static double pay[MAXV];
    uint8_t *buf = NULL;
    size_t len = 0;
    for (int k = first; k < first + count; k++) {
        size_t plen;
        gpuq_request r = job_req(&jobs[k], pay, &plen);
        e2e_append_req(&buf, &len, &r, pay, plen);
    }
    ck_assert_uint_le(len, BURST_MAX);
    ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
    ck_assert_msg(w == (ssize_t)len, "one send() of the %zu-byte burst wrote %zd", len, w);
    free(buf);
}

/* The replies of jobs[first, first + count), in order, into a[]. */
static void read_answers(int fd, int first, int count, answer *a)
{
    for (int k = first; k < first + count; k++) {
        gpuq_reply rep;
        memset(&a[k], 0, sizeof a[k]);
        int rc =
            e2e_read_reply_data(fd, &rep, hbuf, sizeof hbuf, a[k].out, sizeof a[k].out, &a[k].len);
        ck_assert_msg(rc == 0, "reply %d of the burst: %s", k,
                      rc == E2E_CLOSED ? "closed" : "timed out");
        ck_assert_msg(rep.id == jobs[k].id, "reply %d has id %llu, want %llu", k,
                      (unsigned long long)rep.id, (unsigned long long)jobs[k].id);
        a[k].status = rep.status;
        snprintf(a[k].message, sizeof a[k].message, "%s", rep.message);
        a[k].has_timing = rep.has_timing;
    }
}

/* A burst of jobs[0, count) on a fresh connection, its replies into a[]. */
static void run_burst(int count, answer *a)
{
    int fd = e2e_hello_socket("batch", hbuf, sizeof hbuf);
    send_burst(fd, 0, count);
    read_answers(fd, 0, count, a);
    close(fd);
}

/* The exact result of one row (x[n] times 1024) rounded to double into
 * out; false when the row's norm is zero or the row is constant. */
static bool ref_row(int method, const int32_t *x, size_t n, double *out)
{
    int64_t sum = 0, abs_sum = 0, sq = 0, lo = x[0], hi = x[0];
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        abs_sum += llabs(x[i]);
        sq += (int64_t)x[i] * x[i];
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    long double den = 0.0L, shift = 0.0L, scale = 1.0L;
    switch (method) {
    case SUM:
        den = (long double)sum;
        break;
    case L1:
        den = (long double)abs_sum;
        break;
    case L2:
        den = sqrtl((long double)sq);
        break;
    case MINMAX:
        den = (long double)(hi - lo);
        shift = (long double)lo;
        break;
    default: { /* z = (n x - S) sqrt(n / Q), Q = sum (n x - S)^2 */
        int64_t q = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t d = (int64_t)n * x[i] - sum;
            q += d * d;
        }
        if (q == 0)
            return false;
        scale = sqrtl((long double)n / (long double)q);
        for (size_t i = 0; i < n; i++)
            out[i] = (double)((long double)((int64_t)n * x[i] - sum) * scale);
        return true;
    }
    }
    if (den == 0.0L)
        return false;
    for (size_t i = 0; i < n; i++)
        out[i] = (double)(((long double)x[i] - shift) / den);
    return true;
}

/* The reply of job k: its error (the planted row named), or its result
 * against the exact one, element by element. */
static void check_answer(int k, const answer *a)
{
    const job *j = &jobs[k];
    ck_assert_msg(a->has_timing == j->s.timing, "request %d: timing %d in the reply, asked %d", k,
                  a->has_timing, j->s.timing);
    if (expect_error(j)) {
        ck_assert_msg(a->status == GPUQ_E_ZERO_NORM, "request %d (%s): %s (%s), want zero_norm", k,
                      describe(j), gpuq_errname(a->status), a->message);
        char row[32];
        snprintf(row, sizeof row, "row %d ", j->s.plant);
        ck_assert_msg(strstr(a->message, row) != NULL,
                      "request %d: message \"%s\" does not name its own %s", k, a->message, row);
        ck_assert_uint_eq(a->len, 0);
        return;
    }
    ck_assert_msg(a->status == 0, "request %d (%s): %s (%s)", k, describe(j),
                  gpuq_errname(a->status), a->message);
    size_t n = spec_n(&j->s), rows = norm_rows(&j->s), cols = norm_cols(&j->s);
    ck_assert_msg(a->len == n * gpuq_dtype_size(j->s.dt), "request %d: %zu result bytes, want %zu",
                  k, a->len, n * gpuq_dtype_size(j->s.dt));
    static double got[MAXV], ref[MAXV], tol[MAXV];
    for (size_t i = 0; i < n; i++)
        got[i] = j->s.dt == F32 ? (double)((const float *)a->out)[i] : ((const double *)a->out)[i];
    for (size_t r = 0; r < rows; r++) {
        double *rr = ref + r * cols;
        if (!ref_row(j->s.method, j->x + r * cols, cols, rr)) {
            ck_assert_msg(j->s.zero_ok, "request %d: row %zu degenerate, not planted", k, r);
            memset(rr, 0, cols * sizeof *rr); /* on_zero "zero" */
        }
        double most = 0.0; /* zscore: an element near the mean is off by the row's ulps */
        for (size_t c = 0; c < cols; c++)
            most = fmax(most, fabs(rr[c]));
        for (size_t c = 0; c < cols; c++)
            tol[r * cols + c] = nt_tol(j->s.dt, 1, 1, rr[c], 16.0 * NT_U * fabs(rr[c])) +
                                (j->s.method == ZSCORE ? 4.0 * NT_U * most : 0.0);
    }
    size_t w = 0;
    double q = nt_worst(got, ref, tol, n, &w);
    ck_assert_msg(q <= 1.0,
                  "request %d (%s): element %zu is %.17g, exact %.17g (%.3g times the bound)", k,
                  describe(j), w, got[w], ref[w], q);
}

/* Status batches and batched, from one status. */
static void batch_counts(long long *batches, long long *batched)
{
    static char js[65536];
    e2e_status(js, sizeof js);
    *batches = e2e_json_int(js, "batches");
    *batched = e2e_json_int(js, "batched");
}

static void setup(void)
{
    memset(&e2e_d, 0, sizeof e2e_d);
}

static void teardown(void)
{
    if (e2e_d.pid > 0)
        e2e_teardown();
}

/* A mixed burst: every reply exact, and the daemon says it batched. A
 * small normalize sent alone first is no batch. */
START_TEST(batched_results_exact)
{
    e2e_start(NULL);
    e2e_assert_serves(); /* one small normalize, alone */
    long long batches, batched;
    batch_counts(&batches, &batched);
    ck_assert_msg(batches == 0 && batched == 0,
                  "a fresh daemon after one request: batches %lld, batched %lld", batches, batched);
    make_jobs(mixed, NMIXED);
    run_burst(NMIXED, ans);
    for (int k = 0; k < NMIXED; k++)
        check_answer(k, &ans[k]);
    batch_counts(&batches, &batched);
    ck_assert_msg(batches >= 1 && batched >= 2 && batched <= NMIXED && batched >= 2 * batches,
                  "a burst of %d: batches %lld, batched %lld", NMIXED, batches, batched);
}
END_TEST

/* A zero-sum row among good requests: that request alone fails, with a
 * message naming its own row; the others are exact; the daemon serves on. */
START_TEST(bad_request_fails_alone)
{
    e2e_start(NULL);
    spec s[9];
    memcpy(s, mixed, 3 * sizeof s[0]);
    s[3] = bad;
    memcpy(s + 4, mixed + 3, 5 * sizeof s[0]);
    make_jobs(s, 9);
    run_burst(9, ans);
    for (int k = 0; k < 9; k++)
        check_answer(k, &ans[k]);
    ck_assert_msg(ans[3].message[0] != '\0', "zero_norm without a message");
    long long batches, batched;
    batch_counts(&batches, &batched);
    ck_assert_msg(batches >= 1 && batched >= 2, "batches %lld, batched %lld", batches, batched);
    e2e_assert_serves();
}
END_TEST

/* The mixed burst and the bad request, batched, give the same bytes,
 * statuses and messages as the same requests sent one at a time to a
 * daemon that does not batch. */
START_TEST(batched_equals_unbatched)
{
    e2e_start(NULL);
    spec s[NMIXED + 1]; /* the bad one in the middle: requests after it in its batch */
    memcpy(s, mixed, 7 * sizeof s[0]);
    s[7] = bad;
    memcpy(s + 8, mixed + 7, (NMIXED - 7) * sizeof s[0]);
    int count = NMIXED + 1;
    make_jobs(s, count);
    run_burst(count, ans);
    for (int k = 0; k < count; k++)
        check_answer(k, &ans[k]);
    long long batches, batched;
    batch_counts(&batches, &batched);
    ck_assert_msg(batches >= 1 && batched >= 2, "batches %lld, batched %lld", batches, batched);

    const char *extra[] = {"--batch-max", "0", NULL};
    e2e_restart(extra);
    int fd = e2e_hello_socket("one-by-one", hbuf, sizeof hbuf);
    for (int k = 0; k < count; k++) {
        send_burst(fd, k, 1);
        read_answers(fd, k, 1, ans1);
    }
    close(fd);
    for (int k = 0; k < count; k++) {
        ck_assert_msg(ans[k].status == ans1[k].status, "request %d: batched %s, alone %s", k,
                      gpuq_errname(ans[k].status), gpuq_errname(ans1[k].status));
        ck_assert_msg(strcmp(ans[k].message, ans1[k].message) == 0,
                      "request %d: batched \"%s\", alone \"%s\"", k, ans[k].message,
                      ans1[k].message);
        ck_assert_uint_eq(ans[k].len, ans1[k].len);
        ck_assert_msg(memcmp(ans[k].out, ans1[k].out, ans[k].len) == 0,
                      "request %d (%s): batched and alone differ", k, describe(&jobs[k]));
    }
    batch_counts(&batches, &batched);
    ck_assert_msg(batches == 0 && batched == 0, "--batch-max 0: batches %lld, batched %lld",
                  batches, batched);
}
END_TEST

/* --batch-max 4: a burst of 16 takes at least four batches. */
START_TEST(batch_max_bounds_a_batch)
{
    const char *extra[] = {"--batch-max", "4", NULL};
    e2e_start(extra);
    make_jobs(mixed, 16);
    run_burst(16, ans);
    for (int k = 0; k < 16; k++)
        check_answer(k, &ans[k]);
    long long batches, batched;
    batch_counts(&batches, &batched);
    ck_assert_msg(batches >= 4 && batched <= 16 && batched >= 2 * batches,
                  "--batch-max 4, a burst of 16: batches %lld, batched %lld", batches, batched);
}
END_TEST

/* --batch-bytes 256: requests over it, and requests with timing, run
 * alone; in a burst that mixes them with four small plain ones (two of
 * exactly 256 bytes), those four make one batch. */
START_TEST(timing_and_large_run_alone)
{
    const char *extra[] = {"--batch-bytes", "256", NULL};
    e2e_start(extra);
    static const spec large[] = {
        {F32, SUM, 0, 1024, false, false, false, -1},
        {F32, L2, 0, 1024, false, false, false, -1},
        {F32, ZSCORE, 0, 1024, false, false, false, -1},
        {F64, SUM, 0, 17, false, false, false, -1},
        {F64, MINMAX, 0, 17, false, false, false, -1},
        {F32, L1, 2, 65, false, false, false, -1},
    };
    static const spec timed[] = {
        {F32, SUM, 0, 16, false, false, true, -1},    {F64, L1, 0, 16, false, false, true, -1},
        {F32, L2, 2, 8, false, false, true, -1},      {F64, MINMAX, 4, 2, false, false, true, -1},
        {F32, ZSCORE, 0, 16, false, false, true, -1}, {F64, SUM, 2, 8, false, false, true, -1},
    };
    static const spec mix[] = {
        {F64, SUM, 0, 16, false, false, false, -1},   {F32, L2, 0, 1024, false, false, false, -1},
        {F32, SUM, 0, 16, false, false, true, -1},    {F32, L1, 0, 16, false, false, false, -1},
        {F64, SUM, 0, 17, false, false, false, -1},   {F64, L2, 2, 8, false, false, true, -1},
        {F32, ZSCORE, 2, 8, false, false, false, -1}, {F32, MINMAX, 2, 65, false, false, false, -1},
        {F32, L1, 0, 16, false, false, true, -1},     {F64, MINMAX, 2, 8, false, false, false, -1},
    };
    const struct {
        const spec *s;
        int n;
        long long batches, batched; /* after it */
    } bursts[] = {{large, 6, 0, 0}, {timed, 6, 0, 0}, {mix, 10, 1, 4}};
    for (int b = 0; b < 3; b++) {
        make_jobs(bursts[b].s, bursts[b].n);
        run_burst(bursts[b].n, ans);
        for (int k = 0; k < bursts[b].n; k++)
            check_answer(k, &ans[k]);
        long long batches, batched;
        batch_counts(&batches, &batched);
        ck_assert_msg(batches == bursts[b].batches && batched == bursts[b].batched,
                      "after burst %d: batches %lld, batched %lld; want %lld, %lld", b, batches,
                      batched, bursts[b].batches, bursts[b].batched);
    }
}
END_TEST

/* A client that closes right after its burst while another sends its own:
 * the other's replies are exact, nothing stays in flight, queued or
 * staged, and the daemon serves on. On the CPU backend each job first
 * sleeps 10 ms (GPUQ_TEST_SLOW_MS; a batch is one work item that runs its
 * jobs one after the other), so the leaving client's batched jobs are
 * still running or queued when it closes, and are counted cancelled; the
 * CUDA backend keeps slow jobs off the batch path, so there the batches
 * run at full speed and the close lands where it lands. */
START_TEST(client_leaves_after_burst)
{
    bool cpu = strcmp(tu_test_device(), "cpu") == 0;
    if (cpu)
        setenv("GPUQ_TEST_SLOW_MS", "10", 1);
    e2e_start(NULL);
    unsetenv("GPUQ_TEST_SLOW_MS");
    make_jobs(mixed, NMIXED);
    int gone = e2e_hello_socket("gone", hbuf, sizeof hbuf);
    int stays = e2e_hello_socket("stays", hbuf, sizeof hbuf);
    send_burst(gone, 0, NMIXED);
    ck_assert_int_eq(close(gone), 0);
    send_burst(stays, 0, NMIXED);
    read_answers(stays, 0, NMIXED, ans);
    close(stays);
    for (int k = 0; k < NMIXED; k++)
        check_answer(k, &ans[k]);
    e2e_wait_status("in_flight", 0, 5);
    e2e_wait_status("queued", 0, 5);
    e2e_wait_status("staging_bytes", 0, 5);
    long long batches, batched;
    batch_counts(&batches, &batched);
    ck_assert_msg(batches >= 1 && batched >= 2, "batches %lld, batched %lld", batches, batched);
    if (cpu) {
        long long cancelled = e2e_status_int("cancelled");
        ck_assert_msg(cancelled >= 1 && cancelled <= NMIXED,
                      "cancelled %lld: the leaving client's jobs ran before it left?", cancelled);
    }
    e2e_assert_serves();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_batch");
    TCase *tc = tcase_create("batch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, batched_results_exact);
    tcase_add_test(tc, bad_request_fails_alone);
    tcase_add_test(tc, batched_equals_unbatched);
    tcase_add_test(tc, batch_max_bounds_a_batch);
    tcase_add_test(tc, timing_and_large_run_alone);
    tcase_add_test(tc, client_leaves_after_burst);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* the CUDA run: exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
