// Copy-variants of view ops and other data-movement kernels: view_copy, permute_copy, expand_copy,
// slice_copy, select_copy, unfold_copy, unsqueeze_copy, squeeze_copy, transpose_copy, t_copy, cat, stack, split,
// unbind, clone, _to_copy, _to_dim_order_copy, full, zeros, ones, scalar_tensor, arange, index_select,
// index.Tensor, embedding, constant_pad_nd, repeat, gather, sym_size.
//
// Most view ops are written as "describe a strided view of self, then copy it to out": the view is a
// (sizes, strides, offset) triple over self's storage, copied element by element in logical order.
// Pure data movement copies bytes, so it works for every dtype.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "data_movement.h"
#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {

// view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out)
ETKIT_KERNEL(view_copy_out, Tensor* a, Span<const int64_t> size, Tensor* out) {
  SizesType s[kMaxDim];
  if (!shape_list(ctx, name, size, "size", s, /*allow_minus_one=*/true)) return;
  int64_t known = 1;
  int infer = -1;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == -1) {
      if (infer >= 0) {
        fail(ctx, Error::InvalidArgument, "%s: only one dimension can be -1", name);
        return;
      }
      infer = static_cast<int>(d);
      s[d] = 1;
    } else if (__builtin_mul_overflow(known, size[d], &known) || known >= (int64_t(1) << 31)) {
      fail(ctx, Error::InvalidArgument, "%s: size has 2^31 or more elements", name);
      return;
    }
  }
  if (infer >= 0) s[infer] = known == 0 ? 0 : static_cast<SizesType>(static_cast<int64_t>(a->numel()) / known);
  copy_same_order(ctx, name, *a, *out, s, size.size());
}

// permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out)
ETKIT_KERNEL(permute_copy_out, Tensor* a, Span<const int64_t> dims, Tensor* out) {
  if (dims.size() != a->dim()) {
    fail(ctx, Error::InvalidArgument, "%s: dims has %zu entries for a rank-%zu tensor", name, dims.size(), a->dim());
    return;
  }
  View v;
  v.dim = a->dim();
  bool seen[kMaxDim] = {false};
  for (size_t d = 0; d < v.dim; ++d) {
    size_t src_d;
    if (!normalize_dim(ctx, name, dims[d], a->dim(), &src_d)) return;
    if (seen[src_d]) {
      fail(ctx, Error::InvalidArgument, "%s: dims repeats dimension %zu", name, src_d);
      return;
    }
    seen[src_d] = true;
    v.sizes[d] = a->size(src_d);
    v.strides[d] = a->stride(src_d);
  }
  copy_view(ctx, name, *a, v, *out);
}

// transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out)
ETKIT_KERNEL(transpose_copy_int_out, Tensor* a, int64_t d0, int64_t d1, Tensor* out) {
  size_t n0, n1;
  if (!normalize_dim(ctx, name, d0, a->dim(), &n0) || !normalize_dim(ctx, name, d1, a->dim(), &n1)) return;
  View v = view_of(*a);
  if (a->dim() > 0) {
    v.sizes[n0] = a->size(n1);
    v.sizes[n1] = a->size(n0);
    v.strides[n0] = a->stride(n1);
    v.strides[n1] = a->stride(n0);
  }
  copy_view(ctx, name, *a, v, *out);
}

// t_copy.out(Tensor self, *, Tensor(a!) out)
ETKIT_KERNEL(t_copy_out, Tensor* a, Tensor* out) {
  if (a->dim() > 2) {
    fail(ctx, Error::InvalidArgument, "%s: self must be at most 2-D, got %zu-D", name, a->dim());
    return;
  }
  View v = view_of(*a);
  if (a->dim() == 2) {
    v.sizes[0] = a->size(1);
    v.sizes[1] = a->size(0);
    v.strides[0] = a->stride(1);
    v.strides[1] = a->stride(0);
  }
  copy_view(ctx, name, *a, v, *out);
}

// expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out)
ETKIT_KERNEL(expand_copy_out, Tensor* a, Span<const int64_t> size, Tensor* out) {
  if (size.size() < a->dim() || size.size() > kMaxDim) {
    fail(ctx, Error::InvalidArgument, "%s: cannot expand a rank-%zu tensor to %zu dims", name, a->dim(), size.size());
    return;
  }
  View v;
  v.dim = size.size();
  size_t lead = size.size() - a->dim();
  SizesType checked[kMaxDim];
  if (!shape_list(ctx, name, size, "size", checked, /*allow_minus_one=*/true)) return;
  for (size_t d = 0; d < v.dim; ++d) {
    if (d < lead) {
      if (size[d] < 0) {
        fail(ctx, Error::InvalidArgument, "%s: the new leading dim %zu cannot be -1", name, d);
        return;
      }
      v.sizes[d] = checked[d];
      v.strides[d] = 0;
      continue;
    }
    SizesType in_size = a->size(d - lead);
    int64_t want = size[d] == -1 ? in_size : size[d];
    if (in_size != want && in_size != 1) {
      fail(ctx, Error::InvalidArgument, "%s: cannot expand dim %zu from %d to %lld", name, d, in_size, (long long)want);
      return;
    }
    v.sizes[d] = static_cast<SizesType>(want);
    v.strides[d] = in_size == want ? a->stride(d - lead) : 0;
  }
  copy_view(ctx, name, *a, v, *out);
}

// slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1, *, Tensor(a!) out)
ETKIT_KERNEL(slice_copy_tensor_out, Tensor* a, int64_t dim, OptionalInt start_arg, OptionalInt end_arg, int64_t step,
             Tensor* out) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  if (step <= 0) {
    fail(ctx, Error::InvalidArgument, "%s: step must be positive, got %lld", name, (long long)step);
    return;
  }
  if (a->dim() == 0) {
    fail(ctx, Error::InvalidArgument, "%s: cannot slice a 0-D tensor", name);
    return;
  }
  const int64_t n = a->size(d);
  step = std::min(step, std::max<int64_t>(n, 1));  // same result; keeps end - start + step and stride * step small
  int64_t start = start_arg.has_value ? start_arg.value : 0;
  int64_t end = end_arg.has_value ? end_arg.value : n;
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = start < 0 ? 0 : (start > n ? n : start);
  end = end < start ? start : (end > n ? n : end);
  View v = view_of(*a);
  v.sizes[d] = static_cast<SizesType>((end - start + step - 1) / step);
  v.strides[d] = a->stride(d) * step;
  v.offset = start * a->stride(d);
  copy_view(ctx, name, *a, v, *out);
}

// unfold_copy.out(Tensor self, int dimension, int size, int step, *, Tensor(a!) out): every window of `size`
// elements along `dimension`, `step` apart, as a new last dim of length `size`; the windowed dim holds
// (n - size) / step + 1 windows (ATen's Tensor.unfold). A 0-D self gives [size] with size 0 or 1.
ETKIT_KERNEL(unfold_copy_out, Tensor* a, int64_t dim, int64_t size, int64_t step, Tensor* out) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  const int64_t n = a->dim() == 0 ? 1 : a->size(d);
  if (step <= 0) {
    fail(ctx, Error::InvalidArgument, "%s: step must be positive, got %lld", name, (long long)step);
    return;
  }
  if (size < 0 || size > n) {
    fail(ctx, Error::InvalidArgument, "%s: size %lld does not fit dimension %zu of size %lld", name, (long long)size,
         d, (long long)n);
    return;
  }
  step = std::min(step, std::max<int64_t>(n, 1));  // same windows; keeps stride * step small
  if (a->dim() + 1 > kMaxDim) {
    fail(ctx, Error::InvalidArgument, "%s: the result would have %zu dims, more than %zu", name, a->dim() + 1,
         kMaxDim);
    return;
  }
  View v = view_of(*a);
  if (a->dim() == 0) {
    v.dim = 1;
    v.sizes[0] = static_cast<SizesType>(size);
    v.strides[0] = 1;
  } else {
    v.sizes[d] = static_cast<SizesType>((n - size) / step + 1);
    v.strides[d] = a->stride(d) * step;
    v.dim = a->dim() + 1;
    v.sizes[a->dim()] = static_cast<SizesType>(size);
    v.strides[a->dim()] = a->stride(d);
  }
  copy_view(ctx, name, *a, v, *out);
}

// select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out)
ETKIT_KERNEL(select_copy_int_out, Tensor* a, int64_t dim, int64_t index, Tensor* out) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  if (a->dim() == 0) {
    fail(ctx, Error::InvalidArgument, "%s: cannot select from a 0-D tensor", name);
    return;
  }
  const int64_t n = a->size(d);
  if (index < -n || index >= n) {
    fail(ctx, Error::InvalidArgument, "%s: index %lld out of range for dim %zu of size %lld", name, (long long)index, d,
         (long long)n);
    return;
  }
  if (index < 0) index += n;
  View v;
  v.dim = a->dim() - 1;
  for (size_t s = 0, t = 0; s < a->dim(); ++s) {
    if (s == d) continue;
    v.sizes[t] = a->size(s);
    v.strides[t] = a->stride(s);
    ++t;
  }
  v.offset = index * a->stride(d);
  copy_view(ctx, name, *a, v, *out);
}

// unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out)
ETKIT_KERNEL(unsqueeze_copy_out, Tensor* a, int64_t dim, Tensor* out) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim() + 1, &d)) return;
  if (a->dim() + 1 > kMaxDim) {
    fail(ctx, Error::InvalidArgument, "%s: the result would have %zu dims, more than %zu", name, a->dim() + 1, kMaxDim);
    return;
  }
  SizesType s[kMaxDim];
  for (size_t i = 0, j = 0; i < a->dim() + 1; ++i) s[i] = i == d ? 1 : a->size(j++);
  copy_same_order(ctx, name, *a, *out, s, a->dim() + 1);
}

namespace {
void squeeze_impl(KernelRuntimeContext& ctx, const char* name, const Tensor& a, const bool* squeeze, Tensor& out) {
  SizesType s[kMaxDim];
  size_t n = 0;
  for (size_t d = 0; d < a.dim(); ++d) {
    if (squeeze[d] && a.size(d) == 1) continue;
    s[n++] = a.size(d);
  }
  copy_same_order(ctx, name, a, out, s, n);
}
}  // namespace

// squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out)
ETKIT_KERNEL(squeeze_copy_dims_out, Tensor* a, Span<const int64_t> dims, Tensor* out) {
  bool sq[kMaxDim] = {false};
  for (int64_t dim : dims) {
    size_t d;
    if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
    if (a->dim() > 0) sq[d] = true;
  }
  squeeze_impl(ctx, name, *a, sq, *out);
}

// squeeze_copy.dim_out(Tensor self, int dim, *, Tensor(a!) out)
ETKIT_KERNEL(squeeze_copy_dim_out, Tensor* a, int64_t dim, Tensor* out) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  bool sq[kMaxDim] = {false};
  if (a->dim() > 0) sq[d] = true;
  squeeze_impl(ctx, name, *a, sq, *out);
}

// squeeze_copy.out(Tensor self, *, Tensor(a!) out)
ETKIT_KERNEL(squeeze_copy_out, Tensor* a, Tensor* out) {
  bool sq[kMaxDim];
  for (size_t d = 0; d < kMaxDim; ++d) sq[d] = true;
  squeeze_impl(ctx, name, *a, sq, *out);
}

namespace {
/// clone / _to_copy / _to_dim_order_copy: element copy with dtype conversion into out's layout.
void convert_copy(KernelRuntimeContext& ctx, const char* name, Tensor* a, Tensor* out) {
  if (!resize_out(ctx, name, *out, a->sizes().data(), a->dim())) return;
  if (a->scalar_type() != out->scalar_type() &&
      (!check_dtype(ctx, name, *a, "self") || !check_dtype(ctx, name, *out, "out")))
    return;
  if (a->scalar_type() == out->scalar_type()) {
    View v = view_of(*a);
    copy_view(ctx, name, *a, v, *out);
  } else {
    copy_elements(*a, *out);
  }
}
}  // namespace

// clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out)
ETKIT_KERNEL_FROM(clone_out, convert_copy)
// _to_copy.out(Tensor self, *, bool non_blocking=False, MemoryFormat? memory_format=None, Tensor(a!) out)
ETKIT_KERNEL_FROM(to_copy_out, convert_copy)
// dim_order_ops::_to_dim_order_copy.out(Tensor self, *, bool non_blocking=False, int[]? dim_order=None, Tensor(a!) out)
ETKIT_KERNEL_FROM(to_dim_order_copy_out, convert_copy)
// dim_order_ops::_clone_dim_order.out(Tensor self, *, bool non_blocking=False, int[]? dim_order=None, Tensor(a!) out)
ETKIT_KERNEL_FROM(clone_dim_order_out, convert_copy)
// alias_copy.out / detach_copy.out / lift_fresh_copy.out (Tensor self, *, Tensor(a!) out)
ETKIT_KERNEL_FROM(alias_copy_out, convert_copy)
ETKIT_KERNEL_FROM(detach_copy_out, convert_copy)
ETKIT_KERNEL_FROM(lift_fresh_copy_out, convert_copy)

namespace {
void fill(Tensor& out, double v) {
  const size_t n = out.numel();
  if (out.scalar_type() == ScalarType::Float) {
    float* p = out.mutable_data_ptr<float>();
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(v);
    return;
  }
  for (size_t i = 0; i < n; ++i) store_double(out.mutable_data_ptr(), out.scalar_type(), i, v);
}

bool sizes_from_list(KernelRuntimeContext& ctx, const char* name, Span<const int64_t> size, SizesType* s) {
  return shape_list(ctx, name, size, "size", s);
}
}  // namespace

// full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out)
ETKIT_KERNEL(full_out, Span<const int64_t> size, double v, Tensor* out) {
  SizesType s[kMaxDim];
  if (!sizes_from_list(ctx, name, size, s) || !resize_out(ctx, name, *out, s, size.size())) return;
  fill(*out, v);
}

// zeros.out(SymInt[] size, *, Tensor(a!) out) / ones.out
ETKIT_KERNEL(zeros_out, Span<const int64_t> size, Tensor* out) {
  SizesType s[kMaxDim];
  if (!sizes_from_list(ctx, name, size, s) || !resize_out(ctx, name, *out, s, size.size())) return;
  fill(*out, 0.0);
}
ETKIT_KERNEL(ones_out, Span<const int64_t> size, Tensor* out) {
  SizesType s[kMaxDim];
  if (!sizes_from_list(ctx, name, size, s) || !resize_out(ctx, name, *out, s, size.size())) return;
  fill(*out, 1.0);
}

// full_like.out(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None, Tensor(a!) out)
ETKIT_KERNEL(full_like_out, Tensor* a, double v, Tensor* out) {
  if (!resize_out(ctx, name, *out, a->sizes().data(), a->dim())) return;
  fill(*out, v);
}

// scalar_tensor.out(Scalar s, *, Tensor(a!) out)
ETKIT_KERNEL(scalar_tensor_out, ScalarValue s, Tensor* out) {
  if (!resize_out(ctx, name, *out, nullptr, 0)) return;
  if (s.evalue->is_int() && !is_floating(out->scalar_type())) {
    store_int(out->mutable_data_ptr(), out->scalar_type(), 0, s.evalue->to_int());
  } else {
    store_double(out->mutable_data_ptr(), out->scalar_type(), 0, s.value);
  }
}

namespace {
void arange_impl(KernelRuntimeContext& ctx, const char* name, double start, double end, double step, Tensor& out) {
  if (step == 0 || ((end - start) / step) < 0) {
    if (step == 0) {
      fail(ctx, Error::InvalidArgument, "%s: step must be non-zero", name);
      return;
    }
  }
  double len = std::ceil((end - start) / step);
  if (!(len < 2147483647.0)) {
    fail(ctx, Error::InvalidArgument, "%s: range [%g, %g) with step %g has too many elements", name, start, end, step);
    return;
  }
  SizesType n = static_cast<SizesType>(len < 0 ? 0 : len);
  if (!resize_out(ctx, name, out, &n, 1)) return;
  for (SizesType i = 0; i < n; ++i) {
    double v = start + step * i;
    if (is_floating(out.scalar_type())) store_double(out.mutable_data_ptr(), out.scalar_type(), size_t(i), v);
    else store_int(out.mutable_data_ptr(), out.scalar_type(), size_t(i), double_to_int64(v));
  }
}
}  // namespace

// arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out)
ETKIT_KERNEL(arange_start_out, double start, double end, double step, Tensor* out) {
  arange_impl(ctx, name, start, end, step, *out);
}

// arange.out(Scalar end, *, Tensor(a!) out)
ETKIT_KERNEL(arange_out, double end, Tensor* out) {
  arange_impl(ctx, name, 0, end, 1, *out);
}


// index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out)
ETKIT_KERNEL(index_select_out, Tensor* a, int64_t dim, Tensor* index, Tensor* out) {
  size_t d;
  if (!check_index_dtype(ctx, name, *index, "index") || !normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  if (a->dim() == 0) {
    View v = view_of(*a);
    copy_view(ctx, name, *a, v, *out);
    return;
  }
  SizesType s[kMaxDim];
  for (size_t i = 0; i < a->dim(); ++i) s[i] = a->size(i);
  s[d] = static_cast<SizesType>(index->numel());
  if (!resize_out(ctx, name, *out, s, a->dim())) return;
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t src_idx[kMaxDim];
    for (size_t k = 0; k < a->dim(); ++k) src_idx[k] = idx[k];
    int64_t j;
    if (!wrap_index(ctx, name, load_int(index->const_data_ptr(), index->scalar_type(), size_t(idx[d])), a->size(d), &j))
      return;
    src_idx[d] = j;
    copy_elem(*a, offset_of(*a, src_idx), *out, offset_of(*out, idx));
    next_index(idx, s, a->dim());
  }
}

// embedding.out(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
//               bool sparse=False, *, Tensor(a!) out)
ETKIT_KERNEL(embedding_out, Tensor* w, Tensor* ind, Tensor* out) {
  if (!check_index_dtype(ctx, name, *ind, "indices")) return;
  if (w->dim() != 2 || !w->is_contiguous_dim_order() || !out->is_contiguous_dim_order()) {
    fail(ctx, Error::InvalidArgument, "%s: weight must be a contiguous 2-D tensor (got %zu-D)", name, w->dim());
    return;
  }
  if (ind->dim() + 1 > kMaxDim) {
    fail(ctx, Error::InvalidArgument, "%s: indices rank %zu too large", name, ind->dim());
    return;
  }
  SizesType s[kMaxDim];
  for (size_t d = 0; d < ind->dim(); ++d) s[d] = ind->size(d);
  s[ind->dim()] = w->size(1);
  if (!resize_out(ctx, name, *out, s, ind->dim() + 1)) return;
  if (w->scalar_type() != out->scalar_type()) {
    fail(ctx, Error::InvalidArgument, "%s: output dtype %s differs from weight dtype %s", name,
         runtime::scalar_type_name(out->scalar_type()), runtime::scalar_type_name(w->scalar_type()));
    return;
  }
  const size_t row_bytes = static_cast<size_t>(w->size(1)) * w->element_size();
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < ind->numel(); ++i) {
    int64_t r;
    if (!wrap_index(ctx, name, load_int(ind->const_data_ptr(), ind->scalar_type(), offset_of(*ind, idx)), w->size(0), &r))
      return;
    std::memcpy(static_cast<uint8_t*>(out->mutable_data_ptr()) + i * row_bytes,
                static_cast<const uint8_t*>(w->const_data_ptr()) + size_t(r) * row_bytes, row_bytes);
    next_index(idx, ind->sizes().data(), ind->dim());
  }
}

// index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out): advanced indexing with integer
// index tensors (broadcast together); None entries keep the whole dimension. Bool masks are not supported.
ETKIT_KERNEL(index_tensor_out, Tensor* a, EValue* indices_arg, Tensor* out) {
  if (!indices_arg->is_optional_tensor_list() && !indices_arg->is_tensor_list()) {
    fail(ctx, Error::InvalidArgument, "%s: argument 'indices' must be a list of optional tensors", name);
    return;
  }
  Span<Tensor* const> indices =
      indices_arg->is_optional_tensor_list() ? indices_arg->to_optional_tensor_list() : indices_arg->to_tensor_list();
  if (indices.size() > a->dim()) {
    fail(ctx, Error::InvalidArgument, "%s: %zu indices for a rank-%zu tensor", name, indices.size(), a->dim());
    return;
  }
  // Broadcast shape of the index tensors and where they sit.
  SizesType bshape[kMaxDim];
  size_t bdim = 0;
  int first = -1, last = -1;
  size_t n_idx = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    Tensor* t = indices[k];
    if (t == nullptr) continue;
    if (!check_index_dtype(ctx, name, *t, "indices")) return;
    if (first < 0) first = int(k);
    last = int(k);
    ++n_idx;
    SizesType tmp[kMaxDim];
    size_t tdim;
    Tensor cur(ScalarType::Bool, bdim, bshape, nullptr, nullptr, nullptr);
    if (!broadcast_shape(ctx, name, cur, *t, tmp, &tdim)) return;
    for (size_t d = 0; d < tdim; ++d) bshape[d] = tmp[d];
    bdim = tdim;
  }
  if (n_idx == 0) {
    View v = view_of(*a);
    copy_view(ctx, name, *a, v, *out);
    return;
  }
  bool adjacent = true;
  for (int k = first; k <= last; ++k) adjacent = adjacent && indices[size_t(k)] != nullptr;
  // Output dims: [before][broadcast][after] when adjacent, else [broadcast][all non-indexed dims].
  SizesType os[kMaxDim];
  int src_of[kMaxDim];  // output dim -> self dim, or -1 for a broadcast dim
  size_t od = 0;
  const size_t lead = adjacent ? size_t(first) : 0;
  for (size_t d = 0; d < lead; ++d) { os[od] = a->size(d); src_of[od++] = int(d); }
  const size_t bstart = od;
  for (size_t d = 0; d < bdim; ++d) { os[od] = bshape[d]; src_of[od++] = -1; }
  for (size_t d = lead; d < a->dim(); ++d) {
    bool indexed = d < indices.size() && indices[d] != nullptr;
    if (!indexed) {
      if (od >= kMaxDim) { fail(ctx, Error::InvalidArgument, "%s: result rank too large", name); return; }
      os[od] = a->size(d);
      src_of[od++] = int(d);
    }
  }
  if (!resize_out(ctx, name, *out, os, od)) return;
  int64_t oidx[kMaxDim] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t sidx[kMaxDim] = {0};
    for (size_t d = 0; d < od; ++d) {
      if (src_of[d] >= 0) sidx[src_of[d]] = oidx[d];
    }
    for (size_t k = 0; k < indices.size(); ++k) {
      Tensor* t = indices[k];
      if (t == nullptr) continue;
      // Element of t at the broadcast position oidx[bstart..].
      int64_t off = 0;
      for (size_t d = 0; d < t->dim(); ++d) {
        size_t bd = bstart + (bdim - t->dim()) + d;
        off += (t->size(d) == 1 ? 0 : oidx[bd]) * t->stride(d);
      }
      int64_t j;
      if (!wrap_index(ctx, name, load_int(t->const_data_ptr(), t->scalar_type(), size_t(off)), a->size(k), &j)) return;
      sidx[k] = j;
    }
    copy_elem(*a, offset_of(*a, sidx), *out, offset_of(*out, oidx));
    next_index(oidx, os, od);
  }
}

// gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out)
ETKIT_KERNEL(gather_out, Tensor* a, int64_t dim, Tensor* index, Tensor* out) {
  size_t d;
  // an empty index of any dtype selects nothing (torch does not check its dtype either)
  if ((index->numel() != 0 && !check_index_dtype(ctx, name, *index, "index")) ||
      !normalize_dim(ctx, name, dim, a->dim(), &d))
    return;
  // as torch: index has self's rank (0-D and 1-D count alike) and is no larger than self outside dim
  const bool ranks_match = index->dim() == a->dim() || (index->dim() <= 1 && a->dim() <= 1);
  for (size_t k = 0; ranks_match && k < index->dim() && index->dim() == a->dim(); ++k) {
    if (k != d && index->size(k) > a->size(k)) {
      fail(ctx, Error::InvalidArgument, "%s: index size %d exceeds self size %d in dim %zu", name,
           int(index->size(k)), int(a->size(k)), k);
      return;
    }
  }
  if (!ranks_match && index->numel() != 0) {
    fail(ctx, Error::InvalidArgument, "%s: index has rank %zu, self has rank %zu; they must match", name,
         index->dim(), a->dim());
    return;
  }
  if (!resize_out(ctx, name, *out, index->sizes().data(), index->dim())) return;
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t sidx[kMaxDim] = {0};
    for (size_t k = 0; k < index->dim(); ++k) sidx[k] = idx[k];
    int64_t j;
    if (!wrap_index(ctx, name, load_int(index->const_data_ptr(), index->scalar_type(), offset_of(*index, idx)),
                    a->dim() ? a->size(d) : 1, &j))
      return;
    if (a->dim()) sidx[d] = j;
    copy_elem(*a, offset_of(*a, sidx), *out, offset_of(*out, idx));
    next_index(idx, index->sizes().data(), index->dim());
  }
}

namespace {
/// Concatenates `tensors` along `d` into out (which already has the right shape).
void concat_into(const Span<Tensor* const>& tensors, size_t d, Tensor& out, bool skip_empty_1d) {
  int64_t at = 0;
  for (Tensor* t : tensors) {
    if (skip_empty_1d && t->dim() == 1 && t->numel() == 0) continue;
    View dst;  // view of out covering this piece
    dst.dim = t->dim();
    for (size_t k = 0; k < t->dim(); ++k) {
      dst.sizes[k] = t->size(k);
      dst.strides[k] = out.stride(k);
    }
    dst.offset = at * out.stride(d);
    const size_t es = t->element_size();
    int64_t idx[kMaxDim] = {0};
    for (size_t i = 0; i < t->numel(); ++i) {
      int64_t so = offset_of(*t, idx), oo = dst.offset;
      for (size_t k = 0; k < t->dim(); ++k) oo += idx[k] * dst.strides[k];
      if (t->scalar_type() == out.scalar_type()) {
        std::memcpy(static_cast<uint8_t*>(out.mutable_data_ptr()) + size_t(oo) * es,
                    static_cast<const uint8_t*>(t->const_data_ptr()) + size_t(so) * es, es);
      } else {
        store_double(out.mutable_data_ptr(), out.scalar_type(), size_t(oo),
                     load_double(t->const_data_ptr(), t->scalar_type(), size_t(so)));
      }
      next_index(idx, t->sizes().data(), t->dim());
    }
    at += t->size(d);
  }
}
}  // namespace

// cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)
ETKIT_KERNEL(cat_out, Span<Tensor* const> tensors, int64_t dim, Tensor* out) {
  // Legacy rule: 1-D empty tensors are skipped.
  const Tensor* ref = nullptr;
  for (Tensor* t : tensors) {
    if (!(t->dim() == 1 && t->numel() == 0)) { ref = t; break; }
  }
  if (ref == nullptr) {
    SizesType z = 0;
    resize_out(ctx, name, *out, &z, out->dim() == 1 ? 1 : 0);
    return;
  }
  size_t d;
  if (!normalize_dim(ctx, name, dim, ref->dim(), &d)) return;
  SizesType s[kMaxDim];
  for (size_t k = 0; k < ref->dim(); ++k) s[k] = ref->size(k);
  int64_t cat_size = 0;  // summed in int64: int32 sizes can overflow
  for (Tensor* t : tensors) {
    if (t->dim() == 1 && t->numel() == 0) continue;
    if (t->dim() != ref->dim()) {
      fail(ctx, Error::InvalidArgument, "%s: tensors have ranks %zu and %zu", name, ref->dim(), t->dim());
      return;
    }
    for (size_t k = 0; k < ref->dim(); ++k) {
      if (k != d && t->size(k) != ref->size(k)) {
        fail(ctx, Error::InvalidArgument, "%s: sizes differ at dim %zu (%d vs %d)", name, k, ref->size(k), t->size(k));
        return;
      }
    }
    cat_size += t->size(d);
    if (!int_in_range(ctx, name, cat_size, 0, kMaxSize, "concatenated size")) return;
  }
  s[d] = static_cast<SizesType>(cat_size);
  if (!resize_out(ctx, name, *out, s, ref->dim())) return;
  concat_into(tensors, d, *out, true);
}

// stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)
ETKIT_KERNEL(stack_out, Span<Tensor* const> tensors, int64_t dim, Tensor* out) {
  if (tensors.empty()) {
    fail(ctx, Error::InvalidArgument, "%s: needs at least one tensor", name);
    return;
  }
  const Tensor& ref = *tensors[0];
  size_t d;
  if (!normalize_dim(ctx, name, dim, ref.dim() + 1, &d)) return;
  if (ref.dim() + 1 > kMaxDim || tensors.size() > size_t(kMaxSize)) {
    fail(ctx, Error::InvalidArgument, "%s: the result would have %zu dims (at most %zu) and %zu tensors", name,
         ref.dim() + 1, kMaxDim, tensors.size());
    return;
  }
  SizesType s[kMaxDim];
  for (size_t k = 0, j = 0; k < ref.dim() + 1; ++k) s[k] = k == d ? SizesType(tensors.size()) : ref.size(j++);
  if (!resize_out(ctx, name, *out, s, ref.dim() + 1)) return;
  const size_t es = out->element_size();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Tensor& in = *tensors[t];
    if (!same_shape(in, ref)) {
      fail(ctx, Error::InvalidArgument, "%s: all tensors must have the same shape", name);
      return;
    }
    int64_t idx[kMaxDim] = {0};
    for (size_t i = 0; i < in.numel(); ++i) {
      int64_t oidx[kMaxDim];
      for (size_t k = 0, j = 0; k < ref.dim() + 1; ++k) oidx[k] = k == d ? int64_t(t) : idx[j++];
      size_t so = offset_of(in, idx), oo = offset_of(*out, oidx);
      if (in.scalar_type() == out->scalar_type()) {
        std::memcpy(static_cast<uint8_t*>(out->mutable_data_ptr()) + oo * es,
                    static_cast<const uint8_t*>(in.const_data_ptr()) + so * es, es);
      } else {
        store_double(out->mutable_data_ptr(), out->scalar_type(), oo, load_double(in.const_data_ptr(), in.scalar_type(), so));
      }
      next_index(idx, in.sizes().data(), in.dim());
    }
  }
}

namespace {
/// Copies consecutive chunks of `a` along d into the tensors of `outs`, chunk k having sizes[k] rows.
void split_into(KernelRuntimeContext& ctx, const char* name, const Tensor& a, size_t d, Span<Tensor* const> outs,
                const int64_t* chunk, size_t n) {
  int64_t at = 0;
  for (size_t k = 0; k < n; ++k) {
    View v = view_of(a);
    v.sizes[d] = static_cast<SizesType>(chunk[k]);
    v.offset = at * a.stride(d);
    if (!copy_view(ctx, name, a, v, *outs[k])) return;
    at += chunk[k];
  }
}
}  // namespace

// split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *, Tensor(a!)[] out)
ETKIT_KERNEL(split_with_sizes_copy_out, Tensor* a, Span<const int64_t> sizes, int64_t dim, Span<Tensor* const> outs) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  if (sizes.size() != outs.size()) {
    fail(ctx, Error::InvalidArgument, "%s: %zu split sizes but %zu outputs", name, sizes.size(), outs.size());
    return;
  }
  int64_t total = 0;
  for (int64_t s : sizes) {  // each in [0, size]: the sum then cannot overflow, nor a chunk run backwards
    if (!int_in_range(ctx, name, s, 0, a->size(d), "split_sizes entry")) return;
    total += s;
  }
  if (total != a->size(d)) {
    fail(ctx, Error::InvalidArgument, "%s: split sizes add up to %lld, dim %zu has %d", name, (long long)total, d,
         a->size(d));
    return;
  }
  split_into(ctx, name, *a, d, outs, sizes.data(), sizes.size());
}

// split_copy.Tensor_out(Tensor self, SymInt split_size, int dim=0, *, Tensor(a!)[] out)
ETKIT_KERNEL(split_copy_tensor_out, Tensor* a, int64_t split, int64_t dim, Span<Tensor* const> outs) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  int64_t chunks[64];
  if (outs.size() > 64 || split <= 0) {
    fail(ctx, Error::NotSupported, "%s: split_size %lld into %zu outputs is not supported", name, (long long)split,
         outs.size());
    return;
  }
  int64_t left = a->size(d);
  for (size_t k = 0; k < outs.size(); ++k) {
    chunks[k] = left < split ? left : split;
    left -= chunks[k];
  }
  split_into(ctx, name, *a, d, outs, chunks, outs.size());
}

// unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out)
ETKIT_KERNEL(unbind_copy_int_out, Tensor* a, int64_t dim, Span<Tensor* const> outs) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  if (int64_t(outs.size()) != a->size(d)) {
    fail(ctx, Error::InvalidArgument, "%s: %zu outputs for dim of size %d", name, outs.size(), a->size(d));
    return;
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    View v;
    v.dim = a->dim() - 1;
    for (size_t s = 0, t = 0; s < a->dim(); ++s) {
      if (s == d) continue;
      v.sizes[t] = a->size(s);
      v.strides[t++] = a->stride(s);
    }
    v.offset = int64_t(k) * a->stride(d);
    if (!copy_view(ctx, name, *a, v, *outs[k])) return;
  }
}

// constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out)
ETKIT_KERNEL(constant_pad_nd_out, Tensor* a, Span<const int64_t> pad, double value, Tensor* out) {
  if (pad.size() % 2 != 0 || pad.size() / 2 > a->dim()) {
    fail(ctx, Error::InvalidArgument, "%s: pad has %zu entries for a rank-%zu tensor", name, pad.size(), a->dim());
    return;
  }
  int64_t before[kMaxDim] = {0};
  SizesType s[kMaxDim];
  for (size_t d = 0; d < a->dim(); ++d) s[d] = a->size(d);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    size_t d = a->dim() - 1 - k;
    // negative padding crops; bounded first so size + before + after cannot overflow
    if (!int_in_range(ctx, name, pad[2 * k], -kMaxSize, kMaxSize, "pad") ||
        !int_in_range(ctx, name, pad[2 * k + 1], -kMaxSize, kMaxSize, "pad") ||
        !int_in_range(ctx, name, a->size(d) + pad[2 * k] + pad[2 * k + 1], 0, kMaxSize, "padded size"))
      return;
    before[d] = pad[2 * k];
    s[d] = static_cast<SizesType>(a->size(d) + pad[2 * k] + pad[2 * k + 1]);
  }
  if (!resize_out(ctx, name, *out, s, a->dim())) return;
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t sidx[kMaxDim];
    bool inside = true;
    for (size_t d = 0; d < a->dim(); ++d) {
      sidx[d] = idx[d] - before[d];
      inside = inside && sidx[d] >= 0 && sidx[d] < a->size(d);
    }
    double v = inside ? load_double(a->const_data_ptr(), a->scalar_type(), offset_of(*a, sidx)) : value;
    store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, idx), v);
    next_index(idx, s, a->dim());
  }
}

// repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out)
ETKIT_KERNEL(repeat_out, Tensor* a, Span<const int64_t> reps, Tensor* out) {
  if (reps.size() < a->dim() || reps.size() > kMaxDim) {
    fail(ctx, Error::InvalidArgument, "%s: %zu repeats for a rank-%zu tensor", name, reps.size(), a->dim());
    return;
  }
  const size_t lead = reps.size() - a->dim();
  SizesType s[kMaxDim];
  for (size_t d = 0; d < reps.size(); ++d) {
    SizesType in = d < lead ? 1 : a->size(d - lead);
    if (!int_in_range(ctx, name, reps[d], 0, kMaxSize, "repeats entry") ||
        !int_in_range(ctx, name, int64_t(in) * reps[d], 0, kMaxSize, "repeated size"))
      return;
    s[d] = static_cast<SizesType>(in * reps[d]);
  }
  if (!resize_out(ctx, name, *out, s, reps.size())) return;
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t sidx[kMaxDim];
    for (size_t d = lead; d < reps.size(); ++d) sidx[d - lead] = idx[d] % a->size(d - lead);
    copy_elem(*a, offset_of(*a, sidx), *out, offset_of(*out, idx));
    next_index(idx, s, reps.size());
  }
}

// sym_size.int(Tensor self, int dim) -> SymInt: the emitter passes (self, dim, result).
ETKIT_KERNEL(sym_size_int, Tensor* a, int64_t dim, EValue* result) {
  size_t d;
  if (!normalize_dim(ctx, name, dim, a->dim(), &d)) return;
  set_scalar_out(ctx, name, result, EValue(static_cast<int64_t>(a->size(d))));
}

// sym_numel(Tensor self) -> SymInt: (self, result).
ETKIT_KERNEL(sym_numel, Tensor* a, EValue* result) {
  set_scalar_out(ctx, name, result, EValue(static_cast<int64_t>(a->numel())));
}

}  // namespace etkit::portable

namespace etkit::portable {
namespace {
/// dst[...] = src broadcast to dst's shape, converting dtype.
void broadcast_copy(KernelRuntimeContext& ctx, const char* name, const Tensor& src, Tensor& dst) {
  SizesType s[kMaxDim];
  size_t d;
  if (!broadcast_shape(ctx, name, dst, src, s, &d)) return;
  if (d != dst.dim() || !same_shape(dst, Tensor(ScalarType::Bool, d, s, nullptr, nullptr, nullptr))) {
    fail(ctx, Error::InvalidArgument, "%s: src cannot be broadcast to the shape of self", name);
    return;
  }
  const Tensor* ins[1] = {&src};
  const bool same = src.scalar_type() == dst.scalar_type();
  const bool as_int = !is_floating(src.scalar_type()) && !is_floating(dst.scalar_type());
  const size_t es = dst.element_size();
  for_each_broadcast(dst, ins, [&](size_t o, const size_t* in) {
    if (same) {
      std::memcpy(static_cast<uint8_t*>(dst.mutable_data_ptr()) + o * es,
                  static_cast<const uint8_t*>(src.const_data_ptr()) + in[0] * es, es);
    } else if (as_int) {
      store_int(dst.mutable_data_ptr(), dst.scalar_type(), o, load_int(src.const_data_ptr(), src.scalar_type(), in[0]));
    } else {
      store_double(dst.mutable_data_ptr(), dst.scalar_type(), o,
                   load_double(src.const_data_ptr(), src.scalar_type(), in[0]));
    }
  });
}
}  // namespace

// copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!): writes src into self
// (how ExecuTorch programs update mutable buffers in place).
ETKIT_KERNEL(copy_inplace, Tensor* self, Tensor* src) {
  broadcast_copy(ctx, name, *src, *self);
}

// copy.out(Tensor self, Tensor src, bool non_blocking=False, *, Tensor(a!) out)
ETKIT_KERNEL(copy_out, Tensor* self, Tensor* src, Tensor* out) {
  if (!resize_out(ctx, name, *out, self->sizes().data(), self->dim())) return;
  broadcast_copy(ctx, name, *src, *out);
}

}  // namespace etkit::portable
