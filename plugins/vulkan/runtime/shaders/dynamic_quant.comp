// Activation quantization computed at run time, then dequantized (int8 affine "fake quantization"):
// PT2E's choose_qparams.tensor -> quantize_per_tensor.tensor -> dequantize_per_tensor.tensor (one scale for
// the tensor) and torchao's choose_qparams_affine -> quantize_affine -> dequantize_affine with per-row
// blocks [1, .., 1, K]. The formulas are theirs, in float32:
//   lo = min(min(x), 0), hi = max(max(x), 0), scale = max((hi - lo) / (qmax - qmin), eps),
//   zp = clamp(qmin - round(lo / scale), qmin, qmax), q = clamp(round(x * (1 / scale)) + zp, qmin, qmax),
//   out = (q - zp) * scale,   round = half to even.
//   spec 6 MODE: 0 per-tensor statistics (one workgroup; writes min and max to binding 12),
//                1 per-tensor apply (reads them), 2 per row (statistics of each row of W elements inline)
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)
layout(set = 0, binding = 12) buffer Stats { float data[]; } stats;

layout(constant_id = 6) const int MODE = 0;

layout(push_constant) uniform PC {
  ivec4 sz;
  int qmin;
  int qmax;
  float eps;
} pc;

shared float s_min[64];
shared float s_max[64];

vec4 fake_quant(vec4 x, float mn, float mx) {
  float lo = min(mn, 0.0), hi = max(mx, 0.0);
  float scale = max((hi - lo) / float(pc.qmax - pc.qmin), pc.eps);
  float zp = clamp(float(pc.qmin) - roundEven(lo / scale), float(pc.qmin), float(pc.qmax));
  float inv = 1.0 / scale;
  vec4 q = clamp(roundEven(x * inv) + zp, vec4(float(pc.qmin)), vec4(float(pc.qmax)));
  return (q - zp) * scale;
}

void main() {
  if (MODE == 0) {
    // one workgroup of gl_WorkGroupSize.x invocations strides over every element
    uint lane = gl_LocalInvocationID.x;
    int total = pc.sz.x * pc.sz.y * pc.sz.z * pc.sz.w;
    float mn = uintBitsToFloat(0x7f800000u), mx = -mn;
    for (int l = int(lane); l < total; l += int(gl_WorkGroupSize.x)) {
      float v = t_in_linear(l, pc.sz);
      mn = min(mn, v);
      mx = max(mx, v);
    }
    s_min[lane] = mn;
    s_max[lane] = mx;
    barrier();
    if (lane == 0) {
      for (uint i = 1; i < gl_WorkGroupSize.x; ++i) {
        mn = min(mn, s_min[i]);
        mx = max(mx, s_max[i]);
      }
      stats.data[0] = mn;
      stats.data[1] = mx;
    }
    return;
  }
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  float mn, mx;
  if (MODE == 1) {
    mn = stats.data[0];
    mx = stats.data[1];
  } else {
    mn = uintBitsToFloat(0x7f800000u);
    mx = -mn;
    for (int x = 0; x < pc.sz.x; x += 4) {
      vec4 v = t_in_texel(ivec4(x, p.yzw), pc.sz);
      int n = min(4, pc.sz.x - x);
      [[unroll]] for (int i = 0; i < 4; ++i) {
        if (i < n) {
          mn = min(mn, v[i]);
          mx = max(mx, v[i]);
        }
      }
    }
  }
  t_out_put(p, pc.sz, fake_quant(t_in_texel(p, pc.sz), mn, mx));
}
