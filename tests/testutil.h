/* SPDX-License-Identifier: Apache-2.0 */
/* testutil.h - helpers shared by the Check suites.
 *
 * Temp directories, raw array files for the numpy/scipy reference scripts,
 * starting and stopping a real gpuqd, and error norms.
 */
#ifndef GPUQ_TESTUTIL_H
#define GPUQ_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* mkdtemp under $TMPDIR or /tmp; out gets the path. Aborts the test on failure. */
void tu_tmpdir(char *out, size_t cap);
/* rm -rf path (best effort). */
void tu_rmtree(const char *path);
/* Write/read whole files. tu_read_file returns malloc'd bytes plus a NUL (caller frees), *len set.
 */
int tu_write_file(const char *path, const void *buf, size_t len);
/* n bytes from socket fd into buf (EINTR retried): 0, or -1 when the peer
 * closed or an error came first. */
int tu_recv_all(int fd, void *buf, size_t n);
/* n bytes of buf to socket fd (EINTR retried, no SIGPIPE); stops quietly
 * when the peer left (its test says what it expected). */
void tu_send_all(int fd, const void *buf, size_t n);
void *tu_read_file(const char *path, size_t *len);
/* Run GPUQ_PYTHON with the script tests/<script> and NULL-terminated args;
 * returns its exit status (0 = success). */
int tu_python(const char *script, const char *const *args);
/* Run a program with args (argv[0] is the path), stdout/stderr to the given
 * files (NULL: /dev/null); returns exit status, or 128+signal. */
int tu_run(const char *const *argv, const char *out_path, const char *err_path);
/* A program's exit status and what it wrote (each malloc'd, NUL-ended). */
typedef struct tu_output {
    int rc;
    char *out, *err;
} tu_output;
/* tu_run with pre (NULL-terminated, may be NULL) then args (NULL-terminated)
 * as its argv, stdout and stderr through dir/name.out and dir/name.err, read
 * back. At most 47 arguments; aborts the test on a failure to run or read. */
tu_output tu_capture(const char *const *pre, const char *const *args, const char *dir,
                     const char *name);
void tu_output_free(tu_output *o);
/* Fill with deterministic-but-fresh random values: seeded from time and pid;
 * the seed is printed so a failure can be reproduced (TU_SEED env overrides). */
void tu_rand_fill_f64(double *x, size_t n, double lo, double hi);
/* v rounded to float and back. Not written (double)(float)v in a loop:
 * Debian 12's gcc 12.2 at -O3 (the Release build) vectorizes
 * x[i] = (double)(float)x[i] over a constant 903 elements and leaves two of
 * them unrounded; the volatile keeps every rounding. */
double tu_round_f32(double v);
/* CLOCK_MONOTONIC in seconds; sleep s seconds (through EINTR). */
double tu_now_s(void);
void tu_sleep_s(double s);
/* Threads of this process (/proc/self/task); 0 when it cannot be read. */
unsigned tu_thread_count(void);
uint64_t tu_seed(void);
/* ||a - ref|| / ||ref|| in double; NaN anywhere -> +inf. */
double tu_rel_err_f64(const double *a, const double *ref, size_t n);
double tu_rel_err_f32(const float *a, const double *ref, size_t n);
/* Worst per-element error max_i |a_i - ref_i| / max(|ref_i|, m), m the output
 * dtype's smallest normal (so subnormal and zero references count absolutely);
 * NaN or Inf must match exactly, else +inf. worst (may be NULL) gets its index. */
double tu_elem_err_f64(const double *a, const double *ref, size_t n, size_t *worst);
double tu_elem_err_f32(const float *a, const double *ref, size_t n, size_t *worst);

/* normalize inputs that plain sums get wrong, rows x cols of float64 (f32:
 * the values are meant for float32; round them before use). Per row:
 *  offset: a large offset (+-1e3 .. +-1e9 by row; float32 +-10 .. +-1e4)
 *          plus U(-1, 1);
 *  mixed:  signs mixed, magnitudes 10^U(-3, 3);
 *  wide:   signs mixed, magnitudes 10^U(-300, 300) (float32: 10^U(-44, 38)),
 *          two of them near the largest finite value, of one sign (their sum
 *          overflows);
 *  cancel: magnitudes up to 1e6 whose sum cancels to about 0.5. */
enum { TU_NORM_OFFSET, TU_NORM_MIXED, TU_NORM_WIDE, TU_NORM_CANCEL, TU_NORM_KINDS };
extern const char *const tu_norm_kind_names[TU_NORM_KINDS];
void tu_norm_fill(int kind, int f32, double *x, size_t rows, size_t cols);
/* Rows whose sums or squares leave double's or float's range, with their
 * exact results (each within one rounding; l2 one more). dt: 1 float32,
 * 2 float64; method: 0 sum, 1 l1, 2 l2, 3 minmax, 4 zscore (the GPUQ_K_*
 * and GPUQ_DT_* / GPUQ_NORM_* values). */
typedef struct tu_norm_case {
    int dt, method, n;
    double x[4], want[4];
} tu_norm_case;
extern const tu_norm_case tu_norm_extremes[];
extern const size_t tu_norm_n_extremes;

/* s[0..len) is UTF-8 by glibc's iconv(3): a check of what gpuq writes that
 * does not use gpuq's own validator. */
int tu_utf8_valid(const void *s, size_t len);
/* Walk the msgpack values in buf[0..len) (one or a stream of them) with
 * msgpack-c's unpacker, not gpuq's reader, and check every str (map keys
 * too) with tu_utf8_valid. Returns the number of strings checked, or -1 when
 * one is not UTF-8 or buf is not msgpack (printed to stderr). */
long tu_msgpack_strings_utf8(const void *buf, size_t len);

/* Run a Check suite (it takes ownership of s); returns EXIT_SUCCESS when no
 * test failed. */
struct Suite;
int tu_run_suite(struct Suite *s);

/* A gpuqd started on a socket in its own temp dir. */
typedef struct tu_daemon {
    pid_t pid;
    char dir[256];
    char socket[300];
    char log[300];
} tu_daemon;
/* Start gpuqd --device <device> --socket <dir>/s.sock plus extra args (NULL-
 * terminated, may be NULL); waits until the socket accepts. Aborts on failure. */
void tu_daemon_start(tu_daemon *d, const char *device, const char *const *extra);
/* Send sig to the daemon (to gpuqd itself under GPUQ_TEST_DAEMON_WRAPPER). */
void tu_daemon_kill(tu_daemon *d, int sig);
/* Wait up to timeout_s for the daemon to exit by itself (no signal); returns
 * its exit status (128+signal) and clears d->pid, or -1 on timeout. */
int tu_daemon_wait_exit(tu_daemon *d, double timeout_s);
/* SIGTERM and wait; returns the exit status (or 128+signal). Removes dir. */
int tu_daemon_stop(tu_daemon *d);
/* Device for end-to-end suites: $GPUQ_TEST_DEVICE or "cpu". */
const char *tu_test_device(void);

#endif
