// execute(): bind the caller's tensors to the runtime's external values and run it.
#pragma once

#include "delegate_state.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/span.h"

namespace etkit_xnnpack {

/// Runs one delegate call. `args` are the delegate's inputs then outputs; the value with external id
/// k is bound to args[k] (ExecuTorch's XNNPACK convention: external ids are argument positions; an
/// argument no value is bound to, such as a size the program passes along, is ignored).
/// A 4-D tensor whose dim_order is channels-last (0, 2, 3, 1) is bound with NHWC dims; a 0-dim tensor
/// is bound to a value the payload declares as [1]. Dynamic shapes: the payload's dims of an input
/// are its upper bounds. When an input shape differs from the previous call (always on the first),
/// it is checked against those bounds, the inputs are reshaped (xnn_reshape_external_value), the
/// runtime is re-planned (xnn_reshape_runtime) and the output tensors are resized to the shapes
/// XNNPACK reports; a call with the same shapes as the previous one goes straight to setup and
/// invoke. Int64 outputs (argmax indices) are widened in place from XNNPACK's int32. Never allocates.
/// Errors: InvalidArgument when an argument is missing, not a tensor, of the wrong dtype or rank, not
/// contiguous/channels-last, or larger than the payload's bounds (message names both shapes); the
/// output tensor's resize error when it cannot hold the new shape; Internal when XNNPACK fails
/// (message names the xnn function and status).
/// With a `tracer` (the method is profiled), one event per XNNPACK operator is logged after the run
/// (XNNPACK's basic profiling: its operator names and microsecond times).
etkit::runtime::Error execute_delegate(DelegateState& state, etkit::runtime::Span<etkit::runtime::EValue*> args,
                                      etkit::runtime::EventTracer* tracer = nullptr);

}  // namespace etkit_xnnpack
