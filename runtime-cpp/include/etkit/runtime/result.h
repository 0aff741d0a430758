// Result<T>: either a value or an Error, for a runtime built without exceptions.
//
// Same shape as ExecuTorch's runtime::Result (seed page "Detailed C++ Runtime APIs Tutorial"):
// check ok() (or error()) before get().
#pragma once

#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

#include "etkit/runtime/error.h"

namespace etkit::runtime {

namespace internal {
/// Logs (Fatal) that a Result holding `error` was read as a value, then calls the PAL's abort.
[[noreturn]] void result_value_of_error(Error error);
}  // namespace internal


template <typename T>
class Result final {
 public:
  /// A successful result holding `value`.
  Result(const T& value) : has_value_(true) { new (&value_) T(value); }
  Result(T&& value) : has_value_(true) { new (&value_) T(std::move(value)); }
  /// A failed result. Passing Error::Ok is a programming error and is turned into Error::Internal.
  Result(Error error) : error_(error == Error::Ok ? Error::Internal : error), has_value_(false) {}

  Result(Result&& other) noexcept : has_value_(other.has_value_) {
    if (has_value_) {
      new (&value_) T(std::move(other.value_));
    } else {
      error_ = other.error_;
    }
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  Result& operator=(Result&&) = delete;

  ~Result() {
    if (has_value_) value_.~T();
  }

  bool ok() const { return has_value_; }
  Error error() const { return has_value_ ? Error::Ok : error_; }

  /// The value; aborts if !ok().
  T& get() {
    check_ok();
    return value_;
  }
  const T& get() const {
    check_ok();
    return value_;
  }
  T& operator*() { return get(); }
  const T& operator*() const { return get(); }
  T* operator->() { return &get(); }
  const T* operator->() const { return &get(); }

 private:
  void check_ok() const {
    if (!has_value_) internal::result_value_of_error(error_);
  }
  union {
    T value_;
    Error error_;
  };
  bool has_value_;
};

}  // namespace etkit::runtime

/// Evaluates a Result-returning expression; on failure returns its Error from the enclosing function,
/// otherwise moves the value into `lhs` (a declaration, e.g. `auto prog`).
#define ETKIT_TRY(lhs, expr)                          \
  auto ETKIT_CONCAT_(etkit_res_, __LINE__) = (expr);  \
  if (!ETKIT_CONCAT_(etkit_res_, __LINE__).ok())      \
    return ETKIT_CONCAT_(etkit_res_, __LINE__).error(); \
  lhs = std::move(ETKIT_CONCAT_(etkit_res_, __LINE__).get())
#define ETKIT_CONCAT_IMPL_(a, b) a##b
#define ETKIT_CONCAT_(a, b) ETKIT_CONCAT_IMPL_(a, b)
