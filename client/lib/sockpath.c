/* SPDX-License-Identifier: Apache-2.0 */
/* sockpath.c - see sockpath.h. */
#include "sockpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "errors.h"
#include "gpuq.h"
#include "socket_path.h"
#include "sockio.h"

#define HINT_START "is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`"

/* Add the path dir + rest (dir may be "") as the next candidate. */
static int add(sockpath_list *l, const char *dir, const char *rest)
{
    int n = snprintf(l->path[l->n], SOCKPATH_LEN, "%s%s", dir, rest);
    if (n < 0 || n >= SOCKPATH_LEN)
        return GPUQ_E_TOO_LARGE;
    l->n++;
    return 0;
}

int sockpath_candidates(sockpath_list *l)
{
    memset(l, 0, sizeof *l);
    const char *env = getenv(GPUQ_SOCKET_ENV), *xdg = getenv("XDG_RUNTIME_DIR");
    if (env && *env) {
        l->from_env = true;
        return add(l, env, "");
    }
    int rc;
    if (xdg && *xdg && (rc = add(l, xdg, "/" GPUQ_SOCKET_USER_SUBDIR "/" GPUQ_SOCKET_FILE)) != 0)
        return rc;
    return add(l, gpuq_system_socket_dir(), "/" GPUQ_SOCKET_FILE);
}

int sockpath_single(sockpath_list *l, const char *path)
{
    memset(l, 0, sizeof *l);
    return add(l, path, "");
}

/* The directory part of path into buf ("." for a bare name, "/" for /x). */
static void dir_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, cap, ".");
    else if (slash == path)
        snprintf(buf, cap, "/");
    else
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

const char *sockpath_diagnose(const char *path, int err, bool *absent, char *buf, size_t cap)
{
    char dir[SOCKPATH_LEN];
    struct stat sb;
    *absent = false;
    switch (err) {
    case ENOENT:
        *absent = true;
        dir_of(path, dir, sizeof dir);
        if (stat(dir, &sb) < 0 && errno == ENOENT)
            snprintf(buf, cap, "directory %s does not exist", dir);
        else
            snprintf(buf, cap, "no such file");
        break;
    case ENOTDIR:
        *absent = true;
        snprintf(buf, cap, "a parent of it is not a directory");
        break;
    case ECONNREFUSED:
        if (lstat(path, &sb) == 0 && !S_ISSOCK(sb.st_mode))
            snprintf(buf, cap, "not a socket");
        else
            snprintf(buf, cap, "stale socket (no gpuqd listens; remove it or restart gpuqd)");
        break;
    case EACCES:
    case EPERM:
        snprintf(buf, cap,
                 "permission denied: join group gpuq (`sudo usermod -aG gpuq $USER`, "
                 "then log in again)");
        break;
    case ENAMETOOLONG:
        snprintf(buf, cap, "path too long for a Unix socket (at most %zu bytes)",
                 sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        break;
    default:
        snprintf(buf, cap, "%s", strerror(err));
        break;
    }
    return buf;
}

/* Append s to err[cap] at *len; what does not fit is cut (NUL-terminated). */
static void put(char *err, size_t cap, size_t *len, const char *s)
{
    if (*len + 1 >= cap)
        return;
    int n = snprintf(err + *len, cap - *len, "%s", s);
    if (n > 0)
        *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

int sockpath_connect(const sockpath_list *l, int *fd, unsigned *used, char *err, size_t cap)
{
    size_t len = 0;
    bool all_absent = true;
    if (cap)
        err[0] = '\0';
    put(err, cap, &len,
        l->from_env ? "cannot connect to gpuqd at $" GPUQ_SOCKET_ENV
                      " (the only path tried while it is set): "
                    : "cannot connect to gpuqd: ");
    for (unsigned i = 0; i < l->n; i++) {
        if (sockio_connect(l->path[i], fd) == 0) {
            *used = i;
            if (cap)
                err[0] = '\0';
            return 0;
        }
        int e = errno;
        char why[200];
        bool absent;
        sockpath_diagnose(l->path[i], e, &absent, why, sizeof why);
        all_absent = all_absent && absent;
        if (i)
            put(err, cap, &len, "; ");
        put(err, cap, &len, l->path[i]);
        put(err, cap, &len, ": ");
        put(err, cap, &len, why);
    }
    /* Only when there is nothing at all: a socket that exists but refuses
     * says what to do itself, and gpuqd is probably running then. */
    if (all_absent)
        put(err, cap, &len, "; " HINT_START);
    return GPUQ_E_IO;
}

int gpuq_default_socket(char *buf, size_t cap)
{
    sockpath_list l;
    if (sockpath_candidates(&l) != 0 && l.n == 0)
        return GPUQ_E_TOO_LARGE;
    int n = snprintf(buf, cap, "%s", l.path[0]);
    if (n < 0 || (size_t)n >= cap)
        return GPUQ_E_TOO_LARGE;
    return 0;
}
