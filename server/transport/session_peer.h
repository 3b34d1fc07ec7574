/* SPDX-License-Identifier: Apache-2.0 */
/* session_peer.h - who is at the other end of a session: credentials
 * (SO_PEERCRED, SO_PEERGROUPS) and the caps policy gives them, whether the
 * peer still reads after an EOF, and the label log lines name it by. */
#ifndef GPUQ_SERVER_SESSION_PEER_H
#define GPUQ_SERVER_SESSION_PEER_H

#include <stdbool.h>
#include <stddef.h>

#include "server_defs.h"

/* (Re)compute s->caps from its credentials and the server's config. */
void session_apply_policy(session *s);
/* "session N" into buf. */
const char *session_label(const session *s, char *buf, size_t cap);
/* s's pid, uid, gid and groups from its socket fd (unknown: uid and gid -1). */
void session_peer_read(session *s, int fd);
/* After EOF: the client only shut its sending side (it still reads). */
bool session_peer_reads(session *s);

#endif
