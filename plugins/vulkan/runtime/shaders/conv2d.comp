// 2-D convolution (aten.convolution, not transposed), with optional bias and a fused clamp.
// Input N x IC x IH x IW, weight OC x IC/groups x KH x KW (row-major, binding 12), bias OC (binding 13),
// output N x OC x OH x OW. One invocation computes four neighbouring output columns of one row.
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)
layout(set = 0, binding = 12) readonly buffer Weight { BUF_T data[]; } weight;
layout(set = 0, binding = 13) readonly buffer Bias { BUF_T data[]; } bias;

layout(push_constant) uniform PC {
  ivec4 out_sz;   // (OW, OH, OC, N)
  ivec4 in_sz;    // (IW, IH, IC, N)
  ivec4 k_s;      // (KW, KH, stride_x, stride_y)
  ivec4 pad_dil;  // (pad_x, pad_y, dilation_x, dilation_y)
  int groups;
  int has_bias;
  float out_min;
  float out_max;
} pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.out_sz, p)) return;
  int oc = p.z;
  int n = p.w;
  int kw = pc.k_s.x, kh = pc.k_s.y, sx = pc.k_s.z, sy = pc.k_s.w;
  int icg = pc.in_sz.z / pc.groups;
  int ocg = pc.out_sz.z / pc.groups;
  int ic0 = (oc / ocg) * icg;
  vec4 acc = vec4(pc.has_bias != 0 ? float(bias.data[oc]) : 0.0);
  int ix0 = p.x * sx - pc.pad_dil.x;
  for (int c = 0; c < icg; ++c) {
    int wbase = (oc * icg + c) * kh * kw;
    for (int ky = 0; ky < kh; ++ky) {
      int iy = p.y * sy - pc.pad_dil.y + ky * pc.pad_dil.w;
      if (iy < 0 || iy >= pc.in_sz.y) continue;
      for (int kx = 0; kx < kw; ++kx) {
        float w = float(weight.data[wbase + ky * kw + kx]);
        int ix = ix0 + kx * pc.pad_dil.z;
        [[unroll]] for (int i = 0; i < 4; ++i) {
          int x = ix + i * sx;
          if (x >= 0 && x < pc.in_sz.x) acc[i] += w * t_in_at(ivec4(x, iy, ic0 + c, n), pc.in_sz);
        }
      }
    }
  }
  t_out_put(p, pc.out_sz, clamp(acc, vec4(pc.out_min), vec4(pc.out_max)));
}
