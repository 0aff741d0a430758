// EValue: the tagged value every program slot holds (schema KernelTypes; ExecuTorch's EValue).
//
// Lists of ints and tensors are "boxed" as in ExecuTorch's emitter: the .pte stores indices of other
// values (so an int list may contain a symbolic size computed at run time). The runtime keeps both
// the pointers to those values and a materialised array, refreshed by `to_int_list()` /
// `to_tensor_list()` without allocating. An OptionalTensorList entry is null for None.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/span.h"
#include "etkit/runtime/tensor.h"

namespace etkit::runtime {

class EValue;

enum class Tag : uint32_t {
  None = 0,
  Int,
  Double,
  Bool,
  String,
  Tensor,
  IntList,
  DoubleList,
  BoolList,
  TensorList,
  OptionalTensorList,
};

/// Name of a tag, e.g. "Tensor".
const char* tag_name(Tag tag);

/// A list whose elements are other EValues (ints or tensors), with a scratch array of the same length
/// that `get()` fills from them. Both arrays are owned by the Method's allocator.
template <typename T>
struct BoxedList {
  EValue* const* wrapped = nullptr;  // size entries; may be null for an OptionalTensorList None
  T* unwrapped = nullptr;            // size entries, refreshed by get()
  size_t size = 0;
  Span<const T> get() const;
};
template <>
Span<const int64_t> BoxedList<int64_t>::get() const;
template <>
Span<Tensor* const> BoxedList<Tensor*>::get() const;

class EValue final {
 public:
  EValue() : tag_(Tag::None) { payload_.as_int = 0; }
  explicit EValue(int64_t v) : tag_(Tag::Int) { payload_.as_int = v; }
  explicit EValue(double v) : tag_(Tag::Double) { payload_.as_double = v; }
  explicit EValue(bool v) : tag_(Tag::Bool) { payload_.as_bool = v; }
  explicit EValue(Tensor* t) : tag_(Tag::Tensor) { payload_.as_tensor = t; }
  static EValue make_string(const char* data, size_t size);
  static EValue make_double_list(const double* data, size_t size);
  static EValue make_bool_list(const bool* data, size_t size);
  static EValue make_int_list(BoxedList<int64_t> list);
  static EValue make_tensor_list(BoxedList<Tensor*> list);
  static EValue make_optional_tensor_list(BoxedList<Tensor*> list);

  Tag tag() const { return tag_; }
  bool is_none() const { return tag_ == Tag::None; }
  bool is_int() const { return tag_ == Tag::Int; }
  bool is_double() const { return tag_ == Tag::Double; }
  bool is_bool() const { return tag_ == Tag::Bool; }
  bool is_string() const { return tag_ == Tag::String; }
  bool is_tensor() const { return tag_ == Tag::Tensor; }
  bool is_int_list() const { return tag_ == Tag::IntList; }
  bool is_double_list() const { return tag_ == Tag::DoubleList; }
  bool is_bool_list() const { return tag_ == Tag::BoolList; }
  bool is_tensor_list() const { return tag_ == Tag::TensorList; }
  bool is_optional_tensor_list() const { return tag_ == Tag::OptionalTensorList; }
  /// Int, Double or Bool.
  bool is_scalar() const { return tag_ == Tag::Int || tag_ == Tag::Double || tag_ == Tag::Bool; }

  // Accessors: the caller checks the tag first (they abort on a mismatch).
  int64_t to_int() const;
  double to_double() const;
  bool to_bool() const;
  /// Int, Double or Bool as a double.
  double scalar_to_double() const;
  /// Int or Bool as int64 (Double is truncated).
  int64_t scalar_to_int() const;
  Tensor& to_tensor() const;
  Span<const char> to_string() const;
  Span<const int64_t> to_int_list() const;
  Span<const double> to_double_list() const;
  Span<const bool> to_bool_list() const;
  /// Tensor pointers; never null for a TensorList, null entries mean None for an OptionalTensorList.
  Span<Tensor* const> to_tensor_list() const;
  Span<Tensor* const> to_optional_tensor_list() const;

 private:
  struct Array {
    const void* data;
    size_t size;
  };
  union Payload {
    int64_t as_int;
    double as_double;
    bool as_bool;
    Tensor* as_tensor;
    Array as_array;
    BoxedList<int64_t> as_int_list;
    BoxedList<Tensor*> as_tensor_list;
    Payload() : as_int(0) {}
  } payload_;
  Tag tag_;
};

}  // namespace etkit::runtime
