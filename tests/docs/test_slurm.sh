#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_slurm.sh - packaging/slurm's prolog, task prolog and epilog, run as
# slurmd and slurmstepd would run them (a bare environment with the SLURM_*
# variables of a job), with the build's gpuqd on the CPU backend:
#
#   test_slurm.sh SRCDIR GPUQD GPUQCTL
#
# Checks: shellcheck (where installed); a job with GPUs 1,3 gets a gpuqd that
# runs as the job's user with CUDA_VISIBLE_DEVICES=1,3 (PCI bus order) on a
# 0600 socket in a 0700 folder of that user; the task prolog exports that
# socket as GPUQ_SOCKET and the job's user reaches gpuqd through it (another
# user does not); a job without GPUs gets none; the epilog stops gpuqd and
# leaves nothing behind, and kills nothing that is not the job's gpuqd (a pid
# file pointing elsewhere); a gpuqd that fails to start fails the prolog
# (GPUQ_SLURM_REQUIRED=1) or not (0), with nothing left behind either way.
# As root the job runs as user nobody (setpriv); otherwise as the caller.
set -euo pipefail
src=$1 gpuqd=$(realpath "$2") gpuqctl=$(realpath "$3")
fails=0
bad() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

if command -v shellcheck >/dev/null; then
    (cd "$src" && shellcheck -x packaging/slurm/*.sh tests/docs/test_slurm.sh) || bad "shellcheck"
else
    echo "test_slurm: shellcheck is not installed: not run"
fi

tmp=$(mktemp -d /tmp/gpuq-slurm-test.XXXXXX)
chmod 0755 "$tmp"
cleanup() {
    local p
    for p in "$tmp"/run/*.pid; do
        [[ -r $p ]] && kill -KILL "$(cat "$p")" 2>/dev/null
    done
    [[ -n ${decoy:-} ]] && kill -KILL "$decoy" 2>/dev/null
    [[ -n ${decoy2:-} ]] && kill -KILL "$decoy2" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# The scripts as a site installs them: together, in a folder of their own.
mkdir "$tmp/slurm"
cp "$src"/packaging/slurm/*.sh "$tmp/slurm/"
chmod 0755 "$tmp/slurm" "$tmp/slurm"/*.sh

# The job's user: nobody when root can hand gpuqd to it, else the caller.
juid=$(id -u)
as_job=()
if [[ $juid == 0 ]] && setpriv --reuid=65534 --regid=65534 --clear-groups "$gpuqd" --version >/dev/null 2>&1; then
    juid=65534
    as_job=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

write_defaults() { # GPUQD REQUIRED
    cat >"$tmp/defaults" <<EOF
GPUQ_SLURM_RUNDIR=$tmp/run
GPUQ_SLURM_GPUQD=$1
GPUQ_SLURM_GPUQCTL=$gpuqctl
GPUQ_SLURM_CONF=
GPUQ_SLURM_DEVICE=cpu
GPUQ_SLURM_START_TIMEOUT=20
GPUQ_SLURM_STOP_TIMEOUT=20
GPUQ_SLURM_REQUIRED=$2
EOF
    chmod 0644 "$tmp/defaults"
}
slurmd() { # SCRIPT VAR=VALUE...: run as slurmd does (root's, bare env)
    local script=$1
    shift
    timeout 60 env -i GPUQ_SLURM_DEFAULTS="$tmp/defaults" SLURM_JOB_UID="$juid" \
        SLURM_JOB_USER="$(id -un "$juid")" "$@" "$tmp/slurm/$script"
}
stepd() { # VAR=VALUE... CMD...: as the job's user, in the job's env
    timeout 60 "${as_job[@]}" env -i GPUQ_SLURM_DEFAULTS="$tmp/defaults" PATH=/usr/bin:/bin "$@"
}

write_defaults "$gpuqd" 1
sock=$tmp/run/job-4242/gpuqd.sock

# --- a job with GPUs 1 and 3 on this node
slurmd gpuq-prolog.sh SLURM_JOB_ID=4242 SLURM_JOB_GPUS=1,3 || bad "prolog of job 4242 exited $?"
pid=$(cat "$tmp/run/job-4242.pid" 2>/dev/null || true)
if [[ -z $pid || ! -d /proc/$pid ]]; then
    bad "no gpuqd for job 4242"
    cat "$tmp/run/job-4242.log" >&2 || true
else
    [[ $(cat "/proc/$pid/comm") == gpuqd ]] || bad "pid $pid is not gpuqd"
    uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
    [[ $uid == "$juid" ]] || bad "gpuqd runs as uid $uid, not the job's $juid"
    environ=$(tr '\0' '\n' <"/proc/$pid/environ")
    grep -qx 'CUDA_VISIBLE_DEVICES=1,3' <<<"$environ" || bad "gpuqd's CUDA_VISIBLE_DEVICES: $environ"
    grep -qx 'CUDA_DEVICE_ORDER=PCI_BUS_ID' <<<"$environ" || bad "no CUDA_DEVICE_ORDER=PCI_BUS_ID"
    grep -q '^SLURM_' <<<"$environ" && bad "slurmd's environment leaked into gpuqd"
fi
[[ $(stat -c '%a %u' "$tmp/run/job-4242" 2>/dev/null) == "700 $juid" ]] ||
    bad "socket folder: $(stat -c '%a %u' "$tmp/run/job-4242" 2>&1)"
[[ $(stat -c '%a %u' "$sock" 2>/dev/null) == "600 $juid" ]] ||
    bad "socket: $(stat -c '%a %u' "$sock" 2>&1)"

out=$(stepd SLURM_JOB_ID=4242 "$tmp/slurm/gpuq-task-prolog.sh") || bad "task prolog exited $?"
[[ $out == "export GPUQ_SOCKET=$sock" ]] || bad "task prolog printed '$out'"
stepd GPUQ_SOCKET="$sock" "$gpuqctl" ping >/dev/null || bad "the job's user cannot ping its gpuqd"
if [[ ${#as_job[@]} -gt 0 ]]; then
    setpriv --reuid=1 --regid=1 --clear-groups env -i GPUQ_SOCKET="$sock" "$gpuqctl" ping >/dev/null 2>&1 &&
        bad "another user reached the job's gpuqd"
fi

# --- a job without GPUs: no gpuqd, no GPUQ_SOCKET
slurmd gpuq-prolog.sh SLURM_JOB_ID=4243 || bad "prolog of job 4243 (no GPUs) exited $?"
[[ -e $tmp/run/job-4243 || -e $tmp/run/job-4243.pid ]] && bad "a gpuqd for a job without GPUs"
out=$(stepd SLURM_JOB_ID=4243 "$tmp/slurm/gpuq-task-prolog.sh") || bad "task prolog (4243) exited $?"
[[ -z $out ]] || bad "task prolog of a job without GPUs printed '$out'"
slurmd gpuq-epilog.sh SLURM_JOB_ID=4243 || bad "epilog of job 4243 exited $?"

# --- the epilog kills only the job's gpuqd, whatever its pid file says: not
# another program whose arguments name the job's socket, not the gpuqd of
# another socket
python3 -c 'import time; time.sleep(300)' --socket "$tmp/run/job-4244/gpuqd.sock" &
decoy=$!
"$gpuqd" --device cpu --socket "$tmp/other.sock" >/dev/null 2>&1 &
decoy2=$!
disown "$decoy" "$decoy2"
echo "$decoy" >"$tmp/run/job-4244.pid"
echo "$decoy2" >"$tmp/run/job-4247.pid"
slurmd gpuq-epilog.sh SLURM_JOB_ID=4244 || bad "epilog of job 4244 exited $?"
slurmd gpuq-epilog.sh SLURM_JOB_ID=4247 || bad "epilog of job 4247 exited $?"
kill -0 "$decoy" 2>/dev/null || bad "the epilog killed a program that is not gpuqd"
kill -0 "$decoy2" 2>/dev/null || bad "the epilog killed the gpuqd of another socket"
[[ -e $tmp/run/job-4244.pid || -e $tmp/run/job-4247.pid ]] && bad "a pid file is left"

# --- the end of job 4242
slurmd gpuq-epilog.sh SLURM_JOB_ID=4242 || bad "epilog of job 4242 exited $?"
# (A zombie does not count: gpuqd's parent, the prolog, is gone, and who
# reaps it depends on where the test runs.)
[[ -n $pid ]] && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) =~ ^[RSD]$ ]] &&
    bad "gpuqd $pid still runs after the epilog"
left=$(ls -A "$tmp/run")
[[ -z $left ]] || bad "left in the run folder after the epilogs: $left"

# --- a gpuqd that cannot start (what --device cuda does without a GPU)
cat >"$tmp/fake-gpuqd" <<'EOF'
#!/bin/sh
echo "gpuqd: --device cuda: no usable GPU (fake gpuqd)" >&2
exit 2
EOF
chmod 0755 "$tmp/fake-gpuqd"
write_defaults "$tmp/fake-gpuqd" 1
err=$(slurmd gpuq-prolog.sh SLURM_JOB_ID=4245 SLURM_JOB_GPUS=0 2>&1) && bad "prolog succeeded with a gpuqd that exits 2"
grep -q "exited before it served" <<<"$err" || bad "prolog's message: $err"
grep -q "no usable GPU (fake gpuqd)" <<<"$err" || bad "prolog does not show gpuqd's log: $err"
[[ -e $tmp/run/job-4245 || -e $tmp/run/job-4245.pid ]] && bad "a failed start left files"
write_defaults "$tmp/fake-gpuqd" 0
slurmd gpuq-prolog.sh SLURM_JOB_ID=4246 SLURM_JOB_GPUS=0 2>/dev/null ||
    bad "GPUQ_SLURM_REQUIRED=0: the prolog failed"
[[ -e $tmp/run/job-4246 || -e $tmp/run/job-4246.pid ]] && bad "a failed start (REQUIRED=0) left files"

if ((fails)); then
    echo "test_slurm: $fails check(s) failed" >&2
    exit 1
fi
echo "test_slurm: ok (job user uid $juid)"
