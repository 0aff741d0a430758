// The delegate payload: a 30-byte header, the VkGraph flatbuffer, then a raw-bytes region for
// constants (ExecuTorch's Vulkan delegate layout; etkit_vulkan/serialization/payload.py writes it).
//
//   bytes  0..3   zero (so the magic sits where a flatbuffer's file identifier would)
//   bytes  4..7   "VH00"
//   bytes  8..9   header length, uint16 little-endian: 30
//   bytes 10..13  flatbuffer offset, uint32
//   bytes 14..17  flatbuffer size, uint32
//   bytes 18..21  raw-bytes offset, uint32
//   bytes 22..29  raw-bytes size, uint64
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "vulkan_graph_generated.h"

namespace etkit_vulkan {

struct Payload {
  const etkit_vulkan::fb::VkGraph* graph = nullptr;
  const uint8_t* raw = nullptr;  // the raw-bytes region
  uint64_t raw_size = 0;
};

/// Parses and verifies `size` bytes at `data` (flatbuffer verifier, identifier "VK00", every region in
/// bounds). False with `error` saying what is wrong.
bool parse_payload(const void* data, size_t size, Payload* out, std::string* error);

}  // namespace etkit_vulkan
