// Helpers the operator implementations share: argument access with messages, output values, push
// constants, and the standard "one invocation per output texel" work size.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "graph.h"

namespace etkit_vulkan {

/// Push-constant bytes in std430 order (ivec4 first, then scalars), as the shaders declare them.
class Push {
 public:
  Push& ivec4(const std::array<int32_t, 4>& v) { return raw(v.data(), 16); }
  Push& i32(int32_t v) { return raw(&v, 4); }
  Push& f32(float v) { return raw(&v, 4); }
  void apply(Dispatch& d) const {
    d.push = bytes_;
    d.push_size = static_cast<uint32_t>(size_);
  }

 private:
  Push& raw(const void* p, size_t n) {
    if (size_ + n <= bytes_.size()) std::memcpy(bytes_.data() + size_, p, n);
    size_ += n;
    return *this;
  }
  std::array<uint8_t, kPushConstantBytes> bytes_{};
  size_t size_ = 0;
};

/// The output tensor value of a call: its last argument, or the first tensor of a ValueList output.
inline int output_value(const Graph& g, const std::vector<int>& args) {
  if (args.empty()) return -1;
  const int out = args.back();
  const Value& v = g.value(out);
  if (v.kind == Value::Kind::ValueList && !v.items.empty()) return v.items[0];
  return out;
}

inline bool need_args(const std::vector<int>& args, size_t n, std::string* error) {
  if (args.size() < n) {
    *error = "expects " + std::to_string(n) + " arguments (inputs and output), got " + std::to_string(args.size());
    return false;
  }
  return true;
}

inline bool need_float_tensor(Graph& g, int v, const char* what, std::string* error) {
  if (!g.is_tensor(v) || g.tensor_of(v).kind != VTensor::Kind::Float) {
    *error = std::string(what) + " must be a float tensor";
    return false;
  }
  return true;
}

/// Normalises a possibly negative dimension index for rank `rank`.
inline bool norm_dim(int64_t dim, size_t rank, int64_t* out, std::string* error) {
  const int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= (r == 0 ? 1 : r)) {
    *error = "dimension " + std::to_string(dim) + " is out of range for rank " + std::to_string(rank);
    return false;
  }
  *out = dim < 0 ? dim + r : dim;
  return true;
}

/// Index 0..3 in (W, H, C, N) of dimension `dim` of a rank-`rank` tensor (3 for folded leading dims).
/// A window parameter list (kernel size, stride, padding, dilation, output size) from the payload: every value
/// in [lo, 2^20], so the size arithmetic of pooling and convolution cannot overflow.
inline bool window_params(const std::vector<int64_t>& values, int64_t lo, const char* what, std::string* error) {
  for (int64_t v : values) {
    if (v < lo || v > (int64_t{1} << 20)) {
      *error = std::string(what) + " value " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", 2^20]";
      return false;
    }
  }
  return true;
}

inline int whcn_axis(int64_t dim, size_t rank) {
  const int64_t k = static_cast<int64_t>(rank) - 1 - dim;
  return k > 3 ? 3 : static_cast<int>(k);
}

inline std::array<int32_t, kMaxSpecConstants> spec_with(int op0 = 0, int op1 = 0) {
  std::array<int32_t, kMaxSpecConstants> s{};
  s[kFirstOpConstant] = op0;
  s[kFirstOpConstant + 1] = op1;
  return s;
}

}  // namespace etkit_vulkan
