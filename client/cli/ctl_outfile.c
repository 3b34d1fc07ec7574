/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_outfile.c - gpuqctl's output files, and what a signal leaves of
 * them (ctl_outfile.h).
 *
 * Happy path: each output goes to a temporary file beside its destination
 * (".NAME.gpuqctl-PID-K.tmp", O_EXCL, mode 0666 less the umask), written
 * whole, given the replaced file's permissions, and renamed over the
 * destination; so a failed or interrupted op never leaves a partial .npy,
 * and an older file of that name stays whole until the new one is
 * complete. A symbolic link is followed (its target is replaced); a
 * destination that exists and is not a regular file (/dev/null, a FIFO) is
 * written in place; "-" is stdout. A directory where no temporary file can
 * be made, with the destination already there and writable, falls back to
 * writing it in place (removed again on failure or interrupt).
 *
 * Signals: SIGINT, SIGTERM and SIGHUP, once ctl_outfile_signals_on ran,
 * remove the temporary files, end a progress line, print "gpuqctl:
 * interrupted" (terminated, hangup) and end the process by the same signal
 * (so a shell sees 128 + signal: 130 for Ctrl-C, and a script running
 * gpuqctl stops too). Closing the socket, which the kernel does then, is
 * what tells gpuqd. While an op waits for its reply
 * (ctl_outfile_defer_sigint), the first SIGINT is deferred instead: the
 * handler writes a byte to a self-pipe and returns (async-signal-safe:
 * write(2) only), libgpuq's wait (or send) polls that pipe beside the
 * socket and returns, the op sends gpuqd a cancel for its request (when
 * gpuqd has it) and ends the same way (ctl_outfile_die) from its own
 * thread. A second SIGINT, or SIGTERM or SIGHUP, ends it at once.
 *
 * Failures: a file that cannot be made, written or renamed: GPUQ_E_IO with
 * "PATH: reason".
 */
#include "ctl_outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_progress.h"
#include "errors.h"

/* ---- signals: what an interrupted gpuqctl leaves behind ---- */

/* Files to remove if a signal ends the process: slot k is live while
 * tmp_path[k] names a file that is not (yet) the user's output. Written
 * only by the op's thread, read by the handler on that thread (the
 * progress thread has the signals blocked), hence sig_atomic_t and signal
 * fences. */
#define OUT_SLOTS 2
static char tmp_path[OUT_SLOTS][PATH_MAX];
static volatile sig_atomic_t tmp_live[OUT_SLOTS];

static const int out_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define OUT_NSIG (sizeof out_signals / sizeof out_signals[0])
static struct sigaction old_action[OUT_NSIG];
static bool handlers_on;

/* Ctrl-C while an op's request is with gpuqd (ctl_outfile_defer_sigint):
 * the handler only writes a byte to this pipe, which the op's wait polls
 * (gpuq_set_interrupt_fd), once; the op cancels its request and ends. */
static int intr_pipe[2] = {-1, -1};
static volatile sig_atomic_t sigint_deferred, sigint_came;

/* Remove the temporary files, say why and die of sig (what the handler
 * does; async-signal-safe). Called with the signals blocked. */
static void die_of(int sig)
{
    static const char intr[] = "gpuqctl: interrupted\n", term[] = "gpuqctl: terminated\n",
                      hup[] = "gpuqctl: hangup\n";
    for (int k = 0; k < OUT_SLOTS; k++)
        if (tmp_live[k])
            (void)unlink(tmp_path[k]);
    ctl_progress_end_line_signal();
    if (sig == SIGINT)
        ctl_write_stderr(intr, sizeof intr - 1);
    else if (sig == SIGTERM)
        ctl_write_stderr(term, sizeof term - 1);
    else
        ctl_write_stderr(hup, sizeof hup - 1);
    /* die of the signal itself, as a shell expects of a program it
     * interrupted (it then stops a script or loop, too) */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    (void)sigaction(sig, &dfl, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    (void)pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    (void)raise(sig);
    _exit(128 + sig);
}

static void on_signal(int sig)
{
    if (sig == SIGINT && sigint_deferred && !sigint_came) {
        sigint_came = 1;
        int e = errno;
        if (write(intr_pipe[1], "i", 1) < 0) { /* a full pipe is readable all the same */
        }
        errno = e;
        return;
    }
    die_of(sig);
}

int ctl_outfile_defer_sigint(void)
{
    if (!handlers_on)
        return -1;
    if (intr_pipe[0] < 0 && pipe2(intr_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1; /* Ctrl-C ends gpuqctl at once, as before */
    sigint_came = 0;
    atomic_signal_fence(memory_order_seq_cst);
    sigint_deferred = 1;
    return intr_pipe[0];
}

void ctl_outfile_undefer_sigint(void)
{
    sigint_deferred = 0;
    atomic_signal_fence(memory_order_seq_cst);
    if (sigint_came) /* it came while the reply was being read: end as it would have */
        ctl_outfile_die(SIGINT);
}

void ctl_outfile_die(int sig)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t k = 0; k < OUT_NSIG; k++)
        sigaddset(&set, out_signals[k]); /* as in the handler: nothing else runs die_of now */
    (void)pthread_sigmask(SIG_BLOCK, &set, NULL);
    die_of(sig);
    abort(); /* die_of does not return */
}

bool ctl_outfile_signals_on(void)
{
    if (handlers_on)
        return false;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < OUT_NSIG; k++)
        sigaddset(&sa.sa_mask, out_signals[k]); /* one handler at a time */
    for (size_t k = 0; k < OUT_NSIG; k++) {
        /* a signal ignored by whoever started us (nohup: SIGHUP) stays so */
        if (sigaction(out_signals[k], NULL, &old_action[k]) == 0 &&
            old_action[k].sa_handler == SIG_IGN)
            continue;
        (void)sigaction(out_signals[k], &sa, NULL);
    }
    handlers_on = true;
    return true;
}

void ctl_outfile_signals_off(void)
{
    if (!handlers_on)
        return;
    for (size_t k = 0; k < OUT_NSIG; k++)
        (void)sigaction(out_signals[k], &old_action[k], NULL);
    handlers_on = false;
}

static void slot_set(int k, const char *path)
{
    tmp_live[k] = 0;
    atomic_signal_fence(memory_order_seq_cst);
    snprintf(tmp_path[k], sizeof tmp_path[k], "%s", path);
    atomic_signal_fence(memory_order_seq_cst);
    tmp_live[k] = 1;
}

static void slot_clear(int k)
{
    tmp_live[k] = 0;
    atomic_signal_fence(memory_order_seq_cst);
}

/* ---- output files ---- */

typedef struct out_file {
    int slot;            /* its tmp_path slot */
    int fd;              /* -1 when not open */
    bool to_stdout;      /* "-" */
    bool in_place;       /* written at dest itself */
    bool remove_on_fail; /* in place, a regular file: removed if not completed */
    bool keep_mode;      /* dest existed: its permissions given to the new file */
    mode_t mode;
    char dest[PATH_MAX]; /* where the output ends up */
    char tmp[PATH_MAX];  /* the temporary file, or "" */
} out_file;

/* "dir/" of path (empty for a bare name) into dir[cap]; the name into
 * *base. */
static int split_path(const char *path, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    if (dl >= cap)
        return -1;
    memcpy(dir, path, dl);
    dir[dl] = '\0';
    *base = slash ? slash + 1 : path;
    return 0;
}

/* Where output path would end up: its file, or (not there yet) its
 * directory and name. */
typedef struct out_id {
    bool exists, dir_known;
    struct stat st; /* of the file, or of its directory */
    const char *base;
} out_id;

static void out_identify(const char *path, out_id *id)
{
    memset(id, 0, sizeof *id);
    if (stat(path, &id->st) == 0) { /* follows a link, as out_open does */
        id->exists = true;
        return;
    }
    char dir[PATH_MAX];
    if (split_path(path, dir, sizeof dir, &id->base) == 0)
        id->dir_known = stat(dir[0] ? dir : ".", &id->st) == 0;
}

bool ctl_outfile_same(const char *a, const char *b)
{
    out_id ia, ib;
    out_identify(a, &ia);
    out_identify(b, &ib);
    if (ia.exists != ib.exists)
        return false;
    if (ia.exists)
        return ia.st.st_dev == ib.st.st_dev && ia.st.st_ino == ib.st.st_ino &&
               !S_ISCHR(ia.st.st_mode);
    if (ia.dir_known && ib.dir_known)
        return ia.st.st_dev == ib.st.st_dev && ia.st.st_ino == ib.st.st_ino &&
               strcmp(ia.base, ib.base) == 0;
    return strcmp(a, b) == 0;
}

/* Open output path as o (see the top of the file). 0, or a GPUQ_E_* code
 * with the message in err. */
static int out_open(out_file *o, int slot, const char *path, char *err, size_t cap)
{
    memset(o, 0, sizeof *o);
    o->slot = slot;
    o->fd = -1;
    if (strcmp(path, "-") == 0) {
        o->to_stdout = true;
        o->fd = STDOUT_FILENO;
        snprintf(o->dest, sizeof o->dest, "%s", NPY_STDOUT_NAME);
        return 0;
    }
    if (strlen(path) >= sizeof o->dest) {
        snprintf(err, cap, "%s: path too long", path);
        return GPUQ_E_IO;
    }
    strcpy(o->dest, path);
    struct stat st;
    bool exists = stat(path, &st) == 0; /* follows a link */
    if (exists && !S_ISREG(st.st_mode)) {
        o->in_place = true; /* a device, a FIFO: nothing to rename over */
    } else if (exists) {
        o->keep_mode = true;
        o->mode = st.st_mode & 07777;
        struct stat lst;
        char *real = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) ? realpath(path, NULL) : NULL;
        if (real) { /* replace the link's target, not the link */
            if (strlen(real) < sizeof o->dest)
                strcpy(o->dest, real);
            free(real);
        }
    }
    if (o->in_place) {
        o->fd = open(o->dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (o->fd < 0) {
            snprintf(err, cap, "%s: %s", path, strerror(errno));
            return GPUQ_E_IO;
        }
        return 0;
    }
    char dir[PATH_MAX];
    const char *base;
    if (split_path(o->dest, dir, sizeof dir, &base)) {
        snprintf(err, cap, "%s: path too long", path);
        return GPUQ_E_IO;
    }
    int e = 0;
    for (unsigned k = 0; k < 100; k++) {
        /* the name's first 100 bytes: within NAME_MAX with the suffix */
        int n = snprintf(o->tmp, sizeof o->tmp, "%s.%.100s.gpuqctl-%ld-%u.tmp", dir, base,
                         (long)getpid(), slot * 100 + k);
        if (n < 0 || (size_t)n >= sizeof o->tmp) {
            snprintf(err, cap, "%s: path too long", path);
            return GPUQ_E_IO;
        }
        slot_set(slot, o->tmp); /* before it exists: an interrupt removes it */
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (o->fd >= 0)
            return 0;
        e = errno;
        slot_clear(slot);
        if (e != EEXIST)
            break;
    }
    o->tmp[0] = '\0';
    /* no temporary file here; an existing, writable output is written in
     * place (and removed again if that does not complete) */
    if (exists && access(o->dest, W_OK) == 0) {
        slot_set(slot, o->dest);
        o->fd = open(o->dest, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (o->fd >= 0) {
            o->in_place = o->remove_on_fail = true;
            return 0;
        }
        e = errno;
        slot_clear(slot);
    }
    snprintf(err, cap, "%s: cannot create a file in %s: %s", path, dir[0] ? dir : "./",
             strerror(e));
    return GPUQ_E_IO;
}

/* Done with o: commit (ok) or throw away what was written. 0, or a
 * GPUQ_E_* code with the message in err when ok and it cannot be made the
 * output. */
static int out_close(out_file *o, bool ok, const char *path, char *err, size_t cap)
{
    if (o->to_stdout || o->fd < 0)
        return 0;
    int rc = 0;
    if (ok && o->tmp[0] && o->keep_mode && fchmod(o->fd, o->mode) != 0) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        rc = GPUQ_E_IO;
    }
    if (close(o->fd) != 0 && ok && rc == 0) {
        snprintf(err, cap, "%s: write failed: %s", path, strerror(errno));
        rc = GPUQ_E_IO;
    }
    o->fd = -1;
    ok = ok && rc == 0;
    if (o->tmp[0]) {
        if (ok && rename(o->tmp, o->dest) != 0) {
            snprintf(err, cap, "%s: %s", path, strerror(errno));
            rc = GPUQ_E_IO;
            ok = false;
        }
        if (!ok)
            (void)unlink(o->tmp);
    } else if (o->remove_on_fail && !ok) {
        (void)unlink(o->dest);
    }
    slot_clear(o->slot);
    return rc;
}

/* outs[o] from out + off[o], o < nout: all written, then each renamed into
 * place; none is when a write fails (knn's indices failing leave no
 * distances either). */
int ctl_outfile_write(const ctl_out *outs, unsigned nout, const uint8_t *out, const uint64_t *off,
                      char *err, size_t cap)
{
    if (nout > OUT_SLOTS) {
        snprintf(err, cap, "%u outputs: at most %d", nout, OUT_SLOTS);
        return GPUQ_E_INTERNAL;
    }
    out_file f[OUT_SLOTS];
    unsigned opened = 0;
    int rc = 0;
    for (unsigned o = 0; o < nout && rc == 0; o++) {
        rc = out_open(&f[o], (int)o, outs[o].path, err, cap);
        if (rc)
            break;
        opened++;
        rc = npy_write_fd(f[o].fd, f[o].to_stdout ? NPY_STDOUT_NAME : outs[o].path, outs[o].dtype,
                          outs[o].ndim, outs[o].shape, out + off[o], err, cap);
    }
    for (unsigned o = 0; o < opened; o++) {
        char e2[512];
        int crc = out_close(&f[o], rc == 0, outs[o].path, e2, sizeof e2);
        if (crc && rc == 0) {
            rc = crc;
            snprintf(err, cap, "%s", e2);
        }
    }
    return rc;
}
