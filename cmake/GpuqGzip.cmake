# SPDX-License-Identifier: Apache-2.0
# GpuqGzip.cmake - cmake [-DSCDOC=scdoc] -DGZIP=gzip -DIN=FILE -DOUT=FILE.gz -P:
# gzip -9n of IN (no name or time stamp in the header, as Debian wants),
# rendered by scdoc first when SCDOC is given (a man page: GpuqMan.cmake;
# the Debian changelog: GpuqPackage.cmake). Fails on any error and leaves
# no OUT behind then.
get_filename_component(_dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${_dir})
set(_plain ${IN})
if(SCDOC)
  string(REGEX REPLACE "\\.gz$" "" _plain ${OUT})
  execute_process(COMMAND ${SCDOC} INPUT_FILE ${IN} OUTPUT_FILE ${_plain} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    file(REMOVE ${_plain})
    message(FATAL_ERROR "scdoc failed on ${IN}")
  endif()
endif()
execute_process(COMMAND ${GZIP} -9n -c ${_plain} OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "gzip failed on ${_plain}")
endif()
file(RENAME ${OUT}.tmp ${OUT})
