#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/pkg/deb_install_test.sh DEB|DIR - install the .deb on this machine and
# use it as a service. For CI (a disposable Debian 12 container, root, no
# systemd as PID 1); refuses to run unless root and GPUQ_CI_INSTALL_TEST=1.
# DIR: a directory holding exactly one gpuq_*.deb (e.g. the build dir after
# `cpack -G DEB`).
#
#  1. apt-get install ./gpuq_*.deb: user and group gpuq exist, files in
#     place (libgpuq, gpuq.pc and the CMake package in /usr/lib/<multiarch>,
#     tests/pkg/libdir.sh, and not in /usr/lib itself), /etc/gpuq/gpuqd.conf
#     is a conffile, gpuqd.socket is enabled;
#     `gpuqd --check-config /etc/gpuq/gpuqd.conf` passes (skipped, with a
#     message, while gpuqd --help does not offer --check-config).
#  2. Reinstall (prerm upgrade, postinst configure VERSION): still fine.
#  3. The socket unit, emulated: systemd-socket-activate listens on
#     /run/gpuq/gpuqd.sock (root:gpuq 0660, as SocketGroup/SocketMode do) and
#     runs the unit's ExecStart as user gpuq (setpriv execs, so LISTEN_PID
#     holds). A new member of group gpuq pings it through gpuqctl; a user
#     outside the group gets a permission error. The README's C example,
#     built by that member with the README's compile command against the
#     installed package (pkg-config and the loader find libgpuq by
#     themselves), runs against it with no environment of its own; so does
#     `import gpuq` in the system Python (the package's
#     /usr/lib/python3/dist-packages/gpuq, byte-compiled by postinst), and
#     for the outsider it says what gpuqctl says.
#  4. apt-get remove, then purge: the units, their enablement links and
#     deb-systemd-helper state, the config, /etc/gpuq and the Python
#     package (bytecode included) are gone.
# Users it created are deleted at exit, and so are user and group gpuq when
# they did not exist before (Debian's purge leaves system users in place).
set -euo pipefail
# grep that reads all its input: grep -q exits at the first match, and the
# writer's SIGPIPE then fails the pipeline under pipefail.
has() { grep "$@" >/dev/null; }

if [[ $(id -u) -ne 0 || "${GPUQ_CI_INSTALL_TEST:-}" != 1 ]]; then
    echo "deb_install_test: installs a package and adds users on this machine;" \
        "runs only as root with GPUQ_CI_INSTALL_TEST=1 (CI)" >&2
    exit 2
fi
# shellcheck source=tests/pkg/deb_arg.sh
. "$(dirname "$0")/deb_arg.sh"
# shellcheck source=tests/pkg/readme_c.sh
. "$(dirname "$0")/readme_c.sh"
# shellcheck source=tests/pkg/libdir.sh
. "$(dirname "$0")/libdir.sh"
README=$(cd "$(dirname "$0")/../.." && pwd)/README.md
deb_arg deb_install_test "${1:?usage: deb_install_test.sh DEB|DIR}"

SOCK=/run/gpuq/gpuqd.sock
MEMBER=gpuqci-member
OUTSIDER=gpuqci-outsider
PYPKG=/usr/lib/python3/dist-packages/gpuq
UNITDIR=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -y -q -o DPkg::Lock::Timeout=300)

if dpkg-query -W -f='${Status}' gpuq 2>/dev/null | has 'ok installed'; then
    echo "deb_install_test: gpuq is already installed; remove it first" >&2
    exit 2
fi
for u in "$MEMBER" "$OUTSIDER"; do
    if getent passwd "$u" >/dev/null; then
        echo "deb_install_test: user $u exists; remove it first" >&2
        exit 2
    fi
done
if [[ -e "$SOCK" ]]; then
    echo "deb_install_test: $SOCK exists (a gpuqd running?)" >&2
    exit 2
fi
if [[ -e /etc/gpuq ]] && ! dpkg-query -W -f='${Status}' gpuq 2>/dev/null | has 'install ok'; then
    # dpkg would stop at the conffile prompt: not the package's own file
    echo "deb_install_test: /etc/gpuq exists but gpuq is not installed (a cmake --install" \
        "--prefix /usr without DESTDIR?); remove it first" >&2
    exit 2
fi
had_user=0
had_group=0
rundir_mode=$(stat -c %a /run/gpuq 2>/dev/null || true)
getent passwd gpuq >/dev/null && had_user=1
getent group gpuq >/dev/null && had_group=1

tmp=$(mktemp -d /tmp/gpuq-deb-install.XXXXXX)
daemon_pid=
created=()
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
ok() { echo "ok: $*"; }
# check WHAT CMD...: ok or FAIL, never exits.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
compiled() { compgen -G "$PYPKG/__pycache__/client.cpython-*.pyc" >/dev/null; }
conffile_listed() { dpkg-query -W -f='${Conffiles}\n' gpuq | has '^ /etc/gpuq/gpuqd.conf '; }

cleanup() {
    set +e
    if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid"
        wait "$daemon_pid" 2>/dev/null
    fi
    rm -f "$SOCK"
    if [[ -n "$rundir_mode" ]]; then
        chmod "$rundir_mode" /run/gpuq
    else
        rmdir /run/gpuq 2>/dev/null
    fi
    for u in "${created[@]}"; do
        userdel -r "$u" >/dev/null 2>&1
    done
    if dpkg-query -W -f='${Status}' gpuq 2>/dev/null | has -v 'not-installed'; then
        "${APT[@]}" purge gpuq >/dev/null 2>&1
    fi
    if [[ $had_user -eq 0 ]] && getent passwd gpuq >/dev/null; then
        userdel gpuq >/dev/null 2>&1
    fi
    if [[ $had_group -eq 0 ]] && getent group gpuq >/dev/null; then
        groupdel gpuq >/dev/null 2>&1
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- 1. install ----
echo "== apt-get install $deb"
"${APT[@]}" install "$deb" >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; bad "apt-get install"; exit 1; }
check "group gpuq exists" getent group gpuq
if getent passwd gpuq >/dev/null; then
    ok "user gpuq ($(getent passwd gpuq))"
    [[ "$(id -gn gpuq)" == gpuq ]] || bad "user gpuq's group is $(id -gn gpuq)"
else
    bad "no user gpuq"
fi
for f in /usr/sbin/gpuqd /usr/bin/gpuqctl /usr/include/gpuq/gpuq.h /etc/gpuq/gpuqd.conf \
    "$UNITDIR/gpuqd.service" "$UNITDIR/gpuqd.socket" /usr/lib/sysusers.d/gpuq.conf \
    /usr/share/doc/gpuq/README.md /usr/share/doc/gpuq/copyright; do
    [[ -e "$f" ]] || bad "missing $f"
done
usr_lib=/usr/$(usr_libdir)
for f in libgpuq.so.1 libgpuq.so libgpuq.a pkgconfig/gpuq.pc cmake/gpuq/gpuqConfig.cmake; do
    [[ -e "$usr_lib/$f" ]] || bad "missing $usr_lib/$f"
done
if [[ "$usr_lib" != /usr/lib ]]; then
    stray=$(find /usr/lib -maxdepth 2 \( -name 'libgpuq*' -o -name gpuq.pc -o -path '*/cmake/gpuq' \) ! -path "$usr_lib/*")
    [[ -z "$stray" ]] || bad "in /usr/lib, not $usr_lib: $stray"
fi
pclibdir=$(pkg-config --variable=libdir gpuq 2>/dev/null || true)
[[ "$pclibdir" == "$usr_lib" ]] || bad "pkg-config says libdir=$pclibdir, not $usr_lib"
in_ld_cache() { ldconfig -p | has 'libgpuq\.so\.1 '; }
check "libgpuq.so.1 in the loader cache (ldconfig trigger)" in_ld_cache
check "/etc/gpuq/gpuqd.conf is a conffile" conffile_listed
check "gpuqd.socket enabled (sockets.target.wants)" \
    test -L /etc/systemd/system/sockets.target.wants/gpuqd.socket
[[ -f "$PYPKG/__init__.py" ]] || bad "missing $PYPKG/__init__.py"
if command -v py3compile >/dev/null; then
    check "the Python client byte-compiled by postinst" compiled
fi
gpuqd --version || bad "gpuqd --version"
if gpuqd --help 2>&1 | has -- '--check-config'; then
    if gpuqd --check-config /etc/gpuq/gpuqd.conf >"$tmp/check.log" 2>&1; then
        ok "gpuqd --check-config /etc/gpuq/gpuqd.conf"
    else
        cat "$tmp/check.log" >&2
        bad "gpuqd --check-config /etc/gpuq/gpuqd.conf"
    fi
else
    echo "skip: gpuqd --help does not mention --check-config (not in this build yet)"
fi

# ---- 2. reinstall: the upgrade path of the scripts ----
echo "== apt-get install --reinstall"
if "${APT[@]}" install --reinstall "$deb" >"$tmp/apt.log" 2>&1; then
    ok "reinstall"
else
    cat "$tmp/apt.log" >&2
    bad "apt-get install --reinstall"
fi
check "gpuqd.socket still enabled" test -L /etc/systemd/system/sockets.target.wants/gpuqd.socket
[[ $(getent passwd | grep -c '^gpuq:') -eq 1 ]] || bad "user gpuq twice"

# ---- 3. the socket unit, emulated ----
echo "== gpuqd socket-activated on $SOCK"
exec_start=$(sed -n 's/^ExecStart=//p' "$UNITDIR/gpuqd.service" | head -1)
read -r -a cmd <<<"$exec_start"
if [[ "${cmd[0]:-}" != /usr/sbin/gpuqd || "$exec_start" == *[\$\"\'\\]* ]]; then
    echo "note: ExecStart '$exec_start' not reproducible here; running /usr/sbin/gpuqd"
    cmd=(/usr/sbin/gpuqd)
fi
echo "ExecStart: ${cmd[*]}"
install -d -m 0755 /run/gpuq
systemd-socket-activate -l "$SOCK" \
    setpriv --reuid=gpuq --regid=gpuq --init-groups -- \
    "${cmd[@]}" >"$tmp/gpuqd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
    [[ -S "$SOCK" ]] && break
    sleep 0.1
done
[[ -S "$SOCK" ]] || { cat "$tmp/gpuqd.log" >&2; bad "no socket $SOCK"; exit 1; }
chgrp gpuq "$SOCK"
chmod 0660 "$SOCK"
ls -l "$SOCK"

useradd -m -G gpuq "$MEMBER"
created+=("$MEMBER")
useradd -m "$OUTSIDER"
created+=("$OUTSIDER")
if runuser -u "$MEMBER" -- gpuqctl --socket "$SOCK" ping >"$tmp/ping.out" 2>&1; then
    cat "$tmp/ping.out"
    ok "$MEMBER (group gpuq) pings gpuqd"
else
    cat "$tmp/ping.out" "$tmp/gpuqd.log" >&2
    bad "$MEMBER (group gpuq) cannot ping gpuqd"
fi
# The README's C example as a user of the package builds and runs it: the
# default socket is /run/gpuq/gpuqd.sock for a user without XDG_RUNTIME_DIR
# (runuser sets none).
# (in the member's home, which userdel -r removes; $tmp is root's alone)
cdir=$(getent passwd "$MEMBER" | cut -d: -f6)/readme-c
install -d -o "$MEMBER" "$cdir"
if readme_c_extract "$README" "$cdir"; then
    chown "$MEMBER" "$cdir/$README_C_SRC"
    if runuser -u "$MEMBER" -- env -u GPUQ_SOCKET -u XDG_RUNTIME_DIR -u LD_LIBRARY_PATH \
        -u PKG_CONFIG_PATH bash -euc "cd '$cdir' && $README_C_CMD && ./$README_C_OUT" \
        >"$tmp/readme-c.out" 2>&1; then
        ok "the README's C example ($README_C_CMD): $(tail -1 "$tmp/readme-c.out")"
    else
        cat "$tmp/readme-c.out" >&2
        bad "the README's C example does not build or run against the package"
    fi
else
    bad "no C example or compile command in $README"
fi
# The Python client of the package, in the system Python, as that member.
PY='import gpuq; c = gpuq.connect(); print(c.normalize([[1.0, 3.0]]))'
if out=$(runuser -u "$MEMBER" -- env -u GPUQ_SOCKET -u XDG_RUNTIME_DIR -u PYTHONPATH \
    /usr/bin/python3 -c "$PY" 2>&1) && [[ "$out" == "[[0.25 0.75]]" ]]; then
    ok "python3 as $MEMBER: gpuq.connect().normalize([[1.0, 3.0]]) = $out"
else
    bad "python3 as $MEMBER: $out"
fi
if [[ "$(ps -o user= -p "$daemon_pid" 2>/dev/null | tr -d ' ')" == gpuq ]]; then
    ok "gpuqd runs as gpuq"
else
    bad "gpuqd (pid $daemon_pid) does not run as gpuq: $(ps -o user=,args= -p "$daemon_pid")"
fi
if runuser -u "$OUTSIDER" -- gpuqctl --socket "$SOCK" ping >"$tmp/ping.out" 2>&1; then
    bad "$OUTSIDER (not in gpuq) could ping gpuqd"
elif grep -qi 'permission denied' "$tmp/ping.out"; then
    ok "$OUTSIDER (not in gpuq) refused: $(head -1 "$tmp/ping.out")"
else
    bad "$OUTSIDER failed, but not with a permission error: $(cat "$tmp/ping.out")"
fi
PYERR='import gpuq
try:
    gpuq.connect()
except gpuq.ConnectError as e:
    print(e)'
py_out=$(runuser -u "$OUTSIDER" -- env -u GPUQ_SOCKET -u XDG_RUNTIME_DIR -u PYTHONPATH \
    /usr/bin/python3 -c "$PYERR" 2>&1) || true
# gpuqctl exits 3 there (no gpuqd it may reach): the output is what counts
ctl_out=$(runuser -u "$OUTSIDER" -- env -u GPUQ_SOCKET -u XDG_RUNTIME_DIR gpuqctl ping 2>&1) || true
if [[ "$py_out" == "${ctl_out#gpuqctl: io: }" && "$py_out" == *"permission denied"* ]]; then
    ok "python3 as $OUTSIDER says what gpuqctl says: $py_out"
else
    bad "python3 as $OUTSIDER: '$py_out'; gpuqctl: '$ctl_out'"
fi
kill -TERM "$daemon_pid"
st=0
wait "$daemon_pid" || st=$?
if [[ $st -eq 0 ]]; then ok "gpuqd exited 0 on SIGTERM"; else bad "gpuqd exit status $st on SIGTERM"; fi
daemon_pid=
echo "--- gpuqd log"
cat "$tmp/gpuqd.log"
rm -f "$SOCK"

# ---- 4. remove, purge ----
echo "== apt-get remove"
if "${APT[@]}" remove gpuq >"$tmp/apt.log" 2>&1; then
    ok "remove"
else
    cat "$tmp/apt.log" >&2
    bad "apt-get remove"
fi
for f in /usr/sbin/gpuqd /usr/bin/gpuqctl "$UNITDIR/gpuqd.service" "$UNITDIR/gpuqd.socket"; do
    [[ ! -e "$f" ]] || bad "$f still there after remove"
done
check "config kept after remove" test -e /etc/gpuq/gpuqd.conf
[[ ! -e "$PYPKG" ]] || bad "$PYPKG still there after remove: $(find "$PYPKG" | head -5 | tr '\n' ' ')"
echo "== apt-get purge"
if "${APT[@]}" purge gpuq >"$tmp/apt.log" 2>&1; then
    ok "purge"
else
    cat "$tmp/apt.log" >&2
    bad "apt-get purge"
fi
left=$(find /etc/gpuq "$UNITDIR" /etc/systemd/system /var/lib/systemd/deb-systemd-helper-enabled \
    /var/lib/systemd/deb-systemd-helper-masked /usr/lib/sysusers.d \
    -name '*gpuq*' 2>/dev/null || true)
if [[ -z "$left" ]]; then
    ok "nothing of gpuq left in /etc/gpuq, units, links, helper state"
else
    bad "left after purge: $left"
fi
if dpkg-query -W -f='${Status}' gpuq 2>/dev/null | has 'ok installed\|config-files'; then
    bad "dpkg still has gpuq: $(dpkg-query -W -f='${Status}' gpuq)"
fi

if [[ $fail -ne 0 ]]; then
    echo "deb_install_test: FAILED" >&2
    exit 1
fi
echo "deb_install_test: OK"
