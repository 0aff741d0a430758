// Memory for packed XNNPACK weights: ranges of large chunks advised for transparent huge pages.
//
// A decode step of an LLM streams every packed weight once (tens to hundreds of MB, no reuse). Read
// through 4 KiB pages, every page crossed is a TLB miss that stalls the stream. Measured here (a /tmp
// microbenchmark of XNNPACK's qd8 x qb4w 1x16c8 GEMV over 76 MB, AMD EPYC, one thread): 18.5 GB/s
// on 4 KiB pages, 23-26 GB/s on huge pages. So packed blocks are placed back to back in chunks that
// start on a huge-page boundary and are madvise(MADV_HUGEPAGE)d (Linux; transparent huge pages in
// "always" or "madvise" mode). Elsewhere, or when a chunk cannot be mapped, blocks live on the heap.
#pragma once

#include <cstddef>
#include <memory>

namespace etkit_xnnpack {

class HugePageChunk;  // packed_memory.cpp

/// Whether later allocations may use huge-page chunks (default true; XnnpackBackend's "huge_pages"
/// option). Off, they come from the heap: on a VM whose host backs guest memory lazily, the first touch
/// of a fresh huge page is slow, so a short-lived process may load faster without them.
void set_huge_pages_enabled(bool enabled);

/// One block's bytes (move-only). Consecutive allocations are consecutive in memory, so the blocks
/// of successive delegates (an LLM's layers) share huge pages even when each fills less than one.
class PackedSpace {
 public:
  PackedSpace() = default;
  /// `size` bytes aligned to 128; empty (data() null) only when even the heap refuses.
  static PackedSpace allocate(size_t size);
  ~PackedSpace() { reset(); }
  PackedSpace(PackedSpace&& other) noexcept;
  PackedSpace& operator=(PackedSpace&& other) noexcept;
  PackedSpace(const PackedSpace&) = delete;
  PackedSpace& operator=(const PackedSpace&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  bool in_huge_pages() const { return chunk_ != nullptr; }

  /// Keeps only the first `size` bytes (<= size()); the rest goes back to the chunk when it is the
  /// chunk's newest allocation.
  void shrink(size_t size);
  /// Frees the bytes: heap memory is freed; a chunk range gives its whole pages back to the system
  /// (madvise(MADV_DONTNEED)) while other blocks keep the chunk, which is unmapped with its last block.
  void reset();

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<HugePageChunk> chunk_;  // null: heap memory (std::free)
};

}  // namespace etkit_xnnpack
