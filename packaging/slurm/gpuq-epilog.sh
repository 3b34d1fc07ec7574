#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpuq-epilog.sh - Slurm Epilog (slurm.conf: Epilog=, run by slurmd as root
# on each node of a job when it ends): stops the job's gpuqd that
# gpuq-prolog.sh started (SIGTERM: it answers what it accepted, then exits;
# SIGKILL after GPUQ_SLURM_STOP_TIMEOUT) and removes its socket folder, pid
# file and log (the log stays when gpuqd had to be killed).
#
# Always exits 0: a non-zero Epilog makes Slurm set the node DOWN, too much
# for a gpuqd that was slow to stop (that is logged on stderr instead).
set -uo pipefail
# shellcheck source=packaging/slurm/gpuq-slurm-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpuq-slurm-common.sh"

job=${SLURM_JOB_ID:-}
[[ $job =~ ^[0-9]+$ ]] || exit 0
gpuq_slurm_stop "$job" || true
exit 0
