// The backends statically linked into etkit_runner (the list is generated at configure time).
#pragma once

namespace etkit::runner {

struct BackendRegistration {
  const char* function_name;  // e.g. "etkit_myplugin_register_backends"
  int (*register_fn)(void);   // returns 0 on success
};

/// Null-terminated list (last entry has function_name == nullptr).
const BackendRegistration* linked_backends();

}  // namespace etkit::runner
