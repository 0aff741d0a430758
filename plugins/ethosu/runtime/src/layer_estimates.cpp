#include "etkit_ethosu/layer_estimates.h"

#include <cstdio>
#include <cstring>

namespace etkit_ethosu {
namespace {

uint32_t read_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

bool fail(std::string* why, const char* format, unsigned long long a, unsigned long long b = 0) {
  if (why != nullptr) {
    char text[160];
    std::snprintf(text, sizeof(text), format, a, b);
    *why = text;
  }
  return false;
}

constexpr size_t kHeader = 8;       // magic + count
constexpr size_t kLayerHeader = 10; // cycles + label size

}  // namespace

void layer_estimates_key(const uint8_t* cmd, size_t size, char key[kLayerEstimatesKeySize]) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ cmd[i]) * 0x100000001B3ull;
  std::snprintf(key, kLayerEstimatesKeySize, "etkit_ethosu.layers.%016llx", static_cast<unsigned long long>(h));
}

bool parse_layer_estimates(const uint8_t* data, size_t size, std::vector<LayerEstimate>* layers, std::string* why) {
  layers->clear();
  if (data == nullptr || size < kHeader || std::memcmp(data, "EUL1", 4) != 0) {
    return fail(why, "layer estimates: no EUL1 header in %llu bytes", size);
  }
  const uint32_t count = read_u32(data + 4);
  if (count > (size - kHeader) / (kLayerHeader + 1)) {
    return fail(why, "layer estimates: %llu layers cannot fit in %llu bytes", count, size);
  }
  layers->reserve(count);
  size_t at = kHeader;
  for (uint32_t k = 0; k < count; ++k) {
    if (size - at < kLayerHeader) return fail(why, "layer estimates: layer %llu is truncated at byte %llu", k, at);
    LayerEstimate layer;
    layer.cycles = static_cast<uint64_t>(read_u32(data + at)) | static_cast<uint64_t>(read_u32(data + at + 4)) << 32;
    const size_t label_size = static_cast<size_t>(data[at + 8]) | static_cast<size_t>(data[at + 9]) << 8;
    at += kLayerHeader;
    if (label_size == 0 || label_size > size - at || data[at + label_size - 1] != 0) {
      return fail(why, "layer estimates: the label of layer %llu (%llu bytes) does not fit or is not NUL-terminated",
                  k, label_size);
    }
    layer.label = reinterpret_cast<const char*>(data + at);
    at += label_size;
    layers->push_back(layer);
  }
  if (at != size) return fail(why, "layer estimates: %llu bytes after the last layer", size - at);
  return true;
}

}  // namespace etkit_ethosu
