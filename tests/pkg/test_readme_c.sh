#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/pkg/test_readme_c.sh BUILD_DIR SOURCE_DIR - the README's C example
# runs as written, against an install of BUILD_DIR.
#
# `cmake --install BUILD_DIR --prefix TMP/p` (no DESTDIR: a user's own
# prefix), then the C API section's example and compile command
# (tests/pkg/readme_c.sh) in an empty directory, the command run as the
# README gives it, with PKG_CONFIG_PATH naming TMP/p's pkgconfig directory
# (what the README tells users of a prefix pkg-config does not search). The
# program runs against the installed gpuqd (--device cpu) on a temporary
# socket, named by GPUQ_SOCKET (the example connects to the default
# socket), with LD_LIBRARY_PATH naming TMP/p's library directory (the
# README's advice for such a prefix; with the .deb the loader finds
# libgpuq.so.1 in /usr/lib/<multiarch> by itself, which tests/pkg/deb_install_test.sh
# checks): exit 0, its line "N km in M us", and libgpuq.so.1 loaded from
# TMP/p. Without LD_LIBRARY_PATH the loader must not find it (else the
# check above proves nothing). GPUQ_LIBDIR and GPUQ_SBINDIR come from
# tests/pkg/CMakeLists.txt.
set -euo pipefail
has() { grep "$@" >/dev/null; }

build=$(cd "${1:?usage: test_readme_c.sh BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: test_readme_c.sh BUILD_DIR SOURCE_DIR}" && pwd)
for v in GPUQ_LIBDIR GPUQ_SBINDIR; do
    [[ -n "${!v:-}" ]] || { echo "test_readme_c: $v is not set" >&2; exit 2; }
done
# shellcheck source=tests/pkg/readme_c.sh
. "$src/tests/pkg/readme_c.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-readme-c.XXXXXX")
daemon=
cleanup() {
    if [[ -n "$daemon" ]]; then
        kill -TERM "$daemon" 2>/dev/null || true
        wait "$daemon" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

p=$tmp/p
cmake --install "$build" --prefix "$p" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; echo "FAIL: cmake --install --prefix $p" >&2; exit 1; }
lib=$p/$GPUQ_LIBDIR

mkdir "$tmp/work"
readme_c_extract "$src/README.md" "$tmp/work" || exit 1
echo "README's compile command: $README_C_CMD"
(cd "$tmp/work" && PKG_CONFIG_PATH=$lib/pkgconfig bash -euc "$README_C_CMD") >"$tmp/cc.log" 2>&1 ||
    { cat "$tmp/cc.log" >&2; echo "FAIL: the README's C example does not build with its command" >&2; exit 1; }
[[ ! -s "$tmp/cc.log" ]] || { echo "compiler output:"; cat "$tmp/cc.log"; }
prog=$tmp/work/$README_C_OUT

sock_dir=$tmp/run
mkdir "$sock_dir"
"$p/$GPUQ_SBINDIR/gpuqd" --device cpu --socket "$sock_dir/gpuqd.sock" >"$tmp/gpuqd.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do
    [[ -S "$sock_dir/gpuqd.sock" ]] && break
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
done
[[ -S "$sock_dir/gpuqd.sock" ]] || { cat "$tmp/gpuqd.log" >&2; echo "FAIL: gpuqd did not start" >&2; exit 1; }

if LD_LIBRARY_PATH=$lib ldd "$prog" | has "libgpuq.so.1 => $lib/libgpuq.so.1"; then
    echo "loader: libgpuq.so.1 from $lib (LD_LIBRARY_PATH)"
else
    bad "the example does not load $lib/libgpuq.so.1: $(LD_LIBRARY_PATH=$lib ldd "$prog" | grep gpuq)"
fi
if ldd "$prog" | has 'libgpuq.so.1 => not found'; then
    echo "loader: without LD_LIBRARY_PATH, libgpuq.so.1 is not found (as expected for this prefix)"
else
    echo "note: libgpuq.so.1 found without LD_LIBRARY_PATH: $(ldd "$prog" | grep gpuq)"
fi
st=0
(cd "$tmp/work" && LD_LIBRARY_PATH=$lib GPUQ_SOCKET=$sock_dir/gpuqd.sock "./$README_C_OUT") \
    >"$tmp/run.out" 2>&1 || st=$?
echo "--- ./$README_C_OUT (exit $st)"
cat "$tmp/run.out"
[[ $st -eq 0 ]] || bad "the README's C example exits $st"
has -E '^[0-9]+\.[0-9]{3} km in [0-9]+ us$' "$tmp/run.out" ||
    bad "the README's C example did not print 'N km in M us'"
if has -v -E '^[0-9]+\.[0-9]{3} km in [0-9]+ us$' "$tmp/run.out"; then
    bad "the README's C example printed more than its result line"
fi

if [[ $fail -ne 0 ]]; then
    echo "--- gpuqd log" >&2
    cat "$tmp/gpuqd.log" >&2
    echo "test_readme_c: FAILED" >&2
    exit 1
fi
echo "test_readme_c: OK"
