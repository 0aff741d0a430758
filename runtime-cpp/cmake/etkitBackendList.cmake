# etkit_backend_registrations(<entries> <decls-var> <entries-var> <libs-var>)
#
# Turns a list of "<cmake-target>=<register function>" entries (ETKIT_RUNNER_BACKENDS and the like) into
# what a generated registration list needs (runner/registrations_all.cpp.in): the C declarations of the
# register functions, the {name, function} table rows, and the targets to link. Each target must exist
# (its package found first). Used by the native runner and by the fuzz targets (fuzz/CMakeLists.txt).
function(etkit_backend_registrations entries decls_var rows_var libs_var)
  set(_decls "")
  set(_rows "")
  set(_libs "")
  foreach(entry IN LISTS entries)
    if(NOT entry MATCHES "^([^=]+)=([A-Za-z_][A-Za-z0-9_]*)$")
      message(FATAL_ERROR "backend entry '${entry}' is not <cmake-target>=<register function>")
    endif()
    set(_target "${CMAKE_MATCH_1}")
    set(_fn "${CMAKE_MATCH_2}")
    if(NOT TARGET "${_target}")
      message(FATAL_ERROR "backend entry '${entry}': '${_target}' is not a CMake target; find its package first "
                          "(ETKIT_RUNNER_PACKAGES and CMAKE_PREFIX_PATH)")
    endif()
    list(APPEND _libs "${_target}")
    string(APPEND _decls "extern \"C\" int ${_fn}(void);\n")
    string(APPEND _rows "    {\"${_fn}\", &${_fn}},\n")
  endforeach()
  set(${decls_var} "${_decls}" PARENT_SCOPE)
  set(${rows_var} "${_rows}" PARENT_SCOPE)
  set(${libs_var} "${_libs}" PARENT_SCOPE)
endfunction()

# etkit_all_kernels_registration_source(<packages> <entries> <out-cpp> <libs-var>)
#
# For an executable that registers every portable kernel and the backends in <entries>: finds each CMake package
# in <packages> (through CMAKE_PREFIX_PATH), writes <out-cpp> from runner/registrations_all.cpp.in (implements
# runner/registrations.h) and sets <libs-var> to the backend targets to link. The fuzz targets and the C++
# concurrency test use it; the runner, which can also select kernels, calls etkit_backend_registrations itself.
function(etkit_all_kernels_registration_source packages entries out_cpp libs_var)
  foreach(pkg IN LISTS packages)
    find_package(${pkg} CONFIG REQUIRED)
  endforeach()
  etkit_backend_registrations("${entries}" ETKIT_RUNNER_DECLS ETKIT_RUNNER_ENTRIES _libs)
  # runtime-cpp/cmake/ in the source tree; lib/cmake/etkit/ beside share/etkit/runner/ once installed
  set(_template "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../runner/registrations_all.cpp.in")
  if(NOT EXISTS "${_template}")
    set(_template "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../../../share/etkit/runner/registrations_all.cpp.in")
  endif()
  configure_file("${_template}" "${out_cpp}" @ONLY)
  set(${libs_var} "${_libs}" PARENT_SCOPE)
endfunction()
