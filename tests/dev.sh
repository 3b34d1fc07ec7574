#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/dev.sh - one entry point for a fresh Debian 12 machine.
#
#   tests/dev.sh daemon   install what is missing, build, run gpuqd in the
#                         foreground on its default socket (--device auto)
#   tests/dev.sh test     install what is missing, build, run the whole ctest
#                         suite: normal build (Release, -Werror, CUDA kernels
#                         and tests included; ctest -LE gpu). A few minutes
#                         on 2 cores (README: Quick start)
#   tests/dev.sh ci       what CI runs (.ci/run): test, then the ASan+UBSan
#                         build (ctest -LE gpu), the libFuzzer targets
#                         (ctest -L fuzz: fixed seeds, bounded runs, the
#                         checked-in corpora as read-only seeds; about 4
#                         minutes on 2 cores; tests/fuzz/coverage.sh says
#                         what they cover), and the mutation check
#                         (tests/mutate: planted bugs the suite must catch);
#                         40 to 60 minutes on 2 cores
#   tests/dev.sh mutate   the mutation check alone (tests/mutate/run.py)
#   tests/dev.sh build    install and build only
#
# Needs root (or sudo) only to install packages. The CUDA toolkit is used when
# found (/usr/local/cuda); without it the CPU backend alone is built.
#
# build/ is shared by daemon, build, test and ci, in any order: all four
# configure it as Release, test, ci (and build) with the tests on and -Werror
# (GPUQ_WERROR, off for anyone else building from source), so the build the
# suite runs on is CI's Release -Werror build and the one cpack packages.
# daemon turns the tests off only in a fresh build/ (no check or numpy needed
# to run the daemon); in one that has them it keeps them. Every ctest call
# passes --no-tests=error: a run that finds no test fails
# (tests/lint/quickstart.sh checks both).
#
# GPUQ_BUILD_ROOT (default: the checkout) is where build/, build-asan/ and
# build-fuzz/ go.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BROOT=${GPUQ_BUILD_ROOT:-$ROOT}
JOBS=$(nproc 2>/dev/null || echo 2)

PKGS=(cmake make gcc g++ pkg-config libuv1-dev libmsgpack-dev zlib1g-dev check python3-numpy
      python3-scipy python3-msgpack python3-pytest python3-venv
      libinih-dev libsystemd-dev systemd python3-prometheus-client dpkg-dev file scdoc
      python3-yaml python3-matplotlib)
[[ "${1:-}" == ci ]] && PKGS+=(clang libclang-rt-14-dev)

install_deps() {
    local missing=()
    for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    echo "dev.sh: installing ${missing[*]}"
    local sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

build() { # build DIR BUILD_TYPE cmake-args...
    local dir=$1 type=$2
    shift 2
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="$type" "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

case "${1:-}" in
daemon)
    install_deps
    # Tests off only in a fresh build/: one that 'dev.sh test' made keeps them.
    tests=()
    [[ -f "$BROOT/build/CMakeCache.txt" ]] || tests=(-DGPUQ_BUILD_TESTS=OFF)
    build "$BROOT/build" Release "${tests[@]}"
    exec "$BROOT/build/server/gpuqd" --device auto "${@:2}"
    ;;
build)
    install_deps
    build "$BROOT/build" Release -DGPUQ_BUILD_TESTS=ON -DGPUQ_WERROR=ON
    ;;
test | ci)
    install_deps
    echo "== normal build: Release, -Werror, CUDA kernels when the toolkit is present, man pages"
    # Tests ON explicitly: 'dev.sh daemon' may have cached OFF in build/.
    build "$BROOT/build" Release -DGPUQ_BUILD_TESTS=ON -DGPUQ_WERROR=ON -DGPUQ_MAN=ON
    (cd "$BROOT/build" && ctest -LE gpu --no-tests=error --output-on-failure -j "$JOBS")
    [[ $1 == ci ]] || exit 0
    echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
    build "$BROOT/build-asan" RelWithDebInfo -DGPUQ_SANITIZE=ON -DGPUQ_WITH_CUDA=OFF -DGPUQ_WERROR=ON
    (cd "$BROOT/build-asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest -LE 'gpu|fuzz' --no-tests=error --output-on-failure -j "$JOBS")
    echo "== libFuzzer: frame and header decoder, .npy reader, config file, session state machine"
    CC=clang build "$BROOT/build-fuzz" RelWithDebInfo -DGPUQ_FUZZ=ON -DGPUQ_WITH_CUDA=OFF -DGPUQ_WERROR=ON
    # The fuzz tests read their corpora and must write nothing into the
    # source tree (a crash leaves its input in build-fuzz/tests/fuzz).
    before=$(git -C "$ROOT" status --porcelain --untracked-files=all -- tests 2>/dev/null || true)
    (cd "$BROOT/build-fuzz" && ctest -L fuzz --no-tests=error --output-on-failure)
    after=$(git -C "$ROOT" status --porcelain --untracked-files=all -- tests 2>/dev/null || true)
    if [[ "$before" != "$after" ]]; then
        echo "dev.sh: the fuzz tests changed the source tree:" >&2
        diff <(echo "$before") <(echo "$after") >&2 || true
        exit 1
    fi
    echo "== mutation check: every planted bug in tests/mutate/mutations.txt is caught"
    python3 "$ROOT/tests/mutate/run.py" --jobs "$JOBS"
    ;;
mutate)
    install_deps
    python3 "$ROOT/tests/mutate/run.py" --jobs "$JOBS" "${@:2}"
    ;;
*)
    echo "usage: tests/dev.sh daemon|test|ci|mutate|build" >&2
    exit 2
    ;;
esac
