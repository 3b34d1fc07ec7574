/* SPDX-License-Identifier: Apache-2.0 */
/* slowlog.h - the N slowest requests (by total_us) seen since start or
 * the last reset, above a threshold: gpuqd's SLOWLOG (PROTOCOL.md 3.6).
 *
 * Happy path: slowlog_wants(total_us) says cheaply whether a finished
 * request would enter (the request path asks it for every request before
 * building a record); slowlog_offer copies the record in, replacing the
 * fastest one kept when full; slowlog_sorted lists them slowest first.
 * Capacity follows the configured length: slowlog_resize keeps the
 * slowest when it shrinks. No allocation except on a resize.
 *
 * Failure: a resize that cannot allocate keeps the old capacity (and
 * says so); nothing else fails. Loop thread only.
 */
#ifndef GPUQ_SERVER_SLOWLOG_H
#define GPUQ_SERVER_SLOWLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "request_log_defs.h"

typedef struct slowlog {
    reqlog_rec *recs; /* owned, cap of them, n in use (unordered) */
    size_t cap, n;
    size_t fastest;   /* index of the fastest kept (valid when n > 0) */
    uint64_t entered; /* records that entered since the last reset */
} slowlog;

void slowlog_init(slowlog *sl);
void slowlog_free(slowlog *sl);
/* Make room for len records (0: the slowlog is off and emptied). The
 * slowest are kept. 0, or GPUQ_E_NO_MEMORY (nothing changed). */
int slowlog_resize(slowlog *sl, size_t len);
/* Would a request of total_us enter (at least min_us, and room or slower
 * than the fastest kept)? */
bool slowlog_wants(const slowlog *sl, double total_us, uint64_t min_us);
/* Copy rec (borrowed) in if slowlog_wants; returns whether it entered. */
bool slowlog_offer(slowlog *sl, const reqlog_rec *rec, uint64_t min_us);
/* The kept records' addresses, slowest first (ties: the newer first),
 * into out[cap]; returns how many (at most n). Valid until the next
 * offer, resize or reset. */
size_t slowlog_sorted(const slowlog *sl, const reqlog_rec **out, size_t cap);
/* Forget every record (the capacity stays). */
void slowlog_reset(slowlog *sl);

#endif
