// EValue accessors and boxed-list materialisation (see evalue.h).
#include "etkit/runtime/evalue.h"

#include "etkit/runtime/log.h"

#include <cstdlib>

namespace etkit::runtime {

const char* tag_name(Tag tag) {
  switch (tag) {
    case Tag::None: return "None";
    case Tag::Int: return "Int";
    case Tag::Double: return "Double";
    case Tag::Bool: return "Bool";
    case Tag::String: return "String";
    case Tag::Tensor: return "Tensor";
    case Tag::IntList: return "IntList";
    case Tag::DoubleList: return "DoubleList";
    case Tag::BoolList: return "BoolList";
    case Tag::TensorList: return "TensorList";
    case Tag::OptionalTensorList: return "OptionalTensorList";
  }
  return "Unknown";
}

template <>
Span<const int64_t> BoxedList<int64_t>::get() const {
  for (size_t i = 0; i < size; ++i) unwrapped[i] = wrapped[i]->to_int();
  return {unwrapped, size};
}

template <>
Span<Tensor* const> BoxedList<Tensor*>::get() const {
  for (size_t i = 0; i < size; ++i) {
    const EValue* v = wrapped[i];
    unwrapped[i] = (v == nullptr || !v->is_tensor()) ? nullptr : &v->to_tensor();
  }
  return {unwrapped, size};
}

namespace {
[[noreturn]] void tag_mismatch() {
  ETKIT_LOG(Fatal, "an EValue was read as a type it does not hold (check is_<type>() first)");
  pal_abort();
}
}  // namespace

EValue EValue::make_string(const char* data, size_t size) {
  EValue v;
  v.tag_ = Tag::String;
  v.payload_.as_array = {data, size};
  return v;
}
EValue EValue::make_double_list(const double* data, size_t size) {
  EValue v;
  v.tag_ = Tag::DoubleList;
  v.payload_.as_array = {data, size};
  return v;
}
EValue EValue::make_bool_list(const bool* data, size_t size) {
  EValue v;
  v.tag_ = Tag::BoolList;
  v.payload_.as_array = {data, size};
  return v;
}
EValue EValue::make_int_list(BoxedList<int64_t> list) {
  EValue v;
  v.tag_ = Tag::IntList;
  v.payload_.as_int_list = list;
  return v;
}
EValue EValue::make_tensor_list(BoxedList<Tensor*> list) {
  EValue v;
  v.tag_ = Tag::TensorList;
  v.payload_.as_tensor_list = list;
  return v;
}
EValue EValue::make_optional_tensor_list(BoxedList<Tensor*> list) {
  EValue v;
  v.tag_ = Tag::OptionalTensorList;
  v.payload_.as_tensor_list = list;
  return v;
}

int64_t EValue::to_int() const {
  if (tag_ != Tag::Int) tag_mismatch();
  return payload_.as_int;
}
double EValue::to_double() const {
  if (tag_ != Tag::Double) tag_mismatch();
  return payload_.as_double;
}
bool EValue::to_bool() const {
  if (tag_ != Tag::Bool) tag_mismatch();
  return payload_.as_bool;
}
double EValue::scalar_to_double() const {
  switch (tag_) {
    case Tag::Int: return static_cast<double>(payload_.as_int);
    case Tag::Double: return payload_.as_double;
    case Tag::Bool: return payload_.as_bool ? 1.0 : 0.0;
    default: tag_mismatch();
  }
}
int64_t EValue::scalar_to_int() const {
  switch (tag_) {
    case Tag::Int: return payload_.as_int;
    case Tag::Double: return static_cast<int64_t>(payload_.as_double);
    case Tag::Bool: return payload_.as_bool ? 1 : 0;
    default: tag_mismatch();
  }
}
Tensor& EValue::to_tensor() const {
  if (tag_ != Tag::Tensor) tag_mismatch();
  return *payload_.as_tensor;
}
Span<const char> EValue::to_string() const {
  if (tag_ != Tag::String) tag_mismatch();
  return {static_cast<const char*>(payload_.as_array.data), payload_.as_array.size};
}
Span<const int64_t> EValue::to_int_list() const {
  if (tag_ != Tag::IntList) tag_mismatch();
  return payload_.as_int_list.get();
}
Span<const double> EValue::to_double_list() const {
  if (tag_ != Tag::DoubleList) tag_mismatch();
  return {static_cast<const double*>(payload_.as_array.data), payload_.as_array.size};
}
Span<const bool> EValue::to_bool_list() const {
  if (tag_ != Tag::BoolList) tag_mismatch();
  return {static_cast<const bool*>(payload_.as_array.data), payload_.as_array.size};
}
Span<Tensor* const> EValue::to_tensor_list() const {
  if (tag_ != Tag::TensorList) tag_mismatch();
  return payload_.as_tensor_list.get();
}
Span<Tensor* const> EValue::to_optional_tensor_list() const {
  if (tag_ != Tag::OptionalTensorList) tag_mismatch();
  return payload_.as_tensor_list.get();
}

}  // namespace etkit::runtime
