// MemoryAllocator: a bump allocator over one caller-provided buffer (ExecuTorch's MemoryAllocator).
// allocate() never touches the heap; reset() frees everything at once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace etkit::runtime {

class MemoryAllocator {
 public:
  static constexpr size_t kDefaultAlignment = 16;

  MemoryAllocator() = default;
  MemoryAllocator(size_t size, uint8_t* base) : base_(base), size_(size) {}
  virtual ~MemoryAllocator() = default;

  /// `size` bytes aligned to `alignment` (a power of two), or null when the buffer is exhausted.
  virtual void* allocate(size_t size, size_t alignment = kDefaultAlignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
    uintptr_t start = reinterpret_cast<uintptr_t>(base_) + used_;
    uintptr_t aligned = (start + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t needed = (aligned - start) + size;
    if (base_ == nullptr || needed > size_ - used_) return nullptr;
    used_ += needed;
    return reinterpret_cast<void*>(aligned);
  }
  template <typename T>
  T* allocate_list(size_t count, size_t alignment = alignof(T) < kDefaultAlignment ? kDefaultAlignment : alignof(T)) {
    return static_cast<T*>(allocate(sizeof(T) * count, alignment));
  }
  virtual void reset() { used_ = 0; }

  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }
  size_t used() const { return used_; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
};

}  // namespace etkit::runtime
