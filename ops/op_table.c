/* SPDX-License-Identifier: Apache-2.0 */
/* op_table.c - each side's op table, generated from op_list.h.
 *
 * The same file is compiled once per side (CMake defines the macro for the
 * target): GPUQ_OP_PROTO into gpuq_proto (libgpuq, gpuqd), GPUQ_OP_BACKEND
 * into gpuq_ops_backend (gpuqd's backends), GPUQ_OP_CTL into gpuqctl. Each
 * side's table is indexed by gpuq_op; an op's entry is the symbol its file
 * defines for that side.
 */
#ifdef GPUQ_OP_PROTO
#include <string.h>

#include "hdr_util.h"
#include "op_def.h"

#define ENTRY_(e, n) [GPUQ_OP_##e] = &op_def_##n,
static const gpuq_op_def *const op_defs[GPUQ_OP_COUNT] = {GPUQ_OP_LIST(ENTRY_)};
#undef ENTRY_

const gpuq_op_def *op_def_of(gpuq_op op)
{
    return (unsigned)op < GPUQ_OP_COUNT ? op_defs[op] : NULL;
}

int op_key_index(const gpuq_op_def *def, const char *key, size_t len)
{
    for (unsigned k = 0; k < def->nkeys; k++) {
        if (hdr_str_eq(key, len, def->keys[k].name))
            return (int)k;
    }
    return -1;
}

int op_enum_lookup(const gpuq_key_def *kd, const char *s, size_t len)
{
    int idx = hdr_lookup(kd->names, kd->nnames, s, len);
    for (int k = 0; idx < 0 && k < kd->naliases; k++) {
        if (hdr_str_eq(s, len, kd->aliases[k].name))
            idx = kd->aliases[k].index;
    }
    return idx;
}
#endif

#ifdef GPUQ_OP_BACKEND
#include "op_backend.h"

#define ENTRY_(e, n) [GPUQ_OP_##e] = &op_backend_##n,
static const op_backend_def *const op_backends[GPUQ_OP_COUNT] = {GPUQ_OP_LIST(ENTRY_)};
#undef ENTRY_

const op_backend_def *op_backend_of(gpuq_op op)
{
    return (unsigned)op < GPUQ_OP_COUNT ? op_backends[op] : NULL;
}
#endif

#ifdef GPUQ_OP_CTL
#include "op_ctl.h"

#define ENTRY_(e, n) &op_ctl_##n,
static const ctl_entry *const *const op_ctls[] = {GPUQ_OP_LIST(ENTRY_)};
#undef ENTRY_

const ctl_entry *op_ctl_at(unsigned i)
{
    /* ops without a command (hello) have a NULL entry: skipped */
    for (unsigned k = 0; k < sizeof op_ctls / sizeof op_ctls[0]; k++) {
        if (*op_ctls[k] && i-- == 0)
            return *op_ctls[k];
    }
    return NULL;
}
#endif
