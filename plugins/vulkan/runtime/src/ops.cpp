#include "ops.h"

#include "ops_impl.h"

namespace etkit_vulkan {

namespace {
const OpTable& table() {
  static const OpTable t = [] {
    OpTable m;
    register_elementwise_ops(m);
    register_linear_algebra_ops(m);
    register_shape_ops(m);
    register_reduction_ops(m);
    return m;
  }();
  return t;
}
}  // namespace

OpFn find_op(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;
}

}  // namespace etkit_vulkan
