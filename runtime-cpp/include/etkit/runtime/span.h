// Span<T>: a non-owning view of `size` contiguous elements (ExecuTorch's runtime::Span).
#pragma once

#include <cstddef>

namespace etkit::runtime {

template <typename T>
class Span final {
 public:
  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  template <size_t N>
  constexpr Span(T (&array)[N]) : data_(array), size_(N) {}
  /// Span<const T> from Span<T>.
  template <typename U>
  constexpr Span(const Span<U>& other) : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace etkit::runtime
