// Reading the QNN delegate payload (schema/qnn_payload.fbs; layout documented in etkit_qnn/payload.py).
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/error.h"
#include "qnn_payload_generated.h"

namespace etkit_qnn {

/// The payload format version this delegate reads.
constexpr uint32_t kPayloadVersion = 3;
/// Most inputs or outputs one context may have, and most dims of one of them.
constexpr size_t kMaxTensors = 64;
constexpr size_t kMaxRank = 8;

/// An integer tensor type of the context's boundary: ONNX element type, bytes per element, integer range.
struct QuantizedType {
  int onnx;  // ONNX TensorProto.DataType: 2 uint8, 3 int8, 4 uint16, 5 int16
  size_t size;
  int32_t qmin;
  int32_t qmax;
};

/// The type of a quantization dtype ("uint8", "int8", "uint16", "int16"); false for another string.
bool quantized_type(const flatbuffers::String* dtype, QuantizedType* out);

/// CRC-32 of `size` bytes as zlib.crc32 computes it (what context_crc32 holds).
uint32_t crc32(const uint8_t* data, size_t size);

/// Verifies `data` and returns its root in `*out`. Errors (DelegateInvalidCompatibility, with a message
/// through set_error): not a QNN payload (identifier), a flatbuffer that does not verify (truncated or
/// corrupt), another version, a missing or empty field, too many tensors, a non-positive dimension, a
/// quantization with an unknown dtype, a scale that is not a positive finite number or a zero point outside
/// the dtype's range, a context binary whose CRC-32 differs from context_crc32 (damaged bytes never reach
/// the QNN runtime).
etkit::runtime::Error parse_payload(const void* data, size_t size, const fb::QnnPayload** out);

}  // namespace etkit_qnn
