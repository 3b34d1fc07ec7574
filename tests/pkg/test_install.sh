#!/usr/bin/env bash
# tests/pkg/test_install.sh BUILD_DIR - the install tree of a build.
#
# `cmake --install BUILD_DIR --prefix /usr` into a temporary DESTDIR, then:
# every expected file is there (libgpuq's soname links, gpuqd without
# libcublas), each installed header compiles on its own against that tree
# alone, gpuq.pc names prefix /usr, and a small program using
# <gpuq/gpuq.h> builds against that tree once with pkg-config and once with
# find_package(gpuq) (gpuq::gpuq static, gpuq::gpuq_shared, and as C++), and
# runs. Needs no daemon and no root.
#
# The directories come from the build (tests/pkg/CMakeLists.txt):
# GPUQ_LIBDIR, GPUQ_BINDIR, GPUQ_SBINDIR, GPUQ_INCLUDEDIR, GPUQ_DOCDIR (in the
# prefix), GPUQ_SYSTEMD_UNITDIR, GPUQ_SYSUSERSDIR (absolute or in the
# prefix), GPUQ_SYSCONFDIR (absolute). GPUQ_INSTALL_SYSTEMD=OFF: no units.
set -euo pipefail
# grep that reads all its input: grep -q exits at the first match, and the
# writer's SIGPIPE then fails the pipeline under pipefail.
has() { grep "$@" >/dev/null; }

build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
for v in GPUQ_LIBDIR GPUQ_BINDIR GPUQ_SBINDIR GPUQ_INCLUDEDIR GPUQ_DOCDIR GPUQ_SYSTEMD_UNITDIR \
    GPUQ_SYSUSERSDIR GPUQ_SYSCONFDIR; do
    [[ -n "${!v:-}" ]] || { echo "test_install: $v is not set" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

# A directory of the layout, inside the staging root.
at() {
    case $1 in
    /*) echo "$root$1" ;;
    *) echo "$root/usr/$1" ;;
    esac
}

DESTDIR=$root cmake --install "$build" --prefix /usr >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; echo "FAIL: cmake --install" >&2; exit 1; }

lib=$(at "$GPUQ_LIBDIR")
expect=(
    "$(at "$GPUQ_SBINDIR")/gpuqd"
    "$(at "$GPUQ_BINDIR")/gpuqctl"
    "$lib/libgpuq.so"
    "$lib/libgpuq.so.1"
    "$lib/libgpuq.a"
    "$lib/pkgconfig/gpuq.pc"
    "$lib/cmake/gpuq/gpuqConfig.cmake"
    "$lib/cmake/gpuq/gpuqConfigVersion.cmake"
    "$lib/cmake/gpuq/gpuqTargets.cmake"
    "$(at "$GPUQ_INCLUDEDIR")/gpuq/gpuq.h"
    "$(at "$GPUQ_INCLUDEDIR")/gpuq/errors.h"
    "$(at "$GPUQ_INCLUDEDIR")/gpuq/gpuq_limits.h"
    "$(at "$GPUQ_SYSCONFDIR")/gpuq/gpuqd.conf"
    "$(at "$GPUQ_DOCDIR")/README.md"
    "$(at "$GPUQ_DOCDIR")/PROTOCOL.md"
)
if [[ "${GPUQ_INSTALL_SYSTEMD:-ON}" != OFF ]]; then
    expect+=(
        "$(at "$GPUQ_SYSTEMD_UNITDIR")/gpuqd.service"
        "$(at "$GPUQ_SYSTEMD_UNITDIR")/gpuqd.socket"
        "$(at "$GPUQ_SYSUSERSDIR")/gpuq.conf"
    )
fi
for f in "${expect[@]}"; do
    [[ -e "$f" ]] || bad "missing ${f#"$root"}"
done
for f in "$(at "$GPUQ_SBINDIR")/gpuqd" "$(at "$GPUQ_BINDIR")/gpuqctl"; do
    [[ -x "$f" ]] || bad "not executable: ${f#"$root"}"
done
ls "$lib"/libgpuq.so.1.* >/dev/null 2>&1 || bad "missing $GPUQ_LIBDIR/libgpuq.so.1.*"
[[ -L "$lib/libgpuq.so" && -L "$lib/libgpuq.so.1" ]] || bad "libgpuq.so and libgpuq.so.1 must be links"
soname=$(objdump -p "$lib/libgpuq.so" | awk '$1 == "SONAME" {print $2}')
[[ "$soname" == libgpuq.so.1 ]] || bad "soname '$soname', not libgpuq.so.1"
# The public headers need nothing that is not installed (proto/header.h is
# not), each on its own, as C11 and as C++.
inc=$(at "$GPUQ_INCLUDEDIR")
for h in "$inc"/gpuq/*.h; do
    echo "#include <gpuq/$(basename "$h")>" >"$tmp/hdr.c"
    ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$tmp/hdr.c" 2>"$tmp/hdr.log" ||
        { cat "$tmp/hdr.log" >&2; bad "installed ${h#"$root"} does not compile on its own"; }
done
if objdump -p "$(at "$GPUQ_SBINDIR")/gpuqd" | has 'NEEDED.*libcublas'; then
    bad "gpuqd needs libcublas (it must load it at run time)"
fi
"$(at "$GPUQ_SBINDIR")/gpuqd" --version >/dev/null || bad "installed gpuqd --version failed"
# Anything installed that this list does not know: worth a look, not an error.
(cd "$root" && find . ! -type d | sed 's|^\.||' | sort) >"$tmp/installed"
printf '%s\n' "${expect[@]#"$root"}" | sort >"$tmp/expected"
extra=$(comm -23 "$tmp/installed" "$tmp/expected" | grep -v '/libgpuq\.so\.1\.' |
    grep -v '/cmake/gpuq/gpuqTargets-' || true)
[[ -z "$extra" ]] || printf 'note: also installed:\n%s\n' "$extra"

# ---- pkg-config, against this tree only ----
export PKG_CONFIG_LIBDIR=$lib/pkgconfig
unset PKG_CONFIG_PATH
prefix=$(pkg-config --variable=prefix gpuq)
[[ "$prefix" == /usr ]] || bad "gpuq.pc says prefix=$prefix, installed with /usr"
[[ "$(pkg-config --modversion gpuq)" == "$(sed -n 's/^Version: //p' "$lib/pkgconfig/gpuq.pc")" ]] ||
    bad "pkg-config --modversion"
pc=(pkg-config --define-variable=prefix="$root/usr")
cflags=$("${pc[@]}" --cflags gpuq)
libs=$("${pc[@]}" --libs gpuq)
echo "pkg-config --cflags --libs gpuq (prefix $root/usr): $cflags $libs"
# shellcheck disable=SC2086 # word splitting of pkg-config's output is intended
if ${CC:-cc} -std=c11 -Wall -Wextra -Werror "$here/consumer/demo.c" $cflags $libs \
    -Wl,-rpath,"$lib" -o "$tmp/demo_pc" 2>"$tmp/cc.log"; then
    if ldd "$tmp/demo_pc" | has "libgpuq.so.1 => $lib/"; then
        "$tmp/demo_pc" || bad "demo built with pkg-config failed"
    else
        bad "demo_pc does not use the installed libgpuq.so.1: $(ldd "$tmp/demo_pc" | grep gpuq)"
    fi
else
    cat "$tmp/cc.log" >&2
    bad "demo does not build with pkg-config"
fi

# ---- find_package(gpuq), against this tree only ----
cargs=(-S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$root/usr"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release)
[[ -n "${CC:-}" ]] && cargs+=(-DCMAKE_C_COMPILER="$CC")
if cmake "${cargs[@]}" >"$tmp/consumer.log" 2>&1 &&
    cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1; then
    found=$(sed -n 's/^gpuq_DIR:PATH=//p' "$tmp/consumer/CMakeCache.txt")
    [[ "$found" == "$lib/cmake/gpuq" ]] || bad "find_package found $found, not $lib/cmake/gpuq"
    for t in demo_static demo_shared demo_cxx; do
        "$tmp/consumer/$t" || bad "$t (find_package) failed"
    done
    if ldd "$tmp/consumer/demo_static" | has libgpuq; then
        bad "demo_static links libgpuq.so"
    fi
else
    cat "$tmp/consumer.log" >&2
    bad "demo does not build with find_package(gpuq)"
fi

if [[ $fail -ne 0 ]]; then
    echo "test_install: FAILED" >&2
    exit 1
fi
echo "test_install: OK (${#expect[@]} files, pkg-config and find_package consumers ran)"
