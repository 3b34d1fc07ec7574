#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/lint/quickstart.sh SOURCE_DIR - the README's two Quick start
# commands, `tests/dev.sh daemon` and `tests/dev.sh test`, and CI's
# `tests/dev.sh ci`, in any order, configure a build whose ctest finds the
# whole suite; test runs that suite alone, ci the sanitizer and fuzz suites
# and the mutation check after it.
#
# Runs the real tests/dev.sh of SOURCE_DIR with its build trees in a
# temporary GPUQ_BUILD_ROOT, four times: daemon (a fresh build/), test, ci,
# then daemon again. Configuring is real (cmake, with the CUDA backend off and
# the reference python given, to keep it quick); the rest is stubbed on PATH:
# `cmake --build` builds nothing (it leaves a fake gpuqd for daemon to
# exec), ctest lists the tests it was asked to run (ctest -N with the same
# arguments) and fails when the call lacks --no-tests=error or when they come
# to none, dpkg-query says every package is installed, and the mutation
# check is not run. Then build/'s cache must say Release, tests on, -Werror
# on, after test and ci and still after the second daemon. Needs no root, no
# network; about a minute on 2 cores (six configures).
#
# GPUQ_PYTHON (the reference python, from the build) is passed on.
set -euo pipefail
src=$(cd "${1:?usage: quickstart.sh SOURCE_DIR}" && pwd)
# dev.sh ci configures the fuzz build with clang (dev.sh installs it on
# Debian; a machine without it, like the GPU image, cannot run this): skipped
# (77), unless GPUQ_REQUIRE_LINT=1 (CI sets it), where that is a failure.
if ! command -v clang >/dev/null; then
    if [[ ${GPUQ_REQUIRE_LINT:-0} == 1 ]]; then
        echo "FAIL: no clang (GPUQ_REQUIRE_LINT=1)" >&2
        exit 1
    fi
    echo "quickstart: skipped: no clang here for dev.sh ci's fuzz build"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-quickstart.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

REAL_CMAKE=$(command -v cmake)
REAL_CTEST=$(command -v ctest)
REAL_PY=$(command -v python3)
export REAL_CMAKE REAL_CTEST REAL_PY
export QS_LOG=$tmp/calls.log
: >"$QS_LOG"
extra=(-DGPUQ_WITH_CUDA=OFF)
[[ -n "${GPUQ_PYTHON:-}" ]] && extra+=(-DGPUQ_PYTHON="$GPUQ_PYTHON")
command -v scdoc >/dev/null || extra+=(-DGPUQ_MAN=AUTO) # man pages are not what this checks
export QS_EXTRA="${extra[*]}"

mkdir -p "$tmp/bin"
cat >"$tmp/bin/cmake" <<'EOF'
#!/usr/bin/env bash
echo "cmake $*" >>"$QS_LOG"
if [[ "${1:-}" == --build ]]; then
    mkdir -p "$2/server"
    printf '#!/bin/sh\necho "gpuqd $*" >>"%s"\n' "$QS_LOG" >"$2/server/gpuqd"
    chmod +x "$2/server/gpuqd"
    exit 0
fi
# shellcheck disable=SC2086 # QS_EXTRA is a list of -D arguments
exec "$REAL_CMAKE" "$@" $QS_EXTRA
EOF
cat >"$tmp/bin/ctest" <<'EOF'
#!/usr/bin/env bash
echo "ctest $* (in $PWD)" >>"$QS_LOG"
case " $* " in
*" --no-tests=error "*) ;;
*) echo "quickstart: ctest without --no-tests=error in $PWD: ctest $*" >&2; exit 1 ;;
esac
out=$("$REAL_CTEST" -N "$@")
n=$(sed -n 's/^Total Tests: //p' <<<"$out")
echo "  lists ${n:-?} tests" >>"$QS_LOG"
if [[ -z "$n" || "$n" -eq 0 ]]; then
    echo "quickstart: ctest $* in $PWD finds no test" >&2
    exit 1
fi
EOF
cat >"$tmp/bin/dpkg-query" <<'EOF'
#!/bin/sh
printf 'install ok installed'
EOF
cat >"$tmp/bin/python3" <<'EOF'
#!/usr/bin/env bash
case "${1:-}" in
*/tests/mutate/run.py) echo "mutate $*" >>"$QS_LOG"; exit 0 ;;
esac
exec "$REAL_PY" "$@"
EOF
chmod +x "$tmp/bin"/*
export PATH="$tmp/bin:$PATH"
export GPUQ_BUILD_ROOT=$tmp/b
mkdir -p "$GPUQ_BUILD_ROOT"

cache() { sed -n "s/^$1:[A-Z]*=//p" "$GPUQ_BUILD_ROOT/build/CMakeCache.txt"; }
step() { # step NAME: run tests/dev.sh NAME, log kept
    echo "== tests/dev.sh $1" | tee -a "$QS_LOG"
    if ! bash "$src/tests/dev.sh" "$1" >"$tmp/$1.out" 2>&1; then
        cat "$tmp/$1.out" >&2
        bad "tests/dev.sh $1 failed"
        return 1
    fi
}

step daemon || true
grep -q '^gpuqd --device auto' "$QS_LOG" || bad "dev.sh daemon did not run gpuqd"
[[ "$(cache GPUQ_BUILD_TESTS)" == OFF ]] || bad "a fresh dev.sh daemon configured the tests"

build_ok() { # STEP: build/ is the suite's Release -Werror build with the tests
    [[ "$(cache GPUQ_BUILD_TESTS)" == ON ]] || bad "dev.sh $1: GPUQ_BUILD_TESTS=$(cache GPUQ_BUILD_TESTS)"
    [[ "$(cache GPUQ_WERROR)" == ON ]] || bad "dev.sh $1: GPUQ_WERROR=$(cache GPUQ_WERROR)"
    [[ "$(cache CMAKE_BUILD_TYPE)" == Release ]] || bad "dev.sh $1: CMAKE_BUILD_TYPE=$(cache CMAKE_BUILD_TYPE)"
}
ctest_runs() { grep -c '^ctest ' "$QS_LOG" || true; }

step test || true
build_ok "test after daemon"
runs=$(ctest_runs)
[[ "$runs" -eq 1 ]] || bad "dev.sh test ran ctest $runs times (the normal build's suite, once)"
grep -q "^ctest .*(in $GPUQ_BUILD_ROOT/build)$" "$QS_LOG" || bad "dev.sh test did not run ctest in build/"
! grep -q '^mutate ' "$QS_LOG" || bad "dev.sh test ran the mutation check (that is ci's)"

step ci || true
build_ok ci
runs=$(($(ctest_runs) - runs))
[[ "$runs" -ge 3 ]] || bad "dev.sh ci ran ctest $runs times (normal, sanitizers, fuzz)"
grep -q '^mutate ' "$QS_LOG" || bad "dev.sh ci did not reach the mutation check"

step daemon || true
[[ "$(cache GPUQ_BUILD_TESTS)" == ON ]] || bad "dev.sh daemon after test and ci turned the tests off"
[[ "$(grep -c '^gpuqd ' "$QS_LOG")" -eq 2 ]] || bad "the second dev.sh daemon did not run gpuqd"

echo "--- calls"
cat "$QS_LOG"
if [[ $fail -ne 0 ]]; then
    echo "quickstart: FAILED" >&2
    exit 1
fi
echo "quickstart: OK (daemon, test, ci, daemon: every ctest call found tests)"
