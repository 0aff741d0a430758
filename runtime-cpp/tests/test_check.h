// CHECK(cond) for the C++ tests: a failed condition is printed with the runtime's last error message
// and counted in `failures` (main returns non-zero when it is not 0).
#pragma once

#include <cstdio>

#include "etkit/runtime/error.h"

inline int failures = 0;

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "FAILED %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,                  \
                   etkit::runtime::last_error_message());                                         \
      ++failures;                                                                                 \
    }                                                                                             \
  } while (0)
