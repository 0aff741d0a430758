// Tensor shape bookkeeping: strides from dim_order, bounded resize (see tensor.h).
#include "etkit/runtime/tensor.h"

namespace etkit::runtime {

Tensor::Tensor(ScalarType type, size_t dim, SizesType* sizes, void* data, DimOrderType* dim_order,
               StridesType* strides, TensorShapeDynamism dynamism)
    : type_(type), dim_(dim), sizes_(sizes), dim_order_(dim_order), strides_(strides), data_(data),
      dynamism_(dynamism) {
  recompute_strides_and_numel();
  capacity_nbytes_ = nbytes();
}

size_t Tensor::element_size() const { return ::etkit::runtime::element_size(type_); }

bool Tensor::is_contiguous_dim_order() const {
  for (size_t i = 0; i < dim_; ++i) {
    if (dim_order_ != nullptr && dim_order_[i] != i) return false;
  }
  return true;
}

void Tensor::recompute_strides_and_numel() {
  size_t n = 1;
  for (size_t i = 0; i < dim_; ++i) n *= static_cast<size_t>(sizes_[i] < 0 ? 0 : sizes_[i]);
  numel_ = n;
  if (strides_ == nullptr) return;
  // Walk dims from innermost (last in dim_order) to outermost.
  StridesType running = 1;
  for (size_t k = dim_; k-- > 0;) {
    size_t d = dim_order_ != nullptr ? dim_order_[k] : k;
    if (d >= dim_) continue;
    strides_[d] = running;
    running *= sizes_[d] > 0 ? sizes_[d] : 1;
  }
}

Error Tensor::resize(Span<const SizesType> new_sizes) {
  if (read_only_) {
    return set_error(Error::InvalidArgument,
                     "Tensor::resize: the tensor is a constant of the program (read-only): a kernel cannot write it");
  }
  if (new_sizes.size() != dim_) {
    return set_error(Error::InvalidArgument, "Tensor::resize: rank %zu given for a rank-%zu tensor",
                     new_sizes.size(), dim_);
  }
  bool same = true;
  size_t n = 1;
  size_t extent = 1;  // the product of the nonzero sizes: the outermost int32 stride, at least n
  for (size_t i = 0; i < dim_; ++i) {
    if (new_sizes[i] < 0) {
      return set_error(Error::InvalidArgument, "Tensor::resize: negative size %d at dim %zu",
                       (int)new_sizes[i], i);
    }
    if (new_sizes[i] != sizes_[i]) same = false;
    if (__builtin_mul_overflow(extent, static_cast<size_t>(new_sizes[i] > 0 ? new_sizes[i] : 1), &extent) ||
        extent >= (size_t(1) << 31)) {
      return set_error(Error::InvalidArgument,
                       "Tensor::resize: the product of the shape's nonzero sizes reaches 2^31 (int32 strides)");
    }
    n *= static_cast<size_t>(new_sizes[i]);  // n <= extent: cannot overflow
  }
  if (same) return Error::Ok;
  if (dynamism_ == TensorShapeDynamism::STATIC) {
    size_t changed = 0;
    while (changed + 1 < dim_ && new_sizes[changed] == sizes_[changed]) ++changed;
    return set_error(Error::NotSupported,
                     "Tensor::resize: tensor has a static shape; cannot change dim %zu from %d to %d",
                     changed, (int)sizes_[changed], (int)new_sizes[changed]);
  }
  if (n * element_size() > capacity_nbytes_) {
    return set_error(Error::NotSupported,
                     "Tensor::resize: new shape needs %zu bytes but the tensor's memory holds %zu; "
                     "export with a larger upper bound",
                     n * element_size(), capacity_nbytes_);
  }
  for (size_t i = 0; i < dim_; ++i) sizes_[i] = new_sizes[i];
  recompute_strides_and_numel();
  return Error::Ok;
}

}  // namespace etkit::runtime
