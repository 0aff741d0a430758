// Less common kernels: native_group_norm, upsample_nearest2d / upsample_bilinear2d (vec overloads),
// var.correction, max/min over all elements, flip. Inputs addressed through strides; outputs written
// in logical order (contiguous outputs).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {
constexpr size_t kMaxDim = runtime::kTensorDimensionLimit;

bool require_contiguous(KernelRuntimeContext& ctx, const char* name, const Tensor& t, const char* arg) {
  if (!t.is_contiguous_dim_order()) {
    return fail(ctx, Error::NotSupported, "%s: argument '%s' must be contiguous for the portable kernel", name, arg);
  }
  return true;
}
}  // namespace

// native_group_norm.out(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group,
//                       float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)
ETKIT_KERNEL(native_group_norm_out, Tensor* in, Tensor* w, Tensor* b, int64_t N, int64_t C, int64_t HxW, int64_t group,
             double eps, Tensor* out, Tensor* mean, Tensor* rstd) {
  if (!check_floating(ctx, name, *in, "input") || !require_contiguous(ctx, name, *in, "input")) return;
  // N, C, HxW and group are program Ints: bounded before their product is compared with the input
  if (!int_in_range(ctx, name, N, 0, kMaxSize, "N") || !int_in_range(ctx, name, C, 0, kMaxSize, "C") ||
      !int_in_range(ctx, name, HxW, 0, kMaxSize, "HxW") || !int_in_range(ctx, name, group, 1, kMaxSize, "group"))
    return;
  if ( C % group != 0 || int64_t(in->numel()) != N * C * HxW || (w && int64_t(w->numel()) < C) ||
      (b && int64_t(b->numel()) < C)) {
    fail(ctx, Error::InvalidArgument, "%s: N=%lld C=%lld HxW=%lld group=%lld do not match the input", name,
         (long long)N, (long long)C, (long long)HxW, (long long)group);
    return;
  }
  if (!resize_out(ctx, name, *out, in->sizes().data(), in->dim()) || !require_contiguous(ctx, name, *out, "out0"))
    return;
  SizesType stat[2] = {SizesType(N), SizesType(group)};
  const bool stats = mean->numel() > 0 || rstd->numel() > 0;
  if (stats && (!resize_out(ctx, name, *mean, stat, 2) || !resize_out(ctx, name, *rstd, stat, 2))) return;
  const int64_t cpg = C / group, span = cpg * HxW;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < group; ++g) {
      const size_t base = size_t((n * C + g * cpg) * HxW);
      double sum = 0, sq = 0;
      for (int64_t k = 0; k < span; ++k) sum += load_double(in->const_data_ptr(), in->scalar_type(), base + size_t(k));
      const double mu = span ? sum / double(span) : 0;
      for (int64_t k = 0; k < span; ++k) {
        double c = load_double(in->const_data_ptr(), in->scalar_type(), base + size_t(k)) - mu;
        sq += c * c;
      }
      const double inv = 1.0 / std::sqrt((span ? sq / double(span) : 0) + eps);
      for (int64_t k = 0; k < span; ++k) {
        const int64_t c = g * cpg + k / HxW;
        double v = (load_double(in->const_data_ptr(), in->scalar_type(), base + size_t(k)) - mu) * inv;
        if (w) v *= load_double(w->const_data_ptr(), w->scalar_type(), size_t(c));
        if (b) v += load_double(b->const_data_ptr(), b->scalar_type(), size_t(c));
        store_double(out->mutable_data_ptr(), out->scalar_type(), base + size_t(k), v);
      }
      if (stats) {
        store_double(mean->mutable_data_ptr(), mean->scalar_type(), size_t(n * group + g), mu);
        store_double(rstd->mutable_data_ptr(), rstd->scalar_type(), size_t(n * group + g), inv);
      }
    }
  }
}

namespace {
/// Output size and source scale (input/output) for one spatial dim of an upsample op.
bool upsample_geometry(KernelRuntimeContext& ctx, const char* name, const Tensor& in, IntList output_size,
                       const EValue& scale_factors, SizesType* os, double* scale) {
  const Span<const int64_t> sizes = output_size.list;
  const bool sizes_none = output_size.is_none;
  const size_t lead = in.dim() - 2;
  if (!sizes_none && sizes.size() == 2) {
    for (int k = 0; k < 2; ++k) {
      if (sizes[k] <= 0 || sizes[k] > (int64_t(1) << 20)) return fail(ctx, Error::InvalidArgument, "%s: bad output_size", name);
      os[k] = SizesType(sizes[k]);
      scale[k] = double(in.size(lead + k)) / double(os[k]);
    }
    return true;
  }
  if (!scale_factors.is_double_list() || scale_factors.to_double_list().size() != 2) {
    return fail(ctx, Error::InvalidArgument, "%s: needs output_size or two scale_factors", name);
  }
  Span<const double> f = scale_factors.to_double_list();
  for (int k = 0; k < 2; ++k) {
    double o = std::floor(double(in.size(lead + k)) * f[k]);
    if (!(o >= 1 && o <= double(1 << 20))) return fail(ctx, Error::InvalidArgument, "%s: bad scale_factors", name);
    os[k] = SizesType(o);
    scale[k] = 1.0 / f[k];  // PyTorch uses the given scale when scale_factors are passed
  }
  return true;
}

bool upsample_setup(KernelRuntimeContext& ctx, const char* name, const Tensor& in, IntList output_size,
                    const EValue& scale_factors, Tensor& out, SizesType* os, double* scale) {
  if (in.dim() != 4) return fail(ctx, Error::InvalidArgument, "%s: input must be 4-D, got %zu-D", name, in.dim());
  if (in.size(2) == 0 || in.size(3) == 0) {  // as torch: there is no source pixel to sample
    return fail(ctx, Error::InvalidArgument, "%s: input spatial sizes must be greater than 0, got [%d, %d]", name,
                int(in.size(2)), int(in.size(3)));
  }
  if (!upsample_geometry(ctx, name, in, output_size, scale_factors, os, scale)) return false;
  SizesType s[4] = {in.size(0), in.size(1), os[0], os[1]};
  return resize_out(ctx, name, out, s, 4);
}
}  // namespace

// upsample_nearest2d.vec_out(Tensor input, SymInt[]? output_size, float[]? scale_factors, *, Tensor(a!) out)
ETKIT_KERNEL(upsample_nearest2d_vec_out, Tensor* in, IntList output_size, EValue* scale_factors, Tensor* out) {
  SizesType os[2];
  double scale[2];
  if (!upsample_setup(ctx, name, *in, output_size, *scale_factors, *out, os, scale)) return;
  int64_t idx[4] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t src[4] = {idx[0], idx[1], 0, 0};
    for (int k = 0; k < 2; ++k) {
      int64_t s = int64_t(std::floor(double(idx[2 + k]) * scale[k]));
      src[2 + k] = std::min<int64_t>(s, in->size(2 + size_t(k)) - 1);
    }
    store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, idx),
                 load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, src)));
    next_index(idx, out->sizes().data(), 4);
  }
}

namespace {
/// Two-tap interpolation of one output index along a dim, in torch's fixed-point form for uint8.
struct Tap2 {
  int64_t first = 0, count = 0;
  int32_t w[2] = {0, 0};
};

/// Weights of every output index along a dim of `in_size` -> `out_size`, as int16-range integers with
/// `*precision` fractional bits (torch's uint8 bilinear: weights in double, normalised, then scaled so
/// the largest fits in 15 bits).
void uint8_bilinear_taps(int64_t in_size, int64_t out_size, double scale, bool align, Tap2* taps, int* precision) {
  const double delta = align ? 0.5 : 0.0, support = 1.0;
  double wd[2 * 4096];  // out_size is at most 4096 here (checked by the caller)
  double wmax = 0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (double(i) + 0.5 - delta);
    int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5 + delta), 0);
    int64_t xsize = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5 + delta), in_size) - xmin;
    xsize = std::min<int64_t>(std::max<int64_t>(xsize, 0), 2);
    double total = 0;
    for (int64_t j = 0; j < 2; ++j) {
      double x = std::fabs(double(j + xmin) - center + 0.5 - delta);
      wd[2 * i + j] = j < xsize && x < 1.0 ? 1.0 - x : 0.0;
      total += wd[2 * i + j];
    }
    for (int64_t j = 0; j < 2; ++j) {
      if (total != 0) wd[2 * i + j] /= total;
      wmax = std::max(wmax, wd[2 * i + j]);
    }
    taps[i].first = xmin;
    taps[i].count = xsize;
  }
  int prec = 0;
  for (; prec < 22; ++prec) {
    if (static_cast<int>(0.5 + wmax * double(1 << (prec + 1))) >= (1 << 15)) break;
  }
  for (int64_t i = 0; i < out_size; ++i)
    for (int j = 0; j < 2; ++j) {
      const double v = wd[2 * i + j] * double(1 << prec);
      taps[i].w[j] = static_cast<int32_t>(v < 0 ? -0.5 + v : 0.5 + v);
    }
  *precision = prec;
}

inline uint8_t fixed_point(int64_t acc, int precision) {
  acc = precision > 0 ? (acc + (int64_t(1) << (precision - 1))) >> precision : acc;
  return static_cast<uint8_t>(std::min<int64_t>(std::max<int64_t>(acc, 0), 255));
}

/// uint8 bilinear as torch computes it (separable: rows first, rounded to uint8, then columns), so
/// results are bit-identical. Needs N*C*H*W_out bytes of scratch; returns false when there is none.
bool bilinear_uint8(KernelRuntimeContext& ctx, const Tensor& in, Tensor& out, bool align, const double* scale) {
  const int64_t N = in.size(0), C = in.size(1), H = in.size(2), W = in.size(3), OH = out.size(2), OW = out.size(3);
  if (OH > 4096 || OW > 4096 || !in.is_contiguous_dim_order() || !out.is_contiguous_dim_order()) return false;
  auto dim_scale = [&](int k, int64_t insz, int64_t outsz) {
    if (align) return outsz > 1 ? double(insz - 1) / double(outsz - 1) : 0.0;
    return scale[k];
  };
  uint8_t* tmp = static_cast<uint8_t*>(ctx.allocate_temp(size_t(N * C * H * OW)));
  if (tmp == nullptr) return false;
  static ETKIT_THREAD_LOCAL Tap2 htaps[4096], wtaps[4096];
  int hprec = 0, wprec = 0;
  const uint8_t* x = in.const_data_ptr<uint8_t>();
  uint8_t* y = out.mutable_data_ptr<uint8_t>();
  if (OW != W) uint8_bilinear_taps(W, OW, dim_scale(1, W, OW), align, wtaps, &wprec);
  if (OH != H) uint8_bilinear_taps(H, OH, dim_scale(0, H, OH), align, htaps, &hprec);
  for (int64_t r = 0; r < N * C * H; ++r)  // horizontal pass
    for (int64_t j = 0; j < OW; ++j) {
      if (OW == W) { tmp[r * OW + j] = x[r * W + j]; continue; }
      int64_t acc = 0;
      for (int64_t t = 0; t < wtaps[j].count; ++t) acc += int64_t(wtaps[j].w[t]) * x[r * W + wtaps[j].first + t];
      tmp[r * OW + j] = fixed_point(acc, wprec);
    }
  for (int64_t p = 0; p < N * C; ++p)  // vertical pass
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        if (OH == H) { y[(p * OH + i) * OW + j] = tmp[(p * H + i) * OW + j]; continue; }
        int64_t acc = 0;
        for (int64_t t = 0; t < htaps[i].count; ++t)
          acc += int64_t(htaps[i].w[t]) * tmp[(p * H + htaps[i].first + t) * OW + j];
        y[(p * OH + i) * OW + j] = fixed_point(acc, hprec);
      }
  return true;
}
}  // namespace

// upsample_bilinear2d.vec_out(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors,
//                             *, Tensor(a!) out)
ETKIT_KERNEL(upsample_bilinear2d_vec_out, Tensor* in, IntList output_size, bool align, EValue* scale_factors,
             Tensor* out) {
  SizesType os[2];
  double scale[2];
  if (!upsample_setup(ctx, name, *in, output_size, *scale_factors, *out, os, scale)) return;
  if (in->scalar_type() == ScalarType::Byte && out->scalar_type() == ScalarType::Byte &&
      bilinear_uint8(ctx, *in, *out, align, scale))
    return;
  const int64_t H = in->size(2), W = in->size(3);
  int64_t idx[4] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    double pos[2];
    for (int k = 0; k < 2; ++k) {
      const int64_t insz = k == 0 ? H : W;
      if (align) {
        pos[k] = os[k] > 1 ? double(idx[2 + k]) * double(insz - 1) / double(os[k] - 1) : 0.0;
      } else {
        pos[k] = std::max(0.0, (double(idx[2 + k]) + 0.5) * scale[k] - 0.5);
      }
    }
    const int64_t h0 = std::min<int64_t>(int64_t(pos[0]), H - 1), w0 = std::min<int64_t>(int64_t(pos[1]), W - 1);
    const int64_t h1 = std::min<int64_t>(h0 + 1, H - 1), w1 = std::min<int64_t>(w0 + 1, W - 1);
    const double lh = pos[0] - double(h0), lw = pos[1] - double(w0);
    auto at = [&](int64_t h, int64_t w) {
      int64_t s[4] = {idx[0], idx[1], h, w};
      return load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, s));
    };
    double v = (1 - lh) * ((1 - lw) * at(h0, w0) + lw * at(h0, w1)) + lh * ((1 - lw) * at(h1, w0) + lw * at(h1, w1));
    if (!is_floating(out->scalar_type())) v = std::nearbyint(v);  // integer images round, as torch does
    store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, idx), v);
    next_index(idx, out->sizes().data(), 4);
  }
}

namespace {
/// var (and, with a `mean` output, var_mean) on unpacked arguments; correction None means 1.
void variance(KernelRuntimeContext& ctx, const char* name, Tensor* in, IntList dim, OptionalScalar correction_arg,
              bool keepdim, Tensor* out, Tensor* mean) {
  const Span<const int64_t> dims = dim.list;
  const bool none = dim.is_none;
  const double correction = correction_arg.has_value ? correction_arg.value : 1;
  if (!check_floating(ctx, name, *in, "self") ||
      !require_contiguous(ctx, name, *out, "out") || (mean && !require_contiguous(ctx, name, *mean, "out1")))
    return;
  bool reduce[kMaxDim] = {false};
  const bool all = none || dims.empty();
  for (size_t d = 0; d < in->dim(); ++d) reduce[d] = all;
  for (int64_t dim : dims) {
    size_t nd;
    if (!normalize_dim(ctx, name, dim, in->dim(), &nd)) return;
    if (in->dim()) reduce[nd] = true;
  }
  SizesType os[kMaxDim];
  size_t od = 0;
  for (size_t d = 0; d < in->dim(); ++d) {
    if (!reduce[d]) os[od++] = in->size(d);
    else if (keepdim) os[od++] = 1;
  }
  if (!resize_out(ctx, name, *out, os, od) || (mean && !resize_out(ctx, name, *mean, os, od))) return;
  // Two passes over the input per output element, indexing the reduced dims with an odometer.
  SizesType kept_sizes[kMaxDim], red_sizes[kMaxDim];
  size_t kept[kMaxDim], red[kMaxDim], nk = 0, nr = 0;
  for (size_t d = 0; d < in->dim(); ++d) {
    if (reduce[d]) { red[nr] = d; red_sizes[nr++] = in->size(d); }
    else { kept[nk] = d; kept_sizes[nk++] = in->size(d); }
  }
  size_t n_red = 1;
  for (size_t j = 0; j < nr; ++j) n_red *= size_t(red_sizes[j]);
  int64_t kidx[kMaxDim] = {0};
  for (size_t o = 0; o < out->numel(); ++o) {
    int64_t full[kMaxDim] = {0};
    for (size_t j = 0; j < nk; ++j) full[kept[j]] = kidx[j];
    double sum = 0, sq = 0;
    for (int pass = 0; pass < 2; ++pass) {
      int64_t ridx[kMaxDim] = {0};
      const double mu = n_red ? sum / double(n_red) : 0;
      for (size_t r = 0; r < n_red; ++r) {
        for (size_t j = 0; j < nr; ++j) full[red[j]] = ridx[j];
        double v = load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, full));
        if (pass == 0) sum += v;
        else sq += (v - mu) * (v - mu);
        next_index(ridx, red_sizes, nr);
      }
    }
    const double denom = double(n_red) - correction;
    store_double(out->mutable_data_ptr(), out->scalar_type(), o, denom > 0 ? sq / denom : NAN);
    if (mean) store_double(mean->mutable_data_ptr(), mean->scalar_type(), o, n_red ? sum / double(n_red) : NAN);
    next_index(kidx, kept_sizes, nk);
  }
}
}  // namespace

// var.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False,
//                    Tensor(a!) out)
ETKIT_KERNEL(var_correction_out, Tensor* in, IntList dim, OptionalScalar correction, bool keepdim, Tensor* out) {
  variance(ctx, name, in, dim, correction, keepdim, out, nullptr);
}

// var_mean.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False,
//                         Tensor(a!) out0, Tensor(b!) out1): (variance, mean)
ETKIT_KERNEL_FROM(var_mean_correction_out, variance)

namespace {
/// (self, out) of max.unary_out / min.unary_out.
template <bool is_max>
void extreme_all(KernelRuntimeContext& ctx, const char* name, Tensor* in, Tensor* out) {
  if (!resize_out(ctx, name, *out, nullptr, 0)) return;
  if (in->numel() == 0) {
    fail(ctx, Error::InvalidArgument, "%s: input is empty", name);
    return;
  }
  int64_t idx[kMaxDim] = {0};
  double best = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < in->numel(); ++i) {
    double v = load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, idx));
    if (std::isnan(v) || (is_max ? v > best : v < best)) best = v;
    if (std::isnan(v)) break;
    next_index(idx, in->sizes().data(), in->dim());
  }
  store_double(out->mutable_data_ptr(), out->scalar_type(), 0, best);
}
}  // namespace

// max.unary_out(Tensor self, *, Tensor(a!) out) / min.unary_out
ETKIT_KERNEL_FROM(max_unary_out, extreme_all<true>)
ETKIT_KERNEL_FROM(min_unary_out, extreme_all<false>)

// flip.out(Tensor self, int[] dims, *, Tensor(a!) out)
ETKIT_KERNEL(flip_out, Tensor* in, Span<const int64_t> dims, Tensor* out) {
  if (!resize_out(ctx, name, *out, in->sizes().data(), in->dim())) return;
  bool flip[kMaxDim] = {false};
  for (int64_t d : dims) {
    size_t nd;
    if (!normalize_dim(ctx, name, d, in->dim(), &nd)) return;
    if (in->dim()) flip[nd] = true;
  }
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t src[kMaxDim];
    for (size_t d = 0; d < in->dim(); ++d) src[d] = flip[d] ? in->size(d) - 1 - idx[d] : idx[d];
    store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, idx),
                 load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, src)));
    next_index(idx, in->sizes().data(), in->dim());
  }
}

}  // namespace etkit::portable
