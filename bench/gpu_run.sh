#!/usr/bin/env bash
# bench/gpu_run.sh - the one command for a GPU machine with no package registry.
#
# Unpacks the Debian packages carried in .device/debs into a prefix (never into
# /), builds with CUDA for sm_90 (+PTX), runs the whole suite including the
# `gpu` label with GPUQ_REQUIRE_GPU=1 (a missing GPU fails), runs the gpu
# suite again under compute-sanitizer (memcheck, racecheck), runs the
# benchmarks, and prints a short summary table last. Logs go to $OUT (or
# build-gpu/logs) when set.
set -uo pipefail
cd "$(dirname "$0")/.."
# GPUQ_STEPS picks what runs after the (incremental) build, so a short device
# lease can take it in two calls: "ctest sanitize" then "bench timing".
STEPS=" ${GPUQ_STEPS:-ctest sanitize bench timing} "
want() { [[ $STEPS == *" $1 "* ]]; }
ROOT=$(pwd)
PREFIX=${GPUQ_DEPS_PREFIX:-/tmp/gpuq-deps}
LOGS=$ROOT/build-gpu/logs
mkdir -p "$PREFIX" "$LOGS"
declare -a ROWS=()
row() { ROWS+=("$(printf '%-34s %s' "$1" "$2")"); }

if [[ -d .device/debs ]]; then
    for f in .device/debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
fi
PY=$(command -v python3)
# prometheus_client (for the metrics test) comes as a carried Debian package.
export PYTHONPATH="$PREFIX/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}"
# The image's default compiler (/opt/gcc) resolves C headers to libstdc++'s
# wrappers; build C with the distribution's gcc and no inherited include path.
unset CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH
[[ -x /usr/bin/gcc ]] && export CC=/usr/bin/gcc
[[ -x /usr/bin/g++ ]] && export CXX=/usr/bin/g++
echo "CC=${CC:-default} $(${CC:-cc} --version | head -1)" | tee "$LOGS/env.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/gpu.txt"

[[ -n ${GPUQ_KEEP_CACHE:-} ]] || rm -rf build-gpu/CMakeCache.txt build-gpu/CMakeFiles
cmake -S "$ROOT" -B build-gpu -DCMAKE_CUDA_HOST_COMPILER=${CXX:-g++} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUQ_WITH_CUDA=ON \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" -DGPUQ_PYTHON="$PY" >"$LOGS/configure.log" 2>&1 \
    || { tail -30 "$LOGS/configure.log"; exit 1; }
if cmake --build build-gpu -j "$(nproc)" >"$LOGS/build.log" 2>&1; then row build ok; else
    tail -40 "$LOGS/build.log"; row build FAILED; printf '%s\n' "${ROWS[@]}"; exit 1; fi

export GPUQ_REQUIRE_GPU=1
# The systemd-label tests need systemd's tools (systemd-analyze,
# systemd-socket-activate); a GPU image may have none. CI runs them.
LE=()
if ! command -v systemd-socket-activate >/dev/null || ! command -v systemd-analyze >/dev/null; then
    LE=(-LE systemd)
    row "systemd label" "not run here: no systemd tools on this machine (CI runs it)"
fi
if want ctest; then
(cd build-gpu && ctest "${LE[@]}" --output-on-failure -j 4 >"$LOGS/ctest.log" 2>&1)
row "ctest (all labels${LE:+ but systemd})" "$(grep -E 'tests passed|tests failed' "$LOGS/ctest.log" | tail -1)"
grep -E '^\s*[0-9]+/[0-9]+ Test' "$LOGS/ctest.log" | grep -v Passed | head -20
fi

# compute-sanitizer over the gpu kernel suite and one end-to-end CUDA suite.
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [[ -n "$CS" ]] && want sanitize; then
    for tool in memcheck racecheck; do
        for t in test_gpu_kernels; do
            [[ -x build-gpu/tests/gpu/$t ]] || continue
            CK_FORK=no CK_DEFAULT_TIMEOUT=600 GPUQ_SANITIZER_SMALL=1 \
                "$CS" --tool "$tool" --error-exitcode 9 "build-gpu/tests/gpu/$t" \
                >"$LOGS/cs_${tool}_$t.log" 2>&1
            rc=$?
            row "compute-sanitizer $tool $t" "exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/cs_${tool}_$t.log" | tr -d '=' | xargs)"
        done
    done
    # The daemon itself under the sanitizers, driven by the CUDA e2e suites;
    # --error-exitcode makes any sanitizer report fail the test case that
    # stops that daemon
    # (not test_e2e_cuda: its injected faults are errors by design).
    for tool in memcheck racecheck; do
        for t in e2e/test_e2e_flow e2e/test_e2e_bad; do
            name=$(basename $t)
            GPUQ_TEST_DEVICE=cuda CK_DEFAULT_TIMEOUT=600 \
                GPUQ_TEST_DAEMON_WRAPPER="$CS --tool $tool --error-exitcode 9" \
                timeout 300 "build-gpu/tests/$t" >"$LOGS/cs_${tool}_gpuqd_$name.log" 2>&1
            rc=$?
            row "compute-sanitizer $tool gpuqd ($name)" "exit $rc; $(grep -E '^[0-9]+%: Checks' "$LOGS/cs_${tool}_gpuqd_$name.log" | tail -1); $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/cs_${tool}_gpuqd_$name.log" | sort | uniq -c | tr -d '=' | xargs)"
        done
    done
fi

if [[ -x build-gpu/bench/gpuq_bench ]] && want bench; then
    # The completion path compared: adaptive event spin (default, 50 us)
    # against doorbells only (GPUQ_CUDA_SPIN_US=0).
    build-gpu/bench/gpuq_bench --device cuda --gpuqd build-gpu/server/gpuqd >"$LOGS/bench.txt" 2>&1
    row "bench (spin 50 us)" "exit $?"
    GPUQ_CUDA_SPIN_US=0 build-gpu/bench/gpuq_bench --device cuda --gpuqd build-gpu/server/gpuqd \
        >"$LOGS/bench_nospin.txt" 2>&1
    row "bench (doorbells only)" "exit $?"
fi

# Where the time of one large request goes (CUDA events), through gpuqctl.
if [[ -x build-gpu/client/gpuqctl ]] && want timing; then
    T=$(mktemp -d)
    "$PY" -c "import numpy as np; np.save('$T/x.npy', (np.random.rand(10**7) + 0.5).astype('float32'))"
    build-gpu/server/gpuqd --device cuda --socket "$T/s.sock" --log-level warn 2>"$LOGS/timing_gpuqd.log" &
    DP=$!
    for _ in $(seq 200); do [[ -S $T/s.sock ]] && break; sleep 0.1; done
    for k in 1 2 3; do # the first one warms the pools
        line=$(build-gpu/client/gpuqctl --socket "$T/s.sock" normalize --method l2 --timing \
            "$T/x.npy" -o "$T/y.npy" 2>&1 | grep timing)
    done
    row "normalize 10^7 f32 l2, --timing" "${line:-no timing line}"
    kill "$DP"; wait "$DP"
    rm -rf "$T"
fi

printf '%s\n' "${ROWS[@]}" >"$LOGS/summary.txt"
[[ -n "${OUT:-}" ]] && tar -czf "$OUT/logs.tgz" -C "$ROOT/build-gpu" logs
echo
echo "================ summary ================"
printf '%s\n' "${ROWS[@]}"
[[ -f "$LOGS/bench.txt" ]] && { echo "-- spin 50 us (default)"; grep -E '^\|' "$LOGS/bench.txt"; }
[[ -f "$LOGS/bench_nospin.txt" ]] && { echo "-- doorbells only (GPUQ_CUDA_SPIN_US=0)"; grep -E '^\|' "$LOGS/bench_nospin.txt"; }
exit 0
