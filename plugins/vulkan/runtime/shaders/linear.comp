// out[r, j] = sum_k in[r, k] * weight[j, k] + bias[j], then a fused clamp (aten.linear; rows r are every
// index of the leading dimensions). One invocation computes a 4 x 4 tile: four consecutive rows (along
// H, within one (C, N)) by four neighbouring outputs j. Grid: (ceil(N/4), ceil(H/4), C * N).
//
// Weights (binding 12), in blocks of four outputs jb = j / 4, one entry per k:
//   spec 6 WEIGHT_BITS = 0: vec4 (BUF4_T) of the four outputs' float weights;
//   WEIGHT_BITS = 8: a uint of four int8 weights (output 4jb+i in byte i);
//   WEIGHT_BITS = 4: a uint per pair of k: the four int4 weights of k = 2q in bits 0..15 (output
//                    4jb+i in bits 4i..4i+3), those of k = 2q+1 in bits 16..31.
// Quantized weights are symmetric: w = q * scale, scale (float32 vec4 over the block, binding 14) per
// (jb, k / group_size). Bias (binding 13): vec4 per block.
#version 450
#include "common.glslh"

TENSOR(0, t_out, writeonly)
TENSOR(1, t_in, readonly)
TENSOR_WRITE_FNS(t_out)
TENSOR_READ_FNS(t_in)
layout(set = 0, binding = 12) readonly buffer Weight { BUF4_T data[]; } weight;
layout(set = 0, binding = 12) readonly buffer WeightQ { uint data[]; } weight_q;
layout(set = 0, binding = 13) readonly buffer Bias { BUF4_T data[]; } bias;
layout(set = 0, binding = 14) readonly buffer Scales { vec4 data[]; } scales;

layout(constant_id = 6) const int WEIGHT_BITS = 0;

layout(push_constant) uniform PC {
  ivec4 out_sz;  // (N, H, C, N')
  ivec4 in_sz;   // (K, H, C, N')
  int has_bias;
  int group_size;
  float out_min;
  float out_max;
} pc;

vec4 unpack_int8(uint word) {
  return vec4(bitfieldExtract(int(word), 0, 8), bitfieldExtract(int(word), 8, 8), bitfieldExtract(int(word), 16, 8),
              bitfieldExtract(int(word), 24, 8));
}

vec4 unpack_int4(uint word, int shift) {
  int w = int(word);
  return vec4(bitfieldExtract(w, shift, 4), bitfieldExtract(w, shift + 4, 4), bitfieldExtract(w, shift + 8, 4),
              bitfieldExtract(w, shift + 12, 4));
}

/// Weights of outputs 4*jb .. 4*jb+3 at input index k.
vec4 weights_at(int jb, int k) {
  int kdim = pc.in_sz.x;
  if (WEIGHT_BITS == 0) return vec4(weight.data[jb * kdim + k]);
  vec4 s = scales.data[jb * (kdim / pc.group_size) + k / pc.group_size];
  if (WEIGHT_BITS == 8) return unpack_int8(weight_q.data[jb * kdim + k]) * s;
  return unpack_int4(weight_q.data[jb * ((kdim + 1) / 2) + k / 2], (k & 1) * 16) * s;
}

void main() {
  ivec3 g = ivec3(gl_GlobalInvocationID);
  int rows = pc.out_sz.y;
  if (g.x * 4 >= pc.out_sz.x || g.y * 4 >= rows || g.z >= pc.out_sz.z * pc.out_sz.w) return;
  int jb = g.x, h0 = g.y * 4;
  int c = g.z % pc.out_sz.z, n = g.z / pc.out_sz.z;
  int kdim = pc.in_sz.x;
  vec4 b = pc.has_bias != 0 ? vec4(bias.data[jb]) : vec4(0.0);
  vec4 acc[4] = vec4[4](b, b, b, b);  // acc[r]: row h0 + r, lanes = four outputs
  int nrows = min(4, rows - h0);
  for (int k4 = 0; k4 < kdim; k4 += 4) {
    vec4 w0 = weights_at(jb, k4);
    vec4 w1 = k4 + 1 < kdim ? weights_at(jb, k4 + 1) : vec4(0.0);
    vec4 w2 = k4 + 2 < kdim ? weights_at(jb, k4 + 2) : vec4(0.0);
    vec4 w3 = k4 + 3 < kdim ? weights_at(jb, k4 + 3) : vec4(0.0);
    [[unroll]] for (int r = 0; r < 4; ++r) {
      if (r < nrows) {
        vec4 x = t_in_texel(ivec4(k4, h0 + r, c, n), pc.in_sz);
        acc[r] += x.x * w0 + x.y * w1 + x.z * w2 + x.w * w3;
      }
    }
  }
  [[unroll]] for (int r = 0; r < 4; ++r) {
    if (r < nrows) t_out_put(ivec4(jb * 4, h0 + r, c, n), pc.out_sz, clamp(acc[r], vec4(pc.out_min), vec4(pc.out_max)));
  }
}
