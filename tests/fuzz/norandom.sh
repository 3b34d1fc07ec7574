#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# norandom.sh CMD ARGS... - run CMD with address-space layout randomization
# off where the system lets a process ask for that (setarch -R; a container
# may forbid it, then CMD runs as it is). libFuzzer records the operands of
# the target's comparisons, addresses among them, so with ASLR on the same
# -seed takes other paths from run to run; with it off a fuzz test's run is
# repeatable.
if setarch "$(uname -m)" -R true 2>/dev/null; then
    exec setarch "$(uname -m)" -R "$@"
fi
exec "$@"
