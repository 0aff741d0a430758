// FreeableBuffer: read-only bytes plus the function that releases them (ExecuTorch's FreeableBuffer).
// Move-only; released by Free() or the destructor.
#pragma once

#include <cstddef>

namespace etkit::runtime {

class FreeableBuffer final {
 public:
  /// Called once with (context, data, size) to release the bytes; may be null (nothing to release).
  using FreeFn = void (*)(void* context, void* data, size_t size);

  FreeableBuffer() = default;
  FreeableBuffer(const void* data, size_t size, FreeFn free_fn, void* free_fn_context = nullptr)
      : data_(data), size_(size), free_fn_(free_fn), free_fn_context_(free_fn_context) {}
  FreeableBuffer(FreeableBuffer&& other) noexcept { *this = static_cast<FreeableBuffer&&>(other); }
  FreeableBuffer& operator=(FreeableBuffer&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = other.data_;
      size_ = other.size_;
      free_fn_ = other.free_fn_;
      free_fn_context_ = other.free_fn_context_;
      other.data_ = nullptr;
      other.size_ = 0;
      other.free_fn_ = nullptr;
      other.free_fn_context_ = nullptr;
    }
    return *this;
  }
  FreeableBuffer(const FreeableBuffer&) = delete;
  FreeableBuffer& operator=(const FreeableBuffer&) = delete;
  ~FreeableBuffer() { Free(); }

  /// Releases the bytes (idempotent). data() is null afterwards.
  void Free() {
    if (data_ != nullptr && free_fn_ != nullptr) {
      free_fn_(free_fn_context_, const_cast<void*>(data_), size_);
    }
    data_ = nullptr;
    size_ = 0;
    free_fn_ = nullptr;
  }

  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const void* data_ = nullptr;
  size_t size_ = 0;
  FreeFn free_fn_ = nullptr;
  void* free_fn_context_ = nullptr;
};

}  // namespace etkit::runtime
