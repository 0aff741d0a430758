# CMake toolchain for the bare-metal runner: Debian's gcc-arm-none-eabi with newlib, for Cortex-M55
# (Armv8.1-M with Helium/MVE and the double-precision FPU, hard-float ABI), no OS.
#   cmake -S runtime-cpp/baremetal -B build/m55 -DCMAKE_TOOLCHAIN_FILE=runtime-cpp/baremetal/toolchain-cortex-m55.cmake
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR cortex-m55)
set(ETKIT_ARM_TOOLCHAIN_PREFIX "arm-none-eabi-" CACHE STRING "Prefix of the cross tools (arm-none-eabi-gcc ...)")
find_program(CMAKE_C_COMPILER ${ETKIT_ARM_TOOLCHAIN_PREFIX}gcc)
find_program(CMAKE_CXX_COMPILER ${ETKIT_ARM_TOOLCHAIN_PREFIX}g++)
find_program(CMAKE_ASM_COMPILER ${ETKIT_ARM_TOOLCHAIN_PREFIX}gcc)
find_program(ETKIT_ARM_SIZE ${ETKIT_ARM_TOOLCHAIN_PREFIX}size)
if(NOT CMAKE_C_COMPILER OR NOT CMAKE_CXX_COMPILER)
  message(FATAL_ERROR "${ETKIT_ARM_TOOLCHAIN_PREFIX}gcc/g++ not found: install Debian's gcc-arm-none-eabi, "
                      "libnewlib-arm-none-eabi and libstdc++-arm-none-eabi-newlib (scripts/setup_system.sh)")
endif()
# A test program cannot link without the start-up files: try compiling a static library instead.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(ETKIT_CPU_FLAGS "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard")
set(CMAKE_C_FLAGS_INIT "${ETKIT_CPU_FLAGS}")
set(CMAKE_CXX_FLAGS_INIT "${ETKIT_CPU_FLAGS}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${ETKIT_CPU_FLAGS}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
