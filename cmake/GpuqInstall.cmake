# GpuqInstall.cmake - what `cmake --install` puts beside the targets (their
# own rules are in server/ and client/): the systemd units, the sysusers
# file, the example config and the docs.
#
# `cmake --install build --prefix /usr` (and CPack, which installs with
# prefix /usr) gives the layout of the Debian package. Three places do not
# follow the prefix, because systemd and the units look for them there:
#   GPUQ_SYSTEMD_UNITDIR  systemd's system unit dir (pkg-config systemd,
#                         systemdsystemunitdir: /lib/systemd/system on
#                         Debian 12), else lib/systemd/system in the prefix
#   GPUQ_SYSUSERSDIR      likewise sysusersdir (/usr/lib/sysusers.d), else
#                         lib/sysusers.d in the prefix
#   GPUQ_SYSCONFDIR       /etc: gpuqd.service reads /etc/gpuq/gpuqd.conf
# Install into a staging root with DESTDIR to keep them inside it.

option(GPUQ_INSTALL_SYSTEMD "Install the systemd units and the sysusers file" ON)

find_package(PkgConfig QUIET)
set(_gpuq_unitdir lib/systemd/system)
set(_gpuq_sysusersdir lib/sysusers.d)
if(PKG_CONFIG_FOUND)
  pkg_get_variable(_gpuq_pc_unitdir systemd systemdsystemunitdir)
  pkg_get_variable(_gpuq_pc_sysusersdir systemd sysusersdir)
  if(_gpuq_pc_unitdir)
    set(_gpuq_unitdir ${_gpuq_pc_unitdir})
  endif()
  if(_gpuq_pc_sysusersdir)
    set(_gpuq_sysusersdir ${_gpuq_pc_sysusersdir})
  endif()
endif()
set(GPUQ_SYSTEMD_UNITDIR ${_gpuq_unitdir} CACHE STRING
    "systemd system unit directory (absolute, or relative to the install prefix)")
set(GPUQ_SYSUSERSDIR ${_gpuq_sysusersdir} CACHE STRING
    "sysusers.d directory (absolute, or relative to the install prefix)")
set(GPUQ_SYSCONFDIR /etc CACHE STRING
    "where gpuq/gpuqd.conf is installed (absolute: the unit reads /etc/gpuq/gpuqd.conf)")
message(STATUS "gpuq: units in ${GPUQ_SYSTEMD_UNITDIR}, sysusers in ${GPUQ_SYSUSERSDIR}, "
               "config in ${GPUQ_SYSCONFDIR}/gpuq")

if(GPUQ_INSTALL_SYSTEMD)
  install(FILES systemd/gpuqd.service systemd/gpuqd.socket
          DESTINATION ${GPUQ_SYSTEMD_UNITDIR})
  install(FILES systemd/gpuq.sysusers.conf DESTINATION ${GPUQ_SYSUSERSDIR} RENAME gpuq.conf)
endif()
install(FILES systemd/gpuqd.conf DESTINATION ${GPUQ_SYSCONFDIR}/gpuq)
install(FILES README.md proto/PROTOCOL.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The Python client (client/python/gpuq, pure Python) for the system Python:
# with prefix /usr (cmake --install --prefix /usr, and CPack) that is
# Debian's /usr/lib/python3/dist-packages/gpuq, so `import gpuq` works
# (it needs python3-numpy and python3-msgpack). Relative to the prefix, or
# absolute; empty: not installed.
set(GPUQ_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE STRING
    "where the gpuq Python package is installed (relative to the prefix; empty: not at all)")
if(GPUQ_PYTHON_INSTALL_DIR)
  file(GLOB _gpuq_py_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/client/python/gpuq/*.py)
  install(FILES ${_gpuq_py_sources} DESTINATION ${GPUQ_PYTHON_INSTALL_DIR}/gpuq)
endif()
