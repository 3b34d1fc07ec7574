/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_session_replay.c - main() of fuzz_session_replay: the session
 * fuzzer's target (fuzz_session.c) over a built-in set of scripts and any
 * files named on the command line, as a plain unit test (normal and ASan
 * builds). The scripts cover every op (finished ok and failed, with timing
 * and f32), a hello+normalize split at every byte and cut once at many
 * points, disconnects mid-payload, in the backend and half-closes, staging
 * waits and a request too large for staging, a client that never reads,
 * broken prefixes and bad lengths, max_sessions refusal, kill_session,
 * drain, shutdown, SIGTERM and drain timeout with work in flight, device
 * lost, injected backend failures, limits changed at run time, pipelining
 * with out-of-order and automatic completion.
 *
 * "fuzz_session_replay --write DIR" stores the scripts in DIR: that is the
 * checked-in seed corpus (corpus_session/); rerun it when a script changes.
 * GPUQ_FUZZ_TRACE=1 prints every command, reply and server log line (for a
 * crash file the fuzzer wrote: fuzz_session_replay crash-...).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_backend.h"
#include "fuzz_session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sbuf {
    uint8_t b[4096];
    size_t n;
    char name[64];
} sbuf;

static void put_arr(sbuf *s, const uint8_t *b, size_t n)
{
    if (s->n + n > sizeof s->b)
        fuzz_violation("built-in script %s too long", s->name);
    memcpy(s->b + s->n, b, n);
    s->n += n;
}
#define PUT(s, ...)                                                                                \
    put_arr(s, (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__}))

/* short names for the scripts below */
#define OP FZ_OP
#define F_HELLO FZ_F_HELLO
#define F_PING FZ_F_PING
#define F_STATUS FZ_F_STATUS
#define F_NORM FZ_F_NORMALIZE
#define F_HAV FZ_F_HAVERSINE
#define F_GRID FZ_F_GRID
#define F_PAIR FZ_F_PAIRWISE
#define F_SESS FZ_F_SESSIONS
#define F_METR FZ_F_METRICS
#define F_DRAIN FZ_F_DRAIN
#define F_SHUT FZ_F_SHUTDOWN
#define F_KILL FZ_F_KILL_SESSION
#define F_SETLIM FZ_F_SET_LIMIT
/* profiles: total_staging, session_staging, max_inflight */
#define P_ROOMY (FZ_P1_TOTAL(3) | FZ_P1_SESSION(3) | FZ_P1_INFLIGHT(3)) /* 4M, 4M, 64 */
#define P_TIGHT (FZ_P1_TOTAL(0) | FZ_P1_SESSION(0) | FZ_P1_INFLIGHT(1)) /* 8K, 4K, 2 */
#define P_32K (FZ_P1_TOTAL(3) | FZ_P1_SESSION(2) | FZ_P1_INFLIGHT(3))   /* 4M, 32K, 64 */
#define P_4K (FZ_P1_TOTAL(3) | FZ_P1_SESSION(0) | FZ_P1_INFLIGHT(1))    /* 4M, 4K, 2 */

static void frame(sbuf *s, int cl, int send, int sel, int fl, int a, int b)
{
    PUT(s, OP(cl, send ? FZ_CMD_FRAME_SEND : FZ_CMD_FRAME), sel, fl, a, b);
}
static void run(sbuf *s, int k)
{
    PUT(s, OP(0, FZ_CMD_RUN), k);
}
static void hello(sbuf *s, int cl)
{
    frame(s, cl, 1, F_HELLO, 0, 5, 0);
}
/* n raw bytes of value v for client cl, queued (RAW commands of <= 255) */
static void raw_fill(sbuf *s, int cl, size_t n, uint8_t v)
{
    while (n > 0) {
        size_t k = n < 255 ? n : 255;
        PUT(s, OP(cl, FZ_CMD_RAW), (int)k);
        for (size_t i = 0; i < k; i++)
            PUT(s, v);
        n -= k;
    }
}

static int nscripts;
static sbuf scripts[128];

static sbuf *script_new2(const char *name, uint8_t profile, uint8_t profile2)
{
    if (nscripts == (int)(sizeof scripts / sizeof scripts[0]))
        fuzz_violation("too many built-in scripts");
    sbuf *s = &scripts[nscripts++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    PUT(s, profile, profile2);
    return s;
}

static sbuf *script_new(const char *name, uint8_t profile)
{
    return script_new2(name, profile, 0);
}

static void scripts_ops(void)
{
    sbuf *s;
    /* every op, each with timing and f32 variants, finished ok and failed */
    static const char *const names[] = {
        "hello",    "ping",    "status", "normalize", "haversine",    "grid",     "pairwise",
        "sessions", "metrics", "drain",  "shutdown",  "kill_session", "set_limit"};
    for (int op = 0; op < FZ_F_COUNT; op++) {
        char nm[64];
        snprintf(nm, sizeof nm, "op-%s", names[op]);
        s = script_new(nm, P_ROOMY);
        hello(s, 0);
        frame(s, 0, 1, op, 0, 3, 4);
        frame(s, 0, 1, op, FZ_FL_TIMING | FZ_FL_F32 | FZ_FL_VARIANT, 2, 3);
        frame(s, 0, 1, op, 0x40 | FZ_FL_VARIANT, 9, 1);
        run(s, 3);
        PUT(s, OP(0, FZ_CMD_FINISH), 1, 4); /* second job fails (zero_norm) */
        PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
        run(s, 3);
        PUT(s, OP(0, FZ_CMD_SYNC));
        frame(s, 1, 1, F_PING, 0, 0, 0); /* another client is served after it */
        PUT(s, OP(1, FZ_CMD_SYNC));
    }
}

static void scripts_split(void)
{
    sbuf *s;
    /* hello + normalize, split at every byte (one byte, one loop turn) */
    s = script_new("split-every-byte", P_ROOMY);
    frame(s, 0, 0, F_HELLO, 0, 5, 0);
    frame(s, 0, 0, F_NORM, 1, 2, 3);
    for (int i = 0; i < 400; i++)
        PUT(s, OP(0, FZ_CMD_SEND | FZ_AND_RUN), 1);
    PUT(s, OP(0, FZ_CMD_SYNC));
    /* the same two frames cut once at each point k: send k, run, send the rest */
    for (int k = 1; k < 200; k += 7) {
        char nm[64];
        snprintf(nm, sizeof nm, "split-at-%d", k);
        s = script_new(nm, P_ROOMY);
        frame(s, 0, 0, F_HELLO, 0, 5, 0);
        frame(s, 0, 0, F_NORM, 1, 2, 3);
        PUT(s, OP(0, FZ_CMD_SEND), k);
        run(s, 2);
        PUT(s, OP(0, FZ_CMD_SEND), 0);
        PUT(s, OP(0, FZ_CMD_SYNC));
    }
}

static void scripts_disconnect(void)
{
    sbuf *s;
    /* disconnect mid payload, and while the job is in the backend */
    s = script_new("close-mid-payload", P_ROOMY);
    hello(s, 0);
    frame(s, 0, 0, F_PAIR, 2 | 0x60, 4, 4);
    PUT(s, OP(0, FZ_CMD_SEND), 140); /* prefix, header (~80) and part of the payload */
    run(s, 2);
    PUT(s, OP(0, FZ_CMD_CLOSE));
    run(s, 2);
    hello(s, 1);
    frame(s, 1, 1, F_PING, 0, 0, 0);
    PUT(s, OP(1, FZ_CMD_SYNC));
    s = script_new("close-in-backend", P_ROOMY);
    hello(s, 0);
    frame(s, 0, 1, F_NORM, 0, 3, 3);
    frame(s, 0, 1, F_HAV, 16, 3, 0);
    run(s, 3);
    PUT(s, OP(0, FZ_CMD_CLOSE));
    run(s, 3);
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    run(s, 3);
    hello(s, 2);
    PUT(s, OP(2, FZ_CMD_SYNC));
    s = script_new("half-close", P_ROOMY);
    hello(s, 0);
    frame(s, 0, 1, F_NORM, 0, 3, 3);
    PUT(s, OP(0, FZ_CMD_SHUT_WR | FZ_AND_RUN));
    PUT(s, OP(0, FZ_CMD_SYNC));
}

static void scripts_backpressure(void)
{
    sbuf *s;
    /* staging waits: 8K total, 4K per session, two sessions */
    s = script_new("staging-wait", P_TIGHT);
    hello(s, 0);
    hello(s, 1);
    frame(s, 0, 1, F_NORM, 0, 5, 5);
    frame(s, 0, 1, F_NORM, 0, 5, 5); /* waits for the session's 4K */
    frame(s, 1, 1, F_PAIR, 0x20, 3, 3);
    frame(s, 1, 1, F_PING, 0, 0, 0);
    run(s, 4);
    PUT(s, OP(0, FZ_CMD_FINISH), 0, 0);
    run(s, 4);
    PUT(s, OP(0, FZ_CMD_SYNC));
    s = script_new("staging-too-large", P_TIGHT);
    hello(s, 0);
    frame(s, 0, 1, F_GRID, 16, 0, 1);
    frame(s, 0, 1, F_PING, 0, 0, 0);
    PUT(s, OP(0, FZ_CMD_SYNC));
    /* a client that never reads its replies, while another is served */
    s = script_new("never-reads", P_32K);
    hello(s, 0);
    PUT(s, OP(0, FZ_CMD_STOP_READ));
    for (int i = 0; i < 12; i++) {
        frame(s, 0, 1, F_METR, 0, 0, 0);
        frame(s, 0, 1, F_GRID, 0, 7, 7);
        run(s, 1);
    }
    hello(s, 1);
    for (int i = 0; i < 6; i++)
        frame(s, 1, 1, F_PING, 0, 0, 0);
    PUT(s, OP(1, FZ_CMD_FINISH_ALL), 0);
    run(s, 8);
    PUT(s, OP(0, FZ_CMD_SYNC));
    PUT(s, OP(0, FZ_CMD_START_READ));
    PUT(s, OP(0, FZ_CMD_SYNC));
}

static void scripts_bad_frames(void)
{
    sbuf *s;
    /* broken prefixes: bad magic and a future version, mid-stream */
    s = script_new("broken-prefix", P_ROOMY);
    hello(s, 0);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    PUT(s, OP(0, FZ_CMD_RAW), 20, 'G', 'P', 'U', 'X', 1, 1, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0);
    frame(s, 0, 1, F_PING, 0, 0, 0);
    run(s, 4);
    PUT(s, OP(0, FZ_CMD_SYNC));
    hello(s, 1);
    PUT(s, OP(1, FZ_CMD_RAW), 20, 'G', 'P', 'U', 'Q', 9, 1, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0);
    PUT(s, OP(1, FZ_CMD_SEND), 0);
    PUT(s, OP(1, FZ_CMD_SYNC));
    s = script_new("bad-lengths", P_ROOMY);
    hello(s, 0);
    /* header_len 0 (bad_header, the session goes on); header_len 2100 over
     * max_header 2048, 3 payload bytes (too_large, then closed) */
    PUT(s, OP(0, FZ_CMD_RAW), 20, 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0);
    PUT(s, OP(0, FZ_CMD_RAW), 20, 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 0x34, 0x08, 0, 0, 3, 0, 0, 0, 0,
        0, 0, 0);
    PUT(s, OP(0, FZ_CMD_SEND), 0);
    run(s, 2);
    raw_fill(s, 0, 2103, 0xee); /* sent in pieces to a closing session */
    for (int i = 0; i < 10; i++)
        PUT(s, OP(0, FZ_CMD_SEND | FZ_AND_RUN), 250);
    /* a header that is not msgpack, with a 3-byte payload */
    PUT(s, OP(0, FZ_CMD_RAW), 26, 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0,
        0, 0xc1, 0xc1, 0xc1, 1, 2, 3);
    PUT(s, OP(0, FZ_CMD_SEND), 0);
    frame(s, 0, 1, F_PING, 0, 0, 0);
    PUT(s, OP(0, FZ_CMD_SYNC));
    /* lengths that overflow; a header over the inline buffer (512 bytes) */
    s = script_new("length-overflow", P_ROOMY);
    hello(s, 0);
    PUT(s, OP(0, FZ_CMD_RAW), 20, 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 9, 0, 0, 0, 0xfc, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff);
    PUT(s, OP(0, FZ_CMD_SEND), 0);
    PUT(s, OP(0, FZ_CMD_SYNC));
    s = script_new("big-header", P_ROOMY);
    hello(s, 0);
    PUT(s, OP(0, FZ_CMD_RAW), 20, 'G', 'P', 'U', 'Q', 1, 1, 0, 0, 0xbc, 0x02, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0);
    PUT(s, OP(0, FZ_CMD_RAW), 3, 0x81, 0xa2, 'i');
    raw_fill(s, 0, 697, 0xa0);
    PUT(s, OP(0, FZ_CMD_SEND), 200);
    run(s, 1);
    PUT(s, OP(0, FZ_CMD_SEND), 0);
    frame(s, 0, 1, F_PING, 0, 0, 0);
    PUT(s, OP(0, FZ_CMD_SYNC));
}

static void scripts_sessions(void)
{
    sbuf *s;
    /* max_sessions 3: the fourth is refused */
    s = script_new("refused", FZ_P1_MAX_SESSIONS_3 | P_32K);
    for (int cl = 0; cl < 4; cl++) {
        PUT(s, OP(cl, FZ_CMD_CONNECT));
        run(s, 1);
    }
    for (int cl = 0; cl < 4; cl++)
        hello(s, cl);
    PUT(s, OP(0, FZ_CMD_SYNC));
    PUT(s, OP(1, FZ_CMD_CLOSE | FZ_AND_RUN));
    PUT(s, OP(3, FZ_CMD_CLOSE));
    hello(s, 3);
    PUT(s, OP(3, FZ_CMD_SYNC));
    /* kill_session: session 1 killed by session 2 with a job in flight */
    s = script_new("kill", P_ROOMY);
    hello(s, 0);
    hello(s, 1);
    run(s, 2);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    run(s, 2);
    frame(s, 1, 1, F_KILL, 0, 1, 0);
    frame(s, 1, 1, F_KILL, 0, 2, 0); /* itself: refused */
    run(s, 4);
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    PUT(s, OP(1, FZ_CMD_SYNC));
    /* drain: no new sessions; the server shuts down when the last leaves */
    s = script_new("drain", P_ROOMY);
    hello(s, 0);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    frame(s, 0, 1, F_DRAIN, 0, 0, 0);
    run(s, 3);
    hello(s, 1); /* refused connection */
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    PUT(s, OP(0, FZ_CMD_SYNC));
    PUT(s, OP(0, FZ_CMD_CLOSE | FZ_AND_RUN));
    s = script_new("shutdown-op", P_ROOMY);
    hello(s, 0);
    hello(s, 1);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    frame(s, 1, 1, F_SHUT, 0, 0, 0);
    run(s, 3);
    frame(s, 0, 1, F_PING, 0, 0, 0);
    frame(s, 0, 1, F_STATUS, 0, 0, 0);
    run(s, 3);
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    run(s, 6);
}

static void scripts_shutdown(void)
{
    sbuf *s;
    /* SIGTERM with work in flight, and the device lost */
    s = script_new("sigterm", P_4K);
    hello(s, 0);
    frame(s, 0, 1, F_HAV, 0, 4, 0);
    run(s, 2);
    PUT(s, OP(0, FZ_CMD_SIGTERM | FZ_AND_RUN));
    frame(s, 0, 1, F_PING, 0, 0, 0);
    run(s, 2);
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    run(s, 4);
    s = script_new("device-lost", P_ROOMY);
    hello(s, 0);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    frame(s, 0, 1, F_PAIR, 0x20, 2, 2);
    run(s, 2);
    PUT(s, OP(0, FZ_CMD_LOSE));
    PUT(s, OP(0, FZ_CMD_FINISH), 1, 6);
    run(s, 3);
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    run(s, 3);
    /* the drain timeout expires with jobs in the backend and a reply
     * waiting for a client that does not read */
    s = script_new2("drain-timeout", P_ROOMY, FZ_P2_DRAIN_TIMEOUT);
    hello(s, 0);
    hello(s, 1);
    frame(s, 0, 1, F_NORM, 0, 3, 3);
    frame(s, 0, 1, F_PAIR, 0x20, 2, 2);
    PUT(s, OP(1, FZ_CMD_STOP_READ));
    for (int i = 0; i < 8; i++)
        frame(s, 1, 1, F_METR, 0, 0, 0);
    run(s, 3);
    PUT(s, OP(0, FZ_CMD_FINISH), 1, 0);
    PUT(s, OP(0, FZ_CMD_SIGTERM));
    run(s, 3);
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    run(s, 3);
    s = script_new2("drain-timeout-op", P_ROOMY, FZ_P2_DRAIN_TIMEOUT);
    hello(s, 0);
    frame(s, 0, 1, F_HAV, 16, 5, 0);
    frame(s, 0, 1, F_SHUT, 0, 0, 0);
    run(s, 4);
    /* admin ops from a peer outside the admin group (refused unless root) */
    s = script_new2("not-admin", P_ROOMY, FZ_P2_NO_ADMIN);
    hello(s, 0);
    frame(s, 0, 1, F_SETLIM, 0, 1, 1);
    frame(s, 0, 1, F_KILL, 0, 7, 0);
    frame(s, 0, 1, F_SESS, 0, 0, 0);
    PUT(s, OP(0, FZ_CMD_SYNC));
}

static void scripts_failures(void)
{
    sbuf *s;
    /* injected failures: session_open, host_alloc, submit */
    s = script_new("inject", P_ROOMY);
    PUT(s, OP(0, FZ_CMD_FAIL_NEXT), FAKE_FAIL_OPEN);
    hello(s, 0);
    run(s, 2);
    hello(s, 0);
    PUT(s, OP(0, FZ_CMD_FAIL_NEXT), FAKE_FAIL_ALLOC);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    run(s, 2);
    PUT(s, OP(0, FZ_CMD_FAIL_NEXT), FAKE_FAIL_SUBMIT);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    frame(s, 0, 1, F_NORM, 0, 2, 2);
    frame(s, 0, 1, F_HELLO, 0, 5, 7); /* device 3: no such device */
    PUT(s, OP(0, FZ_CMD_SYNC));
    /* limits changed at run time: staging shrinks under a waiting request */
    s = script_new("limits", P_4K);
    hello(s, 0);
    frame(s, 0, 1, F_NORM, 0, 5, 5);
    frame(s, 0, 1, F_NORM, 0, 5, 5);
    run(s, 2);
    PUT(s, OP(0, FZ_CMD_LIMITS), 3, 3); /* total_staging 4096 */
    frame(s, 0, 1, F_SETLIM, 0, 1, 1);  /* max_inflight 1 */
    PUT(s, OP(0, FZ_CMD_FINISH_ALL), 0);
    run(s, 4);
    PUT(s, OP(0, FZ_CMD_LIMITS), 3, 6); /* total_staging 1M */
    PUT(s, OP(0, FZ_CMD_SYNC));
    /* pipelining with out-of-order completion and auto completion */
    s = script_new("pipeline", P_32K);
    hello(s, 0);
    for (int i = 0; i < 6; i++)
        frame(s, 0, 1, F_NORM + i % 4, (i & 1) | 0x20, i, i + 1);
    run(s, 3);
    PUT(s, OP(0, FZ_CMD_FINISH), 3, 0);
    PUT(s, OP(0, FZ_CMD_FINISH), 1, 5);
    run(s, 2);
    PUT(s, OP(0, FZ_CMD_FINISH), 0, 0);
    PUT(s, OP(0, FZ_CMD_SYNC));
    s = script_new("auto", FZ_P1_AUTO | P_32K);
    hello(s, 0);
    hello(s, 1);
    for (int i = 0; i < 8; i++)
        frame(s, i & 1, 1, F_NORM + i % 4, 0, i, 2);
    PUT(s, OP(0, FZ_CMD_SYNC));
}

static void build_scripts(void)
{
    scripts_ops();
    scripts_split();
    scripts_disconnect();
    scripts_backpressure();
    scripts_bad_frames();
    scripts_sessions();
    scripts_shutdown();
    scripts_failures();
}

static void run_one(const uint8_t *b, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees over-reads */
    if (!copy)
        abort();
    memcpy(copy, b, len);
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
}

static int write_corpus(const char *dir)
{
    for (int i = 0; i < nscripts; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, scripts[i].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(scripts[i].b, 1, scripts[i].n, f) != scripts[i].n || fclose(f) != 0) {
            perror(path);
            return 1;
        }
    }
    printf("fuzz_session_replay: %d scripts written to %s\n", nscripts, dir);
    return 0;
}

int main(int argc, char **argv)
{
    build_scripts();
    if (argc == 3 && !strcmp(argv[1], "--write"))
        return write_corpus(argv[2]);
    for (int i = 0; i < nscripts; i++) {
        if (getenv("GPUQ_FUZZ_TRACE"))
            fprintf(stderr, "fuzz_session_replay: %s\n", scripts[i].name);
        run_one(scripts[i].b, scripts[i].n);
    }
    for (int a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) {
            perror(argv[a]);
            return 1;
        }
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        run_one(buf, len);
    }
    const fuzz_counts *cnt = fuzz_session_counts();
    printf("fuzz_session_replay: %llu replies read (%llu checked against the model: %llu compute "
           "results, %llu other successes, %llu errors), %llu refusals, %llu server closes, "
           "%llu syncs (%llu client checks)\n",
           (unsigned long long)cnt->replies, (unsigned long long)cnt->modelled,
           (unsigned long long)cnt->ok_compute, (unsigned long long)cnt->ok_other,
           (unsigned long long)cnt->errors, (unsigned long long)cnt->refused,
           (unsigned long long)cnt->eofs, (unsigned long long)cnt->syncs,
           (unsigned long long)cnt->sync_checked);
    printf("fuzz_session_replay: %d built-in scripts and %d files: ok\n", nscripts, argc - 1);
    return 0;
}
