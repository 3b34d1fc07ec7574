#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shellcheck disable=SC2317 # functions run through check and wait_for
# tests/pkg/boot_checks.sh - the checks of tests/pkg/boot_test.sh, run INSIDE
# the booted container (systemd as PID 1) by the oneshot unit
# boot-test-checks.service, with the gpuq .deb installed before boot. Not for
# running anywhere else: it adds users, edits /etc/gpuq/gpuqd.conf, kills
# gpuqd and purges the package.
#
# Writes one line per check to $RESULTS ("ok: ..." or "FAIL: ..."), the
# journal of the gpuq units to $JOURNAL, and last "DONE rc=N" (N: the number
# of failed checks). It always exits 0, so that the unit's SuccessAction=
# powers the container off; a hang is cut by the unit's TimeoutStartSec=
# (FailureAction= powers off too) and by the host's timeout. The host reads
# $RESULTS: no DONE line is a failure.
#
# What a minimal Debian 12 has, and no more: bash, coreutils, grep, sed,
# mawk, findutils, util-linux (runuser), passwd (useradd), apt, systemd,
# and the package's Recommends (python3, python3-numpy, python3-msgpack:
# the Python client). No procps (no ps, no /bin/kill: bash's kill builtin is
# used).
set -uo pipefail
DIR=/boot-test
RESULTS=$DIR/results.txt
JOURNAL=$DIR/journal.txt
# shellcheck source=/dev/null
[[ -f $DIR/env ]] && . "$DIR/env"
MAX_EXPOSURE=${MAX_EXPOSURE:-2.5}
MEMBER=bt-member     # in group gpuq
OUTSIDER=bt-outsider # not in group gpuq
SOCK=/run/gpuq/gpuqd.sock
CONF=/etc/gpuq/gpuqd.conf
PYPKG=/usr/lib/python3/dist-packages/gpuq
unset GPUQ_SOCKET XDG_RUNTIME_DIR # gpuqctl's default socket: $SOCK
export LC_ALL=C
: >"$RESULTS"
fails=0
T0=$SECONDS

say() { echo "$*" | tee -a "$RESULTS"; }
ok() { say "ok: $*"; }
bad() {
    say "FAIL: $*"
    fails=$((fails + 1))
}
# check WHAT CMD...: ok or FAIL.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
# want WHAT GOT EXPECTED: ok when equal, else FAIL with both.
want() {
    if [[ "$2" == "$3" ]]; then ok "$1: $2"; else bad "$1: '$2', want '$3'"; fi
}
prop() { systemctl show -P "$2" "$1" 2>/dev/null; }
# wait_for SECONDS CMD...: poll CMD every 0.2 s; 0 once it succeeds.
wait_for() {
    local end=$((SECONDS + $1))
    shift
    while ! "$@"; do
        [[ $SECONDS -lt $end ]] || return 1
        sleep 0.2
    done
}
as() { # as USER CMD...: run as USER, at most 60 s
    local u=$1
    shift
    timeout 60 runuser -u "$u" -- "$@"
}
ctl() { timeout 60 gpuqctl "$@"; }
is_state() { [[ "$(prop gpuqd.service ActiveState)" == "$1" ]]; }
# The effective uid of a pid, from /proc (no ps here).
uid_of() { awk '/^Uid:/ { print $3 }' "/proc/$1/status" 2>/dev/null; }
# total_staging in force, as gpuqd's metrics report it.
staging_limit() { ctl metrics 2>/dev/null | awk '$1 == "gpuq_pinned_bytes_limit" { print $2 }'; }
limit_is() { [[ "$(staging_limit)" == "$1" ]]; }
# Processes named gpuqd (from /proc: no pgrep here).
gpuqd_pids() {
    local f
    for f in /proc/[0-9]*/comm; do
        [[ "$(cat "$f" 2>/dev/null)" == gpuqd ]] && basename "$(dirname "$f")"
    done
}
# The Python client's bytecode, as postinst's py3compile makes it.
compiled() { compgen -G "$PYPKG/__pycache__/client.cpython-*.pyc" >/dev/null; }
# journal_has [-E] TEXT: gpuqd's journal of this boot has TEXT (fixed, or -E regex).
journal_has() {
    local how=-F
    [[ $1 == -E ]] && how=-E && shift
    journalctl -b -q --no-pager -u gpuqd.service | grep "$how" -- "$1" >/dev/null
}

finish() {
    {
        echo "--- systemctl status"
        systemctl status --no-pager gpuqd.socket gpuqd.service 2>&1
        echo "--- journalctl -u gpuqd.socket -u gpuqd.service"
        journalctl -b -q --no-pager -o short-monotonic -u gpuqd.socket -u gpuqd.service 2>&1
    } >"$JOURNAL"
    say "time: $((SECONDS - T0)) s in the container"
    say "DONE rc=$fails"
    sync
    exit 0
}

say "== boot: $(systemd --version | head -1); $(. /etc/os-release && echo "$PRETTY_NAME")"
want "PID 1" "$(cat /proc/1/comm)" systemd
check "gpuq installed" dpkg-query -W gpuq

# ---- 1. socket activation: the socket listens, the service waits ----
say "== socket activation"
want "gpuqd.socket enabled" "$(systemctl is-enabled gpuqd.socket 2>&1)" enabled
want "gpuqd.socket active" "$(prop gpuqd.socket ActiveState)" active
want "gpuqd.service before any client" "$(prop gpuqd.service ActiveState)" inactive
want "$SOCK owner and mode" "$(stat -c '%U:%G %a' "$SOCK" 2>&1)" "root:gpuq 660"
if [[ -n "$(gpuqd_pids)" ]]; then bad "a gpuqd runs before any client: $(gpuqd_pids)"; fi

# ---- 2. the first client starts it; readiness, identity, watchdog ----
say "== first client"
useradd -m -G gpuq "$MEMBER" || bad "useradd $MEMBER"
useradd -m "$OUTSIDER" || bad "useradd $OUTSIDER"
if out=$(as "$MEMBER" gpuqctl ping 2>&1); then
    ok "$MEMBER (group gpuq) served: $out"
else
    bad "$MEMBER (group gpuq) not served: $out"
fi
T_READY=$SECONDS
# Type=notify: "active" only once gpuqd sent READY=1 (else "activating").
wait_for 10 is_state active
want "Type" "$(prop gpuqd.service Type)" notify
want "NotifyAccess" "$(prop gpuqd.service NotifyAccess)" main
want "gpuqd.service after the first client (READY=1)" \
    "$(prop gpuqd.service ActiveState)/$(prop gpuqd.service SubState)" active/running
status_text=$(prop gpuqd.service StatusText)
if [[ "$status_text" == serving:* ]]; then ok "STATUS=: $status_text"; else bad "STATUS=: '$status_text'"; fi
check "gpuqd uses the socket systemd passed" journal_has "using the socket passed by systemd"
pid=$(prop gpuqd.service MainPID)
want "User" "$(prop gpuqd.service User)" gpuq
want "uid of gpuqd (pid $pid)" "$(uid_of "$pid")" "$(id -u gpuq)"
want "WatchdogUSec" "$(prop gpuqd.service WatchdogUSec)" 30s
check "gpuqd saw the watchdog" journal_has "systemd watchdog: 30000 ms; WATCHDOG=1 every 15000 ms"
wd0=$(prop gpuqd.service WatchdogTimestampMonotonic)

# ---- 3. group access, admin operations ----
say "== access"
if out=$(as "$OUTSIDER" gpuqctl ping 2>&1); then
    bad "$OUTSIDER (not in gpuq) was served"
elif grep -qi 'permission denied' <<<"$out"; then
    ok "$OUTSIDER (not in gpuq) refused: $out"
else
    bad "$OUTSIDER refused, but not with a permission error: $out"
fi
# A login has XDG_RUNTIME_DIR set: the per-user path (no gpuqd there) is
# tried first, then the system socket answers.
XDG=/run/user/$(id -u "$MEMBER")
if ! { mkdir -p "$XDG" && chown "$MEMBER:" "$XDG" && chmod 0700 "$XDG"; }; then bad "mkdir $XDG"; fi
if out=$(as "$MEMBER" env XDG_RUNTIME_DIR="$XDG" gpuqctl ping 2>&1); then
    ok "$MEMBER with XDG_RUNTIME_DIR=$XDG (no gpuqd there) served by $SOCK: $out"
else
    bad "$MEMBER with XDG_RUNTIME_DIR=$XDG not served: $out"
fi
# The Python client: what the package installs for the system Python,
# finding the socket as libgpuq does, and saying the same when it cannot.
say "== the Python client"
PY='import gpuq; c = gpuq.connect(); print(c.normalize([[1.0, 3.0]]))'
if out=$(as "$MEMBER" python3 -c "$PY" 2>&1); then
    want "python3 as $MEMBER: gpuq.connect().normalize([[1.0, 3.0]])" "$out" "[[0.25 0.75]]"
else
    bad "python3 as $MEMBER: $out"
fi
PYERR='import gpuq
try:
    gpuq.connect()
except gpuq.ConnectError as e:
    print(e)'
py_out=$(as "$OUTSIDER" python3 -c "$PYERR" 2>&1)
ctl_out=$(as "$OUTSIDER" gpuqctl ping 2>&1)
want "python3 as $OUTSIDER: the words of gpuqctl's" "$py_out" "${ctl_out#gpuqctl: io: }"
check "python3 as $OUTSIDER: permission denied" grep -qF "$SOCK: permission denied: join group gpuq" <<<"$py_out"
check "the Python client byte-compiled by postinst ($PYPKG/__pycache__)" compiled
PYMETA='import importlib.metadata as m, gpuq; print(m.version("gpuq") == gpuq.__version__, m.version("gpuq"))'
if out=$(as "$MEMBER" python3 -c "$PYMETA" 2>&1); then
    want "python3: importlib.metadata.version(\"gpuq\") of the package's copy" "$out" "True $(as "$MEMBER" python3 -c 'import gpuq; print(gpuq.__version__)')"
else
    bad "python3: importlib.metadata of gpuq: $out"
fi
for op in shutdown drain "set-limit max_inflight 3"; do
    # shellcheck disable=SC2086 # op is words
    if out=$(as "$MEMBER" gpuqctl $op 2>&1); then
        bad "non-admin $MEMBER may '$op': $out"
    elif grep -q permission_denied <<<"$out"; then
        ok "non-admin '$op' refused: $out"
    else
        bad "non-admin '$op' failed, but not with permission_denied: $out"
    fi
done
# root is an admin: the refusals above are about who asks.
if out=$(ctl set-limit max_inflight 64 2>&1); then ok "root may set-limit: $out"; else bad "root set-limit: $out"; fi
want "gpuqd still serving the same pid" "$(prop gpuqd.service ActiveState) $(prop gpuqd.service MainPID)" "active $pid"

# ---- 4. systemctl reload applies a changed gpuqd.conf ----
say "== reload"
cp "$CONF" "$DIR/gpuqd.conf.orig"
want "total_staging before" "$(staging_limit)" 4294967296
sed -i 's/^total_staging = .*/total_staging = 1G/' "$CONF"
if out=$(timeout 60 systemctl reload gpuqd 2>&1); then ok "systemctl reload gpuqd"; else bad "systemctl reload gpuqd: $out"; fi
if wait_for 10 limit_is 1073741824; then
    ok "reload applied: total_staging 1G"
else
    bad "total_staging after reload: '$(staging_limit)', want 1073741824"
fi
check "the journal says so" journal_has "reload: total_staging 4294967296 -> 1073741824"
want "same gpuqd after reload" "$(prop gpuqd.service MainPID)" "$pid"
sed -i 's/^total_staging = .*/total_staging = lots/' "$CONF"
if out=$(timeout 60 systemctl reload gpuqd 2>&1); then
    bad "systemctl reload accepted a broken $CONF"
else
    ok "systemctl reload refuses a broken $CONF"
fi
sleep 0.5
want "total_staging after the refused reload" "$(staging_limit)" 1073741824
want "gpuqd still serving the same pid" "$(prop gpuqd.service ActiveState) $(prop gpuqd.service MainPID)" "active $pid"
cp "$DIR/gpuqd.conf.orig" "$CONF"
timeout 60 systemctl reload gpuqd || bad "reload of the original $CONF"
wait_for 10 limit_is 4294967296 || bad "total_staging not back to 4G"

# ---- 5. the watchdog pings (every 15 s) reach systemd ----
say "== watchdog pings"
left=$((T_READY + 18 - SECONDS))
[[ $left -gt 0 ]] && sleep "$left"
wd1=$(prop gpuqd.service WatchdogTimestampMonotonic)
if [[ -n "$wd0" && -n "$wd1" && "$wd1" -gt "$wd0" ]]; then
    ok "WATCHDOG=1 received (timestamp $wd0 -> $wd1 us)"
else
    bad "no WATCHDOG=1 in 18 s (timestamp '$wd0' -> '$wd1')"
fi

# ---- 6. restart after a crash ----
say "== crash"
want "NRestarts before" "$(prop gpuqd.service NRestarts)" 0
kill -SEGV "$pid" || bad "kill -SEGV $pid"
restarted() { [[ "$(prop gpuqd.service NRestarts)" == 1 ]] && is_state active; }
if wait_for 20 restarted; then
    pid2=$(prop gpuqd.service MainPID)
    ok "restarted after SIGSEGV (NRestarts=1, pid $pid -> $pid2)"
    [[ "$pid2" != "$pid" ]] || bad "the same MainPID $pid2 after the crash"
    pid=$pid2
else
    bad "not restarted after SIGSEGV: $(prop gpuqd.service ActiveState) NRestarts=$(prop gpuqd.service NRestarts)"
fi
if out=$(as "$MEMBER" gpuqctl ping 2>&1); then ok "served after the restart"; else bad "not served after the restart: $out"; fi

# ---- 7. systemctl stop drains what is in flight ----
say "== stop drains"
# 6000 x 6000 float64 (288 MB): about 5 s on the CPU backend of a 2-core
# machine, so the stop lands while it is in flight.
grid="/home/$MEMBER/grid.npy"
as "$MEMBER" gpuqctl distance grid --lat -90:90:6000 --lon -180:180:6000 -o "$grid" \
    >"$DIR/grid.out" 2>&1 &
client=$!
in_flight() { ctl --json status 2>/dev/null | grep -q '"in_flight":[1-9]'; }
if wait_for 20 in_flight; then
    ok "a grid request is in flight"
else
    bad "the grid request never showed in flight"
fi
t=$SECONDS
if out=$(timeout 120 systemctl stop gpuqd.service 2>&1); then
    ok "systemctl stop gpuqd.service ($((SECONDS - t)) s)"
else
    bad "systemctl stop gpuqd.service: $out"
fi
st=0
wait "$client" || st=$?
if [[ $st -eq 0 && $(stat -c %s "$grid" 2>/dev/null || echo 0) -ge 288000000 ]]; then
    ok "the in-flight request was answered ($(stat -c %s "$grid") bytes)"
else
    bad "the in-flight request: exit $st, $(cat "$DIR/grid.out")"
fi
rm -f "$grid"
want "stopped cleanly (Result, ExecMainCode, ExecMainStatus)" \
    "$(prop gpuqd.service Result) $(prop gpuqd.service ExecMainCode) $(prop gpuqd.service ExecMainStatus)" \
    "success 1 0"
# The stop came while the request was in flight (else this proves nothing).
check "gpuqd drained an in-flight request" journal_has -E "draining: [1-9][0-9]* requests in flight"
want "gpuqd.service after stop" "$(prop gpuqd.service ActiveState)" inactive
want "gpuqd.socket after stopping the service" "$(prop gpuqd.socket ActiveState)" active

# ---- 7b. no gpuqd at all; then gpuqd run by hand with --socket-group ----
say "== no gpuqd; gpuqd by hand"
timeout 60 systemctl stop gpuqd.socket || bad "systemctl stop gpuqd.socket"
# shellcheck disable=SC2016 # the backquotes are the message's own
HINT='is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`'
st=0
out=$(as "$MEMBER" env XDG_RUNTIME_DIR="$XDG" gpuqctl ping 2>&1) || st=$?
want "gpuqctl ping with nothing listening: exit" "$st" 3
if grep -qF "$XDG/gpuq/gpuqd.sock: directory $XDG/gpuq does not exist" <<<"$out" &&
    grep -qE "$SOCK: (no such file|directory /run/gpuq does not exist)" <<<"$out" &&
    grep -qF "$HINT" <<<"$out"; then
    ok "the error names both paths and what to do: $out"
else
    bad "the error with nothing listening: $out"
fi
# root starts gpuqd by hand: with --socket-group gpuq, members get in
gpuqd --socket-group gpuq >"$DIR/byhand.log" 2>&1 &
byhand=$!
if wait_for 20 test -S "$SOCK"; then
    want "by hand: $SOCK owner and mode" "$(stat -c '%U:%G %a' "$SOCK" 2>&1)" "root:gpuq 660"
    want "by hand: /run/gpuq owner and mode" "$(stat -c '%U:%G %a' /run/gpuq 2>&1)" "root:gpuq 750"
    if out=$(as "$MEMBER" gpuqctl ping 2>&1); then ok "by hand: $MEMBER served: $out"; else bad "by hand: $MEMBER not served: $out"; fi
    if out=$(as "$OUTSIDER" gpuqctl ping 2>&1); then
        bad "by hand: $OUTSIDER (not in gpuq) was served"
    elif grep -qF "$SOCK: permission denied: join group gpuq" <<<"$out"; then
        ok "by hand: $OUTSIDER refused: $out"
    else
        bad "by hand: $OUTSIDER refused, but not with a permission error: $out"
    fi
else
    bad "gpuqd --socket-group gpuq did not listen on $SOCK: $(cat "$DIR/byhand.log")"
fi
kill -TERM "$byhand" 2>/dev/null
wait "$byhand" || bad "gpuqd by hand: exit $? ($(tail -3 "$DIR/byhand.log"))"
# as systemd made it, for what follows
if ! { chgrp root /run/gpuq && chmod 0755 /run/gpuq; }; then bad "/run/gpuq back to root 0755"; fi
timeout 60 systemctl start gpuqd.socket || bad "systemctl start gpuqd.socket"
want "gpuqd.socket after the restart" "$(prop gpuqd.socket ActiveState)" active

# ---- 8. the upgrade path (postinst configure VERSION) under systemd ----
say "== apt-get install --reinstall"
reinstall() { DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install --reinstall -y -q "$DIR/package.deb" 2>&1; }
if out=$(reinstall); then ok "reinstall, service stopped"; else bad "reinstall: $out"; fi
want "after it: socket, service (a stopped service stays stopped)" \
    "$(prop gpuqd.socket ActiveState) $(prop gpuqd.service ActiveState)" "active inactive"
if out=$(as "$MEMBER" gpuqctl ping 2>&1); then ok "served after the reinstall"; else bad "not served after the reinstall: $out"; fi
check "the Python client byte-compiled again after the reinstall" compiled
if out=$(as "$MEMBER" python3 -c "$PY" 2>&1); then
    want "python3 after the reinstall" "$out" "[[0.25 0.75]]"
else
    bad "python3 after the reinstall: $out"
fi
pid=$(prop gpuqd.service MainPID)
if out=$(reinstall); then ok "reinstall, service running (pid $pid)"; else bad "reinstall: $out"; fi
restarted_new() { is_state active && [[ "$(prop gpuqd.service MainPID)" != "$pid" ]]; }
if wait_for 10 restarted_new; then
    ok "a running service is restarted by it (pid $pid -> $(prop gpuqd.service MainPID))"
else
    bad "after reinstall: $(prop gpuqd.service ActiveState), pid $(prop gpuqd.service MainPID) (was $pid)"
fi
if out=$(as "$MEMBER" gpuqctl ping 2>&1); then ok "served after the restart"; else bad "not served: $out"; fi

# ---- 9. the sandbox: exposure no worse than before ----
say "== systemd-analyze security"
sec=$(systemd-analyze security --no-pager gpuqd.service 2>&1)
level=$(sed -n 's/.*Overall exposure level for gpuqd.service: \([0-9.]*\).*/\1/p' <<<"$sec")
if [[ -z "$level" ]]; then
    bad "no exposure level in: $(tail -3 <<<"$sec")"
elif awk -v l="$level" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(l <= m) }'; then
    ok "exposure $level (at most $MAX_EXPOSURE): $(grep 'Overall exposure' <<<"$sec")"
else
    bad "exposure $level is over $MAX_EXPOSURE: $(grep 'Overall exposure' <<<"$sec")"
    echo "$sec" >>"$RESULTS"
fi

# ---- 10. apt purge leaves nothing ----
say "== apt-get purge"
if out=$(DEBIAN_FRONTEND=noninteractive timeout 300 apt-get purge -y -q gpuq 2>&1); then
    ok "apt-get purge gpuq"
else
    bad "apt-get purge gpuq: $out"
fi
dpkg_status=$(dpkg-query -W -f='${Status}' gpuq 2>/dev/null)
want "dpkg status after purge" "${dpkg_status:-none}" none
want "gpuqd.socket unit" "$(prop gpuqd.socket LoadState)/$(prop gpuqd.socket ActiveState)" not-found/inactive
want "gpuqd.service unit" "$(prop gpuqd.service LoadState)/$(prop gpuqd.service ActiveState)" not-found/inactive
if [[ -n "$(gpuqd_pids)" ]]; then bad "gpuqd still running: $(gpuqd_pids)"; else ok "no gpuqd process"; fi
# Any file or directory named after gpuq, on the root file system, /run and
# /tmp (PrivateTmp= directories); the test's own files and users are named
# otherwise. User and group gpuq stay (Debian leaves system users in place).
left=$(find / /run /tmp -xdev \( -path "$DIR" -o -path /proc -o -path /sys \) -prune -o \
    -name '*gpuq*' -print 2>/dev/null)
if [[ -z "$left" ]]; then ok "nothing named *gpuq* left"; else bad "left after purge: $(echo "$left" | tr '\n' ' ')"; fi

finish
