# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# gpuq-slurm-common.sh - what gpuq-prolog.sh, gpuq-epilog.sh and
# gpuq-task-prolog.sh share: the settings and the per-job paths. Sourced, not
# run; install it beside them (docs/deploy.md, "Slurm").
#
# Settings come from /etc/default/gpuq-slurm (gpuq-slurm.default is the
# example; GPUQ_SLURM_DEFAULTS names another file, for tests). Slurm runs its
# prologs with a bare environment, so nothing else is read from it but the
# SLURM_* variables.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

GPUQ_SLURM_DEFAULTS=${GPUQ_SLURM_DEFAULTS:-/etc/default/gpuq-slurm}
if [[ -r $GPUQ_SLURM_DEFAULTS ]]; then
    # shellcheck source=packaging/slurm/gpuq-slurm.default
    . "$GPUQ_SLURM_DEFAULTS"
fi
# Where the jobs' sockets live: RUNDIR/job-ID/gpuqd.sock (a folder of the
# job's user, 0700), beside root's RUNDIR/job-ID.pid and RUNDIR/job-ID.log.
GPUQ_SLURM_RUNDIR=${GPUQ_SLURM_RUNDIR:-/run/gpuq-slurm}
GPUQ_SLURM_GPUQD=${GPUQ_SLURM_GPUQD:-/usr/sbin/gpuqd}
GPUQ_SLURM_GPUQCTL=${GPUQ_SLURM_GPUQCTL:-/usr/bin/gpuqctl}
# gpuqd's config file (limits, policy); empty or missing: the defaults. The
# script's --socket, --socket-mode and --device override the file's.
GPUQ_SLURM_CONF=${GPUQ_SLURM_CONF-/etc/gpuq/gpuqd.conf}
# cuda: a job that was given GPUs gets a gpuqd on them or none at all.
GPUQ_SLURM_DEVICE=${GPUQ_SLURM_DEVICE:-cuda}
# Seconds for gpuqd to answer a ping after its start, and to exit after
# SIGTERM (its drain_timeout, 30 by default, plus a margin).
GPUQ_SLURM_START_TIMEOUT=${GPUQ_SLURM_START_TIMEOUT:-30}
GPUQ_SLURM_STOP_TIMEOUT=${GPUQ_SLURM_STOP_TIMEOUT:-40}
# 1: a gpuqd that does not start fails the prolog, so Slurm drains the node
# and requeues the job. 0: the job runs without gpuqd.
GPUQ_SLURM_REQUIRED=${GPUQ_SLURM_REQUIRED:-1}

gpuq_slurm_paths() { # JOBID: sets job_dir, job_sock, job_pid, job_log
    job_dir=$GPUQ_SLURM_RUNDIR/job-$1
    job_sock=$job_dir/gpuqd.sock
    job_pid=$GPUQ_SLURM_RUNDIR/job-$1.pid
    job_log=$GPUQ_SLURM_RUNDIR/job-$1.log
}

gpuq_slurm_log() {
    echo "gpuq-slurm: job ${SLURM_JOB_ID:-?}: $*" >&2
}

# True when PID is a live process (not a zombie).
gpuq_slurm_alive() { # PID
    local state
    kill -0 "$1" 2>/dev/null || return 1
    read -r _ _ state _ <"/proc/$1/stat" 2>/dev/null || return 1
    [[ $state != Z ]]
}

# True when PID is a live gpuqd serving SOCKET (never trust a pid file
# alone: the pid may have been reused).
gpuq_slurm_is_ours() { # PID SOCKET
    local pid=$1 sock=$2 comm cmdline
    [[ $pid =~ ^[0-9]+$ ]] && gpuq_slurm_alive "$pid" || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == gpuqd ]] || return 1
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ " $cmdline " == *" --socket $sock "* ]]
}

# Stop the job's gpuqd (SIGTERM: it drains, then exits; SIGKILL after
# GPUQ_SLURM_STOP_TIMEOUT) and remove its files. Returns 0, or 1 when it had
# to be killed (the log is kept then).
gpuq_slurm_stop() { # JOBID
    local pid="" rc=0 deadline
    gpuq_slurm_paths "$1"
    [[ -r $job_pid ]] && read -r pid <"$job_pid"
    if [[ -n $pid ]] && gpuq_slurm_is_ours "$pid" "$job_sock"; then
        kill -TERM "$pid" 2>/dev/null || true
        deadline=$((SECONDS + GPUQ_SLURM_STOP_TIMEOUT))
        while gpuq_slurm_is_ours "$pid" "$job_sock" && ((SECONDS < deadline)); do
            sleep 0.2
        done
        if gpuq_slurm_is_ours "$pid" "$job_sock"; then
            gpuq_slurm_log "gpuqd $pid still runs ${GPUQ_SLURM_STOP_TIMEOUT}s after SIGTERM: SIGKILL (log: $job_log)"
            kill -KILL "$pid" 2>/dev/null || true
            rc=1
        fi
    fi
    rm -rf -- "$job_dir"
    rm -f -- "$job_pid"
    ((rc == 0)) && rm -f -- "$job_log"
    return "$rc"
}
