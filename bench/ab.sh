#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/ab.sh BASE_DIR - same-run A/B of gpuq_bench on a GPU machine: the
# tree in BASE_DIR (e.g. `git archive OLD | tar -x -C .device/base`, carried)
# against this tree's build-gpu (built by bench/gpu_run.sh first), two
# interleaved rounds each, so a change is judged against run-to-run spread.
# Prints each run's table (gpuq, in-process peer, ratio, errors) and its
# "bench:" total; a run that fails (exit status, errors) is marked FAIL and
# makes the script exit 1. A base tree older than the error-counting
# gpuq_bench prints no errors column and no total: read its rows with care.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BASE=${1:?usage: bench/ab.sh BASE_DIR}
PREFIX=${GPUQ_DEPS_PREFIX:-/tmp/gpuq-deps}
unset CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH
[[ -x /usr/bin/gcc ]] && export CC=/usr/bin/gcc CXX=/usr/bin/g++
cmake -S "$BASE" -B build-base -DCMAKE_CUDA_HOST_COMPILER="${CXX:-g++}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUQ_WITH_CUDA=ON -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
    -DGPUQ_PYTHON="$(command -v python3)" >/tmp/ab_configure.log 2>&1 ||
    { tail -20 /tmp/ab_configure.log; exit 1; }
cmake --build build-base -j "$(nproc)" --target gpuqd gpuq_bench >/tmp/ab_build.log 2>&1 ||
    { tail -20 /tmp/ab_build.log; exit 1; }
rc=0
for round in 1 2; do
    for t in base gpu; do
        echo "== $t round $round"
        build-$t/bench/gpuq_bench --device cuda --gpuqd build-$t/server/gpuqd >/tmp/ab_$t.txt 2>&1
        st=$?
        grep -E '^\||^bench: [0-9]+ errors' /tmp/ab_$t.txt | grep -v -- '---'
        if [[ $st -ne 0 ]]; then
            echo "FAIL: $t round $round: gpuq_bench exit $st"
            grep -vE '^\||^bench: [0-9]+ errors' /tmp/ab_$t.txt | head -10
            rc=1
        fi
    done
done
exit $rc
