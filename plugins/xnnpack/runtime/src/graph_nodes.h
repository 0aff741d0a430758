// Defining the payload's XNodes as XNNPACK subgraph nodes: one small function per node family and a
// table from the XNodeUnion member to its function (graph_nodes.cpp).
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include <xnnpack.h>

#include "etkit/runtime/error.h"
#include "graph_values.h"
#include "xnnpack_graph_generated.h"

namespace etkit_xnnpack {

/// Defines every XNode of `graph` in order. Value ids in the nodes are serialized ids, mapped through
/// `values`. Errors (message names the node index, its XNodeUnion type and debug_handle):
/// InvalidProgram when a node refers to an undefined value, has inconsistent attributes or XNNPACK
/// rejects it (the xnn_status is named); NotImplemented for a union member this delegate has no
/// definition for. `read_at_run_time` receives the serialized ids of the static values a node reads
/// when the runtime runs (every static operand except the filters and biases XNNPACK packs while the
/// runtime is created: fully connected, convolution, depthwise and transposed convolution).
/// `xnode_of_node` receives, for each XNNPACK subgraph node, the index of the XNode that defined it
/// (left empty when XNNPACK's node count cannot be read, see xnn_internals.h).
etkit::runtime::Error define_nodes(xnn_subgraph_t subgraph, const etkit_xnnpack::fb::XNNGraph* graph,
                                   const ValueTable& values, std::unordered_set<uint32_t>* read_at_run_time,
                                   std::vector<uint32_t>* xnode_of_node);

}  // namespace etkit_xnnpack
