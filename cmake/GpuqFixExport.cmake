# SPDX-License-Identifier: Apache-2.0
# GpuqFixExport.cmake - run at install time, after install(EXPORT gpuqTargets)
# (client/lib/CMakeLists.txt), with _gpuq_libdir set (cmake/GpuqLibDir.cmake).
#
# The libraries' destination is \${_gpuq_libdir}, known only when
# installing. CMake writes it into the export files as that literal text and
# counts it as one directory when it computes _IMPORT_PREFIX from the
# files' place (<libdir>/cmake/gpuq). Here the installed files get the real
# directory, and one more step up for each further component of it
# (lib/x86_64-linux-gnu: one). Text CMake generated changed so that the
# edit no longer fits stops the install, rather than leaving a package
# whose find_package(gpuq) points nowhere (tests/pkg/test_install.sh builds
# against it).

set(_gpuq_dir "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${_gpuq_libdir}/cmake/gpuq")
file(GLOB _gpuq_files "${_gpuq_dir}/gpuqTargets*.cmake")
if(NOT _gpuq_files)
  message(FATAL_ERROR "gpuq: no gpuqTargets*.cmake in ${_gpuq_dir}")
endif()
string(REGEX MATCHALL "[^/]+" _gpuq_parts "${_gpuq_libdir}")
list(LENGTH _gpuq_parts _gpuq_depth)
set(_gpuq_up "get_filename_component(_IMPORT_PREFIX \"\${CMAKE_CURRENT_LIST_FILE}\" PATH)\n")
set(_gpuq_more "${_gpuq_up}")
while(_gpuq_depth GREATER 1)
  string(APPEND _gpuq_more "get_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\n")
  math(EXPR _gpuq_depth "${_gpuq_depth} - 1")
endwhile()
set(_gpuq_literal "\\\${_gpuq_libdir}")
foreach(_gpuq_f ${_gpuq_files})
  file(READ "${_gpuq_f}" _gpuq_text)
  string(FIND "${_gpuq_text}" "${_gpuq_literal}" _gpuq_at)
  if(_gpuq_f MATCHES "/gpuqTargets\\.cmake$")
    string(FIND "${_gpuq_text}" "${_gpuq_up}" _gpuq_at_up)
    if(_gpuq_at_up LESS 0)
      message(FATAL_ERROR "gpuq: ${_gpuq_f} does not compute _IMPORT_PREFIX as expected")
    endif()
    string(REPLACE "${_gpuq_up}" "${_gpuq_more}" _gpuq_text "${_gpuq_text}")
  elseif(_gpuq_at LESS 0)
    message(FATAL_ERROR "gpuq: ${_gpuq_f} does not name the libraries' directory as ${_gpuq_literal}")
  endif()
  string(REPLACE "${_gpuq_literal}" "${_gpuq_libdir}" _gpuq_text "${_gpuq_text}")
  file(WRITE "${_gpuq_f}" "${_gpuq_text}")
endforeach()
unset(_gpuq_text)
