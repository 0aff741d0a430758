// Helpers shared by the data-movement kernels (see data_movement.h).
#include "data_movement.h"

namespace etkit::portable {


/// A tensor argument of any dtype (data movement does not interpret elements).
Tensor* any_tensor(KernelRuntimeContext& ctx, const char* name, Span<EValue*> args, size_t i, const char* arg) {
  if (i >= args.size() || !args[i]->is_tensor()) {
    fail(ctx, Error::InvalidArgument, "%s: argument '%s' (position %zu) must be a Tensor", name, arg, i);
    return nullptr;
  }
  return &args[i]->to_tensor();
}


/// The identity view of t (its own sizes and strides).
View view_of(const Tensor& t) {
  View v;
  v.dim = t.dim();
  for (size_t d = 0; d < t.dim(); ++d) {
    v.sizes[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  return v;
}

/// Copies view `v` of `src` into `out` (resized to the view's shape), element by element.
bool copy_view(KernelRuntimeContext& ctx, const char* name, const Tensor& src, const View& v, Tensor& out) {
  if (src.scalar_type() != out.scalar_type()) {
    return fail(ctx, Error::InvalidArgument, "%s: output dtype %s differs from input dtype %s", name,
                runtime::scalar_type_name(out.scalar_type()), runtime::scalar_type_name(src.scalar_type()));
  }
  if (!resize_out(ctx, name, out, v.sizes, v.dim)) return false;
  const size_t es = src.element_size();
  const uint8_t* s = static_cast<const uint8_t*>(src.const_data_ptr());
  uint8_t* o = static_cast<uint8_t*>(out.mutable_data_ptr());
  const size_t n = out.numel();
  if (n == 0) return true;
  int64_t idx[kMaxDim] = {0};
  // Innermost run: contiguous in both -> copy whole rows.
  const size_t last = v.dim == 0 ? 0 : v.dim - 1;
  const bool row_contig = v.dim > 0 && v.strides[last] == 1 && out.stride(last) == 1;
  const size_t row = row_contig ? static_cast<size_t>(v.sizes[last]) : 1;
  for (size_t i = 0; i < n; i += row) {
    int64_t so = v.offset, oo = 0;
    for (size_t d = 0; d < v.dim; ++d) {
      so += idx[d] * v.strides[d];
      oo += idx[d] * out.stride(d);
    }
    std::memcpy(o + oo * es, s + so * es, es * row);
    if (row_contig) {
      idx[last] = v.sizes[last] - 1;
    }
    for (size_t d = v.dim; d-- > 0;) {
      if (++idx[d] < v.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return true;
}

/// Row-major contiguous copy when both are contiguous, else a logical-order copy.
bool copy_same_order(KernelRuntimeContext& ctx, const char* name, const Tensor& src, Tensor& out, const SizesType* sizes,
                     size_t dim) {
  if (src.scalar_type() != out.scalar_type()) {
    return fail(ctx, Error::InvalidArgument, "%s: output dtype %s differs from input dtype %s", name,
                runtime::scalar_type_name(out.scalar_type()), runtime::scalar_type_name(src.scalar_type()));
  }
  if (!resize_out(ctx, name, out, sizes, dim)) return false;
  if (out.numel() != src.numel()) {
    return fail(ctx, Error::InvalidArgument, "%s: output has %zu elements but the input has %zu", name, out.numel(),
                src.numel());
  }
  if (src.is_contiguous_dim_order() && out.is_contiguous_dim_order()) {  // memmove: out may be src (in place)
    std::memmove(out.mutable_data_ptr(), src.const_data_ptr(), src.nbytes());
    return true;
  }
  copy_elements(src, out);
  return true;
}

bool check_index_dtype(KernelRuntimeContext& ctx, const char* name, const Tensor& t, const char* arg) {
  if (t.scalar_type() != ScalarType::Long && t.scalar_type() != ScalarType::Int) {
    return fail(ctx, Error::NotSupported, "%s: argument '%s' has dtype %s; indices must be Long or Int", name, arg,
                runtime::scalar_type_name(t.scalar_type()));
  }
  return true;
}

bool wrap_index(KernelRuntimeContext& ctx, const char* name, int64_t i, int64_t n, int64_t* out) {
  if (i < -n || i >= n) {
    return fail(ctx, Error::InvalidArgument, "%s: index %lld is out of bounds for a dimension of size %lld", name,
                (long long)i, (long long)n);
  }
  *out = i < 0 ? i + n : i;
  return true;
}


}  // namespace etkit::portable
