// Tensor: a non-owning description of an n-dimensional array (ExecuTorch's TensorImpl).
//
// The metadata arrays (sizes, dim_order, strides) and the data are owned by someone else: the Method's
// allocator for tensors of a program, the caller for tensors it builds itself. Sizes and strides are
// int32 and dim_order is uint8, as in ExecuTorch's runtime (seed page "Managing Tensor Memory in C++").
// `dim_order` lists dimensions from outermost to innermost in memory; contiguous is 0, 1, ..., dim-1.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/error.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/span.h"

namespace etkit::runtime {

using SizesType = int32_t;
using DimOrderType = uint8_t;
using StridesType = int32_t;

/// Largest rank a tensor may have (ExecuTorch's kTensorDimensionLimit).
constexpr size_t kTensorDimensionLimit = 16;

/// Whether a tensor's shape may change at run time (schema TensorShapeDynamism).
enum class TensorShapeDynamism : uint8_t {
  STATIC = 0,           // shape fixed at export
  DYNAMIC_BOUND = 1,    // shape may change; numel never exceeds the capacity set at load
  DYNAMIC_UNBOUND = 2,  // treated as DYNAMIC_BOUND by this runtime (no reallocation)
};

class Tensor final {
 public:
  Tensor() = default;
  /// `sizes`, `dim_order` and `strides` each point at `dim` writable elements (strides may be null:
  /// they are then left unset and must be filled by the owner via `mutable_strides()`).
  /// The capacity (max bytes the data buffer holds) is the nbytes of the initial shape.
  Tensor(ScalarType type, size_t dim, SizesType* sizes, void* data, DimOrderType* dim_order,
         StridesType* strides, TensorShapeDynamism dynamism = TensorShapeDynamism::STATIC);

  ScalarType scalar_type() const { return type_; }
  size_t dim() const { return dim_; }
  Span<const SizesType> sizes() const { return {sizes_, dim_}; }
  Span<const DimOrderType> dim_order() const { return {dim_order_, dim_}; }
  Span<const StridesType> strides() const { return {strides_, dim_}; }
  SizesType size(size_t d) const { return sizes_[d]; }
  StridesType stride(size_t d) const { return strides_[d]; }
  TensorShapeDynamism shape_dynamism() const { return dynamism_; }

  size_t numel() const { return numel_; }
  size_t element_size() const;
  size_t nbytes() const { return numel_ * element_size(); }
  /// Bytes the data buffer was sized for when the tensor was created (upper bound for resize).
  size_t capacity_nbytes() const { return capacity_nbytes_; }

  /// True when dim_order is 0..dim-1 (row-major contiguous).
  bool is_contiguous_dim_order() const;

  const void* const_data_ptr() const { return data_; }
  void* mutable_data_ptr() const { return data_; }
  template <typename T>
  const T* const_data_ptr() const { return static_cast<const T*>(data_); }
  template <typename T>
  T* mutable_data_ptr() const { return static_cast<T*>(data_); }
  /// Points the tensor at other storage (at least capacity_nbytes() long).
  void set_data(void* data) { data_ = data; }
  /// A program constant: its bytes may be a read-only mapping of the file, and every Method of the Program
  /// shares them. resize() refuses it, so no kernel takes it as an output.
  bool is_read_only() const { return read_only_; }
  void set_read_only(bool read_only) { read_only_ = read_only; }

  /// Changes the shape to `new_sizes` (same rank), recomputing strides from dim_order; kernels resize every
  /// output before writing it. Errors: InvalidArgument if the rank differs or the tensor is read-only (a
  /// constant named as an output); NotSupported if the tensor is STATIC and the shape differs, or if the new
  /// shape needs more than capacity_nbytes(). Never allocates.
  Error resize(Span<const SizesType> new_sizes);

  /// For owners building a tensor: the writable metadata arrays.
  SizesType* mutable_sizes() { return sizes_; }
  DimOrderType* mutable_dim_order() { return dim_order_; }
  StridesType* mutable_strides() { return strides_; }
  /// Recomputes strides from sizes and dim_order, and numel from sizes.
  void recompute_strides_and_numel();
  void set_shape_dynamism(TensorShapeDynamism d) { dynamism_ = d; }
  void set_capacity_nbytes(size_t n) { capacity_nbytes_ = n; }

 private:
  ScalarType type_ = kUndefinedScalarType;
  size_t dim_ = 0;
  SizesType* sizes_ = nullptr;
  DimOrderType* dim_order_ = nullptr;
  StridesType* strides_ = nullptr;
  void* data_ = nullptr;
  size_t numel_ = 0;
  size_t capacity_nbytes_ = 0;
  TensorShapeDynamism dynamism_ = TensorShapeDynamism::STATIC;
  bool read_only_ = false;
};

}  // namespace etkit::runtime
