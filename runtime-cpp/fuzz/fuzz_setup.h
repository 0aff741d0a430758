// What the program-level fuzz targets (fuzz_program, fuzz_bundled_program) do once at start-up: set the
// runtime's memory limit and register the portable kernels and every backend the build links (the
// generated list of runner/registrations_all.cpp.in). A registration failure aborts: a target that runs
// without its kernels or backends would fuzz nothing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/program.h"
#include "registrations.h"

namespace etkit::fuzz {

inline void set_up_program_target(const char* target, uint64_t memory_limit) {
  etkit::runtime::set_memory_limit(memory_limit);
  if (etkit::runner::register_kernels() != 0) {
    std::fprintf(stderr, "%s: registering the portable kernels failed: %s\n", target,
                 etkit::runtime::last_error_message());
    std::abort();
  }
  for (const auto* b = etkit::runner::linked_backends(); b->function_name != nullptr; ++b) {
    if (b->register_fn() != 0) {
      std::fprintf(stderr, "%s: %s() failed: %s\n", target, b->function_name, etkit_backend_registration_error());
      std::abort();
    }
  }
}

}  // namespace etkit::fuzz
