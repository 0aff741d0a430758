// What XNNPACK's public API does not offer, from its internal structs: read-only views for mapping each
// profiled runtime operator back to the subgraph node (and so the payload XNode) it runs, and one switch
// (a runtime's per-operator clock reads). Implemented in xnn_internals.c against the pinned release's
// src/xnnpack/subgraph.h; a build without XNNPACK's sources (ETKIT_XNNPACK_INTERNALS=0) returns "unknown",
// the delegate labels events by name only and its runtimes always profile.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xnnpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Number of nodes `subgraph` holds so far, or SIZE_MAX when unknown. A payload XNode's define call
/// may add more than one node (XNNPACK inserts a clamp or a packing node), so the count is read around
/// each call.
size_t etkit_xnn_subgraph_num_nodes(xnn_subgraph_t subgraph);

/// Writes to `nodes[k]` the subgraph node index of the runtime's k-th profiled operator (the order of
/// xnn_get_runtime_profiling_info: nodes with an operator, in execution order) for k < `capacity`, and
/// returns how many operators there are, or SIZE_MAX when unknown.
size_t etkit_xnn_runtime_operator_nodes(xnn_runtime_t runtime, uint32_t* nodes, size_t capacity);

/// Turns the per-operator clock reads of a runtime created with XNN_FLAG_BASIC_PROFILING on or off (the
/// timestamps live in the runtime's operator data either way). Returns false, changing nothing, when
/// unknown (a build without XNNPACK's sources): the runtime then keeps profiling.
bool etkit_xnn_runtime_set_profiling(xnn_runtime_t runtime, bool enabled);

#ifdef __cplusplus
}
#endif
