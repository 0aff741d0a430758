# CMake functions a backend plugin builds its delegate with; `find_package(etkit CONFIG)` includes this file.
#
# A plugin's CMakeLists.txt describes only what is its own (sources, vendor SDK paths, extra generated files):
#
#   etkit_add_payload_schema(<package>_schema SCHEMA schema/<name>.fbs PACKAGE <package>)
#   etkit_add_delegate(<package> SOURCES runtime/src/a.cpp ... SCHEMA <package>_schema
#                      PYTHON_MODULE runtime/python/delegate_module.cpp)
#
# and gets the layout every plugin shares (docs/plugins.md, "CMake: etkit_add_payload_schema and etkit_add_delegate"): the static delegate library
# exported as <package>::delegate for native runners, the module that registers it with the shared runtime
# for Python, the generated payload code for C++ and Python, and the CMake package
# <package>/lib/cmake/<package>/<package>Config.cmake, all installed inside the Python package <package>
# (scikit-build-core installs into site-packages).
include_guard(GLOBAL)
set_property(GLOBAL PROPERTY ETKIT_PLUGIN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

# flatc and the flatbuffers headers of one release (cache variables ETKIT_FLATC, ETKIT_FLATBUFFERS_INCLUDE_DIR),
# found when a function first needs them: a native runner that only links delegates needs neither.
macro(_etkit_find_flatc)
  if(NOT ETKIT_FLATC OR NOT ETKIT_FLATBUFFERS_INCLUDE_DIR)
    get_property(_etkit_cmake_dir GLOBAL PROPERTY ETKIT_PLUGIN_CMAKE_DIR)
    include("${_etkit_cmake_dir}/FindFlatc.cmake")
  endif()
endmacro()

# etkit_runtime_rpath(<target> <install dir>)
#   Lets <target>, installed at site-packages/<install dir>, find libetkit_runtime.so of the installed core:
#   relative to $ORIGIN when both wheels share a site-packages, else at the path it had at build time (also
#   the build tree's run path, for tests run from the build directory).
function(etkit_runtime_rpath target install_dir)
  if(NOT Python_SITEARCH)
    find_package(Python 3.9 REQUIRED COMPONENTS Interpreter)
  endif()
  get_target_property(_location etkit::runtime LOCATION)
  get_filename_component(_runtime_dir "${_location}" DIRECTORY)
  file(RELATIVE_PATH _relative "${Python_SITEARCH}/${install_dir}" "${_runtime_dir}")
  set_target_properties(${target} PROPERTIES
    INSTALL_RPATH "$ORIGIN/${_relative};${_runtime_dir}"
    BUILD_RPATH "${_runtime_dir}")
endfunction()

# etkit_add_payload_schema(<target> SCHEMA <file.fbs> PACKAGE <python package>)
#   flatc generates C++ (<build>/generated/cpp/<schema name>_generated.h, scoped enums) and the Python object
#   API (the schema's namespace must be `<package>.fb`, installed as <package>/fb). <target> builds both (ALL)
#   and carries the C++ include directory in its property ETKIT_GENERATED_INCLUDE_DIR.
function(etkit_add_payload_schema target)
  cmake_parse_arguments(ARG "" "SCHEMA;PACKAGE" "" ${ARGN})
  if(NOT ARG_SCHEMA OR NOT ARG_PACKAGE)
    message(FATAL_ERROR "etkit_add_payload_schema(${target}): SCHEMA and PACKAGE are required")
  endif()
  _etkit_find_flatc()
  get_filename_component(_schema "${ARG_SCHEMA}" ABSOLUTE)
  get_filename_component(_stem "${_schema}" NAME_WE)
  set(_gen "${CMAKE_CURRENT_BINARY_DIR}/generated")
  set(_header "${_gen}/cpp/${_stem}_generated.h")
  set(_stamp "${_gen}/${_stem}.python.stamp")
  add_custom_command(
    OUTPUT "${_header}"
    COMMAND "${ETKIT_FLATC}" --cpp --scoped-enums -o "${_gen}/cpp" "${_schema}"
    DEPENDS "${_schema}"
    COMMENT "flatc: C++ code for ${_stem}.fbs")
  add_custom_command(
    OUTPUT "${_stamp}"
    COMMAND "${CMAKE_COMMAND}" -E rm -rf "${_gen}/python/${ARG_PACKAGE}/fb"
    COMMAND "${ETKIT_FLATC}" --python --gen-object-api -o "${_gen}/python" "${_schema}"
    COMMAND "${CMAKE_COMMAND}" -E touch "${_gen}/python/${ARG_PACKAGE}/fb/__init__.py"
    COMMAND "${CMAKE_COMMAND}" -E touch "${_stamp}"
    DEPENDS "${_schema}"
    COMMENT "flatc: Python object API for ${_stem}.fbs (${ARG_PACKAGE}.fb)")
  add_custom_target(${target} ALL DEPENDS "${_header}" "${_stamp}")
  set_target_properties(${target} PROPERTIES ETKIT_GENERATED_INCLUDE_DIR "${_gen}/cpp")
  install(DIRECTORY "${_gen}/python/${ARG_PACKAGE}/fb" DESTINATION ${ARG_PACKAGE} FILES_MATCHING PATTERN "*.py")
endfunction()

# etkit_add_delegate(<package> SOURCES <files>...
#                    [SCHEMA <schema target>] [DEPENDS <targets>...]
#                    [PRIVATE_INCLUDE_DIRS <dirs>...] [PRIVATE_LINK_LIBRARIES <libs>...]
#                    [INTERFACE_LINK_LIBRARIES <libs>...]
#                    [PYTHON_MODULE <source> [PYTHON_LINK_LIBRARIES <libs>...]] [SHARED_RUNTIME]
#                    [CONFIG_TEMPLATE <file.cmake.in>])
#   <package>_delegate   static library of SOURCES, exported as <package>::delegate (what `etkit runner build`
#                        links); public headers runtime/include (installed as <package>/include), the
#                        runtime's headers only (the consumer picks the runtime library); private include
#                        dirs runtime/src, the schema's generated code and flatbuffers; built like the
#                        runtime: -fno-exceptions -fno-rtti (C++), hidden visibility, -Wall -Wextra.
#   PYTHON_MODULE        a Python extension `<package>._delegate` from <source>: links the delegate (its
#                        symbols kept private) and the shared etkit runtime, so importing it registers the
#                        backend in the registry the Python runtime uses.
#   SHARED_RUNTIME       instead of an extension, lib<package>_runtime.so in <package>/lib: the whole delegate
#                        linked against the shared runtime, for a plugin that loads it with ctypes.
#   CONFIG_TEMPLATE      the package config template (default cmake/<package>Config.cmake.in).
function(etkit_add_delegate package)
  cmake_parse_arguments(ARG "SHARED_RUNTIME" "SCHEMA;PYTHON_MODULE;CONFIG_TEMPLATE"
                        "SOURCES;DEPENDS;PRIVATE_INCLUDE_DIRS;PRIVATE_LINK_LIBRARIES;INTERFACE_LINK_LIBRARIES;PYTHON_LINK_LIBRARIES"
                        ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "etkit_add_delegate(${package}): SOURCES is required")
  endif()
  foreach(_t headers runtime)
    if(NOT TARGET etkit::${_t})
      message(FATAL_ERROR "${package}: the etkit CMake package (${etkit_DIR}) has no target etkit::${_t}")
    endif()
  endforeach()
  _etkit_find_flatc()
  set(_lib ${package}_delegate)
  add_library(${_lib} STATIC ${ARG_SOURCES})
  set(_generated)
  if(ARG_SCHEMA)
    add_dependencies(${_lib} ${ARG_SCHEMA})
    get_target_property(_generated ${ARG_SCHEMA} ETKIT_GENERATED_INCLUDE_DIR)
  endif()
  if(ARG_DEPENDS)
    add_dependencies(${_lib} ${ARG_DEPENDS})
  endif()
  target_include_directories(${_lib}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/runtime/include> $<INSTALL_INTERFACE:${package}/include>
    PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/runtime/src" ${_generated} "${ETKIT_FLATBUFFERS_INCLUDE_DIR}"
            ${ARG_PRIVATE_INCLUDE_DIRS})
  target_include_directories(${_lib}
    PUBLIC $<BUILD_INTERFACE:$<TARGET_PROPERTY:etkit::runtime,INTERFACE_INCLUDE_DIRECTORIES>>)
  target_link_libraries(${_lib} PRIVATE ${ARG_PRIVATE_LINK_LIBRARIES} INTERFACE ${ARG_INTERFACE_LINK_LIBRARIES})
  target_compile_options(${_lib} PRIVATE -Wall -Wextra -fvisibility=hidden
                         $<$<COMPILE_LANGUAGE:CXX>:-fno-exceptions -fno-rtti>)
  set_target_properties(${_lib} PROPERTIES OUTPUT_NAME ${_lib} EXPORT_NAME delegate)

  if(ARG_PYTHON_MODULE)
    if(NOT COMMAND Python_add_library)
      find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
    endif()
    Python_add_library(_delegate MODULE WITH_SOABI ${ARG_PYTHON_MODULE})
    target_link_libraries(_delegate PRIVATE ${_lib} ${ARG_PYTHON_LINK_LIBRARIES} etkit::runtime)
    target_link_options(_delegate PRIVATE "LINKER:--exclude-libs,ALL" "LINKER:--as-needed")
    etkit_runtime_rpath(_delegate ${package})
    install(TARGETS _delegate LIBRARY DESTINATION ${package})
  endif()
  if(ARG_SHARED_RUNTIME)
    # all of the delegate's code comes from the archive; CMake wants one source of the library's own
    set(_anchor "${CMAKE_CURRENT_BINARY_DIR}/${package}_runtime_anchor.cpp")
    file(WRITE "${_anchor}" "// ${package}_runtime: the whole ${_lib} archive, linked against libetkit_runtime.so.\n")
    add_library(${package}_runtime SHARED "${_anchor}")
    target_link_libraries(${package}_runtime PRIVATE $<LINK_LIBRARY:WHOLE_ARCHIVE,${_lib}> etkit::runtime)
    etkit_runtime_rpath(${package}_runtime ${package}/lib)
    install(TARGETS ${package}_runtime LIBRARY DESTINATION ${package}/lib)
  endif()

  install(TARGETS ${_lib} EXPORT ${package}Targets ARCHIVE DESTINATION ${package}/lib)
  if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/runtime/include/${package}")
    install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/runtime/include/${package}" DESTINATION ${package}/include)
  endif()
  install(EXPORT ${package}Targets NAMESPACE ${package}:: DESTINATION ${package}/lib/cmake/${package})
  set(_template "${ARG_CONFIG_TEMPLATE}")
  if(NOT _template)
    set(_template "${CMAKE_CURRENT_SOURCE_DIR}/cmake/${package}Config.cmake.in")
  endif()
  include(CMakePackageConfigHelpers)
  configure_package_config_file("${_template}" "${CMAKE_CURRENT_BINARY_DIR}/${package}Config.cmake"
                                INSTALL_DESTINATION ${package}/lib/cmake/${package})
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/${package}Config.cmake" DESTINATION ${package}/lib/cmake/${package})
endfunction()
