// Reductions and normalisations (shaders/reduce.comp, softmax.comp, layer_norm.comp, pool2d.comp,
// channel_affine.comp) and the embedding lookup (embedding.comp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_util.h"
#include "ops_impl.h"

namespace etkit_vulkan {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// mean.dim / sum.dim_IntList (self, dim[]?, keepdim, dtype?) and amax / amin (self, dim[], keepdim).
template <int Op>
bool reduce(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 4, e)) return false;
  const int in = a[0], out = a.back();
  if (!need_float_tensor(g, in, "self", e) || !need_float_tensor(g, out, "the output", e)) return false;
  std::vector<int64_t> dims;
  bool keepdim = false;
  if (!g.is_none(a[1]) && !g.int_list(a[1], &dims, e)) return false;
  if (!g.bool_arg(a[2], &keepdim, e)) return false;
  const size_t rank = g.tensor_of(in).max_sizes.size();
  std::vector<bool> reduced(rank, dims.empty());
  for (int64_t d : dims) {
    int64_t nd = 0;
    if (!norm_dim(d, rank, &nd, e)) return false;
    if (rank > 4 && nd < static_cast<int64_t>(rank) - 3) {
      *e = "reducing a leading dimension of a tensor of rank > 4 is not supported";
      return false;
    }
    reduced[nd] = true;
  }
  int dp = 0;
  if (!g.add_dispatch(node, "reduce", {out, in}, {}, spec_with(Op), &dp, e)) return false;
  g.node(node).configure = [&g, dp, in, out, reduced, keepdim](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(in).sizes;
    std::vector<int64_t> aligned = s, o;
    for (size_t k = 0; k < s.size(); ++k) {
      if (reduced[k]) aligned[k] = 1;
      if (!reduced[k] || keepdim) o.push_back(aligned[k]);
    }
    if (!g.set_sizes(out, o, err)) return false;
    Push().ivec4(whcn_sizes(o)).ivec4(whcn_sizes(s)).ivec4(whcn_sizes(aligned)).apply(g.dispatch(dp));
    return g.set_texel_grid(dp, o, err);
  };
  return true;
}

/// _softmax / _log_softmax (self, dim, half_to_float) and _safe_softmax (self, dim, dtype?).
template <int Mode>
bool softmax(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 4, e)) return false;
  const int in = a[0], out = a.back();
  if (!need_float_tensor(g, in, "self", e) || !need_float_tensor(g, out, "the output", e)) return false;
  int64_t dim = 0, d = 0;
  const size_t rank = g.tensor_of(in).max_sizes.size();
  if (!g.int_arg(a[1], &dim, e) || !norm_dim(dim, rank, &d, e)) return false;
  if (rank > 4 && d < static_cast<int64_t>(rank) - 3) {
    *e = "softmax over a leading dimension of a tensor of rank > 4 is not supported";
    return false;
  }
  int dp = 0;
  if (!g.add_dispatch(node, "softmax", {out, in}, {}, spec_with(Mode), &dp, e)) return false;
  const int axis = rank == 0 ? 0 : whcn_axis(d, rank);
  g.node(node).configure = [&g, dp, in, out, axis, d](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(in).sizes;
    if (!g.set_sizes(out, s, err)) return false;
    std::array<int32_t, 4> step{0, 0, 0, 0};
    step[axis] = 1;
    Push().ivec4(whcn_sizes(s)).ivec4(step).i32(s.empty() ? 1 : static_cast<int32_t>(s[d])).apply(g.dispatch(dp));
    return g.set_texel_grid(dp, s, err);
  };
  return true;
}

/// layer_norm (input, normalized_shape, weight?, bias?, eps, cudnn_enable) and native_layer_norm
/// (input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd) with only `out` used.
bool layer_norm(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 6, e)) return false;
  const int in = a[0], w = a[2], b = a[3], out = output_value(g, a);
  if (!need_float_tensor(g, in, "input", e) || !need_float_tensor(g, out, "the output", e)) return false;
  std::vector<int64_t> shape;
  double eps = 1e-5;
  if (!g.int_list(a[1], &shape, e) || !g.double_arg(a[4], &eps, e)) return false;
  const std::vector<int64_t>& s = g.tensor_of(in).max_sizes;
  if (shape.size() != 1 || s.empty() || shape[0] != s.back()) {
    *e = "only normalisation over the last dimension is supported";
    return false;
  }
  std::vector<float> wv, bv;
  const DeviceBuffer* wb = nullptr;
  const DeviceBuffer* bb = nullptr;
  if (!g.is_none(w)) {
    if (!g.constant_floats(w, &wv, e)) return false;
    wb = g.add_float_buffer(wv);
  }
  if (!g.is_none(b)) {
    if (!g.constant_floats(b, &bv, e)) return false;
    bb = g.add_float_buffer(bv);
  }
  int dp = 0;
  if (!g.add_dispatch(node, "layer_norm", {out, in}, {wb, bb}, {}, &dp, e)) return false;
  const bool has_w = wb != nullptr, has_b = bb != nullptr;
  const int64_t len = shape[0];
  g.node(node).configure = [&g, dp, in, out, eps, has_w, has_b, len](std::string* err) {
    const std::vector<int64_t>& cur = g.tensor_of(in).sizes;
    if (cur.back() != len) {
      *err = "the normalised dimension changed size";
      return false;
    }
    if (!g.set_sizes(out, cur, err)) return false;
    Push().ivec4(whcn_sizes(cur)).f32(static_cast<float>(eps)).i32(has_w).i32(has_b).apply(g.dispatch(dp));
    return g.set_texel_grid(dp, cur, err);
  };
  return true;
}

bool pool_sizes(Graph& g, int list, size_t n, std::vector<int64_t>* out, const std::vector<int64_t>& fallback,
                std::string* e) {
  if (g.is_none(list)) {
    *out = fallback;
    return true;
  }
  if (!g.int_list(list, out, e)) return false;
  if (out->empty()) *out = fallback;
  if (out->size() == 1) out->push_back((*out)[0]);
  if (out->size() != n) {
    *e = "pooling parameters must have 1 or 2 values";
    return false;
  }
  return true;
}

int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

/// max_pool2d_with_indices (self, kernel, stride, padding, dilation, ceil_mode) and
/// avg_pool2d (self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override?).
template <bool Max>
bool pool2d(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 7, e)) return false;
  const int in = a[0], out = output_value(g, a);
  if (!need_float_tensor(g, in, "self", e) || !need_float_tensor(g, out, "the output", e)) return false;
  if (g.tensor_of(in).max_sizes.size() != 4) {
    *e = "only 4-D (N, C, H, W) inputs are supported";
    return false;
  }
  std::vector<int64_t> k, s, p, d{1, 1};
  bool ceil_mode = false, include_pad = true;
  int64_t divisor = 0;
  if (!pool_sizes(g, a[1], 2, &k, {}, e) || !pool_sizes(g, a[2], 2, &s, k, e) || !pool_sizes(g, a[3], 2, &p, {0, 0}, e)) {
    return false;
  }
  if (Max) {
    if (!pool_sizes(g, a[4], 2, &d, {1, 1}, e) || !g.bool_arg(a[5], &ceil_mode, e)) return false;
  } else {
    if (!g.bool_arg(a[4], &ceil_mode, e) || !g.bool_arg(a[5], &include_pad, e)) return false;
    if (!g.is_none(a[6]) && !g.int_arg(a[6], &divisor, e)) return false;
  }
  if (!window_params(k, 1, "kernel size", e) || !window_params(s, 1, "stride", e) ||
      !window_params(p, 0, "padding", e) || !window_params(d, 1, "dilation", e)) {
    return false;
  }
  int dp = 0;
  if (!g.add_dispatch(node, "pool2d", {out, in}, {}, spec_with(Max ? 0 : 1), &dp, e)) return false;
  g.node(node).configure = [&g, dp, in, out, k, s, p, d, ceil_mode, include_pad, divisor](std::string* err) {
    const std::vector<int64_t>& x = g.tensor_of(in).sizes;
    std::vector<int64_t> o = x;
    for (int i = 0; i < 2; ++i) o[2 + i] = pooled_size(x[2 + i], k[i], s[i], p[i], d[i], ceil_mode);
    if (o[2] < 1 || o[3] < 1) {
      *err = "the output would be empty";
      return false;
    }
    if (!g.set_sizes(out, o, err)) return false;
    Push()
        .ivec4(whcn_sizes(o))
        .ivec4(whcn_sizes(x))
        .ivec4({static_cast<int32_t>(k[1]), static_cast<int32_t>(k[0]), static_cast<int32_t>(s[1]),
                static_cast<int32_t>(s[0])})
        .ivec4({static_cast<int32_t>(p[1]), static_cast<int32_t>(p[0]), static_cast<int32_t>(d[1]),
                static_cast<int32_t>(d[0])})
        .i32(include_pad ? 1 : 0)
        .i32(static_cast<int32_t>(divisor))
        .apply(g.dispatch(dp));
    return g.set_texel_grid(dp, o, err);
  };
  return true;
}

/// _adaptive_avg_pool2d (self, output_size[2]).
bool adaptive_avg_pool2d(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  const int in = a[0], out = a.back();
  if (!need_float_tensor(g, in, "self", e) || !need_float_tensor(g, out, "the output", e)) return false;
  std::vector<int64_t> size;
  if (!pool_sizes(g, a[1], 2, &size, {}, e) || !window_params(size, 1, "output size", e)) return false;
  if (g.tensor_of(in).max_sizes.size() != 4) {
    *e = "only 4-D (N, C, H, W) inputs are supported";
    return false;
  }
  int dp = 0;
  if (!g.add_dispatch(node, "pool2d", {out, in}, {}, spec_with(2), &dp, e)) return false;
  g.node(node).configure = [&g, dp, in, out, size](std::string* err) {
    const std::vector<int64_t>& x = g.tensor_of(in).sizes;
    std::vector<int64_t> o = {x[0], x[1], size[0], size[1]};
    if (!g.set_sizes(out, o, err)) return false;
    Push().ivec4(whcn_sizes(o)).ivec4(whcn_sizes(x)).ivec4({1, 1, 1, 1}).ivec4({0, 0, 1, 1}).i32(0).i32(0).apply(
        g.dispatch(dp));
    return g.set_texel_grid(dp, o, err);
  };
  return true;
}

/// _native_batch_norm_legit_no_training (input, weight?, bias?, running_mean, running_var, momentum, eps)
/// -> (out, save_mean, save_rstd) with only `out` used: out = x * scale[c] + shift[c].
bool batch_norm(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 8, e)) return false;
  const int in = a[0], out = output_value(g, a);
  if (!need_float_tensor(g, in, "input", e) || !need_float_tensor(g, out, "the output", e)) return false;
  double eps = 1e-5;
  if (!g.double_arg(a[6], &eps, e)) return false;
  std::vector<float> w, b, mean, var;
  if (!g.constant_floats(a[3], &mean, e) || !g.constant_floats(a[4], &var, e)) return false;
  if (!g.is_none(a[1]) && !g.constant_floats(a[1], &w, e)) return false;
  if (!g.is_none(a[2]) && !g.constant_floats(a[2], &b, e)) return false;
  const size_t c = mean.size();
  if (var.size() != c || (!w.empty() && w.size() != c) || (!b.empty() && b.size() != c)) {
    *e = "weight, bias, mean and variance lengths differ";
    return false;
  }
  std::vector<uint8_t> scale(c * 4), shift(c * 4);
  for (size_t i = 0; i < c; ++i) {
    const float sc = static_cast<float>((w.empty() ? 1.0 : w[i]) / std::sqrt(static_cast<double>(var[i]) + eps));
    const float sh = static_cast<float>((b.empty() ? 0.0 : b[i]) - static_cast<double>(mean[i]) * sc);
    std::memcpy(scale.data() + 4 * i, &sc, 4);
    std::memcpy(shift.data() + 4 * i, &sh, 4);
  }
  const size_t rank = g.tensor_of(in).max_sizes.size();
  if (rank < 2 || rank > 4) {
    *e = "input must have rank 2, 3 or 4";
    return false;
  }
  int dp = 0;
  if (!g.add_dispatch(node, "channel_affine", {out, in}, {g.add_buffer(std::move(scale)), g.add_buffer(std::move(shift))},
                      {}, &dp, e)) {
    return false;
  }
  const int axis = whcn_axis(1, rank);
  g.node(node).configure = [&g, dp, in, out, axis](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(in).sizes;
    if (!g.set_sizes(out, s, err)) return false;
    Push().ivec4(whcn_sizes(s)).i32(axis).f32(-kInf).f32(kInf).apply(g.dispatch(dp));
    return g.set_texel_grid(dp, s, err);
  };
  return true;
}

/// embedding (weight, indices, padding_idx, scale_grad_by_freq, sparse).
bool embedding(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  const int weight = a[0], indices = a[1], out = a.back();
  if (!g.is_constant(weight) || g.tensor_of(weight).max_sizes.size() != 2) {
    *e = "the table must be a constant 2-D tensor";
    return false;
  }
  if (!g.is_tensor(indices) || g.tensor_of(indices).kind != VTensor::Kind::Int32) {
    *e = "indices must be an int32/int64 tensor";
    return false;
  }
  if (!need_float_tensor(g, out, "the output", e)) return false;
  std::vector<float> table;
  if (!g.constant_floats(weight, &table, e)) return false;
  const int64_t rows = g.tensor_of(weight).max_sizes[0], dim = g.tensor_of(weight).max_sizes[1];
  const DeviceBuffer* tb = g.add_float_buffer(table);
  g.use_tensor(indices);
  if (!g.is_constant(indices)) g.check_indices(indices, rows);
  int dp = 0;
  if (!g.add_dispatch(node, "embedding", {out}, {tb, nullptr, &g.tensor_of(indices).dev}, {}, &dp, e)) return false;
  g.node(node).configure = [&g, dp, indices, out, rows, dim](std::string* err) {
    std::vector<int64_t> o = g.tensor_of(indices).sizes;
    o.push_back(dim);
    if (!g.set_sizes(out, o, err)) return false;
    Push().ivec4(whcn_sizes(o)).i32(static_cast<int32_t>(rows)).apply(g.dispatch(dp));
    return g.set_texel_grid(dp, o, err);
  };
  return true;
}

}  // namespace

void register_reduction_ops(OpTable& t) {
  t["aten.sum.dim_IntList"] = reduce<0>;
  t["aten.mean.dim"] = reduce<1>;
  t["aten.amax.default"] = reduce<2>;
  t["aten.amin.default"] = reduce<3>;
  t["aten._softmax.default"] = softmax<0>;
  t["aten._log_softmax.default"] = softmax<1>;
  t["aten._safe_softmax.default"] = softmax<2>;
  t["aten.layer_norm.default"] = layer_norm;
  t["aten.native_layer_norm.default"] = layer_norm;
  t["aten.max_pool2d_with_indices.default"] = pool2d<true>;
  t["aten.avg_pool2d.default"] = pool2d<false>;
  t["aten._adaptive_avg_pool2d.default"] = adaptive_avg_pool2d;
  t["aten._native_batch_norm_legit_no_training.default"] = batch_norm;
  t["aten.embedding.default"] = embedding;
}

}  // namespace etkit_vulkan
