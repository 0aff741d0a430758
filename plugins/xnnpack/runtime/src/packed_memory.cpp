#include "packed_memory.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace etkit_xnnpack {

namespace {

/// Packed weights are read with aligned SIMD loads: align as XNNPACK's own allocator does at most.
constexpr size_t kAlignment = 128;
/// Transparent huge pages are 2 MiB on x86-64 and on arm64 with 4 KiB base pages.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr uintptr_t kPage = 4096;
/// Address space reserved per chunk; only what is written gets backed.
constexpr size_t kChunkBytes = size_t{64} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

#if defined(__linux__) && defined(MADV_HUGEPAGE)
constexpr bool kHasHugePages = true;
#else
constexpr bool kHasHugePages = false;
#endif

}  // namespace

/// A mapping that starts on a huge-page boundary, advised for transparent huge pages.
class HugePageChunk {
 public:
  /// A chunk of at least `size` bytes, or null when the system cannot map one.
  static std::shared_ptr<HugePageChunk> map(size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t length = round_up(size, kHugePage);
    void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = round_up(start, kHugePage);
    const uintptr_t end = start + length + kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    if (end > aligned + length) munmap(reinterpret_cast<void*>(aligned + length), end - (aligned + length));
    void* data = reinterpret_cast<void*>(aligned);
    (void)madvise(data, length, MADV_HUGEPAGE);  // advice only: without THP this is ordinary memory
    return std::shared_ptr<HugePageChunk>(new HugePageChunk(data, length));
#else
    (void)size;
    return nullptr;
#endif
  }
  ~HugePageChunk() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    munmap(data_, length_);
#endif
  }
  HugePageChunk(const HugePageChunk&) = delete;
  HugePageChunk& operator=(const HugePageChunk&) = delete;

  char* data() const { return static_cast<char*>(data_); }
  size_t length() const { return length_; }

  /// Gives the whole pages inside [begin, begin + size) back to the system; reading them gives zeros.
  void release(const void* begin, size_t size) const {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t first = round_up(reinterpret_cast<uintptr_t>(begin), kPage);
    const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + size) / kPage * kPage;
    if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
#else
    (void)begin;
    (void)size;
#endif
  }

 private:
  HugePageChunk(void* data, size_t length) : data_(data), length_(length) {}
  void* data_;
  size_t length_;
};

namespace {

/// Hands out consecutive ranges of the current chunk; maps a new one when it is full or gone (all
/// its blocks freed: the arena only holds a weak reference, so an unloaded program's chunk is unmapped).
struct Arena {
  std::mutex mutex;
  std::weak_ptr<HugePageChunk> current;
  size_t used = 0;  // bytes of `current` handed out, a multiple of kAlignment
};

Arena& arena() {
  static Arena* instance = new Arena();  // never destroyed: blocks may outlive static destructors
  return *instance;
}

std::atomic<bool> g_huge_pages_enabled{true};

}  // namespace

void set_huge_pages_enabled(bool enabled) { g_huge_pages_enabled.store(enabled); }

PackedSpace PackedSpace::allocate(size_t size) {
  PackedSpace space;
  const size_t rounded = round_up(std::max<size_t>(size, 1), kAlignment);
  if (kHasHugePages && g_huge_pages_enabled.load()) {
    Arena& a = arena();
    std::lock_guard<std::mutex> lock(a.mutex);
    std::shared_ptr<HugePageChunk> chunk = a.current.lock();
    if (chunk == nullptr || chunk->length() - a.used < rounded) {
      chunk = HugePageChunk::map(std::max(kChunkBytes, rounded));
      if (chunk != nullptr) {
        a.current = chunk;
        a.used = 0;
      }
    }
    if (chunk != nullptr) {
      space.data_ = chunk->data() + a.used;
      space.size_ = size;
      space.chunk_ = std::move(chunk);
      a.used += rounded;
      return space;
    }
  }
  space.data_ = std::aligned_alloc(kAlignment, rounded);
  space.size_ = space.data_ == nullptr ? 0 : size;
  return space;
}

PackedSpace::PackedSpace(PackedSpace&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), chunk_(std::move(other.chunk_)) {}

PackedSpace& PackedSpace::operator=(PackedSpace&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    chunk_ = std::move(other.chunk_);
  }
  return *this;
}

void PackedSpace::shrink(size_t size) {
  if (size >= size_) return;
  if (chunk_ != nullptr) {
    Arena& a = arena();
    std::lock_guard<std::mutex> lock(a.mutex);
    const size_t end = static_cast<size_t>(static_cast<char*>(data_) - chunk_->data()) + round_up(size_, kAlignment);
    if (a.current.lock() == chunk_ && a.used == end) a.used = end - round_up(size_, kAlignment) + round_up(size, kAlignment);
  }
  size_ = size;
}

void PackedSpace::reset() {
  if (data_ == nullptr) return;
  if (chunk_ == nullptr) {
    std::free(data_);
  } else {
    if (chunk_.use_count() > 1) chunk_->release(data_, size_);  // the chunk stays mapped: give this back
    chunk_.reset();
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace etkit_xnnpack
