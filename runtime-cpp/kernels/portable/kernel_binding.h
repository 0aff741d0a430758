// Kernel wrappers from the kernel list: portable_kernels.inc gives each kernel its name and its argument
// signature, and the templates here check the argument count, unpack every argument with the helpers of
// kernels.h (so with their error messages) and call a typed implementation.
//
//   portable_kernels.inc:
//     ETKIT_PORTABLE_KERNEL("aten::add.out", add_out, "Tensor self, Tensor other, Scalar alpha, Tensor out")
//   elementwise.cpp:
//     ETKIT_KERNEL(add_out, Tensor* a, Tensor* b, double alpha, Tensor* out) { ... }
//
// The signature is "<kind> <name>, ..." with kinds
//   Tensor   -> Tensor*                      (tensor_arg: never null in the implementation)
//   AnyTensor -> Tensor*                     (any_tensor: any dtype, for kernels that only move data)
//   Tensor?  -> Tensor*                      (optional_tensor_arg: null for None)
//   Scalar   -> double, or ScalarValue to also see the EValue (an Int stays an Int)
//   Scalar?  -> OptionalScalar               (None -> has_value false)
//   int      -> int64_t                      (int_arg)
//   int?     -> OptionalInt                  (None -> has_value false)
//   bool     -> bool                         (bool_arg)
//   bool?    -> OptionalBool                 (None -> has_value false)
//   Tensor[] -> Span<Tensor* const>          (tensor_list_arg)
//   int[]    -> Span<const int64_t>, or IntList to see None (int_list_arg: None gives an empty list)
//   str?     -> StringValue                  (string_arg: None gives data == nullptr)
//   EValue   -> EValue*                      (no check: the implementation reads the value itself)
//   unused   -> (no parameter)               (an argument the kernel ignores: counted, never read)
// The op name is written only in portable_kernels.inc.
#pragma once

#include <cstddef>
#include <type_traits>

#include "kernels.h"

namespace etkit::portable {

// ------------------------------------------------------------------ argument values

/// An optional argument (Scalar?, int?, bool?): has_value is false for None.
template <typename T>
struct Optional {
  bool has_value;
  T value;
};
using OptionalScalar = Optional<double>;
using OptionalInt = Optional<int64_t>;
using OptionalBool = Optional<bool>;

/// A Scalar argument: its value as a double, and the EValue itself (an Int keeps its exact value).
struct ScalarValue {
  double value;
  const EValue* evalue;
  template <typename T, typename = std::enable_if_t<std::is_same_v<T, double>>>
  operator T() const { return value; }  // only to double: no silent narrowing to an int parameter
};
/// Strict int / bool carriers: they convert to their own type only, so a signature saying `int` cannot
/// feed a `double` or `bool` parameter by accident.
struct IntValue {
  int64_t value;
  template <typename T, typename = std::enable_if_t<std::is_same_v<T, int64_t>>>
  operator T() const { return value; }
};
struct BoolValue {
  bool value;
  template <typename T, typename = std::enable_if_t<std::is_same_v<T, bool>>>
  operator T() const { return value; }
};
struct IntList {
  Span<const int64_t> list;
  bool is_none;
  operator Span<const int64_t>() const { return list; }
};
struct StringValue {
  const char* data;
  size_t size;
};

// ------------------------------------------------------------------ signature parsing (compile time)

namespace signature {

enum class Kind {
  Tensor, AnyTensor, OptionalTensor, TensorList, Scalar, OptionalScalar, Int, OptionalInt, Bool, OptionalBool, IntList,
  OptionalString, EValue, Unused, Unknown
};

constexpr size_t count(const char* s) {
  if (s[0] == '\0') return 0;
  size_t n = 1;
  for (size_t i = 0; s[i] != '\0'; ++i) n += s[i] == ',' ? 1 : 0;
  return n;
}

struct Field {
  size_t type_begin, type_end, name_begin, name_end;
};

constexpr Field field(const char* s, size_t index) {
  size_t p = 0;
  for (size_t k = 0; k < index; ++k) {
    while (s[p] != ',') ++p;
    ++p;
  }
  while (s[p] == ' ') ++p;
  Field f{p, p, p, p};
  while (s[p] != ' ' && s[p] != ',' && s[p] != '\0') ++p;
  f.type_end = p;
  while (s[p] == ' ') ++p;
  f.name_begin = p;
  while (s[p] != ' ' && s[p] != ',' && s[p] != '\0') ++p;
  f.name_end = p;
  return f;
}

constexpr bool equals(const char* s, size_t begin, size_t end, const char* literal) {
  size_t i = 0;
  for (; begin + i < end; ++i) {
    if (literal[i] != s[begin + i]) return false;
  }
  return literal[i] == '\0';
}

constexpr Kind kind(const char* s, size_t index) {
  const Field f = field(s, index);
  const size_t b = f.type_begin, e = f.type_end;
  if (equals(s, b, e, "Tensor")) return Kind::Tensor;
  if (equals(s, b, e, "AnyTensor")) return Kind::AnyTensor;
  if (equals(s, b, e, "Tensor?")) return Kind::OptionalTensor;
  if (equals(s, b, e, "Tensor[]")) return Kind::TensorList;
  if (equals(s, b, e, "Scalar")) return Kind::Scalar;
  if (equals(s, b, e, "Scalar?")) return Kind::OptionalScalar;
  if (equals(s, b, e, "int")) return Kind::Int;
  if (equals(s, b, e, "int?")) return Kind::OptionalInt;
  if (equals(s, b, e, "bool")) return Kind::Bool;
  if (equals(s, b, e, "bool?")) return Kind::OptionalBool;
  if (equals(s, b, e, "int[]")) return Kind::IntList;
  if (equals(s, b, e, "str?")) return Kind::OptionalString;
  if (equals(s, b, e, "EValue")) return Kind::EValue;
  if (equals(s, b, e, "unused")) return Kind::Unused;
  return Kind::Unknown;
}

constexpr size_t name_length(const char* s, size_t index) {
  const Field f = field(s, index);
  return f.name_end - f.name_begin;
}

/// A null-terminated copy of the argument name at `index` (N = its length + 1).
template <size_t N>
struct Name {
  char text[N];
};
template <size_t N>
constexpr Name<N> name(const char* s, size_t index) {
  const Field f = field(s, index);
  Name<N> n{};
  for (size_t i = 0; i + 1 < N; ++i) n.text[i] = s[f.name_begin + i];
  return n;
}

/// The argument name at `I` of signature `S::args`, as a null-terminated string (for error messages).
template <typename S, size_t I>
inline constexpr Name<name_length(S::args, I) + 1> kArgName = name<name_length(S::args, I) + 1>(S::args, I);

}  // namespace signature

// ------------------------------------------------------------------ unpacking

/// ArgReader<K>::read(ctx, op, args, i, name, &value) reads argument i of kind K, or records an error naming
/// op and the argument and returns false.
template <signature::Kind K>
struct ArgReader;

/// A kind read into a T by a function shaped like the helpers of kernels.h (one of them, or one of reader::).
template <typename T, bool (*Get)(KernelRuntimeContext&, const char*, Span<EValue*>, size_t, const char*, T*)>
struct HelperReader {
  using type = T;
  static bool read(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n, T* out) {
    return Get(ctx, op, args, i, n, out);
  }
};
template <Tensor* (*Get)(KernelRuntimeContext&, const char*, Span<EValue*>, size_t, const char*)>
struct TensorReader {
  using type = Tensor*;
  static bool read(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n,
                   Tensor** out) {
    *out = Get(ctx, op, args, i, n);
    return *out != nullptr;
  }
};
/// Scalar?, int?, bool?: None, or the value of kind Inner.
template <signature::Kind Inner, typename T>
struct OptionalReader {
  using type = Optional<T>;
  static bool read(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n,
                   Optional<T>* out) {
    *out = Optional<T>{false, T{}};
    if (i < args.size() && args[i]->is_none()) return true;
    typename ArgReader<Inner>::type inner{};
    if (!ArgReader<Inner>::read(ctx, op, args, i, n, &inner)) return false;
    *out = Optional<T>{true, inner.value};
    return true;
  }
};

namespace reader {
inline bool scalar(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n,
                   ScalarValue* out) {
  out->evalue = i < args.size() ? args[i] : nullptr;
  return scalar_arg(ctx, op, args, i, n, &out->value);
}
inline bool integer(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n,
                    IntValue* out) {
  return int_arg(ctx, op, args, i, n, &out->value);
}
inline bool boolean(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n,
                    BoolValue* out) {
  return bool_arg(ctx, op, args, i, n, &out->value);
}
inline bool int_list(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n,
                     IntList* out) {
  return int_list_arg(ctx, op, args, i, n, &out->list, &out->is_none);
}
inline bool string(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* n,
                   StringValue* out) {
  return string_arg(ctx, op, args, i, n, &out->data, &out->size);
}
inline bool evalue(KernelRuntimeContext&, const char*, Span<EValue*> args, size_t i, const char*, EValue** out) {
  *out = args[i];  // in range: bind_kernel checked the count first
  return true;
}
}  // namespace reader

using signature::Kind;
template <> struct ArgReader<Kind::Tensor> : TensorReader<tensor_arg> {};
template <> struct ArgReader<Kind::AnyTensor> : TensorReader<any_tensor> {};
template <> struct ArgReader<Kind::OptionalTensor> : HelperReader<Tensor*, optional_tensor_arg> {};
template <> struct ArgReader<Kind::TensorList> : HelperReader<Span<Tensor* const>, tensor_list_arg> {};
template <> struct ArgReader<Kind::Scalar> : HelperReader<ScalarValue, reader::scalar> {};
template <> struct ArgReader<Kind::OptionalScalar> : OptionalReader<Kind::Scalar, double> {};
template <> struct ArgReader<Kind::Int> : HelperReader<IntValue, reader::integer> {};
template <> struct ArgReader<Kind::OptionalInt> : OptionalReader<Kind::Int, int64_t> {};
template <> struct ArgReader<Kind::Bool> : HelperReader<BoolValue, reader::boolean> {};
template <> struct ArgReader<Kind::OptionalBool> : OptionalReader<Kind::Bool, bool> {};
template <> struct ArgReader<Kind::IntList> : HelperReader<IntList, reader::int_list> {};
template <> struct ArgReader<Kind::OptionalString> : HelperReader<StringValue, reader::string> {};
template <> struct ArgReader<Kind::EValue> : HelperReader<EValue*, reader::evalue> {};

/// Reads argument I of S (then I+1, ...) and finally calls impl(ctx, S::name, values...). Stops at the
/// first argument that fails (the reader has recorded the error), as the hand-written unpacking did.
template <typename S, size_t I, typename Impl, typename... Values>
void bind_from(KernelRuntimeContext& ctx, Span<EValue*> args, Impl impl, Values... values) {
  if constexpr (I == signature::count(S::args)) {
    impl(ctx, S::name, values...);
  } else {
    constexpr signature::Kind kind = signature::kind(S::args, I);
    static_assert(kind != signature::Kind::Unknown, "portable_kernels.inc: unknown argument kind in a signature");
    static_assert(signature::name_length(S::args, I) > 0, "portable_kernels.inc: an argument has no name");
    if constexpr (kind == signature::Kind::Unused) {
      bind_from<S, I + 1>(ctx, args, impl, values...);
    } else {
      typename ArgReader<kind>::type value{};
      if (!ArgReader<kind>::read(ctx, S::name, args, I, signature::kArgName<S, I>.text, &value)) return;
      bind_from<S, I + 1>(ctx, args, impl, values..., value);
    }
  }
}

/// Checks the argument count of signature S, unpacks every argument and calls `impl`.
template <typename S, typename Impl>
void bind_kernel(KernelRuntimeContext& ctx, Span<EValue*> args, Impl impl) {
  if (!check_nargs(ctx, S::name, args, signature::count(S::args))) return;
  bind_from<S, 0>(ctx, args, impl);
}

/// One struct per kernel of portable_kernels.inc: kernel_schema::add_out::name / ::args.
namespace kernel_schema {
#define ETKIT_PORTABLE_KERNEL(op, fn, sig)   \
  struct fn {                                \
    static constexpr const char* name = op;  \
    static constexpr const char* args = sig; \
  };
#include "portable_kernels.inc"
#undef ETKIT_PORTABLE_KERNEL
}  // namespace kernel_schema

}  // namespace etkit::portable

/// Defines kernel `fn` (the function the table registers) from its implementation, whose body follows:
///   ETKIT_KERNEL(add_out, Tensor* a, Tensor* b, double alpha, Tensor* out) { ...uses ctx, name, a... }
/// The parameters follow the signature in portable_kernels.inc; `name` is the op name from the list.
#define ETKIT_KERNEL(fn, ...)                                                      \
  static void fn##_impl(KernelRuntimeContext& ctx, const char* name, __VA_ARGS__); \
  ETKIT_KERNEL_FROM(fn, fn##_impl)                                                 \
  static void fn##_impl(KernelRuntimeContext& ctx, const char* name, __VA_ARGS__)

/// Defines kernel `fn` from a shared implementation `impl(ctx, name, values...)` (a family of kernels):
///   ETKIT_KERNEL_FROM(mul_out, tensor_tensor<Bin::Mul>)
#define ETKIT_KERNEL_FROM(fn, ...)                            \
  void fn(KernelRuntimeContext& ctx, Span<EValue*> args) {    \
    bind_kernel<kernel_schema::fn>(ctx, args, __VA_ARGS__);   \
  }
