// Registration of the operator families (one translation unit each) into the name -> OpFn table.
#pragma once

#include <map>
#include <string>

#include "ops.h"

namespace etkit_vulkan {

using OpTable = std::map<std::string, OpFn>;

void register_elementwise_ops(OpTable& t);
void register_linear_algebra_ops(OpTable& t);
void register_shape_ops(OpTable& t);
void register_reduction_ops(OpTable& t);

}  // namespace etkit_vulkan
