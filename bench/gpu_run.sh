#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/gpu_run.sh - the one command for a GPU machine with no package registry.
#
# Unpacks the Debian packages carried in .device/debs into a prefix (never into
# /), builds with CUDA for sm_90 (+PTX), runs the whole suite including the
# `gpu` label with GPUQ_REQUIRE_GPU=1 (a missing GPU fails), runs the gpu
# suite and the daemon again under compute-sanitizer (memcheck, racecheck),
# runs the benchmark (gpuq_bench: each row gpuq's figure, the in-process
# peer's, their ratio and the row's error count) with and without the
# completion spin, the pairwise kernels alone timed with CUDA events
# (gpuq_bench_kernels), the same rows with PyTorch in-process (bench/peer_torch.py,
# whose kernel-only torch.cdist rows are timed the same way), the issue's
# targets from those two (bench/targets.py),
# the mutation check's gpu mutations (tests/mutate/run.py --gpu-only), splits
# one large request with --timing, and prints a short summary table last.
#
# Every step is a row of that table marked ok or FAIL; a failing step (a
# test, a sanitizer report, a benchmark error, a missing tool the step needs)
# makes the script exit 1 after the table is printed.
#
# The whole output goes to a log, $OUT/gpu_run-DATE-GPU.log (build-gpu/logs/
# without $OUT; a GPUQ_STEPS part adds its steps to the name), whose header gives the date, the commit and the GPU, so that
# a run's log can be checked in as docs/runs/DATE-GPU.log; the step logs go
# to build-gpu/logs and, with $OUT, to $OUT/logs.tgz. The device machine has
# no .git: pass the commit as GPUQ_COMMIT=<hash> (else git is asked, else
# "unknown").
#
# GPUQ_STEPS picks what runs after the (incremental) build, so a short device
# lease can take it in two calls: "ctest sanitize" then "bench timing".
# "sanio" (not in the default list) runs compute-sanitizer over gpuqd under
# the I/O-thread and pinning suites (issue 28). "sanshm" (nor that) runs compute-sanitizer memcheck over
# the data plane's suites (shared-memory arenas, pipelining); "sanbatch"
# (nor that) memcheck and racecheck over batching's suites. "py" (not in
# the default list either) runs bench/py_bench.py: the Python client beside
# libgpuq on a CUDA gpuqd; "load" (nor that) runs bench/load.py, issues 12's
# and 28's load table (gpuqctl bench with streamers, py_bench.py --rows load,
# peer_torch.py), its table repeated in the summary; "scale" (nor that) runs bench/scale.py,
# the same load on every GPU against the first alone (the 2-GPU machine);
# "model" (nor that) runs gpuq_pipe_model, the device-only floor of the
# pipelined patterns. "resident" (nor that) runs bench/resident_bench.py,
# issue 29's resident-array rows beside PyTorch with the base on the GPU;
# "sanres" (nor that) compute-sanitizer over the knn kernels and gpuqd
# under the resident-array and row-batch suites.
# "cpu" (nor that) runs bench/cpu_vs_scipy.py: issue 31's table of the CPU
# backend (build-gpu's gpuqd --device cpu) beside SciPy and NumPy, this
# machine's cores.
# GPUQ_CTEST_R=REGEX limits the ctest step to the tests it matches;
# GPUQ_CPU_REPS (3) is the cpu step's --reps, GPUQ_CPU_ARGS more of its
# arguments (--only normalize). "moncost" (not in the default list) runs
# bench/monitor_cost.sh on cuda and on cpu: issue 31's cost of watching.
# "loopcost" (nor that) runs bench/loop_cost.py: the loop thread's CPU per
# small request, replies written by the loop or by the I/O threads.
# The build has -DGPUQ_WERROR=ON (as CI's); GPUQ_BUILD_TYPE picks its type
# (RelWithDebInfo by default; Release for the -O3 warnings).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
STEPS=" ${GPUQ_STEPS:-ctest sanitize mutate bench kernels peer timing} "
PREFIX=${GPUQ_DEPS_PREFIX:-/tmp/gpuq-deps}
LOGS=$ROOT/build-gpu/logs
# this run's step logs only (a part of a split run got its own back already)
rm -rf "$LOGS"
mkdir -p "$PREFIX" "$LOGS"

GPUS=$(nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1)
GPU_OK=$?
if [[ $GPU_OK -eq 0 ]]; then
    NGPU=$(grep -c . <<<"$GPUS")
    SLUG=$(head -1 <<<"$GPUS" | cut -d, -f2 | awk '{ print tolower($2) }')
    [[ $NGPU -gt 1 ]] && SLUG=${NGPU}x$SLUG
else
    SLUG=nogpu
fi
COMMIT=${GPUQ_COMMIT:-}
if [[ -z $COMMIT ]] && git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
    COMMIT=$(git -C "$ROOT" rev-parse HEAD)
    [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no) ]] && COMMIT+=" (with uncommitted changes)"
fi
DATE=$(date -u +%Y-%m-%d)
# A run split by GPUQ_STEPS names its parts: gpu_run-DATE-GPU-bench-timing.log.
PART=
[[ -n ${GPUQ_STEPS:-} ]] && PART=-$(xargs <<<"$GPUQ_STEPS" | tr ' ' '-')
RUNLOG=${OUT:-$LOGS}/gpu_run-$DATE-$SLUG$PART.log

main() {
    local -a ROWS=()
    local nfail=0
    # row STATUS NAME DETAIL: one line of the summary; FAIL counts.
    row() {
        ROWS+=("$(printf '%-4s  %-40s %s' "$1" "$2" "$3")")
        [[ $1 == FAIL ]] && nfail=$((nfail + 1))
        return 0
    }
    summary() {
        printf '%s\n' "${ROWS[@]}" >"$LOGS/summary.txt"
        [[ -n "${OUT:-}" ]] && tar -czf "$OUT/logs.tgz" -C "$ROOT/build-gpu" logs
        echo
        echo "================ summary ================"
        printf '%s\n' "${ROWS[@]}"
        local f
        for f in bench bench_nospin; do
            [[ -f "$LOGS/$f.txt" ]] || continue
            if [[ $f == bench ]]; then
                echo "-- gpuq_bench, spin 50 us (default)"
            else
                echo "-- gpuq_bench, doorbells only (GPUQ_CUDA_SPIN_US=0)"
            fi
            grep -E '^\||^bench: [0-9]+ errors' "$LOGS/$f.txt"
        done
        if [[ -f "$LOGS/bench_kernels.txt" ]]; then
            echo "-- gpuq's pairwise kernels alone, CUDA events (gpuq_bench_kernels)"
            grep -E '^\|' "$LOGS/bench_kernels.txt"
        fi
        if [[ -f "$LOGS/peer_torch.txt" ]]; then
            echo "-- PyTorch in-process, the same rows (bench/peer_torch.py)"
            grep -E '^\|' "$LOGS/peer_torch.txt"
        fi
        if [[ -f "$LOGS/load.txt" ]]; then
            echo "-- the load table, this run (bench/load.py)"
            grep -E '^\||^load: ' "$LOGS/load.txt"
        fi
        if [[ -f "$LOGS/loop_cost.txt" ]]; then
            echo "-- the loop thread per small request, this run (bench/loop_cost.py)"
            grep -E '^\||^loop_cost: ' "$LOGS/loop_cost.txt"
        fi
        if [[ -f "$LOGS/bench.txt" && -f "$LOGS/peer_torch.txt" ]]; then
            echo "-- the data-plane targets, this run (bench/targets.py)"
            python3 "$ROOT/bench/targets.py" "$LOGS/bench.txt" "$LOGS/peer_torch.txt"
        fi
        echo "==== $nfail failed step(s); log: $RUNLOG"
        [[ $nfail -eq 0 ]]
    }

    echo "gpuq bench/gpu_run.sh"
    echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit:  ${COMMIT:-unknown (no .git here and no GPUQ_COMMIT)}"
    echo "gpu:     ${GPUS//$'\n'/$'\n         '}"
    echo "host:    $(uname -srm), $(nproc) cores"
    echo "steps:   $STEPS"
    if [[ $GPU_OK -eq 0 ]]; then
        row ok "GPU" "$(head -1 <<<"$GPUS" | cut -d, -f2 | xargs)"
    else
        row FAIL "GPU" "nvidia-smi failed"
    fi

    if [[ -d .device/debs ]]; then
        local f bad=0
        for f in .device/debs/*.deb; do dpkg -x "$f" "$PREFIX" || bad=1; done
        if [[ $bad -eq 0 ]]; then
            row ok "unpack .device/debs" "into $PREFIX"
        else
            row FAIL "unpack .device/debs" "dpkg -x failed"
        fi
    fi
    local PY
    PY=$(command -v python3)
    # prometheus_client (for the metrics test) comes as a carried Debian package.
    export PYTHONPATH="$PREFIX/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}"
    # The image's default compiler (/opt/gcc) resolves C headers to libstdc++'s
    # wrappers; build C with the distribution's gcc and no inherited include path.
    unset CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH
    [[ -x /usr/bin/gcc ]] && export CC=/usr/bin/gcc
    [[ -x /usr/bin/g++ ]] && export CXX=/usr/bin/g++
    echo "cc:      ${CC:-default} $(${CC:-cc} --version | head -1)"
    echo "nvcc:    $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | grep -i release || echo none)"
    echo

    [[ -n ${GPUQ_KEEP_CACHE:-} ]] || rm -rf build-gpu/CMakeCache.txt build-gpu/CMakeFiles
    if ! cmake -S "$ROOT" -B build-gpu -DCMAKE_CUDA_HOST_COMPILER="${CXX:-g++}" \
        -DCMAKE_BUILD_TYPE="${GPUQ_BUILD_TYPE:-RelWithDebInfo}" -DGPUQ_WERROR=ON -DGPUQ_WITH_CUDA=ON \
        -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
        -DGPUQ_PYTHON="$PY" >"$LOGS/configure.log" 2>&1; then
        tail -30 "$LOGS/configure.log"
        row FAIL configure "see logs/configure.log"
        summary
        return 1
    fi
    if cmake --build build-gpu -j "$(nproc)" >"$LOGS/build.log" 2>&1; then
        row ok build ""
    else
        tail -40 "$LOGS/build.log"
        row FAIL build "see logs/build.log"
        summary
        return 1
    fi

    export GPUQ_REQUIRE_GPU=1
    # The systemd-label tests need systemd's tools (systemd-analyze,
    # systemd-socket-activate); a GPU image may have none. CI runs them.
    local -a LE=()
    if ! command -v systemd-socket-activate >/dev/null || ! command -v systemd-analyze >/dev/null; then
        LE=(-LE systemd)
        row skip "systemd label" "no systemd tools on this machine (CI runs it)"
    fi
    # GPUQ_CTEST_R=REGEX: only the tests it matches (a re-run of a few)
    [[ -n ${GPUQ_CTEST_R:-} ]] && LE+=(-R "$GPUQ_CTEST_R")
    local rc
    if want ctest; then
        echo "== ctest ${LE[*]}"
        (cd build-gpu && ctest "${LE[@]}" --no-tests=error --output-on-failure -j 4) 2>&1 | tee "$LOGS/ctest.log"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "ctest (all labels${LE:+ but systemd})" \
            "exit $rc; $(grep -E 'tests passed|tests failed' "$LOGS/ctest.log" | tail -1)"
    fi

    # cs_gpuqd CS TOOL TEST SECONDS: the CUDA end-to-end suite TEST
    # (tests/TEST) with each daemon it starts under compute-sanitizer TOOL;
    # a report exits 9 and fails the case that stops that daemon. Cases
    # tagged "fault" (a faulting kernel on purpose) are left out.
    cs_gpuqd() {
        local cs=$1 tool=$2 t=$3 secs=$4 name log rc
        name=$(basename "$t")
        log=$LOGS/cs_${tool}_gpuqd_$name.log
        echo "-- $tool gpuqd under $name ($(date -u +%T))"
        GPUQ_TEST_DEVICE=cuda CK_DEFAULT_TIMEOUT=600 CK_EXCLUDE_TAGS=fault \
            GPUQ_TEST_DAEMON_WRAPPER="$cs --tool $tool --error-exitcode 9" \
            timeout "$secs" "build-gpu/tests/$t" >"$log" 2>&1
        rc=$?
        row "$(okfail "$rc")" "compute-sanitizer $tool gpuqd ($name)" \
            "exit $rc; $(grep -E '^[0-9]+%: Checks' "$log" | tail -1); $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c | tr -d '=' | xargs)"
    }

    # One gpu suite (build-gpu/tests/gpu/NAME) under compute-sanitizer
    # TOOL with its small cases, at most SECS seconds: a row.
    cs_suite() {
        local cs=$1 tool=$2 t=$3 secs=$4 log rc
        log=$LOGS/cs_${tool}_$t.log
        echo "-- $tool $t ($(date -u +%T))"
        CK_FORK=no CK_DEFAULT_TIMEOUT=600 GPUQ_SANITIZER_SMALL=1 \
            timeout "$secs" "$cs" --tool "$tool" --error-exitcode 9 "build-gpu/tests/gpu/$t" >"$log" 2>&1
        rc=$?
        row "$(okfail "$rc")" "compute-sanitizer $tool $t" \
            "exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tr -d '=' | xargs)"
    }

    # compute-sanitizer over the gpu kernel suite, then the daemon itself
    # driven by the CUDA end-to-end suites: --error-exitcode makes any
    # sanitizer report fail the test case that stops that daemon (not
    # test_e2e_cuda: its injected faults are errors by design).
    if want sanitize; then
        local CS tool t log
        CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
        if [[ -z $CS ]]; then
            row FAIL "compute-sanitizer" "not found"
        else
            echo "== compute-sanitizer"
            for tool in memcheck racecheck; do
                for t in test_gpu_kernels test_gpu_knn test_gpu_gate; do
                    log=$LOGS/cs_${tool}_$t.log
                    echo "-- $tool $t ($(date -u +%T))"
                    # the gate suite's small case (its mid_run case runs
                    # hundreds of milliseconds of kernels per test)
                    local ck=()
                    [[ $t == test_gpu_gate ]] && ck=(CK_RUN_CASE=gate)
                    env "${ck[@]}" CK_FORK=no CK_DEFAULT_TIMEOUT=600 GPUQ_SANITIZER_SMALL=1 \
                        "$CS" --tool "$tool" --error-exitcode 9 "build-gpu/tests/gpu/$t" >"$log" 2>&1
                    rc=$?
                    row "$(okfail "$rc")" "compute-sanitizer $tool $t" \
                        "exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tr -d '=' | xargs)"
                done
            done
            for tool in memcheck racecheck; do
                for t in e2e/test_e2e_flow e2e/test_e2e_bad; do
                    cs_gpuqd "$CS" "$tool" "$t" 300
                done
            done
        fi
    fi

    # compute-sanitizer over issue 28's paths ("sanio", not in the default
    # list): gpuqd under memcheck while clients stream and trickle socket
    # bulk on its I/O threads and leave mid-transfer (test_e2e_iothreads),
    # and while staging grows and arenas are pinned on the pinning thread
    # (test_e2e_pin), and under racecheck for the first.
    if want sanio; then
        local CS3
        CS3=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
        if [[ -z $CS3 ]]; then
            row FAIL "compute-sanitizer" "not found"
        else
            cs_gpuqd "$CS3" memcheck e2e/test_e2e_iothreads 240
            cs_gpuqd "$CS3" memcheck e2e/test_e2e_pin 240
            cs_gpuqd "$CS3" racecheck e2e/test_e2e_iothreads 240
        fi
    fi

    # compute-sanitizer over the data plane (a step of its own: the whole
    # sanitize step does not fit one device call): memcheck of the pipelined
    # kernels' suite, and of gpuqd under the shared-memory and pipelining
    # end-to-end suites, where a client leaves with arena work in flight.
    # test_e2e_pipe's sticky_fault_mid_pipeline launches a faulting kernel
    # on purpose, which memcheck would report: its tcase is tagged "fault"
    # and left out here (CK_EXCLUDE_TAGS).
    if want sanshm; then
        local CS2
        CS2=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
        if [[ -z $CS2 ]]; then
            row FAIL "compute-sanitizer" "not found"
        else
            cs_suite "$CS2" memcheck test_gpu_pipe 240
            for t in e2e/test_e2e_shm gpu/test_e2e_pipe; do
                cs_gpuqd "$CS2" memcheck "$t" 240
            done
        fi
    fi

    # compute-sanitizer over resident arrays and their row batches (issue
    # 29; "sanres", not in the default list): memcheck of the knn kernels'
    # suite (the few-row distance kernel, rows run apart and together), and
    # of gpuqd under the resident-array suite (its "resident" case: the
    # persist case kills and restarts daemons) and the row-batch suite
    # (gathers and scatters of several sessions' host arrays), racecheck
    # over the last.
    if want sanres; then
        local CS4
        CS4=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
        if [[ -z $CS4 ]]; then
            row FAIL "compute-sanitizer" "not found"
        else
            cs_suite "$CS4" memcheck test_gpu_knn 300
            CK_RUN_CASE=resident cs_gpuqd "$CS4" memcheck e2e/test_e2e_resident 240
            cs_gpuqd "$CS4" memcheck e2e/test_e2e_rowbatch 240
            cs_gpuqd "$CS4" racecheck e2e/test_e2e_rowbatch 240
        fi
    fi

    # compute-sanitizer with batching on (issue 12): memcheck and racecheck
    # of the batched kernel's suite, and of gpuqd under the batching
    # end-to-end suite (a step of its own, as sanshm).
    if want sanbatch; then
        local CS3 tool3
        CS3=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
        if [[ -z $CS3 ]]; then
            row FAIL "compute-sanitizer" "not found"
        else
            for tool3 in memcheck racecheck; do
                cs_suite "$CS3" "$tool3" test_gpu_norm_batch 240
                cs_gpuqd "$CS3" "$tool3" e2e/test_e2e_batch 240
            done
        fi
    fi

    # The mutation check's gpu mutations (tests/mutate): planted bugs in the
    # CUDA code that the gpu suites must catch, on a scratch copy.
    if want mutate; then
        echo "== tests/mutate/run.py --gpu-only"
        "$PY" tests/mutate/run.py --gpu-only --jobs "$(nproc)" --scratch "$ROOT/build-gpu/mutate" \
            --cmake-arg=-DCMAKE_CUDA_HOST_COMPILER="${CXX:-g++}" \
            --cmake-arg=-DCMAKE_PREFIX_PATH="$PREFIX/usr" --cmake-arg=-DGPUQ_PYTHON="$PY" \
            2>&1 | tee "$LOGS/mutate.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "mutation check, gpu mutations" \
            "exit $rc; $(grep -E '^mutate: [0-9]+ of [0-9]+ mutations killed' "$LOGS/mutate.txt" | tail -1)"
    fi

    # The benchmark; the completion path compared: adaptive event spin
    # (default, 50 us) against doorbells only (GPUQ_CUDA_SPIN_US=0).
    if want bench; then
        local spin f label total
        for spin in default 0; do
            if [[ $spin == default ]]; then
                f=bench label="bench (spin 50 us)"
            else
                f=bench_nospin label="bench (doorbells only)"
            fi
            echo "== gpuq_bench, $label"
            if [[ $spin == default ]]; then
                build-gpu/bench/gpuq_bench --device cuda --gpuqd build-gpu/server/gpuqd 2>&1 |
                    tee "$LOGS/$f.txt"
            else
                GPUQ_CUDA_SPIN_US=0 build-gpu/bench/gpuq_bench --device cuda \
                    --gpuqd build-gpu/server/gpuqd 2>&1 | tee "$LOGS/$f.txt"
            fi
            rc=${PIPESTATUS[0]}
            total=$(grep -E '^bench: [0-9]+ errors' "$LOGS/$f.txt" | tail -1)
            row "$(okfail "$rc")" "$label" "exit $rc; ${total:-no total line}"
        done
    fi

    # The pairwise kernels alone (CUDA events, inputs on the device), to set
    # beside peer_torch.py's kernel-only torch.cdist rows.
    if want kernels; then
        echo "== gpuq_bench_kernels"
        build-gpu/bench/gpuq_bench_kernels 2>&1 | tee "$LOGS/bench_kernels.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "pairwise kernels alone" \
            "exit $rc; $(grep -E '^bench_kernels: [0-9]+ errors' "$LOGS/bench_kernels.txt" | tail -1)"
    fi

    # The device-only floor of the pipelined patterns (no daemon at all).
    if want model; then
        echo "== gpuq_pipe_model"
        build-gpu/bench/gpuq_pipe_model 2>&1 | tee "$LOGS/pipe_model.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "pipeline model (device only)" "exit $rc; $(tail -1 "$LOGS/pipe_model.txt")"
    fi

    # The PyTorch peer: the same rows done in a user's own process, this run.
    if want peer; then
        echo "== bench/peer_torch.py"
        "$PY" bench/peer_torch.py 2>&1 | tee "$LOGS/peer_torch.txt"
        rc=${PIPESTATUS[0]}
        if [[ $rc -eq 3 ]]; then
            row skip "PyTorch peer" "$(head -1 "$LOGS/peer_torch.txt")"
        else
            row "$(okfail "$rc")" "PyTorch peer" "exit $rc; $(grep -E '^peer_torch: [0-9]+ errors' "$LOGS/peer_torch.txt" | tail -1)"
        fi
    fi

    # The Python client beside libgpuq (issue 13's targets), on a CUDA gpuqd.
    if want py; then
        echo "== bench/py_bench.py"
        "$PY" bench/py_bench.py --gpuqd build-gpu/server/gpuqd --device cuda \
            --peer build-gpu/bench/gpuq_py_peer 2>&1 | tee "$LOGS/py_bench.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "Python client vs libgpuq" \
            "exit $rc; targets met: $(grep -cE '\| yes \|' "$LOGS/py_bench.txt") of $(grep -cE '\| (yes|NO) \|' "$LOGS/py_bench.txt")"
    fi

    # Issue 29's resident arrays beside PyTorch with the base on the GPU.
    if want resident; then
        echo "== bench/resident_bench.py"
        "$PY" bench/resident_bench.py --gpuqd build-gpu/server/gpuqd --device cuda 2>&1 |
            tee "$LOGS/resident.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "resident arrays vs PyTorch" \
            "exit $rc; targets met: $(grep -cE ' met$' "$LOGS/resident.txt") of $(grep -cE ' (met|MISSED)$' "$LOGS/resident.txt")"
    fi

    # Issues 12's and 28's load table (bench/load.py: gpuqctl bench with
    # streamers, libgpuq's and the Python client's blocking calls, PyTorch
    # in-process, on a CUDA gpuqd).
    if want load; then
        echo "== bench/load.py"
        "$PY" bench/load.py --gpuqd build-gpu/server/gpuqd --gpuqctl build-gpu/client/cli/gpuqctl \
            --peer build-gpu/bench/gpuq_py_peer --device cuda 2>&1 | tee "$LOGS/load.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "load table (gpuqctl bench, py_bench, PyTorch)" \
            "exit $rc; targets met: $(grep -cE '\| yes \| [0-9?]+ \|$' "$LOGS/load.txt") of $(grep -cE '\| (yes|NO|n/a) \| [0-9?]+ \|$' "$LOGS/load.txt")"
    fi

    # Issue 12's several-GPU row (bench/scale.py: every GPU against the first).
    if want scale; then
        echo "== bench/scale.py"
        "$PY" bench/scale.py --gpuqd build-gpu/server/gpuqd --gpuqctl build-gpu/client/cli/gpuqctl \
            --device cuda 2>&1 | tee "$LOGS/scale.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "several GPUs (gpuqctl bench)" \
            "exit $rc; $(grep -E '^scaling:' "$LOGS/scale.txt" | tail -1)"
    fi

    # Issue 31: what watching requests costs, nobody watching included
    # (bench/monitor_cost.sh), on the GPU and on the CPU backend.
    if want moncost; then
        local dev
        for dev in cuda cpu; do
            echo "== bench/monitor_cost.sh ($dev)"
            DEVICE=$dev ROUNDS=3 DURATION=2 bash bench/monitor_cost.sh build-gpu/server/gpuqd \
                build-gpu/client/cli/gpuqctl 2>&1 | tee "$LOGS/monitor_cost_$dev.txt"
            rc=${PIPESTATUS[0]}
            row "$(okfail "$rc")" "watching's cost ($dev)" \
                "exit $rc; $(grep -E '^ratio' "$LOGS/monitor_cost_$dev.txt" | tail -1 | xargs)"
        done
    fi

    # Issue 28's 300k row: the loop thread's CPU per small request, and the
    # ways of writing replies (bench/loop_cost.py).
    if want loopcost; then
        echo "== bench/loop_cost.py"
        "$PY" bench/loop_cost.py --gpuqd build-gpu/server/gpuqd --gpuqctl build-gpu/client/cli/gpuqctl \
            --device cuda 2>&1 | tee "$LOGS/loop_cost.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "loop thread per small request" \
            "exit $rc; $(grep -cE '^\| ' "$LOGS/loop_cost.txt") table lines"
    fi

    if want cpu; then
        echo "== bench/cpu_vs_scipy.py"
        "$PY" -u bench/cpu_vs_scipy.py --gpuqd build-gpu/server/gpuqd --reps "${GPUQ_CPU_REPS:-3}" ${GPUQ_CPU_ARGS:-} 2>&1 | tee "$LOGS/cpu_vs_scipy.txt"
        rc=${PIPESTATUS[0]}
        row "$(okfail "$rc")" "CPU backend vs SciPy/NumPy" \
            "exit $rc; $(grep -E '^cpu_vs_scipy: [0-9]+ (of [0-9]+ rows meet|errors)' "$LOGS/cpu_vs_scipy.txt" | sed 's/^cpu_vs_scipy: //' | paste -sd';')"
    fi

    # Where the time of one large request goes (CUDA events), through gpuqctl.
    if want timing; then
        echo "== normalize 10^7 f32 l2 --timing"
        local T DP line ctl_rc=0 drc
        T=$(mktemp -d)
        "$PY" -c "import numpy as np; np.save('$T/x.npy', (np.random.rand(10**7) + 0.5).astype('float32'))"
        build-gpu/server/gpuqd --device cuda --socket "$T/s.sock" --log-level warn \
            2>"$LOGS/timing_gpuqd.log" &
        DP=$!
        for _ in $(seq 200); do [[ -S $T/s.sock ]] && break; sleep 0.1; done
        line=
        for _ in 1 2 3; do # the first one warms the pools
            build-gpu/client/cli/gpuqctl --socket "$T/s.sock" normalize --method l2 --timing \
                "$T/x.npy" -o "$T/y.npy" >"$T/ctl.txt" 2>&1 || ctl_rc=$?
            cat "$T/ctl.txt"
            line=$(grep timing "$T/ctl.txt")
        done
        kill "$DP"
        wait "$DP"
        drc=$?
        rm -rf "$T"
        if [[ $ctl_rc -eq 0 && $drc -eq 0 && -n $line ]]; then
            row ok "normalize 10^7 f32 l2, --timing" "$line"
        else
            tail -5 "$LOGS/timing_gpuqd.log"
            row FAIL "normalize 10^7 f32 l2, --timing" "gpuqctl exit $ctl_rc, gpuqd exit $drc; ${line:-no timing line}"
        fi
    fi

    summary
}

want() { [[ $STEPS == *" $1 "* ]]; }
okfail() { [[ $1 -eq 0 ]] && echo ok || echo FAIL; }

main 2>&1 | tee "$RUNLOG"
exit "${PIPESTATUS[0]}"
