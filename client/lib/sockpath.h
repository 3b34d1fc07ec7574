/* SPDX-License-Identifier: Apache-2.0 */
/* sockpath.h - where libgpuq looks for gpuqd, and what it says when nobody
 * answers (sockpath.c).
 *
 * Happy path: sockpath_candidates lists the paths from the environment
 * ($GPUQ_SOCKET alone when set; else $XDG_RUNTIME_DIR/gpuq/gpuqd.sock, then
 * /run/gpuq/gpuqd.sock, proto/socket_path.h); sockpath_connect tries them in
 * order and keeps the first that accepts.
 *
 * Failure: when none accepts, one line names every path tried with what
 * was wrong there and what to do: a missing directory ("directory /x/gpuq
 * does not exist"), a missing socket file, a stale socket (refused), a
 * permission error (join group gpuq).
 */
#ifndef GPUQ_CLIENT_SOCKPATH_H
#define GPUQ_CLIENT_SOCKPATH_H

#include <stdbool.h>
#include <stddef.h>

#define SOCKPATH_MAX 2   /* candidates at most */
#define SOCKPATH_LEN 256 /* bytes of one path, NUL included */

typedef struct sockpath_list {
    unsigned n;
    bool from_env; /* the one path is $GPUQ_SOCKET */
    char path[SOCKPATH_MAX][SOCKPATH_LEN];
} sockpath_list;

/* The candidates from the environment, in the order they are tried.
 * Returns 0, or GPUQ_E_TOO_LARGE when one does not fit SOCKPATH_LEN (l->n
 * then counts those before it). */
int sockpath_candidates(sockpath_list *l);

/* A list of the one path the caller named (gpuq_connect_opts.socket_path).
 * Returns 0 or GPUQ_E_TOO_LARGE. */
int sockpath_single(sockpath_list *l, const char *path);

/* Connect to the first path of l that accepts: *fd (owned by the caller)
 * and *used (its index). Returns 0, or GPUQ_E_IO with the one-line
 * diagnosis of every path in err[cap]. */
int sockpath_connect(const sockpath_list *l, int *fd, unsigned *used, char *err, size_t cap);

/* What a connect to path that failed with errno err means, and whether
 * the path was simply absent (no such file or directory), into buf[cap];
 * returns buf. Looks at the file system (stat) to tell a missing directory
 * from a missing socket and a stale socket from a file that is no socket. */
const char *sockpath_diagnose(const char *path, int err, bool *absent, char *buf, size_t cap);

#endif
