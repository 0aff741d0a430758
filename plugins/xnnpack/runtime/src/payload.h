// Locating the parts of an XNNPACK delegate payload (the bytes XnnpackBackend.preprocess wrote).
//
// Two layouts are accepted, as ExecuTorch's XNNPACK runtime accepts them
// (executorch/backends/xnnpack/serialization/xnnpack_graph_serialize.py):
//   * "XH00" header: bytes 0..4 padding, 4..8 magic "XH00", 8..10 header length (u16),
//     10..14 flatbuffer offset (u32), 14..18 flatbuffer size (u32), 18..22 constant-data offset (u32),
//     22..30 constant-data size (u64), all little-endian; the XNNGraph flatbuffer and the constant-data
//     section follow at those offsets.
//   * a bare XNNGraph flatbuffer (identifier "XN01", or ExecuTorch's older "XN00", at bytes 4..8) with
//     no constant-data section.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/result.h"
#include "xnnpack_graph_generated.h"

namespace etkit_xnnpack {

/// Size in bytes of the XH00 header ExecuTorch writes (its XNNHeader.EXPECTED_LENGTH).
constexpr size_t kXnnHeaderLength = 30;

struct PayloadView {
  const etkit_xnnpack::fb::XNNGraph* graph = nullptr;  // verified flatbuffer root
  const uint8_t* constant_data = nullptr;              // null when the payload has no XH00 header
  uint64_t constant_data_size = 0;
  bool has_header = false;
};

/// Parses the header (if any), checks every offset against `size`, checks the flatbuffer identifier
/// and runs the flatbuffers Verifier over the graph.
/// Errors: DelegateInvalidCompatibility with a message naming the offending field and value.
etkit::runtime::Result<PayloadView> parse_payload(const void* data, size_t size);

}  // namespace etkit_xnnpack
