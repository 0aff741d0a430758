// 2-D convolution computing a 4 x 4 tile per invocation: four neighbouring output columns of four
// consecutive output channels, so each input value loaded feeds four channels and each weight load
// (a vec4 of four channels) feeds four columns. For groups == 1 or output channels per group a
// multiple of 4; depthwise and other grouped convolutions use conv2d.comp.
// Weights at binding 12: vec4 per (channel block ob, input channel ic of the group, ky, kx), channels
// 4*ob .. 4*ob+3 (zero past OC); bias at binding 13: vec4 per channel block. Grid: (ceil(OW/4), OH,
// ceil(OC/4) * N).
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)
layout(set = 0, binding = 12) readonly buffer Weight { BUF4_T data[]; } weight;
layout(set = 0, binding = 13) readonly buffer Bias { BUF4_T data[]; } bias;

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
  ivec3 g = ivec3(gl_GlobalInvocationID);
  int blocks = (pc.out_sz.z + 3) / 4;
  if (g.x * 4 >= pc.out_sz.x || g.y >= pc.out_sz.y || g.z >= blocks * pc.out_sz.w) return;
  int ob = g.z % blocks, n = g.z / blocks;
  int ox = g.x * 4, oy = g.y;
  int kw = pc.k_s.x, kh = pc.k_s.y, sx = pc.k_s.z, sy = pc.k_s.w;
  int dx = pc.pad_dil.z, dy = pc.pad_dil.w;
  int icg = pc.in_sz.z / pc.groups;
  int ocg = pc.out_sz.z / pc.groups;
  int ic0 = ((ob * 4) / ocg) * icg;
  vec4 b = pc.has_bias != 0 ? vec4(bias.data[ob]) : vec4(0.0);
  vec4 acc0 = b, acc1 = b, acc2 = b, acc3 = b;  // acc_i: output column ox+i, lanes = 4 channels
  int ix0 = ox * sx - pc.pad_dil.x;
  bool pointwise = kw == 1 && kh == 1 && sx == 1 && sy == 1 && pc.pad_dil.x == 0 && pc.pad_dil.y == 0;
  int wi = ob * icg * kh * kw;
  for (int c = 0; c < icg; ++c) {
    if (pointwise) {
      vec4 x = t_in_texel(ivec4(ox, oy, ic0 + c, n), pc.in_sz);
      vec4 w = vec4(weight.data[wi++]);
      acc0 += x.x * w;
      acc1 += x.y * w;
      acc2 += x.z * w;
      acc3 += x.w * w;
      continue;
    }
    for (int ky = 0; ky < kh; ++ky) {
      int iy = oy * sy - pc.pad_dil.y + ky * dy;
      if (iy < 0 || iy >= pc.in_sz.y) {
        wi += kw;
        continue;
      }
      for (int kx = 0; kx < kw; ++kx) {
        vec4 w = vec4(weight.data[wi++]);
        int x = ix0 + kx * dx;
        ivec4 q = ivec4(x, iy, ic0 + c, n);
        if (x >= 0 && x < pc.in_sz.x) acc0 += t_in_at(q, pc.in_sz) * w;
        q.x += sx;
        if (q.x >= 0 && q.x < pc.in_sz.x) acc1 += t_in_at(q, pc.in_sz) * w;
        q.x += sx;
        if (q.x >= 0 && q.x < pc.in_sz.x) acc2 += t_in_at(q, pc.in_sz) * w;
        q.x += sx;
        if (q.x >= 0 && q.x < pc.in_sz.x) acc3 += t_in_at(q, pc.in_sz) * w;
      }
    }
  }
  vec4 lo = vec4(pc.out_min), hi = vec4(pc.out_max);
  acc0 = clamp(acc0, lo, hi);
  acc1 = clamp(acc1, lo, hi);
  acc2 = clamp(acc2, lo, hi);
  acc3 = clamp(acc3, lo, hi);
  [[unroll]] for (int j = 0; j < 4; ++j) {
    int oc = ob * 4 + j;
    if (oc < pc.out_sz.z) t_out_put(ivec4(ox, oy, oc, n), pc.out_sz, vec4(acc0[j], acc1[j], acc2[j], acc3[j]));
  }
}
