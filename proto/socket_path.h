/* SPDX-License-Identifier: Apache-2.0 */
/* socket_path.h - where gpuqd's socket is when nobody names it: the names
 * gpuqd binds (server/transport/listener.c) and libgpuq looks for (client/lib/sockpath.c),
 * spelled once. Not installed: the API says it in words (gpuq.h).
 *
 *   $GPUQ_SOCKET                          alone, when set and not empty
 *   $XDG_RUNTIME_DIR/gpuq/gpuqd.sock      a per-user gpuqd
 *   /run/gpuq/gpuqd.sock                  the system gpuqd (gpuqd.socket)
 *
 * GPUQ_TEST_SYSTEM_SOCKET_DIR is a test hook, not a setting: when set, it
 * stands for /run/gpuq on both sides, so the tests reach the system path's
 * code (its directory's mode and group, the client's fall-through to it)
 * without root and without touching a real /run/gpuq.
 */
#ifndef GPUQ_PROTO_SOCKET_PATH_H
#define GPUQ_PROTO_SOCKET_PATH_H

#include <stdlib.h>

#define GPUQ_SOCKET_ENV "GPUQ_SOCKET"
#define GPUQ_SOCKET_FILE "gpuqd.sock"
#define GPUQ_SOCKET_USER_SUBDIR "gpuq" /* under $XDG_RUNTIME_DIR */
#define GPUQ_SYSTEM_SOCKET_DIR "/run/gpuq"
#define GPUQ_TEST_SYSTEM_SOCKET_DIR_ENV "GPUQ_TEST_SYSTEM_SOCKET_DIR"

/* The system socket's directory: GPUQ_SYSTEM_SOCKET_DIR unless the test
 * hook names another. */
static inline const char *gpuq_system_socket_dir(void)
{
    const char *t = getenv(GPUQ_TEST_SYSTEM_SOCKET_DIR_ENV);
    return t && *t ? t : GPUQ_SYSTEM_SOCKET_DIR;
}

#endif
