// Internal: helpers for reading a file format's bytes (shared by the .pte loader, program.cpp, and the
// .ptd loader, extension/flat_tensor/flat_tensor_data_map.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdlib.h>  // ::aligned_alloc

#include "etkit/runtime/error.h"
#include "etkit/runtime/freeable_buffer.h"

namespace etkit::runtime::internal {

/// Alignment of the flatbuffers the runtime reads (the largest force_align in their schemas).
inline constexpr size_t kFlatbufferAlignment = 16;

inline uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint64_t read_u64(const uint8_t* p) { return uint64_t(read_u32(p)) | uint64_t(read_u32(p + 4)) << 32; }

/// InvalidArgument naming `who` unless [offset, offset + size) lies within `total` bytes (a DataLoader's range
/// check; defined in data_loader.cpp).
Error check_loader_range(const char* who, size_t offset, size_t size, size_t total);

/// Heap memory aligned to `alignment` (a power of two), freed with std::free; null when there is none.
/// std::aligned_alloc, whose size must be a multiple of the alignment: the C library of every target the
/// runtime builds for has it (glibc, newlib), where posix_memalign is POSIX only.
void* aligned_heap_allocate(size_t alignment, size_t size);

/// Leaves `buf` as it is when it starts at a multiple of kFlatbufferAlignment, else replaces it with an
/// aligned copy: flatbuffers and constants are read through typed pointers, and a caller's buffer may start
/// at any address. `what` names the bytes in the error (MemoryAllocationFailed).
Error align_buffer(FreeableBuffer* buf, const char* what);

}  // namespace etkit::runtime::internal
