// Kernel registry: operator name -> function (ExecuTorch's kernel registry, seed page "Kernel
// Registration"; names as ExecuTorch registers them, e.g. "aten::add.out",
// "dim_order_ops::_to_dim_order_copy.out").
//
// A kernel receives every argument of the op's out-variant schema in order, then the out tensor(s)
// (contracts.md section 2). It reports failure through ctx.fail() after recording a message with
// set_error() naming op, argument and dtype; it must not allocate from the heap.
#pragma once

#include <cstddef>

#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/memory_allocator.h"
#include "etkit/runtime/span.h"

namespace etkit::runtime {

class KernelRuntimeContext final {
 public:
  explicit KernelRuntimeContext(MemoryAllocator* temp_allocator = nullptr) : temp_allocator_(temp_allocator) {}
  /// Marks the call failed; the Method stops and returns `error`.
  void fail(Error error) { failure_ = error; }
  Error failure_state() const { return failure_; }
  /// Scratch memory valid for this call; may be null.
  MemoryAllocator* temp_allocator() { return temp_allocator_; }
  /// Scratch bytes, or null when there is no temp allocator or it is exhausted.
  void* allocate_temp(size_t size, size_t alignment = MemoryAllocator::kDefaultAlignment) {
    return temp_allocator_ == nullptr ? nullptr : temp_allocator_->allocate(size, alignment);
  }

 private:
  MemoryAllocator* temp_allocator_;
  Error failure_ = Error::Ok;
};

using KernelFunction = void (*)(KernelRuntimeContext& ctx, Span<EValue*> args);

struct Kernel {
  const char* name;  // "namespace::op.overload"; must outlive the registry (string literal)
  KernelFunction fn;
};

/// Registers kernels. A name registered again is replaced (last one wins). Errors:
/// OutOfResources when the registry is full; InvalidArgument for a null name or function.
Error register_kernels(Span<const Kernel> kernels);
Error register_kernel(const char* name, KernelFunction fn);
/// The kernel named "ns::op.overload" (or "ns::op" when overload is empty), or null.
KernelFunction get_kernel(const char* name);
/// Same, from an Operator's (name, overload) pair as stored in the .pte.
KernelFunction get_kernel(const char* op_name, const char* overload);
size_t registered_kernel_count();
const char* registered_kernel_name(size_t index);

}  // namespace etkit::runtime

extern "C" {
/// Registers the portable kernels (libetkit_portable_kernels). Returns 0 on success.
int etkit_register_portable_kernels(void);
}
