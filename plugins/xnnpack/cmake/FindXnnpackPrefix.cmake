# Locates the XNNPACK build that scripts/xnnpack.sh produced and wraps it in the INTERFACE target
# `etkit_xnnpack_vendor` (headers + static archives in link order + pthread/m).
# Sets XNNPACK_ROOT (cache), XNNPACK_ARCHIVES (the archive files, for installing) and
# XNNPACK_ARCHIVE_NAMES (their file names, for the installed package config).
set(XNNPACK_ROOT "$ENV{XNNPACK_ROOT}" CACHE PATH
    "Prefix printed by scripts/xnnpack.sh (include/xnnpack.h, lib/libXNNPACK.a, ...)")
if(NOT XNNPACK_ROOT OR NOT EXISTS "${XNNPACK_ROOT}/include/xnnpack.h")
  message(FATAL_ERROR
    "etkit-xnnpack: XNNPACK not found (XNNPACK_ROOT='${XNNPACK_ROOT}'). Build it once with\n"
    "  scripts/xnnpack.sh\n"
    "and pass the prefix it prints last, e.g.\n"
    "  XNNPACK_ROOT=$(scripts/xnnpack.sh) pip install --no-build-isolation -e plugins/xnnpack")
endif()

set(XNNPACK_ARCHIVES)
# Link order matters for static archives: XNNPACK, its microkernels, then pthreadpool and cpuinfo.
# XNNPACK's own install names the microkernel archive libmicrokernels-prod.a; accept either name.
set(XNNPACK_ARCHIVE_NAMES)
foreach(_names "XNNPACK" "microkernels-prod;xnnpack-microkernels-prod" "pthreadpool" "cpuinfo")
  set(_candidates)
  foreach(_n IN LISTS _names)
    list(APPEND _candidates "lib${_n}.a")
  endforeach()
  unset(_found)
  unset(_found CACHE)
  find_file(_found NAMES ${_candidates} PATHS "${XNNPACK_ROOT}/lib" NO_DEFAULT_PATH NO_CACHE)
  if(NOT _found)
    message(FATAL_ERROR "etkit-xnnpack: none of ${_candidates} is in ${XNNPACK_ROOT}/lib; rebuild with scripts/xnnpack.sh")
  endif()
  get_filename_component(_real "${_found}" REALPATH)  # install the file, never a symlink to it
  list(APPEND XNNPACK_ARCHIVES "${_real}")
  get_filename_component(_base "${_real}" NAME)
  list(APPEND XNNPACK_ARCHIVE_NAMES "${_base}")
endforeach()
unset(_found)

add_library(etkit_xnnpack_vendor INTERFACE)
target_include_directories(etkit_xnnpack_vendor INTERFACE "${XNNPACK_ROOT}/include")
target_link_libraries(etkit_xnnpack_vendor INTERFACE ${XNNPACK_ARCHIVES} Threads::Threads m)
message(STATUS "etkit-xnnpack: XNNPACK from ${XNNPACK_ROOT}")
