#include "bounded_allocator.h"

#include <cstdlib>

#include "etkit/runtime/program.h"  // effective_memory_limit

namespace etkit_xnnpack {
namespace {

thread_local size_t refused_bytes = 0;

bool over_limit(size_t size) {
  if (size <= etkit::runtime::effective_memory_limit()) return false;
  refused_bytes = size;
  return true;
}

void* allocate(void*, size_t size) { return over_limit(size) ? nullptr : std::malloc(size); }

void* reallocate(void*, void* pointer, size_t size) {
  return over_limit(size) ? nullptr : std::realloc(pointer, size);
}

void deallocate(void*, void* pointer) { std::free(pointer); }

void* aligned_allocate(void*, size_t alignment, size_t size) {
  if (over_limit(size)) return nullptr;
#if defined(_WIN32)
  return _aligned_malloc(size, alignment);
#else
  void* block = nullptr;
  return posix_memalign(&block, alignment, size) == 0 ? block : nullptr;
#endif
}

void aligned_deallocate(void*, void* pointer) {
#if defined(_WIN32)
  _aligned_free(pointer);
#else
  std::free(pointer);
#endif
}

// XNNPACK keeps a pointer to this table: it must outlive every XNNPACK object.
const xnn_allocator kBoundedAllocator = {
    /*context=*/nullptr, allocate, reallocate, deallocate, aligned_allocate, aligned_deallocate,
};

}  // namespace

xnn_status initialize_xnnpack() { return xnn_initialize(&kBoundedAllocator); }

size_t take_refused_allocation() {
  const size_t bytes = refused_bytes;
  refused_bytes = 0;
  return bytes;
}

}  // namespace etkit_xnnpack
