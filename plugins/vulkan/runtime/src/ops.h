// Operator implementations: each turns one OperatorCall into dispatches on a Graph.
//
// An implementation receives the node index and the call's argument value ids (the ATen schema's
// arguments, then the output). It validates what it can at build time, adds its dispatches, and sets
// Node::configure to compute the output's sizes and the dispatches' parameters from the inputs'
// current sizes (called once at build with the upper bounds, and again whenever input shapes change).
#pragma once

#include <string>
#include <vector>

#include "graph.h"

namespace etkit_vulkan {

using OpFn = bool (*)(Graph& g, int node, const std::vector<int>& args, std::string* error);

/// The implementation of operator `name` ("aten.add.Tensor"), or null.
OpFn find_op(const std::string& name);
/// Every supported operator name (for tests and error messages).
std::vector<std::string> supported_ops();

}  // namespace etkit_vulkan
