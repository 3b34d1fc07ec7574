# SPDX-License-Identifier: Apache-2.0
# GpuqSystemDirs.cmake - where the units, the sysusers file and the config
# go for an install prefix (see GpuqInstall.cmake). Read at configure time
# (for prefix /usr: the .deb's conffiles, the tests) and by
# gpuq_install_system.cmake at install time (for the prefix in use), so the
# rule is written once.
#
# Inputs: GPUQ_SYSTEMD_UNITDIR, GPUQ_SYSUSERSDIR, GPUQ_SYSCONFDIR (the
# settings: empty, absolute or relative) and GPUQ_SYSTEM_UNITDIR,
# GPUQ_SYSTEM_SYSUSERSDIR, GPUQ_SYSTEM_SYSCONFDIR (the system's places).

# gpuq_system_dir(OUT SETTING SYSTEM_PLACE IN_PREFIX PREFIX)
function(gpuq_system_dir out setting system_place in_prefix prefix)
  if(NOT prefix STREQUAL "/")
    string(REGEX REPLACE "/+$" "" prefix "${prefix}")
  endif()
  if(setting AND IS_ABSOLUTE "${setting}")
    set(dir "${setting}")
  elseif(setting)
    cmake_path(APPEND prefix "${setting}" OUTPUT_VARIABLE dir)
  elseif(prefix STREQUAL "/usr")
    set(dir "${system_place}")
  else()
    cmake_path(APPEND prefix "${in_prefix}" OUTPUT_VARIABLE dir)
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# gpuq_system_dirs(PREFIX UNITDIR_OUT SYSUSERSDIR_OUT SYSCONFDIR_OUT)
function(gpuq_system_dirs prefix unit_out sysusers_out conf_out)
  gpuq_system_dir(u "${GPUQ_SYSTEMD_UNITDIR}" "${GPUQ_SYSTEM_UNITDIR}" lib/systemd/system "${prefix}")
  gpuq_system_dir(s "${GPUQ_SYSUSERSDIR}" "${GPUQ_SYSTEM_SYSUSERSDIR}" lib/sysusers.d "${prefix}")
  gpuq_system_dir(c "${GPUQ_SYSCONFDIR}" "${GPUQ_SYSTEM_SYSCONFDIR}" etc "${prefix}")
  set(${unit_out} "${u}" PARENT_SCOPE)
  set(${sysusers_out} "${s}" PARENT_SCOPE)
  set(${conf_out} "${c}" PARENT_SCOPE)
endfunction()
