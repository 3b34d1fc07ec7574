#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# runner_self_test.sh RUN_EXAMPLE.SH GPUQD GPUQCTL PYTHON SRCDIR - the
# example runner fails an example for each thing it promises to check: a
# non-zero exit, an expected line missing, a file not written, a --check
# that fails, a resident array left behind; and passes one that does all
# right (else the examples' tests could not fail). Exit 0 when every case
# went as it should, else 1 naming the case.
set -euo pipefail
run=$1 gpuqd=$2 gpuqctl=$3 python=$4 src=$5
fails=0
# case NAME WANT_RC WANT_LINE ARGS...: run the runner, its exit status and
# a line of its output (grep -E) as wanted.
case_() {
    local name=$1 want_rc=$2 want_line=$3
    shift 3
    local rc=0 out
    out=$(bash "$run" --gpuqd "$gpuqd" --gpuqctl "$gpuqctl" --python "$python" --src "$src" \
        "$@" 2>&1) || rc=$?
    if [[ $rc -ne $want_rc ]] || ! grep -Eq -- "$want_line" <<<"$out"; then
        echo "FAIL: $name: runner exited $rc (want $want_rc), want a line /$want_line/; it printed:"
        echo "$out"
        fails=$((fails + 1))
    else
        echo "ok: $name"
    fi
}
case_ "a good example passes" 0 '^example passed: ' --expect '^hello$' --file f.txt \
    --check 'grep -qx hello f.txt' -- sh -c 'echo hello; echo hello >f.txt'
case_ "a non-zero exit fails" 1 '^FAIL: sh -c echo hello; exit 3 exited 3$' --expect '^hello$' \
    -- sh -c 'echo hello; exit 3'
case_ "a missing line fails" 1 '^FAIL: no output line matches /\^bye\$/$' --expect '^bye$' \
    -- sh -c 'echo hello'
case_ "a missing file fails" 1 '^FAIL: f.txt was not written' --file f.txt -- sh -c 'echo hello'
case_ "a failing check fails" 1 "^FAIL: check 'grep -qx bye f.txt' exited 1$" \
    --check 'grep -qx bye f.txt' -- sh -c 'echo hello >f.txt'
# shellcheck disable=SC2016 # expanded by the check's own shell
case_ "a check sees the example's environment" 0 '^example passed: ' \
    --check 'test -n "$GPUQ_SOCKET" && "$PYTHON" -c "import gpuq"' -- true
case_ "a resident array left behind fails" 1 '^FAIL: resident arrays left behind: ' \
    -- sh -c "'$python' -c 'import numpy as np; np.save(\"a.npy\", np.ones(3))' &&
              gpuqctl put left-behind a.npy"
[[ $fails -eq 0 ]] || exit 1
echo "runner self-test ok"
