// Kernels that write parts of a tensor: scatter (src/value/add/reduce), select_scatter, slice_scatter,
// index_put, masked_scatter; and the remaining view copies (diagonal_copy, as_strided_copy) and
// fillers (fill, empty, empty_strided).
//
// Each starts from a copy of `self` in `out` and then writes the scattered elements, following
// PyTorch's semantics (negative indices wrap, out-of-range indices fail naming the op). Arithmetic
// reductions go through double (exact for every integer dtype up to 2^53).
#include <cmath>
#include <limits>

#include "data_movement.h"
#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

/// out = self (same shape and dtype).
bool start_from_self(KernelRuntimeContext& ctx, const char* name, const Tensor& self, Tensor& out) {
  return copy_same_order(ctx, name, self, out, self.sizes().data(), self.dim());
}

/// Checks scatter's shape rule: index.dim == self.dim, index.size(d) <= src.size(d) for all d and
/// <= self.size(d) for d != dim.
bool check_scatter_shapes(KernelRuntimeContext& ctx, const char* name, const Tensor& self, size_t dim,
                          const Tensor& index, const Tensor* src) {
  if (index.numel() == 0) return true;
  if (index.dim() != self.dim() && !(self.dim() == 0 && index.dim() <= 1)) {
    return fail(ctx, Error::InvalidArgument, "%s: index has rank %zu but self has rank %zu", name, index.dim(),
                self.dim());
  }
  for (size_t d = 0; d < index.dim() && self.dim() > 0; ++d) {
    if (src && src->dim() == index.dim() && index.size(d) > src->size(d)) {
      return fail(ctx, Error::InvalidArgument, "%s: index size %d in dim %zu exceeds src size %d", name,
                  (int)index.size(d), d, (int)src->size(d));
    }
    if (d != dim && index.size(d) > self.size(d)) {
      return fail(ctx, Error::InvalidArgument, "%s: index size %d in dim %zu exceeds self size %d", name,
                  (int)index.size(d), d, (int)self.size(d));
    }
  }
  return true;
}

enum class Reduce { None, Sum, Prod, Mean, Amax, Amin };

/// The common body of the scatter family: for every element of `index`, combine src (or `value`)
/// into out at the indexed position.
/// scatter / scatter_add / scatter_reduce on unpacked arguments: `src`, or `value` where src is null.
void scatter_impl(KernelRuntimeContext& ctx, const char* name, Tensor* self, int64_t dim_arg, Tensor* index,
                  Tensor* src, double value, Reduce reduce, bool include_self, Tensor* out) {
  if (!check_index_dtype(ctx, name, *index, "index")) return;
  if (src != nullptr && src->scalar_type() != self->scalar_type()) {
    fail(ctx, Error::InvalidArgument, "%s: src dtype %s differs from self dtype %s", name,
         runtime::scalar_type_name(src->scalar_type()), runtime::scalar_type_name(self->scalar_type()));
    return;
  }
  size_t dim = 0;
  if (!normalize_dim(ctx, name, dim_arg, self->dim(), &dim) ||
      !check_scatter_shapes(ctx, name, *self, dim, *index, src) || !start_from_self(ctx, name, *self, *out))
    return;
  const size_t n = index->numel();
  if (n == 0) return;
  const ScalarType t = out->scalar_type();
  void* o = out->mutable_data_ptr();
  const int64_t extent = self->dim() ? self->size(dim) : 1;
  int32_t* counts = nullptr;
  if (reduce == Reduce::Mean) {
    counts = static_cast<int32_t*>(ctx.allocate_temp(out->numel() * sizeof(int32_t)));
    if (counts == nullptr) {
      fail(ctx, Error::MemoryAllocationFailed, "%s: reduce='mean' needs %zu bytes of scratch memory", name,
           out->numel() * sizeof(int32_t));
      return;
    }
    for (size_t i = 0; i < out->numel(); ++i) counts[i] = include_self ? 1 : 0;
  }
  // Pass 1 (include_self=False): the positions written start from the reduction's identity.
  for (int pass = (reduce != Reduce::None && !include_self) ? 0 : 1; pass < 2; ++pass) {
    int64_t idx[kMaxDim] = {0};
    for (size_t i = 0; i < n; ++i) {
      int64_t j;
      if (!wrap_index(ctx, name, load_int(index->const_data_ptr(), index->scalar_type(), offset_of(*index, idx)),
                      extent, &j))
        return;
      int64_t oidx[kMaxDim];
      for (size_t d = 0; d < index->dim(); ++d) oidx[d] = idx[d];
      if (self->dim()) oidx[dim] = j;
      const size_t oo = offset_of(*out, oidx);
      if (pass == 0) {
        double init = reduce == Reduce::Prod ? 1.0
                      : reduce == Reduce::Amax ? -std::numeric_limits<double>::infinity()
                      : reduce == Reduce::Amin ? std::numeric_limits<double>::infinity()
                                               : 0.0;
        if (is_floating(t) || reduce == Reduce::Sum || reduce == Reduce::Prod || reduce == Reduce::Mean) {
          store_double(o, t, oo, init);
        } else {  // integer amax/amin: the dtype's extreme value
          const bool is_max = reduce == Reduce::Amax;
          int64_t lo = t == ScalarType::Byte ? 0 : t == ScalarType::Char ? -128 : t == ScalarType::Short ? -32768
                       : t == ScalarType::Int ? std::numeric_limits<int32_t>::min() : t == ScalarType::Bool ? 0
                       : std::numeric_limits<int64_t>::min();
          int64_t hi = t == ScalarType::Byte ? 255 : t == ScalarType::Char ? 127 : t == ScalarType::Short ? 32767
                       : t == ScalarType::Int ? std::numeric_limits<int32_t>::max() : t == ScalarType::Bool ? 1
                       : std::numeric_limits<int64_t>::max();
          store_int(o, t, oo, is_max ? lo : hi);
        }
      } else if (reduce == Reduce::None) {
        if (src) copy_elem(*src, offset_of(*src, idx), *out, oo);
        else store_double(o, t, oo, value);
      } else {
        const double v = src ? load_double(src->const_data_ptr(), t, offset_of(*src, idx)) : value;
        const double cur = load_double(o, t, oo);
        double r = cur;
        switch (reduce) {
          case Reduce::Sum: case Reduce::Mean: r = cur + v; break;
          case Reduce::Prod: r = cur * v; break;
          case Reduce::Amax: r = (std::isnan(v) || v > cur) ? v : cur; break;
          case Reduce::Amin: r = (std::isnan(v) || v < cur) ? v : cur; break;
          default: break;
        }
        if (!is_floating(t) && t != ScalarType::Bool) store_int(o, t, oo, double_to_int64(r));
        else store_double(o, t, oo, r);
        if (counts) ++counts[oo];
      }
      next_index(idx, index->sizes().data(), index->dim());
    }
  }
  if (counts) {
    for (size_t i = 0; i < out->numel(); ++i) {
      if (counts[i] <= 1) continue;
      const double mean = load_double(o, t, i) / counts[i];
      if (is_floating(t)) store_double(o, t, i, mean);
      else store_int(o, t, i, double_to_int64(std::floor(mean)));  // torch floors integer means
    }
  }
}

}  // namespace

// scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out)
ETKIT_KERNEL(scatter_src_out, Tensor* self, int64_t dim, Tensor* index, Tensor* src, Tensor* out) {
  scatter_impl(ctx, name, self, dim, index, src, 0, Reduce::None, true, out);
}

// scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out)
ETKIT_KERNEL(scatter_value_out, Tensor* self, int64_t dim, Tensor* index, double value, Tensor* out) {
  scatter_impl(ctx, name, self, dim, index, nullptr, value, Reduce::None, true, out);
}

// scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out)
ETKIT_KERNEL(scatter_add_out, Tensor* self, int64_t dim, Tensor* index, Tensor* src, Tensor* out) {
  scatter_impl(ctx, name, self, dim, index, src, 0, Reduce::Sum, true, out);
}

// scatter_reduce.two_out(Tensor self, int dim, Tensor index, Tensor src, str reduce, *,
//                        bool include_self=True, Tensor(a!) out)
ETKIT_KERNEL(scatter_reduce_two_out, Tensor* self, int64_t dim, Tensor* index, Tensor* src, StringValue reduce,
             bool include_self, Tensor* out) {
  const char* s = reduce.data;
  const size_t len = reduce.size;
  Reduce r = string_equals(s, len, "sum")    ? Reduce::Sum
             : string_equals(s, len, "prod") ? Reduce::Prod
             : string_equals(s, len, "mean") ? Reduce::Mean
             : string_equals(s, len, "amax") ? Reduce::Amax
             : string_equals(s, len, "amin") ? Reduce::Amin
                                             : Reduce::None;
  if (r == Reduce::None) {
    fail(ctx, Error::InvalidArgument, "%s: reduce must be sum, prod, mean, amax or amin, got '%.*s'", name, (int)len,
         s ? s : "");
    return;
  }
  scatter_impl(ctx, name, self, dim, index, src, 0, r, include_self, out);
}

// select_scatter.out(Tensor self, Tensor src, int dim, SymInt index, *, Tensor(a!) out)
ETKIT_KERNEL(select_scatter_out, Tensor* self, Tensor* src, int64_t dim_arg, int64_t index, Tensor* out) {
  size_t dim;
  int64_t j;
  if (!normalize_dim(ctx, name, dim_arg, self->dim(), &dim) || !start_from_self(ctx, name, *self, *out) ||
      !wrap_index(ctx, name, index, self->size(dim), &j))
    return;
  if (src->dim() + 1 != self->dim() || src->scalar_type() != self->scalar_type()) {
    fail(ctx, Error::InvalidArgument, "%s: src must have rank %zu and dtype %s", name, self->dim() - 1,
         runtime::scalar_type_name(self->scalar_type()));
    return;
  }
  for (size_t d = 0, s = 0; d < self->dim(); ++d) {
    if (d == dim) continue;
    if (src->size(s++) != self->size(d)) {
      fail(ctx, Error::InvalidArgument, "%s: src shape does not match self with dim %zu removed", name, dim);
      return;
    }
  }
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < src->numel(); ++i) {
    int64_t oidx[kMaxDim];
    for (size_t d = 0, s = 0; d < self->dim(); ++d) oidx[d] = d == dim ? j : idx[s++];
    copy_elem(*src, offset_of(*src, idx), *out, offset_of(*out, oidx));
    next_index(idx, src->sizes().data(), src->dim());
  }
}

// slice_scatter.out(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None,
//                   SymInt step=1, *, Tensor(a!) out)
ETKIT_KERNEL(slice_scatter_out, Tensor* self, Tensor* src, int64_t dim_arg, OptionalInt start_arg, OptionalInt end_arg,
             int64_t step, Tensor* out) {
  size_t dim;
  if (!normalize_dim(ctx, name, dim_arg, self->dim(), &dim) || !start_from_self(ctx, name, *self, *out)) return;
  const int64_t n = self->size(dim);
  int64_t start = start_arg.has_value ? start_arg.value : 0;
  int64_t end = end_arg.has_value ? end_arg.value : n;
  if (step <= 0) {
    fail(ctx, Error::InvalidArgument, "%s: step must be positive, got %lld", name, (long long)step);
    return;
  }
  step = std::min(step, std::max<int64_t>(n, 1));  // same positions; keeps end - start + step small
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::min(std::max<int64_t>(start, 0), n);
  end = std::min(std::max<int64_t>(end, start), n);
  const int64_t len = (end - start + step - 1) / step;
  if (src->dim() != self->dim() || src->scalar_type() != self->scalar_type() || src->size(dim) != len) {
    fail(ctx, Error::InvalidArgument, "%s: src must have self's rank and dtype and %lld elements in dim %zu", name,
         (long long)len, dim);
    return;
  }
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < src->numel(); ++i) {
    int64_t oidx[kMaxDim];
    for (size_t d = 0; d < self->dim(); ++d) oidx[d] = d == dim ? start + idx[d] * step : idx[d];
    copy_elem(*src, offset_of(*src, idx), *out, offset_of(*out, oidx));
    next_index(idx, src->sizes().data(), src->dim());
  }
}

// index_put.out(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False, *, Tensor(a!) out)
// Indices are Long/Int tensors broadcast together (None keeps a whole dim), or a single Bool mask over
// the leading dims.
ETKIT_KERNEL(index_put_out, Tensor* self, EValue* indices, Tensor* values, bool accumulate, Tensor* out) {
  if (!start_from_self(ctx, name, *self, *out)) return;
  if (!indices->is_optional_tensor_list() && !indices->is_tensor_list()) {
    fail(ctx, Error::InvalidArgument, "%s: indices must be a list of optional tensors", name);
    return;
  }
  const Tensor* idx_t[kMaxDim] = {nullptr};
  size_t k = 0;
  if (indices->is_tensor_list()) {
    auto list = indices->to_tensor_list();
    k = list.size();
    for (size_t i = 0; i < k && i < kMaxDim; ++i) idx_t[i] = list[i];
  } else {
    auto list = indices->to_optional_tensor_list();
    k = list.size();
    for (size_t i = 0; i < k && i < kMaxDim; ++i) idx_t[i] = list[i];
  }
  if (k > self->dim()) {
    fail(ctx, Error::InvalidArgument, "%s: %zu indices for a rank-%zu tensor", name, k, self->dim());
    return;
  }
  if (k == 1 && idx_t[0] && idx_t[0]->scalar_type() == ScalarType::Bool) {
    // Boolean mask over the leading mask.dim() dims: positions where mask is true, in row-major order.
    const Tensor& mask = *idx_t[0];
    for (size_t d = 0; d < mask.dim(); ++d) {
      if (mask.size(d) != self->size(d)) {
        fail(ctx, Error::InvalidArgument, "%s: mask shape does not match self in dim %zu", name, d);
        return;
      }
    }
    size_t inner = 1;
    for (size_t d = mask.dim(); d < self->dim(); ++d) inner *= self->size(d);
    size_t hit = 0, count = 0;
    for (size_t i = 0; i < mask.numel(); ++i) count += load_int(mask.const_data_ptr(), ScalarType::Bool, i) != 0;
    int64_t midx[kMaxDim] = {0};
    for (size_t i = 0; i < mask.numel(); ++i, next_index(midx, mask.sizes().data(), mask.dim())) {
      if (!load_int(mask.const_data_ptr(), ScalarType::Bool, offset_of(mask, midx))) continue;
      for (size_t e = 0; e < inner; ++e) {
        int64_t oidx[kMaxDim];
        for (size_t d = 0; d < mask.dim(); ++d) oidx[d] = midx[d];
        size_t rem = e;
        for (size_t d = self->dim(); d-- > mask.dim();) {
          oidx[d] = static_cast<int64_t>(rem % self->size(d));
          rem /= self->size(d);
        }
        // values broadcast against [count, inner...]: a scalar, one row, or one per hit
        size_t vi = values->numel() == 1 ? 0 : values->numel() == inner ? e : (hit * inner + e);
        if (vi >= values->numel()) {
          fail(ctx, Error::InvalidArgument, "%s: values has %zu elements for %zu masked positions", name,
               values->numel(), count);
          return;
        }
        const size_t oo = offset_of(*out, oidx);
        double v = load_double(values->const_data_ptr(), values->scalar_type(), vi);
        if (accumulate) v += load_double(out->const_data_ptr(), out->scalar_type(), oo);
        store_double(out->mutable_data_ptr(), out->scalar_type(), oo, v);
      }
      ++hit;
    }
    return;
  }
  // Integer indices (None = the whole dim). The indexed result has the index tensors' broadcast shape
  // B in place of the indexed dims when those are adjacent, else B first (NumPy's advanced indexing);
  // `values` broadcasts to that result shape.
  SizesType bshape[kMaxDim];
  size_t bdim = 0;
  size_t first = kMaxDim, last = 0;
  for (size_t i = 0; i < k; ++i) {
    if (!idx_t[i]) continue;
    if (!check_index_dtype(ctx, name, *idx_t[i], "indices")) return;
    first = std::min(first, i);
    last = i;
    const Tensor& t = *idx_t[i];
    if (t.dim() > bdim) {  // right-align the shape so far with t's
      SizesType tmp[kMaxDim];
      for (size_t d = 0; d < t.dim(); ++d) tmp[d] = d < t.dim() - bdim ? 1 : bshape[d - (t.dim() - bdim)];
      for (size_t d = 0; d < t.dim(); ++d) bshape[d] = tmp[d];
      bdim = t.dim();
    }
    for (size_t d = 0; d < t.dim(); ++d) {
      SizesType& b = bshape[bdim - t.dim() + d];
      if (t.size(d) != 1 && b != 1 && t.size(d) != b) {
        fail(ctx, Error::InvalidArgument, "%s: index tensors do not broadcast together", name);
        return;
      }
      if (t.size(d) != 1) b = t.size(d);
    }
  }
  if (first == kMaxDim) {  // only None: values overwrite (or add to) the whole tensor
    first = last = 0;
  }
  bool adjacent = true;
  for (size_t i = first; i <= last && i < k; ++i) adjacent = adjacent && idx_t[i] != nullptr;
  const size_t bpos = adjacent ? first : 0;  // where B sits in the result shape
  // result dims: self dims not indexed by a tensor, with B inserted at bpos
  SizesType rshape[kMaxDim];
  size_t rdim = 0, plain_dims[kMaxDim], nplain = 0;
  for (size_t d = 0; d < self->dim(); ++d)
    if (d >= k || !idx_t[d]) plain_dims[nplain++] = d;
  if (nplain + bdim > kMaxDim) {
    fail(ctx, Error::InvalidArgument, "%s: the indexed result has more than %zu dims", name, kMaxDim);
    return;
  }
  for (size_t j = 0, pd = 0; j < nplain + bdim; ++j) {
    if (j >= bpos && j < bpos + bdim) rshape[rdim++] = bshape[j - bpos];
    else rshape[rdim++] = self->size(plain_dims[pd++]);
  }
  if (values->dim() > rdim) {
    fail(ctx, Error::InvalidArgument, "%s: values has rank %zu, more than the indexed shape's %zu", name,
         values->dim(), rdim);
    return;
  }
  for (size_t d = 0; d < values->dim(); ++d) {
    const SizesType v = values->size(d), r = rshape[rdim - values->dim() + d];
    if (v != 1 && v != r) {
      fail(ctx, Error::InvalidArgument, "%s: values of shape dim %zu = %d does not broadcast to %d", name, d, (int)v, (int)r);
      return;
    }
  }
  size_t rnum = 1;
  for (size_t d = 0; d < rdim; ++d) rnum *= rshape[d];
  int64_t r[kMaxDim] = {0};
  for (size_t n = 0; n < rnum; ++n, next_index(r, rshape, rdim)) {
    int64_t oidx[kMaxDim];
    for (size_t j = 0, pd = 0; j < rdim; ++j)
      if (j < bpos || j >= bpos + bdim) oidx[plain_dims[pd++]] = r[j];
    for (size_t i = 0; i < k; ++i) {
      if (!idx_t[i]) continue;
      const Tensor& t = *idx_t[i];
      int64_t tidx[kMaxDim];
      for (size_t d = 0; d < t.dim(); ++d) tidx[d] = t.size(d) == 1 ? 0 : r[bpos + bdim - t.dim() + d];
      if (!wrap_index(ctx, name, load_int(t.const_data_ptr(), t.scalar_type(), offset_of(t, tidx)), self->size(i),
                      &oidx[i]))
        return;
    }
    int64_t vidx[kMaxDim];
    for (size_t d = 0; d < values->dim(); ++d) vidx[d] = values->size(d) == 1 ? 0 : r[rdim - values->dim() + d];
    const size_t vi = offset_of(*values, vidx), oo = offset_of(*out, oidx);
    if (!accumulate && values->scalar_type() == out->scalar_type()) {
      copy_elem(*values, vi, *out, oo);
      continue;
    }
    double v = load_double(values->const_data_ptr(), values->scalar_type(), vi);
    if (accumulate) v += load_double(out->const_data_ptr(), out->scalar_type(), oo);
    store_double(out->mutable_data_ptr(), out->scalar_type(), oo, v);
  }
}

// masked_scatter.out(Tensor self, Tensor mask, Tensor source, *, Tensor(a!) out)
ETKIT_KERNEL(masked_scatter_out, Tensor* self, Tensor* mask, Tensor* source, Tensor* out) {
  if (mask->scalar_type() != ScalarType::Bool) {
    fail(ctx, Error::InvalidArgument, "%s: mask must be Bool, got %s", name, runtime::scalar_type_name(mask->scalar_type()));
    return;
  }
  SizesType shape[kMaxDim];
  size_t dim;
  if (!broadcast_shape(ctx, name, *self, *mask, shape, &dim) || !resize_out(ctx, name, *out, shape, dim)) return;
  const Tensor* ins[2] = {self, mask};
  size_t taken = 0;
  bool overflow = false;
  // for_each_broadcast visits out in row-major order, which is the order source is consumed in
  for_each_broadcast(*out, ins, [&](size_t o, const size_t* in) {
    if (load_int(mask->const_data_ptr(), ScalarType::Bool, in[1])) {
      if (taken >= source->numel()) { overflow = true; return; }
      copy_elem(*source, taken++, *out, o);  // source is read in its contiguous order
    } else {
      copy_elem(*self, in[0], *out, o);
    }
  });
  if (overflow) {
    fail(ctx, Error::InvalidArgument, "%s: mask selects more elements than source has (%zu)", name, source->numel());
  }
}

// diagonal_copy.out(Tensor self, int offset=0, int dim1=0, int dim2=1, *, Tensor(a!) out)
ETKIT_KERNEL(diagonal_copy_out, Tensor* self, int64_t offset, int64_t d1_arg, int64_t d2_arg, Tensor* out) {
  size_t d1, d2;
  if (!normalize_dim(ctx, name, d1_arg, self->dim(), &d1) || !normalize_dim(ctx, name, d2_arg, self->dim(), &d2))
    return;
  if (d1 == d2) {
    fail(ctx, Error::InvalidArgument, "%s: dim1 and dim2 must differ (both are %zu)", name, d1);
    return;
  }
  View v;
  v.dim = 0;
  for (size_t d = 0; d < self->dim(); ++d) {
    if (d == d1 || d == d2) continue;
    v.sizes[v.dim] = self->size(d);
    v.strides[v.dim++] = self->stride(d);
  }
  int64_t len = offset >= 0 ? std::min<int64_t>(self->size(d1), self->size(d2) - offset)
                            : std::min<int64_t>(self->size(d1) + offset, self->size(d2));
  len = std::max<int64_t>(len, 0);
  v.sizes[v.dim] = static_cast<SizesType>(len);
  v.strides[v.dim++] = self->stride(d1) + self->stride(d2);
  v.offset = len == 0 ? 0 : (offset >= 0 ? offset * self->stride(d2) : -offset * self->stride(d1));
  copy_view(ctx, name, *self, v, *out);
}

// as_strided_copy.out(Tensor self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None, *, Tensor(a!) out)
// Strides are in elements of self's contiguous storage, as in torch.as_strided.
ETKIT_KERNEL(as_strided_copy_out, Tensor* self, Span<const int64_t> size, Span<const int64_t> stride,
             OptionalInt storage_offset_arg, Tensor* out) {
  const int64_t storage_offset = storage_offset_arg.has_value ? storage_offset_arg.value : 0;
  if (size.size() != stride.size() || size.size() > kMaxDim) {
    fail(ctx, Error::InvalidArgument, "%s: size has %zu entries but stride has %zu", name, size.size(), stride.size());
    return;
  }
  if (!self->is_contiguous_dim_order()) {
    fail(ctx, Error::NotSupported, "%s: self must be contiguous", name);
    return;
  }
  View v;
  v.dim = size.size();
  v.offset = storage_offset;
  if (!shape_list(ctx, name, size, "size", v.sizes)) return;
  // As in torch.as_strided: strides are not negative. The furthest element is checked against the storage
  // with overflow-checked arithmetic (sizes, strides and the offset come from the program).
  int64_t max_off = storage_offset;
  for (size_t d = 0; d < v.dim; ++d) {
    if (stride[d] < 0) {
      fail(ctx, Error::InvalidArgument, "%s: stride[%zu] is %lld; negative strides are not supported", name, d,
           (long long)stride[d]);
      return;
    }
    v.strides[d] = stride[d];
    if (size[d] == 0) max_off = -1;
    int64_t step = 0;
    if (max_off >= 0 && (__builtin_mul_overflow(size[d] - 1, stride[d], &step) ||
                         __builtin_add_overflow(max_off, step, &max_off))) {
      max_off = INT64_MAX;  // past any storage
    }
  }
  if (max_off >= static_cast<int64_t>(self->numel()) || storage_offset < 0) {
    fail(ctx, Error::InvalidArgument, "%s: the view reaches element %lld of a %zu-element storage", name,
         (long long)max_off, self->numel());
    return;
  }
  copy_view(ctx, name, *self, v, *out);
}

// fill.Scalar_out(Tensor self, Scalar value, *, Tensor(a!) out)
ETKIT_KERNEL(fill_scalar_out, Tensor* self, ScalarValue value, Tensor* out) {
  if (!resize_out(ctx, name, *out, self->sizes().data(), self->dim())) return;
  const bool integral_value = value.evalue->is_int();
  for (size_t i = 0; i < out->numel(); ++i) {
    if (integral_value && !is_floating(out->scalar_type())) store_int(out->mutable_data_ptr(), out->scalar_type(), i, value.evalue->to_int());
    else store_double(out->mutable_data_ptr(), out->scalar_type(), i, value.value);
  }
}

// fill.Tensor_out(Tensor self, Tensor value, *, Tensor(a!) out): value is a 0-dim tensor.
ETKIT_KERNEL(fill_tensor_out, Tensor* self, Tensor* value, Tensor* out) {
  if (!resize_out(ctx, name, *out, self->sizes().data(), self->dim())) return;
  if (value->numel() != 1) {
    fail(ctx, Error::InvalidArgument, "%s: value must have one element, has %zu", name, value->numel());
    return;
  }
  const bool exact_int = !is_floating(value->scalar_type()) && !is_floating(out->scalar_type());
  for (size_t i = 0; i < out->numel(); ++i) {
    if (exact_int) store_int(out->mutable_data_ptr(), out->scalar_type(), i, load_int(value->const_data_ptr(), value->scalar_type(), 0));
    else store_double(out->mutable_data_ptr(), out->scalar_type(), i, load_double(value->const_data_ptr(), value->scalar_type(), 0));
  }
}

namespace {
/// (size, ..., out) of empty.out / empty_strided.out: resizes out to `size`.
void resize_to_list(KernelRuntimeContext& ctx, const char* name, Span<const int64_t> size, Tensor* out) {
  SizesType s[kMaxDim];
  if (shape_list(ctx, name, size, "size", s)) resize_out(ctx, name, *out, s, size.size());
}
}  // namespace

// empty.out(SymInt[] size, *, MemoryFormat? memory_format=None, Tensor(a!) out): contents unspecified
// (torch.empty); this kernel leaves the planned memory as it is.
ETKIT_KERNEL_FROM(empty_out, resize_to_list)

// empty_strided.out(SymInt[] size, SymInt[] stride, *, Tensor(a!) out): the out tensor keeps its planned
// dim order; contents unspecified.
ETKIT_KERNEL_FROM(empty_strided_out, resize_to_list)

}  // namespace etkit::portable
