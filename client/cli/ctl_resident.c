/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_resident.c - gpuqctl put, get, ls and rm: arrays gpuqd keeps by name
 * (PROTOCOL.md 3.5), and "@NAME" as an op command's input.
 *
 * put and get are op requests through ctl_run_op (ctl_xfer.c), so they
 * move their bytes as the op commands do (shared memory or socket, "-" for
 * stdin and stdout, a progress line, Ctrl-C a cancel, --json a summary):
 * put's input is its file (or "@OTHER": a copy), its output the array kept
 * as NAME; get's input is the array NAME, looked up first with a list (its
 * dtype and shape make the output's), its output a file (or "@OTHER"). ls
 * prints the list as a table (or the document as one JSON array), rm one
 * line (or one JSON object).
 *
 * Failures: a malformed NAME is a usage error (2); a name with no array
 * (or none the caller may read) exits 1 with not_found; gpuqd's errors
 * (permission_denied, too_large over the owner's resident_bytes, busy
 * over total_resident) exit 1 with gpuqd's message.
 */
#include "ctl_resident.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_json.h"
#include "ctl_xfer.h"
#include "op_ctl.h"

/* One array of a list document (gpuq_list). */
typedef struct res_row {
    char name[GPUQ_RES_NAME_MAX + 1];
    char access[16];
    gpuq_dtype dtype; /* GPUQ_DT_NONE when gpuqd named another */
    int ndim;
    uint64_t shape[2];
    double owner, bytes, device, users;
    bool persist;
} res_row;

/* The next array of a list document at r into *row: 0, or -1 when it is
 * malformed. */
static int read_row(gpuq_mpr *r, res_row *row)
{
    ctl_kv kv[16];
    int n;
    memset(row, 0, sizeof *row);
    if (ctl_read_map(r, kv, 16, &n))
        return -1;
    snprintf(row->name, sizeof row->name, "%s", ctl_kv_str(kv, n, "name"));
    snprintf(row->access, sizeof row->access, "%s", ctl_kv_str(kv, n, "access"));
    const char *dt = ctl_kv_str(kv, n, "dtype");
    int d = gpuq_dtype_parse(dt, strlen(dt));
    row->dtype = d > 0 ? (gpuq_dtype)d : GPUQ_DT_NONE;
    row->owner = ctl_kv_num(kv, n, "owner");
    row->bytes = ctl_kv_num(kv, n, "bytes");
    row->device = ctl_kv_num(kv, n, "device");
    row->users = ctl_kv_num(kv, n, "users");
    const ctl_kv *ps = ctl_kv_get(kv, n, "persist");
    row->persist = ps && ps->b;
    const ctl_kv *sh = ctl_kv_get(kv, n, "shape");
    if (!sh || sh->type != GPUQ_MP_ARRAY)
        return -1;
    gpuq_mpr s;
    gpuq_mpr_init(&s, sh->raw, sh->raw_len);
    uint32_t nd;
    if (gpuq_mpr_array(&s, &nd) || nd < 1 || nd > 2)
        return -1;
    row->ndim = (int)nd;
    for (uint32_t k = 0; k < nd; k++)
        if (gpuq_mpr_uint(&s, &row->shape[k]))
            return -1;
    return 0;
}

/* The list document of c (gpuq_list), *doc malloc'd: 0 or an exit status
 * (printed). */
static int list_doc(gpuq_conn *c, uint8_t **doc, size_t *len)
{
    int rc = gpuq_list(c, doc, len, NULL);
    return rc ? ctl_fail(rc, gpuq_errmsg(c)) : 0;
}

int ctl_resident_open(const ctl_ctx *ctx, const char *arg, npy_array *a)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->path = arg;
    const char *name = ctl_resident_name(arg);
    int rc = name ? ctl_resident_check(ctx, arg) : ctl_usage_error(ctx, "'%s' is no '@NAME'", arg);
    if (rc)
        return rc;
    gpuq_conn *c;
    if ((rc = ctl_connect(ctx, &c)))
        return rc;
    uint8_t *doc = NULL;
    size_t len = 0;
    if ((rc = list_doc(c, &doc, &len)))
        goto out_close;
    gpuq_mpr r;
    gpuq_mpr_init(&r, doc, len);
    bool found = false;
    while (!found && gpuq_mpr_left(&r) > 0) {
        res_row row;
        if (read_row(&r, &row)) {
            rc = ctl_fail(GPUQ_E_PROTOCOL, "malformed list of resident arrays");
            goto out_free;
        }
        found = strcmp(row.name, name) == 0;
        if (!found)
            continue;
        if (row.dtype == GPUQ_DT_NONE) {
            rc = ctl_failf(GPUQ_E_BAD_DTYPE, "%s: gpuqd says its dtype is unknown here", arg);
            goto out_free;
        }
        a->dtype = row.dtype;
        a->ndim = row.ndim;
        a->shape[0] = row.shape[0];
        a->shape[1] = row.ndim == 2 ? row.shape[1] : 1;
        uint64_t b = gpuq_dtype_size(row.dtype);
        if (__builtin_mul_overflow(b, row.shape[0], &b) ||
            __builtin_mul_overflow(b, a->shape[1], &b) || b > SIZE_MAX) {
            rc = ctl_failf(GPUQ_E_BAD_SHAPE, "%s: its shape overflows", arg);
            goto out_free;
        }
        a->nbytes = (size_t)b;
        a->resident = name;
    }
    if (!found)
        rc = ctl_failf(GPUQ_E_NOT_FOUND,
                       "no resident array '%s' that you may read (gpuqctl ls lists them)", name);
out_free:
    free(doc);
out_close:
    gpuq_close(c);
    return rc;
}

/* ---- put, get ---- */

static const char *numpy_dtype(gpuq_dtype dt)
{
    return dt == GPUQ_DT_F32 ? "float32" : dt == GPUQ_DT_F64 ? "float64" : "int64";
}

/* numpy's way: "(1000, 128)", "(5,)". */
static const char *fmt_shape(int ndim, const uint64_t *shape, char *buf, size_t cap)
{
    if (ndim < 2)
        snprintf(buf, cap, "(%llu,)", (unsigned long long)shape[0]);
    else
        snprintf(buf, cap, "(%llu, %llu)", (unsigned long long)shape[0],
                 (unsigned long long)shape[1]);
    return buf;
}

/* NAME given plainly (put, get, rm): a usage error unless it is a name
 * (the name not echoed when it holds a control character); at gets
 * "@NAME", as an op's argument names it. */
static int check_name(const ctl_ctx *ctx, const char *name, char *at, size_t cap)
{
    char why[128];
    snprintf(at, cap, "@%s", name);
    if (gpuq_name_check(name, strlen(name), why, sizeof why) == 0)
        return 0;
    for (const char *p = name; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return ctl_usage_error(ctx, "bad NAME: %s", why);
    return ctl_usage_error(ctx, "bad NAME '%s': %s", name, why);
}

static int put_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *access_s = NULL;
    bool timing = false, persist = false;
    const ctl_opt opts[] = {{"--access", &access_s, NULL}, {"--persist", NULL, &persist}};
    const char *pos[2];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 2, pos, &npos, &timing);
    if (rc)
        return rc;
    char at[GPUQ_RES_NAME_MAX + 8];
    if ((rc = check_name(ctx, pos[0], at, sizeof at)))
        return rc;
    if (access_s && strcmp(access_s, "private") != 0 && strcmp(access_s, "all") != 0)
        return ctl_usage_error(ctx, "unknown --access '%s' (private|all)", access_s);
    if ((rc = ctl_check_files(ctx, pos + 1, 1)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_PUT;
    snprintf(r.name, sizeof r.name, "%s", pos[0]);
    r.has_access = true;
    r.access = access_s && strcmp(access_s, "all") == 0 ? GPUQ_ACCESS_ALL : GPUQ_ACCESS_PRIVATE;
    r.persist = persist;
    npy_array a;
    if ((rc = op_ctl_load(pos[1], &a)))
        return rc;
    r.dtype = a.dtype;
    op_ctl_shape_a(&r, &a);
    /* its output is the array kept as NAME (put's "name": no "out") */
    const ctl_out out = {a.dtype, a.ndim, {a.shape[0], a.ndim == 2 ? a.shape[1] : 0}, at};
    rc = ctl_run_op(ctx, &r, &a, NULL, &out, 1, timing);
    if (rc == 0 && !ctx->json) {
        char sh[64], b[32];
        printf("put %s: %s %s, %s, access %s%s\n", pos[0], numpy_dtype(a.dtype),
               fmt_shape(a.ndim, a.shape, sh, sizeof sh),
               ctl_fmt_bytes((double)a.nbytes, b, sizeof b),
               r.access == GPUQ_ACCESS_ALL ? "all" : "private", persist ? ", persisted" : "");
    }
    npy_free(&a);
    return rc;
}

static int get_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *out_path = NULL;
    bool timing = false;
    const ctl_opt opts[] = {{"-o", &out_path, NULL}, {"--output", &out_path, NULL}};
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, opts, 2, pos, &npos, &timing);
    if (rc)
        return rc;
    if (!out_path)
        return ctl_usage_error(ctx, "-o OUT.npy is required");
    char at[GPUQ_RES_NAME_MAX + 8];
    if ((rc = check_name(ctx, pos[0], at, sizeof at)))
        return rc;
    npy_array a; /* the array: its dtype and shape, looked up */
    if ((rc = ctl_resident_open(ctx, at, &a)))
        return rc;
    gpuq_request r;
    gpuq_request_init(&r);
    r.op = GPUQ_OP_GET;
    snprintf(r.name, sizeof r.name, "%s", pos[0]);
    const ctl_out out = {a.dtype, a.ndim, {a.shape[0], a.ndim == 2 ? a.shape[1] : 0}, out_path};
    rc = ctl_run_op(ctx, &r, &a, NULL, &out, 1, timing);
    npy_free(&a);
    return rc;
}

/* ---- ls, rm ---- */

/* One line per array: NAME OWNER ACCESS DTYPE SHAPE BYTES DEVICE USERS,
 * the name column as wide as the longest name. */
static int ls_table(const uint8_t *doc, size_t len)
{
    int w = 4;
    for (int pass = 0; pass < 2; pass++) {
        gpuq_mpr r;
        gpuq_mpr_init(&r, doc, len);
        if (pass == 1)
            printf("%-*s %-10s %-7s %-7s %-14s %10s %6s %5s %s\n", w, "NAME", "OWNER", "ACCESS",
                   "DTYPE", "SHAPE", "BYTES", "DEVICE", "USERS", "PERSIST");
        while (gpuq_mpr_left(&r) > 0) {
            res_row row;
            if (read_row(&r, &row))
                return ctl_fail(GPUQ_E_PROTOCOL, "malformed list of resident arrays");
            if (pass == 0) {
                int l = (int)strlen(row.name);
                w = l > w ? l : w;
                continue;
            }
            char owner[64], sh[64], b[32], dev[16];
            ctl_user_name(row.owner, owner, sizeof owner);
            snprintf(dev, sizeof dev, row.device < 0 ? "cpu" : "%.0f", row.device);
            printf("%-*s %-10s %-7s %-7s %-14s %10s %6s %5.0f %s\n", w, row.name, owner, row.access,
                   row.dtype ? numpy_dtype(row.dtype) : "?",
                   fmt_shape(row.ndim, row.shape, sh, sizeof sh),
                   ctl_fmt_bytes(row.bytes, b, sizeof b), dev, row.users,
                   row.persist ? "yes" : "no");
        }
    }
    return 0;
}

static int ls_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    gpuq_conn *c;
    int rc = ctl_connect_bare(ctx, argc, argv, &c);
    if (rc)
        return rc;
    uint8_t *doc = NULL;
    size_t len = 0;
    if ((rc = list_doc(c, &doc, &len)) == 0)
        rc = ctx->json
                 ? ctl_stream_json(doc, len, GPUQ_E_PROTOCOL, "malformed list of resident arrays")
                 : ls_table(doc, len);
    free(doc);
    gpuq_close(c);
    return rc;
}

static int rm_exec(ctl_ctx *ctx, int argc, const char **argv)
{
    const char *pos[1];
    int npos;
    int rc = ctl_parse_args(ctx, argc, argv, NULL, 0, pos, &npos, NULL);
    if (rc)
        return rc;
    char at[GPUQ_RES_NAME_MAX + 8];
    if ((rc = check_name(ctx, pos[0], at, sizeof at)))
        return rc;
    gpuq_conn *c;
    if ((rc = ctl_connect(ctx, &c)))
        return rc;
    int src = gpuq_remove(c, pos[0]);
    if (src) {
        rc = ctl_fail(src, gpuq_errmsg(c));
    } else if (ctx->json) {
        fputs("{\"command\":\"rm\",\"ok\":true,\"name\":", stdout);
        ctl_json_str(stdout, pos[0]);
        fputs(",\"message\":", stdout);
        char msg[GPUQ_RES_NAME_MAX + 16];
        snprintf(msg, sizeof msg, "removed %s", pos[0]);
        ctl_json_str(stdout, msg);
        fputs("}\n", stdout);
    } else {
        printf("removed %s\n", pos[0]);
    }
    gpuq_close(c);
    return rc;
}

/* ---- the entries ---- */

#define RES_TIMING_DOC                                                                             \
    {                                                                                              \
        "--timing", NULL, NULL, NULL,                                                              \
            "Print gpuqd's timing of the request on stderr: queue, copies to and from the "        \
            "device, "                                                                             \
            "kernel, total."                                                                       \
    }

static const ctl_optdoc put_opts[] = {
    {"--access", NULL, "private|all", "private",
     "Who may read the array: its owner and admins (private), or every user of gpuqd (all). "
     "Only its owner or an admin may replace or remove it either way."},
    {"--persist", NULL, NULL, NULL,
     "Also write the array to gpuqd's state directory (its state_dir setting, default "
     "/var/lib/gpuq), so that it survives a restart of gpuqd; the error storage when gpuqd has "
     "none, or its disk is full."},
    RES_TIMING_DOC,
    {NULL, NULL, NULL, NULL, NULL},
};

const ctl_entry ctl_put_entry = {
    .name = "put",
    .usage = "[--access private|all] [--persist] [--timing] NAME IN.npy",
    .min_args = 2,
    .max_args = 2,
    .exec = put_exec,
    .help = "Keep an array in gpuqd under a name, for later commands to use as @NAME.",
    .desc = "Store IN.npy (float32 or float64, 1-D or 2-D; '-' reads stdin, @OTHER copies the "
            "resident array OTHER) in gpuqd as the resident array NAME: in device memory (host "
            "memory on the CPU backend) until 'gpuqctl rm NAME' or gpuqd stops, whichever "
            "connection stored it. Op commands then take @NAME for an input file, and -o @NAME "
            "keeps a result there instead of writing a file. A NAME is 1 to 128 bytes of "
            "UTF-8 with no '/' or control character. An array of that name that you own is "
            "replaced; one of another owner is the error permission_denied. Your arrays' bytes "
            "are capped by gpuqd's resident_bytes (too_large), all users' by total_resident "
            "(busy).",
    .opts = put_opts,
    .example = "gpuqctl put base Y.npy\n"
               "gpuqctl distance knn --k 3 X.npy @base -o D.npy -i I.npy\n"
               "gpuqctl put --access=all shared Y.npy",
};

static const ctl_optdoc get_opts[] = {
    RES_TIMING_DOC,
    {"--output", "-o", "OUT.npy", NULL,
     "Where to write the array (required); '-' is stdout, @OTHER copies it to the resident "
     "array OTHER."},
    {NULL, NULL, NULL, NULL, NULL},
};

const ctl_entry ctl_get_entry = {
    .name = "get",
    .usage = "[--timing] NAME -o OUT.npy",
    .min_args = 1,
    .max_args = 1,
    .exec = get_exec,
    .help = "Write a resident array to an .npy file.",
    .desc = "Write the resident array NAME (stored by 'gpuqctl put', or kept by an op's -o "
            "@NAME) to OUT.npy, with its dtype and shape: the bytes gpuqd holds, unchanged. An "
            "array of another owner needs access all (or an admin); a name with no array you "
            "may read is the error not_found.",
    .opts = get_opts,
    .example = "gpuqctl get base -o base.npy\n"
               "gpuqctl normalize in.npy -o @unit\n"
               "gpuqctl get unit -o unit.npy",
};

const ctl_entry ctl_ls_entry = {
    .name = "ls",
    .usage = "",
    .min_args = 0,
    .max_args = 0,
    .exec = ls_exec,
    .help = "The resident arrays you may read: name, owner, dtype, shape, size.",
    .desc = "List the resident arrays you may read (an admin: all of them), sorted by name: "
            "NAME, OWNER (the user who stored it), ACCESS (private or all), DTYPE, SHAPE, BYTES, "
            "DEVICE (cpu on the CPU backend) and USERS (requests using it now). With --json, one "
            "JSON array of objects: name, owner (uid), access, dtype (f32, f64 or i64), shape, "
            "bytes, device (-1: cpu), users.",
    .opts = NULL,
    .example = "gpuqctl ls\ngpuqctl --json ls",
};

const ctl_entry ctl_rm_entry = {
    .name = "rm",
    .usage = "NAME",
    .min_args = 1,
    .max_args = 1,
    .exec = rm_exec,
    .help = "Remove a resident array.",
    .desc = "Remove the resident array NAME (yours; an admin may remove any): the name is "
            "gone at once, requests already using the array finish with it, and its memory is "
            "freed when the last one has. With --json, one object: command, ok, name, message.",
    .opts = NULL,
    .example = "gpuqctl rm base\ngpuqctl rm shared",
};
