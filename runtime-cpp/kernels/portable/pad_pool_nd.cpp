// Reflection/replication padding (1-3 trailing dims) and the pooling ops over 1 or 3 spatial dims
// (avg_pool1d, avg_pool3d, adaptive_avg_pool1d, _adaptive_avg_pool3d, max_pool3d_with_indices).
// The 2-d pools live in conv_pool.cpp; these are written once for any number of spatial dims.
// Output sizes and window rules follow PyTorch (ceil_mode drops a window that would start in the
// right padding; avg divides by divisor_override, else by the window including padding when
// count_include_pad, else by the valid elements).
#include <algorithm>
#include <cmath>
#include <limits>

#include "data_movement.h"
#include "kernel_binding.h"
#include "kernels.h"

namespace etkit::portable {
namespace {

enum class PadMode { Reflect, Replicate };

/// (self, padding, out) of the n-d reflection / replication pads.
template <size_t n, PadMode mode>
void pad_nd(KernelRuntimeContext& ctx, const char* name, Tensor* self, Span<const int64_t> pad, Tensor* out) {
  if (pad.size() != 2 * n || self->dim() < n || self->dim() > n + 2) {
    fail(ctx, Error::InvalidArgument, "%s: expects %zu padding values and a rank %zu-%zu input, got %zu and rank %zu",
         name, 2 * n, n + 1, n + 2, pad.size(), self->dim());
    return;
  }
  SizesType shape[kMaxDim];
  int64_t before[kMaxDim] = {0};
  for (size_t d = 0; d < self->dim(); ++d) shape[d] = self->size(d);
  for (size_t k = 0; k < n; ++k) {
    const size_t d = self->dim() - 1 - k;
    const int64_t l = pad[2 * k], r = pad[2 * k + 1], size = self->size(d);
    // negative padding crops (replication); bounded first so size + l + r cannot overflow
    if (!int_in_range(ctx, name, l, -kMaxSize, kMaxSize, "padding") ||
        !int_in_range(ctx, name, r, -kMaxSize, kMaxSize, "padding") ||
        !int_in_range(ctx, name, size + l + r, 0, kMaxSize, "padded size"))
      return;
    if (mode == PadMode::Reflect && (l >= size || r >= size || l < 0 || r < 0)) {
      fail(ctx, Error::InvalidArgument, "%s: padding (%lld, %lld) must be smaller than the input size %lld in dim %zu",
           name, (long long)l, (long long)r, (long long)size, d);
      return;
    }
    if (mode == PadMode::Replicate && size == 0) {
      fail(ctx, Error::InvalidArgument, "%s: cannot replicate an empty dim %zu", name, d);
      return;
    }
    before[d] = l;
    shape[d] = static_cast<SizesType>(size + l + r);
  }
  if (!resize_out(ctx, name, *out, shape, self->dim())) return;
  if (out->scalar_type() != self->scalar_type()) {
    fail(ctx, Error::InvalidArgument, "%s: out dtype differs from self", name);
    return;
  }
  int64_t idx[kMaxDim] = {0};
  for (size_t i = 0; i < out->numel(); ++i) {
    int64_t sidx[kMaxDim];
    for (size_t d = 0; d < self->dim(); ++d) {
      int64_t j = idx[d] - before[d];
      const int64_t size = self->size(d);
      if (mode == PadMode::Reflect) {
        if (j < 0) j = -j;
        if (j >= size) j = 2 * (size - 1) - j;
      } else {
        j = std::min(std::max<int64_t>(j, 0), size - 1);
      }
      sidx[d] = j;
    }
    copy_elem(*self, offset_of(*self, sidx), *out, offset_of(*out, idx));
    next_index(idx, shape, self->dim());
  }
}

/// Window geometry of a pool over `n` trailing spatial dims.
struct PoolGeometry {
  size_t n = 0;
  int64_t in[3], out[3], k[3], s[3], p[3], dil[3];
};

bool pool_output_sizes(KernelRuntimeContext& ctx, const char* name, PoolGeometry& g, bool ceil_mode) {
  for (size_t d = 0; d < g.n; ++d) {
    if (g.k[d] <= 0 || g.s[d] <= 0 || g.dil[d] <= 0 || g.p[d] < 0 || 2 * g.p[d] > g.k[d]) {
      return fail(ctx, Error::InvalidArgument,
                  "%s: kernel %lld, stride %lld, padding %lld, dilation %lld are invalid (padding must be at most "
                  "half the kernel)", name, (long long)g.k[d], (long long)g.s[d], (long long)g.p[d], (long long)g.dil[d]);
    }
    const int64_t span = g.in[d] + 2 * g.p[d] - g.dil[d] * (g.k[d] - 1) - 1;
    int64_t o = (ceil_mode ? (span + g.s[d] - 1) / g.s[d] : span / g.s[d]) + 1;
    if (ceil_mode && (o - 1) * g.s[d] >= g.in[d] + g.p[d]) --o;
    if (span < 0 || o <= 0) {
      return fail(ctx, Error::InvalidArgument, "%s: input size %lld is too small for the kernel in spatial dim %zu",
                  name, (long long)g.in[d], d);
    }
    g.out[d] = o;
  }
  return true;
}

/// Calls fn(batch_plane, out_spatial_index[], out_flat) for every output element.
template <typename Fn>
void for_each_pool_output(const PoolGeometry& g, size_t planes, Fn fn) {
  size_t spatial = 1;
  for (size_t d = 0; d < g.n; ++d) spatial *= static_cast<size_t>(g.out[d]);
  for (size_t pl = 0; pl < planes; ++pl) {
    int64_t o[3] = {0, 0, 0};
    for (size_t i = 0; i < spatial; ++i) {
      fn(pl, o, pl * spatial + i);
      for (size_t d = g.n; d-- > 0;) {
        if (++o[d] < g.out[d]) break;
        o[d] = 0;
      }
    }
  }
}

bool pool_setup(KernelRuntimeContext& ctx, const char* name, const Tensor& self, size_t n, PoolGeometry& g,
                size_t* planes) {
  if (self.dim() != n + 1 && self.dim() != n + 2) {
    return fail(ctx, Error::InvalidArgument, "%s: expects a rank %zu or %zu input, got rank %zu", name, n + 1, n + 2,
                self.dim());
  }
  if (!self.is_contiguous_dim_order()) {
    return fail(ctx, Error::NotSupported, "%s: the portable kernel needs a contiguous input", name);
  }
  g.n = n;
  *planes = 1;
  for (size_t d = 0; d + n < self.dim(); ++d) *planes *= static_cast<size_t>(self.size(d));
  for (size_t d = 0; d < n; ++d) {
    g.in[d] = self.size(self.dim() - n + d);
    if (g.in[d] == 0) {  // as torch: every window then holds at least one input element
      return fail(ctx, Error::InvalidArgument, "%s: spatial dim %zu of the input is empty", name, d);
    }
  }
  return true;
}

bool resize_pool_out(KernelRuntimeContext& ctx, const char* name, const Tensor& self, const PoolGeometry& g, Tensor& out) {
  SizesType shape[kMaxDim];
  for (size_t d = 0; d < self.dim(); ++d) shape[d] = self.size(d);
  for (size_t d = 0; d < g.n; ++d) shape[self.dim() - g.n + d] = static_cast<SizesType>(g.out[d]);
  if (!resize_out(ctx, name, out, shape, self.dim())) return false;
  if (!out.is_contiguous_dim_order()) {
    return fail(ctx, Error::NotSupported, "%s: the portable kernel needs a contiguous output", name);
  }
  return true;
}

/// avg_pool1d/3d on unpacked arguments (avg_pool1d has no divisor_override: has_value false).
void avg_pool_nd(KernelRuntimeContext& ctx, const char* name, size_t n, Tensor* self, Span<const int64_t> kernel_size,
                 Span<const int64_t> stride, Span<const int64_t> padding, bool ceil_mode, bool include_pad,
                 OptionalInt divisor_override, Tensor* out) {
  PoolGeometry g;
  size_t planes;
  if (!check_dtype(ctx, name, *self, "self") || !pool_setup(ctx, name, *self, n, g, &planes) ||
      !window_list(ctx, name, kernel_size, "kernel_size", n, nullptr, 1, 1, g.k) ||
      !window_list(ctx, name, stride, "stride", n, g.k, 1, 1, g.s) ||
      !window_list(ctx, name, padding, "padding", n, nullptr, 0, 0, g.p))
    return;
  const int64_t divisor = divisor_override.has_value ? divisor_override.value : 0;
  if (divisor_override.has_value && divisor == 0) {
    fail(ctx, Error::InvalidArgument, "%s: divisor_override must be non-zero", name);
    return;
  }
  for (size_t d = 0; d < n; ++d) g.dil[d] = 1;
  if (!pool_output_sizes(ctx, name, g, ceil_mode) || !resize_pool_out(ctx, name, *self, g, *out)) return;
  const void* x = self->const_data_ptr();
  const ScalarType t = self->scalar_type();
  size_t in_spatial = 1;
  for (size_t d = 0; d < n; ++d) in_spatial *= static_cast<size_t>(g.in[d]);
  for_each_pool_output(g, planes, [&](size_t pl, const int64_t* o, size_t flat) {
    int64_t lo[3], hi[3];
    int64_t window = 1, valid = 1;
    for (size_t d = 0; d < n; ++d) {
      int64_t start = o[d] * g.s[d] - g.p[d];
      int64_t end = std::min(start + g.k[d], g.in[d] + g.p[d]);
      window *= end - start;
      lo[d] = std::max<int64_t>(start, 0);
      hi[d] = std::min(end, g.in[d]);
      valid *= std::max<int64_t>(hi[d] - lo[d], 0);
    }
    double sum = 0;  // integer inputs: exact below 2^53, divided as integers (truncating), as torch does
    if (valid > 0) {
      int64_t w[3] = {lo[0], lo[1], lo[2]};
      while (true) {
        size_t off = 0;
        for (size_t d = 0; d < n; ++d) off = off * static_cast<size_t>(g.in[d]) + static_cast<size_t>(w[d]);
        sum += load_double(x, t, pl * in_spatial + off);
        size_t d = n;
        while (d-- > 0) {
          if (++w[d] < hi[d]) break;
          w[d] = lo[d];
        }
        if (d == static_cast<size_t>(-1)) break;
      }
    }
    const int64_t div = divisor != 0 ? divisor : include_pad ? window : valid;  // valid >= 1: inputs are non-empty
    if (is_floating(out->scalar_type())) {
      store_double(out->mutable_data_ptr(), out->scalar_type(), flat, sum / double(div));
    } else {  // INT64_MIN / -1 traps on x86: dividing by -1 is a (wrapping) negation
      const int64_t q = double_to_int64(sum);
      store_int(out->mutable_data_ptr(), out->scalar_type(), flat, div == -1 ? wrap_sub(0, q) : q / div);
    }
  });
}

/// (self, output_size, out) of the n-d adaptive average pools.
template <size_t n>
void adaptive_avg_pool_nd(KernelRuntimeContext& ctx, const char* name, Tensor* self, Span<const int64_t> size,
                          Tensor* out) {
  PoolGeometry g;
  size_t planes;
  if (!check_floating(ctx, name, *self, "self") || !pool_setup(ctx, name, *self, n, g, &planes)) return;
  if (size.size() != n) {
    fail(ctx, Error::InvalidArgument, "%s: output_size must have %zu values, has %zu", name, n, size.size());
    return;
  }
  for (size_t d = 0; d < n; ++d) {
    if (!int_in_range(ctx, name, size[d], 0, kMaxSize, "output_size")) return;
    g.out[d] = size[d];
  }
  if (!resize_pool_out(ctx, name, *self, g, *out)) return;
  size_t in_spatial = 1;
  for (size_t d = 0; d < n; ++d) in_spatial *= static_cast<size_t>(g.in[d]);
  for_each_pool_output(g, planes, [&](size_t pl, const int64_t* o, size_t flat) {
    int64_t lo[3], hi[3];
    for (size_t d = 0; d < n; ++d) {
      lo[d] = (o[d] * g.in[d]) / g.out[d];
      hi[d] = ((o[d] + 1) * g.in[d] + g.out[d] - 1) / g.out[d];
    }
    double sum = 0;
    int64_t count = 0;
    int64_t w[3] = {lo[0], lo[1], lo[2]};
    while (true) {
      size_t off = 0;
      for (size_t d = 0; d < n; ++d) off = off * static_cast<size_t>(g.in[d]) + static_cast<size_t>(w[d]);
      sum += load_double(self->const_data_ptr(), self->scalar_type(), pl * in_spatial + off);
      ++count;
      size_t d = n;
      while (d-- > 0) {
        if (++w[d] < hi[d]) break;
        w[d] = lo[d];
      }
      if (d == static_cast<size_t>(-1)) break;
    }
    store_double(out->mutable_data_ptr(), out->scalar_type(), flat, sum / double(count));
  });
}

}  // namespace

ETKIT_KERNEL_FROM(reflection_pad1d_out, pad_nd<1, PadMode::Reflect>)
ETKIT_KERNEL_FROM(reflection_pad2d_out, pad_nd<2, PadMode::Reflect>)
ETKIT_KERNEL_FROM(reflection_pad3d_out, pad_nd<3, PadMode::Reflect>)
ETKIT_KERNEL_FROM(replication_pad1d_out, pad_nd<1, PadMode::Replicate>)
ETKIT_KERNEL_FROM(replication_pad2d_out, pad_nd<2, PadMode::Replicate>)
ETKIT_KERNEL_FROM(replication_pad3d_out, pad_nd<3, PadMode::Replicate>)

// avg_pool1d.out(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], bool ceil_mode=False,
//                bool count_include_pad=True, *, Tensor(a!) out)
ETKIT_KERNEL(avg_pool1d_out, Tensor* self, Span<const int64_t> kernel_size, Span<const int64_t> stride,
             Span<const int64_t> padding, bool ceil_mode, bool count_include_pad, Tensor* out) {
  const OptionalInt no_divisor{false, 0};
  avg_pool_nd(ctx, name, 1, self, kernel_size, stride, padding, ceil_mode, count_include_pad, no_divisor, out);
}

// avg_pool3d.out(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False,
//                bool count_include_pad=True, int? divisor_override=None, *, Tensor(a!) out)
ETKIT_KERNEL(avg_pool3d_out, Tensor* self, Span<const int64_t> kernel_size, Span<const int64_t> stride,
             Span<const int64_t> padding, bool ceil_mode, bool count_include_pad, OptionalInt divisor_override,
             Tensor* out) {
  avg_pool_nd(ctx, name, 3, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out);
}

// adaptive_avg_pool1d.out(Tensor self, int[1] output_size, *, Tensor(a!) out)
ETKIT_KERNEL_FROM(adaptive_avg_pool1d_out, adaptive_avg_pool_nd<1>)

// _adaptive_avg_pool3d.out(Tensor self, SymInt[3] output_size, *, Tensor(a!) out)
ETKIT_KERNEL_FROM(adaptive_avg_pool3d_out, adaptive_avg_pool_nd<3>)

// max_pool3d_with_indices.out(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0,
//                             int[3] dilation=1, bool ceil_mode=False, *, Tensor(a!) out, Tensor(b!) indices)
// indices are flat offsets into each input plane (d * H * W + h * W + w), as torch returns them.
ETKIT_KERNEL(max_pool3d_with_indices_out, Tensor* self, Span<const int64_t> kernel_size, Span<const int64_t> stride,
             Span<const int64_t> padding, Span<const int64_t> dilation, bool ceil_mode, Tensor* out, Tensor* indices) {
  PoolGeometry g;
  size_t planes;
  if (!pool_setup(ctx, name, *self, 3, g, &planes) ||
      !window_list(ctx, name, kernel_size, "kernel_size", 3, nullptr, 1, 1, g.k) ||
      !window_list(ctx, name, stride, "stride", 3, g.k, 1, 1, g.s) ||
      !window_list(ctx, name, padding, "padding", 3, nullptr, 0, 0, g.p) ||
      !window_list(ctx, name, dilation, "dilation", 3, nullptr, 1, 1, g.dil))
    return;
  if (!pool_output_sizes(ctx, name, g, ceil_mode) || !resize_pool_out(ctx, name, *self, g, *out) ||
      !resize_pool_out(ctx, name, *self, g, *indices))
    return;
  const size_t in_spatial = static_cast<size_t>(g.in[0] * g.in[1] * g.in[2]);
  const bool floating = is_floating(self->scalar_type());
  for_each_pool_output(g, planes, [&](size_t pl, const int64_t* o, size_t flat) {
    double best = -std::numeric_limits<double>::infinity();
    int64_t best_i = -1;
    // taps [t0, t1) of each dim land inside the input (a window of 2^20 taps mostly in padding is not walked)
    int64_t t0[3], t1[3];
    for (size_t d = 0; d < 3; ++d) {
      const int64_t start = o[d] * g.s[d] - g.p[d];
      t0[d] = start >= 0 ? 0 : (-start + g.dil[d] - 1) / g.dil[d];
      t1[d] = start > g.in[d] - 1 ? 0 : std::min(g.k[d], (g.in[d] - 1 - start) / g.dil[d] + 1);
    }
    for (int64_t a = t0[0]; a < t1[0]; ++a) {
      const int64_t z = o[0] * g.s[0] - g.p[0] + a * g.dil[0];
      for (int64_t b = t0[1]; b < t1[1]; ++b) {
        const int64_t y = o[1] * g.s[1] - g.p[1] + b * g.dil[1];
        for (int64_t c = t0[2]; c < t1[2]; ++c) {
          const int64_t x = o[2] * g.s[2] - g.p[2] + c * g.dil[2];
          const int64_t i = (z * g.in[1] + y) * g.in[2] + x;
          const double v = load_double(self->const_data_ptr(), self->scalar_type(), pl * in_spatial + i);
          if (best_i < 0 || v > best || std::isnan(v)) {
            if (!(best_i >= 0 && std::isnan(best))) {
              best = v;
              best_i = i;
            }
          }
        }
      }
    }
    if (floating) store_double(out->mutable_data_ptr(), out->scalar_type(), flat, best);
    else store_int(out->mutable_data_ptr(), out->scalar_type(), flat, double_to_int64(best));  // -inf: every tap in padding
    store_int(indices->mutable_data_ptr(), indices->scalar_type(), flat, best_i);
  });
}

}  // namespace etkit::portable
