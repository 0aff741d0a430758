// Less common Core ATen ops: _embedding_bag, _cdist_forward, _pdist_forward, col2im,
// grid_sampler_2d, native_dropout, rand, randn, randperm, nonzero.
//
// Random ops draw from one generator per thread (std::mt19937_64, fixed seed), so a program's random
// values are reproducible run to run but are not torch's values (torch's generator is not part of
// the format).
#include <cmath>
#include <random>

#include "data_movement.h"
#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

std::mt19937_64& generator() {
  static ETKIT_THREAD_LOCAL std::mt19937_64 rng(0x5eed);
  return rng;
}

double p_distance(const Tensor& a, size_t a_off, int64_t a_stride, const Tensor& b, size_t b_off, int64_t b_stride,
                  int64_t m, double p) {
  double acc = 0;
  for (int64_t k = 0; k < m; ++k) {
    const double d = std::fabs(load_double(a.const_data_ptr(), a.scalar_type(), a_off + k * a_stride) -
                               load_double(b.const_data_ptr(), b.scalar_type(), b_off + k * b_stride));
    if (p == 0) acc += d != 0;
    else if (std::isinf(p)) acc = std::max(acc, d);
    else if (p == 1) acc += d;
    else if (p == 2) acc += d * d;
    else acc += std::pow(d, p);
  }
  if (p == 0 || p == 1 || std::isinf(p)) return acc;
  return p == 2 ? std::sqrt(acc) : std::pow(acc, 1.0 / p);
}

}  // namespace

// _embedding_bag.out(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0,
//     bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1, *,
//     Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2, Tensor(d!) out3)
// out0: [bags, D] sums (mode 0), means (1) or maxima (2); out1 offset2bag [N]; out2 bag sizes [bags];
// out3 argmax rows [bags, D] for mode 2, else bag sizes again (as torch's CPU kernel returns them).
ETKIT_KERNEL(embedding_bag_out, Tensor* weight, Tensor* indices, Tensor* offsets, int64_t mode, Tensor* psw,
             bool include_last, int64_t padding_idx, Tensor* out0, Tensor* out1, Tensor* out2, Tensor* out3) {
  if (!check_index_dtype(ctx, name, *indices, "indices") || !check_index_dtype(ctx, name, *offsets, "offsets")) return;
  if (weight->dim() != 2 || indices->dim() != 1 || offsets->dim() != 1 || mode < 0 || mode > 2) {
    fail(ctx, Error::InvalidArgument, "%s: expects 2-D weight, 1-D indices and offsets, mode 0-2", name);
    return;
  }
  if (psw && mode != 0) {
    fail(ctx, Error::InvalidArgument, "%s: per_sample_weights are only supported with mode='sum'", name);
    return;
  }
  const int64_t n = indices->size(0), rows = weight->size(0), dcols = weight->size(1);
  const int64_t bags = offsets->size(0) - (include_last ? 1 : 0);
  const SizesType s0[2] = {static_cast<SizesType>(bags), static_cast<SizesType>(dcols)};
  const SizesType s1[1] = {static_cast<SizesType>(n)};
  const SizesType sb[1] = {static_cast<SizesType>(bags)};
  // torch leaves offset2bag (out1) and max_indices (out3) empty in some modes; the program plans them
  // with the shapes torch gives them, so only outputs planned non-empty are written.
  const bool want1 = out1->numel() != 0, want3 = out3->numel() != 0;
  if (!resize_out(ctx, name, *out0, s0, 2) || (want1 && !resize_out(ctx, name, *out1, s1, 1)) ||
      !resize_out(ctx, name, *out2, sb, 1) ||
      (want3 && !(mode == 2 ? resize_out(ctx, name, *out3, s0, 2) : resize_out(ctx, name, *out3, sb, 1))))
    return;
  for (int64_t bag = 0; bag < bags; ++bag) {
    const int64_t start = load_int(offsets->const_data_ptr(), offsets->scalar_type(), bag);
    const int64_t end = bag + 1 < offsets->size(0) ? load_int(offsets->const_data_ptr(), offsets->scalar_type(), bag + 1) : n;
    if (start < 0 || end > n || start > end) {
      fail(ctx, Error::InvalidArgument, "%s: offsets are not increasing within [0, %lld]", name, (long long)n);
      return;
    }
    int64_t count = 0;
    for (int64_t d = 0; d < dcols; ++d) {
      double acc = mode == 2 ? -INFINITY : 0.0;
      int64_t arg = -1;
      count = 0;
      for (int64_t i = start; i < end; ++i) {
        const int64_t row = load_int(indices->const_data_ptr(), indices->scalar_type(), i);
        if (row < 0 || row >= rows) {
          fail(ctx, Error::InvalidArgument, "%s: index %lld is out of range for %lld rows", name, (long long)row,
               (long long)rows);
          return;
        }
        if (d == 0 && want1) store_int(out1->mutable_data_ptr(), out1->scalar_type(), i, bag);
        if (row == padding_idx) continue;
        ++count;
        double v = load_double(weight->const_data_ptr(), weight->scalar_type(), row * weight->stride(0) + d * weight->stride(1));
        if (psw) v *= load_double(psw->const_data_ptr(), psw->scalar_type(), i);
        if (mode == 2) {
          if (arg < 0 || v > acc) { acc = v; arg = row; }
        } else {
          acc += v;
        }
      }
      if (mode == 1) acc = count ? acc / double(count) : 0.0;
      if (mode == 2 && count == 0) acc = 0.0;
      store_double(out0->mutable_data_ptr(), out0->scalar_type(), bag * dcols + d, acc);
      if (mode == 2 && want3) store_int(out3->mutable_data_ptr(), out3->scalar_type(), bag * dcols + d, arg);
    }
    if (dcols == 0 && want1) {
      for (int64_t i = start; i < end; ++i) store_int(out1->mutable_data_ptr(), out1->scalar_type(), i, bag);
    }
    store_int(out2->mutable_data_ptr(), out2->scalar_type(), bag, count);
    if (mode != 2 && want3) store_int(out3->mutable_data_ptr(), out3->scalar_type(), bag, count);
  }
}

// _cdist_forward.out(Tensor x1, Tensor x2, float p, int? compute_mode, *, Tensor(a!) out)
// x1 [..., P, M], x2 [..., R, M] (same leading dims) -> [..., P, R] p-norm distances.
ETKIT_KERNEL(cdist_forward_out, Tensor* x1, Tensor* x2, double p, Tensor* out) {
  if (!check_floating(ctx, name, *x1, "x1")) return;
  const size_t r = x1->dim();
  bool ok = r >= 2 && x2->dim() == r && x1->size(r - 1) == x2->size(r - 1) && p >= 0;
  for (size_t d = 0; ok && d + 2 < r; ++d) ok = x1->size(d) == x2->size(d);
  if (!ok) {
    fail(ctx, Error::InvalidArgument, "%s: x1 [..., P, M] and x2 [..., R, M] need equal ranks, leading dims and M, "
         "and p >= 0", name);
    return;
  }
  SizesType shape[kMaxDim];
  size_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d) batch *= static_cast<size_t>(shape[d] = x1->size(d));
  const int64_t P = x1->size(r - 2), R = x2->size(r - 2), M = x1->size(r - 1);
  shape[r - 2] = static_cast<SizesType>(P);
  shape[r - 1] = static_cast<SizesType>(R);
  if (!resize_out(ctx, name, *out, shape, r) || !x1->is_contiguous_dim_order() || !x2->is_contiguous_dim_order()) {
    if (out->dim() == r) fail(ctx, Error::NotSupported, "%s: inputs must be contiguous", name);
    return;
  }
  for (size_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < P; ++i)
      for (int64_t j = 0; j < R; ++j)
        store_double(out->mutable_data_ptr(), out->scalar_type(), (b * P + i) * R + j,
                     p_distance(*x1, (b * P + i) * M, 1, *x2, (b * R + j) * M, 1, M, p));
}

// _pdist_forward.out(Tensor self, float p=2., *, Tensor(a!) out): self [N, M] -> [N * (N - 1) / 2],
// the distances of every pair i < j in row-major order.
ETKIT_KERNEL(pdist_forward_out, Tensor* self, double p, Tensor* out) {
  if (!check_floating(ctx, name, *self, "self")) return;
  if (self->dim() != 2 || p < 0 || !self->is_contiguous_dim_order()) {
    fail(ctx, Error::InvalidArgument, "%s: expects a contiguous 2-D input and p >= 0", name);
    return;
  }
  const int64_t n = self->size(0), m = self->size(1);
  if (!int_in_range(ctx, name, n * (n - 1) / 2, 0, kMaxSize, "number of row pairs")) return;
  const SizesType s[1] = {static_cast<SizesType>(n * (n - 1) / 2)};
  if (!resize_out(ctx, name, *out, s, 1)) return;
  size_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j)
      store_double(out->mutable_data_ptr(), out->scalar_type(), k++, p_distance(*self, i * m, 1, *self, j * m, 1, m, p));
}

// col2im.out(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding,
//            int[2] stride, *, Tensor(a!) out): self [N?, C*kh*kw, L] -> [N?, C, H, W], overlapping
// patches summed (torch.nn.functional.fold).
ETKIT_KERNEL(col2im_out, Tensor* self, Span<const int64_t> osz, Span<const int64_t> k, Span<const int64_t> dil,
             Span<const int64_t> pad, Span<const int64_t> st, Tensor* out) {
  if (osz.size() != 2 || k.size() != 2 || dil.size() != 2 || pad.size() != 2 || st.size() != 2 ||
      (self->dim() != 2 && self->dim() != 3) || !self->is_contiguous_dim_order()) {
    fail(ctx, Error::InvalidArgument, "%s: expects a contiguous 2-D or 3-D input and 2-value size lists", name);
    return;
  }
  for (size_t d = 0; d < 2; ++d) {
    if (!int_in_range(ctx, name, osz[d], 0, kMaxSize, "output_size") ||
        !int_in_range(ctx, name, k[d], 1, kMaxWindow, "kernel_size") ||
        !int_in_range(ctx, name, dil[d], 1, kMaxWindow, "dilation") ||
        !int_in_range(ctx, name, pad[d], 0, kMaxWindow, "padding") ||
        !int_in_range(ctx, name, st[d], 1, kMaxWindow, "stride"))
      return;
  }
  const bool batched = self->dim() == 3;
  const int64_t N = batched ? self->size(0) : 1, CK = self->size(batched ? 1 : 0), L = self->size(batched ? 2 : 1);
  const int64_t H = osz[0], W = osz[1], kk = k[0] * k[1];
  const int64_t bh = (H + 2 * pad[0] - dil[0] * (k[0] - 1) - 1) / st[0] + 1;
  const int64_t bw = (W + 2 * pad[1] - dil[1] * (k[1] - 1) - 1) / st[1] + 1;
  if (bh <= 0 || bw <= 0 || CK % kk != 0 || bh * bw != L) {
    fail(ctx, Error::InvalidArgument, "%s: input of %lld columns x %lld blocks does not match the kernel and output size",
         name, (long long)CK, (long long)L);
    return;
  }
  const int64_t C = CK / kk;
  SizesType shape[4];
  size_t r = 0;
  if (batched) shape[r++] = static_cast<SizesType>(N);
  shape[r++] = static_cast<SizesType>(C);
  shape[r++] = static_cast<SizesType>(H);
  shape[r++] = static_cast<SizesType>(W);
  if (!resize_out(ctx, name, *out, shape, r)) return;
  for (size_t i = 0; i < out->numel(); ++i) store_double(out->mutable_data_ptr(), out->scalar_type(), i, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t row = 0; row < CK; ++row) {
      const int64_t c = row / kk, ki = (row % kk) / k[1], kj = row % k[1];
      for (int64_t l = 0; l < L; ++l) {
        const int64_t y = (l / bw) * st[0] - pad[0] + ki * dil[0];
        const int64_t x = (l % bw) * st[1] - pad[1] + kj * dil[1];
        if (y < 0 || y >= H || x < 0 || x >= W) continue;
        const size_t o = static_cast<size_t>(((n * C + c) * H + y) * W + x);
        const double v = load_double(self->const_data_ptr(), self->scalar_type(), (n * CK + row) * L + l);
        store_double(out->mutable_data_ptr(), out->scalar_type(), o,
                     load_double(out->const_data_ptr(), out->scalar_type(), o) + v);
      }
    }
}

namespace {
/// Maps a normalised grid coordinate to a pixel coordinate, applying the padding mode (torch's
/// grid_sampler_compute_source_index).
double grid_source(double coord, int64_t size, int64_t padding_mode, bool align_corners) {
  double x = align_corners ? (coord + 1) / 2 * (size - 1) : ((coord + 1) * size - 1) / 2;
  if (padding_mode == 1) {  // border
    x = std::min(std::max(x, 0.0), double(size - 1));
  } else if (padding_mode == 2) {  // reflection
    const double lo = align_corners ? 0.0 : -0.5, hi = align_corners ? double(size - 1) : size - 0.5;
    const double span = hi - lo;
    if (span <= 0) return 0;
    double t = std::fabs(x - lo);
    const double flips = std::floor(t / span);
    const double extra = std::fmod(t, span);
    x = std::fmod(flips, 2.0) == 0 ? lo + extra : hi - extra;
    x = std::min(std::max(x, 0.0), double(size - 1));
  }
  // A coordinate far outside (or NaN, from a crafted grid) samples only zero padding, as at -2: clamping it
  // keeps the integer conversion below defined without changing any result.
  return x >= -2.0 && x <= double(size) + 1.0 ? x : (x > 0 ? double(size) + 1.0 : -2.0);
}
}  // namespace

// grid_sampler_2d.out(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners, *,
//                     Tensor(a!) out): input [N, C, H, W], grid [N, Ho, Wo, 2] (x, y in [-1, 1]) -> [N, C, Ho, Wo].
// interpolation 0 = bilinear, 1 = nearest (bicubic, 2, is refused); padding 0 = zeros, 1 = border, 2 = reflection.
ETKIT_KERNEL(grid_sampler_2d_out, Tensor* in, Tensor* grid, int64_t interp, int64_t padding, bool align, Tensor* out) {
  if (!check_floating(ctx, name, *in, "input")) return;
  if (interp != 0 && interp != 1) {
    fail(ctx, Error::NotSupported, "%s: interpolation_mode %lld (bicubic) has no portable kernel; use bilinear or "
         "nearest", name, (long long)interp);
    return;
  }
  if (in->dim() != 4 || grid->dim() != 4 || grid->size(3) != 2 || grid->size(0) != in->size(0) || padding < 0 ||
      padding > 2) {
    fail(ctx, Error::InvalidArgument, "%s: expects input [N, C, H, W] and grid [N, Ho, Wo, 2]", name);
    return;
  }
  const int64_t N = in->size(0), C = in->size(1), H = in->size(2), W = in->size(3), Ho = grid->size(1), Wo = grid->size(2);
  const SizesType shape[4] = {static_cast<SizesType>(N), static_cast<SizesType>(C), static_cast<SizesType>(Ho),
                              static_cast<SizesType>(Wo)};
  if (!resize_out(ctx, name, *out, shape, 4)) return;
  auto pixel = [&](int64_t n, int64_t c, int64_t y, int64_t x) -> double {
    if (y < 0 || y >= H || x < 0 || x >= W) return 0.0;
    int64_t idx[4] = {n, c, y, x};
    return load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, idx));
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        int64_t gi[4] = {n, i, j, 0};
        const double gx = load_double(grid->const_data_ptr(), grid->scalar_type(), offset_of(*grid, gi));
        gi[3] = 1;
        const double gy = load_double(grid->const_data_ptr(), grid->scalar_type(), offset_of(*grid, gi));
        const double x = grid_source(gx, W, padding, align), y = grid_source(gy, H, padding, align);
        for (int64_t c = 0; c < C; ++c) {
          double v;
          if (interp == 1) {
            v = pixel(n, c, static_cast<int64_t>(std::nearbyint(y)), static_cast<int64_t>(std::nearbyint(x)));
          } else {
            const int64_t x0 = static_cast<int64_t>(std::floor(x)), y0 = static_cast<int64_t>(std::floor(y));
            const double fx = x - x0, fy = y - y0;
            v = pixel(n, c, y0, x0) * (1 - fx) * (1 - fy) + pixel(n, c, y0, x0 + 1) * fx * (1 - fy) +
                pixel(n, c, y0 + 1, x0) * (1 - fx) * fy + pixel(n, c, y0 + 1, x0 + 1) * fx * fy;
          }
          int64_t oi[4] = {n, c, i, j};
          store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, oi), v);
        }
      }
}

// native_dropout.out(Tensor input, float p, bool? train, *, Tensor(a!) out0, Tensor(b!) out1)
// Inference (train False or None): out0 = input, mask all true. Training: each element kept with
// probability 1 - p and scaled by 1 / (1 - p).
ETKIT_KERNEL(native_dropout_out, Tensor* in, double p, OptionalBool train_arg, Tensor* out, Tensor* mask) {
  const bool train = train_arg.has_value && train_arg.value;
  if (!resize_out(ctx, name, *out, in->sizes().data(), in->dim()) ||
      !resize_out(ctx, name, *mask, in->sizes().data(), in->dim()))
    return;
  if (p < 0 || p > 1) {
    fail(ctx, Error::InvalidArgument, "%s: p must be in [0, 1], got %g", name, p);
    return;
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < in->numel(); ++i, next_index(idx, in->sizes().data(), in->dim())) {
    const bool keep = !train || (p < 1 && u(generator()) >= p);
    const double scale = train ? (keep ? 1.0 / (1.0 - p) : 0.0) : 1.0;
    store_double(out->mutable_data_ptr(), out->scalar_type(), offset_of(*out, idx),
                 load_double(in->const_data_ptr(), in->scalar_type(), offset_of(*in, idx)) * scale);
    store_int(mask->mutable_data_ptr(), mask->scalar_type(), offset_of(*mask, idx), keep);
  }
}

namespace {
/// (size, out) of rand.out / randn.out.
template <bool normal>
bool random_fill(KernelRuntimeContext& ctx, const char* name, Span<const int64_t> size, Tensor* out) {
  if (!check_floating(ctx, name, *out, "out")) return false;
  SizesType s[kMaxDim];
  if (!shape_list(ctx, name, size, "size", s)) return false;
  if (!resize_out(ctx, name, *out, s, size.size())) return false;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> g(0.0, 1.0);
  for (size_t i = 0; i < out->numel(); ++i)
    store_double(out->mutable_data_ptr(), out->scalar_type(), i, normal ? g(generator()) : u(generator()));
  return true;
}
}  // namespace

// rand.out(SymInt[] size, *, Tensor(a!) out): uniform in [0, 1).
ETKIT_KERNEL_FROM(rand_out, random_fill<false>)

// randn.out(SymInt[] size, *, Tensor(a!) out): standard normal.
ETKIT_KERNEL_FROM(randn_out, random_fill<true>)

// randperm.out(SymInt n, *, Tensor(a!) out): a random permutation of 0..n-1 (Fisher-Yates).
ETKIT_KERNEL(randperm_out, int64_t n, Tensor* out) {
  if (!int_in_range(ctx, name, n, 0, kMaxSize, "n")) return;
  const SizesType s[1] = {static_cast<SizesType>(n)};
  if (!resize_out(ctx, name, *out, s, 1)) return;
  for (int64_t i = 0; i < n; ++i) store_int(out->mutable_data_ptr(), out->scalar_type(), i, i);
  for (int64_t i = n - 1; i > 0; --i) {
    std::uniform_int_distribution<int64_t> pick(0, i);
    const int64_t j = pick(generator());
    const int64_t a = load_int(out->const_data_ptr(), out->scalar_type(), i);
    store_int(out->mutable_data_ptr(), out->scalar_type(), i, load_int(out->const_data_ptr(), out->scalar_type(), j));
    store_int(out->mutable_data_ptr(), out->scalar_type(), j, a);
  }
}

// nonzero.out(Tensor self, *, Tensor(a!) out): [count, rank] Long indices of the non-zero elements in
// row-major order; out is resized within its planned (upper-bound) capacity.
ETKIT_KERNEL(nonzero_out, Tensor* self, Tensor* out) {
  size_t count = 0;
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < self->numel(); ++i, next_index(idx, self->sizes().data(), self->dim()))
    count += load_double(self->const_data_ptr(), self->scalar_type(), offset_of(*self, idx)) != 0;
  const SizesType s[2] = {static_cast<SizesType>(count), static_cast<SizesType>(self->dim())};
  if (!resize_out(ctx, name, *out, s, 2)) return;
  size_t k = 0;
  int64_t j[kMaxDim] = {0};
  for (size_t i = 0; i < self->numel(); ++i, next_index(j, self->sizes().data(), self->dim())) {
    if (load_double(self->const_data_ptr(), self->scalar_type(), offset_of(*self, j)) == 0) continue;
    for (size_t d = 0; d < self->dim(); ++d) {
      const size_t o = static_cast<size_t>(int64_t(k) * out->stride(0) + int64_t(d) * out->stride(1));
      store_int(out->mutable_data_ptr(), out->scalar_type(), o, j[d]);
    }
    ++k;
  }
}

}  // namespace etkit::portable
