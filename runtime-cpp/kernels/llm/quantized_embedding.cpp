// quantized_decomposed::embedding_byte.out / embedding_4bit.out: looks rows up in a quantized embedding
// table and dequantizes only those rows (ExecuTorch's names and semantics; core/etkit/dialects/
// quantized_embedding.py is the Python reference).
//
//   weight              int8 [V, D] (embedding_byte) or uint8 [V, D/2] (embedding_4bit: element 2j in the
//                       high nibble of byte j, 2j+1 in the low nibble, each stored plus 8)
//   weight_scales       float32 [V] or [V, G]: G groups of D/G columns per row
//   weight_zero_points  None, or the scales' shape (float32)
//   indices             int64 or int32, any shape; every index must be in [0, V)
//   out                 float32, indices.shape + [D]
#include <cstdint>

#include "../portable/kernel_binding.h"
#include "llm_checks.h"

namespace etkit::portable {
namespace {

bool check_2d_contiguous(KernelRuntimeContext& ctx, const char* op, const Tensor& t, const char* name) {
  return llm::check_contiguous(ctx, op, t, name);
}

template <bool kFourBit>
void embedding_out(KernelRuntimeContext& ctx, const char* op, Tensor* weight, Tensor* scales, Tensor* zero_points,
                   Tensor* indices, Tensor* out) {
  const ScalarType want_weight = kFourBit ? ScalarType::Byte : ScalarType::Char;
  if (weight->dim() != 2 || weight->scalar_type() != want_weight) {
    fail(ctx, Error::InvalidArgument, "%s: weight must be a 2-D %s table, got %zu-D %s", op,
         runtime::scalar_type_name(want_weight), weight->dim(), runtime::scalar_type_name(weight->scalar_type()));
    return;
  }
  const int64_t rows = weight->size(0);
  const int64_t dim = weight->size(1) * (kFourBit ? 2 : 1);
  if (dim > kMaxSize) {  // the output's last size
    fail(ctx, Error::InvalidArgument, "%s: an embedding dimension of %lld exceeds the largest tensor size %lld", op,
         static_cast<long long>(dim), static_cast<long long>(kMaxSize));
    return;
  }
  if (scales->scalar_type() != ScalarType::Float || (scales->dim() != 1 && scales->dim() != 2) ||
      scales->size(0) != rows) {
    fail(ctx, Error::InvalidArgument, "%s: weight_scales must be float32 [%lld] or [%lld, groups], got %zu-D %s", op,
         static_cast<long long>(rows), static_cast<long long>(rows), scales->dim(),
         runtime::scalar_type_name(scales->scalar_type()));
    return;
  }
  const int64_t groups = scales->dim() == 2 ? scales->size(1) : 1;
  if (groups <= 0 || dim % groups != 0) {
    fail(ctx, Error::InvalidArgument, "%s: %lld scale groups do not divide the embedding dimension %lld", op,
         static_cast<long long>(groups), static_cast<long long>(dim));
    return;
  }
  if (zero_points) {
    bool same = zero_points->scalar_type() == ScalarType::Float && zero_points->dim() == scales->dim();
    for (size_t d = 0; same && d < scales->dim(); ++d) same = zero_points->size(d) == scales->size(d);
    if (!same) {
      fail(ctx, Error::InvalidArgument, "%s: weight_zero_points must be float32 with the scales' shape", op);
      return;
    }
  }
  if (indices->scalar_type() != ScalarType::Long && indices->scalar_type() != ScalarType::Int) {
    fail(ctx, Error::InvalidArgument, "%s: indices must be int64 or int32, got %s", op,
         runtime::scalar_type_name(indices->scalar_type()));
    return;
  }
  if (indices->dim() + 1 > runtime::kTensorDimensionLimit) {
    fail(ctx, Error::InvalidArgument, "%s: indices have %zu dims, too many for the output", op, indices->dim());
    return;
  }
  if (!check_2d_contiguous(ctx, op, *weight, "weight") || !check_2d_contiguous(ctx, op, *scales, "weight_scales") ||
      !check_2d_contiguous(ctx, op, *indices, "indices") ||
      (zero_points && !check_2d_contiguous(ctx, op, *zero_points, "weight_zero_points")) ||
      !llm::check_float32(ctx, op, *out, "out")) {
    return;
  }
  SizesType sizes[runtime::kTensorDimensionLimit];
  for (size_t d = 0; d < indices->dim(); ++d) sizes[d] = indices->size(d);
  sizes[indices->dim()] = static_cast<SizesType>(dim);
  if (!resize_out(ctx, op, *out, sizes, indices->dim() + 1)) return;
  if (!llm::check_contiguous(ctx, op, *out, "out")) return;

  const size_t count = indices->numel();
  const int64_t group = dim / groups;
  const float* s = static_cast<const float*>(scales->const_data_ptr());
  const float* z = zero_points ? static_cast<const float*>(zero_points->const_data_ptr()) : nullptr;
  const int8_t* w8 = static_cast<const int8_t*>(weight->const_data_ptr());
  const uint8_t* w4 = static_cast<const uint8_t*>(weight->const_data_ptr());
  float* dst = static_cast<float*>(out->mutable_data_ptr());
  for (size_t i = 0; i < count; ++i) {
    const int64_t row = indices->scalar_type() == ScalarType::Long
                            ? static_cast<const int64_t*>(indices->const_data_ptr())[i]
                            : static_cast<const int32_t*>(indices->const_data_ptr())[i];
    if (row < 0 || row >= rows) {
      fail(ctx, Error::InvalidArgument, "%s: index %lld at position %zu is out of range for a table of %lld rows",
           op, static_cast<long long>(row), i, static_cast<long long>(rows));
      return;
    }
    float* __restrict o = dst + i * dim;
    for (int64_t g = 0; g < groups; ++g) {
      const float scale = s[row * groups + g];
      const float zero = z ? z[row * groups + g] : 0.0f;
      const int64_t begin = g * group;
      if (kFourBit) {
        const uint8_t* __restrict packed = w4 + row * (dim / 2);
        for (int64_t j = begin; j < begin + group; ++j) {
          const uint8_t byte = packed[j / 2];
          const int q = ((j & 1) ? (byte & 0x0F) : (byte >> 4)) - 8;
          o[j] = (static_cast<float>(q) - zero) * scale;
        }
      } else {
        const int8_t* __restrict q = w8 + row * dim;
        for (int64_t j = begin; j < begin + group; ++j) o[j] = (static_cast<float>(q[j]) - zero) * scale;
      }
    }
  }
}

}  // namespace

// embedding_byte.out(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min,
//     int weight_quant_max, Tensor indices, *, Tensor(a!) out) -> Tensor(a!)
ETKIT_KERNEL_FROM(quantized_embedding_byte_out, embedding_out<false>)

// embedding_4bit.out: the same arguments, weight packed two values per byte.
ETKIT_KERNEL_FROM(quantized_embedding_4bit_out, embedding_out<true>)

}  // namespace etkit::portable
