// The allocator XNNPACK is initialized with: every heap block it asks for is bounded by the runtime's
// memory limit (etkit::runtime::effective_memory_limit).
//
// The payload's declared tensors are checked against that limit when they are defined, but XNNPACK
// derives the shapes of a graph's internal values itself while it reshapes (a fully-connected output
// from its input and filter, a broadcast from both operands) and sizes its workspace from them. A
// crafted payload made it ask for 48 GB (fuzz regression `workspace-claims-48GB`). With this allocator
// such a request fails inside XNNPACK, which returns xnn_status_out_of_memory, and the delegate reports
// MemoryAllocationFailed with the size asked for.
#pragma once

#include <cstddef>

#include <xnnpack.h>

namespace etkit_xnnpack {

/// xnn_initialize with the bounded allocator. XNNPACK keeps the allocator of its first initialization,
/// so every call site in the delegate must initialize through this function.
xnn_status initialize_xnnpack();

/// Bytes of the last request the allocator refused on this thread (0: none); reading clears it.
size_t take_refused_allocation();

}  // namespace etkit_xnnpack
