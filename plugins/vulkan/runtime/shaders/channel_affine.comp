// out = x * scale[c] + shift[c] along one channel dimension (batch norm in inference, folded by the
// host into scale and shift, float32 at bindings 12 and 13), then a fused clamp.
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)
layout(set = 0, binding = 12) readonly buffer Scale { float data[]; } scale;
layout(set = 0, binding = 13) readonly buffer Shift { float data[]; } shift;

layout(push_constant) uniform PC {
  ivec4 sz;
  int axis;  // channel dimension in (W, H, C, N): 0..3
  float out_min;
  float out_max;
} pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  vec4 x = t_in_texel(p, pc.sz);
  vec4 r;
  [[unroll]] for (int i = 0; i < 4; ++i) {
    ivec4 q = p + ivec4(i, 0, 0, 0);
    int c = min(q[pc.axis], pc.sz[pc.axis] - 1);
    r[i] = clamp(x[i] * scale.data[c] + shift.data[c], pc.out_min, pc.out_max);
  }
  t_out_put(p, pc.sz, r);
}
