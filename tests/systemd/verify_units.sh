#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# verify_units.sh GPUQD UNITDIR [SYSTEMD_ANALYZE [SYSTEMD_SYSUSERS]]
#
# `systemd-analyze verify` on systemd/gpuqd.socket and systemd/gpuqd.service,
# byte for byte as they are in the tree, in a staged root (--root):
#   ROOT/usr/lib/systemd/system   the build host's system units (sysinit.target,
#                                 sockets.target, ...: every service depends on them)
#   ROOT/etc/systemd/system       our two units, unchanged
#   ROOT/usr/sbin/gpuqd           the gpuqd just built, where ExecStart= and
#                                 ExecReload= say (the only binary they run)
#   ROOT/etc/passwd, group        made by systemd-sysusers from gpuq.sysusers.conf
# verify checks that every Exec*= binary exists and is executable inside the
# root, so a unit naming another path than the one gpuqd is installed to fails.
#
# systemd-analyze reports unknown keys and unparsable values as warnings and
# still exits 0, so a unit counts as clean only when verify exits 0 AND
# prints nothing. The negative checks below prove that this test fails on a
# misspelled directive, a bad value and a missing binary, for the expected
# reason each time (it cannot pass vacuously).
#
# User=/Group=/SocketGroup= are not looked up by verify (they are resolved
# when the unit starts: a unit with User=nosuchuser verifies clean on systemd
# 252), so CI needs no gpuq user. The staged root gets one anyway, from our
# sysusers file, which checks that file as well.
#
# Exit 0: all checks passed; 1: a check failed; 77: systemd-analyze missing.
set -u
gpuqd=$1
units=$2
sa=${3:-systemd-analyze}
sysusers=${4:-systemd-sysusers}

# Absolute paths: the staging below changes what relative ones would mean.
case $gpuqd in /*) ;; *) gpuqd=$(pwd)/$gpuqd ;; esac
case $units in /*) ;; *) units=$(pwd)/$units ;; esac

if ! command -v "$sa" >/dev/null 2>&1; then
    echo "SKIP: $sa not found (apt-get install systemd)"
    exit 77
fi
fail() {
    echo "FAIL: $*"
    exit 1
}
[ -x "$gpuqd" ] || fail "no gpuqd at $gpuqd"
for f in gpuqd.service gpuqd.socket gpuq.sysusers.conf; do
    [ -f "$units/$f" ] || fail "no $units/$f"
done
sysunits=
for d in /usr/lib/systemd/system /lib/systemd/system; do
    if [ -f "$d/sysinit.target" ]; then
        sysunits=$d
        break
    fi
done
[ -n "$sysunits" ] || fail "no system unit directory with sysinit.target"

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-verify-XXXXXX") || fail "mktemp"
trap 'rm -rf "$work"' EXIT

# stage NAME: a fresh root at $work/NAME (path in $root).
stage() {
    root=$work/$1
    mkdir -p "$root/usr/lib/systemd/system" "$root/etc/systemd/system" \
        "$root/usr/sbin" "$root/usr/bin" || fail "mkdir $root"
    ln -s usr/bin "$root/bin" && ln -s usr/sbin "$root/sbin" && ln -s usr/lib "$root/lib" ||
        fail "symlinks in $root"
    cp -a "$sysunits/." "$root/usr/lib/systemd/system/" || fail "copy $sysunits"
    cp "$units/gpuqd.service" "$units/gpuqd.socket" "$root/etc/systemd/system/" ||
        fail "copy units"
    cp "$gpuqd" "$root/usr/sbin/gpuqd" || fail "copy gpuqd"
}

# verify: run systemd-analyze verify on the root's two units; sets $out and
# returns 0 only when it exited 0 and said nothing.
verify() {
    out=$("$sa" verify --root="$root" "$root/etc/systemd/system/gpuqd.socket" \
        "$root/etc/systemd/system/gpuqd.service" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ -z "$out" ]
}

# mutate FILE SED-EXPR MUST-MATCH: edit a staged unit and check the edit took.
mutate() {
    sed -i "$2" "$root/etc/systemd/system/$1" || fail "sed $1"
    grep -q "$3" "$root/etc/systemd/system/$1" || fail "mutation '$2' did not apply to $1"
}

# expect_reject WHAT PATTERN: verify must not be clean, and say PATTERN.
expect_reject() {
    if verify; then
        fail "$1: verify passed a broken unit"
    fi
    echo "$out" | grep -q "$2" || fail "$1: rejected, but not for '$2':
$out"
    echo "ok: $1 rejected: $(echo "$out" | grep "$2" | head -1)"
}

# 1. the units as they are: clean.
stage good
if command -v "$sysusers" >/dev/null 2>&1; then
    "$sysusers" --root="$root" "$units/gpuq.sysusers.conf" >/dev/null 2>&1 ||
        fail "systemd-sysusers rejected gpuq.sysusers.conf"
    grep -q '^gpuq:x:[0-9]*:[0-9]*:' "$root/etc/passwd" || fail "sysusers made no user gpuq"
    grep -q '^gpuq:x:[0-9]*:' "$root/etc/group" || fail "sysusers made no group gpuq"
    echo "ok: gpuq.sysusers.conf creates user and group gpuq"
fi
if ! verify; then
    fail "systemd-analyze verify (exit $rc) on the units:
$out"
fi
echo "ok: gpuqd.socket and gpuqd.service verify clean ($("$sa" --version | head -1))"

# 2. a misspelled directive in the service.
stage misspelled
mutate gpuqd.service 's/^ProtectHome=yes/ProtecHome=yes/' '^ProtecHome=yes'
expect_reject "misspelled ProtecHome=" "Unknown key 'ProtecHome'"

# 3. a misspelled directive in the socket (proves the socket is verified too).
stage socket
mutate gpuqd.socket 's/^ListenStream=/ListenStrem=/' '^ListenStrem='
expect_reject "misspelled ListenStrem=" "Unknown key 'ListenStrem'"

# 4. a value that does not parse.
stage badvalue
mutate gpuqd.service 's/^WatchdogSec=.*/WatchdogSec=thirty/' '^WatchdogSec=thirty'
expect_reject "WatchdogSec=thirty" "Failed to parse sec value, ignoring: thirty"

# 5. gpuqd not where ExecStart= says.
stage nobinary
rm "$root/usr/sbin/gpuqd"
expect_reject "no /usr/sbin/gpuqd" "/usr/sbin/gpuqd is not executable"

echo "PASS"
exit 0
