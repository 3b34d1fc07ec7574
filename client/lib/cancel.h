/* SPDX-License-Identifier: Apache-2.0 */
/* cancel.h - a connection's deadline, the cancel op and interruptible
 * waits (gpuq_set_deadline_ms, gpuq_result_cancel_counts and
 * gpuq_set_interrupt_fd in gpuq.h; gpuq_submit_cancel is ops.c's).
 *
 * conn.c embeds a conn_cancel in each connection, asks cancel_deadline for
 * the "deadline_ms" of each request it encodes, and calls cancel_wait
 * before it reads the first byte of a reply.
 */
#ifndef GPUQ_CLIENT_CANCEL_H
#define GPUQ_CLIENT_CANCEL_H

#include <stdint.h>

#include "req.h"

typedef struct conn_cancel {
    uint64_t deadline_ms; /* of each compute request (0: none) */
    int intr_fd;          /* a wait for a reply ends while this is readable (-1: none) */
} conn_cancel;

/* The "deadline_ms" to add to a request of op (a gpuq_op, or -1 for a name
 * that is none): the connection's for a compute op, else 0 (none). */
uint64_t cancel_deadline(const conn_cancel *k, int op);
/* Before reading request id's reply from c's socket fd: 0 at once without
 * an interrupt fd, else once fd is readable (or at its end); without
 * reading either, GPUQ_E_INTERRUPTED when the interrupt fd is readable
 * first or as well, GPUQ_E_BAD_ARGUMENT when it is not open (message set
 * on c for both), GPUQ_E_IO when poll fails (errno kept: the caller
 * breaks the connection). */
int cancel_wait(gpuq_conn *c, int fd, uint64_t id);
/* A send of request id interrupted (GPUQ_E_INTERRUPTED) or refused
 * (GPUQ_E_BAD_ARGUMENT: the interrupt fd is not open) before its first
 * byte: the message on c; returns code. */
int cancel_unsent(gpuq_conn *c, int code, uint64_t id);

#endif
