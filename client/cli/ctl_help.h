/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_help.h - gpuqctl's help pages, written from the command table
 * (ctl_help.c): the overview, one command's page, a group's page. */
#ifndef GPUQ_CLIENT_CTL_HELP_H
#define GPUQ_CLIENT_CTL_HELP_H

#include <stdio.h>

#include "ctl.h"

/* The i-th command of the table, or NULL past the end. */
typedef const ctl_entry *(*ctl_entry_at)(unsigned i);

/* gpuqctl --help: usage, the global options, every command in one line,
 * the exit statuses and where to read more. */
void ctl_help_overview(FILE *f, ctl_entry_at at);
/* gpuqctl help CMD: usage, what it does, each option with its default, the
 * global options, the exit statuses, examples. */
void ctl_help_command(FILE *f, const ctl_entry *e);
/* gpuqctl help WORD for the first word of two-word commands ("distance"):
 * those commands in one line each. Returns how many there are (0: WORD is
 * no group, nothing printed). */
int ctl_help_group(FILE *f, const char *word, ctl_entry_at at);

#endif
