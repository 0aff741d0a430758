// execute(): bind the caller's tensors to the runtime's external values and run it.
#pragma once

#include "delegate_state.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/span.h"

namespace etkit_xnnpack {

/// Runs one delegate call. `args` are the delegate's inputs then outputs; the value with external id
/// k is bound to args[k] (ExecuTorch's XNNPACK convention: external ids are argument positions).
/// A 4-D tensor whose dim_order is channels-last (0, 2, 3, 1) is bound with NHWC dims. When an
/// input shape differs from the previous call, the inputs are reshaped (xnn_reshape_external_value),
/// the runtime is re-planned (xnn_reshape_runtime) and the output tensors are resized to the shapes
/// XNNPACK reports. Int64 outputs (argmax indices) are widened in place from XNNPACK's int32.
/// Never allocates.
/// Errors: InvalidArgument when an argument is missing, not a tensor, of the wrong dtype or rank, or not
/// contiguous/channels-last; the output tensor's resize error when it cannot hold the new shape;
/// Internal when XNNPACK fails (message names the xnn function and status).
etkit::runtime::Error execute_delegate(DelegateState& state, etkit::runtime::Span<etkit::runtime::EValue*> args);

}  // namespace etkit_xnnpack
