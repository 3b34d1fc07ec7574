/* SPDX-License-Identifier: Apache-2.0 */
/* hello.h - the hello exchange and its reply's info (see hello.c). */
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

/* The hello of a connection just made: the client name (UTF-8, cut to
 * GPUQ_CLIENT_NAME_MAX on a character boundary), priority and device of o
 * (NULL: the defaults), one blocking call on c, and the reply's info into
 * *si and *arenas. Returns 0 or the code (message set on c): the server's,
 * GPUQ_E_PROTOCOL for a reply without a readable info map,
 * GPUQ_E_VERSION for another protocol version; the caller then treats c as
 * broken. */
int hello_exchange(gpuq_conn *c, const gpuq_connect_opts *o, gpuq_server_info *si, bool *arenas);

#endif
