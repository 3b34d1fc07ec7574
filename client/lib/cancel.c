/* SPDX-License-Identifier: Apache-2.0 */
/* cancel.c - deadlines, the cancel op and interruptible waits of a
 * libgpuq connection (cancel.h; gpuq.h for what users see).
 *
 * Deadline: the connection keeps one value; conn.c adds it as
 * "deadline_ms" to each compute request that has none of its own (0
 * adds nothing), and proto's checks refuse a value over a day before
 * anything is sent, as gpuqd would.
 *
 * Cancel: a builder request {"op": "cancel", "request": id} submitted
 * outside the max_inflight count (ops.c's gpuq_submit_cancel); its reply
 * comes after the target's (replies come in request order) and its info
 * map holds the counts, read here with proto's bounded reader.
 *
 * Interrupting: with an interrupt fd set, a wait polls it beside the
 * socket before it reads a reply's first byte and returns
 * GPUQ_E_INTERRUPTED, the request still queued, when it is readable:
 * nothing of the stream was read, so it stays in step. A send polls it
 * before each piece it writes (sockio.c): interrupted before the first
 * byte, the request was not sent and the stream is in step; after, the
 * frame is cut and the connection broken. poll ended by a signal just
 * looks again, so a handler that wrote to the fd (a self-pipe) is seen
 * then: the handler itself stays async-signal-safe. A blocking call whose
 * wait was interrupted gives its request up (conn_call); the calls libgpuq
 * makes for itself (a staging arena's arena_open) are not interrupted.
 */
#include "cancel.h"

#include <poll.h>
#include <string.h>

#include "conn_defs.h"
#include "conn_err.h"
#include "mpread.h"
#include "sockio.h"

uint64_t cancel_deadline(const conn_cancel *k, int op)
{
    return op > 0 && gpuq_op_is_compute((gpuq_op)op) ? k->deadline_ms : 0;
}

int gpuq_set_deadline_ms(gpuq_conn *c, uint64_t ms)
{
    if (ms > GPUQ_MAX_DEADLINE_MS)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT,
                            "bad_argument: a deadline of %llu ms is over %llu (a day)",
                            (unsigned long long)ms, (unsigned long long)GPUQ_MAX_DEADLINE_MS);
    c->cancel.deadline_ms = ms;
    return 0;
}

int gpuq_set_interrupt_fd(gpuq_conn *c, int fd)
{
    if (fd < -1)
        return conn_set_err(c, GPUQ_E_BAD_ARGUMENT, "bad_argument: interrupt fd %d", fd);
    c->cancel.intr_fd = fd;
    return 0;
}

int gpuq_result_cancel_counts(const gpuq_result *res, uint64_t *dropped, uint64_t *running)
{
    if (res->status != 0 || !res->info)
        return GPUQ_E_BAD_ARGUMENT;
    gpuq_mpr r;
    gpuq_mpr_init(&r, res->info, res->info_len);
    uint32_t n;
    if (gpuq_mpr_map(&r, &n))
        return GPUQ_E_BAD_ARGUMENT;
    uint64_t v[2];
    bool seen[2] = {false, false};
    for (uint32_t i = 0; i < n; i++) {
        const char *k;
        uint32_t kl;
        if (gpuq_mpr_str(&r, &k, &kl))
            return GPUQ_E_BAD_ARGUMENT;
        int which = kl == 7 && memcmp(k, "dropped", 7) == 0   ? 0
                    : kl == 7 && memcmp(k, "running", 7) == 0 ? 1
                                                              : -1;
        if (which < 0 ? gpuq_mpr_skip(&r) != 0 : gpuq_mpr_uint(&r, &v[which]) != 0)
            return GPUQ_E_BAD_ARGUMENT;
        if (which >= 0)
            seen[which] = true;
    }
    if (!seen[0] || !seen[1])
        return GPUQ_E_BAD_ARGUMENT;
    if (dropped)
        *dropped = v[0];
    if (running)
        *running = v[1];
    return 0;
}

int cancel_wait(gpuq_conn *c, int fd, uint64_t id)
{
    int ifd = c->cancel.intr_fd;
    if (ifd < 0)
        return 0;
    int rc = sockio_wait_intr(fd, POLLIN, ifd);
    if (rc == GPUQ_E_BAD_ARGUMENT)
        return conn_set_err(c, rc, "bad_argument: interrupt fd %d is not open", ifd);
    if (rc == 0)
        return conn_set_err(c, GPUQ_E_INTERRUPTED,
                            "interrupted: the wait for request %llu's reply (it is still "
                            "outstanding)",
                            (unsigned long long)id);
    return rc == 1 ? 0 : rc;
}

int cancel_unsent(gpuq_conn *c, int code, uint64_t id)
{
    if (code == GPUQ_E_INTERRUPTED)
        return conn_set_err(c, code, "interrupted: request %llu was not sent",
                            (unsigned long long)id);
    return conn_set_err(c, code, "bad_argument: interrupt fd %d is not open", c->cancel.intr_fd);
}
