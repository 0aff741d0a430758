// Reading the QNN delegate payload (schema/qnn_payload.fbs; layout documented in etkit_qnn/payload.py).
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/error.h"
#include "qnn_payload_generated.h"

namespace etkit_qnn {

/// The payload format version this delegate reads.
constexpr uint32_t kPayloadVersion = 1;
/// Most inputs or outputs one context may have, and most dims of one of them.
constexpr size_t kMaxTensors = 64;
constexpr size_t kMaxRank = 8;

/// Verifies `data` and returns its root in `*out`. Errors (DelegateInvalidCompatibility, with a message
/// through set_error): not a QNN payload (identifier), a flatbuffer that does not verify (truncated or
/// corrupt), another version, a missing or empty field, too many tensors, a non-positive dimension.
etkit::runtime::Error parse_payload(const void* data, size_t size, const fb::QnnPayload** out);

}  // namespace etkit_qnn
