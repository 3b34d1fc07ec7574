#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpuq-prolog.sh - Slurm Prolog (slurm.conf: Prolog=, run by slurmd as root
# on each node of a job before its tasks): starts one gpuqd for the job on
# this node, on the GPUs Slurm gave it (GRES gpu) and as the job's user, at
# RUNDIR/job-ID/gpuqd.sock (0600, in a 0700 folder of the user).
# gpuq-task-prolog.sh hands that path to the job's tasks as GPUQ_SOCKET and
# gpuq-epilog.sh stops it. A job without GPUs gets no gpuqd. docs/deploy.md
# ("Slurm") says how to install these scripts.
#
# Exit 0: started (or nothing to start). Exit 1 (GPUQ_SLURM_REQUIRED=1): it
# did not answer within GPUQ_SLURM_START_TIMEOUT; Slurm then drains the node
# and requeues the job, and the reason is on stderr and in RUNDIR/job-ID.log.
set -euo pipefail
# shellcheck source=packaging/slurm/gpuq-slurm-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpuq-slurm-common.sh"

job=${SLURM_JOB_ID:?SLURM_JOB_ID is not set: run by slurmd as Prolog}
uid=${SLURM_JOB_UID:?SLURM_JOB_UID is not set}
[[ $job =~ ^[0-9]+$ && $uid =~ ^[0-9]+$ ]] || { gpuq_slurm_log "odd job id or uid"; exit 1; }
# The job's GPUs on this node, as GRES indices (the order of gres.conf or of
# NVML's autodetection: PCI bus order), as CUDA numbers them when
# CUDA_DEVICE_ORDER=PCI_BUS_ID.
gpus=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
if [[ -z $gpus ]]; then
    exit 0
fi
gid=${SLURM_JOB_GID:-$(id -g "$uid")}

fail() {
    gpuq_slurm_log "$*"
    [[ -s $job_log ]] && tail -n 5 "$job_log" | sed 's/^/gpuq-slurm:   /' >&2
    # Our child: its pid is still its own (the exec chain may not have
    # reached gpuqd yet, so no name check).
    if [[ ${pid:-} ]] && gpuq_slurm_alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -rf -- "$job_dir"
    rm -f -- "$job_pid"
    if [[ $GPUQ_SLURM_REQUIRED == 1 ]]; then
        exit 1
    fi
    gpuq_slurm_log "GPUQ_SLURM_REQUIRED=0: the job runs without gpuqd"
    exit 0
}

mkdir -p "$GPUQ_SLURM_RUNDIR"
chmod 0755 "$GPUQ_SLURM_RUNDIR"
# A requeued job may find its old gpuqd (an epilog that did not run).
gpuq_slurm_stop "$job" || true
gpuq_slurm_paths "$job"
mkdir -m 0700 "$job_dir"
chown "$uid:$gid" "$job_dir"

args=(--socket "$job_sock" --socket-mode 0600 --device "$GPUQ_SLURM_DEVICE")
if [[ -n $GPUQ_SLURM_CONF && -r $GPUQ_SLURM_CONF ]]; then
    args=(--config "$GPUQ_SLURM_CONF" "${args[@]}")
fi
run_as=()
if [[ $uid != "$(id -u)" ]]; then
    run_as=(setpriv --reuid="$uid" --regid="$gid" --init-groups)
fi
# A session of its own (slurmd's signals are not its), nothing of slurmd's
# environment, the log in root's folder. setsid and setpriv exec, so $! is
# gpuqd's pid.
: >"$job_log"
chmod 0640 "$job_log"
env -i PATH="$PATH" CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES="$gpus" \
    CUDA_CACHE_PATH="$job_dir/cuda-cache" \
    setsid "${run_as[@]}" "$GPUQ_SLURM_GPUQD" "${args[@]}" </dev/null >>"$job_log" 2>&1 &
pid=$!
echo "$pid" >"$job_pid"

deadline=$((SECONDS + GPUQ_SLURM_START_TIMEOUT))
until "$GPUQ_SLURM_GPUQCTL" --socket "$job_sock" ping >/dev/null 2>&1; do
    gpuq_slurm_alive "$pid" || fail "gpuqd exited before it served (GPUs $gpus)"
    ((SECONDS < deadline)) || fail "gpuqd did not answer within ${GPUQ_SLURM_START_TIMEOUT}s (GPUs $gpus)"
    sleep 0.2
done
exit 0
