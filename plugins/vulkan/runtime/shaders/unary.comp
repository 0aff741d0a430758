// out = f(x), elementwise.
//   spec 6 OP: 0 relu, 1 clamp(p0, p1), 2 sigmoid, 3 tanh, 4 gelu (erf), 5 gelu (tanh), 6 hardswish,
//              7 hardsigmoid, 8 silu, 9 exp, 10 log, 11 sqrt, 12 rsqrt, 13 abs, 14 neg, 15 leaky_relu(p0),
//              16 elu(alpha p0, scale p1, input_scale p2), 17 sin, 18 cos, 19 reciprocal, 20 erf, 21 floor,
//              22 ceil, 23 round (half to even), 24 sign, 25 copy, 26 softplus(beta p0, threshold p1)
#version 450
#include "common.glslh"
#include "math.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)

layout(constant_id = 6) const int OP = 0;

layout(push_constant) uniform PC {
  ivec4 sz;
  float p0;
  float p1;
  float p2;
} pc;

float apply(float x) {
  switch (OP) {
    case 0: return x > 0.0 ? x : (isnan(x) ? x : 0.0);
    case 1: return isnan(x) ? x : min(max(x, pc.p0), pc.p1);
    case 2: return 1.0 / (1.0 + exp(-x));
    case 3: return precise_tanh(x);
    case 4: return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752));
    case 5: return 0.5 * x * (1.0 + precise_tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    case 6: return x * min(max(x + 3.0, 0.0), 6.0) / 6.0;
    case 7: return min(max(x + 3.0, 0.0), 6.0) / 6.0;
    case 8: return x / (1.0 + exp(-x));
    case 9: return exp(x);
    case 10: return log(x);
    case 11: return sqrt(x);
    case 12: return inversesqrt(x);
    case 13: return abs(x);
    case 14: return -x;
    case 15: return x > 0.0 ? x : x * pc.p0;
    case 16: return x > 0.0 ? pc.p1 * x : pc.p1 * pc.p0 * (exp(x * pc.p2) - 1.0);
    case 17: return sin(x);
    case 18: return cos(x);
    case 19: return 1.0 / x;
    case 20: return erf_approx(x);
    case 21: return floor(x);
    case 22: return ceil(x);
    case 23: return roundEven(x);
    case 24: return isnan(x) ? 0.0 : sign(x);
    case 25: return x;
    case 26: return x * pc.p0 > pc.p1 ? x : log(1.0 + exp(x * pc.p0)) / pc.p0;
  }
  return 0.0;
}

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  vec4 x = t_in_texel(p, pc.sz);
  vec4 r;
  [[unroll]] for (int i = 0; i < 4; ++i) r[i] = apply(x[i]);
  t_out_put(p, pc.sz, r);
}
