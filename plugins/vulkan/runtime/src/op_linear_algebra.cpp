// Convolution, linear (float and quantized weights) and matrix products (shaders/conv2d.comp,
// linear.comp, matmul.comp). Weights are constants, packed into device buffers at build.
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_util.h"
#include "ops_impl.h"

namespace etkit_vulkan {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool clamp_bounds(Graph& g, int lo_arg, int hi_arg, float* lo, float* hi, std::string* e) {
  double a = -kInf, b = kInf;
  if (!g.is_none(lo_arg) && !g.double_arg(lo_arg, &a, e)) return false;
  if (!g.is_none(hi_arg) && !g.double_arg(hi_arg, &b, e)) return false;
  *lo = static_cast<float>(a);
  *hi = static_cast<float>(b);
  return true;
}

/// aten.convolution / et_vk.conv_with_clamp (ExecuTorch's name and schema): (input, weight, bias, stride, padding, dilation,
/// transposed, output_padding, groups[, output_min, output_max], out)
bool conv(Graph& g, int node, const std::vector<int>& a, bool with_clamp, std::string* e) {
  if (!need_args(a, with_clamp ? 12 : 10, e)) return false;
  const int in = a[0], weight = a[1], bias = a[2], out = a.back();
  if (!need_float_tensor(g, in, "input", e) || !need_float_tensor(g, out, "the output", e)) return false;
  if (!g.is_constant(weight)) {
    *e = "the weight must be a constant";
    return false;
  }
  std::vector<int64_t> stride, padding, dilation, out_pad;
  bool transposed = false;
  int64_t groups = 1;
  if (!g.int_list(a[3], &stride, e) || !g.int_list(a[4], &padding, e) || !g.int_list(a[5], &dilation, e) ||
      !g.bool_arg(a[6], &transposed, e) || !g.int_list(a[7], &out_pad, e) || !g.int_arg(a[8], &groups, e)) {
    return false;
  }
  if (!window_params(stride, 1, "stride", e) || !window_params(padding, 0, "padding", e) ||
      !window_params(dilation, 1, "dilation", e)) {
    return false;
  }
  const std::vector<int64_t> wshape = g.tensor_of(weight).max_sizes;
  if (transposed) {
    *e = "transposed convolution is not supported";
    return false;
  }
  if (wshape.size() != 4 || g.tensor_of(in).max_sizes.size() != 4 || stride.size() != 2 || padding.size() != 2 ||
      dilation.size() != 2) {
    *e = "only 2-D convolution (4-D input and weight) is supported";
    return false;
  }
  if (groups < 1 || wshape[0] % groups != 0) {
    *e = "groups " + std::to_string(groups) + " does not divide the " + std::to_string(wshape[0]) + " output channels";
    return false;
  }
  float lo = -kInf, hi = kInf;
  if (with_clamp && !clamp_bounds(g, a[9], a[10], &lo, &hi, e)) return false;
  std::vector<float> w, bv;
  if (!g.constant_floats(weight, &w, e)) return false;
  const bool has_bias = !g.is_none(bias);
  if (has_bias) {
    if (!g.constant_floats(bias, &bv, e)) return false;
    if (bv.size() != static_cast<size_t>(wshape[0])) {
      *e = "bias has " + std::to_string(bv.size()) + " elements, " + std::to_string(wshape[0]) + " expected";
      return false;
    }
  }
  // tiled (4 output channels per invocation) unless a channel block would cross a group
  const int64_t oc = wshape[0], ocg = oc / groups, taps = wshape[1] * wshape[2] * wshape[3];
  const bool tiled = groups == 1 || ocg % 4 == 0;
  int d = 0;
  if (tiled) {
    const int64_t blocks = (oc + 3) / 4;
    std::vector<float> packed(static_cast<size_t>(blocks * taps * 4), 0.0f), pb(static_cast<size_t>(blocks * 4), 0.0f);
    for (int64_t o = 0; o < oc; ++o) {
      for (int64_t t = 0; t < taps; ++t) packed[static_cast<size_t>(((o / 4) * taps + t) * 4 + o % 4)] = w[o * taps + t];
      if (has_bias) pb[static_cast<size_t>(o)] = bv[static_cast<size_t>(o)];
    }
    if (!g.add_dispatch(node, "conv2d_tiled", {out, in}, {g.add_float_buffer(packed), g.add_float_buffer(pb)}, {}, &d, e)) {
      return false;
    }
  } else {
    const DeviceBuffer* bbuf = has_bias ? g.add_float_buffer(bv) : nullptr;
    if (!g.add_dispatch(node, "conv2d", {out, in}, {g.add_float_buffer(w), bbuf}, {}, &d, e)) return false;
  }
  g.node(node).configure = [&g, d, in, out, wshape, stride, padding, dilation, groups, has_bias, lo, hi,
                             tiled](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(in).sizes;
    if (s[1] != wshape[1] * groups) {
      *err = "input has " + std::to_string(s[1]) + " channels, the weight expects " + std::to_string(wshape[1] * groups);
      return false;
    }
    std::vector<int64_t> o(4);
    o[0] = s[0];
    o[1] = wshape[0];
    for (int k = 0; k < 2; ++k) {
      o[2 + k] = (s[2 + k] + 2 * padding[k] - dilation[k] * (wshape[2 + k] - 1) - 1) / stride[k] + 1;
      if (o[2 + k] < 1) {
        *err = "the output would be empty";
        return false;
      }
    }
    if (!g.set_sizes(out, o, err)) return false;
    Push()
        .ivec4(whcn_sizes(o))
        .ivec4(whcn_sizes(s))
        .ivec4({static_cast<int32_t>(wshape[3]), static_cast<int32_t>(wshape[2]), static_cast<int32_t>(stride[1]),
                static_cast<int32_t>(stride[0])})
        .ivec4({static_cast<int32_t>(padding[1]), static_cast<int32_t>(padding[0]), static_cast<int32_t>(dilation[1]),
                static_cast<int32_t>(dilation[0])})
        .i32(static_cast<int32_t>(groups))
        .i32(has_bias ? 1 : 0)
        .f32(lo)
        .f32(hi)
        .apply(g.dispatch(d));
    if (tiled) return g.set_grid(d, (o[3] + 3) / 4, o[2], (o[1] + 3) / 4 * o[0], err);
    return g.set_texel_grid(d, o, err);
  };
  return true;
}

bool convolution(Graph& g, int node, const std::vector<int>& a, std::string* e) { return conv(g, node, a, false, e); }
bool conv_with_clamp(Graph& g, int node, const std::vector<int>& a, std::string* e) { return conv(g, node, a, true, e); }

/// Shared by float and quantized linear: the dispatch is built; configure computes the output.
void configure_linear(Graph& g, int node, int d, int in, int out, int64_t n_out, int64_t k, bool has_bias,
                      int64_t group_size, float lo, float hi) {
  g.node(node).configure = [&g, d, in, out, n_out, k, has_bias, group_size, lo, hi](std::string* err) {
    std::vector<int64_t> s = g.tensor_of(in).sizes;
    if (s.empty() || s.back() != k) {
      *err = "input's last dimension is " + std::to_string(s.empty() ? 0 : s.back()) + ", the weight expects " +
             std::to_string(k);
      return false;
    }
    s.back() = n_out;
    if (!g.set_sizes(out, s, err)) return false;
    const auto w = whcn_sizes(s);
    Push()
        .ivec4(w)
        .ivec4(whcn_sizes(g.tensor_of(in).sizes))
        .i32(has_bias ? 1 : 0)
        .i32(static_cast<int32_t>(group_size))
        .f32(lo)
        .f32(hi)
        .apply(g.dispatch(d));
    return g.set_grid(d, (w[0] + 3) / 4, (w[1] + 3) / 4, static_cast<int64_t>(w[2]) * w[3], err);
  };
}

/// Bias padded to whole blocks of four outputs (zeros when absent).
bool block_bias(Graph& g, int bias, int64_t n_out, std::vector<float>* out, std::string* e) {
  out->assign(static_cast<size_t>((n_out + 3) / 4 * 4), 0.0f);
  if (g.is_none(bias)) return true;
  std::vector<float> b;
  if (!g.constant_floats(bias, &b, e)) return false;
  if (b.size() != static_cast<size_t>(n_out)) {
    *e = "bias has " + std::to_string(b.size()) + " elements, " + std::to_string(n_out) + " expected";
    return false;
  }
  std::copy(b.begin(), b.end(), out->begin());
  return true;
}

/// aten.linear / etkit_vk.linear_with_clamp: (input, weight, bias[, output_min, output_max], out)
bool linear_impl(Graph& g, int node, const std::vector<int>& a, bool with_clamp, std::string* e) {
  if (!need_args(a, with_clamp ? 6 : 4, e)) return false;
  const int in = a[0], weight = a[1], bias = a[2], out = a.back();
  if (!need_float_tensor(g, in, "input", e) || !need_float_tensor(g, out, "the output", e)) return false;
  if (!g.is_constant(weight) || g.tensor_of(weight).max_sizes.size() != 2) {
    *e = "the weight must be a constant 2-D tensor";
    return false;
  }
  const std::vector<int64_t> ws = g.tensor_of(weight).max_sizes;
  const int64_t n_out = ws[0], k = ws[1], blocks = (n_out + 3) / 4;
  float lo = -kInf, hi = kInf;
  if (with_clamp && !clamp_bounds(g, a[3], a[4], &lo, &hi, e)) return false;
  std::vector<float> w, b;
  if (!g.constant_floats(weight, &w, e) || !block_bias(g, bias, n_out, &b, e)) return false;
  std::vector<float> packed(static_cast<size_t>(blocks * k * 4), 0.0f);  // [block][k][4]
  for (int64_t j = 0; j < n_out; ++j) {
    for (int64_t i = 0; i < k; ++i) packed[static_cast<size_t>(((j / 4) * k + i) * 4 + j % 4)] = w[j * k + i];
  }
  int d = 0;
  if (!g.add_dispatch(node, "linear", {out, in}, {g.add_float_buffer(packed), g.add_float_buffer(b), nullptr},
                      spec_with(0), &d, e)) {
    return false;
  }
  configure_linear(g, node, d, in, out, n_out, k, !g.is_none(bias), k, lo, hi);
  return true;
}

bool linear(Graph& g, int node, const std::vector<int>& a, std::string* e) { return linear_impl(g, node, a, false, e); }
bool linear_with_clamp(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  return linear_impl(g, node, a, true, e);
}

/// etkit_vk.linear_qw: (input, qweight, scales float [N, K/group], group_size, bits (8 or 4), bias, out).
/// qweight is int8 [N, K] holding the integer values, or for 4 bits uint8 [N, ceil(K/2)] with two values
/// per byte (even k in the low nibble). Weights are symmetric: w = q * scale.
bool linear_qw(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 7, e)) return false;
  const int in = a[0], qweight = a[1], scales = a[2], bias = a[5], out = a.back();
  int64_t group_size = 0, bits = 0;
  if (!need_float_tensor(g, in, "input", e) || !need_float_tensor(g, out, "the output", e) ||
      !g.int_arg(a[3], &group_size, e) || !g.int_arg(a[4], &bits, e)) {
    return false;
  }
  if (!g.is_constant(qweight) || g.tensor_of(qweight).max_sizes.size() != 2) {
    *e = "the quantized weight must be a constant 2-D tensor";
    return false;
  }
  if (bits != 8 && bits != 4) {
    *e = "weights of " + std::to_string(bits) + " bits are not supported (8 and 4 are)";
    return false;
  }
  const std::vector<int64_t> ws = g.tensor_of(qweight).max_sizes;
  const std::vector<int64_t> ss = g.tensor_of(scales).max_sizes;
  const bool packed = g.tensor_of(qweight).serialized_dtype == etkit_vulkan::fb::VkDataType::UINT8;
  if (ss.size() != 2 || ss[0] != ws[0] || group_size < 1) {
    *e = "scales must be [N, K / group_size]";
    return false;
  }
  const int64_t n_out = ws[0], k = packed ? ss[1] * group_size : ws[1], blocks = (n_out + 3) / 4;
  if (packed && (bits != 4 || ws[1] != (k + 1) / 2)) {
    *e = "packed weights of shape [" + std::to_string(ws[0]) + ", " + std::to_string(ws[1]) + "] do not hold " +
         std::to_string(k) + " 4-bit values per row";
    return false;
  }
  if (k % group_size != 0) {
    *e = "group size " + std::to_string(group_size) + " does not divide K = " + std::to_string(k);
    return false;
  }
  std::vector<int64_t> q;
  std::vector<float> s, b;
  if (!g.constant_ints(qweight, &q, e) || !g.constant_floats(scales, &s, e) || !block_bias(g, bias, n_out, &b, e)) {
    return false;
  }
  if (packed) {  // unpack two's-complement nibbles
    std::vector<int64_t> full(static_cast<size_t>(n_out * k));
    for (int64_t j = 0; j < n_out; ++j) {
      for (int64_t i = 0; i < k; ++i) {
        const int64_t byte = q[static_cast<size_t>(j * ws[1] + i / 2)];
        const int64_t nib = (i % 2 == 0) ? (byte & 0xF) : ((byte >> 4) & 0xF);
        full[static_cast<size_t>(j * k + i)] = nib >= 8 ? nib - 16 : nib;
      }
    }
    q.swap(full);
  }
  const int64_t groups = k / group_size;
  if (static_cast<int64_t>(s.size()) != n_out * groups) {
    *e = "scales hold " + std::to_string(s.size()) + " values, " + std::to_string(n_out * groups) + " expected";
    return false;
  }
  const int64_t lo = -(int64_t{1} << (bits - 1)), hi = (int64_t{1} << (bits - 1)) - 1;
  const int64_t words_per_block = bits == 8 ? k : (k + 1) / 2;
  std::vector<uint32_t> words(static_cast<size_t>(blocks * words_per_block), 0);
  for (int64_t j = 0; j < n_out; ++j) {
    for (int64_t i = 0; i < k; ++i) {
      const int64_t v = q[static_cast<size_t>(j * k + i)];
      if (v < lo || v > hi) {
        *e = "weight value " + std::to_string(v) + " does not fit in " + std::to_string(bits) + " bits";
        return false;
      }
      const uint32_t field = static_cast<uint32_t>(v) & ((1u << bits) - 1u);
      if (bits == 8) {
        words[static_cast<size_t>((j / 4) * k + i)] |= field << (8 * (j % 4));
      } else {
        words[static_cast<size_t>((j / 4) * words_per_block + i / 2)] |= field << (16 * (i % 2) + 4 * (j % 4));
      }
    }
  }
  std::vector<float> sp(static_cast<size_t>(blocks * groups * 4), 0.0f);  // [block][group][4]
  for (int64_t j = 0; j < n_out; ++j) {
    for (int64_t grp = 0; grp < groups; ++grp) sp[static_cast<size_t>(((j / 4) * groups + grp) * 4 + j % 4)] = s[j * groups + grp];
  }
  std::vector<uint8_t> wbytes(words.size() * 4), sbytes(sp.size() * 4);
  if (!wbytes.empty()) std::memcpy(wbytes.data(), words.data(), wbytes.size());  // data() of an empty vector
  if (!sbytes.empty()) std::memcpy(sbytes.data(), sp.data(), sbytes.size());     // may be null
  int d = 0;
  if (!g.add_dispatch(node, "linear", {out, in},
                      {g.add_buffer(std::move(wbytes)), g.add_float_buffer(b), g.add_buffer(std::move(sbytes))},
                      spec_with(static_cast<int>(bits)), &d, e)) {
    return false;
  }
  configure_linear(g, node, d, in, out, n_out, k, !g.is_none(bias), group_size, -kInf, kInf);
  return true;
}

/// aten.bmm (B, M, K) x (B, K, N) and aten.mm (M, K) x (K, N); also 4-D batched products.
bool matmul(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  const int x = a[0], y = a[1], out = a.back();
  if (!need_float_tensor(g, x, "self", e) || !need_float_tensor(g, y, "mat2", e) ||
      !need_float_tensor(g, out, "the output", e)) {
    return false;
  }
  const size_t rank = g.tensor_of(x).max_sizes.size();
  if (rank < 2 || rank > 4 || g.tensor_of(y).max_sizes.size() != rank) {
    *e = "operands must both have rank 2, 3 or 4";
    return false;
  }
  int d = 0;
  if (!g.add_dispatch(node, "matmul", {out, x, y}, {}, {}, &d, e)) return false;
  g.node(node).configure = [&g, d, x, y, out](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(x).sizes;
    const std::vector<int64_t>& t = g.tensor_of(y).sizes;
    const size_t r = s.size();
    if (s[r - 1] != t[r - 2]) {
      *err = "inner dimensions differ (" + std::to_string(s[r - 1]) + " vs " + std::to_string(t[r - 2]) + ")";
      return false;
    }
    std::vector<int64_t> o = s;
    for (size_t k = 0; k + 2 < r; ++k) {
      if (s[k] != t[k] && s[k] != 1 && t[k] != 1) {
        *err = "batch dimensions do not broadcast";
        return false;
      }
      o[k] = std::max(s[k], t[k]);
    }
    o[r - 1] = t[r - 1];
    if (!g.set_sizes(out, o, err)) return false;
    const auto w = whcn_sizes(o);
    Push().ivec4(w).ivec4(whcn_sizes(s)).ivec4(whcn_sizes(t)).apply(g.dispatch(d));
    return g.set_grid(d, (w[0] + 3) / 4, (w[1] + 3) / 4, static_cast<int64_t>(w[2]) * w[3], err);
  };
  return true;
}

/// etkit_vk.dynamic_fake_quant: (input, qmin, qmax, eps, per_row, out): int8 affine quantization of an
/// activation with parameters computed at run time (per tensor, or per row of the last dimension), then
/// dequantized, as PT2E's dynamic quantization and torchao's per-token activation quantization compute it.
bool dynamic_fake_quant(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 6, e)) return false;
  const int in = a[0], out = a.back();
  int64_t qmin = 0, qmax = 0;
  double eps = 0;
  bool per_row = false;
  if (!need_float_tensor(g, in, "input", e) || !need_float_tensor(g, out, "the output", e) ||
      !g.int_arg(a[1], &qmin, e) || !g.int_arg(a[2], &qmax, e) || !g.double_arg(a[3], &eps, e) ||
      !g.bool_arg(a[4], &per_row, e)) {
    return false;
  }
  if (qmin >= qmax) {
    *e = "quant_min " + std::to_string(qmin) + " is not below quant_max " + std::to_string(qmax);
    return false;
  }
  int stats_d = -1, apply_d = 0;
  const DeviceBuffer* stats = per_row ? nullptr : g.add_buffer(std::vector<uint8_t>(16, 0));
  if (!per_row && !g.add_dispatch(node, "dynamic_quant", {out, in}, {stats}, spec_with(0), &stats_d, e)) return false;
  if (!g.add_dispatch(node, "dynamic_quant", {out, in}, {stats}, spec_with(per_row ? 2 : 1), &apply_d, e)) return false;
  g.node(node).configure = [&g, stats_d, apply_d, in, out, qmin, qmax, eps](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(in).sizes;
    if (!g.set_sizes(out, s, err)) return false;
    Push p;
    p.ivec4(whcn_sizes(s)).i32(static_cast<int32_t>(qmin)).i32(static_cast<int32_t>(qmax)).f32(static_cast<float>(eps));
    p.apply(g.dispatch(apply_d));
    if (stats_d >= 0) {
      p.apply(g.dispatch(stats_d));
      if (!g.set_grid(stats_d, 64, 1, 1, err)) return false;
    }
    return g.set_texel_grid(apply_d, s, err);
  };
  return true;
}

}  // namespace

void register_linear_algebra_ops(OpTable& t) {
  t["etkit_vk.dynamic_fake_quant.default"] = dynamic_fake_quant;
  t["aten.convolution.default"] = convolution;
  t["et_vk.conv_with_clamp.default"] = conv_with_clamp;
  t["aten.linear.default"] = linear;
  t["etkit_vk.linear_with_clamp.default"] = linear_with_clamp;
  t["etkit_vk.linear_qw.default"] = linear_qw;
  t["aten.bmm.default"] = matmul;
  t["aten.mm.default"] = matmul;
}

}  // namespace etkit_vulkan
