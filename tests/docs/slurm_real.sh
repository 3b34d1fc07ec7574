#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# slurm_real.sh - packaging/slurm under a real Slurm: a one-node cluster of
# Debian's packages (munged, slurmctld, slurmd), configured in a scratch
# folder, with gpuq's prolog, epilog and task prolog installed as
# docs/deploy.md ("Slurm") says, and real jobs submitted with sbatch, srun
# and scancel, using gpuq through GPUQ_SOCKET (gpuqctl and the Python
# client) on the CPU backend:
#
#   slurm_real.sh SRCDIR GPUQD GPUQCTL PYTHON
#
# Checks:
#  - two jobs of two users (slurmjob1, slurmjob2), one GPU each, run at once:
#    each job's batch script and its srun step get GPUQ_SOCKET (task
#    prolog) naming the job's own folder; each reaches its own gpuqd (ping,
#    a normalize by gpuqctl, one by the Python client, results right); each
#    gpuqd runs as its job's user on its job's GPU (CUDA_VISIBLE_DEVICES,
#    the two different); neither job reaches the other's gpuqd;
#  - when the jobs end, the epilog stopped both gpuqds and left nothing
#    behind: no socket folder, pid file, log, gpuqd process, process of the
#    job's user, or /dev/shm entry;
#  - a job cancelled (scancel) while its request runs in its gpuqd: its
#    gpuqd is gone too, and so are its files.
#
# It adds two users and runs Slurm's daemons, so it runs only as root on a
# disposable machine that says so (GPUQ_CI_DEPLOY_TEST=1, which .ci/run
# sets); it installs slurm-wlm and munge with apt-get when they are missing.
# Anywhere else it exits 77 (ctest: skipped) with the reason. The users are
# removed at the end if this run made them. SLURM_REAL_KEEP=1 keeps the
# scratch folder (its logs) for a look.
set -euo pipefail
src=$(realpath "$1") gpuqd=$(realpath "$2") gpuqctl=$(realpath "$3") py=${4:-python3}

skip() {
    echo "slurm_real: skipped: $*"
    exit 77
}
[[ $(id -u) -eq 0 ]] || skip "needs root (it runs slurmctld and slurmd and adds users)"
[[ ${GPUQ_CI_DEPLOY_TEST:-} == 1 ]] ||
    skip "set GPUQ_CI_DEPLOY_TEST=1 on a disposable machine (it adds users and runs a Slurm cluster)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    echo "slurm_real: installing slurm-wlm and munge"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
        slurm-wlm munge >/dev/null || skip "apt-get install slurm-wlm munge failed"
fi
"$py" -c "import numpy, msgpack" 2>/dev/null || skip "$py cannot import numpy and msgpack"

fails=0
bad() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}
mark=0
# ok MESSAGE: printed when no check failed since the last ok
ok() {
    ((fails > mark)) || echo "ok: $*"
    mark=$fails
}
# The live (not zombie: init reaps those in its own time) processes of USER.
live_of() { # USER
    local p st
    for p in $(pgrep -u "$1" || true); do
        read -r _ _ st _ <"/proc/$p/stat" 2>/dev/null || continue
        [[ $st == Z ]] || echo "$p $(tr '\0' ' ' <"/proc/$p/cmdline")"
    done
}

tmp=$(mktemp -d /tmp/slurm-real.XXXXXX)
chmod 0755 "$tmp"
made_users=()
pids=()
cleanup() {
    local p u
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.5
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "$tmp"/run/*.pid; do
        [[ -r $p ]] && kill -KILL "$(cat "$p")" 2>/dev/null
    done
    for u in "${made_users[@]}"; do
        pkill -KILL -u "$u" 2>/dev/null || true
        userdel "$u" 2>/dev/null || true
    done
    if [[ ${SLURM_REAL_KEEP:-} == 1 ]]; then
        echo "slurm_real: kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
show_logs() {
    local f
    for f in "$tmp"/log/* "$tmp"/run/*.log; do
        [[ -s $f ]] || continue
        echo "---- tail of $f" >&2
        tail -n 20 "$f" >&2
    done
}

# The programs and the Python client where the job users can reach them
# (the checkout and its build may be in a folder only root may enter).
install -d -m 0755 "$tmp/bin" "$tmp/py"
install -m 0755 "$gpuqd" "$gpuqctl" "$tmp/bin/"
cp -r "$src/client/python/gpuq" "$tmp/py/"
chmod -R a+rX "$tmp/py"
gpuqd=$tmp/bin/$(basename "$gpuqd") gpuqctl=$tmp/bin/$(basename "$gpuqctl") pypath=$tmp/py

# ---- the job users --------------------------------------------------------
for u in slurmjob1 slurmjob2; do
    if ! id "$u" >/dev/null 2>&1; then
        useradd --system --no-create-home --home-dir /nonexistent --shell /bin/bash "$u"
        made_users+=("$u")
    fi
done
uid1=$(id -u slurmjob1) uid2=$(id -u slurmjob2)

# ---- gpuq's scripts, installed as docs/deploy.md says ---------------------
# (there: /etc/slurm/gpuq and /etc/default/gpuq-slurm; here in the scratch
# folder, and the settings file named by a site Prolog that calls ours, as
# the doc says a site with its own Prolog does)
etc=$tmp/etc
install -d "$etc/gpuq" "$tmp/run" "$tmp/log" "$tmp/state" "$tmp/spool" "$tmp/dev" "$tmp/munge"
install -m 0755 "$src"/packaging/slurm/gpuq-*.sh "$etc/gpuq/"
install -m 0644 "$src/packaging/slurm/gpuq-slurm.default" "$etc/gpuq-slurm"
cat >>"$etc/gpuq-slurm" <<EOF
# slurm_real.sh: this build's programs, the CPU backend, the scratch folder
GPUQ_SLURM_RUNDIR=$tmp/run
GPUQ_SLURM_GPUQD=$gpuqd
GPUQ_SLURM_GPUQCTL=$gpuqctl
GPUQ_SLURM_CONF=
GPUQ_SLURM_DEVICE=cpu
GPUQ_SLURM_STOP_TIMEOUT=20
EOF
for s in prolog epilog task-prolog; do
    printf '#!/bin/bash\nexport GPUQ_SLURM_DEFAULTS=%s\nexec %s "$@"\n' \
        "$etc/gpuq-slurm" "$etc/gpuq/gpuq-$s.sh" >"$etc/site-$s.sh"
    chmod 0755 "$etc/site-$s.sh"
done

# ---- munge and slurm -----------------------------------------------------
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$tmp/munge/munge.key"
chmod 0755 "$tmp/munge"
munged --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.sock" \
    --log-file="$tmp/log/munged.log" --pid-file="$tmp/munge/munged.pid" \
    --seed-file="$tmp/munge/munged.seed" || { show_logs; bad "munged did not start"; exit 1; }
pids+=("$(cat "$tmp/munge/munged.pid")")

host=$(hostname -s)
# Two fake GPUs: gres/gpu's File= wants device files; nothing opens them.
for g in 0 1; do mknod "$tmp/dev/fakegpu$g" c 1 3; done
port=$((20000 + RANDOM % 20000))
export SLURM_CONF=$etc/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=gpuqtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
GresTypes=gpu
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=300
Prolog=$etc/site-prolog.sh
Epilog=$etc/site-epilog.sh
TaskProlog=$etc/site-task-prolog.sh
PrologFlags=Alloc
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
echo "NodeName=$host Name=gpu File=$tmp/dev/fakegpu[0-1]" >"$etc/gres.conf"
chmod 0644 "$SLURM_CONF" "$etc/gres.conf"
# docs/deploy.md quotes these lines ("Tested under a real Slurm"): each of
# its slurm.conf lines must be one of ours ("..." standing for a path, NODE
# for the node).
"$py" - "$src/docs/deploy.md" "$SLURM_CONF" "$host" <<'EOF' || bad "docs/deploy.md's slurm.conf lines are not this test's"
import re, sys
doc, conf, host = open(sys.argv[1]).read(), open(sys.argv[2]).read().splitlines(), sys.argv[3]
part = doc.split("### Tested under a real Slurm", 1)[1]
block = re.search(r"```\n(AuthType=.*?)```", part, re.S).group(1).splitlines()
for line in block:
    pat = re.escape(line.strip()).replace(r"\.\.\.", ".*").replace("NODE", re.escape(host))
    if not any(re.fullmatch(pat, c) for c in conf):
        sys.exit(f"deploy.md's {line!r} is not in the test's slurm.conf")
EOF

setsid slurmctld -D -i >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
setsid slurmd -D >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    state=$(sinfo -h -N -o '%t' 2>/dev/null || true)
    [[ $state == idle ]] && break
    sleep 0.2
done
if [[ ${state:-} != idle ]]; then
    show_logs
    bad "the node is not idle after 30 s (sinfo: ${state:-nothing})"
    exit 1
fi
ok "one-node cluster up (slurmctld, slurmd, munged on $host)"

# ---- the jobs ------------------------------------------------------------
out=$tmp/out
install -d -m 1777 "$out"
"$py" -c "import numpy as np; np.save('$out/x.npy', np.arange(1, 9, dtype=np.float64).reshape(2, 4))"
chmod 0644 "$out/x.npy"
# One job's script (JOB/...: what it saw and did; it waits for the test
# between steps). GPUQ_SOCKET comes from the task prolog alone.
cat >"$out/job.sh" <<EOF
#!/bin/bash
set -u
o=$out/\$SLURM_JOB_ID
mkdir -p \$o
echo "\${GPUQ_SOCKET:-}" >\$o/socket
echo "\${CUDA_VISIBLE_DEVICES:-}" >\$o/gpus
$gpuqctl ping >\$o/ping 2>&1; echo \$? >\$o/ping.rc
$gpuqctl normalize --method sum $out/x.npy -o \$o/y.npy >\$o/norm 2>&1; echo \$? >\$o/norm.rc
PYTHONPATH=$pypath PYTHONDONTWRITEBYTECODE=1 $py -c '
import numpy as np, gpuq
with gpuq.connect() as c:
    x = np.arange(1, 9, dtype=np.float64).reshape(2, 4)
    np.save("'\$o'/py.npy", c.normalize(x, "l2"))
' >\$o/py 2>&1; echo \$? >\$o/py.rc
srun --overlap -n1 bash -c 'echo "\$GPUQ_SOCKET"; $gpuqctl ping' >\$o/step 2>&1; echo \$? >\$o/step.rc
touch \$o/ready
while [ ! -e \$o/other ]; do sleep 0.1; done
$gpuqctl --socket "\$(cat \$o/other)" ping >\$o/cross 2>&1; echo \$? >\$o/cross.rc
touch \$o/crossed
while [ ! -e \$o/done ]; do sleep 0.1; done
EOF
chmod 0755 "$out/job.sh"
shm_before=$(find /dev/shm -mindepth 1 -maxdepth 1 | sort)

submit() { # USER ARGS...: the job id
    local u=$1
    shift
    setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
        sbatch --parsable --chdir="$out" --output="$out/%j.out" -n1 "$@"
}
wait_for() { # FILE SECONDS
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        [[ -e $1 ]] && return 0
        sleep 0.1
    done
    return 1
}
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
wait_ended() { # JOBID SECONDS: the job ended and its epilog ran (not completing)
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        case $(job_state "$1") in
        COMPLETED | CANCELLED | FAILED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED)
            if [[ $(squeue -h -j "$1" -t all -o %T 2>/dev/null) != COMPLETING &&
                $(sinfo -h -N -o '%t') != comp* ]]; then
                return 0
            fi
            ;;
        esac
        sleep 0.1
    done
    return 1
}
# The job's gpuqd: nothing of it may be left once it ended.
check_gone() { # JOBID WHAT
    local j=$1 p
    [[ ! -e $tmp/run/job-$j ]] || bad "$2: job $j's socket folder is left: $(ls -la "$tmp/run/job-$j")"
    [[ ! -e $tmp/run/job-$j.pid ]] || bad "$2: job $j's pid file is left"
    [[ ! -e $tmp/run/job-$j.log ]] || bad "$2: job $j's log is left: $(cat "$tmp/run/job-$j.log")"
    for p in $(pgrep -x gpuqd || true); do
        if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$tmp/run/job-$j/"; then
            bad "$2: job $j's gpuqd (pid $p) still runs"
        fi
    done
}

ja=$(submit slurmjob1 --gres=gpu:1 "$out/job.sh")
jb=$(submit slurmjob2 --gres=gpu:1 "$out/job.sh")
if ! wait_for "$out/$ja/ready" 60 || ! wait_for "$out/$jb/ready" 60; then
    squeue >&2 || true
    show_logs
    bad "jobs $ja and $jb did not both get to their first steps"
    exit 1
fi
[[ $(job_state "$ja") == RUNNING && $(job_state "$jb") == RUNNING ]] ||
    bad "jobs $ja and $jb do not run at once ($(job_state "$ja"), $(job_state "$jb"))"
declare -A uid_of=([$ja]=$uid1 [$jb]=$uid2)
gpus_seen=()
for j in "$ja" "$jb"; do
    o=$out/$j sock=$tmp/run/job-$j/gpuqd.sock
    [[ $(cat "$o/socket") == "$sock" ]] || bad "job $j: GPUQ_SOCKET is '$(cat "$o/socket")', not $sock"
    for f in ping norm py step; do
        [[ $(cat "$o/$f.rc") == 0 ]] || bad "job $j: $f failed: $(cat "$o/$f")"
    done
    grep -qx "$sock" "$o/step" || bad "job $j: its srun step's GPUQ_SOCKET is not $sock: $(cat "$o/step")"
    "$py" - "$o" <<'EOF' || bad "job $j: wrong results"
import sys, numpy as np
o = sys.argv[1]
x = np.arange(1, 9, dtype=np.float64).reshape(2, 4)
y, p = np.load(o + "/y.npy"), np.load(o + "/py.npy")
ref_sum = x / x.sum(axis=1, keepdims=True)
ref_l2 = x / np.sqrt((x * x).sum(axis=1, keepdims=True))
assert np.allclose(y, ref_sum, rtol=1e-12), (y, ref_sum)
assert np.allclose(p, ref_l2, rtol=1e-12), (p, ref_l2)
EOF
    pid=$(cat "$tmp/run/job-$j.pid" 2>/dev/null || true)
    if [[ -z $pid || $(cat "/proc/$pid/comm" 2>/dev/null) != gpuqd ]]; then
        bad "job $j: no gpuqd behind its pid file"
        continue
    fi
    ruid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
    [[ $ruid == "${uid_of[$j]}" ]] || bad "job $j: its gpuqd runs as uid $ruid, not the job's ${uid_of[$j]}"
    cvd=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^CUDA_VISIBLE_DEVICES=//p')
    [[ $cvd == "$(cat "$o/gpus")" && $cvd =~ ^[01]$ ]] ||
        bad "job $j: its gpuqd has CUDA_VISIBLE_DEVICES='$cvd', the job '$(cat "$o/gpus")'"
    gpus_seen+=("$cvd")
done
[[ ${#gpus_seen[@]} -eq 2 && ${gpus_seen[0]} != "${gpus_seen[1]}" ]] ||
    bad "the two jobs' gpuqds do not have one GPU each: ${gpus_seen[*]}"
ok "jobs $ja (slurmjob1) and $jb (slurmjob2) run at once, each with its own gpuqd on its GPU"

echo "$tmp/run/job-$jb/gpuqd.sock" >"$out/$ja/other"
echo "$tmp/run/job-$ja/gpuqd.sock" >"$out/$jb/other"
if ! wait_for "$out/$ja/crossed" 30 || ! wait_for "$out/$jb/crossed" 30; then
    bad "the jobs did not try each other's gpuqd"
fi
for j in "$ja" "$jb"; do
    if [[ $(cat "$out/$j/cross.rc" 2>/dev/null) == 0 ]]; then
        bad "job $j reached the other job's gpuqd: $(cat "$out/$j/cross")"
    elif ! grep -qi "permission denied" "$out/$j/cross" 2>/dev/null; then
        bad "job $j was kept from the other job's gpuqd, but not by its permissions: $(cat "$out/$j/cross" 2>/dev/null)"
    fi
done
ok "neither job reaches the other's gpuqd ($(head -c 120 "$out/$ja/cross" | tr '\n' ' '))"

touch "$out/$ja/done" "$out/$jb/done"
if ! wait_ended "$ja" 60 || ! wait_ended "$jb" 60; then
    bad "jobs $ja, $jb did not end"
fi
for j in "$ja" "$jb"; do
    st=$(job_state "$j")
    [[ $st == COMPLETED ]] || bad "job $j ended $st: $(cat "$out/$j.out" 2>/dev/null)"
    check_gone "$j" "after its end"
done
for u in slurmjob1 slurmjob2; do
    left=$(live_of "$u")
    [[ -z $left ]] || bad "processes of $u are left: $left"
done
ok "the epilog stopped both gpuqds and left nothing behind"

# ---- a job cancelled mid-request -------------------------------------------
cat >"$out/long.sh" <<EOF
#!/bin/bash
o=$out/\$SLURM_JOB_ID
mkdir -p \$o
touch \$o/started
PYTHONPATH=$pypath PYTHONDONTWRITEBYTECODE=1 exec $py -c '
import numpy as np, gpuq
x = np.random.default_rng(1).random((4096, 256), dtype=np.float32)
with gpuq.connect() as c:
    c.pairwise(x, x)  # some seconds on the CPU backend: cancelled before it ends
' >\$o/py 2>&1
EOF
chmod 0755 "$out/long.sh"
jc=$(submit slurmjob1 --gres=gpu:1 "$out/long.sh")
wait_for "$out/$jc/started" 60 || bad "job $jc did not start"
busy=0
for _ in $(seq 300); do
    if [[ -S $tmp/run/job-$jc/gpuqd.sock ]] &&
        "$gpuqctl" --socket "$tmp/run/job-$jc/gpuqd.sock" --json status 2>/dev/null |
        "$py" -c 'import json, sys; sys.exit(0 if json.load(sys.stdin)["in_flight"] > 0 else 1)'; then
        busy=1
        break
    fi
    sleep 0.1
done
((busy)) || bad "job $jc's gpuqd never had its request in flight"
scancel "$jc"
wait_ended "$jc" 90 || bad "job $jc did not end after scancel"
st=$(job_state "$jc")
[[ $st == CANCELLED ]] || bad "job $jc ended $st, not CANCELLED"
check_gone "$jc" "after scancel"
left=$(live_of slurmjob1)
[[ -z $left ]] || bad "processes of slurmjob1 are left: $left"
ok "job $jc, cancelled while its request ran: its gpuqd and files are gone"

shm_after=$(find /dev/shm -mindepth 1 -maxdepth 1 | sort)
[[ $shm_before == "$shm_after" ]] || bad "/dev/shm changed: $(diff <(echo "$shm_before") <(echo "$shm_after") || true)"

if ((fails)); then
    show_logs
    echo "slurm_real: $fails check(s) failed"
    exit 1
fi
echo "slurm_real: all checks passed"
