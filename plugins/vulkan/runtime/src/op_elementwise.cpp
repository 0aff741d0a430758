// Elementwise operators: binary arithmetic with broadcasting (shaders/binary.comp) and unary
// functions (shaders/unary.comp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_util.h"
#include "ops_impl.h"

namespace etkit_vulkan {

namespace {

/// Broadcast shape of a and b (numpy rules); false when they do not broadcast.
bool broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  const size_t n = std::max(a.size(), b.size());
  out->assign(n, 1);
  for (size_t k = 0; k < n; ++k) {
    const int64_t x = k < n - a.size() ? 1 : a[k - (n - a.size())];
    const int64_t y = k < n - b.size() ? 1 : b[k - (n - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    (*out)[k] = x == 1 ? y : x;
  }
  return true;
}

/// Shapes of rank > 4 fold their leading dimensions into N; broadcasting there is expressible only
/// when an operand's leading dimensions equal the output's or are all 1.
bool folded_broadcast_ok(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (out.size() <= 4) return true;
  const size_t lead = out.size() - 3;
  std::vector<int64_t> mine(lead, 1);
  for (size_t k = 0; k < lead; ++k) {
    const size_t pad = out.size() - in.size();
    if (k >= pad) mine[k] = in[k - pad];
  }
  bool same = true, ones = true;
  for (size_t k = 0; k < lead; ++k) {
    same = same && mine[k] == out[k];
    ones = ones && mine[k] == 1;
  }
  return same || ones;
}

enum BinaryOp { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3, kPow = 4, kMax = 5, kMin = 6, kRsub = 7, kFloorDiv = 8, kRem = 9 };

/// `self OP other`: other is a tensor (or a Scalar value when `scalar_other`); alpha_arg may be -1.
bool binary(Graph& g, int node, int self, int other, int alpha_arg, int out, BinaryOp op, bool scalar_other,
            std::string* error) {
  if (!need_float_tensor(g, self, "self", error) || !need_float_tensor(g, out, "the output", error)) return false;
  double alpha = 1.0, scalar = 0.0;
  if (alpha_arg >= 0 && !g.is_none(alpha_arg) && !g.double_arg(alpha_arg, &alpha, error)) return false;
  const bool other_is_tensor = !scalar_other && g.is_tensor(other);
  if (!other_is_tensor) {
    if (!g.double_arg(other, &scalar, error)) return false;
  } else if (!need_float_tensor(g, other, "other", error)) {
    return false;
  }
  int d = 0;
  if (!g.add_dispatch(node, "binary", {out, self, other_is_tensor ? other : -1}, {},
                      spec_with(op, other_is_tensor ? 0 : 1), &d, error)) {
    return false;
  }
  g.node(node).configure = [&g, d, self, other, out, other_is_tensor, alpha, scalar](std::string* err) {
    const std::vector<int64_t>& a = g.tensor_of(self).sizes;
    std::vector<int64_t> shape = a;
    if (other_is_tensor) {
      const std::vector<int64_t>& b = g.tensor_of(other).sizes;
      std::string sa = "", sb = "";
      if (!broadcast_shape(a, b, &shape)) {
        *err = "operand shapes do not broadcast";
        return false;
      }
      if (!folded_broadcast_ok(a, shape) || !folded_broadcast_ok(b, shape)) {
        *err = "broadcasting over the leading dimensions of a tensor of rank > 4 is not supported";
        return false;
      }
    }
    if (!g.set_sizes(out, shape, err)) return false;
    Push p;
    p.ivec4(whcn_sizes(shape)).ivec4(whcn_sizes(a));
    p.ivec4(other_is_tensor ? whcn_sizes(g.tensor_of(other).sizes) : std::array<int32_t, 4>{1, 1, 1, 1});
    p.f32(static_cast<float>(alpha)).f32(static_cast<float>(scalar));
    p.apply(g.dispatch(d));
    return g.set_texel_grid(d, shape, err);
  };
  return true;
}

#define BINARY_OP(fn, op, has_alpha, scalar)                                                          \
  bool fn(Graph& g, int node, const std::vector<int>& a, std::string* e) {                           \
    if (!need_args(a, has_alpha ? 4 : 3, e)) return false;                                             \
    return binary(g, node, a[0], a[1], has_alpha ? a[2] : -1, a.back(), op, scalar, e);               \
  }

BINARY_OP(add_tensor, kAdd, true, false)
BINARY_OP(sub_tensor, kSub, true, false)
BINARY_OP(mul_tensor, kMul, false, false)
BINARY_OP(div_tensor, kDiv, false, false)
BINARY_OP(pow_tensor_tensor, kPow, false, false)
BINARY_OP(maximum, kMax, false, false)
BINARY_OP(minimum, kMin, false, false)
BINARY_OP(add_scalar, kAdd, true, true)
BINARY_OP(sub_scalar, kSub, true, true)
BINARY_OP(mul_scalar, kMul, false, true)
BINARY_OP(div_scalar, kDiv, false, true)
BINARY_OP(pow_tensor_scalar, kPow, false, true)
BINARY_OP(rsub_scalar, kRsub, true, true)
BINARY_OP(remainder_scalar, kRem, false, true)
BINARY_OP(remainder_tensor, kRem, false, false)
#undef BINARY_OP

bool div_tensor_mode(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 4, e)) return false;
  const Value& mode = g.value(a[2]);
  if (mode.kind == Value::Kind::Null) return binary(g, node, a[0], a[1], -1, a.back(), kDiv, false, e);
  if (mode.kind == Value::Kind::String && mode.s == "floor") {
    return binary(g, node, a[0], a[1], -1, a.back(), kFloorDiv, false, e);
  }
  *e = "rounding_mode '" + mode.s + "' is not supported (None and 'floor' are)";
  return false;
}

enum UnaryOp {
  kRelu = 0, kClamp = 1, kSigmoid = 2, kTanh = 3, kGeluErf = 4, kGeluTanh = 5, kHardswish = 6, kHardsigmoid = 7,
  kSilu = 8, kExp = 9, kLog = 10, kSqrt = 11, kRsqrt = 12, kAbs = 13, kNeg = 14, kLeakyRelu = 15, kElu = 16,
  kSin = 17, kCos = 18, kReciprocal = 19, kErf = 20, kFloor = 21, kCeil = 22, kRound = 23, kSign = 24, kCopy = 25,
  kSoftplus = 26
};

bool unary(Graph& g, int node, int self, int out, UnaryOp op, float p0, float p1, float p2, std::string* error) {
  if (!need_float_tensor(g, self, "self", error) || !need_float_tensor(g, out, "the output", error)) return false;
  int d = 0;
  if (!g.add_dispatch(node, "unary", {out, self}, {}, spec_with(op), &d, error)) return false;
  g.node(node).configure = [&g, d, self, out, p0, p1, p2](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(self).sizes;
    if (!g.set_sizes(out, s, err)) return false;
    Push().ivec4(whcn_sizes(s)).f32(p0).f32(p1).f32(p2).apply(g.dispatch(d));
    return g.set_texel_grid(d, s, err);
  };
  return true;
}

#define UNARY_OP(fn, op)                                                                             \
  bool fn(Graph& g, int node, const std::vector<int>& a, std::string* e) {                          \
    if (!need_args(a, 2, e)) return false;                                                            \
    return unary(g, node, a[0], a.back(), op, 0, 0, 0, e);                                            \
  }
UNARY_OP(relu, kRelu)
UNARY_OP(sigmoid, kSigmoid)
UNARY_OP(tanh_op, kTanh)
UNARY_OP(hardswish, kHardswish)
UNARY_OP(hardsigmoid, kHardsigmoid)
UNARY_OP(silu, kSilu)
UNARY_OP(exp_op, kExp)
UNARY_OP(log_op, kLog)
UNARY_OP(sqrt_op, kSqrt)
UNARY_OP(rsqrt_op, kRsqrt)
UNARY_OP(abs_op, kAbs)
UNARY_OP(neg, kNeg)
UNARY_OP(sin_op, kSin)
UNARY_OP(cos_op, kCos)
UNARY_OP(reciprocal, kReciprocal)
UNARY_OP(erf_op, kErf)
UNARY_OP(floor_op, kFloor)
UNARY_OP(ceil_op, kCeil)
UNARY_OP(round_op, kRound)
UNARY_OP(sign_op, kSign)
#undef UNARY_OP

constexpr float kInf = std::numeric_limits<float>::infinity();

bool optional_double(Graph& g, int v, double fallback, double* out, std::string* e) {
  if (g.is_none(v)) {
    *out = fallback;
    return true;
  }
  return g.double_arg(v, out, e);
}

bool hardtanh(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 4, e)) return false;
  double lo = -1, hi = 1;
  if (!optional_double(g, a[1], -1, &lo, e) || !optional_double(g, a[2], 1, &hi, e)) return false;
  return unary(g, node, a[0], a.back(), kClamp, static_cast<float>(lo), static_cast<float>(hi), 0, e);
}

bool clamp(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 4, e)) return false;
  double lo = -kInf, hi = kInf;
  if (g.is_tensor(a[1]) || g.is_tensor(a[2])) {
    *e = "clamp bounds must be scalars";
    return false;
  }
  if (!optional_double(g, a[1], -kInf, &lo, e) || !optional_double(g, a[2], kInf, &hi, e)) return false;
  return unary(g, node, a[0], a.back(), kClamp, static_cast<float>(lo), static_cast<float>(hi), 0, e);
}

bool gelu(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 2, e)) return false;
  const bool tanh_approx = a.size() >= 3 && g.value(a[1]).kind == Value::Kind::String && g.value(a[1]).s == "tanh";
  return unary(g, node, a[0], a.back(), tanh_approx ? kGeluTanh : kGeluErf, 0, 0, 0, e);
}

bool leaky_relu(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 2, e)) return false;
  double slope = 0.01;
  if (a.size() >= 3 && !optional_double(g, a[1], 0.01, &slope, e)) return false;
  return unary(g, node, a[0], a.back(), kLeakyRelu, static_cast<float>(slope), 0, 0, e);
}

bool elu(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 5, e)) return false;
  double alpha = 1, scale = 1, input_scale = 1;
  if (!g.double_arg(a[1], &alpha, e) || !g.double_arg(a[2], &scale, e) || !g.double_arg(a[3], &input_scale, e)) return false;
  return unary(g, node, a[0], a.back(), kElu, static_cast<float>(alpha), static_cast<float>(scale),
               static_cast<float>(input_scale), e);
}

bool softplus(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 4, e)) return false;
  double beta = 1, threshold = 20;
  if (!g.double_arg(a[1], &beta, e) || !g.double_arg(a[2], &threshold, e)) return false;
  return unary(g, node, a[0], a.back(), kSoftplus, static_cast<float>(beta), static_cast<float>(threshold), 0, e);
}

/// clone / _to_copy between float types / alias: a copy (the graph has one float type).
bool copy_like(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 2, e)) return false;
  return unary(g, node, a[0], a.back(), kCopy, 0, 0, 0, e);
}

}  // namespace

void register_elementwise_ops(OpTable& t) {
  t["aten.add.Tensor"] = add_tensor;
  t["aten.sub.Tensor"] = sub_tensor;
  t["aten.mul.Tensor"] = mul_tensor;
  t["aten.div.Tensor"] = div_tensor;
  t["aten.div.Tensor_mode"] = div_tensor_mode;
  t["aten.pow.Tensor_Tensor"] = pow_tensor_tensor;
  t["aten.pow.Tensor_Scalar"] = pow_tensor_scalar;
  t["aten.maximum.default"] = maximum;
  t["aten.minimum.default"] = minimum;
  t["aten.add.Scalar"] = add_scalar;
  t["aten.sub.Scalar"] = sub_scalar;
  t["aten.mul.Scalar"] = mul_scalar;
  t["aten.div.Scalar"] = div_scalar;
  t["aten.rsub.Scalar"] = rsub_scalar;
  t["aten.remainder.Scalar"] = remainder_scalar;
  t["aten.remainder.Tensor"] = remainder_tensor;
  t["aten.relu.default"] = relu;
  t["aten.hardtanh.default"] = hardtanh;
  t["aten.clamp.default"] = clamp;
  t["aten.sigmoid.default"] = sigmoid;
  t["aten.tanh.default"] = tanh_op;
  t["aten.gelu.default"] = gelu;
  t["aten.hardswish.default"] = hardswish;
  t["aten.hardsigmoid.default"] = hardsigmoid;
  t["aten.silu.default"] = silu;
  t["aten.exp.default"] = exp_op;
  t["aten.log.default"] = log_op;
  t["aten.sqrt.default"] = sqrt_op;
  t["aten.rsqrt.default"] = rsqrt_op;
  t["aten.abs.default"] = abs_op;
  t["aten.neg.default"] = neg;
  t["aten.leaky_relu.default"] = leaky_relu;
  t["aten.elu.default"] = elu;
  t["aten.sin.default"] = sin_op;
  t["aten.cos.default"] = cos_op;
  t["aten.reciprocal.default"] = reciprocal;
  t["aten.erf.default"] = erf_op;
  t["aten.floor.default"] = floor_op;
  t["aten.ceil.default"] = ceil_op;
  t["aten.round.default"] = round_op;
  t["aten.sign.default"] = sign_op;
  t["aten.softplus.default"] = softplus;
  t["aten.clone.default"] = copy_like;
  t["aten.alias_copy.default"] = copy_like;
  t["et_vk.prepack.default"] = copy_like;  // ExecuTorch's payloads: a constant moved into a tensor
}

}  // namespace etkit_vulkan
