/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_monitor.c - watching requests end to end (PROTOCOL.md 3.6): the
 * monitor op's record frames (fields, outcomes, visibility, backpressure
 * and its dropped counts, cancel), the slowlog (order, length, threshold,
 * reset), the sessions document's current op, bad inputs, libgpuq's
 * gpuq_monitor and gpuqctl monitor / slowlog, against a real gpuqd.
 *
 * Slow requests are the CPU backend's GPUQ_TEST_SLOW_MS (each job sleeps
 * that long) with device_window 1, so pipelined requests wait in turn and
 * their total times grow by one job each.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"
#include "mpread.h"
#include "mpwrite.h"

#define NOBODY 65534

static uint8_t hbuf[1 << 16];

static void line_matches(const char *path, const char *pat);

/* rep's info map as JSON (static buffer). */
static const char *info_json(const gpuq_reply *rep)
{
    static char js[1 << 16];
    ck_assert_ptr_nonnull(rep->info);
    gpuq_mpr r;
    gpuq_mpr_init(&r, rep->info, rep->info_len);
    ck_assert_int_eq(gpuq_mpr_to_json(&r, js, sizeof js), 0);
    return js;
}

/* A raw connection (hello done) that monitors; its monitor request's id
 * is 7. */
static int monitor_socket(const char *client)
{
    int fd = e2e_hello_socket(client, hbuf, sizeof hbuf);
    gpuq_request m;
    gpuq_request_init(&m);
    m.op = GPUQ_OP_MONITOR;
    m.id = 7;
    e2e_send_req(fd, &m, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(fd, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.id, 7);
    ck_assert_ptr_nonnull(strstr(info_json(&rep), "\"queue_bytes\":"));
    return fd;
}

/* The next record on monitor fd, as JSON (static); fails on a timeout. */
static const char *next_record(int fd)
{
    gpuq_reply rep;
    int rc = e2e_read_reply_within(fd, &rep, hbuf, sizeof hbuf, 10);
    ck_assert_msg(rc == 0, "no record within 10 s (%d)", rc);
    ck_assert_int_eq(rep.status, 0);
    ck_assert_uint_eq(rep.id, 7);
    const char *js = info_json(&rep);
    ck_assert_msg(strstr((const char *)hbuf, "monitor") != NULL, "no \"monitor\" key");
    return js;
}

/* The next record whose op is op (skipping others, e.g. hello). */
static const char *record_of(int fd, const char *op)
{
    char want[64];
    snprintf(want, sizeof want, "\"op\":\"%s\"", op);
    for (int i = 0; i < 20; i++) {
        const char *js = next_record(fd);
        if (strstr(js, want))
            return js;
    }
    ck_abort_msg("no %s record", op);
    return NULL;
}

static void has(const char *js, const char *s)
{
    ck_assert_msg(strstr(js, s) != NULL, "record %s lacks %s", js, s);
}

START_TEST(monitor_fields_and_outcomes)
{
    int mon = monitor_socket("watcher");
    gpuq_conn *c = e2e_connect("worker", 1);
    double a[12], out[12];
    tu_rand_fill_f64(a, 12, 1, 2);
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, a, 3, 4, out), 0);
    const char *js = record_of(mon, "normalize");
    has(js, "\"client\":\"worker\"");
    has(js, "\"dtype\":\"f64\"");
    has(js, "\"shape\":[3,4]");
    has(js, "\"shape_b\":[]");
    has(js, "\"priority\":\"high\"");
    has(js, "\"transport\":\"");
    has(js, "\"outcome\":\"ok\"");
    ck_assert_int_eq(e2e_json_int(js, "code"), 0);
    ck_assert_int_eq(e2e_json_int(js, "bytes_in"), 96);
    ck_assert_int_eq(e2e_json_int(js, "bytes_out"), 96);
    ck_assert_int_eq(e2e_json_int(js, "uid"), (long long)getuid());
    ck_assert_int_eq(e2e_json_int(js, "dropped"), 0);
    ck_assert_int_eq(e2e_json_int(js, "session"), (long long)gpuq_info(c)->session_id);
    ck_assert_int_gt(e2e_json_int(js, "time_us"), 1600000000000000LL);
    /* an error: a zero row */
    memset(a, 0, sizeof a);
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, a, 3, 4, out),
                     GPUQ_E_ZERO_NORM);
    js = record_of(mon, "normalize");
    has(js, "\"outcome\":\"zero_norm\"");
    ck_assert_int_eq(e2e_json_int(js, "code"), GPUQ_E_ZERO_NORM);
    has(js, "\"message\":\"row 0");
    ck_assert_int_eq(e2e_json_int(js, "bytes_out"), 0);
    /* a pairwise, two shapes */
    double b[8], d[6];
    tu_rand_fill_f64(b, 8, -1, 1);
    ck_assert_int_eq(gpuq_pairwise(c, GPUQ_DT_F64, GPUQ_METRIC_EUCLIDEAN, a, b, 3, 2, 4, d), 0);
    js = record_of(mon, "pairwise");
    has(js, "\"shape\":[3,4]");
    has(js, "\"shape_b\":[2,4]");
    ck_assert_int_eq(e2e_json_int(js, "bytes_out"), 48);
    gpuq_close(c);
    close(mon);
    e2e_assert_serves();
}
END_TEST

/* A deadline passed while it ran and a cancel of a running request: both
 * outcomes come as records. */
START_TEST(monitor_deadline_and_cancel)
{
    const char *extra[] = {"--device-window", "1", NULL};
    e2e_restart_slow(400, extra);
    int mon = monitor_socket("watcher");
    gpuq_conn *c = e2e_connect("late", 0);
    double a[16], out[16];
    tu_rand_fill_f64(a, 16, 1, 2);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 100), 0);
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, a, 1, 16, out),
                     GPUQ_E_DEADLINE_EXCEEDED);
    const char *js = record_of(mon, "normalize");
    has(js, "\"outcome\":\"deadline_exceeded\"");
    ck_assert_int_ge(e2e_json_int(js, "total_us"), 90000);
    ck_assert_int_eq(gpuq_set_deadline_ms(c, 0), 0);
    gpuq_req *r = gpuq_req_new("normalize");
    uint64_t shape[1] = {16};
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, shape, a, sizeof a);
    gpuq_req_set_output(r, 0, out, sizeof out);
    uint64_t id, cid;
    ck_assert_int_eq(gpuq_submit_req(c, r, &id), 0);
    tu_sleep_s(0.15); /* running */
    ck_assert_int_eq(gpuq_submit_cancel(c, id, &cid), 0);
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_wait_req(c, res), GPUQ_E_CANCELLED);
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    gpuq_result_free(res);
    gpuq_req_free(r);
    js = record_of(mon, "normalize");
    has(js, "\"outcome\":\"cancelled\"");
    ck_assert_int_gt(e2e_json_int(js, "kernel_us"), 50000);
    gpuq_close(c);
    close(mon);
    e2e_assert_serves();
}
END_TEST

/* A monitor that does not read: the others are served at full speed, the
 * daemon queues at most monitor_queue bytes for it, and every record it
 * lost is counted in a later one. */
START_TEST(monitor_backpressure_counts_drops)
{
    const char *extra[] = {"--monitor-queue", "4096", NULL};
    e2e_restart(extra);
    int mon = monitor_socket("sleepy");
    int small = 4096;
    (void)setsockopt(mon, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    gpuq_conn *c = e2e_connect("pinger", 0);
    const int pings = 4000;
    double t0 = tu_now_s();
    for (int i = 0; i < pings; i++)
        ck_assert_int_eq(gpuq_ping(c), 0);
    double took = tu_now_s() - t0;
    ck_assert_msg(took < 20, "%d pings took %.1f s beside a monitor that does not read", pings,
                  took);
    gpuq_close(c);
    /* drain what was queued, then one more visible request reports the rest */
    long long records = 0, dropped = 0;
    gpuq_reply rep;
    while (e2e_read_reply_within(mon, &rep, hbuf, sizeof hbuf, 0.7) == 0) {
        const char *js = info_json(&rep);
        dropped += e2e_json_int(js, "dropped");
        records += strstr(js, "\"client\":\"pinger\"") != NULL;
    }
    gpuq_conn *d = e2e_connect("last", 0);
    ck_assert_int_eq(gpuq_ping(d), 0);
    const char *js = record_of(mon, "hello"); /* "last"'s hello */
    has(js, "\"client\":\"last\"");
    dropped += e2e_json_int(js, "dropped");
    ck_assert_msg(dropped > 0, "nothing dropped: the test did not fill the queue");
    /* pinger: hello + pings; a record dropped counts once, wherever it came */
    ck_assert_int_eq(records + dropped, pings + 1);
    js = record_of(mon, "ping");
    ck_assert_int_eq(e2e_json_int(js, "dropped"), 0);
    gpuq_close(d);
    close(mon);
    e2e_assert_serves();
}
END_TEST

/* A monitor that closes while frames of it wait in its write queue: it is
 * detached (status "monitors" back to 0), the queued frames go with its
 * session, and a new monitor starts afresh. */
START_TEST(monitor_disconnect_mid_stream)
{
    int mon = monitor_socket("leaver");
    int small = 4096;
    (void)setsockopt(mon, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    ck_assert_int_eq(e2e_status_int("monitors"), 1);
    gpuq_conn *c = e2e_connect("pinger", 0);
    for (int i = 0; i < 2000; i++)
        ck_assert_int_eq(gpuq_ping(c), 0);
    close(mon); /* unread records in the socket and in gpuqd's queue */
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(gpuq_ping(c), 0);
    e2e_wait_status("monitors", 0, 5);
    ck_assert_int_eq(e2e_status_int("sessions"), 2); /* pinger and the asker: the leaver went */
    int again = monitor_socket("again");
    ck_assert_int_eq(gpuq_ping(c), 0);
    const char *js = record_of(again, "ping");
    ck_assert_int_eq(e2e_json_int(js, "dropped"), 0);
    ck_assert_int_gt(e2e_json_int(js, "seq"), 0);
    gpuq_close(c);
    close(again);
    e2e_wait_status("monitors", 0, 5);
    e2e_assert_serves();
}
END_TEST

/* Five pipelined requests of one job each on a one-at-a-time device: the
 * i-th waits for i - 1 before it. */
static void five_slow(void)
{
    gpuq_conn *c = e2e_connect("slow", 0);
    double a[8][16], out[8][16];
    gpuq_req *r[5];
    gpuq_result *res = gpuq_result_new();
    uint64_t shape[1] = {16};
    for (int i = 0; i < 5; i++) {
        tu_rand_fill_f64(a[i], 16, 1, 2);
        r[i] = gpuq_req_new("normalize");
        gpuq_req_set_input(r[i], 0, GPUQ_DT_F64, 1, shape, a[i], sizeof a[i]);
        gpuq_req_set_output(r[i], 0, out[i], sizeof out[i]);
        ck_assert_int_eq(gpuq_submit_req(c, r[i], NULL), 0);
    }
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(gpuq_wait_req(c, res), 0);
        gpuq_req_free(r[i]);
    }
    gpuq_result_free(res);
    gpuq_close(c);
}

/* The slowlog's records' ids and total times, slowest first; each is of
 * op. */
static int slowlog_ids(gpuq_conn *c, const char *op, long long *ids, double *us, int cap)
{
    char want[64];
    snprintf(want, sizeof want, "\"op\":\"%s\"", op);
    uint8_t *doc;
    size_t len;
    uint32_t count;
    ck_assert_int_eq(gpuq_slowlog(c, &doc, &len, &count), 0);
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    int n = 0;
    while (gpuq_mpr_left(&r) > 0) {
        char js[4096];
        ck_assert_int_eq(gpuq_mpr_to_json(&r, js, sizeof js), 0);
        ck_assert_int_lt(n, cap);
        ids[n] = e2e_json_int(js, "id");
        us[n] = (double)e2e_json_int(js, "total_us");
        ck_assert_msg(strstr(js, want), "record %d: %s", n, js);
        n++;
    }
    ck_assert_int_eq(n, (int)count);
    free(doc);
    return n;
}

START_TEST(slowlog_keeps_the_slowest_in_order)
{
    const char *extra[] = {
        "--device-window", "1", "--slowlog-len", "3", "--slowlog-min-us", "0", NULL};
    e2e_restart_slow(120, extra);
    five_slow();
    gpuq_conn *c = e2e_connect("ask", 0);
    long long ids[8];
    double us[8];
    int n = slowlog_ids(c, "normalize", ids, us, 8);
    /* the last three of the five (ids 2..6 on that connection: 1 is its hello) */
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[0], 6);
    ck_assert_int_eq(ids[1], 5);
    ck_assert_int_eq(ids[2], 4);
    ck_assert(us[0] > us[1] && us[1] > us[2]);
    ck_assert_msg(us[2] >= 3 * 120000 * 0.9, "third slowest took %.0f us", us[2]);
    uint64_t cleared = 0;
    ck_assert_int_eq(gpuq_slowlog_reset(c, &cleared), 0); /* root: an admin */
    ck_assert_uint_eq(cleared, 3);
    /* what came after: the reset itself (its record enters once it is answered) */
    ck_assert_int_eq(slowlog_ids(c, "slowlog_reset", ids, us, 8), 1);
    ck_assert_int_eq(ids[0], 3);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

START_TEST(slowlog_min_us_filters)
{
    const char *extra[] = {"--device-window", "1", "--slowlog-min-us", "500000", NULL};
    e2e_restart_slow(200, extra);
    gpuq_conn *c = e2e_connect("ask", 0);
    /* nothing slow enough yet: an empty slowlog (no record, no document) */
    uint8_t *doc = (uint8_t *)"x";
    size_t len = 1;
    uint32_t count = 99;
    ck_assert_int_eq(gpuq_slowlog(c, &doc, &len, &count), 0);
    ck_assert_uint_eq(count, 0);
    ck_assert_uint_eq(len, 0);
    free(doc);
    five_slow(); /* about 200, 400, 600, 800, 1000 ms */
    long long ids[8];
    double us[8];
    int n = slowlog_ids(c, "normalize", ids, us, 8);
    ck_assert_int_eq(n, 3);
    for (int i = 0; i < n; i++)
        ck_assert_msg(us[i] >= 500000, "record %d: %.0f us under slowlog_min_us", i, us[i]);
    ck_assert_int_eq(ids[0], 6);
    ck_assert_int_eq(ids[2], 4);
    gpuq_close(c);
    e2e_assert_serves();
}
END_TEST

/* A sessions document entry of the session id (JSON of the stream). */
START_TEST(sessions_show_the_current_op)
{
    e2e_restart_slow(1500, NULL);
    gpuq_conn *c = e2e_connect("busy", 0);
    static double a[1024], out[1024];
    tu_rand_fill_f64(a, 1024, 1, 2);
    gpuq_req *r = gpuq_req_new("normalize");
    uint64_t shape[1] = {1024};
    gpuq_req_set_input(r, 0, GPUQ_DT_F64, 1, shape, a, sizeof a);
    gpuq_req_set_output(r, 0, out, sizeof out);
    ck_assert_int_eq(gpuq_submit_req(c, r, NULL), 0);
    tu_sleep_s(0.4);
    gpuq_conn *q = e2e_connect("ask", 0);
    uint8_t *doc;
    size_t len;
    uint32_t count;
    ck_assert_int_eq(gpuq_sessions(q, &doc, &len, &count), 0);
    gpuq_mpr m;
    gpuq_mpr_init(&m, doc, len);
    bool seen = false;
    while (gpuq_mpr_left(&m) > 0) {
        char js[4096];
        ck_assert_int_eq(gpuq_mpr_to_json(&m, js, sizeof js), 0);
        if (!strstr(js, "\"client\":\"busy\"")) {
            ck_assert_ptr_nonnull(strstr(js, "\"current_op\":\"\""));
            continue;
        }
        seen = true;
        has(js, "\"current_op\":\"normalize\"");
        has(js, "\"current_state\":\"running\"");
        ck_assert_int_eq(e2e_json_int(js, "current_bytes"), 8192);
        long long us = e2e_json_int(js, "current_us");
        ck_assert_msg(us >= 300000 && us < 1500000, "current_us %lld", us);
    }
    ck_assert(seen);
    free(doc);
    /* gpuqctl sessions: the same, in human units (about 0.4 s so far) */
    const char *argv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "sessions", NULL};
    ck_assert_int_eq(tu_run(argv, e2e_dpath("sessions.out"), NULL), 0);
    line_matches(e2e_dpath("sessions.out"), "^ID .* AGE +CURRENT +STATE +CUR_BYTES +CUR_TIME$");
    line_matches(e2e_dpath("sessions.out"),
                 " busy .* normalize +running +8\\.0 KiB +([3-9][0-9]{2} ms|1\\.[0-4][0-9] s)$");
    line_matches(e2e_dpath("sessions.out"), " gpuqctl\\* .* - +- +- +-$");
    gpuq_result *res = gpuq_result_new();
    ck_assert_int_eq(gpuq_wait_req(c, res), 0);
    gpuq_result_free(res);
    gpuq_req_free(r);
    gpuq_close(q);
    gpuq_close(c);
}
END_TEST

START_TEST(bad_inputs_get_errors)
{
    int mon = monitor_socket("twice");
    gpuq_request m;
    gpuq_request_init(&m);
    m.op = GPUQ_OP_MONITOR;
    m.id = 8;
    e2e_send_req(mon, &m, NULL, 0);
    gpuq_reply rep;
    ck_assert_int_eq(e2e_read_reply(mon, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_uint_eq(rep.id, 8);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_ARGUMENT);
    ck_assert_str_eq(rep.message, "this connection monitors already (request 7); cancel it first");
    /* cancel stops it: its reply is the last frame with id 7's records before it */
    gpuq_request k;
    gpuq_request_init(&k);
    k.op = GPUQ_OP_CANCEL;
    k.id = 9;
    k.has_request = true;
    k.request = 7;
    e2e_send_req(mon, &k, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(mon, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_uint_eq(rep.id, 9);
    ck_assert_int_eq(rep.status, 0);
    e2e_assert_serves(); /* a ping from elsewhere: no record comes now */
    ck_assert_int_eq(e2e_read_reply_within(mon, &rep, hbuf, sizeof hbuf, 0.5), E2E_TIMED_OUT);
    /* a slowlog with a value of the wrong type */
    static const uint8_t bad[] = {0x83, 0xa2, 'i', 'd', 0x0a, 0xa2, 'o',  'p',  0xa7,
                                  's',  'l',  'o', 'w', 'l',  'o',  'g',  0xa7, 's',
                                  'e',  's',  's', 'i', 'o',  'n',  0xa1, 'x'};
    e2e_send_frame(mon, bad, sizeof bad, 0, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(mon, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_uint_eq(rep.id, 10);
    ck_assert_int_eq(rep.status, GPUQ_E_BAD_HEADER);
    /* an op's key with the new ops: refused by name */
    const char *ops[] = {"slowlog", "slowlog_reset", "monitor"};
    for (int i = 0; i < 3; i++) {
        gpuq_mpw *w = gpuq_mpw_new();
        ck_assert_ptr_nonnull(w);
        gpuq_mpw_map(w, 3);
        gpuq_mpw_str(w, "id");
        gpuq_mpw_uint(w, 20 + (uint64_t)i);
        gpuq_mpw_str(w, "op");
        gpuq_mpw_str(w, ops[i]);
        gpuq_mpw_str(w, "k");
        gpuq_mpw_uint(w, 3);
        uint8_t *h;
        size_t hl;
        ck_assert_int_eq(gpuq_mpw_take(w, &h, &hl), 0);
        gpuq_mpw_free(w);
        e2e_send_frame(mon, h, (uint32_t)hl, 0, NULL, 0);
        free(h);
        ck_assert_int_eq(e2e_read_reply(mon, &rep, hbuf, sizeof hbuf), 0);
        ck_assert_uint_eq(rep.id, 20 + (uint64_t)i);
        ck_assert_int_eq(rep.status, GPUQ_E_BAD_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "%s takes no \"k\"", ops[i]);
        ck_assert_str_eq(rep.message, want);
    }
    /* a payload with one: it takes none */
    gpuq_request sl;
    gpuq_request_init(&sl);
    sl.op = GPUQ_OP_SLOWLOG;
    sl.id = 30;
    e2e_send_req(mon, &sl, "abcd", 4);
    ck_assert_int_eq(e2e_read_reply(mon, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_uint_eq(rep.id, 30);
    ck_assert_int_eq(rep.status, GPUQ_E_SIZE_MISMATCH);
    e2e_assert_serves();
    /* and a monitor after the cancel is fine again */
    m.id = 11;
    e2e_send_req(mon, &m, NULL, 0);
    ck_assert_int_eq(e2e_read_reply(mon, &rep, hbuf, sizeof hbuf), 0);
    ck_assert_int_eq(rep.status, 0);
    close(mon);
    e2e_assert_serves();
}
END_TEST

/* As nobody: a monitor sees its own uid's requests, not root's, and the
 * slowlog shows it only its own; slowlog_reset is refused. */
static int nobody_child(void)
{
    if (setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
        return 1;
    int mon = e2e_hello_socket("nobody-watch", hbuf, sizeof hbuf);
    gpuq_request m;
    gpuq_request_init(&m);
    m.op = GPUQ_OP_MONITOR;
    m.id = 7;
    e2e_send_req(mon, &m, NULL, 0);
    gpuq_reply rep;
    if (e2e_read_reply(mon, &rep, hbuf, sizeof hbuf) || rep.status)
        return 2;
    if (!strstr(info_json(&rep), "\"all\":false"))
        return 11;             /* not an admin: its uid's records only */
    if (write(3, "x", 1) != 1) /* the parent pings as root now */
        return 3;
    char b;
    if (read(4, &b, 1) != 1)
        return 4;
    gpuq_conn *c = e2e_connect("nobody-work", 0);
    if (gpuq_ping(c))
        return 5;
    for (int i = 0; i < 2; i++) { /* its hello, then its ping: never root's */
        if (e2e_read_reply_within(mon, &rep, hbuf, sizeof hbuf, 5))
            return 6;
        if (!strstr(info_json(&rep), "\"client\":\"nobody-work\""))
            return 7;
    }
    uint64_t cleared;
    if (gpuq_slowlog_reset(c, &cleared) != GPUQ_E_PERMISSION)
        return 8;
    uint8_t *doc;
    size_t len;
    uint32_t count;
    if (gpuq_slowlog(c, &doc, &len, &count))
        return 9;
    /* a msgpack stream: NUL bytes in it (map16 sizes), so memmem */
    bool only_mine = !memmem(doc, len, "root-work", 9) && memmem(doc, len, "nobody-work", 11);
    free(doc);
    gpuq_close(c);
    close(mon);
    return only_mine ? 0 : 10;
}

START_TEST(visibility_by_uid)
{
    if (getuid() != 0)
        return; /* needs root to become nobody */
    const char *extra[] = {"--socket-mode", "0666", "--slowlog-min-us", "0", NULL};
    e2e_restart(extra);
    ck_assert_int_eq(chmod(e2e_d.dir, 0755), 0);
    int go[2], back[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(back), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(go[1], 3);
        dup2(back[0], 4);
        _exit(nobody_child());
    }
    int mon = monitor_socket("root-watch"); /* an admin: every uid's records */
    char b;
    ck_assert_int_eq(read(go[0], &b, 1), 1);
    gpuq_conn *c = e2e_connect("root-work", 0);
    ck_assert_int_eq(gpuq_ping(c), 0);
    ck_assert_int_eq(write(back[1], "x", 1), 1);
    ck_assert_int_eq(e2e_wait_exit(pid, 20), 0);
    gpuq_close(c);
    bool saw_nobody = false, saw_root = false;
    for (int i = 0; i < 40 && !(saw_nobody && saw_root); i++) {
        const char *js = next_record(mon);
        if (strstr(js, "\"client\":\"nobody-work\"")) {
            saw_nobody = true;
            ck_assert_int_eq(e2e_json_int(js, "uid"), NOBODY);
        }
        saw_root |= strstr(js, "\"client\":\"root-work\"") != NULL;
    }
    ck_assert_msg(saw_nobody && saw_root, "the admin's monitor missed a uid (%d %d)", saw_nobody,
                  saw_root);
    close(mon);
    e2e_assert_serves();
}
END_TEST

typedef struct lib_watch {
    int seen;
    bool saw_ping;
} lib_watch;

static int lib_record(void *user, const uint8_t *rec, size_t len)
{
    lib_watch *w = user;
    gpuq_mpr r;
    gpuq_mpr_init(&r, rec, len);
    char js[4096];
    if (gpuq_mpr_to_json(&r, js, sizeof js))
        return -1;
    w->seen++;
    w->saw_ping |= strstr(js, "\"op\":\"ping\"") && strstr(js, "\"client\":\"lib-ping\"");
    return w->saw_ping;
}

static void *pinger(void *arg)
{
    (void)arg;
    tu_sleep_s(0.3);
    gpuq_conn *c = e2e_connect("lib-ping", 0);
    (void)gpuq_ping(c);
    gpuq_close(c);
    return NULL;
}

START_TEST(lib_monitor_stops_cleanly)
{
    gpuq_conn *c = e2e_connect("lib-watch", 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, pinger, NULL), 0);
    lib_watch w = {0};
    ck_assert_int_eq(gpuq_monitor(c, lib_record, &w), 0);
    pthread_join(t, NULL);
    ck_assert(w.saw_ping);
    ck_assert_int_ge(w.seen, 2);       /* its hello first */
    ck_assert_int_eq(gpuq_ping(c), 0); /* in step after the stop */
    gpuq_close(c);
}
END_TEST

/* gpuqctl argv in a child of ours, stdout and stderr into files: its pid. */
static pid_t spawn(const char *const *argv, const char *out, const char *err)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* The line of path's text that matches the extended regex pat (aborts
 * when none does). */
static void line_matches(const char *path, const char *pat)
{
    size_t len;
    char *text = tu_read_file(path, &len);
    ck_assert_ptr_nonnull(text);
    regex_t re;
    ck_assert_int_eq(regcomp(&re, pat, REG_EXTENDED | REG_NEWLINE | REG_NOSUB), 0);
    int rc = regexec(&re, text, 0, NULL, 0);
    regfree(&re);
    ck_assert_msg(rc == 0, "no line of %s matches\n  %s\nin:\n%s", path, pat, text);
    free(text);
}

/* One request's columns as gpuqctl prints them: time, session, user,
 * client, op, dtype, shapes, priority, transport, then queue, kernel and
 * total in the unit that reads best (a 30 ms job's kernel in ms: 30 ms to
 * 999 ms, as a loaded machine or a GPU's first request reads it), bytes in
 * and out, outcome. */
#define CTL_MS_30_999 "([3-9][0-9]|[1-9][0-9][0-9])(\\.[0-9])? ms"
#define CTL_US_30_999 "([3-9][0-9]{4}|[1-9][0-9]{5})(\\.[0-9]+)?" /* the same, raw microseconds */
#define CTL_NORM_LINE                                                                              \
    "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} +[0-9]+ [^ ]+ +ctl-work +"  \
    "normalize f64 \\[2x3\\] +normal socket +[0-9.]+ (ns|µs|ms) +" CTL_MS_30_999                   \
    " +" CTL_MS_30_999 " +48 B +48 B ok$"

START_TEST(ctl_monitor_and_slowlog)
{
    const char *extra[] = {"--slowlog-min-us", "0", NULL};
    e2e_restart_slow(30, extra);
    const char *out = e2e_dpath("mon.out"), *jout = e2e_dpath("monj.out");
    const char *margv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "monitor", NULL};
    const char *jargv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "--json", "monitor", NULL};
    pid_t pid = spawn(margv, out, e2e_dpath("mon.err"));
    pid_t jpid = spawn(jargv, jout, e2e_dpath("monj.err"));
    e2e_wait_status("monitors", 2, 5);
    gpuq_conn *c = e2e_connect("ctl-work", 0);
    double a[6] = {1, 2, 3, 4, 5, 6}, o[6];
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, a, 2, 3, o), 0);
    memset(a, 0, sizeof a);
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, a, 2, 3, o),
                     GPUQ_E_ZERO_NORM);
    gpuq_close(c);
    tu_sleep_s(0.5);
    ck_assert_int_eq(kill(pid, SIGINT), 0); /* gpuqctl cancels its monitor, exits 0 */
    ck_assert_int_eq(kill(jpid, SIGTERM), 0);
    ck_assert_int_eq(e2e_wait_exit(pid, 10), 0);
    ck_assert_int_eq(e2e_wait_exit(jpid, 10), 0);
    e2e_wait_status("monitors", 0, 5);
    line_matches(out, "^TIME +SESS USER +CLIENT +OP +DT +SHAPES +PRIO +VIA +QUEUE +KERNEL +"
                      "TOTAL +IN +OUT OUTCOME$");
    line_matches(out, CTL_NORM_LINE);
    line_matches(out, " ctl-work +normalize f64 \\[2x3\\] .* 48 B +0 B zero_norm: row 0 [^\n]*$");
    line_matches(out, " ctl-work +hello +- +- +normal none +- +- +[0-9.]+ µs +0 B +0 B ok$");
    /* --json: one object a line, raw numbers (microseconds) */
    line_matches(jout,
                 "^\\{\"seq\":[0-9]+,\"dropped\":0,\"time_us\":[0-9]+,.*\"client\":\"ctl-work\","
                 "\"op\":\"normalize\",\"dtype\":\"f64\",\"shape\":\\[2,3\\],\"shape_b\":\\[\\],"
                 "\"priority\":\"normal\",\"transport\":\"socket\",\"queue_us\":[0-9.e+-]+,"
                 "\"kernel_us\":" CTL_US_30_999 ",\"total_us\":" CTL_US_30_999 ","
                 "\"outcome\":\"ok\",\"code\":0,\"message\":\"\",\"bytes_in\":48,"
                 "\"bytes_out\":48\\}$");
    /* slowlog: the same columns; the two 30 ms normalizes first */
    const char *st = e2e_dpath("slow.txt"), *sj = e2e_dpath("slow.json");
    const char *targv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "slowlog", NULL};
    ck_assert_int_eq(tu_run(targv, st, NULL), 0);
    line_matches(st, "^TIME +SESS USER +CLIENT +OP .* OUTCOME\n[^\n]* normalize f64 [^\n]*\n"
                     "[^\n]* normalize f64 [^\n]*\n");
    line_matches(st, CTL_NORM_LINE);
    const char *argv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "--json", "slowlog", NULL};
    ck_assert_int_eq(tu_run(argv, sj, NULL), 0);
    line_matches(sj,
                 "^\\[\\{\"time_us\":[0-9]+,\"session\":[0-9]+,\"id\":[23],.*\"op\":\"normalize\","
                 ".*\"total_us\":" CTL_US_30_999 ",");
    const char *rargv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "slowlog", "--reset", NULL};
    ck_assert_int_eq(tu_run(rargv, st, NULL), 0);
    line_matches(st, "^slowlog reset: [0-9]+ records cleared$");
    const char *jrargv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "--json",
                            "slowlog",    "--reset",  NULL};
    ck_assert_int_eq(tu_run(jrargv, sj, NULL), 0);
    line_matches(sj,
                 "^\\{\"command\":\"slowlog\",\"reset\":true,\"ok\":true,\"cleared\":[0-9]+\\}$");
    /* a bad argument: a usage error, exit 2 (as every command's) */
    const char *bargv[] = {GPUQCTL_PATH, "--socket", e2e_d.socket, "slowlog", "--bogus", NULL};
    ck_assert_int_eq(tu_run(bargv, NULL, e2e_dpath("bad.err")), 2);
    line_matches(e2e_dpath("bad.err"), "--bogus");
    e2e_assert_serves();
}
END_TEST

/* --log-level debug: one line per finished request, times in human units;
 * info: none. */
START_TEST(debug_log_line_per_request)
{
    const char *extra[] = {"--log-level", "debug", NULL};
    e2e_restart_slow(30, extra);
    gpuq_conn *c = e2e_connect("logged", 0);
    double a[6] = {1, 2, 3, 4, 5, 6}, o[6];
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, a, 2, 3, o), 0);
    memset(a, 0, sizeof a);
    ck_assert_int_eq(gpuq_normalize(c, GPUQ_DT_F64, GPUQ_NORM_SUM, false, a, 2, 3, o),
                     GPUQ_E_ZERO_NORM);
    gpuq_close(c);
    e2e_assert_serves();
    /* a 30 ms job: its kernel and total read 30 ms to 999 ms (a loaded
     * machine adds to them, never takes away) */
    line_matches(e2e_d.log, "^<7>gpuqd: request: session [0-9]+ 'logged' uid [0-9]+ id 2 "
                            "normalize f64 \\[2x3\\] priority normal via socket: queue [0-9.e+]+ "
                            "(us|ms), kernel " CTL_MS_30_999 ", total " CTL_MS_30_999 ", "
                            "48 B in, 48 B out: ok$");
    line_matches(e2e_d.log, "^<7>gpuqd: request: session [0-9]+ 'logged' uid [0-9]+ id 3 "
                            "normalize .* 48 B in, 0 B out: zero_norm: row 0 [^\n]*$");
    line_matches(e2e_d.log, "^<7>gpuqd: request: session [0-9]+ 'logged' [^\n]* id 1 hello "
                            "priority normal via none: [^\n]*: ok$");
    /* info: no request lines */
    const char *info[] = {"--log-level", "info", NULL};
    e2e_restart(info);
    c = e2e_connect("quiet", 0);
    ck_assert_int_eq(gpuq_ping(c), 0);
    gpuq_close(c);
    e2e_assert_serves();
    size_t len;
    char *text = tu_read_file(e2e_d.log, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(!strstr(text, "request: session"), "%s", text);
    free(text);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e_monitor");
    TCase *tc = tcase_create("monitor");
    tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, monitor_fields_and_outcomes);
    tcase_add_test(tc, monitor_deadline_and_cancel);
    tcase_add_test(tc, monitor_backpressure_counts_drops);
    tcase_add_test(tc, monitor_disconnect_mid_stream);
    tcase_add_test(tc, slowlog_keeps_the_slowest_in_order);
    tcase_add_test(tc, slowlog_min_us_filters);
    tcase_add_test(tc, sessions_show_the_current_op);
    tcase_add_test(tc, bad_inputs_get_errors);
    tcase_add_test(tc, visibility_by_uid);
    tcase_add_test(tc, lib_monitor_stops_cleanly);
    tcase_add_test(tc, ctl_monitor_and_slowlog);
    tcase_add_test(tc, debug_log_line_per_request);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    e2e_skip_without_gpu(); /* exits 77 (skipped) without a GPU */
    return tu_run_suite(suite());
}
