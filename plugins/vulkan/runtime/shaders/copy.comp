// Writes a region of the output from the input through an affine index map: view, permute, expand,
// slice, select, squeeze/unsqueeze, clone, and one input of cat.
//
// The region is a box of the output in (W, H, C, N) coordinates: reg_off + [0, reg_sz). Its elements,
// in row-major order of the region's own N-d shape (rank nd <= 6, sizes nd_sz), map to the input
// element in_off + sum_d r_d * in_stride[d] (a linear index into the input). One invocation per output
// texel that touches the region; lanes outside the region keep the output's value (read-modify-write,
// so several dispatches may fill one output, each its own region).
#version 450
#include "common.glslh"

TENSOR(0, t_out, )
TENSOR(1, t_in, readonly)
TENSOR_READ_FNS(t_in)
TENSOR_READ_FNS(t_out)
TENSOR_WRITE_FNS(t_out)

layout(push_constant) uniform PC {
  ivec4 out_sz;
  ivec4 in_sz;
  ivec4 reg_off;
  ivec4 reg_sz;
  int nd;
  int in_off;
  int nd_sz[6];
  int in_stride[6];
} pc;

void main() {
  // grid: output texels covering the region, W from floor(off/4)*4 to the region's end
  int x0 = (pc.reg_off.x / 4) * 4;
  ivec3 g = ivec3(gl_GlobalInvocationID);
  if (x0 + g.x * 4 >= pc.reg_off.x + pc.reg_sz.x || g.y >= pc.reg_sz.y || g.z >= pc.reg_sz.z * pc.reg_sz.w) return;
  ivec4 p = ivec4(x0 + g.x * 4, g.y + pc.reg_off.y, g.z % pc.reg_sz.z + pc.reg_off.z, g.z / pc.reg_sz.z + pc.reg_off.w);
  bool whole = p.x >= pc.reg_off.x && p.x + 4 <= pc.reg_off.x + pc.reg_sz.x;
  vec4 v = whole ? vec4(0.0) : t_out_texel(p, pc.out_sz);
  // the first lane inside the region: decode its region coordinates once, then step with carries
  int first = max(p.x, pc.reg_off.x);
  int last = min(p.x + 4, pc.reg_off.x + pc.reg_sz.x);
  int rl = linear_of_whcn(ivec4(first - pc.reg_off.x, p.yzw - pc.reg_off.yzw), pc.reg_sz);
  int c[6];
  int idx = pc.in_off;
  for (int d = pc.nd - 1; d >= 0; --d) {
    c[d] = rl % pc.nd_sz[d];
    rl /= pc.nd_sz[d];
    idx += c[d] * pc.in_stride[d];
  }
  for (int x = first; x < last; ++x) {
    v[x - p.x] = t_in_linear(idx, pc.in_sz);
    int d = pc.nd - 1;
    ++c[d];
    idx += pc.in_stride[d];
    while (d > 0 && c[d] == pc.nd_sz[d]) {
      idx -= c[d] * pc.in_stride[d];
      c[d] = 0;
      --d;
      ++c[d];
      idx += pc.in_stride[d];
    }
  }
  t_out_put(p, pc.out_sz, v);
}
