#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/fuzz/coverage.sh - what the CI fuzz runs cover, by clang's source-based
# coverage: builds the fuzz targets with -fprofile-instr-generate
# -fcoverage-mapping (in build-cov/, or DIR), runs each target's ctest
# command (the CI one: -seed=1, its -runs, the read-only seed corpus, the
# dictionary), and prints libFuzzer's final edge count and llvm-cov's line
# and region coverage of the files each target is for, function by function
# for proto/header.c (gpuq_request_check among them).
#
#   tests/fuzz/coverage.sh [DIR]             the CI runs of fuzz_header,
#                                            fuzz_npy and fuzz_config
#   tests/fuzz/coverage.sh --old [--seed N] [DIR]
#                                            fuzz_header as CI ran it before
#                                            it had a corpus: an empty corpus
#                                            directory (a temporary one), no
#                                            dictionary, -runs=200000
#                                            -max_len=4096, a random seed
#                                            unless --seed N
#
# Needs clang, llvm-profdata and llvm-cov (the -14 ones of Debian 12 are
# found too). Nothing is written outside DIR except the temporary corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
JOBS=$(nproc 2>/dev/null || echo 2)

old=0
seed=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --old) old=1 ;;
    --seed)
        seed=$2
        shift
        ;;
    -*)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
        exit 2
        ;;
    *) break ;;
    esac
    shift
done
B=$(realpath -m "${1:-$ROOT/build-cov}")

tool() { # the first of NAME-14, NAME that exists
    for t in "$1-14" "$1"; do
        command -v "$t" >/dev/null && { echo "$t"; return; }
    done
    echo "coverage.sh: $1 not found (apt-get install llvm-14)" >&2
    exit 2
}
PROFDATA=$(tool llvm-profdata)
COV=$(tool llvm-cov)

echo "== building $B (clang, GPUQ_FUZZ, source-based coverage)"
CC=clang cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUQ_FUZZ=ON \
    -DGPUQ_WITH_CUDA=OFF -DCMAKE_C_FLAGS="-fprofile-instr-generate -fcoverage-mapping" \
    -DCMAKE_EXE_LINKER_FLAGS="-fprofile-instr-generate" >/dev/null
cmake --build "$B" -j "$JOBS" --target fuzz_header fuzz_npy fuzz_config >/dev/null

P="$B/coverage"
rm -rf "$P"
mkdir -p "$P"

# run NAME CMD...: CMD with its profile in $P/NAME.profraw; the edge count
run() {
    local name=$1
    shift
    local t0=$SECONDS
    LLVM_PROFILE_FILE="$P/$name.profraw" "$@" >"$P/$name.log" 2>&1 || {
        tail -40 "$P/$name.log" >&2
        echo "coverage.sh: $name failed (log: $P/$name.log)" >&2
        exit 1
    }
    "$PROFDATA" merge -sparse "$P/$name.profraw" -o "$P/$name.profdata"
    echo "== $name: $(grep -E '#[0-9]+[[:space:]]+DONE' "$P/$name.log" | sed 's/^[0-9]*: //; s/lim:.*//') in $((SECONDS - t0)) s"
}

# report NAME FILE...: per-file totals, then per function for proto/header.c
report() {
    local name=$1
    shift
    local bin="$B/tests/fuzz/$name" files=()
    for f in "$@"; do files+=("$ROOT/$f"); done
    "$COV" report "$bin" -instr-profile="$P/$name.profdata" "${files[@]}" |
        sed "s|$ROOT/||"
    if [[ " $* " == *" proto/header.c "* ]]; then
        echo "-- proto/header.c by function (regions, missed, cover; lines, missed, cover)"
        "$COV" report "$bin" -instr-profile="$P/$name.profdata" --show-functions \
            "$ROOT/proto/header.c" |
            awk '{ sub(/^header\.c:/, "", $1) }
                $1 ~ /^(gpuq_request_check|gpuq_request_decode|decode_value|check_normalize|check_haversine|check_grid|check_pairwise|gpuq_request_encode|gpuq_reply_decode|reply_encode)$/ {
                printf "   %-22s %5s %5s %8s   %5s %5s %8s\n", $1, $2, $3, $4, $5, $6, $7 }'
    fi
}

if [[ $old -eq 1 ]]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    args=(-runs=200000 -max_len=4096)
    [[ -n $seed ]] && args+=("-seed=$seed")
    run fuzz_header "$B/tests/fuzz/fuzz_header" "${args[@]}" "$tmp"
    report fuzz_header proto/header.c proto/mpread.c proto/frame.c
    exit 0
fi

# The CI commands, as ctest runs them.
for t in fuzz_header fuzz_npy fuzz_config; do
    run "$t" ctest --test-dir "$B" --no-tests=error -R "^$t\$" -V
done
report fuzz_header proto/header.c proto/mpread.c proto/frame.c proto/utf8.c
report fuzz_npy client/cli/npy.c
report fuzz_config server/service/config.c server/service/config_file.c server/service/config_keys.c
