# SPDX-License-Identifier: Apache-2.0
# GpuqInstall.cmake - what `cmake --install` puts beside the targets (their
# own rules are in server/ and client/): the systemd units, the sysusers
# file, the example config, the man pages (cmake/GpuqMan.cmake) and the docs.
#
# `cmake --install build --prefix P` writes nothing outside P. Three things
# have a system place that does not follow the prefix, and go there only
# when P is /usr (the Debian package's layout: CPack installs with prefix
# /usr), else under P:
#
#   what              prefix /usr                        any other prefix P
#   units             systemd's systemdsystemunitdir     P/lib/systemd/system
#                     (/lib/systemd/system on Debian 12)
#   sysusers file     systemd's sysusersdir              P/lib/sysusers.d
#                     (/usr/lib/sysusers.d)
#   gpuq/gpuqd.conf   /etc                               P/etc
#
# (systemd reads units and sysusers files from /usr/local/lib too; the units
# run /usr/sbin/gpuqd --config /etc/gpuq/gpuqd.conf, the package's layout.)
# The prefix is the one of the install, not of the configure step, so the
# choice is made when installing (gpuq_install_system.cmake). To put one
# of them elsewhere, opt in with its cache variable: an absolute directory
# is used as it is, whatever the prefix (e.g. -DGPUQ_SYSCONFDIR=/etc); a
# relative one is taken in the prefix. DESTDIR applies to all of them.

option(GPUQ_INSTALL_SYSTEMD "Install the systemd units and the sysusers file" ON)
# A build directory configured before this rule cached the system places as
# these settings (absolute, so they would now be opt-ins): forget those
# values, once.
if(NOT GPUQ_INSTALL_DIRS_RULE EQUAL 2)
  foreach(_v GPUQ_SYSTEMD_UNITDIR GPUQ_SYSUSERSDIR GPUQ_SYSCONFDIR)
    if(DEFINED CACHE{${_v}} AND "$CACHE{${_v}}" MATCHES
       "^(/lib/systemd/system|/usr/lib/systemd/system|lib/systemd/system|/usr/lib/sysusers.d|lib/sysusers.d|/etc)$")
      set(${_v} "" CACHE STRING "" FORCE)
    endif()
  endforeach()
  set(GPUQ_INSTALL_DIRS_RULE 2 CACHE INTERNAL "how GpuqInstall.cmake places units and config")
endif()
set(GPUQ_SYSTEMD_UNITDIR "" CACHE STRING
    "systemd unit directory: empty = the system's for prefix /usr, else lib/systemd/system in the prefix; absolute = there; relative = in the prefix")
set(GPUQ_SYSUSERSDIR "" CACHE STRING
    "sysusers.d directory: empty = the system's for prefix /usr, else lib/sysusers.d in the prefix; absolute = there; relative = in the prefix")
set(GPUQ_SYSCONFDIR "" CACHE STRING
    "directory of gpuq/gpuqd.conf: empty = /etc for prefix /usr, else etc in the prefix; absolute = there; relative = in the prefix")

# The system's places, for prefix /usr.
set(GPUQ_SYSTEM_UNITDIR /usr/lib/systemd/system)
set(GPUQ_SYSTEM_SYSUSERSDIR /usr/lib/sysusers.d)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_get_variable(_gpuq_pc_unitdir systemd systemdsystemunitdir)
  pkg_get_variable(_gpuq_pc_sysusersdir systemd sysusersdir)
  if(_gpuq_pc_unitdir)
    set(GPUQ_SYSTEM_UNITDIR ${_gpuq_pc_unitdir})
  endif()
  if(_gpuq_pc_sysusersdir)
    set(GPUQ_SYSTEM_SYSUSERSDIR ${_gpuq_pc_sysusersdir})
  endif()
endif()
set(GPUQ_SYSTEM_SYSCONFDIR /etc)

include(${CMAKE_CURRENT_LIST_DIR}/GpuqSystemDirs.cmake)
# Where they land with prefix /usr (the .deb: conffiles, tests/pkg).
gpuq_system_dirs(/usr GPUQ_USR_UNITDIR GPUQ_USR_SYSUSERSDIR GPUQ_USR_SYSCONFDIR)
message(STATUS "gpuq: with prefix /usr: units in ${GPUQ_USR_UNITDIR}, sysusers in "
               "${GPUQ_USR_SYSUSERSDIR}, config in ${GPUQ_USR_SYSCONFDIR}/gpuq; "
               "with another prefix: under it, unless set absolute")

configure_file(${CMAKE_CURRENT_LIST_DIR}/GpuqInstallSystem.cmake.in
               ${PROJECT_BINARY_DIR}/gpuq_install_system.cmake @ONLY)
install(SCRIPT ${PROJECT_BINARY_DIR}/gpuq_install_system.cmake)
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
  # Its distribution metadata beside it (gpuq-VERSION.dist-info, as pip
  # installs it), so that importlib.metadata.version("gpuq") and pip list
  # know this copy too. The fields are client/python/pyproject.toml's, read
  # from it here, not written twice.
  set(_pyproject ${PROJECT_SOURCE_DIR}/client/python/pyproject.toml)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_pyproject})
  file(READ ${_pyproject} _pp)
  foreach(_key name version description requires-python)
    if(NOT _pp MATCHES "\n${_key} = \"([^\"]*)\"")
      message(FATAL_ERROR "gpuq: no ${_key} in ${_pyproject}")
    endif()
    set(_py_${_key} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT _py_version STREQUAL PROJECT_VERSION)
    message(FATAL_ERROR "gpuq: ${_pyproject} says version ${_py_version}, the project ${PROJECT_VERSION}")
  endif()
  if(NOT _pp MATCHES "\ndependencies = \\[([^]]*)\\]")
    message(FATAL_ERROR "gpuq: no dependencies in ${_pyproject}")
  endif()
  string(REGEX MATCHALL "\"[^\"]+\"" _py_deps "${CMAKE_MATCH_1}")
  set(_meta "Metadata-Version: 2.1\nName: ${_py_name}\nVersion: ${_py_version}\n")
  string(APPEND _meta "Summary: ${_py_description}\nLicense: Apache-2.0\n")
  string(APPEND _meta "Requires-Python: ${_py_requires-python}\n")
  foreach(_d ${_py_deps})
    string(REPLACE "\"" "" _d "${_d}")
    string(APPEND _meta "Requires-Dist: ${_d}\n")
  endforeach()
  set(_distinfo ${PROJECT_BINARY_DIR}/python/${_py_name}-${_py_version}.dist-info)
  file(WRITE ${_distinfo}/METADATA "${_meta}")
  file(WRITE ${_distinfo}/top_level.txt "gpuq\n")
  install(FILES ${_distinfo}/METADATA ${_distinfo}/top_level.txt
          DESTINATION ${GPUQ_PYTHON_INSTALL_DIR}/${_py_name}-${_py_version}.dist-info)
endif()
