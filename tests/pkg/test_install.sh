#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/pkg/test_install.sh BUILD_DIR - the install tree of a build.
#
# `cmake --install BUILD_DIR --prefix /usr` into a temporary DESTDIR, then:
# every expected file is there (libgpuq's soname links, gpuqd without
# libcublas, the units, sysusers file and config in the system's places),
# each installed header compiles on its own against that tree alone, gpuq.pc
# names prefix /usr and libdir /usr/lib/<multiarch> on Debian (the
# libraries, gpuq.pc and the CMake package are there, and nothing of them
# in /usr/lib itself: tests/pkg/libdir.sh), and a small program using <gpuq/gpuq.h> builds against
# that tree once with pkg-config and once with find_package(gpuq)
# (gpuq::gpuq is libgpuq.so, gpuq::gpuq_static libgpuq.a with msgpack-c
# found by the config, and as C++), and runs; gpuq::gpuq builds and runs
# with msgpack-c's CMake package out of sight too (a .deb user without
# libmsgpack-dev).
# Then `cmake --install BUILD_DIR --prefix TMP/p` with no DESTDIR: every
# file of install_manifest.txt is under TMP/p (the units, sysusers file and
# config included), and the libraries, gpuq.pc (whose libdir says so) and
# the CMake package, which a consumer builds against, are in
# TMP/p/GPUQ_LIBDIR: GNUInstallDirs' own choice for such a prefix. Needs no
# daemon and no root.
#
# The directories come from the build (tests/pkg/CMakeLists.txt):
# GPUQ_LIBDIR, GPUQ_BINDIR, GPUQ_SBINDIR, GPUQ_INCLUDEDIR, GPUQ_DOCDIR,
# GPUQ_MANDIR (in the prefix), GPUQ_USR_UNITDIR, GPUQ_USR_SYSUSERSDIR,
# GPUQ_USR_SYSCONFDIR (absolute: where they go with prefix /usr), and the
# settings GPUQ_SYSTEMD_UNITDIR, GPUQ_SYSUSERSDIR, GPUQ_SYSCONFDIR (empty
# unless set: an absolute one is an opt-in to write there whatever the
# prefix). GPUQ_INSTALL_SYSTEMD=OFF: no units. GPUQ_MAN=ON: man pages.
# GPUQ_PYTHON_INSTALL_DIR (relative: in the prefix; empty: none): the Python
# client's directory, whose gpuq package GPUQ_PYTHON (with numpy and msgpack)
# imports from the /usr tree and from the --prefix tree.
set -euo pipefail
# grep that reads all its input: grep -q exits at the first match, and the
# writer's SIGPIPE then fails the pipeline under pipefail.
has() { grep "$@" >/dev/null; }

build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/pkg/libdir.sh
. "$here/libdir.sh"
for v in GPUQ_LIBDIR GPUQ_BINDIR GPUQ_SBINDIR GPUQ_INCLUDEDIR GPUQ_DOCDIR GPUQ_MANDIR \
    GPUQ_USR_UNITDIR GPUQ_USR_SYSUSERSDIR GPUQ_USR_SYSCONFDIR; do
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

usr_lib=$(usr_libdir)
echo "with prefix /usr the libraries belong in /usr/$usr_lib"
lib=$(at "$usr_lib")
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
    "$(at "$GPUQ_USR_SYSCONFDIR")/gpuq/gpuqd.conf"
    "$(at "$GPUQ_DOCDIR")/README.md"
    "$(at "$GPUQ_DOCDIR")/PROTOCOL.md"
    "$(at "$GPUQ_DOCDIR")/copyright"
    "$(at "$GPUQ_DOCDIR")/LICENSE"
)
if [[ "${GPUQ_INSTALL_SYSTEMD:-ON}" != OFF ]]; then
    expect+=(
        "$(at "$GPUQ_USR_UNITDIR")/gpuqd.service"
        "$(at "$GPUQ_USR_UNITDIR")/gpuqd.socket"
        "$(at "$GPUQ_USR_SYSUSERSDIR")/gpuq.conf"
    )
fi
if [[ "${GPUQ_MAN:-OFF}" == ON ]]; then
    expect+=(
        "$(at "$GPUQ_MANDIR")/man1/gpuqctl.1.gz"
        "$(at "$GPUQ_MANDIR")/man5/gpuqd.conf.5.gz"
        "$(at "$GPUQ_MANDIR")/man8/gpuqd.8.gz"
    )
fi
pydir=${GPUQ_PYTHON_INSTALL_DIR:-}
if [[ -n "$pydir" ]]; then
    for m in __init__ client aio errors _socketpath; do
        expect+=("$(at "$pydir")/gpuq/$m.py")
    done
    expect+=("$(at "$pydir")/gpuq-$GPUQ_VERSION.dist-info/METADATA")
fi
for f in "${expect[@]}"; do
    [[ -e "$f" ]] || bad "missing ${f#"$root"}"
done
# import gpuq from an install tree's Python directory: the package there,
# whole (every module it imports was installed).
py_imports() {
    local dir=$1 got
    [[ -n "${GPUQ_PYTHON:-}" ]] || return 0
    got=$(cd / && PYTHONPATH=$dir PYTHONDONTWRITEBYTECODE=1 "$GPUQ_PYTHON" -c \
        'import gpuq, gpuq.aio; print(gpuq.__file__)' 2>&1) ||
        { bad "import gpuq from $dir: $got"; return 0; }
    [[ "$got" == "$dir/gpuq/__init__.py" ]] || bad "import gpuq from $dir found $got"
    # its distribution metadata: the version pip list and importlib.metadata see
    got=$(cd / && PYTHONPATH=$dir PYTHONDONTWRITEBYTECODE=1 "$GPUQ_PYTHON" -c \
        'import importlib.metadata as m, gpuq
d = m.distribution("gpuq")
print(d.version == gpuq.__version__, d.version, sorted(d.requires or []))' 2>&1) ||
        { bad "importlib.metadata of gpuq in $dir: $got"; return 0; }
    [[ "$got" == "True $GPUQ_VERSION ['msgpack>=1.0', 'numpy>=1.21']" ]] ||
        bad "importlib.metadata of gpuq in $dir: $got"
}
[[ -z "$pydir" || "$pydir" == /* ]] || py_imports "$(at "$pydir")"
for f in "$(at "$GPUQ_SBINDIR")/gpuqd" "$(at "$GPUQ_BINDIR")/gpuqctl"; do
    [[ -x "$f" ]] || bad "not executable: ${f#"$root"}"
done
ls "$lib"/libgpuq.so.1.* >/dev/null 2>&1 || bad "missing $usr_lib/libgpuq.so.1.*"
if [[ "$usr_lib" != lib ]]; then
    stray=$(find "$root/usr/lib" -maxdepth 3 \( -name 'libgpuq*' -o -name gpuq.pc -o -path '*/cmake/gpuq' \) \
        ! -path "$lib/*" 2>/dev/null || true)
    [[ -z "$stray" ]] || bad "with prefix /usr, outside /usr/$usr_lib: ${stray//"$root"/}"
fi
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
pclibdir=$(pkg-config --variable=libdir gpuq)
[[ "$pclibdir" == "/usr/$usr_lib" ]] || bad "gpuq.pc says libdir=$pclibdir, not /usr/$usr_lib"
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
# consumer DIR WITH_STATIC [cmake args]: configure and build tests/pkg/consumer
# (against the /usr tree, or CONSUMER_PREFIX).
consumer() {
    local dir=$1 with_static=$2
    shift 2
    local cargs=(-S "$here/consumer" -B "$dir" -DCMAKE_PREFIX_PATH="${CONSUMER_PREFIX:-$root/usr}"
        -DEXPECT_LIBDIR="${CONSUMER_LIBDIR:-$lib}"
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release -DWITH_STATIC="$with_static" "$@")
    [[ -n "${CC:-}" ]] && cargs+=(-DCMAKE_C_COMPILER="$CC")
    cmake "${cargs[@]}" >"$dir.log" 2>&1 && cmake --build "$dir" >>"$dir.log" 2>&1
}
# the demo links libgpuq.so.1 of this tree and nothing of msgpack-c
shared_only() {
    local l
    l=$(ldd "$1")
    [[ "$l" == *"libgpuq.so.1 => $lib/libgpuq.so.1"* && "$l" != *msgpack* ]]
}
# gpuq::gpuq_static needs libmsgpack-dev installed (its CMake package names
# files under /usr): where it is only unpacked into a prefix (the GPU
# machine's carried .debs), the consumer is built without the static demo.
with_static=ON
if ! dpkg-query -W -f='${Status}' libmsgpack-dev 2>/dev/null | has "install ok installed"; then
    echo "note: libmsgpack-dev is not installed here: gpuq::gpuq_static is not tried"
    with_static=OFF
fi
if consumer "$tmp/consumer" "$with_static"; then
    found=$(sed -n 's/^gpuq_DIR:PATH=//p' "$tmp/consumer/CMakeCache.txt")
    [[ "$found" == "$lib/cmake/gpuq" ]] || bad "find_package found $found, not $lib/cmake/gpuq"
    for t in demo_shared demo_cxx; do
        LD_LIBRARY_PATH=$lib "$tmp/consumer/$t" || bad "$t (find_package) failed"
    done
    if [[ $with_static == ON ]]; then
        "$tmp/consumer/demo_static" || bad "demo_static (find_package) failed"
        if ldd "$tmp/consumer/demo_static" | has libgpuq; then
            bad "demo_static (gpuq::gpuq_static) links libgpuq.so"
        fi
    fi
    for t in demo_shared demo_cxx; do
        LD_LIBRARY_PATH=$lib shared_only "$tmp/consumer/$t" ||
            bad "$t (gpuq::gpuq): not libgpuq.so.1 of $lib alone: $(LD_LIBRARY_PATH=$lib ldd "$tmp/consumer/$t")"
    done
else
    cat "$tmp/consumer.log" >&2
    bad "demo does not build with find_package(gpuq)"
fi
# As a user of the .deb without libmsgpack-dev: gpuq::gpuq needs no msgpack-c,
# and asking for the static component then fails with a clear message.
nomsgpack=(-DCMAKE_DISABLE_FIND_PACKAGE_msgpack=ON -DCMAKE_DISABLE_FIND_PACKAGE_msgpack-c=ON)
if consumer "$tmp/consumer-shared" OFF "${nomsgpack[@]}"; then
    LD_LIBRARY_PATH=$lib "$tmp/consumer-shared/demo_shared" || bad "demo_shared (no msgpack-c) failed"
    LD_LIBRARY_PATH=$lib shared_only "$tmp/consumer-shared/demo_shared" ||
        bad "demo_shared (no msgpack-c) is not linked to libgpuq.so.1 alone"
else
    cat "$tmp/consumer-shared.log" >&2
    bad "gpuq::gpuq does not build with msgpack-c's CMake package out of sight"
fi
if consumer "$tmp/consumer-static" ON "${nomsgpack[@]}"; then
    bad "find_package(gpuq COMPONENTS static) succeeded without msgpack-c"
elif ! has 'libmsgpack-dev' "$tmp/consumer-static.log"; then
    cat "$tmp/consumer-static.log" >&2
    bad "find_package(gpuq COMPONENTS static) without msgpack-c does not say what is missing"
fi

# ---- --prefix P without DESTDIR: nothing outside P ----
p=$tmp/p
cmake --install "$build" --prefix "$p" >"$tmp/install-p.log" 2>&1 ||
    { cat "$tmp/install-p.log" >&2; bad "cmake --install --prefix $p"; }
manifest=$build/install_manifest.txt
if [[ -s "$manifest" ]]; then
    # Outside P only where a setting opts in with an absolute directory.
    optin=()
    for v in GPUQ_SYSTEMD_UNITDIR GPUQ_SYSUSERSDIR GPUQ_SYSCONFDIR; do
        [[ "${!v:-}" == /* ]] && optin+=("${!v}")
    done
    outside=0
    while IFS= read -r f; do
        [[ "$f" == "$p"/* ]] && continue
        for o in "${optin[@]}"; do
            [[ "$f" == "$o"/* ]] && continue 2
        done
        bad "installed outside the prefix $p: $f"
        outside=$((outside + 1))
    done <"$manifest"
    n=$(wc -l <"$manifest")
    [[ $outside -ne 0 ]] || echo "--prefix $p: all $n files of install_manifest.txt under it"
    want=()
    [[ -z "${GPUQ_SYSCONFDIR:-}" ]] && want+=("$p/etc/gpuq/gpuqd.conf")
    if [[ "${GPUQ_INSTALL_SYSTEMD:-ON}" != OFF ]]; then
        [[ -z "${GPUQ_SYSTEMD_UNITDIR:-}" ]] &&
            want+=("$p/lib/systemd/system/gpuqd.service" "$p/lib/systemd/system/gpuqd.socket")
        [[ -z "${GPUQ_SYSUSERSDIR:-}" ]] && want+=("$p/lib/sysusers.d/gpuq.conf")
    fi
    [[ -n "${GPUQ_PYTHON_INSTALL_DIR:-}" && "$GPUQ_PYTHON_INSTALL_DIR" != /* ]] &&
        want+=("$p/$GPUQ_PYTHON_INSTALL_DIR/gpuq/__init__.py")
    for f in "${want[@]}"; do
        if ! grep -qxF "$f" "$manifest" || [[ ! -f "$f" ]]; then
            bad "--prefix $p: $f not installed"
        fi
    done
    [[ -z "${GPUQ_PYTHON_INSTALL_DIR:-}" || "$GPUQ_PYTHON_INSTALL_DIR" == /* ]] ||
        py_imports "$p/$GPUQ_PYTHON_INSTALL_DIR"
    # the library directory: GNUInstallDirs' own choice for a prefix other than /usr
    plib=$p/$GPUQ_LIBDIR
    for f in libgpuq.so.1 libgpuq.a pkgconfig/gpuq.pc cmake/gpuq/gpuqConfig.cmake; do
        grep -qxF "$plib/$f" "$manifest" || bad "--prefix $p: $plib/$f not installed"
    done
    pclibdir=$(PKG_CONFIG_LIBDIR=$plib/pkgconfig pkg-config --variable=libdir gpuq)
    [[ "$pclibdir" == "$plib" ]] || bad "--prefix $p: gpuq.pc says libdir=$pclibdir, not $plib"
    if CONSUMER_PREFIX=$p CONSUMER_LIBDIR=$plib consumer "$tmp/consumer-p" OFF; then
        found=$(sed -n 's/^gpuq_DIR:PATH=//p' "$tmp/consumer-p/CMakeCache.txt")
        [[ "$found" == "$plib/cmake/gpuq" ]] || bad "find_package in $p found $found"
        LD_LIBRARY_PATH=$plib "$tmp/consumer-p/demo_shared" || bad "demo_shared (--prefix $p) failed"
    else
        cat "$tmp/consumer-p.log" >&2
        bad "demo does not build with find_package(gpuq) from --prefix $p"
    fi
else
    bad "no $manifest after cmake --install --prefix $p"
fi

if [[ $fail -ne 0 ]]; then
    echo "test_install: FAILED" >&2
    exit 1
fi
echo "test_install: OK (${#expect[@]} files, pkg-config and find_package consumers ran)"
