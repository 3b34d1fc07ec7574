# SPDX-License-Identifier: Apache-2.0
# GpuqMan.cmake - the man pages gpuqd(8), gpuqctl(1) and gpuqd.conf(5),
# written in scdoc (docs/man/*.scd, scdoc(5)), rendered to roff and
# compressed with gzip -9n (no name or time stamp in the header, as Debian
# wants) into build/man/, installed to share/man/man{1,5,8}.
#
# GPUQ_MAN: AUTO (the default) builds them when scdoc is found and
# otherwise goes on without them; ON requires them (tests/dev.sh test, so CI
# and the .deb have them); OFF skips them. GPUQ_HAVE_MAN says what was
# chosen. scdoc takes the date of the page from SOURCE_DATE_EPOCH when set.

set(GPUQ_MAN AUTO CACHE STRING "Build the man pages with scdoc: AUTO, ON or OFF")
set_property(CACHE GPUQ_MAN PROPERTY STRINGS AUTO ON OFF)
set(GPUQ_HAVE_MAN OFF)
find_program(GPUQ_GZIP gzip)
if(NOT GPUQ_MAN STREQUAL "OFF")
  find_program(GPUQ_SCDOC scdoc)
  if(GPUQ_SCDOC AND GPUQ_GZIP)
    set(GPUQ_HAVE_MAN ON)
  elseif(GPUQ_MAN STREQUAL "ON")
    message(FATAL_ERROR "GPUQ_MAN=ON but scdoc or gzip was not found (apt-get install scdoc)")
  else()
    message(STATUS "gpuq: no scdoc, so no man pages (apt-get install scdoc, or -DGPUQ_MAN=OFF)")
  endif()
endif()
message(STATUS "gpuq: man pages ${GPUQ_HAVE_MAN}")

if(GPUQ_HAVE_MAN)
  set(_gpuq_man_out)
  foreach(page gpuqd.8 gpuqctl.1 gpuqd.conf.5)
    string(REGEX MATCH "[0-9]$" _sec ${page})
    set(_src ${PROJECT_SOURCE_DIR}/docs/man/${page}.scd)
    set(_gz ${PROJECT_BINARY_DIR}/man/${page}.gz)
    add_custom_command(OUTPUT ${_gz}
      COMMAND ${CMAKE_COMMAND} -DSCDOC=${GPUQ_SCDOC} -DGZIP=${GPUQ_GZIP} -DIN=${_src}
              -DOUT=${_gz} -P ${PROJECT_SOURCE_DIR}/cmake/GpuqGzip.cmake
      DEPENDS ${_src} ${PROJECT_SOURCE_DIR}/cmake/GpuqGzip.cmake
      COMMENT "man page ${page}"
      VERBATIM)
    list(APPEND _gpuq_man_out ${_gz})
    install(FILES ${_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_sec})
  endforeach()
  add_custom_target(gpuq_man ALL DEPENDS ${_gpuq_man_out})
endif()
