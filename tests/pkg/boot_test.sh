#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/pkg/boot_test.sh DEB|DIR - the packaged service under a real systemd:
# a minimal Debian 12 booted in a container with systemd as PID 1. For CI and
# for anyone with root on a Debian 12 machine (run by .ci/run after
# deb_install_test.sh). DIR: a directory holding exactly one gpuq_*.deb (e.g.
# the build dir after `cpack -G DEB`).
#
#  1. debootstrap --variant=minbase bookworm with systemd, systemd-sysv, dbus
#     and the .deb's Depends and Recommends: no procps, nothing else. The root is cached
#     in $GPUQ_BOOT_CACHE (default /var/cache/gpuq-boot-test), keyed by
#     suite, mirror and package list; each run boots a copy.
#  2. The copy gets the .deb installed with apt-get (in systemd-nspawn, not
#     booted), tests/pkg/boot_checks.sh, and boot-test-checks.service, a
#     oneshot unit enabled in multi-user.target that runs the checks and
#     powers the container off, whatever happens (SuccessAction=,
#     FailureAction=, TimeoutStartSec=, JobTimeoutSec=: a boot that never
#     gets there ends too). The test's files and users are not named
#     *gpuq*, so that the purge check can look for that name everywhere.
#  3. systemd-nspawn -b --register=no --keep-unit (no systemd is needed on
#     this host; cgroup v1 hybrid hosts work), under timeout(1): the
#     container always ends. Its journal is kept in the copy.
#  4. The checks' results file is read back: any "FAIL:" line, or no
#     "DONE rc=0" line, fails this test, with the gpuq units' journal and the
#     console's tail printed.
# What is checked is listed in boot_checks.sh: socket activation, Type=notify
# readiness, the watchdog, user gpuq, group access, admin operations refused
# to others, restart after a crash, systemctl reload, systemctl stop
# draining in-flight work, the upgrade path (apt-get install --reinstall),
# the systemd-analyze security exposure, the Python client (import gpuq as
# a member, byte-compiled by postinst), and apt purge leaving nothing.
#
# Needs root, network access to the Debian archive on a cache miss, and
# debootstrap and systemd-container (apt-get installed when missing).
# Environment: GPUQ_BOOT_CACHE, GPUQ_BOOT_MIRROR (http://deb.debian.org/debian),
# GPUQ_BOOT_TIMEOUT (seconds the booted container may run, 300),
# GPUQ_BOOT_MAX_EXPOSURE (2.5), GPUQ_BOOT_KEEP=1 (keep the booted copy),
# GPUQ_BOOT_REFRESH=1 (debootstrap again even when cached).
set -euo pipefail
has() { grep "$@" >/dev/null; }

if [[ $(id -u) -ne 0 ]]; then
    echo "boot_test: needs root (debootstrap, systemd-nspawn)" >&2
    exit 2
fi
# shellcheck source=tests/pkg/deb_arg.sh
. "$(dirname "$0")/deb_arg.sh"
deb_arg boot_test "${1:?usage: boot_test.sh DEB|DIR}"
here=$(cd "$(dirname "$0")" && pwd)

SUITE=bookworm
MIRROR=${GPUQ_BOOT_MIRROR:-http://deb.debian.org/debian}
CACHE=${GPUQ_BOOT_CACHE:-/var/cache/gpuq-boot-test}
BOOT_TIMEOUT=${GPUQ_BOOT_TIMEOUT:-300}
MAX_EXPOSURE=${GPUQ_BOOT_MAX_EXPOSURE:-2.5}
# Bump when the way the root is made changes (the cache key).
ROOT_FORMAT=1
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -y -q -o DPkg::Lock::Timeout=300)
t_start=$SECONDS

# ---- tools ----
if ! command -v debootstrap >/dev/null || ! command -v systemd-nspawn >/dev/null; then
    echo "== apt-get install debootstrap systemd-container"
    "${APT[@]}" install debootstrap systemd-container >/dev/null ||
        { "${APT[@]}" update >/dev/null && "${APT[@]}" install debootstrap systemd-container >/dev/null; }
fi

# ---- 1. the cached minimal root ----
# The .deb's Depends and Recommends (first alternative of each, no versions,
# no :any) plus systemd as PID 1 and the bus systemctl talks over. The
# Recommends (python3, python3-numpy, python3-msgpack: the Python client)
# because apt-get installs them with the package, and from the cached root
# it needs no network; the checks use them.
mapfile -t deps < <({ dpkg-deb -f "$deb" Depends; echo ,; dpkg-deb -f "$deb" Recommends; } |
    tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/:any//; s/[[:space:]]//g; /^$/d')
pkgs=$(printf '%s\n' systemd systemd-sysv dbus "${deps[@]}" | sort -u | paste -sd, -)
key=$(printf '%s\n' "$ROOT_FORMAT" "$SUITE" "$MIRROR" minbase "$pkgs" | sha256sum | cut -c1-16)
base=$CACHE/root-$key
mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock 9 # one run at a time builds or copies the cache
# Copies left by runs that were killed (a run takes minutes, not hours).
find "$CACHE" -mindepth 1 -maxdepth 1 -name 'run.*' -mmin +120 -exec rm -rf {} +
if [[ "${GPUQ_BOOT_REFRESH:-}" == 1 ]]; then
    rm -rf "$base"
fi
if [[ -f "$base/.complete" ]]; then
    echo "== cached root $base ($pkgs)"
else
    echo "== debootstrap $SUITE ($pkgs) -> $base"
    rm -rf "$CACHE"/root-* "$CACHE"/tmp-*
    tmproot=$(mktemp -d "$CACHE/tmp-$key.XXXXXX")
    chmod 0755 "$tmproot" # the container's /: mktemp's 0700 locks out every user but root
    t=$SECONDS
    if ! debootstrap --variant=minbase --include="$pkgs" "$SUITE" "$tmproot" "$MIRROR" \
        >"$CACHE/debootstrap.log" 2>&1; then
        tail -30 "$CACHE/debootstrap.log" >&2
        rm -rf "$tmproot"
        echo "boot_test: debootstrap failed" >&2
        exit 1
    fi
    rm -f "$tmproot"/var/cache/apt/archives/*.deb "$tmproot"/var/cache/apt/*.bin
    touch "$tmproot/.complete"
    mv "$tmproot" "$base"
    echo "debootstrap: $((SECONDS - t)) s"
fi

# ---- 2. a copy to boot, with the package and the checks ----
work=$(mktemp -d "$CACHE/run.XXXXXX")
root=$work/root
cleanup() {
    if [[ "${GPUQ_BOOT_KEEP:-}" == 1 ]]; then
        echo "boot_test: kept $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
cp -a --reflink=auto "$base" "$root"
flock -u 9
chmod 0755 "$root"
rm -f "$root/.complete"
# The checks' own files, named so that nothing of them looks like gpuq's.
install -d -m 0755 "$root/boot-test"
cp "$deb" "$root/boot-test/package.deb"
install -m 0755 "$here/boot_checks.sh" "$root/boot-test/checks.sh"
echo "MAX_EXPOSURE=$MAX_EXPOSURE" >"$root/boot-test/env"
echo boot-test >"$root/etc/hostname"
cat >"$root/etc/systemd/system/boot-test-checks.service" <<EOF
[Unit]
Description=gpuq boot test checks (tests/pkg/boot_checks.sh)
After=multi-user.target
# Power off whatever happens: the checks always exit 0; a hang, or a boot
# that never gets this far, is cut by the timeouts.
SuccessAction=poweroff
FailureAction=poweroff
JobTimeoutSec=$((BOOT_TIMEOUT - 20))s
JobTimeoutAction=poweroff

[Service]
Type=oneshot
ExecStart=/bin/bash /boot-test/checks.sh
TimeoutStartSec=$((BOOT_TIMEOUT - 30))s
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/boot-test-checks.service \
    "$root/etc/systemd/system/multi-user.target.wants/boot-test-checks.service"
# A persistent journal: read from here when the boot goes wrong.
install -d -m 2755 "$root/var/log/journal"
# No login prompt on the console (read-only here).
ln -sf /dev/null "$root/etc/systemd/system/console-getty.service"

nspawn=(systemd-nspawn --quiet --register=no --keep-unit -D "$root" -M "gpuq-boot-$$")
echo "== apt-get install the package (container not booted)"
if ! timeout 300 "${nspawn[@]}" --as-pid2 --pipe -- "${APT[@]}" install /boot-test/package.deb \
    >"$work/install.log" 2>&1 </dev/null; then
    cat "$work/install.log" >&2
    echo "boot_test: FAILED: apt-get install in the container" >&2
    exit 1
fi

# ---- 3. boot ----
echo "== boot (systemd as PID 1; at most $BOOT_TIMEOUT s)"
t=$SECONDS
st=0
timeout --kill-after=15 "$BOOT_TIMEOUT" "${nspawn[@]}" --console=read-only -b \
    >"$work/console.log" 2>&1 </dev/null || st=$?
echo "container ran $((SECONDS - t)) s, exit status $st"

# ---- 4. results ----
results=$root/boot-test/results.txt
fail=0
if [[ -f "$results" ]]; then
    cat "$results"
else
    echo "FAIL: no results from the container" >&2
    fail=1
fi
[[ $st -eq 0 ]] || { echo "FAIL: systemd-nspawn exit status $st (124: timed out)" >&2; fail=1; }
if [[ -f "$results" ]]; then
    has '^DONE rc=0$' "$results" || { echo "FAIL: the checks did not all pass" >&2; fail=1; }
    if has '^FAIL' "$results"; then fail=1; fi
fi
if [[ $fail -ne 0 ]]; then
    if [[ -f "$root/boot-test/journal.txt" ]]; then
        echo "--- the gpuq units in the container"
        cat "$root/boot-test/journal.txt"
    fi
    echo "--- the container's journal (tail)"
    journalctl -D "$root/var/log/journal" -q --no-pager -n 80 2>&1 || true
    echo "--- container console (tail)"
    sed 's/\x1b\[[0-9;]*m//g' "$work/console.log" | tail -60
    echo "boot_test: FAILED ($((SECONDS - t_start)) s)" >&2
    exit 1
fi
echo "boot_test: OK ($((SECONDS - t_start)) s)"
