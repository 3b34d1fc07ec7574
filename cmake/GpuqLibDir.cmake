# SPDX-License-Identifier: Apache-2.0
# GpuqLibDir.cmake - the directory of libgpuq, gpuq.pc and the CMake package.
#
# GNUInstallDirs picks CMAKE_INSTALL_LIBDIR for the prefix of the configure
# step: on Debian lib/<multiarch> for prefix /usr, lib for any other (the
# default /usr/local included). The .deb is made from the same build with
# prefix /usr (CPACK_PACKAGING_INSTALL_PREFIX), and `cmake --install
# --prefix /usr` is the same layout, so the choice is made at install time,
# as for the units (GpuqInstall.cmake):
#
#   prefix /usr      GPUQ_USR_LIBDIR, GNUInstallDirs' choice for /usr
#                    (lib/x86_64-linux-gnu on Debian amd64; elsewhere the
#                    same as CMAKE_INSTALL_LIBDIR)
#   any other        CMAKE_INSTALL_LIBDIR, GNUInstallDirs' own choice
#
# A CMAKE_INSTALL_LIBDIR set by hand (not GNUInstallDirs' default) is used
# for every prefix. The install rules (client/lib/CMakeLists.txt) name the
# directory \${_gpuq_libdir}, which the install code GPUQ_LIBDIR_CODE sets;
# cmake/GpuqFixExport.cmake then writes it into the installed export files.

if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "gpuq: CMAKE_INSTALL_LIBDIR (${CMAKE_INSTALL_LIBDIR}) must be relative to the prefix")
endif()
set(GPUQ_USR_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
# GNUInstallDirs' rule for Debian (CMake 3.22 to 3.31).
if(CMAKE_SYSTEM_NAME MATCHES "^(Linux|kFreeBSD|GNU)$" AND NOT CMAKE_CROSSCOMPILING
   AND EXISTS /etc/debian_version AND CMAKE_LIBRARY_ARCHITECTURE
   AND CMAKE_INSTALL_LIBDIR MATCHES "^lib(/${CMAKE_LIBRARY_ARCHITECTURE})?$")
  set(GPUQ_USR_LIBDIR "lib/${CMAKE_LIBRARY_ARCHITECTURE}")
endif()
message(STATUS "gpuq: libgpuq in ${GPUQ_USR_LIBDIR} with prefix /usr, "
               "in ${CMAKE_INSTALL_LIBDIR} with another prefix")
set(GPUQ_LIBDIR_CODE "set(_gpuq_libdir \"${CMAKE_INSTALL_LIBDIR}\")
if(CMAKE_INSTALL_PREFIX MATCHES \"^/usr/*$\")
  set(_gpuq_libdir \"${GPUQ_USR_LIBDIR}\")
endif()")
