/* SPDX-License-Identifier: Apache-2.0 */
/* server.h - the daemon as a whole: backend choice, listener, accept,
 * signals, drain and shutdown. The top of the server: it calls session and
 * request; they reach it back only through srv->hooks (server_defs.h).
 *
 * Happy path: server_init picks the backend (logging which and why), binds
 * the socket; server_run runs the loop until shutdown finished, then closes
 * what is left and the loop. Shutdown (SIGINT/SIGTERM, device lost): stop
 * accepting, answer every accepted request (new ones get shutting_down),
 * within the drain timeout, then close all sessions and the backend.
 * SIGHUP re-reads the config file and flags and applies what may change at
 * run time (limits, log level, drain timeout, policy); a bad file changes
 * nothing.
 */
#ifndef GPUQ_SERVER_SERVER_H
#define GPUQ_SERVER_SERVER_H

#include "server_defs.h"

/* Returns 0, or the process exit code on failure (2: backend not available,
 * 1: other). cfg is copied. */
int server_init(server *srv, uv_loop_t *loop, const config *cfg);
/* server_init with a backend the caller made (tests, the session fuzzer):
 * b was created on loop with request_complete (request.h) as its
 * completion callback; srv owns it from here on, on failure too (destroyed
 * through b->ops->destroy). Listens on cfg->socket as server_init does.
 * Returns 0, or 1 on failure. */
int server_init_with_backend(server *srv, uv_loop_t *loop, const config *cfg, backend *b);
/* The arguments SIGHUP re-reads the settings from (borrowed: they must live
 * as long as srv, as main's do). Call after server_init. */
void server_set_args(server *srv, int argc, char **argv);
/* Run until shut down; returns the exit code (0, or 3 after device lost). */
int server_run(server *srv);
/* Begin draining (idempotent); exit_code is raised to code. */
void server_shutdown(server *srv, int code);
/* The drain op: stop accepting sessions (close the listener); open sessions
 * go on; when the last one closes, shut down with exit code 0. */
void server_stop_accepting(server *srv);
/* srv->cfg.lim or policy changed (set_limit, SIGHUP): recompute every
 * session's caps, follow the staging limit, wake waiting sessions. */
void server_limits_changed(server *srv);
/* Finish the drain when nothing is left to answer. */
void server_check_drain(server *srv);
/* A session struct was freed. */
void server_session_freed(server *srv);

#endif
