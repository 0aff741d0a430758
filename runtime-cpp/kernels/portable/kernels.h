// Shared helpers for the portable kernels: argument access, dtype-generic element loads/stores,
// broadcasting iteration, output resizing and error reporting.
//
// The kernels are reference code: readable first, fast where it is cheap (float32 fast paths).
// Argument positions follow each op's out-variant schema (ExecuTorch kernels/portable/functions.yaml);
// ExecuTorch's emitter appends the return value(s) after the schema arguments, so kernels always index
// arguments from the front.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/float16.h"
#include "etkit/runtime/kernel.h"
#include "etkit/runtime/tensor.h"
#include "etkit/runtime/threadpool.h"

namespace etkit::portable {

using runtime::Error;
using runtime::EValue;
using runtime::Kernel;
using runtime::KernelRuntimeContext;
using runtime::ScalarType;
using runtime::SizesType;
using runtime::Span;
using runtime::Tensor;

/// Kernel table (table.cpp).
const Kernel* kernel_table();
size_t kernel_table_size();

// ------------------------------------------------------------------ errors

/// Records a message and marks the kernel call failed. Always returns false (for `return fail(...)`).
bool fail(KernelRuntimeContext& ctx, Error error, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

// ------------------------------------------------------------------ argument access

/// Checks that `args` has at least `n` entries.
bool check_nargs(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t n);
/// The tensor at args[i], or fails naming op and argument.
Tensor* tensor_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name);
/// A tensor argument of any dtype (data movement does not interpret elements; data_movement.cpp).
Tensor* any_tensor(KernelRuntimeContext& ctx, const char* name, Span<EValue*> args, size_t i, const char* arg);
/// Null for None; fails for anything but a Tensor or None.
bool optional_tensor_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                         Tensor** out);
/// Int/Double/Bool scalar as double.
bool scalar_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                double* out);
bool int_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name, int64_t* out);
/// Int list; a None EValue gives an empty span with *is_none = true (if is_none is given).
bool int_list_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                  Span<const int64_t>* out, bool* is_none = nullptr);
/// A list of tensors (Tensor[]: cat's inputs, split's outputs).
bool tensor_list_arg(KernelRuntimeContext& ctx, const char* name, Span<EValue*> args, size_t i, const char* arg,
                     Span<Tensor* const>* out);
/// A shape given as an int list (view_copy's size, full's size, ...), copied to `sizes`: at most
/// kTensorDimensionLimit entries, each in [0, 2^31), or -1 where `allow_minus_one` (kept as -1). Fails with
/// InvalidArgument naming the entry: the values come from the program, so they are untrusted.
bool shape_list(KernelRuntimeContext& ctx, const char* op, Span<const int64_t> list, const char* name,
                SizesType* sizes, bool allow_minus_one = false);
/// Fails with InvalidArgument unless lo <= v <= hi ("op: 'name' is v; it must be in [lo, hi]"). An Int argument
/// can hold any int64 in a crafted program: check its range before it is multiplied, added or negated.
bool int_in_range(KernelRuntimeContext& ctx, const char* op, int64_t v, int64_t lo, int64_t hi, const char* name);
/// The largest kernel size, stride, dilation or padding a window op (convolution, pooling, im2col/col2im,
/// unfold) takes: with every window value in [0, 2^20] and sizes below 2^31, its geometry stays far from
/// int64 overflow.
constexpr int64_t kMaxWindow = int64_t(1) << 20;
/// Sizes and size-like arguments (a split size, a repeat count, a padding that grows a dim) stay below 2^31.
constexpr int64_t kMaxSize = (int64_t(1) << 31) - 1;
/// Reads a window op's int list for `n` spatial dims into out[0..n): one value is repeated, an empty list gives
/// fallback[d] (when given) or `dflt`; each value must lie in [lo, kMaxWindow] (lo: 1 for a kernel size, stride
/// or dilation, 0 for a padding). Fails with InvalidArgument naming `name` for a list of another length or a
/// value out of range.
bool window_list(KernelRuntimeContext& ctx, const char* op, Span<const int64_t> list, const char* name, size_t n,
                 const int64_t* fallback, int64_t dflt, int64_t lo, int64_t* out);
bool bool_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name, bool* out);
/// Writes a scalar result (Int, Double or Bool) into an op's `EValue out`. The value keeps the type it had at
/// load, which list items and MoveCalls were checked against then: a result of another type, or an `out` that
/// is a Tensor or a list in a crafted program, fails with InvalidArgument. A None `out` takes any scalar.
bool set_scalar_out(KernelRuntimeContext& ctx, const char* op, EValue* out, const EValue& result);
/// String or None (nullptr, size 0).
bool string_arg(KernelRuntimeContext& ctx, const char* op, Span<EValue*> args, size_t i, const char* name,
                const char** data, size_t* size);
bool string_equals(const char* data, size_t size, const char* literal);

// ------------------------------------------------------------------ dtypes

/// Bool, Byte, Char, Short, Int, Long, Half, Float, Double, BFloat16.
bool is_supported_dtype(ScalarType t);
bool is_floating(ScalarType t);
bool is_integral(ScalarType t);  // excludes Bool
/// Fails unless every tensor's dtype is supported: "op: argument 'name' has dtype X, ...".
bool check_dtype(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name);
bool check_floating(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name);

/// float16 / bfloat16 bits <-> float (etkit/runtime/float16.h).
using runtime::bf16_to_float;
using runtime::float_to_bf16;
using runtime::float_to_half;
using runtime::half_to_float;

/// Float -> integer conversions defined for every double (a C++ cast of NaN or an out-of-range value is
/// undefined behaviour): truncation toward zero, and NaN, infinities and values outside the type give the
/// type's minimum, as x86's conversion instructions do (so results match torch eager on x86).
int64_t double_to_int64(double v);
int32_t double_to_int32(double v);

/// Integer arithmetic on tensor elements wraps around (two's complement), as torch's does in practice; signed
/// overflow is undefined behaviour in C++, so it is done in uint64_t.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

double load_double(const void* base, ScalarType t, size_t i);
int64_t load_int(const void* base, ScalarType t, size_t i);
void store_double(void* base, ScalarType t, size_t i, double v);
void store_int(void* base, ScalarType t, size_t i, int64_t v);

// ------------------------------------------------------------------ shapes

/// Normalises a possibly negative dim for a tensor of rank `rank` (rank 0 accepts -1/0).
bool normalize_dim(KernelRuntimeContext& ctx, const char* op, int64_t dim, size_t rank, size_t* out);
/// Resizes `out` to `sizes` (within its planned capacity), failing with a message naming op.
bool resize_out(KernelRuntimeContext& ctx, const char* op, Tensor& out, const SizesType* sizes, size_t dim);
/// Broadcast shape of a and b (numpy rules). Fails naming op and both shapes.
bool broadcast_shape(KernelRuntimeContext& ctx, const char* op, const Tensor& a, const Tensor& b, SizesType* out,
                     size_t* out_dim);
bool same_shape(const Tensor& a, const Tensor& b);

/// Iterates over every element of `out` (its logical index), calling fn(out_offset, in_offsets) with
/// element offsets (not bytes) into out and each input, honouring strides and broadcasting (an input
/// dim of size 1, or missing leading dims, repeats). Inputs must be broadcastable to out.
template <size_t N, typename Fn>
void for_each_broadcast(const Tensor& out, const Tensor* const (&inputs)[N], Fn&& fn) {
  const size_t dim = out.dim();
  const size_t numel = out.numel();
  // Fast path: all shapes and strides equal -> element i of each.
  bool simple = true;
  for (size_t k = 0; k < N && simple; ++k) {
    const Tensor& in = *inputs[k];
    if (in.dim() != dim) { simple = false; break; }
    for (size_t d = 0; d < dim; ++d) {
      if (in.size(d) != out.size(d) || (out.size(d) != 1 && in.stride(d) != out.stride(d))) { simple = false; break; }
    }
  }
  size_t in_off[N > 0 ? N : 1];
  if (simple) {
    for (size_t i = 0; i < numel; ++i) {
      for (size_t k = 0; k < N; ++k) in_off[k] = i;
      fn(i, static_cast<const size_t*>(in_off));
    }
    return;
  }
  int64_t in_strides[N > 0 ? N : 1][runtime::kTensorDimensionLimit];
  for (size_t k = 0; k < N; ++k) {
    const Tensor& in = *inputs[k];
    size_t lead = dim - in.dim();
    for (size_t d = 0; d < dim; ++d) {
      in_strides[k][d] = (d < lead || in.size(d - lead) == 1) ? 0 : in.stride(d - lead);
    }
  }
  int64_t idx[runtime::kTensorDimensionLimit] = {0};
  for (size_t i = 0; i < numel; ++i) {
    size_t o = 0;
    for (size_t d = 0; d < dim; ++d) o += static_cast<size_t>(idx[d] * out.stride(d));
    for (size_t k = 0; k < N; ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < dim; ++d) off += idx[d] * in_strides[k][d];
      in_off[k] = static_cast<size_t>(off);
    }
    fn(o, static_cast<const size_t*>(in_off));
    for (size_t d = dim; d-- > 0;) {
      if (++idx[d] < out.size(d)) break;
      idx[d] = 0;
    }
  }
}

/// Element offset (in elements) of logical index `idx` in t.
inline size_t offset_of(const Tensor& t, const int64_t* idx) {
  int64_t off = 0;
  for (size_t d = 0; d < t.dim(); ++d) off += idx[d] * t.stride(d);
  return static_cast<size_t>(off);
}

/// Advances a row-major logical index over `sizes`; returns false after the last element.
inline bool next_index(int64_t* idx, const SizesType* sizes, size_t dim) {
  for (size_t d = dim; d-- > 0;) {
    if (++idx[d] < sizes[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/// Copies src into dst element by element (same numel, any dtypes, logical row-major order).
void copy_elements(const Tensor& src, Tensor& dst);

}  // namespace etkit::portable
