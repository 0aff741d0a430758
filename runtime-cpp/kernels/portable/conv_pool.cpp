// Convolution (1-D and 2-D, grouped, dilated; not transposed) and 2-D pooling (max with indices,
// average, adaptive average). Inputs are NCHW (or NCL) in logical index order; any dim order works
// because elements are addressed through strides. Float32 has a direct fast path.
#include <algorithm>
#include <cstdint>
#include <cmath>
#include <limits>

#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

constexpr size_t kMaxDim = runtime::kTensorDimensionLimit;

/// A convolution's or pooling's int list for `n` spatial dims: an empty list gives `dflt`; values in
/// [dflt == 0 ? 0 : 1, kMaxWindow] (a padding may be 0; a kernel size, stride or dilation is at least 1).
bool spatial_param(KernelRuntimeContext& ctx, const char* name, Span<const int64_t> list, size_t n, int64_t dflt,
                   const char* what, int64_t* out) {
  return window_list(ctx, name, list, what, n, nullptr, dflt, dflt == 0 ? 0 : 1, out);
}

/// A convolution's bias is absent or has shape [OC] (read at oc * stride(0)).
bool check_bias(KernelRuntimeContext& ctx, const char* name, const Tensor* bias, int64_t out_channels) {
  if (bias == nullptr || (bias->dim() == 1 && bias->size(0) == out_channels)) return true;
  return fail(ctx, Error::InvalidArgument, "%s: bias has %zu dims and %zu elements; it must have shape [%lld] (the "
              "output channels)", name, bias->dim(), bias->numel(), (long long)out_channels);
}

int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  int64_t num = in + 2 * pad - dil * (k - 1) - 1;
  int64_t out = (ceil_mode ? (num + stride - 1) / stride : num / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;  // last window must start inside the input
  return out;
}

}  // namespace

namespace {
/// float32, contiguous NCHW: each output plane accumulates weight * shifted input rows, so the inner
/// loop runs along a contiguous output row (vectorised by the compiler) with no bounds checks in it.
void conv2d_f32_planes(const float* in, const float* w, const float* bias, int64_t bias_stride, float* out, int64_t N,
                       int64_t groups, int64_t ICg, int64_t OCg, int64_t H, int64_t W, int64_t OH, int64_t OW,
                       int64_t KH, int64_t KW, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  const int64_t C = groups * ICg, OC = groups * OCg;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oc = 0; oc < OC; ++oc) {
      float* o = out + (n * OC + oc) * OH * OW;
      const float b = bias ? bias[oc * bias_stride] : 0.f;
      for (int64_t i = 0; i < OH * OW; ++i) o[i] = b;
      const int64_t g = oc / OCg;
      for (int64_t ic = 0; ic < ICg; ++ic) {
        const float* plane = in + (n * C + g * ICg + ic) * H * W;
        const float* wk = w + ((oc * ICg) + ic) * KH * KW;
        for (int64_t kh = 0; kh < KH; ++kh) {
          for (int64_t kw = 0; kw < KW; ++kw) {
            const float wv = wk[kh * KW + kw];
            const int64_t shift = kw * dw - pw;  // iw = ow * sw + shift
            // output columns whose input column is inside [0, W)
            int64_t lo = shift >= 0 ? 0 : (-shift + sw - 1) / sw;
            int64_t hi = W - 1 - shift < 0 ? 0 : (W - 1 - shift) / sw + 1;
            hi = std::min(hi, OW);
            if (lo >= hi) continue;
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * sh - ph + kh * dh;
              if (ih < 0 || ih >= H) continue;
              const float* __restrict irow = plane + ih * W;
              float* __restrict orow = o + oh * OW;  // output and input never overlap
              if (sw == 1) {
                for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * irow[ow + shift];
              } else {
                for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * irow[ow * sw + shift];
              }
            }
          }
        }
      }
    }
  }
}
}  // namespace

namespace {
/// Any convolution the 2-D paths below do not take: 3-D, transposed (1-3 spatial dims) and integer
/// ones, for every dtype, accumulating in double (exact for integers below 2^53). Shapes follow torch: weight [OC, IC/g, k...] (transposed:
/// [IC, OC/g, k...]); a transposed output has (in - 1) * s - 2 * p + d * (k - 1) + output_padding + 1
/// positions per spatial dim, each the sum over the (input, tap) pairs that land on it.
void convolution_generic(KernelRuntimeContext& ctx, const char* name, const Tensor& in, const Tensor& w,
                         const Tensor* bias, Span<const int64_t> stride_l, Span<const int64_t> pad_l,
                         Span<const int64_t> dil_l, Span<const int64_t> outpad_l, bool transposed, int64_t groups,
                         Tensor& out) {
  const size_t ns = in.dim() - 2;
  int64_t s[3], p[3], d[3], op[3] = {0, 0, 0};
  if (!spatial_param(ctx, name, stride_l, ns, 1, "stride", s) || !spatial_param(ctx, name, pad_l, ns, 0, "padding", p) ||
      !spatial_param(ctx, name, dil_l, ns, 1, "dilation", d) ||
      (transposed && !spatial_param(ctx, name, outpad_l, ns, 0, "output_padding", op)))
    return;
  const int64_t N = in.size(0), C = in.size(1);
  // groups is checked against the channels before it multiplies a weight dim (a program's Int is any int64)
  if (groups <= 0 || groups > std::max<int64_t>(C, 1) || C % groups != 0) {
    fail(ctx, Error::InvalidArgument, "%s: groups %lld must be positive and divide the input channels %lld", name,
         (long long)groups, (long long)C);
    return;
  }
  const int64_t OC = transposed ? w.size(1) * groups : w.size(0);
  const int64_t wic = transposed ? w.size(0) : w.size(1) * groups;  // input channels the weight expects
  if (OC % groups != 0 || wic != C) {
    fail(ctx, Error::InvalidArgument, "%s: input channels %lld, weight shape and groups %lld disagree", name,
         (long long)C, (long long)groups);
    return;
  }
  if (!check_bias(ctx, name, bias, OC)) return;
  SizesType osz[5] = {SizesType(N), SizesType(OC), 1, 1, 1};
  int64_t isz[3], ksz[3], o_sp[3];
  for (size_t k = 0; k < ns; ++k) {
    isz[k] = in.size(2 + k);
    ksz[k] = w.size(2 + k);
    o_sp[k] = transposed ? (isz[k] - 1) * s[k] - 2 * p[k] + d[k] * (ksz[k] - 1) + op[k] + 1
                         : (isz[k] + 2 * p[k] - d[k] * (ksz[k] - 1) - 1) / s[k] + 1;
    if (o_sp[k] <= 0) {
      fail(ctx, Error::InvalidArgument, "%s: kernel is larger than the padded input in spatial dim %zu", name, k);
      return;
    }
    osz[2 + k] = SizesType(o_sp[k]);
  }
  if (!resize_out(ctx, name, out, osz, in.dim())) return;
  const int64_t icg = C / groups, ocg = OC / groups;
  size_t taps = 1;
  for (size_t k = 0; k < ns; ++k) taps *= size_t(ksz[k]);
  // Each output element is one sum in double, rounded once into the output's dtype.
  int64_t oidx[5] = {0};
  for (size_t i = 0; i < out.numel(); ++i, next_index(oidx, out.sizes().data(), out.dim())) {
    const int64_t n = oidx[0], oc = oidx[1], g = oc / ocg;
    double acc = bias ? load_double(bias->const_data_ptr(), bias->scalar_type(), size_t(oc * bias->stride(0))) : 0.0;
    for (int64_t ic = 0; ic < icg; ++ic) {
      const int64_t c = g * icg + ic;
      int64_t kidx[3] = {0, 0, 0};
      for (size_t t = 0; t < taps; ++t) {
        // input position of this (output position, tap), if any
        int64_t iidx[5] = {n, c, 0, 0, 0};
        bool inside = true;
        for (size_t k = 0; k < ns && inside; ++k) {
          if (transposed) {  // output = input * s - p + tap * d  ->  input = (output + p - tap * d) / s, if exact
            const int64_t num = oidx[2 + k] + p[k] - kidx[k] * d[k];
            inside = num >= 0 && num % s[k] == 0;
            iidx[2 + k] = inside ? num / s[k] : 0;
          } else {
            iidx[2 + k] = oidx[2 + k] * s[k] - p[k] + kidx[k] * d[k];
          }
          inside = inside && iidx[2 + k] >= 0 && iidx[2 + k] < isz[k];
        }
        if (inside) {
          int64_t widx[5] = {transposed ? c : oc, transposed ? oc - g * ocg : ic, 0, 0, 0};
          for (size_t k = 0; k < ns; ++k) widx[2 + k] = kidx[k];
          acc += load_double(in.const_data_ptr(), in.scalar_type(), offset_of(in, iidx)) *
                 load_double(w.const_data_ptr(), w.scalar_type(), offset_of(w, widx));
        }
        for (size_t k = ns; k-- > 0;) {
          if (++kidx[k] < ksz[k]) break;
          kidx[k] = 0;
        }
      }
    }
    store_double(out.mutable_data_ptr(), out.scalar_type(), offset_of(out, oidx), acc);
  }
}
}  // namespace

// convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
//                 SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, *, Tensor(a!) out)
ETKIT_KERNEL(convolution_out, Tensor* in, Tensor* w, Tensor* bias, Span<const int64_t> stride_l,
             Span<const int64_t> pad_l, Span<const int64_t> dil_l, bool transposed, Span<const int64_t> outpad_l,
             int64_t groups, Tensor* out) {
  if (!check_dtype(ctx, name, *in, "input")) return;
  if (in->dim() < 3 || in->dim() > 5 || w->dim() != in->dim()) {
    fail(ctx, Error::NotSupported, "%s: 1-D, 2-D and 3-D convolutions are supported (input %zu-D, weight %zu-D)",
         name, in->dim(), w->dim());
    return;
  }
  if (transposed || in->dim() == 5 || !is_floating(in->scalar_type())) {
    convolution_generic(ctx, name, *in, *w, bias, stride_l, pad_l, dil_l, outpad_l, transposed, groups, *out);
    return;
  }
  const bool is1d = in->dim() == 3;
  const size_t ns = is1d ? 1 : 2;
  int64_t stride[2], pad[2], dil[2];
  if (!spatial_param(ctx, name, stride_l, ns, 1, "stride", stride) ||
      !spatial_param(ctx, name, pad_l, ns, 0, "padding", pad) || !spatial_param(ctx, name, dil_l, ns, 1, "dilation", dil))
    return;
  const int64_t N = in->size(0), C = in->size(1), H = is1d ? 1 : in->size(2), W = in->size(is1d ? 2 : 3);
  const int64_t OC = w->size(0), ICg = w->size(1), KH = is1d ? 1 : w->size(2), KW = w->size(is1d ? 2 : 3);
  if (groups <= 0 || C % groups != 0 || OC % groups != 0 || ICg != C / groups) {
    fail(ctx, Error::InvalidArgument, "%s: input channels %lld, weight shape [%lld, %lld, ...] and groups %lld disagree",
         name, (long long)C, (long long)OC, (long long)ICg, (long long)groups);
    return;
  }
  if (!check_bias(ctx, name, bias, OC)) return;
  const int64_t sh = is1d ? 1 : stride[0], sw = stride[is1d ? 0 : 1];
  const int64_t ph = is1d ? 0 : pad[0], pw = pad[is1d ? 0 : 1];
  const int64_t dh = is1d ? 1 : dil[0], dw = dil[is1d ? 0 : 1];
  const int64_t OH = pooled_size(H, KH, ph, sh, dh, false), OW = pooled_size(W, KW, pw, sw, dw, false);
  if (OH <= 0 || OW <= 0 || OH > INT32_MAX || OW > INT32_MAX) {
    fail(ctx, Error::InvalidArgument, "%s: kernel is larger than the padded input", name);
    return;
  }
  SizesType os[4] = {SizesType(N), SizesType(OC), SizesType(is1d ? OW : OH), SizesType(OW)};
  if (!resize_out(ctx, name, *out, os, in->dim())) return;
  const int64_t ocg = OC / groups;
  // Strides of input/weight/out in logical NCHW terms (1-D: H dim absent -> stride 0).
  auto st = [&](const Tensor& t, int d4) -> int64_t {
    if (!is1d) return t.stride(size_t(d4));
    return d4 == 2 ? 0 : t.stride(size_t(d4 == 3 ? 2 : d4));
  };
  const int64_t in_s[4] = {st(*in, 0), st(*in, 1), st(*in, 2), st(*in, 3)};
  const int64_t w_s[4] = {st(*w, 0), st(*w, 1), st(*w, 2), st(*w, 3)};
  const int64_t o_s[4] = {st(*out, 0), st(*out, 1), st(*out, 2), st(*out, 3)};
  const bool fast = in->scalar_type() == ScalarType::Float && w->scalar_type() == ScalarType::Float &&
                    out->scalar_type() == ScalarType::Float && (!bias || bias->scalar_type() == ScalarType::Float);
  if (fast && in->is_contiguous_dim_order() && w->is_contiguous_dim_order() && out->is_contiguous_dim_order()) {
    conv2d_f32_planes(in->const_data_ptr<float>(), w->const_data_ptr<float>(),
                      bias ? bias->const_data_ptr<float>() : nullptr, bias ? bias->stride(0) : 0,
                      out->mutable_data_ptr<float>(), N, groups, ICg, ocg, is1d ? 1 : H, W, OH, OW, KH, KW,
                      is1d ? 1 : sh, sw, is1d ? 0 : ph, pw, is1d ? 1 : dh, dw);
    return;
  }
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oc = 0; oc < OC; ++oc) {
      const int64_t g = oc / ocg;
      const double b = bias ? load_double(bias->const_data_ptr(), bias->scalar_type(), size_t(oc * bias->stride(0))) : 0;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b;
          float facc = static_cast<float>(b);
          for (int64_t ic = 0; ic < ICg; ++ic) {
            const int64_t c = g * ICg + ic;
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * sh - ph + kh * dh;
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * sw - pw + kw * dw;
                if (iw < 0 || iw >= W) continue;
                const size_t io = size_t(n * in_s[0] + c * in_s[1] + ih * in_s[2] + iw * in_s[3]);
                const size_t wo = size_t(oc * w_s[0] + ic * w_s[1] + kh * w_s[2] + kw * w_s[3]);
                if (fast) {
                  facc += in->const_data_ptr<float>()[io] * w->const_data_ptr<float>()[wo];
                } else {
                  acc += load_double(in->const_data_ptr(), in->scalar_type(), io) *
                         load_double(w->const_data_ptr(), w->scalar_type(), wo);
                }
              }
            }
          }
          const size_t oo = size_t(n * o_s[0] + oc * o_s[1] + oh * o_s[2] + ow * o_s[3]);
          if (fast) out->mutable_data_ptr<float>()[oo] = facc;
          else store_double(out->mutable_data_ptr(), out->scalar_type(), oo, acc);
        }
      }
    }
  }
}

namespace {
/// Common 2-D pooling loop over an NCHW or CHW input. `window(n_c_base, h0, w0, h1, w1, ...)`.
struct Pool2dShape {
  int64_t batch_planes;  // N*C (or C)
  int64_t H, W, OH, OW;
  size_t lead;           // number of leading dims (1 or 2)
};

bool pool_setup(KernelRuntimeContext& ctx, const char* name, const Tensor& in, Tensor& out, Span<const int64_t> k_l,
                Span<const int64_t> s_l, Span<const int64_t> p_l, Span<const int64_t> d_l, bool ceil_mode, int64_t* k,
                int64_t* s, int64_t* p, int64_t* d, Pool2dShape* shape, Tensor* indices) {
  if (in.dim() != 3 && in.dim() != 4) {
    return fail(ctx, Error::InvalidArgument, "%s: input must be 3-D or 4-D, got %zu-D", name, in.dim());
  }
  if (!spatial_param(ctx, name, k_l, 2, 1, "kernel_size", k) ||
      !spatial_param(ctx, name, s_l.empty() ? k_l : s_l, 2, 1, "stride", s) ||
      !spatial_param(ctx, name, p_l, 2, 0, "padding", p) || !spatial_param(ctx, name, d_l, 2, 1, "dilation", d))
    return false;
  const size_t lead = in.dim() - 2;
  shape->lead = lead;
  shape->H = in.size(lead);
  shape->W = in.size(lead + 1);
  shape->OH = pooled_size(shape->H, k[0], p[0], s[0], d[0], ceil_mode);
  shape->OW = pooled_size(shape->W, k[1], p[1], s[1], d[1], ceil_mode);
  if (shape->OH <= 0 || shape->OW <= 0) {
    return fail(ctx, Error::InvalidArgument, "%s: pooling window is larger than the padded input", name);
  }
  shape->batch_planes = 1;
  SizesType os[4];
  for (size_t i = 0; i < lead; ++i) {
    os[i] = in.size(i);
    shape->batch_planes *= in.size(i);
  }
  os[lead] = SizesType(shape->OH);
  os[lead + 1] = SizesType(shape->OW);
  if (!resize_out(ctx, name, out, os, in.dim())) return false;
  if (indices && !resize_out(ctx, name, *indices, os, in.dim())) return false;
  return true;
}

/// Offset of element (plane, h, w) of a tensor with `lead` leading dims, in logical order.
size_t plane_offset(const Tensor& t, size_t lead, int64_t plane, int64_t h, int64_t w) {
  int64_t off = 0;
  if (lead == 2) {
    off += (plane / t.size(1)) * t.stride(0) + (plane % t.size(1)) * t.stride(1);
  } else {
    off += plane * t.stride(0);
  }
  return size_t(off + h * t.stride(lead) + w * t.stride(lead + 1));
}
}  // namespace

// max_pool2d_with_indices.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
//     int[2] dilation=1, bool ceil_mode=False, *, Tensor(a!) out, Tensor(b!) indices)
ETKIT_KERNEL(max_pool2d_with_indices_out, Tensor* in, Span<const int64_t> k_l, Span<const int64_t> s_l,
             Span<const int64_t> p_l, Span<const int64_t> d_l, bool ceil_mode, Tensor* out, Tensor* indices) {
  int64_t k[2], s[2], p[2], d[2];
  Pool2dShape sh;
  if (!pool_setup(ctx, name, *in, *out, k_l, s_l, p_l, d_l, ceil_mode, k, s, p, d, &sh, indices)) return;
  for (int64_t pl = 0; pl < sh.batch_planes; ++pl) {
    for (int64_t oh = 0; oh < sh.OH; ++oh) {
      for (int64_t ow = 0; ow < sh.OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t best_i = -1;
        for (int64_t kh = 0; kh < k[0]; ++kh) {
          const int64_t ih = oh * s[0] - p[0] + kh * d[0];
          if (ih < 0 || ih >= sh.H) continue;
          for (int64_t kw = 0; kw < k[1]; ++kw) {
            const int64_t iw = ow * s[1] - p[1] + kw * d[1];
            if (iw < 0 || iw >= sh.W) continue;
            double v = load_double(in->const_data_ptr(), in->scalar_type(), plane_offset(*in, sh.lead, pl, ih, iw));
            if (best_i < 0 || v > best || std::isnan(v)) {
              best = v;
              best_i = ih * sh.W + iw;
              if (std::isnan(v)) break;
            }
          }
        }
        store_double(out->mutable_data_ptr(), out->scalar_type(), plane_offset(*out, sh.lead, pl, oh, ow), best);
        store_int(indices->mutable_data_ptr(), indices->scalar_type(), plane_offset(*indices, sh.lead, pl, oh, ow),
                  best_i);
      }
    }
  }
}

// avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False,
//     bool count_include_pad=True, int? divisor_override=None, *, Tensor(a!) out)
ETKIT_KERNEL(avg_pool2d_out, Tensor* in, Span<const int64_t> k_l, Span<const int64_t> s_l, Span<const int64_t> p_l,
             bool ceil_mode, bool include_pad, OptionalInt divisor_override, Tensor* out) {
  const int64_t divisor = divisor_override.has_value ? divisor_override.value : 0;
  int64_t k[2], s[2], p[2], d[2];
  Pool2dShape sh;
  if (!pool_setup(ctx, name, *in, *out, k_l, s_l, p_l, {}, ceil_mode, k, s, p, d, &sh, nullptr)) return;
  for (int64_t pl = 0; pl < sh.batch_planes; ++pl) {
    for (int64_t oh = 0; oh < sh.OH; ++oh) {
      for (int64_t ow = 0; ow < sh.OW; ++ow) {
        int64_t h0 = oh * s[0] - p[0], w0 = ow * s[1] - p[1];
        int64_t h1 = std::min(h0 + k[0], sh.H + p[0]), w1 = std::min(w0 + k[1], sh.W + p[1]);
        const int64_t pool_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, sh.H);
        w1 = std::min(w1, sh.W);
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) {
            sum += load_double(in->const_data_ptr(), in->scalar_type(), plane_offset(*in, sh.lead, pl, ih, iw));
          }
        }
        const int64_t div = divisor != 0 ? divisor : (include_pad ? pool_size : (h1 - h0) * (w1 - w0));
        store_double(out->mutable_data_ptr(), out->scalar_type(), plane_offset(*out, sh.lead, pl, oh, ow),
                     div == 0 ? 0 : sum / double(div));
      }
    }
  }
}

// _adaptive_avg_pool2d.out(Tensor self, SymInt[2] output_size, *, Tensor(a!) out)
ETKIT_KERNEL(adaptive_avg_pool2d_out, Tensor* in, Span<const int64_t> os_l, Tensor* out) {
  if ((in->dim() != 3 && in->dim() != 4) || os_l.size() != 2) {
    fail(ctx, Error::InvalidArgument, "%s: input must be 3-D or 4-D and output_size 2 values", name);
    return;
  }
  const size_t lead = in->dim() - 2;
  const int64_t H = in->size(lead), W = in->size(lead + 1), OH = os_l[0], OW = os_l[1];
  if (OH <= 0 || OW <= 0 || OH > (int64_t(1) << 20) || OW > (int64_t(1) << 20)) {
    fail(ctx, Error::InvalidArgument, "%s: output_size [%lld, %lld] is out of range", name, (long long)OH,
         (long long)OW);
    return;
  }
  SizesType os[4];
  int64_t planes = 1;
  for (size_t i = 0; i < lead; ++i) {
    os[i] = in->size(i);
    planes *= in->size(i);
  }
  os[lead] = SizesType(OH);
  os[lead + 1] = SizesType(OW);
  if (!resize_out(ctx, name, *out, os, in->dim())) return;
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) {
            sum += load_double(in->const_data_ptr(), in->scalar_type(), plane_offset(*in, lead, pl, ih, iw));
          }
        }
        store_double(out->mutable_data_ptr(), out->scalar_type(), plane_offset(*out, lead, pl, oh, ow),
                     sum / double((h1 - h0) * (w1 - w0)));
      }
    }
  }
}

}  // namespace etkit::portable
