/* SPDX-License-Identifier: Apache-2.0 */
/* mpwrite.h - a small msgpack writer over msgpack-c's packer.
 *
 * The daemon builds hello/status "info" values with it without depending on
 * msgpack-c's headers. The writer owns its buffer until gpuq_mpw_take hands it
 * over. An allocation failure is sticky: later calls do nothing and take
 * returns GPUQ_E_NO_MEMORY.
 */
#ifndef GPUQ_PROTO_MPWRITE_H
#define GPUQ_PROTO_MPWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gpuq_mpw gpuq_mpw;

gpuq_mpw *gpuq_mpw_new(void);    /* NULL on allocation failure */
void gpuq_mpw_free(gpuq_mpw *w); /* NULL is fine */
void gpuq_mpw_map(gpuq_mpw *w, uint32_t n);
void gpuq_mpw_array(gpuq_mpw *w, uint32_t n);
/* s is NUL-terminated; bytes that are not UTF-8 are written as \xHH. */
void gpuq_mpw_str(gpuq_mpw *w, const char *s);
void gpuq_mpw_uint(gpuq_mpw *w, uint64_t v);
void gpuq_mpw_int(gpuq_mpw *w, int64_t v);
void gpuq_mpw_double(gpuq_mpw *w, double v);
void gpuq_mpw_bool(gpuq_mpw *w, bool v);
void gpuq_mpw_nil(gpuq_mpw *w);
void gpuq_mpw_raw(gpuq_mpw *w, const void *buf, size_t len); /* pre-encoded value(s) */
/* Hand the bytes over (malloc'd, caller frees) and reset the writer. */
int gpuq_mpw_take(gpuq_mpw *w, uint8_t **out, size_t *len);

#endif
