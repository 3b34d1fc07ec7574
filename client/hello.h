/* hello.h - reading the hello reply's info (see hello.c). */
#ifndef GPUQ_CLIENT_HELLO_H
#define GPUQ_CLIENT_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuq_internal.h"

/* Fill *si from the info map buf[0..len) (fields the map lacks keep their
 * values) and *arenas from its "arenas" (left alone when absent: a gpuqd
 * without arenas). Returns 0 or GPUQ_E_BAD_HEADER. */
int hello_info_parse(const uint8_t *buf, size_t len, gpuq_server_info *si, bool *arenas);

#endif
