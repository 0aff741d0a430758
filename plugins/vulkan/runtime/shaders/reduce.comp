// Reduction over a set of dimensions (aten.mean.dim, aten.sum.dim_IntList, aten.amax, aten.amin).
// The output is viewed with the input's rank, reduced dimensions of size 1 (`aligned`), which has
// the same element order whether or not keepdim dropped them.
//   spec 6 OP: 0 sum, 1 mean, 2 max, 3 min
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)

layout(constant_id = 6) const int OP = 0;

layout(push_constant) uniform PC {
  ivec4 out_sz;
  ivec4 in_sz;
  ivec4 aligned;  // the output's sizes in the input's (W, H, C, N) frame
} pc;

float reduce_one(ivec4 base) {
  ivec4 ext = pc.in_sz / pc.aligned;  // reduced dims: the input extent; kept dims: 1
  float acc = OP == 2 ? uintBitsToFloat(0xff800000u) : (OP == 3 ? uintBitsToFloat(0x7f800000u) : 0.0);
  for (int n = 0; n < ext.w; ++n)
    for (int c = 0; c < ext.z; ++c)
      for (int h = 0; h < ext.y; ++h)
        for (int w = 0; w < ext.x; ++w) {
          float v = t_in_at(base + ivec4(w, h, c, n), pc.in_sz);
          if (OP <= 1) acc += v;
          else if (isnan(v) || isnan(acc)) acc = v + acc;
          else acc = OP == 2 ? max(acc, v) : min(acc, v);
        }
  if (OP == 1) acc /= float(ext.x * ext.y * ext.z * ext.w);
  return acc;
}

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.out_sz, p)) return;
  vec4 r = vec4(0.0);
  int l0 = linear_of_whcn(p, pc.out_sz);
  [[unroll]] for (int i = 0; i < 4; ++i) {
    if (p.x + i < pc.out_sz.x) {
      ivec4 a = whcn_of_linear(l0 + i, pc.aligned);
      // kept dims index the input directly; reduced dims (aligned size 1) start at 0
      r[i] = reduce_one(a);
    }
  }
  t_out_put(p, pc.out_sz, r);
}
