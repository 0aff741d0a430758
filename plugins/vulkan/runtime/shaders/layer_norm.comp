// aten.layer_norm over the last dimension: out = (x - mean) / sqrt(var + eps) * weight + bias, with the
// biased variance of each row. Weight and bias (length W, optional) at bindings 12 and 13.
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)
layout(set = 0, binding = 12) readonly buffer Weight { BUF_T data[]; } weight;
layout(set = 0, binding = 13) readonly buffer Bias { BUF_T data[]; } bias;

layout(push_constant) uniform PC {
  ivec4 sz;
  float eps;
  int has_weight;
  int has_bias;
} pc;

void main() {
  ivec4 p;
  if (!texel_of_invocation(pc.sz, p)) return;
  int len = pc.sz.x;
  float mean = 0.0;
  for (int x = 0; x < len; x += 4) {
    vec4 v = t_in_texel(ivec4(x, p.yzw), pc.sz);
    int n = min(4, len - x);
    [[unroll]] for (int i = 0; i < 4; ++i) if (i < n) mean += v[i];
  }
  mean /= float(len);
  float var = 0.0;
  for (int x = 0; x < len; x += 4) {
    vec4 v = t_in_texel(ivec4(x, p.yzw), pc.sz);
    int n = min(4, len - x);
    [[unroll]] for (int i = 0; i < 4; ++i) if (i < n) var += (v[i] - mean) * (v[i] - mean);
  }
  float rstd = inversesqrt(var / float(len) + pc.eps);
  vec4 x = t_in_texel(p, pc.sz);
  vec4 r;
  [[unroll]] for (int i = 0; i < 4; ++i) {
    int j = min(p.x + i, len - 1);
    float y = (x[i] - mean) * rstd;
    if (pc.has_weight != 0) y *= float(weight.data[j]);
    if (pc.has_bias != 0) y += float(bias.data[j]);
    r[i] = y;
  }
  t_out_put(p, pc.sz, r);
}
