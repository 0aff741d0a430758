// See xnn_internals.h. The opdata array of an XNNPACK runtime is indexed by subgraph node id (runtime.c
// creates node i's operators into opdata + i), and xnn_get_runtime_profiling_info reports one entry per
// opdata whose first operator object exists; both walk the same array, so the k-th entry here is the
// k-th profiled operator. The delegate checks the count against xnn_profile_info_num_operators and
// drops the mapping when they differ.
#include "xnn_internals.h"

#if ETKIT_XNNPACK_INTERNALS
#include "xnnpack/subgraph.h"

size_t etkit_xnn_subgraph_num_nodes(xnn_subgraph_t subgraph) {
  return subgraph == NULL ? SIZE_MAX : subgraph->num_nodes;
}

size_t etkit_xnn_runtime_operator_nodes(xnn_runtime_t runtime, uint32_t* nodes, size_t capacity) {
  if (runtime == NULL) return SIZE_MAX;
  size_t count = 0;
  for (size_t i = 0; i < runtime->num_ops; ++i) {
    if (runtime->opdata[i].operator_objects[0] == NULL) continue;
    if (count < capacity) nodes[count] = (uint32_t) i;
    ++count;
  }
  return count;
}

bool etkit_xnn_runtime_set_profiling(xnn_runtime_t runtime, bool enabled) {
  if (runtime == NULL) return false;
  runtime->profiling = enabled;
  return true;
}

#else

size_t etkit_xnn_subgraph_num_nodes(xnn_subgraph_t subgraph) {
  (void) subgraph;
  return SIZE_MAX;
}

size_t etkit_xnn_runtime_operator_nodes(xnn_runtime_t runtime, uint32_t* nodes, size_t capacity) {
  (void) runtime;
  (void) nodes;
  (void) capacity;
  return SIZE_MAX;
}

bool etkit_xnn_runtime_set_profiling(xnn_runtime_t runtime, bool enabled) {
  (void) runtime;
  (void) enabled;
  return false;
}

#endif
