// init(): from payload bytes to a ready XNNPACK runtime.
#pragma once

#include <cstddef>

#include "delegate_state.h"
#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/result.h"

namespace etkit_xnnpack {

/// How a delegate's runtime is created (from the backend's options and the delegate's compile specs).
struct RuntimeOptions {
  size_t num_threads = 1;
  /// Compile spec "fp16_inference" = 1: XNN_FLAG_FORCE_FP16_INFERENCE when XNNPACK accepts it for this
  /// CPU and graph (fp16 weights and activations; on x86 fp16 storage with AVX512-FP16 or F16C
  /// kernels), else the fp32 runtime.
  bool fp16_inference = false;
  /// Pack weights through the process-wide cache (weights_cache.h): repeated loads and weights
  /// shared between methods/programs are packed and stored once. Off: a private cache per delegate.
  bool shared_weights_cache = true;
  /// Identifies the Method being loaded (its runtime allocator): delegates with the same key share one
  /// XNNPACK workspace, as they run one after another. Null: a private workspace.
  const void* workspace_key = nullptr;
};

/// Parses and verifies the payload, defines the XNNPACK subgraph (values, then nodes), joins the
/// shared weights cache (or creates a private one) and, when `num_threads` > 1, uses the process-wide pthreadpool of that many threads
/// (shared by all delegates), creates the runtime
/// and finalizes the cache. Takes ownership of `*processed` and frees it once the runtime exists,
/// unless a node reads a constant of the payload's own section at run time; etkit writes constants as
/// named data, so its payloads are freed (seed: a backend may free its processed data after init).
/// Likewise the named-data buffers of packed filters and biases are freed once packed (with a mapped
/// .pte their pages leave the process's RSS), and scales are copied, so a delegate keeps only the
/// constants XNNPACK reads while it runs.
/// Errors: those of parse_payload, define_values and define_nodes; Internal when xnn_initialize or
/// runtime creation fails (message names the xnn_status), MemoryAllocationFailed when XNNPACK asked for
/// more than the memory limit (bounded_allocator.h).
etkit::runtime::Result<DelegateState*> build_delegate(etkit::runtime::FreeableBuffer* processed,
                                                      const etkit::runtime::NamedDataMap* named_data_map,
                                                      const RuntimeOptions& options);

}  // namespace etkit_xnnpack
