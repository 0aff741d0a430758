// Argument checks shared by the LLM kernels (llama::update_cache, llama::custom_sdpa): rank, dtype,
// contiguity and the cache window. Each fails the kernel call with a message naming the op and argument.
#pragma once

#include <cstdint>
#include <cstdio>

#include "../portable/kernels.h"

namespace etkit::portable::llm {

/// Fails unless t is 4-D ([B, S, H, D]).
inline bool check_rank4(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name) {
  if (t.dim() != 4) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' must be 4-D [B, S, H, D], got %zu-D", op, name,
                t.dim());
  }
  return true;
}

/// Fails unless t is float32.
inline bool check_float32(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name) {
  if (t.scalar_type() != ScalarType::Float) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' has dtype %s; the kernel supports Float only", op,
                name, runtime::scalar_type_name(t.scalar_type()));
  }
  return true;
}

/// Fails unless t is float32 or float16.
inline bool check_float_or_half(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name) {
  if (t.scalar_type() != ScalarType::Float && t.scalar_type() != ScalarType::Half) {
    return fail(ctx, Error::InvalidArgument, "%s: argument '%s' has dtype %s; the kernel supports Float and Half",
                op, name, runtime::scalar_type_name(t.scalar_type()));
  }
  return true;
}

/// Fails unless t is row-major contiguous: dim order 0..dim-1 and matching strides (dims of size 1
/// may have any stride).
inline bool check_contiguous(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name) {
  bool ok = t.is_contiguous_dim_order();
  int64_t expected = 1;
  for (size_t d = t.dim(); ok && d-- > 0;) {
    if (t.size(d) != 1 && t.stride(d) != expected) ok = false;
    expected *= t.size(d);
  }
  if (!ok) {
    return fail(ctx, Error::InvalidArgument,
                "%s: argument '%s' must be contiguous (row-major dim order and strides); the kernel does not "
                "support other layouts",
                op, name);
  }
  return true;
}

/// Fails unless rows start_pos .. start_pos + rows - 1 lie within a cache of cache_rows rows.
inline bool check_window(KernelRuntimeContext& ctx, const char* op, int64_t start_pos, int64_t rows,
                         int64_t cache_rows) {
  if (start_pos < 0) {
    return fail(ctx, Error::InvalidArgument, "%s: start_pos %lld is negative", op, static_cast<long long>(start_pos));
  }
  if (start_pos > cache_rows - rows) {
    return fail(ctx, Error::InvalidArgument, "%s: start_pos %lld + %lld rows exceed the cache's %lld rows", op,
                static_cast<long long>(start_pos), static_cast<long long>(rows), static_cast<long long>(cache_rows));
  }
  return true;
}

/// Fails when out's bytes overlap those of the input `name` (the kernels read their inputs while writing out, so an
/// aliased out, which a program's memory plan or caller-owned memory can make, would give wrong numbers).
inline bool check_not_aliased(KernelRuntimeContext& ctx, const char* op, const Tensor& out, const Tensor& t,
                              const char* name) {
  const auto* o = static_cast<const uint8_t*>(out.const_data_ptr());
  const auto* x = static_cast<const uint8_t*>(t.const_data_ptr());
  if (out.nbytes() == 0 || t.nbytes() == 0 || o == nullptr || x == nullptr) return true;
  const uintptr_t ob = reinterpret_cast<uintptr_t>(o), xb = reinterpret_cast<uintptr_t>(x);
  if (ob < xb + t.nbytes() && xb < ob + out.nbytes()) {
    return fail(ctx, Error::InvalidArgument, "%s: 'out' shares memory with '%s'; the kernel needs them apart", op,
                name);
  }
  return true;
}

/// "[a, b, c, d]" of a 4-D tensor, for messages.
struct Shape4 {
  char text[64];
  explicit Shape4(const Tensor& t) {
    std::snprintf(text, sizeof(text), "[%d, %d, %d, %d]", static_cast<int>(t.size(0)), static_cast<int>(t.size(1)),
                  static_cast<int>(t.size(2)), static_cast<int>(t.size(3)));
  }
};

}  // namespace etkit::portable::llm
