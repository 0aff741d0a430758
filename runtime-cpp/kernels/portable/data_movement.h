// Helpers shared by the data-movement kernels (shape_ops.cpp, scatter_ops.cpp, ...): strided views of a
// tensor's storage, index checks (their tensor arguments, of any dtype, are any_tensor's: kernels.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels.h"

namespace etkit::portable {

constexpr size_t kMaxDim = runtime::kTensorDimensionLimit;

struct View {
  size_t dim = 0;
  SizesType sizes[kMaxDim];
  int64_t strides[kMaxDim];
  int64_t offset = 0;
};


/// The identity view of t (its own sizes and strides).
View view_of(const Tensor& t);

/// Copies view `v` of `src` into `out` (resized to the view's shape), element by element.
bool copy_view(KernelRuntimeContext& ctx, const char* name, const Tensor& src, const View& v, Tensor& out);

/// Row-major contiguous copy when both are contiguous, else a logical-order copy.
bool copy_same_order(KernelRuntimeContext& ctx, const char* name, const Tensor& src, Tensor& out, const SizesType* sizes,
                     size_t dim);

bool check_index_dtype(KernelRuntimeContext& ctx, const char* name, const Tensor& t, const char* arg);

bool wrap_index(KernelRuntimeContext& ctx, const char* name, int64_t i, int64_t n, int64_t* out);

/// Copies element `src_off` of a into element `out_off` of out (same dtype).
inline void copy_elem(const Tensor& a, size_t src_off, Tensor& out, size_t out_off) {
  const size_t es = a.element_size();
  std::memcpy(static_cast<uint8_t*>(out.mutable_data_ptr()) + out_off * es,
              static_cast<const uint8_t*>(a.const_data_ptr()) + src_off * es, es);
}

}  // namespace etkit::portable
