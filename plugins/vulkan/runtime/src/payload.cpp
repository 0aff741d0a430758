#include "payload.h"

#include <cstring>

namespace etkit_vulkan {

namespace {
uint64_t read_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

bool parse_payload(const void* data, size_t size, Payload* out, std::string* error) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  constexpr size_t kHeader = 30;
  if (bytes == nullptr || size < kHeader) {
    *error = "payload is " + std::to_string(size) + " bytes, shorter than the 30-byte VH00 header";
    return false;
  }
  if (std::memcmp(bytes + 4, "VH00", 4) != 0) {
    *error = "payload does not start with the VH00 header (not a Vulkan delegate payload, or corrupt)";
    return false;
  }
  const uint64_t header_len = read_le(bytes + 8, 2);
  const uint64_t fb_off = read_le(bytes + 10, 4), fb_size = read_le(bytes + 14, 4);
  const uint64_t raw_off = read_le(bytes + 18, 4), raw_size = read_le(bytes + 22, 8);
  if (header_len != kHeader) {
    *error = "VH00 header length is " + std::to_string(header_len) + ", expected 30";
    return false;
  }
  if (fb_off < kHeader || fb_size == 0 || fb_off + fb_size > size) {
    *error = "VH00 header puts the flatbuffer at [" + std::to_string(fb_off) + ", " +
             std::to_string(fb_off + fb_size) + ") of a " + std::to_string(size) + "-byte payload";
    return false;
  }
  if (raw_off < fb_off + fb_size || raw_size > size || raw_off > size - raw_size) {
    *error = "VH00 header puts the raw bytes at [" + std::to_string(raw_off) + ", +" + std::to_string(raw_size) +
             ") of a " + std::to_string(size) + "-byte payload";
    return false;
  }
  const uint8_t* fb = bytes + fb_off;
  if (!flatbuffers::BufferHasIdentifier(fb, etkit_vulkan::fb::VkGraphIdentifier())) {
    *error = "the graph flatbuffer lacks the VK00 identifier";
    return false;
  }
  flatbuffers::Verifier verifier(fb, fb_size);
  if (!etkit_vulkan::fb::VerifyVkGraphBuffer(verifier)) {
    *error = "the graph flatbuffer failed verification (truncated or corrupt)";
    return false;
  }
  out->graph = etkit_vulkan::fb::GetVkGraph(fb);
  out->raw = bytes + raw_off;
  out->raw_size = raw_size;
  return true;
}

}  // namespace etkit_vulkan
