#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/pkg/test_deb.sh BUILD_DIR - the Debian package of a build.
#
# Runs `cpack -G DEB` for BUILD_DIR into a temporary directory (the build
# directory gets no .deb), then checks with dpkg-deb: the file list (daemon,
# CLI, library and its links, headers, pkg-config and CMake files, units,
# sysusers, the config), the control fields (Depends from dpkg-shlibdeps,
# Maintainer, Section, Priority, a description), conffiles naming
# /etc/gpuq/gpuqd.conf, the ldconfig trigger and shlibs entry of
# libgpuq.so.1, and postinst/prerm/postrm executable, POSIX sh that
# passes `sh -n` (and shellcheck -s sh where installed). Also that the unit's
# ExecStart names a program the package ships; the man pages (when the build
# made them: GPUQ_MAN=ON), the DEP-5 copyright file (gpuq's files under
# Apache-2.0, that license's paragraph pointing to Debian's common-licenses
# copy) and the changelog, whose first entry is the package's version; the
# library, gpuq.pc and the CMake package in /usr/lib/<multiarch> on Debian
# (tests/pkg/libdir.sh), nothing of them in /usr/lib itself; and, where lintian is installed,
# that `lintian` reports no error (its warnings are printed; the ones that
# are so by design are overridden in packaging/debian/gpuq.lintian-overrides).
# GPUQ_REQUIRE_LINTIAN=1 (CI) makes a missing lintian a failure. Needs
# dpkg-dev, not root.
#
# GPUQ_LIBDIR (the build's CMAKE_INSTALL_LIBDIR), GPUQ_USR_UNITDIR,
# GPUQ_USR_SYSUSERSDIR (absolute: where they go with prefix /usr) come from
# tests/pkg/CMakeLists.txt.
set -euo pipefail
# grep that reads all its input: grep -q exits at the first match, and the
# writer's SIGPIPE then fails the pipeline under pipefail.
has() { grep "$@" >/dev/null; }

build=$(cd "${1:?usage: test_deb.sh BUILD_DIR}" && pwd)
# shellcheck source=tests/pkg/libdir.sh
. "$(dirname "$0")/libdir.sh"
for t in cpack dpkg-deb dpkg-shlibdeps; do
    command -v "$t" >/dev/null ||
        { echo "test_deb: $t not found (apt-get install dpkg-dev)" >&2; exit 1; }
done
for v in GPUQ_LIBDIR GPUQ_USR_UNITDIR GPUQ_USR_SYSUSERSDIR GPUQ_VERSION; do
    [[ -n "${!v:-}" ]] || { echo "test_deb: $v is not set" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
# A path as dpkg-deb -c prints it ("./usr/lib/..."), given absolute or
# relative to /usr.
in_pkg() {
    case $1 in
    /*) echo ".$1" ;;
    *) echo "./usr/$1" ;;
    esac
}

(cd "$build" && cpack -G DEB -B "$tmp/out") >"$tmp/cpack.log" 2>&1 ||
    { cat "$tmp/cpack.log" >&2; echo "FAIL: cpack -G DEB" >&2; exit 1; }
debs=("$tmp"/out/gpuq_*.deb)
[[ ${#debs[@]} -eq 1 && -f "${debs[0]}" ]] || { echo "FAIL: no single gpuq_*.deb" >&2; exit 1; }
deb=${debs[0]}
echo "package: $(basename "$deb")"

# ---- contents ----
dpkg-deb -c "$deb" | awk '{ print $6 }' >"$tmp/contents"
usr_lib=$(usr_libdir)
lib=$(in_pkg "$usr_lib")
expect=(
    ./usr/sbin/gpuqd
    ./usr/bin/gpuqctl
    "$lib/libgpuq.so"
    "$lib/libgpuq.so.1"
    "$lib/libgpuq.a"
    ./usr/include/gpuq/gpuq.h
    ./usr/include/gpuq/errors.h
    ./usr/include/gpuq/gpuq_limits.h
    "$lib/pkgconfig/gpuq.pc"
    "$lib/cmake/gpuq/gpuqConfig.cmake"
    "$lib/cmake/gpuq/gpuqConfigVersion.cmake"
    "$lib/cmake/gpuq/gpuqTargets.cmake"
    "$(in_pkg "$GPUQ_USR_UNITDIR")/gpuqd.service"
    "$(in_pkg "$GPUQ_USR_UNITDIR")/gpuqd.socket"
    "$(in_pkg "$GPUQ_USR_SYSUSERSDIR")/gpuq.conf"
    ./etc/gpuq/gpuqd.conf
    ./usr/share/doc/gpuq/README.md
    ./usr/share/doc/gpuq/PROTOCOL.md
    ./usr/share/doc/gpuq/copyright
    ./usr/share/doc/gpuq/LICENSE
    ./usr/share/doc/gpuq/changelog.gz
    ./usr/share/lintian/overrides/gpuq
)
# The Python client for the system Python (GPUQ_PYTHON_INSTALL_DIR's default).
for m in __init__ client aio errors _socketpath; do
    expect+=("./usr/lib/python3/dist-packages/gpuq/$m.py")
done
expect+=("./usr/lib/python3/dist-packages/gpuq-$GPUQ_VERSION.dist-info/METADATA")
if [[ "${GPUQ_MAN:-OFF}" == ON ]]; then
    expect+=(
        ./usr/share/man/man1/gpuqctl.1.gz
        ./usr/share/man/man5/gpuqd.conf.5.gz
        ./usr/share/man/man8/gpuqd.8.gz
    )
fi
for p in "${expect[@]}"; do
    grep -qxF "$p" "$tmp/contents" || bad "not in the package: $p"
done
grep -qE "^${lib//./\\.}/libgpuq\.so\.1\.[0-9.]+$" "$tmp/contents" || bad "no $lib/libgpuq.so.1.*"
if [[ "$usr_lib" != lib ]]; then
    stray=$(grep -E '^\./usr/lib/(libgpuq|pkgconfig/gpuq\.pc|cmake/gpuq/)' "$tmp/contents" || true)
    [[ -z "$stray" ]] || bad "in /usr/lib, not $lib: $stray"
fi
echo "--- dpkg-deb -c (paths)"
grep -v '/$' "$tmp/contents"

# ---- control ----
dpkg-deb -I "$deb" >"$tmp/info"
echo "--- dpkg-deb -I"
cat "$tmp/info"
field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == gpuq ]] || bad "Package: $(field Package)"
[[ -n "$(field Version)" ]] || bad "no Version"
for f in Maintainer Section Priority Architecture; do
    [[ -n "$(field "$f")" ]] || bad "no $f"
done
depends=$(field Depends)
for d in 'libc6 (' 'systemd | adduser'; do
    [[ "$depends" == *"$d"* ]] || bad "Depends lacks $d: $depends"
done
[[ "$depends" != *cublas* && "$depends" != *cuda* ]] || bad "Depends names CUDA: $depends"
[[ $(field Description | wc -l) -ge 3 ]] || bad "Description has no long text"
# What the Python client needs, recommended (the daemon does not need it).
recommends=$(field Recommends)
for d in python3:any python3-numpy python3-msgpack; do
    [[ ", $recommends," == *", $d,"* ]] || bad "Recommends lacks $d: $recommends"
done
[[ "$depends" != *python* ]] || bad "Depends names Python (the daemon does not need it): $depends"
if grep -q '__pycache__\|\.pyc$' "$tmp/contents"; then bad "bytecode in the package"; fi

dpkg-deb -e "$deb" "$tmp/control"
grep -qxF /etc/gpuq/gpuqd.conf "$tmp/control/conffiles" 2>/dev/null ||
    bad "conffiles does not list /etc/gpuq/gpuqd.conf"
grep -qx 'activate-noawait ldconfig' "$tmp/control/triggers" 2>/dev/null ||
    bad "triggers does not run ldconfig"
grep -q '^libgpuq 1 gpuq (>= ' "$tmp/control/shlibs" 2>/dev/null || bad "no shlibs entry for libgpuq 1"
for s in postinst prerm postrm; do
    f=$tmp/control/$s
    if [[ ! -f "$f" ]]; then
        bad "no $s"
        continue
    fi
    [[ -x "$f" ]] || bad "$s is not executable"
    [[ "$(head -1 "$f")" == "#!/bin/sh" ]] || bad "$s: not #!/bin/sh"
    grep -qx 'set -e' "$f" || bad "$s: no 'set -e'"
    sh -n "$f" || bad "$s: sh -n"
    case $s in
    postinst) has -x '[[:space:]]*py3compile -p gpuq' "$f" || bad "postinst does not py3compile the Python client" ;;
    prerm) has -xF 'rm -rf /usr/lib/python3/dist-packages/gpuq/__pycache__' "$f" ||
        bad "prerm does not remove the Python client's bytecode" ;;
    esac
    if command -v shellcheck >/dev/null; then
        shellcheck -s sh "$f" || bad "$s: shellcheck"
    fi
done

# ---- the unit runs what the package ships ----
dpkg-deb -x "$deb" "$tmp/x"
unit=$tmp/x/$(in_pkg "$GPUQ_USR_UNITDIR")/gpuqd.service
exe=$(sed -n 's/^ExecStart=[-@:+!]*\([^ ]*\).*/\1/p' "$unit" | head -1)
[[ -n "$exe" && -x "$tmp/x$exe" ]] || bad "gpuqd.service runs '$exe', which the package does not ship"
if objdump -p "$tmp/x/usr/sbin/gpuqd" | has 'NEEDED.*libcublas'; then
    bad "packaged gpuqd needs libcublas"
fi

# ---- the packaged Python client knows its version ----
# As the system Python would see it once installed: the package's
# dist-packages on the path (the unpacked copy, not the tree's), gpuq
# imported from there and importlib.metadata reading its dist-info.
if [[ -n "${GPUQ_PYTHON:-}" ]]; then
    pydist=$tmp/x/usr/lib/python3/dist-packages
    got=$(cd / && PYTHONPATH=$pydist PYTHONDONTWRITEBYTECODE=1 "$GPUQ_PYTHON" -c '
import importlib.metadata as m, sys, gpuq
assert gpuq.__file__.startswith(sys.argv[1] + "/gpuq/"), gpuq.__file__
d = m.distribution("gpuq")
print(d.version, d.metadata["Name"], str(d.locate_file("gpuq/__init__.py")) == gpuq.__file__)' \
        "$pydist" 2>&1) || bad "importlib.metadata of the packaged gpuq: $got"
    [[ "$got" == "$GPUQ_VERSION gpuq True" ]] ||
        bad "importlib.metadata of the packaged gpuq: '$got', want '$GPUQ_VERSION gpuq True'"
    echo "python: the packaged gpuq is version ${got%% *} (importlib.metadata)"
fi

# ---- copyright, changelog, man pages ----
doc=$tmp/x/usr/share/doc/gpuq
if [[ -f "$doc/copyright" ]]; then
    [[ "$(head -1 "$doc/copyright")" == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ]] ||
        bad "copyright is not machine-readable (DEP-5 Format: line)"
    has -E '^Files: \*$' "$doc/copyright" || bad "copyright has no 'Files: *' paragraph"
    # gpuq's own files: the paragraph of "Files: *" names Apache-2.0, and a
    # License paragraph of its own points to Debian's copy of the text.
    files_lic=$(awk '/^Files: \*$/ { f = 1 } f && /^License:/ { print $2; exit }' "$doc/copyright")
    [[ "$files_lic" == Apache-2.0 ]] || bad "copyright: 'Files: *' has License: $files_lic, not Apache-2.0"
    awk 'BEGIN { RS = "" } /^License: Apache-2.0\n/ && /\/usr\/share\/common-licenses\/Apache-2\.0/ { ok = 1 }
        END { exit !ok }' "$doc/copyright" ||
        bad "copyright has no 'License: Apache-2.0' paragraph naming /usr/share/common-licenses/Apache-2.0"
    if has -i 'unspecified' "$doc/copyright"; then bad "copyright still says a license is unspecified"; fi
fi
if [[ -f "$doc/changelog.gz" ]]; then
    gzip -dc "$doc/changelog.gz" >"$tmp/changelog"
    clv=$(dpkg-parsechangelog -l "$tmp/changelog" -S Version 2>/dev/null || true)
    [[ "$clv" == "$(field Version)" ]] ||
        bad "changelog's first entry is version '$clv', the package $(field Version) (packaging/debian/changelog)"
fi
for m in "$tmp"/x/usr/share/man/man*/*.gz; do
    [[ -e "$m" ]] || continue
    # gzip -n: no name and no time stamp in the header (bytes 4..9: flags, mtime)
    [[ "$(od -An -tx1 -j3 -N5 "$m" | tr -d ' ')" == 0000000000 ]] || bad "${m#"$tmp/x"}: not gzip -n"
    if command -v man >/dev/null; then
        warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$m" 2>&1 >/dev/null || true)
        [[ -z "$warn" ]] || bad "${m#"$tmp/x"}: groff warns: $warn"
    fi
done

# ---- lintian ----
if command -v lintian >/dev/null; then
    echo "--- lintian --fail-on error $(basename "$deb")"
    if lintian --fail-on error --tag-display-limit 0 "$deb" >"$tmp/lintian.log" 2>&1; then
        grep -v 'running with root privileges' "$tmp/lintian.log" || true
        echo "lintian: no errors"
    else
        cat "$tmp/lintian.log" >&2
        bad "lintian reports errors"
    fi
elif [[ "${GPUQ_REQUIRE_LINTIAN:-}" == 1 ]]; then
    bad "lintian not found (apt-get install lintian) and GPUQ_REQUIRE_LINTIAN=1"
else
    echo "skip: lintian not installed (apt-get install lintian)"
fi

if [[ $fail -ne 0 ]]; then
    echo "test_deb: FAILED" >&2
    exit 1
fi
echo "test_deb: OK"
