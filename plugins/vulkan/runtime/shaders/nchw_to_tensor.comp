// Staging buffer (row-major elements, the tensor's float type) -> tensor. One invocation per texel.
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR_WRITE_FNS(t_out)
layout(set = 0, binding = 12) readonly buffer Staging { BUF_T data[]; } staging;

layout(push_constant) uniform PC { ivec4 sz; } pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  int base = linear_of_whcn(p, pc.sz);
  int n = min(4, pc.sz.x - p.x);
  vec4 v = vec4(0.0);
  [[unroll]] for (int i = 0; i < 4; ++i) if (i < n) v[i] = float(staging.data[base + i]);
  t_out_put(p, pc.sz, v);
}
