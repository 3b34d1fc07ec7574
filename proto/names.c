/* SPDX-License-Identifier: Apache-2.0 */
/* names.c - names on the wire: ops (from the op table), dtypes, priority
 * levels. Method and metric names live with their ops (ops/normalize.c,
 * ops/pairwise.c), in the key tables the decoder reads.
 */
#include <string.h>

#include "errors.h"
#include "hdr_util.h"
#include "header.h"
#include "op_def.h"

const char *gpuq_op_name(gpuq_op op)
{
    const gpuq_op_def *d = op_def_of(op);
    return d ? d->name : NULL;
}

bool gpuq_op_is_compute(gpuq_op op)
{
    const gpuq_op_def *d = op_def_of(op);
    return d && (d->flags & GPUQ_OPF_COMPUTE);
}

bool gpuq_op_is_admin(gpuq_op op)
{
    const gpuq_op_def *d = op_def_of(op);
    return d && (d->flags & GPUQ_OPF_ADMIN);
}

int gpuq_op_parse(const char *s, size_t len)
{
    for (int op = 1; op < GPUQ_OP_COUNT; op++) {
        const gpuq_op_def *d = op_def_of((gpuq_op)op);
        if (d && hdr_str_eq(s, len, d->name))
            return op;
    }
    return -1;
}

static const char *const dtype_names[] = {
    [GPUQ_DT_NONE] = NULL, [GPUQ_DT_F32] = "f32", [GPUQ_DT_F64] = "f64", [GPUQ_DT_I64] = "i64"};
static const size_t dtype_sizes[] = {
    [GPUQ_DT_NONE] = 0, [GPUQ_DT_F32] = 4, [GPUQ_DT_F64] = 8, [GPUQ_DT_I64] = 8};
#define NDTYPES (int)(sizeof dtype_names / sizeof dtype_names[0])

const char *gpuq_dtype_name(gpuq_dtype dt)
{
    return (unsigned)dt < (unsigned)NDTYPES ? dtype_names[dt] : NULL;
}

size_t gpuq_dtype_size(gpuq_dtype dt)
{
    return (unsigned)dt < (unsigned)NDTYPES ? dtype_sizes[dt] : 0;
}

int gpuq_dtype_parse(const char *s, size_t len)
{
    return hdr_lookup(dtype_names, NDTYPES, s, len);
}

static const char *const prio_names[] = {"low", "normal", "high"}; /* from GPUQ_PRIO_LOW */

const char *gpuq_prio_name(int prio)
{
    return prio >= GPUQ_PRIO_LOW && prio <= GPUQ_PRIO_HIGH ? prio_names[prio - GPUQ_PRIO_LOW]
                                                           : NULL;
}

int gpuq_prio_from_name(const char *s, size_t len, int *prio)
{
    int k = hdr_lookup(prio_names, GPUQ_PRIO_HIGH - GPUQ_PRIO_LOW + 1, s, len);
    if (k < 0)
        return GPUQ_E_BAD_ARGUMENT;
    *prio = GPUQ_PRIO_LOW + k;
    return 0;
}

int gpuq_prio_parse(const char *s, int *prio)
{
    static const char *const ints[] = {"-1", "0", "1"}; /* from GPUQ_PRIO_LOW */
    if (!s)
        return GPUQ_E_BAD_ARGUMENT;
    size_t len = strlen(s);
    if (gpuq_prio_from_name(s, len, prio) == 0)
        return 0;
    int k = hdr_lookup(ints, 3, s, len);
    if (k < 0)
        return GPUQ_E_BAD_ARGUMENT;
    *prio = GPUQ_PRIO_LOW + k;
    return 0;
}
