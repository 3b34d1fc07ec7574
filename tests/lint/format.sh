#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/lint/format.sh SRC_DIR [CLANG_FORMAT] - every C, header and CUDA file
# of the tree is as the checked-in .clang-format writes it.
#
# Formatting differs between clang-format majors, so the check pins the one
# CI installs (Debian 12: 14). Without it, or with another major, the test is
# skipped (exit 77) - unless GPUQ_REQUIRE_LINT=1 (CI sets it), where that is
# a failure. To fix a red run: clang-format -i on the files it names.
# --self-test: a file formatted otherwise must be found.
set -uo pipefail
SRC=${1:?usage: format.sh SRC_DIR [CLANG_FORMAT] | --self-test}
CF=${2:-}
WANT_MAJOR=14

skip() {
    if [[ ${GPUQ_REQUIRE_LINT:-0} == 1 ]]; then
        echo "FAIL: $* (GPUQ_REQUIRE_LINT=1)"
        exit 1
    fi
    echo "SKIP: $*"
    exit 77
}

if [[ -z $CF ]]; then
    CF=$(command -v clang-format-$WANT_MAJOR || command -v clang-format || true)
fi
[[ -n $CF && -x $CF ]] || skip "no clang-format"
major=$("$CF" --version | sed -nE 's/.*version ([0-9]+)\..*/\1/p')
[[ $major == "$WANT_MAJOR" ]] || skip "$CF is clang-format $major, the tree is formatted by $WANT_MAJOR"

check() { # check ROOT: list the files clang-format would change; 0 when none
    local root=$1 bad=0 f
    while IFS= read -r -d '' f; do
        if ! "$CF" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
            echo "not formatted: ${f#"$root"/}"
            bad=1
        fi
    done < <(find "$root"/proto "$root"/server "$root"/client "$root"/kernels "$root"/ops \
        "$root"/tests "$root"/bench -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
        -o -name '*.cuh' \) -not -path '*/corpus_*' -print0 2>/dev/null)
    return $bad
}

if [[ $SRC == --self-test ]]; then
    T=$(mktemp -d)
    trap 'rm -rf "$T"' EXIT
    mkdir -p "$T/proto"
    cp "$(dirname "$0")/../../.clang-format" "$T/"
    printf 'int f(void)\n{\n    return 0;\n}\n' >"$T/proto/good.c"
    check "$T" >/dev/null || { echo "FAIL: a formatted file was reported"; exit 1; }
    printf 'int g(void) { return  1; }\n' >"$T/proto/bad.c"
    out=$(check "$T")
    [[ $out == "not formatted: proto/bad.c" ]] || { echo "FAIL: planted file not found: $out"; exit 1; }
    echo "format self-test: ok"
    exit 0
fi

if check "$SRC"; then
    echo "format: every file is clang-format $WANT_MAJOR clean"
    exit 0
fi
echo "FAIL: run clang-format -i on the files above"
exit 1
