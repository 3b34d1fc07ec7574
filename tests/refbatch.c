/* SPDX-License-Identifier: Apache-2.0 */
/* refbatch.c - see refbatch.h. Jobs are lines of tab-separated arguments in
 * <dir>/jobs; job k reads <dir>/k.in0, <dir>/k.in1 and writes <dir>/k.out. */
#include "refbatch.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct rb_job {
    char out[320];
    size_t n;    /* values it writes */
    double *val; /* after rb_run */
} rb_job;

struct rb_batch {
    char dir[256];
    FILE *jobs; /* open while jobs are being queued */
    rb_job *job;
    int count, cap;
};

static void rb_open_jobs(rb_batch *b)
{
    char p[320];
    snprintf(p, sizeof p, "%s/jobs", b->dir);
    b->jobs = fopen(p, "w");
    ck_assert_msg(b->jobs != NULL, "%s: cannot create", p);
}

rb_batch *rb_new(void)
{
    rb_batch *b = calloc(1, sizeof *b);
    ck_assert_ptr_nonnull(b);
    tu_tmpdir(b->dir, sizeof b->dir);
    rb_open_jobs(b);
    return b;
}

int rb_add(rb_batch *b, const char *const *args, const double *in0, size_t n0, const double *in1,
           size_t n1, size_t nout)
{
    if (b->count == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->job = realloc(b->job, (size_t)b->cap * sizeof *b->job);
        ck_assert_ptr_nonnull(b->job);
    }
    int k = b->count++;
    rb_job *j = &b->job[k];
    char p[2][320];
    const double *in[2] = {in0, in1};
    size_t nin[2] = {n0, n1};
    for (int f = 0; f < 2; f++) {
        snprintf(p[f], sizeof p[f], "%s/%d.in%d", b->dir, k, f);
        if (in[f])
            ck_assert_int_eq(tu_write_file(p[f], in[f], nin[f] * sizeof(double)), 0);
    }
    for (size_t i = 0; args[i]; i++) {
        const char *a = strcmp(args[i], "@0") == 0   ? p[0]
                        : strcmp(args[i], "@1") == 0 ? p[1]
                                                     : args[i];
        fprintf(b->jobs, "%s\t", a);
    }
    snprintf(j->out, sizeof j->out, "%s/%d.out", b->dir, k);
    fprintf(b->jobs, "%s\n", j->out);
    j->n = nout;
    j->val = NULL;
    return k;
}

void rb_run(rb_batch *b)
{
    char p[320];
    snprintf(p, sizeof p, "%s/jobs", b->dir);
    ck_assert_int_eq(fclose(b->jobs), 0);
    b->jobs = NULL;
    const char *argv[] = {"batch", p, NULL};
    int rc = tu_python("ref/ref_ops.py", argv);
    ck_assert_msg(rc == 0, "ref_ops.py batch %s exited %d (GPUQ_TEST_PY_STDERR=file keeps why)", p,
                  rc);
    for (int k = 0; k < b->count; k++) {
        rb_job *j = &b->job[k];
        if (j->val)
            continue;
        size_t len = 0;
        j->val = tu_read_file(j->out, &len);
        ck_assert_msg(j->val && len == j->n * sizeof(double), "%s: %zu bytes, want %zu", j->out,
                      len, j->n * sizeof(double));
    }
    rb_open_jobs(b);
}

const double *rb_get(const rb_batch *b, int job)
{
    ck_assert_msg(job >= 0 && job < b->count && b->job[job].val, "reference %d has not run", job);
    return b->job[job].val;
}

void rb_free(rb_batch *b)
{
    if (!b)
        return;
    if (b->jobs)
        fclose(b->jobs);
    for (int k = 0; k < b->count; k++)
        free(b->job[k].val);
    free(b->job);
    tu_rmtree(b->dir);
    free(b);
}
