// Softmax along one dimension (aten._softmax, aten._log_softmax, aten._safe_softmax).
//   spec 6 MODE: 0 softmax, 1 log_softmax, 2 safe softmax (a row that is all -inf gives 0, not NaN)
// One invocation computes the four lanes of an output texel: along W, the lanes share one row; along
// another dimension, each lane is its own row.
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)

layout(constant_id = 6) const int MODE = 0;

layout(push_constant) uniform PC {
  ivec4 sz;
  ivec4 step;  // unit vector of the softmax dimension in (W, H, C, N)
  int len;     // size of that dimension
} pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  vec4 r = vec4(0.0);
  if (pc.step.x == 1) {
    ivec4 row = ivec4(0, p.yzw);
    float m = uintBitsToFloat(0xff800000u);
    for (int i = 0; i < pc.len; ++i) m = max(m, t_in_at(row + ivec4(i, 0, 0, 0), pc.sz));
    float s = 0.0;
    bool dead = isinf(m) && m < 0.0;
    for (int i = 0; i < pc.len; ++i) s += exp(t_in_at(row + ivec4(i, 0, 0, 0), pc.sz) - m);
    vec4 x = t_in_texel(p, pc.sz);
    [[unroll]] for (int i = 0; i < 4; ++i) {
      if (MODE == 1) r[i] = x[i] - m - log(s);
      else r[i] = (MODE == 2 && dead) ? 0.0 : exp(x[i] - m) / s;
    }
  } else {
    ivec4 row = p - pc.step * (p.x * pc.step.x + p.y * pc.step.y + p.z * pc.step.z + p.w * pc.step.w);  // coordinate 0
    [[unroll]] for (int i = 0; i < 4; ++i) {
      if (p.x + i >= pc.sz.x) break;
      ivec4 q = row + ivec4(i, 0, 0, 0);
      float m = uintBitsToFloat(0xff800000u);
      for (int j = 0; j < pc.len; ++j) m = max(m, t_in_at(q + pc.step * j, pc.sz));
      float s = 0.0;
      for (int j = 0; j < pc.len; ++j) s += exp(t_in_at(q + pc.step * j, pc.sz) - m);
      float x = t_in_at(p + ivec4(i, 0, 0, 0), pc.sz);
      bool dead = isinf(m) && m < 0.0;
      if (MODE == 1) r[i] = x - m - log(s);
      else r[i] = (MODE == 2 && dead) ? 0.0 : exp(x - m) / s;
    }
  }
  t_out_put(p, pc.sz, r);
}
