/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_doc.c - reading the server's msgpack maps into flat key/value rows
 * and formatting sizes and ages, for gpuqctl's human tables (status,
 * sessions). Nested values keep their raw bytes for a second pass. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"

int ctl_read_map(gpuq_mpr *r, ctl_kv *kv, int cap, int *n)
{
    uint32_t cnt;
    if (gpuq_mpr_map(r, &cnt))
        return -1;
    *n = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        const char *k;
        uint32_t kl;
        if (gpuq_mpr_str(r, &k, &kl))
            return -1;
        ctl_kv tmp;
        ctl_kv *e = *n < cap ? &kv[*n] : &tmp;
        memset(e, 0, sizeof *e);
        snprintf(e->key, sizeof e->key, "%.*s", (int)kl, k);
        e->type = gpuq_mpr_peek(r);
        e->raw = r->p;
        const char *s;
        uint32_t sl;
        int rc = 0;
        switch (e->type) {
        case GPUQ_MP_STR:
            rc = gpuq_mpr_str(r, &s, &sl);
            if (!rc)
                snprintf(e->s, sizeof e->s, "%.*s", (int)sl, s);
            break;
        case GPUQ_MP_BOOL:
            rc = gpuq_mpr_bool(r, &e->b);
            e->num = e->b;
            break;
        case GPUQ_MP_UINT:
        case GPUQ_MP_INT:
        case GPUQ_MP_FLOAT:
            rc = gpuq_mpr_double(r, &e->num);
            break;
        default:
            rc = gpuq_mpr_skip(r);
            break;
        }
        if (rc)
            return -1;
        e->raw_len = (size_t)(r->p - e->raw);
        if (*n < cap)
            (*n)++;
    }
    return 0;
}

const ctl_kv *ctl_kv_get(const ctl_kv *kv, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0)
            return &kv[i];
    return NULL;
}

double ctl_kv_num(const ctl_kv *kv, int n, const char *key)
{
    const ctl_kv *e = ctl_kv_get(kv, n, key);
    return e ? e->num : 0;
}

const char *ctl_kv_str(const ctl_kv *kv, int n, const char *key)
{
    const ctl_kv *e = ctl_kv_get(kv, n, key);
    return e && e->type == GPUQ_MP_STR ? e->s : "";
}

const char *ctl_fmt_bytes(double v, char *buf, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%.0f B", v);
    else
        snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

/* v (>= 0) with three significant digits and no exponent: "843", "28.4",
 * "1.25". */
static const char *fmt3(double v, char *buf, size_t cap)
{
    int decimals = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
    snprintf(buf, cap, "%.*f", decimals, v);
    return buf;
}

/* Seconds past which a time reads as a count of them ("123456 s"), then
 * with an exponent: nothing a request takes, but a broken clock's or a
 * reply's nonsense must not fill the buffer. */
#define CTL_FMT_S_PLAIN_MAX 1e9

const char *ctl_fmt_us(double us, char *buf, size_t cap)
{
    char n[32];
    if (!(us >= 0) || isinf(us)) /* NaN too */
        snprintf(buf, cap, "-");
    else if (us == 0)
        snprintf(buf, cap, "0 \u00b5s");
    else if (us < 0.9995) /* under a microsecond: its nanoseconds */
        snprintf(buf, cap, "%s ns", fmt3(us * 1e3, n, sizeof n));
    else if (us < 999.5)
        snprintf(buf, cap, "%s \u00b5s", fmt3(us, n, sizeof n));
    else if (us < 999.5e3)
        snprintf(buf, cap, "%s ms", fmt3(us / 1e3, n, sizeof n));
    else if (us / 1e6 < CTL_FMT_S_PLAIN_MAX)
        snprintf(buf, cap, "%s s", fmt3(us / 1e6, n, sizeof n));
    else
        snprintf(buf, cap, "%.3g s", us / 1e6);
    return buf;
}

const char *ctl_fmt_rate(double per_s, const char *unit, char *buf, size_t cap)
{
    static const char *const prefix[] = {"", "k", "M", "G", "T", "P"};
    char n[32];
    if (!(per_s >= 0) || isinf(per_s)) {
        snprintf(buf, cap, "- %s", unit);
        return buf;
    }
    if (per_s == 0) {
        snprintf(buf, cap, "0 %s", unit);
        return buf;
    }
    if (per_s < 0.995) { /* slower than one a second: three significant digits, never "0" */
        if (per_s >= 1e-4 || per_s < 1e-10) /* %g's own form: no exponent down to 1e-4 */
            snprintf(buf, cap, "%.3g %s", per_s, unit);
        else /* "0.0000123": an exponent reads badly for a rate */
            snprintf(buf, cap, "%.*f %s", 2 - (int)floor(log10(per_s)), per_s, unit);
        return buf;
    }
    int p = 0;
    while (per_s >= 999.5 && p < 5) {
        per_s /= 1e3;
        p++;
    }
    if (per_s < 1e6)
        fmt3(per_s, n, sizeof n);
    else /* past P, nonsense: bounded */
        snprintf(n, sizeof n, "%.3g", per_s);
    /* bytes take the prefix ("579 MB/s"), counts the number ("12.3k req/s") */
    if (unit[0] == 'B')
        snprintf(buf, cap, "%s %s%s", n, prefix[p], unit);
    else
        snprintf(buf, cap, "%s%s %s", n, prefix[p], unit);
    return buf;
}

const char *ctl_fmt_age(double s, char *buf, size_t cap)
{
    uint64_t t = s < 0 ? 0 : (uint64_t)s;
    if (t < 60)
        snprintf(buf, cap, "%.1fs", s < 0 ? 0 : s);
    else if (t < 3600)
        snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", t / 3600, (t / 60) % 60);
    else
        snprintf(buf, cap, "%" PRIu64 "d%02" PRIu64 "h", t / 86400, (t / 3600) % 24);
    return buf;
}
