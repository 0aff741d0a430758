# libFuzzer targets for the runtime and for backend delegates (docs/fuzzing.md).
#
# Configure the build with clang and the fuzzing instrumentation for every library, e.g.
#   CC=clang-14 CXX=clang++-14 cmake ... \
#     -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
# (what scripts/fuzz.py does); these functions add the libFuzzer driver (-fsanitize=fuzzer) at link time.
#
#   etkit_add_fuzzer(<name> SOURCES <src>... [LIBS <target>...] [DEFINITIONS <def>...] [INCLUDES <dir>...])
#     One libFuzzer executable.
#
#   etkit_add_delegate_fuzzer(<name> BACKEND_ID <id> REGISTER <function> LIBS <delegate target>...
#                             [SOURCES <extra src>...])
#     The generic delegate target (fuzz/fuzz_delegate.cpp): each input is a test case (a payload with the
#     tensors, compile specs and named data its delegate call receives) handed straight to the backend's
#     init(), then execute() when init succeeds. <function> is the plugin's extern "C" register function.
#     The runtime it links is etkit::runtime_static.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "etkit fuzz targets need clang (libFuzzer): configure with CXX=clang++-14 "
                      "(Debian: apt-get install clang-14 libclang-rt-14-dev); the compiler is ${CMAKE_CXX_COMPILER_ID}")
endif()

if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_delegate.cpp")  # installed: beside this file
  set(ETKIT_FUZZ_DELEGATE_SOURCE "${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz_delegate.cpp")
else()                                                          # the source tree: runtime-cpp/fuzz
  set(ETKIT_FUZZ_DELEGATE_SOURCE "${CMAKE_CURRENT_LIST_DIR}/../fuzz/fuzz_delegate.cpp")
endif()

function(etkit_add_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;DEFINITIONS;INCLUDES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "etkit_add_fuzzer(${name}): no SOURCES")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
  target_include_directories(${name} PRIVATE ${ARG_INCLUDES})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
endfunction()

function(etkit_add_delegate_fuzzer name)
  cmake_parse_arguments(ARG "" "BACKEND_ID;REGISTER" "LIBS;SOURCES" ${ARGN})
  if(NOT ARG_BACKEND_ID OR NOT ARG_REGISTER OR NOT ARG_LIBS)
    message(FATAL_ERROR "etkit_add_delegate_fuzzer(${name}): BACKEND_ID, REGISTER and LIBS are required")
  endif()
  etkit_add_fuzzer(${name} SOURCES "${ETKIT_FUZZ_DELEGATE_SOURCE}" ${ARG_SOURCES}
    LIBS ${ARG_LIBS} etkit::runtime_static
    DEFINITIONS "ETKIT_FUZZ_BACKEND_ID=\"${ARG_BACKEND_ID}\"" "ETKIT_FUZZ_REGISTER=${ARG_REGISTER}")
endfunction()
