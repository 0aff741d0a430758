// aten.embedding: out[..., j] = table[index[...], j]. Table V x D row-major at binding 12; indices int32
// at binding 14 (one per output row); an index outside [0, V) reads row 0 (the host validates indices it
// is given as inputs, so this only guards computed ones).
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR_WRITE_FNS(t_out)
layout(set = 0, binding = 12) readonly buffer Table { BUF_T data[]; } table;
layout(set = 0, binding = 14) readonly buffer Indices { int data[]; } indices;

layout(push_constant) uniform PC {
  ivec4 out_sz;  // (D, rows...)
  int vocab;
} pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.out_sz, p)) return;
  int d = pc.out_sz.x;
  int row = linear_of_whcn(ivec4(0, p.yzw), pc.out_sz) / d;
  int idx = indices.data[row];
  if (idx < 0 || idx >= pc.vocab) idx = 0;
  vec4 r = vec4(0.0);
  [[unroll]] for (int i = 0; i < 4; ++i) if (p.x + i < d) r[i] = float(table.data[idx * d + p.x + i]);
  t_out_put(p, pc.out_sz, r);
}
