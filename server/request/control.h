/* SPDX-License-Identifier: Apache-2.0 */
/* control.h - the control ops: hello, ping, status, sessions, metrics and
 * the admin ops drain, shutdown, kill_session, set_limit.
 *
 * One handler per op in a table indexed by op. A handler fills the
 * request's reply (info map, document, message) and returns 0 or a code;
 * the request module sends the reply. Admin ops are refused with
 * `permission` for sessions that are not admins (policy.h) before their
 * handler runs. Actions on the daemon as a whole (drain, shutdown, new
 * limits) go through srv->hooks.
 */
#ifndef GPUQ_SERVER_CONTROL_H
#define GPUQ_SERVER_CONTROL_H

#include <stdbool.h>

#include "server_defs.h"

/* control_run's answer when r is answered later (arena_open and
 * arena_import while the arena is pinned off the loop): the handler owns r
 * until it hands it to the reply function of control_layer_init. */
#define CONTROL_PENDING 1

/* The request module's function that sends a control op's reply later (r's
 * status and message set, 0 or < 0). */
void control_layer_init(void (*reply_later)(request *r));
/* Answer r (a decoded and checked control op; borrowed). Returns 0 or a
 * negative code (r->message set when the handler had more to say);
 * GPUQ_E_INTERNAL for an op without a handler; or CONTROL_PENDING. */
int control_run(request *r);
/* May op be served while the daemon drains (status, sessions, metrics)? */
bool control_while_draining(gpuq_op op);

#endif
