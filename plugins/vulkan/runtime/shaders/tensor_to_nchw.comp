// Tensor -> staging buffer (row-major elements, the tensor's float type). One invocation per texel.
#version 450
#include "common.glslh"

TENSOR(0, t_in, readonly)
TENSOR_READ_FNS(t_in)
layout(set = 0, binding = 12) writeonly buffer Staging { BUF_T data[]; } staging;

layout(push_constant) uniform PC { ivec4 sz; } pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  int base = linear_of_whcn(p, pc.sz);
  int n = min(4, pc.sz.x - p.x);
  vec4 v = t_in_texel(p, pc.sz);
  [[unroll]] for (int i = 0; i < 4; ++i) if (i < n) staging.data[base + i] = BUF_T(v[i]);
}
