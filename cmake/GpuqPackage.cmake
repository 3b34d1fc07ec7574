# SPDX-License-Identifier: Apache-2.0
# GpuqPackage.cmake - `cpack -G DEB` in the build directory (after the build)
# makes gpuq_<version>_<arch>.deb from the install rules, with prefix /usr.
#
# One package: gpuqd, gpuqctl, libgpuq (shared and static), headers, pkg-config
# and CMake files, units, sysusers file, /etc/gpuq/gpuqd.conf (a conffile),
# man pages (GPUQ_MAN; tests/dev.sh test requires them), docs, copyright
# and changelog, and the Python client for the system Python
# (/usr/lib/python3/dist-packages/gpuq, GPUQ_PYTHON_INSTALL_DIR). `lintian`
# on it reports no error (tests/pkg/test_deb.sh). Depends comes from
# dpkg-shlibdeps (dpkg-dev) on the installed binaries, plus what the maintainer scripts need: systemd-sysusers (systemd)
# or adduser. deb-systemd-helper and deb-systemd-invoke come from
# init-system-helpers, which is Essential in Debian 12. The CUDA driver and
# cuBLAS are loaded at run time when present, so they are not dependencies:
# without them gpuqd serves on the CPU backend.
#
# The Python client needs python3, python3-numpy and python3-msgpack; the
# daemon, gpuqctl and libgpuq do not, so they are Recommends, not Depends:
# apt installs Recommends by default (`import gpuq` works after `apt install
# ./gpuq_*.deb`), and a daemon-only host or container can leave the Python
# stack out with --no-install-recommends. (lintian's
# python-package-missing-depends-on-python counts a python3 in Recommends.)
# postinst byte-compiles the package with py3compile when python3 is there;
# prerm removes the bytecode (py3clean, and gpuq/__pycache__ whatever made
# it), so that nothing named gpuq stays after a purge.
#
# The maintainer scripts in packaging/debian are written as debhelper would
# generate them (dh_installsysusers, dh_installsystemd); triggers runs
# ldconfig (dh_makeshlibs), in place of the ldconfig calls CPack would put in
# the scripts it generates when none are given.

set(GPUQ_DEB_MAINTAINER "gpuq maintainers <maintainers@users.noreply.a-seed-1f1d344b.example>"
    CACHE STRING "Maintainer field of the .deb")

set(CPACK_PACKAGE_NAME gpuq)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${GPUQ_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU array work for local processes over a Unix socket")
# The license: Apache-2.0 (LICENSE). A .deb says so in its DEP-5 copyright
# file (packaging/debian/copyright.in); these are CPack's own fields, for
# the generators that read them.
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_RPM_PACKAGE_LICENSE Apache-2.0)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)

set(CPACK_DEBIAN_PACKAGE_NAME gpuq)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUQ_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"gpuqd serves normalization and distance computations (haversine, a lat/lon
grid, pairwise euclidean, cosine and manhattan distances) on float32 and
float64 arrays to local processes over a Unix socket. Each client session
gets its own prioritized CUDA stream; arrays go straight into pinned
staging memory, and every limit (frame size, requests in flight, staging
memory) is explicit. A CPU backend with the same contract runs where no GPU
is usable.
.
The package holds the daemon with its systemd socket and service units
(socket /run/gpuq/gpuqd.sock, members of group gpuq may use it), the
gpuqctl command line client, and the C client library libgpuq with its
headers, pkg-config and CMake files.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd | adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3:any, python3-numpy, python3-msgpack")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libmsgpack-dev")
# A shlibs file, so that packages built against libgpuq.so.1 get a Depends.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

# /usr/share/doc/gpuq: copyright (machine-readable, DEP-5) and, gzipped -9n,
# the Debian changelog (a native package's changelog.gz; its first entry's
# version is the package's, which tests/pkg/test_deb.sh checks). Installed
# by `cmake --install` too.
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/copyright.in
               ${PROJECT_BINARY_DIR}/packaging/debian/copyright @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(GPUQ_GZIP)
  set(_gpuq_changelog ${PROJECT_BINARY_DIR}/packaging/debian/changelog.gz)
  add_custom_command(OUTPUT ${_gpuq_changelog}
    COMMAND ${CMAKE_COMMAND} -DGZIP=${GPUQ_GZIP} -DIN=${PROJECT_SOURCE_DIR}/packaging/debian/changelog
            -DOUT=${_gpuq_changelog} -P ${PROJECT_SOURCE_DIR}/cmake/GpuqGzip.cmake
    DEPENDS ${PROJECT_SOURCE_DIR}/packaging/debian/changelog ${PROJECT_SOURCE_DIR}/cmake/GpuqGzip.cmake
    COMMENT "changelog.gz"
    VERBATIM)
  add_custom_target(gpuq_changelog ALL DEPENDS ${_gpuq_changelog})
  install(FILES ${_gpuq_changelog} DESTINATION ${CMAKE_INSTALL_DOCDIR})
else()
  message(STATUS "gpuq: no gzip, so no changelog.gz (the .deb needs it)")
endif()
# Lintian's overrides: the warnings that are so by design, each with its
# reason (packaging/debian/gpuq.lintian-overrides).
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/gpuq.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME gpuq)

configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/conffiles.in
               ${PROJECT_BINARY_DIR}/packaging/debian/conffiles @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/packaging/debian/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm
    ${PROJECT_SOURCE_DIR}/packaging/debian/triggers)
# 0644 for conffiles, 0755 for the scripts, whatever the checkout says.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
