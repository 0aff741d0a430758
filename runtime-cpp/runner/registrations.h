// What etkit_runner registers at start-up: the kernels and the backends linked into it. The
// definitions are generated at configure time (registrations_all.cpp.in / registrations_selected.cpp.in).
#pragma once

namespace etkit::runner {

struct BackendRegistration {
  const char* function_name;  // e.g. "etkit_myplugin_register_backends"
  int (*register_fn)(void);   // returns 0 on success
};

/// Null-terminated list (last entry has function_name == nullptr).
const BackendRegistration* linked_backends();

/// Registers the portable kernels linked into this runner (all, or a selective build's subset).
/// Returns 0 on success.
int register_kernels();

/// Number of kernels register_kernels() registers; 0 means "the whole portable library".
int selected_kernel_count();

}  // namespace etkit::runner
