# The runtime's source files, relative to the runtime-cpp directory (or to share/etkit/runtime-src in an
# installed package), for the two kinds of build:
#   ETKIT_RUNTIME_CORE_SOURCES  what every target builds: the loader, Method, registries, errors, the PAL
#                               glue; BufferDataLoader only (no file system, no threads, no OS calls)
#   ETKIT_RUNTIME_HOSTED_SOURCES  the rest, for a target with an OS: file and mmap loaders, the worker pool,
#                               Module, the devtools and .ptd extensions
# A build without threads (ETKIT_THREADS=OFF, bare metal) takes src/threadpool_serial.cpp instead of
# src/threadpool.cpp and defines ETKIT_SINGLE_THREADED=1; its PAL default is src/pal/minimal.cpp.
set(ETKIT_RUNTIME_CORE_SOURCES
  src/error.cpp src/scalar_type.cpp src/tensor.cpp src/evalue.cpp src/data_loader.cpp src/backend_registry.cpp
  src/kernel_registry.cpp src/program.cpp src/method.cpp src/event_tracer.cpp src/platform.cpp
  src/named_data_map.cpp)
set(ETKIT_RUNTIME_HOSTED_SOURCES
  src/file_data_loader.cpp src/module.cpp src/threadpool.cpp
  extension/devtools/bundled_program.cpp extension/devtools/etdump.cpp extension/flat_tensor/flat_tensor_data_map.cpp)

# etkit_isa_copy_flags(<dir>): the kernels built once per instruction set (kernels/llm/attention_<isa>.cpp,
# see attention.h) get their flags: -mavx2 -mfma for _avx2, -mavx512f -mavx2 -mfma for _avx512, when the
# target is x86 and the compiler GCC or Clang. Elsewhere the files compile as stubs and need no flags.
function(etkit_isa_copy_flags dir)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    set_source_files_properties("${dir}/attention_avx2.cpp" PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
    set_source_files_properties("${dir}/attention_avx512.cpp" PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx2;-mfma")
  endif()
endfunction()
