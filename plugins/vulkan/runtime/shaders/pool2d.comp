// 2-D pooling over H and W of an (N, C, H, W) tensor.
//   spec 6 MODE: 0 max (aten.max_pool2d_with_indices, values only), 1 average (aten.avg_pool2d),
//                2 adaptive average (aten._adaptive_avg_pool2d: window [floor(i*I/O), ceil((i+1)*I/O)))
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)

layout(constant_id = 6) const int MODE = 0;

layout(push_constant) uniform PC {
  ivec4 out_sz;
  ivec4 in_sz;
  ivec4 k_s;      // (KW, KH, stride_x, stride_y)
  ivec4 pad_dil;  // (pad_x, pad_y, dilation_x, dilation_y)
  int count_include_pad;
  int divisor_override;  // 0: none
} pc;

float pool_one(int ox, int oy, int c, int n) {
  int x0, x1, y0, y1;
  if (MODE == 2) {
    x0 = (ox * pc.in_sz.x) / pc.out_sz.x;
    x1 = ((ox + 1) * pc.in_sz.x + pc.out_sz.x - 1) / pc.out_sz.x;
    y0 = (oy * pc.in_sz.y) / pc.out_sz.y;
    y1 = ((oy + 1) * pc.in_sz.y + pc.out_sz.y - 1) / pc.out_sz.y;
    float s = 0.0;
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) s += t_in_at(ivec4(x, y, c, n), pc.in_sz);
    return s / float((y1 - y0) * (x1 - x0));
  }
  int kw = pc.k_s.x, kh = pc.k_s.y;
  int bx = ox * pc.k_s.z - pc.pad_dil.x;
  int by = oy * pc.k_s.w - pc.pad_dil.y;
  if (MODE == 0) {
    float m = uintBitsToFloat(0xff800000u);  // -inf
    for (int ky = 0; ky < kh; ++ky) {
      int y = by + ky * pc.pad_dil.w;
      if (y < 0 || y >= pc.in_sz.y) continue;
      for (int kx = 0; kx < kw; ++kx) {
        int x = bx + kx * pc.pad_dil.z;
        if (x < 0 || x >= pc.in_sz.x) continue;
        float v = t_in_at(ivec4(x, y, c, n), pc.in_sz);
        if (v > m || isnan(v)) m = v;
      }
    }
    return m;
  }
  // average: the window is clipped to the padded input; count_include_pad counts padding cells
  int hend = min(by + kh, pc.in_sz.y + pc.pad_dil.y);
  int wend = min(bx + kw, pc.in_sz.x + pc.pad_dil.x);
  int pool_size = (hend - by) * (wend - bx);
  int ys = max(by, 0), xs = max(bx, 0);
  int ye = min(hend, pc.in_sz.y), xe = min(wend, pc.in_sz.x);
  float s = 0.0;
  for (int y = ys; y < ye; ++y)
    for (int x = xs; x < xe; ++x) s += t_in_at(ivec4(x, y, c, n), pc.in_sz);
  int divisor = pc.divisor_override != 0 ? pc.divisor_override
              : (pc.count_include_pad != 0 ? pool_size : (ye - ys) * (xe - xs));
  return s / float(divisor);
}

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.out_sz, p)) return;
  vec4 r = vec4(0.0);
  [[unroll]] for (int i = 0; i < 4; ++i) {
    if (p.x + i < pc.out_sz.x) r[i] = pool_one(p.x + i, p.y, p.z, p.w);
  }
  t_out_put(p, pc.out_sz, r);
}
