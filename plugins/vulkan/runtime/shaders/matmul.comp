// out[b, m, n] = sum_k a[b, m, k] * b[b, k, n] (aten.bmm, aten.mm; both operands activations). Batch
// dimensions are C and N of the (W, H, C, N) view; a size-1 batch dimension of one operand broadcasts.
// One invocation computes a 4 x 4 tile: rows m0..m0+3 by columns n0..n0+3.
// Grid: (ceil(N/4), ceil(M/4), B1 * B0).
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_a, readonly)
TENSOR(2, t_b, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_a)
TENSOR_READ_FNS(t_b)

layout(push_constant) uniform PC {
  ivec4 out_sz;  // (N, M, B1, B0)
  ivec4 a_sz;    // (K, M, ., .)
  ivec4 b_sz;    // (N, K, ., .)
} pc;

void main() {
  ivec3 g = ivec3(gl_GlobalInvocationID);
  int m_rows = pc.out_sz.y;
  if (g.x * 4 >= pc.out_sz.x || g.y * 4 >= m_rows || g.z >= pc.out_sz.z * pc.out_sz.w) return;
  ivec2 batch = ivec2(g.z % pc.out_sz.z, g.z / pc.out_sz.z);
  ivec2 ab = min(batch, pc.a_sz.zw - 1);
  ivec2 bb = min(batch, pc.b_sz.zw - 1);
  int n0 = g.x * 4, m0 = g.y * 4;
  int kdim = pc.a_sz.x;
  int nrows = min(4, m_rows - m0);
  vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
  for (int k4 = 0; k4 < kdim; k4 += 4) {
    vec4 b0 = t_b_texel(ivec4(n0, k4, bb), pc.b_sz);
    vec4 b1 = k4 + 1 < kdim ? t_b_texel(ivec4(n0, k4 + 1, bb), pc.b_sz) : vec4(0.0);
    vec4 b2 = k4 + 2 < kdim ? t_b_texel(ivec4(n0, k4 + 2, bb), pc.b_sz) : vec4(0.0);
    vec4 b3 = k4 + 3 < kdim ? t_b_texel(ivec4(n0, k4 + 3, bb), pc.b_sz) : vec4(0.0);
    [[unroll]] for (int r = 0; r < 4; ++r) {
      if (r < nrows) {
        vec4 a = t_a_texel(ivec4(k4, m0 + r, ab), pc.a_sz);
        acc[r] += a.x * b0 + a.y * b1 + a.z * b2 + a.w * b3;
      }
    }
  }
  [[unroll]] for (int r = 0; r < 4; ++r) {
    if (r < nrows) t_out_put(ivec4(n0, m0 + r, batch), pc.out_sz, acc[r]);
  }
}
