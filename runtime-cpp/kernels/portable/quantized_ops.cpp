// quantized_decomposed out variants (ExecuTorch's kernels/quantized names): quantize / dequantize per
// tensor (scalar or 0-dim tensor parameters), per channel and per token. Arithmetic follows torch's
// reference implementation (torch/ao/quantization/fx/_decomposed.py) step by step in the same
// precision, so results are bit-identical: quantize = clamp(round(x * (1 / scale)) + zero_point)
// (per token: round after adding the zero point), dequantize = (q - zero_point) * scale, in float32
// (float64 when the scales are float64). Rounding is half-to-even, as torch.round.
#include <algorithm>
#include <cmath>

#include "data_movement.h"
#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

bool check_qrange(KernelRuntimeContext& ctx, const char* name, int64_t qmin, int64_t qmax) {
  // the widest quantized dtype here is 32-bit: a wider range is a crafted program (and would overflow qmax - qmin)
  const int64_t limit = int64_t(1) << 32;
  if (!int_in_range(ctx, name, qmin, -limit, limit, "quant_min") ||
      !int_in_range(ctx, name, qmax, -limit, limit, "quant_max"))
    return false;
  if (qmin > qmax) return fail(ctx, Error::InvalidArgument, "%s: quant_min %lld > quant_max %lld", name,
                               (long long)qmin, (long long)qmax);
  return true;
}

bool check_quantized_dtype(KernelRuntimeContext& ctx, const char* name, const Tensor& t, const char* arg) {
  const ScalarType s = t.scalar_type();
  if (s != ScalarType::Char && s != ScalarType::Byte && s != ScalarType::Short && s != ScalarType::Int &&
      s != ScalarType::Long && s != ScalarType::Bits16 && s != ScalarType::UInt16) {
    return fail(ctx, Error::InvalidArgument, "%s: %s has dtype %s; expected an integer quantized dtype", name, arg,
                runtime::scalar_type_name(s));
  }
  return true;
}

/// Element i of `t` as float (its dtype converted as torch's .to(float32) does).
inline float as_float(const Tensor& t, size_t i) { return static_cast<float>(load_double(t.const_data_ptr(), t.scalar_type(), i)); }

/// v clamped to [lo, hi]; NaN passes through (double_to_int64 then maps it to INT64_MIN, as x86 does).
double clampd(double v, int64_t lo, int64_t hi) { return v < lo ? double(lo) : v > hi ? double(hi) : v; }

/// Per-tensor quantize with float32 arithmetic (inv_scale rounded to float32, like a Python scalar).
void quantize_tensor_impl(KernelRuntimeContext& ctx, const char* name, const Tensor& in, float inv_scale, double zp,
                          int64_t qmin, int64_t qmax, Tensor& out) {
  if (!check_quantized_dtype(ctx, name, out, "out") || !resize_out(ctx, name, out, in.sizes().data(), in.dim())) return;
  int64_t idx[kMaxDim] = {0};
  const float zpf = static_cast<float>(zp);
  for (size_t i = 0; i < in.numel(); ++i, next_index(idx, in.sizes().data(), in.dim())) {
    const float v = std::nearbyint(as_float(in, offset_of(in, idx)) * inv_scale) + zpf;
    store_int(out.mutable_data_ptr(), out.scalar_type(), offset_of(out, idx), double_to_int64(clampd(v, qmin, qmax)));
  }
}

void dequantize_tensor_impl(KernelRuntimeContext& ctx, const char* name, const Tensor& in, float scale, float zp,
                            Tensor& out) {
  if (!check_quantized_dtype(ctx, name, in, "input") || !check_floating(ctx, name, out, "out") ||
      !resize_out(ctx, name, out, in.sizes().data(), in.dim()))
    return;
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < in.numel(); ++i, next_index(idx, in.sizes().data(), in.dim())) {
    const float v = (as_float(in, offset_of(in, idx)) - zp) * scale;
    store_double(out.mutable_data_ptr(), out.scalar_type(), offset_of(out, idx), v);
  }
}

bool scalar_tensor_value(KernelRuntimeContext& ctx, const char* name, const Tensor* t, const char* arg, double* out) {
  if (t->numel() != 1) return fail(ctx, Error::InvalidArgument, "%s: %s must have one element, has %zu", name, arg, t->numel());
  *out = load_double(t->const_data_ptr(), t->scalar_type(), 0);
  return true;
}

}  // namespace

// quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max,
//                         ScalarType dtype, *, Tensor(a!) out)
ETKIT_KERNEL(q_quantize_per_tensor_out, Tensor* in, double scale, int64_t zp, int64_t qmin, int64_t qmax, Tensor* out) {
  if (!check_qrange(ctx, name, qmin, qmax) || !check_floating(ctx, name, *in, "input")) return;
  quantize_tensor_impl(ctx, name, *in, static_cast<float>(1.0 / scale), double(zp), qmin, qmax, *out);
}

// quantize_per_tensor.tensor_out(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max,
//                                ScalarType dtype, *, Tensor(a!) out)
ETKIT_KERNEL(q_quantize_per_tensor_tensor_out, Tensor* in, Tensor* scale_t, Tensor* zp_t, int64_t qmin, int64_t qmax,
             Tensor* out) {
  double scale = 0, zp = 0;
  if (!scalar_tensor_value(ctx, name, scale_t, "scale", &scale) || !scalar_tensor_value(ctx, name, zp_t, "zero_point", &zp) ||
      !check_qrange(ctx, name, qmin, qmax) || !check_floating(ctx, name, *in, "input"))
    return;
  const bool f32 = scale_t->scalar_type() == ScalarType::Float;
  const float inv = f32 ? 1.0f / static_cast<float>(scale) : static_cast<float>(1.0 / scale);
  quantize_tensor_impl(ctx, name, *in, inv, zp, qmin, qmax, *out);
}

// dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max,
//                           ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out)
ETKIT_KERNEL(q_dequantize_per_tensor_out, Tensor* in, double scale, int64_t zp, Tensor* out) {
  dequantize_tensor_impl(ctx, name, *in, static_cast<float>(scale), static_cast<float>(zp), *out);
}

// dequantize_per_tensor.tensor_out(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max,
//                                  ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out)
ETKIT_KERNEL(q_dequantize_per_tensor_tensor_out, Tensor* in, Tensor* scale_t, Tensor* zp_t, Tensor* out) {
  double scale = 0, zp = 0;
  if (!scalar_tensor_value(ctx, name, scale_t, "scale", &scale) || !scalar_tensor_value(ctx, name, zp_t, "zero_point", &zp))
    return;
  dequantize_tensor_impl(ctx, name, *in, static_cast<float>(scale), static_cast<float>(zp), *out);
}

namespace {
/// Index along `axis` of each element, visited in row-major order, with the element's offsets.
template <typename Fn>
void for_each_along(const Tensor& in, const Tensor& out, size_t axis, Fn fn) {
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < in.numel(); ++i, next_index(idx, in.sizes().data(), in.dim()))
    fn(static_cast<size_t>(in.dim() ? idx[axis] : 0), offset_of(in, idx), offset_of(out, idx));
}

bool per_channel_params(KernelRuntimeContext& ctx, const char* name, const Tensor& in, size_t axis, const Tensor& scales,
                        const Tensor* zps) {
  const size_t channels = in.dim() ? static_cast<size_t>(in.size(axis)) : 1;
  if (scales.numel() != channels || (zps && zps->numel() != channels)) {
    return fail(ctx, Error::InvalidArgument, "%s: %zu channels along axis %zu but %zu scales / %zu zero points", name,
                channels, axis, scales.numel(), zps ? zps->numel() : channels);
  }
  return true;
}
}  // namespace

// quantize_per_channel.out(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min,
//                          int quant_max, ScalarType dtype, *, Tensor(a!) out)
ETKIT_KERNEL(q_quantize_per_channel_out, Tensor* in, Tensor* scales, Tensor* zps, int64_t axis_arg, int64_t qmin,
             int64_t qmax, Tensor* out) {
  size_t axis;
  if (!check_qrange(ctx, name, qmin, qmax) || !normalize_dim(ctx, name, axis_arg, in->dim(), &axis) ||
      !per_channel_params(ctx, name, *in, axis, *scales, zps) || !check_floating(ctx, name, *in, "input") ||
      !check_quantized_dtype(ctx, name, *out, "out") || !resize_out(ctx, name, *out, in->sizes().data(), in->dim()))
    return;
  const bool dbl = scales->scalar_type() == ScalarType::Double;
  for_each_along(*in, *out, axis, [&](size_t c, size_t io, size_t oo) {
    const double zp = load_double(zps->const_data_ptr(), zps->scalar_type(), c);
    double v;
    if (dbl) {
      v = std::nearbyint(load_double(in->const_data_ptr(), in->scalar_type(), io) *
                         (1.0 / load_double(scales->const_data_ptr(), ScalarType::Double, c))) + zp;
    } else {
      const float inv = 1.0f / as_float(*scales, c);
      v = std::nearbyint(as_float(*in, io) * inv) + static_cast<float>(zp);
    }
    store_int(out->mutable_data_ptr(), out->scalar_type(), oo, double_to_int64(clampd(v, qmin, qmax)));
  });
}

// dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min,
//                            int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out)
ETKIT_KERNEL(q_dequantize_per_channel_out, Tensor* in, Tensor* scales, Tensor* zps, int64_t axis_arg, Tensor* out) {
  size_t axis;
  if (!normalize_dim(ctx, name, axis_arg, in->dim(), &axis) || !per_channel_params(ctx, name, *in, axis, *scales, zps) ||
      !check_quantized_dtype(ctx, name, *in, "input") || !check_floating(ctx, name, *out, "out") ||
      !resize_out(ctx, name, *out, in->sizes().data(), in->dim()))
    return;
  const bool dbl = scales->scalar_type() == ScalarType::Double;
  for_each_along(*in, *out, axis, [&](size_t c, size_t io, size_t oo) {
    const int64_t q = load_int(in->const_data_ptr(), in->scalar_type(), io);
    const int64_t zp = zps ? load_int(zps->const_data_ptr(), zps->scalar_type(), c) : 0;
    const double v = dbl ? double(wrap_sub(q, zp)) * load_double(scales->const_data_ptr(), ScalarType::Double, c)
                         : double(static_cast<float>(wrap_sub(q, zp)) * as_float(*scales, c));
    store_double(out->mutable_data_ptr(), out->scalar_type(), oo, v);
  });
}

namespace {
/// scales/zero points hold one value per token (every index but the last dim), e.g. shape [..., 1].
bool per_token_params(KernelRuntimeContext& ctx, const char* name, const Tensor& in, const Tensor& scales,
                      const Tensor& zps, size_t* tokens) {
  const size_t last = in.dim() ? static_cast<size_t>(in.size(in.dim() - 1)) : 1;
  *tokens = last ? in.numel() / last : 0;
  if (scales.numel() != *tokens || zps.numel() != *tokens || !in.is_contiguous_dim_order()) {
    return fail(ctx, Error::InvalidArgument, "%s: %zu tokens (contiguous input) but %zu scales / %zu zero points",
                name, *tokens, scales.numel(), zps.numel());
  }
  return true;
}
}  // namespace

// quantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min, int quant_max,
//                        ScalarType dtype, *, Tensor(a!) out)
ETKIT_KERNEL(q_quantize_per_token_out, Tensor* in, Tensor* scales, Tensor* zps, int64_t qmin, int64_t qmax,
             Tensor* out) {
  size_t tokens;
  if (!check_qrange(ctx, name, qmin, qmax) || !check_floating(ctx, name, *in, "input") ||
      !per_token_params(ctx, name, *in, *scales, *zps, &tokens) || !check_quantized_dtype(ctx, name, *out, "out") ||
      !resize_out(ctx, name, *out, in->sizes().data(), in->dim()) || !out->is_contiguous_dim_order())
    return;
  const size_t last = tokens ? in->numel() / tokens : 0;
  const bool dbl = scales->scalar_type() == ScalarType::Double;
  for (size_t t = 0; t < tokens; ++t) {
    const double zp = load_double(zps->const_data_ptr(), zps->scalar_type(), t);
    const float inv_f = 1.0f / as_float(*scales, t);
    const double inv_d = 1.0 / load_double(scales->const_data_ptr(), scales->scalar_type(), t);
    for (size_t j = 0; j < last; ++j) {
      const size_t i = t * last + j;
      double v = dbl ? std::nearbyint(load_double(in->const_data_ptr(), in->scalar_type(), i) * inv_d + zp)
                     : std::nearbyint(as_float(*in, i) * inv_f + static_cast<float>(zp));
      store_int(out->mutable_data_ptr(), out->scalar_type(), i, double_to_int64(clampd(v, qmin, qmax)));
    }
  }
}

// dequantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min, int quant_max,
//                          ScalarType dtype, ScalarType output_dtype, *, Tensor(a!) out)
ETKIT_KERNEL(q_dequantize_per_token_out, Tensor* in, Tensor* scales, Tensor* zps, Tensor* out) {
  size_t tokens;
  if (!check_quantized_dtype(ctx, name, *in, "input") || !per_token_params(ctx, name, *in, *scales, *zps, &tokens) ||
      !check_floating(ctx, name, *out, "out") || !resize_out(ctx, name, *out, in->sizes().data(), in->dim()) ||
      !out->is_contiguous_dim_order())
    return;
  const size_t last = tokens ? in->numel() / tokens : 0;
  const bool dbl = scales->scalar_type() == ScalarType::Double;
  for (size_t t = 0; t < tokens; ++t) {
    const int64_t zp = load_int(zps->const_data_ptr(), zps->scalar_type(), t);
    for (size_t j = 0; j < last; ++j) {
      const size_t i = t * last + j;
      const int64_t q = wrap_sub(load_int(in->const_data_ptr(), in->scalar_type(), i), zp);
      const double v = dbl ? double(q) * load_double(scales->const_data_ptr(), ScalarType::Double, t)
                           : double(static_cast<float>(q) * as_float(*scales, t));
      store_double(out->mutable_data_ptr(), out->scalar_type(), i, v);
    }
  }
}

// choose_qparams.Tensor_out(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype, *,
//                           Tensor(a!) scale_out, Tensor(b!) zero_point_out)
// Per-tensor affine parameters from the input's range (including 0), in float32 as torch's
// determine_qparams: scale = max((max - min) / (qmax - qmin), eps), zero point = qmin - round(min / scale),
// clamped; written as float64 [1] and int64 [1].
ETKIT_KERNEL(q_choose_qparams_tensor_out, Tensor* in, int64_t qmin, int64_t qmax, double eps, Tensor* scale,
             Tensor* zp) {
  if (!check_qrange(ctx, name, qmin, qmax) || !check_floating(ctx, name, *in, "input")) return;
  const SizesType one[1] = {1};
  if (!resize_out(ctx, name, *scale, one, 1) || !resize_out(ctx, name, *zp, one, 1)) return;
  float lo = 0.f, hi = 0.f;  // min(min, 0), max(max, 0)
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < in->numel(); ++i, next_index(idx, in->sizes().data(), in->dim())) {
    const float v = as_float(*in, offset_of(*in, idx));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  float s = (hi - lo) / static_cast<float>(qmax - qmin);
  s = std::max(s, static_cast<float>(eps));
  const int64_t z = wrap_sub(qmin, double_to_int64(std::nearbyint(lo / s)));  // s = 0 (eps <= 0): NaN
  store_double(scale->mutable_data_ptr(), scale->scalar_type(), 0, s);
  store_int(zp->mutable_data_ptr(), zp->scalar_type(), 0, std::min(std::max(z, qmin), qmax));
}

// choose_qparams_per_token_asymmetric.out(Tensor input, ScalarType dtype, *, Tensor(a!) scale_out,
//                                         Tensor(b!) zero_point_out)
// One (scale, zero point) per row of the last dim, int8 range, float32 arithmetic as torch's
// reference (the zero point nearer the side with the larger error); scales float64 and zero points int64,
// shape [..., 1].
ETKIT_KERNEL(q_choose_qparams_per_token_asymmetric_out, Tensor* in, Tensor* scale, Tensor* zp) {
  if (!check_floating(ctx, name, *in, "input")) return;
  if (in->dim() == 0 || !in->is_contiguous_dim_order()) {
    fail(ctx, Error::InvalidArgument, "%s: expects a contiguous input of rank >= 1", name);
    return;
  }
  SizesType shape[kMaxDim];
  for (size_t d = 0; d < in->dim(); ++d) shape[d] = in->size(d);
  shape[in->dim() - 1] = 1;
  if (!resize_out(ctx, name, *scale, shape, in->dim()) || !resize_out(ctx, name, *zp, shape, in->dim())) return;
  const size_t last = static_cast<size_t>(in->size(in->dim() - 1));
  const size_t rows = last ? in->numel() / last : 0;
  const float qmin = -128.f, qmax = 127.f, eps = 1.1920928955078125e-07f;  // torch.finfo(float32).eps
  for (size_t r = 0; r < rows; ++r) {
    float lo = 0.f, hi = 0.f;
    for (size_t j = 0; j < last; ++j) {
      const float v = as_float(*in, r * last + j);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    float s = std::max((hi - lo) / 255.f, eps);
    const float dmin = lo / s, dmax = hi / s;
    float z = (qmin + dmin) + (qmax + dmax) > 0 ? qmin - dmin : qmax - dmax;
    z = std::nearbyint(std::min(std::max(z, qmin), qmax));
    store_double(scale->mutable_data_ptr(), scale->scalar_type(), r, s);
    store_int(zp->mutable_data_ptr(), zp->scalar_type(), r, double_to_int64(z));  // NaN input: defined
  }
}

}  // namespace etkit::portable
