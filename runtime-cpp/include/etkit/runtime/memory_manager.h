// Caller-owned memory for a Method (ExecuTorch's MemoryManager and HierarchicalAllocator; seed pages
// "Managing Tensor Memory in C++", "Memory Planning"). A program plans its tensors into buffers, one per
// mem_id (MethodMeta::memory_planned_buffer_size(i) is the size of mem_id i + 1); a caller that owns its
// memory (static arrays on a microcontroller, SRAM and DRAM) hands them over here:
//
//   uint8_t sram[16384], dram[1 << 20], scratch[4096];                 // sized from MethodMeta
//   Span<uint8_t> arenas[] = {{sram, sizeof(sram)}, {dram, sizeof(dram)}};
//   HierarchicalAllocator planned({arenas, 2});
//   MemoryAllocator temp(sizeof(scratch), scratch);
//   MemoryManager memory(/*method_allocator=*/nullptr, &planned, &temp);
//   auto method = program->load_method("forward", &memory);
//
// The buffers must outlive the Method. What is still allocated by the runtime itself: the Method's own
// bookkeeping (values, instructions) and, without a method allocator, what delegates keep from init.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/error.h"
#include "etkit/runtime/memory_allocator.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/span.h"

namespace etkit::runtime {

/// The planned buffers, in mem_id order: buffers[i] holds the tensors of mem_id i + 1.
class HierarchicalAllocator final {
 public:
  explicit HierarchicalAllocator(Span<Span<uint8_t>> buffers) : buffers_(buffers) {}

  size_t size() const { return buffers_.size(); }
  Span<uint8_t> buffer(size_t index) const { return buffers_[index]; }

  /// The address `offset` bytes into buffer `index` (mem_id index + 1) with `size` bytes after it.
  /// Errors: InvalidArgument naming the buffer when there is no such buffer or the range overflows it.
  Result<void*> get_offset_address(uint32_t index, size_t offset, size_t size) const {
    if (index >= buffers_.size()) {
      return set_error(Error::InvalidArgument, "no planned buffer %u (%zu given)", index, buffers_.size());
    }
    const Span<uint8_t>& b = buffers_[index];
    if (offset > b.size() || size > b.size() - offset) {
      return set_error(Error::InvalidArgument, "%zu bytes at offset %zu overflow planned buffer %u of %zu bytes", size,
                       offset, index, b.size());
    }
    return static_cast<void*>(b.data() + offset);
  }

 private:
  Span<Span<uint8_t>> buffers_;
};

/// The memory a Method runs in. Each part may be null: the runtime then uses its own.
///   method_allocator  what delegates keep from init (BackendInitContext::get_runtime_allocator) and the
///                     Method's small load-time lists; lives as long as the Method
///   planned_memory    the planned buffers, one per mem_id (checked against the program's sizes)
///   temp_allocator    scratch that kernels and delegates get during one instruction
class MemoryManager final {
 public:
  explicit MemoryManager(MemoryAllocator* method_allocator, HierarchicalAllocator* planned_memory = nullptr,
                         MemoryAllocator* temp_allocator = nullptr)
      : method_allocator_(method_allocator), planned_memory_(planned_memory), temp_allocator_(temp_allocator) {}

  MemoryAllocator* method_allocator() const { return method_allocator_; }
  HierarchicalAllocator* planned_memory() const { return planned_memory_; }
  MemoryAllocator* temp_allocator() const { return temp_allocator_; }

 private:
  MemoryAllocator* method_allocator_;
  HierarchicalAllocator* planned_memory_;
  MemoryAllocator* temp_allocator_;
};

}  // namespace etkit::runtime
