/* SPDX-License-Identifier: Apache-2.0 */
/* config_file.h - reading gpuqd's INI config file into a config (libinih).
 *
 * Happy path: config_file_read(c, path) applies each [server], [limits] and
 * [policy] key over what c holds, and appends a policy rule for each
 * [user NAME] / [group NAME] section (the name resolved to an id now).
 *
 * Failure: the first error stops the read; c->error gets
 * "PATH:LINE: what" (or "cannot open PATH: reason") and c may hold the keys
 * read before it, so the caller throws c away.
 */
#ifndef GPUQ_SERVER_CONFIG_FILE_H
#define GPUQ_SERVER_CONFIG_FILE_H

#include "config.h"

/* Returns 0 or -1 (c->error). path is borrowed. */
int config_file_read(config *c, const char *path);

#endif
