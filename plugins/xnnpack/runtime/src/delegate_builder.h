// init(): from payload bytes to a ready XNNPACK runtime.
#pragma once

#include <cstddef>

#include "delegate_state.h"
#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/result.h"

namespace etkit_xnnpack {

/// Parses and verifies the payload, defines the XNNPACK subgraph (values, then nodes), creates a
/// weights cache and, when `num_threads` > 1, a pthreadpool of that many threads, creates the runtime
/// and finalizes the cache. Takes ownership of `*processed` (XNNPACK may point into it).
/// Errors: those of parse_payload, define_values and define_nodes; Internal when xnn_initialize or
/// runtime creation fails (message names the xnn_status).
etkit::runtime::Result<DelegateState*> build_delegate(etkit::runtime::FreeableBuffer* processed,
                                                      const etkit::runtime::NamedDataMap* named_data_map,
                                                      size_t num_threads);

}  // namespace etkit_xnnpack
