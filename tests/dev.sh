#!/usr/bin/env bash
# tests/dev.sh - one entry point for a fresh Debian 12 machine.
#
#   tests/dev.sh daemon   install what is missing, build, run gpuqd in the
#                         foreground on its default socket (--device auto)
#   tests/dev.sh test     install what is missing, build, run the suite:
#                         normal build (ctest -LE gpu), ASan+UBSan build
#                         (ctest -LE gpu), the libFuzzer targets
#                         (ctest -L fuzz: fixed seeds, bounded runs, the
#                         checked-in corpora as read-only seeds; about 4
#                         minutes on 2 cores; tests/fuzz/coverage.sh says
#                         what they cover), and the mutation check
#                         (tests/mutate: planted bugs the suite must catch)
#   tests/dev.sh mutate   the mutation check alone (tests/mutate/run.py)
#   tests/dev.sh build    install and build only
#
# Needs root (or sudo) only to install packages. The CUDA toolkit is used when
# found (/usr/local/cuda); without it the CPU backend alone is built.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=$(nproc 2>/dev/null || echo 2)

PKGS=(cmake make gcc g++ pkg-config libuv1-dev libmsgpack-dev check python3-numpy python3-scipy
      python3-msgpack python3-pytest python3-venv
      libinih-dev libsystemd-dev systemd python3-prometheus-client dpkg-dev file)
[[ "${1:-}" == test ]] && PKGS+=(clang libclang-rt-14-dev)

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

build() { # build DIR cmake-args...
    local dir=$1
    shift
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

case "${1:-}" in
daemon)
    install_deps
    build "$ROOT/build" -DGPUQ_BUILD_TESTS=OFF
    exec "$ROOT/build/server/gpuqd" --device auto "${@:2}"
    ;;
build)
    install_deps
    build "$ROOT/build" -DGPUQ_BUILD_TESTS=ON
    ;;
test)
    install_deps
    echo "== normal build (CUDA kernels compiled when the toolkit is present)"
    # ON explicitly: 'dev.sh daemon' may have cached OFF in build/.
    build "$ROOT/build" -DGPUQ_BUILD_TESTS=ON
    (cd "$ROOT/build" && ctest -LE gpu --no-tests=error --output-on-failure -j "$JOBS")
    echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
    build "$ROOT/build-asan" -DGPUQ_SANITIZE=ON -DGPUQ_WITH_CUDA=OFF
    (cd "$ROOT/build-asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest -LE 'gpu|fuzz' --no-tests=error --output-on-failure -j "$JOBS")
    echo "== libFuzzer: frame and header decoder, .npy reader, config file, session state machine"
    CC=clang build "$ROOT/build-fuzz" -DGPUQ_FUZZ=ON -DGPUQ_WITH_CUDA=OFF
    # The fuzz tests read their corpora and must write nothing into the
    # source tree (a crash leaves its input in build-fuzz/tests/fuzz).
    before=$(git -C "$ROOT" status --porcelain --untracked-files=all -- tests 2>/dev/null || true)
    (cd "$ROOT/build-fuzz" && ctest -L fuzz --no-tests=error --output-on-failure)
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
    echo "usage: tests/dev.sh daemon|test|mutate|build" >&2
    exit 2
    ;;
esac
