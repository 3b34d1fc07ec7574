#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_example.sh - one of examples/ against a gpuqd of its own, as ctest
# runs it (tests/examples/CMakeLists.txt):
#
#   run_example.sh --gpuqd GPUQD --gpuqctl GPUQCTL --python PYTHON --src SRCDIR
#                  [--expect REGEX]... [--file PATH]... [--check SCRIPT]...
#                  -- COMMAND [ARG]...
#
# Starts GPUQD on the CPU backend (no state directory: nothing persists) on
# a socket in a temporary directory and waits until `gpuqctl ping`
# answers; runs COMMAND in a scratch directory of its own (the example's
# working directory) with GPUQ_SOCKET naming that socket, PYTHONPATH the
# in-tree Python client (SRCDIR/client/python), PYTHON the Python to use
# (the examples' shell scripts call "$PYTHON") and GPUQCTL's directory
# first on PATH. COMMAND's output is printed when it ends. Then checks:
#   - COMMAND exited 0;
#   - every --expect REGEX (grep -E) matches a line of its output;
#   - every --file PATH (relative to the scratch directory) exists and is
#     not empty;
#   - every --check SCRIPT (bash -c, in the scratch directory, with the same
#     environment) exits 0: the checks of what COMMAND wrote that are not
#     COMMAND's own (tests/examples/check_example.py);
#   - gpuqd lists no resident array afterwards (the example removed its own);
#   - gpuqd still answers, and on SIGTERM exits 0 within 20 s.
# Exit 0 when all hold, else 1 with a FAIL line for each that does not
# (gpuqd's log is printed then).
set -euo pipefail

gpuqd='' gpuqctl='' python='' src=''
expects=() files=() checks=()
while [[ $# -gt 0 ]]; do
    case $1 in
    --gpuqd) gpuqd=$2; shift 2 ;;
    --gpuqctl) gpuqctl=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --check) checks+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "run_example.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [[ -z $gpuqd || -z $gpuqctl || -z $python || -z $src || $# -eq 0 ]]; then
    echo "usage: run_example.sh --gpuqd P --gpuqctl P --python P --src DIR [--expect RE]... [--file F]... [--check SCRIPT]... -- CMD..." >&2
    exit 2
fi

tmp=$(mktemp -d /tmp/gpuq-example.XXXXXX)
sock=$tmp/gpuqd.sock
daemon=''
cleanup() {
    if [[ -n $daemon ]] && kill -0 "$daemon" 2>/dev/null; then
        kill -KILL "$daemon" 2>/dev/null || true
        wait "$daemon" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fails=0
bad() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

"$gpuqd" --device cpu --socket "$sock" --state-dir '' --log-level info >"$tmp/gpuqd.log" 2>&1 &
daemon=$!
ctl() { "$gpuqctl" --socket "$sock" "$@"; }
for _ in $(seq 200); do
    ctl ping >/dev/null 2>&1 && break
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
done
if ! ctl ping >/dev/null 2>&1; then
    echo "FAIL: gpuqd did not answer on $sock; its log:" >&2
    cat "$tmp/gpuqd.log" >&2
    exit 1
fi

mkdir "$tmp/work"
# COMMAND and the checks in the scratch directory, with the example's environment.
in_work() {
    (cd "$tmp/work" &&
        GPUQ_SOCKET=$sock PYTHON=$python PYTHONPATH="$src/client/python${PYTHONPATH:+:$PYTHONPATH}" \
            PYTHONDONTWRITEBYTECODE=1 PATH="$(dirname "$gpuqctl"):$PATH" "$@")
}
rc=0
in_work "$@" >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[[ $rc -eq 0 ]] || bad "$* exited $rc"
for re in "${expects[@]}"; do
    grep -Eq -- "$re" "$tmp/out" || bad "no output line matches /$re/"
done
for f in "${files[@]}"; do
    [[ -s "$tmp/work/$f" ]] || bad "$f was not written (or is empty)"
done
for chk in "${checks[@]}"; do
    crc=0
    in_work bash -c "$chk" || crc=$?
    [[ $crc -eq 0 ]] || bad "check '$chk' exited $crc"
done
left=$(ctl --json ls 2>&1) || bad "gpuqctl ls after the example: $left"
[[ $left == "[]" ]] || bad "resident arrays left behind: $left"

kill -TERM "$daemon"
drc=0
for _ in $(seq 200); do
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$daemon" 2>/dev/null; then
    bad "gpuqd did not exit within 20 s of SIGTERM"
else
    wait "$daemon" || drc=$?
    [[ $drc -eq 0 ]] || bad "gpuqd exited $drc"
fi
daemon=''
if [[ $fails -gt 0 ]]; then
    echo "--- gpuqd's log:" >&2
    cat "$tmp/gpuqd.log" >&2
    exit 1
fi
echo "example passed: $*"
