# SPDX-License-Identifier: Apache-2.0
# tests/pkg/libdir.sh - sourced by the package tests. usr_libdir prints the
# directory, relative to /usr, where libgpuq, gpuq.pc and the CMake package
# must be with prefix /usr (the .deb, `cmake --install --prefix /usr`): on
# Debian lib/<multiarch>, the tuple from dpkg-architecture (else from the
# compiler), never plain lib; elsewhere, or when the build set its own
# CMAKE_INSTALL_LIBDIR (GPUQ_LIBDIR other than lib), GPUQ_LIBDIR.
# shellcheck shell=bash
usr_libdir() {
    local ma=""
    if [[ -e /etc/debian_version ]]; then
        ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null ||
            "${CC:-cc}" -print-multiarch 2>/dev/null || true)
    fi
    if [[ -n "$ma" && ("${GPUQ_LIBDIR:-lib}" == lib || "$GPUQ_LIBDIR" == "lib/$ma") ]]; then
        echo "lib/$ma"
    elif [[ -n "${GPUQ_LIBDIR:-}" ]]; then
        echo "$GPUQ_LIBDIR"
    else
        echo "usr_libdir: no multiarch tuple (dpkg-architecture, cc -print-multiarch) and no GPUQ_LIBDIR" >&2
        return 1
    fi
}
