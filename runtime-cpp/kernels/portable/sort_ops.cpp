// sort.values and topk.values. Rows along `dim` are ordered by value with NaN greater than every
// number (torch's order), ties kept in index order (a stable sort: std::sort with the index as the
// tie-break, which never allocates). The per-row index buffer comes from the kernel's scratch memory.
#include <algorithm>
#include <cmath>

#include "data_movement.h"
#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

struct RowOrder {
  const void* base;
  ScalarType type;
  int64_t start, stride;
  bool descending;
  bool floating;

  // a < b in ascending order (NaN last); ties by index
  bool operator()(int64_t a, int64_t b) const {
    const size_t oa = static_cast<size_t>(start + a * stride), ob = static_cast<size_t>(start + b * stride);
    int cmp;
    if (floating) {
      const double x = load_double(base, type, oa), y = load_double(base, type, ob);
      const bool nx = std::isnan(x), ny = std::isnan(y);
      cmp = nx && ny ? 0 : nx ? 1 : ny ? -1 : (x < y ? -1 : x > y ? 1 : 0);
    } else {
      const int64_t x = load_int(base, type, oa), y = load_int(base, type, ob);
      cmp = x < y ? -1 : x > y ? 1 : 0;
    }
    if (descending) cmp = -cmp;
    return cmp != 0 ? cmp < 0 : a < b;
  }
};

/// Sorts every row of `self` along `dim` and writes the first `k` of each into values/indices.
void sort_rows(KernelRuntimeContext& ctx, const char* name, const Tensor& self, size_t dim, int64_t k, bool descending,
               Tensor& values, Tensor& indices) {
  if (indices.scalar_type() != ScalarType::Long) {
    fail(ctx, Error::InvalidArgument, "%s: indices must be Long, got %s", name,
         runtime::scalar_type_name(indices.scalar_type()));
    return;
  }
  if (values.scalar_type() != self.scalar_type()) {
    fail(ctx, Error::InvalidArgument, "%s: values dtype %s differs from self dtype %s", name,
         runtime::scalar_type_name(values.scalar_type()), runtime::scalar_type_name(self.scalar_type()));
    return;
  }
  SizesType shape[kMaxDim];
  for (size_t d = 0; d < self.dim(); ++d) shape[d] = self.size(d);
  if (self.dim() > 0) shape[dim] = static_cast<SizesType>(k);
  if (!resize_out(ctx, name, values, shape, self.dim()) || !resize_out(ctx, name, indices, shape, self.dim())) return;
  const int64_t n = self.dim() ? self.size(dim) : 1;
  if (self.numel() == 0 || k == 0) return;
  int64_t* order = static_cast<int64_t*>(ctx.allocate_temp(static_cast<size_t>(n) * sizeof(int64_t)));
  if (order == nullptr) {
    fail(ctx, Error::MemoryAllocationFailed, "%s: a row of %lld elements needs more scratch memory than the method has",
         name, (long long)n);
    return;
  }
  RowOrder cmp{self.const_data_ptr(), self.scalar_type(), 0, self.dim() ? self.stride(dim) : 1, descending,
               is_floating(self.scalar_type())};
  // iterate over every position with index 0 along dim
  SizesType outer[kMaxDim];
  for (size_t d = 0; d < self.dim(); ++d) outer[d] = d == dim ? 1 : self.size(d);
  const size_t rows = self.numel() / static_cast<size_t>(n);
  int64_t idx[kMaxDim] = {0};
  for (size_t r = 0; r < rows; ++r) {
    cmp.start = static_cast<int64_t>(offset_of(self, idx));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    if (k < n) std::partial_sort(order, order + k, order + n, cmp);
    else std::sort(order, order + n, cmp);
    int64_t oidx[kMaxDim];
    for (size_t d = 0; d < self.dim(); ++d) oidx[d] = idx[d];
    for (int64_t i = 0; i < k; ++i) {
      if (self.dim()) oidx[dim] = i;
      copy_elem(self, static_cast<size_t>(cmp.start + order[i] * cmp.stride), values, offset_of(values, oidx));
      store_int(indices.mutable_data_ptr(), ScalarType::Long, offset_of(indices, oidx), order[i]);
    }
    next_index(idx, outer, self.dim());
  }
}

}  // namespace

// sort.values(Tensor self, int dim=-1, bool descending=False, *, Tensor(a!) values, Tensor(b!) indices)
ETKIT_KERNEL(sort_values, Tensor* self, int64_t dim_arg, bool descending, Tensor* values, Tensor* indices) {
  size_t dim;
  if (!normalize_dim(ctx, name, dim_arg, self->dim(), &dim)) return;
  sort_rows(ctx, name, *self, dim, self->dim() ? self->size(dim) : 1, descending, *values, *indices);
}

// topk.values(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True, *,
//             Tensor(a!) values, Tensor(b!) indices). Results are always sorted.
ETKIT_KERNEL(topk_values, Tensor* self, int64_t k, int64_t dim_arg, bool largest, Tensor* values, Tensor* indices) {
  size_t dim;
  if (!normalize_dim(ctx, name, dim_arg, self->dim(), &dim)) return;
  const int64_t n = self->dim() ? self->size(dim) : 1;
  if (k < 0 || k > n) {
    fail(ctx, Error::InvalidArgument, "%s: k=%lld is out of range for a dimension of size %lld", name, (long long)k,
         (long long)n);
    return;
  }
  sort_rows(ctx, name, *self, dim, k, largest, *values, *indices);
}

}  // namespace etkit::portable
