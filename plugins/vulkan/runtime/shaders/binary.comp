// out = a OP b with broadcasting (size-1 dimensions of a or b repeat), or out = a OP scalar.
//   spec 6 OP: 0 add (a + alpha*b), 1 sub (a - alpha*b), 2 mul, 3 div, 4 pow, 5 maximum, 6 minimum,
//              7 rsub (b - alpha*a), 8 floor_divide, 9 remainder (Python sign)
//   spec 7 B_SCALAR: 1 when b is pc.scalar instead of tensor slot 2
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_a, readonly)
TENSOR(2, t_b, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_a)
TENSOR_READ_FNS(t_b)

layout(constant_id = 6) const int OP = 0;
layout(constant_id = 7) const int B_SCALAR = 0;

layout(push_constant) uniform PC {
  ivec4 out_sz;
  ivec4 a_sz;
  ivec4 b_sz;
  float alpha;
  float scalar;
} pc;

/// torch.pow semantics where GLSL's pow is undefined: negative bases with integral exponents, 0^0 = 1.
float safe_pow(float a, float b) {
  if (b == 0.0) return 1.0;
  float p = pow(abs(a), b);
  if (a < 0.0) {
    if (fract(b) != 0.0) return uintBitsToFloat(0x7fc00000u);  // NaN, as torch gives
    if (mod(b, 2.0) == 1.0) p = -p;
  }
  return p;
}

float apply(float a, float b) {
  switch (OP) {
    case 0: return a + pc.alpha * b;
    case 1: return a - pc.alpha * b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return safe_pow(a, b);
    case 5: return (isnan(a) || isnan(b)) ? a + b : max(a, b);
    case 6: return (isnan(a) || isnan(b)) ? a + b : min(a, b);
    case 7: return b - pc.alpha * a;
    case 8: return floor(a / b);
    case 9: return a - b * floor(a / b);
  }
  return 0.0;
}

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.out_sz, p)) return;
  vec4 a, b;
  if (pc.a_sz == pc.out_sz) {
    a = t_a_texel(p, pc.a_sz);
  } else {
    [[unroll]] for (int i = 0; i < 4; ++i) a[i] = t_a_at(broadcast_position(p + ivec4(i, 0, 0, 0), pc.a_sz), pc.a_sz);
  }
  if (B_SCALAR == 1) {
    b = vec4(pc.scalar);
  } else if (pc.b_sz == pc.out_sz) {
    b = t_b_texel(p, pc.b_sz);
  } else {
    [[unroll]] for (int i = 0; i < 4; ++i) b[i] = t_b_at(broadcast_position(p + ivec4(i, 0, 0, 0), pc.b_sz), pc.b_sz);
  }
  vec4 r;
  [[unroll]] for (int i = 0; i < 4; ++i) r[i] = apply(a[i], b[i]);
  t_out_put(p, pc.out_sz, r);
}
