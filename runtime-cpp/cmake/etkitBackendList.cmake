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
