// The one kernel registry of a process: fixed capacity, no allocation (see kernel.h).
#include <cstdio>
#include <cstring>

#include "etkit/runtime/kernel.h"

namespace etkit::runtime {
namespace {

constexpr size_t kMaxKernels = 1024;
Kernel g_kernels[kMaxKernels];
size_t g_num_kernels = 0;

// Compares "ns::op.overload" (or "ns::op" when overload is empty) with `full` without building a string.
bool name_matches(const char* full, const char* op_name, const char* overload) {
  size_t n = std::strlen(op_name);
  if (std::strncmp(full, op_name, n) != 0) return false;
  if (overload == nullptr || overload[0] == '\0') return full[n] == '\0';
  return full[n] == '.' && std::strcmp(full + n + 1, overload) == 0;
}

}  // namespace

Error register_kernel(const char* name, KernelFunction fn) {
  if (name == nullptr || fn == nullptr) {
    return set_error(Error::InvalidArgument, "register_kernel: name and function must not be null");
  }
  for (size_t i = 0; i < g_num_kernels; ++i) {
    if (std::strcmp(g_kernels[i].name, name) == 0) {
      g_kernels[i].fn = fn;
      return Error::Ok;
    }
  }
  if (g_num_kernels == kMaxKernels) {
    return set_error(Error::OutOfResources, "register_kernel: cannot register '%s': registry full (%zu kernels)",
                     name, kMaxKernels);
  }
  g_kernels[g_num_kernels++] = Kernel{name, fn};
  return Error::Ok;
}

Error register_kernels(Span<const Kernel> kernels) {
  for (const Kernel& k : kernels) ETKIT_CHECK_OK(register_kernel(k.name, k.fn));
  return Error::Ok;
}

KernelFunction get_kernel(const char* name) {
  if (name == nullptr) return nullptr;
  for (size_t i = 0; i < g_num_kernels; ++i) {
    if (std::strcmp(g_kernels[i].name, name) == 0) return g_kernels[i].fn;
  }
  return nullptr;
}

KernelFunction get_kernel(const char* op_name, const char* overload) {
  if (op_name == nullptr) return nullptr;
  for (size_t i = 0; i < g_num_kernels; ++i) {
    if (name_matches(g_kernels[i].name, op_name, overload)) return g_kernels[i].fn;
  }
  return nullptr;
}

size_t registered_kernel_count() { return g_num_kernels; }

const char* registered_kernel_name(size_t index) { return index < g_num_kernels ? g_kernels[index].name : nullptr; }

}  // namespace etkit::runtime
