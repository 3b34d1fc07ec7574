#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpuq-task-prolog.sh - Slurm TaskProlog (slurm.conf: TaskProlog=, run by
# slurmstepd as the job's user before each task): points the task at the
# job's gpuqd that gpuq-prolog.sh started on this node. slurmstepd reads
# "export NAME=VALUE" lines from its output into the task's environment.
# Prints nothing for a job without one (no GPUs). If the site has a
# TaskProlog already, call this one from it, or add these lines to it.
set -uo pipefail
# shellcheck source=packaging/slurm/gpuq-slurm-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpuq-slurm-common.sh"

[[ -n ${SLURM_JOB_ID:-} ]] || exit 0
gpuq_slurm_paths "$SLURM_JOB_ID"
if [[ -S $job_sock ]]; then
    echo "export GPUQ_SOCKET=$job_sock"
fi
exit 0
