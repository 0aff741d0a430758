// A float tensor from int32 values at binding 14 (aten._to_copy of an integer tensor; the host
// narrows int64 inputs to int32 when it stages them).
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR_WRITE_FNS(t_out)
layout(set = 0, binding = 14) readonly buffer Values { int data[]; } values;

layout(push_constant) uniform PC { ivec4 sz; } pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  int base = linear_of_whcn(p, pc.sz);
  vec4 r = vec4(0.0);
  [[unroll]] for (int i = 0; i < 4; ++i) if (p.x + i < pc.sz.x) r[i] = float(values.data[base + i]);
  t_out_put(p, pc.sz, r);
}
