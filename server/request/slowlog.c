/* SPDX-License-Identifier: Apache-2.0 */
/* slowlog.c - see slowlog.h. */
#include "slowlog.h"

#include <stdlib.h>
#include <string.h>

#include "errors.h"

void slowlog_init(slowlog *sl)
{
    memset(sl, 0, sizeof *sl);
}

void slowlog_free(slowlog *sl)
{
    free(sl->recs);
    slowlog_init(sl);
}

static void slowlog_find_fastest(slowlog *sl)
{
    sl->fastest = 0;
    for (size_t i = 1; i < sl->n; i++)
        if (sl->recs[i].total_us < sl->recs[sl->fastest].total_us)
            sl->fastest = i;
}

/* Slowest first; equal times: the later reply first. */
static int slowlog_cmp(const void *a, const void *b)
{
    const reqlog_rec *x = *(const reqlog_rec *const *)a, *y = *(const reqlog_rec *const *)b;
    if (x->total_us != y->total_us)
        return x->total_us > y->total_us ? -1 : 1;
    return x->wall_us > y->wall_us ? -1 : x->wall_us < y->wall_us ? 1 : 0;
}

size_t slowlog_sorted(const slowlog *sl, const reqlog_rec **out, size_t cap)
{
    size_t n = sl->n < cap ? sl->n : cap;
    if (n == 0)
        return 0;    /* out may be NULL: qsort is never handed it */
    if (n < sl->n) { /* the caller's room is short: the slowest still come first */
        const reqlog_rec **all = malloc(sl->n * sizeof *all);
        if (!all)
            return 0;
        for (size_t i = 0; i < sl->n; i++)
            all[i] = &sl->recs[i];
        qsort(all, sl->n, sizeof *all, slowlog_cmp);
        memcpy(out, all, n * sizeof *out);
        free(all);
        return n;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = &sl->recs[i];
    qsort(out, n, sizeof *out, slowlog_cmp);
    return n;
}

int slowlog_resize(slowlog *sl, size_t len)
{
    if (len == sl->cap)
        return 0;
    if (len == 0) {
        slowlog_free(sl);
        return 0;
    }
    reqlog_rec *nr = malloc(len * sizeof *nr);
    if (!nr)
        return GPUQ_E_NO_MEMORY;
    size_t keep = sl->n < len ? sl->n : len;
    if (keep) {
        const reqlog_rec **order = malloc(sl->n * sizeof *order);
        if (!order) {
            free(nr);
            return GPUQ_E_NO_MEMORY;
        }
        slowlog_sorted(sl, order, sl->n);
        for (size_t i = 0; i < keep; i++)
            nr[i] = *order[i];
        free(order);
    }
    free(sl->recs);
    sl->recs = nr;
    sl->cap = len;
    sl->n = keep;
    slowlog_find_fastest(sl);
    return 0;
}

bool slowlog_wants(const slowlog *sl, double total_us, uint64_t min_us)
{
    if (sl->cap == 0 || total_us < (double)min_us)
        return false;
    return sl->n < sl->cap || total_us > sl->recs[sl->fastest].total_us;
}

bool slowlog_offer(slowlog *sl, const reqlog_rec *rec, uint64_t min_us)
{
    if (!slowlog_wants(sl, rec->total_us, min_us))
        return false;
    if (sl->n < sl->cap) {
        sl->recs[sl->n++] = *rec;
        if (sl->n == 1 || rec->total_us < sl->recs[sl->fastest].total_us)
            sl->fastest = sl->n - 1;
    } else {
        sl->recs[sl->fastest] = *rec; /* the fastest kept makes room */
        slowlog_find_fastest(sl);
    }
    sl->entered++;
    return true;
}

void slowlog_reset(slowlog *sl)
{
    sl->n = 0;
    sl->fastest = 0;
    sl->entered = 0;
}
